//! What one declared allocation is: geometry, positions and their bound, rows
//! and their driver, scope, conditions. All byte math is checked `const fn`.
//!
//! [`KvSpec`], [`Rows`] and [`Scope`] are also at the crate's root; the
//! parts a model author rarely names are here: the [`Layout`] a spec
//! resolves to, its parts with their bytes ([`LayoutPart`]), a sliding
//! layer's full-attention [`Residual`], the [`Bound`] that says why its
//! positions stop where they do, and a hybrid declaration's [`LayerGroup`].

pub(crate) mod dtype;
pub(crate) mod layout;
pub(crate) mod parts;
pub(crate) mod placement;
pub(crate) mod positions;
pub(crate) mod storage;
pub(crate) mod tensors;

pub use layout::{Layout, Residual};
pub use parts::LayoutPart;
pub use placement::LayerGroup;
pub use positions::Bound;
pub use tensors::TensorShape;

use std::borrow::Cow;
use std::fmt;

use crate::error::{KvError, Overflow};
use crate::pattern::{LayerKind, LayerPattern};
use layout::{Geometry, Latent, RecurrentState};
use placement::{Placement, Sharding};
use positions::Positions;
use tensors::Tensors;

/// Text carried by a declaration: a literal in derived code, owned when built at run time.
pub(crate) type Text = Cow<'static, str>;

/// When the memory appears and goes. Diagnostic only: scope never multiplies bytes
/// (rows do).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Lives for one forward call.
    Invocation,
    /// Lives for one request.
    Request,
    /// Lives for one session (e.g. a duplex conversation).
    Session,
    /// Lives as long as the model; allocated during load (e.g. captured graphs).
    Model,
}

impl Scope {
    /// Every scope, shortest-lived first.
    pub const ALL: [Scope; 4] = [
        Scope::Invocation,
        Scope::Request,
        Scope::Session,
        Scope::Model,
    ];

    /// The lower-case name used in attributes and reports.
    pub const fn name(self) -> &'static str {
        match self {
            Scope::Invocation => "invocation",
            Scope::Request => "request",
            Scope::Session => "session",
            Scope::Model => "model",
        }
    }

    /// Resident memory is allocated during load, so an engine that profiles
    /// after load has already charged it; the other scopes are allocated later.
    pub const fn is_resident(self) -> bool {
        matches!(self, Scope::Model)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many row-equivalents are live at peak. Required: defaulting to one would
/// silently understate.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Rows {
    /// One row per in-flight sequence; the engine supplies `max_num_seqs`.
    MaxNumSeqs,
    /// A count the model controls, with the reason it is that count.
    Fixed {
        /// Row-equivalents at peak; positive.
        count: u64,
        /// Why it is this count; never blank.
        because: Text,
    },
}

impl Rows {
    /// A fixed count with its reason.
    pub const fn fixed(count: u64, because: &'static str) -> Rows {
        Rows::Fixed {
            count,
            because: Cow::Borrowed(because),
        }
    }

    /// The number of rows at a given `max_num_seqs`.
    pub const fn count(&self, max_num_seqs: u64) -> u64 {
        match self {
            Rows::MaxNumSeqs => max_num_seqs,
            Rows::Fixed { count, .. } => *count,
        }
    }
}

impl fmt::Display for Rows {
    /// `max_num_seqs`, or `fixed(261; sum of captured buckets)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rows::MaxNumSeqs => f.write_str("max_num_seqs"),
            Rows::Fixed { count, because } => write!(f, "fixed({count}; {because})"),
        }
    }
}

/// One declared allocation of model-local KV.
///
/// Built with [`KvSpec::attention`], [`KvSpec::latent`] or
/// [`KvSpec::recurrent`] and the optional setters; `#[non_exhaustive]`, so
/// fields added later do not break callers.
///
/// ```
/// use kv_core::{DType, Geometry, KvSpec, Positions, Rows, Scope};
///
/// let talker = KvSpec::attention(
///     "cache",
///     "StaticCache",
///     Geometry::new(24, 2, 64, DType::BF16),
///     Positions::bounded(2048, "hardcoded max_cache_len"),
///     Scope::Invocation,
///     Rows::fixed(1, "calls are serialized"),
/// )
/// .assumes("one talker call at a time");
/// assert_eq!(talker.peak_bytes(256), Ok(25_165_824));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct KvSpec {
    /// The declaration's name within its owner, e.g. `"retained"`.
    pub name: Cow<'static, str>,
    /// What kind of cache holds it, e.g. `"sliding DynamicCache"`.
    pub cache: Cow<'static, str>,
    /// What one row is made of, with its positions where it has them.
    pub layout: Layout,
    /// When the memory lives; never a multiplier.
    pub scope: Scope,
    /// Row-equivalents at peak and their driver.
    pub rows: Rows,
    /// The model-observable condition under which this is held (already
    /// true for a collected spec), e.g. `"async_chunk"`.
    pub only_when: Option<Cow<'static, str>>,
    /// A condition the model cannot observe, stated rather than guessed.
    pub assumes: Option<Cow<'static, str>>,
    /// Prose about the object layout (one wide allocation or many narrow ones).
    pub note: Option<Cow<'static, str>>,
    /// Where the memory lives: the device (default) or the host.
    pub placement: Placement,
    /// How tensor and pipeline parallelism divide it (default: by the
    /// engines' rules for its kind).
    pub sharding: Sharding,
    /// The model's layer pattern and the kind of layer that holds this
    /// cache, for a group of a hybrid model: pipeline stages are cut over the
    /// model's layers, so a stage holds the group's layers in its range.
    pub layer_group: Option<LayerGroup>,
}

impl KvSpec {
    /// An attention K/V cache.
    pub fn attention(
        name: impl Into<Cow<'static, str>>,
        cache: impl Into<Cow<'static, str>>,
        geometry: Geometry,
        positions: Positions,
        scope: Scope,
        rows: Rows,
    ) -> KvSpec {
        KvSpec::with_layout(
            name,
            cache,
            Layout::Attention {
                geometry,
                positions,
            },
            scope,
            rows,
        )
    }

    /// An MLA latent cache.
    pub fn latent(
        name: impl Into<Cow<'static, str>>,
        cache: impl Into<Cow<'static, str>>,
        latent: Latent,
        positions: Positions,
        scope: Scope,
        rows: Rows,
    ) -> KvSpec {
        KvSpec::with_layout(
            name,
            cache,
            Layout::Latent { latent, positions },
            scope,
            rows,
        )
    }

    /// Recurrent state: no positions.
    pub fn recurrent(
        name: impl Into<Cow<'static, str>>,
        cache: impl Into<Cow<'static, str>>,
        state: RecurrentState,
        scope: Scope,
        rows: Rows,
    ) -> KvSpec {
        KvSpec::with_layout(name, cache, Layout::Recurrent(state), scope, rows)
    }

    /// Tensors a model keeps beside its caches (rotary tables, a memo of
    /// masks): no positions; held whole on every rank of a parallel layout.
    pub fn tensors(
        name: impl Into<Cow<'static, str>>,
        cache: impl Into<Cow<'static, str>>,
        tensors: Tensors,
        scope: Scope,
        rows: Rows,
    ) -> KvSpec {
        KvSpec::with_layout(name, cache, Layout::Tensors(tensors), scope, rows)
    }

    /// A declaration of any layout.
    pub fn with_layout(
        name: impl Into<Cow<'static, str>>,
        cache: impl Into<Cow<'static, str>>,
        layout: Layout,
        scope: Scope,
        rows: Rows,
    ) -> KvSpec {
        KvSpec {
            name: name.into(),
            cache: cache.into(),
            layout,
            scope,
            rows,
            only_when: None,
            assumes: None,
            note: None,
            placement: Placement::Device,
            sharding: Sharding::ByKind,
            layer_group: None,
        }
    }

    /// The observable condition under which this is held.
    pub fn only_when(mut self, condition: impl Into<Cow<'static, str>>) -> KvSpec {
        self.only_when = Some(condition.into());
        self
    }

    /// A condition the model cannot observe.
    pub fn assumes(mut self, condition: impl Into<Cow<'static, str>>) -> KvSpec {
        self.assumes = Some(condition.into());
        self
    }

    /// Prose about the object layout.
    pub fn note(mut self, note: impl Into<Cow<'static, str>>) -> KvSpec {
        self.note = Some(note.into());
        self
    }

    /// The same declaration held in host memory, with the reason.
    pub fn on_host(mut self, because: impl Into<Cow<'static, str>>) -> KvSpec {
        self.placement = Placement::Host(because.into());
        self
    }

    /// The same declaration held whole on every rank, with the reason (an
    /// encoder cache that is not sharded).
    pub fn whole_on_every_rank(mut self, because: impl Into<Cow<'static, str>>) -> KvSpec {
        self.sharding = Sharding::Whole(because.into());
        self
    }

    /// The same declaration as the `kind` layers of `pattern` (one group of
    /// a hybrid model).
    pub fn in_layers(mut self, pattern: LayerPattern, kind: LayerKind) -> KvSpec {
        self.layer_group = Some(LayerGroup { pattern, kind });
        self
    }

    /// The attention geometry, for an attention cache.
    pub const fn geometry(&self) -> Option<&Geometry> {
        match &self.layout {
            Layout::Attention { geometry, .. } => Some(geometry),
            _ => None,
        }
    }

    /// The positions and their bound; `None` for recurrent state and tensors.
    pub const fn positions(&self) -> Option<&Positions> {
        self.layout.positions()
    }

    /// What a row holds beyond its bytes, as the report writes it: `71
    /// positions from sliding_window(72) - 1`, `recurrent state, no
    /// positions`, or `tensors: cos [4096 x 64] f32, ...`.
    pub fn extent(&self) -> String {
        match (&self.layout, self.positions()) {
            (_, Some(positions)) => format!(
                "{} from {}",
                crate::units::counted(positions.count, "position"),
                positions.bound
            ),
            (Layout::Tensors(tensors), None) => format!("tensors: {tensors}"),
            (_, None) => "recurrent state, no positions".to_owned(),
        }
    }

    /// Bytes one row takes: positions x bytes per position, or the state.
    pub const fn bytes_per_row(&self) -> Result<u64, Overflow> {
        self.layout.bytes_per_row()
    }

    /// Row-equivalents at peak for this `max_num_seqs`.
    pub const fn row_count(&self, max_num_seqs: u64) -> u64 {
        self.rows.count(max_num_seqs)
    }

    /// Bytes at peak for this `max_num_seqs`: rows x bytes per row.
    pub const fn peak_bytes(&self, max_num_seqs: u64) -> Result<u64, Overflow> {
        match self.bytes_per_row() {
            Ok(per_row) => match per_row.checked_mul(self.row_count(max_num_seqs)) {
                Some(bytes) => Ok(bytes),
                None => Err(Overflow::PEAK),
            },
            Err(overflow) => Err(overflow),
        }
    }

    /// Checks what the derive checks at compile time, for values known only at
    /// run time: positive counts, non-blank texts, byte math that fits in u64.
    /// `owner` is the declaring type's name; errors name `owner.name`.
    pub fn validate(&self, owner: &str) -> Result<(), KvError> {
        // Named only on the error path: a valid spec costs no allocation.
        let declaration = || format!("{owner}.{}", self.name);
        let invalid = |field: &'static str, problem: &str| KvError::InvalidValue {
            declaration: declaration(),
            field,
            problem: problem.to_owned(),
        };
        if self.name.trim().is_empty() {
            return Err(invalid("name", "is blank"));
        }
        if self.cache.trim().is_empty() {
            return Err(invalid(
                "cache",
                "is blank; say what kind of cache holds this",
            ));
        }
        if let Layout::Tensors(tensors) = &self.layout {
            if let Some((part, problem)) = tensors.first_invalid() {
                return Err(invalid("tensors", &format!("part `{part}` {problem}")));
            }
        }
        if let Some(field) = self.layout.first_zero() {
            return Err(invalid(
                field,
                "is 0; a cache with no extent declares nothing",
            ));
        }
        if let Some(positions) = self.layout.positions() {
            match &positions.bound {
                Bound::Stated(reason) if reason.trim().is_empty() => {
                    return Err(invalid(
                        "positions",
                        "has a blank bound; say what bounds the positions",
                    ));
                }
                Bound::Policy(policy) => {
                    if let Some(input) = policy.zero_input() {
                        return Err(invalid(
                            "positions",
                            &format!("has a policy whose `{input}` is 0 ({policy})"),
                        ));
                    }
                    if policy.count() != Ok(positions.count) {
                        return Err(invalid(
                            "positions",
                            &format!(
                                "is {} but its policy ({policy}) gives {}",
                                positions.count,
                                policy
                                    .count()
                                    .map_or_else(|o| o.to_string(), |c| c.to_string())
                            ),
                        ));
                    }
                }
                Bound::Stated(_) => {}
            }
        }
        if let Rows::Fixed { count, because } = &self.rows {
            if *count == 0 {
                return Err(invalid(
                    "rows",
                    "is fixed(0); a fixed count must be positive (declare nothing instead)",
                ));
            }
            if because.trim().is_empty() {
                return Err(invalid(
                    "rows",
                    "is fixed with a blank reason; an unexplained count cannot be reviewed",
                ));
            }
        }
        let reasons = [
            ("placement", self.placement.reason()),
            ("sharding", self.sharding.reason()),
        ];
        for (field, reason) in reasons {
            if reason.is_some_and(|r| r.trim().is_empty()) {
                return Err(invalid(field, "has a blank reason; say why"));
            }
        }
        if let Some(group) = &self.layer_group {
            let in_pattern = group.pattern.count(group.kind);
            if in_pattern != self.layout.layers() {
                return Err(invalid(
                    "layers",
                    &format!(
                        "is {} but the layer pattern ({}) has {in_pattern} {} layers",
                        self.layout.layers(),
                        group.pattern.reason(),
                        group.kind.name()
                    ),
                ));
            }
        }
        for (field, text) in [
            ("only_when", &self.only_when),
            ("assumes", &self.assumes),
            ("note", &self.note),
        ] {
            if text.as_ref().is_some_and(|t| t.trim().is_empty()) {
                return Err(invalid(field, "is blank; leave it out or say something"));
            }
        }
        // A fixed count's peak is known now; a max_num_seqs one is checked when reported.
        let checked = match self.rows {
            Rows::Fixed { .. } => self.peak_bytes(0),
            Rows::MaxNumSeqs => self.bytes_per_row(),
        };
        checked
            .map(|_| ())
            .map_err(|o| KvError::from(o).in_declaration(&declaration()))
    }
}

#[cfg(test)]
mod tests {
    use super::dtype::DType;
    use super::layout::StatePart;
    use super::positions::{Bound, PositionPolicy};
    use super::storage::{BlockFormat, Storage};
    use super::*;

    fn qwen3_tts() -> KvSpec {
        KvSpec::attention(
            "retained",
            "sliding DynamicCache",
            Geometry::new(8, 16, 64, DType::F32),
            Positions::bounded(71, "sliding_window(72) - 1"),
            Scope::Request,
            Rows::MaxNumSeqs,
        )
        .only_when("async_chunk")
    }

    fn spec_with(geometry: Geometry, positions: u64, rows: Rows) -> KvSpec {
        KvSpec::attention(
            "retained",
            "test",
            geometry,
            Positions::bounded(positions, "test"),
            Scope::Request,
            rows,
        )
    }

    #[test]
    fn qwen3_tts_row_is_4_653_056_bytes() {
        assert_eq!(qwen3_tts().bytes_per_row(), Ok(4_653_056));
        assert_eq!(qwen3_tts().peak_bytes(256), Ok(4_653_056 * 256));
        assert_eq!(qwen3_tts().row_count(7), 7);
    }

    #[test]
    fn fixed_rows_ignore_max_num_seqs() {
        let pool = spec_with(
            Geometry::new(16, 64, 16, DType::BF16),
            11,
            Rows::fixed(261, "sum of captured buckets"),
        );
        assert_eq!(pool.bytes_per_row(), Ok(720_896));
        assert_eq!(pool.peak_bytes(1), Ok(188_153_856));
        assert_eq!(pool.peak_bytes(4096), Ok(188_153_856));
    }

    #[test]
    fn accessors_follow_the_layout() {
        let spec = qwen3_tts();
        assert_eq!(spec.geometry().map(|g| g.layers), Some(8));
        assert_eq!(spec.positions().map(|p| p.count), Some(71));
        let state = KvSpec::recurrent(
            "state",
            "MambaCache",
            RecurrentState::from_parts(1, vec![StatePart::new("ssm", [2, 2, 1], DType::F32)]),
            Scope::Request,
            Rows::MaxNumSeqs,
        );
        assert_eq!(state.geometry(), None);
        assert_eq!(state.positions(), None);
        assert_eq!(state.peak_bytes(3), Ok(3 * 16));
        let latent = KvSpec::latent(
            "latent",
            "MLA",
            Latent::new(27, 512, 64, DType::BF16),
            Positions::bounded(1, "one"),
            Scope::Request,
            Rows::MaxNumSeqs,
        );
        assert_eq!(latent.bytes_per_row(), Ok(31_104));
        assert_eq!(latent.geometry(), None);
    }

    #[test]
    fn overflow_is_an_error_at_each_step() {
        let wide = spec_with(
            Geometry::new(1, 1, 1, DType::U8),
            u64::MAX,
            Rows::MaxNumSeqs,
        );
        assert_eq!(
            wide.bytes_per_row().unwrap_err().step,
            "bytes per row (bytes per position x positions)"
        );
        let many = spec_with(Geometry::new(1, 1, 1, DType::U8), 1 << 40, Rows::MaxNumSeqs);
        assert!(many.peak_bytes(1 << 30).is_err());
        assert_eq!(many.peak_bytes(2), Ok(1 << 42));
    }

    #[test]
    fn validate_rejects_zero_counts_and_blank_text() {
        assert_eq!(qwen3_tts().validate("Decoder"), Ok(()));
        let zero_layers = spec_with(Geometry::new(0, 1, 1, DType::U8), 1, Rows::MaxNumSeqs);
        let err = zero_layers.validate("Decoder").unwrap_err();
        assert_eq!(
            err.to_string(),
            "kv: `Decoder.retained`: `layers` is 0; a cache with no extent declares nothing"
        );
        let zero_rows = spec_with(Geometry::new(1, 1, 1, DType::U8), 1, Rows::fixed(0, "x"));
        assert!(zero_rows
            .validate("D")
            .unwrap_err()
            .to_string()
            .contains("fixed(0)"));
        let blank = spec_with(Geometry::new(1, 1, 1, DType::U8), 1, Rows::fixed(2, "  "));
        assert!(blank
            .validate("D")
            .unwrap_err()
            .to_string()
            .contains("blank reason"));
        let no_bound = spec_with(Geometry::new(1, 1, 1, DType::U8), 1, Rows::MaxNumSeqs);
        let mut no_bound = no_bound;
        if let Layout::Attention { positions, .. } = &mut no_bound.layout {
            positions.bound = Bound::Stated(" ".into());
        }
        assert!(no_bound
            .validate("D")
            .unwrap_err()
            .to_string()
            .contains("blank bound"));
        let blank_note = qwen3_tts().note("");
        assert!(blank_note
            .validate("D")
            .unwrap_err()
            .to_string()
            .contains("`note` is blank"));
        for blank in [qwen3_tts().assumes(" "), qwen3_tts().only_when("")] {
            assert!(blank
                .validate("D")
                .unwrap_err()
                .to_string()
                .contains("is blank"));
        }
        let mut no_name = qwen3_tts();
        no_name.name = " ".into();
        assert!(no_name
            .validate("D")
            .unwrap_err()
            .to_string()
            .contains("`name` is blank"));
        let mut no_cache = qwen3_tts();
        no_cache.cache = "".into();
        assert!(no_cache
            .validate("D")
            .unwrap_err()
            .to_string()
            .contains("`cache` is blank"));
    }

    #[test]
    fn validate_checks_every_kind_and_format() {
        let empty_block = spec_with(
            Geometry::new(1, 1, 8, DType::U8)
                .with_storage(Storage::Blocks(BlockFormat::new("bad", 0, 2))),
            1,
            Rows::MaxNumSeqs,
        );
        let err = empty_block.validate("T").unwrap_err().to_string();
        assert!(err.contains("`kv_format` is 0"), "{err}");
        let no_parts = KvSpec::recurrent(
            "s",
            "c",
            RecurrentState::from_parts(1, Vec::new()),
            Scope::Request,
            Rows::MaxNumSeqs,
        );
        assert!(no_parts
            .validate("T")
            .unwrap_err()
            .to_string()
            .contains("`state` is 0"));
        let zero_dim = KvSpec::recurrent(
            "s",
            "c",
            RecurrentState::from_parts(1, vec![StatePart::new("ssm", [4, 0, 1], DType::F32)]),
            Scope::Request,
            Rows::MaxNumSeqs,
        );
        assert!(zero_dim.validate("T").is_err());
        let no_slots = KvSpec::recurrent(
            "s",
            "c",
            RecurrentState::from_parts(1, vec![StatePart::new("ssm", [4, 1, 1], DType::F32)])
                .with_slots(0),
            Scope::Request,
            Rows::MaxNumSeqs,
        );
        assert!(no_slots
            .validate("T")
            .unwrap_err()
            .to_string()
            .contains("`slots` is 0"));
        let zero_rank = KvSpec::latent(
            "l",
            "c",
            Latent::new(1, 0, 64, DType::BF16),
            Positions::bounded(1, "x"),
            Scope::Request,
            Rows::MaxNumSeqs,
        );
        assert!(zero_rank
            .validate("T")
            .unwrap_err()
            .to_string()
            .contains("kv_lora_rank"));
    }

    #[test]
    fn validate_checks_a_policy_against_its_count() {
        let policy = PositionPolicy::WindowMinusOne { window: 72 };
        let good = KvSpec::attention(
            "c",
            "c",
            Geometry::new(1, 1, 1, DType::U8),
            Positions::from_policy(policy).unwrap(),
            Scope::Request,
            Rows::MaxNumSeqs,
        );
        assert_eq!(good.validate("T"), Ok(()));
        let mut edited = good.clone();
        if let Layout::Attention { positions, .. } = &mut edited.layout {
            positions.count = 72;
        }
        assert_eq!(
            edited.validate("T").unwrap_err().to_string(),
            "kv: `T.c`: `positions` is 72 but its policy (sliding_window(72) - 1) gives 71"
        );
        let zero = KvSpec::attention(
            "c",
            "c",
            Geometry::new(1, 1, 1, DType::U8),
            Positions {
                count: 5,
                bound: Bound::Policy(PositionPolicy::GrowsBy { count: 5, step: 0 }),
            },
            Scope::Request,
            Rows::MaxNumSeqs,
        );
        assert!(zero
            .validate("T")
            .unwrap_err()
            .to_string()
            .contains("`step` is 0"));
    }

    #[test]
    fn validate_rejects_a_fixed_peak_that_overflows() {
        let spec = spec_with(
            Geometry::new(1, 1, 1, DType::U8),
            1 << 40,
            Rows::fixed(1 << 30, "x"),
        );
        let err = spec.validate("Pool").unwrap_err();
        assert!(
            matches!(err, KvError::Overflow { ref declaration, .. } if declaration == "Pool.retained")
        );
    }

    #[test]
    fn rows_display_like_the_original_report() {
        assert_eq!(Rows::MaxNumSeqs.to_string(), "max_num_seqs");
        assert_eq!(
            Rows::fixed(1, "calls are serialized").to_string(),
            "fixed(1; calls are serialized)"
        );
    }

    #[test]
    fn every_scope_is_listed_once_by_its_name() {
        let names: Vec<&str> = Scope::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["invocation", "request", "session", "model"]);
        for scope in Scope::ALL {
            // A new variant fails this match until it is listed.
            let index = match scope {
                Scope::Invocation => 0,
                Scope::Request => 1,
                Scope::Session => 2,
                Scope::Model => 3,
            };
            assert_eq!(Scope::ALL[index], scope);
        }
    }

    #[test]
    fn only_model_scope_is_resident() {
        assert!(Scope::Model.is_resident());
        for scope in [Scope::Invocation, Scope::Request, Scope::Session] {
            assert!(!scope.is_resident(), "{scope}");
        }
    }
}
