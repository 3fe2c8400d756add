//! Attention's projections and scaled dot-product, without a mask, shared by
//! the examples (each includes this file): with zero weights every score is
//! equal, and what these models show is the caches, not the logits.

use candle_core::{DType, Device, Module, Result, Tensor, D};
use candle_nn::{linear_no_bias, Linear, VarBuilder};

/// Query, key, value and output projections, and the heads they split into.
pub struct Projections {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

impl Projections {
    pub fn new(
        hidden: usize,
        heads: usize,
        kv_heads: usize,
        head_dim: usize,
        vb: &VarBuilder,
    ) -> Result<Self> {
        Ok(Projections {
            q: linear_no_bias(hidden, heads * head_dim, vb.pp("q_proj"))?,
            k: linear_no_bias(hidden, kv_heads * head_dim, vb.pp("k_proj"))?,
            v: linear_no_bias(hidden, kv_heads * head_dim, vb.pp("v_proj"))?,
            o: linear_no_bias(heads * head_dim, hidden, vb.pp("o_proj"))?,
            heads,
            kv_heads,
            head_dim,
        })
    }

    /// `(b, heads, len, d)` queries of `x` `(b, len, hidden)`.
    pub fn queries(&self, x: &Tensor) -> Result<Tensor> {
        split_heads(&self.q.forward(x)?, self.heads, self.head_dim)
    }

    /// `(b, kv_heads, len, d)` keys and values of `x`.
    pub fn keys_values(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        Ok((
            split_heads(&self.k.forward(x)?, self.kv_heads, self.head_dim)?,
            split_heads(&self.v.forward(x)?, self.kv_heads, self.head_dim)?,
        ))
    }

    /// Attention of `q` over `k`, `v`, projected back to the hidden size.
    pub fn attend(&self, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
        let n_rep = q.dim(1)? / k.dim(1)?;
        let k = candle_transformers::utils::repeat_kv(k.clone(), n_rep)?.contiguous()?;
        let v = candle_transformers::utils::repeat_kv(v.clone(), n_rep)?.contiguous()?;
        let scale = 1.0 / (q.dim(D::Minus1)? as f64).sqrt();
        let scores = (q.contiguous()?.matmul(&k.t()?)? * scale)?;
        let out = candle_nn::ops::softmax_last_dim(&scores)?.matmul(&v)?;
        let (b, heads, len, d) = out.dims4()?;
        self.o
            .forward(&out.transpose(1, 2)?.reshape((b, len, heads * d))?)
    }
}

/// `(b, len, heads * d)` to `(b, heads, len, d)`, contiguous.
fn split_heads(x: &Tensor, heads: usize, head_dim: usize) -> Result<Tensor> {
    let (b, len, _) = x.dims3()?;
    x.reshape((b, len, heads, head_dim))?
        .transpose(1, 2)?
        .contiguous()
}

/// Zero token embeddings: `(batch, len, hidden)` in `dtype`.
pub fn tokens(batch: usize, len: usize, hidden: usize, dtype: DType) -> Result<Tensor> {
    Tensor::zeros((batch, len, hidden), dtype, &Device::Cpu)
}
