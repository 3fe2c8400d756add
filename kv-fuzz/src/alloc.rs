//! An allocator that bounds what one case may hold: the run's binary (or
//! test) installs [`BoundedAlloc`] as its global allocator, and a request
//! that would take the live bytes past [`LIMIT_BYTES`] is refused, with the
//! case named on stderr, instead of being served until the machine runs out.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// No case may hold more than this at once beyond its input: 100 MB, the
/// issue's bound. Inputs are a few kilobytes, and now and then a 4 MB
/// array; a reader that trusts a length, or holds a value per element,
/// holds far more.
pub const LIMIT_BYTES: usize = 100_000_000;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static ARMED: AtomicBool = AtomicBool::new(false);
/// The live bytes when the running case began.
static BASE: AtomicUsize = AtomicUsize::new(0);
/// The case running, for the message when a request is refused.
static CASE: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting live bytes and refusing past the bound
/// while a case runs.
pub struct BoundedAlloc;

// SAFETY: every call is forwarded to `System` unchanged; the counters are
// atomics and the refusal returns null, which `GlobalAlloc` allows.
unsafe impl GlobalAlloc for BoundedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !admit(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, as given.
        let ptr = unsafe { System.alloc(layout) };
        if ptr.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !admit(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, as given.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if ptr.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old && !admit(new_size - old) {
            return std::ptr::null_mut();
        }
        // SAFETY: `ptr` came from this allocator with `layout`.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if new.is_null() {
            if new_size > old {
                LIVE.fetch_sub(new_size - old, Ordering::Relaxed);
            }
        } else if new_size < old {
            LIVE.fetch_sub(old - new_size, Ordering::Relaxed);
        }
        new
    }
}

/// Counts `size` more live bytes, or refuses them (and says so, without
/// allocating) when a case runs and they would pass the bound.
fn admit(size: usize) -> bool {
    let live = LIVE.fetch_add(size, Ordering::Relaxed).saturating_add(size);
    if ARMED.load(Ordering::Relaxed)
        && live.saturating_sub(BASE.load(Ordering::Relaxed)) > LIMIT_BYTES
    {
        LIVE.fetch_sub(size, Ordering::Relaxed);
        refused(size, live);
        return false;
    }
    PEAK.fetch_max(live, Ordering::Relaxed);
    true
}

/// One line on stderr naming the case, written from a stack buffer: the
/// allocator cannot allocate to report.
fn refused(size: usize, live: usize) {
    let mut line = [0u8; 200];
    let mut at = 0;
    for part in [
        "kv-fuzz: case ".as_bytes(),
        digits(CASE.load(Ordering::Relaxed), &mut [0; 20]),
        b" asked for ",
        digits(size as u64, &mut [0; 20]),
        b" bytes with ",
        digits(live as u64, &mut [0; 20]),
        b" live (the case began at ",
        digits(BASE.load(Ordering::Relaxed) as u64, &mut [0; 20]),
        b"), past the bound; the process aborts\n",
    ] {
        let end = (at + part.len()).min(line.len());
        line[at..end].copy_from_slice(&part[..end - at]);
        at = end;
    }
    let _ = std::io::stderr().write_all(&line[..at]);
}

fn digits(mut value: u64, buffer: &mut [u8; 20]) -> &[u8] {
    let mut start = buffer.len();
    loop {
        start -= 1;
        buffer[start] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            return &buffer[start..];
        }
    }
}

/// Arms the bound for case `index` and returns the live bytes before it.
pub fn begin_case(index: u64) -> usize {
    CASE.store(index, Ordering::Relaxed);
    let live = LIVE.load(Ordering::Relaxed);
    BASE.store(live, Ordering::Relaxed);
    PEAK.store(live, Ordering::Relaxed);
    ARMED.store(true, Ordering::Relaxed);
    live
}

/// Disarms it and returns the most the case held above `before`.
pub fn end_case(before: usize) -> usize {
    ARMED.store(false, Ordering::Relaxed);
    PEAK.load(Ordering::Relaxed).saturating_sub(before)
}

/// Whether the running binary counts through [`BoundedAlloc`] (a run
/// without it cannot claim a memory bound, and says so).
pub fn counting() -> bool {
    let before = LIVE.load(Ordering::Relaxed);
    let probe = std::hint::black_box(vec![0u8; 4096]);
    let counted = LIVE.load(Ordering::Relaxed) >= before + 4096;
    drop(probe);
    counted
}
