//! A fixed-seed slice of each target, as CI runs it: no panic, no hang, no
//! case past the memory bound, no 0-byte figure for a model with layers.
//! The long runs (1,000,000 GGUF and 200,000 config cases) are the same
//! code: `cargo run --release -p kv-fuzz -- gguf --cases 1000000`.

use kv_fuzz::alloc::BoundedAlloc;
use kv_fuzz::{run, Plan, Target};

#[global_allocator]
static ALLOC: BoundedAlloc = BoundedAlloc;

fn slice(target: Target, cases: u64) {
    let summary = run(&Plan {
        target,
        seed: 20_261_206,
        start: 0,
        cases,
        out: None,
    });
    assert!(summary.counting, "the bound is not measured");
    assert_eq!(summary.cases, cases);
    // A slice that only ever refuses tests nothing past the first check.
    assert!(summary.sized + summary.read > 0, "{summary}");
    assert!(summary.refused > 0, "{summary}");
    assert!(summary.clean(), "{summary}");
}

// One test: the bound and the panic hook are process-wide, and tests run
// on threads of one process.
#[test]
fn fixed_seed_slices_break_no_property() {
    slice(Target::Gguf, 50_000);
    slice(Target::Config, 5_000);
    slice(Target::Report, 5_000);
}
