//! Code generation from a [`Derive`]: the values of each declaration, its
//! gate, the children; the fixed text (the `const _` block, the impls, the
//! runtime crate's path) is kv-core's `__kv_impl_v0_1!`, so the macro emits
//! (and rustc re-parses) only what differs per type. Runtime items are named
//! `__kv::...`: the macro_rules imports `$crate::__private_v0_1 as __kv`.

use proc_macro2::{Ident, TokenStream};
use quote::{quote, quote_spanned, ToTokens};

use crate::ast::Shell;
use crate::checks;
use crate::read::{DTypeValue, Named, RowsValue, Value};
use crate::valid::{Derive, Geometry, ValidDecl, ValidGate};

pub fn expand(derive: &Derive<'_>) -> TokenStream {
    let shell = derive.shell;
    let krate = &shell.krate;
    let type_name = &shell.type_name;

    let mut static_specs = Vec::new();
    let mut after_load = Vec::new();
    let mut checks = Vec::new();
    let mut declarations = Vec::new();
    for decl in &derive.decls {
        let name = &decl.name;
        let mut static_index = None;
        let push = if decl.is_after_load() {
            after_load.push(after_load_decl(decl));
            let spec = spec(decl);
            quote! { __kv::declare(__kv_out, #type_name, #name, || __kv::Ok(#spec))?; }
        } else {
            let index = static_specs.len();
            static_index = Some(index);
            static_specs.push(spec(decl));
            quote! { __kv_out.push(Self::__KV_STATIC[#index].clone()); }
        };
        checks.extend(checks::const_checks(
            decl,
            &format!("{type_name}.{name}"),
            static_index,
        ));
        declarations.push(match &decl.gate {
            Some(gate) => {
                let condition = gate_expression(gate);
                quote! { if #condition { #push } }
            }
            None => push,
        });
    }

    // A generic type's checks are evaluated where `kv_declare` is instantiated.
    let evaluate_checks = if checks.is_empty() {
        TokenStream::new()
    } else {
        quote! { let () = <Self as __kv::DeclaredKv>::__KV_CHECKS; }
    };

    let children = derive.children.iter().map(|child| {
        let member = &child.member;
        let segment = &child.segment;
        if derive.transparent {
            quote_spanned! {child.span=> __kv::visit_transparent(&self.#member, __kv_visitor); }
        } else {
            quote_spanned! {child.span=> __kv::visit_field(&self.#member, #segment, __kv_visitor); }
        }
    });
    let children = if derive.children.is_empty() {
        TokenStream::new()
    } else {
        quote! { children (__kv_visitor) { #(#children)* } }
    };
    let concrete = concrete_type(shell);
    // Evaluated by `cargo check` for a concrete type.
    let force_checks = match &concrete {
        Some(ty) if !checks.is_empty() => {
            quote! { check { const _: () = <#ty as __kv::DeclaredKv>::__KV_CHECKS; } }
        }
        _ => TokenStream::new(),
    };
    // A generic type has no single set of declarations to register.
    let register = concrete.map(|ty| quote! { register #ty; });
    let header = header(shell, child_bounds(derive));

    quote! {
        #krate::__kv_impl_v0_1! {
            #header
            static [#(#static_specs),*];
            after_load [#(#after_load),*];
            checks [#(#checks)*];
            fn (self, __kv_out) { #evaluate_checks #(#declarations)* }
            #children
            #force_checks
            #register
        }
    }
}

/// `impl [<generics>] Type<args> where [bounds]; name "Type";`
fn header(shell: &Shell<'_>, where_clause: TokenStream) -> TokenStream {
    let ident = shell.ident;
    let type_name = &shell.type_name;
    let (impl_generics, ty_generics, _) = shell.generics.split_for_impl();
    quote! {
        impl [#impl_generics] #ident #ty_generics where [#where_clause];
        name #type_name;
    }
}

/// The type with `'static` for each lifetime, when it has no type or const
/// parameters: such a type has one set of declarations, checked and
/// registered once.
fn concrete_type(shell: &Shell<'_>) -> Option<TokenStream> {
    let generics = shell.generics;
    if generics.type_params().next().is_some() || generics.const_params().next().is_some() {
        return None;
    }
    let ident = shell.ident;
    let lifetimes = generics.lifetimes().count();
    if lifetimes == 0 {
        return Some(quote!(#ident));
    }
    let statics = (0..lifetimes).map(|_| quote!('static));
    Some(quote!(#ident<#(#statics),*>))
}

/// The type's where clause, plus `FieldType: KvChild` for each child field
/// whose type names a type parameter (as serde infers its bounds), so that
/// `struct Wrapper<M> { #[kv(child)] inner: Arc<M> }` needs no bound written.
fn child_bounds(derive: &Derive<'_>) -> TokenStream {
    let shell = derive.shell;
    let krate = &shell.krate;
    let params: Vec<String> = shell
        .generics
        .type_params()
        .map(|param| param.ident.to_string())
        .collect();
    let mut predicates: Vec<TokenStream> = shell
        .generics
        .where_clause
        .iter()
        .flat_map(|clause| clause.predicates.iter().map(|p| quote!(#p)))
        .collect();
    if !params.is_empty() {
        for child in derive.children {
            let ty = child.ty.to_token_stream();
            if mentions_any(&ty, &params) {
                predicates.push(quote!(#ty: #krate::KvChild));
            }
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
pub fn fallback(shell: &Shell<'_>) -> TokenStream {
    let krate = &shell.krate;
    let where_clause = &shell.generics.where_clause;
    let header = header(shell, quote!(#where_clause));
    quote! {
        #krate::__kv_impl_v0_1! {
            #header
            static [];
            after_load [];
            checks [];
            fn (self, __kv_out) {}
        }
    }
}

/// What is known before load of a declaration with after-load values;
/// `0` and `""` stand for what is not.
fn after_load_decl(decl: &ValidDecl<'_>) -> TokenStream {
    let name = &decl.name;
    let cache = decl.cache.value();
    let scope = scope(decl.scope);
    let positions = &decl.positions;
    let bound = positions.because.value();
    let const_positions = !positions.count.is_after_load();
    let position_count = if const_positions {
        count(&positions.count, "positions")
    } else {
        quote!(0)
    };
    let bytes_per_row = if const_positions && decl.geometry_is_const() {
        let geometry = geometry(decl);
        quote! { __kv::const_bytes_per_row(#geometry, #position_count) }
    } else {
        quote!(0)
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
    let only_when = gate_text(&decl.gate);
    let assumes = text(decl.attrs.assumes.get());
    quote! {
        __kv::after_load_decl(
            #name, #cache, #scope, #position_count, #bound, #bytes_per_row, #rows,
            #only_when, #assumes,
        )
    }
}

/// The gate's text, `""` for none.
fn gate_text(gate: &Option<ValidGate>) -> String {
    gate.as_ref()
        .map_or_else(String::new, |gate| gate.text.clone())
}

/// An optional text's value, `""` for none (blank texts are rejected).
fn text(lit: Option<&syn::LitStr>) -> String {
    lit.map_or_else(String::new, syn::LitStr::value)
}

fn scope(named: Named) -> TokenStream {
    let variant = Ident::new(named.variant, named.span);
    quote! { __kv::#variant }
}

/// A count as a `u64` expression.
pub fn count(value: &Value, key: &str) -> TokenStream {
    match value {
        Value::Literal(..) => value.tokens(),
        Value::Const(tokens) => quote_spanned! {value.span()=> ((#tokens) as __kv::u64) },
        Value::AfterLoad(tokens) => {
            quote_spanned! {value.span()=> __kv::IntoCount::into_count(#tokens, #key)? }
        }
    }
}

/// The geometry as a `Geometry` expression.
pub fn geometry(decl: &ValidDecl<'_>) -> TokenStream {
    match &decl.geometry {
        Geometry::Whole(value @ Value::AfterLoad(tokens)) => {
            quote_spanned! {value.span()=> __kv::IntoGeometry::into_geometry(#tokens)? }
        }
        Geometry::Whole(value) => {
            let tokens = value.tokens();
            quote_spanned! {value.span()=> (#tokens) }
        }
        Geometry::Parts {
            layers,
            kv_heads,
            head_dim,
            v_head_dim,
            dtype,
        } => {
            let layers = count(layers, "layers");
            let kv_heads = count(kv_heads, "kv_heads");
            let head_dim = count(head_dim, "head_dim");
            let with_v_head_dim = v_head_dim.map(|value| {
                let dim = count(value, "v_head_dim");
                quote! { .with_v_head_dim(#dim) }
            });
            let dtype = match dtype {
                DTypeValue::Named(named) => {
                    let variant = Ident::new(named.variant, named.span);
                    quote! { __kv::#variant }
                }
                DTypeValue::Expr(value @ Value::AfterLoad(tokens)) => {
                    quote_spanned! {value.span()=> __kv::IntoDType::into_dtype(#tokens) }
                }
                DTypeValue::Expr(value) => value.tokens(),
            };
            quote! { __kv::geometry(#layers, #kv_heads, #head_dim, #dtype) #with_v_head_dim }
        }
    }
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

/// A `KvSpec` through `__private_v0_1::spec`, a `const fn`: far fewer tokens
/// than a struct literal, which every build pays for (see BENCHMARKS.md).
fn spec(decl: &ValidDecl<'_>) -> TokenStream {
    let name = &decl.name;
    let cache = decl.cache.value();
    let geometry = geometry(decl);
    let position_count = count(&decl.positions.count, "positions");
    let bound = decl.positions.because.value();
    let scope = scope(decl.scope);
    let rows = rows(decl);
    // Blank texts are rejected while parsing, so "" can stand for "not given".
    let only_when = gate_text(&decl.gate);
    let assumes = text(decl.attrs.assumes.get());
    let note = text(decl.attrs.note.get());
    quote! {
        __kv::spec(
            #name, #cache, #geometry, #position_count, #bound, #scope, #rows,
            #only_when, #assumes, #note,
        )
    }
}

/// `self.field` or `Self::method(self)`; both must be `bool`. Spanned at the
/// string, so a method that does not exist is reported there.
fn gate_expression(gate: &ValidGate) -> TokenStream {
    let ident = &gate.ident;
    let span = ident.span();
    if gate.is_field {
        quote_spanned! {span=> __kv::gate(self.#ident) }
    } else {
        quote_spanned! {span=> __kv::gate(Self::#ident(self)) }
    }
}
