//! What the peers say for the models of [`super`], worked out by hand from
//! their published formulas (`shared/reference/PEERS.md`), never computed by
//! kv. Plain data: every figure is a literal expression with its arithmetic
//! written out, at [`super::DEPLOYMENT`] (max_model_len 8192, 2048 batched
//! tokens, block 16; llama.cpp n_ctx 8192, n_ubatch 512; StaticCache 8192).
//!
//! - **vLLM** `page_size_bytes` = `B x kvh x (hd + hdv) x dt` per layer (MLA:
//!   `B x 576 x dt`); `max_memory_usage_bytes` = blocks x page, with
//!   `cdiv(max_model_len, B)` blocks for full attention,
//!   `cdiv(min(W - 1 + max_num_batched_tokens, max_model_len), B) + 1` for
//!   `SlidingWindowSpec`. Per token = page / B.
//! - **llama.cpp** `ggml_row_size(type, kvh x hd)` per cell per layer for K and
//!   again for V, over `GGML_PAD(n_ctx, 256)` cells; SWA layers over
//!   `GGML_PAD(min(n_ctx, n_swa x n_seq + n_ubatch), 256)` cells.
//! - **transformers** the tensors `StaticCache(max_cache_len)` allocates on the
//!   first write: `(batch, kvh, max_cache_len, head_dim)` for K and for V;
//!   sliding layers `min(W, max_cache_len)`.
//! - **naive** `2 x L x kvh x head_dim x dt x max_model_len`, full attention on
//!   every layer, no latent, no state, no quantization.
//!
//! Each figure carries one line, `why`: how it differs from kv's figure, or
//! `agrees: ...` when it does not.

// The arithmetic is written out as the formulas read, `x 1` byte for fp8 included.
#![allow(clippy::identity_op)]

/// One peer's figures for one model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerFigure {
    /// Bytes per token (per position) across the layers that keep positions;
    /// `None` where the peer has no such cache or no published formula.
    pub per_token: Option<u64>,
    /// Bytes per row (one sequence) at the deployment; `None` as above.
    pub per_row: Option<u64>,
    /// One line: why it differs from kv, or `agrees: ...`.
    pub why: &'static str,
}

/// Every peer's figures for one model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerRow {
    /// The model's name, as [`super::modern_models`] names it.
    pub model: &'static str,
    /// vLLM's spec formulas.
    pub vllm: PeerFigure,
    /// llama.cpp's sizing.
    pub llama_cpp: PeerFigure,
    /// The shapes transformers allocates.
    pub transformers: PeerFigure,
    /// A calculator that assumes full attention everywhere.
    pub naive: PeerFigure,
}

impl PeerRow {
    /// The four figures with the peer's name, in the page's order.
    pub fn named(&self) -> [(&'static str, &PeerFigure); 4] {
        [
            ("vLLM", &self.vllm),
            ("llama.cpp", &self.llama_cpp),
            ("transformers", &self.transformers),
            ("naive", &self.naive),
        ]
    }
}

/// The peers' row for `model`.
pub fn peer_row(model: &str) -> Option<&'static PeerRow> {
    PEERS.iter().find(|row| row.model == model)
}

const fn both(per_token: u64, per_row: u64, why: &'static str) -> PeerFigure {
    PeerFigure {
        per_token: Some(per_token),
        per_row: Some(per_row),
        why,
    }
}

const fn none(why: &'static str) -> PeerFigure {
    PeerFigure {
        per_token: None,
        per_row: None,
        why,
    }
}

/// The peers' figures, one row per model of [`super::modern_models`].
pub const PEERS: [PeerRow; 8] = [
    PeerRow {
        model: "Llama-3-8B",
        // page 16 x 8 x (128 + 128) x 2 = 65,536 B per layer; 512 blocks.
        vllm: both(
            32 * (16 * 8 * (128 + 128) * 2) / 16, // L x page / B
            32 * (8192 / 16) * (16 * 8 * (128 + 128) * 2), // L x cdiv(8192, 16) x page
            "agrees: FullAttentionSpec, cdiv(8192, 16) = 512 blocks of 65,536 B per layer",
        ),
        // f16 cache: ggml_row_size(f16, 8 x 128) = 2,048 B for K and for V.
        llama_cpp: both(
            32 * (8 * 128 * 2 + 8 * 128 * 2), // L x (K row + V row)
            32 * (8 * 128 * 2 + 8 * 128 * 2) * 8192, // x GGML_PAD(8192, 256) cells
            "agrees: f16 K and V rows (2 B like bf16) over GGML_PAD(8192, 256) = 8192 cells",
        ),
        transformers: both(
            2 * 32 * 8 * 128 * 2,        // K,V x L x kvh x hd x bf16
            2 * 32 * 8 * 8192 * 128 * 2, // K,V x L x (1, kvh, max_cache_len, hd) x bf16
            "agrees: StaticCache allocates (1, 8, 8192, 128) for K and for V per layer",
        ),
        naive: both(
            2 * 32 * 8 * 128 * 2,
            2 * 32 * 8 * 128 * 2 * 8192,
            "agrees: a plain full-attention model is what the naive formula assumes",
        ),
    },
    PeerRow {
        model: "Mistral-7B-v0.1",
        // SlidingWindowSpec: cdiv(min(4095 + 2048, 8192), 16) + 1 = 384 + 1 = 385 blocks.
        vllm: both(
            32 * (16 * 8 * (128 + 128) * 2) / 16,
            32 * (u64::div_ceil(6143, 16) + 1) * (16 * 8 * (128 + 128) * 2),
            "agrees: SlidingWindowSpec, cdiv(min(4095 + 2048, 8192), 16) + 1 = 385 blocks (one block more than the window needs)",
        ),
        llama_cpp: both(
            32 * (8 * 128 * 2 + 8 * 128 * 2),
            32 * (8 * 128 * 2 + 8 * 128 * 2) * 8192,
            "llama.cpp runs Mistral-7B-v0.1 as a plain llama with no sliding window (issues #3371, #3377): all 8192 cells, not vLLM's 6160",
        ),
        transformers: both(
            2 * 32 * 8 * 128 * 2,
            2 * 32 * 8 * 4096 * 128 * 2, // StaticSlidingWindowLayer: min(4096, 8192)
            "StaticSlidingWindowLayer holds min(W, max_cache_len) = 4096 (DynamicSlidingWindowLayer W - 1 = 4095); vLLM adds 2048 batched tokens and a block: 6160",
        ),
        naive: both(
            2 * 32 * 8 * 128 * 2,
            2 * 32 * 8 * 128 * 2 * 8192,
            "ignores sliding_window 4096: every layer at max_model_len 8192 instead of 6160",
        ),
    },
    PeerRow {
        model: "Gemma-3-27B",
        // 8,192 B per layer per token = 16 x (128 + 128) x 2.
        // Sliding: cdiv(min(1023 + 2048, 8192), 16) + 1 = 192 + 1 = 193 blocks;
        // global: cdiv(8192, 16) = 512 blocks.
        vllm: both(
            (52 + 10) * (16 * 16 * (128 + 128) * 2) / 16,
            52 * (u64::div_ceil(3071, 16) + 1) * (16 * 16 * (128 + 128) * 2)
                + 10 * (8192 / 16) * (16 * 16 * (128 + 128) * 2),
            "agrees: 52 SlidingWindowSpec layers of 193 blocks + 10 FullAttentionSpec layers of 512 blocks",
        ),
        // SWA cells: GGML_PAD(min(8192, 1024 x 1 + 512), 256) = 1536.
        llama_cpp: both(
            62 * (16 * 128 * 2 + 16 * 128 * 2),
            52 * (16 * 128 * 2 + 16 * 128 * 2) * 1536 + 10 * (16 * 128 * 2 + 16 * 128 * 2) * 8192,
            "llama.cpp's SWA cache holds GGML_PAD(n_swa 1024 + n_ubatch 512, 256) = 1536 cells where vLLM holds 3088 (with swa_full: 8192)",
        ),
        transformers: both(
            2 * 62 * 16 * 128 * 2,
            2 * 52 * 16 * 1024 * 128 * 2 + 2 * 10 * 16 * 8192 * 128 * 2,
            "StaticSlidingWindowLayer holds min(1024, 8192) = 1024 on the 52 sliding layers; vLLM holds 3088 (W - 1 + 2048 batched, + 1 block)",
        ),
        naive: both(
            2 * 62 * 16 * 128 * 2,
            2 * 62 * 16 * 128 * 2 * 8192,
            "ignores the sliding pattern: all 62 layers global at 8192 positions (the error grows with max_model_len)",
        ),
    },
    PeerRow {
        model: "DeepSeek-V2-Lite",
        // MLAAttentionSpec page: 16 x 1 x (512 + 64) x 2 = 18,432 B per layer.
        vllm: both(
            27 * (16 * (512 + 64) * 2) / 16,
            27 * (8192 / 16) * (16 * (512 + 64) * 2),
            "agrees: MLAAttentionSpec, 512 blocks of 16 x 576 x 2 = 18,432 B per layer, no K/V doubling",
        ),
        llama_cpp: none(
            "not compared: PEERS.md records no llama.cpp MLA cache width (which of K/V its DeepSeek2 cache keeps was not verified)",
        ),
        // transformers' DeepseekV2 caches decompressed per-head K (qk_nope 128 +
        // rope 64 = 192) and V (v_head_dim 128) for all 16 heads.
        transformers: both(
            27 * 16 * ((128 + 64) + 128) * 2,
            27 * 16 * ((128 + 64) + 128) * 2 * 8192,
            "transformers caches decompressed K (16 heads x 192) and V (16 x 128) per layer, not the 576-wide latent: 8.9x",
        ),
        // No num_key_value_heads: heads fall back to num_attention_heads 16;
        // no head_dim: 2048 / 16 = 128.
        naive: both(
            2 * 27 * 16 * 128 * 2,
            2 * 27 * 16 * 128 * 2 * 8192,
            "treats MLA as 16 K/V heads of 2048 / 16 = 128: 221,184 B per token for a 31,104 B latent",
        ),
    },
    PeerRow {
        model: "Jamba-v0.1",
        // 4 attention layers: page 16 x 8 x 256 x 2 = 65,536 B, 512 blocks.
        // 28 Mamba layers (MambaSpec, 1 + 0 speculative): conv (4 - 1) x 8192 +
        // ssm 8192 x 16, bf16.
        vllm: both(
            4 * (16 * 8 * (128 + 128) * 2) / 16,
            4 * (8192 / 16) * (16 * 8 * (128 + 128) * 2) + 28 * ((4 - 1) * 8192 + 8192 * 16) * 2,
            "agrees: 4 FullAttentionSpec layers + 28 MambaSpec pages of conv (3, 8192) + ssm (8192, 16) in bf16, before vLLM's hybrid page padding",
        ),
        // Attention f16 over 8192 cells; recurrent r = (d_conv - 1) x (d_inner
        // + 2 x 0 x d_state), s = d_state x d_inner, kept in f32.
        llama_cpp: both(
            4 * (8 * 128 * 2 + 8 * 128 * 2),
            4 * (8 * 128 * 2 + 8 * 128 * 2) * 8192 + 28 * ((4 - 1) * 8192 + 16 * 8192) * 4,
            "llama.cpp keeps the recurrent r/s state in f32: twice vLLM's bf16 state (8.31 MiB more per sequence)",
        ),
        // Hybrid cache: attention grows to 8192 positions; conv (d_inner,
        // d_conv), ssm (d_inner, d_state) in the model dtype.
        transformers: both(
            2 * 4 * 8 * 128 * 2,
            2 * 4 * 8 * 8192 * 128 * 2 + 28 * (8192 * 4 + 8192 * 16) * 2,
            "transformers' conv state keeps d_conv = 4 positions where vLLM keeps d_conv - 1 = 3 (+448 KiB per sequence)",
        ),
        naive: both(
            2 * 32 * 8 * 128 * 2,
            2 * 32 * 8 * 128 * 2 * 8192,
            "counts all 32 layers as attention at 8192 positions; 28 of them are Mamba with 304 KiB of fixed state each",
        ),
    },
    PeerRow {
        model: "Qwen3-Next-80B-A3B",
        // 12 full-attention layers: page 16 x 2 x (256 + 256) x 2 = 32,768 B, 512 blocks.
        // 36 Gated DeltaNet layers (MambaSpec, 1 + 0 speculative): conv over
        // 2 x 16 x 128 + 32 x 128 = 8192 channels x (4 - 1) positions, ssm
        // 32 x 128 x 128, both bf16.
        vllm: both(
            12 * (16 * 2 * (256 + 256) * 2) / 16,
            12 * (8192 / 16) * (16 * 2 * (256 + 256) * 2)
                + 36 * ((2 * 16 * 128 + 32 * 128) * (4 - 1) + 32 * 128 * 128) * 2,
            "agrees: 12 FullAttentionSpec layers + 36 MambaSpec pages of conv (8192, 3) + ssm (32, 128, 128) in bf16, before vLLM's hybrid page padding",
        ),
        llama_cpp: none(
            "not compared: PEERS.md gives llama.cpp's recurrent state for Mamba and RWKV only, not Gated DeltaNet",
        ),
        // Qwen3NextDynamicCache: attention grown to 8192 positions; conv
        // (8192 channels, conv_kernel 4) in bf16; recurrent state (32, 128, 128)
        // in f32 (its delta-rule kernels return the state in f32).
        transformers: both(
            2 * 12 * 2 * 256 * 2,
            2 * 12 * 2 * 8192 * 256 * 2 + 36 * (8192 * 4 * 2 + 32 * 128 * 128 * 4),
            "transformers keeps the DeltaNet state in f32 and its conv over conv_kernel = 4 positions; vLLM bf16 and 3",
        ),
        // 48 layers x 2 kvh x head_dim 256, every layer attention.
        naive: both(
            2 * 48 * 2 * 256 * 2,
            2 * 48 * 2 * 256 * 2 * 8192,
            "counts all 48 layers as attention; 36 are Gated DeltaNet with fixed state (ignoring head_dim 256 for 2048 / 16 = 128 would halve it)",
        ),
    },
    PeerRow {
        model: "Whisper-large-v3",
        // CrossAttentionSpec page: 16 x 20 x (64 + 64) x 2 = 81,920 B per layer;
        // cdiv(1500, 16) = 94 blocks.
        vllm: both(
            32 * (16 * 20 * (64 + 64) * 2) / 16,
            32 * u64::div_ceil(1500, 16) * (16 * 20 * (64 + 64) * 2),
            "vLLM rounds the 1500 encoder positions up to cdiv(1500, 16) = 94 blocks = 1504 positions",
        ),
        llama_cpp: none("not compared: llama.cpp does not run Whisper (whisper.cpp is a separate project)"),
        transformers: both(
            32 * 20 * 64 * 2 * 2,        // L x heads x hd x K,V x f16
            32 * 20 * 64 * 2 * 2 * 1500, // x encoder positions
            "agrees: EncoderDecoderCache keeps (1, 20, 1500, 64) for K and for V in each of 32 decoder layers",
        ),
        naive: PeerFigure {
            per_token: Some(0),
            per_row: Some(0),
            why: "a decoder-only calculator has no encoder positions: the 1500-position cross-attention cache is missing",
        },
    },
    PeerRow {
        model: "Llama-3-8B q8_0 KV",
        // vLLM has no q8_0; its 8-bit KV is fp8, 1 B per element, per-tensor scale.
        vllm: both(
            32 * (16 * 8 * (128 + 128) * 1) / 16,
            32 * (8192 / 16) * (16 * 8 * (128 + 128) * 1),
            "vLLM has no q8_0; its --kv-cache-dtype fp8 keeps 1 B per element and one scale per tensor, not 34 B per 32",
        ),
        // ggml_row_size(q8_0, 8 x 128) = 1024 / 32 x 34 = 1,088 B for K and for V.
        llama_cpp: both(
            32 * (1024 / 32 * 34 + 1024 / 32 * 34),
            32 * (1024 / 32 * 34 + 1024 / 32 * 34) * 8192,
            "agrees: ggml_row_size(q8_0, 1024) = 32 blocks x 34 B for K and for V over 8192 cells",
        ),
        transformers: none(
            "not compared: QuantizedCache (quanto, HQQ) has no q8_0 and publishes no byte formula",
        ),
        naive: both(
            2 * 32 * 8 * 128 * 2,
            2 * 32 * 8 * 128 * 2 * 8192,
            "ignores q8_0 and counts bf16 (reading 34 B per block as per element would be 32x over)",
        ),
    },
];
