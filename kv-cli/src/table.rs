//! `kv table`: a report (`Collection::export`'s JSON) as a table with the
//! columns of `kv_core::Table`.

use std::fmt::Write as _;
use std::path::Path;

use kv_core::export::ExportedReport;
use kv_core::units::human_bytes;
use kv_core::Table;

use crate::input::{read_json, Problem};
use crate::output::{emit, emit_json, StdoutFailed};
use crate::Format;

/// Reads a report; a file that is not one names the key.
pub fn read_report(path: &Path, limit: u64) -> Result<ExportedReport, Problem> {
    let value = read_json(path, limit)?;
    serde_json::from_value(value)
        .map_err(|e| Problem::new(path, format!("not a kv report (Collection::export): {e}")))
}

/// Prints the report; `Ok(false)` when it could not be read.
pub fn run(path: &Path, format: Format, limit: u64) -> Result<bool, StdoutFailed> {
    match read_report(path, limit) {
        Ok(report) => {
            let text = render(&report, format);
            if format == Format::Json {
                emit_json(&text)?;
            } else {
                emit(&text)?;
            }
            Ok(true)
        }
        Err(problem) => {
            problem.report();
            Ok(false)
        }
    }
}

fn size(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "overflow".to_owned(), human_bytes)
}

/// The report as kv-core's `Table` renders declarations, with its rank, its
/// total and its skipped owners.
pub fn render(report: &ExportedReport, format: Format) -> String {
    if format == Format::Json {
        return serde_json::to_string_pretty(report).unwrap_or_default() + "\n";
    }
    let markdown = format == Format::Markdown;
    let mut out = String::new();
    let p = report.parallel;
    if p.tp > 1 || p.pp > 1 {
        let _ = writeln!(
            out,
            "rank tp={} pp={} of tp={} pp={}",
            p.tp_rank, p.pp_rank, p.tp, p.pp
        );
        if markdown {
            out.push('\n');
        }
    }
    let table = Table::new(report.max_num_seqs).report(report);
    out.push_str(&if markdown {
        table.to_markdown()
    } else {
        table.to_text()
    });
    let _ = writeln!(
        out,
        "{}total {} at max_num_seqs={} (device {}, host {})",
        if markdown { "\n" } else { "" },
        size(report.total_bytes),
        report.max_num_seqs,
        size(report.device_bytes),
        size(report.host_bytes),
    );
    for skip in &report.skipped {
        let error = skip.error.replace(['\n', '\r'], " ");
        let _ = writeln!(out, "skipped {}: {error}", skip.what());
    }
    out
}
