//! candle-transformers' llama, in its shape: the model holds weights only;
//! its `Cache` is kept beside it by whoever drives it (two roots), and holds
//! the rotary tables (computed when the `Cache` is made), one K/V pair per
//! layer grown by `Tensor::cat`, and a
//! memo of causal masks keyed by `(seq_len, kv_len)`, one per distinct
//! prompt shape, never evicted. A server that reuses one `Cache` for its
//! requests (clearing the K/V between them) keeps every mask it ever built.

use std::collections::HashMap;

use candle_core::{bail, DType, Device, Result, Tensor};
use candle_nn::VarBuilder;
use kv_core::{Geometry, ModelLocalKv, TensorPart, Tensors};

use crate::engine::layers::attention::Projections;
use crate::engine::layers::rotary::RotaryEmbedding;

/// Sizes of the decoder, and the longest prompt the server accepts.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub max_position_embeddings: usize,
    /// The server takes prompts of `min_prompt..=max_prompt` tokens, each
    /// starting at position 0.
    pub min_prompt: usize,
    pub max_prompt: usize,
}

/// The model: weights only, no state. A root of its own.
#[derive(ModelLocalKv)]
pub struct Llama {
    blocks: Vec<Projections>,
    max_position_embeddings: usize,
}

impl Llama {
    /// The blocks, as allocated.
    pub fn blocks(&self) -> &[Projections] {
        &self.blocks
    }

    pub fn new(cfg: &Config, vb: VarBuilder) -> Result<Self> {
        let blocks = (0..cfg.layers)
            .map(|i| {
                let vb = vb.pp(format!("model.layers.{i}.self_attn"));
                Projections::new(cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim, &vb)
            })
            .collect::<Result<_>>()?;
        Ok(Llama {
            blocks,
            max_position_embeddings: cfg.max_position_embeddings,
        })
    }

    /// `x` `(1, seq_len, hidden)` at `index_pos`, through every block.
    pub fn forward(&self, x: &Tensor, index_pos: usize, cache: &mut Cache) -> Result<Tensor> {
        let seq_len = x.dim(1)?;
        if index_pos + seq_len > self.max_position_embeddings {
            bail!(
                "{} positions, past max_position_embeddings",
                index_pos + seq_len
            );
        }
        // candle builds the mask for a prompt (more than one token) only.
        if seq_len > 1 {
            cache.mask(seq_len, index_pos)?;
        }
        let mut x = x.clone();
        for (block, kv) in self.blocks.iter().zip(cache.kvs.iter_mut()) {
            let q = block.queries(&x)?;
            let (mut k, mut v) = block.keys_values(&x)?;
            if let Some((cache_k, cache_v)) = kv {
                k = Tensor::cat(&[&*cache_k, &k], 2)?.contiguous()?;
                v = Tensor::cat(&[&*cache_v, &v], 2)?.contiguous()?;
            }
            *kv = Some((k.clone(), v.clone()));
            x = (&x + block.attend(&q, &k, &v)?)?;
        }
        Ok(x)
    }
}

/// What candle's llama keeps beside the model.
#[derive(ModelLocalKv)]
#[kv(
    name = "kvs",
    cache = "Vec<Option<(Tensor, Tensor)>>, one K/V pair per layer, grown by Tensor::cat",
    geometry = self.geometry,
    positions = bounded(self.max_position_embeddings, because = "max_position_embeddings: forward refuses longer"),
    scope = request,
    rows = fixed(1, because = "candle's llama runs one sequence per Cache"),
)]
#[kv(
    name = "masks",
    cache = "HashMap<(usize, usize), Tensor> memo of causal masks",
    tensors = self.masks_bound(),
    scope = model,
    rows = fixed(1, because = "one memo per Cache"),
)]
pub struct Cache {
    masks: HashMap<(usize, usize), Tensor>,
    kvs: Vec<Option<(Tensor, Tensor)>>,
    /// The rotary tables, which declare themselves.
    #[kv(child)]
    rope: RotaryEmbedding,
    geometry: Geometry,
    max_position_embeddings: usize,
    min_prompt: usize,
    max_prompt: usize,
}

impl Cache {
    pub fn new(cfg: &Config, dtype: DType) -> Result<Self> {
        let kv_dtype =
            kv_candle::kv_dtype(dtype).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        Ok(Cache {
            masks: HashMap::new(),
            kvs: vec![None; cfg.layers],
            rope: RotaryEmbedding::new(cfg.max_position_embeddings, cfg.head_dim, dtype)?,
            geometry: Geometry::new(
                cfg.layers as u64,
                cfg.kv_heads as u64,
                cfg.head_dim as u64,
                kv_dtype,
            ),
            max_position_embeddings: cfg.max_position_embeddings,
            min_prompt: cfg.min_prompt,
            max_prompt: cfg.max_prompt,
        })
    }

    /// A new request: the K/V go, the masks stay.
    pub fn clear_kvs(&mut self) {
        self.kvs.iter_mut().for_each(|kv| *kv = None);
    }

    /// candle's `Cache::mask`: built once per `(seq_len, kv_len)`, kept.
    fn mask(&mut self, seq_len: usize, index_pos: usize) -> Result<Tensor> {
        let kv_len = index_pos + seq_len;
        if let Some(mask) = self.masks.get(&(seq_len, kv_len)) {
            return Ok(mask.clone());
        }
        let mask: Vec<u8> = (0..seq_len)
            .flat_map(|i| (0..kv_len).map(move |j| u8::from(j > index_pos + i)))
            .collect();
        let mask = Tensor::from_slice(&mask, (seq_len, kv_len), &Device::Cpu)?;
        self.masks.insert((seq_len, kv_len), mask.clone());
        Ok(mask)
    }

    /// Every prompt starts at position 0, so a prompt of `t` tokens keeps
    /// one `(t, t)` mask; the server takes prompts of `min_prompt` to
    /// `max_prompt` tokens.
    fn masks_bound(&self) -> Tensors {
        Tensors::from_parts(vec![TensorPart::square_per_length(
            "mask",
            self.min_prompt as u64,
            self.max_prompt as u64,
            kv_core::DType::U8,
            "one (t, t) u8 mask per prompt length t the server takes, never evicted",
        )])
    }

    pub fn masks(&self) -> impl Iterator<Item = &Tensor> {
        self.masks.values()
    }

    pub fn kvs(&self) -> &[Option<(Tensor, Tensor)>] {
        &self.kvs
    }

    pub fn rope(&self) -> &RotaryEmbedding {
        &self.rope
    }
}
