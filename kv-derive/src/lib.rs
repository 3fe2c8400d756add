//! `#[derive(ModelLocalKv)]`. Depend on `kv-core`, which re-exports this.
use proc_macro::TokenStream;

#[proc_macro_derive(ModelLocalKv, attributes(kv))]
pub fn derive_model_local_kv(input: TokenStream) -> TokenStream {
    let _ = input;
    TokenStream::new()
}
