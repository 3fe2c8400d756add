//! A generic struct's fields of concrete types are checked; a field whose
//! type names a type parameter cannot be (see `ui-pass/skip-and-generic-fields.rs`).
use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Decoder;

#[derive(ModelLocalKv)]
struct Wrapper<M> {
    #[kv(child)]
    inner: M,
    decoder: Decoder,
}

fn main() {}
