//! The impls emitted beside errors.

use proc_macro2::TokenStream;
use quote::quote;

use super::header::header;
use crate::ast::Shell;

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
