//! An unmarked field holding a trait object is an error whatever the trait:
//! one without `ModelLocalKv` as a supertrait hides what it holds (the
//! error gives the line to write); one with it declares (mark the field).
use kv_core::ModelLocalKv;

pub trait NormalModel {}
pub trait Stage: ModelLocalKv {}

#[derive(ModelLocalKv)]
struct Pipeline<'a, T> {
    model: Box<dyn NormalModel + Send + Sync>,
    stages: Vec<Box<dyn Stage + 'a>>,
    // Naming a parameter of the struct: it cannot be asked about here.
    generic: Option<Box<dyn AsRef<T>>>,
    // A fn pointer and `PhantomData` hold nothing.
    callback: fn(&dyn NormalModel),
    marker: std::marker::PhantomData<dyn Stage>,
}

fn main() {}
