//! vLLM 0.33's sizing rules, one kind of layer each: the spec classes of
//! `vllm/v1/kv_cache_interface.py` and the hybrid block size of
//! `vllm/platforms/interface.py Platform._align_hybrid_block_size`.

use kv_core::config::{KvQuantType, MambaVersion, MlaConfig};
use kv_core::pattern::LayerKind;
use kv_core::{
    DType, Geometry, HfConfig, KvError, KvSpec, Latent, PositionPolicy, Positions, RecurrentState,
    Rows, Scope, StatePart, Storage,
};
use serde_json::Value;

use super::families::{self, KvCacheDtype, SsmDtype};
use super::indexer::{IndexerKeys, INDEXER_KEYS};
use super::kda::Kda;
use super::settings::{config_error, overflow, EstimateSettings, VLLM_VERSION};

/// The smallest kernel block of vLLM's attention backends (FlashAttention):
/// hybrid block sizes are multiples of it.
const KERNEL_BLOCK: u64 = 16;
/// FlashInfer's Gated DeltaNet prefill exports checkpoints on a 64-token
/// grid (`FLASHINFER_GDN_CHECKPOINT_ALIGNMENT`), so in `align` mode a
/// Gated DeltaNet model's blocks are multiples of 64.
const GDN_CHECKPOINT_ALIGNMENT: u64 = 64;

/// How blocks and state pages are laid out for one model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Paging {
    /// The attention block size used, in tokens.
    pub block_size: u64,
    /// Recurrent layers run in cache mode `align` (prefix caching on a hybrid).
    align: bool,
    /// A hybrid's sizes: the state page, the attention bytes per token per
    /// layer, and the alignment that set the block.
    hybrid: Option<Hybrid>,
    /// Why the attention backend chose the block, where it did.
    backend: Option<&'static str>,
    /// The latent is stored in vLLM's `fp8_ds_mla` layout (FLASHMLA_SPARSE
    /// with an fp8 cache).
    fp8_ds_mla: bool,
}

/// FlashMLA's only kernel block (`mla/flashmla.py`
/// `get_supported_kernel_block_sizes`).
const FLASH_MLA_BLOCK: u64 = 64;
/// FlashAttention 4's page on Hopper for an fp8 cache of 512-wide heads
/// (`flash_attn.py` `_get_sm90_fa4_fp8_kv_block_size`: "The SM90
/// FP8-KV-dequant kernel uses a 64-token TMA tile/page").
const FA4_FP8_BLOCK: u64 = 64;
/// The head size that takes FlashAttention 4's fp8 page on Hopper.
const FA4_FP8_HEAD: u64 = 512;
/// The block of a sparse-attention (DSA) model on Hopper: FLASH_ATTN_MLA_SPARSE
/// (and FLASHMLA_SPARSE) run multiples of 64, its indexer's backend
/// (DEEPSEEK_V32_INDEXER) 64 alone.
const SPARSE_MLA_BLOCK: u64 = 64;
/// A hybrid MLA model's block is a multiple of 128 tokens (TRTLLM/FlashInfer
/// MLA decode kernels, platforms/interface.py:1088).
const MLA_HYBRID_ALIGNMENT: u64 = 128;
/// vLLM's `fp8_ds_mla` token (`MLAAttention.get_kv_cache_spec`,
/// mla_attention.py:1386, `state_content_bytes` 656): 512 fp8 latent
/// elements, a float32 scale per 128 of them, 64 bf16 RoPE elements.
const DS_MLA_LATENT: u64 = 512;
const DS_MLA_ROPE: u64 = 64;
const DS_MLA_SCALE_BYTES: u64 = DS_MLA_LATENT / 128 * 4;

/// One rank's figures: vLLM sizes the hybrid block in each worker, from its
/// own shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hybrid {
    state_page: u64,
    attention_per_token: u64,
    alignment: u64,
    requested: u64,
    tensor_parallel: u64,
}

impl Paging {
    /// Attention alone: the requested block size.
    pub fn plain(block_size: u64) -> Paging {
        Paging {
            block_size,
            align: false,
            hybrid: None,
            backend: None,
            fp8_ds_mla: false,
        }
    }

    /// A family whose backend runs one block, `block_size`, for `why`.
    pub fn backend(block_size: u64, why: &'static str) -> Paging {
        Paging {
            backend: Some(why),
            ..Paging::plain(block_size)
        }
    }

    /// An MLA model's paging, from the storage its latent will have. On
    /// Hopper (SM 9.0, kv's GPU) vLLM 0.33 tries, in this order
    /// (`platforms/cuda.py` `_get_backend_priorities`), FLASH_ATTN_MLA
    /// (bf16/f16 only, blocks a multiple of 16), FLASHMLA (a multiple of 64),
    /// FLASHINFER_MLA (SM 10 only) and TRITON_MLA (a multiple of 16).
    /// Without `--block-size`, the first that takes the latent sets the
    /// block (`update_block_size_for_backend`): 64 for an fp8 latent
    /// (FLASHMLA), else 16. With it (`user_specified_block_size`), the
    /// selector keeps the block and skips the backends that cannot run it
    /// (`supports_block_size`): an fp8 latent at 16 or 32 runs TRITON_MLA; a
    /// block no backend runs is refused ([`super::refusals::check_block_size`]).
    pub fn mla(
        settings: &EstimateSettings,
        hf: &HfConfig,
        mla: &MlaConfig,
    ) -> Result<Paging, KvError> {
        let block_size = settings.block_size;
        let (storage, _) = attention_storage(settings, hf, mla.dtype)?;
        let fp8 = storage.dtype() == Some(DType::F8E4M3);
        if !settings.block_size_given {
            if fp8 {
                return Ok(Paging {
                    block_size: FLASH_MLA_BLOCK,
                    backend: Some(
                        "FLASHMLA, vLLM's MLA backend for an fp8 latent on Hopper \
                         (FLASH_ATTN_MLA takes bf16/f16 only), runs only blocks of 64",
                    ),
                    ..Paging::plain(block_size)
                });
            }
            return Ok(Paging::plain(block_size));
        }
        if fp8 && !block_size.is_multiple_of(FLASH_MLA_BLOCK) {
            return Ok(Paging {
                backend: Some(
                    "TRITON_MLA: the block given rules out FLASHMLA, which runs multiples of \
                     64 (vLLM warns \"--block-size precluded higher-priority backend(s) \
                     FLASHMLA\")",
                ),
                ..Paging::plain(block_size)
            });
        }
        Ok(Paging::plain(block_size))
    }

    /// A sparse-attention (DSA) model's paging (DeepSeek-V3.2, GLM-5,
    /// HY-V4): on Hopper vLLM 0.33 runs a 16-bit latent on
    /// FLASH_ATTN_MLA_SPARSE, an fp8 (e4m3) one on FLASHMLA_SPARSE in its
    /// `fp8_ds_mla` layout (`_canonicalize_sparse_mla_kv_cache_dtype`,
    /// mla_attention.py:359), and the indexer keys on DEEPSEEK_V32_INDEXER,
    /// whose only common block is 64 (`_preferred_block_size_for_backends`;
    /// checked on the meta device on 2026-12-06 and 2026-12-07). What kv has
    /// not checked is refused: other formats, an `fp8_ds_mla` latent not
    /// 512 + 64 wide, decode context parallelism, a block given other than 64.
    pub fn sparse_mla(
        settings: &EstimateSettings,
        hf: &HfConfig,
        mla: &MlaConfig,
    ) -> Result<Paging, KvError> {
        let (storage, _) = attention_storage(settings, hf, mla.dtype)?;
        let sixteen_bits = matches!(storage.dtype(), Some(DType::BF16 | DType::F16))
            && storage.per_token_head_name().is_none();
        let fp8_ds_mla = storage == Storage::Dense(DType::F8E4M3);
        if !sixteen_bits && !fp8_ds_mla {
            return Err(config_error(
                "kv format",
                format!(
                    "{storage} on a sparse-attention (DSA) model: kv has checked vLLM \
                     {VLLM_VERSION}'s sparse latents in 16 bits and in f8e4m3 (its \
                     `fp8_ds_mla` layout on FLASHMLA_SPARSE) only; give auto, bfloat16 or \
                     f8e4m3"
                ),
            ));
        }
        if fp8_ds_mla && (mla.kv_lora_rank, mla.qk_rope_head_dim) != (DS_MLA_LATENT, DS_MLA_ROPE) {
            return Err(config_error(
                "kv format",
                format!(
                    "f8e4m3 on a sparse-attention (DSA) model: vLLM {VLLM_VERSION} stores it \
                     as `fp8_ds_mla`, whose 656 B token is a latent of {DS_MLA_LATENT} and \
                     RoPE of {DS_MLA_ROPE}; this one is {} + {}, which kv has not checked; \
                     give auto or bfloat16",
                    mla.kv_lora_rank, mla.qk_rope_head_dim
                ),
            ));
        }
        let dcp = settings.engine.decode_context_parallel;
        if dcp > 1 {
            return Err(config_error(
                "estimate settings",
                format!(
                    "decode context parallelism {dcp} on a sparse-attention (DSA) model: kv \
                     has not checked how vLLM {VLLM_VERSION} shards its latent and indexer \
                     keys; use dcp 1"
                ),
            ));
        }
        if settings.block_size_given && settings.block_size != SPARSE_MLA_BLOCK {
            return Err(KvError::Config {
                what: "block_size",
                problem: format!(
                    "vLLM {VLLM_VERSION} would not start: a sparse-attention (DSA) model's \
                     indexer keys run only on DEEPSEEK_V32_INDEXER, whose block is 64, not the \
                     {} given; give 64, or no --block-size",
                    settings.block_size
                ),
            });
        }
        let backend = if fp8_ds_mla {
            "FLASHMLA_SPARSE for the fp8 latent, in its `fp8_ds_mla` layout (512 fp8, 4 \
             float32 scales and 64 bf16 RoPE elements: 656 B a token), and \
             DEEPSEEK_V32_INDEXER for the indexer keys, vLLM's sparse-attention backends on \
             Hopper: 64 is the only block both run"
        } else {
            "FLASH_ATTN_MLA_SPARSE for the latent and DEEPSEEK_V32_INDEXER for the \
             indexer keys, vLLM's sparse-attention backends on Hopper: 64 is the only \
             block both run"
        };
        Ok(Paging {
            block_size: SPARSE_MLA_BLOCK,
            backend: Some(backend),
            fp8_ds_mla,
            ..Paging::plain(settings.block_size)
        })
    }

    /// The paging of KDA beside MLA (Kimi K3): as [`Paging::for_groups`],
    /// the latent's block grows until one latent page holds one KDA state
    /// page, on an alignment of at least 128 tokens (platforms/interface.py:
    /// 1088: "make the manager block size a multiple of 128" for a hybrid MLA
    /// model); KDA adds no checkpoint alignment of its own. Without MLA
    /// layers there is no attention, so no prefix caching: mode `none`.
    pub fn kda_beside_mla(
        hf: &HfConfig,
        settings: &EstimateSettings,
        mla: &MlaConfig,
        kda: &Kda,
    ) -> Result<Paging, KvError> {
        if kda.pattern.count(LayerKind::FullAttention) == 0 {
            return Ok(Paging::plain(settings.block_size));
        }
        let tp = settings.engine.tensor_parallel;
        let (parts, _) = kda_parts(hf, kda, settings.engine.speculative_tokens)?;
        let state_page = rank_bytes(&parts, tp, LayerKind::LinearAttention)?;
        let (storage, _) = attention_storage(settings, hf, mla.dtype)?;
        let attention_per_token = Latent::new(1, mla.kv_lora_rank, mla.qk_rope_head_dim, mla.dtype)
            .with_storage(storage)
            .bytes_per_position()
            .map_err(overflow("one latent's bytes per token".to_owned()))?;
        let alignment = KERNEL_BLOCK
            .max(settings.block_size)
            .max(MLA_HYBRID_ALIGNMENT);
        let block = covering_block(alignment, attention_per_token, state_page)?;
        let sizes = (state_page, attention_per_token, alignment);
        Ok(Paging::hybrid(
            settings,
            block,
            settings.engine.prefix_caching,
            sizes,
        ))
    }

    /// A hybrid's paging: `block`, raised but never lowered below the one
    /// asked for, and the (state page, attention bytes a token, alignment)
    /// that set it, one tensor-parallel rank's.
    fn hybrid(
        settings: &EstimateSettings,
        block: u64,
        align: bool,
        (state_page, attention_per_token, alignment): (u64, u64, u64),
    ) -> Paging {
        Paging {
            block_size: block.max(settings.block_size),
            align,
            hybrid: Some(Hybrid {
                state_page,
                attention_per_token,
                alignment,
                requested: settings.block_size,
                tensor_parallel: settings.engine.tensor_parallel,
            }),
            backend: None,
            fp8_ds_mla: false,
        }
    }

    /// The paging for a model of these layer groups: a hybrid's attention
    /// block grows until one attention page holds one state page
    /// (`_align_hybrid_block_size`); an attention-free model has no prefix
    /// caching (`ModelConfig.is_prefix_caching_supported`), so mode `none`.
    ///
    /// Both pages are one tensor-parallel rank's, as each worker sizes them
    /// after loading its shard: `max(1, kv_heads / tp)` KV heads
    /// (`ModelConfig.get_num_kv_heads`) and the state shapes of
    /// `MambaStateShapeCalculator` at `tp`. Every pipeline stage takes the
    /// same block: the sizes are the model's, not the stage's layers'.
    pub fn for_groups(
        hf: &HfConfig,
        settings: &EstimateSettings,
        groups: &[(LayerKind, u64)],
    ) -> Result<Paging, KvError> {
        let recurrent: Vec<LayerKind> = groups
            .iter()
            .map(|(kind, _)| *kind)
            .filter(|kind| is_recurrent(*kind))
            .collect();
        let attention = groups.iter().any(|(kind, _)| {
            matches!(
                kind,
                LayerKind::FullAttention
                    | LayerKind::SlidingAttention
                    | LayerKind::ChunkedAttention
            )
        });
        let plain = Paging::plain(settings.block_size);
        if recurrent.is_empty() {
            let kinds: Vec<LayerKind> = groups.iter().map(|(kind, _)| *kind).collect();
            return Paging::attention(hf, settings, &kinds);
        }
        if !attention {
            return Ok(plain);
        }
        let align = settings.engine.prefix_caching;
        let tp = settings.engine.tensor_parallel;
        let mut geometry = hf.geometry()?.with_layers(1);
        // vLLM divides down and keeps one head where there are fewer than tp.
        geometry.kv_heads = (geometry.kv_heads / tp).max(1);
        let (storage, _) = attention_storage(
            settings,
            hf,
            geometry.storage.dtype().unwrap_or(DType::BF16),
        )?;
        let attention_per_token = geometry
            .with_storage(storage)
            .bytes_per_position()
            .map_err(overflow("one attention layer's bytes per token".to_owned()))?;
        let mut state_page = 0;
        for kind in &recurrent {
            let (parts, _) = state_parts(hf, *kind, tp, settings.engine.speculative_tokens)?;
            state_page = state_page.max(rank_bytes(&parts, tp, *kind)?);
        }
        let mut alignment = KERNEL_BLOCK.max(settings.block_size);
        if align
            && recurrent
                .iter()
                .all(|kind| *kind == LayerKind::LinearAttention)
        {
            alignment =
                lcm(alignment, GDN_CHECKPOINT_ALIGNMENT).ok_or_else(|| KvError::InvalidValue {
                    declaration: String::new(),
                    field: "block_size",
                    problem: format!(
                        "{} (--block-size) makes the hybrid alignment lcm({alignment}, \
                         {GDN_CHECKPOINT_ALIGNMENT}) overflow u64",
                        settings.block_size
                    ),
                })?;
        }
        let block = covering_block(alignment, attention_per_token, state_page)?
            .div_ceil(KERNEL_BLOCK)
            .checked_mul(KERNEL_BLOCK)
            .ok_or_else(|| {
                overflow("the hybrid block size".to_owned())(kv_core::Overflow {
                    step: "the block size",
                })
            })?;
        let sizes = (state_page, attention_per_token, alignment);
        Ok(Paging::hybrid(settings, block, align, sizes))
    }

    /// Attention alone, of these kinds: the requested block, except where
    /// FlashAttention runs a page of its own. vLLM 0.33 on Hopper runs heads
    /// wider than 256 on FlashAttention 4 (FA3 takes up to 256), and an fp8
    /// cache (`fp8`, `fp8_e4m3`) of a model whose widest head is 512 on its
    /// 64-token page, which then sets every layer's block
    /// (`get_preferred_block_size`, from the model's head size: the largest
    /// over its layers). A block given is kept, as vLLM keeps it (16, 32 and
    /// 128 checked on its own objects on 2026-12-06: the cache's pages are
    /// the given block's).
    pub fn attention(
        hf: &HfConfig,
        settings: &EstimateSettings,
        kinds: &[LayerKind],
    ) -> Result<Paging, KvError> {
        let plain = Paging::plain(settings.block_size);
        let mut widest = 0;
        let mut dtype = None;
        for kind in kinds.iter().filter(|kind| {
            matches!(
                kind,
                LayerKind::FullAttention
                    | LayerKind::SlidingAttention
                    | LayerKind::ChunkedAttention
            )
        }) {
            let geometry = hf.kind_geometry(*kind)?;
            widest = widest.max(geometry.head_dim);
            dtype = geometry.storage.dtype();
        }
        if widest != FA4_FP8_HEAD {
            return Ok(plain);
        }
        let (storage, _) = attention_storage(settings, hf, dtype.unwrap_or(DType::BF16))?;
        let fp8 = storage.dtype() == Some(DType::F8E4M3) && storage.per_token_head_name().is_none();
        if !fp8 {
            return Ok(plain);
        }
        if settings.block_size_given {
            return Ok(plain);
        }
        Ok(Paging {
            block_size: FA4_FP8_BLOCK,
            backend: Some(
                "FlashAttention 4, which vLLM runs on Hopper for heads wider than 256: an fp8 \
                 cache of 512-wide heads takes its 64-token page",
            ),
            ..plain
        })
    }

    /// The padded state page of one rank: in a hybrid, every state page is
    /// padded to one attention page, where that is larger.
    fn padded_page(&self) -> Option<u64> {
        let hybrid = self.hybrid?;
        let page = self.block_size.checked_mul(hybrid.attention_per_token)?;
        (page > hybrid.state_page).then_some(page)
    }

    /// The convention in words, for [`super::detect::Estimate::convention`].
    pub fn convention(&self, settings: &EstimateSettings) -> String {
        let engine = &settings.engine;
        let per_rank = |hybrid: &Hybrid| match hybrid.tensor_parallel {
            1 => String::new(),
            tp => format!(", one rank's of tp {tp}"),
        };
        let block = match (self.hybrid, self.backend) {
            (None, Some(why)) => format!("block_size {} ({why})", self.block_size),
            (None, None) => format!("block_size {}", self.block_size),
            (Some(hybrid), _) if self.block_size == hybrid.requested => format!(
                "block_size {} (one attention page, {} x {} B, already holds the state page \
                 of {} B{})",
                self.block_size,
                self.block_size,
                hybrid.attention_per_token,
                hybrid.state_page,
                per_rank(&hybrid)
            ),
            (Some(raised), _) => format!(
                "block_size {} (raised from {}: {} x cdiv(state page {} B, {} x {} B per \
                 token per attention layer{}), so one attention page covers one state page)",
                self.block_size,
                raised.requested,
                raised.alignment,
                raised.state_page,
                raised.alignment,
                raised.attention_per_token,
                per_rank(&raised)
            ),
        };
        format!(
            "vLLM {VLLM_VERSION}: {block}, max_num_batched_tokens {} x {} batch(es) in flight \
             ({}, pp {}), prefix caching {}, {} speculative token(s){}",
            settings.max_num_batched_tokens,
            engine.in_flight_batches(),
            if engine.async_scheduling {
                "async scheduling"
            } else {
                "no async scheduling"
            },
            engine.pipeline_stages,
            if engine.prefix_caching { "on" } else { "off" },
            engine.speculative_tokens,
            if engine.decode_context_parallel > 1 {
                format!(
                    ", decode context parallel {dcp} (interleave {}): the TP ranks that would \
                     hold copies of one KV head (or of the MLA latent) each hold 1/{dcp} of \
                     every full-attention and MLA row, cdiv(max_model_len, {dcp}) tokens",
                    engine.dcp_interleave,
                    dcp = engine.decode_context_parallel,
                )
            } else {
                String::new()
            }
        )
    }
}

/// The kinds whose cache is a state page (vLLM's `MambaSpec`).
/// The fewest `alignment`-token blocks whose attention page (of
/// `attention_per_token` bytes a token) holds one state page
/// (`update_block_size_for_backend`: `alignment x cdiv(state page,
/// alignment x page of one token)`).
fn covering_block(
    alignment: u64,
    attention_per_token: u64,
    state_page: u64,
) -> Result<u64, KvError> {
    let too_big = |step| overflow("the hybrid block size".to_owned())(kv_core::Overflow { step });
    let per_aligned = alignment
        .checked_mul(attention_per_token)
        .filter(|bytes| *bytes > 0)
        .ok_or_else(|| too_big("alignment x attention page (0 or past u64)"))?;
    alignment
        .checked_mul(state_page.div_ceil(per_aligned))
        .ok_or_else(|| too_big("the block size"))
}

/// `count` (a conv kernel's inputs, a state's pages) plus one for each
/// speculative token.
fn with_speculative(count: u64, speculative: u64) -> Result<u64, KvError> {
    count.checked_add(speculative).ok_or_else(|| {
        config_error(
            "estimate settings",
            format!("{speculative} speculative tokens overflow u64"),
        )
    })
}

/// A KDA layer's state (`kda_state_shape`, `kda_state_dtype`): conv over
/// `K - 1 + spec` positions of `3 x H x D` channels in the model dtype,
/// recurrent `(H, D, D)` in float32, both split across ranks by heads.
fn kda_parts(
    hf: &HfConfig,
    kda: &Kda,
    speculative: u64,
) -> Result<(Vec<StatePart>, String), KvError> {
    let dtype = model_dtype(hf)?;
    let positions = with_speculative(kda.conv_kernel, speculative)?.saturating_sub(1);
    refuse_empty_conv(
        hf,
        &["linear_attn_config.short_conv_kernel_size"],
        kda.conv_kernel,
        positions,
    )?;
    let conv = StatePart::gated_delta_conv(
        kda.heads,
        kda.head_dim,
        kda.heads,
        kda.head_dim,
        positions,
        dtype,
    )
    .map_err(overflow("the KDA state of one layer".to_owned()))?;
    let recurrent = StatePart::gated_delta_ssm(kda.heads, kda.head_dim, kda.head_dim)
        .with_storage(Storage::Dense(kda.recurrent_dtype));
    Ok((
        vec![conv, recurrent],
        format!(
            "KDA: conv over short_conv_kernel_size - 1{} = {positions} positions of 3 x {} \
             heads x {} in {dtype}, recurrent (heads, head_dim, head_dim) in {}",
            match speculative {
                0 => String::new(),
                n => format!(" + {n} speculative"),
            },
            kda.heads,
            kda.head_dim,
            kda.recurrent_dtype
        ),
    ))
}

fn is_recurrent(kind: LayerKind) -> bool {
    matches!(
        kind,
        LayerKind::Mamba | LayerKind::LinearAttention | LayerKind::ShortConv
    )
}

/// One rank's bytes of `parts`, each split part divided by `tp` as vLLM's
/// `divide` does: a size `tp` does not divide is refused, as vLLM refuses it.
fn rank_bytes(parts: &[StatePart], tp: u64, kind: LayerKind) -> Result<u64, KvError> {
    let mut total: u64 = 0;
    for part in parts {
        let mut rank = *part;
        if let Some(size) = rank.split.and_then(|dim| rank.shape.get_mut(dim)) {
            if !size.is_multiple_of(tp) {
                return Err(KvError::Parallel {
                    declaration: kind.name().to_owned(),
                    problem: format!(
                        "state part `{}` has {} heads/channels, which tp {tp} does not split \
                         evenly; vLLM requires them divisible by the tensor-parallel size",
                        part.name, *size
                    ),
                });
            }
            *size /= tp;
        }
        total = rank
            .bytes()
            .ok()
            .and_then(|bytes| total.checked_add(bytes))
            .ok_or_else(|| {
                overflow(format!("one rank's {kind} state"))(kv_core::Overflow {
                    step: "the state page",
                })
            })?;
    }
    Ok(total)
}

/// The least common multiple, `None` where it overflows (a block size from
/// a flag may be anything); `a` and `b` are above 0.
/// The greatest common divisor.
pub(super) fn gcd(a: u64, b: u64) -> u64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    x
}

/// The least common multiple of two positive numbers; `None` where it
/// overflows.
pub(super) fn lcm(a: u64, b: u64) -> Option<u64> {
    (a / gcd(a, b)).checked_mul(b)
}

/// K/V storage: `kv_format` (unless the family's attention ignores it),
/// else what the config's scheme says, else the model dtype; with a sentence
/// when it is not the model dtype or the asked format is not applied.
fn attention_storage(
    settings: &EstimateSettings,
    hf: &HfConfig,
    dtype: DType,
) -> Result<(Storage, Option<String>), KvError> {
    let ignored = match (
        settings.kv_format,
        families::rules(hf).map(|row| row.kv_cache_dtype),
    ) {
        (Some(asked), Some(KvCacheDtype::Ignored(why))) => {
            let said = format!("the KV format {asked} asked is not applied: {why}");
            hf.note(said.clone());
            Some(said)
        }
        (Some(storage), _) => {
            return Ok((storage, Some(format!("K/V stored as {storage} (given)"))));
        }
        (None, _) => None,
    };
    // Without the cache config, vLLM's `Attention` still takes the
    // scheme's fp8 (`kv_cache_scheme` with `kv_cache_dtype` auto).
    let (storage, said) = match hf.kv_cache_scheme()? {
        None => (Storage::Dense(dtype), None),
        Some(scheme) => match (scheme.num_bits, scheme.kind) {
            (Some(8), Some(KvQuantType::Float)) => (
                Storage::Dense(DType::F8E4M3),
                Some(format!("K/V in f8e4m3 as `{}` states", scheme.source)),
            ),
            _ => (
                Storage::Dense(dtype),
                Some(format!(
                    "`{}` declares KV quantization without an element format kv reads: \
                     figures use the model dtype {dtype} (vLLM's --kv-cache-dtype auto); \
                     give the format as the KV format",
                    scheme.source
                )),
            ),
        },
    };
    let said = match (ignored, said) {
        (Some(ignored), Some(said)) => Some(format!("{ignored}; {said}")),
        (Some(ignored), None) => Some(format!("{ignored}; K/V in the model dtype {dtype}")),
        (None, said) => said,
    };
    Ok((storage, said))
}

/// A recurrent kind's parts per layer (model dtype), with its words: the
/// parts of all `tp` ranks together, so that dividing each split part by
/// `tp` gives one rank's (Mamba2 groups that `tp` does not split are repeated
/// on every rank, as vLLM's `extra_groups_for_head_shards` repeats them).
/// Mamba2 and Gated DeltaNet conv states keep one input more per
/// `speculative` token (their models pass `num_spec` to
/// `MambaStateShapeCalculator`); Mamba1's and short convs' do not.
fn state_parts(
    hf: &HfConfig,
    kind: LayerKind,
    tp: u64,
    speculative: u64,
) -> Result<(Vec<StatePart>, String), KvError> {
    let dtype = model_dtype(hf)?;
    let too_big = |what: &str| overflow(format!("the {what} state of one layer"));
    // `kernel - 1 + num_spec` inputs, as `kernel + num_spec` for the
    // constructors that keep one input less than they are given.
    let lengthened = |kernel: u64| with_speculative(kernel, speculative);
    let spec_words = match speculative {
        0 => String::new(),
        n => format!(" + {n} speculative"),
    };
    if kind == LayerKind::ShortConv {
        let conv = hf.short_conv()?;
        // vLLM keeps conv_L_cache - 1 inputs (`short_conv_state_shape`).
        let positions = conv.kernel.saturating_sub(1);
        refuse_empty_conv(hf, &["conv_L_cache"], conv.kernel, positions)?;
        return Ok((
            vec![StatePart::conv(conv.channels, positions, dtype)],
            format!(
                "short conv: {} channels over conv_L_cache - 1 = {positions} positions, \
                 {dtype}",
                conv.channels
            ),
        ));
    }
    if kind == LayerKind::LinearAttention {
        let linear = hf.linear_attention()?;
        // vLLM keeps conv_kernel - 1 + num_spec positions of conv state.
        let positions = lengthened(linear.conv_kernel)?.saturating_sub(1);
        refuse_empty_conv(
            hf,
            &["linear_conv_kernel_dim"],
            linear.conv_kernel,
            positions,
        )?;
        let conv = StatePart::gated_delta_conv(
            linear.key_heads,
            linear.key_head_dim,
            linear.value_heads,
            linear.value_head_dim,
            positions,
            dtype,
        )
        .map_err(too_big("Gated DeltaNet"))?;
        let ssm = StatePart::gated_delta_ssm(
            linear.value_heads,
            linear.value_head_dim,
            linear.key_head_dim,
        )
        .with_storage(Storage::Dense(dtype));
        return Ok((
            vec![conv, ssm],
            format!(
                "Gated DeltaNet: conv over conv_kernel - 1{spec_words} = {positions} positions, \
                 ssm (value heads, value dim, key dim), {dtype}",
            ),
        ));
    }
    let mamba = hf.mamba()?;
    let conv_positions = match mamba.version {
        MambaVersion::Mamba1 => mamba.d_conv.saturating_sub(1),
        _ => lengthened(mamba.d_conv)?.saturating_sub(1),
    };
    refuse_empty_conv(
        hf,
        &["mamba_d_conv", "conv_kernel", "d_conv"],
        mamba.d_conv,
        conv_positions,
    )?;
    let ssm_dtype = ssm_dtype(hf, dtype)?;
    match mamba.version {
        MambaVersion::Mamba1 => Ok((
            // vLLM keeps d_conv - 1 positions of conv state.
            vec![
                StatePart::mamba_conv_vllm(mamba.d_inner, mamba.d_conv, dtype),
                StatePart::mamba_ssm(mamba.d_inner, mamba.d_state, ssm_dtype),
            ],
            format!(
                "Mamba1: d_inner {}, d_state {}, conv over d_conv - 1 = {} positions, conv \
                 {dtype}, ssm {ssm_dtype}",
                mamba.d_inner,
                mamba.d_state,
                mamba.d_conv.saturating_sub(1)
            ),
        )),
        _ => {
            let missing = |what: &'static str| {
                config_error(what, format!("Mamba2 state needs its {what}; give it"))
            };
            let groups = mamba.n_groups.ok_or_else(|| missing("mamba n_groups"))?;
            let heads = mamba.heads.ok_or_else(|| missing("mamba heads"))?;
            let head_dim = mamba.head_dim.ok_or_else(|| missing("mamba head_dim"))?;
            let (held, repeated) = mamba2_groups(groups, tp)?;
            Ok((
                vec![
                    StatePart::mamba2_conv_vllm(
                        mamba.d_inner,
                        held,
                        mamba.d_state,
                        lengthened(mamba.d_conv)?,
                        dtype,
                    )
                    .map_err(too_big("Mamba2"))?,
                    StatePart::mamba2_ssm(heads, head_dim, mamba.d_state, ssm_dtype),
                ],
                format!(
                    "Mamba2: d_inner {}, d_state {}, {groups} groups{repeated}, {heads} heads \
                     of {head_dim}, conv over d_conv - 1{spec_words} = {} positions, conv \
                     {dtype}, ssm {ssm_dtype}",
                    mamba.d_inner,
                    mamba.d_state,
                    lengthened(mamba.d_conv)?.saturating_sub(1)
                ),
            ))
        }
    }
}

/// A conv state keeps `kernel - 1 (+ speculative)` inputs: a kernel of 1
/// with none speculative keeps none, and the layer's state would be 0 bytes
/// in silence. Refused naming the key the config spells (the first of
/// `keys` it sets).
fn refuse_empty_conv(
    hf: &HfConfig,
    keys: &[&str],
    kernel: u64,
    positions: u64,
) -> Result<(), KvError> {
    if positions > 0 {
        return Ok(());
    }
    let key = keys
        .iter()
        .find_map(|key| hf.value(key).map(|(name, _)| name))
        .unwrap_or_else(|| keys.join("/"));
    Err(config_error(
        "conv state",
        format!(
            "`{key}` is {kernel}: the conv state keeps kernel - 1 = 0 inputs, so the layer \
             would hold a 0-byte state; kv refuses it"
        ),
    ))
}

/// Mamba2's groups over all `tp` ranks, with words where they are repeated.
/// vLLM's `MambaMixer2` shards the groups with the heads; one group that `tp`
/// does not split is repeated on every rank (`extra_groups_for_head_shards`
/// adds `tp - 1`), and any other count `tp` does not split is refused.
fn mamba2_groups(groups: u64, tp: u64) -> Result<(u64, String), KvError> {
    if groups.is_multiple_of(tp) {
        return Ok((groups, String::new()));
    }
    if groups != 1 {
        return Err(KvError::Parallel {
            declaration: LayerKind::Mamba.name().to_owned(),
            problem: format!(
                "Mamba2 n_groups {groups} is neither 1 nor divisible by tp {tp}; vLLM's \
                 MambaMixer2 requires one or the other"
            ),
        });
    }
    Ok((
        tp,
        format!(" (repeated on each of the {tp} tp ranks: {tp} in all)"),
    ))
}

/// The ssm state's dtype: the model dtype (`mamba_ssm_cache_dtype auto`),
/// except NemotronH, whose config (or vLLM's default for it) says float32
/// (`NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype`).
fn ssm_dtype(hf: &HfConfig, dtype: DType) -> Result<DType, KvError> {
    let rule = families::rules(hf).map(|row| row.ssm_dtype);
    let Some(SsmDtype::ConfigElseF32(whose)) = rule else {
        return Ok(dtype);
    };
    match hf.value("mamba_ssm_cache_dtype") {
        None => {
            hf.note(format!("ssm state float32: {whose}"));
            Ok(DType::F32)
        }
        Some((key, Value::String(name))) => DType::from_torch_dtype(name).ok_or_else(|| {
            config_error(
                "mamba ssm dtype",
                format!("`{key}` is {name:?}, not a dtype kv knows"),
            )
        }),
        Some((key, other)) => Err(config_error(
            "mamba ssm dtype",
            format!("`{key}` is {other}; expected a dtype name"),
        )),
    }
}

/// The model dtype, which recurrent state takes (vLLM's `mamba_cache_dtype auto`).
fn model_dtype(hf: &HfConfig) -> Result<DType, KvError> {
    hf.dtype()
}

/// Builds each kind's declaration.
pub(super) struct Builder<'a> {
    pub settings: &'a EstimateSettings,
    pub max_model_len: u64,
    pub paging: Paging,
    /// What every declaration's note starts with.
    pub note: String,
}

impl Builder<'_> {
    fn note(&self) -> String {
        format!("{}; {}", self.note, self.paging.convention(self.settings))
    }

    fn in_flight_tokens(&self) -> Result<u64, KvError> {
        self.settings
            .max_num_batched_tokens
            .checked_mul(self.settings.engine.in_flight_batches())
            .ok_or_else(|| {
                config_error(
                    "estimate settings",
                    format!(
                        "max_num_batched_tokens {} x {} batches in flight overflows u64",
                        self.settings.max_num_batched_tokens,
                        self.settings.engine.in_flight_batches()
                    ),
                )
            })
    }

    /// The positions overflow: the length itself is too long.
    fn over_length(&self, what: &str) -> impl Fn(kv_core::Overflow) -> KvError {
        self.overflows(what, "max_model_len", "")
    }

    /// The bytes overflow: the config's geometry at this length.
    fn over_bytes(&self, what: &str) -> impl Fn(kv_core::Overflow) -> KvError {
        self.overflows(what, "figures", ": check the config's geometry")
    }

    fn overflows(
        &self,
        what: &str,
        blamed: &'static str,
        advice: &'static str,
    ) -> impl Fn(kv_core::Overflow) -> KvError {
        let max_model_len = self.max_model_len;
        let what = what.to_owned();
        move |o| KvError::Config {
            what: blamed,
            problem: format!(
                "{} overflows u64 for {what} at max_model_len {max_model_len}{advice}",
                o.step
            ),
        }
    }

    pub fn attention(
        &self,
        name: &'static str,
        cache: &str,
        geometry: Geometry,
        positions: Positions,
        hf: &HfConfig,
    ) -> Result<KvSpec, KvError> {
        let dtype = geometry.storage.dtype().unwrap_or(DType::BF16);
        let (storage, said) = attention_storage(self.settings, hf, dtype)?;
        let geometry = geometry.with_storage(storage);
        geometry
            .bytes_per_row(positions.count)
            .map_err(self.over_bytes(name))?;
        let spec = KvSpec::attention(
            name,
            self.cache(cache, "K/V", storage),
            geometry,
            positions,
            Scope::Request,
            Rows::MaxNumSeqs,
        );
        Ok(self.noted(spec, said))
    }

    /// `vLLM 0.33 SPEC (paged WHAT, STORAGE, block N)`, and the DCP share
    /// where decode context parallelism shards the tokens.
    fn cache(&self, spec: &str, what: &str, storage: Storage) -> String {
        let dcp = self.settings.engine.decode_context_parallel;
        let shard = if dcp > 1 && matches!(spec, "FullAttentionSpec" | "MLAAttentionSpec") {
            format!(
                "; DCP {dcp}: each rank holds cdiv({}, {dcp}) = {} tokens of a row",
                self.max_model_len,
                self.max_model_len.div_ceil(dcp)
            )
        } else {
            String::new()
        };
        format!(
            "vLLM {VLLM_VERSION} {spec} (paged {what}, {storage}, block {}{shard})",
            self.paging.block_size
        )
    }

    /// The spec with the estimate's note, and the storage sentence where
    /// the K/V are not stored in the model dtype.
    fn noted(&self, spec: KvSpec, said: Option<String>) -> KvSpec {
        let spec = spec.note(self.note());
        match said {
            Some(said) => spec.assumes(said),
            None => spec,
        }
    }

    /// `max_model_len` in whole blocks; under decode context parallelism,
    /// a rank's share of it, `cdiv(max_model_len, dcp)` (vLLM's
    /// `FullAttentionSpec.max_memory_usage_bytes`; its block count
    /// `cdiv(max_len, block_size x dcp)` is the same).
    fn full_positions(&self, name: &str) -> Result<Positions, KvError> {
        let dcp = self.settings.engine.decode_context_parallel.max(1);
        Positions::from_policy(PositionPolicy::PaddedTo {
            count: self.max_model_len.div_ceil(dcp),
            multiple: self.paging.block_size,
        })
        .map_err(self.over_length(name))
    }

    pub fn full(
        &self,
        geometry: Geometry,
        name: &'static str,
        hf: &HfConfig,
    ) -> Result<KvSpec, KvError> {
        let positions = self.full_positions(name)?;
        self.attention(name, "FullAttentionSpec", geometry, positions, hf)
    }

    pub fn sliding(
        &self,
        geometry: Geometry,
        window: u64,
        hf: &HfConfig,
    ) -> Result<KvSpec, KvError> {
        let policy = PositionPolicy::VllmSlidingWindow {
            window,
            max_num_batched_tokens: self.in_flight_tokens()?,
            max_model_len: self.max_model_len,
            block_size: self.paging.block_size,
        };
        self.by_policy(
            "sliding_attention",
            "SlidingWindowSpec",
            policy,
            geometry,
            hf,
        )
    }

    /// Inkling's short-convolution state (`InklingConvState.get_kv_cache_spec`,
    /// models/inkling/nvidia/sconv_swa_attn.py:185): a SlidingWindowSpec
    /// whose window and block are both the kernel, `geometry`'s heads
    /// holding every stream with no V (`head_size_v` 0), in the model dtype
    /// whatever the KV format.
    pub fn conv_state(
        &self,
        name: &'static str,
        geometry: Geometry,
        kernel: u64,
    ) -> Result<KvSpec, KvError> {
        let positions = self.sliding_positions(name, kernel, kernel)?;
        let cache = format!(
            "vLLM {VLLM_VERSION} SlidingWindowSpec (paged conv state: the K, V, attention-output \
             and MLP-output streams packed in one {}-wide head, {}, block {kernel} = window = \
             the kernel; the KV format does not apply)",
            geometry.head_dim, geometry.storage
        );
        self.as_is(name, cache, geometry, positions)
    }

    /// A SlidingWindowSpec's positions: `window` in blocks of `block` of
    /// its own.
    pub fn sliding_positions(
        &self,
        name: &str,
        window: u64,
        block: u64,
    ) -> Result<Positions, KvError> {
        let policy = PositionPolicy::VllmSlidingWindow {
            window,
            max_num_batched_tokens: self.in_flight_tokens()?,
            max_model_len: self.max_model_len,
            block_size: block,
        };
        Positions::from_policy(policy).map_err(self.over_length(name))
    }

    /// A paged cache stored as `geometry` says, whatever the KV format.
    pub fn as_is(
        &self,
        name: &'static str,
        cache: String,
        geometry: Geometry,
        positions: Positions,
    ) -> Result<KvSpec, KvError> {
        geometry
            .bytes_per_row(positions.count)
            .map_err(self.over_bytes(name))?;
        let spec = KvSpec::attention(
            name,
            cache,
            geometry,
            positions,
            Scope::Request,
            Rows::MaxNumSeqs,
        );
        Ok(spec.note(self.note()))
    }

    /// Attention whose positions follow one of vLLM's policies.
    fn by_policy(
        &self,
        name: &'static str,
        cache: &str,
        policy: PositionPolicy,
        geometry: Geometry,
        hf: &HfConfig,
    ) -> Result<KvSpec, KvError> {
        let positions = Positions::from_policy(policy).map_err(self.over_length(name))?;
        self.attention(name, cache, geometry, positions, hf)
    }

    fn chunked(&self, geometry: Geometry, hf: &HfConfig) -> Result<KvSpec, KvError> {
        let Some((_, chunk)) = hf.count_if_set("attention_chunk_size", "attention_chunk_size")?
        else {
            return Err(config_error(
                "attention_chunk_size",
                "the layer pattern has chunked_attention layers but `attention_chunk_size` \
                 is not set (looked at the given values, the top level, `text_config`, \
                 `llm_config`); give `attention_chunk_size`"
                    .to_owned(),
            ));
        };
        let policy = PositionPolicy::VllmChunkedLocal {
            chunk,
            max_num_batched_tokens: self.in_flight_tokens()?,
            max_model_len: self.max_model_len,
            block_size: self.paging.block_size,
        };
        self.by_policy(
            "chunked_attention",
            "ChunkedLocalAttentionSpec",
            policy,
            geometry,
            hf,
        )
    }

    pub fn latent(&self, mla: MlaConfig, hf: &HfConfig) -> Result<KvSpec, KvError> {
        let latent = Latent::new(
            mla.layers,
            mla.kv_lora_rank,
            mla.qk_rope_head_dim,
            mla.dtype,
        );
        let dtype = latent.storage.dtype().unwrap_or(DType::BF16);
        let (storage, said) = attention_storage(self.settings, hf, dtype)?;
        if storage.per_token_head_name().is_some() {
            // Only TRITON_ATTN takes these formats; no MLA backend lists
            // them in its `supported_kv_cache_dtypes`.
            return Err(config_error(
                "kv format",
                format!(
                    "{storage} on an MLA model: vLLM 0.33 has no MLA attention backend that \
                     stores it (only the Triton backend of plain attention does); choose \
                     another KV format"
                ),
            ));
        }
        let latent = if self.paging.fp8_ds_mla {
            latent
                .with_storage(Storage::Scaled {
                    dtype: DType::F8E4M3,
                    scale_bytes: DS_MLA_SCALE_BYTES,
                })
                .with_rope_storage(Storage::Dense(DType::BF16))
        } else {
            latent.with_storage(storage)
        };
        let positions = self.full_positions("mla_latent")?;
        latent
            .bytes_per_row(positions.count)
            .map_err(self.over_bytes("mla_latent"))?;
        let spec = KvSpec::latent(
            "mla_latent",
            self.cache("MLAAttentionSpec", "latent", storage),
            latent,
            positions,
            Scope::Request,
            Rows::MaxNumSeqs,
        );
        Ok(self.noted(spec, said))
    }

    /// A sparse-attention (DSA) model's indexer keys beside its latent, as
    /// vLLM 0.33 declares them (`DeepseekV32IndexerCache`): an
    /// `MLAAttentionSpec` of one vector of `width` bytes a token a layer,
    /// over the latent's positions and layers.
    /// Where only some layers keep keys (HY-V4's "shared" indexers), the
    /// declaration is theirs alone, placed on the model's layers so that a
    /// pipeline stage holds its own.
    pub fn indexer_keys(&self, layers: u64, keys: IndexerKeys) -> Result<KvSpec, KvError> {
        let layers = keys.shared.as_ref().map_or(layers, |shared| shared.full);
        // The fp8 keys as the latent part, their float32 scales as the rope part.
        let latent = Latent::new(layers, keys.head_dim, keys.scales, DType::F8E4M3)
            .with_rope_storage(Storage::Dense(DType::F32));
        let positions = self.full_positions(INDEXER_KEYS)?;
        latent
            .bytes_per_row(positions.count)
            .map_err(self.over_bytes(INDEXER_KEYS))?;
        let what = format!(
            "indexer keys: `index_head_dim` {} fp8 and a float32 scale per 128",
            keys.head_dim
        );
        let spec = KvSpec::latent(
            INDEXER_KEYS,
            self.cache("MLAAttentionSpec", &what, Storage::Dense(DType::F8E4M3)),
            latent,
            positions,
            Scope::Request,
            Rows::MaxNumSeqs,
        );
        let spec = match keys.shared {
            Some(shared) => spec.in_layers(shared.pattern, LayerKind::FullAttention),
            None => spec,
        };
        Ok(spec.note(self.note()))
    }

    pub fn group(&self, hf: &HfConfig, kind: LayerKind, count: u64) -> Result<KvSpec, KvError> {
        match kind {
            LayerKind::FullAttention => self.full(
                hf.kind_geometry(kind)?.with_layers(count),
                "full_attention",
                hf,
            ),
            LayerKind::SlidingAttention => {
                let window = hf.sliding_window()?.ok_or_else(|| {
                    config_error(
                        "sliding_window",
                        "the layer pattern has sliding_attention layers but `sliding_window` \
                         is null; give `sliding_window`"
                            .to_owned(),
                    )
                })?;
                self.sliding(hf.kind_geometry(kind)?.with_layers(count), window, hf)
            }
            LayerKind::ChunkedAttention => {
                self.chunked(hf.kind_geometry(kind)?.with_layers(count), hf)
            }
            LayerKind::Mamba => self.mamba(hf, count),
            LayerKind::LinearAttention | LayerKind::ShortConv => self.recurrent(hf, kind, count),
            // Holds nothing; the caller skips it. An error, not a panic, if not.
            _ => Err(config_error(
                "layer pattern",
                format!("`{kind}` layers hold no cache of their own"),
            )),
        }
    }

    pub fn mamba(&self, hf: &HfConfig, layers: u64) -> Result<KvSpec, KvError> {
        self.recurrent(hf, LayerKind::Mamba, layers)
    }

    /// Mamba, Gated DeltaNet or short-conv state over `layers`: pages of
    /// the state, padded to the attention page in a hybrid, 2 (or 3 with
    /// checkpoints) in `align` mode, plus one per speculative token. The
    /// parts are all ranks' together; pages are one rank's.
    fn recurrent(&self, hf: &HfConfig, kind: LayerKind, layers: u64) -> Result<KvSpec, KvError> {
        let tp = self.settings.engine.tensor_parallel;
        let (parts, words) = state_parts(hf, kind, tp, self.settings.engine.speculative_tokens)?;
        // Mamba2 and Gated DeltaNet layers export a prefill checkpoint
        // (`num_prefill_checkpoint_blocks` 1); short convs and Mamba1 do not.
        let checkpoints = kind == LayerKind::LinearAttention
            || (kind == LayerKind::Mamba
                && hf.mamba().is_ok_and(|m| m.version == MambaVersion::Mamba2));
        let name = match kind {
            LayerKind::Mamba => "mamba",
            LayerKind::ShortConv => "short_conv",
            _ => "linear_attention",
        };
        self.state(kind, name, layers, (parts, words), checkpoints)
    }

    /// Kimi K3's KDA state over `layers`: a checkpoint page where FlashKDA
    /// runs the prefill (kda.py:901 `num_prefill_checkpoint_blocks`).
    pub fn kda(&self, hf: &HfConfig, kda: &Kda, layers: u64) -> Result<KvSpec, KvError> {
        let parts = kda_parts(hf, kda, self.settings.engine.speculative_tokens)?;
        self.state(
            LayerKind::LinearAttention,
            "kda",
            layers,
            parts,
            kda.flashkda,
        )
    }

    /// Pages of a state whose parts (all ranks' together) and words are
    /// given: padded to the attention page in a hybrid, 2 (3 with
    /// `checkpoints`) in `align` mode, plus one per speculative token.
    fn state(
        &self,
        kind: LayerKind,
        name: &'static str,
        layers: u64,
        (mut parts, words): (Vec<StatePart>, String),
        checkpoints: bool,
    ) -> Result<KvSpec, KvError> {
        let tp = self.settings.engine.tensor_parallel;
        let content = rank_bytes(&parts, tp, kind)?;
        let padded = self.paging.padded_page();
        if let Some(page) = padded {
            // One byte per element, split like the state, so each rank holds
            // its own page's padding.
            let padding = page
                .checked_sub(content)
                .and_then(|rank| rank.checked_mul(tp))
                .ok_or_else(|| {
                    overflow(format!("{kind} page padding at tp {tp}"))(kv_core::Overflow {
                        step: "the padding of every rank",
                    })
                })?;
            parts.push(StatePart::new("page_padding", [padding, 1, 1], DType::U8).split_on(0));
        }
        let (mode, pages) = if self.paging.align {
            ("align", 2 + u64::from(checkpoints))
        } else {
            ("none", 1)
        };
        let speculative = self.settings.engine.speculative_tokens;
        let slots = with_speculative(pages, speculative)?;
        let state = RecurrentState::from_parts(layers, parts).with_slots(slots);
        state
            .bytes_per_row()
            .map_err(overflow(format!("{layers} {kind} layers")))?;
        let page = padded.unwrap_or(content);
        let mut spec = KvSpec::recurrent(
            name,
            format!(
                "vLLM {VLLM_VERSION} MambaSpec ({words}; mamba cache mode {mode}: {slots} \
                 page(s) of {page} B{}{})",
                match tp {
                    1 => String::new(),
                    _ => format!(" per rank at tp {tp}"),
                },
                match padded {
                    Some(_) => format!(", state {content} B padded to the attention page"),
                    None => String::new(),
                }
            ),
            state,
            Scope::Request,
            Rows::MaxNumSeqs,
        )
        .note(self.note());
        spec = spec.assumes(format!(
            "{} page(s) per layer: {}{}",
            slots,
            if self.paging.align {
                format!(
                    "prefix caching on, so mode align keeps 2{}",
                    if checkpoints {
                        " + 1 prefill checkpoint"
                    } else {
                        ""
                    }
                )
            } else {
                "mode none keeps 1".to_owned()
            },
            if speculative > 0 {
                format!(" + {speculative} for speculative tokens")
            } else {
                ", no speculative decoding (each speculative token adds one)".to_owned()
            }
        ));
        Ok(spec)
    }
}

/// Whisper-style: decoder self-attention and cross-attention over the
/// encoder's positions, with the decoder's layers and heads.
pub(super) fn encoder_decoder<'a>(
    hf: &HfConfig,
    key: &str,
    encoder: &Value,
    builder: impl Fn(&str) -> Builder<'a>,
) -> Result<(String, Vec<KvSpec>), KvError> {
    let Some((_, encoder_positions)) =
        hf.count_if_set("max_source_positions", "max_source_positions")?
    else {
        return Err(config_error(
            "max_source_positions",
            format!("`{key}` is {encoder}"),
        ));
    };
    // The decoder's layers and heads, where the config gives them apart
    // from the encoder's; read through HfConfig so they are checked alike.
    let mut decoder = hf.clone();
    let mut said = Vec::new();
    // Each is checked under the name the file spells (`decoder_attention_heads`),
    // before it stands in for the key the geometry reads.
    for (what, from, to) in [
        ("layers", "decoder_layers", "num_hidden_layers"),
        ("kv_heads", "decoder_attention_heads", "num_attention_heads"),
    ] {
        if let Some((name, count)) = hf.count_if_set(what, from)? {
            decoder = decoder.with_value_from(to, count, &name);
            said.push(format!("`{name}` {count}"));
        }
    }
    let geometry = decoder.geometry()?;
    let detected = format!(
        "encoder-decoder: `{key}` {encoder_positions} encoder positions; decoder {} layers, {} heads of {}{}",
        geometry.layers,
        geometry.kv_heads,
        geometry.head_dim,
        if said.is_empty() {
            String::new()
        } else {
            format!(" ({})", said.join(", "))
        }
    );
    let builder = builder(&detected);
    let self_attention = builder.full(geometry, "self_attention", hf)?;
    // vLLM 0.33 sizes it by the scheduler's max_num_encoder_input_tokens,
    // which is max_num_batched_tokens (`SchedulerConfig.__post_init__`), not
    // by the encoder's length (`CrossAttentionSpec.max_memory_usage_bytes`).
    let encoder_tokens = builder.settings.max_num_batched_tokens;
    let cross = Positions::from_policy(PositionPolicy::PaddedTo {
        count: encoder_tokens,
        multiple: builder.paging.block_size,
    })
    .map_err(overflow(format!(
        "max_num_encoder_input_tokens {encoder_tokens}"
    )))?;
    let cross_attention = builder.attention(
        "cross_attention",
        &format!(
            "CrossAttentionSpec over max_num_encoder_input_tokens (= max_num_batched_tokens \
             {encoder_tokens}; the encoder's `{key}` is {encoder_positions})"
        ),
        geometry,
        cross,
        hf,
    )?;
    Ok((detected, vec![self_attention, cross_attention]))
}

#[cfg(test)]
mod tests {
    use super::covering_block;

    #[test]
    fn the_covering_block_holds_a_state_page_and_refuses_an_empty_page() {
        // 128 x cdiv(271,360, 128 x 1,152 = 147,456) = 128 x 2 = 256.
        assert_eq!(covering_block(128, 1152, 271_360), Ok(256));
        // Exactly one aligned page's worth stays at one.
        assert_eq!(covering_block(16, 1024, 16 * 1024), Ok(16));
        // An attention page of 0 bytes covers nothing: an error, not a panic.
        assert!(covering_block(16, 0, 100).is_err());
        assert!(covering_block(u64::MAX, 2, 100).is_err());
    }
}
