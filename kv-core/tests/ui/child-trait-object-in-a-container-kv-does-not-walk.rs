//! A trait object that declares, held in a container kv does not walk:
//! the error names the way out (`child(with = path)`).
use kv_core::ModelLocalKv;

pub trait Stage: ModelLocalKv {}

pub struct Queue<T>(Vec<T>);

#[derive(ModelLocalKv)]
struct Mimi {
    #[kv(child)]
    stages: Queue<Box<dyn Stage>>,
}

fn main() {}
