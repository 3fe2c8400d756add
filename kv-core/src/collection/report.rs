//! The start-up report: one header with the total, the resident / after-profiling
//! split, one line per declaration (identical declarations of sibling owners,
//! one per layer, share one line with their count and path range), one line
//! per declaration that yields nothing, one line per skipped owner or
//! declaration. The header and declaration lines keep the format of the
//! original consumer; figures under 1 MiB are written in KiB or B.

use std::fmt;
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};

use log::Level;

use super::collect::{collect, Collection};
use super::group::Grouped;
use crate::declare::ModelLocalKv;
use crate::error::Overflow;
use crate::units::{counted, report_bytes};

const HEADER: &str = "Model-local KV (outside the paged manager)";

/// The report of a [`Collection`] at one `max_num_seqs`; [`fmt::Display`] gives
/// its lines joined by newlines. Made by [`Collection::report`].
///
/// ```text
/// Model-local KV (outside the paged manager): 2294.19 MiB across 3 declaration(s) at max_num_seqs=256
///   resident (scope=model, already charged by profiling; not subtracted): 22.19 MiB; allocated after profiling: 2272.00 MiB
///   decoder.retained: 1136.00 MiB (256 rows from max_num_seqs x 4.44 MiB/row, scope=request, 71 positions from sliding_window(72) - 1, only_when=async_chunk)
///   decoder.working: 1136.00 MiB (256 rows from max_num_seqs x 4.44 MiB/row, scope=invocation, 71 positions from sliding_window(72) - 1, only_when=async_chunk)
///   graph.captured: 22.19 MiB (5 rows from fixed(5; rows summed over captured caches) x 4.44 MiB/row, scope=model, 71 positions from sliding_window(72) - 1)
///   skipped `talker` (my_model::Talker): kv: cannot read layers from the config: ...
/// ```
///
/// Per layer, identical declarations share a line, and a group read as
/// zero says so:
///
/// ```text
///   model.layers.0..=27.self_attn.kv_cache: 28 x 4.00 MiB = 112.00 MiB (1 row from fixed(1; batch of the cache tensors) x 4.00 MiB/row, scope=request, 4096 positions from max_seq_len)
///   model.sliding: declares nothing: 0 layers from `self.config.sliding_layers` (Hybrid.sliding)
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Report<'a> {
    collection: &'a Collection,
    max_num_seqs: u64,
}

impl Collection {
    /// The report at `max_num_seqs`. Overflowing byte math becomes an error
    /// line, never a panic.
    pub fn report(&self, max_num_seqs: u64) -> Report<'_> {
        Report {
            collection: self,
            max_num_seqs,
        }
    }

    /// Emits the report through `log`: the header, split and declarations at
    /// `info`, skipped owners at `warn`, overflow at `error`. Never panics, even
    /// if the logger does.
    pub fn log_report(&self, max_num_seqs: u64) {
        let emitted = catch_unwind(AssertUnwindSafe(|| {
            for (level, line) in self.report(max_num_seqs).lines() {
                log::log!(level, "{line}");
            }
        }));
        if emitted.is_err() {
            // The logger itself panicked; one more try, and nothing more.
            let _ = catch_unwind(|| log::error!("kv: logging the model-local KV report panicked"));
        }
    }
}

/// Collects the declarations under `model` and logs the report at
/// `max_num_seqs`: the one call an engine makes at start-up. It never fails and
/// never panics; what it collected is returned for further checks.
///
/// ```
/// use kv_core::{log_model_local_kv, KvError, KvSpec, ModelLocalKv};
///
/// struct Stateless;
/// impl ModelLocalKv for Stateless {
///     fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
///         Ok(())
///     }
/// }
///
/// let collection = log_model_local_kv(&Stateless, 256);
/// assert!(collection.entries().is_empty());
/// assert_eq!(
///     collection.report(256).to_string(),
///     "Model-local KV (outside the paged manager): 0 B across 0 declaration(s) at max_num_seqs=256"
/// );
/// ```
pub fn log_model_local_kv(model: &dyn ModelLocalKv, max_num_seqs: u64) -> Collection {
    let collection = collect(model);
    collection.log_report(max_num_seqs);
    collection
}

impl Report<'_> {
    /// Each line with the level it is logged at.
    fn lines(&self) -> Vec<(Level, String)> {
        let collection = self.collection;
        let entries = collection.entries();
        let max_num_seqs = self.max_num_seqs;
        let count = entries.len();
        let groups = collection.grouped();
        let mut lines = Vec::with_capacity(
            groups.len()
                + collection.empty_declarations().len()
                + collection.skipped().len()
                + collection.poisoned().len()
                + 3,
        );
        match collection.totals(max_num_seqs) {
            Ok(totals) => {
                lines.push((
                    Level::Info,
                    format!(
                        "{HEADER}: {} across {count} declaration(s) at \
                         max_num_seqs={max_num_seqs}{}",
                        report_bytes(totals.total),
                        layout_suffix(collection)
                    ),
                ));
                if totals.host > 0 {
                    lines.push((
                        Level::Info,
                        format!(
                            "  device: {} (counted by budgets and the planner); host: {}",
                            report_bytes(totals.device),
                            report_bytes(totals.host)
                        ),
                    ));
                }
                if count > 0 {
                    lines.push((
                        Level::Info,
                        format!(
                            "  resident (scope=model, already charged by profiling; not \
                             subtracted): {}; allocated after profiling: {}",
                            report_bytes(totals.resident),
                            report_bytes(totals.after_profiling)
                        ),
                    ));
                }
            }
            Err(error) => {
                lines.push((
                    Level::Error,
                    format!(
                        "{HEADER}: total overflows u64 across {count} declaration(s) at \
                         max_num_seqs={max_num_seqs}{}",
                        layout_suffix(collection)
                    ),
                ));
                lines.push((Level::Error, format!("  {error}")));
            }
        }
        for group in &groups {
            lines.push(declaration_line(group, max_num_seqs));
        }
        for empty in collection.empty_declarations() {
            lines.push((
                Level::Info,
                format!(
                    "  {}: declares nothing: {} ({})",
                    empty.full_name(),
                    empty.reason(),
                    empty.declaration()
                ),
            ));
        }
        for skipped in collection.skipped() {
            lines.push((
                Level::Warn,
                format!(
                    "  skipped `{}` ({}): {}",
                    skipped.what(),
                    skipped.owner_type,
                    skipped.error
                ),
            ));
        }
        for path in collection.poisoned() {
            let path = if path.is_empty() { "<root>" } else { path };
            lines.push((
                Level::Warn,
                format!(
                    "  read through a poisoned lock: `{path}` (a thread panicked while holding \
                     it; its declarations are counted)"
                ),
            ));
        }
        lines
    }
}

/// `  path.name: X MiB (R rows from DRIVER x Y MiB/row, scope=S, P positions from BOUND[, only_when=..][, assumes=..])`;
/// for identical declarations of sibling owners,
/// `  path.0..=N.name: COUNT x X MiB = TOTAL MiB (...)`, the rest per declaration.
fn declaration_line(group: &Grouped<'_>, max_num_seqs: u64) -> (Level, String) {
    let entry = group.first;
    let spec = &entry.spec;
    let peak = spec.peak_bytes(max_num_seqs);
    let together = group.peak_bytes(max_num_seqs);
    let level = if together.is_ok() {
        Level::Info
    } else {
        Level::Error
    };
    let size = if group.count == 1 {
        bytes_or_overflow(peak)
    } else {
        format!(
            "{} x {} = {}",
            group.count,
            bytes_or_overflow(peak),
            bytes_or_overflow(together)
        )
    };
    let mut line = format!(
        "  {}: {size} ({} from {} x {}/row, scope={}, ",
        group.full_name(),
        counted(spec.row_count(max_num_seqs), "row"),
        spec.rows,
        bytes_or_overflow(spec.bytes_per_row()),
        spec.scope,
    );
    line.push_str(&spec.extent());
    if let Some(only_when) = &spec.only_when {
        line.push_str(", only_when=");
        line.push_str(only_when);
    }
    if let Some(assumes) = &spec.assumes {
        line.push_str(", assumes=");
        line.push_str(assumes);
    }
    if let Some(because) = spec.placement.reason() {
        let _ = write!(line, ", on host: {because}");
    }
    if let Some(share) = &entry.share {
        let _ = write!(line, ", {share}");
    }
    line.push(')');
    (level, line)
}

/// `, tp=2 pp=2, rank tp=1 pp=0` for a rank of a parallel layout; empty on a
/// single rank, so the original format is kept.
fn layout_suffix(collection: &Collection) -> String {
    let parallel = collection.parallel();
    if parallel.is_single() {
        String::new()
    } else {
        format!(", {parallel}")
    }
}

fn bytes_or_overflow(bytes: Result<u64, Overflow>) -> String {
    match bytes {
        Ok(bytes) => report_bytes(bytes),
        Err(overflow) => format!("<{overflow}>"),
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, (_, line)) in self.lines().iter().enumerate() {
            if index > 0 {
                f.write_str("\n")?;
            }
            f.write_str(line)?;
        }
        Ok(())
    }
}
