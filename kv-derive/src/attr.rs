//! The attribute walk: split one `#[kv(...)]` into `key` / `key = value`
//! entries, look each key up in the table (`keys.rs`) and hand its value to
//! the key's reader, which fills the key's slot.

use proc_macro2::{Ident, Span, TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::Attribute;

use crate::keys::{self, Attrs, Need, Place, KEYS};
use crate::suggest::{closest, or_list};
use crate::Errors;

/// One `key` or `key = value` inside `#[kv(...)]`.
pub struct Entry {
    pub key: Ident,
    pub value: Option<TokenStream>,
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
        let value = match trees.next() {
            None => None,
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
        entries.push(Entry { key, value });
    }
    entries
}

/// The `#[kv(...)]` attributes among `attrs`.
pub fn kv_attributes(attrs: &[Attribute]) -> impl Iterator<Item = &Attribute> {
    attrs.iter().filter(|a| a.path().is_ident("kv"))
}

/// The entries of one `#[kv(...)]`, or `None` (reported) when it has none.
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
    Some(parse_entries(tokens, errors))
}

/// The place of a key, if it is one.
pub fn place_of(entry: &Entry) -> Option<Place> {
    keys::key(&entry.key.to_string()).map(|key| key.place)
}

/// Reads `entries`, written where keys of `place` belong, into `attrs`.
pub fn read(entries: Vec<Entry>, place: Place, attrs: &mut Attrs, errors: &mut Errors) {
    for entry in entries {
        let name = entry.key.to_string();
        let Some(key) = keys::key(&name) else {
            unknown(&entry.key, place, attrs, errors);
            continue;
        };
        if key.place != place {
            let message = match (key.place, place) {
                (_, Place::Field) => {
                    "`child` and `skip` stand alone: put declarations in their own #[kv(...)]"
                        .to_string()
                }
                (Place::Field, _) if name == "child" => {
                    "`child` marks a field: put `#[kv(child)]` on the field that holds the child"
                        .to_string()
                }
                (Place::Field, _) => format!(
                    "`{name}` marks a field: put `#[kv(skip, because = \"...\")]` on the field \
                     whose model-local KV is left out"
                ),
                (Place::Option, _) => format!("`{name}` goes in its own #[kv(...)] on the struct"),
                (Place::Declaration, _) => {
                    format!("`{name}` belongs in a declaration, not among the derive's options")
                }
            };
            errors.push(entry.key.span(), message);
            continue;
        }
        match (key.takes_value(), entry.value) {
            (true, Some(value)) => (key.read)(attrs, &entry.key, value, errors),
            (true, None) => {
                errors.push(
                    entry.key.span(),
                    format!("`{name}` needs a value: {}", key.example),
                );
                attrs.suggested.push(key.name);
            }
            (false, value) => {
                if let Some(value) = value {
                    errors.push(
                        value.span(),
                        format!("`{name}` takes no value: write `#[kv({name})]`"),
                    );
                }
                (key.read)(attrs, &entry.key, TokenStream::new(), errors);
            }
        }
    }
}

/// An unknown key: "did you mean" the closest key of any place, else the
/// list of this place's keys. A required key it is taken for is not also
/// reported missing.
fn unknown(key: &Ident, place: Place, attrs: &mut Attrs, errors: &mut Errors) {
    let text = key.to_string();
    let all: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
    let suggestion = closest(&text, &all);
    let hint = suggestion.map_or_else(String::new, |s| format!("; did you mean `{s}`?"));
    if let Some(suggested) = suggestion.and_then(keys::key) {
        if suggested.need != Need::Optional {
            attrs.suggested.push(suggested.name);
        }
    }
    errors.push(
        key.span(),
        format!(
            "unknown key `{text}`{}",
            or_list(&hint, &keys::names(place))
        ),
    );
}
