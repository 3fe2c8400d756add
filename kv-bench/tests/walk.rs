//! The derived and hand-written trees declare the same thing through
//! `kv_core::collect`, and what a walk allocates: nothing in `kv_declare`
//! (valid declarations, static or after load, allocate nothing), and the same
//! collector allocations on both sides.

use kv_bench::{allocations, derived, hand, CountingAlloc, Walker, LAYERS};
use kv_core::{collect, Collection, KvSpec, ModelLocalKv};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Path, owner type without its module (`derived::` / `hand::` differ), spec.
fn entries(collection: &Collection) -> Vec<(String, String, KvSpec)> {
    collection
        .entries()
        .iter()
        .map(|e| {
            let ty = e.owner_type.rsplit("::").next().unwrap_or_default();
            (e.path.clone(), ty.to_owned(), e.spec.clone())
        })
        .collect()
}

#[test]
fn derived_and_hand_written_trees_collect_the_same() {
    let derived = collect(&derived::model(LAYERS));
    let hand = collect(&hand::model(LAYERS));
    assert!(derived.skipped().is_empty(), "{:?}", derived.skipped());
    assert!(hand.skipped().is_empty(), "{:?}", hand.skipped());
    let (derived, hand) = (entries(&derived), entries(&hand));
    assert_eq!(derived.len(), LAYERS);
    assert_eq!(derived, hand);
    assert_eq!(derived[0].0, "layers.0.attn");
    assert_eq!(derived[0].1, "Attention");
    assert_eq!(derived[0].2.name, "window");
    assert_eq!(derived[1].2.name, "cache");
    assert_eq!(derived[1].2.bytes_per_row(), Ok(2 * 8 * 128 * 2 * 4096));
}

#[test]
fn minimal_walker_agrees_with_the_collector() {
    let mut walker = Walker::default();
    let root = derived::model(LAYERS);
    walker.walk(&root);
    assert_eq!(walker.visited, 10 * LAYERS + 1);
    assert_eq!(walker.errors, 0);
    let walked: Vec<(String, KvSpec)> = walker
        .declaring()
        .flat_map(|(path, specs)| specs.iter().map(move |s| (path.to_owned(), s.clone())))
        .collect();
    let collected: Vec<(String, KvSpec)> = collect(&root)
        .entries()
        .iter()
        .map(|e| (e.path.clone(), e.spec.clone()))
        .collect();
    assert_eq!(walked, collected);
}

/// Allocations of one warm walk (buffers already grown by an earlier walk).
fn warm_walk_allocations(walker: &mut Walker, root: &dyn ModelLocalKv) -> u64 {
    walker.walk(root);
    let before = allocations();
    walker.walk(root);
    allocations() - before
}

fn collect_allocations(root: &dyn ModelLocalKv) -> (u64, usize) {
    let before = allocations();
    let collection = collect(root);
    (allocations() - before, collection.entries().len())
}

#[test]
fn declarers_allocate_nothing() {
    let mut walker = Walker::default();
    for (label, root, declaring) in [
        (
            "derived silent",
            &derived::silent(10_000) as &dyn ModelLocalKv,
            0,
        ),
        ("hand silent", &hand::silent(10_000), 0),
        // 500 static declarations (cloned from KV_DECLS: borrowed text) and 500
        // after-load ones, each validated (no allocation on success).
        ("derived tree", &derived::model(LAYERS), LAYERS),
        ("hand tree", &hand::model(LAYERS), LAYERS),
    ] {
        let allocs = warm_walk_allocations(&mut walker, root);
        assert_eq!(walker.specs.len(), declaring, "{label}");
        assert_eq!(allocs, 0, "{label}: allocations in kv_declare");
    }
}

#[test]
fn collector_allocations_are_the_same_on_both_sides() {
    let (derived_silent, _) = collect_allocations(&derived::silent(10_000));
    let (hand_silent, _) = collect_allocations(&hand::silent(10_000));
    let (derived_tree, n) = collect_allocations(&derived::model(LAYERS));
    let (hand_tree, _) = collect_allocations(&hand::model(LAYERS));
    assert_eq!(n, LAYERS);
    assert_eq!(derived_silent, hand_silent);
    assert_eq!(derived_tree, hand_tree);
    // The collector's own: a seen-set, entry vector, path and buffer growing
    // (a few dozen), and one path `String` per declaration (`Collected::path`).
    assert!(derived_silent < 64, "silent: {derived_silent}");
    assert!(
        derived_tree < LAYERS as u64 + 64,
        "tree: {derived_tree} for {LAYERS} declarations"
    );
}
