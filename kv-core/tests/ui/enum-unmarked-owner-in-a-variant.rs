//! A variant's field is checked as a struct's: an owner left unmarked is an
//! error under the field, named `Type::Variant.field`.
use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Rotating;

#[derive(ModelLocalKv)]
enum LayerCache {
    Normal(Vec<u32>),
    Rotating { cache: Rotating, window: usize },
    Boxed(Box<Rotating>),
}

fn main() {}
