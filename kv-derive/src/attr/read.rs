//! The attribute walk: look each entry's key up in the table (`keys.rs`)
//! and hand its value to the key's reader, which fills the key's slot.

use proc_macro2::{Ident, TokenStream};
use syn::spanned::Spanned;

use super::keys::{self, Attrs, Form, Need, Place, KEYS};
use super::syntax::Entry;
use crate::errors::Errors;
use crate::suggest::{closest, or_list};

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
        // Arguments a key does not take are reported, and the key still
        // read, so that it is not also reported missing.
        let args = match (entry.args, key.form) {
            (Some(args), Form::Marker) => args.stream(),
            (Some(args), _) => {
                errors.push(
                    args.span(),
                    format!(
                        "`{name}` takes no arguments in parentheses: {}",
                        key.example
                    ),
                );
                TokenStream::new()
            }
            (None, _) => TokenStream::new(),
        };
        match (key.takes_value(), entry.value) {
            (true, Some(value)) => (key.read)(key, attrs, &entry.key, value, errors),
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
                (key.read)(key, attrs, &entry.key, args, errors);
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
