//! The census: what a model really holds on the CPU, counted by the
//! allocator, set against what it declares.
//!
//! Static checks cannot see a cache behind a trait object, in a struct
//! without the derive, or in a tensor nobody declared. The census measures
//! instead: it runs the model in three phases, each a closure, under
//! [`CountingAlloc`], and keeps every allocation the enlisted threads make
//! that is still live when the drive ends.
//!
//! - **weights**: load the weights (a `VarBuilder` over pre-built tensors,
//!   a loaded model). Measured and reported apart; weights are not
//!   model-local state.
//! - **build**: build the model from them. What it allocates for itself and
//!   keeps (rotary tables, preallocated caches) is model-local state.
//! - **drive**: run it to its peak (prefill, decode steps, at a batch).
//!
//! Held bytes are the allocations of at least
//! [`Census::min_allocation_bytes`] made in build and drive and live after
//! the drive. [`CensusReport::compare`] sets them against
//! `kv_core::collect(&model).totals(max_num_seqs)`: `unaccounted = held -
//! declared`, signed. Allocations below the threshold are bookkeeping,
//! reported apart with their count and bytes: candle 0.11.1 keeps four per
//! tensor (the `Arc` of the tensor, 152 B; the `Arc<RwLock<Storage>>`,
//! 56 B; its shape, 8 B a dim; its strides, 32 B up to 4 dims), and the
//! model's small `Vec`s and maps. The model's own structure above the
//! threshold (a `Vec` of layers) is set apart by name with
//! [`CensusReport::set_apart`].
//!
//! # Limits
//!
//! - **CPU only.** Device memory (CUDA, Metal) is not allocated through the
//!   global allocator; the census cannot see it.
//! - **Enlisted threads only.** Only allocations made by the thread that
//!   runs the census, and threads it enlists with [`Enlistment`], are
//!   counted, so tests running in parallel do not disturb each other. A free
//!   by any thread removes the address. candle's CPU ops that run on worker
//!   threads (gemm's and rayon's) allocate scratch there and free it; the
//!   storage of every tensor is allocated on the calling thread (checked
//!   for matmul, cat, narrow, softmax, `to_dtype`, rope in
//!   `tests/census.rs`). What another thread allocates and keeps is not seen.
//! - **Lazily built state.** Per-thread and process-wide state built on
//!   first use (gemm's per-thread packing buffer, rayon's pool) would count
//!   in the phase that first used it; [`Census::run`] runs candle's CPU ops
//!   once on small tensors before counting. rayon's global queue keeps jobs
//!   in blocks (1,520 B) allocated by whichever thread's push crosses into
//!   one; after the drive the census pushes empty jobs through it, no
//!   longer counting, so a block its thread allocated is freed.
//! - **Not seen at all**: memory-mapped weights, the stack, and what a C
//!   library allocates with its own `malloc`.

mod alloc;
mod report;
mod tracker;

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use candle_core::{DType, Device, Result, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::{Init, VarBuilder};

pub use alloc::CountingAlloc;
pub use report::{Accounting, Allocation, CensusReport, Held, PhaseFigures, Tolerance};
pub use tracker::Phase;

/// How to count: the threshold between compared allocations and
/// bookkeeping. [`Census::run`] counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Census {
    min_allocation_bytes: u64,
}

impl Default for Census {
    fn default() -> Census {
        Census::new()
    }
}

/// The model after the drive, and what the census saw.
#[derive(Debug)]
#[non_exhaustive]
pub struct Counted<M> {
    /// What the build phase returned, after the drive.
    pub model: M,
    /// What the census saw.
    pub report: CensusReport,
}

impl Census {
    /// The default threshold, 256 B: above the largest allocation candle
    /// 0.11 keeps per tensor (152 B; see the module docs), so allocations
    /// under it are bookkeeping.
    pub const DEFAULT_MIN_ALLOCATION_BYTES: u64 = 256;

    /// A census with the default threshold.
    pub const fn new() -> Census {
        Census {
            min_allocation_bytes: Census::DEFAULT_MIN_ALLOCATION_BYTES,
        }
    }

    /// Allocations under `bytes` are bookkeeping, reported apart; 0
    /// compares every allocation.
    pub const fn min_allocation_bytes(self, bytes: u64) -> Census {
        Census {
            min_allocation_bytes: bytes,
        }
    }

    /// Runs the phases on this thread, counting: `weights` loads,
    /// `build` builds the model from what it returned, `drive` runs the
    /// model to its peak. Returns the model and the report.
    ///
    /// An error when [`CountingAlloc`] is not the global allocator, when this
    /// thread is running a census already, when the warm-up or a phase
    /// fails (that phase's error), or when a byte count overflows.
    pub fn run<W, M>(
        &self,
        weights: impl FnOnce() -> Result<W>,
        build: impl FnOnce(W) -> Result<M>,
        drive: impl FnOnce(&mut M) -> Result<()>,
    ) -> Result<Counted<M>> {
        if Enlistment::current().is_some() {
            candle_core::bail!("kv-candle: a census is already running on this thread")
        }
        warm_up()?;
        let mut token = tracker::begin().map_err(|why| match why {
            tracker::NoStart::NotInstalled => candle_core::Error::Msg(
                "kv-candle: the census counts through its global allocator; install it in the \
                 test binary: #[global_allocator] static ALLOC: kv_candle::census::CountingAlloc \
                 = kv_candle::census::CountingAlloc::new();"
                    .to_owned(),
            ),
            tracker::NoStart::Nested | tracker::NoStart::Busy => candle_core::Error::Msg(
                "kv-candle: a census is already running on this thread".to_owned(),
            ),
        })?;
        let loaded = weights()?;
        token.enter(Phase::Build);
        let mut model = build(loaded)?;
        token.enter(Phase::Drive);
        drive(&mut model)?;
        token.pause();
        release_rayon_queue();
        let Some(finished) = token.finish() else {
            candle_core::bail!("kv-candle: the census's records were lost")
        };
        let report = CensusReport::new(finished, self.min_allocation_bytes)?;
        Ok(Counted { model, report })
    }
}

/// Jobs pushed through rayon's global queue after the drive: 126, twice a
/// queue block's 63 slots (63 suffice to pass the block in use; the rest
/// leave time for the worker that takes its last job to free it).
const RAYON_QUEUE_JOBS: usize = 126;

/// Pushes empty jobs through rayon's global queue from this (no longer
/// counting) thread, one at a time, so that a queue block it allocated
/// during the phases is consumed and freed. rayon's queue
/// (crossbeam-deque's `Injector`) holds jobs in blocks of 63 (1,520 B on
/// 64-bit), each allocated by the thread whose push crosses into it and
/// freed by the worker that takes its last job: without this, a block the
/// drive's parallel ops happened to allocate would count as held.
fn release_rayon_queue() {
    for _ in 0..RAYON_QUEUE_JOBS {
        rayon::join(|| (), || ());
    }
}

/// Runs the candle CPU ops models use once on this thread, on small
/// tensors, so state they build on first use (gemm's per-thread packing
/// buffer, rayon's pool and its queues, lazily read CPU features) exists
/// before a census counts. [`Census::run`] calls it.
fn warm_up() -> Result<()> {
    let device = Device::Cpu;
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        // Small enough for gemm to run on this thread (its packing buffer
        // is per thread), then large enough to split across rayon's.
        let small = Tensor::ones((8, 8), dtype, &device)?;
        small.matmul(&small)?;
        let a = Tensor::ones((96, 96), DType::F32, &device)?.to_dtype(dtype)?;
        let product = a.matmul(&a)?;
        let joined = Tensor::cat(&[&product, &a], 1)?;
        let part = joined.narrow(1, 8, 64)?.contiguous()?;
        candle_nn::ops::softmax_last_dim(&part)?;
        let cos = Tensor::ones((96, 4), dtype, &device)?;
        let x = Tensor::ones((1, 2, 96, 8), dtype, &device)?;
        candle_nn::rotary_emb::rope(&x, &cos, &cos)?;
        candle_nn::rotary_emb::rope_i(&x, &cos, &cos)?;
        let mask = Tensor::ones((96, 96), DType::U8, &device)?;
        mask.where_cond(&a, &product)?;
    }
    Ok(())
}

/// A `VarBuilder` over zero weights, every one allocated now: what a
/// census's weights phase returns for a model built from a `VarBuilder`, so
/// the build phase allocates only what the model makes for itself.
///
/// `build` runs once against a backend that makes each weight it is asked
/// for (zeros of that shape, `dtype` and `device`, as `VarBuilder::zeros`
/// does) and keeps it; what it built is dropped. The `VarBuilder` returned
/// hands out those tensors (`VarBuilder::from_tensors`): building again
/// allocates no weight. The tensors are plain, not trainable `Var`s (a
/// `VarMap`'s are, and every tensor computed from a `Var` keeps its inputs
/// alive for backprop: a cache would hold the whole graph).
pub fn zero_weights<T>(
    dtype: DType,
    device: &Device,
    build: impl FnOnce(VarBuilder<'static>) -> Result<T>,
) -> Result<VarBuilder<'static>> {
    let made = Arc::new(Mutex::new(HashMap::new()));
    let recorder = Recorder {
        made: Arc::clone(&made),
    };
    drop(build(VarBuilder::from_backend(
        Box::new(recorder),
        dtype,
        device.clone(),
    ))?);
    let tensors = std::mem::take(&mut *lock(&made)?);
    Ok(VarBuilder::from_tensors(tensors, dtype, device))
}

fn lock(
    made: &Mutex<HashMap<String, Tensor>>,
) -> Result<std::sync::MutexGuard<'_, HashMap<String, Tensor>>> {
    made.lock()
        .map_err(|_| candle_core::Error::Msg("kv-candle: zero_weights: a build panicked".into()))
}

/// Makes zeros for each weight asked for, and keeps them by name.
struct Recorder {
    made: Arc<Mutex<HashMap<String, Tensor>>>,
}

impl SimpleBackend for Recorder {
    fn get(
        &self,
        shape: Shape,
        name: &str,
        _: Init,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let mut made = lock(&self.made)?;
        if let Some(tensor) = made.get(name) {
            if tensor.shape() != &shape {
                candle_core::bail!(
                    "kv-candle: zero_weights: {name} is asked for as {shape:?} and as {:?}",
                    tensor.shape()
                )
            }
            return Ok(tensor.clone());
        }
        let tensor = Tensor::zeros(shape, dtype, device)?;
        made.insert(name.to_owned(), tensor.clone());
        Ok(tensor)
    }

    fn get_unchecked(&self, name: &str, _: DType, _: &Device) -> Result<Tensor> {
        match lock(&self.made)?.get(name) {
            Some(tensor) => Ok(tensor.clone()),
            None => candle_core::bail!(
                "kv-candle: zero_weights: {name} is asked for without a shape before it was made"
            ),
        }
    }

    fn contains_tensor(&self, _: &str) -> bool {
        true
    }
}

/// A census's enlistment, to count what another thread allocates: take it
/// with [`Enlistment::current`] inside a phase, send it to the thread, and
/// [`enter`](Enlistment::enter) there. Allocations that thread makes while
/// the returned guard lives count as the census's, in its current phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Enlistment {
    census: u64,
}

impl Enlistment {
    /// The census this thread is enlisted in, if any.
    pub fn current() -> Option<Enlistment> {
        tracker::current().map(|census| Enlistment { census })
    }

    /// Enlists this thread until the guard drops.
    pub fn enter(self) -> Enlisted {
        Enlisted {
            previous: tracker::enlist(self.census),
            _thread: PhantomData,
        }
    }
}

/// This thread is enlisted while it lives; dropping it restores what the
/// thread was enlisted in before. Not `Send`: it belongs to the thread it
/// enlisted.
#[derive(Debug)]
#[must_use = "the thread leaves the census when this is dropped"]
pub struct Enlisted {
    previous: u64,
    _thread: PhantomData<*const ()>,
}

impl Drop for Enlisted {
    fn drop(&mut self) {
        tracker::restore(self.previous);
    }
}
