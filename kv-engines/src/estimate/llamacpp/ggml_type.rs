//! The ggml types llama.cpp stores a cache in, with ggml's block sizes and
//! bytes per block (`ggml.c`, `type_traits`), and `ggml_row_size`.

use kv_core::{BlockFormat, DType};
use serde::Serialize;

/// ggml's `iq4_nl`: 32 non-linear 4-bit values and an f16 scale, 18 bytes.
/// Not among kv-core's named formats, which vLLM and `--kv-format` read.
const IQ4_NL: BlockFormat = BlockFormat::new("iq4_nl", 32, 18);

/// A ggml tensor type a llama.cpp cache can be stored in (`--cache-type-k`,
/// `--cache-type-v`); `f32` is also what recurrent state is held in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(into = "&'static str")]
#[non_exhaustive]
pub enum GgmlType {
    /// 4 bytes per element.
    F32,
    /// 2 bytes per element.
    F16,
    /// 2 bytes per element.
    Bf16,
    /// Blocks of 32: an f16 scale and 32 int8 (34 bytes).
    Q8_0,
    /// Blocks of 32: an f16 scale and 32 nibbles (18 bytes).
    Q4_0,
    /// Blocks of 32: f16 scale and minimum, 32 nibbles (20 bytes).
    Q4_1,
    /// Blocks of 32: an f16 scale, 32 high bits, 32 nibbles (22 bytes).
    Q5_0,
    /// Blocks of 32: f16 scale and minimum, high bits, nibbles (24 bytes).
    Q5_1,
    /// Blocks of 32: an f16 scale and 32 non-linear nibbles (18 bytes).
    Iq4Nl,
}

impl GgmlType {
    /// Every type, in the order names are listed in messages.
    pub const ALL: [GgmlType; 9] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Bf16,
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Iq4Nl,
    ];

    /// ggml's name (`ggml_type_name`), as llama.cpp prints it and takes it.
    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "f32",
            GgmlType::F16 => "f16",
            GgmlType::Bf16 => "bf16",
            GgmlType::Q8_0 => "q8_0",
            GgmlType::Q4_0 => "q4_0",
            GgmlType::Q4_1 => "q4_1",
            GgmlType::Q5_0 => "q5_0",
            GgmlType::Q5_1 => "q5_1",
            GgmlType::Iq4Nl => "iq4_nl",
        }
    }

    /// The type named `name` (ggml's names), if it is one of [`GgmlType::ALL`].
    pub fn from_name(name: &str) -> Option<GgmlType> {
        GgmlType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// How kv-core stores it: a dense dtype, or the block format whose
    /// elements and bytes per block are ggml's (kv-core's `q8_0`, ... are
    /// llama.cpp's own).
    fn storage(self) -> Stored {
        match self {
            GgmlType::F32 => Stored::Dense(DType::F32),
            GgmlType::F16 => Stored::Dense(DType::F16),
            GgmlType::Bf16 => Stored::Dense(DType::BF16),
            GgmlType::Q8_0 => Stored::Blocks(BlockFormat::Q8_0),
            GgmlType::Q4_0 => Stored::Blocks(BlockFormat::Q4_0),
            GgmlType::Q4_1 => Stored::Blocks(BlockFormat::Q4_1),
            GgmlType::Q5_0 => Stored::Blocks(BlockFormat::Q5_0),
            GgmlType::Q5_1 => Stored::Blocks(BlockFormat::Q5_1),
            GgmlType::Iq4Nl => Stored::Blocks(IQ4_NL),
        }
    }

    /// Elements per block (`ggml_blck_size`).
    pub fn block_size(self) -> u64 {
        match self.storage() {
            Stored::Dense(_) => 1,
            Stored::Blocks(format) => format.block_elems(),
        }
    }

    /// Bytes per block (`ggml_type_size`).
    pub fn block_bytes(self) -> u64 {
        match self.storage() {
            Stored::Dense(dtype) => dtype.bits() / 8,
            Stored::Blocks(format) => format.block_bytes(),
        }
    }

    /// Whether ggml counts it as quantized (`ggml_is_quantized`): blocks
    /// of more than one element.
    pub fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Bytes of a row of `elements` (`ggml_row_size`); `None` when the row
    /// is not whole blocks (ggml asserts it is) or the bytes overflow.
    pub fn row_bytes(self, elements: u64) -> Option<u64> {
        if !elements.is_multiple_of(self.block_size()) {
            return None;
        }
        (elements / self.block_size()).checked_mul(self.block_bytes())
    }
}

/// A ggml type as kv-core stores it: one element of a whole-byte dtype, or
/// a block format.
enum Stored {
    Dense(DType),
    Blocks(BlockFormat),
}

impl From<GgmlType> for &'static str {
    fn from(t: GgmlType) -> &'static str {
        t.name()
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
