//! Caches where engines keep them (#34): behind trait objects (mistral.rs's
//! `Box<dyn NormalModel>`, its `Arc<Mutex<dyn Pipeline>>`), in a
//! scheduler's queues (`VecDeque`, `LinkedList`), borrowed (`Cow`), in maps
//! keyed by what is not `Display`, and in another crate's container reached
//! by the user's function (`child(with = path)`). Every one is collected, by
//! the path a person would write.
//!
//! Figures by hand: `Cache` is 2 layers x 2 heads x (8 + 8) dims x 4 B
//! (f32) = 256 B per position, x 16 positions = 4,096 B per row, one row.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, LinkedList, VecDeque};
use std::sync::{Arc, Mutex};

use kv_core::{collect, KvError, ModelLocalKv};

#[derive(ModelLocalKv, Clone)]
#[kv(
    name = "kv", cache = "KvCache", layers = 2, kv_heads = 2, head_dim = 8, dtype = f32,
    positions = bounded(16, because = "max_seq_len"), scope = request,
    rows = fixed(1, because = "one sequence per cache"),
)]
struct Cache {
    /// Gives each cache an address of its own, so none is merged with another.
    _id: u8,
}

const ROW: u64 = 4_096;

fn cache() -> Cache {
    Cache { _id: 0 }
}

fn paths(model: &dyn ModelLocalKv) -> Vec<String> {
    collect(model)
        .entries()
        .iter()
        .map(|entry| entry.full_name())
        .collect()
}

/// mistral.rs's model trait: a supertrait makes its objects owners.
trait NormalModel: ModelLocalKv + Send + Sync {}

#[derive(ModelLocalKv)]
struct Mistral {
    #[kv(child)]
    layers: Vec<Cache>,
}
impl NormalModel for Mistral {}

#[derive(ModelLocalKv)]
struct Pipeline {
    #[kv(child)]
    model: Box<dyn NormalModel>,
    /// The engine's copy, locked: a trait object unsized inside the lock.
    #[kv(child)]
    shared: Arc<Mutex<dyn NormalModel>>,
}

#[test]
fn a_trait_object_is_visited_through_its_trait() {
    let pipeline = Pipeline {
        model: Box::new(Mistral {
            layers: vec![cache(), cache()],
        }),
        shared: Arc::new(Mutex::new(Mistral {
            layers: vec![cache()],
        })),
    };
    assert_eq!(
        paths(&pipeline),
        [
            "model.layers.0.kv",
            "model.layers.1.kv",
            "shared.layers.0.kv"
        ]
    );
    assert_eq!(collect(&pipeline).totals(1).unwrap().total, 3 * ROW);

    // Locked elsewhere: skipped by path, never waited for.
    let held = pipeline.shared.lock().unwrap();
    let collection = collect(&pipeline);
    assert_eq!(collection.entries().len(), 2);
    assert_eq!(collection.skipped()[0].path, "shared");
    assert!(matches!(
        collection.skipped()[0].error,
        KvError::Unreachable { .. }
    ));
    drop(held);
}

/// A generic wrapper whose parameter may be a trait object.
#[derive(ModelLocalKv)]
struct Served<M: ?Sized> {
    #[kv(child)]
    model: Arc<Mutex<M>>,
}

#[test]
fn a_generic_owner_may_be_a_trait_object() {
    let served: Served<dyn NormalModel> = Served {
        model: Arc::new(Mutex::new(Mistral {
            layers: vec![cache()],
        })),
    };
    assert_eq!(paths(&served), ["model.layers.0.kv"]);
    let concrete = Served {
        model: Arc::new(Mutex::new(cache())),
    };
    assert_eq!(paths(&concrete), ["model.kv"]);
}

/// A scheduler's queues: running sequences in a `Vec`, preempted ones in a
/// `VecDeque`, swapped-out ones in a `LinkedList`.
#[derive(ModelLocalKv)]
struct Scheduler<'a> {
    #[kv(child)]
    running: Vec<Cache>,
    #[kv(child)]
    preempted: VecDeque<Cache>,
    #[kv(child)]
    swapped: LinkedList<Cache>,
    #[kv(child)]
    prefix: Cow<'a, [Cache]>,
}

#[test]
fn every_queue_is_counted_not_only_the_first_of_a_type() {
    let shared_prefix = [cache()];
    let scheduler = Scheduler {
        running: vec![cache(), cache()],
        preempted: VecDeque::from([cache(), cache(), cache()]),
        swapped: LinkedList::from([cache()]),
        prefix: Cow::Borrowed(&shared_prefix),
    };
    assert_eq!(
        paths(&scheduler),
        [
            "running.0.kv",
            "running.1.kv",
            "preempted.0.kv",
            "preempted.1.kv",
            "preempted.2.kv",
            "swapped.0.kv",
            "prefix.0.kv",
        ]
    );
    // 7 caches x 4,096 B
    assert_eq!(collect(&scheduler).totals(1).unwrap().total, 28_672);
    let owned = Scheduler {
        running: Vec::new(),
        preempted: VecDeque::new(),
        swapped: LinkedList::new(),
        prefix: Cow::Owned(vec![cache(), cache()]),
    };
    assert_eq!(paths(&owned), ["prefix.0.kv", "prefix.1.kv"]);
}

/// Keys that are not `Display`: an enum, a tuple, a string.
#[derive(Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Group {
    Sliding,
    Full(u8),
}

#[derive(ModelLocalKv)]
struct ByKey {
    #[kv(child)]
    groups: BTreeMap<Group, Cache>,
    #[kv(child)]
    by_request: HashMap<(u32, u32), Cache>,
    #[kv(child)]
    by_name: HashMap<String, Cache>,
}

#[test]
fn a_map_key_is_its_debug_text_and_a_string_key_has_no_quotes() {
    let model = ByKey {
        groups: BTreeMap::from([(Group::Full(3), cache()), (Group::Sliding, cache())]),
        by_request: HashMap::from([((7, 1), cache()), ((2, 0), cache())]),
        by_name: HashMap::from([
            ("draft".to_string(), cache()),
            ("main \"x\"".into(), cache()),
        ]),
    };
    assert_eq!(
        paths(&model),
        [
            // In the map's order.
            "groups.Sliding.kv",
            "groups.Full(3).kv",
            // Hashed: in the order of their text, so reports are stable.
            "by_request.(2, 0).kv",
            "by_request.(7, 1).kv",
            "by_name.draft.kv",
            "by_name.main \\\"x\\\".kv",
        ]
    );
}

/// Another crate's container, reached by the user's function.
mod slab {
    pub struct Slab<T> {
        pub entries: Vec<Option<T>>,
    }

    /// What a `child(with = ..)` function looks like: the owners it holds.
    pub fn occupied(slab: &Slab<super::Cache>) -> impl Iterator<Item = &super::Cache> + '_ {
        slab.entries.iter().flatten()
    }
}

#[derive(ModelLocalKv)]
struct Engine {
    #[kv(child(with = slab::occupied))]
    slots: slab::Slab<Cache>,
    #[kv(child(with = "slab::occupied"))]
    spare: slab::Slab<Cache>,
}

#[test]
fn a_foreign_container_is_visited_through_the_users_function() {
    let engine = Engine {
        slots: slab::Slab {
            entries: vec![Some(cache()), None, Some(cache())],
        },
        spare: slab::Slab {
            entries: vec![None],
        },
    };
    // Indices count what the function returns, not the slab's slots.
    assert_eq!(paths(&engine), ["slots.0.kv", "slots.1.kv"]);
    assert_eq!(collect(&engine).totals(1).unwrap().total, 2 * ROW);
}

/// A transparent wrapper over a foreign container.
#[derive(ModelLocalKv)]
#[kv(transparent)]
struct Wrapped {
    #[kv(child(with = slab::occupied))]
    inner: slab::Slab<Cache>,
}

#[test]
fn a_transparent_wrappers_function_child_is_at_the_wrappers_path() {
    let wrapped = Wrapped {
        inner: slab::Slab {
            entries: vec![Some(cache())],
        },
    };
    assert_eq!(paths(&wrapped), ["0.kv"]);
}

/// A hand-written owner visits a locked trait object with `dyn_field`.
struct HandPipeline {
    shared: Arc<Mutex<dyn NormalModel>>,
}

impl ModelLocalKv for HandPipeline {
    fn kv_declare(&self, _: &mut Vec<kv_core::KvSpec>) -> Result<(), KvError> {
        Ok(())
    }

    fn kv_visit_children(&self, visitor: &mut dyn kv_core::declare::ChildVisitor) {
        visitor.dyn_field("shared", &self.shared);
    }
}

#[test]
fn a_hand_written_owner_visits_a_locked_trait_object() {
    let pipeline = HandPipeline {
        shared: Arc::new(Mutex::new(Mistral {
            layers: vec![cache(), cache()],
        })),
    };
    assert_eq!(
        paths(&pipeline),
        ["shared.layers.0.kv", "shared.layers.1.kv"]
    );
}

/// A `?Sized` parameter inside brackets (an array of boxes) is seen too:
/// the field reaches its owners the trait objects' way.
#[derive(ModelLocalKv)]
struct Pair<M: ?Sized + ModelLocalKv> {
    #[kv(child)]
    models: [Box<M>; 2],
}

#[test]
fn an_unsized_parameter_inside_brackets_is_walked_through_the_trait() {
    let mistral = || Mistral {
        layers: vec![cache()],
    };
    let pair: Pair<dyn NormalModel> = Pair {
        models: [Box::new(mistral()), Box::new(mistral())],
    };
    assert_eq!(
        paths(&pair),
        ["models.0.layers.0.kv", "models.1.layers.0.kv"]
    );
}
