//! An unmarked owner is found in a slice, in parentheses, and in a type
//! that a macro passed through (an invisible group).
#![allow(unused_parens)]

use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Layer;

#[derive(ModelLocalKv)]
struct Model {
    slice: Box<[Layer]>,
    parenthesized: Box<(Layer)>,
}

macro_rules! with_field {
    ($ty:ty) => {
        #[derive(ModelLocalKv)]
        struct FromMacro {
            field: $ty,
        }
    };
}

with_field!(Vec<Layer>);

fn main() {}
