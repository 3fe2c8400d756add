//! What a field's type may hold, read from its syntax: the trait objects in
//! it, and the types to ask, once the struct is compiled, whether they
//! declare model-local KV. Nothing here knows what a type implements; the
//! compiler answers that for the checks `expand` writes.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::ToTokens;
use syn::{GenericArgument, PathArguments, Type, TypeTraitObject};

/// Wrappers that own nothing of what they name (`PhantomData<Cache>`, a
/// `Weak` reference to a cache owned elsewhere): no owner is held through them.
const HOLDS_NOTHING: &[&str] = &["PhantomData", "Weak"];

/// The containers kv walks, whose type arguments are what they hold (a
/// field of them holds an owner exactly when an argument does): asked about
/// through their arguments, not as a whole.
const WALKED: &[&str] = &[
    "Option",
    "Vec",
    "VecDeque",
    "LinkedList",
    "Box",
    "Rc",
    "Arc",
    "Mutex",
    "RwLock",
    "RefCell",
    "OnceLock",
    "OnceCell",
    "Cow",
];

/// Maps kv walks by their values; a key holds no owner kv visits.
const MAPS: &[&str] = &["HashMap", "BTreeMap"];

/// The trait objects `ty` holds, outermost first: `dyn Trait` anywhere in
/// it, except behind what holds nothing (`PhantomData`, `Weak`, fn and raw
/// pointers).
pub fn trait_objects(ty: &Type) -> Vec<&TypeTraitObject> {
    let mut found = Vec::new();
    collect_trait_objects(ty, &mut found);
    found
}

fn collect_trait_objects<'t>(ty: &'t Type, found: &mut Vec<&'t TypeTraitObject>) {
    match ty {
        Type::TraitObject(object) => found.push(object),
        Type::Paren(paren) => collect_trait_objects(&paren.elem, found),
        Type::Group(group) => collect_trait_objects(&group.elem, found),
        Type::Reference(reference) => collect_trait_objects(&reference.elem, found),
        Type::Array(array) => collect_trait_objects(&array.elem, found),
        Type::Slice(slice) => collect_trait_objects(&slice.elem, found),
        Type::Tuple(tuple) => tuple
            .elems
            .iter()
            .for_each(|element| collect_trait_objects(element, found)),
        Type::Path(path) if !holds_nothing(path) => type_arguments(path)
            .into_iter()
            .for_each(|argument| collect_trait_objects(argument, found)),
        _ => {}
    }
}

/// The name of a trait object's trait, as written (`NormalModel` in `dyn
/// NormalModel + Send + Sync`, `pipeline::Stage` in `dyn pipeline::Stage`);
/// `None` for one of lifetimes alone, which cannot be written.
pub fn trait_name(object: &TypeTraitObject) -> Option<String> {
    object.bounds.iter().find_map(|bound| match bound {
        syn::TypeParamBound::Trait(bound) => {
            let segments: Vec<String> = bound
                .path
                .segments
                .iter()
                .map(|segment| segment.ident.to_string())
                .collect();
            Some(segments.join("::"))
        }
        _ => None,
    })
}

/// A type inside a field's type to ask whether it declares, and the types
/// around it that are asked too (`guards`): it is reported only where none
/// of them declares, so that one owner is reported once, at the outermost
/// type that declares.
pub struct Held<'t> {
    pub ty: &'t Type,
    pub guards: Vec<&'t Type>,
}

/// The types to ask about in an unmarked field's type: each path type that
/// is not a container kv walks, with, inside another crate's generic type
/// (`SmallVec<[Layer; 4]>`, `Queue<Cache>`), its arguments too; so an owner
/// in a container kv cannot walk is still found. What holds nothing
/// (`PhantomData`, `Weak`, fn and raw pointers) and trait objects (an error
/// of their own) are passed over, and so is a map's key.
pub fn held_types(ty: &Type) -> Vec<Held<'_>> {
    let mut held = Vec::new();
    collect_held(ty, &[], &mut held);
    held
}

fn collect_held<'t>(ty: &'t Type, guards: &[&'t Type], held: &mut Vec<Held<'t>>) {
    match ty {
        Type::Paren(paren) => collect_held(&paren.elem, guards, held),
        Type::Group(group) => collect_held(&group.elem, guards, held),
        Type::Reference(reference) => collect_held(&reference.elem, guards, held),
        Type::Array(array) => collect_held(&array.elem, guards, held),
        Type::Slice(slice) => collect_held(&slice.elem, guards, held),
        Type::Tuple(tuple) => tuple
            .elems
            .iter()
            .for_each(|element| collect_held(element, guards, held)),
        Type::Path(path) => {
            if holds_nothing(path) {
                return;
            }
            let arguments = type_arguments(path);
            let name = last_name(path);
            if path.qself.is_none() && name.as_deref().is_some_and(|n| WALKED.contains(&n)) {
                arguments
                    .into_iter()
                    .for_each(|argument| collect_held(argument, guards, held));
            } else if path.qself.is_none() && name.as_deref().is_some_and(|n| MAPS.contains(&n)) {
                if let Some(value) = arguments.get(1) {
                    collect_held(value, guards, held);
                }
            } else {
                held.push(Held {
                    ty,
                    guards: guards.to_vec(),
                });
                let mut inner = guards.to_vec();
                inner.push(ty);
                arguments
                    .into_iter()
                    .for_each(|argument| collect_held(argument, &inner, held));
            }
        }
        _ => {}
    }
}

fn last_name(path: &syn::TypePath) -> Option<String> {
    path.path
        .segments
        .last()
        .map(|segment| segment.ident.to_string())
}

fn holds_nothing(path: &syn::TypePath) -> bool {
    path.qself.is_none()
        && last_name(path).is_some_and(|name| HOLDS_NOTHING.contains(&name.as_str()))
}

/// The type arguments of a path's last segment (`Cow<'a, B>`: `B`).
fn type_arguments(path: &syn::TypePath) -> Vec<&Type> {
    let Some(last) = path.path.segments.last() else {
        return Vec::new();
    };
    let PathArguments::AngleBracketed(arguments) = &last.arguments else {
        return Vec::new();
    };
    arguments
        .args
        .iter()
        .filter_map(|argument| match argument {
            GenericArgument::Type(ty) => Some(ty),
            _ => None,
        })
        .collect()
}

/// A type as a person writes it (`Box<dyn Trait>`, `&'a T`, `[T; 2]`), for
/// messages: `TokenStream`'s own text spaces every token.
pub fn type_text(tokens: TokenStream) -> String {
    let mut text = String::new();
    let mut word_before = false;
    let mut keyword_before = false;
    let mut tick_before = false;
    for tree in tokens {
        let word = matches!(tree, TokenTree::Ident(_) | TokenTree::Literal(_));
        match &tree {
            TokenTree::Group(group) => {
                // `&mut [T]`, `dyn (A)`, `&'a [T]`; but `Fn(u8)`.
                if keyword_before {
                    text.push(' ');
                }
                let (open, close) = match group.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::Brace => ("{ ", " }"),
                    Delimiter::None => ("", ""),
                };
                text.push_str(open);
                text.push_str(&type_text(group.stream()));
                text.push_str(close);
            }
            TokenTree::Punct(punct) => match punct.as_char() {
                ',' | ';' => {
                    text.push(punct.as_char());
                    text.push(' ');
                }
                '+' | '=' => {
                    text.push(' ');
                    text.push(punct.as_char());
                    text.push(' ');
                }
                other => text.push(other),
            },
            _ => {
                if word && word_before {
                    text.push(' ');
                }
                text.push_str(&tree.to_string());
            }
        }
        word_before = word;
        // A lifetime (`'a`) is spaced from what follows as a keyword is.
        keyword_before = matches!(&tree, TokenTree::Ident(i) if tick_before || ["mut", "dyn", "impl", "const"].iter().any(|k| i == k));
        tick_before = matches!(&tree, TokenTree::Punct(p) if p.as_char() == '\'');
    }
    text
}

/// The runtime crate's path as a user writes it in code (`kv_core`, or the
/// `crate = "..."` given), for messages.
pub fn krate_text(krate: &syn::Path) -> String {
    let text = type_text(krate.to_token_stream());
    text.strip_prefix("::").unwrap_or(&text).to_owned()
}

/// Whether a child of type `ty` reaches its owners kv-core's `TraitObjects`
/// way: it holds a trait object, or names a type parameter that may be
/// unsized (`P: ?Sized`, which may be a trait object).
pub fn reaches_trait_objects(ty: &Type, unsized_params: &[String]) -> bool {
    !trait_objects(ty).is_empty()
        || (!unsized_params.is_empty() && names_any(ty.to_token_stream(), unsized_params))
}

/// Whether `tokens` name one of `idents`.
fn names_any(tokens: TokenStream, idents: &[String]) -> bool {
    tokens.into_iter().any(|tree| match tree {
        TokenTree::Ident(ident) => idents.contains(&ident.to_string()),
        TokenTree::Group(group) => names_any(group.stream(), idents),
        _ => false,
    })
}
