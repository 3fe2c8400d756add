//! Code generation: `ModelLocalKv` (declarations after load, children) and
//! `DeclaredKv` (what the type declares without an instance), plus the
//! compile-time checks of const values.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::{LitStr, Member, Path};

use crate::ast::{DTypeValue, Decl, Input, RowsValue, DTYPES, SCOPES};
use crate::attr::Value;

/// How a value is written: in a `const` (static specs, checks) or in
/// `kv_declare`, where `self` is in scope.
#[derive(Clone, Copy, PartialEq)]
enum Context {
    Const,
    AfterLoad,
}

pub fn expand(input: &Input<'_>) -> TokenStream {
    let krate = &input.krate;
    let ident = input.ident;
    let type_name = ident.to_string();
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let where_clause = child_bounds(input, where_clause);

    let mut static_specs = Vec::new();
    let mut after_load = Vec::new();
    let mut checks = Vec::new();
    let mut declarations = Vec::new();
    for decl in &input.decls {
        let name = decl.name_text().unwrap_or_default();
        let owner_dot_name = format!("{type_name}.{name}");
        let mut static_index = None;
        let push = if decl.is_after_load() {
            after_load.push(after_load_decl(krate, decl, &name));
            let spec = spec(krate, decl, &name, Context::AfterLoad);
            quote! {
                #krate::__private::declare(__kv_out, #type_name, #name, || {
                    ::core::result::Result::Ok(#spec)
                })?;
            }
        } else {
            let index = static_specs.len();
            static_index = Some(index);
            static_specs.push(spec(krate, decl, &name, Context::Const));
            quote! {
                __kv_out.push(<Self as #krate::DeclaredKv>::KV_DECLS.static_specs[#index].clone());
            }
        };
        checks.extend(const_checks(krate, decl, &owner_dot_name, static_index));
        declarations.push(match &decl.only_when {
            Some(gate) => {
                let condition = gate_expression(krate, gate, &input.field_names);
                quote! { if #condition { #push } }
            }
            None => push,
        });
    }

    let children = input.children.iter().map(|child| {
        let member = &child.member;
        let segment = &child.segment;
        if input.transparent.is_some() {
            quote_spanned! {child.span=> #krate::__private::visit_transparent(&self.#member, __kv_visitor); }
        } else {
            quote_spanned! {child.span=> #krate::__private::visit_field(&self.#member, #segment, __kv_visitor); }
        }
    });
    let visit_children = if input.children.is_empty() {
        TokenStream::new()
    } else {
        quote! {
            fn kv_visit_children(&self, __kv_visitor: &mut dyn #krate::ChildVisitor) {
                #(#children)*
            }
        }
    };
    let force_checks = if input.generics.params.is_empty() && !checks.is_empty() {
        // Evaluated by `cargo check` for a concrete type; a generic type's checks
        // are evaluated when `kv_declare` is instantiated.
        quote! { const _: () = <#ident as #krate::DeclaredKv>::__KV_CHECKS; }
    } else {
        TokenStream::new()
    };
    // A generic type has no single set of declarations to register.
    let register = if input.generics.params.is_empty() {
        quote! { #krate::__kv_register!(#ident); }
    } else {
        TokenStream::new()
    };

    quote! {
        #[allow(clippy::all, clippy::pedantic, non_local_definitions)]
        const _: () = {
            #[automatically_derived]
            impl #impl_generics #krate::DeclaredKv for #ident #ty_generics #where_clause {
                const KV_DECLS: #krate::KvTypeDecls = #krate::KvTypeDecls {
                    type_name: #type_name,
                    static_specs: &[#(#static_specs),*],
                    after_load: &[#(#after_load),*],
                };
                #[doc(hidden)]
                const __KV_CHECKS: () = { #(#checks)* };
            }

            #[automatically_derived]
            impl #impl_generics #krate::ModelLocalKv for #ident #ty_generics #where_clause {
                fn kv_declare(
                    &self,
                    __kv_out: &mut #krate::__private::Vec<#krate::KvSpec>,
                ) -> #krate::__private::Result<(), #krate::KvError> {
                    let () = <Self as #krate::DeclaredKv>::__KV_CHECKS;
                    #(#declarations)*
                    ::core::result::Result::Ok(())
                }
                #visit_children
            }

            #force_checks
            #register
        };
    }
}

/// The type's where clause, plus `FieldType: KvChild` for each child field
/// whose type names a type parameter (as serde infers its bounds), so that
/// `struct Wrapper<M> { #[kv(child)] inner: Arc<M> }` needs no bound written.
fn child_bounds(input: &Input<'_>, where_clause: Option<&syn::WhereClause>) -> TokenStream {
    let krate = &input.krate;
    let params: Vec<String> = input
        .generics
        .type_params()
        .map(|param| param.ident.to_string())
        .collect();
    let mut predicates: Vec<TokenStream> = where_clause
        .map(|clause| clause.predicates.iter().map(|p| quote!(#p)).collect())
        .unwrap_or_default();
    for child in &input.children {
        if mentions_any(&child.ty, &params) {
            let ty = &child.ty;
            predicates.push(quote!(#ty: #krate::KvChild));
        }
    }
    if predicates.is_empty() {
        TokenStream::new()
    } else {
        quote!(where #(#predicates),*)
    }
}

fn mentions_any(tokens: &TokenStream, idents: &[String]) -> bool {
    tokens.clone().into_iter().any(|tree| match tree {
        proc_macro2::TokenTree::Ident(ident) => idents.iter().any(|name| ident == name),
        proc_macro2::TokenTree::Group(group) => mentions_any(&group.stream(), idents),
        _ => false,
    })
}

/// Impls that declare nothing, emitted beside the errors so that one mistake
/// does not also report every use of the type as missing the traits.
pub fn fallback(input: &Input<'_>) -> TokenStream {
    let krate = &input.krate;
    let ident = input.ident;
    let type_name = ident.to_string();
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        const _: () = {
            impl #impl_generics #krate::DeclaredKv for #ident #ty_generics #where_clause {
                const KV_DECLS: #krate::KvTypeDecls = #krate::KvTypeDecls {
                    type_name: #type_name,
                    static_specs: &[],
                    after_load: &[],
                };
            }
            impl #impl_generics #krate::ModelLocalKv for #ident #ty_generics #where_clause {
                fn kv_declare(
                    &self,
                    _: &mut #krate::__private::Vec<#krate::KvSpec>,
                ) -> #krate::__private::Result<(), #krate::KvError> {
                    ::core::result::Result::Ok(())
                }
            }
        };
    }
}

/// What is known before load of a declaration with after-load values.
fn after_load_decl(krate: &Path, decl: &Decl, name: &str) -> TokenStream {
    let cache = lit_value(&decl.cache);
    let scope = scope(krate, decl);
    let positions = decl
        .positions
        .as_ref()
        .expect("validated: positions are present");
    let bound = positions.because.value();
    let position_count = (!positions.count.is_after_load())
        .then(|| count(krate, &positions.count, "positions", Context::Const));
    let bytes_per_row = match &position_count {
        Some(position_count) if geometry_is_const(decl) => {
            let geometry = geometry(krate, decl, Context::Const);
            quote! { #krate::__private::const_bytes_per_row(#geometry, #position_count) }
        }
        _ => quote! { ::core::option::Option::None },
    };
    let position_count = optional(position_count);
    let rows = match decl.rows.as_ref().expect("validated: rows are present") {
        RowsValue::MaxNumSeqs => quote! { #krate::AfterLoadRows::MaxNumSeqs },
        RowsValue::Fixed(fixed) => {
            let count = optional(
                (!fixed.count.is_after_load())
                    .then(|| count(krate, &fixed.count, "rows", Context::Const)),
            );
            let because = fixed.because.value();
            quote! { #krate::AfterLoadRows::Fixed { count: #count, because: #because } }
        }
    };
    let only_when = option_text(&decl.only_when);
    let assumes = option_text(&decl.assumes);
    quote! {
        #krate::AfterLoadDecl {
            name: #name,
            cache: #cache,
            scope: #scope,
            positions: #position_count,
            positions_bound: #bound,
            bytes_per_row: #bytes_per_row,
            rows: #rows,
            only_when: #only_when,
            assumes: #assumes,
        }
    }
}

fn optional(tokens: Option<TokenStream>) -> TokenStream {
    match tokens {
        Some(tokens) => quote! { ::core::option::Option::Some(#tokens) },
        None => quote! { ::core::option::Option::None },
    }
}

/// Whether every part of the geometry is literal or const.
fn geometry_is_const(decl: &Decl) -> bool {
    if let Some(geometry) = &decl.geometry {
        return !geometry.is_after_load();
    }
    let parts = [
        &decl.layers,
        &decl.kv_heads,
        &decl.head_dim,
        &decl.v_head_dim,
    ];
    parts
        .iter()
        .all(|part| !part.as_ref().is_some_and(Value::is_after_load))
        && !matches!(&decl.dtype, Some(DTypeValue::Expr(value)) if value.is_after_load())
}

fn scope(krate: &Path, decl: &Decl) -> TokenStream {
    let ident = decl.scope.as_ref().expect("validated: scope is present");
    let variant = variant(SCOPES, &ident.to_string(), ident.span());
    quote! { #krate::Scope::#variant }
}

fn lit_value(lit: &Option<LitStr>) -> String {
    lit.as_ref().map(LitStr::value).unwrap_or_default()
}

/// `Some("text")` or `None`, for the `&'static str` options of `AfterLoadDecl`.
fn option_text(lit: &Option<LitStr>) -> TokenStream {
    optional(lit.as_ref().map(|lit| {
        let text = lit.value();
        quote! { #text }
    }))
}

/// A count as a `u64` expression.
fn count(krate: &Path, value: &Value, key: &str, context: Context) -> TokenStream {
    match value {
        Value::Literal(..) => value.tokens(),
        Value::Const(tokens) => quote_spanned! {value.span()=> ((#tokens) as u64) },
        Value::AfterLoad(tokens) => {
            debug_assert!(context == Context::AfterLoad);
            quote_spanned! {value.span()=> #krate::__private::count(#tokens, #key)? }
        }
    }
}

fn variant(table: &[(&str, &str)], name: &str, span: Span) -> Ident {
    let (_, variant) = table
        .iter()
        .find(|(n, _)| *n == name)
        .expect("names are validated while parsing");
    Ident::new(variant, span)
}

fn geometry(krate: &Path, decl: &Decl, context: Context) -> TokenStream {
    if let Some(value) = &decl.geometry {
        let tokens = value.tokens();
        return match value {
            Value::AfterLoad(_) => {
                quote_spanned! {value.span()=> #krate::__private::geometry(#tokens)? }
            }
            _ => quote_spanned! {value.span()=> (#tokens) },
        };
    }
    let part = |value: &Option<Value>, key: &str| {
        let value = value
            .as_ref()
            .expect("validated: geometry parts are present");
        count(krate, value, key, context)
    };
    let layers = part(&decl.layers, "layers");
    let kv_heads = part(&decl.kv_heads, "kv_heads");
    let head_dim = part(&decl.head_dim, "head_dim");
    let with_v_head_dim = decl.v_head_dim.as_ref().map(|value| {
        let dim = count(krate, value, "v_head_dim", context);
        quote! { .with_v_head_dim(#dim) }
    });
    let dtype = match decl.dtype.as_ref().expect("validated: dtype is present") {
        DTypeValue::Named(ident) => {
            let variant = variant(DTYPES, &ident.to_string(), ident.span());
            quote! { #krate::DType::#variant }
        }
        DTypeValue::Expr(value @ Value::AfterLoad(tokens)) => {
            quote_spanned! {value.span()=> #krate::__private::dtype(#tokens) }
        }
        DTypeValue::Expr(value) => value.tokens(),
    };
    quote! { #krate::Geometry::new(#layers, #kv_heads, #head_dim, #dtype) #with_v_head_dim }
}

fn rows(krate: &Path, decl: &Decl, context: Context) -> TokenStream {
    match decl.rows.as_ref().expect("validated: rows are present") {
        RowsValue::MaxNumSeqs => quote! { #krate::Rows::MaxNumSeqs },
        RowsValue::Fixed(fixed) => {
            let count = count(krate, &fixed.count, "rows", context);
            let because = fixed.because.value();
            quote! { #krate::Rows::fixed(#count, #because) }
        }
    }
}

/// A `KvSpec` through `__private::spec`, a `const fn`: far fewer tokens than
/// a struct literal, which every build pays for (see BENCHMARKS.md).
fn spec(krate: &Path, decl: &Decl, name: &str, context: Context) -> TokenStream {
    let cache = lit_value(&decl.cache);
    let geometry = geometry(krate, decl, context);
    let positions = decl
        .positions
        .as_ref()
        .expect("validated: positions are present");
    let position_count = count(krate, &positions.count, "positions", context);
    let bound = positions.because.value();
    let scope = scope(krate, decl);
    let rows = rows(krate, decl, context);
    // Blank texts are rejected while parsing, so "" can stand for "not given".
    let only_when = lit_value(&decl.only_when);
    let assumes = lit_value(&decl.assumes);
    let note = lit_value(&decl.note);
    quote! {
        #krate::__private::spec(
            #name, #cache, #geometry, #position_count, #bound, #scope, #rows,
            #only_when, #assumes, #note,
        )
    }
}

/// `const` assertions for values written as const expressions: each is positive
/// and fits in u64, and a fully const declaration's bytes fit in u64. A fully
/// const declaration is checked on its entry in `KV_DECLS.static_specs` (at
/// `static_index`) rather than on a second copy of its geometry: the same
/// checks with a fraction of the tokens to generate and compile.
fn const_checks(
    krate: &Path,
    decl: &Decl,
    owner_dot_name: &str,
    static_index: Option<usize>,
) -> Vec<TokenStream> {
    let mut checks = Vec::new();
    let mut counts: Vec<(&str, &Value)> = Vec::new();
    for (key, value) in [
        ("layers", &decl.layers),
        ("kv_heads", &decl.kv_heads),
        ("head_dim", &decl.head_dim),
        ("v_head_dim", &decl.v_head_dim),
    ] {
        if let Some(value) = value {
            counts.push((key, value));
        }
    }
    if let Some(positions) = &decl.positions {
        counts.push(("positions", &positions.count));
    }
    if let Some(RowsValue::Fixed(fixed)) = &decl.rows {
        counts.push(("rows", &fixed.count));
    }
    for (key, value) in counts {
        if let Value::Const(tokens) = value {
            let message = format!(
                "kv: `{owner_dot_name}`: `{key}` must be a positive integer that fits in u64, \
                 but this const expression is zero, negative or too large"
            );
            checks.push(quote_spanned! {value.span()=>
                ::core::assert!((#tokens) > 0 && ((#tokens) as u128) <= (u64::MAX as u128), #message);
            });
        }
    }
    let positions = decl
        .positions
        .as_ref()
        .expect("validated: positions are present");
    // Each product is checked where its last factor is written: bytes per
    // position at the geometry (the attribute when given as parts), bytes per
    // row at the position count, the peak at the fixed row count; in that
    // order, so the error names the first product that overflows.
    let geometry_span = decl.geometry.as_ref().map_or(decl.span, Value::span);
    let zero_geometry = format!(
        "kv: `{owner_dot_name}`: this const geometry has a zero layers, kv_heads, head_dim or v_head_dim"
    );
    let position_overflow = format!(
        "kv: `{owner_dot_name}`: bytes per position overflow u64 (layers x kv_heads x (head_dim + v_head_dim) x dtype)"
    );
    let row_overflow = format!(
        "kv: `{owner_dot_name}`: bytes per row overflow u64 (bytes per position x positions)"
    );
    let peak_overflow =
        format!("kv: `{owner_dot_name}`: peak bytes overflow u64 (rows x bytes per row)");
    // A fully const declaration is checked on its `KV_DECLS` entry; one read
    // after load in part, on its const geometry and positions, where both are.
    let (geometry, bytes_per_row, peak) = match static_index {
        Some(index) => {
            let spec = quote! { <Self as #krate::DeclaredKv>::KV_DECLS.static_specs[#index] };
            (
                quote! { #krate::__private::spec_geometry(&#spec) },
                quote! { #spec.bytes_per_row() },
                Some(quote! { #spec.peak_bytes(1) }),
            )
        }
        None if geometry_is_const(decl) && !positions.count.is_after_load() => {
            let geometry = geometry(krate, decl, Context::Const);
            let position_count = count(krate, &positions.count, "positions", Context::Const);
            let bytes_per_row =
                quote! { #krate::Geometry::bytes_per_row(&#geometry, #position_count) };
            (geometry, bytes_per_row, None)
        }
        None => return checks,
    };
    if decl.geometry.is_some() {
        checks.push(quote_spanned! {geometry_span=>
            ::core::assert!(#krate::__private::geometry_has_no_zero(#geometry), #zero_geometry);
        });
    }
    checks.push(quote_spanned! {geometry_span=>
        ::core::assert!(#krate::Geometry::bytes_per_position(&#geometry).is_ok(), #position_overflow);
    });
    checks.push(quote_spanned! {positions.count.span()=>
        ::core::assert!((#bytes_per_row).is_ok(), #row_overflow);
    });
    if let (Some(peak), Some(RowsValue::Fixed(fixed))) = (peak, &decl.rows) {
        // A fixed count ignores `max_num_seqs`.
        checks.push(quote_spanned! {fixed.count.span()=>
            ::core::assert!((#peak).is_ok(), #peak_overflow);
        });
    }
    checks
}

/// `self.field` when the struct has that field, else `Self::name(self)`; both
/// must be `bool`. Spanned at the string so a name that exists nowhere is
/// reported there.
fn gate_expression(krate: &Path, gate: &LitStr, field_names: &[String]) -> TokenStream {
    let name = gate.value();
    let ident = format_ident!("{}", name, span = gate.span());
    if field_names.contains(&name) {
        let member = Member::Named(ident);
        quote_spanned! {gate.span()=> #krate::__private::gate(self.#member) }
    } else {
        quote_spanned! {gate.span()=> #krate::__private::gate(Self::#ident(self)) }
    }
}
