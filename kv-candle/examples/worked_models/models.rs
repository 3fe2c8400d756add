//! Four small decoders written in the shapes real Rust engines keep their
//! caches in, each declared with `#[derive(ModelLocalKv)]`:
//!
//! - [`concat`]: a Qwen2-style decoder, one `Option<(Tensor, Tensor)>` per
//!   layer grown by `Tensor::cat` (the shape of most candle-transformers
//!   models);
//! - [`sliding`]: a Gemma-3-style decoder whose per-layer cache is an enum,
//!   candle-nn's `RotatingKvCache` on sliding layers and `KvCache` on global
//!   ones;
//! - [`cross`]: a Whisper-style text decoder whose cross-attention and its
//!   norm are kept together as `Option<(MultiHeadAttention, LayerNorm)>`;
//! - [`shared`]: a mistral.rs-style decoder whose caches live in
//!   `Arc<Mutex<..>>`, outside the layers, grown in steps.
//!
//! Weights are zeros (`VarBuilder::zeros`); the dtype is taken from the
//! `VarBuilder`, as a loaded model takes it, and declared with
//! `kv_candle::kv_dtype`, which returns a `Result`. Every forward refuses to
//! go past the bound its declaration states, so the bound is true.

use candle_core::{bail, DType, Device, Module, Result, Tensor};
use candle_nn::VarBuilder;

#[path = "../common/attention.rs"]
mod attention;
pub use attention::{tokens, Projections};

/// Sizes shared by the decoders.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// The longest sequence a forward accepts.
    pub max_positions: usize,
}

pub mod concat {
    //! Qwen2-style: each layer's attention keeps `Option<(Tensor, Tensor)>`,
    //! concatenated along the sequence each step.

    use super::*;
    use kv_core::ModelLocalKv;

    #[derive(ModelLocalKv)]
    pub struct Attention {
        proj: Projections,
        max_positions: usize,
        dtype: DType,
        #[kv(cache = "concat (Tensor, Tensor), grown by Tensor::cat",
             layers = 1, kv_heads = self.proj.kv_heads, head_dim = self.proj.head_dim,
             dtype = kv_candle::kv_dtype(self.dtype),
             positions = bounded(self.max_positions, because = "max_positions: forward refuses longer"),
             scope = request,
             rows = fixed(1, because = "forward takes one sequence"))]
        pub kv_cache: Option<(Tensor, Tensor)>,
    }

    impl Attention {
        fn forward(&mut self, x: &Tensor) -> Result<Tensor> {
            let q = self.proj.queries(x)?;
            let (k, v) = self.proj.keys_values(x)?;
            let (k, v) = match &self.kv_cache {
                None => (k, v),
                Some((past_k, past_v)) => (
                    Tensor::cat(&[past_k, &k], 2)?,
                    Tensor::cat(&[past_v, &v], 2)?,
                ),
            };
            if k.dim(2)? > self.max_positions {
                bail!(
                    "{} positions: longer than max_positions {}",
                    k.dim(2)?,
                    self.max_positions
                );
            }
            self.kv_cache = Some((k.clone(), v.clone()));
            self.proj.attend(&q, &k, &v)
        }
    }

    #[derive(ModelLocalKv)]
    pub struct DecoderLayer {
        #[kv(child)]
        pub self_attn: Attention,
    }

    #[derive(ModelLocalKv)]
    pub struct Model {
        #[kv(child)]
        pub layers: Vec<DecoderLayer>,
    }

    #[derive(ModelLocalKv)]
    pub struct ForCausalLm {
        #[kv(child)]
        pub model: Model,
    }

    impl ForCausalLm {
        pub fn new(cfg: &Config, vb: VarBuilder) -> Result<Self> {
            let layers = (0..cfg.layers)
                .map(|i| {
                    let vb = vb.pp(format!("model.layers.{i}.self_attn"));
                    Ok(DecoderLayer {
                        self_attn: Attention {
                            proj: Projections::new(
                                cfg.hidden,
                                cfg.heads,
                                cfg.kv_heads,
                                cfg.head_dim,
                                &vb,
                            )?,
                            max_positions: cfg.max_positions,
                            dtype: vb.dtype(),
                            kv_cache: None,
                        },
                    })
                })
                .collect::<Result<_>>()?;
            Ok(ForCausalLm {
                model: Model { layers },
            })
        }

        /// One step: the prompt, or one new token.
        pub fn forward(&mut self, x: &Tensor) -> Result<Tensor> {
            let mut x = x.clone();
            for layer in &mut self.model.layers {
                x = (&x + layer.self_attn.forward(&x)?)?;
            }
            Ok(x)
        }
    }
}

pub mod sliding {
    //! Gemma-3-style: sliding layers keep candle-nn's `RotatingKvCache`
    //! (the window), every `global_every`-th layer its `KvCache` (the whole
    //! sequence), in one enum per layer.

    use super::*;
    use candle_nn::kv_cache::{KvCache, RotatingKvCache};
    use kv_candle::{fixed_positions, kv_geometry};
    use kv_core::ModelLocalKv;

    /// What a layer's cache holds per position.
    #[derive(Clone, Copy, Debug)]
    pub struct Shape {
        pub kv_heads: usize,
        pub head_dim: usize,
        pub dtype: DType,
    }

    #[derive(ModelLocalKv)]
    pub enum LayerCache {
        #[kv(name = "kv", cache = "candle KvCache (global layer)",
             geometry = kv_geometry(1, shape.kv_heads, shape.head_dim, shape.dtype),
             positions = bounded(*max_positions, because = "max_positions given to KvCache::new; forward refuses longer"),
             scope = request,
             rows = fixed(1, because = "forward takes one sequence"))]
        Global {
            cache: KvCache,
            shape: Shape,
            max_positions: usize,
        },
        #[kv(name = "kv", cache = "candle RotatingKvCache (sliding layer)",
             geometry = kv_geometry(1, shape.kv_heads, shape.head_dim, shape.dtype),
             positions = bounded(fixed_positions([cache]), because = "sliding_window given to RotatingKvCache::new"),
             scope = request,
             rows = fixed(1, because = "forward takes one sequence"))]
        Sliding {
            cache: RotatingKvCache,
            shape: Shape,
        },
    }

    impl LayerCache {
        fn append(&mut self, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor)> {
            match self {
                LayerCache::Global {
                    cache,
                    max_positions,
                    ..
                } => {
                    if cache.current_seq_len() + k.dim(2)? > *max_positions {
                        bail!("longer than max_positions {max_positions}");
                    }
                    cache.append(k, v)
                }
                LayerCache::Sliding { cache, .. } => cache.append(k, v),
            }
        }
    }

    #[derive(ModelLocalKv)]
    pub struct Attention {
        proj: Projections,
        #[kv(child)]
        pub kv_cache: LayerCache,
    }

    impl Attention {
        fn forward(&mut self, x: &Tensor) -> Result<Tensor> {
            let q = self.proj.queries(x)?;
            let (k, v) = self.proj.keys_values(x)?;
            let (k, v) = self.kv_cache.append(&k, &v)?;
            self.proj.attend(&q, &k, &v)
        }
    }

    #[derive(ModelLocalKv)]
    pub struct DecoderLayer {
        #[kv(child)]
        pub self_attn: Attention,
    }

    #[derive(ModelLocalKv)]
    pub struct Model {
        #[kv(child)]
        pub layers: Vec<DecoderLayer>,
    }

    impl Model {
        /// Layer `i` is global when `(i + 1) % global_every == 0`, as
        /// Gemma 3's `sliding_window_pattern`.
        pub fn new(
            cfg: &Config,
            sliding_window: usize,
            global_every: usize,
            vb: VarBuilder,
        ) -> Result<Self> {
            let shape = Shape {
                kv_heads: cfg.kv_heads,
                head_dim: cfg.head_dim,
                dtype: vb.dtype(),
            };
            let layers = (0..cfg.layers)
                .map(|i| {
                    let kv_cache = if (i + 1) % global_every == 0 {
                        LayerCache::Global {
                            cache: KvCache::new(2, cfg.max_positions),
                            shape,
                            max_positions: cfg.max_positions,
                        }
                    } else {
                        LayerCache::Sliding {
                            cache: RotatingKvCache::new(2, sliding_window),
                            shape,
                        }
                    };
                    let vb = vb.pp(format!("layers.{i}.self_attn"));
                    Ok(DecoderLayer {
                        self_attn: Attention {
                            proj: Projections::new(
                                cfg.hidden,
                                cfg.heads,
                                cfg.kv_heads,
                                cfg.head_dim,
                                &vb,
                            )?,
                            kv_cache,
                        },
                    })
                })
                .collect::<Result<_>>()?;
            Ok(Model { layers })
        }

        pub fn forward(&mut self, x: &Tensor) -> Result<Tensor> {
            let mut x = x.clone();
            for layer in &mut self.layers {
                x = (&x + layer.self_attn.forward(&x)?)?;
            }
            Ok(x)
        }
    }
}

pub mod cross {
    //! Whisper-style text decoder: self-attention recomputes its keys each
    //! step (no cache); cross-attention caches the encoder's keys and values
    //! once per audio, and is kept with its norm as
    //! `Option<(MultiHeadAttention, LayerNorm)>`.

    use super::*;
    use candle_nn::{layer_norm, LayerNorm};
    use kv_core::ModelLocalKv;

    #[derive(ModelLocalKv)]
    pub struct MultiHeadAttention {
        proj: Projections,
        n_audio_ctx: usize,
        dtype: DType,
        /// Only cross-attention caches: its keys come from the encoder.
        caches_encoder: bool,
        #[kv(cache = "encoder K/V (Tensor, Tensor), computed once per audio",
             layers = 1, kv_heads = self.proj.kv_heads, head_dim = self.proj.head_dim,
             dtype = kv_candle::kv_dtype(self.dtype),
             positions = bounded(self.n_audio_ctx, because = "n_audio_ctx encoder frames"),
             scope = request,
             rows = fixed(1, because = "one audio per forward"),
             only_when = "caches_encoder")]
        pub kv_cache: Option<(Tensor, Tensor)>,
    }

    impl MultiHeadAttention {
        fn new(
            cfg: &Config,
            n_audio_ctx: usize,
            caches_encoder: bool,
            vb: &VarBuilder,
        ) -> Result<Self> {
            Ok(MultiHeadAttention {
                proj: Projections::new(cfg.hidden, cfg.heads, cfg.heads, cfg.head_dim, vb)?,
                n_audio_ctx,
                dtype: vb.dtype(),
                caches_encoder,
                kv_cache: None,
            })
        }

        /// Self-attention over `x` (`xa` None), or cross-attention over the
        /// encoder output `xa`, whose keys and values are cached.
        fn forward(&mut self, x: &Tensor, xa: Option<&Tensor>) -> Result<Tensor> {
            let q = self.proj.queries(x)?;
            let (k, v) = match (xa, &self.kv_cache) {
                (Some(_), Some((k, v))) => (k.clone(), v.clone()),
                (Some(xa), None) => {
                    if xa.dim(1)? > self.n_audio_ctx {
                        bail!(
                            "{} frames: more than n_audio_ctx {}",
                            xa.dim(1)?,
                            self.n_audio_ctx
                        );
                    }
                    let (k, v) = self.proj.keys_values(xa)?;
                    self.kv_cache = Some((k.clone(), v.clone()));
                    (k, v)
                }
                (None, _) => self.proj.keys_values(x)?,
            };
            self.proj.attend(&q, &k, &v)
        }
    }

    #[derive(ModelLocalKv)]
    pub struct ResidualAttentionBlock {
        #[kv(child)]
        attn: MultiHeadAttention,
        attn_ln: LayerNorm,
        #[kv(child)]
        pub cross_attn: Option<(MultiHeadAttention, LayerNorm)>,
    }

    impl ResidualAttentionBlock {
        fn forward(&mut self, x: &Tensor, xa: Option<&Tensor>) -> Result<Tensor> {
            let x = (x + self.attn.forward(&self.attn_ln.forward(x)?, None)?)?;
            match (&mut self.cross_attn, xa) {
                (Some((attn, ln)), Some(xa)) => &x + attn.forward(&ln.forward(&x)?, Some(xa))?,
                _ => Ok(x),
            }
        }
    }

    #[derive(ModelLocalKv)]
    pub struct TextDecoder {
        #[kv(child)]
        pub blocks: Vec<ResidualAttentionBlock>,
        n_text_ctx: usize,
    }

    impl TextDecoder {
        /// `cfg.max_positions` is `n_text_ctx`, the tokens it decodes.
        pub fn new(cfg: &Config, n_audio_ctx: usize, vb: VarBuilder) -> Result<Self> {
            let blocks = (0..cfg.layers)
                .map(|i| {
                    let vb = vb.pp(format!("blocks.{i}"));
                    Ok(ResidualAttentionBlock {
                        attn: MultiHeadAttention::new(cfg, n_audio_ctx, false, &vb.pp("attn"))?,
                        attn_ln: layer_norm(cfg.hidden, 1e-5, vb.pp("attn_ln"))?,
                        cross_attn: Some((
                            MultiHeadAttention::new(cfg, n_audio_ctx, true, &vb.pp("cross_attn"))?,
                            layer_norm(cfg.hidden, 1e-5, vb.pp("cross_attn_ln"))?,
                        )),
                    })
                })
                .collect::<Result<_>>()?;
            Ok(TextDecoder {
                blocks,
                n_text_ctx: cfg.max_positions,
            })
        }

        /// The tokens so far (`x`), attending to the encoder output `xa`.
        pub fn forward(&mut self, x: &Tensor, xa: &Tensor) -> Result<Tensor> {
            if x.dim(1)? > self.n_text_ctx {
                bail!(
                    "{} tokens: more than n_text_ctx {}",
                    x.dim(1)?,
                    self.n_text_ctx
                );
            }
            let mut x = x.clone();
            for block in &mut self.blocks {
                x = block.forward(&x, Some(xa))?;
            }
            Ok(x)
        }
    }
}

pub mod shared {
    //! mistral.rs-style: the layers hold no cache; the model keeps every
    //! layer's cache in one `Arc<Mutex<NormalCache>>`, shared with the
    //! engine, each layer's capacity grown in steps of `GROW` positions for
    //! the whole batch.

    use super::*;
    use kv_candle::{Measure, Meter};
    use kv_core::ModelLocalKv;
    use std::sync::{Arc, Mutex};

    /// Capacity is added this many positions at a time.
    pub const GROW: usize = 8;

    /// One layer's K and V, `(batch, kv_heads, capacity, head_dim)`, the
    /// first `len` positions filled.
    #[derive(Default)]
    pub struct SingleCache {
        k: Option<Tensor>,
        v: Option<Tensor>,
        len: usize,
    }

    impl SingleCache {
        fn capacity(&self) -> Result<usize> {
            self.k.as_ref().map_or(Ok(0), |k| k.dim(2))
        }

        /// Appends, growing both by `GROW` positions while full; returns
        /// the filled part.
        fn append(&mut self, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor)> {
            let new = k.dim(2)?;
            while self.len + new > self.capacity()? {
                let (b, h, _, d) = k.dims4()?;
                let more = Tensor::zeros((b, h, GROW, d), k.dtype(), k.device())?;
                let grow = |old: &Option<Tensor>| match old {
                    None => Ok(more.clone()),
                    Some(old) => Tensor::cat(&[old, &more], 2),
                };
                (self.k, self.v) = (Some(grow(&self.k)?), Some(grow(&self.v)?));
            }
            let (all_k, all_v) = match (&self.k, &self.v) {
                (Some(all_k), Some(all_v)) => (all_k, all_v),
                _ => bail!("grown above"),
            };
            all_k.slice_set(k, 2, self.len)?;
            all_v.slice_set(v, 2, self.len)?;
            self.len += new;
            Ok((all_k.narrow(2, 0, self.len)?, all_v.narrow(2, 0, self.len)?))
        }

        pub fn len(&self) -> usize {
            self.len
        }
    }

    /// A user's own cache type: kv-candle measures it through its tensors.
    impl Measure for SingleCache {
        fn measure(&self, meter: &mut Meter) -> Result<()> {
            meter.add(&self.k)?.add(&self.v).map(drop)
        }
    }

    #[derive(ModelLocalKv)]
    #[kv(name = "k_v", cache = "NormalCache: (batch, heads, capacity, dim) per layer, grown in steps",
         layers = 1, kv_heads = self.kv_heads, head_dim = self.head_dim,
         dtype = kv_candle::kv_dtype(self.dtype),
         positions = grows_by(self.max_positions, step = GROW),
         scope = request,
         rows = max_num_seqs)]
    pub struct LayerCache {
        pub cache: SingleCache,
        kv_heads: usize,
        head_dim: usize,
        max_positions: usize,
        dtype: DType,
    }

    #[derive(ModelLocalKv)]
    pub struct NormalCache {
        #[kv(child)]
        pub layers: Vec<LayerCache>,
    }

    #[derive(ModelLocalKv)]
    pub struct Model {
        pub layers: Vec<Projections>,
        max_positions: usize,
        #[kv(child)]
        pub cache: Arc<Mutex<NormalCache>>,
    }

    impl Model {
        pub fn new(cfg: &Config, vb: VarBuilder) -> Result<Self> {
            let layers = (0..cfg.layers)
                .map(|i| {
                    let vb = vb.pp(format!("layers.{i}.self_attn"));
                    Projections::new(cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim, &vb)
                })
                .collect::<Result<_>>()?;
            let cache = NormalCache {
                layers: (0..cfg.layers)
                    .map(|_| LayerCache {
                        cache: SingleCache::default(),
                        kv_heads: cfg.kv_heads,
                        head_dim: cfg.head_dim,
                        max_positions: cfg.max_positions,
                        dtype: vb.dtype(),
                    })
                    .collect(),
            };
            Ok(Model {
                layers,
                max_positions: cfg.max_positions,
                cache: Arc::new(Mutex::new(cache)),
            })
        }

        /// One step for a batch of sequences `(batch, len, hidden)`; the
        /// cache is locked for the step, as an engine's scheduler does.
        pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
            let mut cache = match self.cache.lock() {
                Ok(cache) => cache,
                Err(_) => bail!("cache poisoned"),
            };
            let mut x = x.clone();
            for (attn, layer) in self.layers.iter().zip(&mut cache.layers) {
                if layer.cache.len() + x.dim(1)? > self.max_positions {
                    bail!("longer than max_positions {}", self.max_positions);
                }
                let q = attn.queries(&x)?;
                let (k, v) = attn.keys_values(&x)?;
                let (k, v) = layer.cache.append(&k, &v)?;
                x = (&x + attn.attend(&q, &k, &v)?)?;
            }
            Ok(x)
        }
    }
}

/// Zero weights in `dtype`, on the CPU.
pub fn zero_weights(dtype: DType) -> VarBuilder<'static> {
    VarBuilder::zeros(dtype, &Device::Cpu)
}

pub mod peak {
    //! Each model built with zero weights and run to the peak its
    //! declarations state, and the bytes each declaration's own tensors
    //! hold, by declaration path.

    use super::*;
    use kv_candle::measured_bytes;

    /// Qwen2-style: 3 layers, 4 query and 2 KV heads of 16 dims, f16, run
    /// to 12 positions (a 5-token prompt, then 7 tokens one at a time).
    pub const CONCAT: Config = Config {
        hidden: 64,
        layers: 3,
        heads: 4,
        kv_heads: 2,
        head_dim: 16,
        max_positions: 12,
    };

    pub fn concat() -> Result<concat::ForCausalLm> {
        let mut model = new_concat(zero_weights(DType::F16))?;
        drive_concat(&mut model)?;
        Ok(model)
    }

    /// Built from `vb` (its dtype, f16 here, is the cache's).
    pub fn new_concat(vb: VarBuilder) -> Result<concat::ForCausalLm> {
        concat::ForCausalLm::new(&CONCAT, vb)
    }

    /// A 5-token prompt, then 7 tokens one at a time: 12 positions.
    pub fn drive_concat(model: &mut concat::ForCausalLm) -> Result<()> {
        model.forward(&tokens(1, 5, CONCAT.hidden, DType::F16)?)?;
        for _ in 5..CONCAT.max_positions {
            model.forward(&tokens(1, 1, CONCAT.hidden, DType::F16)?)?;
        }
        Ok(())
    }

    pub fn concat_measured(model: &concat::ForCausalLm) -> Result<Vec<(String, u64)>> {
        model
            .model
            .layers
            .iter()
            .enumerate()
            .map(|(i, layer)| {
                Ok((
                    format!("model.layers.{i}.self_attn.kv_cache"),
                    measured_bytes(&layer.self_attn.kv_cache)?,
                ))
            })
            .collect()
    }

    /// Gemma-3-style: 6 layers, the sixth global, a 4-position window,
    /// 2 query heads and 1 KV head of 32 dims, bf16, run to 10 positions
    /// (a 6-token prompt, longer than the window, then 4 tokens).
    pub const SLIDING: Config = Config {
        hidden: 64,
        layers: 6,
        heads: 2,
        kv_heads: 1,
        head_dim: 32,
        max_positions: 10,
    };
    pub const SLIDING_WINDOW: usize = 4;
    pub const GLOBAL_EVERY: usize = 6;

    pub fn sliding() -> Result<sliding::Model> {
        let mut model = new_sliding(zero_weights(DType::BF16))?;
        drive_sliding(&mut model)?;
        Ok(model)
    }

    /// Built from `vb` (bf16 here).
    pub fn new_sliding(vb: VarBuilder) -> Result<sliding::Model> {
        sliding::Model::new(&SLIDING, SLIDING_WINDOW, GLOBAL_EVERY, vb)
    }

    /// A 6-token prompt, then 4 tokens one at a time: 10 positions.
    pub fn drive_sliding(model: &mut sliding::Model) -> Result<()> {
        model.forward(&tokens(1, 6, SLIDING.hidden, DType::BF16)?)?;
        for _ in 6..SLIDING.max_positions {
            model.forward(&tokens(1, 1, SLIDING.hidden, DType::BF16)?)?;
        }
        Ok(())
    }

    pub fn sliding_measured(model: &sliding::Model) -> Result<Vec<(String, u64)>> {
        model
            .layers
            .iter()
            .enumerate()
            .map(|(i, layer)| {
                let bytes = match &layer.self_attn.kv_cache {
                    sliding::LayerCache::Global { cache, .. } => measured_bytes(cache)?,
                    sliding::LayerCache::Sliding { cache, .. } => measured_bytes(cache)?,
                };
                Ok((format!("layers.{i}.self_attn.kv_cache.kv"), bytes))
            })
            .collect()
    }

    /// Whisper-style: 2 blocks, 2 heads of 16 dims, f32, 30 encoder frames,
    /// 8 text tokens decoded one more at a time.
    pub const CROSS: Config = Config {
        hidden: 32,
        layers: 2,
        heads: 2,
        kv_heads: 2,
        head_dim: 16,
        max_positions: 8,
    };
    pub const N_AUDIO_CTX: usize = 30;

    pub fn cross() -> Result<cross::TextDecoder> {
        let mut decoder = new_cross(zero_weights(DType::F32))?;
        drive_cross(&mut decoder)?;
        Ok(decoder)
    }

    /// Built from `vb` (f32 here).
    pub fn new_cross(vb: VarBuilder) -> Result<cross::TextDecoder> {
        cross::TextDecoder::new(&CROSS, N_AUDIO_CTX, vb)
    }

    /// 30 encoder frames; 1 to 8 text tokens, one more each step.
    pub fn drive_cross(decoder: &mut cross::TextDecoder) -> Result<()> {
        let audio = tokens(1, N_AUDIO_CTX, CROSS.hidden, DType::F32)?;
        for len in 1..=CROSS.max_positions {
            decoder.forward(&tokens(1, len, CROSS.hidden, DType::F32)?, &audio)?;
        }
        Ok(())
    }

    pub fn cross_measured(decoder: &cross::TextDecoder) -> Result<Vec<(String, u64)>> {
        decoder
            .blocks
            .iter()
            .enumerate()
            .map(|(i, block)| {
                let bytes = match &block.cross_attn {
                    Some((attn, _)) => measured_bytes(&attn.kv_cache)?,
                    None => 0,
                };
                Ok((format!("blocks.{i}.cross_attn.0.kv_cache"), bytes))
            })
            .collect()
    }

    /// mistral.rs-style: 2 layers, 4 query and 2 KV heads of 8 dims, f32,
    /// a batch of 2 sequences run to 20 positions (a 7-token prompt, then
    /// 13 tokens), capacity grown 8 at a time.
    pub const SHARED: Config = Config {
        hidden: 32,
        layers: 2,
        heads: 4,
        kv_heads: 2,
        head_dim: 8,
        max_positions: 20,
    };
    pub const SHARED_BATCH: usize = 2;

    pub fn shared() -> Result<shared::Model> {
        let model = new_shared(zero_weights(DType::F32))?;
        drive_shared(&model)?;
        Ok(model)
    }

    /// Built from `vb` (f32 here).
    pub fn new_shared(vb: VarBuilder) -> Result<shared::Model> {
        shared::Model::new(&SHARED, vb)
    }

    /// A batch of 2: a 7-token prompt, then 13 tokens one at a time.
    pub fn drive_shared(model: &shared::Model) -> Result<()> {
        model.forward(&tokens(SHARED_BATCH, 7, SHARED.hidden, DType::F32)?)?;
        for _ in 7..SHARED.max_positions {
            model.forward(&tokens(SHARED_BATCH, 1, SHARED.hidden, DType::F32)?)?;
        }
        Ok(())
    }

    pub fn shared_measured(model: &shared::Model) -> Result<Vec<(String, u64)>> {
        let cache = match model.cache.try_lock() {
            Ok(cache) => cache,
            Err(_) => bail!("the cache is locked"),
        };
        cache
            .layers
            .iter()
            .enumerate()
            .map(|(i, layer)| {
                Ok((
                    format!("cache.layers.{i}.k_v"),
                    measured_bytes(&layer.cache)?,
                ))
            })
            .collect()
    }
}
