//! Property tests: `derive` never panics, on any token stream.
//!
//! Inputs start from a grammar of valid declarations (structs of every shape,
//! generics, struct- and field-level `#[kv(...)]`, children, options), which
//! must derive without a single `compile_error!`. They are then mutated, first
//! by entry (drop, duplicate, swap values, bare keys, unknown keys, junk values)
//! and then by token (delete, duplicate, swap, replace, insert, wrap in or
//! unwrap groups, truncate), and `derive` must still return tokens: either both
//! impls, or `compile_error!`s.
//!
//! `PROPTEST_CASES=N` runs N cases per test (default: about 2,000 in all);
//! `scripts/fuzz-derive.sh` runs a million or more in release mode.

use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use proc_macro2::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use crate::derive;

// ---------------------------------------------------------------------------
// The valid grammar.

const TYPE_NAMES: &[&str] = &["S", "Model", "Talker", "r#Raw", "Größe"];
const GENERICS: &[(&str, &str)] = &[
    ("", ""),
    ("<T>", ""),
    ("<'a>", ""),
    ("<T: Clone>", "where T: Default"),
    (
        "<'a, T: Clone + 'a, const N: usize>",
        "where T: Default, [T; N]: Sized",
    ),
    ("<T = u8, const M: u64 = 4>", ""),
];
const FIELD_TYPES: &[&str] = &[
    "u8",
    "Option<()>",
    "&'static [u8]",
    "Vec<Vec<u32>>",
    "[u8; 4]",
    "fn() -> u8",
    "<T as Tr>::Out",
    "kv_core::DType",
];
const OTHER_ATTRS: &[&str] = &[
    "#[doc = \"a doc\"]",
    "/// a doc comment",
    "#[allow(dead_code)]",
    "#[serde(skip, rename = \"x\")]",
    "#[cfg_attr(test, kv2(name = 1))]",
];
const VISIBILITIES: &[&str] = &["", "pub", "pub(crate)", "pub(in crate::a)"];
const CONST_COUNTS: &[&str] = &[
    "N",
    "LAYERS",
    "SLIDING_WINDOW - 1",
    "1024 / 16",
    "2 - 1",
    "-1 + 2",
    "Self::LAYERS",
    "<T as Tr>::N",
    "crate::consts::HEADS",
    "u8::MAX as u64",
    "{ 2 * 3 }",
    "(4)",
    "[1, 2].len()",
    "if true { 1 } else { 2 }",
];
const AFTER_LOAD_COUNTS: &[&str] = &[
    "self.n",
    "self.config.num_hidden_layers",
    "self.window.len()",
    "*&self.n",
    "self.a.b as u64",
    "(self.x)",
    "{ self.y }",
    "self.config.get(\"k\").unwrap_or(1)",
];
const DTYPE_NAMES: &[&str] = &["f64", "f32", "f16", "bf16", "f8e4m3", "f8e5m2", "i8", "u8"];
const DTYPE_EXPRESSIONS: &[&str] = &[
    "DType::BF16",
    "kv_core::DType::F32",
    "MY_DTYPE",
    "Bf16",
    "self.dtype",
    "self.dtype()",
    "self.config.dtype.into()",
];
const GEOMETRIES: &[&str] = &[
    "GEOMETRY",
    "Self::GEOMETRY",
    "kv_core::Geometry::new(1, 2, 3, kv_core::DType::F32)",
    "self.geometry",
    "self.config.geometry()",
    "kv_core::Geometry::from_config(&self.config)",
];
const SCOPES: &[&str] = &["invocation", "request", "session", "model"];
const GATES: &[&str] = &["async_chunk", "streaming", "f0", "r#type", "é", "_private"];
const CRATE_PATHS: &[&str] = &["kv_core", "::kv_core", "crate::kv", "my_kv", " kv_core "];
/// Characters for texts: whitespace, quotes, escapes, non-ASCII, NUL.
const TEXT_CHARS: &[char] = &[
    'a', 'Z', '0', ' ', '\t', '\n', '"', '\\', '\'', 'é', '😀', '\u{0}', '#', '{', '}', '/', '*',
    ':', '-', '=', ',',
];
const NON_BLANK: &[char] = &['a', 'x', '7', '"', 'é', '😀', '#'];
const BLANKS: &[char] = &[' ', '\t', '\n', '\u{a0}'];

/// A non-blank string literal, spelled plainly or raw.
fn text() -> impl Strategy<Value = String> {
    (
        vec(select(BLANKS), 0..3),
        select(NON_BLANK),
        vec(select(TEXT_CHARS), 0..12),
        0..3u8,
    )
        .prop_map(|(before, core, after, spelling)| {
            let mut text: String = before.into_iter().collect();
            text.push(core);
            text.extend(after);
            spell_string(&text, spelling)
        })
}

fn spell_string(text: &str, spelling: u8) -> String {
    let raw_ok = !text.contains('\u{0}');
    match spelling {
        1 if raw_ok && !text.contains('"') => format!("r\"{text}\""),
        2 if raw_ok && !text.contains("\"#") => format!("r#\"{text}\"#"),
        _ => Literal::string(text).to_string(),
    }
}

/// A positive integer literal fitting u64, in any of Rust's spellings.
fn literal_count() -> impl Strategy<Value = String> {
    let value = prop_oneof![1u64..100, 1u64..=u64::MAX, Just(u64::MAX)];
    (value, 0..8u8).prop_map(|(n, spelling)| match spelling {
        1 => with_underscores(&n.to_string()),
        2 => format!("0x{n:x}"),
        3 => format!("0x{n:X}"),
        4 => format!("0o{n:o}"),
        5 => format!("0b{n:b}"),
        6 => format!("{n}u64"),
        7 => format!("{n}_usize"),
        _ => n.to_string(),
    })
}

fn with_underscores(digits: &str) -> String {
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('_');
        }
        out.push(c);
    }
    out
}

/// A count: a literal, a const expression, or an expression on `self`.
fn count() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => literal_count(),
        2 => select(CONST_COUNTS).prop_map(String::from),
        2 => select(AFTER_LOAD_COUNTS).prop_map(String::from),
    ]
}

fn because(function: &'static str) -> impl Strategy<Value = String> {
    (count(), text(), any::<bool>()).prop_map(move |(count, reason, trailing)| {
        let comma = if trailing { "," } else { "" };
        format!("{function}({count}, because = {reason}{comma})")
    })
}

fn dtype() -> impl Strategy<Value = String> {
    prop_oneof![
        select(DTYPE_NAMES).prop_map(String::from),
        select(DTYPE_EXPRESSIONS).prop_map(String::from),
    ]
}

type Entries = Vec<(String, Option<String>)>;

fn entry(key: &str, value: String) -> (String, Option<String>) {
    (key.to_string(), Some(value))
}

/// The geometry, whole or as parts.
fn geometry_entries() -> impl Strategy<Value = Entries> {
    prop_oneof![
        select(GEOMETRIES).prop_map(|g| vec![entry("geometry", g.to_string())]),
        (
            count(),
            count(),
            count(),
            proptest::option::of(count()),
            dtype()
        )
            .prop_map(|(layers, kv_heads, head_dim, v_head_dim, dtype)| {
                let mut entries = vec![
                    entry("layers", layers),
                    entry("kv_heads", kv_heads),
                    entry("head_dim", head_dim),
                    entry("dtype", dtype),
                ];
                if let Some(v) = v_head_dim {
                    entries.push(entry("v_head_dim", v));
                }
                entries
            }),
    ]
}

/// A declaration's entries other than `name`, in a random order.
fn declaration_entries() -> impl Strategy<Value = Entries> {
    (
        text(),
        geometry_entries(),
        because("bounded"),
        select(SCOPES),
        prop_oneof![Just("max_num_seqs".to_string()), because("fixed")],
        proptest::option::of(select(GATES)),
        proptest::option::of(text()),
        proptest::option::of(text()),
    )
        .prop_map(
            |(cache, geometry, positions, scope, rows, gate, assumes, note)| {
                let mut entries = vec![entry("cache", cache)];
                entries.extend(geometry);
                entries.push(entry("positions", positions));
                entries.push(entry("scope", scope.to_string()));
                entries.push(entry("rows", rows));
                if let Some(gate) = gate {
                    entries.push(entry("only_when", Literal::string(gate).to_string()));
                }
                if let Some(assumes) = assumes {
                    entries.push(entry("assumes", assumes));
                }
                if let Some(note) = note {
                    entries.push(entry("note", note));
                }
                entries
            },
        )
        .prop_flat_map(|entries| Just(entries).prop_shuffle())
}

#[derive(Clone, Debug)]
struct DeclModel {
    entries: Entries,
    /// Whether to give `name` where it is optional (on a named field).
    named: bool,
    name_suffix: String,
    name_at: Index,
    trailing_comma: bool,
}

fn declaration() -> impl Strategy<Value = DeclModel> {
    (
        declaration_entries(),
        any::<bool>(),
        vec(select(TEXT_CHARS), 0..6),
        any::<Index>(),
        any::<bool>(),
    )
        .prop_map(
            |(entries, named, suffix, name_at, trailing_comma)| DeclModel {
                entries,
                named,
                name_suffix: suffix.into_iter().collect(),
                name_at,
                trailing_comma,
            },
        )
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Named,
    Tuple,
    Unit,
    Enum,
    Union,
}

#[derive(Clone, Debug)]
struct FieldModel {
    raw: bool,
    vis: &'static str,
    ty: &'static str,
    child: bool,
    decls: Vec<DeclModel>,
    other: Vec<&'static str>,
}

fn field() -> impl Strategy<Value = FieldModel> {
    (
        any::<bool>(),
        select(VISIBILITIES),
        select(FIELD_TYPES),
        prop::bool::weighted(0.2),
        vec(declaration(), 0..3),
        vec(select(OTHER_ATTRS), 0..2),
    )
        .prop_map(|(raw, vis, ty, child, decls, other)| FieldModel {
            raw,
            vis,
            ty,
            child,
            decls,
            other,
        })
}

#[derive(Clone, Debug)]
struct Model {
    kind: Kind,
    type_name: &'static str,
    generics: (&'static str, &'static str),
    krate: Option<&'static str>,
    transparent: bool,
    /// Options in one attribute, or `crate` and `transparent` apart.
    options_apart: bool,
    options_at: Index,
    decls: Vec<DeclModel>,
    fields: Vec<FieldModel>,
    other: Vec<&'static str>,
}

fn model_of(kinds: &'static [Kind]) -> impl Strategy<Value = Model> {
    (
        select(kinds),
        select(TYPE_NAMES),
        select(GENERICS),
        proptest::option::of(select(CRATE_PATHS)),
        any::<bool>(),
        any::<bool>(),
        any::<Index>(),
        vec(declaration(), 0..4),
        vec(field(), 0..5),
        vec(select(OTHER_ATTRS), 0..2),
    )
        .prop_map(
            |(
                kind,
                type_name,
                generics,
                krate,
                transparent,
                options_apart,
                options_at,
                decls,
                fields,
                other,
            )| {
                let fields = if kind == Kind::Unit {
                    Vec::new()
                } else {
                    fields
                };
                // A transparent wrapper needs a child to forward to.
                let transparent = transparent && fields.iter().any(|f| f.child);
                Model {
                    kind,
                    type_name,
                    generics,
                    krate,
                    transparent,
                    options_apart,
                    options_at,
                    decls,
                    fields,
                    other,
                }
            },
        )
}

const STRUCTS: &[Kind] = &[Kind::Named, Kind::Tuple, Kind::Unit];
const ALL_KINDS: &[Kind] = &[
    Kind::Named,
    Kind::Named,
    Kind::Tuple,
    Kind::Unit,
    Kind::Enum,
    Kind::Union,
];

impl Model {
    fn declaration_count(&self) -> usize {
        self.decls.len() + self.fields.iter().map(|f| f.decls.len()).sum::<usize>()
    }

    fn child_count(&self) -> usize {
        self.fields.iter().filter(|f| f.child).count()
    }

    /// The source text. Every declaration gets a unique name `d{i}:...` where
    /// one is required or chosen; a field's first unnamed one takes its name.
    fn render(&self) -> String {
        let mut next_name = 0;
        let mut name = |suffix: &str| {
            next_name += 1;
            Literal::string(&format!("d{next_name}:{suffix}")).to_string()
        };
        let mut out = String::new();
        let mut struct_attrs: Vec<String> = Vec::new();
        for decl in &self.decls {
            struct_attrs.push(render_decl(decl, Some(name(&decl.name_suffix))));
        }
        let mut options = Vec::new();
        if let Some(krate) = self.krate {
            options.push(format!("crate = {}", Literal::string(krate)));
        }
        if self.transparent {
            options.push("transparent".to_string());
        }
        let option_attrs = if options.is_empty() {
            Vec::new()
        } else if self.options_apart {
            options.iter().map(|o| format!("#[kv({o})]")).collect()
        } else {
            vec![format!("#[kv({})]", options.join(", "))]
        };
        let at = self.options_at.index(struct_attrs.len() + 1);
        for (i, attr) in option_attrs.into_iter().enumerate() {
            struct_attrs.insert(at + i, attr);
        }
        struct_attrs.extend(self.other.iter().map(|a| a.to_string()));
        for attr in &struct_attrs {
            out.push_str(attr);
            out.push('\n');
        }
        let (params, where_clause) = self.generics;
        let keyword = match self.kind {
            Kind::Enum => "enum",
            Kind::Union => "union",
            _ => "struct",
        };
        write!(out, "pub {keyword} {}{params}", self.type_name).unwrap();
        let mut fields = Vec::new();
        for (index, f) in self.fields.iter().enumerate() {
            let mut text = String::new();
            for other in &f.other {
                writeln!(text, "{other}").unwrap();
            }
            if f.child {
                text.push_str("#[kv(child)] ");
            }
            let tuple = self.kind == Kind::Tuple;
            for (i, decl) in f.decls.iter().enumerate() {
                let named = tuple || i > 0 || decl.named;
                let given = named.then(|| name(&decl.name_suffix));
                text.push_str(&render_decl(decl, given));
                text.push('\n');
            }
            let raw = if f.raw { "r#" } else { "" };
            match self.kind {
                Kind::Tuple => write!(text, "{} {}", f.vis, f.ty).unwrap(),
                Kind::Enum => write!(text, "V{index} {{ {raw}f{index}: {} }}", f.ty).unwrap(),
                _ => write!(text, "{} {raw}f{index}: {}", f.vis, f.ty).unwrap(),
            }
            fields.push(text);
        }
        let fields = fields.join(",\n");
        match self.kind {
            Kind::Tuple => write!(out, "({fields}) {where_clause};").unwrap(),
            Kind::Unit => write!(out, " {where_clause};").unwrap(),
            _ => write!(out, " {where_clause} {{\n{fields}\n}}").unwrap(),
        }
        out
    }
}

fn render_decl(decl: &DeclModel, name: Option<String>) -> String {
    let mut entries: Vec<String> = decl
        .entries
        .iter()
        .map(|(key, value)| match value {
            Some(value) => format!("{key} = {value}"),
            None => key.clone(),
        })
        .collect();
    if let Some(name) = name {
        let at = decl.name_at.index(entries.len() + 1);
        entries.insert(at, format!("name = {name}"));
    }
    let comma = if decl.trailing_comma && !entries.is_empty() {
        ","
    } else {
        ""
    };
    format!("#[kv({}{comma})]", entries.join(", "))
}

// ---------------------------------------------------------------------------
// Mutations by entry.

/// Every key the derive knows, plus near misses and names that cannot be keys.
fn keys() -> Vec<&'static str> {
    let known = crate::ast::DECLARATION_KEYS.iter().copied();
    let others = [
        "child",
        "transparent",
        "crate",
        "because",
        "rwos",
        "kv_head",
        "Layers",
        "r#name",
        "self",
        "_",
        "é",
    ];
    known.chain(others).collect()
}

/// Values that are wrong for some or every key.
const JUNK_VALUES: &[&str] = &[
    "",
    "0",
    "-1",
    "- 1",
    "-0",
    "99999999999999999999999",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "1.5",
    "1e10",
    "1f32",
    "0.0",
    "1u8",
    "0x0",
    "0b0",
    "\"\"",
    "\"  \\t\\n \"",
    "\" async_chunk \"",
    "\"/* c */ async_chunk\"",
    "\"async_chunk // c\"",
    "\"r#type\"",
    "\"self\"",
    "\"Self\"",
    "\"crate\"",
    "\"_\"",
    "\"1abc\"",
    "\"a b\"",
    "\"a::b\"",
    "\"::\"",
    "\"kv_core::\"",
    "\"x\"suffix",
    "b\"x\"",
    "'c'",
    "c\"x\"",
    "true",
    "()",
    "[]",
    "{}",
    "((()))",
    "(1)",
    "= =",
    ":",
    ";",
    "::",
    "-",
    "bounded",
    "bounded()",
    "bounded(,)",
    "bounded(0)",
    "bounded(1)",
    "bounded(1,)",
    "bounded(, because = \"x\")",
    "bounded(1, because)",
    "bounded(1, because = )",
    "bounded(1, because = \"\")",
    "bounded(1, because = 3)",
    "bounded(1, because = \"x\", because = \"y\")",
    "bounded(1, becuase = \"x\")",
    "bounded(1 because = \"x\")",
    "bounded(1,, because = \"x\")",
    "bounded[1, because = \"x\"]",
    "bounded{1, because = \"x\"}",
    "bounded(1, because = \"x\") extra",
    "bounded(-5, because = \"x\")",
    "bounded(99999999999999999999999, because = \"x\")",
    "bounded(1.0, because = \"x\")",
    "bounded(\"1\", because = \"x\")",
    "bounded(self, because = \"x\")",
    "bounded(1, 2, because = \"x\")",
    "bounded(1, because = \"x\" \"y\")",
    "fixed(0, because = \"x\")",
    "fixed(-1, because = \"x\")",
    "fixed(1)",
    "fixed",
    "max_num_seqs()",
    "max_num_seqs + 1",
    "max_nm_seqs",
    "Max_Num_Seqs",
    "request session",
    "requets",
    "Request",
    "bf61",
    "BF16",
    "f32 f16",
    "r#f32",
    "self",
    "Self",
    "super",
    "crate",
    "self.",
    "self..x",
    "child",
    "'a",
    "#",
    "#[kv]",
    "=",
];

#[derive(Clone, Debug)]
enum EntryOp {
    Drop(Index),
    Duplicate(Index),
    SwapValues(Index, Index),
    Junk(Index, &'static str),
    Bare(Index),
    RenameKey(Index, &'static str),
    Add(&'static str, &'static str),
    Move(Index, Index),
}

fn entry_op() -> impl Strategy<Value = (Index, EntryOp)> {
    let op = prop_oneof![
        any::<Index>().prop_map(EntryOp::Drop),
        any::<Index>().prop_map(EntryOp::Duplicate),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| EntryOp::SwapValues(a, b)),
        (any::<Index>(), select(JUNK_VALUES)).prop_map(|(a, v)| EntryOp::Junk(a, v)),
        any::<Index>().prop_map(EntryOp::Bare),
        (any::<Index>(), select(keys())).prop_map(|(a, k)| EntryOp::RenameKey(a, k)),
        (select(keys()), select(JUNK_VALUES)).prop_map(|(k, v)| EntryOp::Add(k, v)),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| EntryOp::Move(a, b)),
    ];
    (any::<Index>(), op)
}

fn apply_entry_op(model: &mut Model, (target, op): &(Index, EntryOp)) {
    let mut decls: Vec<&mut DeclModel> = model.decls.iter_mut().collect();
    for f in &mut model.fields {
        decls.extend(f.decls.iter_mut());
    }
    if decls.is_empty() {
        return;
    }
    let at = target.index(decls.len());
    let entries = &mut decls[at].entries;
    let len = entries.len();
    let pick = |i: &Index| i.index(len.max(1));
    match op {
        EntryOp::Add(key, value) => entries.push((key.to_string(), Some(value.to_string()))),
        _ if len == 0 => {}
        EntryOp::Drop(i) => {
            entries.remove(pick(i));
        }
        EntryOp::Duplicate(i) => {
            let e = entries[pick(i)].clone();
            entries.insert(pick(i), e);
        }
        EntryOp::SwapValues(a, b) => {
            let (a, b) = (pick(a), pick(b));
            let value = entries[a].1.clone();
            entries[a].1 = entries[b].1.clone();
            entries[b].1 = value;
        }
        EntryOp::Junk(i, value) => entries[pick(i)].1 = Some(value.to_string()),
        EntryOp::Bare(i) => entries[pick(i)].1 = None,
        EntryOp::RenameKey(i, key) => entries[pick(i)].0 = key.to_string(),
        EntryOp::Move(a, b) => {
            let e = entries.remove(pick(a));
            let to = b.index(entries.len() + 1);
            entries.insert(to, e);
        }
    }
}

// ---------------------------------------------------------------------------
// Mutations by token.

/// A token to insert or replace with: strange literals (some that lexing
/// alone cannot make, like a negative literal), stray punctuation, keywords,
/// empty, nested and invisible groups.
#[derive(Clone, Copy, Debug)]
enum Tok {
    Ident(&'static str),
    RawIdent(&'static str),
    Lit(&'static str),
    Negative(i64),
    NegativeFloat,
    Punct(char, bool),
    Group(Delimiter, &'static str),
}

const TOKS: &[Tok] = &[
    Tok::Ident("name"),
    Tok::Ident("rows"),
    Tok::Ident("positions"),
    Tok::Ident("bounded"),
    Tok::Ident("fixed"),
    Tok::Ident("because"),
    Tok::Ident("max_num_seqs"),
    Tok::Ident("child"),
    Tok::Ident("transparent"),
    Tok::Ident("crate"),
    Tok::Ident("kv"),
    Tok::Ident("bf16"),
    Tok::Ident("request"),
    Tok::Ident("self"),
    Tok::Ident("Self"),
    Tok::Ident("super"),
    Tok::Ident("_"),
    Tok::Ident("struct"),
    Tok::Ident("enum"),
    Tok::Ident("union"),
    Tok::Ident("where"),
    Tok::Ident("zzz"),
    Tok::Ident("é"),
    Tok::RawIdent("type"),
    Tok::RawIdent("name"),
    Tok::Lit("0"),
    Tok::Lit("1"),
    Tok::Lit("71"),
    Tok::Lit("18446744073709551615"),
    Tok::Lit("18446744073709551616"),
    Tok::Lit("99999999999999999999999"),
    Tok::Lit("340282366920938463463374607431768211456"),
    Tok::Lit("0u8"),
    Tok::Lit("1i128"),
    Tok::Lit("1foo"),
    Tok::Lit("0x_1"),
    Tok::Lit("1.5"),
    Tok::Lit("1e10"),
    Tok::Lit("1e400"),
    Tok::Lit("1f32"),
    Tok::Lit("\"\""),
    Tok::Lit("\" \\t \""),
    Tok::Lit("\"async_chunk\""),
    Tok::Lit("\" async_chunk \""),
    Tok::Lit("\"r#type\""),
    Tok::Lit("\"x\"suffix"),
    Tok::Lit("r#\"raw\"#"),
    Tok::Lit("b\"x\""),
    Tok::Lit("b'x'"),
    Tok::Lit("'c'"),
    Tok::Lit("c\"x\""),
    Tok::Negative(-1),
    Tok::Negative(-5),
    Tok::Negative(i64::MIN),
    Tok::NegativeFloat,
    Tok::Punct('=', false),
    Tok::Punct(',', false),
    Tok::Punct(':', false),
    Tok::Punct(':', true),
    Tok::Punct(';', false),
    Tok::Punct('-', false),
    Tok::Punct('#', false),
    Tok::Punct('!', false),
    Tok::Punct('.', false),
    Tok::Punct('&', false),
    Tok::Punct('<', false),
    Tok::Punct('>', false),
    Tok::Punct('\'', true),
    Tok::Punct('$', false),
    Tok::Group(Delimiter::Parenthesis, ""),
    Tok::Group(Delimiter::Bracket, ""),
    Tok::Group(Delimiter::Brace, ""),
    Tok::Group(Delimiter::None, ""),
    Tok::Group(Delimiter::Parenthesis, "(())"),
    Tok::Group(Delimiter::Parenthesis, "1, because = \"x\""),
    Tok::Group(Delimiter::Bracket, "kv(child)"),
    Tok::Group(Delimiter::None, "5"),
    Tok::Group(Delimiter::None, "0"),
    Tok::Group(Delimiter::None, "- 5"),
    Tok::Group(Delimiter::None, "self"),
    Tok::Group(Delimiter::None, "bf16"),
    Tok::Group(Delimiter::None, "\"x\""),
];

impl Tok {
    fn tree(self) -> TokenTree {
        match self {
            Tok::Ident(name) => Ident::new(name, Span::call_site()).into(),
            Tok::RawIdent(name) => Ident::new_raw(name, Span::call_site()).into(),
            Tok::Lit(text) => Literal::from_str(text)
                .expect("palette literals lex")
                .into(),
            Tok::Negative(n) => Literal::i64_unsuffixed(n).into(),
            Tok::NegativeFloat => Literal::f64_unsuffixed(-0.5).into(),
            Tok::Punct(c, joint) => {
                let spacing = if joint {
                    Spacing::Joint
                } else {
                    Spacing::Alone
                };
                Punct::new(c, spacing).into()
            }
            Tok::Group(delimiter, text) => {
                let inner = TokenStream::from_str(text).expect("palette groups lex");
                Group::new(delimiter, inner).into()
            }
        }
    }
}

const DELIMITERS: &[Delimiter] = &[
    Delimiter::Parenthesis,
    Delimiter::Bracket,
    Delimiter::Brace,
    Delimiter::None,
];

#[derive(Clone, Debug)]
enum TokenOp {
    Delete,
    Duplicate,
    Swap,
    Replace(Tok),
    Insert(Tok),
    Wrap(Delimiter, usize),
    Unwrap,
    Move(Index),
    Truncate,
    Empty,
}

/// An operation at a position: `group` picks one token sequence (the top
/// level or a group's contents), `at` a position in it.
#[derive(Clone, Debug)]
struct TokenMutation {
    group: Index,
    at: Index,
    op: TokenOp,
}

fn token_mutation() -> impl Strategy<Value = TokenMutation> {
    let op = prop_oneof![
        3 => Just(TokenOp::Delete),
        2 => Just(TokenOp::Duplicate),
        2 => Just(TokenOp::Swap),
        4 => select(TOKS).prop_map(TokenOp::Replace),
        4 => select(TOKS).prop_map(TokenOp::Insert),
        1 => (select(DELIMITERS), 0..4usize).prop_map(|(d, n)| TokenOp::Wrap(d, n)),
        1 => Just(TokenOp::Unwrap),
        1 => any::<Index>().prop_map(TokenOp::Move),
        1 => Just(TokenOp::Truncate),
        1 => Just(TokenOp::Empty),
    ];
    (any::<Index>(), any::<Index>(), op).prop_map(|(group, at, op)| TokenMutation { group, at, op })
}

/// A token tree whose groups can be edited in place.
enum Node {
    Leaf(TokenTree),
    Group(Delimiter, Vec<Node>),
}

fn nodes(tokens: TokenStream) -> Vec<Node> {
    tokens
        .into_iter()
        .map(|tree| match tree {
            TokenTree::Group(g) => Node::Group(g.delimiter(), nodes(g.stream())),
            leaf => Node::Leaf(leaf),
        })
        .collect()
}

fn tokens(nodes: &[Node]) -> TokenStream {
    nodes
        .iter()
        .map(|node| match node {
            Node::Leaf(tree) => tree.clone(),
            Node::Group(d, inner) => Group::new(*d, tokens(inner)).into(),
        })
        .collect()
}

/// Paths (child indices) to every sequence: the top level and each group.
fn sequences(nodes: &[Node], path: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
    out.push(path.clone());
    for (i, node) in nodes.iter().enumerate() {
        if let Node::Group(_, inner) = node {
            path.push(i);
            sequences(inner, path, out);
            path.pop();
        }
    }
}

fn sequence_at<'a>(mut nodes: &'a mut Vec<Node>, path: &[usize]) -> &'a mut Vec<Node> {
    for &i in path {
        nodes = match &mut nodes[i] {
            Node::Group(_, inner) => inner,
            Node::Leaf(_) => unreachable!("paths lead to groups"),
        };
    }
    nodes
}

fn clone_node(node: &Node) -> Node {
    match node {
        Node::Leaf(tree) => Node::Leaf(tree.clone()),
        Node::Group(d, inner) => Node::Group(*d, inner.iter().map(clone_node).collect()),
    }
}

fn apply_token_mutation(root: &mut Vec<Node>, mutation: &TokenMutation) {
    let mut paths = Vec::new();
    sequences(root, &mut Vec::new(), &mut paths);
    let path = &paths[mutation.group.index(paths.len())];
    let seq = sequence_at(root, path);
    let len = seq.len();
    if let TokenOp::Insert(tok) = mutation.op {
        let at = mutation.at.index(len + 1);
        seq.insert(at, nodes(tok.tree().into()).remove(0));
        return;
    }
    if len == 0 {
        return;
    }
    let at = mutation.at.index(len);
    match &mutation.op {
        TokenOp::Delete => {
            seq.remove(at);
        }
        TokenOp::Duplicate => {
            let copy = clone_node(&seq[at]);
            seq.insert(at, copy);
        }
        TokenOp::Swap => {
            if at + 1 < len {
                seq.swap(at, at + 1);
            }
        }
        TokenOp::Replace(tok) => seq[at] = nodes(tok.tree().into()).remove(0),
        TokenOp::Insert(_) => unreachable!("handled above"),
        TokenOp::Wrap(delimiter, n) => {
            let end = (at + n).min(len);
            let inner: Vec<Node> = seq.drain(at..end).collect();
            seq.insert(at, Node::Group(*delimiter, inner));
        }
        TokenOp::Unwrap => {
            if let Node::Group(_, _) = &seq[at] {
                let Node::Group(_, inner) = seq.remove(at) else {
                    unreachable!()
                };
                for (i, node) in inner.into_iter().enumerate() {
                    seq.insert(at + i, node);
                }
            }
        }
        TokenOp::Move(to) => {
            let node = seq.remove(at);
            let to = to.index(seq.len() + 1);
            seq.insert(to, node);
        }
        TokenOp::Truncate => seq.truncate(at),
        TokenOp::Empty => {
            if let Node::Group(_, inner) = &mut seq[at] {
                inner.clear();
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Running `derive` and checking what it returns.

/// Runs `derive`, turning a panic into a test failure that shows the input.
fn run_derive(input: &TokenStream) -> Result<String, TestCaseError> {
    let result = catch_unwind(AssertUnwindSafe(|| derive(input.clone())));
    match result {
        Ok(output) => Ok(output.to_string()),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(TestCaseError::fail(format!(
                "derive panicked: {message}\ninput: {input}"
            )))
        }
    }
}

/// Whatever the input: either both impls or `compile_error!`.
fn check_output(input: &TokenStream, output: &str) -> Result<(), TestCaseError> {
    let has_error = output.contains("compile_error");
    let has_impls = output.contains("DeclaredKv for") && output.contains("ModelLocalKv for");
    prop_assert!(
        has_error || has_impls,
        "output has neither impls nor compile_error: {output:?}\ninput: {input}"
    );
    Ok(())
}

/// The defaults of all properties add up to this many cases.
const DEFAULT_TOTAL: u64 = 2_000;

/// Cases per property: `PROPTEST_CASES` for each; else `KV_FUZZ_TOTAL` shared
/// out in the proportion of the defaults; else `default`.
fn config(default: u32) -> Config {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let cases = match (env("PROPTEST_CASES"), env("KV_FUZZ_TOTAL")) {
        (Some(cases), _) => cases,
        (None, Some(total)) => total * u64::from(default) / DEFAULT_TOTAL,
        (None, None) => u64::from(default),
    };
    let cases = u32::try_from(cases).unwrap_or(u32::MAX);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Runs a property, then reports how many cases ran (seen with `--nocapture`).
fn run<S: Strategy>(
    name: &str,
    default_cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let mut runner = TestRunner::new(config(default_cases));
    // Cases up to the first failure; shrinking it runs more, uncounted.
    let cases = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let start = Instant::now();
    let result = runner.run(&strategy, |value| {
        if !failed.load(Ordering::Relaxed) {
            cases.fetch_add(1, Ordering::Relaxed);
        }
        let outcome = test(value);
        if outcome.is_err() {
            failed.store(true, Ordering::Relaxed);
        }
        outcome
    });
    let cases = cases.load(Ordering::Relaxed);
    let failures = u64::from(result.is_err());
    eprintln!(
        "fuzz {name}: {cases} cases in {:.1?}, failures (panics included) found: {failures}",
        start.elapsed()
    );
    if let Err(error) = result {
        panic!("{name}: {error}");
    }
}

fn parse(source: &str) -> TokenStream {
    TokenStream::from_str(source)
        .unwrap_or_else(|e| panic!("the generator wrote source that does not lex: {e}\n{source}"))
}

// ---------------------------------------------------------------------------
// The properties.

#[test]
fn fuzz_valid_declarations_derive_without_errors() {
    run("valid", 600, model_of(STRUCTS), |model| {
        let source = model.render();
        let input = parse(&source);
        let output = run_derive(&input)?;
        check_output(&input, &output)?;
        prop_assert!(
            TokenStream::from_str(&output).is_ok(),
            "output does not lex: {output}\ninput: {source}"
        );
        prop_assert!(
            !output.contains("compile_error"),
            "a valid declaration was rejected: {output}\ninput: {source}"
        );
        let declared = output.matches("__kv_out . push (").count()
            + output.matches("__private :: declare (").count();
        prop_assert_eq!(declared, model.declaration_count(), "input: {}", source);
        let visited = output.matches("__private :: visit_field (").count()
            + output.matches("__private :: visit_transparent (").count();
        prop_assert_eq!(visited, model.child_count(), "input: {}", source);
        Ok(())
    });
}

#[test]
fn fuzz_enums_and_unions_are_rejected_with_fallback_impls() {
    const NOT_STRUCTS: &[Kind] = &[Kind::Enum, Kind::Union];
    run("not_structs", 100, model_of(NOT_STRUCTS), |model| {
        let source = model.render();
        let input = parse(&source);
        let output = run_derive(&input)?;
        check_output(&input, &output)?;
        prop_assert!(
            output.contains("supports structs only"),
            "input: {}",
            source
        );
        prop_assert!(
            output.contains("ModelLocalKv for"),
            "no fallback impl: {output}"
        );
        Ok(())
    });
}

#[test]
fn fuzz_mutated_entries_never_panic() {
    let strategy = (model_of(ALL_KINDS), vec(entry_op(), 1..5));
    run("entries", 600, strategy, |(mut model, ops)| {
        for op in &ops {
            apply_entry_op(&mut model, op);
        }
        let input = parse(&model.render());
        let output = run_derive(&input)?;
        check_output(&input, &output)
    });
}

#[test]
fn fuzz_mutated_tokens_never_panic() {
    let strategy = (
        model_of(ALL_KINDS),
        vec(entry_op(), 0..3),
        vec(token_mutation(), 1..8),
    );
    run(
        "tokens",
        700,
        strategy,
        |(mut model, entry_ops, mutations)| {
            for op in &entry_ops {
                apply_entry_op(&mut model, op);
            }
            let mut root = nodes(parse(&model.render()));
            for mutation in &mutations {
                apply_token_mutation(&mut root, mutation);
            }
            let input = tokens(&root);
            let output = run_derive(&input)?;
            check_output(&input, &output)
        },
    );
}

#[test]
fn palette_tokens_and_junk_values_lex() {
    for tok in TOKS {
        let _ = tok.tree();
    }
    for junk in JUNK_VALUES {
        parse(junk);
    }
}

// ---------------------------------------------------------------------------
// Regressions: inputs the fuzzer found, kept as plain tests.

fn derive_str(source: &str) -> String {
    derive(parse(source)).to_string()
}

/// Found by `fuzz_mutated_entries_never_panic`: the lexer drops the spaces, so
/// the text passed as an identifier and `format_ident!` panicked on it.
#[test]
fn only_when_with_spaces_or_comments_is_an_error_not_a_panic() {
    for gate in [
        "\" async_chunk \"",
        "\"async_chunk\\n\"",
        "\"/* c */ async_chunk\"",
        "\"async_chunk // c\"",
        "\"r#self\"",
        "\"r#_\"",
    ] {
        let output = derive_str(&format!(
            "#[kv(name = \"n\", cache = \"c\", geometry = G, positions = bounded(1, because = \"b\"), \
             scope = request, rows = max_num_seqs, only_when = {gate})] struct S {{ async_chunk: bool }}"
        ));
        assert!(
            output.contains("`only_when` names a bool field"),
            "{gate}: {output}"
        );
    }
    let output = derive_str(
        "#[kv(name = \"n\", cache = \"c\", geometry = G, positions = bounded(1, because = \"b\"), \
         scope = request, rows = max_num_seqs, only_when = \"r#type\")] struct S;",
    );
    assert!(!output.contains("compile_error"), "{output}");
    assert!(output.contains("Self :: r#type (self)"), "{output}");
}

/// Found reading the fuzzer's accepted inputs: an empty count was taken as a
/// const expression and expanded to `(() as u64)`, a type error far from the
/// attribute.
#[test]
fn an_empty_count_is_an_error() {
    for value in [
        "positions = bounded(, because = \"b\"), rows = max_num_seqs",
        "positions = bounded(1, because = \"b\"), rows = fixed(, because = \"b\")",
    ] {
        let output = derive_str(&format!(
            "#[kv(name = \"n\", cache = \"c\", geometry = G, scope = request, {value})] struct S;"
        ));
        assert!(output.contains("needs a count first"), "{value}: {output}");
    }
}
