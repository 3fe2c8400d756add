//! The check that a field marked neither `child` nor `skip` declares no KV.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned, ToTokens};

use super::generics::Names;
use super::lifetimes::with_static_lifetimes;
use crate::ast::Unmarked;
use crate::types::{held_types, krate_text, trait_name, trait_objects, type_text};

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

/// `__kv::unmarked!(Type, [guards], "Owner.field", "Type as written" [, in
/// "Inner"]);` for each type inside an unmarked field's type that may hold
/// an owner ([`held_types`]): the field's type, or what a container holds
/// (`Vec<Cache>` asks about `Cache`; another crate's `Queue<Cache>` asks
/// about `Queue<Cache>` and `Cache`), each reported only where no type
/// around it (its guards) declares. Spanned from the field's name to the end
/// of its type. A type naming a type or const parameter or `Self` cannot be
/// checked where the struct is defined and is passed over (its lifetimes
/// become `'static`), and so is an inert one.
pub fn unmarked_check(
    names: &Names,
    krate: &syn::Path,
    owner: &str,
    field: &Unmarked<'_>,
) -> TokenStream {
    let label = format!("{owner}.{}", field.segment);
    let whole = field.ty.to_token_stream();
    let Some(end) = whole.clone().into_iter().last().map(|tree| tree.span()) else {
        return TokenStream::new();
    };
    let written = type_text(whole);
    let static_type = |ty: &syn::Type| {
        let tokens = ty.to_token_stream();
        if is_inert(tokens.clone()) {
            return None;
        }
        with_static_lifetimes(tokens, &names.all_and_self, &names.lifetimes)
    };
    let mut checks = trait_object_checks(names, krate, &label, &written, field, end);
    for held in held_types(field.ty) {
        let Some(ty) = static_type(held.ty) else {
            continue;
        };
        // Inside kv's own containers the field's type declares exactly when
        // this type does: "holds `Vec<Cache>`, which declares". Inside
        // another crate's type, the message names the owner found in it.
        let inner = (!held.guards.is_empty()).then(|| {
            let inner = type_text(held.ty.to_token_stream());
            quote!(, in #inner)
        });
        let guards = held.guards.iter().filter_map(|guard| static_type(guard));
        let path = quote_spanned! {field.span=> __kv::unmarked! };
        let args = quote_spanned! {end=> (#ty, [#(#guards),*], #label, #written #inner) };
        checks.extend(quote! { #path #args; });
    }
    checks
}

/// An unmarked field holding a trait object is an error whatever its trait:
/// kv cannot tell what the object holds. Its message depends on the trait,
/// asked at compile time: a trait with `ModelLocalKv` as a supertrait
/// declares (mark the field `child`), any other hides what it holds (add
/// the supertrait). A trait object naming a parameter of the struct cannot
/// be asked about where the struct is defined: its error says both.
fn trait_object_checks(
    names: &Names,
    krate: &syn::Path,
    label: &str,
    written: &str,
    field: &Unmarked<'_>,
    end: Span,
) -> TokenStream {
    let krate = krate_text(krate);
    let mut checks = TokenStream::new();
    let mut seen: Vec<String> = Vec::new();
    for object in trait_objects(field.ty) {
        let Some(name) = trait_name(object) else {
            continue;
        };
        if seen.contains(&name) {
            continue;
        }
        let last = name.rsplit("::").next().unwrap_or(&name).to_owned();
        seen.push(name.clone());
        let path = quote_spanned! {field.span=> __kv::unmarked_trait_object! };
        let args = match with_static_lifetimes(
            object.to_token_stream(),
            &names.all_and_self,
            &names.lifetimes,
        ) {
            Some(object) => {
                quote_spanned! {end=> (#object, #label, #written, #name, #last, #krate) }
            }
            None => quote_spanned! {end=> (_, #label, #written, #name, #last, #krate) },
        };
        checks.extend(quote! { #path #args; });
    }
    checks
}
