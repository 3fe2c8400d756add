//! The compile-time checks of const values: each const count is positive and
//! fits in u64, and a declaration's const products (bytes per position, per
//! row, the fixed peak) fit in u64. Each check is spanned where its last
//! factor is written; the messages are kv-core's (`__kv_check_v0_1!`). A
//! declaration whose figures are all literals that fit (`valid` finds
//! which) needs no generated check at all; one that overflows gets kv-core's
//! checks like any const declaration.

use proc_macro2::TokenStream;
use quote::quote_spanned;

use super::exprs::{count, geometry};
use crate::attr::values::{PositionsValue, RowsValue, Value};
use crate::valid::{Geometry, Kind, ValidDecl};

/// `text` with `{` and `}` doubled, for a format string.
fn format_escaped(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        escaped.push(c);
        if c == '{' || c == '}' {
            escaped.push(c);
        }
    }
    escaped
}

/// `const` assertions for `decl`, each a `__kv::check!` (kv-core's
/// `__kv_check_v0_1!`, which holds the messages). A fully const declaration
/// is checked on its entry in `Self::__KV_STATIC` (at `static_index`) rather
/// than on a second copy of its geometry.
pub fn const_checks(
    decl: &ValidDecl<'_>,
    owner_dot_name: &str,
    static_index: Option<usize>,
) -> Vec<TokenStream> {
    let mut checks = Vec::new();
    if decl.literal {
        return checks;
    }
    // The messages are format strings.
    let owner = format_escaped(owner_dot_name);
    let mut counts: Vec<(&str, &Value)> = Vec::new();
    if let Kind::Attention(
        Geometry::Parts {
            layers,
            kv_heads,
            head_dim,
            v_head_dim,
            ..
        },
        _,
    ) = &decl.kind
    {
        counts.extend([
            ("layers", *layers),
            ("kv_heads", *kv_heads),
            ("head_dim", *head_dim),
        ]);
        counts.extend(v_head_dim.map(|value| ("v_head_dim", value)));
    }
    if let Some(positions) = decl.positions() {
        counts.extend(positions.counts());
    }
    if let RowsValue::Fixed(fixed) = decl.rows {
        counts.push(("rows", &fixed.count));
    }
    for (key, value) in counts {
        if let Value::Const(tokens) = value {
            checks.push(quote_spanned! {value.span()=>
                __kv::check!(count #tokens, #owner, #key);
            });
        }
    }
    // A latent, a state or a position policy: checked whole on its static
    // entry by kv-core's own byte math (its dimensions, its policy's inputs).
    let (attention, positions) = match &decl.kind {
        Kind::Attention(attention, PositionsValue::Bounded(bounded)) => (attention, &bounded.count),
        other => {
            if let Some(index) = static_index {
                let span = match other {
                    Kind::Latent(value, _) | Kind::State(value) | Kind::Tensors(value) => {
                        value.span()
                    }
                    Kind::Attention(_, positions) => positions.span(),
                };
                let spec = quote_spanned! {decl.span=> Self::__KV_STATIC[#index] };
                checks.push(quote_spanned! {span=>
                    __kv::check!(valid __kv::spec_has_no_zero(&#spec), #owner);
                });
                checks.push(quote_spanned! {span=>
                    __kv::check!(row __kv::spec_row_fits(&#spec), #owner);
                });
                if let RowsValue::Fixed(fixed) = decl.rows {
                    checks.push(quote_spanned! {fixed.count.span()=>
                        __kv::check!(peak __kv::spec_peak_fits(&#spec), #owner);
                    });
                }
            }
            return checks;
        }
    };
    let (geometry, bytes_per_row, peak) = match static_index {
        Some(index) => {
            let spec = quote_spanned! {decl.span=> Self::__KV_STATIC[#index] };
            (
                quote_spanned! {decl.span=> __kv::spec_geometry(&#spec) },
                quote_spanned! {decl.span=> __kv::spec_row_fits(&#spec) },
                Some(quote_spanned! {decl.span=> __kv::spec_peak_fits(&#spec) }),
            )
        }
        // After load in part: the const geometry and positions, where both are.
        None if attention.is_const() && !positions.is_after_load() => {
            let geometry = geometry(attention);
            let position_count = count(positions, "positions");
            let bytes_per_row =
                quote_spanned! {decl.span=> __kv::row_fits(#geometry, #position_count) };
            (geometry, bytes_per_row, None)
        }
        None => return checks,
    };
    let geometry_span = match attention {
        Geometry::Whole(value) => value.span(),
        Geometry::Parts { .. } => decl.span,
    };
    if let Geometry::Whole(_) = attention {
        checks.push(quote_spanned! {geometry_span=>
            __kv::check!(zero #geometry, #owner);
        });
    }
    checks.push(quote_spanned! {geometry_span=>
        __kv::check!(position #geometry, #owner);
    });
    checks.push(quote_spanned! {positions.span()=>
        __kv::check!(row #bytes_per_row, #owner);
    });
    if let (Some(peak), RowsValue::Fixed(fixed)) = (peak, decl.rows) {
        // A fixed count ignores `max_num_seqs`.
        checks.push(quote_spanned! {fixed.count.span()=>
            __kv::check!(peak #peak, #owner);
        });
    }
    checks
}
