//! The settings an estimate is made with: vLLM's engine settings, the
//! lengths and values given over a config, and the errors every estimate
//! module raises.

use kv_core::{KvError, Overflow, Storage};
use serde_json::{Map, Value};

/// vLLM's default KV block size, in tokens.
pub const DEFAULT_BLOCK_SIZE: u64 = 16;
/// vLLM's `max_num_batched_tokens` for online serving (the scheduler's token
/// budget per step), which bounds what a sliding-window cache keeps.
pub const DEFAULT_MAX_NUM_BATCHED_TOKENS: u64 = 2048;
/// The vLLM release whose rules [`estimate`](super::detect::estimate) follows.
pub const VLLM_VERSION: &str = "0.33";

/// The vLLM engine settings that change what a cache holds, beside the
/// lengths: each is printed with the figures ([`Estimate::convention`](super::detect::Estimate::convention)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct VllmEngine {
    /// Async scheduling (on by default in vLLM 0.33): one batch more in
    /// flight, whose tokens sliding and chunked layers keep until it settles.
    pub async_scheduling: bool,
    /// Pipeline stages: each keeps a batch in flight.
    pub pipeline_stages: u64,
    /// Tensor-parallel ranks: a hybrid's block size and state pages are set
    /// from one rank's shard (`Platform._align_hybrid_block_size` runs in each
    /// worker), and Mamba2 groups that do not split are repeated on every
    /// rank. The estimate is for this size; [`Estimate::ranks`](super::detect::Estimate::ranks) checks it.
    pub tensor_parallel: u64,
    /// Prefix caching (on by default): Mamba and Gated DeltaNet layers then
    /// run in cache mode `align` and keep 2 state pages (3 where the layer
    /// exports prefill checkpoints: Mamba2, Gated DeltaNet).
    pub prefix_caching: bool,
    /// `num_speculative_tokens`: each recurrent layer keeps one more state
    /// page per speculative token, and a Mamba2 or Gated DeltaNet conv state
    /// one more input (vLLM's `num_spec`; Mamba1 and short convs keep theirs).
    pub speculative_tokens: u64,
    /// `decode_context_parallel_size`: the TP ranks that would hold copies
    /// of the same KV heads hold `cdiv(max_model_len, dcp)` tokens each of
    /// every full-attention and MLA row instead.
    pub decode_context_parallel: u64,
    /// `cp_kv_cache_interleave_size`: tokens stored on one DCP rank before
    /// the next; vLLM requires it to divide the block size. It moves no
    /// figure: a block of `block_size x dcp` tokens fills each rank's block.
    pub dcp_interleave: u64,
}

impl Default for VllmEngine {
    fn default() -> VllmEngine {
        VllmEngine {
            async_scheduling: true,
            pipeline_stages: 1,
            tensor_parallel: 1,
            prefix_caching: true,
            speculative_tokens: 0,
            decode_context_parallel: 1,
            dcp_interleave: 1,
        }
    }
}

impl VllmEngine {
    /// Batches scheduled and not yet settled (`VllmConfig.max_concurrent_batches`
    /// with the V2 model runner): the pipeline's stages, plus one with async
    /// scheduling.
    pub fn in_flight_batches(&self) -> u64 {
        self.pipeline_stages
            .saturating_add(u64::from(self.async_scheduling))
            .max(1)
    }
}

/// How [`estimate`](super::detect::estimate) sizes the caches: the engine settings a config does not
/// hold, and values given over the config.
///
/// The convention is vLLM 0.33's, and each declaration's `cache` names it:
/// full attention and MLA hold `cdiv(max_model_len, block_size)` blocks,
/// sliding attention follows `SlidingWindowSpec`, chunked local attention
/// `ChunkedLocalAttentionSpec` (both over the tokens in flight), and Mamba /
/// Gated DeltaNet state is `MambaSpec`, with the hybrid block size and page
/// padding of `Platform._align_hybrid_block_size`.
///
/// ```
/// use kv_core::{Storage};
/// use kv_engines::estimate::EstimateSettings;
///
/// let settings = EstimateSettings::new()
///     .positions(8192)
///     .kv_format(Storage::from_name("q8_0").unwrap())
///     .set("sliding_window_pattern", 6);
/// assert_eq!(settings.block_size, 16);
/// assert_eq!(settings.engine.in_flight_batches(), 2);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct EstimateSettings {
    /// vLLM `max_model_len`. `None`: derived from the config as vLLM derives
    /// it (the smallest of `max_position_embeddings`, `n_positions`, ...),
    /// and said; it is an error when the config sets none.
    pub positions: Option<u64>,
    /// vLLM `block_size` (default [`DEFAULT_BLOCK_SIZE`]); a hybrid model's
    /// attention raises it as vLLM does.
    pub block_size: u64,
    /// Whether the user gave `block_size` (vLLM's `--block-size`, its
    /// `CacheConfig.user_specified_block_size`): vLLM then picks the attention
    /// backend for that block instead of the block for the backend, so a
    /// block of 16 given is not the default 16 (an fp8 MLA latent runs
    /// TRITON_MLA at 16, not FLASHMLA at 64). [`block_size`](Self::block_size)
    /// sets it.
    pub block_size_given: bool,
    /// vLLM `max_num_batched_tokens` (default
    /// [`DEFAULT_MAX_NUM_BATCHED_TOKENS`]).
    pub max_num_batched_tokens: u64,
    /// How attention K/V and MLA latents are stored (vLLM
    /// `--kv-cache-dtype`, whose names [`Storage::from_name`] reads); `None`:
    /// the model dtype, or what the config's `kv_cache_scheme` states. A
    /// family whose vLLM attention ignores it (Falcon) keeps the model dtype,
    /// and says so.
    pub kv_format: Option<Storage>,
    /// Keys given over the config ([`HfConfig::with_value`](kv_core::HfConfig::with_value)); a dotted key
    /// (`text_config.layer_types`) sets that section. A key that nothing
    /// reads is an error.
    pub values: Map<String, Value>,
    /// The engine settings.
    pub engine: VllmEngine,
    /// A `positions` above the model's derived length is refused, as vLLM
    /// refuses it, unless this is set (vLLM's `VLLM_ALLOW_LONG_MAX_MODEL_LEN`).
    pub allow_long_max_model_len: bool,
    /// Whether the figures are vLLM's own: an architecture vLLM no longer
    /// serves is then refused as vLLM refuses it. Off where another engine
    /// (SGLang) sizes the geometry read here
    /// ([`for_another_engine`](Self::for_another_engine)).
    pub vllm_serves: bool,
}

impl Default for EstimateSettings {
    fn default() -> EstimateSettings {
        EstimateSettings::new()
    }
}

impl EstimateSettings {
    /// No positions (derived from the config), vLLM's default block size,
    /// token budget and engine settings, the model's dtype, no values given.
    pub fn new() -> EstimateSettings {
        EstimateSettings {
            positions: None,
            block_size: DEFAULT_BLOCK_SIZE,
            block_size_given: false,
            max_num_batched_tokens: DEFAULT_MAX_NUM_BATCHED_TOKENS,
            kv_format: None,
            values: Map::new(),
            engine: VllmEngine::default(),
            allow_long_max_model_len: false,
            vllm_serves: true,
        }
    }

    /// The geometry read here is for another engine's rules (SGLang's): an
    /// architecture vLLM no longer serves (Xverse, Phi-3-small) is read like
    /// any other, not refused in vLLM's words.
    pub fn for_another_engine(mut self) -> EstimateSettings {
        self.vllm_serves = false;
        self
    }

    /// Sizes for sequences of `max_model_len` positions.
    pub fn positions(mut self, max_model_len: u64) -> EstimateSettings {
        self.positions = Some(max_model_len);
        self
    }

    /// vLLM's `block_size`, given by the user (`--block-size`): the default
    /// [`DEFAULT_BLOCK_SIZE`] given is not the default left unset, as in
    /// vLLM ([`block_size_given`](Self::block_size_given)).
    pub fn block_size(mut self, block_size: u64) -> EstimateSettings {
        self.block_size = block_size;
        self.block_size_given = true;
        self
    }

    /// vLLM's `max_num_batched_tokens`.
    pub fn max_num_batched_tokens(mut self, tokens: u64) -> EstimateSettings {
        self.max_num_batched_tokens = tokens;
        self
    }

    /// Stores attention K/V and MLA latents as `storage`.
    pub fn kv_format(mut self, storage: Storage) -> EstimateSettings {
        self.kv_format = Some(storage);
        self
    }

    /// Uses `value` for `key`, over every section of the config (a key the
    /// published config leaves to its loader's default); `section.key` sets
    /// the key in that section.
    pub fn set(mut self, key: &str, value: impl Into<Value>) -> EstimateSettings {
        self.values.insert(key.to_owned(), value.into());
        self
    }

    /// vLLM's async scheduling (on by default).
    pub fn async_scheduling(mut self, on: bool) -> EstimateSettings {
        self.engine.async_scheduling = on;
        self
    }

    /// Pipeline-parallel stages (each keeps a batch in flight).
    pub fn pipeline_stages(mut self, stages: u64) -> EstimateSettings {
        self.engine.pipeline_stages = stages;
        self
    }

    /// Tensor-parallel ranks (`--tensor-parallel-size`): the figures are for
    /// this size's shards.
    pub fn tensor_parallel(mut self, ranks: u64) -> EstimateSettings {
        self.engine.tensor_parallel = ranks;
        self
    }

    /// vLLM's prefix caching (on by default).
    pub fn prefix_caching(mut self, on: bool) -> EstimateSettings {
        self.engine.prefix_caching = on;
        self
    }

    /// vLLM's `num_speculative_tokens`.
    pub fn speculative_tokens(mut self, tokens: u64) -> EstimateSettings {
        self.engine.speculative_tokens = tokens;
        self
    }

    /// vLLM's `decode_context_parallel_size`.
    pub fn decode_context_parallel(mut self, dcp: u64) -> EstimateSettings {
        self.engine.decode_context_parallel = dcp;
        self
    }

    /// vLLM's `cp_kv_cache_interleave_size`.
    pub fn dcp_interleave(mut self, tokens: u64) -> EstimateSettings {
        self.engine.dcp_interleave = tokens;
        self
    }

    /// Allows `positions` above the model's length (vLLM's
    /// `VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`).
    pub fn allow_long_max_model_len(mut self, allow: bool) -> EstimateSettings {
        self.allow_long_max_model_len = allow;
        self
    }
}

pub(crate) fn config_error(what: &'static str, problem: String) -> KvError {
    KvError::Config { what, problem }
}

/// An overflow in a figure built from config values, naming what it was
/// built from.
pub(crate) fn overflow(built_from: String) -> impl Fn(Overflow) -> KvError {
    move |o| KvError::Config {
        what: "figures",
        problem: format!("{} overflows u64 for {built_from}", o.step),
    }
}
