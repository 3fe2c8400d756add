//! One tensor as a checkpoint stores it, and what a reader requires of the
//! data after a file's header: what the safetensors and GGUF readers both
//! use, in a file of its own so neither reader depends on the other.

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

/// What a checkpoint reader requires of the data after a file's header.
///
/// Weights are sized from headers alone, so a file cut after its header (its
/// first bytes, fetched without the data: `scripts/fetch_headers.py`) answers
/// as the whole file would. Reading one is asked for, never assumed: a file
/// cut by a failed download is otherwise an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileData {
    /// The file holds its data whole, as its header gives it (what an
    /// engine loads); anything else is an error.
    Whole,
    /// The file may end anywhere after its header: every check of the
    /// header is made, and none of the file's length past it but that it
    /// holds no more than the header gives.
    MayEndAfterHeader,
}
