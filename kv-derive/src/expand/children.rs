//! How one `#[kv(child)]` field is visited, and what its type may hold for
//! the registry: through kv-core's containers (the common case), through
//! the derive's own way for a tuple of owners and other things, through a
//! trait object asked about at compile time (so that a trait without
//! `ModelLocalKv` as a supertrait is an error that names the line to
//! write), or through the user's function (`child(with = path)`).

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned, ToTokens};

use super::generics::Names;
use super::lifetimes::with_static_lifetimes;
use super::tuples;
use crate::ast::Child;
use crate::types::{krate_text, reaches_trait_objects, trait_name, trait_objects, type_text};

/// The code of one child field.
#[derive(Default)]
pub struct ChildCode {
    /// The statement that visits it.
    pub visit: TokenStream,
    /// Statements naming the owner types it may hold (`__kv_types` in scope).
    pub owner_types: TokenStream,
    /// Items beside the impls (a tuple's marker and impls).
    pub items: TokenStream,
    /// Compile-time checks (a trait object's trait must declare).
    pub checks: TokenStream,
}

/// What the derive knows of the type it expands, for its children.
pub struct Context<'a> {
    pub names: &'a Names,
    /// `Type` or `Type::Variant`, for messages.
    pub owner: String,
    pub krate: &'a syn::Path,
    /// Children are visited at the wrapper's own path.
    pub transparent: bool,
}

/// The code that visits `child` (reached by `access`, an expression of type
/// `&FieldType`) under `segment`; `marker` numbers the tuple markers.
pub fn child_code(
    cx: &Context<'_>,
    child: &Child<'_>,
    access: TokenStream,
    segment: &str,
    marker: &mut usize,
) -> ChildCode {
    let field = (!cx.transparent).then_some(segment);
    let field = match field {
        Some(segment) => quote!(::core::option::Option::Some(#segment)),
        None => quote!(::core::option::Option::None),
    };
    let static_type = with_static_lifetimes(
        child.ty.to_token_stream(),
        &cx.names.types_and_self,
        &cx.names.lifetimes,
    );
    if let Some(with) = &child.with {
        let visit = quote_spanned! {path_span(with)=>
            __kv::visit_with(#with(#access), #field, __kv_visitor);
        };
        let owner_types = static_type.map_or_else(TokenStream::new, |ty| {
            quote! {
                __kv::with_item::<#ty, _, _, _>(#with, |item| {
                    #[allow(unused_imports)]
                    use __kv::{ProbeChild as _, ProbeNothing as _};
                    (&item).owner_types(__kv_types);
                });
            }
        });
        return ChildCode {
            visit,
            owner_types,
            ..ChildCode::default()
        };
    }
    let tuples = tuples::tuples(child.ty, &cx.names.types);
    let objects = trait_objects(child.ty);
    let mut code = ChildCode::default();
    // A trait object may sit unsized in a lock (`Mutex<dyn Pipeline>`):
    // such a field reaches its owners kv-core's `TraitObjects` way.
    let own_way = if !tuples.is_empty() {
        let (via, impls) = tuples::via(&tuples, *marker);
        *marker += 1;
        code.items = impls;
        Some(quote!(#via))
    } else if reaches_trait_objects(child.ty, &cx.names.unsized_types) {
        Some(quote!(__kv::TraitObjects))
    } else {
        None
    };
    let via = own_way.clone().unwrap_or_else(|| quote!(__kv::Owners));
    {
        // Asked, not required: a field that is no `KvChild` is already an
        // error where it is visited. Named as written: this runs inside the
        // impl, where the type's parameters and lifetimes are in scope.
        let ty = child.ty;
        code.owner_types = quote! {
            __kv::element_types(
                {
                    #[allow(unused_imports)]
                    use __kv::NoElementTypes as _;
                    __kv::Element::<#ty, #via>::TYPES
                },
                __kv_types,
            );
        };
    }
    // A trait object in a concrete field (no parameter, no lifetime of the
    // struct's): each trait is asked about at compile time, and the field is
    // visited through what the compiler found, so that a trait without the
    // supertrait is one error in kv's words, not the compiler's.
    let concrete = static_type
        .as_ref()
        .filter(|ty| ty.to_string() == child.ty.to_token_stream().to_string());
    if let (Some(ty), false, true) = (concrete, objects.is_empty(), tuples.is_empty()) {
        let label = format!("{}.{}", cx.owner, child.segment);
        let written = type_text(child.ty.to_token_stream());
        let krate = krate_text(cx.krate);
        let mut dyn_types = Vec::new();
        for object in &objects {
            let Some(name) = trait_name(object) else {
                continue;
            };
            let last = name.rsplit("::").next().unwrap_or(&name).to_owned();
            let object = object.to_token_stream();
            code.checks.extend(quote_spanned! {child.span=>
                __kv::trait_object_child!(#object, #label, #written, #name, #last, #krate);
            });
            dyn_types.push(object);
        }
        code.checks.extend(quote_spanned! {child.span=>
            __kv::walkable_child!(#ty, [#(#dyn_types),*], #label, #written);
        });
        code.visit = quote_spanned! {child.span=>
            __kv::visit_element_field(
                #access,
                #field,
                {
                    #[allow(unused_imports)]
                    use __kv::NoElement as _;
                    __kv::Element::<#ty, __kv::TraitObjects>::VISIT
                },
                __kv_visitor,
            );
        };
        return code;
    }
    code.visit = match (cx.transparent, own_way) {
        (true, None) => {
            quote_spanned! {child.span=> __kv::visit_transparent(#access, __kv_visitor); }
        }
        (true, Some(via)) => {
            quote_spanned! {child.span=> __kv::visit_transparent_via::<#via, _>(#access, __kv_visitor); }
        }
        (false, None) => {
            quote_spanned! {child.span=> __kv::visit_field(#access, #segment, __kv_visitor); }
        }
        (false, Some(via)) => {
            quote_spanned! {child.span=> __kv::visit_field_via::<#via, _>(#access, #segment, __kv_visitor); }
        }
    };
    code
}

/// Where the `with` path is written, for errors about it.
fn path_span(path: &syn::Path) -> Span {
    path.to_token_stream()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |tree: TokenTree| tree.span())
}
