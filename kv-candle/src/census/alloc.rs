//! The counting global allocator: the one place in kv-candle allowed to use
//! `unsafe` (the crate denies it; this module allows it).
//!
//! `GlobalAlloc` is an `unsafe trait` with `unsafe` methods, so implementing
//! it cannot be done in safe code. Every method here forwards its arguments
//! unchanged to [`System`], which upholds the contract, and tells the safe
//! bookkeeping in [`tracker`](super::tracker) what happened, as addresses
//! (`usize`): it never reads or writes the memory. The bookkeeping never
//! panics, never blocks on itself, and allocates only through a reentrancy
//! guard that passes its own allocations straight to [`System`].

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};

use super::tracker;

/// A global allocator that counts, for the census, the allocations of the
/// threads a census enlists; every other allocation passes straight to the
/// system allocator (a free of any address is also looked up, while a
/// census runs, so an allocation freed by another thread leaves the live
/// set).
///
/// Install it in a test binary, never in a library:
///
/// ```
/// #[global_allocator]
/// static ALLOC: kv_candle::census::CountingAlloc = kv_candle::census::CountingAlloc::new();
/// # fn main() {}
/// ```
#[derive(Debug, Default)]
pub struct CountingAlloc {
    _private: (),
}

impl CountingAlloc {
    /// The allocator, for a `#[global_allocator]` static.
    pub const fn new() -> CountingAlloc {
        CountingAlloc { _private: () }
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged and returns what `System` returned, so `System`'s guarantees are
// ours; the bookkeeping calls take addresses by value, never dereference
// them, never unwind (no panics in `tracker`) and never re-enter (its own
// allocations pass through untracked under its guard).
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract for
        // `layout` (non-zero size); `System` has the same contract.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            tracker::on_alloc(ptr as usize, layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`: the caller's contract is `System`'s.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            tracker::on_alloc(ptr as usize, layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Out of the live set before the system may hand the address out again.
        tracker::on_dealloc(ptr as usize);
        // SAFETY: the caller guarantees `ptr` was allocated by this
        // allocator (so by `System`, to which every allocation forwards)
        // with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Out of the live set first: `System` may free `ptr` during the call.
        let was = tracker::before_realloc(ptr as usize);
        // SAFETY: the caller guarantees `ptr` came from this allocator (so
        // from `System`) with `layout`, and that `new_size` is valid for it.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        tracker::after_realloc(ptr as usize, was, new as usize, new_size);
        new
    }
}
