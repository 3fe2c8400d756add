//! Attention layers' caches built from a Qwen2/Qwen3-style `config.json`, each
//! declaring what it holds at peak.

use candle_core::{bail, Device, Result, Tensor};
use candle_nn::kv_cache::{KvCache, RotatingKvCache};
use kv_core::Geometry;

use crate::config;

/// The sequence dimension of `(batch, kv_heads, seq, head_dim)` cache tensors.
pub const SEQ_DIM: usize = 2;

/// kv's name for a candle dtype; an error for dtypes kv does not declare
/// (`u32`, `i16`, `i32`, `i64`, the sub-byte float formats).
pub fn kv_dtype(dtype: candle_core::DType) -> Result<kv_core::DType> {
    use candle_core::DType as C;
    use kv_core::DType as K;
    Ok(match dtype {
        C::F64 => K::F64,
        C::F32 => K::F32,
        C::F16 => K::F16,
        C::BF16 => K::BF16,
        C::F8E4M3 => K::F8E4M3,
        C::U8 => K::U8,
        other => bail!("kv-candle: candle dtype {other:?} has no kv dtype"),
    })
}

/// candle's name for a kv dtype; an error for those candle lacks (`f8e5m2`, `i8`).
pub fn candle_dtype(dtype: kv_core::DType) -> Result<candle_core::DType> {
    use candle_core::DType as C;
    use kv_core::DType as K;
    Ok(match dtype {
        K::F64 => C::F64,
        K::F32 => C::F32,
        K::F16 => C::F16,
        K::BF16 => C::BF16,
        K::F8E4M3 => C::F8E4M3,
        K::U8 => C::U8,
        other => bail!("kv-candle: kv dtype {other} has no candle dtype"),
    })
}

/// Geometry from the config text; `dtype` overrides the config's `torch_dtype`.
fn read(config_json: &str, dtype: Option<candle_core::DType>) -> Result<config::ModelConfig> {
    let mut config = config::parse(config_json).map_err(candle_core::Error::wrap)?;
    if let Some(dtype) = dtype {
        config.geometry = config.geometry.with_storage(kv_dtype(dtype)?.into());
    }
    Ok(config)
}

fn positive(value: usize, what: &str) -> Result<()> {
    if value == 0 {
        bail!("kv-candle: {what} is 0; a cache needs at least one")
    }
    Ok(())
}

/// Full-attention layers, one candle [`KvCache`] per layer, bounded by the
/// `max_seq_len` given to [`KvCache::new`].
///
/// Declares `layers x 2 x (batch, kv_heads, max_seq_len, head_dim)`. That holds
/// from the first append (which allocates all `max_seq_len` positions) until
/// an append that overflows: candle then grows each tensor by `max_seq_len`
/// again, and the declaration understates (see the crate docs).
///
/// ```
/// use kv_candle::FullAttentionCaches;
/// let config = r#"{"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
///                  "hidden_size": 64, "torch_dtype": "bfloat16"}"#;
/// let caches = FullAttentionCaches::from_config(config, 3, 128, None)?;
/// // 2 (K, V) x 2 layers x 2 heads x 16 dims x 128 positions x 2 bytes x 3 rows
/// kv_candle::assert_declared_bytes(&caches, 1, 2 * 2 * 2 * 16 * 128 * 2 * 3);
/// # Ok::<(), candle_core::Error>(())
/// ```
#[derive(Clone, Debug, kv_core::ModelLocalKv)]
pub struct FullAttentionCaches {
    /// One cache per layer; append with `caches[layer].append(&k, &v)`.
    #[kv(cache = "candle KvCache",
         geometry = self.geometry(),
         positions = bounded(self.max_seq_len, because = "max_seq_len given to KvCache::new"),
         scope = request,
         rows = fixed(self.batch, because = "batch of the cache tensors"),
         note = "one KvCache per layer; K and V each one (batch, kv_heads, max_seq_len, head_dim) tensor, allocated on the first append")]
    pub caches: Vec<KvCache>,
    geometry: Geometry,
    max_seq_len: usize,
    batch: usize,
}

impl FullAttentionCaches {
    /// One `KvCache::new(2, max_seq_len)` per layer of the config. `dtype`
    /// overrides the config's `torch_dtype`; `batch` is the batch the caches
    /// will be fed.
    pub fn from_config(
        config_json: &str,
        batch: usize,
        max_seq_len: usize,
        dtype: Option<candle_core::DType>,
    ) -> Result<FullAttentionCaches> {
        positive(batch, "batch")?;
        positive(max_seq_len, "max_seq_len")?;
        let geometry = read(config_json, dtype)?.geometry;
        let layers = usize::try_from(geometry.layers).map_err(candle_core::Error::wrap)?;
        Ok(FullAttentionCaches {
            caches: (0..layers)
                .map(|_| KvCache::new(SEQ_DIM, max_seq_len))
                .collect(),
            geometry,
            max_seq_len,
            batch,
        })
    }

    /// Shape of one position; dtype is the one the caches hold.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Positions each cache allocates on its first append.
    pub fn max_seq_len(&self) -> usize {
        self.max_seq_len
    }

    /// Batch the caches are fed.
    pub fn batch(&self) -> usize {
        self.batch
    }
}

/// Sliding-window layers, one candle [`RotatingKvCache`] per layer, bounded
/// by the config's `sliding_window`.
///
/// A `RotatingKvCache` allocates exactly `window` positions on its first
/// append and never grows: the declaration holds for any sequence length.
/// (transformers' dynamic sliding layer keeps `window - 1`; candle keeps `window`.)
#[derive(Clone, Debug, kv_core::ModelLocalKv)]
pub struct SlidingWindowCaches {
    /// One cache per layer; append with `caches[layer].append(&k, &v)`.
    #[kv(cache = "candle RotatingKvCache",
         geometry = self.geometry(),
         positions = bounded(self.window, because = "sliding_window"),
         scope = request,
         rows = fixed(self.batch, because = "batch of the cache tensors"),
         note = "one RotatingKvCache per layer; K and V each one (batch, kv_heads, window, head_dim) tensor, allocated on the first append")]
    pub caches: Vec<RotatingKvCache>,
    geometry: Geometry,
    window: usize,
    batch: usize,
}

impl SlidingWindowCaches {
    /// One `RotatingKvCache::new(2, sliding_window)` per layer. An error when
    /// the config has no sliding window (or `use_sliding_window` is false).
    pub fn from_config(
        config_json: &str,
        batch: usize,
        dtype: Option<candle_core::DType>,
    ) -> Result<SlidingWindowCaches> {
        positive(batch, "batch")?;
        let config = read(config_json, dtype)?;
        let Some(window) = config.sliding_window else {
            bail!("kv-candle: the config has no `sliding_window` in use")
        };
        let window = usize::try_from(window).map_err(candle_core::Error::wrap)?;
        let layers = usize::try_from(config.geometry.layers).map_err(candle_core::Error::wrap)?;
        Ok(SlidingWindowCaches {
            caches: (0..layers)
                .map(|_| RotatingKvCache::new(SEQ_DIM, window))
                .collect(),
            geometry: config.geometry,
            window,
            batch,
        })
    }

    /// Shape of one position; dtype is the one the caches hold.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Positions each cache holds: the config's `sliding_window`.
    pub fn window(&self) -> usize {
        self.window
    }

    /// Batch the caches are fed.
    pub fn batch(&self) -> usize {
        self.batch
    }
}

/// One layer's statically sized cache, like transformers' `StaticCache`: K
/// and V are each a `(batch, kv_heads, max_seq_len, head_dim)` zeros tensor
/// allocated up front; appends write in place and never grow.
///
/// ```
/// use candle_core::{DType, Device, Tensor};
/// use kv_candle::StaticKvCache;
///
/// let mut cache = StaticKvCache::new(1, 2, 8, 4, DType::F32, &Device::Cpu)?;
/// assert_eq!(kv_candle::measured_bytes(&cache)?, 2 * 2 * 8 * 4 * 4); // before any append
/// let step = Tensor::ones((1, 2, 3, 4), DType::F32, &Device::Cpu)?;
/// let (k, _v) = cache.append(&step, &step)?;
/// assert_eq!(k.dims(), &[1, 2, 3, 4]);
/// assert!(cache.append(&Tensor::ones((1, 2, 6, 4), DType::F32, &Device::Cpu)?, &step).is_err());
/// # Ok::<(), candle_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct StaticKvCache {
    k: Tensor,
    v: Tensor,
    current_seq_len: usize,
    max_seq_len: usize,
}

impl StaticKvCache {
    /// Allocates K and V, zeroed, at full size.
    pub fn new(
        batch: usize,
        kv_heads: usize,
        max_seq_len: usize,
        head_dim: usize,
        dtype: candle_core::DType,
        device: &Device,
    ) -> Result<StaticKvCache> {
        let shape = (batch, kv_heads, max_seq_len, head_dim);
        Ok(StaticKvCache {
            k: Tensor::zeros(shape, dtype, device)?,
            v: Tensor::zeros(shape, dtype, device)?,
            current_seq_len: 0,
            max_seq_len,
        })
    }

    /// Writes `k` and `v` (`(batch, kv_heads, seq, head_dim)`) after what is
    /// held and returns views of everything held. An error, leaving the cache
    /// unchanged, when they would not fit.
    pub fn append(&mut self, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor)> {
        let seq_len = k.dim(SEQ_DIM)?;
        if v.dim(SEQ_DIM)? != seq_len {
            bail!(
                "kv-candle: k has {seq_len} positions, v has {}",
                v.dim(SEQ_DIM)?
            )
        }
        let end = self.current_seq_len + seq_len;
        if end > self.max_seq_len {
            bail!(
                "kv-candle: StaticKvCache holds {} positions; {} held + {seq_len} appended do not fit",
                self.max_seq_len,
                self.current_seq_len
            )
        }
        self.k
            .slice_set(&k.contiguous()?, SEQ_DIM, self.current_seq_len)?;
        self.v
            .slice_set(&v.contiguous()?, SEQ_DIM, self.current_seq_len)?;
        self.current_seq_len = end;
        Ok((self.k()?, self.v()?))
    }

    /// Keys held: a view of the first `current_seq_len` positions.
    pub fn k(&self) -> Result<Tensor> {
        self.k.narrow(SEQ_DIM, 0, self.current_seq_len)
    }

    /// Values held: a view of the first `current_seq_len` positions.
    pub fn v(&self) -> Result<Tensor> {
        self.v.narrow(SEQ_DIM, 0, self.current_seq_len)
    }

    /// The whole K allocation.
    pub fn k_all(&self) -> &Tensor {
        &self.k
    }

    /// The whole V allocation.
    pub fn v_all(&self) -> &Tensor {
        &self.v
    }

    /// Positions held.
    pub fn current_seq_len(&self) -> usize {
        self.current_seq_len
    }

    /// Positions allocated.
    pub fn max_seq_len(&self) -> usize {
        self.max_seq_len
    }

    /// Forgets what is held; keeps the allocation.
    pub fn reset(&mut self) {
        self.current_seq_len = 0;
    }
}

/// Layers with a [`StaticKvCache`] each, allocated when built: the memory is
/// held from construction, whatever is appended.
///
/// ming_flash_omni's talker is this with its Qwen2 config, batch 1 and
/// `max_cache_len` 2048: 25,165,824 bytes (24.00 MiB).
#[derive(Clone, Debug, kv_core::ModelLocalKv)]
pub struct StaticCaches {
    /// One cache per layer; append with `caches[layer].append(&k, &v)`.
    #[kv(cache = "StaticKvCache",
         geometry = self.geometry(),
         positions = bounded(self.max_seq_len, because = "max_cache_len given at construction"),
         scope = request,
         rows = fixed(self.batch, because = "batch of the cache tensors"),
         note = "one StaticKvCache per layer; K and V each one (batch, kv_heads, max_cache_len, head_dim) zeros tensor, allocated when built")]
    pub caches: Vec<StaticKvCache>,
    geometry: Geometry,
    max_seq_len: usize,
    batch: usize,
}

impl StaticCaches {
    /// Allocates one [`StaticKvCache`] per layer of the config on `device`.
    /// `dtype` overrides the config's `torch_dtype`.
    pub fn from_config(
        config_json: &str,
        batch: usize,
        max_seq_len: usize,
        dtype: Option<candle_core::DType>,
        device: &Device,
    ) -> Result<StaticCaches> {
        positive(batch, "batch")?;
        positive(max_seq_len, "max_seq_len")?;
        let geometry = read(config_json, dtype)?.geometry;
        let Some(kv) = geometry.storage.dtype() else {
            bail!("kv-candle: {} has no candle dtype", geometry.storage);
        };
        let candle = candle_dtype(kv)?;
        let kv_heads = usize::try_from(geometry.kv_heads).map_err(candle_core::Error::wrap)?;
        let head_dim = usize::try_from(geometry.head_dim).map_err(candle_core::Error::wrap)?;
        let layers = usize::try_from(geometry.layers).map_err(candle_core::Error::wrap)?;
        let caches = (0..layers)
            .map(|_| StaticKvCache::new(batch, kv_heads, max_seq_len, head_dim, candle, device))
            .collect::<Result<Vec<_>>>()?;
        Ok(StaticCaches {
            caches,
            geometry,
            max_seq_len,
            batch,
        })
    }

    /// Shape of one position; dtype is the one the caches hold.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Positions each cache holds.
    pub fn max_seq_len(&self) -> usize {
        self.max_seq_len
    }

    /// Batch of the cache tensors.
    pub fn batch(&self) -> usize {
        self.batch
    }
}
