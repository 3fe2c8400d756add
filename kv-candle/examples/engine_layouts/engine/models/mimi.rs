//! Mimi's shape: an encoder and a decoder of streaming stages, each a trait
//! object that is a `candle_core::StreamingModule` holding its own state
//! between steps: a causal convolution keeps its previous frames as a
//! `StreamTensor`, a transformer layer its K/V in a `RotatingKvCache`.
//! Frames are `(batch, channels, time)`.

use candle_core::{bail, Result, StreamTensor, StreamingModule, Tensor, D};
use candle_nn::kv_cache::RotatingKvCache;
use candle_nn::VarBuilder;
use kv_candle::{Measure, Meter};
use kv_core::{Geometry, ModelLocalKv, RecurrentState, StatePart};

use crate::engine::layers::attention::Projections;

/// A stage of the codec: `ModelLocalKv` is a supertrait, so the report
/// reaches each stage's state through `Box<dyn Stage>`; `Measure`, so a
/// test can weigh what it holds.
pub trait Stage: StreamingModule + ModelLocalKv + Measure + Send {}

/// Sizes of the codec.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub channels: usize,
    pub kernel: usize,
    /// Frames each step brings.
    pub frames_per_step: usize,
    pub heads: usize,
    pub head_dim: usize,
    /// Frames a transformer layer attends back over.
    pub context: usize,
    pub batch: usize,
}

/// A causal convolution. As Mimi's `StreamableConv1d`, it keeps the last
/// `kernel - 1` frames as a narrowed view of the frames it concatenated, so
/// the whole concatenation (`kernel - 1 + frames_per_step` frames) stays
/// allocated between steps: that is what the declaration states.
#[derive(ModelLocalKv)]
#[kv(
    name = "prev_frames",
    cache = "StreamTensor: a view of the last concatenated frames",
    state = self.state(),
    scope = session,
    rows = max_num_seqs,
    note = "a narrowed view keeps kernel - 1 + frames_per_step frames allocated",
)]
pub struct StreamingConv1d {
    weight: Tensor,
    prev: StreamTensor,
    channels: usize,
    held_frames: usize,
    dtype: kv_core::DType,
}

impl StreamingConv1d {
    pub fn new(cfg: &Config, vb: VarBuilder) -> Result<Self> {
        let weight = vb.get((cfg.channels, cfg.channels, cfg.kernel), "weight")?;
        Ok(StreamingConv1d {
            weight,
            prev: StreamTensor::empty(),
            channels: cfg.channels,
            held_frames: cfg.kernel - 1 + cfg.frames_per_step,
            dtype: kv_candle::kv_dtype(vb.dtype())
                .map_err(|e| candle_core::Error::Msg(e.to_string()))?,
        })
    }

    /// `channels x held_frames` per sequence, in one layer.
    fn state(&self) -> RecurrentState {
        RecurrentState::from_parts(
            1,
            vec![StatePart::new(
                "frames",
                [self.channels as u64, self.held_frames as u64, 1],
                self.dtype,
            )],
        )
    }
}

impl StreamingModule for StreamingConv1d {
    fn step(&mut self, xs: &StreamTensor) -> Result<StreamTensor> {
        let all = StreamTensor::cat2(&self.prev, xs, D::Minus1)?;
        let Some(all) = all.as_option() else {
            return Ok(StreamTensor::empty());
        };
        let kernel = self.weight.dim(2)?;
        let time = all.dim(2)?;
        if time < kernel {
            self.prev = StreamTensor::from_tensor(all.clone());
            return Ok(StreamTensor::empty());
        }
        let out = all.conv1d(&self.weight, 0, 1, 1, 1)?;
        // Mimi's own step: a view of the concatenation, not a copy.
        self.prev = StreamTensor::from_tensor(all.narrow(2, time - (kernel - 1), kernel - 1)?);
        Ok(StreamTensor::from_tensor(out))
    }

    fn reset_state(&mut self) {
        self.prev.reset();
    }
}

impl Measure for StreamingConv1d {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        meter.add(&self.prev.as_option()).map(drop)
    }
}

impl Stage for StreamingConv1d {}

/// A transformer layer over the frames, attending back `context` frames.
#[derive(ModelLocalKv)]
#[kv(
    name = "kv_cache",
    cache = "candle-nn RotatingKvCache",
    geometry = self.geometry,
    positions = window(self.context),
    scope = session,
    rows = max_num_seqs,
)]
pub struct StreamingAttention {
    attn: Projections,
    kv_cache: RotatingKvCache,
    geometry: Geometry,
    context: usize,
}

impl StreamingAttention {
    pub fn new(cfg: &Config, vb: VarBuilder) -> Result<Self> {
        let dtype =
            kv_candle::kv_dtype(vb.dtype()).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        Ok(StreamingAttention {
            attn: Projections::new(cfg.channels, cfg.heads, cfg.heads, cfg.head_dim, &vb)?,
            kv_cache: RotatingKvCache::new(2, cfg.context),
            geometry: Geometry::new(1, cfg.heads as u64, cfg.head_dim as u64, dtype),
            context: cfg.context,
        })
    }
}

impl StreamingModule for StreamingAttention {
    fn step(&mut self, xs: &StreamTensor) -> Result<StreamTensor> {
        let Some(xs) = xs.as_option() else {
            return Ok(StreamTensor::empty());
        };
        if xs.dim(2)? > self.context {
            bail!(
                "a step of {} frames, past the context {}",
                xs.dim(2)?,
                self.context
            );
        }
        let x = xs.transpose(1, 2)?.contiguous()?;
        let q = self.attn.queries(&x)?;
        let (k, v) = self.attn.keys_values(&x)?;
        let (k, v) = self.kv_cache.append(&k.contiguous()?, &v.contiguous()?)?;
        let out = (&x + self.attn.attend(&q, &k, &v)?)?;
        Ok(StreamTensor::from_tensor(
            out.transpose(1, 2)?.contiguous()?,
        ))
    }

    fn reset_state(&mut self) {
        self.kv_cache.reset();
    }
}

impl Measure for StreamingAttention {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        meter.add(&self.kv_cache).map(drop)
    }
}

impl Stage for StreamingAttention {}

/// The codec: its stages as trait objects, encoder then decoder.
#[derive(ModelLocalKv)]
pub struct Mimi {
    #[kv(child)]
    pub encoder: Vec<Box<dyn Stage>>,
    #[kv(child)]
    pub decoder: Vec<Box<dyn Stage>>,
}

impl Mimi {
    pub fn new(cfg: &Config, vb: VarBuilder) -> Result<Self> {
        let conv = |name: &str| -> Result<Box<dyn Stage>> {
            Ok(Box::new(StreamingConv1d::new(cfg, vb.pp(name))?))
        };
        let attention = |name: &str| -> Result<Box<dyn Stage>> {
            Ok(Box::new(StreamingAttention::new(cfg, vb.pp(name))?))
        };
        Ok(Mimi {
            encoder: vec![conv("encoder.conv")?, attention("encoder.transformer")?],
            decoder: vec![attention("decoder.transformer")?, conv("decoder.conv")?],
        })
    }

    /// One step of `frames_per_step` frames through the encoder, then the decoder.
    pub fn step(&mut self, frames: &Tensor) -> Result<StreamTensor> {
        let mut xs = StreamTensor::from_tensor(frames.clone());
        for stage in self.encoder.iter_mut().chain(self.decoder.iter_mut()) {
            xs = stage.step(&xs)?;
        }
        Ok(xs)
    }
}
