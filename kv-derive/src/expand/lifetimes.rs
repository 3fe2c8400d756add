//! A type's lifetimes made `'static`, for types checked or registered where
//! the struct is defined.

use proc_macro2::{Group, Ident, TokenStream, TokenTree};

/// `tokens` with each of `lifetimes` replaced by `'static`, or `None` when
/// they name one of `params`.
pub fn with_static_lifetimes(
    tokens: TokenStream,
    params: &[String],
    lifetimes: &[String],
) -> Option<TokenStream> {
    let mut out = Vec::new();
    let mut after_tick = false;
    for tree in tokens {
        let tree = match tree {
            TokenTree::Ident(ident) if after_tick => {
                if lifetimes.contains(&ident.to_string()) {
                    TokenTree::Ident(Ident::new("static", ident.span()))
                } else {
                    TokenTree::Ident(ident)
                }
            }
            TokenTree::Ident(ident) if params.contains(&ident.to_string()) => return None,
            TokenTree::Group(group) => {
                let inner = with_static_lifetimes(group.stream(), params, lifetimes)?;
                let mut new = Group::new(group.delimiter(), inner);
                new.set_span(group.span());
                TokenTree::Group(new)
            }
            other => other,
        };
        after_tick = matches!(&tree, TokenTree::Punct(p) if p.as_char() == '\'');
        out.push(tree);
    }
    Some(out.into_iter().collect())
}
