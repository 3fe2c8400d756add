//! `assert_kv_budget!` fails the build with a clear message.

#[rustversion::attr(not(stable(1.95)), ignore)]
#[test]
fn budget_assertions_fail_to_compile() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/budget-*.rs");
}
