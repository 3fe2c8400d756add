//! The tables of names a value may take: dtypes, block and vLLM formats,
//! position policies, scopes, row drivers (kv-core's, which a test compares).

/// Element types by name, with their `DType` variant.
pub const DTYPES: &[(&str, &str)] = &[
    ("f64", "F64"),
    ("f32", "F32"),
    ("f16", "F16"),
    ("bf16", "BF16"),
    ("f8e4m3", "F8E4M3"),
    ("f8e5m2", "F8E5M2"),
    ("i8", "I8"),
    ("u8", "U8"),
    ("i4", "I4"),
    ("i2", "I2"),
    ("f4e2m1", "F4E2M1"),
];

/// llama.cpp-style block formats by name, with their `BlockFormat` constant.
pub const BLOCK_FORMATS: &[(&str, &str)] = &[
    ("q8_0", "Q8_0"),
    ("q4_0", "Q4_0"),
    ("q4_1", "Q4_1"),
    ("q5_0", "Q5_0"),
    ("q5_1", "Q5_1"),
    ("nvfp4", "NVFP4"),
];

/// vLLM's `--kv-cache-dtype` spellings of dtypes (`CacheDType`; `fp8` is
/// e4m3 on a CUDA GPU), with their `DType` variant: kv-core's
/// `Storage::VLLM_NAMES` that are dense.
pub const VLLM_DTYPES: &[(&str, &str)] = &[
    ("float16", "F16"),
    ("bfloat16", "BF16"),
    ("fp8", "F8E4M3"),
    ("fp8_e4m3", "F8E4M3"),
    ("fp8_e5m2", "F8E5M2"),
];

/// vLLM's per-token-head formats by name, with their `Storage` constant.
pub const PER_TOKEN_HEAD_FORMATS: &[(&str, &str)] = &[
    ("int8_per_token_head", "INT8_PER_TOKEN_HEAD"),
    ("fp8_per_token_head", "FP8_PER_TOKEN_HEAD"),
    ("int4_per_token_head", "INT4_PER_TOKEN_HEAD"),
];

/// A position policy: its name in `positions = NAME(..)`, its
/// `PositionPolicy` variant, the field its first (positional) input fills,
/// and the fields of its named inputs.
pub struct Policy {
    pub name: &'static str,
    pub variant: &'static str,
    pub first: &'static str,
    pub named: &'static [&'static str],
}

const VLLM_INPUTS: &[&str] = &["max_num_batched_tokens", "max_model_len", "block_size"];

/// The position policies `positions = ...` takes besides `bounded(..)`.
pub const POLICIES: &[Policy] = &[
    Policy {
        name: "window",
        variant: "Window",
        first: "window",
        named: &[],
    },
    Policy {
        name: "window_minus_one",
        variant: "WindowMinusOne",
        first: "window",
        named: &[],
    },
    Policy {
        name: "window_capped",
        variant: "WindowCapped",
        first: "window",
        named: &["max_cache_len"],
    },
    Policy {
        name: "window_plus_chunk",
        variant: "WindowPlusChunk",
        first: "window",
        named: &["chunk"],
    },
    Policy {
        name: "vllm_sliding_window",
        variant: "VllmSlidingWindow",
        first: "window",
        named: VLLM_INPUTS,
    },
    Policy {
        name: "vllm_chunked_local",
        variant: "VllmChunkedLocal",
        first: "chunk",
        named: VLLM_INPUTS,
    },
    Policy {
        name: "padded",
        variant: "PaddedTo",
        first: "count",
        named: &["multiple"],
    },
    Policy {
        name: "grows_by",
        variant: "GrowsBy",
        first: "count",
        named: &["step"],
    },
];

/// Bytes per element of a whole-byte `DType` variant, for checking literal
/// declarations while expanding; `None` for packed types below 8 bits, which
/// are checked by kv-core's own byte math at compile time instead.
pub const fn dtype_bytes(variant: &str) -> Option<u64> {
    match variant.as_bytes() {
        b"F64" => Some(8),
        b"F32" => Some(4),
        b"F16" | b"BF16" => Some(2),
        b"F8E4M3" | b"F8E5M2" | b"I8" | b"U8" => Some(1),
        _ => None,
    }
}

/// Scopes by name, with their `Scope` variant.
pub const SCOPES: &[(&str, &str)] = &[
    ("invocation", "Invocation"),
    ("request", "Request"),
    ("session", "Session"),
    ("model", "Model"),
];

/// The row drivers `rows = ...` takes.
pub const ROW_DRIVERS: &[&str] = &["max_num_seqs", "fixed"];

/// The first column of a name table.
pub fn column(table: &[(&'static str, &'static str)]) -> Vec<&'static str> {
    table.iter().map(|(name, _)| *name).collect()
}
