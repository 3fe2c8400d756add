//! Comparing what is declared with what is measured, with a diff a person can
//! act on.

use std::fmt;

use kv_core::{Collection, KvError, KvSpec, ModelLocalKv};

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
    /// Bytes measured for this declaration alone, where measurements were
    /// given per declaration ([`compare_declared_each`]); `None` where only
    /// a total was.
    pub measured: Option<u64>,
}

impl DeclaredLine {
    /// Whether this declaration's own measurement, if given, equals its bytes.
    pub fn matches(&self) -> bool {
        self.measured.is_none_or(|measured| measured == self.bytes)
    }
}

/// `declared decoder.sliding: 2 rows (max_num_seqs) x 1792 B/row = 3584 B
/// (7 positions from sliding_window - 1)`.
impl fmt::Display for DeclaredLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "declared {}: {} ({}) x {} B/row = {} B ({})",
            self.name,
            counted(self.rows, "row"),
            self.driver,
            self.per_row,
            self.bytes,
            self.positions,
        )
    }
}

/// `1 row`, `2 rows`: a count and its noun, plural unless one.
pub(crate) fn counted(count: u64, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

/// `+3072 B` or `-1 B`: `measured - declared`, signed.
pub(crate) fn signed_difference(declared: u64, measured: u64) -> String {
    match measured.checked_sub(declared) {
        Some(more) => format!("+{more} B"),
        None => format!("-{} B", declared - measured),
    }
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
    /// Whether declared equals measured, in total and, where measurements
    /// were given per declaration, for each (two declarations wrong by
    /// opposite amounts do not match).
    pub fn matches(&self) -> bool {
        self.declared == self.measured && self.lines.iter().all(DeclaredLine::matches)
    }

    /// The declarations whose own measurement differs from their bytes.
    pub fn differing(&self) -> impl Iterator<Item = &DeclaredLine> {
        self.lines.iter().filter(|line| !line.matches())
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
        let verdict = if self.declared == self.measured {
            "=="
        } else {
            "!="
        };
        writeln!(
            f,
            "declared {} B {verdict} measured {} B at max_num_seqs={}",
            self.declared, self.measured, self.max_num_seqs
        )?;
        if self.declared != self.measured {
            let diff = signed_difference(self.declared, self.measured);
            let ratio = if self.declared == 0 {
                String::from("declared is 0")
            } else {
                format!(
                    "{:.4}x declared",
                    self.measured as f64 / self.declared as f64
                )
            };
            writeln!(f, "  measured - declared: {diff} ({ratio})")?;
        }
        for line in self.differing() {
            let measured = line.measured.unwrap_or_default();
            writeln!(
                f,
                "  differs {}: declared {} B, measured {measured} B ({})",
                line.name,
                line.bytes,
                signed_difference(line.bytes, measured)
            )?;
        }
        for line in &self.lines {
            write!(f, "  {line}")?;
            match line.measured {
                Some(measured) if measured == line.bytes => write!(f, "; measured {measured} B")?,
                Some(measured) => write!(
                    f,
                    "; measured {measured} B ({})",
                    signed_difference(line.bytes, measured)
                )?,
                None => {}
            }
            writeln!(f)?;
        }
        let rows = self.rows();
        match (
            self.declared.checked_div(rows),
            self.measured.checked_div(rows),
        ) {
            (Some(declared_per_row), Some(measured_per_row)) => {
                write!(
                    f,
                    "  per row over {}: declared {declared_per_row} B, measured {measured_per_row} B",
                    counted(rows, "row")
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
        positions: spec.extent(),
        per_row: spec.bytes_per_row().map_err(overflow)?,
        bytes: spec.peak_bytes(max_num_seqs).map_err(overflow)?,
        measured: None,
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
    compare(declared_lines(owner, max_num_seqs)?, max_num_seqs, measured)
}

/// Each declaration `owner` and its children make, as collected.
fn declared_lines(
    owner: &dyn ModelLocalKv,
    max_num_seqs: u64,
) -> Result<Vec<DeclaredLine>, KvError> {
    collection_lines(&kv_core::collect(owner), max_num_seqs)
}

/// Each declaration of `collection`; an owner or declaration the collector
/// skipped is an error, never a smaller sum.
pub(crate) fn collection_lines(
    collection: &Collection,
    max_num_seqs: u64,
) -> Result<Vec<DeclaredLine>, KvError> {
    if let Some(skipped) = collection.skipped().first() {
        return Err(skipped.error.clone());
    }
    collection
        .entries()
        .iter()
        .map(|entry| line(&entry.path, &entry.spec, entry.declaration(), max_num_seqs))
        .collect()
}

/// A problem with the measurements given to [`compare_declared_each`].
fn measurement_problem(name: &str, problem: String) -> KvError {
    KvError::InvalidValue {
        declaration: name.to_owned(),
        field: "measured",
        problem,
    }
}

/// Compares each declaration `owner` and its children make with the bytes
/// measured for it alone: `measured` pairs each declaration's full name
/// (`path.name`, as [`DeclaredLine::name`] and the start-up report write it,
/// e.g. `decoder.sliding.caches`) with its bytes. The comparison matches only
/// if every declaration does; its diff names each one that differs, with
/// its declared and measured bytes.
///
/// Every declaration needs exactly one measurement: a declaration without
/// one, a name given twice, and a name no declaration has are errors (all
/// of them at once, in a [`KvError::Several`]), never a partial comparison.
/// Measure each declaration's caches with their own
/// [`measured_bytes`](crate::measured_bytes): an allocation two
/// declarations share is then counted in both.
///
/// ```
/// use candle_nn::kv_cache::RotatingKvCache;
/// use kv_core::ModelLocalKv;
///
/// #[derive(ModelLocalKv)]
/// struct Decoder {
///     #[kv(cache = "candle RotatingKvCache", layers = 1, kv_heads = 1, head_dim = 8, dtype = f32,
///          positions = bounded(3, because = "sliding_window(4) - 1, copied from Python"),
///          scope = request, rows = fixed(1, because = "batch 1"))]
///     sliding: RotatingKvCache,
/// }
///
/// let mut decoder = Decoder { sliding: RotatingKvCache::new(2, 4) };
/// let token = candle_core::Tensor::zeros((1, 1, 1, 8), candle_core::DType::F32, &candle_core::Device::Cpu)?;
/// decoder.sliding.append(&token, &token)?;
/// let measured = kv_candle::measured_bytes(&decoder.sliding)?; // 2 x 4 positions x 8 x 4 B = 256
/// let diff = kv_candle::compare_declared_each(&decoder, 1, &[("sliding", measured)])?;
/// assert!(!diff.matches());
/// // 2 x 3 positions x 8 x 4 B = 192 declared
/// assert!(diff.to_string().contains("differs sliding: declared 192 B, measured 256 B (+64 B)"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn compare_declared_each(
    owner: &dyn ModelLocalKv,
    max_num_seqs: u64,
    measured: &[(&str, u64)],
) -> Result<Comparison, KvError> {
    let mut lines = declared_lines(owner, max_num_seqs)?;
    let mut problems = Vec::new();
    for (index, &(name, bytes)) in measured.iter().enumerate() {
        if measured[..index]
            .iter()
            .any(|&(earlier, _)| earlier == name)
        {
            problems.push(measurement_problem(
                name,
                "is given twice; give each declaration one measurement".to_owned(),
            ));
        } else if let Some(line) = lines.iter_mut().find(|line| line.name == name) {
            line.measured = Some(bytes);
        } else {
            let names: Vec<&str> = lines.iter().map(|line| line.name.as_str()).collect();
            problems.push(measurement_problem(
                name,
                format!(
                    "names no declaration; the declarations are: {}",
                    names.join(", ")
                ),
            ));
        }
    }
    for line in lines.iter().filter(|line| line.measured.is_none()) {
        problems.push(measurement_problem(
            &line.name,
            "has no measurement; give one for each declaration".to_owned(),
        ));
    }
    if let Some(error) = KvError::from_all(problems) {
        return Err(error);
    }
    let total = lines.iter().try_fold(0u64, |sum, line| {
        sum.checked_add(line.measured.unwrap_or_default())
            .ok_or_else(|| KvError::Overflow {
                declaration: line.name.clone(),
                step: "sum of measured bytes",
            })
    })?;
    compare(lines, max_num_seqs, total)
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

/// Panics with the diff unless each declaration `owner` and its children
/// make equals the bytes measured for it (see [`compare_declared_each`]);
/// the message names each declaration that differs.
#[track_caller]
pub fn assert_declared_each(owner: &dyn ModelLocalKv, max_num_seqs: u64, measured: &[(&str, u64)]) {
    match compare_declared_each(owner, max_num_seqs, measured) {
        Ok(c) if c.matches() => {}
        Ok(c) => panic!("kv-candle: declarations do not match measurement: {c}"),
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
