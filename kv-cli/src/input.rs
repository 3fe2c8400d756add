//! Files on the command line: directories expanded, JSON read, problems
//! reported as one line naming the file.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One problem with one input, printed as `kv: FILE: PROBLEM` on one line.
#[derive(Debug)]
pub struct Problem {
    pub file: String,
    pub message: String,
}

impl Problem {
    pub fn new(file: &Path, message: impl ToString) -> Problem {
        Problem {
            file: file.display().to_string(),
            message: message.to_string(),
        }
    }

    /// Prints the one line on stderr.
    pub fn report(&self) {
        let _ = writeln!(std::io::stderr(), "{self}");
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // kv-core's messages start with "kv: "; the file goes in between.
        let message = self.message.strip_prefix("kv: ").unwrap_or(&self.message);
        let one_line: String = message
            .chars()
            .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
            .collect();
        write!(f, "kv: {}: {}", self.file, one_line.trim_end())
    }
}

/// The files named: a file as given, a directory as every `*.json` in it
/// and its subdirectories (only those named `named`, where given: a
/// checkpoint folder also holds `tokenizer_config.json` and others), sorted
/// by path. An unreadable directory or one with no such file is a problem.
pub fn expand(paths: &[PathBuf], named: Option<&str>) -> (Vec<PathBuf>, Vec<Problem>) {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for path in paths {
        if !path.is_dir() {
            files.push(path.clone());
            continue;
        }
        let mut found = Vec::new();
        walk(path, &mut found, &mut problems);
        if let Some(name) = named {
            found.retain(|file| file.file_name().is_some_and(|f| f == name));
        }
        found.sort();
        if found.is_empty() {
            let wanted = named.unwrap_or("*.json");
            problems.push(Problem::new(
                path,
                format!("the directory holds no {wanted} file"),
            ));
        }
        files.extend(found);
    }
    (files, problems)
}

/// Every `*.json` under `dir`.
fn walk(dir: &Path, found: &mut Vec<PathBuf>, problems: &mut Vec<Problem>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            problems.push(Problem::new(dir, format!("cannot read the directory: {e}")));
            return;
        }
    };
    for path in entries.filter_map(|entry| entry.ok().map(|e| e.path())) {
        if path.is_dir() {
            walk(&path, found, problems);
        } else if path.extension().is_some_and(|ext| ext == "json") {
            found.push(path);
        }
    }
}

/// The file's JSON; an unreadable, empty or invalid file is a problem.
pub fn read_json(path: &Path) -> Result<Value, Problem> {
    let text = std::fs::read_to_string(path).map_err(|e| Problem::new(path, e))?;
    if text.trim().is_empty() {
        return Err(Problem::new(path, "the file is empty; expected JSON"));
    }
    serde_json::from_str(&text).map_err(|e| Problem::new(path, format!("invalid JSON: {e}")))
}

/// A checkpoint's config, read as Python's `json` reads it (`NaN` and
/// `Infinity` included: `kv_core::config::parse_json`).
pub fn read_config(path: &Path) -> Result<Value, Problem> {
    let text = std::fs::read_to_string(path).map_err(|e| Problem::new(path, e))?;
    if text.trim().is_empty() {
        return Err(Problem::new(path, "the file is empty; expected JSON"));
    }
    kv_core::config::parse_json(&text).map_err(|e| Problem::new(path, format!("invalid JSON: {e}")))
}

/// Writes to stdout; a closed pipe (`kv estimate ... | head`) is not a panic.
pub fn emit(text: &str) {
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// Writes one JSON array of `values` to stdout, pretty-printed, as every
/// engine's `--format json` prints the files it read.
pub fn emit_json_array(values: Vec<serde_json::Value>) {
    let text = serde_json::to_string_pretty(&serde_json::Value::Array(values)).unwrap_or_default();
    emit(&(text + "\n"));
}
