//! Errors collected across all stages, reported together.

use proc_macro2::Span;

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

    pub(crate) fn combined(self) -> Option<syn::Error> {
        self.0.into_iter().reduce(|mut all, next| {
            all.combine(next);
            all
        })
    }
}
