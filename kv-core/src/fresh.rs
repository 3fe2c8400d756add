//! Generated files kept fresh from a test (feature `fresh`), in the style of
//! `expect-test` and `insta`: a test generates the file's contents and calls
//! [`assert_fresh`]; it fails while the file on disk differs, and rewrites
//! the file when run with [`UPDATE_VAR`] set.
//!
//! ```sh
//! cargo test                       # fails on a stale file: names the variable, shows the first lines that differ
//! KV_UPDATE_DOCS=1 cargo test      # rewrites it; commit the result
//! ```
//!
//! The whole pattern, for a crate that documents its models: generate a page
//! with [`Page`](crate::page::Page), keep it fresh from a test, and put it
//! into the crate's rustdoc with `include_str!` (this is a doc test of
//! kv-core; its page is `kv-core/docs/fresh-example.md`):
//!
//! ```
//! use kv_core::fresh::assert_fresh;
//! use kv_core::page::Page;
//! use kv_core::ModelLocalKv;
//! use kv_core::declare::DeclaredKv;
//!
//! #[derive(ModelLocalKv)]
//! #[kv(
//!     name = "retained",
//!     cache = "sliding DynamicCache",
//!     layers = 8, kv_heads = 16, head_dim = 64, dtype = f32,
//!     positions = bounded(71, because = "sliding_window(72) - 1"),
//!     scope = request,
//!     rows = max_num_seqs,
//! )]
//! struct CodecDecoder;
//!
//! #[derive(ModelLocalKv)]
//! struct Tts {
//!     #[kv(child)]
//!     decoder: CodecDecoder,
//! }
//!
//! /// The model-local KV of this crate's models, generated from their
//! /// declarations (rendered into rustdoc from the committed page):
//! #[doc = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/fresh-example.md"))]
//! pub mod model_local_kv {}
//!
//! // In a test (`#[test] fn docs_are_fresh()`), three lines:
//! let page = Page::new("Model-local KV", 256)
//!     .types(&[CodecDecoder::KV_DECLS])
//!     .loaded([("TTS", &Tts { decoder: CodecDecoder } as &dyn ModelLocalKv)])?;
//! assert_fresh(
//!     concat!(env!("CARGO_MANIFEST_DIR"), "/docs/fresh-example.md"),
//!     &page.to_markdown(),
//! );
//! # Ok::<(), kv_core::KvError>(())
//! ```

use std::fmt::Write as _;
use std::path::Path;

use similar::{ChangeTag, TextDiff};

/// The environment variable that makes [`assert_fresh`] rewrite a stale or
/// missing file instead of failing: `KV_UPDATE_DOCS=1 cargo test`. Any value
/// but empty and `0` counts.
pub const UPDATE_VAR: &str = "KV_UPDATE_DOCS";

/// At most this many diff lines are shown in a failure.
const MAX_DIFF_LINES: usize = 24;

/// Checks that the file at `path` holds exactly `generated`; panics
/// otherwise, naming [`UPDATE_VAR`] and showing the first lines that differ.
/// With [`UPDATE_VAR`] set, writes `generated` to `path` instead (creating
/// its folder; a file that is already fresh is left untouched) and passes.
///
/// A relative `path` is relative to the current directory, which `cargo
/// test` sets to the package's root; `concat!(env!("CARGO_MANIFEST_DIR"),
/// "/docs/...")` works from anywhere. Line endings on disk are compared as
/// `\n`, so a checkout that turned them into `\r\n` is not stale. A missing
/// file fails like a stale one. The [module](self) shows the whole pattern.
#[track_caller]
pub fn assert_fresh(path: impl AsRef<Path>, generated: &str) {
    let path = path.as_ref();
    let on_disk = std::fs::read_to_string(path);
    if update_requested(std::env::var_os(UPDATE_VAR).as_deref()) {
        if on_disk.is_ok_and(|on_disk| stale(path, &on_disk, generated).is_none()) {
            return;
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Err(error) = std::fs::create_dir_all(dir) {
                panic!(
                    "{UPDATE_VAR} is set but {} cannot be created: {error}",
                    dir.display()
                );
            }
        }
        if let Err(error) = std::fs::write(path, generated) {
            panic!(
                "{UPDATE_VAR} is set but {} cannot be written: {error}",
                path.display()
            );
        }
        eprintln!("{UPDATE_VAR}: updated {}", path.display());
        return;
    }
    let message = match on_disk {
        Ok(on_disk) => stale(path, &on_disk, generated),
        Err(error) => Some(format!(
            "{} cannot be read ({error}); generate it by rerunning this test with {UPDATE_VAR}=1 \
             (`{UPDATE_VAR}=1 cargo test`), then commit it",
            path.display()
        )),
    };
    if let Some(message) = message {
        panic!("{message}");
    }
}

fn update_requested(value: Option<&std::ffi::OsStr>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0")
}

/// `None` when `on_disk` (line endings normalized) equals `generated`;
/// otherwise the failure message.
fn stale(path: &Path, on_disk: &str, generated: &str) -> Option<String> {
    let on_disk = on_disk.replace("\r\n", "\n");
    if on_disk == generated {
        return None;
    }
    let diff = TextDiff::from_lines(on_disk.as_str(), generated);
    let first_line = diff
        .iter_all_changes()
        .find(|change| change.tag() != ChangeTag::Equal)
        .and_then(|change| change.old_index().or(change.new_index()))
        .map_or(1, |index| index + 1);
    let mut message = format!(
        "{} is stale: it differs from what was generated, first at line {first_line}.\n\
         Rerun this test with {UPDATE_VAR}=1 to rewrite it (`{UPDATE_VAR}=1 cargo test`), \
         then commit the result.\n",
        path.display()
    );
    let mut udiff = diff.unified_diff();
    udiff.context_radius(2);
    let mut lines = Vec::new();
    for hunk in udiff.iter_hunks() {
        lines.extend(hunk.to_string().lines().map(str::to_owned));
    }
    let _ = writeln!(message, "--- on disk\n+++ generated");
    for line in lines.iter().take(MAX_DIFF_LINES) {
        let _ = writeln!(message, "{line}");
    }
    if lines.len() > MAX_DIFF_LINES {
        let _ = writeln!(
            message,
            "... ({} more diff lines)",
            lines.len() - MAX_DIFF_LINES
        );
    }
    Some(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "# Title\n\nline 3\nline 4\nline 5\nline 6\nline 7\n";

    #[test]
    fn a_fresh_file_passes_and_crlf_on_disk_is_fresh() {
        let path = Path::new("docs/page.md");
        assert_eq!(stale(path, PAGE, PAGE), None);
        assert_eq!(stale(path, &PAGE.replace('\n', "\r\n"), PAGE), None);
    }

    #[test]
    fn a_stale_file_names_the_variable_the_line_and_the_lines_that_differ() {
        let path = Path::new("docs/page.md");
        let message = stale(path, &PAGE.replace("line 5", "line five"), PAGE).unwrap();
        assert!(message.starts_with("docs/page.md is stale"), "{message}");
        assert!(message.contains("first at line 5"), "{message}");
        assert!(message.contains("KV_UPDATE_DOCS=1"), "{message}");
        assert!(message.contains("\n-line five\n+line 5\n"), "{message}");
        // Context, not the whole file.
        assert!(!message.contains("# Title"), "{message}");
    }

    #[test]
    fn a_shorter_file_is_stale_at_the_first_missing_line() {
        let shorter: String = PAGE.lines().take(3).map(|l| format!("{l}\n")).collect();
        let message = stale(Path::new("p.md"), &shorter, PAGE).unwrap();
        assert!(message.contains("first at line 4"), "{message}");
        assert!(message.contains("\n+line 4\n"), "{message}");
    }

    #[test]
    fn a_long_diff_is_cut() {
        let generated: String = (0..100).map(|i| format!("{i}\n")).collect();
        let message = stale(Path::new("p.md"), "", &generated).unwrap();
        assert!(message.contains("first at line 1"), "{message}");
        assert!(message.contains("more diff lines)"), "{message}");
        assert!(message.lines().count() < 40, "{message}");
    }

    #[test]
    fn a_diff_of_exactly_the_limit_is_shown_whole() {
        // Against an empty file, a diff is its `@@` line and one line per
        // generated line.
        let lines = |n: usize| -> String { (0..n).map(|i| format!("{i}\n")).collect() };
        let whole = stale(Path::new("p.md"), "", &lines(MAX_DIFF_LINES - 1)).unwrap();
        assert!(!whole.contains("more diff lines"), "{whole}");
        assert!(
            whole.contains(&format!("\n+{}\n", MAX_DIFF_LINES - 2)),
            "{whole}"
        );
        let cut = stale(Path::new("p.md"), "", &lines(MAX_DIFF_LINES)).unwrap();
        assert!(cut.ends_with("... (1 more diff lines)\n"), "{cut}");
    }

    #[test]
    fn the_update_variable_counts_unless_empty_or_zero() {
        use std::ffi::OsStr;
        assert!(update_requested(Some(OsStr::new("1"))));
        assert!(update_requested(Some(OsStr::new("yes"))));
        assert!(!update_requested(Some(OsStr::new("0"))));
        assert!(!update_requested(Some(OsStr::new(""))));
        assert!(!update_requested(None));
    }
}
