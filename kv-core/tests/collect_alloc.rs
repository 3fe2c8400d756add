//! Visiting owners that declare nothing costs no allocation per owner.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use kv_core::declare::ChildVisitor;
use kv_core::{collect, KvError, KvSpec, ModelLocalKv};

/// Counts this thread's allocations, so parallel tests do not disturb it.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; counting touches only a const-initialised thread local.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Non-zero-sized, so each one is identified and tracked.
struct Silent {
    _id: u32,
}

impl ModelLocalKv for Silent {
    fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
        Ok(())
    }
}

struct Layers(Vec<Silent>);

impl ModelLocalKv for Layers {
    fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
        Ok(())
    }
    fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
        visitor.field("layers", &self.0);
    }
}

fn allocations_to_collect(owners: u32) -> usize {
    let model = Layers((0..owners).map(|id| Silent { _id: id }).collect());
    let before = ALLOCATIONS.with(Cell::get);
    let collection = collect(&model);
    let after = ALLOCATIONS.with(Cell::get);
    assert!(collection.entries().is_empty());
    after - before
}

#[test]
fn silent_owners_cost_no_allocation_each() {
    let few = allocations_to_collect(10);
    let many = allocations_to_collect(10_000);
    // Only the seen-set and the path string grow, each by doubling: a few
    // dozen allocations for ten thousand owners, not ten thousand.
    assert!(
        many < few + 40,
        "10 owners: {few} allocations; 10,000 owners: {many}"
    );
}
