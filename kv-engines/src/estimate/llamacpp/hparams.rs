//! What llama.cpp reads from a GGUF header to size its caches
//! (`llama_model_base::load_hparams` and each architecture's
//! `load_arch_hparams` in `src/models/*.cpp`), for the architectures whose
//! rules kv has checked (on twins, `scripts/llamacpp/registry.py`). Another
//! architecture is refused by name: its rules (an indexer cache, layer
//! slots, a draft head's) are its own.

use kv_core::KvError;

use crate::gguf::{GgufArray, GgufMetadata, GgufValue};

/// llama.cpp's `LLAMA_MAX_LAYERS`: a larger `block_count` aborts the load.
pub(crate) const MAX_LAYERS: u64 = 512;

/// How an architecture reads its sliding window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Window {
    /// No window is read: every layer is full attention (llama, qwen2, ...;
    /// Mistral-7B converted is `llama`). phi3 reads one and drops it.
    None,
    /// Always windowed: `sliding_window` defaults to `window`, the pattern
    /// to one full layer in `pattern` (gemma2).
    Default { window: u32, pattern: u32 },
    /// Always windowed; `sliding_window` must be there (cohere2, gpt-oss).
    Required { pattern: u32 },
    /// Windowed only when `sliding_window` is there and above 0 (gemma3,
    /// olmo2).
    IfPositive { pattern: u32 },
    /// llama4: chunked attention (`LLAMA_SWA_TYPE_CHUNKED`, sized as a
    /// window by `llama_kv_cache_iswa`) of 8192 whatever `sliding_window`
    /// says, unless it is there and 0; 3 chunked layers in 4.
    Llama4,
    /// gemma4, granite_swa, maple, mimo2: `sliding_window` required and the
    /// pattern only as an array (`get_arr`, required); `window_first` where
    /// the loader reads the window before the pattern.
    RequiredArray { window_first: bool },
    /// laguna: windowed only when `sliding_window` is above 0, the pattern
    /// dense-first (`load_swa_pattern(ml, 4, true)`).
    IfPositiveDenseFirst { pattern: u32 },
    /// dflash (without hyper-connections): windowed only when
    /// `sliding_window` is above 0, then the pattern as a required array.
    IfPositiveArray,
    /// smallthinker: with a `sliding_window` above 0, a window of 4096
    /// whatever it says, the pattern dense-first (4).
    SmallThinker,
    /// cohere2moe: `sliding_window` required, the pattern dense-first
    /// (`load_swa_pattern(ml, 4, true)`: layer `il` slides when `il % p`
    /// is not 0).
    RequiredDenseFirst { pattern: u32 },
    /// exaone4: windowed only with 64 layers (EXAONE-4.0-32B): 4096 unless
    /// `sliding_window` says otherwise, 3 sliding layers in 4.
    Exaone4,
}

/// How an architecture holds its context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Attention(Window),
    /// Mamba (`grouped` false) or Mamba2: f32 conv and SSM state per
    /// sequence (`llama_memory_recurrent`).
    Mamba {
        grouped: bool,
    },
    /// A hybrid (`llama_memory_hybrid`): a KV cache for the layers with
    /// attention, recurrent state for the others, each architecture with its
    /// own layer filters (`create_memory`) and state keys.
    Hybrid(Hybrid),
    /// RWKV-6 (`v7` false: rwkv6, rwkv6qwen2) and RWKV-7 (rwkv7, arwkv7):
    /// recurrent, R = `token_shift_count` (2) x `embedding_length` and S =
    /// `embedding_length` x `wkv.head_size` per sequence per layer.
    Rwkv {
        v7: bool,
    },
    /// deepseek32 (`glm` false) and glm-dsa: MLA as deepseek2, plus a
    /// lightning-indexer key cache (`llama_kv_cache_dsa`): one head of
    /// `attention.indexer.key_length` per layer that owns an indexer (every
    /// one in deepseek32; glm-dsa's from `attention.indexer.types`, else all
    /// below a 1M context, else GLM-5.2's table).
    Dsa {
        glm: bool,
    },
    /// hy_v4: MLA over every layer (its MTP ones too: no filter), with
    /// DSA's indexer only where `attention.indexer.top_k` is above 0, on the
    /// layers `attention.indexer.types` marks (layer 0 must be one).
    HyV4,
    /// minimax-m3: a full cache over every layer and an indexer key (and
    /// value) cache, one head of `attention.indexer.key_length`, on the
    /// layers from `leading_dense_block_count` on (`llama_kv_cache_msa`).
    Msa,
    /// dots3note: DSA over its full layers and a window over its sliding
    /// ones (`llama_kv_cache_dsa_iswa`), MLA in both; the window and an
    /// array pattern required, and the indexer's layers as an array.
    DsaIswa,
    /// deepseek4: every layer slides (`set_swa_pattern(0)`), K alone
    /// (`llama_kv_cache_dsv4`): a raw sliding cache, compressed caches of
    /// the layers `attention.compress_ratios` gives 4 (CSA) or 128 (HCA),
    /// the lightning indexer's keys on the CSA layers, and three f32
    /// compressor states.
    Dsv4,
    /// deepseek2: every layer full attention; with both
    /// `attention.key_length_mla` and `attention.value_length_mla` above 0
    /// (`is_mla()`) the cache holds K alone, a row of `key_length` x
    /// `head_count_kv` (the latent plus the rope part, 576 for DeepSeek-V2/V3
    /// converted today), and no V tensor at all.
    Mla,
}

/// The hybrids kv follows, by how `load_arch_hparams` marks recurrent
/// layers and `create_memory` filters them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hybrid {
    /// jamba: recurrent where `head_count_kv` is 0; Mamba state without
    /// groups (jamba reads no `ssm.group_count`).
    Jamba,
    /// granitehybrid, plamo2: recurrent where `head_count_kv` is 0; Mamba2
    /// state (`ssm.group_count` required).
    ZeroKvHeads,
    /// falcon-h1: every layer has both attention and state.
    FalconH1,
    /// nemotron_h, nemotron_h_moe: recurrent where `head_count_kv` and the layer's
    /// `feed_forward_length` are 0; attention where only the FFN is 0; an
    /// MLP layer (FFN above 0) has neither.
    NemotronH,
    /// qwen3next, qwen35, qwen35moe: Gated DeltaNet layers from `attention.recurrent_layers`,
    /// else all but every `full_attention_interval`-th (4); MTP layers
    /// have neither.
    Qwen3Next,
    /// minimax-01: lightning-attention layers from
    /// `attention.recurrent_layers`, else all but every
    /// `full_attention_interval`-th (8); S = (key length)^2 x `head_count`
    /// (layer 0's), no R.
    MiniMax01,
    /// kimi-linear, kimi-k3 (its V width the `kv_lora_rank`), bailingmoe3
    /// (its KDA gate checked): KDA layers where `head_count_kv` is 0, with R = 3 x
    /// (d_conv - 1) x `head_count` x `kda.head_dim` and S = `kda.head_dim`
    /// squared x `head_count`; MLA attention elsewhere.
    KimiLinear,
    /// qwen4exp: Gated DeltaNet as qwen3next (every `ssm.*` key above 0,
    /// `full_attention_interval` 4 by default and not 0), a QSA indexer
    /// cache (`llama_memory_hybrid_idx`, one head of
    /// `attention.indexer.key_length`) over its attention layers, and the
    /// PLE conv history as P rows on its one `ple.layers` layer.
    Qwen4Exp,
    /// glm5-next: KDA state (as kimi-linear) where `head_count_kv` is 0, a
    /// K-only MLA cache elsewhere (V as wide as `kv_lora_rank`), both over
    /// the trunk, and an indexer cache (`llama_memory_hybrid_idx`) of one
    /// head of 3 x `attention.indexer.key_length` (key, gate, pooled) on the
    /// attention layers `attention.indexer.types` marks (all by default).
    Glm5Next,
    /// lfm2, lfm2moe: short-conv layers where `head_count_kv` is 0, state
    /// `embedding_length x (shortconv.l_cache - 1)` (no S); lfm2 (`window`)
    /// with a `sliding_window` above 0 slides its attention layers
    /// (`llama_memory_hybrid_iswa`), lfm2moe reads no window.
    Lfm2 { window: bool },
}

/// The architectures kv follows, as `general.architecture` names them.
const ARCHITECTURES: &[(&str, Family)] = &[
    ("llama", Family::Attention(Window::None)),
    ("mistral3", Family::Attention(Window::None)),
    ("qwen2", Family::Attention(Window::None)),
    ("qwen2moe", Family::Attention(Window::None)),
    ("qwen3", Family::Attention(Window::None)),
    ("qwen3moe", Family::Attention(Window::None)),
    ("gemma", Family::Attention(Window::None)),
    ("phi3", Family::Attention(Window::None)),
    ("falcon", Family::Attention(Window::None)),
    ("gpt2", Family::Attention(Window::None)),
    ("starcoder2", Family::Attention(Window::None)),
    ("command-r", Family::Attention(Window::None)),
    ("granite", Family::Attention(Window::None)),
    ("graniteswitch", Family::Attention(Window::None)),
    ("internlm2", Family::Attention(Window::None)),
    ("stablelm", Family::Attention(Window::None)),
    ("deepseek", Family::Attention(Window::None)),
    ("olmo", Family::Attention(Window::None)),
    ("exaone", Family::Attention(Window::None)),
    ("llama4", Family::Attention(Window::Llama4)),
    (
        "gemma3n",
        Family::Attention(Window::Required { pattern: 5 }),
    ),
    (
        "gemma4",
        Family::Attention(Window::RequiredArray {
            window_first: false,
        }),
    ),
    (
        "granite_swa",
        Family::Attention(Window::RequiredArray {
            window_first: false,
        }),
    ),
    (
        "maple",
        Family::Attention(Window::RequiredArray { window_first: true }),
    ),
    (
        "mimo2",
        Family::Attention(Window::RequiredArray { window_first: true }),
    ),
    (
        "cohere2moe",
        Family::Attention(Window::RequiredDenseFirst { pattern: 4 }),
    ),
    (
        "exaone-moe",
        Family::Attention(Window::Required { pattern: 4 }),
    ),
    (
        "muse-glimmer",
        Family::Attention(Window::Required { pattern: 4 }),
    ),
    (
        "afmoe",
        Family::Attention(Window::IfPositive { pattern: 4 }),
    ),
    (
        "mellum",
        Family::Attention(Window::IfPositive { pattern: 4 }),
    ),
    (
        "plamo3",
        Family::Attention(Window::IfPositive { pattern: 8 }),
    ),
    ("mistral4", Family::Mla),
    ("deepseek32", Family::Dsa { glm: false }),
    ("deepseek4", Family::Dsv4),
    ("glm-dsa", Family::Dsa { glm: true }),
    ("hy_v4", Family::HyV4),
    ("minimax-m3", Family::Msa),
    ("dots3note", Family::DsaIswa),
    ("exaone4", Family::Attention(Window::Exaone4)),
    ("smollm3", Family::Attention(Window::None)),
    // Layers repeated `num_loops` times (nanbeige), or cache slots checked
    // against the HRM stacks (hrm_text): see `Keys::loop_layers`,
    // `Keys::hrm_slots`.
    ("nanbeige", Family::Attention(Window::None)),
    ("hrm_text", Family::Attention(Window::None)),
    ("smallthinker", Family::Attention(Window::SmallThinker)),
    // A DFlash draft with its own embeddings (one without needs a target's
    // context, which llama.cpp refuses standalone); DSpark drafts
    // (hyper_connection.count above 0) are refused: see `Keys::dflash`.
    ("dflash", Family::Attention(Window::IfPositiveArray)),
    (
        "spark2_5",
        Family::Attention(Window::RequiredArray { window_first: true }),
    ),
    (
        "step35",
        Family::Attention(Window::RequiredArray { window_first: true }),
    ),
    (
        "laguna",
        Family::Attention(Window::IfPositiveDenseFirst { pattern: 4 }),
    ),
    // Read no window, state or per-arch head size in `load_arch_hparams`
    // and take create_memory's default path: one llama_kv_cache (checked on
    // their twins by scripts/llamacpp/registry.py).
    ("apertus", Family::Attention(Window::None)),
    ("arcee", Family::Attention(Window::None)),
    ("arctic", Family::Attention(Window::None)),
    ("baichuan", Family::Attention(Window::None)),
    ("bailingmoe", Family::Attention(Window::None)),
    ("bailingmoe2", Family::Attention(Window::None)),
    ("bitnet", Family::Attention(Window::None)),
    ("bloom", Family::Attention(Window::None)),
    ("chameleon", Family::Attention(Window::None)),
    ("chatglm", Family::Attention(Window::None)),
    ("codeshell", Family::Attention(Window::None)),
    ("cogvlm", Family::Attention(Window::None)),
    ("dbrx", Family::Attention(Window::None)),
    ("deci", Family::Attention(Window::None)),
    ("deepseek2-ocr", Family::Attention(Window::None)),
    ("dots1", Family::Attention(Window::None)),
    ("ernie4_5", Family::Attention(Window::None)),
    ("ernie4_5-moe", Family::Attention(Window::None)),
    ("glm4", Family::Attention(Window::None)),
    ("glm4moe", Family::Attention(Window::None)),
    ("gptneox", Family::Attention(Window::None)),
    ("granitemoe", Family::Attention(Window::None)),
    ("grok", Family::Attention(Window::None)),
    ("grovemoe", Family::Attention(Window::None)),
    ("hunyuan-dense", Family::Attention(Window::None)),
    ("hunyuan-moe", Family::Attention(Window::None)),
    ("hunyuan_vl", Family::Attention(Window::None)),
    ("hy_v3", Family::Attention(Window::None)),
    ("jais", Family::Attention(Window::None)),
    ("jais2", Family::Attention(Window::None)),
    ("llama-embed", Family::Attention(Window::None)),
    ("maincoder", Family::Attention(Window::None)),
    ("minicpm", Family::Attention(Window::None)),
    ("minicpm3", Family::Attention(Window::None)),
    ("minimax-m2", Family::Attention(Window::None)),
    ("mpt", Family::Attention(Window::None)),
    ("nemotron", Family::Attention(Window::None)),
    ("olmoe", Family::Attention(Window::None)),
    ("openelm", Family::Attention(Window::None)),
    ("orion", Family::Attention(Window::None)),
    ("paddleocr", Family::Attention(Window::None)),
    ("pangu-embedded", Family::Attention(Window::None)),
    ("phi2", Family::Attention(Window::None)),
    ("phimoe", Family::Attention(Window::None)),
    ("plamo", Family::Attention(Window::None)),
    ("plm", Family::Attention(Window::None)),
    ("pockettts", Family::Attention(Window::None)),
    ("qwen", Family::Attention(Window::None)),
    ("qwen2vl", Family::Attention(Window::None)),
    ("qwen3tts", Family::Attention(Window::None)),
    ("qwen3vl", Family::Attention(Window::None)),
    ("qwen3vlmoe", Family::Attention(Window::None)),
    ("refact", Family::Attention(Window::None)),
    ("seed_oss", Family::Attention(Window::None)),
    ("starcoder", Family::Attention(Window::None)),
    ("t5", Family::Attention(Window::None)),
    ("t5encoder", Family::Attention(Window::None)),
    ("talkie", Family::Attention(Window::None)),
    ("xverse", Family::Attention(Window::None)),
    (
        "gemma2",
        Family::Attention(Window::Default {
            window: 4096,
            pattern: 2,
        }),
    ),
    (
        "gemma3",
        Family::Attention(Window::IfPositive { pattern: 6 }),
    ),
    (
        "olmo2",
        Family::Attention(Window::IfPositive { pattern: 4 }),
    ),
    (
        "cohere2",
        Family::Attention(Window::Required { pattern: 4 }),
    ),
    (
        "gpt-oss",
        Family::Attention(Window::Required { pattern: 2 }),
    ),
    ("deepseek2", Family::Mla),
    ("jamba", Family::Hybrid(Hybrid::Jamba)),
    ("granitehybrid", Family::Hybrid(Hybrid::ZeroKvHeads)),
    ("plamo2", Family::Hybrid(Hybrid::ZeroKvHeads)),
    ("falcon-h1", Family::Hybrid(Hybrid::FalconH1)),
    ("nemotron_h", Family::Hybrid(Hybrid::NemotronH)),
    ("qwen3next", Family::Hybrid(Hybrid::Qwen3Next)),
    ("lfm2", Family::Hybrid(Hybrid::Lfm2 { window: true })),
    ("lfm2moe", Family::Hybrid(Hybrid::Lfm2 { window: false })),
    ("nemotron_h_moe", Family::Hybrid(Hybrid::NemotronH)),
    ("qwen35", Family::Hybrid(Hybrid::Qwen3Next)),
    ("minimax-01", Family::Hybrid(Hybrid::MiniMax01)),
    ("kimi-linear", Family::Hybrid(Hybrid::KimiLinear)),
    ("glm5-next", Family::Hybrid(Hybrid::Glm5Next)),
    ("qwen4exp", Family::Hybrid(Hybrid::Qwen4Exp)),
    ("kimi-k3", Family::Hybrid(Hybrid::KimiLinear)),
    ("bailingmoe3", Family::Hybrid(Hybrid::KimiLinear)),
    ("qwen35moe", Family::Hybrid(Hybrid::Qwen3Next)),
    ("rwkv6", Family::Rwkv { v7: false }),
    ("rwkv6qwen2", Family::Rwkv { v7: false }),
    ("rwkv7", Family::Rwkv { v7: true }),
    ("arwkv7", Family::Rwkv { v7: true }),
    ("mamba", Family::Mamba { grouped: false }),
    ("mamba2", Family::Mamba { grouped: true }),
];

/// A model's sliding window, as its attention cache uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Sliding {
    /// `n_swa`: positions a sliding layer attends to.
    pub window: u32,
    /// `is_swa(il)` for every layer.
    pub layers: Vec<bool>,
}

/// Elements per sequence per layer of a recurrent state (`n_embd_r()`,
/// `n_embd_s()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Recurrent {
    pub r: u32,
    pub s: u32,
}

/// A hybrid's layer filters (`filter_attn`, `filter_recr` of
/// `create_memory`), for every layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct HybridLayers {
    /// Layers in the KV cache.
    pub attn: Vec<bool>,
    /// Layers with recurrent state.
    pub recr: Vec<bool>,
}

/// qwen4exp's PLE conv history (`ple_conv_state()`, `is_ple`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ple {
    /// The one PLE layer.
    pub layer: usize,
    /// f32 elements a row: (conv_kernel - 1) x ngram x hc_mult x n_embd.
    pub width: u32,
}

/// A DSA model's lightning indexer (`indexer_head_size`,
/// `is_indexer_full`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Indexer {
    /// `attention.indexer.key_length`: the one key head's width.
    pub head: u32,
    /// Layers that own an indexer (and so a row in its cache).
    pub layers: Vec<bool>,
}

/// The hparams that size llama.cpp's caches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Hparams {
    pub architecture: String,
    /// `n_layer_all`: `block_count`.
    pub layers: u32,
    /// `n_layer_nextn`: trailing MTP layers the main context holds no cache for.
    pub nextn: u32,
    /// `n_ctx_train`: `context_length`.
    pub context_length: u32,
    /// `n_head_kv(il)`.
    pub kv_heads: Vec<u32>,
    /// `n_embd_head_k(il)`: the SWA or full key length, by the layer's kind.
    pub head_k: Vec<u32>,
    /// `n_embd_head_v(il)`.
    pub head_v: Vec<u32>,
    /// `n_embd_head_k_full`: the full layers' key length.
    pub head_k_full: u32,
    /// The window, for a model whose `swa_type` is not none.
    pub sliding: Option<Sliding>,
    /// The state, for a recurrent or hybrid model.
    pub recurrent: Option<Recurrent>,
    /// The layer filters, for a hybrid.
    pub hybrid: Option<HybridLayers>,
    /// `is_mla()`: K alone is cached (no V tensor).
    pub mla: bool,
    /// The lightning indexer of a DSA model.
    pub indexer: Option<Indexer>,
    /// qwen4exp's PLE conv history.
    pub ple: Option<Ple>,
    /// Whether the cache takes every layer, MTP ones too (hy_v4 passes no
    /// filter).
    pub all_layers: bool,
    /// deepseek4's `dsv4_compress_ratios`, one a layer.
    pub compress_ratios: Option<Vec<u32>>,
    /// `n_layer_kv_from_start`: only the layers before it have a K/V
    /// (`has_kv`); the later ones reuse an earlier layer's (gemma3n: 20;
    /// gemma4: `block_count - attention.shared_kv_layers`).
    pub kv_from_start: Option<u32>,
}

impl Hparams {
    /// `n_layer()`: the layers before the MTP ones.
    pub fn trunk_layers(&self) -> u32 {
        self.layers - self.nextn
    }

    /// `n_embd_k_gqa(il)`.
    pub fn k_gqa(&self, il: usize) -> u64 {
        u64::from(self.head_k[il]) * u64::from(self.kv_heads[il])
    }

    /// `n_embd_v_gqa(il)`.
    pub fn v_gqa(&self, il: usize) -> u64 {
        u64::from(self.head_v[il]) * u64::from(self.kv_heads[il])
    }

    /// `has_kv(il)`.
    pub fn has_kv(&self, il: usize) -> bool {
        self.kv_from_start
            .is_none_or(|k| il < usize::try_from(k).unwrap_or(usize::MAX))
    }

    /// `is_swa(il)`.
    pub fn is_swa(&self, il: usize) -> bool {
        self.sliding.as_ref().is_some_and(|s| s.layers[il])
    }

    /// Reads the hparams of `meta` as llama.cpp loads them.
    pub fn read(meta: &GgufMetadata) -> Result<Hparams, KvError> {
        let error = |problem: String| KvError::ConfigFile {
            path: meta.source().to_owned(),
            problem,
        };
        let architecture = meta.architecture()?.to_owned();
        let family = ARCHITECTURES
            .iter()
            .find_map(|(name, family)| (*name == architecture).then_some(*family))
            .ok_or_else(|| {
                error(format!(
                    "kv does not know llama.cpp's cache rules for architecture `{architecture}` \
                     (it follows {} architectures, listed in docs/coverage/llamacpp.tsv)",
                    ARCHITECTURES.len()
                ))
            })?;
        let key = Keys {
            meta,
            arch: meta.architecture()?,
        };
        let layers = key.required("block_count")?;
        if layers == 0 || u64::from(layers) > MAX_LAYERS {
            return Err(error(format!(
                "`{architecture}.block_count` is {layers}; llama.cpp aborts on a model with \
                 other than 1 to {MAX_LAYERS} layers"
            )));
        }
        let nextn = key.optional("nextn_predict_layers")?.unwrap_or(0);
        if nextn > layers {
            return Err(error(format!(
                "`{architecture}.nextn_predict_layers` is {nextn}, above the {layers} layers; \
                 llama.cpp aborts"
            )));
        }
        let context_length = key.required("context_length")?;
        let embedding = key.required("embedding_length")?;
        let n = usize::try_from(layers).map_err(|_| error("too many layers".to_owned()))?;
        let heads = key.per_layer("attention.head_count", layers)?;
        let heads = heads.unwrap_or_else(|| vec![0; n]);
        // head_count_kv defaults to head_count, layer by layer.
        let kv_heads = key
            .per_layer("attention.head_count_kv", layers)?
            .unwrap_or_else(|| heads.clone());
        // Without heads (a recurrent model) no length is read.
        let (full_k, mut full_v) = match heads[0] {
            0 => (0, 0),
            h => {
                let k = key
                    .optional("attention.key_length")?
                    .unwrap_or(embedding / h);
                let v = key
                    .optional("attention.value_length")?
                    .unwrap_or(embedding / h);
                (k, v)
            }
        };
        let swa_k = key.optional("attention.key_length_swa")?.unwrap_or(full_k);
        let swa_v = key
            .optional("attention.value_length_swa")?
            .unwrap_or(full_v);
        let mla = match family {
            // hy_v4 requires both, and asserts is_mla().
            Family::HyV4 => {
                let k = key.required("attention.key_length_mla")?;
                let v = key.required("attention.value_length_mla")?;
                if k == 0 || v == 0 {
                    return Err(error(format!(
                        "`{architecture}.attention.key_length_mla` {k} / \
                         `{architecture}.attention.value_length_mla` {v}: llama.cpp aborts on \
                         hy_v4 without MLA (GGML_ASSERT(hparams.is_mla()))"
                    )));
                }
                true
            }
            Family::Mla | Family::Dsa { .. } | Family::DsaIswa => {
                let k = key.optional("attention.key_length_mla")?.unwrap_or(0);
                let v = key.optional("attention.value_length_mla")?.unwrap_or(0);
                k != 0 && v != 0
            }
            // kimi-linear requires both (its MLA attention layers).
            Family::Hybrid(Hybrid::Glm5Next) => {
                let k = key.required("attention.key_length_mla")?;
                let v = key.required("attention.value_length_mla")?;
                key.required("attention.q_lora_rank")?;
                // The MLA cache holds the latent: n_embd_head_v_full = n_lora_kv.
                full_v = key.required("attention.kv_lora_rank")?;
                k != 0 && v != 0
            }
            Family::Hybrid(Hybrid::KimiLinear) => {
                let k = key.required("attention.key_length_mla")?;
                let v = key.required("attention.value_length_mla")?;
                let lora = key.required("attention.kv_lora_rank")?;
                if architecture == "kimi-k3" {
                    // kimi-k3 sets n_embd_head_v_full to the latent's width.
                    full_v = lora;
                }
                if architecture == "bailingmoe3" {
                    key.kda_gate()?;
                }
                k != 0 && v != 0
            }
            _ => false,
        };
        let (sliding, recurrent, hybrid) = match family {
            Family::Attention(window) => (key.sliding(window, n, nextn)?, None, None),
            Family::Mla | Family::Dsa { .. } | Family::HyV4 | Family::Msa => (None, None, None),
            // set_swa_pattern(0): every layer slides, the pattern key unread.
            Family::Dsv4 => (
                Some(Sliding {
                    window: key.dsv4_window()?,
                    layers: vec![true; n],
                }),
                None,
                None,
            ),
            Family::DsaIswa => (
                key.sliding(Window::RequiredArray { window_first: true }, n, nextn)?,
                None,
                None,
            ),
            Family::Rwkv { v7 } => (None, Some(key.rwkv(v7, embedding)?), None),
            Family::Mamba { grouped } => (None, Some(key.mamba(grouped, embedding)?), None),
            Family::Hybrid(kind) => {
                let (state, layers, sliding) =
                    key.hybrid(kind, embedding, &kv_heads, nextn, heads[0], full_k)?;
                (sliding, Some(state), Some(layers))
            }
        };
        // After the pattern, in gemma4's loader's order.
        if architecture == "gemma4" {
            // Read again as required by gemma4's own loader.
            key.required("attention.key_length_swa")?;
            key.required("attention.value_length_swa")?;
        }
        let kv_from_start = key.kv_from_start(&architecture, layers)?;
        let mut compress_ratios = None;
        let indexer = match family {
            Family::Dsa { glm } => Some(key.indexer(glm, n, nextn, context_length)?),
            Family::HyV4 => {
                let rot = key.optional("rope.dimension_count")?.unwrap_or(full_k);
                key.hy_v4_indexer(n, nextn, rot)?
            }
            Family::Msa => Some(key.msa_indexer(n)?),
            Family::DsaIswa => Some(key.dots3note_indexer(n)?),
            Family::Dsv4 => {
                let (indexer, ratios) = key.dsv4_indexer(n, nextn)?;
                compress_ratios = Some(ratios);
                Some(indexer)
            }
            Family::Hybrid(Hybrid::Glm5Next) => Some(key.glm5_next_indexer(n, nextn)?),
            Family::Hybrid(Hybrid::Qwen4Exp) => Some(key.qwen4exp_indexer(n)?),
            _ => None,
        };
        let ple = match family {
            Family::Hybrid(Hybrid::Qwen4Exp) => key.qwen4exp_ple(n, embedding, hybrid.as_ref())?,
            _ => None,
        };
        // dots3note's memory asserts only a window type, not a sliding layer.
        let asserts_swa_any = !matches!(family, Family::DsaIswa);
        if let Some(s) = sliding.as_ref().filter(|_| asserts_swa_any) {
            // llama_model::create_memory: GGML_ASSERT(hparams.is_swa_any()).
            if !s.layers.iter().any(|&swa| swa) {
                return Err(error(format!(
                    "`{architecture}` has a sliding window but its pattern makes no layer a \
                     sliding one; llama.cpp aborts (GGML_ASSERT(hparams.is_swa_any()))"
                )));
            }
        }
        let is_swa = |il: usize| sliding.as_ref().is_some_and(|s| s.layers[il]);
        let head_k = (0..n)
            .map(|il| if is_swa(il) { swa_k } else { full_k })
            .collect();
        let head_v = (0..n)
            .map(|il| if is_swa(il) { swa_v } else { full_v })
            .collect();
        let mut hparams = Hparams {
            architecture,
            layers,
            nextn,
            context_length,
            kv_heads,
            head_k,
            head_v,
            head_k_full: full_k,
            sliding,
            recurrent,
            hybrid,
            mla,
            indexer,
            ple,
            all_layers: matches!(family, Family::HyV4 | Family::Msa),
            compress_ratios,
            kv_from_start,
        };
        match hparams.architecture.as_str() {
            "dflash" => key.dflash()?,
            "graniteswitch" => key.granite_switch(&mut hparams)?,
            "nanbeige" => key.loop_layers(&mut hparams)?,
            "hrm_text" => key.hrm_slots(layers)?,
            _ => {}
        }
        if hparams.recurrent.is_none() || hparams.hybrid.is_some() {
            hparams.refuse_empty_attention(&key, embedding, heads[0])?;
        } else if hparams.trunk_layers() == 0 {
            return Err(error(format!(
                "`{0}.nextn_predict_layers` is {nextn}, every one of the {layers} layers: \
                 llama.cpp keeps no state for MTP layers, so the estimate would be 0 bytes; kv \
                 refuses it",
                hparams.architecture
            )));
        }
        Ok(hparams)
    }

    /// The layers the cache keeps (`kept` in the estimate): the trunk, or
    /// every layer where all are MTP layers.
    pub fn kept_layers(&self) -> usize {
        let kept = match self.trunk_layers() {
            0 => self.layers,
            trunk => trunk,
        };
        usize::try_from(kept).unwrap_or(usize::MAX)
    }

    /// An attention layer the cache keeps with no KV head or a 0-wide key
    /// or value holds nothing: a model with layers never sizes to 0 bytes
    /// in silence, so each is refused naming the key that made it. Only the
    /// layers the attention cache takes are looked at: a hybrid's recurrent
    /// layers (0 KV heads in jamba) and shared-KV layers hold no K/V.
    fn refuse_empty_attention(
        &self,
        key: &Keys,
        embedding: u32,
        head_count: u32,
    ) -> Result<(), KvError> {
        let arch = &self.architecture;
        let has = |suffix: &str| key.meta.get(&key.full(suffix)).is_some();
        let empty = |what: String, il: usize| {
            key.error(format!(
                "{what} for layer {il} of {}: the layer would hold no cache and the estimate \
                 0 bytes; kv refuses it",
                self.layers
            ))
        };
        let derived = || {
            format!(
                "`{arch}.embedding_length` {embedding} / `{arch}.attention.head_count` \
                 {head_count} makes a head of 0"
            )
        };
        let cached = |il: usize| match &self.hybrid {
            Some(h) => h.attn[il],
            None => il < self.kept_layers(),
        };
        for il in (0..self.kv_heads.len()).filter(|&il| cached(il) && self.has_kv(il)) {
            if self.kv_heads[il] == 0 {
                let what = if has("attention.head_count_kv") {
                    format!("`{arch}.attention.head_count_kv` is 0")
                } else if has("attention.head_count") {
                    format!(
                        "`{arch}.attention.head_count` is 0 (no \
                         `{arch}.attention.head_count_kv`, so it gives the KV heads)"
                    )
                } else {
                    format!("no `{arch}.attention.head_count` nor `{arch}.attention.head_count_kv`")
                };
                return Err(empty(what, il));
            }
            let swa = self.is_swa(il);
            for (width, suffix, swa_suffix) in [
                (
                    self.head_k[il],
                    "attention.key_length",
                    "attention.key_length_swa",
                ),
                (
                    self.head_v[il],
                    "attention.value_length",
                    "attention.value_length_swa",
                ),
            ] {
                // An MLA cache has no V, so a 0-wide value holds nothing less.
                if width != 0 || (self.mla && suffix == "attention.value_length") {
                    continue;
                }
                let what = if head_count == 0 {
                    format!(
                        "`{arch}.attention.head_count` is 0 or absent, so llama.cpp reads no \
                         `{arch}.{suffix}` and its heads are 0 wide"
                    )
                } else if swa && has(swa_suffix) {
                    format!("`{arch}.{swa_suffix}` is 0")
                } else if has(suffix) {
                    format!("`{arch}.{suffix}` is 0")
                } else {
                    derived()
                };
                return Err(empty(what, il));
            }
        }
        Ok(())
    }
}

/// The model's own keys (`{arch}.suffix`), as llama.cpp's uint32 hparams.
struct Keys<'a> {
    meta: &'a GgufMetadata,
    arch: &'a str,
}

impl Keys<'_> {
    fn error(&self, problem: String) -> KvError {
        KvError::ConfigFile {
            path: self.meta.source().to_owned(),
            problem,
        }
    }

    fn full(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.arch)
    }

    /// `get_key<uint32_t>`: the key must be a u32 (`GKV::get_kv` checks the
    /// type, not the value).
    fn optional(&self, suffix: &str) -> Result<Option<u32>, KvError> {
        let key = self.full(suffix);
        match self.meta.get(&key) {
            None => Ok(None),
            Some(GgufValue::U32(v)) => Ok(Some(*v)),
            Some(other) => Err(self.wrong_type(&key, other)),
        }
    }

    fn wrong_type(&self, key: &str, value: &GgufValue) -> KvError {
        self.wrong_type_of(key, value, "u32")
    }

    fn wrong_type_of(&self, key: &str, value: &GgufValue, expected: &str) -> KvError {
        self.error(format!(
            "`{key}` is {}; llama.cpp refuses: key {key} has wrong type {} but expected type \
             {expected}",
            value.describe(),
            value.type_name()
        ))
    }

    fn required(&self, suffix: &str) -> Result<u32, KvError> {
        self.optional(suffix)?.ok_or_else(|| {
            self.error(format!(
                "no `{}.{suffix}`; llama.cpp refuses the model (key not found in model)",
                self.arch
            ))
        })
    }

    /// `get_key_or_arr` into uint32 per layer: a u32 for every layer, or an
    /// array of exactly one u32, i32 or bool per layer (`get_arr` copies
    /// i32 bits as uint32, so a negative one is refused here).
    fn per_layer(&self, suffix: &str, layers: u32) -> Result<Option<Vec<u32>>, KvError> {
        let key = self.full(suffix);
        let n = usize::try_from(layers).unwrap_or(usize::MAX);
        let array = match self.meta.get(&key) {
            None => return Ok(None),
            Some(GgufValue::Array(array)) => array,
            Some(GgufValue::U32(v)) => return Ok(Some(vec![*v; n])),
            Some(other) => return Err(self.wrong_type(&key, other)),
        };
        if array.len() != u64::from(layers) {
            return Err(self.error(format!(
                "`{key}` has {} entries for {layers} layers; llama.cpp refuses: key {key} has \
                 wrong array length; expected {layers}, got {}",
                array.len(),
                array.len()
            )));
        }
        let items = self.per_layer_items(&key, array)?;
        items
            .iter()
            .enumerate()
            .map(|(il, item)| match *item {
                GgufValue::U32(v) => Ok(v),
                GgufValue::Bool(b) => Ok(u32::from(b)),
                GgufValue::I32(v) => u32::try_from(v).map_err(|_| {
                    self.error(format!(
                        "`{key}` is {v} for layer {il}; llama.cpp would read it as uint32 {}, \
                         which kv refuses",
                        u32::from_le_bytes(v.to_le_bytes())
                    ))
                }),
                _ => Err(self.error(format!("`{key}`: layer {il} is not a u32"))),
            })
            .collect::<Result<Vec<u32>, KvError>>()
            .map(Some)
    }

    /// The elements of a per-layer array, of a type `get_arr` copies into
    /// uint32 (bool, u32, i32), in llama.cpp's words where not.
    fn per_layer_items<'m>(
        &self,
        key: &str,
        array: &'m GgufArray,
    ) -> Result<&'m [GgufValue], KvError> {
        let element = array.element_type();
        match element {
            "bool" | "u32" | "i32" => {}
            "u64" | "f32" | "str" => {
                return Err(self.error(format!(
                    "`{key}` is an arr of {element}; llama.cpp refuses: {key} has wrong array \
                     element type {element}"
                )))
            }
            _ => {
                return Err(self.error(format!(
                    "`{key}` is an arr of {element}; llama.cpp refuses: {key} is not a \
                     string/float32/uint32/int32/uint64 array"
                )))
            }
        }
        if array.len() > MAX_LAYERS {
            return Err(self.error(format!(
                "`{key}` has {} entries; llama.cpp refuses: array length {} for key {key} \
                 exceeds max {MAX_LAYERS}",
                array.len(),
                array.len()
            )));
        }
        array.items().ok_or_else(|| {
            self.error(format!(
                "`{key}`: its {} entries were not kept",
                array.len()
            ))
        })
    }

    /// The window and which layers slide: `load_swa_pattern` takes an array
    /// of flags (one per layer, missing ones full), else a number `p`
    /// (layer `il` slides when `il % p < p - 1`; 0: every layer), else the
    /// architecture's default `p`. MTP layers never slide.
    fn sliding(
        &self,
        window: Window,
        layers: usize,
        nextn: u32,
    ) -> Result<Option<Sliding>, KvError> {
        let found = self.optional("attention.sliding_window")?;
        let window_kind = window;
        let (window, pattern) = match window {
            Window::None => return Ok(None),
            Window::Default { window, pattern } => (found.unwrap_or(window), pattern),
            Window::Required { pattern } => (self.required("attention.sliding_window")?, pattern),
            Window::IfPositive { pattern } => match found {
                Some(w) if w > 0 => (w, pattern),
                _ => return Ok(None),
            },
            Window::RequiredArray { window_first } => {
                let window = if window_first {
                    Some(self.required("attention.sliding_window")?)
                } else {
                    None
                };
                let name = self.full("attention.sliding_window_pattern");
                if !matches!(self.meta.get(&name), Some(GgufValue::Array(_))) {
                    return Err(self.error(format!(
                        "no array `{name}`; llama.cpp refuses the model (it reads the pattern \
                         only as an array of per-layer flags)"
                    )));
                }
                match window {
                    Some(w) => (w, 0),
                    None => (self.required("attention.sliding_window")?, 0),
                }
            }
            Window::IfPositiveDenseFirst { pattern } => match found {
                Some(w) if w > 0 => (w, pattern),
                _ => return Ok(None),
            },
            Window::IfPositiveArray => match found {
                Some(w) if w > 0 => {
                    let name = self.full("attention.sliding_window_pattern");
                    if !matches!(self.meta.get(&name), Some(GgufValue::Array(_))) {
                        return Err(self.error(format!(
                            "no array `{name}`; llama.cpp refuses the model (array key not found \
                             in model)"
                        )));
                    }
                    (w, 0)
                }
                _ => return Ok(None),
            },
            Window::SmallThinker => match found {
                Some(w) if w > 0 => (4096, 4),
                _ => return Ok(None),
            },
            Window::RequiredDenseFirst { pattern } => {
                (self.required("attention.sliding_window")?, pattern)
            }
            Window::Llama4 => match found {
                Some(0) => return Ok(None),
                _ => (8192, 4),
            },
            Window::Exaone4 => {
                let trunk = layers - usize::try_from(nextn).unwrap_or(layers);
                if trunk != 64 {
                    return Ok(None);
                }
                (found.unwrap_or(4096), 4)
            }
        };
        let key = "attention.sliding_window_pattern";
        let full_name = format!("{}.{key}", self.arch);
        let trunk = layers - usize::try_from(nextn).unwrap_or(layers);
        let flags = match self.meta.get(&full_name) {
            Some(GgufValue::Array(array)) => {
                let items = self.per_layer_items(&full_name, array)?;
                let mut flags = vec![false; layers];
                for (flag, item) in flags.iter_mut().zip(items) {
                    *flag = match *item {
                        GgufValue::Bool(b) => b,
                        GgufValue::U32(v) => v != 0,
                        GgufValue::I32(v) => v != 0,
                        _ => false,
                    };
                }
                flags
            }
            _ => {
                let pattern = self.optional(key)?.unwrap_or(pattern);
                let dense_first = matches!(
                    window_kind,
                    Window::RequiredDenseFirst { .. }
                        | Window::IfPositiveDenseFirst { .. }
                        | Window::SmallThinker
                );
                (0..layers)
                    .map(|il| {
                        let il = il as u64;
                        let p = u64::from(pattern);
                        let slides = if dense_first {
                            !il.is_multiple_of(p.max(1))
                        } else {
                            il % p.max(1) < p.saturating_sub(1)
                        };
                        il < trunk as u64 && (p == 0 || slides)
                    })
                    .collect()
            }
        };
        Ok(Some(Sliding {
            window,
            layers: flags,
        }))
    }

    /// `n_embd_r()` and `n_embd_s()` of an RWKV model, after the keys its
    /// loader requires.
    fn rwkv(&self, v7: bool, embedding: u32) -> Result<Recurrent, KvError> {
        let head = self.required("wkv.head_size")?;
        let required: &[&str] = if v7 {
            &[
                "attention.decay_lora_rank",
                "attention.iclr_lora_rank",
                "attention.value_residual_mix_lora_rank",
            ]
        } else {
            &["time_mix_extra_dim", "time_decay_extra_dim"]
        };
        for suffix in required {
            self.required(suffix)?;
        }
        let shift = self.optional("token_shift_count")?.unwrap_or(2);
        let fit = |what: &str, a: u32, b: u32, keys: &str| {
            a.checked_mul(b).ok_or_else(|| {
                self.error(format!(
                    "{keys}: the {what} state's width overflows llama.cpp's uint32 \
                     (n_embd_{what}())"
                ))
            })
        };
        Ok(Recurrent {
            r: fit(
                "r",
                shift,
                embedding,
                "`token_shift_count` x `embedding_length`",
            )?,
            s: fit("s", embedding, head, "`embedding_length` x `wkv.head_size`")?,
        })
    }

    /// The lightning indexer of deepseek32 or glm-dsa (`glm`).
    fn indexer(
        &self,
        glm: bool,
        layers: usize,
        nextn: u32,
        context_length: u32,
    ) -> Result<Indexer, KvError> {
        self.required("attention.indexer.head_count")?;
        let head = self.required("attention.indexer.key_length")?;
        self.required("attention.indexer.top_k")?;
        let trunk = layers.saturating_sub(usize::try_from(nextn).unwrap_or(layers));
        let mut full = vec![true; layers];
        if glm {
            // GLM-5/5.1 (a context under 1M) index every layer; GLM-5.2's
            // table: layers 0 and 1, then 1 in 4 from 2 up to 77.
            if context_length >= 1_048_576 {
                for (il, f) in full.iter_mut().enumerate() {
                    *f = il < 2 || (il < 78 && (il - 2).is_multiple_of(4));
                }
            }
            // get_key_or_arr over n_layer(): the MTP layers are not in it.
            let n = u32::try_from(trunk).unwrap_or(u32::MAX);
            if let Some(types) = self.per_layer("attention.indexer.types", n)? {
                for (f, t) in full.iter_mut().zip(types) {
                    *f = t != 0;
                }
            }
        }
        Ok(Indexer { head, layers: full })
    }

    /// deepseek4's window, read in its loader's order after the keys before
    /// it that llama.cpp requires.
    fn dsv4_window(&self) -> Result<u32, KvError> {
        self.required("attention.q_lora_rank")?;
        self.required("attention.sliding_window")
    }

    /// deepseek4's lightning indexer: one key head of
    /// `attention.indexer.key_length` on the layers whose ratio is 4 (the
    /// keys before the ratios, required as its loader reads them). MTP
    /// layers: the loader keeps them only where their weights are there,
    /// which a header does not say, so kv refuses them.
    fn dsv4_indexer(&self, layers: usize, nextn: u32) -> Result<(Indexer, Vec<u32>), KvError> {
        if nextn > 0 {
            return Err(self.error(format!(
                "`{}.nextn_predict_layers` is {nextn}: llama.cpp keeps DeepSeek-V4's MTP                  layers only where their weights are in the file (blk.N.nextn.eh_proj), and                  kv has not checked the caches it then makes; kv refuses it",
                self.arch
            )));
        }
        self.required("attention.indexer.head_count")?;
        let head = self.required("attention.indexer.key_length")?;
        self.required("attention.indexer.top_k")?;
        for key in [
            "attention.output_group_count",
            "attention.output_lora_rank",
            "hyper_connection.count",
            "hyper_connection.sinkhorn_iterations",
            "hash_layer_count",
        ] {
            self.required(key)?;
        }
        let ratios = self.dsv4_ratios(u32::try_from(layers).unwrap_or(u32::MAX))?;
        let indexer = Indexer {
            head,
            layers: ratios.iter().map(|r| *r == 4).collect(),
        };
        Ok((indexer, ratios))
    }

    /// `attention.compress_ratios`, the first `layers` of them (a shorter
    /// array is refused in llama.cpp's words), then the MoE scoring its
    /// loader insists on.
    fn dsv4_ratios(&self, layers: u32) -> Result<Vec<u32>, KvError> {
        let key = self.full("attention.compress_ratios");
        let array = match self.meta.get(&key) {
            Some(GgufValue::Array(array)) => array,
            None => {
                return Err(self.error(format!(
                    "no `{key}`; llama.cpp refuses the model (key not found in model)"
                )))
            }
            Some(other) => return Err(self.wrong_type_of(&key, other, "arr")),
        };
        if array.len() < u64::from(layers) {
            return Err(self.error(format!(
                "`{key}` has {} entries for {layers} layers; llama.cpp refuses: DeepSeek-V4                  compress_ratios is shorter than block_count",
                array.len()
            )));
        }
        let items = self.per_layer_items(&key, array)?;
        let ratios = items
            .iter()
            .take(usize::try_from(layers).unwrap_or(usize::MAX))
            .enumerate()
            .map(|(il, item)| match *item {
                GgufValue::U32(v) => Ok(v),
                GgufValue::I32(v) if v >= 0 => Ok(v.unsigned_abs()),
                _ => Err(self.error(format!(
                    "`{key}`: layer {il} is {}, not a ratio",
                    item.describe()
                ))),
            })
            .collect::<Result<Vec<u32>, KvError>>()?;
        // LLAMA_EXPERT_GATING_FUNC_TYPE_SQRT_SOFTPLUS.
        let gating = self.required("expert_gating_func")?;
        if gating != 4 {
            return Err(self.error(format!(
                "`{}.expert_gating_func` is {gating}; llama.cpp refuses: DeepSeek-V4 loader                  currently expects sqrtsoftplus MoE scoring",
                self.arch
            )));
        }
        Ok(ratios)
    }

    /// nanbeige's `num_loops`: the trunk's layers repeated that many times
    /// (`n_layer_all` = layers x loops), each copy with its layer's heads.
    fn loop_layers(&self, hp: &mut Hparams) -> Result<(), KvError> {
        let loops = self.optional("num_loops")?.unwrap_or(1);
        if loops == 0 {
            return Err(self.error(format!(
                "`{}.num_loops` is 0; llama.cpp aborts (GGML_ASSERT(n_loops_u >= 1))",
                self.arch
            )));
        }
        if loops == 1 {
            return Ok(());
        }
        if hp.nextn > 0 {
            return Err(self.error(format!(
                "`{0}.num_loops` {loops} with `{0}.nextn_predict_layers` {1}: kv does not follow \
                 how llama.cpp repeats layers over MTP ones",
                self.arch, hp.nextn
            )));
        }
        let phys = hp.layers;
        let all = u64::from(phys) * u64::from(loops);
        if all > MAX_LAYERS {
            return Err(self.error(format!(
                "`{0}.block_count` {phys} x `{0}.num_loops` {loops} = {all} layers; llama.cpp \
                 aborts above {MAX_LAYERS}",
                self.arch
            )));
        }
        let n = usize::try_from(all).unwrap_or(usize::MAX);
        let p = usize::try_from(phys).unwrap_or(usize::MAX).max(1);
        let repeat = |v: &Vec<u32>| (0..n).map(|il| v[il % p]).collect::<Vec<u32>>();
        hp.kv_heads = repeat(&hp.kv_heads);
        hp.head_k = repeat(&hp.head_k);
        hp.head_v = repeat(&hp.head_v);
        hp.layers = u32::try_from(all).unwrap_or(u32::MAX);
        Ok(())
    }

    /// bailingmoe3's KDA gate, as its loader asserts it: `kda.safe_gate`
    /// true (the default) and `kda.gate_lower_bound` (required, f32) below 0.
    fn kda_gate(&self) -> Result<(), KvError> {
        let safe = self.full("kda.safe_gate");
        match self.meta.get(&safe) {
            None | Some(GgufValue::Bool(true)) => {}
            Some(GgufValue::Bool(false)) => {
                return Err(self.error(format!(
                    "`{safe}` is false; llama.cpp aborts (GGML_ASSERT(hparams.kda_safe_gate))"
                )))
            }
            Some(other) => return Err(self.wrong_type_of(&safe, other, "bool")),
        }
        let bound = self.full("kda.gate_lower_bound");
        match self.meta.get(&bound) {
            Some(GgufValue::F32(v)) if *v < 0.0 => Ok(()),
            Some(GgufValue::F32(v)) => Err(self.error(format!(
                "`{bound}` is {v}, not below 0; llama.cpp aborts \
                 (GGML_ASSERT(hparams.kda_gate_lower_bound < 0.0f))"
            ))),
            Some(other) => Err(self.wrong_type_of(&bound, other, "f32")),
            None => Err(self.error(format!(
                "no `{bound}`; llama.cpp refuses the model (key not found in model)"
            ))),
        }
    }

    /// dflash: `target_layers` required; a DSpark DSV4 draft
    /// (`hyper_connection.count` above 0) makes a different cache, which kv
    /// does not follow.
    fn dflash(&self) -> Result<(), KvError> {
        let name = self.full("target_layers");
        if !matches!(self.meta.get(&name), Some(GgufValue::Array(_))) {
            return Err(self.error(format!(
                "no array `{name}`; llama.cpp refuses: DFlash model requires 'target_layers' in \
                 GGUF metadata"
            )));
        }
        if self.optional("hyper_connection.count")?.unwrap_or(0) > 0 {
            return Err(self.error(format!(
                "`{}.hyper_connection.count` is above 0 (a DSpark DSV4 draft): kv does not know \
                 llama.cpp's cache rules for it",
                self.arch
            )));
        }
        Ok(())
    }

    /// graniteswitch (`granite-switch.cpp`): the adapter keys its loader
    /// requires, in its order, then a router layer after the others
    /// (`router_layer`: `n_layer_all = block_count + 1`, one KV head) that
    /// its cache holds; `n_layer_nextn` is 1, so `n_layer()` is the rest.
    fn granite_switch(&self, hp: &mut Hparams) -> Result<(), KvError> {
        let count = self.required("adapters.count")?;
        let rank = self.required("adapters.lora_rank")?;
        if count > 4096 {
            return Err(self.error(format!(
                "`{}.adapters.count` is {count}; llama.cpp refuses: graniteswitch: invalid \
                 adapter count {count}",
                self.arch
            )));
        }
        if rank > 4096 {
            return Err(self.error(format!(
                "`{}.adapters.lora_rank` is {rank}; llama.cpp refuses: graniteswitch: invalid \
                 lora rank {rank}",
                self.arch
            )));
        }
        let mut lengths = [0u64; 2];
        for (len, suffix) in lengths.iter_mut().zip([
            "adapters.token_ids_activate",
            "adapters.token_ids_substitute",
        ]) {
            let key = self.full(suffix);
            *len = match self.meta.get(&key) {
                Some(GgufValue::Array(array)) => array.len(),
                Some(other) => return Err(self.wrong_type_of(&key, other, "array")),
                None => {
                    return Err(self.error(format!(
                        "no `{key}`; llama.cpp refuses the model (key not found in model)"
                    )))
                }
            };
        }
        if lengths != [u64::from(count); 2] {
            return Err(self.error(format!(
                "llama.cpp refuses: graniteswitch: adapter token id arrays ({} activate, {} \
                 substitute) do not match adapter count {count}",
                lengths[0], lengths[1]
            )));
        }
        if u64::from(hp.layers) >= MAX_LAYERS {
            return Err(self.error(format!(
                "llama.cpp refuses: graniteswitch: block count {} exceeds LLAMA_MAX_LAYERS",
                hp.layers
            )));
        }
        hp.layers += 1;
        hp.nextn = 1;
        hp.all_layers = true;
        hp.kv_heads.push(1);
        hp.head_k.push(hp.head_k_full);
        let head_v = hp.head_v.last().copied().unwrap_or(hp.head_k_full);
        hp.head_v.push(head_v);
        Ok(())
    }

    /// hrm_text: `block_count` must be the cache slots its stacks make,
    /// layers_per_stack x h_cycles x (l_cycles + 1), each count above 0.
    fn hrm_slots(&self, layers: u32) -> Result<(), KvError> {
        let per = self.required("hrm.layers_per_stack")?;
        let h = self.required("hrm.h_cycles")?;
        let l = self.required("hrm.l_cycles")?;
        let slots = u64::from(per) * u64::from(h) * (u64::from(l) + 1);
        if per == 0 || h == 0 || l == 0 || slots != u64::from(layers) {
            return Err(self.error(format!(
                "`{0}.hrm.layers_per_stack` {per} x `{0}.hrm.h_cycles` {h} x (`{0}.hrm.l_cycles` \
                 {l} + 1) is {slots} cache slots, not `{0}.block_count` {layers} (or a count is \
                 0); llama.cpp aborts",
                self.arch
            )));
        }
        Ok(())
    }

    /// minimax-m3's MSA indexer: on the layers from
    /// `leading_dense_block_count` on.
    fn msa_indexer(&self, layers: usize) -> Result<Indexer, KvError> {
        let dense = self.optional("leading_dense_block_count")?.unwrap_or(0);
        self.required("attention.indexer.head_count")?;
        let head = self.required("attention.indexer.key_length")?;
        self.required("attention.indexer.top_k")?;
        if self.required("attention.indexer.block_size")? == 0 {
            return Err(self.error(format!(
                "`{}.attention.indexer.block_size` is 0; llama.cpp aborts \
                 (GGML_ASSERT(hparams.indexer_block_size > 0))",
                self.arch
            )));
        }
        self.required("attention.indexer.local_blocks")?;
        let dense = usize::try_from(dense).unwrap_or(usize::MAX);
        Ok(Indexer {
            head,
            layers: (0..layers).map(|il| il >= dense).collect(),
        })
    }

    /// dots3note's indexer: `attention.indexer.types` required, as an array.
    fn dots3note_indexer(&self, layers: usize) -> Result<Indexer, KvError> {
        self.required("attention.indexer.head_count")?;
        let head = self.required("attention.indexer.key_length")?;
        self.required("attention.indexer.top_k")?;
        let name = self.full("attention.indexer.types");
        let Some(GgufValue::Array(array)) = self.meta.get(&name) else {
            return Err(self.error(format!(
                "no array `{name}`; llama.cpp refuses the model (array key not found in model)"
            )));
        };
        let mut full = vec![false; layers];
        for (f, item) in full.iter_mut().zip(self.per_layer_items(&name, array)?) {
            *f = match *item {
                GgufValue::Bool(b) => b,
                GgufValue::U32(v) => v != 0,
                GgufValue::I32(v) => v != 0,
                _ => false,
            };
        }
        Ok(Indexer { head, layers: full })
    }

    /// A key qwen4exp requires above 0 (`qwen4exp_require_nonzero`).
    fn nonzero(&self, suffix: &str) -> Result<u32, KvError> {
        let v = self.required(suffix)?;
        if v == 0 {
            return Err(self.error(format!(
                "`{0}.{suffix}` is 0; llama.cpp refuses: {0}.{suffix} must be greater than zero, \
                 got 0",
                self.arch
            )));
        }
        Ok(v)
    }

    /// qwen4exp's hyper-connections (checked as its loader checks them) and
    /// QSA indexer: one key head of `attention.indexer.key_length` (no
    /// pooling) on every attention layer.
    fn qwen4exp_indexer(&self, layers: usize) -> Result<Indexer, KvError> {
        let hc = self.required("hyper_connection.count")?;
        self.required("hyper_connection.low_rank")?;
        if hc <= 1 {
            return Err(self.error(format!(
                "`{0}.hyper_connection.count` is {hc}; llama.cpp refuses: \
                 {0}.hyper_connection.count must be greater than one, got {hc}",
                self.arch
            )));
        }
        self.nonzero("hyper_connection.low_rank")?;
        self.required("attention.indexer.head_count")?;
        let head = self.required("attention.indexer.key_length")?;
        self.required("attention.indexer.top_k")?;
        for suffix in [
            "attention.indexer.head_count",
            "attention.indexer.key_length",
            "attention.indexer.top_k",
        ] {
            self.nonzero(suffix)?;
        }
        Ok(Indexer {
            head,
            layers: vec![true; layers],
        })
    }

    /// qwen4exp's PLE conv history, where `ple.layers` lists a layer:
    /// (conv_kernel - 1) x ngram_size x hyper_connection.count x n_embd f32
    /// a cell, on that (recurrent) layer.
    fn qwen4exp_ple(
        &self,
        layers: usize,
        embedding: u32,
        hybrid: Option<&HybridLayers>,
    ) -> Result<Option<Ple>, KvError> {
        let name = self.full("ple.layers");
        let array = match self.meta.get(&name) {
            None => return Ok(None),
            Some(GgufValue::Array(array)) if array.is_empty() => return Ok(None),
            Some(GgufValue::Array(array)) => array,
            Some(other) => return Err(self.wrong_type_of(&name, other, "array")),
        };
        let items = self.per_layer_items(&name, array)?;
        if items.len() != 1 {
            return Err(self.error(format!(
                "`{name}` lists {} layers; llama.cpp refuses: {name} lists {} layers, but only \
                 one PLE layer is supported",
                items.len(),
                items.len()
            )));
        }
        let layer = match items[0] {
            GgufValue::U32(v) => usize::try_from(v).unwrap_or(usize::MAX),
            GgufValue::I32(v) => usize::try_from(v).unwrap_or(usize::MAX),
            _ => usize::MAX,
        };
        if layer >= layers {
            return Err(self.error(format!(
                "`{name}` names layer {layer} of {layers}; llama.cpp refuses: PLE layer {layer} is \
                 out of range"
            )));
        }
        let ngram = self.required("ple.ngram_size")?;
        let per = self.required("ple.heads_per_ngram")?;
        let kernel = self.required("ple.conv_kernel")?;
        self.required("ple.eos_token_id")?;
        self.nonzero("ple.conv_kernel")?;
        self.nonzero("embedding_length_per_layer_input")?;
        if !(2..=8).contains(&ngram) {
            return Err(self.error(format!(
                "`{}.ple.ngram_size` is {ngram}; llama.cpp refuses: PLE n-gram size {ngram} is out \
                 of range",
                self.arch
            )));
        }
        let heads = u64::from(ngram - 1) * u64::from(per);
        if heads == 0 || heads > 64 {
            return Err(self.error(format!(
                "`{}.ple.heads_per_ngram` {per}: llama.cpp refuses: PLE head count {heads} is out \
                 of range",
                self.arch
            )));
        }
        if !hybrid.is_some_and(|h| h.recr[layer]) {
            return Err(self.error(format!(
                "`{name}` names layer {layer}, which is not a linear-attention layer; llama.cpp \
                 refuses: PLE layer {layer} is not a linear attention layer"
            )));
        }
        let hc = self.required("hyper_connection.count")?;
        let width = u64::from(kernel - 1) * u64::from(ngram) * u64::from(hc) * u64::from(embedding);
        let width = u32::try_from(width).map_err(|_| {
            self.error(format!(
                "the PLE conv row ((`{0}.ple.conv_kernel` - 1) x `{0}.ple.ngram_size` x \
                 `{0}.hyper_connection.count` x `{0}.embedding_length`) overflows llama.cpp's \
                 uint32",
                self.arch
            ))
        })?;
        Ok(Some(Ple { layer, width }))
    }

    /// glm5-next's k-pooled indexer: each cached row is key, gate and pooled
    /// value, 3 x `attention.indexer.key_length` wide.
    fn glm5_next_indexer(&self, layers: usize, nextn: u32) -> Result<Indexer, KvError> {
        self.required("attention.indexer.head_count")?;
        let head = self.required("attention.indexer.key_length")?;
        let top_k = self.required("attention.indexer.top_k")?;
        let kpool = self.required("attention.indexer.kpool")?;
        if kpool <= 1 || !top_k.is_multiple_of(kpool) {
            return Err(self.error(format!(
                "`{0}.attention.indexer.kpool` {kpool} with `{0}.attention.indexer.top_k` \
                 {top_k}: llama.cpp aborts (GGML_ASSERT(hparams.indexer_kpool > 1 && \
                 hparams.indexer_top_k % hparams.indexer_kpool == 0))",
                self.arch
            )));
        }
        let head = head.checked_mul(3).ok_or_else(|| {
            self.error(format!(
                "3 x `{}.attention.indexer.key_length` {head} overflows llama.cpp's uint32",
                self.arch
            ))
        })?;
        let trunk = layers.saturating_sub(usize::try_from(nextn).unwrap_or(layers));
        let mut full = vec![true; layers];
        let n = u32::try_from(trunk).unwrap_or(u32::MAX);
        if let Some(types) = self.per_layer("attention.indexer.types", n)? {
            for (f, t) in full.iter_mut().zip(types) {
                *f = t != 0;
            }
        }
        Ok(Indexer { head, layers: full })
    }

    /// hy_v4's indexer, where `attention.indexer.top_k` is above 0.
    fn hy_v4_indexer(
        &self,
        layers: usize,
        nextn: u32,
        n_rot: u32,
    ) -> Result<Option<Indexer>, KvError> {
        let heads = self.optional("attention.indexer.head_count")?.unwrap_or(0);
        let head = self.optional("attention.indexer.key_length")?.unwrap_or(0);
        if self.optional("attention.indexer.top_k")?.unwrap_or(0) == 0 {
            return Ok(None);
        }
        if heads == 0 || head <= n_rot {
            return Err(self.error(format!(
                "`{0}.attention.indexer.head_count` {heads}, `{0}.attention.indexer.key_length` \
                 {head} (rope {n_rot}); llama.cpp refuses: hy_v4: bad indexer head count / key \
                 length",
                self.arch
            )));
        }
        if nextn > 0 {
            // filter_lid asks is_indexer_full of the MTP layers too, which aborts.
            return Err(self.error(format!(
                "`{}.nextn_predict_layers` is {nextn} with an indexer; llama.cpp aborts \
                 (is_indexer_full: il out of bounds)",
                self.arch
            )));
        }
        let mut full = vec![false; layers];
        let n = u32::try_from(layers).unwrap_or(u32::MAX);
        if let Some(types) = self.per_layer("attention.indexer.types", n)? {
            for (f, t) in full.iter_mut().zip(types) {
                *f = t != 0;
            }
        }
        if !full.first().copied().unwrap_or(false) {
            return Err(self.error(format!(
                "`{}.attention.indexer.types` does not give layer 0 an indexer; llama.cpp \
                 refuses: hy_v4: layer 0 must own an indexer, nothing precedes it to share",
                self.arch
            )));
        }
        Ok(Some(Indexer { head, layers: full }))
    }

    /// `n_layer_kv_from_start` of gemma3n and gemma4 (None for the others:
    /// every layer has its K/V). Their layer-reuse callback asserts it is at
    /// least 2, so less is refused.
    fn kv_from_start(&self, architecture: &str, layers: u32) -> Result<Option<u32>, KvError> {
        let start = match architecture {
            "gemma3n" => 20,
            "gemma4" => {
                let shared = self.optional("attention.shared_kv_layers")?.unwrap_or(0);
                // int32 in llama.cpp: a negative one gives every layer a K/V,
                // but the reuse callback's assert fails first.
                match layers.checked_sub(shared) {
                    Some(start) => start,
                    None => {
                        return Err(self.error(format!(
                            "`{0}.attention.shared_kv_layers` {shared} is more than the {layers} \
                             layers; llama.cpp aborts (GGML_ASSERT(hparams.n_layer_kv_from_start \
                             >= 2))",
                            self.arch
                        )))
                    }
                }
            }
            _ => return Ok(None),
        };
        if start < 2 {
            return Err(self.error(format!(
                "`{architecture}` keeps K/V in its first {start} layers only; llama.cpp aborts \
                 (GGML_ASSERT(hparams.n_layer_kv_from_start >= 2))"
            )));
        }
        Ok(Some(start))
    }

    /// A hybrid's state widths, layer filters and (lfm2) window.
    fn hybrid(
        &self,
        kind: Hybrid,
        embedding: u32,
        kv_heads: &[u32],
        nextn: u32,
        head_count: u32,
        key_length: u32,
    ) -> Result<(Recurrent, HybridLayers, Option<Sliding>), KvError> {
        let n = kv_heads.len();
        let layers = u32::try_from(n).unwrap_or(u32::MAX);
        // n_layer(): the trunk, before the MTP layers (nextn <= layers, checked).
        let trunk = n.saturating_sub(usize::try_from(nextn).unwrap_or(n));
        let state = match kind {
            Hybrid::Lfm2 { .. } => {
                let l_cache = self.required("shortconv.l_cache")?;
                // n_embd x (l_cache - 1) in uint32: 0 would wrap in llama.cpp.
                let r = l_cache
                    .checked_sub(1)
                    .and_then(|k| embedding.checked_mul(k))
                    .ok_or_else(|| {
                        self.error(format!(
                            "`{0}.shortconv.l_cache` {l_cache} x `{0}.embedding_length` \
                             {embedding}: the conv state's width (n_embd x (l_cache - 1)) is out \
                             of llama.cpp's uint32; kv refuses it",
                            self.arch
                        ))
                    })?;
                Recurrent { r, s: 0 }
            }
            Hybrid::Jamba => self.ssm(false)?,
            Hybrid::Qwen4Exp => {
                for suffix in [
                    "ssm.conv_kernel",
                    "ssm.inner_size",
                    "ssm.state_size",
                    "ssm.time_step_rank",
                    "ssm.group_count",
                ] {
                    self.nonzero(suffix)?;
                }
                self.ssm(true)?
            }
            // n_embd_s() = n_embd_head_la^2 x n_head(); no conv keys are read.
            Hybrid::MiniMax01 => Recurrent {
                r: 0,
                s: key_length
                    .checked_mul(key_length)
                    .and_then(|sq| sq.checked_mul(head_count))
                    .ok_or_else(|| {
                        self.error(format!(
                            "`{0}.attention.key_length` {key_length} squared x \
                             `{0}.attention.head_count` {head_count} overflows llama.cpp's \
                             uint32 (n_embd_s())",
                            self.arch
                        ))
                    })?,
            },
            Hybrid::KimiLinear | Hybrid::Glm5Next => {
                let conv = self.required("ssm.conv_kernel")?;
                let kda = self.required("kda.head_dim")?;
                // 3 x (d_conv > 0 ? d_conv - 1 : 3) x n_head() x head_kda, and
                // head_kda^2 x n_head(), in uint32.
                let taps = if conv > 0 { conv - 1 } else { 3 };
                let inner = u64::from(head_count) * u64::from(kda);
                let r = inner.checked_mul(3 * u64::from(taps));
                let s = inner.checked_mul(u64::from(kda));
                let fit = |what: &str, v: Option<u64>| {
                    v.and_then(|v| u32::try_from(v).ok()).ok_or_else(|| {
                        self.error(format!(
                            "`{0}.kda.head_dim` {kda} x `{0}.attention.head_count` {head_count}: \
                             the {what} state's width overflows llama.cpp's uint32 \
                             (n_embd_{what}())",
                            self.arch
                        ))
                    })
                };
                Recurrent {
                    r: fit("r", r)?,
                    s: fit("s", s)?,
                }
            }
            _ => self.ssm(true)?,
        };
        let zero_kv = |il: usize| il < trunk && kv_heads[il] == 0;
        let (attn, recr): (Vec<bool>, Vec<bool>) = match kind {
            // glm5-next marks every layer but filters to the trunk.
            Hybrid::Glm5Next => (0..n)
                .map(|il| (il < trunk && kv_heads[il] != 0, zero_kv(il)))
                .unzip(),
            Hybrid::Jamba | Hybrid::ZeroKvHeads | Hybrid::Lfm2 { .. } | Hybrid::KimiLinear => {
                (0..n).map(|il| (!zero_kv(il), zero_kv(il))).unzip()
            }
            Hybrid::FalconH1 => (vec![true; n], vec![true; n]),
            Hybrid::NemotronH => {
                let ff = self
                    .per_layer("feed_forward_length", layers)?
                    .unwrap_or_else(|| vec![0; n]);
                (0..n)
                    .map(|il| {
                        let recr = zero_kv(il) && ff[il] == 0;
                        (!recr && ff[il] == 0, recr)
                    })
                    .unzip()
            }
            Hybrid::Qwen3Next | Hybrid::MiniMax01 | Hybrid::Qwen4Exp => {
                let is_recr: Vec<bool> = match self
                    .per_layer("attention.recurrent_layers", layers)?
                {
                    Some(flags) => flags.iter().map(|&f| f != 0).collect(),
                    None => {
                        let default = if kind == Hybrid::MiniMax01 { 8 } else { 4 };
                        let interval = self.optional("full_attention_interval")?.unwrap_or(default);
                        if interval == 0 {
                            return Err(self.error(format!(
                                "`{}.full_attention_interval` is 0; llama.cpp would divide by \
                                 it (layer % 0); kv refuses it",
                                self.arch
                            )));
                        }
                        (0..n)
                            .map(|il| {
                                il < trunk && !(il as u64 + 1).is_multiple_of(u64::from(interval))
                            })
                            .collect()
                    }
                };
                (0..n)
                    .map(|il| (il < trunk && !is_recr[il], il < trunk && is_recr[il]))
                    .unzip()
            }
        };
        let sliding = match kind {
            Hybrid::Lfm2 { window: true } => match self.optional("attention.sliding_window")? {
                Some(window) if window > 0 => Some(Sliding {
                    window,
                    layers: (0..n).map(|il| il < trunk && !zero_kv(il)).collect(),
                }),
                _ => None,
            },
            _ => None,
        };
        Ok((state, HybridLayers { attn, recr }, sliding))
    }

    /// `n_embd_r()` and `n_embd_s()` from the `ssm.*` keys of a hybrid:
    /// `grouped` where the architecture reads `ssm.group_count`.
    fn ssm(&self, grouped: bool) -> Result<Recurrent, KvError> {
        let conv = self.required("ssm.conv_kernel")?;
        let inner = self.required("ssm.inner_size")?;
        let state = self.required("ssm.state_size")?;
        self.required("ssm.time_step_rank")?;
        let groups = if grouped {
            self.required("ssm.group_count")?
        } else {
            0
        };
        self.ssm_widths(conv, inner, state, groups)
    }

    /// `n_embd_r()` and `n_embd_s()` of a Mamba or Mamba2 model.
    fn mamba(&self, grouped: bool, embedding: u32) -> Result<Recurrent, KvError> {
        let conv = self.required("ssm.conv_kernel")?;
        let inner = self.required("ssm.inner_size")?;
        let state = self.required("ssm.state_size")?;
        self.required("ssm.time_step_rank")?;
        let groups = if grouped {
            self.required("ssm.group_count")?
        } else {
            // Mamba's tensors are built for d_inner = 2 x n_embd only.
            if u64::from(inner) != 2 * u64::from(embedding) {
                return Err(self.error(format!(
                    "`{0}.ssm.inner_size` is {inner}, not 2 x embedding_length ({embedding}); \
                     llama.cpp refuses it (only an expansion factor of 2 is supported for now)",
                    self.arch
                )));
            }
            0
        };
        self.ssm_widths(conv, inner, state, groups)
    }

    /// (d_conv - 1) x (d_inner + 2 x n_group x d_state) and d_state x d_inner.
    fn ssm_widths(
        &self,
        conv: u32,
        inner: u32,
        state: u32,
        groups: u32,
    ) -> Result<Recurrent, KvError> {
        // (d_conv - 1) x (d_inner + 2 x n_group x d_state), d_state x d_inner,
        // in llama.cpp's uint32.
        let channels = 2u64
            .checked_mul(groups.into())
            .and_then(|g| g.checked_mul(state.into()))
            .and_then(|g| g.checked_add(inner.into()));
        let r = channels.and_then(|c| c.checked_mul(u64::from(conv.saturating_sub(1))));
        let s = u64::from(state).checked_mul(inner.into());
        let fit = |what: &str, v: Option<u64>| {
            v.and_then(|v| u32::try_from(v).ok()).ok_or_else(|| {
                self.error(format!(
                    "the {what} state's width overflows llama.cpp's uint32 (n_embd_{what}())"
                ))
            })
        };
        Ok(Recurrent {
            r: fit("r", r)?,
            s: fit("s", s)?,
        })
    }
}
