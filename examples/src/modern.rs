//! Modern models declared as a model author would, each reading its geometry
//! from its published `config.json` (`examples/configs/<name>/`) after load:
//! full attention, a sliding window, a hybrid sliding/global pattern, an MLA
//! latent, hybrids of attention with Mamba and with Gated DeltaNet state,
//! encoder cross-attention and a quantized (q8_0) cache. Each declaration
//! names which engine's cache it describes in `cache`.
//!
//! [`peers`] holds what vLLM 0.33, llama.cpp, transformers 5.25 and a naive
//! calculator say for the same models, worked out by hand from their sources;
//! the declarations that describe vLLM's cache follow vLLM 0.33's rules
//! (async scheduling on, prefix caching on), so that they can be set beside
//! it;
//! [`side_by_side_markdown`] sets the two side by side and explains every
//! difference. `cargo run -p kv-examples --example modern_models` prints it;
//! `... -- --write-docs` writes [`MODERN_DOCS_PATH`].
//!
//! Each model is a `#[derive(ModelLocalKv)]` struct holding what its `load()`
//! read from the config (a [`Geometry`] per layer group, with its layer count
//! from `LayerPattern::count`, a [`Latent`], a [`RecurrentState`], a window);
//! its `#[kv(...)]` attributes declare the caches from those after-load values
//! and [`DEPLOYMENT`]'s engine settings.

use std::fmt::Write as _;
use std::path::PathBuf;

use kv_core::pattern::LayerKind;
use kv_core::units::human_bytes;
use kv_core::{
    DType, Geometry, HfConfig, KvError, Latent, ModelLocalKv, Overflow, RecurrentState, StatePart,
    Storage,
};

pub mod peers;

/// The one deployment every figure on the page is computed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deployment {
    /// vLLM `max_model_len`: the longest sequence.
    pub max_model_len: u64,
    /// vLLM `max_num_batched_tokens`: the scheduler's token budget per step.
    pub max_num_batched_tokens: u64,
    /// vLLM `VllmConfig.max_concurrent_batches`: 2 with async scheduling
    /// (vLLM 0.33's default) at pipeline parallel 1; its
    /// `max_in_flight_tokens` is this times `max_num_batched_tokens`
    /// (`vllm/config/vllm.py`).
    pub vllm_batches_in_flight: u64,
    /// vLLM `block_size`: tokens per KV block (`CacheConfig.DEFAULT_BLOCK_SIZE`;
    /// a hybrid raises it, see [`vllm_hybrid_block_size`]).
    pub block_size: u64,
    /// vLLM `max_num_seqs`: sequences in flight.
    pub max_num_seqs: u64,
    /// llama.cpp `n_ctx`: cells in all, the total across its sequences (not
    /// per sequence), padded to 256.
    pub llama_n_ctx: u64,
    /// llama.cpp `n_ubatch` (its default, 512).
    pub llama_n_ubatch: u64,
    /// llama.cpp `n_seq_max`: 1, so one sequence holds all `n_ctx` cells (with
    /// n separate caches each would get `GGML_PAD(n_ctx / n, 256)`).
    pub llama_n_seq_max: u64,
    /// transformers `StaticCache(max_cache_len=...)`.
    pub max_cache_len: u64,
}

/// `max_model_len` 8192, `max_num_batched_tokens` 2048 with 2 batches in
/// flight, block 16, `max_num_seqs` 256; llama.cpp `n_ctx` 8192 for one
/// sequence, `n_ubatch` 512; transformers `StaticCache(max_cache_len=8192)`.
pub const DEPLOYMENT: Deployment = Deployment {
    max_model_len: 8192,
    max_num_batched_tokens: 2048,
    vllm_batches_in_flight: 2,
    block_size: 16,
    max_num_seqs: 256,
    llama_n_ctx: 8192,
    llama_n_ubatch: 512,
    llama_n_seq_max: 1,
    max_cache_len: 8192,
};

/// vLLM 0.33's `max_in_flight_tokens` at [`DEPLOYMENT`]: 2 batches in flight
/// (async scheduling, pipeline parallel 1) x `max_num_batched_tokens` 2048 =
/// 4096, what `SlidingWindowSpec.max_admission_blocks_per_request` adds to
/// the window.
pub const VLLM_IN_FLIGHT_TOKENS: u64 =
    DEPLOYMENT.vllm_batches_in_flight * DEPLOYMENT.max_num_batched_tokens;

/// The versions whose rules the peers' figures follow.
pub const PEER_VERSIONS: &str = "vLLM 0.33.0, transformers 5.25.0";

impl Deployment {
    /// The deployment in one line, as the page states it.
    pub fn describe(&self) -> String {
        format!(
            "vLLM 0.33: max_model_len {}, max_num_batched_tokens {}, block_size {}, max_num_seqs {}, \
             async scheduling on and pipeline parallel 1 ({} batches in flight: {} tokens), \
             prefix caching on (Mamba cache mode align), no speculative decoding, one Hopper GPU \
             (FlashAttention; FlashInfer GDN prefill); \
             llama.cpp: n_ctx {} cells in all (the total across sequences, not per sequence), \
             n_seq_max {}, n_ubatch {}, swa_full off (llama-server's default; the C API's \
             llama_context_default_params turns it on), separate caches (llama-server's auto \
             -np gives 4 slots sharing n_ctx in one unified cache); \
             transformers 5.25: StaticCache(max_cache_len={})",
            self.max_model_len,
            self.max_num_batched_tokens,
            self.block_size,
            self.max_num_seqs,
            self.vllm_batches_in_flight,
            self.vllm_batches_in_flight * self.max_num_batched_tokens,
            self.llama_n_ctx,
            self.llama_n_seq_max,
            self.llama_n_ubatch,
            self.max_cache_len
        )
    }
}

/// vLLM 0.33's attention block for a hybrid of attention and recurrent state
/// (`vllm/platforms/interface.py` `Platform._align_hybrid_block_size`): the
/// block grows in steps of `alignment` tokens until one attention page
/// (block x attention bytes per token per layer) holds one state page,
/// `alignment x cdiv(state_page, alignment x attention_bytes_per_token)`, and
/// never shrinks below `block_size`. `alignment` is the attention backend's
/// smallest kernel block (16 for FlashAttention) and, in Mamba cache mode
/// `align`, its lcm with the layers' prefill checkpoint alignment. `None` on
/// overflow or a zero input.
pub const fn vllm_hybrid_block_size(
    state_page: u64,
    attention_bytes_per_token: u64,
    alignment: u64,
    block_size: u64,
) -> Option<u64> {
    let Some(step) = alignment.checked_mul(attention_bytes_per_token) else {
        return None;
    };
    if step == 0 {
        return None;
    }
    match state_page.div_ceil(step).checked_mul(alignment) {
        Some(block) if block > block_size => Some(block),
        Some(_) => Some(block_size),
        None => None,
    }
}

/// FlashInfer's Gated DeltaNet prefill emits states every multiple of 64
/// tokens (`vllm/v1/attention/backends/gdn_attn.py`
/// `FLASHINFER_GDN_CHECKPOINT_ALIGNMENT`); in Mamba cache mode `align` vLLM
/// 0.33 keeps hybrid blocks on it (`get_mamba_prefill_checkpoint_alignment`).
pub const FLASHINFER_GDN_CHECKPOINT_ALIGNMENT: u64 = 64;

const fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The least common multiple, as vLLM combines block alignments (`math.lcm`).
const fn lcm(a: u64, b: u64) -> u64 {
    if a == 0 || b == 0 {
        0
    } else {
        a / gcd(a, b) * b
    }
}

/// A recurrent state as vLLM 0.33 keeps it beside attention: `parts`, then
/// `page_padding` bytes up to the attention page of the block
/// [`vllm_hybrid_block_size`] gives, `pages` pages per layer. Returns the
/// block and the state.
fn vllm_hybrid_state(
    layers: u64,
    mut parts: Vec<StatePart>,
    attention: &Geometry,
    alignment: u64,
    pages: u64,
    declaration: &'static str,
) -> Result<(u64, RecurrentState), KvError> {
    let state_page = RecurrentState::from_parts(1, parts.clone())
        .bytes_per_layer()
        .map_err(overflow(declaration))?;
    let per_token = attention
        .with_layers(1)
        .bytes_per_position()
        .map_err(overflow(declaration))?;
    let too_big = || KvError::Overflow {
        declaration: declaration.to_owned(),
        step: "vLLM's hybrid block size",
    };
    let block = vllm_hybrid_block_size(state_page, per_token, alignment, DEPLOYMENT.block_size)
        .ok_or_else(too_big)?;
    let page = block.checked_mul(per_token).ok_or_else(too_big)?;
    if page > state_page {
        parts.push(StatePart::new(
            "page_padding",
            [page - state_page, 1, 1],
            DType::U8,
        ));
    }
    Ok((
        block,
        RecurrentState::from_parts(layers, parts).with_slots(pages),
    ))
}

/// Where a shipped config lives: `examples/configs/<name>/config.json`.
pub fn config_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("configs")
        .join(name)
        .join("config.json")
}

/// A byte-math overflow while building a declaration, named.
fn overflow(declaration: &'static str) -> impl FnOnce(Overflow) -> KvError {
    move |o| KvError::Overflow {
        declaration: declaration.to_owned(),
        step: o.step,
    }
}

fn missing(what: &'static str, problem: &str) -> KvError {
    KvError::Config {
        what,
        problem: problem.to_owned(),
    }
}

/// Llama-3-8B in vLLM: one full-attention cache over every layer.
#[derive(ModelLocalKv)]
#[kv(
    name = "kv",
    cache = "vLLM FullAttentionSpec (paged K/V, bf16)",
    geometry = self.geometry,
    positions = padded(DEPLOYMENT.max_model_len, multiple = DEPLOYMENT.block_size),
    scope = request,
    rows = max_num_seqs,
    note = "head_dim 128 = hidden_size 4096 / num_attention_heads 32 (no head_dim key)",
)]
pub struct Llama3_8b {
    /// Every layer's K/V geometry, read from the config.
    pub geometry: Geometry,
}

impl Llama3_8b {
    /// Loads `examples/configs/llama-3-8b/config.json`.
    pub fn load() -> Result<Llama3_8b, KvError> {
        let config = HfConfig::from_path(config_path("llama-3-8b"))?;
        Ok(Llama3_8b {
            geometry: config.geometry()?,
        })
    }
}

/// Mistral-7B-v0.1 in vLLM 0.33: every layer slides over `sliding_window` 4096.
#[derive(ModelLocalKv)]
#[kv(
    name = "sliding",
    cache = "vLLM SlidingWindowSpec (paged K/V, bf16)",
    geometry = self.geometry,
    positions = vllm_sliding_window(
        self.window,
        max_num_batched_tokens = VLLM_IN_FLIGHT_TOKENS,
        max_model_len = DEPLOYMENT.max_model_len,
        block_size = DEPLOYMENT.block_size
    ),
    scope = request,
    rows = max_num_seqs,
    assumes = "2 batches in flight (async scheduling) x max_num_batched_tokens 2048 = \
               4096 tokens past the window (vLLM 0.33 VllmConfig.max_in_flight_tokens, \
               pipeline parallel 1)",
    note = "every layer slides: Mistral-7B-v0.1 has no global layers",
)]
pub struct Mistral7b {
    /// Every layer's K/V geometry, read from the config.
    pub geometry: Geometry,
    /// `sliding_window`, read from the config.
    pub window: u64,
}

impl Mistral7b {
    /// Loads `examples/configs/mistral-7b-v0.1/config.json`.
    pub fn load() -> Result<Mistral7b, KvError> {
        let config = HfConfig::from_path(config_path("mistral-7b-v0.1"))?;
        let window = config.sliding_window()?.ok_or_else(|| {
            missing(
                "sliding_window",
                "Mistral-7B-v0.1 slides every layer; the config says no window",
            )
        })?;
        Ok(Mistral7b {
            geometry: config.geometry()?,
            window,
        })
    }
}

/// transformers' `Gemma3TextConfig` default for `sliding_window_pattern`:
/// one global layer in 6.
pub const GEMMA3_SLIDING_WINDOW_PATTERN: u64 = 6;

/// Gemma-3-27B in vLLM 0.33: 52 sliding layers (window 1024) and 10 global ones.
#[derive(ModelLocalKv)]
#[kv(
    name = "sliding",
    cache = "vLLM SlidingWindowSpec (paged K/V, bf16)",
    geometry = self.sliding,
    positions = vllm_sliding_window(
        self.window,
        max_num_batched_tokens = VLLM_IN_FLIGHT_TOKENS,
        max_model_len = DEPLOYMENT.max_model_len,
        block_size = DEPLOYMENT.block_size
    ),
    scope = request,
    rows = max_num_seqs,
    assumes = "2 batches in flight (async scheduling) x max_num_batched_tokens 2048 = \
               4096 tokens past the window (vLLM 0.33 VllmConfig.max_in_flight_tokens, \
               pipeline parallel 1)",
    note = "sliding_window_pattern 6 given explicitly: the published config leaves it to \
            transformers' Gemma3TextConfig default (6)",
)]
#[kv(
    name = "global",
    cache = "vLLM FullAttentionSpec (paged K/V, bf16)",
    geometry = self.global,
    positions = padded(DEPLOYMENT.max_model_len, multiple = DEPLOYMENT.block_size),
    scope = request,
    rows = max_num_seqs,
    note = "sliding_window_pattern 6 given explicitly: the published config leaves it to \
            transformers' Gemma3TextConfig default (6)",
)]
pub struct Gemma3_27b {
    /// The sliding layers' geometry: `LayerPattern::count(SlidingAttention)` layers.
    pub sliding: Geometry,
    /// The global layers' geometry: `LayerPattern::count(FullAttention)` layers.
    pub global: Geometry,
    /// `sliding_window`, read from the config.
    pub window: u64,
}

impl Gemma3_27b {
    /// Loads the published config. It has no `sliding_window_pattern` key:
    /// transformers' `Gemma3TextConfig` defaults it to 6, so the loader's
    /// default is given explicitly rather than guessed by kv.
    pub fn load() -> Result<Gemma3_27b, KvError> {
        let config = HfConfig::from_path(config_path("gemma-3-27b"))?
            .with_value("sliding_window_pattern", GEMMA3_SLIDING_WINDOW_PATTERN);
        let geometry = config.geometry()?;
        let pattern = config.layer_pattern()?;
        let window = config.sliding_window()?.ok_or_else(|| {
            missing(
                "sliding_window",
                "Gemma-3's sliding layers need a window; the config has none",
            )
        })?;
        Ok(Gemma3_27b {
            sliding: geometry.with_layers(pattern.count(LayerKind::SlidingAttention)),
            global: geometry.with_layers(pattern.count(LayerKind::FullAttention)),
            window,
        })
    }
}

/// DeepSeek-V2-Lite in vLLM: one MLA latent per token per layer.
#[derive(ModelLocalKv)]
#[kv(
    name = "latent",
    cache = "vLLM MLAAttentionSpec (paged latent, bf16)",
    latent = self.latent,
    positions = padded(DEPLOYMENT.max_model_len, multiple = DEPLOYMENT.block_size),
    scope = request,
    rows = max_num_seqs,
    note = "kv_lora_rank 512 + qk_rope_head_dim 64 per token per layer, shared by all heads",
)]
pub struct DeepSeekV2Lite {
    /// The MLA latent, read from the config.
    pub latent: Latent,
}

impl DeepSeekV2Lite {
    /// Loads `examples/configs/deepseek-v2-lite/config.json`.
    pub fn load() -> Result<DeepSeekV2Lite, KvError> {
        let mla = HfConfig::from_path(config_path("deepseek-v2-lite"))?.mla()?;
        Ok(DeepSeekV2Lite {
            latent: Latent::new(
                mla.layers,
                mla.kv_lora_rank,
                mla.qk_rope_head_dim,
                mla.dtype,
            ),
        })
    }
}

/// Jamba-v0.1 in vLLM 0.33: 4 attention layers and 28 Mamba layers, the
/// attention block raised until one page holds one Mamba state page.
#[derive(ModelLocalKv)]
#[kv(
    name = "attention",
    cache = "vLLM FullAttentionSpec (paged K/V, bf16)",
    geometry = self.attention,
    positions = padded(DEPLOYMENT.max_model_len, multiple = self.block),
    scope = request,
    rows = max_num_seqs,
    note = "block 80 = 16 x cdiv(Mamba page 311,296 B, 16 x 4,096 B per token per layer): \
            vLLM 0.33 raises a hybrid's attention block until one page holds one Mamba \
            state page (vllm/platforms/interface.py Platform._align_hybrid_block_size)",
)]
#[kv(
    name = "mamba",
    cache = "vLLM MambaSpec (Mamba1 conv + ssm state, bf16)",
    state = &self.mamba,
    scope = request,
    rows = max_num_seqs,
    assumes = "prefix caching on (vLLM 0.33's default): Mamba cache mode align keeps 2 pages \
               per Mamba1 layer (MambaSpec.max_memory_usage_bytes); no speculative decoding, \
               which would add a page per speculative token",
    note = "conv (d_conv - 1 = 3, d_inner 8192), ssm (d_inner 8192, d_state 16) = 311,296 B, \
            padded to the 80-token attention page, 327,680 B, per page",
)]
pub struct JambaV0_1 {
    /// The attention layers' geometry: `LayerPattern::count(FullAttention)` layers.
    pub attention: Geometry,
    /// vLLM's attention block for this hybrid ([`vllm_hybrid_block_size`]).
    pub block: u64,
    /// The Mamba layers' state: `LayerPattern::count(Mamba)` layers, 2 pages
    /// each, every page padded to the attention page.
    pub mamba: RecurrentState,
}

impl JambaV0_1 {
    /// Loads `examples/configs/jamba-v0.1/config.json`.
    pub fn load() -> Result<JambaV0_1, KvError> {
        let config = HfConfig::from_path(config_path("jamba-v0.1"))?;
        let geometry = config.geometry()?;
        let pattern = config.layer_pattern()?;
        let mamba = config.mamba()?;
        // vLLM's Mamba1 state: conv (d_conv - 1, d_inner), ssm (d_inner,
        // d_state), both in the model dtype (mamba_cache_dtype auto).
        // The conv part is spelled out in vLLM's own order, (d_conv - 1,
        // d_inner); StatePart::mamba_conv_vllm holds the same bytes.
        let dtype = match geometry.storage {
            Storage::Dense(dtype) => dtype,
            _ => {
                return Err(missing(
                    "dtype",
                    "Jamba's state follows a dense model dtype",
                ))
            }
        };
        let attention = geometry.with_layers(pattern.count(LayerKind::FullAttention));
        // Mamba1 layers export no prefill checkpoints, so the block aligns to
        // FlashAttention's 16 alone; align mode keeps 2 pages per layer.
        let (block, mamba) = vllm_hybrid_state(
            pattern.count(LayerKind::Mamba),
            vec![
                StatePart::new(
                    "conv",
                    [mamba.d_conv.saturating_sub(1), mamba.d_inner, 1],
                    dtype,
                ),
                StatePart::mamba_ssm(mamba.d_inner, mamba.d_state, dtype),
            ],
            &attention,
            DEPLOYMENT.block_size,
            2,
            "JambaV0_1.mamba",
        )?;
        Ok(JambaV0_1 {
            attention,
            block,
            mamba,
        })
    }
}

/// Qwen3-Next-80B-A3B in vLLM 0.33: 12 full-attention layers and 36 Gated
/// DeltaNet (linear attention) layers, the attention block raised until one
/// page holds one DeltaNet state page.
#[derive(ModelLocalKv)]
#[kv(
    name = "attention",
    cache = "vLLM FullAttentionSpec (paged K/V, bf16)",
    geometry = self.attention,
    positions = padded(DEPLOYMENT.max_model_len, multiple = self.block),
    scope = request,
    rows = max_num_seqs,
    assumes = "a Hopper GPU, where vLLM 0.33's GDN prefill backend is FlashInfer: blocks \
               align to its 64-token checkpoints (with Triton, to 16: block 544)",
    note = "block 576 = 64 x cdiv(DeltaNet page 1,097,728 B, 64 x 2,048 B per token per \
            layer): vLLM 0.33 raises a hybrid's attention block until one page holds one \
            state page (vllm/platforms/interface.py Platform._align_hybrid_block_size); \
            dtype bf16 given explicitly: the shipped config has no dtype key",
)]
#[kv(
    name = "gated_delta_net",
    cache = "vLLM MambaSpec (Gated DeltaNet conv + ssm state, bf16)",
    state = &self.gated_delta_net,
    scope = request,
    rows = max_num_seqs,
    assumes = "prefix caching on (vLLM 0.33's default) and FlashInfer GDN prefill (Hopper): \
               Mamba cache mode align keeps 2 pages + 1 prefill checkpoint page per layer \
               (MambaSpec.max_memory_usage_bytes; with Triton, 2); no speculative decoding",
    note = "conv (2 x 16 x 128 + 32 x 128 = 8192 channels, conv_kernel - 1 = 3), \
            ssm (32 value heads, 128, 128) = 1,097,728 B, padded to the 576-token \
            attention page, 1,179,648 B, per page",
)]
pub struct Qwen3Next80bA3b {
    /// The full-attention layers' geometry: `LayerPattern::count(FullAttention)` layers.
    pub attention: Geometry,
    /// vLLM's attention block for this hybrid ([`vllm_hybrid_block_size`]).
    pub block: u64,
    /// The Gated DeltaNet layers' state: `LayerPattern::count(LinearAttention)`
    /// layers, 3 pages each, every page padded to the attention page.
    pub gated_delta_net: RecurrentState,
}

impl Qwen3Next80bA3b {
    /// Loads the shipped config. It has no dtype key (which key the release
    /// writes was not verified; a re-export writes `"dtype": "bfloat16"`), so
    /// the checkpoint's bf16 is given explicitly.
    pub fn load() -> Result<Qwen3Next80bA3b, KvError> {
        let config =
            HfConfig::from_path(config_path("qwen3-next-80b-a3b"))?.with_dtype(DType::BF16);
        let geometry = config.geometry()?;
        let pattern = config.layer_pattern()?;
        let linear = config.linear_attention()?;
        // vLLM's Gated DeltaNet state: conv over conv_kernel - 1 positions and
        // the ssm, both in the model dtype (mamba_cache_dtype auto); kv-core's
        // gated_delta_ssm is mistral.rs' f32, so the storage is given.
        let conv = StatePart::gated_delta_conv(
            linear.key_heads,
            linear.key_head_dim,
            linear.value_heads,
            linear.value_head_dim,
            linear.conv_kernel.saturating_sub(1),
            DType::BF16,
        )
        .map_err(overflow("Qwen3Next80bA3b.gated_delta_net"))?;
        let ssm = StatePart::gated_delta_ssm(
            linear.value_heads,
            linear.value_head_dim,
            linear.key_head_dim,
        )
        .with_storage(Storage::Dense(DType::BF16));
        let attention = geometry.with_layers(pattern.count(LayerKind::FullAttention));
        // FlashInfer's GDN layers export prefill checkpoints: the block aligns
        // to lcm(16, 64) and align mode keeps 2 + 1 checkpoint pages.
        let (block, gated_delta_net) = vllm_hybrid_state(
            pattern.count(LayerKind::LinearAttention),
            vec![conv, ssm],
            &attention,
            lcm(DEPLOYMENT.block_size, FLASHINFER_GDN_CHECKPOINT_ALIGNMENT),
            3,
            "Qwen3Next80bA3b.gated_delta_net",
        )?;
        Ok(Qwen3Next80bA3b {
            attention,
            block,
            gated_delta_net,
        })
    }
}

/// The encoder positions Whisper's decoder cross-attends over
/// (`max_source_positions` in the shipped config).
pub const WHISPER_ENCODER_POSITIONS: u64 = 1500;

/// Whisper-large-v3 in transformers: the decoder's cross-attention cache,
/// filled once from the encoder's 1500 output positions.
#[derive(ModelLocalKv)]
#[kv(
    name = "cross_attention",
    cache = "transformers EncoderDecoderCache.cross_attention_cache (f16)",
    geometry = self.geometry,
    positions = bounded(
        WHISPER_ENCODER_POSITIONS,
        because = "max_source_positions: the encoder's output frames"
    ),
    scope = request,
    rows = max_num_seqs,
    note = "K and V of every encoder position per decoder layer; the decoder's \
            self-attention cache is not declared (max_target_positions is not in \
            the shipped config)",
)]
pub struct WhisperLargeV3 {
    /// The decoder layers' K/V geometry, read from the config.
    pub geometry: Geometry,
}

impl WhisperLargeV3 {
    /// Loads `examples/configs/whisper-large-v3/config.json`.
    pub fn load() -> Result<WhisperLargeV3, KvError> {
        // Layers: num_hidden_layers 32 (= decoder_layers). Heads: kv-core's
        // lookup has no decoder_* keys and reads encoder_attention_heads 20,
        // which equals decoder_attention_heads 20 in large-v3.
        let config = HfConfig::from_path(config_path("whisper-large-v3"))?;
        Ok(WhisperLargeV3 {
            geometry: config.geometry()?,
        })
    }
}

/// Llama-3-8B in llama.cpp with `--cache-type-k q8_0 --cache-type-v q8_0`,
/// one sequence at `n_ctx` 8192.
///
/// `dtype = f16` is llama.cpp's default cache type, which `kv_format = q8_0`
/// replaces for keys and values alike (the model's own dtype plays no part).
#[derive(ModelLocalKv)]
#[kv(
    name = "kv",
    cache = "llama.cpp llama_kv_cache, type_k = type_v = q8_0",
    layers = self.layers, kv_heads = self.kv_heads, head_dim = self.head_dim,
    dtype = f16, kv_format = q8_0,
    positions = padded(DEPLOYMENT.llama_n_ctx, multiple = 256),
    scope = request,
    rows = fixed(
        1,
        because = "llama.cpp's n_ctx 8192 is the total across its sequences, all one \
                   sequence's here (n_seq_max 1)"
    ),
    assumes = "flash attention on: llama.cpp needs it for a quantized V cache",
    note = "q8_0: blocks of 32 int8 values and one f16 scale, 34 bytes",
)]
pub struct Llama3_8bQ8_0 {
    /// `num_hidden_layers`, read from the config.
    pub layers: u64,
    /// `num_key_value_heads`, read from the config.
    pub kv_heads: u64,
    /// `head_dim` (here hidden_size / num_attention_heads), read from the config.
    pub head_dim: u64,
}

impl Llama3_8bQ8_0 {
    /// Loads `examples/configs/llama-3-8b/config.json`.
    pub fn load() -> Result<Llama3_8bQ8_0, KvError> {
        let geometry = HfConfig::from_path(config_path("llama-3-8b"))?.geometry()?;
        Ok(Llama3_8bQ8_0 {
            layers: geometry.layers,
            kv_heads: geometry.kv_heads,
            head_dim: geometry.head_dim,
        })
    }
}

/// One model as loaded: its name on the page and its root.
pub struct ModernModel {
    /// The name the side-by-side table and [`peers::PEERS`] use.
    pub name: &'static str,
    /// What the example's models declare after load.
    pub root: Box<dyn ModelLocalKv>,
}

/// The page's models, in its order, as an engine holds them after load.
pub fn modern_models() -> Result<Vec<ModernModel>, KvError> {
    let model = |name, root: Box<dyn ModelLocalKv>| ModernModel { name, root };
    Ok(vec![
        model("Llama-3-8B", Box::new(Llama3_8b::load()?)),
        model("Mistral-7B-v0.1", Box::new(Mistral7b::load()?)),
        model("Gemma-3-27B", Box::new(Gemma3_27b::load()?)),
        model("DeepSeek-V2-Lite", Box::new(DeepSeekV2Lite::load()?)),
        model("Jamba-v0.1", Box::new(JambaV0_1::load()?)),
        model("Qwen3-Next-80B-A3B", Box::new(Qwen3Next80bA3b::load()?)),
        model("Whisper-large-v3", Box::new(WhisperLargeV3::load()?)),
        model("Llama-3-8B q8_0 KV", Box::new(Llama3_8bQ8_0::load()?)),
    ])
}

/// kv's figures for one model: what its declarations add up to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvFigures {
    /// Bytes one position takes across the caches that have positions
    /// (attention K/V and MLA latents); recurrent state has none.
    pub per_token: u64,
    /// Bytes one row (one sequence) takes at the deployment's positions,
    /// recurrent state included.
    pub per_row: u64,
}

/// Sums what `model` declares into per-token and per-row figures.
pub fn kv_figures(model: &dyn ModelLocalKv) -> Result<KvFigures, KvError> {
    let collection = kv_core::collect(model);
    if let Some(skipped) = collection.skipped().first() {
        return Err(skipped.error.clone());
    }
    let mut figures = KvFigures {
        per_token: 0,
        per_row: 0,
    };
    let total = |step| KvError::Overflow {
        declaration: "side-by-side total".to_owned(),
        step,
    };
    for entry in collection.entries() {
        let named = |o: Overflow| KvError::Overflow {
            declaration: entry.declaration(),
            step: o.step,
        };
        if let Some(per_position) = entry.spec.layout.bytes_per_position() {
            figures.per_token = figures
                .per_token
                .checked_add(per_position.map_err(named)?)
                .ok_or_else(|| total("bytes per position"))?;
        }
        figures.per_row = figures
            .per_row
            .checked_add(entry.spec.bytes_per_row().map_err(named)?)
            .ok_or_else(|| total("bytes per row"))?;
    }
    Ok(figures)
}

/// `131,072 B`.
pub fn exact_bytes(bytes: u64) -> String {
    format!("{} B", kv_core::units::thousands(bytes))
}

/// `(peer - kv) / kv` in percent, one decimal, signed: `+33.3%`, `0.0%`.
pub fn percent_difference(kv: u64, peer: u64) -> String {
    if kv == 0 {
        return "n/a".to_owned();
    }
    let diff = (peer as f64 - kv as f64) / kv as f64 * 100.0;
    if diff.abs() < 0.05 {
        "0.0%".to_owned()
    } else {
        format!("{diff:+.1}%")
    }
}

fn cell(bytes: Option<u64>, render: fn(u64) -> String) -> String {
    bytes.map_or_else(|| "—".to_owned(), render)
}

/// The side-by-side table and, under it, one line per difference.
pub fn side_by_side_markdown() -> Result<String, KvError> {
    let mut rows = Vec::new();
    let mut lines = String::new();
    for model in modern_models()? {
        let kv = kv_figures(model.root.as_ref())?;
        let peer = peers::peer_row(model.name).ok_or_else(|| {
            missing(
                "peers",
                &format!("no peer figures for {} in modern::peers::PEERS", model.name),
            )
        })?;
        let mut row = vec![
            model.name.to_owned(),
            exact_bytes(kv.per_token),
            human_bytes(kv.per_row),
        ];
        for figure in [&peer.vllm, &peer.llama_cpp, &peer.transformers] {
            row.push(cell(figure.per_token, exact_bytes));
            row.push(cell(figure.per_row, human_bytes));
        }
        row.push(cell(peer.naive.per_row, human_bytes));
        row.push(
            peer.naive
                .per_row
                .map_or_else(|| "—".to_owned(), |n| percent_difference(kv.per_row, n)),
        );
        rows.push(row);
        let _ = writeln!(lines, "- **{}**", model.name);
        for (who, figure) in peer.named() {
            let delta = match figure.per_row {
                Some(per_row) => format!("per row {}", percent_difference(kv.per_row, per_row)),
                None => "—".to_owned(),
            };
            let _ = writeln!(lines, "  - {who} ({delta}): {}", figure.why);
        }
    }
    let header = [
        "Model",
        "kv per position",
        "kv per row",
        "vLLM per position",
        "vLLM per row",
        "llama.cpp per position",
        "llama.cpp per row",
        "transformers per position",
        "transformers per row",
        "naive per row",
        "naive error",
    ];
    let mut out = String::new();
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let rule: Vec<&str> = header
        .iter()
        .enumerate()
        .map(|(i, _)| if i == 0 { "---" } else { "---:" })
        .collect();
    let _ = writeln!(out, "| {} |", rule.join(" | "));
    for row in rows {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out.push('\n');
    out.push_str(&lines);
    Ok(out)
}

/// Where the generated page lives, relative to the workspace root.
pub const MODERN_DOCS_PATH: &str = "docs/modern-models.md";

/// The command that regenerates [`MODERN_DOCS_PATH`].
pub const MODERN_DOCS_COMMAND: &str =
    "cargo run -p kv-examples --example modern_models -- --write-docs";

/// The start-up report of every model, as the engine logs it, one block each.
pub fn startup_reports() -> Result<String, KvError> {
    let mut out = String::new();
    for model in modern_models()? {
        let collection = kv_core::collect(model.root.as_ref());
        if let Some(skipped) = collection.skipped().first() {
            return Err(skipped.error.clone());
        }
        let _ = writeln!(out, "# {}", model.name);
        let _ = writeln!(out, "{}", collection.report(DEPLOYMENT.max_num_seqs));
    }
    Ok(out)
}

/// The declarations as a kv table, at the deployment's `max_num_seqs`.
pub fn declarations_markdown() -> Result<String, KvError> {
    let mut rows = Vec::new();
    for model in modern_models()? {
        let collection = kv_core::collect(model.root.as_ref());
        if let Some(skipped) = collection.skipped().first() {
            return Err(skipped.error.clone());
        }
        for entry in collection.entries() {
            let label = if entry.path.is_empty() {
                model.name.to_owned()
            } else {
                format!("{}: {}", model.name, entry.path)
            };
            rows.push((label, entry.spec.clone()));
        }
    }
    Ok(kv_core::Table::new(DEPLOYMENT.max_num_seqs)
        .rows(rows.iter().map(|(label, spec)| (label.as_str(), spec)))
        .to_markdown())
}

/// The page: deployment, start-up report, declarations, side by side.
pub fn modern_docs_markdown() -> Result<String, KvError> {
    let mut page = format!(
        "# Modern models, side by side with the peers\n\n\
         <!-- Generated from examples/src/modern.rs and examples/src/modern/peers.rs by \
         `{MODERN_DOCS_COMMAND}`; do not edit. -->\n\n\
         Each model is declared as a model author would (`examples/src/modern.rs`), reading \
         its geometry from its published `config.json` (`examples/configs/`). The peers' \
         figures are worked out by hand from their sources ({PEER_VERSIONS}, llama.cpp) \
         (`examples/src/modern/peers.rs`, checked against independent hand arithmetic in \
         `examples/tests/peers.rs`); they are never computed by kv.\n\n\
         **Deployment.** {}.\n\n",
        DEPLOYMENT.describe()
    );
    page.push_str(
        "## Start-up report\n\nWhat each model logs after load \
         (`kv_core::log_model_local_kv`). Here the declarations describe each engine's \
         own cache (named in `cache`), declared so that kv's figures can be set beside \
         the peers'; the header is kv's standard one for model-local KV.\n\n```text\n",
    );
    page.push_str(&startup_reports()?);
    page.push_str("```\n\n## Declarations\n\n");
    page.push_str(&declarations_markdown()?);
    page.push_str(
        "\n## Side by side\n\n\
         Per token: bytes one position takes across the layers that keep positions \
         (attention K/V, MLA latents; for Whisper, one encoder position). Per row: \
         one sequence at the deployment's positions, recurrent state included. \
         \"—\": the peer has no such cache or publishes no formula for it (said below). \
         Naive: `2 x num_hidden_layers x num_key_value_heads x head_dim x dtype x \
         max_model_len`, full attention everywhere (head_dim from the config, else \
         hidden / heads; heads fall back to `num_attention_heads`); its error is against kv.\n\n",
    );
    page.push_str(&side_by_side_markdown()?);
    Ok(page)
}

/// Compares the page on disk with what the declarations generate; the error
/// names the command that regenerates it.
pub fn check_modern_docs_fresh(on_disk: &str, generated: &str) -> Result<(), String> {
    if on_disk == generated {
        return Ok(());
    }
    let first_difference = on_disk
        .lines()
        .zip(generated.lines())
        .position(|(disk, fresh)| disk != fresh)
        .unwrap_or_else(|| on_disk.lines().count().min(generated.lines().count()));
    Err(format!(
        "{MODERN_DOCS_PATH} is stale (first difference at line {}): the declarations or \
         the peers' figures changed. Regenerate it with `{MODERN_DOCS_COMMAND}` and commit \
         the result.",
        first_difference + 1
    ))
}
