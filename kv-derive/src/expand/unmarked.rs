//! The check that a field marked neither `child` nor `skip` declares no KV.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::{quote, quote_spanned, ToTokens};

use super::generics::Names;
use super::lifetimes::with_static_lifetimes;
use super::tuples;
use crate::ast::Unmarked;

/// Names that cannot make a type hold an owner: primitives, and the standard
/// containers and their paths. A type written with these alone (`u32`,
/// `Option<()>`, `Vec<Vec<f32>>`, `&'a [u8]`) is not checked, to keep the
/// expansion small: no model can implement `KvChild` for it.
const INERT: &[&str] = &[
    "bool",
    "char",
    "str",
    "String",
    "u8",
    "u16",
    "u32",
    "u64",
    "u128",
    "usize",
    "i8",
    "i16",
    "i32",
    "i64",
    "i128",
    "isize",
    "f32",
    "f64",
    "Option",
    "Vec",
    "Box",
    "Rc",
    "Arc",
    "HashMap",
    "BTreeMap",
    "PhantomData",
    "Mutex",
    "RwLock",
    "RefCell",
    "Cell",
    "OnceLock",
    "OnceCell",
    "cell",
    "std",
    "core",
    "alloc",
    "collections",
    "marker",
    "rc",
    "sync",
    "boxed",
    "vec",
    "option",
    "mut",
];

/// Whether every name in `tokens` is inert or a lifetime's.
fn is_inert(tokens: TokenStream) -> bool {
    let mut after_tick = false;
    tokens.into_iter().all(|tree| {
        let inert = match &tree {
            // One `to_string` per name: in a real expansion each is a call
            // into the compiler, and comparing an `Ident` with a `&str` makes one.
            TokenTree::Ident(ident) => after_tick || INERT.contains(&ident.to_string().as_str()),
            TokenTree::Group(group) => is_inert(group.stream()),
            _ => true,
        };
        after_tick = matches!(&tree, TokenTree::Punct(p) if p.as_char() == '\'');
        inert
    })
}

/// `__kv::unmarked!(Type, "Owner.field", "Type as written");`, spanned from
/// the field's name to the end of its type, for a field marked neither
/// `child` nor `skip` whose type can be checked where the struct is defined:
/// one that names no type or const parameter and not `Self` (its lifetimes
/// become `'static`). A field of an inert type is not checked.
pub fn unmarked_check(names: &Names, owner: &str, field: &Unmarked<'_>) -> TokenStream {
    let label = format!("{owner}.{}", field.segment);
    let tuples = tuples::tuples(field.ty, &names.types);
    if tuples.is_empty() {
        return unmarked_type(names, &label, field, field.ty).unwrap_or_default();
    }
    // A tuple holding owners and things that declare nothing is no `KvChild`
    // as a whole, so its elements are asked one by one; every owner a child
    // field could reach is in one of them.
    tuples::leaves(&tuples)
        .into_iter()
        .filter_map(|element| unmarked_type(names, &label, field, element))
        .collect()
}

/// The check that `ty`, in the unmarked `field`, declares no KV.
fn unmarked_type(
    names: &Names,
    label: &str,
    field: &Unmarked<'_>,
    ty: &syn::Type,
) -> Option<TokenStream> {
    let tokens = ty.to_token_stream();
    if is_inert(tokens.clone()) {
        return None;
    }
    let ty = with_static_lifetimes(tokens, &names.all_and_self, &names.lifetimes)?;
    let whole = field.ty.to_token_stream();
    let end = whole.clone().into_iter().last()?.span();
    let written = type_text(whole);
    let path = quote_spanned! {field.span=> __kv::unmarked! };
    let args = quote_spanned! {end=> (#ty, #label, #written) };
    Some(quote! { #path #args; })
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
