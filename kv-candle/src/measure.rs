//! Measuring the bytes candle caches really hold: the storage behind each
//! tensor (the whole allocation), never a narrowed view's element count.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::{Arc, Mutex, RwLock, TryLockError};

use candle_core::{bail, CpuStorage, Result, Storage, StreamTensor, Tensor};
use candle_nn::kv_cache::{
    Cache, ConcatKvCache, InterleavedKvCache, KvCache, RotatingCache, RotatingKvCache,
    ScatteredKvCache,
};

use crate::caches::StaticKvCache;

/// Adds up the storages of tensors, each allocation once.
///
/// Two tensors that share an allocation (a cache's backing tensor and the
/// narrowed view `k()` returns) count once; the figure is what the process
/// holds, not what the views show.
///
/// ```
/// use candle_core::{DType, Device, Tensor};
/// use kv_candle::Meter;
///
/// let backing = Tensor::zeros((1, 2, 16, 8), DType::F32, &Device::Cpu)?;
/// let view = backing.narrow(2, 0, 4)?; // what a cache's `k()` returns
/// let mut meter = Meter::new();
/// meter.add(&view)?;
/// assert_eq!(meter.bytes(), 1 * 2 * 16 * 8 * 4); // the allocation, not 4 positions
/// meter.add(&backing)?;
/// assert_eq!((meter.bytes(), meter.storages()), (1024, 1)); // shared: counted once
/// # Ok::<(), candle_core::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Meter {
    seen: BTreeSet<usize>,
    bytes: u64,
    /// The address of each CPU storage's buffer added (what the allocator
    /// returned for it), so the census can name it; repeats are harmless.
    buffers: Vec<usize>,
}

impl Meter {
    /// An empty meter.
    pub fn new() -> Meter {
        Meter::default()
    }

    /// Adds everything `value` holds.
    pub fn add<M: Measure + ?Sized>(&mut self, value: &M) -> Result<&mut Meter> {
        value.measure(self)?;
        Ok(self)
    }

    /// Adds one tensor's storage unless already counted. CPU storage only:
    /// other devices are an error, never a guess.
    pub fn add_tensor(&mut self, tensor: &Tensor) -> Result<&mut Meter> {
        let (storage, _layout) = tensor.storage_and_layout();
        // Tensors sharing an allocation share this `Storage`, so its address
        // identifies the allocation.
        let key = &*storage as *const Storage as usize;
        let (address, bytes) = match &*storage {
            Storage::Cpu(cpu) => cpu_buffer(cpu),
            other => bail!(
                "kv-candle: cannot measure storage on {:?}; only CPU storage is measured",
                other.device().location()
            ),
        };
        self.buffers.push(address);
        self.add_allocation(key, bytes)
    }

    /// The address of the buffer behind each CPU tensor added, as the
    /// allocator returned it (a zero-sized one is dangling: no allocation
    /// has it).
    pub(crate) fn buffers(&self) -> &[usize] {
        &self.buffers
    }

    /// Adds `bytes` for an allocation known by `key` (an address that is
    /// unique while the allocation lives) unless already counted.
    pub(crate) fn add_allocation(&mut self, key: usize, bytes: usize) -> Result<&mut Meter> {
        if !self.seen.insert(key) {
            return Ok(self);
        }
        let Some(total) = u64::try_from(bytes)
            .ok()
            .and_then(|b| self.bytes.checked_add(b))
        else {
            bail!("kv-candle: measured bytes overflow u64")
        };
        self.bytes = total;
        Ok(self)
    }

    /// Bytes counted so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Distinct allocations counted so far.
    pub fn storages(&self) -> usize {
        self.seen.len()
    }
}

/// Address and bytes of a CPU allocation: its capacity, which is what the
/// allocator handed out.
fn cpu_buffer(storage: &CpuStorage) -> (usize, usize) {
    fn size<T>(v: &Vec<T>) -> (usize, usize) {
        (v.as_ptr() as usize, v.capacity() * std::mem::size_of::<T>())
    }
    match storage {
        CpuStorage::U8(v) => size(v),
        CpuStorage::U32(v) => size(v),
        CpuStorage::I16(v) => size(v),
        CpuStorage::I32(v) => size(v),
        CpuStorage::I64(v) => size(v),
        CpuStorage::BF16(v) => size(v),
        CpuStorage::F16(v) => size(v),
        CpuStorage::F32(v) => size(v),
        CpuStorage::F64(v) => size(v),
        CpuStorage::F8E4M3(v) => size(v),
        CpuStorage::F6E2M3(v)
        | CpuStorage::F6E3M2(v)
        | CpuStorage::F4(v)
        | CpuStorage::F8E8M0(v) => size(v),
    }
}

/// The bytes `value` holds now, each allocation once. See [`Meter`].
///
/// ```
/// use candle_core::{DType, Device, Tensor};
/// use candle_nn::kv_cache::KvCache;
///
/// let mut cache = KvCache::new(2, 64);
/// assert_eq!(kv_candle::measured_bytes(&cache)?, 0); // nothing before the first append
/// let token = Tensor::zeros((1, 2, 1, 8), DType::BF16, &Device::Cpu)?;
/// cache.append(&token, &token)?;
/// // The first append allocates all 64 positions, for K and for V.
/// assert_eq!(kv_candle::measured_bytes(&cache)?, 2 * (1 * 2 * 64 * 8 * 2));
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn measured_bytes<M: Measure + ?Sized>(value: &M) -> Result<u64> {
    Ok(Meter::new().add(value)?.bytes())
}

/// A value whose tensors a [`Meter`] can count: candle's caches, tensors
/// and `StreamTensor`s, [`StaticKvCache`], quantized tensors (`QTensor`),
/// candle-transformers' Mamba and Mamba2 `State`, and pairs, slices,
/// arrays, `Vec`s, `Option`s, `Box`es, `Rc`s, `Arc`s, `Mutex`es, `RwLock`s
/// and `RefCell`s of them.
///
/// The concat cache most candle-transformers models keep per layer,
/// `Option<(Tensor, Tensor)>`, is measured as it is (K and V, each the
/// allocation behind it), and so is a `Vec` of them:
///
/// ```
/// use candle_core::{DType, Device, Tensor};
///
/// let mut kvs: Vec<Option<(Tensor, Tensor)>> = vec![None; 2];
/// assert_eq!(kv_candle::measured_bytes(&kvs)?, 0);
/// let k = Tensor::zeros((1, 2, 5, 8), DType::F32, &Device::Cpu)?;
/// let v = Tensor::zeros((1, 2, 5, 8), DType::F32, &Device::Cpu)?;
/// kvs[0] = Some((k, v));
/// assert_eq!(kv_candle::measured_bytes(&kvs)?, 2 * (1 * 2 * 5 * 8 * 4));
/// # Ok::<(), candle_core::Error>(())
/// ```
pub trait Measure {
    /// Adds the tensors this value holds to `meter`.
    fn measure(&self, meter: &mut Meter) -> Result<()>;
}

impl Measure for Tensor {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        meter.add_tensor(self).map(drop)
    }
}

impl<M: Measure> Measure for Option<M> {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        match self {
            Some(value) => value.measure(meter),
            None => Ok(()),
        }
    }
}

impl<M: Measure> Measure for [M] {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        self.iter().try_for_each(|value| value.measure(meter))
    }
}

impl<M: Measure, const N: usize> Measure for [M; N] {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        self.as_slice().measure(meter)
    }
}

impl<M: Measure> Measure for Vec<M> {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        self.as_slice().measure(meter)
    }
}

impl<M: Measure + ?Sized> Measure for &M {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        (**self).measure(meter)
    }
}

/// Both halves: K and V of a concat cache, `(Tensor, Tensor)`.
impl<A: Measure, B: Measure> Measure for (A, B) {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        self.0.measure(meter)?;
        self.1.measure(meter)
    }
}

impl<M: Measure + ?Sized> Measure for Box<M> {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        (**self).measure(meter)
    }
}

/// What the `Arc` points to; its other owners share the same allocations,
/// which a [`Meter`] counts once.
impl<M: Measure + ?Sized> Measure for Arc<M> {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        (**self).measure(meter)
    }
}

/// What the mutex guards, without blocking: a mutex locked at the time
/// (by this thread or another) is an error rather than a deadlock. A
/// poisoned mutex is measured: its data still holds its memory.
impl<M: Measure + ?Sized> Measure for Mutex<M> {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        match self.try_lock() {
            Ok(guard) => guard.measure(meter),
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner().measure(meter),
            Err(TryLockError::WouldBlock) => bail!(
                "kv-candle: cannot measure a locked Mutex; measure it while no one holds the lock"
            ),
        }
    }
}

/// What the lock guards, read without blocking: a write-locked `RwLock` is
/// an error rather than a wait; a poisoned one is measured.
impl<M: Measure + ?Sized> Measure for RwLock<M> {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        match self.try_read() {
            Ok(guard) => guard.measure(meter),
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner().measure(meter),
            Err(TryLockError::WouldBlock) => bail!(
                "kv-candle: cannot measure a write-locked RwLock; measure it while no one writes"
            ),
        }
    }
}

/// What the cell holds; one borrowed mutably is an error, never a panic.
impl<M: Measure + ?Sized> Measure for RefCell<M> {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        match self.try_borrow() {
            Ok(value) => value.measure(meter),
            Err(_) => bail!(
                "kv-candle: cannot measure a RefCell borrowed mutably; measure it while no one \
                 borrows it"
            ),
        }
    }
}

/// What the `Rc` points to; like [`Arc`], shared allocations count once.
impl<M: Measure + ?Sized> Measure for Rc<M> {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        (**self).measure(meter)
    }
}

/// The tensor a candle `StreamTensor` holds, if any (mimi's streaming
/// convolutions keep their state in one): the whole allocation behind it.
/// A `split`'s or `narrow`'s remainder is a view, so a state kept that way
/// holds all of the tensor it was cut from.
impl Measure for StreamTensor {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        self.as_option().measure(meter)
    }
}

/// The backing tensor (`all_data`), allocated at `max_seq_len` positions on
/// the first append.
impl Measure for Cache {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        self.all_data().measure(meter)
    }
}

/// The backing tensor (`all_data`), allocated at the window on the first append.
impl Measure for RotatingCache {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        self.all_data().measure(meter)
    }
}

/// Both backing tensors.
impl Measure for KvCache {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        self.k_cache().measure(meter)?;
        self.v_cache().measure(meter)
    }
}

/// Both backing tensors.
impl Measure for RotatingKvCache {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        self.k_cache().measure(meter)?;
        self.v_cache().measure(meter)
    }
}

/// The concatenated K and V, exactly as long as what was appended.
impl Measure for ConcatKvCache {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        self.k().measure(meter)?;
        self.v().measure(meter)
    }
}

/// Both tensors, allocated at `context` positions by
/// `ScatteredCacheBuilder::make_cache`.
impl Measure for ScatteredKvCache {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        self.k().measure(meter)?;
        self.v().measure(meter)
    }
}

/// The one interleaved K/V tensor, exactly as long as what was appended.
impl Measure for InterleavedKvCache {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        self.kv().measure(meter)
    }
}

/// Both preallocated tensors.
impl Measure for StaticKvCache {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        self.k_all().measure(meter)?;
        self.v_all().measure(meter)
    }
}
