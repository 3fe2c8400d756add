//! The properties: valid inputs derive without errors; mutated ones never
//! panic; plus regressions the fuzzer found, kept as plain tests.

use super::*;
use proptest::strategy::ValueTree;

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
        // A literal product that overflows u64 is left to kv-core's const
        // checks: the derive rejects nothing the grammar writes.
        prop_assert!(
            !output.contains("compile_error"),
            "a valid declaration was rejected: {output}\ninput: {source}"
        );
        let declared = output.matches("__kv_out . push (").count()
            + output.matches("__kv :: declare (").count();
        prop_assert_eq!(declared, model.declaration_count(), "input: {}", source);
        let visited = output.matches("__kv :: visit_field (").count()
            + output.matches("__kv :: visit_transparent (").count();
        prop_assert_eq!(visited, model.child_count(), "input: {}", source);
        Ok(())
    });
}

/// The grammar is built from the key table; this is the proof that it writes
/// every key, every position policy and every block format (it fails until a
/// new one is fuzzed).
#[test]
fn the_valid_grammar_writes_every_key() {
    let mut runner = TestRunner::new(Config {
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = model_of(STRUCTS);
    let mut keys: Vec<String> = Vec::new();
    let mut values: Vec<String> = Vec::new();
    for _ in 0..400 {
        let model = strategy.new_tree(&mut runner).expect("a model").current();
        let decls = model
            .decls
            .iter()
            .chain(model.fields.iter().flat_map(|f| &f.decls));
        for decl in decls {
            for (key, value) in &decl.entries {
                keys.push(key.clone());
                values.extend(value.clone());
            }
        }
        if decl_named(&model) {
            keys.push("name".into());
        }
        if model.krate.is_some() {
            keys.push("crate".into());
        }
        if model.transparent {
            keys.push("transparent".into());
        }
        for field in &model.fields {
            if field.child {
                keys.push("child".into());
            }
            if field.skip.is_some() {
                keys.extend(["skip".into(), "because".into()]);
            }
        }
    }
    for key in crate::attr::keys::KEYS {
        assert!(
            keys.iter().any(|k| k == key.name),
            "`{}` is never fuzzed",
            key.name
        );
    }
    for policy in crate::attr::tables::POLICIES {
        let call = format!("{}(", policy.name);
        assert!(
            values.iter().any(|v| v.starts_with(&call)),
            "position policy `{}` is never fuzzed",
            policy.name
        );
    }
    for (format, _) in crate::attr::tables::BLOCK_FORMATS
        .iter()
        .chain(crate::attr::tables::DTYPES)
    {
        assert!(
            values.iter().any(|v| v == format),
            "format `{format}` is never fuzzed"
        );
    }
}

/// Whether any declaration is rendered with `name = ...`.
fn decl_named(model: &Model) -> bool {
    !model.decls.is_empty() || model.fields.iter().any(|f| !f.decls.is_empty())
}

#[test]
fn fuzz_unions_are_rejected_with_fallback_impls() {
    const UNIONS: &[Kind] = &[Kind::Union];
    run("unions", 100, model_of(UNIONS), |model| {
        let source = model.render();
        let input = parse(&source);
        let output = run_derive(&input)?;
        check_output(&input, &output)?;
        prop_assert!(
            output.contains("supports structs and enums, not unions"),
            "input: {}",
            source
        );
        prop_assert!(
            output.contains("__kv_impl_v0_1 !"),
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
         scope = request, rows = max_num_seqs, only_when = \"r#type()\")] struct S;",
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
