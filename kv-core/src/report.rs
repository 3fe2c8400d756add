//! The start-up report: one header with the total, the resident / after-profiling
//! split, one line per declaration, one line per skipped owner. The header and
//! declaration lines keep the format of the original consumer.

use std::fmt;
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};

use log::Level;

use crate::units::mib;
use crate::{collect, Collected, Collection, ModelLocalKv, Overflow};

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
///     "Model-local KV (outside the paged manager): 0.00 MiB across 0 declaration(s) at max_num_seqs=256"
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
        let entries = self.collection.entries();
        let max_num_seqs = self.max_num_seqs;
        let count = entries.len();
        let mut lines = Vec::with_capacity(count + self.collection.skipped().len() + 2);
        match self.collection.totals(max_num_seqs) {
            Ok(totals) => {
                lines.push((
                    Level::Info,
                    format!(
                        "{HEADER}: {:.2} MiB across {count} declaration(s) at \
                         max_num_seqs={max_num_seqs}{}",
                        mib(totals.total),
                        layout_suffix(self.collection)
                    ),
                ));
                if totals.host > 0 {
                    lines.push((
                        Level::Info,
                        format!(
                            "  device: {:.2} MiB (counted by budgets and the planner); host: {:.2} MiB",
                            mib(totals.device),
                            mib(totals.host)
                        ),
                    ));
                }
                if count > 0 {
                    lines.push((
                        Level::Info,
                        format!(
                            "  resident (scope=model, already charged by profiling; not \
                             subtracted): {:.2} MiB; allocated after profiling: {:.2} MiB",
                            mib(totals.resident),
                            mib(totals.after_profiling)
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
                        layout_suffix(self.collection)
                    ),
                ));
                lines.push((Level::Error, format!("  {error}")));
            }
        }
        for entry in entries {
            lines.push(declaration_line(entry, max_num_seqs));
        }
        for skipped in self.collection.skipped() {
            let path = if skipped.path.is_empty() {
                "<root>"
            } else {
                &skipped.path
            };
            lines.push((
                Level::Warn,
                format!(
                    "  skipped `{path}` ({}): {}",
                    skipped.owner_type, skipped.error
                ),
            ));
        }
        lines
    }
}

/// `  path.name: X MiB (R rows from DRIVER x Y MiB/row, scope=S, P positions from BOUND[, only_when=..][, assumes=..])`
fn declaration_line(entry: &Collected, max_num_seqs: u64) -> (Level, String) {
    let spec = &entry.spec;
    let peak = spec.peak_bytes(max_num_seqs);
    let level = if peak.is_ok() {
        Level::Info
    } else {
        Level::Error
    };
    let mut line = format!(
        "  {}: {} ({} rows from {} x {}/row, scope={}, ",
        entry.full_name(),
        mib_or_overflow(peak),
        spec.row_count(max_num_seqs),
        spec.rows,
        mib_or_overflow(spec.bytes_per_row()),
        spec.scope,
    );
    match spec.positions() {
        Some(positions) => {
            let _ = write!(
                line,
                "{} positions from {}",
                positions.count, positions.bound
            );
        }
        None => line.push_str("recurrent state, no positions"),
    }
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

fn mib_or_overflow(bytes: Result<u64, Overflow>) -> String {
    match bytes {
        Ok(bytes) => format!("{:.2} MiB", mib(bytes)),
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
