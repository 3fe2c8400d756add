//! How the elements of one cached vector (a key head, a value head, an MLA
//! latent, a recurrent state part) are stored: dense elements (packed below 8
//! bits), llama.cpp-style blocks, or elements with a scale per vector.
//! All byte math is checked `const fn`; a partial byte or block rounds up, and
//! [`Storage::rounds_up`] says when it does.

use core::fmt;

use crate::{DType, Overflow};

/// A block format: `block_elems` elements stored in `block_bytes` bytes,
/// scales included. A vector whose length is not a multiple of the block
/// rounds up to whole blocks.
///
/// The llama.cpp formats are `ggml_type_size / ggml_blck_size` of
/// `ggml.c`'s type traits; NVFP4 is 16 fp4 values and one fp8 scale per block,
/// which is vLLM's `head_dim / 2 + head_dim / 16` bytes per head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockFormat {
    name: &'static str,
    block_elems: u64,
    block_bytes: u64,
}

impl BlockFormat {
    /// llama.cpp `q8_0`: 32 int8 values and an f16 scale, 34 bytes.
    pub const Q8_0: BlockFormat = BlockFormat::new("q8_0", 32, 34);
    /// llama.cpp `q4_0`: 32 4-bit values and an f16 scale, 18 bytes.
    pub const Q4_0: BlockFormat = BlockFormat::new("q4_0", 32, 18);
    /// llama.cpp `q4_1`: 32 4-bit values, an f16 scale and an f16 minimum, 20 bytes.
    pub const Q4_1: BlockFormat = BlockFormat::new("q4_1", 32, 20);
    /// llama.cpp `q5_0`: 32 5-bit values and an f16 scale, 22 bytes.
    pub const Q5_0: BlockFormat = BlockFormat::new("q5_0", 32, 22);
    /// llama.cpp `q5_1`: 32 5-bit values, an f16 scale and an f16 minimum, 24 bytes.
    pub const Q5_1: BlockFormat = BlockFormat::new("q5_1", 32, 24);
    /// NVFP4: 16 fp4 (e2m1) values and one fp8 scale, 9 bytes.
    pub const NVFP4: BlockFormat = BlockFormat::new("nvfp4", 16, 9);

    /// The named formats, in the order error messages list them.
    pub const KNOWN: [BlockFormat; 6] = [
        BlockFormat::Q8_0,
        BlockFormat::Q4_0,
        BlockFormat::Q4_1,
        BlockFormat::Q5_0,
        BlockFormat::Q5_1,
        BlockFormat::NVFP4,
    ];

    /// A block format of `block_elems` elements in `block_bytes` bytes. Zero
    /// in either is rejected when a declaration holding it is validated.
    pub const fn new(name: &'static str, block_elems: u64, block_bytes: u64) -> BlockFormat {
        BlockFormat {
            name,
            block_elems,
            block_bytes,
        }
    }

    /// The format's name, e.g. `"q8_0"`.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// Elements per block.
    pub const fn block_elems(&self) -> u64 {
        self.block_elems
    }

    /// Bytes per block, scales included.
    pub const fn block_bytes(&self) -> u64 {
        self.block_bytes
    }

    /// A named format by its name (`"q8_0"`); `None` for anything else.
    pub fn from_name(name: &str) -> Option<BlockFormat> {
        BlockFormat::KNOWN.into_iter().find(|f| f.name == name)
    }
}

/// How the elements of one vector are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Storage {
    /// Dense elements of one dtype; below 8 bits they are packed and a
    /// partial byte rounds up.
    Dense(DType),
    /// Whole blocks of a block format; a partial block rounds up.
    Blocks(BlockFormat),
    /// Dense elements plus `scale_bytes` bytes of scale per vector, as vLLM's
    /// int8/fp8 per-token-head mode stores one f32 scale per head per token
    /// (`scale_bytes = 4`).
    Scaled {
        /// The elements' type.
        dtype: DType,
        /// Bytes of scale stored beside each vector.
        scale_bytes: u64,
    },
}

impl Storage {
    /// Bytes one vector of `elements` elements takes.
    pub const fn bytes_for(&self, elements: u64) -> Result<u64, Overflow> {
        match *self {
            Storage::Dense(dtype) => dtype.bytes_for(elements),
            Storage::Blocks(format) => {
                let Some(blocks) = elements.checked_add(format.block_elems.saturating_sub(1))
                else {
                    return Err(BLOCKS);
                };
                let Some(blocks) = blocks.checked_div(format.block_elems) else {
                    return Err(Overflow {
                        step: "blocks of a vector (a block format holds 0 elements)",
                    });
                };
                match blocks.checked_mul(format.block_bytes) {
                    Some(bytes) => Ok(bytes),
                    None => Err(BLOCKS),
                }
            }
            Storage::Scaled { dtype, scale_bytes } => match dtype.bytes_for(elements) {
                Ok(bytes) => match bytes.checked_add(scale_bytes) {
                    Some(bytes) => Ok(bytes),
                    None => Err(Overflow {
                        step: "bytes of a vector (elements + scale)",
                    }),
                },
                Err(overflow) => Err(overflow),
            },
        }
    }

    /// Whether a vector of `elements` elements ends in a partial byte or
    /// block that [`Storage::bytes_for`] rounds up.
    pub const fn rounds_up(&self, elements: u64) -> bool {
        match *self {
            Storage::Dense(dtype) | Storage::Scaled { dtype, .. } => dtype.rounds_up(elements),
            Storage::Blocks(format) => {
                format.block_elems != 0 && !elements.is_multiple_of(format.block_elems)
            }
        }
    }

    /// The dtype of dense or scaled storage; `None` for a block format.
    pub const fn dtype(&self) -> Option<DType> {
        match *self {
            Storage::Dense(dtype) | Storage::Scaled { dtype, .. } => Some(dtype),
            Storage::Blocks(_) => None,
        }
    }

    /// Parses `"bf16"`, `"q8_0"`, `"nvfp4"`: a dtype or a named block format.
    pub fn from_name(name: &str) -> Option<Storage> {
        DType::from_name(name)
            .map(Storage::Dense)
            .or_else(|| BlockFormat::from_name(name).map(Storage::Blocks))
    }

    /// Every name [`Storage::from_name`] accepts, comma separated.
    pub fn names_list() -> String {
        let blocks = BlockFormat::KNOWN.map(|f| f.name);
        format!("{}, {}", DType::names_list(), blocks.join(", "))
    }

    /// The rounding, in words, for a vector of `elements`, e.g.
    /// `"100 elements in q8_0 round up to 4 blocks of 32"`; `None` when exact.
    pub fn rounding(&self, elements: u64) -> Option<String> {
        if !self.rounds_up(elements) {
            return None;
        }
        Some(match *self {
            Storage::Blocks(format) => format!(
                "{elements} elements in {} round up to {} blocks of {}",
                format.name,
                elements.div_ceil(format.block_elems),
                format.block_elems
            ),
            Storage::Dense(dtype) | Storage::Scaled { dtype, .. } => format!(
                "{elements} {dtype} elements ({} bits each) round up to whole bytes",
                dtype.bits()
            ),
        })
    }
}

const BLOCKS: Overflow = Overflow {
    step: "bytes of a vector (blocks x bytes per block)",
};

impl From<DType> for Storage {
    fn from(dtype: DType) -> Storage {
        Storage::Dense(dtype)
    }
}

impl From<BlockFormat> for Storage {
    fn from(format: BlockFormat) -> Storage {
        Storage::Blocks(format)
    }
}

impl fmt::Display for Storage {
    /// `bf16`, `q8_0`, `fp8e4m3+4B scale`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Storage::Dense(dtype) => write!(f, "{dtype}"),
            Storage::Blocks(format) => f.write_str(format.name),
            Storage::Scaled { dtype, scale_bytes } => {
                write!(f, "{dtype}+{scale_bytes}B scale")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_cpp_blocks_take_their_published_bytes() {
        // ggml_row_size(type, 128) = 128 / 32 x type_size.
        let head = 128;
        assert_eq!(
            Storage::Blocks(BlockFormat::Q8_0).bytes_for(head),
            Ok(4 * 34)
        );
        assert_eq!(
            Storage::Blocks(BlockFormat::Q4_0).bytes_for(head),
            Ok(4 * 18)
        );
        assert_eq!(
            Storage::Blocks(BlockFormat::Q4_1).bytes_for(head),
            Ok(4 * 20)
        );
        assert_eq!(
            Storage::Blocks(BlockFormat::Q5_0).bytes_for(head),
            Ok(4 * 22)
        );
        assert_eq!(
            Storage::Blocks(BlockFormat::Q5_1).bytes_for(head),
            Ok(4 * 24)
        );
    }

    #[test]
    fn nvfp4_is_half_plus_a_sixteenth() {
        for head in [64u64, 128, 256] {
            let expected = head / 2 + head / 16;
            assert_eq!(
                Storage::Blocks(BlockFormat::NVFP4).bytes_for(head),
                Ok(expected)
            );
        }
    }

    #[test]
    fn a_partial_block_rounds_up_and_says_so() {
        let q8 = Storage::Blocks(BlockFormat::Q8_0);
        assert_eq!(q8.bytes_for(100), Ok(4 * 34));
        assert!(q8.rounds_up(100));
        assert!(!q8.rounds_up(96));
        assert_eq!(
            q8.rounding(100).as_deref(),
            Some("100 elements in q8_0 round up to 4 blocks of 32")
        );
        assert_eq!(q8.rounding(64), None);
        assert_eq!(q8.bytes_for(1), Ok(34));
    }

    #[test]
    fn per_vector_scales_add_their_bytes() {
        let fp8 = Storage::Scaled {
            dtype: DType::F8E4M3,
            scale_bytes: 4,
        };
        assert_eq!(fp8.bytes_for(128), Ok(132));
        assert_eq!(fp8.to_string(), "f8e4m3+4B scale");
    }

    #[test]
    fn zero_element_blocks_and_overflow_are_errors() {
        let empty = Storage::Blocks(BlockFormat::new("empty", 0, 4));
        assert!(empty.bytes_for(8).is_err());
        assert!(!empty.rounds_up(8));
        let q8 = Storage::Blocks(BlockFormat::Q8_0);
        assert!(q8.bytes_for(u64::MAX).is_err());
        let fat = Storage::Blocks(BlockFormat::new("fat", 1, 16));
        assert!(fat.bytes_for(u64::MAX / 8).is_err());
        assert_eq!(fat.bytes_for(3), Ok(48));
        let scaled = Storage::Scaled {
            dtype: DType::U8,
            scale_bytes: u64::MAX,
        };
        assert!(scaled.bytes_for(1).is_err());
    }

    #[test]
    fn names_parse_to_dtypes_and_blocks() {
        assert_eq!(
            Storage::from_name("bf16"),
            Some(Storage::Dense(DType::BF16))
        );
        assert_eq!(
            Storage::from_name("q4_0"),
            Some(Storage::Blocks(BlockFormat::Q4_0))
        );
        assert_eq!(Storage::from_name("q3_k"), None);
        assert!(Storage::names_list().ends_with("q5_1, nvfp4"));
        for (format, name) in BlockFormat::KNOWN
            .iter()
            .zip(["q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "nvfp4"])
        {
            assert_eq!(format.name(), name);
            assert_eq!(Storage::Blocks(*format).to_string(), name);
        }
        assert_eq!(Storage::Dense(DType::I4).to_string(), "i4");
        let q8 = BlockFormat::Q8_0;
        assert_eq!((q8.block_elems(), q8.block_bytes()), (32, 34));
        let nvfp4 = BlockFormat::NVFP4;
        assert_eq!((nvfp4.block_elems(), nvfp4.block_bytes()), (16, 9));
        assert_eq!(Storage::Dense(DType::BF16).dtype(), Some(DType::BF16));
        assert_eq!(Storage::Blocks(BlockFormat::Q8_0).dtype(), None);
    }
}
