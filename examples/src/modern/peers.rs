//! What the peers say for the models of [`super`], worked out by hand from
//! their sources (`shared/reference/PEERS.md`, checked against vLLM 0.33.0's
//! and transformers 5.25.0's Python and llama.cpp's C++), never computed by
//! kv. Plain data: every figure is a literal expression with its arithmetic
//! written out, at [`super::DEPLOYMENT`] (max_model_len 8192, 2048 batched
//! tokens, block 16; llama.cpp n_ctx 8192 for one sequence, n_ubatch 512;
//! StaticCache 8192).
//!
//! - **vLLM 0.33.0**, with its defaults: async scheduling on (pipeline
//!   parallel 1), prefix caching on, no speculative decoding; on a Hopper GPU
//!   (FlashAttention, FlashInfer GDN prefill).
//!   - `page_size_bytes` = `B x kvh x (hd + hdv) x dt` per layer (MLA:
//!     `B x 576 x dt`); per token = page / B.
//!   - Full attention (`FullAttentionSpec.max_memory_usage_bytes`):
//!     `cdiv(max_model_len, B)` pages.
//!   - Sliding window (`vllm/v1/kv_cache_interface.py
//!     SlidingWindowSpec.max_admission_blocks_per_request`):
//!     `cdiv(min(W - 1 + max_in_flight_tokens, max_model_len), B) + 1` pages,
//!     where `max_in_flight_tokens` = `max_concurrent_batches x
//!     max_num_batched_tokens` (`vllm/config/vllm.py`): 2 x 2048 with async
//!     scheduling at pipeline parallel 1.
//!   - Hybrids (`vllm/platforms/interface.py
//!     Platform._align_hybrid_block_size`): B becomes `a x cdiv(state page,
//!     a x attention bytes per token per layer)`, `a` the backend's 16 (lcm
//!     with 64 where FlashInfer GDN layers export prefill checkpoints), and
//!     the state page is padded to the attention page. With prefix caching on
//!     (`vllm/model_executor/models/config.py MambaModelConfig`) the Mamba
//!     cache mode is `align`: `MambaSpec.max_memory_usage_bytes` =
//!     `page x (2 + num_speculative_blocks + num_prefill_checkpoint_blocks)`,
//!     the last 1 for Mamba2 layers and for GDN layers on FlashInfer, 0 for
//!     Mamba1.
//!   - Cross-attention (`CrossAttentionSpec.max_memory_usage_bytes`):
//!     `cdiv(max_num_encoder_input_tokens, B)` pages, that count being
//!     `max_num_batched_tokens` (`vllm/config/scheduler.py`).
//! - **llama.cpp** `ggml_row_size(type, kvh x hd)` per cell per layer for K and
//!   again for V. `n_ctx` is the total across sequences (`llama-context.cpp`):
//!   with n separate caches each sequence gets `GGML_PAD(n_ctx / n, 256)`
//!   cells, with a unified cache they share `n_ctx`. Per row here is one
//!   sequence holding all `GGML_PAD(n_ctx, 256)` cells (n_seq_max 1); SWA
//!   layers hold `GGML_PAD(min(n_ctx, n_swa x n_seq + n_ubatch), 256)` cells
//!   (`n_seq` counts only with a unified cache; `swa_full`, on in the C API's
//!   `llama_context_default_params`, off in llama-server and the other
//!   tools, makes them full size). Recurrent state: one f32 r/s per sequence.
//! - **transformers 5.25.0** the tensors `StaticCache(max_cache_len)` allocates
//!   on the first write: `(batch, kvh, max_cache_len, head_dim)` for K and for
//!   V (`StaticLayer.lazy_initialization` reads each one's head dim from the
//!   first states it is given); sliding layers `min(W, max_cache_len)`;
//!   linear-attention layers (`LinearAttentionLayer.lazy_initialization`) one
//!   conv state over `conv_kernel` positions and one recurrent state, each in
//!   the dtype of the first one the model hands it.
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
            "agrees: f16 K and V rows (2 B like bf16) over GGML_PAD(8192, 256) = 8192 cells, all one sequence's (n_seq_max 1)",
        ),
        transformers: both(
            2 * 32 * 8 * 128 * 2,        // K,V x L x kvh x hd x bf16
            2 * 32 * 8 * 8192 * 128 * 2, // K,V x L x (1, kvh, max_cache_len, hd) x bf16
            "agrees: transformers 5.25 StaticCache allocates (1, 8, 8192, 128) for K and for V per layer",
        ),
        naive: both(
            2 * 32 * 8 * 128 * 2,
            2 * 32 * 8 * 128 * 2 * 8192,
            "agrees: a plain full-attention model is what the naive formula assumes",
        ),
    },
    PeerRow {
        model: "Mistral-7B-v0.1",
        // SlidingWindowSpec: cdiv(min(4095 + 2 x 2048, 8192), 16) + 1
        // = cdiv(8191, 16) + 1 = 512 + 1 = 513 blocks = 8208 positions.
        vllm: both(
            32 * (16 * 8 * (128 + 128) * 2) / 16,
            32 * (u64::div_ceil(8191, 16) + 1) * (16 * 8 * (128 + 128) * 2),
            "agrees: vLLM 0.33 SlidingWindowSpec, cdiv(min(4095 + 2 x 2048 in flight, 8192), 16) + 1 = 513 blocks = 8208 positions, 16 more than full attention",
        ),
        llama_cpp: both(
            32 * (8 * 128 * 2 + 8 * 128 * 2),
            32 * (8 * 128 * 2 + 8 * 128 * 2) * 8192,
            "llama.cpp runs Mistral-7B-v0.1 as a plain llama with no sliding window (issues #3371, #3377): all 8192 cells, not vLLM 0.33's 8208",
        ),
        transformers: both(
            2 * 32 * 8 * 128 * 2,
            2 * 32 * 8 * 4096 * 128 * 2, // StaticSlidingWindowLayer: min(4096, 8192)
            "transformers 5.25 StaticSlidingWindowLayer holds min(W, max_cache_len) = 4096 (DynamicSlidingWindowLayer W - 1 = 4095); vLLM 0.33 adds 2 x 2048 in-flight tokens, caps at 8192 and adds a block: 8208",
        ),
        naive: both(
            2 * 32 * 8 * 128 * 2,
            2 * 32 * 8 * 128 * 2 * 8192,
            "ignores sliding_window 4096, which saves vLLM 0.33 nothing at max_model_len 8192: 4095 + 4096 in-flight tokens reach the cap, and the spare block makes 8208",
        ),
    },
    PeerRow {
        model: "Gemma-3-27B",
        // 8,192 B per layer per token = 16 x (128 + 128) x 2.
        // Sliding: cdiv(min(1023 + 2 x 2048, 8192), 16) + 1 = cdiv(5119, 16) + 1
        // = 320 + 1 = 321 blocks; global: cdiv(8192, 16) = 512 blocks.
        vllm: both(
            (52 + 10) * (16 * 16 * (128 + 128) * 2) / 16,
            52 * (u64::div_ceil(5119, 16) + 1) * (16 * 16 * (128 + 128) * 2)
                + 10 * (8192 / 16) * (16 * 16 * (128 + 128) * 2),
            "agrees: 52 vLLM 0.33 SlidingWindowSpec layers of cdiv(min(1023 + 2 x 2048 in flight, 8192), 16) + 1 = 321 blocks + 10 FullAttentionSpec layers of 512 blocks",
        ),
        // SWA cells: GGML_PAD(min(8192, 1024 x 1 + 512), 256) = 1536.
        llama_cpp: both(
            62 * (16 * 128 * 2 + 16 * 128 * 2),
            52 * (16 * 128 * 2 + 16 * 128 * 2) * 1536 + 10 * (16 * 128 * 2 + 16 * 128 * 2) * 8192,
            "llama.cpp's SWA cache holds GGML_PAD(n_swa 1024 + n_ubatch 512, 256) = 1536 cells where vLLM 0.33 holds 5136 (swa_full, the C API's default: 8192; llama-server's 4 auto slots share GGML_PAD(1024 x 4 + 512, 256) = 4608)",
        ),
        transformers: both(
            2 * 62 * 16 * 128 * 2,
            2 * 52 * 16 * 1024 * 128 * 2 + 2 * 10 * 16 * 8192 * 128 * 2,
            "transformers 5.25 StaticSlidingWindowLayer holds min(1024, 8192) = 1024 on the 52 sliding layers; vLLM 0.33 holds 5136 (W - 1 + 2 x 2048 in flight, + 1 block)",
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
        // transformers 5.25 DeepseekV2Attention.forward caches the compressed
        // latent: k_nope (1, 1, seq, kv_lora_rank 512) as the key and k_pe
        // (1, 1, seq, qk_rope_head_dim 64) as the value; StaticLayer takes each
        // one's head dim from the states it is given.
        transformers: both(
            27 * (512 + 64) * 2,
            27 * (1 * 8192 * 512 + 1 * 8192 * 64) * 2,
            "agrees: transformers 5.25 caches the compressed latent (DeepseekV2Attention.forward: \"Cache read / write is performed while the latent KV is still compressed\"), (1, 1, 8192, 512) as K and (1, 1, 8192, 64) as V per layer",
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
        // Mamba1 state page: (conv (4 - 1) x 8192 + ssm 8192 x 16) x 2 = 311,296 B.
        // Attention per token per layer: 8 x (128 + 128) x 2 = 4,096 B.
        // Block: 16 x cdiv(311,296, 16 x 4,096) = 16 x 5 = 80; page 80 x 4,096 =
        // 327,680 B, the Mamba page padded to it. 4 attention layers of
        // cdiv(8192, 80) = 103 pages; 28 Mamba1 layers of 2 pages (align mode,
        // no speculative or checkpoint pages).
        vllm: both(
            4 * (80 * 8 * (128 + 128) * 2) / 80,
            4 * u64::div_ceil(8192, 80) * (80 * 8 * (128 + 128) * 2)
                + 28 * 2 * (80 * 8 * (128 + 128) * 2),
            "agrees: vLLM 0.33 raises the block to 16 x cdiv(311,296, 16 x 4,096) = 80 (Platform._align_hybrid_block_size): 4 FullAttentionSpec layers of cdiv(8192, 80) = 103 blocks + 28 Mamba1 layers of 2 pages (prefix caching: align mode), each page padded from 311,296 to 327,680 B",
        ),
        // Attention f16 over 8192 cells; recurrent r = (d_conv - 1) x (d_inner
        // + 2 x 0 x d_state), s = d_state x d_inner, f32, one per sequence.
        llama_cpp: both(
            4 * (8 * 128 * 2 + 8 * 128 * 2),
            4 * (8 * 128 * 2 + 8 * 128 * 2) * 8192 + 28 * ((4 - 1) * 8192 + 16 * 8192) * 4,
            "llama.cpp keeps one f32 r/s state per sequence (16.62 MiB, no padding) and 8192 attention cells; vLLM 0.33 keeps 2 bf16 pages padded to 327,680 B (17.50 MiB) and 103 blocks of 80 = 8240 positions",
        ),
        // StaticCache: 4 StaticLayer (8192 positions); 28 LinearAttentionLayer:
        // conv (8192, d_conv 4) in bf16, ssm (8192, 16) in f32.
        transformers: both(
            2 * 4 * 8 * 128 * 2,
            2 * 4 * 8 * 8192 * 128 * 2 + 28 * (8192 * 4 * 2 + 8192 * 16 * 4),
            "transformers 5.25 keeps one ssm state per layer in f32 (the scan runs on A_log.float(); LinearAttentionLayer allocates zeros_like the state it is given) and the conv over d_conv = 4 positions, 576 KiB per layer, no padding; attention at 8192, not vLLM 0.33's 8240",
        ),
        naive: both(
            2 * 32 * 8 * 128 * 2,
            2 * 32 * 8 * 128 * 2 * 8192,
            "counts all 32 layers as attention at 8192 positions; 28 of them are Mamba with fixed state (vLLM 0.33: 2 pages of 320 KiB each)",
        ),
    },
    PeerRow {
        model: "Qwen3-Next-80B-A3B",
        // GDN state page: (conv (2 x 16 x 128 + 32 x 128) x (4 - 1) + ssm
        // 32 x 128 x 128) x 2 = 1,097,728 B. Attention per token per layer:
        // 2 x (256 + 256) x 2 = 2,048 B. On Hopper the GDN prefill backend is
        // FlashInfer, whose 64-token checkpoints set the alignment to lcm(16, 64)
        // = 64: block 64 x cdiv(1,097,728, 64 x 2,048) = 64 x 9 = 576; page
        // 576 x 2,048 = 1,179,648 B. 12 attention layers of cdiv(8192, 576) = 15
        // pages; 36 GDN layers of 2 + 1 checkpoint = 3 pages.
        vllm: both(
            12 * (576 * 2 * (256 + 256) * 2) / 576,
            12 * u64::div_ceil(8192, 576) * (576 * 2 * (256 + 256) * 2)
                + 36 * (2 + 1) * (576 * 2 * (256 + 256) * 2),
            "agrees, on a Hopper GPU (FlashInfer GDN prefill, 64-token checkpoints): block 64 x cdiv(1,097,728, 64 x 2,048) = 576; 12 FullAttentionSpec layers of cdiv(8192, 576) = 15 blocks + 36 GDN layers of 3 pages (align mode, 1 prefill checkpoint) padded to 1,179,648 B (Triton GDN prefill: block 544, 2 pages)",
        ),
        llama_cpp: none(
            "not compared: PEERS.md gives llama.cpp's recurrent state for Mamba and RWKV only, not Gated DeltaNet",
        ),
        // StaticCache: 12 StaticLayer (8192 positions); 36 LinearAttentionLayer:
        // conv (8192 channels, conv_kernel 4) in bf16, recurrent state
        // (32, 128, 128) in f32 (its delta-rule kernels return the state in f32).
        transformers: both(
            2 * 12 * 2 * 256 * 2,
            2 * 12 * 2 * 8192 * 256 * 2 + 36 * (8192 * 4 * 2 + 32 * 128 * 128 * 4),
            "transformers 5.25 keeps one DeltaNet state per layer in f32 and its conv over conv_kernel = 4 positions, no padding, attention at 8192; vLLM 0.33 keeps 3 bf16 pages of 1,179,648 B and 15 blocks of 576 = 8640 positions",
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
        // cdiv(max_num_encoder_input_tokens 2048, 16) = 128 blocks.
        vllm: both(
            32 * (16 * 20 * (64 + 64) * 2) / 16,
            32 * u64::div_ceil(2048, 16) * (16 * 20 * (64 + 64) * 2),
            "vLLM 0.33's CrossAttentionSpec sizes a request for max_num_encoder_input_tokens (= max_num_batched_tokens 2048), not the 1500 encoder positions: cdiv(2048, 16) = 128 blocks per layer (the decoder's self-attention cache is not compared)",
        ),
        llama_cpp: none("not compared: llama.cpp does not run Whisper; whisper.cpp, a separate project, keeps a decoder self-attention cache (kv_self) beside the cross-attention one (kv_cross)"),
        transformers: both(
            32 * 20 * 64 * 2 * 2,        // L x heads x hd x K,V x f16
            32 * 20 * 64 * 2 * 2 * 1500, // x encoder positions
            "agrees: transformers 5.25 EncoderDecoderCache keeps (1, 20, 1500, 64) for K and for V in each of 32 decoder layers' cross-attention cache; its self-attention cache, the decoder's own tokens, is beside it and not compared",
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
        // ggml_row_size(q8_0, 8 x 128) = 1024 / 32 x 34 = 1,088 B for K and for V,
        // over n_ctx 8192 cells held by one sequence (n_seq_max 1).
        llama_cpp: both(
            32 * (1024 / 32 * 34 + 1024 / 32 * 34),
            32 * (1024 / 32 * 34 + 1024 / 32 * 34) * 8192,
            "agrees: ggml_row_size(q8_0, 1024) = 32 blocks x 34 B for K and for V over 8192 cells, one sequence's; n_ctx is the total across sequences, so at 256 sequences separate caches get GGML_PAD(8192 / 256, 256) = 256 cells each (4,352 MiB in all) and a unified one shares 8192 (544 MiB), never 256 x 544 MiB",
        ),
        transformers: none(
            "not compared: transformers 5.25 QuantizedCache (quanto, HQQ, fp8 backends) has no q8_0 and publishes no byte formula",
        ),
        naive: both(
            2 * 32 * 8 * 128 * 2,
            2 * 32 * 8 * 128 * 2 * 8192,
            "ignores q8_0 and counts bf16 (reading 34 B per block as per element would be 32x over)",
        ),
    },
];
