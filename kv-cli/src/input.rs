//! Files on the command line: directories expanded (each file once, link
//! cycles ended), JSON read within a bound (`--max-file-bytes`; regular
//! files only, a GGUF named), problems reported as one line naming the file.

use std::collections::HashSet;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use kv_core::units::thousands;
use serde_json::Value;

use crate::message::{escaped, printable};

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
        // The file is escaped, never cut (it is the user's own path); the
        // message may quote a file's bytes, and is cut as well.
        let message = self.message.strip_prefix("kv: ").unwrap_or(&self.message);
        write!(f, "kv: {}: {}", escaped(&self.file), printable(message))
    }
}

/// How many bytes kv reads of one config or report, unless `--max-file-bytes`
/// says otherwise: far above any HF config or rank report (kilobytes), far
/// below what a mistaken path (`/dev/zero`, a weights file) would fill.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 16 << 20;

/// `--max-file-bytes`, shared by `kv estimate`, `kv merge` and `kv table`.
#[derive(clap::Args, Clone, Copy)]
pub struct ReadLimit {
    /// The most bytes read of one config or report (16 MiB by default); a
    /// larger file is refused, naming the limit.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_FILE_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_file_bytes: u64,
}

/// The files named: a file as given, a directory as every `*.json` in it
/// and its subdirectories (only those named `named`, where given: a
/// checkpoint folder also holds `tokenizer_config.json` and others), sorted
/// by path. An unreadable directory or one with no such file is a problem.
/// A directory's walk enters each directory once and lists each file once,
/// by their canonical paths, so a link back up (`a -> .`) ends the walk
/// there and a file reached by two paths in it is read once; what the
/// command line names is kept as given (a path named twice is read twice).
pub fn expand(paths: &[PathBuf], named: Option<&str>) -> (Vec<PathBuf>, Vec<Problem>) {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for path in paths {
        if !path.is_dir() {
            files.push(path.clone());
            continue;
        }
        let mut found = Vec::new();
        walk(path, named, &mut found, &mut problems, &mut Seen::default());
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

/// The canonical paths a walk has entered or listed.
#[derive(Default)]
struct Seen {
    directories: HashSet<PathBuf>,
    files: HashSet<PathBuf>,
}

impl Seen {
    /// True the first time `path` (by its canonical path) is seen; a path
    /// that cannot be resolved counts as new, to be reported when read.
    fn first(set: &mut HashSet<PathBuf>, path: &Path) -> bool {
        match std::fs::canonicalize(path) {
            Ok(canonical) => set.insert(canonical),
            Err(_) => true,
        }
    }
}

/// Every `*.json` under `dir` (named `named`, where given) not seen
/// before, in sorted order: of two paths to one file, the first is kept.
fn walk(
    dir: &Path,
    named: Option<&str>,
    found: &mut Vec<PathBuf>,
    problems: &mut Vec<Problem>,
    seen: &mut Seen,
) {
    if !Seen::first(&mut seen.directories, dir) {
        return;
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            problems.push(Problem::new(dir, format!("cannot read the directory: {e}")));
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    paths.sort();
    for path in paths {
        let wanted = match named {
            Some(name) => path.file_name().is_some_and(|f| f == name),
            None => path.extension().is_some_and(|ext| ext == "json"),
        };
        if path.is_dir() {
            walk(&path, named, found, problems, seen);
        } else if wanted && Seen::first(&mut seen.files, &path) {
            found.push(path);
        }
    }
}

/// GGUF's magic, the first four bytes of every GGUF file.
const GGUF_MAGIC: &[u8; 4] = b"GGUF";

/// The kind of a file that is not a regular one, in words.
fn not_regular(file_type: std::fs::FileType) -> Option<&'static str> {
    if file_type.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if file_type.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if file_type.is_socket() {
            return Some("a socket");
        }
        if file_type.is_char_device() {
            return Some("a character device");
        }
        if file_type.is_block_device() {
            return Some("a block device");
        }
    }
    if file_type.is_dir() {
        return Some("a directory");
    }
    Some("not a regular file")
}

/// Refuses, naming the kind, a path that is not a regular file (after
/// links): a FIFO would block the read, `/dev/zero` would never end it.
pub fn regular_file(path: &Path) -> Result<(), Problem> {
    let metadata = std::fs::metadata(path).map_err(|e| Problem::new(path, e))?;
    match not_regular(metadata.file_type()) {
        None => Ok(()),
        Some(kind) => Err(Problem::new(
            path,
            format!("{kind}, not a regular file; give a file kv can read to its end"),
        )),
    }
}

/// A JSON file's text, at most `limit` bytes of it: `what` names the file
/// kind wanted (`a config.json`), for the GGUF and size refusals.
fn read_text(path: &Path, limit: u64, what: &str, gguf_advice: &str) -> Result<String, Problem> {
    let problem = |message: String| Problem::new(path, message);
    regular_file(path)?;
    let file = std::fs::File::open(path).map_err(|e| Problem::new(path, e))?;
    // The path checked above may have been swapped since; the open file's
    // own type is what is read.
    let metadata = file.metadata().map_err(|e| Problem::new(path, e))?;
    if let Some(kind) = not_regular(metadata.file_type()) {
        return Err(problem(format!("{kind}, not a regular file")));
    }
    let mut reader = file;
    let mut bytes = Vec::new();
    // The magic first, so a multi-gigabyte GGUF is named before it is read.
    (&mut reader)
        .take(GGUF_MAGIC.len() as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| Problem::new(path, e))?;
    if bytes.as_slice() == GGUF_MAGIC {
        return Err(problem(format!(
            "this is a GGUF file, not {what}; {gguf_advice}"
        )));
    }
    // One byte past the limit tells a file at the limit from one above it;
    // the size the file system reports is not trusted (a device says 0).
    reader
        .take((limit + 1).saturating_sub(bytes.len() as u64))
        .read_to_end(&mut bytes)
        .map_err(|e| Problem::new(path, e))?;
    if bytes.len() as u64 > limit {
        return Err(problem(format!(
            "the file is larger than {} bytes, the most kv reads of {what}; raise the limit \
             with --max-file-bytes BYTES",
            thousands(limit)
        )));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        problem(format!(
            "not UTF-8 text (an invalid byte at offset {}); expected JSON",
            e.utf8_error().valid_up_to()
        ))
    })?;
    if text.trim().is_empty() {
        return Err(problem("the file is empty; expected JSON".to_owned()));
    }
    Ok(text)
}

/// A report's JSON; an unreadable, empty, invalid or too large file is a problem.
pub fn read_json(path: &Path, limit: u64) -> Result<Value, Problem> {
    let text = read_text(
        path,
        limit,
        "a kv report",
        "kv merge and kv table read reports (Collection::export JSON)",
    )?;
    serde_json::from_str(&text).map_err(|e| Problem::new(path, format!("invalid JSON: {e}")))
}

/// A checkpoint's config, read as Python's `json` reads it (`NaN` and
/// `Infinity` included: `kv_core::config::parse_json`).
pub fn read_config(path: &Path, limit: u64) -> Result<Value, Problem> {
    let text = read_text(
        path,
        limit,
        "a config.json",
        "use --engine llama.cpp for GGUF files",
    )?;
    kv_core::config::parse_json(&text).map_err(|e| Problem::new(path, format!("invalid JSON: {e}")))
}
