//! The valid grammar: structs of every shape, generics, struct- and
//! field-level `#[kv(...)]`, children, skipped fields, options. Declarations
//! are built from the key table (`crate::attr::keys::KEYS`): every declaration key
//! is written with a valid value of its `Form`, in every combination its
//! `Need` and `conflicts` allow, so a new key is fuzzed the day it lands
//! (`the_valid_grammar_writes_every_key` fails until it is). Dtypes, block
//! formats, scopes and position policies come from the derive's own tables.

use super::*;
use crate::attr::keys::{Form, Key, Need, Place, KEYS};
use crate::attr::tables::{column, BLOCK_FORMATS, DTYPES, POLICIES, SCOPES};

// ---------------------------------------------------------------------------
// The valid grammar.

pub(crate) const TYPE_NAMES: &[&str] = &["S", "Model", "Talker", "r#Raw", "Größe"];
pub(crate) const GENERICS: &[(&str, &str)] = &[
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
pub(crate) const FIELD_TYPES: &[&str] = &[
    "u8",
    "Option<()>",
    "&'static [u8]",
    "Vec<Vec<u32>>",
    "[u8; 4]",
    "fn() -> u8",
    "<T as Tr>::Out",
    "kv_core::DType",
];
pub(crate) const OTHER_ATTRS: &[&str] = &[
    "#[doc = \"a doc\"]",
    "/// a doc comment",
    "#[allow(dead_code)]",
    "#[serde(skip, rename = \"x\")]",
    "#[cfg_attr(test, kv2(name = 1))]",
];
pub(crate) const VISIBILITIES: &[&str] = &["", "pub", "pub(crate)", "pub(in crate::a)"];
pub(crate) const CONST_COUNTS: &[&str] = &[
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
pub(crate) const AFTER_LOAD_COUNTS: &[&str] = &[
    "self.n",
    "self.config.num_hidden_layers",
    "self.window.len()",
    "*&self.n",
    "self.a.b as u64",
    "(self.x)",
    "{ self.y }",
    "self.config.get(\"k\").unwrap_or(1)",
];
pub(crate) const DTYPE_EXPRESSIONS: &[&str] = &[
    "DType::BF16",
    "kv_core::DType::F32",
    "MY_DTYPE",
    "Bf16",
    "self.dtype",
    "self.dtype()",
    "self.config.dtype.into()",
];
pub(crate) const GEOMETRIES: &[&str] = &[
    "GEOMETRY",
    "Self::GEOMETRY",
    "kv_core::Geometry::new(1, 2, 3, kv_core::DType::F32)",
    "self.geometry",
    "self.config.geometry()",
    "kv_core::Geometry::from_config(&self.config)",
];
pub(crate) const LATENTS: &[&str] = &[
    "LATENT",
    "kv_core::Latent::new(27, 512, 64, kv_core::DType::BF16)",
    "self.latent",
    "self.config.latent()",
];
pub(crate) const STATES: &[&str] = &[
    "STATE",
    "kv_core::RecurrentState::new(28, &PARTS)",
    "self.state.clone()",
    "self.config.recurrent_state()",
];
pub(crate) const TENSORS: &[&str] = &[
    "TENSORS",
    "kv_core::Tensors::new(&ROPE)",
    "self.tables.clone()",
    "self.config.rope_tables()",
];
pub(crate) const STORAGE_EXPRESSIONS: &[&str] = &[
    "STORAGE",
    "Q8_0",
    "kv_core::Storage::Dense(kv_core::DType::I8)",
    "kv_core::Storage::Blocks(kv_core::BlockFormat::Q4_0)",
    "self.format",
    "self.config.kv_storage()",
];
pub(crate) const GATES: &[&str] = &["async_chunk", "streaming", "f0", "r#type", "é", "_private"];
pub(crate) const CRATE_PATHS: &[&str] =
    &["kv_core", "::kv_core", "crate::kv", "my_kv", " kv_core "];
/// Characters for texts: whitespace, quotes, escapes, non-ASCII, NUL.
pub(crate) const TEXT_CHARS: &[char] = &[
    'a', 'Z', '0', ' ', '\t', '\n', '"', '\\', '\'', 'é', '😀', '\u{0}', '#', '{', '}', '/', '*',
    ':', '-', '=', ',',
];
pub(crate) const NON_BLANK: &[char] = &['a', 'x', '7', '"', 'é', '😀', '#'];
pub(crate) const BLANKS: &[char] = &[' ', '\t', '\n', '\u{a0}'];

/// A non-blank string literal, spelled plainly or raw.
pub(crate) fn text() -> impl Strategy<Value = String> {
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

pub(crate) fn spell_string(text: &str, spelling: u8) -> String {
    let raw_ok = !text.contains('\u{0}');
    match spelling {
        1 if raw_ok && !text.contains('"') => format!("r\"{text}\""),
        2 if raw_ok && !text.contains("\"#") => format!("r#\"{text}\"#"),
        _ => Literal::string(text).to_string(),
    }
}

/// A positive integer literal fitting u64, in any of Rust's spellings.
pub(crate) fn literal_count() -> impl Strategy<Value = String> {
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

pub(crate) fn with_underscores(digits: &str) -> String {
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
pub(crate) fn count() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => literal_count(),
        2 => select(CONST_COUNTS).prop_map(String::from),
        2 => select(AFTER_LOAD_COUNTS).prop_map(String::from),
    ]
}

pub(crate) fn because(function: &'static str) -> impl Strategy<Value = String> {
    (count(), text(), any::<bool>()).prop_map(move |(count, reason, trailing)| {
        let comma = if trailing { "," } else { "" };
        format!("{function}({count}, because = {reason}{comma})")
    })
}

pub(crate) fn dtype() -> impl Strategy<Value = String> {
    prop_oneof![
        select(column(DTYPES)).prop_map(String::from),
        select(DTYPE_EXPRESSIONS).prop_map(String::from),
    ]
}

pub(crate) type Entries = Vec<(String, Option<String>)>;

pub(crate) fn entry(key: &str, value: String) -> (String, Option<String>) {
    (key.to_string(), Some(value))
}

/// A valid value of `key`, by its form.
pub(crate) fn value(key: &'static Key) -> BoxedStrategy<String> {
    match key.form {
        Form::Text => text().boxed(),
        Form::Count => count().boxed(),
        Form::DType => dtype().boxed(),
        Form::Storage => storage().boxed(),
        Form::Expression => {
            let examples = match key.name {
                "geometry" => GEOMETRIES,
                "latent" => LATENTS,
                "state" => STATES,
                "tensors" => TENSORS,
                other => panic!("the fuzz grammar has no expressions for `{other}`"),
            };
            select(examples).prop_map(String::from).boxed()
        }
        Form::Positions => positions().boxed(),
        Form::Scope => select(column(SCOPES)).prop_map(String::from).boxed(),
        Form::Rows => prop_oneof![Just("max_num_seqs".to_string()), because("fixed")].boxed(),
        // A method: a bare name must be a field, which a random struct may lack.
        Form::Gate => select(GATES)
            .prop_map(|gate| Literal::string(&format!("{gate}()")).to_string())
            .boxed(),
        Form::Path => select(CRATE_PATHS)
            .prop_map(|path| Literal::string(path).to_string())
            .boxed(),
        Form::Flag | Form::Marker => Just(String::new()).boxed(),
    }
}

/// A storage format: a dtype or block format name, or an expression.
pub(crate) fn storage() -> impl Strategy<Value = String> {
    prop_oneof![
        select(column(DTYPES)).prop_map(String::from),
        select(column(BLOCK_FORMATS)).prop_map(String::from),
        select(STORAGE_EXPRESSIONS).prop_map(String::from),
    ]
}

/// `bounded(..)` or any position policy, each input a count.
pub(crate) fn positions() -> impl Strategy<Value = String> {
    let policy = (0..POLICIES.len(), vec(count(), 5), any::<bool>()).prop_map(
        |(policy, counts, trailing)| {
            let policy = &POLICIES[policy];
            let mut text = format!("{}({}", policy.name, counts[0]);
            for (input, count) in policy.named.iter().zip(&counts[1..]) {
                text.push_str(&format!(", {input} = {count}"));
            }
            if trailing {
                text.push(',');
            }
            text.push(')');
            text
        },
    );
    prop_oneof![because("bounded"), policy]
}

/// The declaration keys the grammar chooses among (`name` is the model's).
fn declaration_keys() -> Vec<&'static Key> {
    KEYS.iter()
        .filter(|key| key.place == Place::Declaration && key.name != "name")
        .collect()
}

/// Whether `a` and `b` cannot be given together, by either's conflicts.
fn conflict(a: &Key, b: &Key) -> bool {
    a.conflicts.contains(&b.name) || b.conflicts.contains(&a.name)
}

/// The keys of one valid declaration: each optional key wanted (`wanted[i]`,
/// in the shuffled `order`) is given unless it conflicts with one already
/// given; then every required key, and every key needed because none of its
/// alternatives was given.
pub(crate) fn choose(keys: &[&'static Key], order: &[usize], wanted: &[bool]) -> Vec<usize> {
    let mut chosen: Vec<usize> = Vec::new();
    let fits = |chosen: &[usize], i: usize| chosen.iter().all(|&c| !conflict(keys[c], keys[i]));
    for &i in order {
        if wanted[i] && keys[i].need != Need::Required && fits(&chosen, i) {
            chosen.push(i);
        }
    }
    for (i, key) in keys.iter().enumerate() {
        if chosen.contains(&i) {
            continue;
        }
        let needed = match key.need {
            Need::Required => true,
            Need::UnlessAny(others) => !others
                .iter()
                .any(|other| chosen.iter().any(|&c| keys[c].name == *other)),
            Need::Optional | Need::UnlessNamedField => false,
        };
        if needed && fits(&chosen, i) {
            chosen.push(i);
        }
    }
    chosen
}

/// A declaration's entries other than `name`, from the key table, in a
/// random order.
pub(crate) fn declaration_entries() -> impl Strategy<Value = Entries> {
    let keys = declaration_keys();
    let values: Vec<BoxedStrategy<String>> = keys.iter().map(|key| value(key)).collect();
    let order: Vec<usize> = (0..keys.len()).collect();
    (
        values,
        vec(prop::bool::weighted(0.3), keys.len()),
        Just(order).prop_shuffle(),
    )
        .prop_map(move |(values, wanted, order)| {
            choose(&keys, &order, &wanted)
                .into_iter()
                .map(|i| entry(keys[i].name, values[i].clone()))
                .collect::<Entries>()
        })
        .prop_flat_map(|entries| Just(entries).prop_shuffle())
}

#[derive(Clone, Debug)]
pub(crate) struct DeclModel {
    pub(crate) entries: Entries,
    /// Whether to give `name` where it is optional (on a named field).
    pub(crate) named: bool,
    pub(crate) name_suffix: String,
    pub(crate) name_at: Index,
    pub(crate) trailing_comma: bool,
}

pub(crate) fn declaration() -> impl Strategy<Value = DeclModel> {
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
pub(crate) enum Kind {
    Named,
    Tuple,
    Unit,
    Enum,
    Union,
}

#[derive(Clone, Debug)]
pub(crate) struct FieldModel {
    pub(crate) raw: bool,
    pub(crate) vis: &'static str,
    pub(crate) ty: &'static str,
    pub(crate) child: bool,
    /// `#[kv(skip, because = ...)]` with this reason, on a field not a child.
    pub(crate) skip: Option<String>,
    pub(crate) decls: Vec<DeclModel>,
    pub(crate) other: Vec<&'static str>,
}

pub(crate) fn field() -> impl Strategy<Value = FieldModel> {
    (
        any::<bool>(),
        select(VISIBILITIES),
        select(FIELD_TYPES),
        prop::bool::weighted(0.2),
        proptest::option::weighted(0.15, text()),
        vec(declaration(), 0..3),
        vec(select(OTHER_ATTRS), 0..2),
    )
        .prop_map(|(raw, vis, ty, child, skip, decls, other)| FieldModel {
            raw,
            vis,
            ty,
            child,
            skip: skip.filter(|_| !child),
            decls,
            other,
        })
}

#[derive(Clone, Debug)]
pub(crate) struct Model {
    pub(crate) kind: Kind,
    pub(crate) type_name: &'static str,
    pub(crate) generics: (&'static str, &'static str),
    pub(crate) krate: Option<&'static str>,
    pub(crate) transparent: bool,
    /// Options in one attribute, or `crate` and `transparent` apart.
    pub(crate) options_apart: bool,
    pub(crate) options_at: Index,
    pub(crate) decls: Vec<DeclModel>,
    pub(crate) fields: Vec<FieldModel>,
    pub(crate) other: Vec<&'static str>,
}

pub(crate) fn model_of(kinds: &'static [Kind]) -> impl Strategy<Value = Model> {
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
                // A transparent wrapper forwards to exactly one child.
                let transparent = transparent && fields.iter().filter(|f| f.child).count() == 1;
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

pub(crate) const STRUCTS: &[Kind] = &[Kind::Named, Kind::Tuple, Kind::Unit];
pub(crate) const ALL_KINDS: &[Kind] = &[
    Kind::Named,
    Kind::Named,
    Kind::Tuple,
    Kind::Unit,
    Kind::Enum,
    Kind::Union,
];

impl Model {
    pub(crate) fn declaration_count(&self) -> usize {
        self.decls.len() + self.fields.iter().map(|f| f.decls.len()).sum::<usize>()
    }

    pub(crate) fn child_count(&self) -> usize {
        self.fields.iter().filter(|f| f.child).count()
    }

    /// The source text. Every declaration gets a unique name `d{i}:...` where
    /// one is required or chosen; a field's first unnamed one takes its name.
    pub(crate) fn render(&self) -> String {
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
            if let Some(reason) = &f.skip {
                write!(text, "#[kv(skip, because = {reason})] ").unwrap();
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

pub(crate) fn render_decl(decl: &DeclModel, name: Option<String>) -> String {
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
