//! ggml's tensor types as a GGUF file stores them: each type id with its
//! name, the elements per block and the bytes per block (`ggml.c`'s
//! `type_traits` at llama.cpp 0c1e57098; `ggml.h` numbers them).

/// One ggml tensor type: its id in the file, name, elements and bytes per
/// block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GgmlTensorType {
    /// `enum ggml_type`'s value, as the tensor info stores it.
    pub id: u32,
    /// `ggml_type_name`.
    pub name: &'static str,
    /// `ggml_blck_size`: elements per block (1 for plain types).
    pub block_elements: u64,
    /// `ggml_type_size`: bytes per block.
    pub block_bytes: u64,
}

const fn t(id: u32, name: &'static str, block_elements: u64, block_bytes: u64) -> GgmlTensorType {
    GgmlTensorType {
        id,
        name,
        block_elements,
        block_bytes,
    }
}

/// `GGML_TYPE_COUNT`: ids at or above it are refused by gguf.cpp.
pub const GGML_TYPE_COUNT: u32 = 43;

/// Every type a tensor can have. The ids ggml removed (4, 5, 31 to 33,
/// 36 to 38) are absent: gguf.cpp finds a block size of 0 for them and
/// refuses the tensor.
pub const GGML_TENSOR_TYPES: [GgmlTensorType; 35] = [
    t(0, "f32", 1, 4),
    t(1, "f16", 1, 2),
    t(2, "q4_0", 32, 18),
    t(3, "q4_1", 32, 20),
    t(6, "q5_0", 32, 22),
    t(7, "q5_1", 32, 24),
    t(8, "q8_0", 32, 34),
    // gguf-py 0.19 lists 40 bytes (f32 scale and sum); ggml's block_q8_1
    // holds two halves and 32 int8, static_assert-ed to 36.
    t(9, "q8_1", 32, 36),
    t(10, "q2_K", 256, 84),
    t(11, "q3_K", 256, 110),
    t(12, "q4_K", 256, 144),
    t(13, "q5_K", 256, 176),
    t(14, "q6_K", 256, 210),
    t(15, "q8_K", 256, 292),
    t(16, "iq2_xxs", 256, 66),
    t(17, "iq2_xs", 256, 74),
    t(18, "iq3_xxs", 256, 98),
    t(19, "iq1_s", 256, 50),
    t(20, "iq4_nl", 32, 18),
    t(21, "iq3_s", 256, 110),
    t(22, "iq2_s", 256, 82),
    t(23, "iq4_xs", 256, 136),
    t(24, "i8", 1, 1),
    t(25, "i16", 1, 2),
    t(26, "i32", 1, 4),
    t(27, "i64", 1, 8),
    t(28, "f64", 1, 8),
    t(29, "iq1_m", 256, 56),
    t(30, "bf16", 1, 2),
    t(34, "tq1_0", 256, 54),
    t(35, "tq2_0", 256, 66),
    t(39, "mxfp4", 32, 17),
    t(40, "nvfp4", 64, 36),
    t(41, "q1_0", 128, 18),
    t(42, "q2_0", 64, 18),
];

/// The type of id `id`, if ggml defines one.
pub fn ggml_tensor_type(id: u32) -> Option<GgmlTensorType> {
    GGML_TENSOR_TYPES.iter().copied().find(|t| t.id == id)
}

/// The type `ggml_type_name` calls `name`, if ggml defines one.
pub fn ggml_tensor_type_named(name: &str) -> Option<GgmlTensorType> {
    GGML_TENSOR_TYPES.iter().copied().find(|t| t.name == name)
}
