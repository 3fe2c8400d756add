//! The start-up check for an annotated type cut off from the roots by a
//! struct without the derive (`kv_core::registry::unreached`): found in any
//! module of the roots' crate, and never a false alarm for a type merely
//! absent now (an empty `Option`, an enum's other variant, a generic layer
//! with no value), for the roots themselves, or for another model's types.
//!
//! Every model here lives in this one test crate, as several models would
//! in one engine crate: each test names its model's module
//! (`unreached_within`), and one test shows what the crate-wide check sees.

use std::sync::{Arc, Mutex};

use kv_core::registry::{unreached, unreached_within};
use kv_core::ModelLocalKv;

/// The names reported for `roots`, checked within `module` of this crate.
fn reported(roots: &[&dyn ModelLocalKv], module: &str) -> Vec<&'static str> {
    let module = format!("registry_unreached::{module}");
    unreached_within(roots, &[module.as_str()])
        .iter()
        .map(|u| u.type_name)
        .collect()
}

/// An engine laid out as engines are: the pipeline, the models and the
/// shared layers in sibling modules; the model's block forgot the derive.
mod engine {
    pub mod layers {
        use kv_core::ModelLocalKv;

        #[derive(ModelLocalKv)]
        #[kv(
            name = "kv", cache = "concat", layers = 1, kv_heads = 8, head_dim = 128,
            dtype = bf16, positions = bounded(4096, because = "max_position_embeddings"),
            scope = request, rows = max_num_seqs,
        )]
        pub struct Attention;
    }

    pub mod models {
        use kv_core::ModelLocalKv;

        /// No `#[derive(ModelLocalKv)]`: the compiler checks no field of it.
        pub struct Block {
            pub attn: crate::engine::layers::Attention,
        }

        #[derive(ModelLocalKv)]
        pub struct Llama {
            pub blocks: Vec<Block>,
        }
    }

    pub mod pipeline {
        use kv_core::ModelLocalKv;

        #[derive(ModelLocalKv)]
        pub struct Pipeline {
            #[kv(child)]
            pub model: crate::engine::models::Llama,
        }
    }
}

fn engine() -> engine::pipeline::Pipeline {
    engine::pipeline::Pipeline {
        model: engine::models::Llama {
            blocks: vec![engine::models::Block {
                attn: engine::layers::Attention,
            }],
        },
    }
}

#[test]
fn a_type_in_a_sibling_module_under_a_struct_without_the_derive_is_found() {
    let pipeline = engine();
    let _ = &pipeline.model.blocks[0].attn;
    let missing = unreached_within(&[&pipeline], &["registry_unreached::engine"]);
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(
        missing[0].type_name,
        "registry_unreached::engine::layers::Attention"
    );
    assert_eq!(missing[0].module_path, "registry_unreached::engine::layers");
    assert_eq!(
        missing[0].roots,
        ["registry_unreached::engine::pipeline::Pipeline"]
    );
    assert_eq!(
        missing[0].to_string(),
        "kv: `registry_unreached::engine::layers::Attention` derives ModelLocalKv, but no \
         field path from `registry_unreached::engine::pipeline::Pipeline` can hold it, so its \
         declarations are in no report: a struct between them is missing \
         `#[derive(ModelLocalKv)]` (derive it, with `#[kv(child)]` on the field that holds the \
         next), a hand-written `ModelLocalKv` does not visit it, or the field holding it is \
         `#[kv(skip, ...)]`; if it belongs to another model, leave its module out with \
         `registry::unreached_within`"
    );
}

#[test]
fn without_modules_the_roots_whole_crate_is_checked() {
    let pipeline = engine();
    let names: Vec<&str> = unreached(&[&pipeline])
        .iter()
        .map(|u| u.type_name)
        .collect();
    // The sibling module's type, and every other model's types in this
    // crate: what `unreached_within` is for.
    assert!(names.contains(&"registry_unreached::engine::layers::Attention"));
    assert!(names.contains(&"registry_unreached::beside::Cache"));
    assert!(!names.contains(&"registry_unreached::engine::pipeline::Pipeline"));
    // Types of other crates (kv-core's own tests register none) are never checked.
    assert!(names.iter().all(|n| n.starts_with("registry_unreached::")));
}

/// candle's llama keeps its `Cache` beside the model, not in it: two roots.
mod beside {
    use kv_core::ModelLocalKv;

    #[derive(ModelLocalKv)]
    #[kv(
        name = "kvs", cache = "Vec<Option<(Tensor, Tensor)>>", layers = 2, kv_heads = 4,
        head_dim = 16, dtype = f32, positions = bounded(64, because = "max_position_embeddings"),
        scope = request, rows = fixed(1, because = "one sequence"),
    )]
    pub struct Cache;

    #[derive(ModelLocalKv)]
    pub struct Llama;
}

#[test]
fn every_root_given_is_walked_and_none_is_reported() {
    let (llama, cache) = (beside::Llama, beside::Cache);
    assert_eq!(reported(&[&llama, &cache], "beside"), Vec::<&str>::new());
    // Given the model alone, the cache beside it is reached by nothing.
    assert_eq!(
        reported(&[&llama], "beside"),
        ["registry_unreached::beside::Cache"]
    );
    // A root is never reported, even where nothing else reaches it.
    assert_eq!(
        reported(&[&cache], "beside"),
        ["registry_unreached::beside::Llama"]
    );
}

/// A model whose annotated types are all reachable, some of them absent now.
mod complete {
    use std::sync::{Arc, Mutex};

    use kv_core::ModelLocalKv;

    #[derive(ModelLocalKv)]
    #[kv(
        name = "kv", cache = "concat", layers = 1, kv_heads = 8, head_dim = 128,
        dtype = bf16, positions = bounded(4096, because = "max_position_embeddings"),
        scope = request, rows = max_num_seqs,
    )]
    pub struct Attention;

    #[derive(ModelLocalKv)]
    pub struct Rotating;

    #[derive(ModelLocalKv)]
    pub struct Boxed;

    #[derive(ModelLocalKv)]
    pub struct Locked;

    #[derive(ModelLocalKv)]
    pub struct Cross;

    pub struct LayerNorm;

    /// `Rotating` is never built: a type absent now is the point.
    #[allow(dead_code)]
    #[derive(ModelLocalKv)]
    pub enum LayerCache {
        Normal(#[kv(child)] Attention),
        Rotating(#[kv(child)] Rotating),
    }

    #[derive(ModelLocalKv)]
    pub struct Model {
        #[kv(child)]
        pub layers: Vec<LayerCache>,
        #[kv(child)]
        pub draft: Option<Box<Boxed>>,
        #[kv(child)]
        pub shared: Arc<Mutex<Vec<Locked>>>,
        #[kv(child)]
        pub cross_attn: Option<(Cross, LayerNorm)>,
    }

    /// Another model in a sub-module, reached from `Model` by nothing.
    pub mod other {
        use kv_core::ModelLocalKv;

        #[derive(ModelLocalKv)]
        pub struct Unrelated;
    }
}

#[test]
fn types_absent_now_but_reachable_are_no_false_alarm() {
    // Every layer normal, no draft, no lock contents, no cross-attention:
    // Rotating, Boxed, Locked and Cross are not in the tree now.
    let model = complete::Model {
        layers: vec![complete::LayerCache::Normal(complete::Attention)],
        draft: None,
        shared: Arc::new(Mutex::new(Vec::new())),
        cross_attn: None,
    };
    // Only the sub-module's own model, which no field of `Model` can hold.
    assert_eq!(
        reported(&[&model], "complete"),
        ["registry_unreached::complete::other::Unrelated"]
    );
    // Its own model's modules only: nothing.
    let unrelated = complete::other::Unrelated;
    assert!(reported(&[&model, &unrelated], "complete").is_empty());
}

/// Generic models (as burn writes them, over a backend): a generic root,
/// generic layers, each holding an `Option` that is empty now.
mod generic {
    use std::marker::PhantomData;

    use kv_core::ModelLocalKv;

    #[derive(ModelLocalKv)]
    pub struct Draft;

    #[derive(ModelLocalKv)]
    pub struct Cross;

    #[derive(ModelLocalKv)]
    pub struct OnlyInAnAbsentLayer;

    #[derive(ModelLocalKv)]
    pub struct Layer<B> {
        #[kv(child)]
        pub cross: Option<Cross>,
        #[kv(child)]
        pub only: Option<OnlyInAnAbsentLayer>,
        pub backend: PhantomData<B>,
    }

    #[derive(ModelLocalKv)]
    pub struct Model<B> {
        #[kv(child)]
        pub layers: Vec<Layer<B>>,
        /// No value now: its type's fields are walked from its type.
        #[kv(child)]
        pub draft_layer: Option<Layer<B>>,
        #[kv(child)]
        pub draft: Option<Draft>,
    }

    pub struct Cpu;
}

#[test]
fn a_generic_root_and_generic_layers_with_empty_options_are_no_false_alarm() {
    let model = generic::Model::<generic::Cpu> {
        layers: Vec::new(),
        draft_layer: None,
        draft: None,
    };
    assert!(
        reported(&[&model], "generic").is_empty(),
        "{:?}",
        reported(&[&model], "generic")
    );
}

/// mistral.rs's shape: the pipeline holds its model as a trait object.
mod dynamic {
    use kv_core::ModelLocalKv;

    pub trait NormalModel: ModelLocalKv {}

    #[derive(ModelLocalKv)]
    pub struct Attention;

    #[derive(ModelLocalKv)]
    pub struct Mistral {
        /// Empty now: reached all the same, from the model's type.
        #[kv(child)]
        pub sliding: Option<Attention>,
    }
    impl NormalModel for Mistral {}

    #[derive(ModelLocalKv)]
    pub struct OtherCache;

    /// Another implementor, not the one loaded.
    #[derive(ModelLocalKv)]
    pub struct Other {
        #[kv(child)]
        pub cache: OtherCache,
    }
    impl NormalModel for Other {}

    #[derive(ModelLocalKv)]
    pub struct Pipeline {
        #[kv(child)]
        pub model: Box<dyn NormalModel + Send + Sync>,
    }
}

#[test]
fn behind_a_trait_object_what_the_object_holds_now_is_walked() {
    let pipeline = dynamic::Pipeline {
        model: Box::new(dynamic::Mistral { sliding: None }),
    };
    // The loaded model's types are reached, its empty `Option` included;
    // another implementor of the trait is not loaded, and is reported with
    // what only it holds (the documented limit: a trait object is known
    // from its value).
    assert_eq!(
        reported(&[&pipeline], "dynamic"),
        [
            "registry_unreached::dynamic::Other",
            "registry_unreached::dynamic::OtherCache"
        ]
    );
}

/// A hand-written owner names no child types: what it holds now is found
/// by walking the tree, and what it does not hold is reported.
mod hand {
    use kv_core::declare::ChildVisitor;
    use kv_core::{KvError, KvSpec, ModelLocalKv};

    #[derive(ModelLocalKv)]
    pub struct Held;

    #[derive(ModelLocalKv)]
    pub struct NotHeld;

    pub struct Hand(pub Held, pub Option<NotHeld>);

    impl ModelLocalKv for Hand {
        fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
            Ok(())
        }
        fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
            visitor.field("held", &self.0);
            visitor.field("not_held", &self.1);
        }
    }
}

#[test]
fn a_type_held_by_a_hand_written_owner_now_is_reached() {
    let hand = hand::Hand(hand::Held, None);
    assert_eq!(
        reported(&[&hand], "hand"),
        ["registry_unreached::hand::NotHeld"]
    );
    let full = hand::Hand(hand::Held, Some(hand::NotHeld));
    assert!(reported(&[&full], "hand").is_empty());
}

/// Every container empty: each names its owner type all the same.
mod empty {
    use std::borrow::Cow;
    use std::cell::{OnceCell, RefCell};
    use std::collections::{BTreeMap, HashMap, LinkedList, VecDeque};
    use std::rc::Rc;
    use std::sync::{Arc, Mutex, OnceLock, RwLock};

    use kv_core::ModelLocalKv;

    macro_rules! owners {
        ($($name:ident),+) => {$(
            #[derive(ModelLocalKv, Clone)]
            pub struct $name;
        )+};
    }
    owners!(
        InOption,
        InArray,
        InVec,
        InVecDeque,
        InLinkedList,
        InCow,
        InHashMap,
        InBTreeMap,
        InMutex,
        InRwLock,
        InRefCell,
        InOnceLock,
        InOnceCell,
        InBoxedVec,
        InRcSlice,
        InArcMap,
        InRefOption,
        InPair,
        InPairB,
        InMixed,
        InBoxedMutex,
        InRcRefCell,
        InArcRwLock,
        InBoxedOnce,
        InRcOnceCell
    );

    pub struct LayerNorm;

    // Real model code boxes collections; the test must reach through that shape.
    #[allow(clippy::box_collection)]
    #[derive(ModelLocalKv)]
    pub struct Model<'a> {
        #[kv(child)]
        pub option: Option<InOption>,
        #[kv(child)]
        pub array: [InArray; 0],
        #[kv(child)]
        pub vec: Vec<InVec>,
        #[kv(child)]
        pub vec_deque: VecDeque<InVecDeque>,
        #[kv(child)]
        pub linked_list: LinkedList<InLinkedList>,
        #[kv(child)]
        pub cow: Cow<'a, [InCow]>,
        #[kv(child)]
        pub hash_map: HashMap<String, InHashMap>,
        #[kv(child)]
        pub btree_map: BTreeMap<u32, InBTreeMap>,
        #[kv(child)]
        pub mutex: Mutex<Option<InMutex>>,
        #[kv(child)]
        pub rw_lock: RwLock<Option<InRwLock>>,
        #[kv(child)]
        pub ref_cell: RefCell<Option<InRefCell>>,
        #[kv(child)]
        pub once_lock: OnceLock<InOnceLock>,
        #[kv(child)]
        pub once_cell: OnceCell<InOnceCell>,
        #[kv(child)]
        pub boxed_vec: Box<Vec<InBoxedVec>>,
        #[kv(child)]
        pub rc_slice: Rc<[InRcSlice]>,
        #[kv(child)]
        pub arc_map: Arc<BTreeMap<u32, InArcMap>>,
        #[kv(child)]
        pub ref_option: &'a Option<InRefOption>,
        #[kv(child)]
        pub pair: Option<(InPair, InPairB)>,
        #[kv(child)]
        pub mixed: Option<(InMixed, LayerNorm)>,
        #[kv(child)]
        pub boxed_mutex: Box<Mutex<Option<InBoxedMutex>>>,
        #[kv(child)]
        pub rc_ref_cell: Rc<RefCell<Option<InRcRefCell>>>,
        #[kv(child)]
        pub arc_rw_lock: Arc<RwLock<Option<InArcRwLock>>>,
        #[kv(child)]
        pub boxed_once: Box<OnceLock<InBoxedOnce>>,
        #[kv(child)]
        pub rc_once_cell: Rc<OnceCell<InRcOnceCell>>,
    }
}

#[test]
fn every_empty_container_still_names_its_owner_type() {
    let none = None;
    let model = empty::Model {
        option: None,
        array: [],
        vec: Vec::new(),
        vec_deque: Default::default(),
        linked_list: Default::default(),
        cow: std::borrow::Cow::Borrowed(&[]),
        hash_map: Default::default(),
        btree_map: Default::default(),
        mutex: Mutex::new(None),
        rw_lock: Default::default(),
        ref_cell: Default::default(),
        once_lock: Default::default(),
        once_cell: Default::default(),
        boxed_vec: Default::default(),
        rc_slice: std::rc::Rc::new([]),
        arc_map: Default::default(),
        ref_option: &none,
        pair: None,
        mixed: None,
        boxed_mutex: Default::default(),
        rc_ref_cell: Default::default(),
        arc_rw_lock: Default::default(),
        boxed_once: Default::default(),
        rc_once_cell: Default::default(),
    };
    let names = reported(&[&model], "empty");
    assert!(names.is_empty(), "{names:?}");
}

/// A layer generic over `M: ?Sized` (so that a trait object fits) walks
/// its field the trait objects' way; instantiated with a sized type that
/// is absent now, that type is still named as reached.
mod unsized_param {
    use kv_core::ModelLocalKv;

    #[derive(ModelLocalKv)]
    pub struct Cache;

    #[derive(ModelLocalKv)]
    pub struct Layer<M: ?Sized + ModelLocalKv> {
        #[kv(child)]
        pub inner: Option<Box<M>>,
    }

    #[derive(ModelLocalKv)]
    pub struct Root {
        #[kv(child)]
        pub layer: Layer<Cache>,
    }
}

#[test]
fn a_sized_type_through_an_unsized_parameter_absent_now_is_no_false_alarm() {
    let root = unsized_param::Root {
        layer: unsized_param::Layer { inner: None },
    };
    assert!(
        reported(&[&root], "unsized_param").is_empty(),
        "{:?}",
        reported(&[&root], "unsized_param")
    );
}

/// Another crate's container reached by a `child(with = ..)` function: the
/// items' type is named from the function's signature, so an empty
/// container now is no false alarm.
mod with_function {
    use kv_core::ModelLocalKv;

    #[derive(ModelLocalKv)]
    pub struct Cache;

    pub struct Slab<T> {
        pub entries: Vec<Option<T>>,
    }

    pub fn occupied(slab: &Slab<Cache>) -> impl Iterator<Item = &Cache> + '_ {
        slab.entries.iter().flatten()
    }

    #[derive(ModelLocalKv)]
    pub struct Engine {
        #[kv(child(with = occupied))]
        pub slots: Slab<Cache>,
    }
}

#[test]
fn a_with_functions_items_absent_now_are_no_false_alarm() {
    let engine = with_function::Engine {
        slots: with_function::Slab {
            entries: vec![None],
        },
    };
    assert!(
        reported(&[&engine], "with_function").is_empty(),
        "{:?}",
        reported(&[&engine], "with_function")
    );
}

/// Beside a `?Sized` parameter, a concrete child still reaches its owners
/// the static way: what its absent (generic) type holds is named too.
mod unsized_beside {
    use kv_core::ModelLocalKv;

    #[derive(ModelLocalKv)]
    pub struct Inner;

    #[derive(ModelLocalKv)]
    pub struct Outer<T: 'static> {
        #[kv(child)]
        pub inner: Option<Inner>,
        pub tag: std::marker::PhantomData<T>,
    }

    #[derive(ModelLocalKv)]
    pub struct Small;

    #[derive(ModelLocalKv)]
    pub struct Layer<M: ?Sized + ModelLocalKv> {
        #[kv(child)]
        pub model: Box<M>,
        #[kv(child)]
        pub outer: Option<Outer<u8>>,
    }

    #[derive(ModelLocalKv)]
    pub struct Root {
        #[kv(child)]
        pub layer: Layer<Small>,
    }
}

#[test]
fn a_concrete_child_beside_an_unsized_parameter_names_what_its_type_holds() {
    let root = unsized_beside::Root {
        layer: unsized_beside::Layer {
            model: Box::new(unsized_beside::Small),
            outer: None,
        },
    };
    assert!(
        reported(&[&root], "unsized_beside").is_empty(),
        "{:?}",
        reported(&[&root], "unsized_beside")
    );
}
