//! The derive's diagnostics and reading rules that the compile-fail suite does
//! not pin, checked on `derive`'s output without the compiler (each was a
//! mutant that survived every other test).

use std::str::FromStr;

use proc_macro2::{Delimiter, Group, Literal, TokenStream, TokenTree};

use crate::derive;
use crate::suggest::{closest, nearest};

fn derive_str(source: &str) -> String {
    let input = TokenStream::from_str(source).expect("test source lexes");
    derive(input).to_string()
}

/// A declaration with everything but `extra`; `S` is a unit struct.
fn declaration(extra: &str) -> String {
    derive_str(&format!(
        "#[kv(name = \"n\", cache = \"c\", scope = request, rows = max_num_seqs, {extra})] struct S;"
    ))
}

/// The messages of the `compile_error!`s in `output`, in order.
fn errors(output: &str) -> Vec<&str> {
    output
        .split("compile_error ! {")
        .skip(1)
        .map(|rest| rest.split('}').next().unwrap_or(rest).trim())
        .collect()
}

#[test]
fn a_declaration_that_broke_a_rule_is_not_checked_further() {
    // Two declarations named alike, each with a conflict: the conflicts are
    // reported, and the name check never sees declarations already refused.
    let both = "name = \"n\", cache = \"c\", scope = request, rows = max_num_seqs, \
                state = S, positions = bounded(1, because = \"b\")";
    let output = derive_str(&format!("#[kv({both})] #[kv({both})] struct S;"));
    let errors = errors(&output);
    assert_eq!(errors.len(), 2, "{output}");
    assert!(
        errors
            .iter()
            .all(|e| e.contains("`positions` conflicts with `state`")),
        "{output}"
    );
}

#[test]
fn a_key_and_its_value_are_joined_by_equals() {
    let output = derive_str(
        "#[kv(name = \"n\", cache = \"c\", scope = request, rows: max_num_seqs, geometry = G, \
         positions = bounded(1, because = \"b\"))] struct S;",
    );
    assert!(output.contains("expected `=` after `rows`"), "{output}");
}

#[test]
fn literal_figures_that_overflow_are_left_to_kv_cores_checks() {
    // 2 bytes per position fit; u64::MAX positions of them do not: kv-core's
    // row check (its text) is generated, where fitting literals get none.
    let output = declaration(
        "layers = 1, kv_heads = 1, head_dim = 1, dtype = u8, \
         positions = bounded(18446744073709551615, because = \"b\")",
    );
    assert!(!output.contains("compile_error"), "{output}");
    assert!(output.contains("__kv :: check ! (row"), "{output}");
    let fits = declaration(
        "layers = 1, kv_heads = 1, head_dim = 1, dtype = u8, \
         positions = bounded(4, because = \"b\"), ",
    );
    assert!(!fits.contains("__kv :: check !"), "{fits}");
    // A fixed peak that overflows is checked; one that fits is not.
    let peak = |rows: &str| {
        derive_str(&format!(
            "#[kv(name = \"n\", cache = \"c\", scope = request, rows = fixed({rows}, because = \"r\"), \
             layers = 1, kv_heads = 1, head_dim = 1, dtype = u8, \
             positions = bounded(4294967296, because = \"b\"))] struct S;"
        ))
    };
    assert!(peak("4294967296").contains("__kv :: check ! (peak"));
    assert!(!peak("2").contains("__kv :: check !"));
}

#[test]
fn only_a_minus_sign_makes_a_count_negative() {
    let negative = declaration("geometry = G, positions = bounded(-4, because = \"b\")");
    assert!(negative.contains("is negative"), "{negative}");
    // `!0` is a const expression (u64::MAX), left to the type checker.
    let not = declaration("geometry = G, positions = bounded(!0, because = \"b\")");
    assert!(!not.contains("is negative"), "{not}");
    assert!(!not.contains("compile_error"), "{not}");
}

#[test]
fn a_reason_is_one_string_literal_or_one_forwarded_by_a_macro() {
    let parenthesized = declaration("geometry = G, positions = bounded(1, because = (\"b\"))");
    assert!(
        parenthesized.contains("`because` must be a string literal"),
        "{parenthesized}"
    );
    // `macro_rules!` passes `$reason:literal` inside an invisible group.
    let mut input = TokenStream::from_str(
        "#[kv(name = \"n\", cache = \"c\", scope = request, rows = max_num_seqs, geometry = G, \
         positions = bounded(1, because = REASON))] struct S;",
    )
    .expect("lexes");
    input = replace_ident(input, "REASON", &|| {
        let literal = TokenTree::Literal(Literal::string("forwarded"));
        TokenTree::Group(Group::new(Delimiter::None, literal.into()))
    });
    let output = derive(input).to_string();
    assert!(!output.contains("compile_error"), "{output}");
    assert!(output.contains("\"forwarded\""), "{output}");
}

/// `tokens` with each identifier `name` replaced by `with()`, groups included.
fn replace_ident(tokens: TokenStream, name: &str, with: &dyn Fn() -> TokenTree) -> TokenStream {
    tokens
        .into_iter()
        .map(|tree| match tree {
            TokenTree::Ident(ident) if ident == name => with(),
            TokenTree::Group(group) => {
                let inner = replace_ident(group.stream(), name, with);
                let mut new = Group::new(group.delimiter(), inner);
                new.set_span(group.span());
                TokenTree::Group(new)
            }
            other => other,
        })
        .collect()
}

#[test]
fn a_counted_value_takes_parentheses_only() {
    // The message as a token: its quotes are escaped.
    let expected = r#"expected `bounded(COUNT, because = \"...\")`"#;
    for value in ["bounded[1, because = \"b\"]", "bounded{1, because = \"b\"}"] {
        let output = declaration(&format!("geometry = G, positions = {value}"));
        assert!(output.contains(expected), "{value}: {output}");
    }
}

#[test]
fn a_declaration_on_a_tuple_field_needs_a_name() {
    let output = derive_str(
        "struct S(#[kv(cache = \"c\", scope = request, rows = max_num_seqs, geometry = G, \
         positions = bounded(1, because = \"b\"))] u8);",
    );
    assert!(
        output
            .contains("missing `name`: a declaration on a tuple field needs `name = \\\"...\\\"`"),
        "{output}"
    );
}

#[test]
fn suggestions_reach_as_far_as_the_word_allows() {
    // "kvhds" is 3 deletions from "kv_heads": within reach of a 5-letter word
    // (5 / 2 + 1 = 3), not of a 2-letter one.
    assert_eq!(closest("kvhds", &["kv_heads"]), Some("kv_heads"));
    assert_eq!(
        nearest("kvhds", &["kv_heads"]),
        "; did you mean `kv_heads`?"
    );
    assert_eq!(closest("kx", &["kv_heads"]), None);
    // Deletions and insertions each cost one.
    assert_eq!(closest("xrows", &["rows"]), Some("rows"));
    assert_eq!(closest("ros", &["rows"]), Some("rows"));
}

/// The `__kv::unmarked!` checks in `output`, as `(checked type, label, written)`.
fn unmarked(output: &str) -> Vec<String> {
    output
        .split("__kv :: unmarked ! (")
        .skip(1)
        .map(|rest| rest.split(") ;").next().unwrap_or(rest).trim().to_string())
        .collect()
}

#[test]
fn only_unmarked_fields_of_checkable_types_are_checked() {
    let output = derive_str(
        "struct M<'a, T, const N: usize> { \
           a: u32, b: bool, c: String, d: (), e: f64, \
           owner: Decoder, \
           #[kv(child)] child: Decoder, \
           #[kv(skip, because = \"why\")] skipped: Decoder, \
           param: T, in_vec: Vec<T>, sized: [u8; N], me: Box<Self>, \
           borrowed: &'a Decoder, fixed: &'static Decoder, \
         }",
    );
    // A reference is asked about through what it points at.
    assert_eq!(
        unmarked(&output),
        [
            "Decoder , [] , \"M.owner\" , \"Decoder\"",
            "Decoder , [] , \"M.borrowed\" , \"&'a Decoder\"",
            "Decoder , [] , \"M.fixed\" , \"&'static Decoder\"",
        ],
        "{output}"
    );
    // A tuple field is named by its index; a unit struct has nothing to check.
    let tuple = derive_str("struct T(u8, Decoder);");
    assert_eq!(unmarked(&tuple), ["Decoder , [] , \"T.1\" , \"Decoder\""]);
    assert!(unmarked(&derive_str("struct U;")).is_empty());
    // A type written with inert names alone is not checked; one naming
    // anything else is, wherever the name is.
    let inert = derive_str(
        "struct I<'a> { a: Option<()>, b: Vec<Vec<f32>>, c: &'a [u8], d: std::rc::Rc<str>, \
         e: &'a mut Option<Box<u8>>, f: core::marker::PhantomData<u8> }",
    );
    assert!(unmarked(&inert).is_empty(), "{inert}");
    let path = derive_str(
        "struct P<'a> { a: u32::Wrapper, b: (u8, Decoder), c: Option<Decoder>, d: &'a Decoder, \
         e: [Decoder; 2] }",
    );
    assert_eq!(unmarked(&path).len(), 5, "{path}");
}

#[test]
fn inside_another_crates_type_each_type_argument_is_asked_about_under_it() {
    let output = derive_str(
        "struct Q { queue: Queue<Cache>, nested: Option<Outer<Vec<Inner<u8>>>>, \
         by_key: HashMap<Key, Value>, ghost: PhantomData<Cache>, weak: Weak<Cache>, \
         f: fn(Cache) -> u8 }",
    );
    assert_eq!(
        unmarked(&output),
        [
            // The whole type, then its argument, reported only where the
            // whole does not declare (one owner, one error).
            "Queue < Cache > , [] , \"Q.queue\" , \"Queue<Cache>\"",
            "Cache , [Queue < Cache >] , \"Q.queue\" , \"Queue<Cache>\" , in \"Cache\"",
            // kv's own containers are seen through; every foreign type
            // around an argument guards it.
            "Outer < Vec < Inner < u8 > > > , [] , \"Q.nested\" , \"Option<Outer<Vec<Inner<u8>>>>\"",
            "Inner < u8 > , [Outer < Vec < Inner < u8 > > >] , \"Q.nested\" , \
             \"Option<Outer<Vec<Inner<u8>>>>\" , in \"Inner<u8>\"",
            // A map's key holds nothing kv visits.
            "Value , [] , \"Q.by_key\" , \"HashMap<Key, Value>\"",
        ],
        "{output}"
    );
}

/// The `__kv::unmarked_trait_object!` checks in `output`.
fn unmarked_trait_objects(output: &str) -> Vec<String> {
    output
        .split("__kv :: unmarked_trait_object ! (")
        .skip(1)
        .map(|rest| rest.split(") ;").next().unwrap_or(rest).trim().to_string())
        .collect()
}

#[test]
fn an_unmarked_trait_object_is_always_checked_once_per_trait() {
    let output = derive_str(
        "struct P<'a, T> { model: Box<dyn NormalModel + Send + Sync>, \
         stages: Vec<(Box<dyn Stage>, Arc<dyn Stage + 'a>)>, generic: Box<dyn Tr<T>>, \
         ghost: PhantomData<dyn Stage>, callback: fn(&dyn Stage), \
         #[kv(skip, because = \"weights\")] proj: Arc<dyn QuantMethod> }",
    );
    assert_eq!(
        unmarked_trait_objects(&output),
        [
            "dyn NormalModel + Send + Sync , \"P.model\" , \
             \"Box<dyn NormalModel + Send + Sync>\" , \"NormalModel\" , \"NormalModel\" , \"kv_core\"",
            "dyn Stage , \"P.stages\" , \"Vec<(Box<dyn Stage>, Arc<dyn Stage + 'a>)>\" , \
             \"Stage\" , \"Stage\" , \"kv_core\"",
            // Naming a parameter: it cannot be asked about where it is defined.
            "_ , \"P.generic\" , \"Box<dyn Tr<T>>\" , \"Tr\" , \"Tr\" , \"kv_core\"",
        ]
        .map(|expected| expected.split_whitespace().collect::<Vec<_>>().join(" ")),
        "{output}"
    );
}

#[test]
fn a_type_is_written_back_as_a_person_writes_it() {
    use crate::types::type_text;
    let text = |source: &str| type_text(TokenStream::from_str(source).expect("lexes"));
    assert_eq!(
        text("Option < Box < dyn Trait + Send > >"),
        "Option<Box<dyn Trait + Send>>"
    );
    assert_eq!(text("& 'a mut [Layer ; 2]"), "&'a mut [Layer; 2]");
    assert_eq!(text("& 'static [Layer]"), "&'static [Layer]");
    assert_eq!(text("Cow < 'a , (A , B) >"), "Cow<'a, (A, B)>");
    assert_eq!(text("HashMap<String,Layer>"), "HashMap<String, Layer>");
    assert_eq!(text("(u8, Decoder)"), "(u8, Decoder)");
    assert_eq!(text("Foo<Item = u8>"), "Foo<Item = u8>");
    assert_eq!(text("[u8; { 1 }]"), "[u8; { 1 }]");
}

#[test]
fn a_variants_bindings_are_values_but_not_as_later_segments() {
    use crate::attr::values::mentions_self_or;
    let reads = |source: &str, bindings: &[&str]| {
        let bindings: Vec<String> = bindings.iter().map(|b| (*b).to_owned()).collect();
        mentions_self_or(&TokenStream::from_str(source).expect("lexes"), &bindings)
    };
    assert!(reads("self.window", &[]));
    assert!(reads("f(window)", &["window"]));
    assert!(reads("*window + 1", &["cfg", "window"]));
    assert!(!reads("window", &[]));
    assert!(
        !reads("cfg.window", &["window"]),
        "a field of another value"
    );
    assert!(
        !reads("limits::window", &["window"]),
        "a path's later segment"
    );
    assert!(!reads("WINDOW", &["window"]));
}

#[test]
fn a_field_marker_stands_alone_on_a_field() {
    let on_struct = derive_str("#[kv(skip, because = \"x\")] struct S;");
    let errors = errors(&on_struct);
    assert_eq!(errors.len(), 2, "{on_struct}");
    assert!(errors[0].contains("`skip` marks a field"), "{on_struct}");
    let child = derive_str("#[kv(child)] struct S;");
    assert!(child.contains("`child` marks a field"), "{child}");
}

// ---------------------------------------------------------------------------
// The key table, written once: conflicts name keys, the docs have a row for
// every key, and the name tables equal kv-core's.

mod tables {
    use crate::attr::keys::{key, Need, Place, KEYS};
    use crate::attr::tables::{
        column, dtype_bytes, BLOCK_FORMATS, DTYPES, PER_TOKEN_HEAD_FORMATS, POLICIES, SCOPES,
        VLLM_DTYPES,
    };
    use kv_core::__private_v0_1 as private;
    use kv_core::{BlockFormat, DType, Scope, Storage};

    #[test]
    fn vllm_names_equal_kv_cores() {
        let mut names = column(VLLM_DTYPES);
        names.extend(column(PER_TOKEN_HEAD_FORMATS));
        assert_eq!(names, Storage::VLLM_NAMES.map(|(name, _)| name));
        for (name, variant) in VLLM_DTYPES {
            let Some(Storage::Dense(dtype)) = Storage::from_name(name) else {
                panic!("{name}")
            };
            assert_eq!(format!("{dtype:?}"), *variant, "{name}");
        }
        // The derive names each by its constant, `Storage::INT8_PER_TOKEN_HEAD`.
        let constants = [
            Storage::INT8_PER_TOKEN_HEAD,
            Storage::FP8_PER_TOKEN_HEAD,
            Storage::INT4_PER_TOKEN_HEAD,
        ];
        for ((name, constant), storage) in PER_TOKEN_HEAD_FORMATS.iter().zip(constants) {
            assert_eq!(name.to_uppercase(), *constant);
            assert_eq!(Storage::from_name(name), Some(storage));
        }
    }

    #[test]
    fn every_conflict_and_alternative_names_a_key() {
        for k in KEYS {
            for conflict in k.conflicts {
                assert!(key(conflict).is_some(), "{}: {conflict}", k.name);
                assert_ne!(*conflict, k.name);
            }
            if let Need::UnlessAny(others) = k.need {
                for other in others {
                    assert!(key(other).is_some(), "{}: {other}", k.name);
                }
            }
            assert_eq!(key(k.name).map(|found| found.name), Some(k.name));
        }
        let mut names: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KEYS.len(), "a key is listed twice");
    }

    /// The derive's documentation, on kv-core's re-export.
    const DOCS: &str = include_str!("../../kv-core/src/lib.rs");

    /// The first cells of the derive's table of declaration keys.
    fn documented_rows() -> Vec<&'static str> {
        DOCS.lines()
            .filter_map(|line| line.trim().strip_prefix("/// | `"))
            .map(|row| row.split(" |").next().unwrap_or(row))
            .collect()
    }

    #[test]
    fn every_key_is_documented_and_every_documented_key_exists() {
        let rows = documented_rows();
        for k in KEYS {
            let ticked = format!("`{}`", k.name);
            match k.place {
                Place::Declaration => assert!(
                    rows.iter().any(|row| format!("`{row}").contains(&ticked)),
                    "no row for `{}` in the derive's table (kv-core/src/lib.rs)",
                    k.name
                ),
                // Options and field markers are documented in their `#[kv(...)]`.
                Place::Option | Place::Field => assert!(
                    DOCS.lines().any(|line| line.contains("#[kv(")
                        && line.split("#[kv(").skip(1).any(|rest| rest
                            .split(')')
                            .next()
                            .is_some_and(|inside| {
                                inside
                                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                                    .any(|word| word == k.name)
                            }))),
                    "`#[kv({} ...)]` is not documented",
                    k.name
                ),
            }
        }
        for row in rows {
            for name in format!("`{row}").split('`').skip(1).step_by(2) {
                assert!(
                    key(name).is_some_and(|k| k.place == Place::Declaration),
                    "the docs' table names `{name}`, which is no declaration key"
                );
            }
        }
    }

    #[test]
    fn dtype_names_equal_kv_cores() {
        let core: Vec<(&str, String)> = DType::ALL
            .iter()
            .map(|d| (d.name(), format!("{d:?}")))
            .collect();
        let derive: Vec<(&str, String)> = DTYPES.iter().map(|(n, v)| (*n, v.to_string())).collect();
        assert_eq!(derive, core);
        for dtype in DType::ALL {
            let whole_bytes = (dtype.bits() % 8 == 0).then(|| dtype.bits() / 8);
            assert_eq!(dtype_bytes(&format!("{dtype:?}")), whole_bytes, "{dtype:?}");
        }
    }

    #[test]
    fn block_format_and_scope_names_equal_kv_cores() {
        let core: Vec<String> = BlockFormat::KNOWN
            .iter()
            .map(|f| f.name().to_string())
            .collect();
        assert_eq!(column(BLOCK_FORMATS), core);
        // The derive names each by its constant, `BlockFormat::Q8_0`.
        for (name, constant) in BLOCK_FORMATS {
            assert_eq!(name.to_uppercase(), *constant);
        }
        let scopes: Vec<(&str, String)> = Scope::ALL
            .iter()
            .map(|s| (s.name(), format!("{s:?}")))
            .collect();
        let derive: Vec<(&str, String)> = SCOPES.iter().map(|(n, v)| (*n, v.to_string())).collect();
        assert_eq!(derive, scopes);
    }

    #[test]
    fn position_policies_equal_kv_cores() {
        assert_eq!(POLICIES.len(), private::POLICIES.len());
        for (policy, (name, core)) in POLICIES.iter().zip(private::POLICIES) {
            assert_eq!(policy.name, name);
            // Inputs 1, 2, ... in the derive's order name kv-core's fields.
            let mut fields = vec![format!("{}: 1", policy.first)];
            for (i, named) in policy.named.iter().enumerate() {
                fields.push(format!("{named}: {}", i + 2));
            }
            let expected = format!("{} {{ {} }}", policy.variant, fields.join(", "));
            assert_eq!(format!("{core:?}"), expected);
        }
    }
}

#[test]
fn a_latent_or_a_state_conflicts_with_a_whole_geometry() {
    for (layout, conflict) in [
        (
            "latent = L, positions = bounded(1, because = \"b\")",
            "`geometry` conflicts with `latent`",
        ),
        ("state = S", "`geometry` conflicts with `state`"),
    ] {
        let output = declaration(&format!("geometry = G, {layout}"));
        assert!(output.contains(conflict), "{layout}: {output}");
    }
}

#[test]
fn field_markers_say_what_is_missing_or_contradictory() {
    let case = |attr: &str| derive_str(&format!("struct M {{ {attr} f: D }}"));
    let no_reason = case("#[kv(skip)]");
    assert_eq!(errors(&no_reason).len(), 1, "{no_reason}");
    assert!(no_reason.contains("`skip` needs `because"), "{no_reason}");
    let no_skip = case("#[kv(because = \"r\")]");
    assert_eq!(errors(&no_skip).len(), 1, "{no_skip}");
    assert!(no_skip.contains("`because` explains a `skip`"), "{no_skip}");
    let both = case("#[kv(child, skip, because = \"r\")]");
    assert_eq!(errors(&both).len(), 1, "{both}");
    assert!(both.contains("either a `child`"), "{both}");
    // A skipped field is neither visited nor checked; a child is visited.
    let skipped = case("#[kv(skip, because = \"r\")]");
    assert!(!skipped.contains("compile_error"), "{skipped}");
    assert!(!skipped.contains("unmarked"), "{skipped}");
    assert!(!skipped.contains("visit_field"), "{skipped}");
    let child = case("#[kv(child)]");
    assert!(
        child.contains("visit_field") && !child.contains("unmarked"),
        "{child}"
    );
    // A misplaced declaration key names both markers; `child` on the struct its own fix.
    let misplaced = case("#[kv(skip, because = \"r\", rows = max_num_seqs)]");
    assert!(
        misplaced.contains("`child` and `skip` stand alone"),
        "{misplaced}"
    );
    let on_struct = derive_str("#[kv(child)] struct S;");
    assert!(
        on_struct.contains("put `#[kv(child)]` on the field"),
        "{on_struct}"
    );
}

/// The top-level parts, split at commas, of the bracketed list after `label`
/// in the `__kv_impl_v0_1!` call of `output`.
fn list_after(output: TokenStream, label: &str) -> Vec<String> {
    let body = output
        .into_iter()
        .find_map(|tree| match tree {
            TokenTree::Group(group) if group.delimiter() == Delimiter::Brace => {
                Some(group.stream())
            }
            _ => None,
        })
        .expect("the macro call's body");
    let mut trees = body.into_iter();
    while let Some(tree) = trees.next() {
        if matches!(&tree, TokenTree::Ident(ident) if ident == label) {
            if let Some(TokenTree::Group(list)) = trees.next() {
                let mut parts = vec![TokenStream::new()];
                for tree in list.stream() {
                    match &tree {
                        TokenTree::Punct(p) if p.as_char() == ',' => parts.push(TokenStream::new()),
                        _ => parts.last_mut().expect("one part").extend([tree]),
                    }
                }
                return parts.iter().map(TokenStream::to_string).collect();
            }
        }
    }
    panic!("no list after `{label}`");
}

#[test]
fn only_the_optional_keys_written_are_emitted_in_the_tables_order() {
    let declaration = |optional: &str| {
        let source = format!(
            "#[kv(name = \"a\", cache = \"c\", layers = 1, kv_heads = 1, head_dim = 1, \
             dtype = bf16, positions = bounded(2, because = \"n\"), scope = request, \
             rows = max_num_seqs{optional})] struct S {{ on: bool }}"
        );
        let output = derive(TokenStream::from_str(&source).expect("lexes"));
        let statics = list_after(output, "static");
        assert_eq!(statics.len(), 1, "{statics:?}");
        statics[0].clone()
    };
    let head = "__kv :: decl (\"a\" , \"c\" , __kv :: Request)";
    let finish = ". bounded_attention (__kv :: geometry (1 , 1 , 1 , __kv :: BF16) , 2 , \"n\" , __kv :: MaxNumSeqs)";
    // None written: no setter, kv-core's defaults stand.
    assert_eq!(declaration(""), format!("{head} {finish}"));
    // Written in any order, emitted in the keys table's: the gate, then the texts.
    let all = ", whole_on_every_rank = \"w\", note = \"n\", on_host = \"h\", \
               assumes = \"a\", only_when = \"on\"";
    assert_eq!(
        declaration(all),
        format!(
            "{head} . only_when (\"on\") . assumes (\"a\") . note (\"n\") . on_host (\"h\") \
             . whole_on_every_rank (\"w\") {finish}"
        )
    );
}

#[test]
fn declarations_are_listed_one_per_comma() {
    let source = "#[kv(name = \"a\", cache = \"c\", layers = 1, kv_heads = 1, head_dim = 1, \
                  dtype = bf16, positions = bounded(N, because = \"n\"), scope = request, \
                  rows = max_num_seqs)] \
                  #[kv(name = \"b\", cache = \"c\", layers = 1, kv_heads = 1, head_dim = 1, \
                  dtype = bf16, positions = bounded(N, because = \"n\"), scope = request, \
                  rows = max_num_seqs)] \
                  #[kv(name = \"c\", cache = \"c\", layers = self.n, kv_heads = 1, head_dim = 1, \
                  dtype = bf16, positions = bounded(N, because = \"n\"), scope = request, \
                  rows = max_num_seqs)] \
                  #[kv(name = \"d\", cache = \"c\", layers = self.n, kv_heads = 1, head_dim = 1, \
                  dtype = bf16, positions = bounded(N, because = \"n\"), scope = request, \
                  rows = max_num_seqs)] \
                  struct S { n: usize }";
    let output = derive(TokenStream::from_str(source).expect("lexes"));
    let statics = list_after(output.clone(), "static");
    assert_eq!(statics.len(), 2, "{statics:?}");
    assert!(statics
        .iter()
        .all(|spec| spec.starts_with("__kv :: decl") && spec.contains(". bounded_attention")));
    let after_load = list_after(output.clone(), "after_load");
    assert_eq!(after_load.len(), 2, "{after_load:?}");
    assert!(after_load
        .iter()
        .all(|decl| decl.starts_with("__kv :: decl") && decl.contains(". after_load_decl")));
    // The checks follow one another, unseparated: three for each const
    // declaration (the count `N`, bytes per position, per row) and one for
    // each after-load one (its const count `N`).
    let checks = list_after(output, "checks");
    assert_eq!(checks.len(), 1, "{checks:?}");
    let count = checks[0].matches("__kv :: check !").count();
    assert_eq!(count, 2 * 3 + 2, "{checks:?}");
}

#[test]
fn a_child_naming_a_type_parameter_is_bound_by_it() {
    let output = derive_str(
        "struct W<M, N: Copy> where N: Default { #[kv(child)] inner: Arc<M>, #[kv(child)] own: Leaf, n: N }",
    );
    let bounds = output
        .split("where [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .unwrap_or_default();
    assert_eq!(
        bounds.trim(),
        "where N : Default , Arc < M > : :: kv_core :: declare :: KvChild",
        "{output}"
    );
    // Inside brackets or parentheses too.
    let nested = derive_str("struct A<M> { #[kv(child)] layers: [M; 2] }");
    assert!(
        nested.contains("where [where [M ; 2] : :: kv_core :: declare :: KvChild]"),
        "{nested}"
    );
}

#[test]
fn a_geometry_part_is_missing_unless_a_whole_layout_replaces_it() {
    let positions = "positions = bounded(1, because = \"b\")";
    let parts = declaration(&format!(
        "kv_heads = 1, head_dim = 1, dtype = bf16, {positions}"
    ));
    assert_eq!(
        errors(&parts),
        [
            "\"missing `layers`: give `layers`, `kv_heads`, `head_dim` and `dtype`, or \
          `geometry = ...` whole (or `latent = ...` for an MLA latent, `state = ...` for \
          recurrent state, `tensors = ...` for tables kept beside the caches)\""
        ],
        "{parts}"
    );
    let whole = declaration(&format!("geometry = G, {positions}"));
    assert!(errors(&whole).is_empty(), "{whole}");
    // Tensors replace the parts and the positions.
    let tensors = declaration("tensors = TABLES");
    assert!(errors(&tensors).is_empty(), "{tensors}");
    let both = declaration(&format!("tensors = TABLES, {positions}"));
    assert_eq!(errors(&both).len(), 1, "{both}");
}

#[test]
fn an_unknown_key_taken_for_a_required_one_is_reported_once() {
    let output = derive_str(
        "#[kv(name = \"n\", cache = \"c\", scope = request, rowz = max_num_seqs, \
         geometry = G, positions = bounded(1, because = \"b\"))] struct S;",
    );
    assert_eq!(
        errors(&output),
        ["\"unknown key `rowz`; did you mean `rows`?\""],
        "{output}"
    );
}

#[test]
fn crate_names_where_kv_core_is() {
    let output = derive_str("#[kv(crate = \"my_kv\")] struct S;");
    assert!(output.starts_with("my_kv :: __kv_impl_v0_1 !"), "{output}");
    assert!(derive_str("struct S;").starts_with(":: kv_core :: __kv_impl_v0_1 !"));
}

#[test]
fn a_blank_text_is_refused() {
    let output = declaration("geometry = G, positions = bounded(2, because = \" \")");
    assert_eq!(
        errors(&output),
        ["\"`because` is blank; say why, or the value cannot be reviewed\""],
        "{output}"
    );
}

#[test]
fn a_type_without_type_or_const_parameters_is_registered_with_static_lifetimes() {
    let registered = |source: &str| {
        let output = derive_str(source);
        output
            .split("register ")
            .nth(1)
            .map(|rest| rest.split(';').next().unwrap_or(rest).trim().to_string())
    };
    assert_eq!(registered("struct S;").as_deref(), Some("S"));
    assert_eq!(
        registered("struct L<'a, 'b> { x: &'a u8, y: &'b u8 }").as_deref(),
        Some("L < 'static , 'static >")
    );
    assert_eq!(registered("struct G<T> { x: T }"), None);
    assert_eq!(registered("struct C<const N: usize> { x: [u8; N] }"), None);
}

#[test]
fn what_is_known_before_load_is_each_const_figure_and_zero_for_the_rest() {
    let after_load = |keys: &str| {
        let source = format!(
            "#[kv(name = \"a\", cache = \"c\", scope = request, kv_heads = 1, head_dim = 1, \
             dtype = bf16, {keys})] struct S {{ n: usize }}"
        );
        let list = list_after(
            derive(TokenStream::from_str(&source).expect("lexes")),
            "after_load",
        );
        assert_eq!(list.len(), 1, "{list:?}");
        let head = "__kv :: decl (\"a\" , \"c\" , __kv :: Request) . after_load_decl ";
        list[0].strip_prefix(head).expect(head).to_string()
    };
    // Rows read after load: the bytes per row are known before.
    assert_eq!(
        after_load(
            "layers = 1, positions = bounded(2, because = \"p\"), \
             rows = fixed(self.n, because = \"r\")"
        ),
        "(2 , \"p\" , __kv :: const_bytes_per_row (__kv :: geometry (1 , 1 , 1 , __kv :: BF16) , 2) \
         , __kv :: after_load_fixed (0 , \"r\"))"
    );
    // The geometry read after load: the positions alone.
    assert_eq!(
        after_load("layers = self.n, positions = bounded(2, because = \"p\"), rows = max_num_seqs"),
        "(2 , \"p\" , 0 , __kv :: MAX_NUM_SEQS)"
    );
    // The positions read after load: neither, though the bound's text is.
    assert_eq!(
        after_load("layers = 1, positions = bounded(self.n, because = \"p\"), rows = max_num_seqs"),
        "(0 , \"p\" , 0 , __kv :: MAX_NUM_SEQS)"
    );
}

#[test]
fn a_layout_other_than_bounded_attention_spells_its_positions() {
    let output = derive(
        TokenStream::from_str(
            "#[kv(name = \"a\", cache = \"c\", scope = request, rows = max_num_seqs, \
             latent = L, positions = bounded(2, because = \"p\"))] struct S;",
        )
        .expect("lexes"),
    );
    assert_eq!(
        list_after(output, "static"),
        ["__kv :: decl (\"a\" , \"c\" , __kv :: Request) \
          . spec (__kv :: latent (L , __kv :: bounded (2 , \"p\")) , __kv :: MaxNumSeqs)"]
    );
}

#[test]
fn a_required_key_left_out_is_reported() {
    let positions = "positions = bounded(1, because = \"b\")";
    let no_cache = derive_str(&format!(
        "#[kv(name = \"n\", scope = request, rows = max_num_seqs, geometry = G, {positions})] struct S;"
    ));
    assert_eq!(
        errors(&no_cache),
        ["\"missing `cache`: say what kind of cache holds this, e.g. `cache = \\\"StaticCache\\\"`\""],
        "{no_cache}"
    );
    // On the struct there is no field to name the declaration after.
    let no_name = derive_str(&format!(
        "#[kv(cache = \"c\", scope = request, rows = max_num_seqs, geometry = G, {positions})] struct S;"
    ));
    assert_eq!(
        errors(&no_name),
        [
            "\"missing `name`: a declaration on the struct needs `name = \\\"...\\\"` \
          (on a field it defaults to the field's name)\""
        ],
        "{no_name}"
    );
}

#[test]
fn a_declaration_on_a_named_field_is_named_after_it() {
    let output = derive(
        TokenStream::from_str(
            "struct S { #[kv(cache = \"c\", scope = request, rows = max_num_seqs, geometry = G, \
             positions = bounded(1, because = \"b\"))] r#window: u8 }",
        )
        .expect("lexes"),
    );
    let statics = list_after(output, "static");
    assert_eq!(statics.len(), 1, "{statics:?}");
    // Without its `r#`.
    assert!(
        statics[0].starts_with("__kv :: decl (\"window\" , \"c\" , __kv :: Request)"),
        "{statics:?}"
    );
}
