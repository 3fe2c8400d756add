//! mistral.rs's caches, in its shapes: a `SingleCache` per K and per V that
//! grows its capacity `GROW` positions at a time up to `max_seq_len`, a
//! `RotatingCache` that keeps a sliding layer's last `window` positions, a
//! `KvCache` per layer (either kind), the `NormalCache` of every layer, and
//! the `EitherCache` a model holds, shared with the engine behind
//! `Arc<Mutex<..>>`. Tensors are `(batch, kv_heads, positions, head_dim)`.

use std::sync::{Arc, Mutex};

use candle_core::{bail, Result, Tensor};
use kv_candle::{Measure, Meter};
use kv_core::{Geometry, ModelLocalKv};

/// Capacity is added this many positions at a time (mistral.rs: 512).
pub const GROW: usize = 16;

/// One K or V tensor grown in steps: its first `len` positions are filled.
pub struct SingleCache {
    all_data: Option<Tensor>,
    len: usize,
    pub max_seq_len: usize,
}

impl SingleCache {
    pub fn new(max_seq_len: usize) -> Self {
        SingleCache {
            all_data: None,
            len: 0,
            max_seq_len,
        }
    }

    /// Appends `src` `(b, h, n, d)`, growing while full; returns the filled part.
    pub fn append(&mut self, src: &Tensor) -> Result<Tensor> {
        let new = src.dim(2)?;
        if self.len + new > self.max_seq_len {
            bail!(
                "{} positions, past max_seq_len {}",
                self.len + new,
                self.max_seq_len
            );
        }
        let capacity = |data: &Option<Tensor>| data.as_ref().map_or(Ok(0), |t| t.dim(2));
        while self.len + new > capacity(&self.all_data)? {
            let (b, h, _, d) = src.dims4()?;
            let more = Tensor::zeros((b, h, GROW, d), src.dtype(), src.device())?;
            self.all_data = Some(match &self.all_data {
                None => more,
                Some(old) => Tensor::cat(&[old, &more], 2)?,
            });
        }
        let Some(all) = &self.all_data else {
            bail!("grown above")
        };
        all.slice_set(src, 2, self.len)?;
        self.len += new;
        all.narrow(2, 0, self.len)
    }
}

/// A sliding layer's K or V: the last `window` positions, allocated whole
/// at the first append and written round.
pub struct RotatingCache {
    all_data: Option<Tensor>,
    seen: usize,
    pub window: usize,
}

impl RotatingCache {
    pub fn new(window: usize) -> Self {
        RotatingCache {
            all_data: None,
            seen: 0,
            window,
        }
    }

    /// Appends `src` `(b, h, n, d)` one position at a time into the ring;
    /// returns what the window holds.
    pub fn append(&mut self, src: &Tensor) -> Result<Tensor> {
        let (b, h, n, d) = src.dims4()?;
        if self.all_data.is_none() {
            self.all_data = Some(Tensor::zeros(
                (b, h, self.window, d),
                src.dtype(),
                src.device(),
            )?);
        }
        let Some(all) = &self.all_data else {
            bail!("allocated above")
        };
        for i in 0..n {
            all.slice_set(
                &src.narrow(2, i, 1)?.contiguous()?,
                2,
                (self.seen + i) % self.window,
            )?;
        }
        self.seen += n;
        all.narrow(2, 0, self.seen.min(self.window))
    }
}

impl Measure for SingleCache {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        meter.add(&self.all_data).map(drop)
    }
}

impl Measure for RotatingCache {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        meter.add(&self.all_data).map(drop)
    }
}

/// One layer's cache: K and V, normal or rotating.
#[derive(ModelLocalKv)]
pub enum KvCache {
    #[kv(
        name = "k_v",
        cache = "mistral.rs SingleCache K and V, grown in steps",
        geometry = *geometry,
        positions = grows_by(k.max_seq_len, step = GROW),
        scope = request,
        rows = max_num_seqs,
    )]
    Normal {
        k: SingleCache,
        v: SingleCache,
        geometry: Geometry,
    },
    #[kv(
        name = "k_v",
        cache = "mistral.rs RotatingCache K and V",
        geometry = *geometry,
        positions = bounded(k.window, because = "sliding_window: the last window positions"),
        scope = request,
        rows = max_num_seqs,
    )]
    Rotating {
        k: RotatingCache,
        v: RotatingCache,
        geometry: Geometry,
    },
}

impl KvCache {
    pub fn append(&mut self, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor)> {
        match self {
            KvCache::Normal { k: kc, v: vc, .. } => Ok((kc.append(k)?, vc.append(v)?)),
            KvCache::Rotating { k: kc, v: vc, .. } => Ok((kc.append(k)?, vc.append(v)?)),
        }
    }
}

impl Measure for KvCache {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        match self {
            KvCache::Normal { k, v, .. } => meter.add(k)?.add(v).map(drop),
            KvCache::Rotating { k, v, .. } => meter.add(k)?.add(v).map(drop),
        }
    }
}

/// Every layer's cache, as mistral.rs's `NormalCache` keeps them.
#[derive(ModelLocalKv)]
pub struct NormalCache(#[kv(child)] pub Vec<KvCache>);

impl Measure for NormalCache {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        meter.add(&self.0).map(drop)
    }
}

/// What a mistral.rs model holds: here only the normal kind, shared with
/// the engine's scheduler behind `Arc<Mutex<..>>`.
#[derive(ModelLocalKv)]
pub enum EitherCache {
    Normal(#[kv(child)] Arc<Mutex<NormalCache>>),
}
