//! Every rule a reviewer would otherwise enforce is a compile error under the
//! offending token. Snapshots are rustc 1.95's wording.

#[rustversion::attr(not(stable(1.95)), ignore)]
#[test]
fn compile_errors() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
    cases.pass("tests/ui-pass/*.rs");
}

/// The same rules under `cargo check` alone: trybuild builds (codegen) when a
/// suite has a pass case, so this suite has none. An IDE runs check only.
#[rustversion::attr(not(stable(1.95)), ignore)]
#[test]
fn compile_errors_under_cargo_check() {
    trybuild::TestCases::new().compile_fail("tests/ui-check/*.rs");
}
