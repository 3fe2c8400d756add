//! Owners behind locks, cells and tuples, and enums: every cache a model
//! holds in the shapes real Rust model code uses is reached by the collector.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use kv_core::{collect, KvError, ModelLocalKv};

/// 2 layers x 2 heads x 4 head_dim x 2 (K and V) x 2 B (bf16) = 64 B per
/// position; x 16 positions = 1,024 B per row.
#[derive(ModelLocalKv)]
#[kv(
    name = "kv",
    cache = "concat",
    layers = 2,
    kv_heads = 2,
    head_dim = 4,
    dtype = bf16,
    positions = bounded(16, because = "max_position_embeddings"),
    scope = request,
    rows = fixed(1, because = "one sequence"),
)]
struct Attention {
    _id: u8,
}

fn attention() -> Attention {
    Attention { _id: 0 }
}

/// A norm from another crate: it declares nothing and cannot be a `KvChild`.
struct LayerNorm;

#[derive(ModelLocalKv)]
struct Locked {
    #[kv(child)]
    mutex: Mutex<Attention>,
    #[kv(child)]
    rw: RwLock<Vec<Attention>>,
    #[kv(child)]
    cell: RefCell<Option<Attention>>,
    #[kv(child)]
    shared: Arc<Mutex<Attention>>,
    #[kv(child)]
    once: OnceLock<Attention>,
    #[kv(child)]
    cross_attn: Option<(Attention, LayerNorm)>,
    #[kv(child)]
    pair: (Attention, Attention),
}

fn locked() -> Locked {
    let once = OnceLock::new();
    let _ = once.set(attention());
    Locked {
        mutex: Mutex::new(attention()),
        rw: RwLock::new(vec![attention(), attention()]),
        cell: RefCell::new(Some(attention())),
        shared: Arc::new(Mutex::new(attention())),
        once,
        cross_attn: Some((attention(), LayerNorm)),
        pair: (attention(), attention()),
    }
}

fn paths(model: &dyn ModelLocalKv) -> Vec<String> {
    collect(model)
        .entries()
        .iter()
        .map(|entry| entry.full_name())
        .collect()
}

#[test]
fn owners_behind_locks_cells_and_tuples_are_collected() {
    let model = locked();
    assert_eq!(
        paths(&model),
        [
            "mutex.kv",
            "rw.0.kv",
            "rw.1.kv",
            "cell.kv",
            "shared.kv",
            "once.kv",
            "cross_attn.0.kv",
            "pair.0.kv",
            "pair.1.kv",
        ]
    );
    // 9 caches x 1,024 B.
    assert_eq!(collect(&model).totals(1).unwrap().total, 9_216);
}

#[test]
fn an_empty_once_lock_and_a_none_hold_nothing() {
    let mut model = locked();
    model.once = OnceLock::new();
    model.cross_attn = None;
    assert_eq!(collect(&model).totals(1).unwrap().total, 7 * 1_024);
}

#[test]
fn a_held_lock_and_a_borrowed_cell_are_skipped_by_path_without_waiting() {
    let model = locked();
    let guard = model.mutex.lock().unwrap();
    let borrowed = model.cell.borrow_mut();
    let written = model.rw.write().unwrap();
    let collection = collect(&model);
    drop((guard, borrowed, written));
    assert_eq!(
        collection
            .entries()
            .iter()
            .map(|entry| entry.full_name())
            .collect::<Vec<_>>(),
        [
            "shared.kv",
            "once.kv",
            "cross_attn.0.kv",
            "pair.0.kv",
            "pair.1.kv"
        ]
    );
    let skipped: Vec<(&str, String)> = collection
        .skipped()
        .iter()
        .map(|skipped| (skipped.path.as_str(), skipped.error.to_string()))
        .collect();
    assert_eq!(skipped.len(), 3);
    assert_eq!(skipped[0].0, "mutex");
    assert_eq!(
        skipped[0].1,
        "kv: `mutex` could not be read: its Mutex is locked elsewhere, and kv never waits or \
         panics while collecting; the declarations inside are not counted (collect when the \
         model is not in use, e.g. right after load)"
    );
    assert_eq!(skipped[1].0, "rw");
    assert!(skipped[1]
        .1
        .contains("its RwLock is write-locked elsewhere"));
    assert_eq!(skipped[2].0, "cell");
    assert!(skipped[2]
        .1
        .contains("its RefCell is borrowed mutably elsewhere"));
    assert!(matches!(
        collection.skipped()[0].error,
        KvError::Unreachable {
            container: "Mutex",
            ..
        }
    ));
}

#[test]
fn a_lock_held_by_the_collecting_thread_does_not_deadlock() {
    // The same Arc<Mutex<..>> held twice: the second is reached while the
    // first is not held (siblings), so it is read and counted once.
    #[derive(ModelLocalKv)]
    struct Twice {
        #[kv(child)]
        a: Arc<Mutex<Attention>>,
        #[kv(child)]
        b: Arc<Mutex<Attention>>,
    }
    let shared = Arc::new(Mutex::new(attention()));
    let model = Twice {
        a: Arc::clone(&shared),
        b: shared,
    };
    assert_eq!(paths(&model), ["a.kv"]);
    // Held by this very thread while collecting: skipped, not a deadlock.
    let guard = model.a.lock().unwrap();
    let collection = collect(&model);
    drop(guard);
    assert!(collection.entries().is_empty());
    assert_eq!(collection.skipped().len(), 2);
}

#[test]
fn a_poisoned_lock_is_read_and_said() {
    let model = locked();
    let shared = Arc::clone(&model.shared);
    let _ = std::thread::spawn(move || {
        let _guard = shared.lock().unwrap();
        panic!("poison it");
    })
    .join();
    assert!(model.shared.is_poisoned());
    let collection = collect(&model);
    assert_eq!(collection.entries().len(), 9);
    assert_eq!(collection.poisoned(), ["shared"]);
    assert!(collection.skipped().is_empty());
    let report = collection.report(1).to_string();
    assert!(
        report.ends_with(
            "\n  read through a poisoned lock: `shared` (a thread panicked while holding it; \
             its declarations are counted)"
        ),
        "{report}"
    );
    assert_eq!(
        collection.to_json(1)["poisoned"],
        serde_json::json!(["shared"])
    );
}

/// A rotating cache: 8 positions instead of 16, 512 B per row.
#[derive(ModelLocalKv)]
#[kv(
    name = "kv",
    cache = "rotating",
    layers = 2,
    kv_heads = 2,
    head_dim = 4,
    dtype = bf16,
    positions = bounded(8, because = "sliding_window"),
    scope = request,
    rows = fixed(1, because = "one sequence"),
)]
struct Rotating;

/// Gemma 3's per-layer cache, in an enum: a normal and a rotating variant.
#[derive(ModelLocalKv)]
enum LayerCache {
    Normal(#[kv(child)] Attention),
    Rotating {
        #[kv(child)]
        cache: Rotating,
        window: usize,
    },
    /// Declares in the variant itself, its positions read from its field.
    #[kv(
        name = "own",
        cache = "static",
        layers = 1,
        kv_heads = 1,
        head_dim = 8,
        dtype = f32,
        positions = bounded(window, because = "window"),
        scope = request,
        rows = max_num_seqs,
        only_when = "enabled",
    )]
    Own {
        window: usize,
        enabled: bool,
    },
    Empty,
}

#[derive(ModelLocalKv)]
struct Decoder {
    #[kv(child)]
    layers: Vec<LayerCache>,
}

#[test]
fn an_enum_counts_its_live_variant() {
    let model = Decoder {
        layers: vec![
            LayerCache::Normal(attention()),
            LayerCache::Rotating {
                cache: Rotating,
                window: 8,
            },
            LayerCache::Own {
                window: 3,
                enabled: true,
            },
            LayerCache::Own {
                window: 3,
                enabled: false,
            },
            LayerCache::Empty,
        ],
    };
    assert_eq!(
        paths(&model),
        [
            "layers.0.Normal.kv",
            "layers.1.Rotating.cache.kv",
            "layers.2.own"
        ]
    );
    let collection = collect(&model);
    // 1,024 + 512 + 1 layer x 1 head x 8 x 2 (K, V) x 4 B x 3 positions (192) x 2 seqs.
    assert_eq!(collection.totals(2).unwrap().total, 1_024 + 512 + 192 * 2);
    assert_eq!(
        collection.entries()[2].spec.only_when.as_deref(),
        Some("LayerCache::Own and enabled")
    );
    let _ = match &model.layers[1] {
        LayerCache::Rotating { window, .. } => *window,
        _ => 0,
    };
}

#[test]
fn an_enums_declarations_are_known_before_load() {
    use kv_core::declare::DeclaredKv;
    let decls = LayerCache::KV_DECLS;
    assert_eq!(decls.type_name, "LayerCache");
    assert!(decls.static_specs.is_empty());
    assert_eq!(decls.after_load.len(), 1);
    assert_eq!(decls.after_load[0].name, "own");
    assert_eq!(
        decls.after_load[0].only_when,
        Some("LayerCache::Own and enabled")
    );
}

/// A key of a map: annotated, so that a key tuple holding it would be
/// taken for an unmarked owner if the derive looked into keys.
#[derive(ModelLocalKv, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[kv(
    name = "kv",
    cache = "key",
    layers = 1,
    kv_heads = 1,
    head_dim = 1,
    dtype = f32,
    positions = bounded(1, because = "one"),
    scope = request,
    rows = fixed(1, because = "one"),
)]
struct Key;

/// The field's tuple arrives through a macro's `$ty`, as a `Type::Group`.
macro_rules! held_through_a_macro {
    ($name:ident, $ty:ty) => {
        #[derive(ModelLocalKv)]
        struct $name {
            #[kv(child)]
            held: Option<$ty>,
        }
    };
}

held_through_a_macro!(FromMacro, (Attention, LayerNorm));

/// Tuples wherever a field's type can hold them.
#[derive(ModelLocalKv)]
#[allow(unused_parens)]
struct TuplesEverywhere<'a> {
    #[kv(child)]
    array: [(Attention, LayerNorm); 2],
    #[kv(child)]
    slice: Box<[(Attention, LayerNorm)]>,
    #[kv(child)]
    reference: &'a [(Attention, LayerNorm)],
    #[kv(child)]
    paren: Option<((Attention, LayerNorm))>,
    #[kv(child)]
    map: std::collections::BTreeMap<u32, (Attention, LayerNorm)>,
    #[kv(child)]
    nested: ((Attention, LayerNorm), LayerNorm),
    // Keys are never visited, so neither of these needs `#[kv(child)]`.
    _by_key: std::collections::BTreeMap<(Key, u32), u8>,
    _hashed: std::collections::HashMap<(Key, u32), u8>,
    #[kv(child)]
    from_macro: FromMacro,
    // Lifetimes inside a tuple: its impl is generic over them.
    #[kv(child)]
    borrowed_pair: Option<(&'a Attention, LayerNorm, Vec<&'a Attention>)>,
    #[kv(child)]
    static_pair: (&'static Attention, LayerNorm),
    // Keywords (`dyn`) inside a tuple are no lifetimes of its impl.
    #[kv(child)]
    with_dyn: (Attention, Box<dyn std::fmt::Debug>),
}

static STATIC_ATTENTION: Attention = Attention { _id: 0 };

#[test]
fn tuples_in_arrays_slices_references_parens_maps_and_macros_are_visited() {
    let shared = [(attention(), LayerNorm)];
    let own = attention();
    let model = TuplesEverywhere {
        array: [(attention(), LayerNorm), (attention(), LayerNorm)],
        slice: vec![(attention(), LayerNorm)].into_boxed_slice(),
        reference: &shared,
        paren: Some((attention(), LayerNorm)),
        map: [(7, (attention(), LayerNorm))].into_iter().collect(),
        nested: ((attention(), LayerNorm), LayerNorm),
        _by_key: [((Key, 1), 0)].into_iter().collect(),
        _hashed: [((Key, 1), 0)].into_iter().collect(),
        from_macro: FromMacro {
            held: Some((attention(), LayerNorm)),
        },
        borrowed_pair: Some((&own, LayerNorm, vec![&shared[0].0])),
        static_pair: (&STATIC_ATTENTION, LayerNorm),
        with_dyn: (attention(), Box::new(0u8)),
    };
    assert_eq!(
        paths(&model),
        [
            "array.0.0.kv",
            "array.1.0.kv",
            "slice.0.0.kv",
            "reference.0.0.kv",
            "paren.0.kv",
            "map.7.0.kv",
            "nested.0.0.kv",
            "from_macro.held.0.kv",
            "borrowed_pair.0.kv",
            "static_pair.0.kv",
            "with_dyn.0.kv",
        ]
    );
}

/// Pointers of containers: `Box<Vec<..>>`, `Arc<[..]>`, `&Option<..>`.
#[derive(ModelLocalKv)]
#[allow(clippy::box_collection)]
struct PointersOfContainers<'a> {
    #[kv(child)]
    boxed: Box<Vec<Attention>>,
    #[kv(child)]
    counted: std::rc::Rc<[Attention; 1]>,
    #[kv(child)]
    shared: Arc<[Attention]>,
    #[kv(child)]
    borrowed: &'a Option<Attention>,
    #[kv(child)]
    by_name: Box<std::collections::HashMap<String, Attention>>,
    #[kv(child)]
    ordered: Arc<std::collections::BTreeMap<u8, Attention>>,
    #[kv(child)]
    once_cell: std::rc::Rc<std::cell::OnceCell<Attention>>,
}

#[test]
fn owners_in_pointers_of_containers_are_visited() {
    let held = Some(attention());
    let model = PointersOfContainers {
        boxed: Box::new(vec![attention(), attention()]),
        counted: std::rc::Rc::new([attention()]),
        shared: Arc::from(vec![attention()]),
        borrowed: &held,
        by_name: Box::new([("a".to_owned(), attention())].into_iter().collect()),
        ordered: Arc::new([(3, attention())].into_iter().collect()),
        once_cell: std::rc::Rc::new(std::cell::OnceCell::from(attention())),
    };
    assert_eq!(
        paths(&model),
        [
            "boxed.0.kv",
            "boxed.1.kv",
            "counted.0.kv",
            "shared.0.kv",
            "borrowed.kv",
            "by_name.a.kv",
            "ordered.3.kv",
            "once_cell.kv",
        ]
    );
}

/// A tuple of a type parameter: kv-core's own impl for tuples of owners
/// serves it (the derive cannot write impls naming `T`).
#[derive(ModelLocalKv)]
struct Generic<T: ModelLocalKv> {
    #[kv(child)]
    pair: (T, T),
}

#[test]
fn a_tuple_of_a_type_parameter_is_visited_by_kv_cores_impl() {
    let model = Generic {
        pair: (attention(), attention()),
    };
    assert_eq!(paths(&model), ["pair.0.kv", "pair.1.kv"]);
}

/// A tuple variant with two children: each is named by its index.
#[derive(ModelLocalKv)]
enum TwoInAVariant {
    Both(#[kv(child)] Attention, #[kv(child)] Attention),
}

#[test]
fn a_tuple_variants_children_are_named_by_index_when_there_are_several() {
    let model = TwoInAVariant::Both(attention(), attention());
    assert_eq!(paths(&model), ["Both.0.kv", "Both.1.kv"]);
}

/// A transparent wrapper whose child holds a tuple: the tuple's owner is
/// reached at the wrapper's own path.
#[derive(ModelLocalKv)]
#[kv(transparent)]
struct TransparentOverATuple {
    #[kv(child)]
    cross_attn: Option<(Attention, LayerNorm)>,
}

#[test]
fn a_transparent_wrapper_reaches_the_owner_in_its_tuple() {
    let wrapper = TransparentOverATuple {
        cross_attn: Some((attention(), LayerNorm)),
    };
    assert_eq!(
        paths(&wrapper),
        ["0.kv"],
        "no segment for the wrapper's field"
    );
    let empty = TransparentOverATuple { cross_attn: None };
    assert!(paths(&empty).is_empty());
}
