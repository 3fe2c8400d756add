//! The shapes real candle model code keeps its KV in, measured on CPU
//! tensors: candle-transformers' concat cache `Option<(Tensor, Tensor)>`
//! (per layer, or a `Vec` of them), candle-nn's `ScatteredKvCache` and
//! `InterleavedKvCache`, candle's `StreamTensor`, and caches behind `Box`,
//! `Arc` and `Mutex`.

use std::sync::{Arc, Mutex};

use candle_core::{DType, Device, Result, StreamTensor, Tensor, D};
use candle_nn::kv_cache::{InterleavedKvCache, KvCache, ScatteredCacheBuilder};
use kv_candle::{assert_declared_bytes, measured_bytes, Meter};
use kv_core::ModelLocalKv;

fn zeros(shape: (usize, usize, usize, usize), dtype: DType) -> Result<Tensor> {
    Tensor::zeros(shape, dtype, &Device::Cpu)
}

/// One step of candle-transformers' attention (qwen2.rs, llama.rs, ...):
/// cat the new K/V after the previous ones along dim 2 and keep both.
fn concat_step(cache: &mut Option<(Tensor, Tensor)>, k: Tensor, v: Tensor) -> Result<()> {
    let (k, v) = match cache {
        None => (k, v),
        Some((prev_k, prev_v)) => (
            Tensor::cat(&[&*prev_k, &k], 2)?,
            Tensor::cat(&[&*prev_v, &v], 2)?,
        ),
    };
    *cache = Some((k, v));
    Ok(())
}

/// A model with candle-transformers' cache shape: one `Option<(Tensor,
/// Tensor)>` per layer, declared from its config with `kv_geometry`.
#[derive(ModelLocalKv)]
struct ConcatModel {
    #[kv(cache = "candle-transformers concat cache",
         geometry = kv_candle::kv_geometry(self.kvs.len(), self.kv_heads, self.head_dim, self.dtype),
         positions = bounded(self.max_positions, because = "longest sequence served"),
         scope = request,
         rows = fixed(self.batch, because = "batch of the cache tensors"))]
    kvs: Vec<Option<(Tensor, Tensor)>>,
    kv_heads: usize,
    head_dim: usize,
    dtype: DType,
    max_positions: usize,
    batch: usize,
}

#[test]
fn a_vec_of_optional_concat_pairs_holds_what_was_appended() -> Result<()> {
    // 3 layers, batch 2, 2 KV heads, head_dim 8, f32; prefill 5, then decode 3.
    let mut model = ConcatModel {
        kvs: vec![None; 3],
        kv_heads: 2,
        head_dim: 8,
        dtype: DType::F32,
        max_positions: 8,
        batch: 2,
    };
    assert_eq!(measured_bytes(&model.kvs)?, 0, "None holds nothing");
    for layer in &mut model.kvs {
        concat_step(
            layer,
            zeros((2, 2, 5, 8), DType::F32)?,
            zeros((2, 2, 5, 8), DType::F32)?,
        )?;
    }
    // 3 layers x 2 (K, V) x batch 2 x 2 heads x 5 positions x 8 dims x 4 B = 3840
    assert_eq!(measured_bytes(&model.kvs)?, 3840);
    for _ in 0..3 {
        for layer in &mut model.kvs {
            concat_step(
                layer,
                zeros((2, 2, 1, 8), DType::F32)?,
                zeros((2, 2, 1, 8), DType::F32)?,
            )?;
        }
    }
    // Full at 8 positions: 3 x 2 x 2 x 2 x 8 x 8 x 4 = 6144, each K and V one allocation.
    let mut meter = Meter::new();
    meter.add(&model.kvs)?;
    assert_eq!((meter.bytes(), meter.storages()), (6144, 6));
    assert_declared_bytes(&model, 1, 6144);
    // One layer's pair and one layer's Option measure the same: 6144 / 3 = 2048.
    let (k, v) = model.kvs[1].as_ref().expect("filled");
    assert_eq!(measured_bytes(&(k, v))?, 2048);
    assert_eq!(measured_bytes(&model.kvs[1])?, 2048);
    Ok(())
}

#[test]
fn a_pair_sharing_one_allocation_counts_it_once() -> Result<()> {
    // K and V as views of one fused projection, (1, 2, 4, 2 x 8) f16, kept
    // without `contiguous()`: both hold the whole projection.
    let kv = zeros((1, 2, 4, 16), DType::F16)?;
    let pair = (kv.narrow(3, 0, 8)?, kv.narrow(3, 8, 8)?);
    // 1 x 2 heads x 4 positions x 16 x 2 B = 256: the projection, once.
    assert_eq!(measured_bytes(&pair)?, 256);
    let mut cache = None;
    concat_step(&mut cache, pair.0, pair.1)?;
    assert_eq!(
        measured_bytes(&cache)?,
        256,
        "the first step keeps the caller's views"
    );
    concat_step(
        &mut cache,
        zeros((1, 2, 1, 8), DType::F16)?,
        zeros((1, 2, 1, 8), DType::F16)?,
    )?;
    // Copies after cat: 2 x (1 x 2 x 5 positions x 8 x 2 B) = 320.
    assert_eq!(measured_bytes(&cache)?, 320);
    Ok(())
}

#[test]
fn a_scattered_cache_holds_its_context_from_construction() -> Result<()> {
    // Batch 2, context 6, f16; 3 heads of 4 dims.
    let mut builder = ScatteredCacheBuilder::new(2, 6, DType::F16, &Device::Cpu)?;
    let mut cache = builder.make_cache(3, 4)?;
    // 2 (K, V) x batch 2 x 3 heads x 6 positions x 4 dims x 2 B = 576
    assert_eq!(measured_bytes(&cache)?, 576);
    for _ in 0..10 {
        let iam = builder.indices_and_mask(1, &[true, true])?;
        let token = zeros((2, 3, 1, 4), DType::F16)?;
        cache.append(&token, &token, &iam)?;
    }
    assert_eq!(
        measured_bytes(&cache)?,
        576,
        "written in place past the context"
    );
    Ok(())
}

#[test]
fn an_interleaved_cache_holds_what_was_appended() -> Result<()> {
    let mut cache = InterleavedKvCache::new(8);
    assert_eq!(measured_bytes(&cache)?, 0);
    let prefill = zeros((1, 2, 5, 8), DType::F32)?;
    cache.append(&prefill, &prefill)?;
    // (5 positions, 2 heads, 2 x 8) x 4 B = 640
    assert_eq!(measured_bytes(&cache)?, 640);
    let token = zeros((1, 2, 1, 8), DType::F32)?;
    cache.append(&token, &token)?;
    // (6, 2, 16) x 4 B = 768
    assert_eq!(measured_bytes(&cache)?, 768);
    Ok(())
}

/// A `KvCache::new(2, 16)` after one append of 3 positions, batch 1, 2
/// heads, head_dim 8, f32: 2 (K, V) x 2 x 16 x 8 x 4 B = 2048.
fn appended_kv_cache() -> Result<KvCache> {
    let mut cache = KvCache::new(2, 16);
    let prefill = zeros((1, 2, 3, 8), DType::F32)?;
    cache.append(&prefill, &prefill)?;
    Ok(cache)
}

#[test]
fn boxed_shared_and_locked_caches_are_measured_through() -> Result<()> {
    let boxed: Box<KvCache> = Box::new(appended_kv_cache()?);
    assert_eq!(measured_bytes(&boxed)?, 2048);
    // candle-transformers keeps some caches as `Arc<Mutex<KvCache>>`.
    let shared = Arc::new(Mutex::new(appended_kv_cache()?));
    assert_eq!(measured_bytes(&shared)?, 2048);
    // Two handles on one cache: its allocations count once.
    assert_eq!(measured_bytes(&[shared.clone(), shared.clone()])?, 2048);
    Ok(())
}

#[test]
fn a_locked_mutex_is_an_error_and_a_poisoned_one_is_measured() -> Result<()> {
    let shared = Arc::new(Mutex::new(appended_kv_cache()?));
    {
        let _guard = shared.lock().expect("not poisoned");
        let err = measured_bytes(&shared).unwrap_err().to_string();
        // candle appends a backtrace where RUST_BACKTRACE is set.
        assert!(
            err.starts_with(
                "kv-candle: cannot measure a locked Mutex; measure it while no one holds the lock"
            ),
            "{err}"
        );
    }
    let poisoner = shared.clone();
    let panicked = std::thread::spawn(move || {
        let _guard = poisoner.lock().expect("not poisoned");
        panic!("poison the lock");
    })
    .join();
    assert!(panicked.is_err() && shared.is_poisoned());
    assert_eq!(measured_bytes(&shared)?, 2048, "its memory is still held");
    Ok(())
}

#[test]
fn rw_locks_cells_and_rcs_are_measured_through_without_waiting() -> Result<()> {
    let shared = Arc::new(std::sync::RwLock::new(appended_kv_cache()?));
    assert_eq!(measured_bytes(&shared)?, 2048);
    {
        let _reading = shared.read().expect("not poisoned");
        assert_eq!(measured_bytes(&shared)?, 2048, "readers share the lock");
    }
    {
        let _writing = shared.write().expect("not poisoned");
        let err = measured_bytes(&shared).unwrap_err().to_string();
        assert!(
            err.starts_with("kv-candle: cannot measure a write-locked RwLock"),
            "{err}"
        );
    }
    let poisoner = shared.clone();
    let _ = std::thread::spawn(move || {
        let _guard = poisoner.write().expect("not poisoned");
        panic!("poison the lock");
    })
    .join();
    assert!(shared.is_poisoned());
    assert_eq!(measured_bytes(&shared)?, 2048, "its memory is still held");

    let cell = std::rc::Rc::new(std::cell::RefCell::new(appended_kv_cache()?));
    assert_eq!(measured_bytes(&[cell.clone(), cell.clone()])?, 2048);
    let _borrowed = cell.borrow_mut();
    let err = measured_bytes(&cell).unwrap_err().to_string();
    assert!(
        err.starts_with("kv-candle: cannot measure a RefCell borrowed mutably"),
        "{err}"
    );
    Ok(())
}

#[test]
fn a_stream_tensor_holds_the_whole_tensor_it_was_cut_from() -> Result<()> {
    assert_eq!(measured_bytes(&StreamTensor::empty())?, 0);
    // (1 batch, 4 channels, 10 frames) of f32: 4 x 10 x 4 B = 160 B.
    let frames = Tensor::zeros((1, 4, 10), DType::F32, &Device::Cpu)?;
    let whole = StreamTensor::from_tensor(frames);
    assert_eq!(measured_bytes(&whole)?, 160);
    // What mimi's streaming convolutions keep as state: the last frames,
    // cut with `split` or `narrow`. A view: all 160 B stay allocated, not
    // the 3 frames' 48 B.
    let (_, rest) = whole.split(D::Minus1, 7)?;
    assert_eq!(rest.seq_len(D::Minus1)?, 3);
    assert_eq!(measured_bytes(&rest)?, 160);
    assert_eq!(measured_bytes(&whole.narrow(D::Minus1, 7, 3)?)?, 160);
    // Both halves share the allocation: counted once.
    let (head, tail) = whole.split(D::Minus1, 4)?;
    assert_eq!(measured_bytes(&(head, tail))?, 160);
    // `cat2` of two copies a new (1, 4, 13) tensor: 208 B.
    let more = StreamTensor::from_tensor(Tensor::zeros((1, 4, 3), DType::F32, &Device::Cpu)?);
    let joined = StreamTensor::cat2(&whole, &more, D::Minus1)?;
    assert_eq!(measured_bytes(&joined)?, 4 * 13 * 4);
    // With an empty side, `cat2` keeps the other's tensor: no copy.
    let kept = StreamTensor::cat2(&StreamTensor::empty(), &more, D::Minus1)?;
    assert_eq!(measured_bytes(&(kept, more))?, 4 * 3 * 4);
    Ok(())
}
