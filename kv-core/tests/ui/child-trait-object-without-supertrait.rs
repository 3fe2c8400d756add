//! mistral.rs's pipeline holds its model as a trait object: marked
//! `child`, the trait must have `ModelLocalKv` as a supertrait, and the
//! error writes the line.
use kv_core::ModelLocalKv;

pub trait NormalModel {}

mod pipeline {
    pub trait Stage {}
}

#[derive(ModelLocalKv)]
struct Engine {
    #[kv(child)]
    model: Box<dyn NormalModel + Send + Sync>,
    #[kv(child)]
    stages: Vec<std::sync::Arc<std::sync::Mutex<dyn pipeline::Stage + Send>>>,
}

fn main() {}
