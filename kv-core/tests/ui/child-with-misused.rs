//! `child(with = path)`: its arguments, and a function whose items are no
//! owners.
use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Cache;

pub struct Queue<T>(Vec<T>);

fn lengths(queue: &Queue<Cache>) -> std::slice::Iter<'_, usize> {
    let _ = queue;
    [].iter()
}

#[derive(ModelLocalKv)]
struct Scheduler {
    #[kv(child(using = lengths))]
    a: Queue<Cache>,
    #[kv(child(with = 3))]
    b: Queue<Cache>,
    #[kv(child(with))]
    c: Queue<Cache>,
    #[kv(skip(with = lengths), because = "x")]
    d: Queue<Cache>,
    // Arguments go in parentheses, not brackets.
    #[kv(child[with = lengths])]
    e: Queue<Cache>,
}

#[derive(ModelLocalKv)]
struct NotOwners {
    #[kv(child(with = lengths))]
    waiting: Queue<Cache>,
}

fn main() {}
