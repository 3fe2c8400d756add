//! Writing to stdout: every write is flushed and its error returned, so a
//! report lost to a full disk or a closed pipe is never an exit 0.

use std::io::Write as _;
use std::process::ExitCode;

use crate::message::{escaped_json, escaped_report};

/// A write to stdout that failed: the report did not arrive.
#[derive(Debug)]
pub struct StdoutFailed(std::io::Error);

impl StdoutFailed {
    /// Exit 1. A closed pipe (`kv estimate ... | head`) exits quietly: the
    /// reader chose to stop, and a line about it would only be noise; but
    /// not with 0, since the report was not all delivered (tools killed by
    /// SIGPIPE, as most Unix tools are, exit non-zero too, which `set -o
    /// pipefail` reads the same way). Any other failure (a full disk) is
    /// one line on stderr.
    pub fn exit_code(&self) -> ExitCode {
        if self.0.kind() != std::io::ErrorKind::BrokenPipe {
            let _ = writeln!(std::io::stderr(), "kv: cannot write to stdout: {}", self.0);
        }
        ExitCode::FAILURE
    }
}

/// Writes a text or Markdown report to stdout, escaped
/// ([`escaped_report`]), and flushes it.
pub fn emit(text: &str) -> Result<(), StdoutFailed> {
    write_out(&escaped_report(text))
}

/// Writes JSON text to stdout, escaped the JSON way ([`escaped_json`]: the
/// same value), and flushes it.
pub fn emit_json(text: &str) -> Result<(), StdoutFailed> {
    write_out(&escaped_json(text))
}

fn write_out(text: &str) -> Result<(), StdoutFailed> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(StdoutFailed)
}

/// Writes one JSON array of `values` to stdout, pretty-printed, as every
/// engine's `--format json` prints the files it read.
pub fn emit_json_array(values: Vec<serde_json::Value>) -> Result<(), StdoutFailed> {
    let text = serde_json::to_string_pretty(&serde_json::Value::Array(values)).unwrap_or_default();
    emit_json(&(text + "\n"))
}
