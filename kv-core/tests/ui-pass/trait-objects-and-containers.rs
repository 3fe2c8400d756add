//! What compiles: trait objects whose trait has `ModelLocalKv` as a
//! supertrait, sized or in a lock, in a concrete or a generic struct; the
//! standard containers engines use; another crate's container through
//! `child(with = path)`, written as a path or as a string.
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, LinkedList, VecDeque};
use std::sync::{Arc, Mutex, RwLock};

use kv_core::ModelLocalKv;

#[derive(ModelLocalKv, Clone)]
#[kv(name = "kv", cache = "KvCache", layers = 2, kv_heads = 2, head_dim = 8, dtype = f32,
     positions = bounded(16, because = "max_seq_len"), scope = request, rows = max_num_seqs)]
pub struct Cache;

pub trait Pipeline: ModelLocalKv + Send {}
impl Pipeline for Cache {}

/// A map key that is neither `Display` nor a string.
#[derive(Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Slot {
    Running(u32),
}

pub struct Queue<T>(Vec<T>);

pub fn queued(queue: &Queue<Cache>) -> impl Iterator<Item = &Cache> + '_ {
    queue.0.iter()
}

mod owners {
    pub fn of(queue: &super::Queue<super::Cache>) -> std::slice::Iter<'_, super::Cache> {
        queue.0.iter()
    }
}

#[derive(ModelLocalKv)]
struct Engine<'a> {
    #[kv(child)]
    boxed: Box<dyn Pipeline>,
    #[kv(child)]
    locked: Arc<Mutex<dyn Pipeline>>,
    #[kv(child)]
    read_mostly: Vec<Arc<RwLock<dyn Pipeline + Sync>>>,
    #[kv(child)]
    preempted: VecDeque<Cache>,
    #[kv(child)]
    linked: LinkedList<Cache>,
    #[kv(child)]
    borrowed: Cow<'a, [Cache]>,
    #[kv(child)]
    by_slot: HashMap<Slot, Cache>,
    #[kv(child)]
    sorted: BTreeMap<Slot, Cache>,
    #[kv(child(with = queued))]
    waiting: Queue<Cache>,
    #[kv(child(with = "owners::of"))]
    swapped: Queue<Cache>,
    #[kv(skip, because = "linear layers hold weights, not caches")]
    proj: Arc<dyn Send + Sync>,
}

/// Generic over what it holds: the bound is inferred, through the trait.
#[derive(ModelLocalKv)]
struct Wrapper<P: ?Sized + Pipeline> {
    #[kv(child)]
    inner: Arc<Mutex<P>>,
}

fn main() {
    let engine = Engine {
        boxed: Box::new(Cache),
        locked: Arc::new(Mutex::new(Cache)),
        read_mostly: vec![Arc::new(RwLock::new(Cache))],
        preempted: VecDeque::from([Cache]),
        linked: LinkedList::from([Cache]),
        borrowed: Cow::Owned(vec![Cache]),
        by_slot: HashMap::from([(Slot::Running(1), Cache)]),
        sorted: BTreeMap::from([(Slot::Running(2), Cache)]),
        waiting: Queue(vec![Cache, Cache]),
        swapped: Queue(vec![Cache]),
        proj: Arc::new(()),
    };
    let names: Vec<String> = kv_core::collect(&engine)
        .entries()
        .iter()
        .map(|e| e.full_name())
        .collect();
    assert_eq!(
        names,
        [
            "boxed.kv",
            "locked.kv",
            "read_mostly.0.kv",
            "preempted.0.kv",
            "linked.0.kv",
            "borrowed.0.kv",
            "by_slot.Running(1).kv",
            "sorted.Running(2).kv",
            "waiting.0.kv",
            "waiting.1.kv",
            "swapped.0.kv",
        ]
    );
    let dynamic: Wrapper<dyn Pipeline> = Wrapper {
        inner: Arc::new(Mutex::new(Cache)),
    };
    assert_eq!(kv_core::collect(&dynamic).entries().len(), 1);
}
