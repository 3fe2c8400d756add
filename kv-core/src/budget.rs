//! Budgets for model-local KV: ceilings, never equalities.
//!
//! A budget holds when the declared peak is at most its ceiling. Removing a
//! cache, or shrinking one, therefore never breaks a budget; only growth past
//! the ceiling does. Nothing here asks for the declared total to equal a
//! number, which would make every removal a failing build until someone
//! hand-edits a constant.
//!
//! * At compile time, [`static_peak_bytes`] and [`within_budget`] sum a type's
//!   static declarations, and [`assert_kv_budget!`](crate::assert_kv_budget)
//!   fails the build when a type's static peak is over its ceiling.
//!   Declarations gated by `only_when` count: the ceiling must hold when they
//!   are on. Declarations read after load have no figures before load and are
//!   not counted; check them at run time. A type with no static declaration
//!   (every one read after load, or none of its own) is a compile error: the
//!   assertion would bound nothing.
//! * At run time, [`Budget::check`] sums collected declarations.

use crate::collection::collect::Collected;
use crate::error::{KvError, Overflow};
use crate::spec::KvSpec;

/// The step named when the sum of peaks overflows.
const SUM_STEP: &str = "total peak bytes (sum over declarations)";

/// The sum of the peaks of `specs` at `max_num_seqs`, every product and the sum
/// checked. Usable in `const` items.
///
/// ```
/// use kv_core::budget::static_peak_bytes;
/// use kv_core::ModelLocalKv;
/// use kv_core::declare::DeclaredKv;
///
/// #[derive(ModelLocalKv)]
/// #[kv(
///     name = "graph_pool",
///     cache = "captured DynamicCache",
///     layers = 16, kv_heads = 64, head_dim = 16, dtype = bf16,
///     positions = bounded(11, because = "group_size + max(delay_pattern)"),
///     scope = model,
///     rows = fixed(261, because = "sum of captured buckets"),
/// )]
/// struct Pool;
///
/// const PEAK: u64 = match static_peak_bytes(Pool::KV_DECLS.static_specs, 256) {
///     Ok(bytes) => bytes,
///     Err(_) => panic!("overflow"),
/// };
/// assert_eq!(PEAK, 188_153_856);
/// ```
pub const fn static_peak_bytes(specs: &[KvSpec], max_num_seqs: u64) -> Result<u64, Overflow> {
    let mut total: u64 = 0;
    let mut i = 0;
    while i < specs.len() {
        match specs[i].peak_bytes(max_num_seqs) {
            Ok(peak) => match total.checked_add(peak) {
                Some(sum) => total = sum,
                None => return Err(Overflow { step: SUM_STEP }),
            },
            Err(overflow) => return Err(overflow),
        }
        i += 1;
    }
    Ok(total)
}

/// Whether the peak of `specs` at `max_num_seqs` is at most `ceiling_bytes`.
/// A peak that overflows `u64` is never within a budget.
pub const fn within_budget(specs: &[KvSpec], max_num_seqs: u64, ceiling_bytes: u64) -> bool {
    match static_peak_bytes(specs, max_num_seqs) {
        Ok(peak) => peak <= ceiling_bytes,
        Err(_) => false,
    }
}

/// A ceiling on model-local KV at one `max_num_seqs`, checked at run time.
///
/// ```
/// use kv_core::budget::Budget;
/// use kv_core::units::{GIB, MIB};
/// use kv_core::{DType, Geometry, KvError, KvSpec, ModelLocalKv, Positions, Rows, Scope};
///
/// struct Decoder;
/// impl ModelLocalKv for Decoder {
///     fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
///         out.push(KvSpec::attention(
///             "retained",
///             "sliding DynamicCache",
///             Geometry::new(8, 16, 64, DType::F32),
///             Positions::bounded(71, "sliding_window(72) - 1"),
///             Scope::Request,
///             Rows::MaxNumSeqs,
///         ));
///         Ok(())
///     }
/// }
/// let collection = kv_core::collect(&Decoder);
/// let budget = Budget { ceiling_bytes: 2 * GIB, max_num_seqs: 256 };
/// assert_eq!(budget.check(collection.entries()), Ok(256 * 4_653_056));
///
/// let tight = Budget { ceiling_bytes: 512 * MIB, max_num_seqs: 256 };
/// let err = tight.check(collection.entries()).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "kv: model-local KV over budget: 1191182336 device bytes declared at \
///      max_num_seqs=256, ceiling 536870912 bytes"
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Budget {
    /// The most bytes the declarations may take at peak.
    pub ceiling_bytes: u64,
    /// The `max_num_seqs` the peak is computed at.
    pub max_num_seqs: u64,
}

impl Budget {
    /// Sums the peaks of collected declarations placed on the device
    /// (`collection.entries()`; host-placed ones are not counted) and
    /// returns the total when it is at most the ceiling.
    /// [`KvError::OverBudget`] when it is over; [`KvError::Overflow`], naming
    /// the declaration (`Type.name`), when a peak or the sum overflows `u64`.
    pub fn check<'c>(
        &self,
        entries: impl IntoIterator<Item = &'c Collected>,
    ) -> Result<u64, KvError> {
        let mut total: u64 = 0;
        for entry in entries.into_iter().filter(|e| e.spec.placement.is_device()) {
            let overflow = |step| KvError::Overflow {
                declaration: entry.declaration(),
                step,
            };
            let peak = entry
                .spec
                .peak_bytes(self.max_num_seqs)
                .map_err(|o| overflow(o.step))?;
            total = total.checked_add(peak).ok_or_else(|| overflow(SUM_STEP))?;
        }
        if total > self.ceiling_bytes {
            return Err(KvError::OverBudget {
                declared: total,
                ceiling: self.ceiling_bytes,
                max_num_seqs: self.max_num_seqs,
            });
        }
        Ok(total)
    }
}

/// Fails the build when a type's static model-local KV at `max_num_seqs` is
/// over `ceiling` bytes. The type implements [`DeclaredKv`](crate::declare::DeclaredKv)
/// (usually through `#[derive(ModelLocalKv)]`); its static declarations are
/// summed, gated ones included, with every product and the sum checked.
///
/// A ceiling, never an equality: removing or shrinking a cache keeps the
/// assertion passing. Declarations read after load are not counted; check them
/// with [`Budget`](crate::budget::Budget) at run time. A type whose
/// declarations are all read after load, or that declares none of its own
/// (the declarations of its `#[kv(child)]` fields are not counted here), is a
/// compile error that says so: the assertion would bound nothing.
///
/// ```
/// #[derive(kv_core::ModelLocalKv)]
/// #[kv(
///     name = "graph_pool",
///     cache = "captured DynamicCache",
///     layers = 16, kv_heads = 64, head_dim = 16, dtype = bf16,
///     positions = bounded(11, because = "group_size + max(delay_pattern)"),
///     scope = model,
///     rows = fixed(261, because = "sum of captured buckets"),
/// )]
/// struct Pool;
///
/// // 188,153,856 B (179.44 MiB) whatever max_num_seqs is.
/// kv_core::assert_kv_budget!(Pool, max_num_seqs = 256, ceiling = 256 * kv_core::units::MIB);
/// ```
///
/// ```compile_fail
/// #[derive(kv_core::ModelLocalKv)]
/// #[kv(name = "cache", cache = "KvCache", geometry = self.geometry,
///      positions = bounded(64, because = "max_seq_len"), scope = request, rows = max_num_seqs)]
/// struct Loaded {
///     geometry: kv_core::Geometry,
/// }
///
/// // Error: every declaration of `Loaded` is read after load.
/// kv_core::assert_kv_budget!(Loaded, max_num_seqs = 256, ceiling = kv_core::units::GIB);
/// ```
#[macro_export]
macro_rules! assert_kv_budget {
    ($ty:ty, max_num_seqs = $max_num_seqs:expr, ceiling = $ceiling:expr $(,)?) => {
        const _: () = {
            let decls = <$ty as $crate::declare::DeclaredKv>::KV_DECLS;
            let specs = decls.static_specs;
            let max_num_seqs: u64 = $max_num_seqs;
            let ceiling: u64 = $ceiling;
            if specs.is_empty() && !decls.after_load.is_empty() {
                ::core::panic!(
                    "{}",
                    ::core::concat!(
                        "kv budget: every declaration of `",
                        ::core::stringify!($ty),
                        "` is read after load, so nothing of it is known at compile time ",
                        "and this assertion would bound nothing; check the loaded model at ",
                        "run time with `kv_core::budget::Budget` (`Budget { ceiling_bytes, ",
                        "max_num_seqs }.check(kv_core::collect(&model).entries())`), or give ",
                        "a declaration literal or const values",
                    )
                );
            }
            if specs.is_empty() {
                ::core::panic!(
                    "{}",
                    ::core::concat!(
                        "kv budget: `",
                        ::core::stringify!($ty),
                        "` declares no model-local KV of its own (the declarations of its ",
                        "`#[kv(child)]` fields are not counted at compile time), so this ",
                        "assertion would bound nothing; assert the budget of the types that ",
                        "declare, or check the loaded model at run time with ",
                        "`kv_core::budget::Budget`",
                    )
                );
            }
            if $crate::budget::static_peak_bytes(specs, max_num_seqs).is_err() {
                ::core::panic!(
                    "{}",
                    ::core::concat!(
                        "kv budget: the static model-local KV of `",
                        ::core::stringify!($ty),
                        "` at max_num_seqs = ",
                        ::core::stringify!($max_num_seqs),
                        " overflows u64 bytes; check its geometry, positions and rows",
                    )
                );
            }
            if !$crate::budget::within_budget(specs, max_num_seqs, ceiling) {
                ::core::panic!(
                    "{}",
                    ::core::concat!(
                        "kv budget exceeded: the static model-local KV of `",
                        ::core::stringify!($ty),
                        "` at max_num_seqs = ",
                        ::core::stringify!($max_num_seqs),
                        " is over its ceiling of `",
                        ::core::stringify!($ceiling),
                        "` bytes (declarations gated by only_when count, those read ",
                        "after load do not); shrink the caches or raise the ceiling",
                    )
                );
            }
        };
    };
}
