//! The start-up check for an annotated type cut off from the root by a struct
//! without the derive (`kv_core::registry::unreached`): found, and never a
//! false alarm for a type that is merely absent now or belongs to another model.

use std::sync::{Arc, Mutex};

use kv_core::registry::unreached;

/// A model whose middle struct forgot the derive.
mod forgotten {
    use kv_core::ModelLocalKv;

    #[derive(ModelLocalKv)]
    #[kv(
        name = "kv", cache = "concat", layers = 1, kv_heads = 8, head_dim = 128,
        dtype = bf16, positions = bounded(4096, because = "max_position_embeddings"),
        scope = request, rows = max_num_seqs,
    )]
    pub struct Attention;

    /// No `#[derive(ModelLocalKv)]`: the compiler checks no field of it.
    pub struct Block {
        pub attn: Attention,
    }

    #[derive(ModelLocalKv)]
    pub struct Model {
        pub blocks: Vec<Block>,
    }
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

    /// Another model in a sub-module, reached from `Model` by nothing: it
    /// is checked with `Model` only because it lives below `Model`'s module.
    pub mod other {
        use kv_core::ModelLocalKv;

        #[derive(ModelLocalKv)]
        pub struct Unrelated;
    }
}

/// A second model linked into the same binary, in a module of its own.
mod neighbour {
    use kv_core::ModelLocalKv;

    #[derive(ModelLocalKv)]
    pub struct Orphan;
}

#[test]
fn a_type_under_a_struct_without_the_derive_is_found_and_explained() {
    let model = forgotten::Model {
        blocks: vec![forgotten::Block {
            attn: forgotten::Attention,
        }],
    };
    let _ = &model.blocks[0].attn;
    let missing = unreached(&model);
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(
        missing[0].type_name,
        "registry_unreached::forgotten::Attention"
    );
    assert_eq!(missing[0].module_path, "registry_unreached::forgotten");
    assert_eq!(missing[0].root, "registry_unreached::forgotten::Model");
    assert_eq!(
        missing[0].to_string(),
        "kv: `registry_unreached::forgotten::Attention` derives ModelLocalKv, but no field \
         path from `registry_unreached::forgotten::Model` can hold it, so its declarations \
         are in no report: a struct between them is missing `#[derive(ModelLocalKv)]` \
         (derive it, with `#[kv(child)]` on the field that holds the next), or the field \
         holding it is `#[kv(skip, ...)]`"
    );
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
    let names: Vec<&str> = unreached(&model).iter().map(|u| u.type_name).collect();
    // Only the sub-module's own model, which no field of `Model` can hold.
    assert_eq!(names, ["registry_unreached::complete::other::Unrelated"]);
}

#[test]
fn another_models_types_are_not_checked() {
    let model = complete::other::Unrelated;
    assert!(unreached(&model).is_empty());
    let names: Vec<&str> = unreached(&neighbour::Orphan)
        .iter()
        .map(|u| u.type_name)
        .collect();
    assert!(names.is_empty(), "{names:?}");
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
    let names: Vec<&str> = unreached(&hand::Hand(hand::Held, None))
        .iter()
        .map(|u| u.type_name)
        .collect();
    assert_eq!(names, ["registry_unreached::hand::NotHeld"]);
    let all = unreached(&hand::Hand(hand::Held, Some(hand::NotHeld)));
    assert!(all.is_empty(), "{all:?}");
}

/// Every container empty: each names its owner type all the same.
mod empty {
    use std::cell::{OnceCell, RefCell};
    use std::collections::{BTreeMap, HashMap};
    use std::rc::Rc;
    use std::sync::{Arc, Mutex, OnceLock, RwLock};

    use kv_core::ModelLocalKv;

    macro_rules! owners {
        ($($name:ident),+) => {$(
            #[derive(ModelLocalKv)]
            pub struct $name;
        )+};
    }
    owners!(
        InOption,
        InArray,
        InVec,
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
    let names: Vec<&str> = unreached(&model).iter().map(|u| u.type_name).collect();
    assert!(names.is_empty(), "{names:?}");
}
