//! `kv merge`: per-rank reports as one cluster view (`kv_core::export::ClusterReport`).

use std::path::PathBuf;

use kv_core::export::{ClusterReport, ExportedReport};

use crate::input::{emit, expand, Problem};
use crate::table::read_report;
use crate::Format;

pub fn run(paths: &[PathBuf], format: Format) -> bool {
    let (files, mut problems) = expand(paths, None);
    let mut reports: Vec<(PathBuf, ExportedReport)> = Vec::new();
    for file in files {
        match read_report(&file) {
            Ok(report) => reports.push((file, report)),
            Err(problem) => problems.push(problem),
        }
    }
    problems.extend(mismatches(&reports));
    if problems.is_empty() {
        let names: Vec<String> = reports
            .iter()
            .map(|(f, _)| f.display().to_string())
            .collect();
        match ClusterReport::merge(reports.into_iter().map(|(_, r)| r)) {
            Ok(cluster) => {
                emit(&render(&cluster, format));
                return true;
            }
            Err(e) => problems.push(Problem {
                file: names.join(", "),
                message: e.to_string(),
            }),
        }
    }
    for problem in &problems {
        problem.report();
    }
    false
}

/// Each report that does not belong with the first, named by file and key.
fn mismatches(reports: &[(PathBuf, ExportedReport)]) -> Vec<Problem> {
    let mut problems = Vec::new();
    let Some((first_file, first)) = reports.first() else {
        return problems;
    };
    let first_name = first_file.display();
    let mut seen: Vec<(u64, u64, &PathBuf)> = Vec::new();
    for (file, report) in reports {
        // kv-core's cluster view reads host bytes as total - device; a report
        // whose figures do not add up is refused here, naming the key.
        if let (Some(total), Some(device), Some(host)) =
            (report.total_bytes, report.device_bytes, report.host_bytes)
        {
            if device.checked_add(host) != Some(total) {
                problems.push(Problem::new(
                    file,
                    format!(
                        "not a consistent report: `total_bytes` is {total}, not \
                         `device_bytes` {device} + `host_bytes` {host}"
                    ),
                ));
                continue;
            }
        }
        let (p, q) = (report.parallel, first.parallel);
        let differs = [
            (
                "schema_version",
                u64::from(report.schema_version),
                u64::from(first.schema_version),
            ),
            ("max_num_seqs", report.max_num_seqs, first.max_num_seqs),
            ("parallel.tp", p.tp, q.tp),
            ("parallel.pp", p.pp, q.pp),
        ];
        if let Some((key, this, that)) = differs.iter().find(|(_, a, b)| a != b) {
            problems.push(Problem::new(
                file,
                format!("cannot merge: `{key}` is {this} but {that} in {first_name}"),
            ));
            continue;
        }
        if let Some((_, _, other)) = seen
            .iter()
            .find(|(tp, pp, _)| (*tp, *pp) == (p.tp_rank, p.pp_rank))
        {
            problems.push(Problem::new(
                file,
                format!(
                    "cannot merge: `parallel` rank tp={} pp={} is also {}",
                    p.tp_rank,
                    p.pp_rank,
                    other.display()
                ),
            ));
            continue;
        }
        seen.push((p.tp_rank, p.pp_rank, file));
    }
    problems
}

fn render(cluster: &ClusterReport, format: Format) -> String {
    match format {
        Format::Json => {
            // kv-core's exported shape: versioned, host bytes included, reads back.
            serde_json::to_string_pretty(&cluster.export()).unwrap_or_default() + "\n"
        }
        Format::Markdown | Format::Text => format!("{cluster}\n"),
    }
}
