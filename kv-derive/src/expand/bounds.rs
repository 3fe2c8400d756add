//! The impl's where clause: the type's own, plus a bound for each child
//! field whose type names a type parameter.

use proc_macro2::TokenStream;
use quote::{quote, ToTokens};

use super::generics::Names;
use crate::types::reaches_trait_objects;
use crate::valid::Derive;

/// The type's where clause, plus `FieldType: KvChild` for each child field
/// whose type names a type parameter (as serde infers its bounds), so that
/// `struct Wrapper<M> { #[kv(child)] inner: Arc<M> }` needs no bound written.
pub fn child_bounds(derive: &Derive<'_>, names: &Names) -> TokenStream {
    let params = &names.types;
    let shell = derive.shell;
    let krate = &shell.krate;
    let mut predicates: Vec<TokenStream> = shell
        .generics
        .where_clause
        .iter()
        .flat_map(|clause| clause.predicates.iter().map(|p| quote!(#p)))
        .collect();
    if !params.is_empty() {
        // A `child(with = path)` field is reached by the user's function,
        // whose own signature bounds what it returns.
        for child in derive.all_children().filter(|child| child.with.is_none()) {
            let ty = child.ty.to_token_stream();
            if mentions_any(&ty, params) {
                // A field holding a trait object is visited kv-core's
                // `TraitObjects` way (see `children.rs`).
                if !reaches_trait_objects(child.ty, &names.unsized_types) {
                    predicates.push(quote!(#ty: #krate::declare::KvChild));
                } else {
                    predicates
                        .push(quote!(#ty: #krate::declare::KvChild<#krate::declare::TraitObjects>));
                }
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
        proc_macro2::TokenTree::Ident(ident) => idents.contains(&ident.to_string()),
        proc_macro2::TokenTree::Group(group) => mentions_any(&group.stream(), idents),
        _ => false,
    })
}
