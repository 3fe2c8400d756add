//! The census's bookkeeping, in safe code: which thread is enlisted in which
//! census, the live set of the allocations they made, and each census's
//! running figures. [`CountingAlloc`](super::CountingAlloc) calls
//! [`on_alloc`], [`on_dealloc`], [`before_realloc`] and [`after_realloc`];
//! the census calls [`begin`] and the [`Token`] it returns.
//!
//! Rules that keep the allocator sound:
//!
//! - Nothing here panics or blocks on itself. Thread locals are read with
//!   `try_with` and are `const`-initialised without a destructor; the mutex
//!   is taken only by a thread not already inside it ([`BUSY`]), and a
//!   poisoned mutex is used as it is.
//! - The live set's own allocations (its `BTreeMap` nodes) and the snapshot
//!   a finished census takes are made while [`BUSY`] is set: they pass
//!   through to the system allocator, untracked, and never re-enter.
//! - An address is removed from the live set before the system allocator
//!   frees it, by whichever thread frees it, so a reused address is never
//!   confused with the allocation it replaced.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Mutex, PoisonError};

/// One of the census's phases, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Phase {
    /// Loading the weights: measured and reported apart, never compared
    /// with declarations (weights are not model-local state).
    Weights,
    /// Building the model from the weights: what the model allocates for
    /// itself at construction (rotary tables, preallocated caches).
    Build,
    /// Running the model to its peak (prefill and decode steps).
    Drive,
}

impl Phase {
    /// The three phases, in order.
    pub const ALL: [Phase; 3] = [Phase::Weights, Phase::Build, Phase::Drive];

    /// Its position in [`Phase::ALL`].
    pub(crate) const fn index(self) -> usize {
        match self {
            Phase::Weights => 0,
            Phase::Build => 1,
            Phase::Drive => 2,
        }
    }

    /// `weights`, `build`, `drive`.
    pub const fn name(self) -> &'static str {
        match self {
            Phase::Weights => "weights",
            Phase::Build => "build",
            Phase::Drive => "drive",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

thread_local! {
    /// The census this thread is enlisted in; 0 for none.
    static ENLISTED: Cell<u64> = const { Cell::new(0) };
    /// Set while this thread is inside the tracker: its allocations then
    /// pass through untracked, and it never takes the mutex twice.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Censuses running now; while 0 no address is tracked, and a free skips
/// the mutex.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Set by the first allocation [`CountingAlloc`](super::CountingAlloc)
/// sees: it is the global allocator.
static INSTALLED: AtomicBool = AtomicBool::new(false);

static TRACKER: Mutex<Tracker> = Mutex::new(Tracker::new());

/// A tracked allocation: the census whose thread made it, the phase it
/// was made in, and its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Live {
    pub census: u64,
    pub phase: Phase,
    pub bytes: usize,
}

/// One phase's running figures, in bytes of the census's live allocations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PhaseCounters {
    /// Live at the phase's start.
    pub start: u64,
    /// Live at its end.
    pub end: u64,
    /// The most live at any moment during it.
    pub peak: u64,
    /// Allocations made during it (a reallocation is one).
    pub allocations: u64,
    /// Bytes of those allocations.
    pub allocated: u64,
}

#[derive(Debug)]
struct Counters {
    phase: Phase,
    live: u64,
    phases: [PhaseCounters; 3],
    /// A sum overflowed `u64`: the figures are wrong and the census says so.
    overflow: bool,
}

impl Counters {
    fn new() -> Counters {
        Counters {
            phase: Phase::Weights,
            live: 0,
            phases: [PhaseCounters::default(); 3],
            overflow: false,
        }
    }

    fn current(&mut self) -> &mut PhaseCounters {
        &mut self.phases[self.phase.index()]
    }

    fn grew(&mut self, bytes: usize) {
        let bytes = bytes as u64;
        let Some(live) = self.live.checked_add(bytes) else {
            self.overflow = true;
            return;
        };
        self.live = live;
        let phase = self.current();
        let (count, sum) = (
            phase.allocations.checked_add(1),
            phase.allocated.checked_add(bytes),
        );
        phase.peak = phase.peak.max(live);
        match (count, sum) {
            (Some(count), Some(sum)) => (phase.allocations, phase.allocated) = (count, sum),
            _ => self.overflow = true,
        }
    }

    fn shrank(&mut self, bytes: usize) {
        match self.live.checked_sub(bytes as u64) {
            Some(live) => self.live = live,
            None => self.overflow = true,
        }
    }

    fn enter(&mut self, phase: Phase) {
        let live = self.live;
        self.current().end = live;
        self.phase = phase;
        let next = self.current();
        next.start = live;
        next.peak = live;
        next.end = live;
    }
}

#[derive(Debug)]
struct Tracker {
    live: BTreeMap<usize, Live>,
    censuses: BTreeMap<u64, Counters>,
    last_id: u64,
}

impl Tracker {
    const fn new() -> Tracker {
        Tracker {
            live: BTreeMap::new(),
            censuses: BTreeMap::new(),
            last_id: 0,
        }
    }

    /// Tracks `address` for `census`, in the phase it is in; nothing if
    /// that census has finished.
    fn insert(&mut self, address: usize, census: u64, bytes: usize) {
        let Some(counters) = self.censuses.get_mut(&census) else {
            return;
        };
        counters.grew(bytes);
        let live = Live {
            census,
            phase: counters.phase,
            bytes,
        };
        if let Some(stale) = self.live.insert(address, live) {
            // Unreachable while every free goes through `on_dealloc`; kept
            // honest rather than assumed.
            self.forget(stale);
        }
    }

    fn remove(&mut self, address: usize) -> Option<Live> {
        let live = self.live.remove(&address)?;
        self.forget(live);
        Some(live)
    }

    fn forget(&mut self, live: Live) {
        if let Some(counters) = self.censuses.get_mut(&live.census) {
            counters.shrank(live.bytes);
        }
    }
}

/// Runs `f` on the tracker unless this thread is already inside it (then
/// `None`: the caller's allocation passes through untracked).
fn with_tracker<R>(f: impl FnOnce(&mut Tracker) -> R) -> Option<R> {
    let entered = BUSY.try_with(|busy| !busy.replace(true)).unwrap_or(false);
    if !entered {
        return None;
    }
    let result = {
        let mut tracker = TRACKER.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut tracker)
    };
    let _ = BUSY.try_with(|busy| busy.set(false));
    Some(result)
}

fn enlisted() -> u64 {
    ENLISTED.try_with(Cell::get).unwrap_or(0)
}

/// `bytes` were allocated at `address` by this thread.
pub(super) fn on_alloc(address: usize, bytes: usize) {
    if !INSTALLED.load(SeqCst) {
        INSTALLED.store(true, SeqCst);
    }
    let census = enlisted();
    if census != 0 {
        with_tracker(|tracker| tracker.insert(address, census, bytes));
    }
}

/// `address` is about to be freed, by any thread.
pub(super) fn on_dealloc(address: usize) {
    if ACTIVE.load(SeqCst) != 0 {
        with_tracker(|tracker| tracker.remove(address));
    }
}

/// `address` is about to be reallocated: it leaves the live set now (the
/// system may free it during the call); what it was is returned for
/// [`after_realloc`].
pub(super) fn before_realloc(address: usize) -> Option<Live> {
    if ACTIVE.load(SeqCst) == 0 {
        return None;
    }
    with_tracker(|tracker| tracker.remove(address)).flatten()
}

/// The reallocation of `old` returned `new` (0: it failed, `old` is
/// unchanged). The new block is tracked for the census that tracked the
/// old one, or else for this thread's; it counts in that census's phase now.
pub(super) fn after_realloc(old: usize, was: Option<Live>, new: usize, bytes: usize) {
    if new == 0 {
        if let Some(was) = was {
            with_tracker(|tracker| tracker.insert(old, was.census, was.bytes));
        }
        return;
    }
    let census = was.map_or_else(enlisted, |was| was.census);
    if census != 0 {
        with_tracker(|tracker| tracker.insert(new, census, bytes));
    }
}

/// Why a census could not start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoStart {
    /// `CountingAlloc` is not the global allocator.
    NotInstalled,
    /// This thread is enlisted in a census already.
    Nested,
    /// Called from inside the allocator (cannot happen from user code).
    Busy,
}

/// What a finished census saw.
#[derive(Debug)]
pub(crate) struct Finished {
    pub phases: [PhaseCounters; 3],
    /// Its allocations live at the end, with their addresses.
    pub live: Vec<(usize, Live)>,
    pub overflow: bool,
}

/// A running census, enlisting the thread that began it. Dropping it
/// unfinished (a phase failed or panicked) ends it and forgets what it saw.
#[derive(Debug)]
pub(crate) struct Token {
    id: u64,
    /// What this thread was enlisted in before (always 0: nesting is refused).
    previous: u64,
    done: bool,
}

/// Starts a census on this thread, in [`Phase::Weights`].
pub(crate) fn begin() -> Result<Token, NoStart> {
    if !INSTALLED.load(SeqCst) {
        return Err(NoStart::NotInstalled);
    }
    let previous = enlisted();
    if previous != 0 {
        return Err(NoStart::Nested);
    }
    let id = with_tracker(|tracker| {
        tracker.last_id += 1;
        let id = tracker.last_id;
        tracker.censuses.insert(id, Counters::new());
        ACTIVE.fetch_add(1, SeqCst);
        id
    })
    .ok_or(NoStart::Busy)?;
    let _ = ENLISTED.try_with(|enlisted| enlisted.set(id));
    Ok(Token {
        id,
        previous,
        done: false,
    })
}

impl Token {
    /// Ends the current phase and starts `phase`.
    pub(crate) fn enter(&mut self, phase: Phase) {
        let id = self.id;
        with_tracker(|tracker| {
            if let Some(counters) = tracker.censuses.get_mut(&id) {
                counters.enter(phase);
            }
        });
    }

    /// This thread stops counting what it allocates; frees (by any thread)
    /// still leave the live set until [`finish`](Token::finish).
    pub(crate) fn pause(&mut self) {
        let _ = ENLISTED.try_with(|enlisted| enlisted.set(self.previous));
    }

    /// Ends the census: this thread leaves it, and its live allocations
    /// are taken out of the live set and returned (`None` only if the
    /// tracker lost the census, which nothing does).
    pub(crate) fn finish(mut self) -> Option<Finished> {
        self.end()
    }

    fn end(&mut self) -> Option<Finished> {
        self.done = true;
        let _ = ENLISTED.try_with(|enlisted| enlisted.set(self.previous));
        let id = self.id;
        with_tracker(|tracker| {
            let mut counters = tracker.censuses.remove(&id)?;
            ACTIVE.fetch_sub(1, SeqCst);
            let phase = counters.phase;
            counters.phases[phase.index()].end = counters.live;
            let mut live = Vec::new();
            tracker.live.retain(|&address, entry| {
                let mine = entry.census == id;
                if mine {
                    live.push((address, *entry));
                }
                !mine
            });
            Some(Finished {
                phases: counters.phases,
                live,
                overflow: counters.overflow,
            })
        })
        .flatten()
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        if !self.done {
            drop(self.end());
        }
    }
}

/// Enlists this thread in census `id` until the returned value is dropped;
/// the value restores what the thread was enlisted in before.
pub(crate) fn enlist(id: u64) -> u64 {
    ENLISTED
        .try_with(|enlisted| enlisted.replace(id))
        .unwrap_or(0)
}

/// Restores this thread's enlistment to `previous`.
pub(crate) fn restore(previous: u64) {
    let _ = ENLISTED.try_with(|enlisted| enlisted.set(previous));
}

/// The census this thread is enlisted in now, if any.
pub(crate) fn current() -> Option<u64> {
    match enlisted() {
        0 => None,
        id => Some(id),
    }
}
