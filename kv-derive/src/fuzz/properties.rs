//! The properties: valid inputs derive without errors; mutated ones never
//! panic; plus regressions the fuzzer found, kept as plain tests.

use super::*;

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
        // Literal figures are multiplied while expanding: a product that
        // overflows u64 is the one error a valid grammar can meet.
        let errors = output.matches("compile_error").count();
        prop_assert!(
            errors == output.matches("compile_error ! { \"kv: `").count(),
            "a valid declaration was rejected: {output}\ninput: {source}"
        );
        if errors > 0 {
            return Ok(());
        }
        let declared = output.matches("__kv_out . push (").count()
            + output.matches("__kv :: declare (").count();
        prop_assert_eq!(declared, model.declaration_count(), "input: {}", source);
        let visited = output.matches("__kv :: visit_field (").count()
            + output.matches("__kv :: visit_transparent (").count();
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
