//! Run-time cost of the derive (issue #6): `kv_core::collect` over a
//! 10,001-module tree (1,000 declaring) whose impls are derived vs
//! hand-written. Criterion measures each; then an interleaved A/B run
//! (alternating order every round) gives medians and the derived/hand ratio
//! under the same noise; then the allocations of one collection, and of one
//! warm walk by the minimal walker (what `kv_declare` alone allocates).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use kv_bench::{allocations, derived, hand, CountingAlloc, Walker, LAYERS};
use kv_core::{collect, ModelLocalKv};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// One collection, dropped inside the measurement (a real caller drops it too).
fn collect_once(root: &dyn ModelLocalKv) -> usize {
    collect(black_box(root)).entries().len()
}

fn criterion_walks(c: &mut Criterion, derived: &derived::Model, hand: &hand::Model) {
    let mut group = c.benchmark_group("collect_10k_modules_1k_declaring");
    group.bench_function("derived", |b| b.iter(|| collect_once(derived)));
    group.bench_function("hand_written", |b| b.iter(|| collect_once(hand)));
    group.finish();
}

/// Time per collection of a batch of `walks` collections.
fn batch(root: &dyn ModelLocalKv, walks: u32) -> Duration {
    let start = Instant::now();
    for _ in 0..walks {
        black_box(collect_once(root));
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
    // Warm up both (allocator, caches, frequency).
    for _ in 0..3 {
        batch(derived, 50);
        batch(hand, 50);
    }
    let (mut d, mut h, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (dt, ht) = if round % 2 == 0 {
            let dt = batch(derived, 50);
            (dt, batch(hand, 50))
        } else {
            let ht = batch(hand, 50);
            (batch(derived, 50), ht)
        };
        let (dt, ht) = (dt.as_secs_f64() * 1e6, ht.as_secs_f64() * 1e6);
        d.push(dt);
        h.push(ht);
        ratios.push(dt / ht);
    }
    let (md, mh) = (median(&mut d), median(&mut h));
    println!(
        "interleaved kv_core::collect, {rounds} rounds x 50 collections each (A B / B A alternating):\n  \
         derived      median {md:9.1} us/collect\n  \
         hand-written median {mh:9.1} us/collect\n  \
         ratio derived/hand-written: {:.3} (ratio of medians), {:.3} (median of per-round ratios)",
        md / mh,
        median(&mut ratios)
    );
}

fn collect_allocations(label: &str, root: &dyn ModelLocalKv, modules: usize) {
    drop(collect(root));
    let before = allocations();
    let collection = collect(root);
    let allocs = allocations() - before;
    println!(
        "  {label:<26} {allocs:>5} allocations / {modules:>5} modules ({} declarations)",
        collection.entries().len()
    );
}

fn declarer_allocations(label: &str, root: &dyn ModelLocalKv) {
    let mut walker = Walker::default();
    walker.walk(root);
    let before = allocations();
    walker.walk(root);
    let allocs = allocations() - before;
    println!(
        "  {label:<26} {allocs:>5} allocations / {:>5} modules ({} declarations)",
        walker.visited,
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

    let modules = 10 * LAYERS + 1;
    println!("allocations of one kv_core::collect (collector and declarers together):");
    collect_allocations("derived, 10k silent", &derived::silent(10_000), 10_000);
    collect_allocations("hand-written, 10k silent", &hand::silent(10_000), 10_000);
    collect_allocations("derived, bench tree", &derived, modules);
    collect_allocations("hand-written, bench tree", &hand, modules);
    println!("allocations of one warm walk by the minimal walker (kv_declare alone):");
    declarer_allocations("derived, 10k silent", &derived::silent(10_000));
    declarer_allocations("hand-written, 10k silent", &hand::silent(10_000));
    declarer_allocations("derived, bench tree", &derived);
    declarer_allocations("hand-written, bench tree", &hand);
}
