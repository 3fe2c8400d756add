//! `#[derive(ModelLocalKv)]`. Depend on `kv-core`, which re-exports this and
//! documents the attributes.
//!
//! A pipeline whose imports all point one way, as thiserror's and serde's
//! stages do: `attr/` reads each `#[kv(...)]` through the one table of keys,
//! `ast` holds the input, `valid` checks the rules across keys into a
//! declaration whose required parts cannot be missing (its kind carries its
//! positions: attention and a latent have them, a state has none), `expand/`
//! generates code. Every error is collected with its span and all are
//! reported at once; the macro never panics on any input.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};

use errors::Errors;

mod ast;
mod attr;
#[cfg(test)]
mod cost;
mod errors;
mod expand;
#[cfg(test)]
mod fuzz;
mod suggest;
#[cfg(test)]
mod tests;
mod types;
mod valid;

#[proc_macro_derive(ModelLocalKv, attributes(kv))]
pub fn derive_model_local_kv(input: TokenStream) -> TokenStream {
    derive(input.into()).into()
}

/// The whole derive on `proc_macro2` tokens, so tests can run it without the
/// compiler: always tokens, either the impls or `compile_error!`s plus
/// fallback impls.
fn derive(input: TokenStream2) -> TokenStream2 {
    let input = match syn::parse2::<syn::DeriveInput>(input) {
        Ok(input) => input,
        Err(error) => return error.to_compile_error(),
    };
    let mut errors = Errors::default();
    let parsed = ast::parse(&input, &mut errors);
    let derive = match &parsed {
        ast::Parsed::Struct(input) => valid::check(input, &mut errors),
        ast::Parsed::NotAStruct(_) => None,
    };
    match (errors.combined(), derive) {
        (None, Some(derive)) => expand::expand(&derive),
        (error, _) => {
            let error = error.unwrap_or_else(|| {
                syn::Error::new(Span::call_site(), "kv-derive: nothing to derive")
            });
            let mut tokens = error.to_compile_error();
            tokens.extend(expand::fallback::fallback(parsed.shell()));
            tokens
        }
    }
}
