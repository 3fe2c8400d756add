//! How the elements of one cached vector (a key head, a value head, an MLA
//! latent, a recurrent state part) are stored: dense elements (packed below 8
//! bits), llama.cpp-style blocks, or elements with a scale per vector.
//! All byte math is checked `const fn`; a partial byte or block rounds up, and
//! [`Storage::rounds_up`] says when it does.

use core::fmt;

use super::dtype::DType;
use crate::error::Overflow;

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
    /// vLLM's `int8_per_token_head`: int8 elements and a float32 scale per
    /// head per token, beside the K and beside the V
    /// (`TritonAttentionBackend.customize_spec`: `(head_size + head_size_v)
    /// x 1 + 2 x 4` bytes per head).
    pub const INT8_PER_TOKEN_HEAD: Storage = Storage::Scaled {
        dtype: DType::I8,
        scale_bytes: 4,
    };
    /// vLLM's `fp8_per_token_head`: fp8 (e4m3) elements and a float32 scale
    /// per head per token, beside the K and beside the V.
    pub const FP8_PER_TOKEN_HEAD: Storage = Storage::Scaled {
        dtype: DType::F8E4M3,
        scale_bytes: 4,
    };
    /// vLLM's `int4_per_token_head`: int4 elements two to a byte and a
    /// float32 scale per head per token, beside the K and beside the V
    /// (`head_size / 2 + 4` bytes each).
    pub const INT4_PER_TOKEN_HEAD: Storage = Storage::Scaled {
        dtype: DType::I4,
        scale_bytes: 4,
    };

    /// vLLM 0.33's `--kv-cache-dtype` names (`CacheDType`,
    /// `vllm/config/cache.py`) that kv sizes, with their storage, as a CUDA
    /// GPU resolves them: `fp8` is e4m3 there (`current_platform.fp8_dtype()`).
    /// vLLM's `nvfp4` is [`BlockFormat::NVFP4`], already kv's name.
    pub const VLLM_NAMES: [(&'static str, Storage); 8] = [
        ("float16", Storage::Dense(DType::F16)),
        ("bfloat16", Storage::Dense(DType::BF16)),
        ("fp8", Storage::Dense(DType::F8E4M3)),
        ("fp8_e4m3", Storage::Dense(DType::F8E4M3)),
        ("fp8_e5m2", Storage::Dense(DType::F8E5M2)),
        ("int8_per_token_head", Storage::INT8_PER_TOKEN_HEAD),
        ("fp8_per_token_head", Storage::FP8_PER_TOKEN_HEAD),
        ("int4_per_token_head", Storage::INT4_PER_TOKEN_HEAD),
    ];

    /// vLLM's name of a per-token-head format; `None` for any other storage.
    pub fn per_token_head_name(&self) -> Option<&'static str> {
        Storage::VLLM_NAMES
            .into_iter()
            .find(|(_, storage)| matches!(storage, Storage::Scaled { .. }) && storage == self)
            .map(|(name, _)| name)
    }

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

    /// Parses `"bf16"`, `"q8_0"`, `"nvfp4"`, `"fp8"`, `"int8_per_token_head"`:
    /// a dtype, a named block format, or one of vLLM's names
    /// ([`Storage::VLLM_NAMES`]).
    pub fn from_name(name: &str) -> Option<Storage> {
        DType::from_name(name)
            .map(Storage::Dense)
            .or_else(|| BlockFormat::from_name(name).map(Storage::Blocks))
            .or_else(|| {
                Storage::VLLM_NAMES
                    .into_iter()
                    .find(|(vllm, _)| *vllm == name)
                    .map(|(_, storage)| storage)
            })
    }

    /// Every name [`Storage::from_name`] accepts, comma separated.
    pub fn names_list() -> String {
        let blocks = BlockFormat::KNOWN.map(|f| f.name);
        let vllm = Storage::VLLM_NAMES.map(|(name, _)| name);
        format!(
            "{}, {}, {}",
            DType::names_list(),
            blocks.join(", "),
            vllm.join(", ")
        )
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
    /// `bf16`, `q8_0`, `int8_per_token_head` (vLLM's name), `u8+2B scale`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(name) = self.per_token_head_name() {
            return f.write_str(name);
        }
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
        // An f8e4m3 head with a 4-byte scale is vLLM's fp8_per_token_head.
        assert_eq!(fp8.to_string(), "fp8_per_token_head");
        let other = Storage::Scaled {
            dtype: DType::U8,
            scale_bytes: 2,
        };
        assert_eq!(other.bytes_for(64), Ok(66));
        assert_eq!(other.to_string(), "u8+2B scale");
        assert_eq!(other.per_token_head_name(), None);
        assert_eq!(Storage::Dense(DType::I8).per_token_head_name(), None);
    }

    #[test]
    fn vllms_per_token_head_formats_take_a_float32_scale_per_head() {
        // vLLM: (head_size + head_size_v) x 1 B + 2 x 4 B per head, int4 at
        // head_size / 2; per vector (one K or one V head of 128):
        // int8 128 + 4 = 132, fp8 128 + 4 = 132, int4 64 + 4 = 68.
        for (name, bytes) in [
            ("int8_per_token_head", 132),
            ("fp8_per_token_head", 132),
            ("int4_per_token_head", 68),
        ] {
            let storage = Storage::from_name(name).unwrap();
            assert_eq!(storage.bytes_for(128), Ok(bytes), "{name}");
            assert_eq!(storage.per_token_head_name(), Some(name));
            assert_eq!(storage.to_string(), name);
        }
        assert_eq!(
            Storage::from_name("int8_per_token_head"),
            Some(Storage::Scaled {
                dtype: DType::I8,
                scale_bytes: 4
            })
        );
    }

    #[test]
    fn vllms_dtype_names_read_as_a_cuda_gpu_reads_them() {
        for (name, dtype) in [
            ("fp8", DType::F8E4M3),
            ("fp8_e4m3", DType::F8E4M3),
            ("fp8_e5m2", DType::F8E5M2),
            ("float16", DType::F16),
            ("bfloat16", DType::BF16),
        ] {
            assert_eq!(Storage::from_name(name), Some(Storage::Dense(dtype)));
        }
        assert_eq!(Storage::from_name("auto"), None);
        assert_eq!(Storage::from_name("fp8_inc"), None);
        assert!(Storage::names_list().ends_with(
            "nvfp4, float16, bfloat16, fp8, fp8_e4m3, fp8_e5m2, int8_per_token_head, \
             fp8_per_token_head, int4_per_token_head"
        ));
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
        assert!(Storage::names_list().contains("q5_1, nvfp4, "));
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
