//! The syntax of `#[kv(...)]`: its `key` / `key = value` entries, split at
//! top-level commas.

use proc_macro2::{Delimiter, Group, Ident, Span, TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::Attribute;

use crate::errors::Errors;

/// One `key`, `key = value` or `key(arguments)` inside `#[kv(...)]`.
pub struct Entry {
    pub key: Ident,
    pub value: Option<TokenStream>,
    /// `child(with = path)`'s `with = path`: the arguments of a marker.
    pub args: Option<Group>,
}

/// Splits a token stream at commas that are not inside a group.
pub fn split_top_level(tokens: TokenStream) -> Vec<Vec<TokenTree>> {
    let mut parts = vec![Vec::new()];
    for tree in tokens {
        match &tree {
            TokenTree::Punct(p) if p.as_char() == ',' => parts.push(Vec::new()),
            _ => {
                if let Some(last) = parts.last_mut() {
                    last.push(tree);
                }
            }
        }
    }
    if parts.last().is_some_and(Vec::is_empty) {
        parts.pop(); // a trailing comma
    }
    parts
}

/// Reads the entries of an attribute's argument list.
pub fn parse_entries(tokens: TokenStream, errors: &mut Errors) -> Vec<Entry> {
    let mut entries = Vec::new();
    for part in split_top_level(tokens) {
        let mut trees = part.into_iter();
        let key = match trees.next() {
            Some(TokenTree::Ident(key)) => key,
            Some(other) => {
                errors.push(other.span(), "expected a key, like `rows = max_num_seqs`");
                continue;
            }
            None => {
                errors.push(Span::call_site(), "empty entry: remove the extra comma");
                continue;
            }
        };
        let mut args = None;
        let value = match trees.next() {
            None => None,
            Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Parenthesis => {
                if let Some(extra) = trees.next() {
                    errors.push(
                        extra.span(),
                        format!("unexpected tokens after `{key}(...)`: separate keys with a comma"),
                    );
                    continue;
                }
                args = Some(group);
                None
            }
            Some(TokenTree::Group(group)) => {
                errors.push(
                    group.span(),
                    format!("arguments go in parentheses: `{key}(...)`"),
                );
                continue;
            }
            Some(TokenTree::Punct(eq)) if eq.as_char() == '=' => {
                let value: TokenStream = trees.collect();
                if value.is_empty() {
                    errors.push(eq.span(), format!("expected a value after `{key} =`"));
                    continue;
                }
                Some(value)
            }
            Some(other) => {
                errors.push(other.span(), format!("expected `=` after `{key}`"));
                continue;
            }
        };
        entries.push(Entry { key, value, args });
    }
    entries
}

/// The `#[kv(...)]` attributes among `attrs`.
pub fn kv_attributes(attrs: &[Attribute]) -> impl Iterator<Item = &Attribute> {
    attrs.iter().filter(|a| a.path().is_ident("kv"))
}

/// The entries of one `#[kv(...)]`, or `None` (reported) when it has none
/// or one of them could not be read: what the attribute meant is not
/// guessed at, so one mistyped entry is one error, not a cascade of
/// "missing" keys.
pub fn entries_of(attribute: &Attribute, errors: &mut Errors) -> Option<Vec<Entry>> {
    let tokens = match attribute.meta.require_list() {
        Ok(list) => list.tokens.clone(),
        Err(_) => {
            errors.push_tokens(attribute, "expected `#[kv(...)]`");
            return None;
        }
    };
    if tokens.is_empty() {
        errors.push(
            attribute.span(),
            "empty `#[kv()]`: declare something or remove it",
        );
        return None;
    }
    let before = errors.len();
    let entries = parse_entries(tokens, errors);
    (errors.len() == before).then_some(entries)
}
