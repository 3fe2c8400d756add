//! Inputs the derive once got wrong, accepted now.
#![allow(non_camel_case_types, non_upper_case_globals, dead_code)]
use kv_core::{DType, ModelLocalKv};
use kv_core::declare::DeclaredKv;

// Shadowed primitives: generated code names `::core::primitive` types only.
struct u64;
struct i128;
struct bool;

const my_dtype: DType = DType::BF16;
const LAYERS: usize = 8;

/// A lower-case const of type `DType` is an expression, not a misspelled name.
#[derive(ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "sliding DynamicCache",
    layers = LAYERS,
    kv_heads = 16,
    head_dim = 64,
    dtype = my_dtype,
    positions = bounded(71, because = "sliding_window(72) - 1"),
    scope = request,
    rows = fixed(LAYERS / 8, because = "one"),
)]
struct Decoder;

/// Generic only over lifetimes: registered and checked like a concrete type.
#[derive(ModelLocalKv)]
struct Borrowing<'a, 'b: 'a> {
    #[kv(child)]
    decoder: &'a Decoder,
    name: &'b str,
}

fn main() {
    assert_eq!(
        <Decoder as DeclaredKv>::KV_DECLS.static_specs[0].geometry().map(|g| g.storage.dtype()),
        Some(Some(DType::BF16))
    );
    let decoder = Decoder;
    let borrowing = Borrowing { decoder: &decoder, name: "b" };
    let _ = borrowing.name;
}
