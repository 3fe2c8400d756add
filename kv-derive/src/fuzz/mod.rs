//! Property tests: `derive` never panics, on any token stream.
//!
//! Inputs start from a grammar of valid declarations (structs of every shape,
//! generics, struct- and field-level `#[kv(...)]`, children, options), which
//! must derive without a single `compile_error!`. They are then mutated, first
//! by entry (drop, duplicate, swap values, bare keys, unknown keys, junk values)
//! and then by token (delete, duplicate, swap, replace, insert, wrap in or
//! unwrap groups, truncate), and `derive` must still return tokens: either both
//! impls, or `compile_error!`s.
//!
//! `PROPTEST_CASES=N` runs N cases per test (default: about 2,000 in all);
//! `scripts/fuzz-derive.sh` runs a million or more in release mode.

use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use proc_macro2::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use crate::derive;

mod grammar;
mod mutations;
mod properties;

use grammar::*;
use mutations::*;

// ---------------------------------------------------------------------------
// Running `derive` and checking what it returns.

/// Runs `derive`, turning a panic into a test failure that shows the input.
pub(crate) fn run_derive(input: &TokenStream) -> Result<String, TestCaseError> {
    let result = catch_unwind(AssertUnwindSafe(|| derive(input.clone())));
    match result {
        Ok(output) => Ok(output.to_string()),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(TestCaseError::fail(format!(
                "derive panicked: {message}\ninput: {input}"
            )))
        }
    }
}

/// Whatever the input: either both impls or `compile_error!`.
pub(crate) fn check_output(input: &TokenStream, output: &str) -> Result<(), TestCaseError> {
    let has_error = output.contains("compile_error");
    let has_impls = output.contains("__kv_impl_v0_1 !");
    prop_assert!(
        has_error || has_impls,
        "output has neither impls nor compile_error: {output:?}\ninput: {input}"
    );
    Ok(())
}

/// The defaults of all properties add up to this many cases.
pub(crate) const DEFAULT_TOTAL: u64 = 2_000;

/// Cases per property: `PROPTEST_CASES` for each; else `KV_FUZZ_TOTAL` shared
/// out in the proportion of the defaults; else `default`.
pub(crate) fn config(default: u32) -> Config {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let cases = match (env("PROPTEST_CASES"), env("KV_FUZZ_TOTAL")) {
        (Some(cases), _) => cases,
        (None, Some(total)) => total * u64::from(default) / DEFAULT_TOTAL,
        (None, None) => u64::from(default),
    };
    let cases = u32::try_from(cases).unwrap_or(u32::MAX);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Runs a property, then reports how many cases ran (seen with `--nocapture`).
pub(crate) fn run<S: Strategy>(
    name: &str,
    default_cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let mut runner = TestRunner::new(config(default_cases));
    // Cases up to the first failure; shrinking it runs more, uncounted.
    let cases = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let start = Instant::now();
    let result = runner.run(&strategy, |value| {
        if !failed.load(Ordering::Relaxed) {
            cases.fetch_add(1, Ordering::Relaxed);
        }
        let outcome = test(value);
        if outcome.is_err() {
            failed.store(true, Ordering::Relaxed);
        }
        outcome
    });
    let cases = cases.load(Ordering::Relaxed);
    let failures = u64::from(result.is_err());
    eprintln!(
        "fuzz {name}: {cases} cases in {:.1?}, failures (panics included) found: {failures}",
        start.elapsed()
    );
    if let Err(error) = result {
        panic!("{name}: {error}");
    }
}

pub(crate) fn parse(source: &str) -> TokenStream {
    TokenStream::from_str(source)
        .unwrap_or_else(|e| panic!("the generator wrote source that does not lex: {e}\n{source}"))
}
