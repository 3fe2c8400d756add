//! Each declaration's code: its `KvSpec` (const, or built after load), what
//! is known of it before load, its gate, and its const checks.

use proc_macro2::{Delimiter, Group, Ident, Span, TokenStream};
use quote::{quote, quote_spanned};

use super::asserts;
use super::exprs::{self, count};
use crate::ast::Shell;
use crate::attr::values::{Named, PositionsValue, RowsValue, Value};
use crate::valid::{Kind, ValidDecl, ValidGate};

/// What the declarations of a type (its own, then each variant's) generate:
/// the const specs, what is known before load of the others, the const
/// checks, each in declaration order.
#[derive(Default)]
pub struct Declarations {
    pub static_specs: Vec<TokenStream>,
    pub after_load: Vec<TokenStream>,
    pub checks: Vec<TokenStream>,
}

impl Declarations {
    /// Adds `decls` and returns the code that declares them in `kv_declare`.
    pub fn push(&mut self, shell: &Shell<'_>, decls: &[ValidDecl<'_>]) -> TokenStream {
        let type_name = &shell.type_name;
        let mut declarations = TokenStream::new();
        for decl in decls {
            let name = &decl.name;
            let mut static_index = None;
            let head = head(decl);
            let push = if decl.is_after_load() {
                self.after_load.push(after_load_decl(decl, head.clone()));
                // In a group, so `quote!` copies a handle, not every token.
                let spec = Group::new(Delimiter::Parenthesis, spec(decl, head));
                quote! { __kv::declare(__kv_out, #type_name, #name, || __kv::Ok #spec)?; }
            } else {
                let index = self.static_specs.len();
                static_index = Some(index);
                self.static_specs.push(spec(decl, head));
                quote! { __kv_out.push(Self::__KV_STATIC[#index].clone()); }
            };
            self.checks.extend(asserts::const_checks(
                decl,
                &format!("{type_name}.{name}"),
                static_index,
            ));
            declarations.extend(match &decl.gate {
                Some(gate) => {
                    let condition = gate_expression(gate);
                    let push = Group::new(Delimiter::Brace, push);
                    quote! { if #condition #push }
                }
                None => push,
            });
        }
        declarations
    }
}

/// What is known before load of a declaration with after-load values;
/// `0` stands for a figure that is not.
fn after_load_decl(decl: &ValidDecl<'_>, head: TokenStream) -> TokenStream {
    let (position_count, bound) = match decl.positions() {
        // A recurrent state's and tensors' bounds are kv-core's own texts,
        // which its tables know.
        None if matches!(decl.kind, Kind::Tensors(_)) => {
            (quote!(0), quote! { __kv::TENSORS_AFTER_LOAD })
        }
        None => (quote!(0), quote! { __kv::NO_POSITIONS }),
        Some(positions) => {
            let text = bound_text(positions);
            let count = match positions {
                _ if positions.is_after_load() => quote!(0),
                PositionsValue::Bounded(counted) => count(&counted.count, "positions"),
                PositionsValue::Policy(policy) => {
                    let policy = exprs::policy(policy);
                    quote! { __kv::policy_count(#policy) }
                }
            };
            (count, quote!(#text))
        }
    };
    let bytes_per_row = match &decl.kind {
        Kind::Attention(geometry, PositionsValue::Bounded(counted))
            if geometry.is_const() && !counted.count.is_after_load() =>
        {
            let geometry = exprs::geometry(geometry);
            quote! { __kv::const_bytes_per_row(#geometry, #position_count) }
        }
        _ => quote!(0),
    };
    let rows = match decl.rows {
        RowsValue::MaxNumSeqs => quote! { __kv::MAX_NUM_SEQS },
        RowsValue::Fixed(fixed) => {
            let count = if fixed.count.is_after_load() {
                quote!(0)
            } else {
                count(&fixed.count, "rows")
            };
            let because = fixed.because.value();
            quote! { __kv::after_load_fixed(#count, #because) }
        }
    };
    quote! { #head.after_load_decl(#position_count, #bound, #bytes_per_row, #rows) }
}

/// `__private_v0_1::decl` with the texts every declaration has, then the
/// optional keys the user wrote, each as kv-core's setter of its name (which
/// states the default of those left out): the gate, then the texts.
fn head(decl: &ValidDecl<'_>) -> TokenStream {
    let name = &decl.name;
    let cache = decl.cache.value();
    let scope = scope(decl.scope);
    let mut head = quote! { __kv::decl(#name, #cache, #scope) };
    if let Some(condition) = gate_text(decl) {
        head.extend(quote! { .only_when(#condition) });
    }
    for (key, text) in &decl.texts {
        let setter = Ident::new(key, Span::call_site());
        let text = text.value();
        head.extend(quote! { .#setter(#text) });
    }
    head
}

/// When the declaration holds, if not always: its gate, and on an enum's
/// variant the variant (`Cache::Rotating and windowed`).
fn gate_text(decl: &ValidDecl<'_>) -> Option<String> {
    match (&decl.variant, &decl.gate) {
        (None, None) => None,
        (None, Some(gate)) => Some(gate.text.clone()),
        (Some(variant), None) => Some(variant.clone()),
        (Some(variant), Some(gate)) => Some(format!("{variant} and {}", gate.text)),
    }
}

fn scope(named: Named) -> TokenStream {
    let variant = Ident::new(named.variant, named.span);
    quote! { __kv::#variant }
}

fn rows(decl: &ValidDecl<'_>) -> TokenStream {
    match decl.rows {
        RowsValue::MaxNumSeqs => quote! { __kv::MaxNumSeqs },
        RowsValue::Fixed(fixed) => {
            let count = count(&fixed.count, "rows");
            let because = fixed.because.value();
            quote! { __kv::fixed(#count, #because) }
        }
    }
}

/// A `KvSpec` through `__private_v0_1::decl` and its `const fn` setters:
/// far fewer tokens than a struct literal, which every build pays for (see
/// BENCHMARKS.md). Attention with `bounded(..)` positions, the most common,
/// has a finisher of its own, with no layout to spell.
fn spec(decl: &ValidDecl<'_>, head: TokenStream) -> TokenStream {
    let rows = rows(decl);
    let layout = match &decl.kind {
        Kind::Attention(geometry, PositionsValue::Bounded(counted)) => {
            let geometry = exprs::geometry(geometry);
            let position_count = count(&counted.count, "positions");
            let bound = counted.because.value();
            return quote! { #head.bounded_attention(#geometry, #position_count, #bound, #rows) };
        }
        Kind::Attention(geometry, positions) => {
            let geometry = exprs::geometry(geometry);
            let positions = positions_expression(positions);
            quote! { __kv::attention(#geometry, #positions) }
        }
        Kind::Latent(value @ Value::AfterLoad(tokens), positions) => {
            let positions = positions_expression(positions);
            quote_spanned! {value.span()=>
                __kv::latent(
                    __kv::read_whole(__kv::IntoLatent::into_latent(#tokens), ::core::stringify!(#tokens))?,
                    #positions,
                )
            }
        }
        Kind::Latent(value, positions) => {
            let tokens = value.tokens();
            let positions = positions_expression(positions);
            quote_spanned! {value.span()=> __kv::latent(#tokens, #positions) }
        }
        Kind::State(value @ Value::AfterLoad(tokens)) => {
            quote_spanned! {value.span()=>
                __kv::state(
                    __kv::read_whole(__kv::IntoState::into_state(#tokens), ::core::stringify!(#tokens))?
                )
            }
        }
        Kind::State(value) => {
            let tokens = value.tokens();
            quote_spanned! {value.span()=> __kv::state(#tokens) }
        }
        Kind::Tensors(value @ Value::AfterLoad(tokens)) => {
            quote_spanned! {value.span()=>
                __kv::tensors(
                    __kv::read_whole(__kv::IntoTensors::into_tensors(#tokens), ::core::stringify!(#tokens))?
                )
            }
        }
        Kind::Tensors(value) => {
            let tokens = value.tokens();
            quote_spanned! {value.span()=> __kv::tensors(#tokens) }
        }
    };
    quote! { #head.spec(#layout, #rows) }
}

/// Positions as a `Positions` expression.
fn positions_expression(positions: &PositionsValue) -> TokenStream {
    match positions {
        PositionsValue::Bounded(counted) => {
            let position_count = count(&counted.count, "positions");
            let bound = counted.because.value();
            quote! { __kv::bounded(#position_count, #bound) }
        }
        PositionsValue::Policy(policy) => {
            let policy = exprs::policy(policy);
            quote! { __kv::policy(#policy) }
        }
    }
}

/// What the positions' bound reads before load.
fn bound_text(positions: &PositionsValue) -> String {
    match positions {
        PositionsValue::Bounded(counted) => counted.because.value(),
        PositionsValue::Policy(policy) => policy.text.clone(),
    }
}

/// `self.field` or `Self::method(self)`; both must be `bool`. Spanned at the
/// string, so a method that does not exist is reported there.
fn gate_expression(gate: &ValidGate) -> TokenStream {
    let ident = &gate.ident;
    let span = ident.span();
    if gate.is_binding {
        quote_spanned! {span=> __kv::gate(*#ident) }
    } else if gate.is_field {
        quote_spanned! {span=> __kv::gate(self.#ident) }
    } else {
        quote_spanned! {span=> __kv::gate(Self::#ident(self)) }
    }
}
