//! The collector's walk: paths, owners reached twice, failing declarers.

mod collect_support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use collect_support::*;
use kv_core::declare::ChildVisitor;
use kv_core::{collect, DType, Geometry, KvError, KvSpec, ModelLocalKv, Rows, Scope};

fn full_names(collection: &kv_core::Collection) -> Vec<String> {
    collection.entries().iter().map(|e| e.full_name()).collect()
}

/// Declares one `cache` of `rows` fixed rows; `tag` makes each instance non-zero-sized.
struct Layer {
    tag: u8,
}

impl ModelLocalKv for Layer {
    fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
        let mut spec = spec(
            "cache",
            Geometry::new(1, 1, 1, DType::U8),
            8,
            "test",
            Scope::Request,
            Rows::MaxNumSeqs,
        );
        spec.note = Some(format!("layer {}", self.tag).into());
        out.push(spec);
        Ok(())
    }
}

struct Talker {
    layers: Vec<Option<Layer>>,
    by_name: BTreeMap<&'static str, Layer>,
}

impl ModelLocalKv for Talker {
    fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
        Ok(())
    }
    fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
        visitor.field("layers", &self.layers);
        visitor.field("by_name", &self.by_name);
    }
}

/// Declares at the root and has a nested child.
struct Omni {
    talker: Talker,
}

impl ModelLocalKv for Omni {
    fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
        out.push(spec(
            "encoder",
            Geometry::new(2, 2, 2, DType::BF16),
            4,
            "test",
            Scope::Session,
            Rows::fixed(1, "one session"),
        ));
        Ok(())
    }
    fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
        visitor.field("talker", &self.talker);
    }
}

#[test]
fn nested_owners_carry_their_paths() {
    let model = Omni {
        talker: Talker {
            layers: vec![Some(Layer { tag: 0 }), None, Some(Layer { tag: 2 })],
            by_name: [("mtp", Layer { tag: 9 })].into_iter().collect(),
        },
    };
    let collection = collect(&model);
    assert_eq!(
        full_names(&collection),
        [
            "encoder",
            "talker.layers.0.cache",
            "talker.layers.2.cache",
            "talker.by_name.mtp.cache"
        ]
    );
    let entries = collection.entries();
    assert_eq!(entries[0].path, "");
    assert_eq!(entries[2].path, "talker.layers.2");
    assert_eq!(entries[2].spec.note.as_deref(), Some("layer 2"));
    assert_eq!(entries[0].owner_type, std::any::type_name::<Omni>());
    assert_eq!(entries[3].owner_type, std::any::type_name::<Layer>());
    assert!(collection.skipped().is_empty());
}

/// A CUDA-graph wrapper that forwards to its runnable without a path segment.
struct GraphWrapper {
    runnable: Arc<Omni>,
}

impl ModelLocalKv for GraphWrapper {
    fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
        Ok(())
    }
    fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
        visitor.transparent(&self.runnable);
    }
}

/// Holds the model twice: through the wrapper and directly.
struct Runner {
    graph: GraphWrapper,
    eager: Arc<Omni>,
}

impl ModelLocalKv for Runner {
    fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
        Ok(())
    }
    fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
        visitor.field("graph", &self.graph);
        visitor.field("eager", &self.eager);
    }
}

fn small_omni() -> Omni {
    Omni {
        talker: Talker {
            layers: vec![Some(Layer { tag: 0 })],
            by_name: BTreeMap::new(),
        },
    }
}

#[test]
fn a_root_behind_a_transparent_wrapper_is_counted_once() {
    let model = Arc::new(small_omni());
    let wrapper = GraphWrapper {
        runnable: Arc::clone(&model),
    };
    // The wrapper adds no segment: the root model's names stay unprefixed.
    assert_eq!(
        full_names(&collect(&wrapper)),
        ["encoder", "talker.layers.0.cache"]
    );
    // Reached twice, collected once, at the first path.
    let runner = Runner {
        graph: wrapper,
        eager: Arc::clone(&model),
    };
    let collection = collect(&runner);
    assert_eq!(
        full_names(&collection),
        ["graph.encoder", "graph.talker.layers.0.cache"]
    );
    assert_eq!(
        collection.totals(4).unwrap().total,
        // encoder: 2 layers x 2 heads x (2 + 2) dims x 2 bytes x 4 positions x 1 row;
        // layer: 1 x 1 x (1 + 1) x 1 byte x 8 positions x 4 rows.
        2 * 2 * 4 * 2 * 4 + 2 * 8 * 4
    );
    // A pointer and its target are one owner.
    assert_eq!(collect(&model), collect(&*model));
}

#[test]
fn distinct_owners_of_one_type_are_all_counted() {
    let twins = [small_omni(), small_omni()];
    struct Pair<'a>(&'a [Omni; 2]);
    impl ModelLocalKv for Pair<'_> {
        fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
            Ok(())
        }
        fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
            visitor.field("twins", self.0);
        }
    }
    assert_eq!(
        full_names(&collect(&Pair(&twins))),
        [
            "twins.0.encoder",
            "twins.0.talker.layers.0.cache",
            "twins.1.encoder",
            "twins.1.talker.layers.0.cache"
        ]
    );
}

/// A zero-sized owner has no identity of its own; each place it is held declares.
struct Stateless;

impl ModelLocalKv for Stateless {
    fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
        out.push(spec(
            "scratch",
            Geometry::new(1, 1, 1, DType::U8),
            1,
            "test",
            Scope::Invocation,
            Rows::fixed(1, "one call"),
        ));
        Ok(())
    }
}

#[test]
fn zero_sized_owners_are_never_merged() {
    let pair = [Stateless, Stateless];
    struct Holder([Stateless; 2]);
    impl ModelLocalKv for Holder {
        fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
            Ok(())
        }
        fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
            visitor.field("workers", &self.0);
        }
    }
    assert_eq!(
        full_names(&collect(&Holder(pair))),
        ["workers.0.scratch", "workers.1.scratch"]
    );
}

/// A cycle through `Arc`: each node points at the next, the last at the first.
struct Node {
    tag: u8,
    next: Mutex<Option<Arc<Node>>>,
}

impl ModelLocalKv for Node {
    fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
        Layer { tag: self.tag }.kv_declare(out)
    }
    fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
        visitor.field("next", &*self.next.lock().unwrap());
    }
}

#[test]
fn a_cycle_through_arc_is_walked_once() {
    let first = Arc::new(Node {
        tag: 1,
        next: Mutex::new(None),
    });
    let second = Arc::new(Node {
        tag: 2,
        next: Mutex::new(Some(Arc::clone(&first))),
    });
    *first.next.lock().unwrap() = Some(Arc::clone(&second));
    let collection = collect(&first);
    assert_eq!(full_names(&collection), ["cache", "next.cache"]);
    // Break the cycle so the test does not leak.
    first.next.lock().unwrap().take();
}

/// Declares one spec, then fails in the way it is told to.
enum Failing {
    Panics,
    PanicsWithString,
    ReturnsErr,
    DeclaresInvalid,
    PanicsListingChildren,
}

impl ModelLocalKv for Failing {
    fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
        // Partial output: must be discarded with the failure.
        out.push(spec(
            "partial",
            Geometry::new(1, 1, 1, DType::U8),
            1,
            "test",
            Scope::Request,
            Rows::MaxNumSeqs,
        ));
        match self {
            Failing::Panics => panic!("boom"),
            Failing::PanicsWithString => panic!("boom {}", 2),
            Failing::ReturnsErr => Err(KvError::Config {
                what: "layers",
                problem: "none of `num_layers` is set".into(),
            }),
            Failing::DeclaresInvalid => {
                out.push(spec(
                    "bad",
                    Geometry::new(0, 1, 1, DType::U8),
                    1,
                    "test",
                    Scope::Request,
                    Rows::MaxNumSeqs,
                ));
                Ok(())
            }
            Failing::PanicsListingChildren => Ok(()),
        }
    }
    fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
        if let Failing::PanicsListingChildren = self {
            visitor.enter(kv_core::declare::Segment::Field("inner"));
            visitor.field("first", &Layer { tag: 7 });
            panic!("lost my children");
        }
    }
}

struct Siblings {
    before: Layer,
    failing: Vec<Failing>,
    after: Layer,
}

impl ModelLocalKv for Siblings {
    fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
        Ok(())
    }
    fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
        visitor.field("before", &self.before);
        visitor.field("failing", &self.failing);
        visitor.field("after", &self.after);
    }
}

#[test]
fn failing_siblings_are_skipped_and_the_rest_collected() {
    let model = Siblings {
        before: Layer { tag: 0 },
        failing: vec![
            Failing::Panics,
            Failing::PanicsWithString,
            Failing::ReturnsErr,
            Failing::DeclaresInvalid,
            Failing::PanicsListingChildren,
        ],
        after: Layer { tag: 1 },
    };
    let collection = collect(&model);
    // The last failing owner's own declaration and its child reached before
    // the panic are kept; the path is restored after the unbalanced `enter`.
    assert_eq!(
        full_names(&collection),
        [
            "before.cache",
            "failing.4.partial",
            "failing.4.inner.first.cache",
            "after.cache"
        ]
    );
    let skipped: Vec<(&str, &KvError)> = collection
        .skipped()
        .iter()
        .map(|s| (s.path.as_str(), &s.error))
        .collect();
    let failing = std::any::type_name::<Failing>();
    assert!(collection.skipped().iter().all(|s| s.owner_type == failing));
    assert_eq!(
        skipped[0],
        (
            "failing.0",
            &KvError::DeclarerPanicked {
                path: "failing.0".into(),
                message: "in kv_declare: boom".into()
            }
        )
    );
    assert_eq!(
        skipped[1],
        (
            "failing.1",
            &KvError::DeclarerPanicked {
                path: "failing.1".into(),
                message: "in kv_declare: boom 2".into()
            }
        )
    );
    assert!(matches!(
        skipped[2],
        ("failing.2", KvError::Config { what: "layers", .. })
    ));
    assert!(
        matches!(
            skipped[3],
            (
                "failing.3",
                KvError::InvalidValue {
                    field: "layers",
                    ..
                }
            )
        ),
        "{:?}",
        skipped[3]
    );
    // A hand-written declarer's invalid spec is named by its owner's type.
    let KvError::InvalidValue { declaration, .. } = skipped[3].1 else {
        unreachable!("checked above")
    };
    assert_eq!(declaration, "Failing.bad");
    assert_eq!(
        skipped[4],
        (
            "failing.4",
            &KvError::DeclarerPanicked {
                path: "failing.4".into(),
                message: "in kv_visit_children: lost my children".into()
            }
        )
    );
    assert_eq!(skipped.len(), 5);
}

#[test]
fn a_panicking_root_is_skipped_not_propagated() {
    let collection = collect(&Failing::Panics);
    assert!(collection.entries().is_empty());
    assert_eq!(collection.skipped().len(), 1);
    assert_eq!(
        collection.skipped()[0].error.to_string(),
        "kv: the declarer at `<root>` panicked: in kv_declare: boom"
    );
}

#[test]
fn an_undeclared_model_collects_nothing() {
    let collection = collect(&qwen3_tts(false).decoder);
    assert_eq!(collection, kv_core::Collection::default());
    assert_eq!(collection.totals(256).unwrap().total, 0);
}

/// Regression: a zero-sized owner shared through one `Arc` (or `Rc`) in two
/// places was collected twice, because zero-sized owners were never merged.
#[test]
fn a_zero_sized_owner_shared_through_arc_or_rc_is_collected_once() {
    use std::rc::Rc;
    use std::sync::Arc;

    #[derive(kv_core::ModelLocalKv)]
    #[kv(
        name = "graph_pool",
        cache = "captured DynamicCache",
        layers = 16, kv_heads = 64, head_dim = 16, dtype = bf16,
        positions = bounded(11, because = "group_size + max(delay_pattern)"),
        scope = model,
        rows = fixed(261, because = "sum of captured buckets"),
    )]
    struct Pool;

    #[derive(kv_core::ModelLocalKv)]
    struct Root {
        #[kv(child)]
        a: Arc<Pool>,
        #[kv(child)]
        b: Arc<Pool>,
        #[kv(child)]
        c: Rc<Pool>,
        #[kv(child)]
        d: Rc<Pool>,
        #[kv(child)]
        other: Arc<Pool>,
    }

    let pool = Arc::new(Pool);
    let local = Rc::new(Pool);
    let root = Root {
        a: Arc::clone(&pool),
        b: pool,
        c: Rc::clone(&local),
        d: local,
        other: Arc::new(Pool),
    };
    let collection = kv_core::collect(&root);
    let paths: Vec<String> = collection.entries().iter().map(|e| e.full_name()).collect();
    // One per allocation: `a` and `b` share one, `c` and `d` another; `other` is its own.
    assert_eq!(paths, ["a.graph_pool", "c.graph_pool", "other.graph_pool"]);
}
