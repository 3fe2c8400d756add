//! What one declared allocation is: geometry, positions and their bound, rows
//! and their driver, scope, conditions. All byte math is checked `const fn`.

use std::borrow::Cow;
use std::fmt;

use crate::{DType, KvError, Overflow};

/// Text carried by a declaration: a literal in derived code, owned when built at run time.
pub type Text = Cow<'static, str>;

/// The shape of one position (token) of a KV cache across all its layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct Geometry {
    /// Attention layers that hold a cache.
    pub layers: u64,
    /// Key/value heads per layer (after grouped-query sharing).
    pub kv_heads: u64,
    /// Dimension of one key head.
    pub head_dim: u64,
    /// Dimension of one value head, where it differs from `head_dim`.
    pub v_head_dim: Option<u64>,
    /// Element type of the cache tensors.
    pub dtype: DType,
}

impl Geometry {
    /// A geometry whose keys and values share `head_dim`.
    pub const fn new(layers: u64, kv_heads: u64, head_dim: u64, dtype: DType) -> Geometry {
        Geometry {
            layers,
            kv_heads,
            head_dim,
            v_head_dim: None,
            dtype,
        }
    }

    /// The same geometry with a separate value head dimension.
    pub const fn with_v_head_dim(mut self, v_head_dim: u64) -> Geometry {
        self.v_head_dim = Some(v_head_dim);
        self
    }

    /// The value head dimension: `v_head_dim` where given, else `head_dim`.
    pub const fn value_head_dim(&self) -> u64 {
        match self.v_head_dim {
            Some(dim) => dim,
            None => self.head_dim,
        }
    }

    /// Bytes one position takes, keys and values, across all layers:
    /// `layers x kv_heads x (head_dim + v_head_dim) x dtype bytes`.
    pub const fn bytes_per_position(&self) -> Result<u64, Overflow> {
        const STEP: Overflow = Overflow {
            step: "bytes per position (layers x kv_heads x (head_dim + v_head_dim) x dtype)",
        };
        let Some(dims) = self.head_dim.checked_add(self.value_head_dim()) else {
            return Err(STEP);
        };
        let Some(per_layer_head) = dims.checked_mul(self.dtype.size_in_bytes()) else {
            return Err(STEP);
        };
        let Some(per_layer) = per_layer_head.checked_mul(self.kv_heads) else {
            return Err(STEP);
        };
        match per_layer.checked_mul(self.layers) {
            Some(bytes) => Ok(bytes),
            None => Err(STEP),
        }
    }
}

impl Geometry {
    /// Bytes one row of `positions` positions takes: positions x bytes per position.
    pub const fn bytes_per_row(&self, positions: u64) -> Result<u64, Overflow> {
        match self.bytes_per_position() {
            Ok(per_position) => match per_position.checked_mul(positions) {
                Some(bytes) => Ok(bytes),
                None => Err(Overflow {
                    step: "bytes per row (bytes per position x positions)",
                }),
            },
            Err(overflow) => Err(overflow),
        }
    }
}

/// How many positions a cache holds at most, and why that is the bound.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct Positions {
    /// Positions held at peak.
    pub count: u64,
    /// What bounds them, e.g. `"sliding_window(72) - 1"`. Never `max_model_len`
    /// by default: each cache names its own mechanism.
    pub bound: Text,
}

/// When the memory appears and goes. Diagnostic only: scope never multiplies bytes
/// (rows do).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
#[cfg_attr(feature = "json", serde(rename_all = "lowercase"))]
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
#[cfg_attr(feature = "json", derive(serde::Serialize))]
#[cfg_attr(feature = "json", serde(tag = "driver", rename_all = "snake_case"))]
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
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
pub struct KvSpec {
    /// The declaration's name within its owner, e.g. `"retained"`.
    pub name: Text,
    /// What kind of cache holds it, e.g. `"sliding DynamicCache"`.
    pub cache: Text,
    /// Shape of one position.
    pub geometry: Geometry,
    /// Positions held at peak and their bound.
    pub positions: Positions,
    /// When the memory lives; never a multiplier.
    pub scope: Scope,
    /// Row-equivalents at peak and their driver.
    pub rows: Rows,
    /// The model-observable condition under which this is held (already
    /// true for a collected spec), e.g. `"async_chunk"`.
    pub only_when: Option<Text>,
    /// A condition the model cannot observe, stated rather than guessed.
    pub assumes: Option<Text>,
    /// Prose about the object layout (one wide allocation or many narrow ones).
    pub note: Option<Text>,
}

impl KvSpec {
    /// Bytes one row takes: positions x bytes per position.
    pub const fn bytes_per_row(&self) -> Result<u64, Overflow> {
        self.geometry.bytes_per_row(self.positions.count)
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
                None => Err(Overflow {
                    step: "peak bytes (rows x bytes per row)",
                }),
            },
            Err(overflow) => Err(overflow),
        }
    }

    /// Checks what the derive checks at compile time, for values known only at
    /// run time: positive counts, non-blank texts, byte math that fits in u64.
    /// `owner` names the declaring type in the error.
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
        let g = &self.geometry;
        let counts = [
            ("layers", g.layers),
            ("kv_heads", g.kv_heads),
            ("head_dim", g.head_dim),
            ("v_head_dim", g.value_head_dim()),
            ("positions", self.positions.count),
        ];
        for (field, value) in counts {
            if value == 0 {
                return Err(invalid(
                    field,
                    "is 0; a cache with no extent declares nothing",
                ));
            }
        }
        if self.positions.bound.trim().is_empty() {
            return Err(invalid(
                "positions",
                "has a blank bound; say what bounds the positions",
            ));
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
        checked.map(|_| ()).map_err(|o| KvError::Overflow {
            declaration: declaration(),
            step: o.step,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QWEN3_TTS: KvSpec = KvSpec {
        name: Cow::Borrowed("retained"),
        cache: Cow::Borrowed("sliding DynamicCache"),
        geometry: Geometry::new(8, 16, 64, DType::F32),
        positions: Positions {
            count: 71,
            bound: Cow::Borrowed("sliding_window(72) - 1"),
        },
        scope: Scope::Request,
        rows: Rows::MaxNumSeqs,
        only_when: Some(Cow::Borrowed("async_chunk")),
        assumes: None,
        note: None,
    };

    fn spec_with(geometry: Geometry, positions: u64, rows: Rows) -> KvSpec {
        KvSpec {
            geometry,
            positions: Positions {
                count: positions,
                bound: "test".into(),
            },
            rows,
            ..QWEN3_TTS
        }
    }

    #[test]
    fn qwen3_tts_row_is_4_653_056_bytes() {
        assert_eq!(QWEN3_TTS.bytes_per_row(), Ok(4_653_056));
        assert_eq!(QWEN3_TTS.peak_bytes(256), Ok(4_653_056 * 256));
    }

    #[test]
    fn byte_math_is_usable_in_const_items() {
        const PER_ROW: u64 = match QWEN3_TTS.bytes_per_row() {
            Ok(bytes) => bytes,
            Err(_) => panic!("overflow"),
        };
        const ROWS: u64 = QWEN3_TTS.row_count(7);
        assert_eq!(PER_ROW, 2 * 8 * 16 * 64 * 71 * 4);
        assert_eq!(ROWS, 7);
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
    fn separate_value_head_dim_counts_keys_and_values_apart() {
        let g = Geometry::new(2, 3, 192, DType::BF16).with_v_head_dim(128);
        assert_eq!(g.bytes_per_position(), Ok(2 * 3 * (192 + 128) * 2));
    }

    #[test]
    fn overflow_is_an_error_at_each_step() {
        let huge = Geometry::new(u64::MAX, 2, 2, DType::F32);
        assert!(huge.bytes_per_position().is_err());
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
        assert_eq!(QWEN3_TTS.validate("Decoder"), Ok(()));
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
        let mut no_bound = QWEN3_TTS.clone();
        no_bound.positions.bound = " ".into();
        assert!(no_bound
            .validate("D")
            .unwrap_err()
            .to_string()
            .contains("blank bound"));
        let mut blank_note = QWEN3_TTS.clone();
        blank_note.note = Some("".into());
        assert!(blank_note
            .validate("D")
            .unwrap_err()
            .to_string()
            .contains("`note` is blank"));
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
    fn only_model_scope_is_resident() {
        assert!(Scope::Model.is_resident());
        for scope in [Scope::Invocation, Scope::Request, Scope::Session] {
            assert!(!scope.is_resident(), "{scope}");
        }
    }
}
