//! Walks a model tree and gathers what each owner declares, with its path.
//!
//! Collecting never panics and never fails: an owner whose `kv_declare` returns
//! an error or panics is logged, kept in [`Collection::skipped`], and its
//! declarations dropped; everything else is still collected. A derived
//! declaration read after load that fails is skipped alone, and one whose
//! count read after load is zero yields nothing and is kept in
//! [`Collection::empty_declarations`]: its siblings are unaffected.

use std::any::Any;
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::declare::{ChildVisitor, ModelLocalKv, OwnerId, Segment};
use crate::error::KvError;
use crate::parallel::{for_rank, Parallel};
use crate::spec::KvSpec;

/// One declaration and where in the model tree it was found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Collected {
    /// The owner's path, segments joined by `.` (`talker.layers.3`); empty for
    /// the root.
    pub path: String,
    /// `std::any::type_name` of the owner.
    pub owner_type: &'static str,
    /// What it declared (for one rank, after [`Collection::for_rank`]).
    pub spec: KvSpec,
    /// How a parallel layout divided it, in words; `None` on a single rank.
    pub share: Option<String>,
}

impl Collected {
    /// A declaration found at `path` on an owner of type `owner_type`.
    pub fn new(path: impl Into<String>, owner_type: &'static str, spec: KvSpec) -> Collected {
        Collected {
            path: path.into(),
            owner_type,
            spec,
            share: None,
        }
    }

    /// `path.name`, or just `name` at the root: `talker.layers.3.cache`.
    pub fn full_name(&self) -> String {
        join(&self.path, &self.spec.name)
    }

    /// `Type.name`, as [`KvError`] names a declaration: the owner's type
    /// without its module path, then the declaration's name.
    pub fn declaration(&self) -> String {
        format!("{}.{}", short_type_name(self.owner_type), self.spec.name)
    }
}

/// A type's name without module paths, generics kept:
/// `my_model::talker::Talker<alloc::vec::Vec<u8>>` is `Talker<Vec<u8>>`.
pub(crate) fn short_type_name(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    // Where the path segment being written started in `out`.
    let mut segment_start = 0;
    let mut chars = full.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            out.truncate(segment_start);
        } else {
            out.push(c);
            if !(c.is_alphanumeric() || c == '_') {
                segment_start = out.len();
            }
        }
    }
    out
}

/// An owner whose declarations were dropped, or one declaration of it, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The owner's path; empty for the root.
    pub path: String,
    /// `std::any::type_name` of the owner, where it could be had.
    pub owner_type: &'static str,
    /// The declaration skipped, by its name, where only that one was: a
    /// derived declaration whose value read after load failed (a `Result`
    /// that was an error, a negative count) or is invalid. `None` when the
    /// whole owner was skipped.
    pub declaration: Option<Cow<'static, str>>,
    /// The error it returned, the invalid value it declared, or
    /// [`KvError::DeclarerPanicked`].
    pub error: KvError,
}

impl Skipped {
    /// What was skipped, as the report names it: the declaration's full name
    /// (`layers.3.cache`), or the owner's path; `<root>` for the root owner.
    pub fn what(&self) -> String {
        match &self.declaration {
            Some(name) => join(&self.path, name),
            None if self.path.is_empty() => "<root>".to_owned(),
            None => self.path.clone(),
        }
    }
}

/// A declaration that yields nothing because a count read after load is
/// zero: a hybrid model's group with no layers in this config, a cache sized
/// by a limit set to 0. Its sibling declarations are collected as usual; the
/// report says what was zero and, where the derive saw it, the expression it
/// was read from.
///
/// ```
/// use kv_core::{collect, ModelLocalKv};
///
/// #[derive(ModelLocalKv)]
/// #[kv(name = "sliding", cache = "sliding DynamicCache",
///      layers = self.sliding_layers, kv_heads = 2, head_dim = 8, dtype = bf16,
///      positions = bounded(16, because = "sliding_window(16)"),
///      scope = request, rows = max_num_seqs)]
/// #[kv(name = "full", cache = "DynamicCache",
///      layers = self.full_layers, kv_heads = 2, head_dim = 8, dtype = bf16,
///      positions = bounded(64, because = "max_model_len"),
///      scope = request, rows = max_num_seqs)]
/// struct Hybrid {
///     sliding_layers: u32,
///     full_layers: u32,
/// }
///
/// let collection = collect(&Hybrid { sliding_layers: 0, full_layers: 4 });
/// assert_eq!(collection.entries().len(), 1); // `full` is kept
/// let empty = &collection.empty_declarations()[0];
/// assert_eq!(empty.full_name(), "sliding");
/// assert_eq!(empty.reason(), "0 layers from `self.sliding_layers`");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EmptyDeclaration {
    /// The owner's path; empty for the root.
    pub path: String,
    /// `std::any::type_name` of the owner.
    pub owner_type: &'static str,
    /// The declaration as read, its zero included.
    pub spec: KvSpec,
    /// The count that is zero: `layers`, `kv_heads`, `head_dim`,
    /// `v_head_dim`, `positions`, `kv_lora_rank`, `rope_dim`, `slots`,
    /// `rows`, or `state` (a state part with a zero dimension, or no parts).
    pub field: &'static str,
    /// The expression it was read from, as written
    /// (`self.config.sliding_layers`); for a zero inside a whole `geometry`,
    /// `latent` or `state`, that value's expression. `None` for a
    /// declaration the derive did not write.
    pub from: Option<&'static str>,
}

impl EmptyDeclaration {
    /// `path.name`, or just `name` at the root.
    pub fn full_name(&self) -> String {
        join(&self.path, &self.spec.name)
    }

    /// `Type.name`, as [`KvError`] names a declaration.
    pub fn declaration(&self) -> String {
        format!("{}.{}", short_type_name(self.owner_type), self.spec.name)
    }

    /// What was zero and where it came from: ``0 layers from `self.sliding_layers` ``.
    pub fn reason(&self) -> String {
        zero_reason(self.field, self.from)
    }
}

/// ``0 layers from `self.sliding_layers` ``, or `0 layers, read after load`
/// where the expression is not known.
pub(crate) fn zero_reason(field: &str, from: Option<&str>) -> String {
    let what = if field == "state" {
        "a state part with a zero dimension (or no parts)".to_owned()
    } else {
        format!("0 {field}")
    };
    match from {
        Some(from) => format!("{what} from `{from}`"),
        None => format!("{what}, read after load"),
    }
}

/// Bytes at peak for one `max_num_seqs`, split by when they are allocated
/// and where they live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Totals {
    /// Every declaration: `resident + after_profiling`, `device + host`.
    pub total: u64,
    /// Placement device: what budgets and the planner count.
    pub device: u64,
    /// Placement host.
    pub host: u64,
    /// Scope `model`: allocated during load, so a memory profile taken after
    /// load has already charged it. Report it; never subtract it.
    pub resident: u64,
    /// Scopes `request`, `session`, `invocation`: allocated after profiling.
    pub after_profiling: u64,
    /// Bytes one more position adds to one row, over every declaration that
    /// keeps positions (recurrent state keeps none).
    pub per_position: u64,
    /// Bytes of one row of every declaration, whatever its row count.
    pub per_row: u64,
}

/// Everything a model tree declares now, in visiting order.
///
/// ```
/// use kv_core::{collect, DType, Geometry, KvError, KvSpec, ModelLocalKv, Positions, Rows, Scope};
///
/// struct Talker;
/// impl ModelLocalKv for Talker {
///     fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
///         out.push(KvSpec::attention(
///             "cache",
///             "StaticCache",
///             Geometry::new(24, 2, 64, DType::BF16),
///             Positions::bounded(2048, "max_cache_len"),
///             Scope::Invocation,
///             Rows::fixed(1, "calls are serialized"),
///         ));
///         Ok(())
///     }
/// }
///
/// let collection = collect(&Talker);
/// assert_eq!(collection.entries()[0].full_name(), "cache");
/// assert_eq!(collection.totals(256)?.total, 25_165_824);
/// # Ok::<(), KvError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Collection {
    entries: Vec<Collected>,
    skipped: Vec<Skipped>,
    poisoned: Vec<String>,
    empty: Vec<EmptyDeclaration>,
    parallel: Parallel,
}

impl Collection {
    /// The declarations, in visiting order (an owner's own, then its children's).
    pub fn entries(&self) -> &[Collected] {
        &self.entries
    }

    /// The owners whose declarations were dropped, and the declarations
    /// skipped alone.
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// The paths read through a poisoned lock (a thread panicked while
    /// holding it): counted, since the cache is still there, but what it holds
    /// may be half-written.
    pub fn poisoned(&self) -> &[String] {
        &self.poisoned
    }

    /// The declarations that yield nothing, a count read after load being
    /// zero, in visiting order. They add no bytes; the report lists them.
    pub fn empty_declarations(&self) -> &[EmptyDeclaration] {
        &self.empty
    }

    /// The parallel layout and rank these figures are for.
    pub fn parallel(&self) -> Parallel {
        self.parallel
    }

    /// What one rank of `parallel` holds: each declaration divided by the
    /// engines' rules (see [`Parallel`]), those its pipeline stage holds no
    /// layers of left out. [`Parallel::SINGLE`] gives the same figures.
    /// A declaration that cannot be divided as engines divide it (heads that
    /// `tp` does not split, `pp` larger than its layers) is an error naming it.
    ///
    /// ```
    /// use kv_core::{DType, Geometry, KvError, KvSpec, ModelLocalKv, Parallel, Positions, Rows, Scope};
    ///
    /// struct Llama;
    /// impl ModelLocalKv for Llama {
    ///     fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
    ///         out.push(KvSpec::attention(
    ///             "kv", "StaticCache", Geometry::new(32, 8, 128, DType::BF16),
    ///             Positions::bounded(8192, "max_cache_len"), Scope::Request, Rows::MaxNumSeqs,
    ///         ));
    ///         Ok(())
    ///     }
    /// }
    /// let whole = kv_core::collect(&Llama);
    /// let rank = whole.for_rank(Parallel::new(2, 2)?.at(1, 1)?)?;
    /// // 16 of 32 layers, 4 of 8 heads: a quarter of the whole.
    /// assert_eq!(rank.totals(1)?.total * 4, whole.totals(1)?.total);
    /// # Ok::<(), KvError>(())
    /// ```
    pub fn for_rank(&self, parallel: Parallel) -> Result<Collection, KvError> {
        let mut entries = Vec::with_capacity(self.entries.len());
        for entry in &self.entries {
            if let Some(share) = for_rank(&entry.spec, parallel, &entry.declaration())? {
                entries.push(Collected {
                    path: entry.path.clone(),
                    owner_type: entry.owner_type,
                    spec: share.spec,
                    share: (!share.share.is_empty()).then_some(share.share),
                });
            }
        }
        Ok(Collection {
            entries,
            skipped: self.skipped.clone(),
            poisoned: self.poisoned.clone(),
            empty: self.empty.clone(),
            parallel,
        })
    }

    /// Peak bytes at `max_num_seqs`, total and split. Any product or sum that
    /// overflows `u64` is [`KvError::Overflow`], naming the declaration.
    pub fn totals(&self, max_num_seqs: u64) -> Result<Totals, KvError> {
        let mut totals = Totals {
            total: 0,
            device: 0,
            host: 0,
            resident: 0,
            after_profiling: 0,
            per_position: 0,
            per_row: 0,
        };
        for entry in &self.entries {
            let overflow = |step| KvError::Overflow {
                declaration: entry.declaration(),
                step,
            };
            let peak = entry
                .spec
                .peak_bytes(max_num_seqs)
                .map_err(|o| overflow(o.step))?;
            let part = if entry.spec.scope.is_resident() {
                &mut totals.resident
            } else {
                &mut totals.after_profiling
            };
            *part = part
                .checked_add(peak)
                .ok_or_else(|| overflow("sum of peak bytes"))?;
            let place = if entry.spec.placement.is_device() {
                &mut totals.device
            } else {
                &mut totals.host
            };
            *place = place
                .checked_add(peak)
                .ok_or_else(|| overflow("sum of peak bytes"))?;
            totals.total = totals
                .total
                .checked_add(peak)
                .ok_or_else(|| overflow("sum of peak bytes"))?;
            if let Some(per_position) = entry.spec.layout.bytes_per_position() {
                let per_position = per_position.map_err(|o| overflow(o.step))?;
                totals.per_position = totals
                    .per_position
                    .checked_add(per_position)
                    .ok_or_else(|| overflow("sum of bytes per position"))?;
            }
            let per_row = entry.spec.bytes_per_row().map_err(|o| overflow(o.step))?;
            totals.per_row = totals
                .per_row
                .checked_add(per_row)
                .ok_or_else(|| overflow("sum of bytes per row"))?;
        }
        Ok(totals)
    }
}

/// Collects every declaration in the tree under `root`.
///
/// Owners are visited depth first: each owner's own declarations, then its
/// children through [`ModelLocalKv::kv_visit_children`]. An owner reached twice
/// (same [`OwnerId`], e.g. one `Arc` held in two places, or a cycle) is
/// collected once, at the first path it was reached by; zero-sized owners have
/// no identity and are collected each time.
///
/// An owner whose `kv_declare` returns an error, panics, or declares an invalid
/// spec (see [`KvSpec::validate`]) is logged with `log::warn!` and kept in
/// [`Collection::skipped`]; none of its declarations are kept, but its children
/// are still visited. A panic in `kv_visit_children` is recorded the same way;
/// the children reached before it stay collected.
///
/// Collecting never waits: a child behind a lock held elsewhere (a `Mutex`,
/// an `RwLock` locked for writing) or a `RefCell` borrowed mutably is kept in
/// [`Collection::skipped`] as [`KvError::Unreachable`], naming its path; one
/// behind a poisoned lock is read and its path kept in
/// [`Collection::poisoned`]. Both are logged with `log::warn!`.
///
/// A derived owner's declarations read after load are judged one by one: one
/// whose value fails (a `Result` that is an error, a negative count) or is
/// invalid is logged and kept in [`Collection::skipped`] with its name, and
/// one whose count is zero is kept in [`Collection::empty_declarations`];
/// the owner's other declarations are collected. (Called directly, outside
/// a collection, its `kv_declare` returns the first such error, and leaves a
/// zero declaration out, saying so through `log::info!`.)
pub fn collect(root: &dyn ModelLocalKv) -> Collection {
    let mut walker = Walker::default();
    walker.owner(root);
    walker.collection
}

/// The collector's state. One buffer, one path string and one stack of path
/// lengths are reused for the whole walk, so an owner that declares nothing
/// costs no allocation (beyond the seen-set growing).
#[derive(Default)]
struct Walker {
    collection: Collection,
    seen: HashSet<OwnerId>,
    buffer: Vec<KvSpec>,
    /// What the owner being asked reported of its declarations read after
    /// load (reused, like `buffer`).
    dropped: Vec<Dropped>,
    path: String,
    /// Path length before each entered segment.
    depths: Vec<usize>,
}

impl Walker {
    fn skip(&mut self, owner_type: &'static str, error: KvError) {
        self.skip_declaration(owner_type, None, error);
    }

    fn skip_declaration(
        &mut self,
        owner_type: &'static str,
        declaration: Option<Cow<'static, str>>,
        error: KvError,
    ) {
        let skipped = Skipped {
            path: self.path.clone(),
            owner_type,
            declaration,
            error,
        };
        let what = if skipped.declaration.is_some() {
            "declaration"
        } else {
            "declarations of"
        };
        log::warn!(
            "kv: skipping the {what} `{}` ({owner_type}): {}",
            skipped.what(),
            skipped.error
        );
        self.collection.skipped.push(skipped);
    }

    /// `during` names the method that panicked.
    fn panicked(&self, during: &str, payload: &(dyn Any + Send)) -> KvError {
        let message = if let Some(text) = payload.downcast_ref::<&str>() {
            text
        } else if let Some(text) = payload.downcast_ref::<String>() {
            text.as_str()
        } else {
            "<panic payload is not a string>"
        };
        KvError::DeclarerPanicked {
            path: self.path.clone(),
            message: format!("in {during}: {message}"),
        }
    }

    fn declare(&mut self, owner: &dyn ModelLocalKv, owner_type: &'static str) {
        self.buffer.clear();
        self.dropped.clear();
        let buffer = &mut self.buffer;
        let listener = listen(std::mem::take(&mut self.dropped));
        let declared = catch_unwind(AssertUnwindSafe(|| {
            owner.kv_declare(buffer).map(|()| owner.__kv_validated())
        }));
        self.dropped = listener.stop();
        let result = match declared {
            // The derive validated its own specs; a hand-written declarer's are checked here.
            Ok(Ok(true)) => Ok(()),
            // The owner's name only names an error: checked without it first,
            // so a valid spec costs no allocation.
            Ok(Ok(false)) => self.buffer.iter().try_for_each(|spec| {
                spec.validate("").map_err(|unnamed| {
                    spec.validate(&short_type_name(owner_type))
                        .err()
                        .unwrap_or(unnamed)
                })
            }),
            Ok(Err(error)) => Err(error),
            Err(payload) => Err(self.panicked("kv_declare", &*payload)),
        };
        match result {
            Ok(()) => {
                let path = &self.path;
                let entries = self
                    .buffer
                    .drain(..)
                    .map(|spec| Collected::new(path.clone(), owner_type, spec));
                self.collection.entries.extend(entries);
                let mut dropped = std::mem::take(&mut self.dropped);
                for one in dropped.drain(..) {
                    match one {
                        Dropped::Empty { spec, field, from } => {
                            self.collection.empty.push(EmptyDeclaration {
                                path: self.path.clone(),
                                owner_type,
                                spec: *spec,
                                field,
                                from,
                            });
                        }
                        Dropped::Failed { name, error } => {
                            self.skip_declaration(owner_type, Some(Cow::Borrowed(name)), error);
                        }
                    }
                }
                self.dropped = dropped;
            }
            Err(error) => {
                // The whole owner is skipped: what it said of single
                // declarations goes with it.
                self.buffer.clear();
                self.dropped.clear();
                self.skip(owner_type, error);
            }
        }
    }
}

impl ChildVisitor for Walker {
    fn enter(&mut self, segment: Segment<'_>) {
        self.depths.push(self.path.len());
        if !self.path.is_empty() {
            self.path.push('.');
        }
        match segment {
            Segment::Field(name) => self.path.push_str(name),
            // Writing to a String cannot fail; a `Display` that errs leaves a partial segment.
            other => {
                let _ = write!(self.path, "{other}");
            }
        }
    }

    fn leave(&mut self) {
        // An unbalanced `leave` from a hand-written visitor is ignored.
        if let Some(depth) = self.depths.pop() {
            self.path.truncate(depth);
        }
    }

    fn unreachable(&mut self, container: &'static str, why: &'static str) {
        let error = KvError::Unreachable {
            path: self.path.clone(),
            container,
            why,
        };
        self.skip(container, error);
    }

    fn poisoned(&mut self, container: &'static str) {
        let path = if self.path.is_empty() {
            "<root>"
        } else {
            &self.path
        };
        log::warn!(
            "kv: `{path}` is behind a poisoned {container} (a thread panicked while holding \
             it); its declarations are counted all the same"
        );
        self.collection.poisoned.push(self.path.clone());
    }

    fn owner(&mut self, owner: &dyn ModelLocalKv) {
        let identity = match catch_unwind(AssertUnwindSafe(|| owner.kv_identity())) {
            Ok(identity) => identity,
            Err(payload) => {
                let error = self.panicked("kv_identity", &*payload);
                self.skip("<unknown: kv_identity panicked>", error);
                return;
            }
        };
        if identity.is_addressable() && !self.seen.insert(identity) {
            return;
        }
        self.declare(owner, identity.type_name());

        let (path_len, depth) = (self.path.len(), self.depths.len());
        let walked = catch_unwind(AssertUnwindSafe(|| owner.kv_visit_children(self)));
        // Restore the path after a panic or unbalanced enter/leave.
        self.depths.truncate(depth);
        self.path.truncate(path_len);
        if let Err(payload) = walked {
            let error = self.panicked("kv_visit_children", &*payload);
            self.skip(identity.type_name(), error);
        }
    }
}

/// What a derived declaration read after load reported instead of a spec.
#[derive(Debug)]
enum Dropped {
    /// A count read after load is zero.
    Empty {
        spec: Box<KvSpec>,
        field: &'static str,
        from: Option<&'static str>,
    },
    /// Its value could not be read, or is invalid.
    Failed { name: &'static str, error: KvError },
}

thread_local! {
    /// Where the owner the collector is asking now reports its dropped
    /// declarations; `None` when no collector is asking.
    static LISTENER: RefCell<Option<Vec<Dropped>>> = const { RefCell::new(None) };
    /// The counts read as zero while building the current declaration, each
    /// with its key and expression as written.
    static ZERO_READS: RefCell<Vec<(&'static str, &'static str)>> = const { RefCell::new(Vec::new()) };
    /// The expression of the current declaration's whole geometry, latent or state.
    static WHOLE_READ: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// The collector listening to one owner's `kv_declare`; the listener it
/// replaced (a collection inside a declarer) is restored by [`Listening::stop`].
struct Listening {
    replaced: Option<Vec<Dropped>>,
}

fn listen(records: Vec<Dropped>) -> Listening {
    Listening {
        replaced: LISTENER.with(|l| l.replace(Some(records))),
    }
}

impl Listening {
    /// What was reported, the previous listener restored.
    fn stop(self) -> Vec<Dropped> {
        LISTENER
            .with(|l| l.replace(self.replaced))
            .unwrap_or_default()
    }
}

/// Whether a collector is asking the current owner for its declarations.
fn listening() -> bool {
    LISTENER.with(|l| l.borrow().is_some())
}

/// Reports a dropped declaration to the listening collector.
fn record(dropped: Dropped) {
    LISTENER.with(|l| {
        if let Some(records) = l.borrow_mut().as_mut() {
            records.push(dropped);
        }
    });
}

/// Forgets what was read for the previous declaration: called before each
/// derived declaration read after load is built.
pub(crate) fn begin_declaration() {
    ZERO_READS.with(|reads| reads.borrow_mut().clear());
    WHOLE_READ.with(|whole| whole.set(None));
}

/// A count read as zero, with its key and expression.
pub(crate) fn zero_read(key: &'static str, from: &'static str) {
    ZERO_READS.with(|reads| reads.borrow_mut().push((key, from)));
}

/// The expression of a whole geometry, latent or state read after load.
pub(crate) fn whole_read(from: &'static str) {
    WHOLE_READ.with(|whole| whole.set(Some(from)));
}

/// A derived declaration whose `field` is zero: reported to the collector,
/// or, called outside a collection, logged.
pub(crate) fn declared_empty(owner: &str, spec: KvSpec, field: &'static str) {
    let counted = ZERO_READS.with(|reads| {
        reads
            .borrow()
            .iter()
            .find(|(key, _)| *key == field)
            .map(|(_, from)| *from)
    });
    let from = counted.or_else(|| WHOLE_READ.with(Cell::get));
    if listening() {
        record(Dropped::Empty {
            spec: Box::new(spec),
            field,
            from,
        });
    } else {
        log::info!(
            "kv: `{owner}.{}` declares nothing: {}",
            spec.name,
            zero_reason(field, from)
        );
    }
}

/// A derived declaration whose value failed: reported to the collector,
/// which skips it alone (`Ok`), or, outside a collection, the error.
pub(crate) fn declaration_failed(name: &'static str, error: KvError) -> Result<(), KvError> {
    if listening() {
        record(Dropped::Failed { name, error });
        Ok(())
    } else {
        Err(error)
    }
}

pub(crate) fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::short_type_name;

    #[test]
    fn short_type_names_drop_module_paths() {
        assert_eq!(short_type_name("my_model::talker::Talker"), "Talker");
        assert_eq!(
            short_type_name("a::Wrapper<alloc::vec::Vec<b::Layer>, 3>"),
            "Wrapper<Vec<Layer>, 3>"
        );
        assert_eq!(short_type_name("&dyn a::b::Trait"), "&dyn Trait");
        assert_eq!(short_type_name("Plain"), "Plain");
    }
}
