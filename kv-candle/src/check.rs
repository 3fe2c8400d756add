//! Comparing what is declared with what is measured, with a diff a person can
//! act on.

use std::fmt;

use kv_core::{KvError, KvSpec, ModelLocalKv};

/// One declaration's side of a [`Comparison`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclaredLine {
    /// `path.name`, the path empty for the root owner.
    pub name: String,
    /// Rows at the `max_num_seqs` compared at.
    pub rows: u64,
    /// What drives the rows: `max_num_seqs` or `fixed(N; reason)`.
    pub driver: String,
    /// Positions held and what bounds them, e.g. `71 positions from
    /// sliding_window(72) - 1`; for recurrent state, `no positions`.
    pub positions: String,
    /// Declared bytes per row.
    pub per_row: u64,
    /// Declared bytes at peak: rows x per row.
    pub bytes: u64,
}

/// Declared bytes set against measured bytes. [`fmt::Display`] writes the diff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comparison {
    /// The `max_num_seqs` the declarations were evaluated at.
    pub max_num_seqs: u64,
    /// Each declaration's figures.
    pub lines: Vec<DeclaredLine>,
    /// Sum of the declarations' peaks.
    pub declared: u64,
    /// Bytes measured.
    pub measured: u64,
}

impl Comparison {
    /// Whether declared equals measured.
    pub fn matches(&self) -> bool {
        self.declared == self.measured
    }

    /// Rows summed over the declarations.
    pub fn rows(&self) -> u64 {
        self.lines
            .iter()
            .map(|l| l.rows)
            .fold(0, u64::saturating_add)
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.matches() { "==" } else { "!=" };
        writeln!(
            f,
            "declared {} B {verdict} measured {} B at max_num_seqs={}",
            self.declared, self.measured, self.max_num_seqs
        )?;
        if !self.matches() {
            let (sign, diff) = if self.measured > self.declared {
                ("+", self.measured - self.declared)
            } else {
                ("-", self.declared - self.measured)
            };
            let ratio = if self.declared == 0 {
                String::from("declared is 0")
            } else {
                format!(
                    "{:.4}x declared",
                    self.measured as f64 / self.declared as f64
                )
            };
            writeln!(f, "  measured - declared: {sign}{diff} B ({ratio})")?;
        }
        for line in &self.lines {
            writeln!(
                f,
                "  declared {}: {} rows ({}) x {} B/row = {} B ({})",
                line.name, line.rows, line.driver, line.per_row, line.bytes, line.positions,
            )?;
        }
        let rows = self.rows();
        match (
            self.declared.checked_div(rows),
            self.measured.checked_div(rows),
        ) {
            (Some(declared_per_row), Some(measured_per_row)) => {
                write!(
                    f,
                    "  per row over {rows} rows: declared {declared_per_row} B, measured {measured_per_row} B"
                )?;
                let rest = self.measured % rows;
                if rest != 0 {
                    write!(f, " (+{rest} B not divisible by rows)")?;
                }
            }
            _ => write!(f, "  no rows declared")?,
        }
        Ok(())
    }
}

/// `declaration` names the spec in errors: `Type.name` when its owner is
/// known, else the spec's own name.
fn line(
    path: &str,
    spec: &KvSpec,
    declaration: String,
    max_num_seqs: u64,
) -> Result<DeclaredLine, KvError> {
    let name = if path.is_empty() {
        spec.name.to_string()
    } else {
        format!("{path}.{}", spec.name)
    };
    let overflow = |o: kv_core::Overflow| KvError::Overflow {
        declaration: declaration.clone(),
        step: o.step,
    };
    Ok(DeclaredLine {
        rows: spec.row_count(max_num_seqs),
        driver: spec.rows.to_string(),
        positions: spec.positions().map_or_else(
            || "recurrent state, no positions".to_owned(),
            |p| format!("{} positions from {}", p.count, p.bound),
        ),
        per_row: spec.bytes_per_row().map_err(overflow)?,
        bytes: spec.peak_bytes(max_num_seqs).map_err(overflow)?,
        name,
    })
}

fn compare(
    lines: Vec<DeclaredLine>,
    max_num_seqs: u64,
    measured: u64,
) -> Result<Comparison, KvError> {
    let declared = lines.iter().try_fold(0u64, |sum, l| {
        sum.checked_add(l.bytes).ok_or_else(|| KvError::Overflow {
            declaration: l.name.clone(),
            step: "sum of declared peaks",
        })
    })?;
    Ok(Comparison {
        max_num_seqs,
        lines,
        declared,
        measured,
    })
}

/// Compares one declaration at `max_num_seqs` (ignored by fixed rows) with
/// `measured` bytes.
pub fn compare_spec(
    spec: &KvSpec,
    max_num_seqs: u64,
    measured: u64,
) -> Result<Comparison, KvError> {
    compare(
        vec![line("", spec, spec.name.to_string(), max_num_seqs)?],
        max_num_seqs,
        measured,
    )
}

/// Compares everything `owner` and its children declare, summed, with
/// `measured` bytes. The tree is walked by [`kv_core::collect`]: an owner
/// reached twice (a shared `Arc`) counts once. An owner whose declarations
/// the collector had to skip (an error, an invalid value, a panic) is an
/// error here: a check does not compare with declarations missing.
pub fn compare_declared(
    owner: &dyn ModelLocalKv,
    max_num_seqs: u64,
    measured: u64,
) -> Result<Comparison, KvError> {
    let collection = kv_core::collect(owner);
    if let Some(skipped) = collection.skipped().first() {
        return Err(skipped.error.clone());
    }
    let lines = collection
        .entries()
        .iter()
        .map(|entry| line(&entry.path, &entry.spec, entry.declaration(), max_num_seqs))
        .collect::<Result<Vec<_>, _>>()?;
    compare(lines, max_num_seqs, measured)
}

/// Panics with the diff unless `spec` at `max_num_seqs` declares exactly
/// `measured` bytes.
///
/// ```
/// use kv_core::{DType, Geometry, KvSpec, Positions, Rows, Scope};
/// let spec = KvSpec::attention(
///     "caches",
///     "candle RotatingKvCache",
///     Geometry::new(8, 16, 64, DType::F32),
///     Positions::bounded(71, "sliding_window(72) - 1"),
///     Scope::Request,
///     Rows::MaxNumSeqs,
/// );
/// kv_candle::assert_spec_bytes(&spec, 2, 2 * 4_653_056);
/// ```
#[track_caller]
pub fn assert_spec_bytes(spec: &KvSpec, max_num_seqs: u64, measured: u64) {
    match compare_spec(spec, max_num_seqs, measured) {
        Ok(c) if c.matches() => {}
        Ok(c) => panic!("kv-candle: declaration does not match measurement: {c}"),
        Err(e) => panic!("kv-candle: cannot compare: {e}"),
    }
}

/// Panics with the diff unless what `owner` declares (its children included)
/// at `max_num_seqs` sums to exactly `measured` bytes. Pair it with
/// [`measured_bytes`](crate::measured_bytes) once the caches are at their peak.
#[track_caller]
pub fn assert_declared_bytes(owner: &dyn ModelLocalKv, max_num_seqs: u64, measured: u64) {
    match compare_declared(owner, max_num_seqs, measured) {
        Ok(c) if c.matches() => {}
        Ok(c) => panic!("kv-candle: declarations do not match measurement: {c}"),
        Err(e) => panic!("kv-candle: cannot compare: {e}"),
    }
}
