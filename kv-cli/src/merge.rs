//! `kv merge`: per-rank reports as one cluster view (`kv_core::export::ClusterReport`).

use std::path::PathBuf;

use kv_core::export::ClusterReport;
use kv_core::KvError;

use crate::input::{expand, Problem};
use crate::message::usage_error;
use crate::output::{emit, emit_json, StdoutFailed};
use crate::same_model::different_models;
use crate::table::read_report;
use crate::Format;

/// Merges the reports; `Ok(false)` when they could not be.
pub fn run(paths: &[PathBuf], format: Format, limit: u64) -> Result<bool, StdoutFailed> {
    if format == Format::Markdown {
        // kv-core's cluster view is text; printing it as "Markdown" would
        // ignore the flag.
        usage_error(
            clap::error::ErrorKind::InvalidValue,
            "--format markdown does not apply to kv merge: its cluster view is text; give \
             --format text or json",
        )
    }
    let (files, mut problems) = expand(paths, None);
    let mut reports = Vec::new();
    for file in files {
        match read_report(&file, limit) {
            Ok(report) => reports.push((file.display().to_string(), report)),
            Err(problem) => problems.push(problem),
        }
    }
    if problems.is_empty() {
        let names: Vec<String> = reports.iter().map(|(file, _)| file.clone()).collect();
        // kv-core checks the layout and the figures; then kv checks that the
        // ranks are of one model (a report names none: its declarations do).
        let different = different_models(&reports);
        match ClusterReport::merge_labelled(reports) {
            Ok(_) if !different.is_empty() => problems.extend(different),
            Ok(cluster) => {
                let text = render(&cluster, format);
                if format == Format::Json {
                    emit_json(&text)?;
                } else {
                    emit(&text)?;
                }
                return Ok(true);
            }
            // One line per problem, naming the file at fault (every file for
            // a problem of the whole set, such as a missing rank).
            Err(error) => problems.extend(error.into_problems().into_iter().map(|e| match e {
                KvError::Merge {
                    report: Some(file),
                    problem,
                } => Problem {
                    file,
                    message: format!("cannot merge: {problem}"),
                },
                other => Problem {
                    file: names.join(", "),
                    message: other.to_string(),
                },
            })),
        }
    }
    for problem in &problems {
        problem.report();
    }
    Ok(false)
}

fn render(cluster: &ClusterReport, format: Format) -> String {
    match format {
        Format::Json => {
            // kv-core's exported shape: versioned, host bytes included, reads back.
            serde_json::to_string_pretty(cluster).unwrap_or_default() + "\n"
        }
        Format::Markdown | Format::Text => format!("{cluster}\n"),
    }
}
