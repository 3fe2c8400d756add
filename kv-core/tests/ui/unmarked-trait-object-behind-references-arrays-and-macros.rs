//! A trait object is found wherever a field's type puts it: behind a
//! reference, in parentheses, in an array or a slice, and in a type that a
//! macro passed through (an invisible group).
use kv_core::ModelLocalKv;

pub trait NormalModel {}

#[derive(ModelLocalKv)]
struct Shapes<'a> {
    borrowed: &'a dyn NormalModel,
    parenthesized: &'a (dyn NormalModel + Send),
    array: [Box<dyn NormalModel>; 2],
    slice: Box<[Box<dyn NormalModel>]>,
}

macro_rules! with_field {
    ($ty:ty) => {
        #[derive(ModelLocalKv)]
        struct FromMacro {
            field: $ty,
        }
    };
}

with_field!(Box<dyn NormalModel>);

fn main() {}
