//! Transient copies during growth, seen by a counting global allocator: the
//! peak while an append runs is above both the declaration and what is held
//! after it. One test function only, so no other test thread allocates while
//! it measures.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::kv_cache::{ConcatKvCache, KvCache, RotatingKvCache};
use kv_candle::{measured_bytes, StaticKvCache};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = CURRENT.fetch_add(bytes, SeqCst) + bytes;
    PEAK.fetch_max(now, SeqCst);
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        System.dealloc(p, layout);
        CURRENT.fetch_sub(layout.size(), SeqCst);
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let q = System.realloc(p, layout, new_size);
        if !q.is_null() {
            CURRENT.fetch_sub(layout.size(), SeqCst);
            grew(new_size);
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Heap bytes (peak above the start, held above the start) while `f` runs.
fn watch(f: impl FnOnce() -> Result<()>) -> Result<(usize, usize)> {
    let start = CURRENT.load(SeqCst);
    PEAK.store(start, SeqCst);
    f()?;
    Ok((PEAK.load(SeqCst) - start, CURRENT.load(SeqCst) - start))
}

/// Tensor and layout bookkeeping: small next to the buffers measured.
const SLACK: usize = 4096;

fn within(what: &str, got: usize, want: usize) {
    assert!(
        (want..want + SLACK).contains(&got),
        "{what}: {got} B, expected {want} B (+ under {SLACK} B bookkeeping)"
    );
}

#[test]
fn growth_copies_peak_above_what_is_held() -> Result<()> {
    let (heads, dim, max) = (2, 64, 256);
    let t = |seq: usize| Tensor::ones((1, heads, seq, dim), DType::F32, &Device::Cpu);
    // One tensor of `max` positions: the declaration is 2 of these (K, V).
    let m = heads * dim * max * 4;

    // KvCache, full, then one more token. Each of K and V builds a zeros block
    // of `max` and a cat of 2 x max while the old max is alive; V's copy runs
    // after K has already doubled: peak +4m, held +2m after.
    let mut cache = KvCache::new(2, max);
    let full = t(max)?;
    cache.append(&full, &full)?;
    drop(full);
    assert_eq!(measured_bytes(&cache)?, 2 * m as u64);
    let token = t(1)?;
    let (peak, held) = watch(|| cache.append(&token, &token).map(drop))?;
    within("KvCache overflow append: peak", peak, 4 * m);
    within("KvCache overflow append: held after", held, 2 * m);
    assert_eq!(measured_bytes(&cache)?, 4 * m as u64);
    drop(cache);

    // ConcatKvCache at `max` positions, one more token: each cat allocates
    // max + 1 positions while the old max is alive.
    let per_position = heads * dim * 4;
    let mut concat = ConcatKvCache::new(2);
    let (k, v) = (t(max)?, t(max)?);
    concat.append(&k, &v)?;
    drop((k, v));
    let (k, v) = (t(1)?, t(1)?);
    let (peak, held) = watch(|| concat.append(&k, &v).map(drop))?;
    within("ConcatKvCache append: peak", peak, m + 2 * per_position);
    within("ConcatKvCache append: held after", held, 2 * per_position);
    drop(concat);

    // RotatingKvCache and StaticKvCache write in place: no transient copy.
    let mut rotating = RotatingKvCache::new(2, max);
    let full = t(max)?;
    rotating.append(&full, &full)?;
    let (peak, held) = watch(|| rotating.append(&token, &token).map(drop))?;
    within("RotatingKvCache append: peak", peak, 0);
    within("RotatingKvCache append: held after", held, 0);
    let mut fixed = StaticKvCache::new(1, heads, max, dim, DType::F32, &Device::Cpu)?;
    fixed.append(&t(max - 1)?, &t(max - 1)?)?;
    let (peak, _) = watch(|| fixed.append(&token, &token).map(drop))?;
    within("StaticKvCache append: peak", peak, 0);
    Ok(())
}
