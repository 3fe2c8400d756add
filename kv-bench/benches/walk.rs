//! Run-time cost of the derive (issue #6): walking a 10,001-module tree (1,000
//! declaring) whose impls are derived vs hand-written, with the same minimal
//! walker. Criterion measures each; then an interleaved A/B run (alternating
//! order every round) gives medians and the derived/hand ratio under the same
//! noise; then allocations per module of a warm walk.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use kv_bench::{allocations, derived, hand, CountingAlloc, Walker, LAYERS};
use kv_core::ModelLocalKv;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn criterion_walks(c: &mut Criterion, derived: &derived::Model, hand: &hand::Model) {
    let mut group = c.benchmark_group("walk_10k_modules_1k_declaring");
    let mut walker = Walker::default();
    group.bench_function("derived", |b| {
        b.iter(|| {
            walker.walk(black_box(derived));
            black_box(walker.specs.len())
        })
    });
    group.bench_function("hand_written", |b| {
        b.iter(|| {
            walker.walk(black_box(hand));
            black_box(walker.specs.len())
        })
    });
    group.finish();
}

/// Time per walk of a batch of `walks` walks.
fn batch(walker: &mut Walker, root: &dyn ModelLocalKv, walks: u32) -> Duration {
    let start = Instant::now();
    for _ in 0..walks {
        walker.walk(black_box(root));
        black_box(walker.specs.len());
    }
    start.elapsed() / walks
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 0 {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}

fn interleaved(derived: &derived::Model, hand: &hand::Model, rounds: usize) {
    let mut walker = Walker::default();
    // Warm up both (buffers, caches, frequency).
    for _ in 0..3 {
        batch(&mut walker, derived, 50);
        batch(&mut walker, hand, 50);
    }
    let (mut d, mut h, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (dt, ht) = if round % 2 == 0 {
            let dt = batch(&mut walker, derived, 50);
            (dt, batch(&mut walker, hand, 50))
        } else {
            let ht = batch(&mut walker, hand, 50);
            (batch(&mut walker, derived, 50), ht)
        };
        let (dt, ht) = (dt.as_secs_f64() * 1e6, ht.as_secs_f64() * 1e6);
        d.push(dt);
        h.push(ht);
        ratios.push(dt / ht);
    }
    let (md, mh) = (median(&mut d), median(&mut h));
    println!(
        "interleaved walk, {rounds} rounds x 50 walks each (A B / B A alternating):\n  \
         derived      median {md:9.1} us/walk\n  \
         hand-written median {mh:9.1} us/walk\n  \
         ratio derived/hand-written: {:.3} (ratio of medians), {:.3} (median of per-round ratios)",
        md / mh,
        median(&mut ratios)
    );
}

fn allocations_per_module(label: &str, root: &dyn ModelLocalKv) {
    let mut walker = Walker::default();
    walker.walk(root);
    let before = allocations();
    walker.walk(root);
    let allocs = allocations() - before;
    println!(
        "  {label:<24} {allocs:>5} allocations / {:>5} modules = {:.3} per module ({} declarations)",
        walker.visited,
        allocs as f64 / walker.visited as f64,
        walker.specs.len()
    );
}

fn main() {
    let derived = derived::model(LAYERS);
    let hand = hand::model(LAYERS);
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    criterion_walks(&mut c, &derived, &hand);
    c.final_summary();

    let rounds = std::env::var("KV_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(41);
    interleaved(&derived, &hand, rounds);

    println!("allocations of one warm walk:");
    allocations_per_module("derived, 10k silent", &derived::silent(10_000));
    allocations_per_module("hand-written, 10k silent", &hand::silent(10_000));
    allocations_per_module("derived, bench tree", &derived);
    allocations_per_module("hand-written, bench tree", &hand);
}
