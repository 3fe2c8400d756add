//! Every rule a reviewer would otherwise enforce is a compile error under the
//! offending token. Snapshots are rustc 1.95's wording.

#[rustversion::attr(not(stable(1.95)), ignore)]
#[test]
fn compile_errors() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
    cases.pass("tests/ui-pass/*.rs");
}
