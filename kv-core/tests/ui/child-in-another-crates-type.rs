//! A `#[kv(child)]` field of a type kv does not walk: the error names
//! `child(with = path)`.
use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Cache;

pub struct Queue<T>(Vec<T>);

#[derive(ModelLocalKv)]
struct Scheduler {
    #[kv(child)]
    waiting: Queue<Cache>,
}

fn main() {}
