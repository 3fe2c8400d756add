//! `#[derive(ModelLocalKv)]`. Depend on `kv-core`, which re-exports this and
//! documents the attributes.
//!
//! The stages follow thiserror and serde: `keys` is the one table of keys
//! (serde's `symbol.rs`, with `Attr<T>` slots), `attr` walks each
//! `#[kv(...)]` through it, `read` reads each value, `ast` holds the input,
//! `valid` checks the rules across keys into a declaration whose required
//! parts cannot be missing (its kind carries its positions: attention and a
//! latent have them, a state has none), `expand` generates code (`checks` its
//! const checks; both write values through `exprs`). Every error is collected with its span and all are reported at
//! once; the macro never panics on any input.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};

mod ast;
mod attr;
mod checks;
#[cfg(test)]
mod cost;
mod expand;
mod exprs;
#[cfg(test)]
mod fuzz;
mod keys;
mod read;
mod suggest;
#[cfg(test)]
mod tests;
mod tuples;
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
            tokens.extend(expand::fallback(parsed.shell()));
            tokens
        }
    }
}

/// Errors collected across all stages, reported together.
#[derive(Default)]
pub(crate) struct Errors(Vec<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, span: Span, message: impl std::fmt::Display) {
        self.0.push(syn::Error::new(span, message));
    }

    /// An error covering all of `tokens` (the whole `-1`, not just the `-`).
    pub(crate) fn push_tokens(
        &mut self,
        tokens: impl quote::ToTokens,
        message: impl std::fmt::Display,
    ) {
        self.0.push(syn::Error::new_spanned(tokens, message));
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    fn combined(self) -> Option<syn::Error> {
        self.0.into_iter().reduce(|mut all, next| {
            all.combine(next);
            all
        })
    }
}
