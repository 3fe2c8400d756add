//! One tensor as a checkpoint stores it: what the safetensors and GGUF
//! readers both return, in a file of its own so neither reader depends on
//! the other.

/// One tensor as a checkpoint stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredTensor {
    /// The name in the file (`model.layers.0.self_attn.q_proj.weight`).
    pub name: String,
    /// The dtype as the file names it: safetensors' (`BF16`, `F8_E4M3`,
    /// `U8`) or ggml's (`q4_K`, `f16`).
    pub dtype: String,
    /// The shape as the file gives it (GGUF's is innermost first).
    pub shape: Vec<u64>,
    /// The bytes its data takes in the file.
    pub bytes: u64,
}

impl StoredTensor {
    /// A tensor of `bytes` bytes.
    pub fn new(name: String, dtype: String, shape: Vec<u64>, bytes: u64) -> StoredTensor {
        StoredTensor {
            name,
            dtype,
            shape,
            bytes,
        }
    }
}
