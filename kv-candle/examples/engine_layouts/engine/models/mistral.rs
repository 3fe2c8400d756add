//! A mistral.rs-style decoder: its layers share one rotary table through an
//! `Arc`, and every layer's cache is in the model's `EitherCache`, locked
//! for each step as mistral.rs's scheduler locks it. The first
//! `sliding_layers` layers slide over a window; the rest keep every
//! position, grown in steps.

use std::sync::{Arc, Mutex};

use candle_core::{bail, Result, Tensor};
use candle_nn::VarBuilder;
use kv_candle::{Measure, Meter};
use kv_core::{Geometry, ModelLocalKv};

use super::NormalModel;
use crate::engine::layers::attention::Projections;
use crate::engine::layers::cache::{EitherCache, KvCache, NormalCache, RotatingCache, SingleCache};
use crate::engine::layers::rotary::RotaryEmbedding;

/// Sizes of the decoder.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub hidden: usize,
    pub layers: usize,
    pub sliding_layers: usize,
    pub sliding_window: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// The longest sequence a forward accepts.
    pub max_seq_len: usize,
}

/// One layer: its projections (weights, no cache) and the shared table.
#[derive(ModelLocalKv)]
pub struct DecoderLayer {
    attn: Projections,
    /// One table for every layer: the same `Arc`, counted once.
    #[kv(child)]
    rotary: Arc<RotaryEmbedding>,
}

#[derive(ModelLocalKv)]
pub struct Mistral {
    #[kv(child)]
    layers: Vec<DecoderLayer>,
    #[kv(child)]
    pub cache: EitherCache,
}

impl Mistral {
    pub fn new(cfg: &Config, vb: VarBuilder) -> Result<Self> {
        let rotary = Arc::new(RotaryEmbedding::new(
            cfg.max_seq_len,
            cfg.head_dim,
            vb.dtype(),
        )?);
        let layers = (0..cfg.layers)
            .map(|i| {
                let vb = vb.pp(format!("layers.{i}.self_attn"));
                Ok(DecoderLayer {
                    attn: Projections::new(cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim, &vb)?,
                    rotary: Arc::clone(&rotary),
                })
            })
            .collect::<Result<_>>()?;
        let dtype =
            kv_candle::kv_dtype(vb.dtype()).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        let geometry = Geometry::new(1, cfg.kv_heads as u64, cfg.head_dim as u64, dtype);
        let caches = (0..cfg.layers)
            .map(|i| {
                if i < cfg.sliding_layers {
                    KvCache::Rotating {
                        k: RotatingCache::new(cfg.sliding_window),
                        v: RotatingCache::new(cfg.sliding_window),
                        geometry,
                    }
                } else {
                    KvCache::Normal {
                        k: SingleCache::new(cfg.max_seq_len),
                        v: SingleCache::new(cfg.max_seq_len),
                        geometry,
                    }
                }
            })
            .collect();
        Ok(Mistral {
            layers,
            cache: EitherCache::Normal(Arc::new(Mutex::new(NormalCache(caches)))),
        })
    }
}

impl Measure for Mistral {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        for layer in &self.layers {
            meter.add(&layer.rotary.cos)?.add(&layer.rotary.sin)?;
        }
        let EitherCache::Normal(cache) = &self.cache;
        meter.add(cache).map(drop)
    }
}

impl NormalModel for Mistral {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let EitherCache::Normal(cache) = &self.cache;
        let Ok(mut cache) = cache.lock() else {
            bail!("the cache is poisoned")
        };
        let mut x = x.clone();
        for (layer, cache) in self.layers.iter().zip(cache.0.iter_mut()) {
            let q = layer.attn.queries(&x)?;
            let (k, v) = layer.attn.keys_values(&x)?;
            let (k, v) = cache.append(&k, &v)?;
            x = (&x + layer.attn.attend(&q, &k, &v)?)?;
        }
        Ok(x)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Mistral {
    /// The layers, as allocated.
    pub fn layers(&self) -> &[DecoderLayer] {
        &self.layers
    }
}
