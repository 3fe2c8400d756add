//! `kv table`: a report (`Collection::export`'s JSON) as a table with the
//! columns of `kv_core::Table`.

use std::fmt::Write as _;
use std::path::Path;

use kv_core::export::{ExportedDeclaration, ExportedReport};
use kv_core::units::human_bytes;

use crate::input::{emit, read_json, Problem};
use crate::Format;

/// Reads a report; a file that is not one names the key.
pub fn read_report(path: &Path) -> Result<ExportedReport, Problem> {
    let value = read_json(path)?;
    serde_json::from_value(value)
        .map_err(|e| Problem::new(path, format!("not a kv report (Collection::export): {e}")))
}

pub fn run(path: &Path, format: Format) -> bool {
    match read_report(path) {
        Ok(report) => {
            emit(&render(&report, format));
            true
        }
        Err(problem) => {
            problem.report();
            false
        }
    }
}

fn size(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "overflow".to_owned(), human_bytes)
}

fn cells(d: &ExportedDeclaration) -> [String; 6] {
    let mut cache = d.cache.clone();
    let conditions: Vec<String> = [
        d.only_when.as_ref().map(|c| format!("only when {c}")),
        d.assumes.as_ref().map(|c| format!("assumes {c}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !conditions.is_empty() {
        let _ = write!(cache, " ({})", conditions.join("; "));
    }
    let bound = match (d.positions, &d.positions_bound) {
        (Some(count), Some(reason)) => format!("{count} ({reason})"),
        (Some(count), None) => count.to_string(),
        _ => "no positions (recurrent state)".to_owned(),
    };
    let rows = match &d.rows_reason {
        Some(reason) => format!("fixed {} ({reason})", d.rows),
        None => d.rows_driver.clone(),
    };
    [
        d.full_name.clone(),
        cache,
        bound,
        size(d.bytes_per_row),
        rows,
        size(d.peak_bytes),
    ]
}

pub fn render(report: &ExportedReport, format: Format) -> String {
    if format == Format::Json {
        return serde_json::to_string_pretty(report).unwrap_or_default() + "\n";
    }
    let header = [
        "Model".to_owned(),
        "Cache".to_owned(),
        "Bounded by".to_owned(),
        "Per row".to_owned(),
        "Rows".to_owned(),
        format!("Peak @ max_num_seqs={}", report.max_num_seqs),
    ];
    let markdown = format == Format::Markdown;
    let clean = |cell: &str| {
        let flat = cell.replace(['\n', '\r'], " ");
        if markdown {
            flat.replace('|', "\\|")
        } else {
            flat
        }
    };
    let rows: Vec<[String; 6]> = report
        .declarations
        .iter()
        .map(|d| cells(d).map(|c| clean(&c)))
        .collect();
    let mut widths = header.each_ref().map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let right = [false, false, false, true, false, true];
    let line = |cells: &[String; 6]| -> String {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .zip(right)
            .map(|((c, w), r)| {
                if r {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        if markdown {
            format!("| {} |", padded.join(" | "))
        } else {
            padded.join("  ").trim_end().to_owned()
        }
    };
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
    let _ = writeln!(out, "{}", line(&header));
    if markdown {
        let rule: Vec<String> = widths
            .iter()
            .zip(right)
            .map(|(w, r)| {
                let w = (*w).max(3);
                if r {
                    format!("{}:", "-".repeat(w - 1))
                } else {
                    "-".repeat(w)
                }
            })
            .collect();
        let _ = writeln!(out, "| {} |", rule.join(" | "));
    }
    for row in &rows {
        let _ = writeln!(out, "{}", line(row));
    }
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
        let _ = writeln!(out, "skipped {}: {}", skip.path, clean(&skip.error));
    }
    out
}
