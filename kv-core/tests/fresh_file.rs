//! `kv_core::fresh::assert_fresh` on real files: missing and stale files
//! fail naming the update variable; with it set, they are rewritten.
//! One test, because the update variable is process-wide.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use kv_core::fresh::{assert_fresh, UPDATE_VAR};

fn failure(path: &Path, generated: &str) -> String {
    let payload = catch_unwind(AssertUnwindSafe(|| assert_fresh(path, generated)))
        .expect_err("assert_fresh should have failed");
    match payload.downcast::<String>() {
        Ok(message) => *message,
        Err(_) => panic!("panic payload is not a String"),
    }
}

#[test]
fn missing_and_stale_files_fail_and_the_update_variable_rewrites_them() {
    assert_eq!(UPDATE_VAR, "KV_UPDATE_DOCS");
    std::env::remove_var(UPDATE_VAR);
    let dir = std::env::temp_dir().join(format!("kv-fresh-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("docs").join("page.md");
    let page = "# Model-local KV\n\n| a | b |\n| 1 | 2 |\n";

    // Missing: fails, says how to generate it.
    let message = failure(&path, page);
    assert!(message.contains("cannot be read"), "{message}");
    assert!(message.contains("KV_UPDATE_DOCS=1"), "{message}");
    assert!(!path.exists());

    // With the variable: written, folder and all; then fresh without it.
    std::env::set_var(UPDATE_VAR, "1");
    assert_fresh(&path, page);
    std::env::remove_var(UPDATE_VAR);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), page);
    assert_fresh(&path, page);

    // Stale: fails with the line and the lines that differ.
    let newer = page.replace("| 1 | 2 |", "| 1 | 3 |");
    let message = failure(&path, &newer);
    assert!(message.contains("is stale"), "{message}");
    assert!(message.contains("first at line 4"), "{message}");
    assert!(message.contains("KV_UPDATE_DOCS=1"), "{message}");
    assert!(message.contains("\n-| 1 | 2 |\n+| 1 | 3 |\n"), "{message}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        page,
        "not rewritten"
    );

    // "0" does not update.
    std::env::set_var(UPDATE_VAR, "0");
    let _ = failure(&path, &newer);
    // Any other value does.
    std::env::set_var(UPDATE_VAR, "1");
    assert_fresh(&path, &newer);
    std::env::remove_var(UPDATE_VAR);
    assert_fresh(&path, &newer);

    std::fs::remove_dir_all(&dir).unwrap();
}
