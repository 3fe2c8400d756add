//! Tuples in a field's type. kv-core visits a tuple of owners, but not one
//! that also holds things that declare nothing (`(Attention, LayerNorm)`,
//! as Whisper's decoder keeps its cross-attention): the model's crate cannot
//! make a `LayerNorm` a `KvChild`. For such a field the derive emits a marker
//! type and, for each tuple in the field's type, an impl of
//! `KvChild<Marker>` that visits the elements that declare (asked per
//! element, where the element's type is concrete) and passes over the rest;
//! kv-core's containers carry the marker through.

use proc_macro2::{Ident, Span, TokenStream, TokenTree};
use quote::{format_ident, quote, ToTokens};
use syn::{GenericArgument, PathArguments, Type, TypeTuple};

/// The non-empty tuples in `ty` where an owner could be held, outermost
/// first: through generic arguments (a map's value only, not its key),
/// arrays, slices, references, parentheses. Empty when `ty` names `Self`
/// or one of `params`, whose tuples cannot be given impls here.
pub fn tuples<'t>(ty: &'t Type, params: &[String]) -> Vec<&'t TypeTuple> {
    let mut found = Vec::new();
    collect(ty, &mut found);
    if found.is_empty() || names_any(ty.to_token_stream(), params) {
        return Vec::new();
    }
    found
}

fn collect<'t>(ty: &'t Type, found: &mut Vec<&'t TypeTuple>) {
    match ty {
        Type::Tuple(tuple) if !tuple.elems.is_empty() => {
            found.push(tuple);
            for element in &tuple.elems {
                collect(element, found);
            }
        }
        Type::Array(array) => collect(&array.elem, found),
        Type::Slice(slice) => collect(&slice.elem, found),
        Type::Reference(reference) => collect(&reference.elem, found),
        Type::Paren(paren) => collect(&paren.elem, found),
        Type::Group(group) => collect(&group.elem, found),
        Type::Path(path) => {
            let Some(last) = path.path.segments.last() else {
                return;
            };
            let PathArguments::AngleBracketed(arguments) = &last.arguments else {
                return;
            };
            let types: Vec<&Type> = arguments
                .args
                .iter()
                .filter_map(|argument| match argument {
                    GenericArgument::Type(ty) => Some(ty),
                    _ => None,
                })
                .collect();
            // A map's key holds no owner the collector visits.
            let is_map = last.ident == "HashMap" || last.ident == "BTreeMap";
            let skip = usize::from(is_map);
            for ty in types.into_iter().skip(skip) {
                collect(ty, found);
            }
        }
        _ => {}
    }
}

/// Whether `tokens` name `Self` or one of `params`.
fn names_any(tokens: TokenStream, params: &[String]) -> bool {
    tokens.into_iter().any(|tree| match tree {
        TokenTree::Ident(ident) => {
            let name = ident.to_string();
            name == "Self" || params.contains(&name)
        }
        TokenTree::Group(group) => names_any(group.stream(), params),
        _ => false,
    })
}

/// The lifetimes `'a` written in `tokens`, each once.
fn lifetimes(tokens: TokenStream, out: &mut Vec<String>) {
    let mut after_tick = false;
    for tree in tokens {
        match &tree {
            TokenTree::Ident(ident) if after_tick => {
                let name = ident.to_string();
                // `'_` cannot stand in a field's type; `'static` is no parameter.
                if name != "static" && !out.contains(&name) {
                    out.push(name);
                }
            }
            TokenTree::Group(group) => lifetimes(group.stream(), out),
            _ => {}
        }
        after_tick = matches!(&tree, TokenTree::Punct(p) if p.as_char() == '\'');
    }
}

/// The marker of child number `index` and the items that make its tuples
/// `KvChild<Marker>`: `(marker, items)`.
pub fn via(tuples: &[&TypeTuple], index: usize) -> (Ident, TokenStream) {
    let marker = format_ident!("__KvVia{}", index);
    let mut items = quote! { struct #marker; };
    let mut seen: Vec<String> = Vec::new();
    for tuple in tuples {
        // The same tuple type twice in one field (`[(A, B); 2]` nested) gets one impl.
        let text = tuple.to_token_stream().to_string();
        if seen.contains(&text) {
            continue;
        }
        seen.push(text);
        let mut names = Vec::new();
        lifetimes(tuple.to_token_stream(), &mut names);
        let generics = names.iter().map(|name| {
            let lifetime = syn::Lifetime::new(&format!("'{name}"), Span::call_site());
            quote!(#lifetime)
        });
        let mut elements = TokenStream::new();
        let mut types = TokenStream::new();
        for (position, element) in tuple.elems.iter().enumerate() {
            let member = syn::Index::from(position);
            // An element with a tuple of its own is reached through this marker too.
            let element_via = if element_has_tuple(element) {
                quote!(#marker)
            } else {
                quote!(__kv::Owners)
            };
            elements.extend(quote! {
                __kv::element(
                    &self.#member,
                    #position,
                    {
                        #[allow(unused_imports)]
                        use __kv::NoElement as _;
                        __kv::Element::<#element, #element_via>::VISIT
                    },
                    __kv_visitor,
                );
            });
            types.extend(quote! {
                __kv::element_types(
                    {
                        #[allow(unused_imports)]
                        use __kv::NoElementTypes as _;
                        __kv::Element::<#element, #element_via>::TYPES
                    },
                    __kv_types,
                );
            });
        }
        items.extend(quote! {
            #[automatically_derived]
            impl<#(#generics),*> __kv::KvChild<#marker> for #tuple {
                fn kv_visit(&self, __kv_visitor: &mut dyn __kv::ChildVisitor) {
                    #elements
                }

                fn kv_owner_types(__kv_types: &mut dyn __kv::OwnerTypes) {
                    #types
                }
            }
        });
    }
    (marker, items)
}

fn element_has_tuple(element: &Type) -> bool {
    let mut found = Vec::new();
    collect(element, &mut found);
    !found.is_empty()
}
