//! The impl's header (generics, where clause, the type's name) and the type
//! made concrete, where it can be.

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::Shell;

/// `impl [<generics>] Type<args> where [bounds]; name "Type";`
pub fn header(shell: &Shell<'_>, where_clause: TokenStream) -> TokenStream {
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
pub fn concrete_type(shell: &Shell<'_>) -> Option<TokenStream> {
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
