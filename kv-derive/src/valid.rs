//! Rules across keys: what every declaration must say, what cannot be said
//! twice or together. Each broken rule is one error at the offending token.

use crate::ast::{Decl, Input};
use crate::Errors;

pub fn check(input: &Input<'_>, errors: &mut Errors) {
    let mut names: Vec<(String, proc_macro2::Span)> = Vec::new();
    for decl in &input.decls {
        check_declaration(decl, errors);
        if let Some(name) = decl.name_text() {
            let span = decl.name.as_ref().map_or(decl.span, |n| n.span());
            if names.iter().any(|(seen, _)| *seen == name) {
                errors.push(
                    span,
                    format!("duplicate declaration name `{name}` on this type; give each a distinct `name`"),
                );
            } else {
                names.push((name, span));
            }
        }
    }
    if let Some(span) = input.transparent {
        if input.children.is_empty() {
            errors.push(
                span,
                "a transparent wrapper needs a `#[kv(child)]` field to forward to",
            );
        }
    }
}

fn check_declaration(decl: &Decl, errors: &mut Errors) {
    let missing = |key: &str, why: &str, errors: &mut Errors| {
        if !decl.has(key) {
            errors.push(decl.span, format!("missing `{key}`: {why}"));
        }
    };
    match &decl.field {
        None => missing(
            "name",
            "a declaration on the struct needs `name = \"...\"` (on a field it defaults to the field's name)",
            errors,
        ),
        Some((syn::Member::Unnamed(_), _)) => missing(
            "name",
            "a declaration on a tuple field needs `name = \"...\"`",
            errors,
        ),
        Some(_) => {}
    }
    missing(
        "cache",
        "say what kind of cache holds this, e.g. `cache = \"StaticCache\"`",
        errors,
    );
    missing(
        "positions",
        "say how many positions the cache holds and why, e.g. `positions = bounded(2048, because = \"max_cache_len\")`",
        errors,
    );
    missing(
        "scope",
        "one of `invocation`, `request`, `session`, `model`",
        errors,
    );
    missing(
        "rows",
        "`rows = max_num_seqs` or `rows = fixed(N, because = \"...\")`; rows never default to 1, which would silently understate",
        errors,
    );
    if decl.has("geometry") {
        for key in ["layers", "kv_heads", "head_dim", "v_head_dim", "dtype"] {
            if let Some(ident) = decl.given.iter().find(|k| *k == key) {
                errors.push(
                    ident.span(),
                    format!(
                        "`{key}` conflicts with `geometry`: give the geometry whole, or its parts"
                    ),
                );
            }
        }
    } else {
        for key in ["layers", "kv_heads", "head_dim", "dtype"] {
            missing(
                key,
                "give `layers`, `kv_heads`, `head_dim` and `dtype`, or `geometry = ...` whole",
                errors,
            );
        }
    }
}
