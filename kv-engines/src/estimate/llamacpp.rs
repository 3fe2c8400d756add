//! What llama.cpp holds for a GGUF model: its KV cache, sliding-window
//! cache or recurrent state, from the file's header alone, with the lines
//! llama.cpp logs when it creates them. See [`estimate`].
//!
//! Pinned to ggml-org/llama.cpp at [`LLAMACPP_COMMIT`] (the one
//! llama-cpp-python 0.3.36 vendors). Its conventions:
//! - **Settings are the context's** (`llama_context_params`), with the
//!   defaults `llama-cli`/`llama-server` pass (`common_params`): `n_ctx` 0
//!   for the model's `context_length`, `n_batch` 2048, `n_ubatch` 512, one
//!   sequence, flash attention auto, f16 K and V, neither unified nor full
//!   SWA. `n_ctx` is the total over all sequences. `llama-server`'s own
//!   automatic slots and `--fit` (which shrinks unset sizes to fit the
//!   device) are not applied.
//! - **Cells:** `n_ctx` is padded to 256; unless unified, each sequence has
//!   its own stream of `pad(n_ctx / n_seq, 256)` cells (and `n_ctx` becomes
//!   that times `n_seq`). A sliding-window model keeps its full layers in
//!   that many cells and its sliding ones in `pad(min(cells, n_swa x
//!   (unified ? n_seq : 1) + n_ubatch), 256)`, or as many as the full ones
//!   with `swa_full`. A recurrent model holds one f32 R (conv) and S (SSM)
//!   state per sequence, whatever `n_ctx`.
//! - **Bytes** are ggml's: a K or V row is `ggml_row_size(type, n_embd_gqa)`
//!   (whole blocks of 32 for the quantized types), times cells and streams.
//!   Without flash attention V is stored transposed, and every layer's is as
//!   wide as the widest.
//! - **Refusals** are llama.cpp's: a quantized V cache without flash
//!   attention, a quantized type whose block does not divide a head, more
//!   than 256 sequences, a `block_count` outside 1 to 512. With flash
//!   attention auto, a quantized V turns it on (and llama.cpp says so).
//! - **Architectures** followed (`hparams::ARCHITECTURES`; each checked on a
//!   twin by `scripts/llamacpp/registry.py`, results in
//!   `docs/coverage/llamacpp.tsv`): plain ones with one full cache (llama,
//!   qwen2, phi3 whose window llama.cpp drops, nanbeige's looped layers,
//!   hrm_text's slots, ...); windowed ones (`llama_kv_cache_iswa`: gemma2/3,
//!   cohere2, gpt-oss, exaone4 only with 64 layers, llama4's 8192 chunks,
//!   dense-first and array patterns, ...); gemma3n and gemma4, whose later
//!   layers reuse an earlier one's K/V; MLA (deepseek2, mistral4: K alone,
//!   no V, K and V types equal); indexer caches (`llama_kv_cache_dsa`/`_msa`
//!   /`_dsa_iswa`: deepseek32, glm-dsa, hy_v4, minimax-m3, dots3note);
//!   recurrent (mamba, mamba2, rwkv6/7); and hybrids (`llama_memory_hybrid`,
//!   `_iswa` for lfm2 with a window, `_idx` with an indexer: jamba,
//!   granitehybrid, plamo2, falcon-h1, nemotron_h, qwen3next/qwen35,
//!   minimax-01, kimi-linear/k3, bailingmoe3, glm5-next, qwen4exp), whose
//!   attention cache takes `filter_attn`'s layers and whose state line counts
//!   `n_layer()` while holding `filter_recr`'s. Any other is refused by name
//!   (deepseek4's compressed cache, speculative draft heads, ...).
//! - **Lines** are llama.cpp's at info and warning level from the cache
//!   constructors, MiB as it rounds them (a `float`); the per-device buffer
//!   lines are left out (they name the backend). The environment variable
//!   `LLAMA_ATTN_ROT_DISABLE` is taken as unset.
//!
//! ```
//! use kv_engines::estimate::llamacpp::{estimate, LlamaCppSettings};
//! use kv_engines::gguf::GgufMetadata;
//!
//! // A llama header: 32 layers, 8 KV heads of 128 (key_length), 32k context.
//! fn entry(file: &mut Vec<u8>, key: &str, kind: u32, value: &[u8]) {
//!     file.extend((key.len() as u64).to_le_bytes());
//!     file.extend(key.as_bytes());
//!     file.extend(kind.to_le_bytes());
//!     file.extend(value);
//! }
//! let mut file = b"GGUF".to_vec();
//! file.extend(3u32.to_le_bytes());
//! file.extend(0u64.to_le_bytes());
//! file.extend(6u64.to_le_bytes());
//! let mut arch = 5u64.to_le_bytes().to_vec();
//! arch.extend(b"llama");
//! entry(&mut file, "general.architecture", 8, &arch);
//! entry(&mut file, "llama.block_count", 4, &32u32.to_le_bytes());
//! entry(&mut file, "llama.context_length", 4, &32768u32.to_le_bytes());
//! entry(&mut file, "llama.embedding_length", 4, &4096u32.to_le_bytes());
//! entry(&mut file, "llama.attention.head_count", 4, &32u32.to_le_bytes());
//! entry(&mut file, "llama.attention.head_count_kv", 4, &8u32.to_le_bytes());
//! let meta = GgufMetadata::read(&file[..], "llama.gguf")?;
//!
//! let mut settings = LlamaCppSettings::default();
//! settings.n_ctx = 8192;
//! let held = estimate(&meta, &settings)?;
//! // 32 layers x 8192 cells x 2 x 1024 x 2 bytes = 1 GiB.
//! assert_eq!(held.bytes(), 1 << 30);
//! assert_eq!(
//!     held.lines()[0],
//!     "llama_kv_cache: size = 1024.00 MiB (  8192 cells,  32 layers,  1/1 seqs), \
//!      K (f16):  512.00 MiB, V (f16):  512.00 MiB"
//! );
//! # Ok::<(), kv_core::KvError>(())
//! ```

use kv_core::KvError;
use serde::Serialize;

use crate::gguf::GgufMetadata;

mod ggml_type;
mod hparams;
pub(crate) use hparams::MAX_LAYERS;
mod report;

pub use ggml_type::GgmlType;
pub use report::{
    buffer_mib, mib, CacheDevice, CachePlacement, CompState, KvCache, Memory, RecurrentState,
};
use report::{Buffers, CacheTensor};

use hparams::Hparams;

/// The llama.cpp commit whose rules [`estimate`] follows: the one
/// llama-cpp-python 0.3.36 vendors.
pub const LLAMACPP_COMMIT: &str = "0c1e57098bba43ac29e6e3b677cdceebdd22334f";

/// llama.cpp's `LLAMA_MAX_SEQ`.
const MAX_SEQ: u32 = 256;

/// Cells are padded to this (`GGML_PAD(n_ctx, 256)`).
const PAD: u64 = 256;

/// `--flash-attn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlashAttn {
    /// `on`.
    On,
    /// `off`.
    Off,
    /// `auto` (the default): on when the cache is made; a quantized V
    /// requires it.
    Auto,
}

/// The context settings that size llama.cpp's caches, in its own types
/// (`uint32_t`) and meanings. See the module's conventions.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LlamaCppSettings {
    /// `--ctx-size`: cells over all sequences; 0 for the model's
    /// `context_length`.
    pub n_ctx: u32,
    /// `--parallel` (`n_seq_max`): sequences; 0 is taken as 1.
    pub n_seq: u32,
    /// `--batch-size` (`n_batch`): bounds the micro-batch.
    pub n_batch: u32,
    /// `--ubatch-size` (`n_ubatch`): tokens a sliding-window cache keeps
    /// beside the window; 0 for `n_batch`.
    pub n_ubatch: u32,
    /// `--kv-unified`: one stream shared by every sequence.
    pub kv_unified: bool,
    /// `--swa-full`: the sliding-window cache as large as the full one.
    pub swa_full: bool,
    /// `--flash-attn`.
    pub flash_attn: FlashAttn,
    /// `--cache-type-k`.
    pub type_k: GgmlType,
    /// `--cache-type-v`.
    pub type_v: GgmlType,
}

impl Default for LlamaCppSettings {
    fn default() -> LlamaCppSettings {
        LlamaCppSettings {
            n_ctx: 0,
            n_seq: 1,
            n_batch: 2048,
            n_ubatch: 512,
            kv_unified: false,
            swa_full: false,
            flash_attn: FlashAttn::Auto,
            type_k: GgmlType::F16,
            type_v: GgmlType::F16,
        }
    }
}

/// What llama.cpp holds for a model at some settings (JSON: the `llama.cpp`
/// member of the estimate family, with the engine named).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LlamaCppEstimate {
    /// Always `"llama.cpp"`.
    pub engine: &'static str,
    /// [`LLAMACPP_COMMIT`].
    pub commit: &'static str,
    /// `general.architecture`.
    pub architecture: String,
    /// The model's `context_length`.
    pub context_length: u64,
    /// `n_ctx` as llama.cpp settles it: padded, and a multiple of the
    /// streams' cells.
    pub n_ctx: u64,
    /// `n_ctx_seq`: cells per stream of a full-attention layer.
    pub n_ctx_seq: u64,
    /// `n_seq_max`.
    pub n_seq: u64,
    /// `n_ubatch` as llama.cpp settles it (at most `n_batch` and the
    /// requested `n_ctx`).
    pub n_ubatch: u64,
    /// Whether the cache was made for flash attention.
    pub flash_attn: bool,
    /// The memory module.
    pub memory: Memory,
    /// Every byte of it ([`LlamaCppEstimate::bytes`]).
    bytes: u64,
    /// What llama.cpp logs ([`LlamaCppEstimate::lines`]).
    lines: Vec<String>,
    /// Where the memory's own lines start in `lines`.
    #[serde(skip)]
    memory_lines_at: usize,
}

impl LlamaCppEstimate {
    /// Every byte the memory module holds.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// llama.cpp's own lines for it, in its order: a flash-attention
    /// decision it announces, then each cache constructor's.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// [`lines`](Self::lines) with each layer's caches where `placement`
    /// puts the layer: each constructor's `... KV buffer size` (`RS buffer
    /// size`) lines, the host's then the GPU's, before its size line, as
    /// llama.cpp logs them.
    pub fn lines_placed(&self, placement: CachePlacement) -> Vec<String> {
        let mut out = self.lines[..self.memory_lines_at].to_vec();
        self.memory.lines(&mut out, Some(Buffers { placement }));
        out
    }

    /// The bytes of every cache's buffers on `device` under `placement`
    /// (each tensor padded as that device allocates it); `None` where they
    /// overflow.
    pub fn buffer_bytes(&self, placement: CachePlacement, device: CacheDevice) -> Option<u64> {
        self.memory.buffer_bytes(placement, device)
    }
}

/// What llama.cpp (at [`LLAMACPP_COMMIT`]) holds for the model whose header
/// is `meta`, at `settings`; llama.cpp's refusal, as an error, where it
/// would not create the context.
pub fn estimate(
    meta: &GgufMetadata,
    settings: &LlamaCppSettings,
) -> Result<LlamaCppEstimate, KvError> {
    let hp = Hparams::read(meta)?;
    let mut lines = Vec::new();
    let flash = init_checks(&hp, settings, &mut lines)?;
    let cells = Cells::settle(&hp, settings, meta.source())?;
    let build = Build {
        hp: &hp,
        source: meta.source(),
        seqs: cells.n_seq.into(),
        streams: if settings.kv_unified {
            1
        } else {
            cells.n_seq.into()
        },
        type_k: settings.type_k,
        type_v: settings.type_v,
        v_trans: !flash,
    };
    let memory = build.memory(&cells, settings)?;
    let memory_lines_at = lines.len();
    memory.lines(&mut lines, None);
    let bytes = memory
        .checked_bytes()
        .ok_or_else(|| build.overflow("bytes of the caches and state together"))?;
    // Hparams::read refuses each way it knows to a 0-byte cache; this is the
    // net under them: a model with layers is never sized to 0 in silence.
    if bytes == 0 {
        return Err(KvError::ConfigFile {
            path: meta.source().to_owned(),
            problem: format!(
                "`{0}` has {1} layers (`{0}.block_count`) but every cache llama.cpp would make \
                 for it is 0 bytes; kv refuses a 0-byte figure",
                hp.architecture, hp.layers
            ),
        });
    }
    Ok(LlamaCppEstimate {
        engine: "llama.cpp",
        commit: LLAMACPP_COMMIT,
        architecture: hp.architecture.clone(),
        context_length: hp.context_length.into(),
        n_ctx: cells.n_ctx,
        n_ctx_seq: cells.n_ctx_seq,
        n_seq: cells.n_seq.into(),
        n_ubatch: cells.n_ubatch.into(),
        flash_attn: flash,
        memory,
        bytes,
        lines,
        memory_lines_at,
    })
}

/// A refusal of a setting, with llama.cpp's own message in it.
fn refuse(field: &'static str, problem: String) -> KvError {
    KvError::InvalidValue {
        declaration: String::new(),
        field,
        problem,
    }
}

/// `llama_init_from_model`'s checks, in its order: whether the cache is
/// made for flash attention (auto turns it on for a quantized V, and says
/// so in `lines`), or why the context is refused.
fn init_checks(
    hp: &Hparams,
    settings: &LlamaCppSettings,
    lines: &mut Vec<String>,
) -> Result<bool, KvError> {
    if settings.n_batch == 0 && settings.n_ubatch == 0 {
        return Err(refuse(
            "n_ubatch",
            "and n_batch are both 0; llama.cpp refuses: llama_init_from_model: n_batch and \
             n_ubatch cannot both be zero"
                .to_owned(),
        ));
    }
    if settings.n_ctx == 0 && hp.context_length == 0 {
        return Err(refuse(
            "n_ctx",
            "is 0 and the model's context_length is 0; llama.cpp refuses: \
             llama_init_from_model: n_ctx and model->hparams.n_ctx_train cannot both be zero"
                .to_owned(),
        ));
    }
    // MLA caches K alone and reads V out of it, so the types must agree;
    // deepseek4 too.
    if (hp.mla || hp.architecture == "deepseek4") && settings.type_k != settings.type_v {
        return Err(refuse(
            "type_v",
            format!(
                "differs from type_k on a model whose caches hold K alone (MLA, DeepSeek-V4); \
                 llama.cpp refuses: llama_init_from_model: \
                 model does not support different K ({}) and V ({}) cache types",
                settings.type_k, settings.type_v
            ),
        ));
    }
    let mut flash = settings.flash_attn;
    // Grok's graph has no flash-attention path: llama.cpp turns it off.
    if hp.architecture == "grok" && flash != FlashAttn::Off {
        lines.push(
            "llama_init_from_model: flash_attn is not compatible with Grok - forcing off"
                .to_owned(),
        );
        flash = FlashAttn::Off;
    }
    if settings.type_v.is_quantized() {
        match flash {
            FlashAttn::Auto => {
                lines.push(
                    "llama_init_from_model: enabling flash_attn since it is required for \
                     quantized V cache"
                        .to_owned(),
                );
                flash = FlashAttn::On;
            }
            FlashAttn::Off => {
                return Err(refuse(
                    "type_v",
                    format!(
                        "{} needs flash attention, which is off; llama.cpp refuses: {}\
                         llama_init_from_model: quantized V cache requires flash_attn to be \
                         enabled",
                        settings.type_v,
                        // What it logged first (Grok's forcing it off).
                        lines.iter().map(|l| format!("{l}; ")).collect::<String>()
                    ),
                ));
            }
            FlashAttn::On => {}
        }
    }
    let flash = flash != FlashAttn::Off;
    if flash {
        let trunk = hp.trunk_layers() as usize;
        for (field, t, heads, what) in [
            ("type_k", settings.type_k, &hp.head_k, "k"),
            ("type_v", settings.type_v, &hp.head_v, "v"),
        ] {
            if let Some(head) = heads[..trunk]
                .iter()
                .find(|&&h| !u64::from(h).is_multiple_of(t.block_size()))
            {
                return Err(refuse(
                    field,
                    format!(
                        "llama.cpp refuses: llama_init_from_model: {} cache type {t} with \
                         block size {} does not divide n_embd_head_{what}={head}",
                        what.to_uppercase(),
                        t.block_size()
                    ),
                ));
            }
        }
    }
    Ok(flash)
}

/// The counts `llama_context`'s constructor settles on.
struct Cells {
    n_seq: u32,
    /// Padded, and a multiple of the streams' cells.
    n_ctx: u64,
    /// Cells per stream of a full-attention layer.
    n_ctx_seq: u64,
    n_ubatch: u32,
}

impl Cells {
    fn settle(hp: &Hparams, settings: &LlamaCppSettings, source: &str) -> Result<Cells, KvError> {
        let n_seq = settings.n_seq.max(1);
        if n_seq > MAX_SEQ {
            return Err(refuse(
                "n_seq",
                format!(
                    "{n_seq} is more than llama.cpp takes; llama_init_from_model: failed to \
                     initialize the context: n_seq_max must be <= {MAX_SEQ}"
                ),
            ));
        }
        let requested = match settings.n_ctx {
            0 => hp.context_length,
            n => n,
        };
        // With causal attention the batch is bounded by the context asked for.
        let n_batch = settings.n_batch.min(requested);
        let n_ubatch = match settings.n_ubatch {
            0 => n_batch,
            n => n.min(n_batch),
        };
        let mut n_ctx = pad(requested.into());
        let n_ctx_seq = if settings.kv_unified {
            n_ctx
        } else {
            let per = pad(n_ctx / u64::from(n_seq));
            n_ctx = per * u64::from(n_seq);
            per
        };
        if u32::try_from(n_ctx).is_err() {
            // Name what made the count: the flag, or the file's key when no
            // n_ctx was given.
            return Err(match settings.n_ctx {
                0 => KvError::ConfigFile {
                    path: source.to_owned(),
                    problem: format!(
                        "`{}.context_length` {} ({} sequence(s)) makes {n_ctx} cells in all \
                         once padded to {PAD}, more than llama.cpp's uint32 counts; give fewer \
                         with --ctx-size",
                        hp.architecture, hp.context_length, n_seq
                    ),
                },
                given => refuse(
                    "n_ctx",
                    format!(
                        "{given} ({n_seq} sequence(s)) makes {n_ctx} cells in all once padded \
                         to {PAD}, more than llama.cpp's uint32 counts"
                    ),
                ),
            });
        }
        Ok(Cells {
            n_seq,
            n_ctx,
            n_ctx_seq,
            n_ubatch,
        })
    }
}

/// `GGML_PAD(n, 256)`.
fn pad(n: u64) -> u64 {
    n.div_ceil(PAD) * PAD
}

/// What every cache of one context shares.
#[derive(Clone, Copy)]
struct Build<'a> {
    hp: &'a Hparams,
    source: &'a str,
    seqs: u64,
    streams: u64,
    type_k: GgmlType,
    type_v: GgmlType,
    v_trans: bool,
}

impl Build<'_> {
    fn overflow(&self, step: &'static str) -> KvError {
        KvError::Overflow {
            declaration: format!("{}: llama_kv_cache", self.source),
            step,
        }
    }

    fn row(&self, t: GgmlType, elements: u64, what: &str) -> Result<u64, KvError> {
        if !elements.is_multiple_of(t.block_size()) {
            return Err(KvError::InvalidValue {
                declaration: String::new(),
                field: if what == "K" { "type_k" } else { "type_v" },
                problem: format!(
                    "{t} stores blocks of {} but a {what} row is {elements} elements; ggml \
                     cannot lay it out",
                    t.block_size(),
                ),
            });
        }
        t.row_bytes(elements)
            .ok_or_else(|| self.overflow("bytes per row (ggml_row_size)"))
    }

    /// The memory module `llama_model::create_memory` builds.
    fn memory(&self, cells: &Cells, settings: &LlamaCppSettings) -> Result<Memory, KvError> {
        let hp = self.hp;
        // MTP layers get no cache in the main context, unless they are all
        // there is (the trunk is every layer when there are none).
        let kept = hp.kept_layers();
        let trunk = usize::try_from(hp.trunk_layers()).unwrap_or(usize::MAX);
        if let (Some(ratios), Some(ix), Some(sliding)) =
            (&hp.compress_ratios, &hp.indexer, &hp.sliding)
        {
            return self.dsv4(cells, settings, ratios, ix, sliding.window);
        }
        Ok(match (hp.recurrent, &hp.hybrid) {
            // llama_memory_recurrent keeps a state for every layer of n_layer().
            (Some(state), None) => Memory::Recurrent {
                state: self.recurrent(state, |il| il < trunk)?,
            },
            // llama_memory_hybrid(_iswa): the attention cache first, then the
            // state, each over its own filter.
            (Some(state), Some(layers)) => match &hp.indexer {
                None => Memory::Hybrid {
                    attention: Box::new(self.attention(cells, settings, |il| layers.attn[il])?),
                    state: self.recurrent(state, |il| il < trunk && layers.recr[il])?,
                },
                // llama_memory_hybrid_idx: one MLA-faked key head a layer.
                Some(ix) => {
                    let attention = self.kv_cache(cells.n_ctx_seq, |il| layers.attn[il])?;
                    let state = self.recurrent(state, |il| il < trunk && layers.recr[il])?;
                    let n = hp.kv_heads.len();
                    let idx = Hparams {
                        kv_heads: vec![1; n],
                        head_k: vec![ix.head; n],
                        head_k_full: ix.head,
                        mla: true,
                        ..hp.clone()
                    };
                    let build = Build { hp: &idx, ..*self };
                    let indexer =
                        build.kv_cache(cells.n_ctx_seq, |il| layers.attn[il] && ix.layers[il])?;
                    Memory::HybridIdx {
                        attention,
                        state,
                        indexer,
                    }
                }
            },
            (None, _) => match &hp.indexer {
                Some(ix) => {
                    // filter_mla: the trunk when there are MTP layers, else all.
                    let nextn = hp.nextn > 0 && !hp.all_layers;
                    let mla = |il: usize| !nextn || il < trunk;
                    // With a window (dots3note) the DSA cache takes the full
                    // layers only.
                    let main = self.kv_cache(cells.n_ctx_seq, |il| mla(il) && !hp.is_swa(il))?;
                    // llama_kv_cache_dsa's hand-tweaked hparams: one key head
                    // a layer, the indexer's width where n_embd_head_k_full is
                    // read (a sliding layer keeps its own).
                    let n = hp.kv_heads.len();
                    let lid = Hparams {
                        kv_heads: vec![1; n],
                        head_k: (0..n)
                            .map(|il| {
                                if hp.is_swa(il) {
                                    hp.head_k[il]
                                } else {
                                    ix.head
                                }
                            })
                            .collect(),
                        head_k_full: ix.head,
                        ..hp.clone()
                    };
                    let build = Build { hp: &lid, ..*self };
                    // filter_lid: the trunk's indexed layers (minimax-m3's
                    // filter_idx takes MTP layers too).
                    let indexer = build.kv_cache(cells.n_ctx_seq, |il| {
                        (hp.all_layers || il < trunk) && ix.layers[il]
                    })?;
                    if let Some(sliding) = &hp.sliding {
                        let swa_cells = if settings.swa_full {
                            cells.n_ctx_seq
                        } else {
                            let sequences = if settings.kv_unified { cells.n_seq } else { 1 };
                            let window = u64::from(sliding.window) * u64::from(sequences);
                            pad(cells.n_ctx_seq.min(window + u64::from(cells.n_ubatch)))
                        };
                        let swa = self.kv_cache(swa_cells, |il| mla(il) && hp.is_swa(il))?;
                        return Ok(Memory::DsaIswa {
                            main,
                            indexer,
                            swa,
                            swa_full: settings.swa_full,
                        });
                    }
                    let constructor = if hp.architecture == "minimax-m3" {
                        "llama_kv_cache_msa"
                    } else {
                        "llama_kv_cache_dsa"
                    };
                    Memory::Dsa {
                        constructor,
                        main,
                        indexer,
                    }
                }
                None => self.attention(cells, settings, |il| hp.all_layers || il < kept)?,
            },
        })
    }

    /// `llama_kv_cache_dsv4`: every cache and state keeps one stream a
    /// sequence, whether the context is unified or not; every cache holds K
    /// alone (`dsv4_make_k_only`).
    fn dsv4(
        &self,
        cells: &Cells,
        settings: &LlamaCppSettings,
        ratios: &[u32],
        indexer: &hparams::Indexer,
        window: u32,
    ) -> Result<Memory, KvError> {
        let indexer_head = indexer.head;
        let hp = self.hp;
        let k_only = Hparams {
            mla: true,
            ..hp.clone()
        };
        let build = Build {
            hp: &k_only,
            streams: self.seqs,
            ..*self
        };
        let kv_size = cells.n_ctx_seq;
        // llama_kv_cache_iswa with unified false: one window a stream.
        let swa_cells = if settings.swa_full {
            kv_size
        } else {
            pad(kv_size.min(u64::from(window) + u64::from(cells.n_ubatch)))
        };
        let raw = Memory::Iswa {
            base: build.kv_cache(kv_size, |il| !hp.is_swa(il))?,
            swa: build.kv_cache(swa_cells, |il| hp.is_swa(il))?,
            swa_full: settings.swa_full,
        };
        let ratio_is = |r: u32| move |il: usize| ratios.get(il) == Some(&r);
        // The indexer's layers: the CSA ones (`filter_csa`).
        let indexed = |il: usize| indexer.layers.get(il) == Some(&true);
        // dsv4_comp_size: max(1, cdiv(kv_size, ratio)), padded to 256.
        let compressed = |build: &Build, ratio: u32, keep: &dyn Fn(usize) -> bool| {
            let logged = kv_size.div_ceil(u64::from(ratio)).max(1);
            build
                .kv_cache(pad(logged), keep)
                .map(|cache| (logged, cache))
        };
        let n = hp.kv_heads.len();
        let lid_hp = Hparams {
            kv_heads: vec![1; n],
            head_k: vec![indexer_head; n],
            head_k_full: indexer_head,
            mla: true,
            ..hp.clone()
        };
        let lid_build = Build {
            hp: &lid_hp,
            ..build
        };
        let head = u64::from(hp.head_k_full);
        let states = vec![
            self.comp_state("csa", 4, 8, 2 * head, ratio_is(4))?,
            self.comp_state("hca", 128, 128, head, ratio_is(128))?,
            self.comp_state("lid", 4, 8, 2 * u64::from(indexer_head), indexed)?,
        ];
        Ok(Memory::Dsv4 {
            raw: Box::new(raw),
            csa: compressed(&build, 4, &ratio_is(4))?,
            hca: compressed(&build, 128, &ratio_is(128))?,
            lid: compressed(&lid_build, 4, &indexed)?,
            states,
        })
    }

    /// `llama_dsv4_comp_state`: an f32 kv and score tensor of `width x
    /// size` per stream for each trunk layer `keep` takes.
    fn comp_state(
        &self,
        name: &'static str,
        ratio: u64,
        size: u64,
        width: u64,
        keep: impl Fn(usize) -> bool,
    ) -> Result<CompState, KvError> {
        let trunk = usize::try_from(self.hp.trunk_layers()).unwrap_or(usize::MAX);
        let tensor_bytes = width
            .checked_mul(size)
            .and_then(|b| b.checked_mul(self.seqs))
            .and_then(|b| b.checked_mul(4))
            .ok_or_else(|| self.overflow("a compressor state (width x rows x streams x 4 B)"))?;
        let mut tensors = Vec::new();
        let mut bytes = 0u64;
        for il in (0..trunk).filter(|&il| keep(il)) {
            for _ in 0..2 {
                bytes = bytes
                    .checked_add(tensor_bytes)
                    .ok_or_else(|| self.overflow("compressor state bytes"))?;
                tensors.push(CacheTensor {
                    layer: il as u64,
                    ty: GgmlType::F32,
                    ne0: width,
                    bytes: tensor_bytes,
                });
            }
        }
        Ok(CompState {
            name,
            ratio,
            state_size: size,
            n_embd_state: width,
            streams: self.seqs,
            layers: (tensors.len() / 2) as u64,
            bytes,
            tensors,
        })
    }

    /// `llama_kv_cache`, or `llama_kv_cache_iswa` for a model with a window,
    /// over the layers `keep` takes.
    fn attention(
        &self,
        cells: &Cells,
        settings: &LlamaCppSettings,
        keep: impl Fn(usize) -> bool + Copy,
    ) -> Result<Memory, KvError> {
        let hp = self.hp;
        let full = cells.n_ctx_seq;
        Ok(if let Some(sliding) = &hp.sliding {
            let swa_cells = if settings.swa_full {
                full
            } else {
                let sequences = if settings.kv_unified { cells.n_seq } else { 1 };
                let window = u64::from(sliding.window) * u64::from(sequences);
                pad(full.min(window + u64::from(cells.n_ubatch)))
            };
            Memory::Iswa {
                base: self.kv_cache(full, |il| keep(il) && !hp.is_swa(il))?,
                swa: self.kv_cache(swa_cells, |il| keep(il) && hp.is_swa(il))?,
                swa_full: settings.swa_full,
            }
        } else {
            Memory::KvCache {
                cache: self.kv_cache(full, keep)?,
            }
        })
    }

    /// `llama_kv_cache`'s constructor over the layers `keep` takes.
    fn kv_cache(&self, cells: u64, keep: impl Fn(usize) -> bool) -> Result<KvCache, KvError> {
        let hp = self.hp;
        let all = 0..hp.layers as usize;
        let v_max = all.clone().map(|il| hp.v_gqa(il)).max().unwrap_or(0);
        let v_variable = all.clone().any(|il| hp.v_gqa(il) != hp.v_gqa(0));
        let rows = cells
            .checked_mul(self.streams)
            .ok_or_else(|| self.overflow("rows (cells x streams)"))?;
        let (mut k_bytes, mut v_bytes, mut layers) = (0u64, 0u64, 0u64);
        let mut tensors = Vec::new();
        // has_kv: gemma3n's and gemma4's later layers reuse an earlier one's.
        let keep = |il: usize| hp.has_kv(il) && keep(il);
        for il in all.clone().filter(|&il| keep(il)) {
            layers += 1;
            let v_width = if self.v_trans { v_max } else { hp.v_gqa(il) };
            let k = self.row(self.type_k, hp.k_gqa(il), "K")?;
            // MLA: `has_v = !is_mla`, no V tensor is made.
            let v = if hp.mla {
                0
            } else {
                self.row(self.type_v, v_width, "V")?
            };
            let add = |sum: u64, row: u64| {
                row.checked_mul(rows)
                    .and_then(|layer| sum.checked_add(layer))
                    .ok_or_else(|| self.overflow("bytes (row bytes x cells x streams x layers)"))
            };
            k_bytes = add(k_bytes, k)?;
            v_bytes = add(v_bytes, v)?;
            // Within the sums just checked: each tensor is row x rows.
            tensors.push(CacheTensor {
                layer: il as u64,
                ty: self.type_k,
                ne0: hp.k_gqa(il),
                bytes: k * rows,
            });
            if !hp.mla {
                tensors.push(CacheTensor {
                    layer: il as u64,
                    ty: self.type_v,
                    ne0: v_width,
                    bytes: v * rows,
                });
            }
        }
        if k_bytes.checked_add(v_bytes).is_none() {
            return Err(self.overflow("K and V bytes together"));
        }
        // n_embd_head_*_all: the one head size of the cache's layers (-1 in
        // llama.cpp when they differ, which cannot happen here: a cache holds
        // only full or only sliding layers, and each kind has one), 0 without.
        let first = all.clone().find(|&il| keep(il));
        let head_k_all = first.map_or(0, |il| i64::from(hp.head_k[il]));
        // MLA leaves n_embd_head_v_all at 0 (its V loop is skipped).
        let head_v_all = match first {
            Some(il) if !hp.mla => i64::from(hp.head_v[il]),
            _ => 0,
        };
        // attn_rot_*: keyed on layer 0's head, as llama.cpp keys it.
        let rotates = |all: i64, t: GgmlType, head0: u32| {
            all > 0 && t.is_quantized() && head0.is_multiple_of(64)
        };
        // llama.cpp always rotates DeepSeek's lightning-indexer keys: where the
        // cache's full key length is the indexer's (its indexer cache).
        let rot_forced = ["deepseek32", "deepseek4", "glm-dsa", "dots3note"]
            .contains(&hp.architecture.as_str())
            && hp
                .indexer
                .as_ref()
                .is_some_and(|ix| hp.head_k_full == ix.head);
        Ok(KvCache {
            cells,
            layers,
            seqs: self.seqs,
            streams: self.streams,
            type_k: self.type_k,
            type_v: self.type_v,
            k_bytes,
            v_bytes,
            v_padded_to: (self.v_trans && v_variable).then_some(v_max),
            head_k_all,
            head_v_all,
            attn_rot_k: rot_forced || rotates(head_k_all, self.type_k, hp.head_k[0]),
            attn_rot_v: rotates(head_v_all, self.type_v, hp.head_v[0]),
            tensors,
        })
    }

    /// `llama_memory_recurrent`'s constructor: one f32 R and S row per
    /// sequence, for each layer of `n_layer()` that `keep` takes (its line
    /// counts `n_layer()` whatever the filter).
    fn recurrent(
        &self,
        state: hparams::Recurrent,
        keep: impl Fn(usize) -> bool,
    ) -> Result<RecurrentState, KvError> {
        let layers = u64::from(self.hp.trunk_layers());
        let trunk = usize::try_from(self.hp.trunk_layers()).unwrap_or(usize::MAX);
        let state_layers = (0..trunk).filter(|&il| keep(il)).count() as u64;
        let f32_bytes = |elements: u32| {
            GgmlType::F32
                .row_bytes(elements.into())
                .and_then(|row| row.checked_mul(self.seqs))
                .and_then(|b| b.checked_mul(state_layers))
                .ok_or_else(|| self.overflow("state bytes (row x cells x layers)"))
        };
        let (r_bytes, s_bytes) = (f32_bytes(state.r)?, f32_bytes(state.s)?);
        // One 1-D f32 tensor of R and one of S per state layer (a row a
        // cell; within the product f32_bytes checked). f32 is never padded
        // by row: ne0 is for the record.
        let tensor = |il: usize, row: u32| CacheTensor {
            layer: il as u64,
            ty: GgmlType::F32,
            ne0: u64::from(row) * self.seqs,
            bytes: u64::from(row) * 4 * self.seqs,
        };
        let mut tensors = Vec::new();
        for il in (0..trunk).filter(|&il| keep(il)) {
            tensors.extend([tensor(il, state.r), tensor(il, state.s)]);
        }
        // The PLE conv history: its own f32 row per cell, on the PLE layer
        // where the filter takes it.
        let p_bytes = match self.hp.ple {
            Some(ple) if ple.layer < trunk && keep(ple.layer) => GgmlType::F32
                .row_bytes(ple.width.into())
                .and_then(|row| row.checked_mul(self.seqs))
                .ok_or_else(|| self.overflow("PLE conv rows (row x cells)"))?,
            _ => 0,
        };
        if r_bytes
            .checked_add(s_bytes)
            .and_then(|b| b.checked_add(p_bytes))
            .is_none()
        {
            return Err(self.overflow("R, S and P bytes together"));
        }
        if let Some(ple) = self.hp.ple.filter(|_| p_bytes > 0) {
            tensors.push(CacheTensor {
                layer: ple.layer as u64,
                ty: GgmlType::F32,
                ne0: p_bytes / 4,
                bytes: p_bytes,
            });
        }
        Ok(RecurrentState {
            cells: self.seqs,
            layers,
            state_layers,
            seqs: self.seqs,
            state_type: GgmlType::F32,
            r_bytes,
            s_bytes,
            p_bytes,
            tensors,
        })
    }
}
