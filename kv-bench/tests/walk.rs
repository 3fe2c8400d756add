//! The derived and hand-written trees declare the same thing, and a warm walk
//! allocates nothing for a module that declares nothing.

use kv_bench::{allocations, derived, hand, CountingAlloc, Walker, LAYERS};
use kv_core::ModelLocalKv;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn collected(walker: &Walker) -> Vec<(String, Vec<kv_core::KvSpec>)> {
    walker
        .declaring()
        .map(|(path, specs)| (path.to_owned(), specs.to_vec()))
        .collect()
}

#[test]
fn derived_and_hand_written_trees_declare_the_same() {
    let mut walker = Walker::default();
    walker.walk(&derived::model(LAYERS));
    let derived = collected(&walker);
    assert_eq!(walker.visited, 10 * LAYERS + 1);
    assert_eq!(walker.errors, 0);
    walker.walk(&hand::model(LAYERS));
    let hand = collected(&walker);
    assert_eq!(derived.len(), LAYERS);
    assert_eq!(derived, hand);
    assert_eq!(derived[0].0, "layers.0.attn");
    assert_eq!(derived[0].1[0].name, "window");
    assert_eq!(derived[1].1[0].name, "cache");
    assert_eq!(derived[1].1[0].bytes_per_row(), Ok(2 * 8 * 128 * 2 * 4096));
}

/// Allocations of one warm walk (buffers already grown by an earlier walk).
fn warm_walk_allocations(walker: &mut Walker, root: &dyn ModelLocalKv) -> u64 {
    walker.walk(root);
    let before = allocations();
    walker.walk(root);
    allocations() - before
}

#[test]
fn modules_that_declare_nothing_allocate_nothing() {
    let mut walker = Walker::default();
    // 10,000 modules, none declaring.
    for (label, root) in [
        ("derived", &derived::silent(10_000) as &dyn ModelLocalKv),
        ("hand", &hand::silent(10_000)),
    ] {
        let allocs = warm_walk_allocations(&mut walker, root);
        assert_eq!(walker.visited, 10_000);
        assert_eq!(
            allocs, 0,
            "{label}: allocations walking 10,000 silent modules"
        );
    }
    // The benchmark tree: 9,001 silent modules, 500 static declarations (cloned
    // from KV_DECLS: borrowed text, no allocation) and 500 after-load ones, each
    // validated by `KvSpec::validate`, which formats `Type.name` up front (2
    // allocations today, success or not). The derive adds none of its own.
    let mut per_tree = Vec::new();
    for root in [
        &derived::model(LAYERS) as &dyn ModelLocalKv,
        &hand::model(LAYERS),
    ] {
        let allocs = warm_walk_allocations(&mut walker, root);
        assert_eq!(walker.specs.len(), LAYERS);
        per_tree.push(allocs);
    }
    assert_eq!(
        per_tree[0], per_tree[1],
        "derived vs hand-written allocations"
    );
    assert!(
        per_tree[0] <= 2 * (LAYERS as u64 / 2),
        "at most 2 per after-load declaration: {}",
        per_tree[0]
    );
}
