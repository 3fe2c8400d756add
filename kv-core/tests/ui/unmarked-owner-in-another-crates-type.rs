//! An owner inside a type kv does not walk (another crate's queue, a
//! `HashSet`, a `Cell`) is still found in an unmarked field, once per
//! field, at the outermost type that declares.
use std::cell::Cell;
use std::collections::{HashSet, VecDeque};

use kv_core::ModelLocalKv;

#[derive(ModelLocalKv, Clone, Copy, PartialEq, Eq, Hash)]
#[kv(name = "kv", cache = "KvCache", layers = 2, kv_heads = 2, head_dim = 8, dtype = f32,
     positions = bounded(16, because = "max_seq_len"), scope = request, rows = max_num_seqs)]
struct Cache;

/// A container of another crate's, with no impl of kv's traits.
pub struct Queue<T>(Vec<T>);

/// A wrapper that declares (it derives): reported as a whole.
#[derive(ModelLocalKv)]
pub struct Slot<T> {
    #[kv(child)]
    inner: Option<T>,
}

#[derive(ModelLocalKv)]
struct Scheduler {
    #[kv(child)]
    running: Vec<Cache>,
    preempted: VecDeque<Cache>,
    waiting: Queue<Cache>,
    nested: Option<Queue<Vec<Cache>>>,
    set: HashSet<Cache>,
    cell: Cell<Cache>,
    slot: Queue<Slot<Cache>>,
    // A map's key holds nothing kv visits; a `Weak` owns nothing.
    by_cache: std::collections::HashMap<Cache, u8>,
    weak: std::sync::Weak<Cache>,
}

fn main() {}
