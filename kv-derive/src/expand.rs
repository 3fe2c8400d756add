//! Code generation from a [`Derive`]: the values of each declaration, its
//! gate, the children; the fixed text (the `const _` block, the impls, the
//! runtime crate's path) is kv-core's `__kv_impl_v0_1!`, so the macro emits
//! (and rustc re-parses) only what differs per type. Runtime items are named
//! `__kv::...`: the macro_rules imports `$crate::__private_v0_1 as __kv`.
//! This file assembles the impl; each part is written by one file below.

pub mod asserts;
mod bounds;
mod children;
mod declarations;
pub mod exprs;
pub mod fallback;
mod generics;
mod header;
mod lifetimes;
mod tuples;
pub mod unmarked;

use proc_macro2::{Delimiter, Group, TokenStream};
use quote::{format_ident, quote, quote_spanned};

use crate::ast::Child;
use crate::valid::Derive;
use bounds::child_bounds;
use children::{child_code, Context};
use declarations::Declarations;
use generics::Names;
use header::{concrete_type, header};
use unmarked::unmarked_check;

pub fn expand(derive: &Derive<'_>) -> TokenStream {
    let shell = derive.shell;
    let krate = &shell.krate;

    let mut out = Declarations::default();
    let mut declarations = out.push(shell, &derive.body.decls);
    if let Some(variants) = &derive.variants {
        let arms: Vec<TokenStream> = variants
            .iter()
            .filter(|variant| !variant.fields.decls.is_empty())
            .map(|variant| {
                let ident = variant.ident;
                let decls = out.push(shell, &variant.fields.decls);
                // Named fields are bound by name, for values and gates read after load.
                let bindings = variant.fields.named.iter().map(|field| &field.ident);
                quote! { Self::#ident { #(#bindings,)* .. } => { #decls } }
            })
            .collect();
        if !arms.is_empty() {
            declarations.extend(quote! { match self { #(#arms)* _ => {} } });
        }
    }
    let Declarations {
        static_specs,
        after_load,
        checks,
    } = out;

    // A generic type's checks are evaluated where `kv_declare` is instantiated.
    let evaluate_checks = if checks.is_empty() {
        TokenStream::new()
    } else {
        quote! { let () = <Self as __kv::DeclaredKv>::__KV_CHECKS; }
    };

    let names = Names::of(shell);
    let mut items = TokenStream::new();
    let mut markers = 0;
    // What each child field's type may hold, for the registry's start-up check.
    let mut owner_types = TokenStream::new();
    let mut child_checks = TokenStream::new();
    let mut visit = |owner: &str, child: &Child<'_>, access: TokenStream, segment: &str| {
        let cx = Context {
            names: &names,
            owner: owner.to_owned(),
            krate,
            transparent: derive.transparent,
        };
        let code = child_code(&cx, child, access, segment, &mut markers);
        items.extend(code.items);
        owner_types.extend(code.owner_types);
        child_checks.extend(code.checks);
        code.visit
    };
    let mut children: Vec<TokenStream> = derive
        .body
        .children
        .iter()
        .map(|child| {
            let member = &child.member;
            visit(
                &shell.type_name,
                child,
                quote_spanned!(child.span=> &self.#member),
                &child.segment,
            )
        })
        .collect();
    if let Some(variants) = &derive.variants {
        let arms: Vec<TokenStream> = variants
            .iter()
            .filter(|variant| !variant.fields.children.is_empty())
            .map(|variant| {
                let ident = variant.ident;
                let owner = format!("{}::{}", shell.type_name, variant.name);
                let single = variant.fields.children.len() == 1
                    && variant.fields.named.is_empty()
                    && variant.fields.unmarked.is_empty();
                let (bindings, visits): (Vec<_>, Vec<_>) = variant
                    .fields
                    .children
                    .iter()
                    .enumerate()
                    .map(|(index, child)| {
                        let member = &child.member;
                        let binding = format_ident!("__kv_child{}", index, span = child.span);
                        let segment = if single {
                            variant.name.to_owned()
                        } else {
                            format!("{}.{}", variant.name, child.segment)
                        };
                        (
                            quote!(#member: #binding),
                            visit(&owner, child, quote!(#binding), &segment),
                        )
                    })
                    .unzip();
                quote! { Self::#ident { #(#bindings,)* .. } => { #(#visits)* } }
            })
            .collect();
        if !arms.is_empty() {
            children.push(quote! { match self { #(#arms)* _ => {} } });
        }
    }
    let children = if children.is_empty() {
        TokenStream::new()
    } else {
        let children = group(Delimiter::Brace, children, false);
        quote! { children (__kv_visitor) #children }
    };
    let items = if items.is_empty() {
        TokenStream::new()
    } else {
        let items = Group::new(Delimiter::Brace, items);
        quote! { items #items }
    };
    let concrete = concrete_type(shell);
    let mut check = child_checks;
    // Evaluated by `cargo check` for a concrete type.
    if let (Some(ty), false) = (&concrete, checks.is_empty()) {
        check.extend(quote! { const _: () = <#ty as __kv::DeclaredKv>::__KV_CHECKS; });
    }
    for field in derive.body.unmarked {
        check.extend(unmarked_check(&names, krate, &shell.type_name, field));
    }
    for variant in derive.variants.iter().flatten() {
        let owner = format!("{}::{}", shell.type_name, variant.name);
        for field in variant.fields.unmarked {
            check.extend(unmarked_check(&names, krate, &owner, field));
        }
    }
    let force_checks = if check.is_empty() {
        TokenStream::new()
    } else {
        let check = Group::new(Delimiter::Brace, check);
        quote! { check #check }
    };
    // A generic type has no single set of declarations to register.
    let register = concrete.map(|ty| quote! { register #ty; });
    let child_types = if owner_types.is_empty() {
        TokenStream::new()
    } else {
        let owner_types = Group::new(Delimiter::Brace, owner_types);
        quote! { child_types (__kv_types) #owner_types }
    };

    // Built from owned parts, each list in its group: `quote!` would copy
    // every token of what it interpolates.
    let static_specs = group(Delimiter::Bracket, static_specs, true);
    let after_load = group(Delimiter::Bracket, after_load, true);
    let checks = group(Delimiter::Bracket, checks, false);
    let body = group(Delimiter::Brace, vec![evaluate_checks, declarations], false);
    let mut input = header(shell, child_bounds(derive, &names));
    input.extend(quote! {
        static #static_specs;
        after_load #after_load;
        checks #checks;
        fn (self, __kv_out) #body
    });
    input.extend([
        children,
        child_types,
        items,
        force_checks,
        register.unwrap_or_default(),
    ]);
    let input = Group::new(Delimiter::Brace, input);
    quote! { #krate::__kv_impl_v0_1! #input }
}

/// `parts` in a group, moved rather than copied, separated by commas if
/// `commas`.
fn group(delimiter: Delimiter, parts: Vec<TokenStream>, commas: bool) -> Group {
    let mut tokens = TokenStream::new();
    for (index, part) in parts.into_iter().enumerate() {
        if commas && index > 0 {
            tokens.extend(quote!(,));
        }
        tokens.extend(part);
    }
    Group::new(delimiter, tokens)
}
