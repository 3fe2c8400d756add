//! The layouts vLLM 0.33 refuses to start with: a figure for one would be a
//! figure for nothing, so [`super::detect::estimate`] refuses them too, with vLLM's
//! reason (a [`KvError::Parallel`]). The checks run in vLLM's order:
//! `ParallelConfig` (TP and DCP), `ModelConfig.verify_with_parallel_config`
//! (query heads, pipeline support, DCP and KV heads), `validate_block_size`
//! (the DCP interleave), then the KV cache specs (DCP and sliding or
//! chunked layers).

use kv_core::spec::{Bound, Layout};
use kv_core::{BlockFormat, DType, HfConfig, KvError, KvSpec, PositionPolicy, Storage};

use super::families;
use super::settings::{EstimateSettings, VLLM_VERSION};

/// Architectures vLLM 0.33 no longer serves natively, the last release that
/// did (`model_executor/models/registry.py`, `_PREVIOUSLY_SUPPORTED_MODELS`),
/// and whether transformers 5.20 (what vLLM 0.33 installs) has a class its
/// Transformers backend takes (`_try_resolve_transformers`:
/// `is_backend_compatible()` or `_can_set_attn_implementation()`, checked
/// on 2026-12-04): with `model_impl` auto vLLM then runs that instead of
/// refusing.
const RETIRED_ARCHITECTURES: &[(&str, &str, bool)] = &[
    ("MotifForCausalLM", "0.10.2", false),
    ("Phi3SmallForCausalLM", "0.9.2", false),
    ("Phi4FlashForCausalLM", "0.10.2", false),
    ("Phi4MultimodalForCausalLM", "0.12.0", true),
    ("JAISLMHeadModel", "0.22.0", false),
    ("ErnieModel", "0.23.0", true),
    ("ErnieForSequenceClassification", "0.23.0", true),
    ("ErnieForTokenClassification", "0.23.0", true),
    ("InternLM2VEForCausalLM", "0.23.0", false),
    ("QWenLMHeadModel", "0.23.0", false),
    ("QwenVLForConditionalGeneration", "0.23.0", false),
    ("InternLMForCausalLM", "0.23.0", false),
    ("DonutForConditionalGeneration", "0.10.2", false),
    ("MllamaForConditionalGeneration", "0.10.2", true),
    ("XverseForCausalLM", "0.23.0", false),
    ("Dots1ForCausalLM", "0.23.0", true),
    ("BambaForCausalLM", "0.23.0", true),
    ("MiniMaxForCausalLM", "0.23.0", true),
    ("MiniMaxText01ForCausalLM", "0.23.0", false),
    ("MiniMaxM1ForCausalLM", "0.23.0", false),
    ("MiniMaxVL01ForConditionalGeneration", "0.23.0", false),
    ("BaiChuanForCausalLM", "0.23.0", false),
    ("BaichuanForCausalLM", "0.23.0", false),
    ("AquilaModel", "0.24.0", false),
    ("AquilaForCausalLM", "0.24.0", false),
    ("Grok1ModelForCausalLM", "0.24.0", false),
    ("Grok1ForCausalLM", "0.24.0", false),
    ("TarsierForConditionalGeneration", "0.24.0", false),
    ("Tarsier2ForConditionalGeneration", "0.23.0", false),
    ("MantisForConditionalGeneration", "0.24.0", false),
    ("MusicFlamingoForConditionalGeneration", "0.24.0", true),
    ("AyaVisionForConditionalGeneration", "0.24.0", true),
    ("TeleChatForCausalLM", "0.25.0", false),
    ("PersimmonForCausalLM", "0.25.0", true),
    ("FuyuForCausalLM", "0.25.0", true),
    ("Plamo2ForCausalLM", "0.26.0", false),
    ("OuroForCausalLM", "0.26.0", false),
    ("ArcticForCausalLM", "0.28.0", false),
    ("ChameleonForConditionalGeneration", "0.28.0", true),
    ("Cheers", "0.28.0", false),
    ("CheersForConditionalGeneration", "0.28.0", false),
    ("Fairseq2LlamaForCausalLM", "0.28.0", false),
    ("FireRedLIDForConditionalGeneration", "0.28.0", false),
    ("GritLM", "0.28.0", false),
    ("HCXVisionForCausalLM", "0.28.0", false),
    ("MPTForCausalLM", "0.28.0", false),
    ("MptForCausalLM", "0.28.0", false),
    ("RWForCausalLM", "0.28.0", false),
    ("StableLMEpochForCausalLM", "0.28.0", false),
    ("PrithviGeoSpatialMAE", "0.28.0", false),
];

/// vLLM's refusal of a model it no longer serves natively. vLLM tries the
/// config's `architectures` in order and refuses only when none loads,
/// naming the first it retired; kv refuses when every one listed is retired
/// and transformers has none for vLLM's Transformers backend (one kv does
/// not know may still be served). Where the backend takes it instead, the
/// figures are given and a note says whose layout they are. A config
/// without `architectures` is not judged here.
pub(super) fn check_served(hf: &HfConfig) -> Result<(), KvError> {
    let architectures = hf.architectures();
    let retired: Vec<(&str, &str, bool)> = architectures
        .iter()
        .filter_map(|name| {
            RETIRED_ARCHITECTURES
                .iter()
                .find(|(retired, _, _)| retired == name)
                .copied()
        })
        .collect();
    if retired.is_empty() || retired.len() != architectures.len() {
        return Ok(());
    }
    // The Transformers backend is tried for the first architecture only.
    let (name, last, backend) = retired[0];
    if backend {
        hf.note(format!(
            "vLLM {} no longer serves {name} natively (vLLM {last} was the last); with \
             model_impl auto it runs transformers' {name} through its Transformers backend, \
             whose caches kv does not size apart: these figures are the native model's",
            VLLM_VERSION
        ));
        return Ok(());
    }
    Err(KvError::Config {
        what: "architectures",
        problem: format!(
            "vLLM {} would not start: it no longer serves {name}, which vLLM {last} was \
             the last to serve (vLLM: \"Model architecture {name} was supported in vLLM \
             until v{last}, and is not supported anymore. Please use an older version of \
             vLLM if you want to use this model architecture.\"); kv's figures follow \
             vLLM {}'s rules, so it gives none",
            VLLM_VERSION, VLLM_VERSION,
        ),
    })
}

/// vLLM's refusal of the layout in `settings` for this model, where the
/// config alone decides it (before any cache is sized).
pub(super) fn check_layout(hf: &HfConfig, settings: &EstimateSettings) -> Result<(), KvError> {
    let engine = &settings.engine;
    let (tp, pp, dcp) = (
        engine.tensor_parallel,
        engine.pipeline_stages,
        engine.decode_context_parallel,
    );
    // config/parallel.py: without prefill context parallelism, DCP reuses
    // the TP ranks.
    if !tp.is_multiple_of(dcp) {
        return refused(format!(
            "decode context parallelism reuses the TP ranks, so tp {tp} must be divisible by \
             dcp {dcp} (vLLM: \"tp_size={tp} must be divisible by dcp_size={dcp}.\")"
        ));
    }
    if let Some((key, heads)) = hf.attention_heads()? {
        if !heads.is_multiple_of(tp) {
            return refused(format!(
                "tp {tp} does not divide the {heads} query heads (`{key}`) (vLLM: \"Total \
                 number of attention heads ({heads}) must be divisible by tensor parallel \
                 size ({tp}).\")"
            ));
        }
    }
    if tp > 1 {
        // vLLM 0.33 model_executor/models/dory.py:295, in the model class.
        if hf.architectures().contains(&"DoryForCausalLM") {
            return refused(format!(
                "tp {tp}: vLLM's DoryForCausalLM builds on one rank only (vLLM: \"Dory \
                 currently supports tensor_parallel_size=1 only\"); use tp 1"
            ));
        }
    }
    if pp > 1 {
        let by_architecture = hf
            .architectures()
            .into_iter()
            .find(|arch| NO_PIPELINE_ARCHITECTURES.contains(arch));
        let class = by_architecture.or_else(|| families::rules(hf).and_then(|row| row.no_pipeline));
        if let Some(class) = class {
            return refused(format!(
                "pp {pp}: vLLM's {class} does not implement `SupportsPP` (vLLM: \"Pipeline \
                 parallelism is not supported for this model.\"); use pp 1"
            ));
        }
    }
    // The model class itself, once built on each stage.
    super::moe_stages::check(hf, pp).or_else(refused)
}

/// The architectures of vLLM 0.33's text and multimodal registry whose model
/// class does not implement `SupportsPP` (`interfaces.supports_pp`), for
/// which `ModelConfig.verify_with_parallel_config` refuses
/// `pipeline_parallel_size > 1`; listed by `scripts/vllm/no_pipeline.py` on
/// 2026-12-06 (KananaVForConditionalGeneration, whose module needs timm, not
/// inspected). A config naming one is refused whatever its `model_type`.
const NO_PIPELINE_ARCHITECTURES: &[&str] = &[
    "AliceAIForCausalLM",
    "AriaForConditionalGeneration",
    "CohereAsrForConditionalGeneration",
    "DiffusionGemmaForBlockDiffusion",
    "DomynEdgeForCausalLM",
    "DoryForCausalLM",
    "FireRedASR2ForConditionalGeneration",
    "FunASRForConditionalGeneration",
    "Gemma3nForCausalLM",
    "Gemma3nForConditionalGeneration",
    "HrmTextForCausalLM",
    "IQuestLoopCoderForCausalLM",
    "Idefics3ForConditionalGeneration",
    "Mamba2ForCausalLM",
    "NemotronH_Nano_Omni_Reasoning_V3",
    "NemotronH_Nano_VL_V2",
    "NemotronH_Omni_Reasoning_V3",
    "NemotronH_Super_Omni_Reasoning_V3",
    "NemotronParseForConditionalGeneration",
    "PaddleOCRVLForConditionalGeneration",
    "Phi4MMForCausalLM",
    "RadioMBartPrefixForCausalLM",
    "SmolVLMForConditionalGeneration",
    "WhisperForConditionalGeneration",
    "Zamba2ForCausalLM",
];

/// vLLM's refusal of decode context parallelism for these caches, if any.
pub(super) fn check_dcp(
    hf: &HfConfig,
    settings: &EstimateSettings,
    block_size: u64,
    specs: &[KvSpec],
) -> Result<(), KvError> {
    let engine = &settings.engine;
    let (tp, dcp) = (engine.tensor_parallel, engine.decode_context_parallel);
    if dcp <= 1 {
        return Ok(());
    }
    let mla = specs
        .iter()
        .any(|spec| matches!(spec.layout, Layout::Latent { .. }));
    let kv_heads = specs.iter().find_map(|spec| match &spec.layout {
        Layout::Attention { geometry, .. } => Some(geometry.kv_heads),
        _ => None,
    });
    if !mla && kv_heads.is_none() {
        // `verify_with_parallel_config` divides tp by the total KV heads,
        // which an attention-free model reports as 0.
        return refused(format!(
            "decode context parallelism shards attention, and this model has none (vLLM's \
             check divides tp {tp} by the model's 0 KV heads and fails with \
             \"ZeroDivisionError: integer division or modulo by zero\"); use dcp 1"
        ));
    }
    if let (false, Some(kv_heads)) = (mla, kv_heads) {
        if tp <= kv_heads {
            return refused(format!(
                "decode context parallelism for GQA/MQA needs more TP ranks than KV heads: \
                 tp {tp} is not above the model's {kv_heads} KV heads; raise tp or use dcp 1 \
                 (vLLM: \"Decode context parallelism for GQA/MQA requires \
                 `--tensor-parallel-size` ({tp}) to be greater than the model's total number \
                 of KV heads ({kv_heads}).\")"
            ));
        }
        let most = tp / kv_heads;
        if dcp > most {
            return refused(format!(
                "dcp {dcp} exceeds the most tp {tp} allows for {kv_heads} KV heads: \
                 tp / kv_heads = {most} copies of each head to shard tokens across (vLLM: \
                 \"`--decode-context-parallel-size` ({dcp}) exceeds the maximum supported \
                 value ({most}) for `--tensor-parallel-size` ({tp}) and {kv_heads} model KV \
                 heads.\")"
            ));
        }
        if let Some((_, heads)) = hf.attention_heads()? {
            let per_kv = heads / kv_heads;
            if !per_kv.is_multiple_of(dcp) {
                return refused(format!(
                    "the model's {per_kv} query heads per KV head are not divisible by dcp \
                     {dcp} (vLLM: \"The model's number of query heads per KV head \
                     ({per_kv}) must be divisible by `--decode-context-parallel-size` ({dcp}) \
                     for GQA/MQA.\")"
                ));
            }
        }
    }
    let interleave = engine.dcp_interleave;
    if interleave > block_size || !block_size.is_multiple_of(interleave) {
        return refused(format!(
            "the DCP interleave {interleave} must divide the block size {block_size} (vLLM: \
             \"Block_size({block_size}) should be greater than or equal to and divisible by \
             cp_kv_cache_interleave_size ({interleave}).\")"
        ));
    }
    for spec in specs {
        // vLLM: `SlidingWindowSpec.max_memory_usage_bytes` asserts it at
        // start-up; a chunked group is refused by the hybrid coordinator
        // (and `ChunkedLocalAttentionManager` asserts it).
        let (kind, says) = match spec.layout.positions().map(|p| &p.bound) {
            Some(Bound::Policy(PositionPolicy::VllmSlidingWindow { .. })) => {
                ("sliding-window", "DCP not support sliding window.")
            }
            Some(Bound::Policy(PositionPolicy::VllmChunkedLocal { .. })) => (
                "chunked local attention",
                "DCP not support chunked local attn now.",
            ),
            _ => continue,
        };
        return refused(format!(
            "decode context parallelism shards full attention and MLA only; `{}` is {} {kind} \
             layers (vLLM: \"{says}\"); use dcp 1",
            spec.name,
            spec.layout.layers(),
        ));
    }
    Ok(())
}

/// vLLM's refusal of the KV format for these caches, where no backend on
/// any CUDA GPU takes it, and a note where that hangs on the GPU.
///
/// - MLA: vLLM 0.33's dense MLA backends (`CUTLASS_MLA`, `FLASHMLA`,
///   `FLASHINFER_MLA`, `FLASH_ATTN_MLA`, `TRITON_MLA`) take bf16/f16 and fp8
///   (e4m3) only: `fp8_e5m2` only ROCm's AITER MLA takes, and NVFP4 none
///   (the sparse `FLASHMLA_SPARSE` takes `nvfp4_ds_mla`, a format of its own).
/// - Attention in NVFP4: FlashInfer is the only backend that takes it
///   (`supported_kv_cache_dtypes`), at head sizes 64, 128, 256 and 512
///   (`get_supported_head_sizes`), K and V of one size (its
///   `customize_spec` asserts it). At head size 64 it also refuses on SM
///   8x/9x/12x (`supports_combination`), which kv cannot see: a note says so.
///
/// Choices that only move vLLM to another backend (FlashAttention's fp8 on
/// an ALiBi model falls back to Triton or FlashInfer) are not refusals.
pub(super) fn check_format(hf: &HfConfig, specs: &[KvSpec]) -> Result<(), KvError> {
    for spec in specs {
        let why = match &spec.layout {
            Layout::Latent { latent, .. } => match latent.storage {
                Storage::Blocks(format) if format == BlockFormat::NVFP4 => {
                    format!(
                        "is an MLA latent stored as {}, and no vLLM MLA backend takes an \
                         NVFP4 latent cache",
                        latent.storage
                    )
                }
                storage if storage.dtype() == Some(DType::F8E5M2) => format!(
                    "is an MLA latent stored as {}, and no CUDA MLA backend takes fp8_e5m2 \
                     (only ROCm's AITER MLA does)",
                    latent.storage
                ),
                _ => continue,
            },
            Layout::Attention { geometry, .. } => {
                if geometry.storage.dtype() == Some(DType::F8E4M3) {
                    if let Some(alibi) = alibi(hf) {
                        // v1/attention/backends/flash_attn.py:1129: ALiBi runs on
                        // FlashAttention 2 alone, which keeps no fp8 cache on Hopper.
                        format!(
                            "is {alibi} attention with ALiBi, which vLLM runs on FlashAttention \
                             2 alone, and it keeps no fp8 cache on Hopper (vLLM: \"FlashAttention \
                             does not support fp8 kv-cache on this device.\")"
                        )
                    } else {
                        continue;
                    }
                } else {
                    let nvfp4 = Storage::Blocks(BlockFormat::NVFP4);
                    if geometry.storage != nvfp4 && geometry.v_storage != Some(nvfp4) {
                        continue;
                    }
                    let (k, v) = (
                        geometry.head_dim,
                        geometry.v_head_dim.unwrap_or(geometry.head_dim),
                    );
                    if k != v {
                        format!(
                        "holds NVFP4 keys of head size {k} beside values of {v}, and FlashInfer, \
                         vLLM's only backend with an NVFP4 KV cache, takes K and V of one size \
                         (vLLM: \"nvfp4 with asymmetric K/V head sizes not yet supported\")"
                    )
                    } else if ![64, 128, 256, 512].contains(&k) {
                        format!(
                            "is stored as NVFP4 at head size {k}, and FlashInfer, vLLM's only \
                         backend with an NVFP4 KV cache, takes head sizes 64, 128, 256 and 512"
                        )
                    } else {
                        if k == 64 {
                            hf.note(format!(
                                "`{}` in NVFP4 at head size 64: vLLM {} starts with it on SM 10x \
                             GPUs only (on SM 8x/9x/12x FlashInfer refuses it: \"fa2 prefill \
                             misreads an NVFP4 KV cache at head_size 64\", and no other \
                             backend takes NVFP4)",
                                spec.name, VLLM_VERSION
                            ));
                        }
                        continue;
                    }
                }
            }
            // Not in vLLM's KV cache, or a layout an estimate never builds:
            // no format of its to refuse.
            _ => continue,
        };
        return Err(KvError::Config {
            what: "kv_format",
            problem: format!(
                "vLLM {} would not start: `{}` {why}; use bf16 or f8e4m3",
                VLLM_VERSION, spec.name,
            ),
        });
    }
    Ok(())
}

/// The block every attention backend vLLM 0.33 tries on Hopper runs a
/// multiple of (`get_supported_kernel_block_sizes`): FLASH_ATTN,
/// TRITON_ATTN, FLEX_ATTENTION, FLASH_ATTN_MLA and TRITON_MLA
/// `MultipleOf(16)`, FLASHINFER 16/32/64, FLASHMLA 64.
const ATTENTION_BLOCK_MULTIPLE: u64 = 16;

/// vLLM's refusal of a `--block-size` no attention backend runs: given, the
/// selector keeps the block (`user_specified_block_size`) and every backend's
/// `supports_block_size` tests `block_size % base == 0` against its kernel
/// blocks, each a multiple of 16 on Hopper, so a block that is not one
/// leaves no backend for attention or an MLA latent. A model without either
/// (Mamba alone) picks no attention backend and is not refused.
pub(super) fn check_block_size(
    settings: &EstimateSettings,
    specs: &[KvSpec],
) -> Result<(), KvError> {
    let block_size = settings.block_size;
    if !settings.block_size_given || block_size.is_multiple_of(ATTENTION_BLOCK_MULTIPLE) {
        return Ok(());
    }
    let Some(spec) = specs.iter().find(|spec| {
        matches!(
            spec.layout,
            Layout::Attention { .. } | Layout::Latent { .. }
        )
    }) else {
        return Ok(());
    };
    let kind = match spec.layout {
        Layout::Latent { .. } => "MLA",
        _ => "attention",
    };
    Err(KvError::Config {
        what: "block_size",
        problem: format!(
            "vLLM {VLLM_VERSION} would not start: no {kind} backend on Hopper runs a block of \
             {block_size} tokens for `{}` (each runs a multiple of 16: FLASH_ATTN, \
             FLASHINFER, TRITON_ATTN, FLASH_ATTN_MLA, TRITON_MLA; FLASHMLA a multiple of 64; \
             vLLM: \"No valid attention backend found for cuda with ...\"); give a \
             multiple of 16, or no --block-size",
            spec.name
        ),
    })
}

/// The family, where vLLM 0.33 builds its attention with ALiBi slopes and
/// the cache config (models/bloom.py; Falcon's ALiBi attention is built
/// without the cache config, so its cache keeps the model dtype).
fn alibi(hf: &HfConfig) -> Option<&'static str> {
    hf.model_types().contains(&"bloom").then_some("BLOOM")
}

fn refused(problem: String) -> Result<(), KvError> {
    Err(KvError::Parallel {
        declaration: String::new(),
        problem: format!("vLLM {} would not start: {problem}", VLLM_VERSION),
    })
}
