//! The expressions of a declaration's values (counts, an attention
//! geometry, storage formats, position policies), written by both
//! `declarations` and `asserts`. Runtime items are named `__kv::...`.

use proc_macro2::{Ident, TokenStream};
use quote::{quote, quote_spanned};

use crate::attr::values::{DTypeValue, PolicyValue, StorageValue, Value};
use crate::valid::Geometry;

/// A count as a `u64` expression.
pub fn count(value: &Value, key: &str) -> TokenStream {
    match value {
        Value::Literal(..) => value.tokens(),
        Value::Const(tokens) => quote_spanned! {value.span()=> ((#tokens) as __kv::u64) },
        Value::AfterLoad(tokens) => quote_spanned! {value.span()=>
            __kv::read_count(
                __kv::IntoCount::into_count(#tokens, #key), #key, ::core::stringify!(#tokens)
            )?
        },
    }
}

/// An attention geometry as a `Geometry` expression.
pub fn geometry(geometry: &Geometry<'_>) -> TokenStream {
    match geometry {
        Geometry::Whole(value @ Value::AfterLoad(tokens)) => quote_spanned! {value.span()=>
            __kv::read_whole(__kv::IntoGeometry::into_geometry(#tokens), ::core::stringify!(#tokens))?
        },
        Geometry::Whole(value) => {
            let tokens = value.tokens();
            quote_spanned! {value.span()=> (#tokens) }
        }
        Geometry::Parts {
            layers,
            kv_heads,
            head_dim,
            v_head_dim,
            dtype,
            kv_format,
            v_format,
        } => {
            let layers = count(layers, "layers");
            let kv_heads = count(kv_heads, "kv_heads");
            let head_dim = count(head_dim, "head_dim");
            let with_v_head_dim = v_head_dim.map(|value| {
                let dim = count(value, "v_head_dim");
                quote! { .with_v_head_dim(#dim) }
            });
            let dtype = match dtype {
                // `kv_format` gives the storage whole; `with_storage` replaces this.
                None => quote! { __kv::U8 },
                Some(DTypeValue::Named(named)) => {
                    let variant = Ident::new(named.variant, named.span);
                    quote! { __kv::#variant }
                }
                Some(DTypeValue::Expr(value @ Value::AfterLoad(tokens))) => {
                    quote_spanned! {value.span()=> __kv::IntoDType::into_dtype(#tokens)? }
                }
                Some(DTypeValue::Expr(value)) => value.tokens(),
            };
            let with_storage = kv_format.map(|format| {
                let storage = storage(format);
                quote! { .with_storage(#storage) }
            });
            let with_v_storage = v_format.map(|format| {
                let storage = storage(format);
                quote! { .with_v_storage(#storage) }
            });
            quote! {
                __kv::geometry(#layers, #kv_heads, #head_dim, #dtype)
                    #with_v_head_dim #with_storage #with_v_storage
            }
        }
    }
}

/// A position policy's `PositionPolicy` value.
pub fn policy(policy: &PolicyValue) -> TokenStream {
    let variant = Ident::new(policy.policy.variant, policy.span);
    let fields = policy.inputs.iter().map(|(field, value)| {
        let field = Ident::new(field, value.span());
        let value = count(value, "positions");
        quote! { #field: #value }
    });
    quote_spanned! {policy.span=> __kv::PositionPolicy::#variant { #(#fields),* } }
}

/// A storage format as a `Storage` expression.
pub fn storage(format: &StorageValue) -> TokenStream {
    match format {
        StorageValue::Dense(named) => {
            let variant = Ident::new(named.variant, named.span);
            quote! { __kv::Storage::Dense(__kv::#variant) }
        }
        StorageValue::Blocks(named) => {
            let constant = Ident::new(named.variant, named.span);
            quote! { __kv::Storage::Blocks(__kv::BlockFormat::#constant) }
        }
        StorageValue::Constant(named) => {
            let constant = Ident::new(named.variant, named.span);
            quote! { __kv::Storage::#constant }
        }
        StorageValue::Expr(value @ Value::AfterLoad(tokens)) => {
            quote_spanned! {value.span()=> __kv::IntoStorage::into_storage(#tokens) }
        }
        StorageValue::Expr(value) => value.tokens(),
    }
}
