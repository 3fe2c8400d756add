//! The rotary tables, as mistral.rs keeps them: one `RotaryEmbedding`
//! computed at load, shared by every layer through an `Arc`.

use candle_core::{DType, Device, Result, Tensor};
use kv_core::{ModelLocalKv, TensorPart, Tensors};

/// `cos` and `sin`, each `(max_seq_len, head_dim / 2)`.
#[derive(ModelLocalKv)]
#[kv(
    name = "cos_sin",
    cache = "rotary cos/sin tables",
    tensors = self.tables(),
    scope = model,
    rows = fixed(1, because = "one table shared by every layer and sequence"),
)]
pub struct RotaryEmbedding {
    pub cos: Tensor,
    pub sin: Tensor,
}

impl RotaryEmbedding {
    pub fn new(max_seq_len: usize, head_dim: usize, dtype: DType) -> Result<Self> {
        let half = head_dim / 2;
        let inv_freq: Vec<f32> = (0..half)
            .map(|i| 1.0 / 10_000f32.powf(2.0 * i as f32 / head_dim as f32))
            .collect();
        let inv_freq = Tensor::from_vec(inv_freq, (1, half), &Device::Cpu)?;
        let positions = Tensor::arange(0u32, max_seq_len as u32, &Device::Cpu)?
            .to_dtype(DType::F32)?
            .reshape((max_seq_len, 1))?;
        let freqs = positions.matmul(&inv_freq)?;
        Ok(RotaryEmbedding {
            cos: freqs.cos()?.to_dtype(dtype)?,
            sin: freqs.sin()?.to_dtype(dtype)?,
        })
    }

    /// The tables' shapes and dtype, from the tensors themselves.
    pub fn tables(&self) -> std::result::Result<Tensors, String> {
        let part = |name: &'static str, tensor: &Tensor| {
            let (rows, cols) = tensor.dims2().map_err(|e| e.to_string())?;
            let dtype = kv_candle::kv_dtype(tensor.dtype()).map_err(|e| e.to_string())?;
            Ok::<_, String>(TensorPart::new(name, [rows as u64, cols as u64, 1], dtype))
        };
        Ok(Tensors::from_parts(vec![
            part("cos", &self.cos)?,
            part("sin", &self.sin)?,
        ]))
    }
}
