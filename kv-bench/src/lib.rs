//! Run-time benchmark support (issue #6): one synthetic model tree written twice,
//! once with `#[derive(ModelLocalKv)]` ([`derived`]) and once with hand-written
//! impls ([`hand`]), walked by the real collector `kv_core::collect` in the
//! benchmark, plus a counting allocator and a minimal walker ([`Walker`]) for
//! the allocation checks.
//!
//! The tree: a root with `layers: Vec<Layer>`; each layer is 10 modules
//! (layer, attention, q/k/v/o projections, mlp, up/down projections, norm), of
//! which one (the attention) declares. Even layers use sliding-window attention
//! (a static declaration, cloned from `KV_DECLS`), odd layers full attention (an
//! after-load declaration read from `self` and validated at run time). With
//! 1,000 layers: 10,001 modules (root included), 1,000 declaring.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fmt::Write as _;

use kv_core::declare::{ChildVisitor, Segment};
use kv_core::{KvSpec, ModelLocalKv};

/// A global allocator that counts allocations (and reallocations) per thread,
/// so tests running in parallel do not see each other's. Install it with
/// `#[global_allocator]` in a bench or test binary.
pub struct CountingAlloc;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
}

/// Allocations (and reallocations) made by this thread so far, when
/// [`CountingAlloc`] is the global allocator.
pub fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: forwards every call to `System` unchanged; only counts.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// A minimal walker over the public traits, kept beside `kv_core::collect`
/// for one thing the collector cannot show: what `kv_declare` itself
/// allocates. `collect` allocates per walk on its own account (a fresh
/// seen-set, entry vector and path, and one path `String` per declaration), which
/// hides the declarer's count; this walker reuses every buffer between walks,
/// so a warm walk allocates only what `kv_declare` allocates.
#[derive(Default)]
pub struct Walker {
    path: String,
    marks: Vec<usize>,
    /// Every declaration found, in walk order.
    pub specs: Vec<KvSpec>,
    /// Paths of declaring owners, concatenated; see [`Walker::declaring`].
    paths: String,
    /// Per declaring owner: end of its path in `paths`, end of its specs.
    owners: Vec<(usize, usize)>,
    /// Owners visited in the last walk.
    pub visited: usize,
    /// Owners whose `kv_declare` failed in the last walk (skipped).
    pub errors: usize,
}

impl Walker {
    /// Walks the tree under `root`, replacing the last walk's results.
    pub fn walk(&mut self, root: &dyn ModelLocalKv) {
        self.path.clear();
        self.marks.clear();
        self.specs.clear();
        self.paths.clear();
        self.owners.clear();
        self.visited = 0;
        self.errors = 0;
        self.owner(root);
    }

    /// Each declaring owner's path with its declarations, in walk order.
    pub fn declaring(&self) -> impl Iterator<Item = (&str, &[KvSpec])> {
        let mut path_start = 0;
        let mut spec_start = 0;
        self.owners.iter().map(move |&(path_end, spec_end)| {
            let item = (
                &self.paths[path_start..path_end],
                &self.specs[spec_start..spec_end],
            );
            path_start = path_end;
            spec_start = spec_end;
            item
        })
    }
}

impl ChildVisitor for Walker {
    fn enter(&mut self, segment: Segment<'_>) {
        self.marks.push(self.path.len());
        if !self.path.is_empty() {
            self.path.push('.');
        }
        match segment {
            Segment::Field(name) => self.path.push_str(name),
            Segment::Index(index) => {
                let _ = write!(self.path, "{index}");
            }
            Segment::Key(key) => {
                let _ = write!(self.path, "{key}");
            }
        }
    }

    fn leave(&mut self) {
        let mark = self.marks.pop().expect("leave matches enter");
        self.path.truncate(mark);
    }

    fn owner(&mut self, owner: &dyn ModelLocalKv) {
        self.visited += 1;
        let before = self.specs.len();
        match owner.kv_declare(&mut self.specs) {
            Ok(()) if self.specs.len() > before => {
                self.paths.push_str(&self.path);
                self.owners.push((self.paths.len(), self.specs.len()));
            }
            Ok(()) => {}
            Err(_) => {
                self.specs.truncate(before);
                self.errors += 1;
            }
        }
        owner.kv_visit_children(self);
    }
}

/// Positions a full-attention layer holds: read after load.
const MAX_LEN: usize = 4096;

/// The tree with `#[derive(ModelLocalKv)]`.
pub mod derived {
    use kv_core::ModelLocalKv;

    #[derive(ModelLocalKv)]
    pub struct Model {
        #[kv(child)]
        pub layers: Vec<Layer>,
    }

    #[derive(ModelLocalKv)]
    pub struct Layer {
        #[kv(child)]
        pub attn: Attention,
        #[kv(child)]
        pub mlp: Mlp,
        #[kv(child)]
        pub norm: Norm,
    }

    #[derive(ModelLocalKv)]
    #[kv(
        name = "window",
        cache = "sliding DynamicCache",
        layers = 1, kv_heads = 8, head_dim = 128, dtype = bf16,
        positions = bounded(4095, because = "sliding_window(4096) - 1"),
        scope = request,
        rows = max_num_seqs,
        only_when = "sliding",
    )]
    pub struct Attention {
        pub sliding: bool,
        pub kv_heads: usize,
        pub head_dim: u32,
        pub max_len: usize,
        #[kv(
            cache = "StaticCache",
            layers = 1, kv_heads = self.kv_heads, head_dim = self.head_dim, dtype = bf16,
            positions = bounded(self.max_len, because = "max_cache_len"),
            scope = invocation,
            rows = fixed(1, because = "calls are serialized"),
            only_when = "full()",
        )]
        pub cache: Option<()>,
        #[kv(child)]
        pub q: Linear,
        #[kv(child)]
        pub k: Linear,
        #[kv(child)]
        pub v: Linear,
        #[kv(child)]
        pub o: Linear,
    }

    impl Attention {
        pub fn full(&self) -> bool {
            !self.sliding
        }
    }

    #[derive(ModelLocalKv)]
    pub struct Mlp {
        #[kv(child)]
        pub up: Linear,
        #[kv(child)]
        pub down: Linear,
    }

    #[derive(ModelLocalKv)]
    pub struct Linear {
        pub out_features: u32,
    }

    #[derive(ModelLocalKv)]
    pub struct Norm {
        pub eps: f32,
    }

    /// A tree of `layers` layers: `10 * layers + 1` modules, `layers` declaring.
    pub fn model(layers: usize) -> Model {
        let linear = || Linear { out_features: 1024 };
        Model {
            layers: (0..layers)
                .map(|i| Layer {
                    attn: Attention {
                        sliding: i % 2 == 0,
                        kv_heads: 8,
                        head_dim: 128,
                        max_len: super::MAX_LEN,
                        cache: None,
                        q: linear(),
                        k: linear(),
                        v: linear(),
                        o: linear(),
                    },
                    mlp: Mlp {
                        up: linear(),
                        down: linear(),
                    },
                    norm: Norm { eps: 1e-6 },
                })
                .collect(),
        }
    }

    /// `n` modules of which none declares: a root and `n - 1` norms.
    pub fn silent(n: usize) -> Silent {
        Silent {
            norms: (1..n).map(|_| Norm { eps: 1e-6 }).collect(),
        }
    }

    #[derive(ModelLocalKv)]
    pub struct Silent {
        #[kv(child)]
        pub norms: Vec<Norm>,
    }
}

/// The same tree with `ModelLocalKv` written by hand, the way a careful author
/// would without the derive: a `const` spec pushed for the static declaration,
/// the after-load one built, validated and pushed, children visited directly.
pub mod hand {

    use kv_core::declare::{ChildVisitor, Segment};
    use kv_core::{DType, Geometry, KvError, KvSpec, ModelLocalKv, Positions, Rows, Scope};

    fn field(visitor: &mut dyn ChildVisitor, name: &'static str, child: &dyn ModelLocalKv) {
        visitor.enter(Segment::Field(name));
        visitor.owner(child);
        visitor.leave();
    }

    fn count(value: impl TryInto<u64>, field: &'static str) -> Result<u64, KvError> {
        value.try_into().map_err(|_| KvError::InvalidValue {
            declaration: "Attention.cache".into(),
            field,
            problem: "does not fit in u64".into(),
        })
    }

    pub struct Model {
        pub layers: Vec<Layer>,
    }

    impl ModelLocalKv for Model {
        fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
            Ok(())
        }
        fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
            visitor.enter(Segment::Field("layers"));
            for (index, layer) in self.layers.iter().enumerate() {
                visitor.enter(Segment::Index(index));
                visitor.owner(layer);
                visitor.leave();
            }
            visitor.leave();
        }
    }

    pub struct Layer {
        pub attn: Attention,
        pub mlp: Mlp,
        pub norm: Norm,
    }

    impl ModelLocalKv for Layer {
        fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
            Ok(())
        }
        fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
            field(visitor, "attn", &self.attn);
            field(visitor, "mlp", &self.mlp);
            field(visitor, "norm", &self.norm);
        }
    }

    pub struct Attention {
        pub sliding: bool,
        pub kv_heads: usize,
        pub head_dim: u32,
        pub max_len: usize,
        pub cache: Option<()>,
        pub q: Linear,
        pub k: Linear,
        pub v: Linear,
        pub o: Linear,
    }

    impl ModelLocalKv for Attention {
        fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
            if self.sliding {
                out.push(
                    KvSpec::attention(
                        "window",
                        "sliding DynamicCache",
                        Geometry::new(1, 8, 128, DType::BF16),
                        Positions::bounded(4095, "sliding_window(4096) - 1"),
                        Scope::Request,
                        Rows::MaxNumSeqs,
                    )
                    .only_when("sliding"),
                );
            } else {
                let spec = KvSpec::attention(
                    "cache",
                    "StaticCache",
                    Geometry::new(
                        1,
                        count(self.kv_heads, "kv_heads")?,
                        u64::from(self.head_dim),
                        DType::BF16,
                    ),
                    Positions::bounded(count(self.max_len, "positions")?, "max_cache_len"),
                    Scope::Invocation,
                    Rows::fixed(1, "calls are serialized"),
                )
                .only_when("full");
                spec.validate("Attention")?;
                out.push(spec);
            }
            Ok(())
        }
        fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
            field(visitor, "q", &self.q);
            field(visitor, "k", &self.k);
            field(visitor, "v", &self.v);
            field(visitor, "o", &self.o);
        }
    }

    pub struct Mlp {
        pub up: Linear,
        pub down: Linear,
    }

    impl ModelLocalKv for Mlp {
        fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
            Ok(())
        }
        fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
            field(visitor, "up", &self.up);
            field(visitor, "down", &self.down);
        }
    }

    pub struct Linear {
        pub out_features: u32,
    }

    impl ModelLocalKv for Linear {
        fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
            Ok(())
        }
    }

    pub struct Norm {
        pub eps: f32,
    }

    impl ModelLocalKv for Norm {
        fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
            Ok(())
        }
    }

    /// The same tree as [`super::derived::model`].
    pub fn model(layers: usize) -> Model {
        let linear = || Linear { out_features: 1024 };
        Model {
            layers: (0..layers)
                .map(|i| Layer {
                    attn: Attention {
                        sliding: i % 2 == 0,
                        kv_heads: 8,
                        head_dim: 128,
                        max_len: super::MAX_LEN,
                        cache: None,
                        q: linear(),
                        k: linear(),
                        v: linear(),
                        o: linear(),
                    },
                    mlp: Mlp {
                        up: linear(),
                        down: linear(),
                    },
                    norm: Norm { eps: 1e-6 },
                })
                .collect(),
        }
    }

    pub struct Silent {
        pub norms: Vec<Norm>,
    }

    impl ModelLocalKv for Silent {
        fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
            Ok(())
        }
        fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
            visitor.enter(Segment::Field("norms"));
            for (index, norm) in self.norms.iter().enumerate() {
                visitor.enter(Segment::Index(index));
                visitor.owner(norm);
                visitor.leave();
            }
            visitor.leave();
        }
    }

    /// The same as [`super::derived::silent`].
    pub fn silent(n: usize) -> Silent {
        Silent {
            norms: (1..n).map(|_| Norm { eps: 1e-6 }).collect(),
        }
    }
}

/// Layers in the benchmark tree: 10,001 modules, 1,000 declaring.
pub const LAYERS: usize = 1_000;
