//! SGLang 0.5.23's KV pools for a model kv has detected ([`Estimate`]):
//! how many tokens (and Mamba request slots) its `KVCacheConfigurator`
//! makes of the memory left after the weights, and the start-up lines its
//! pools log. The rules are SGLang's (`srt/model_executor/pool_configurator.py`,
//! `srt/mem_cache/kv_cache_configurator.py`, `memory_pool.py`), on Hopper
//! (page size 1), with its defaults; the geometry is kv's detection.

use kv_core::pattern::LayerKind;
use kv_core::spec::Layout;
use kv_core::KvError;
use serde::Serialize;
use serde_json::Value;

use super::detect::Estimate;

/// The engine these figures follow, as the JSON names it.
pub const SGLANG_ENGINE: &str = "sglang 0.5.23";

/// Architectures SGLang 0.5.23 gives a separate sliding-window pool
/// (`configs/model_config.py`, `is_hybrid_swa_model`); every other model's
/// sliding layers are stored at full length (Gemma 2/3, Cohere2, Mistral).
const HYBRID_SWA_ARCHITECTURES: [&str; 28] = [
    "BeamForCausalLM",
    "Llama4ForConditionalGeneration",
    "DeepseekV4ForCausalLM",
    "DeepseekV4ForCausalLMNextN",
    "DeepseekV4ForCausalLMDSpark",
    "GptOssForCausalLM",
    "GraniteSWAForCausalLM",
    "GraniteMoeSWAForCausalLM",
    "IQuestQ1ForCausalLM",
    "IQuestQ1MTP",
    "MiMoV2ForCausalLM",
    "MiMoV2FlashForCausalLM",
    "MiMoV2MTP",
    "Step3p5ForCausalLM",
    "Step3p5MTP",
    "Step3p7ForConditionalGeneration",
    "Gemma4ForCausalLM",
    "Gemma4ForConditionalGeneration",
    "EmbeddingGemma2Model",
    "Gemma4UnifiedForConditionalGeneration",
    "DiffusionGemmaForBlockDiffusion",
    "LagunaForCausalLM",
    "MellumForCausalLM",
    "MuseGlimmerForCausalLM",
    "MuseGlimmerForConditionalGeneration",
    "InklingForConditionalGeneration",
    "InklingForConditionalGenerationMTP",
    "UnlimitedOCRForCausalLM",
];

/// Architectures SGLang 0.5.23 counts as multimodal (`configs/model_config.py`,
/// `multimodal_model_archs`, lines 2391-2473, `MIMO_V2_MULTIMODAL_ARCHS`
/// spelled out): their pools are sized after a reservation.
const MULTIMODAL_ARCHITECTURES: [&str; 81] = [
    "CLIPModel",
    "Cohere2VisionForConditionalGeneration",
    "Cosmos3EdgeForConditionalGeneration",
    "DeepseekVL2ForCausalLM",
    "Ernie4_5_VLMoeForConditionalGeneration",
    "MiniMaxM3SparseForConditionalGeneration",
    "Gemma3ForConditionalGeneration",
    "Gemma3nForConditionalGeneration",
    "Gemma4ForConditionalGeneration",
    "EmbeddingGemma2Model",
    "Gemma4UnifiedForConditionalGeneration",
    "DiffusionGemmaForBlockDiffusion",
    "Glm4vForConditionalGeneration",
    "Glm4vMoeForConditionalGeneration",
    "Glm5NextForConditionalGeneration",
    "GlmOcrForConditionalGeneration",
    "GlmAsrForConditionalGeneration",
    "GlmImageForConditionalGeneration",
    "Grok1VForCausalLM",
    "Grok1AForCausalLM",
    "LlavaLlamaForCausalLM",
    "Llama4ForConditionalGeneration",
    "LlavaMistralForCausalLM",
    "LlavaQwenForCausalLM",
    "LlavaForConditionalGeneration",
    "LlavaVidForCausalLM",
    "Lfm2VlForConditionalGeneration",
    "LightOnOCRForConditionalGeneration",
    "MiMoV2ForCausalLM",
    "MiMoV2ASRForCausalLM",
    "MiniCPMO",
    "MiniCPMV",
    "Mistral3ForConditionalGeneration",
    "MultiModalityCausalLM",
    "MllamaForConditionalGeneration",
    "MossVLForConditionalGeneration",
    "NemotronH_Nano_VL_V2",
    "NemotronH_Nano_Omni_Reasoning_V3",
    "NemotronH_Omni_Reasoning_V3",
    "MuseGlimmerForConditionalGeneration",
    "MuseSparkForConditionalGeneration",
    "PixtralForConditionalGeneration",
    "Qwen2AudioForConditionalGeneration",
    "Qwen2VLForConditionalGeneration",
    "Qwen2_5_VLForConditionalGeneration",
    "Qwen3VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "Qwen4ExpForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration",
    "InternS2MobiusForConditionalGeneration",
    "Qwen3ASRForConditionalGeneration",
    "Qwen3OmniMoeForConditionalGeneration",
    "KimiVLForConditionalGeneration",
    "LocateAnythingForConditionalGeneration",
    "InternVLChatModel",
    "InternS1ForConditionalGeneration",
    "InternS1ProForConditionalGeneration",
    "Phi4MMForCausalLM",
    "VoxtralForConditionalGeneration",
    "WhisperForConditionalGeneration",
    "Step3VLForConditionalGeneration",
    "POINTSV15ChatModel",
    "DotsVLMForCausalLM",
    "Dots3NoteForCausalLM",
    "DotsOCRForCausalLM",
    "Sarashina2VisionForCausalLM",
    "NVILAForConditionalGeneration",
    "NVILALiteForConditionalGeneration",
    "DeepseekOCRForCausalLM",
    "UnlimitedOCRForCausalLM",
    "JetVLMForConditionalGeneration",
    "PaddleOCRVLForConditionalGeneration",
    "MiDashengLMModel",
    "StepVLForConditionalGeneration",
    "Step3p7ForConditionalGeneration",
    "KimiK25ForConditionalGeneration",
    "BailingMMNativeForConditionalGeneration",
    "BailingMM2NativeForConditionalGeneration",
    "BailingMoeV3VLForConditionalGeneration",
];

/// Architectures whose multimodal side SGLang turns off unless asked
/// (`configs/model_config.py:692`, `mm_disabled_models`): no reservation.
const MULTIMODAL_DISABLED_ARCHITECTURES: [&str; 4] = [
    "Gemma3ForConditionalGeneration",
    "Llama4ForConditionalGeneration",
    "Step3VLForConditionalGeneration",
    "InklingForConditionalGeneration",
];

/// What a multimodal model's pools give up before sizing:
/// `SGLANG_VLM_CACHE_SIZE_MB` (100, `environ.py:1598`) MiB for the embedding
/// cache; the feature-transport pool is added only for `cuda_ipc` /
/// `cuda_vmm`, and an H100 defaults to `cpu` (`mem_cache/kv_cache_configurator.py:202`).
const MM_RESERVATION_BYTES: u64 = 100 << 20;

/// Architectures kv detects that SGLang 0.5.23 has no model class for and
/// whose transformers class is not backend-compatible: its loader refuses them
/// (`model_loader/utils.py`, `resolve_transformers_arch`).
const UNSUPPORTED_ARCHITECTURES: [&str; 3] =
    ["JambaForCausalLM", "Zamba2ForCausalLM", "FalconForCausalLM"];

/// Architectures SGLang serves with an MLA latent where kv's detection (vLLM's
/// rule) reads plain heads: `kv_lora_rank + qk_rope_head_dim` per layer
/// (`configs/model_config.py`).
const MLA_ARCHITECTURES_READ_AS_HEADS: [&str; 1] = ["MiniCPM3ForCausalLM"];

/// The architectures whose Mamba radix cache takes the extra buffer by
/// default (arg_groups/overrides.py: in `_MAMBA_RADIX_CACHE_ARCHS` and
/// `_MAMBA_EXTRA_BUFFER_ARCHS`, the linear-attention backend Triton, overlap
/// scheduling on).
const MAMBA_EXTRA_BUFFER_ARCHITECTURES: &[&str] = &[
    "KimiLinearForCausalLM",
    "KimiK3ForConditionalGeneration",
    "BailingMoeV2_5ForCausalLM",
    "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration",
    "Qwen3NextForCausalLM",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM",
    "Qwen4ExpForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration",
    "MiniCPMV4_6ForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration",
    "NemotronHForCausalLM",
    "NemotronHPuzzleForCausalLM",
    "NemotronH_Omni_Reasoning_V3",
    "FalconH1ForCausalLM",
    "Glm5NextForConditionalGeneration",
    "GraniteMoeHybridForCausalLM",
];

/// Mamba state slots per running request (`_calculate_mamba_ratio`,
/// mem_cache/kv_cache_configurator.py:3062): 3
/// (`MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO`), and the 2 tracking slots
/// of the extra buffer with overlap scheduling where the architecture takes
/// it (Jamba, LFM2, Mamba and the others: 3).
fn mamba_slots_per_request(config: &Value) -> u64 {
    // Granite 4.0-H takes it only with a Mamba layer, and without one it
    // has no state pool to ask about.
    let first = architectures(config).first().copied().unwrap_or_default();
    if MAMBA_EXTRA_BUFFER_ARCHITECTURES.contains(&first) {
        5
    } else {
        3
    }
}

/// What an error names (`kv: cannot read SGLang 0.5.23's pools from the config: ...`).
const POOLS: &str = "SGLang 0.5.23's pools";

/// SGLang's "GB" in its log lines.
const GIB: u64 = 1 << 30;

/// SGLang's `--kv-cache-dtype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SglangKvDtype {
    /// The model dtype.
    Auto,
    /// `torch.float8_e4m3fn`, one byte.
    Fp8E4m3,
    /// `torch.float8_e5m2`, one byte.
    Fp8E5m2,
}

/// The SGLang server arguments that move the pools.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SglangSettings {
    /// `--tp-size`.
    pub tp: u64,
    /// `--dp-size` with `--enable-dp-attention`: attention runs on `tp / dp`
    /// ranks per worker, and each worker owns a full pool.
    pub dp: u64,
    /// `--kv-cache-dtype`.
    pub kv_cache_dtype: SglangKvDtype,
    /// `--page-size` (1 on Hopper by default).
    pub page_size: u64,
    /// `--swa-full-tokens-ratio` (0.8).
    pub swa_full_tokens_ratio: f64,
    /// `--mamba-full-memory-ratio` (0.9).
    pub mamba_full_memory_ratio: f64,
    /// `--max-running-requests` (across DP workers).
    pub max_running_requests: Option<u64>,
    /// `--max-total-tokens`.
    pub max_total_tokens: Option<u64>,
}

impl Default for SglangSettings {
    fn default() -> SglangSettings {
        SglangSettings {
            tp: 1,
            dp: 1,
            kv_cache_dtype: SglangKvDtype::Auto,
            page_size: 1,
            swa_full_tokens_ratio: 0.8,
            mamba_full_memory_ratio: 0.9,
            max_running_requests: None,
            max_total_tokens: None,
        }
    }
}

impl SglangSettings {
    /// Attention tensor-parallel ranks per DP worker (`tp / dp`); the
    /// [`Estimate`] given to [`sglang_pools`] must be made for this size.
    pub fn attn_tp(&self) -> Result<u64, KvError> {
        if self.tp == 0 || self.dp == 0 || !self.tp.is_multiple_of(self.dp) {
            return Err(refused(format!(
                "--tp-size {} must be a positive multiple of --dp-size {}",
                self.tp, self.dp
            )));
        }
        Ok(self.tp / self.dp)
    }
}

/// One K/V pool: its tokens and its bytes as SGLang's buffers hold them
/// (`tokens + page_size` rows, the padding page included).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SglangKvPool {
    /// `#tokens`.
    pub tokens: u64,
    /// K bytes (the latent's, for MLA).
    pub k_bytes: u64,
    /// V bytes (0 for MLA: one latent).
    pub v_bytes: u64,
}

/// The Mamba / Gated DeltaNet state pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SglangMambaPool {
    /// `max_mamba_cache_size`: whole request slots (one more is allocated as padding).
    pub slots: u64,
    /// One slot's bytes across the state layers (conv + SSM).
    pub bytes_per_slot: u64,
    /// The conv state's bytes, padding slot included.
    pub conv_bytes: u64,
    /// The SSM state's bytes, padding slot included.
    pub ssm_bytes: u64,
    /// The slots each running request takes (`mamba_ratio`: 3, or 5 with
    /// the extra buffer).
    pub slots_per_request: u64,
}

/// What SGLang 0.5.23 allocates from `kv_cache_memory_bytes`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct SglangPools {
    /// [`SGLANG_ENGINE`].
    pub engine: &'static str,
    /// The memory given: what SGLang has left for its pools after the weights.
    pub kv_cache_memory_bytes: u64,
    /// What a multimodal model reserves out of it before the pools are
    /// sized (0 for a text model).
    pub mm_reservation_bytes: u64,
    /// Attention TP ranks per worker.
    pub attn_tp: u64,
    /// DP-attention workers, each with these pools.
    pub attn_dp: u64,
    /// The KV dtype as torch names it.
    pub dtype: &'static str,
    /// The page SGLang runs: `--page-size`, or the one its backend sets (64
    /// for a DSA model, and for one it serves on TRT-LLM MHA where that does
    /// not run the page asked).
    pub page_size: u64,
    /// Whether the KV pool holds an MLA latent (one `KV size`).
    pub mla: bool,
    /// Bytes per token of the full pool (and of the SWA pool at its ratio).
    pub cell_bytes: f64,
    /// The full-attention pool (every attention layer without an SWA pool).
    pub full: SglangKvPool,
    /// The sliding-window pool, for allow-listed architectures.
    pub swa: Option<SglangKvPool>,
    /// The state pool of a Mamba / Gated DeltaNet hybrid.
    pub mamba: Option<SglangMambaPool>,
    /// `max_running_requests` per worker.
    pub max_running_requests: u64,
    /// Where a Mamba pool capped `max_running_requests`, the cap.
    pub capped_by_mamba: Option<u64>,
    /// Where `--max-total-tokens` cut the SWA pools, their full and SWA
    /// tokens before it (SGLang logs both solutions).
    pub swa_before_cap: Option<(u64, u64)>,
}

/// Attention geometry in elements per token per layer, with its layers.
struct AttentionGroup {
    layers: u64,
    kv_heads: u64,
    k_dim: u64,
    v_dim: u64,
}

impl AttentionGroup {
    /// `max(1, kv_heads // attn_tp)` heads of `k_dim` (K) and `v_dim` (V)
    /// elements, per layer (`ModelConfig.get_num_kv_heads`).
    fn per_layer(&self, attn_tp: u64, element: u64) -> Result<(u64, u64), KvError> {
        let heads = (self.kv_heads / attn_tp).max(1);
        let k = mul(&[heads, self.k_dim, element], "K bytes per token")?;
        let v = mul(&[heads, self.v_dim, element], "V bytes per token")?;
        Ok((k, v))
    }
}

/// SGLang 0.5.23's pools for the model `estimate` describes (made for
/// `settings.attn_tp()` ranks) given `kv_cache_memory_bytes` per GPU, the
/// memory SGLang has left for its pools after the weights (before its Mamba
/// split). `config` is read only for what SGLang keys its rules on:
/// `architectures`, the dtype and `mamba_ssm_dtype`.
pub fn sglang_pools(
    config: &Value,
    estimate: &Estimate,
    settings: &SglangSettings,
    kv_cache_memory_bytes: u64,
) -> Result<SglangPools, KvError> {
    let indexer = super::indexer::indexer_bytes(&estimate.specs)?;
    if indexer.is_some() {
        check_dsa(settings)?;
    }
    let attn_tp = settings.attn_tp()?;
    if estimate.tensor_parallel != attn_tp {
        return Err(refused(format!(
            "the estimate is for tensor parallel {}, SGLang's attention runs on {attn_tp} \
             rank(s) (tp {} / dp {})",
            estimate.tensor_parallel, settings.tp, settings.dp
        )));
    }
    if settings.page_size == 0 {
        return Err(refused("--page-size 0; it must be positive".to_owned()));
    }
    for (name, ratio) in [
        ("--swa-full-tokens-ratio", settings.swa_full_tokens_ratio),
        (
            "--mamba-full-memory-ratio",
            settings.mamba_full_memory_ratio,
        ),
    ] {
        if !(ratio.is_finite() && ratio > 0.0) {
            return Err(refused(format!("{name} {ratio}; it must be positive")));
        }
    }
    let architectures = architectures(config);
    if let Some(arch) = architectures
        .iter()
        .find(|a| UNSUPPORTED_ARCHITECTURES.contains(a))
    {
        return Err(refused(format!(
            "{arch} has no SGlang implementation and the Transformers implementation is not \
             compatible with SGLang."
        )));
    }
    minimax_sparse(config, &architectures)?;
    let hybrid_swa = is_hybrid_swa(config, &architectures);
    // A DSA model's `auto` cache is bfloat16 on Hopper whatever the model's
    // dtype (arg_groups/overrides.py `_dsa_kv_cache_dtype_default`).
    let (dtype, element) = if indexer.is_some() {
        ("torch.bfloat16", 2)
    } else {
        kv_dtype(config, settings.kv_cache_dtype)
    };

    let mut full = Vec::new();
    let mut sliding = Vec::new();
    let mut latent = None;
    let mut state = Vec::new();
    let mut conv_state = false;
    for spec in &estimate.specs {
        let kind = spec.layer_group.as_ref().map(|g| g.kind);
        // Inkling's conv state: refused below, once SGLang's own refusal of
        // a config with no local layer has had its turn.
        if spec.name.ends_with("conv_state") {
            conv_state = true;
            continue;
        }
        match &spec.layout {
            Layout::Attention { geometry, .. } => {
                let group = AttentionGroup {
                    layers: geometry.layers,
                    kv_heads: geometry.kv_heads,
                    k_dim: geometry.head_dim,
                    v_dim: geometry.value_head_dim(),
                };
                // Llama 4's chunked layers are its SWA pool's where the
                // architecture is allow-listed (configs/model_config.py:2705,
                // `get_hybrid_layer_ids`: layers with (i + 1) % 4 != 0).
                // UnlimitedOCR's every layer is SGLang's SWA layer
                // (configs/model_config.py:2798, `get_hybrid_layer_ids`).
                let is_sliding = matches!(
                    kind,
                    Some(LayerKind::SlidingAttention | LayerKind::ChunkedAttention)
                ) || (kind.is_none() && spec.name.starts_with("sliding"))
                    || architectures.contains(&"UnlimitedOCRForCausalLM");
                if is_sliding && hybrid_swa {
                    sliding.push(group);
                } else {
                    full.push(group);
                }
            }
            // Counted below, once the latent's cell is known.
            Layout::Latent { .. } if spec.name == super::indexer::INDEXER_KEYS => {}
            // SGLang caches an MLA latent only for the architectures of its
            // list; any other keeps K and V heads.
            Layout::Latent { latent: l, .. } if !sglang_mla(&architectures, config) => {
                let group = latent_as_heads(config, l.layers)?;
                if hybrid_swa && architectures.contains(&"UnlimitedOCRForCausalLM") {
                    sliding.push(group);
                } else {
                    full.push(group);
                }
            }
            Layout::Latent { latent: l, .. } => {
                let width = l
                    .kv_lora_rank
                    .checked_add(l.rope_dim)
                    .ok_or_else(|| overflow("MLA latent width"))?;
                latent = Some((l.layers, width));
            }
            // Checked against vLLM's objects only: SGLang's classes could not
            // be built from these configs here.
            Layout::Recurrent(_) if spec.name == "kda" => {
                return Err(refused(
                    "Kimi Delta Attention (KDA) state (Kimi K3, BailingMoeV3): kv has not \
                     matched SGLang's pools for it"
                        .to_owned(),
                ))
            }
            Layout::Recurrent(s) => state.push(s.clone()),
            // A config's estimate declares no tensors; SGLang's pools hold none.
            Layout::Tensors(_) => {}
            other => {
                return Err(refused(format!(
                    "kv's `{}` layout is not one SGLang's pools hold",
                    other.kind()
                )))
            }
        }
    }

    if let Some(groups) = chatglm_kv_heads(config) {
        for group in &mut full {
            group.kv_heads = groups;
        }
    }

    // Gemma-3n's KV-shared layers read earlier layers' caches, so kv's
    // detection (vLLM's) gives them none; SGLang's pool still has a slot per
    // layer of `num_hidden_layers` (model_runner_components/layer_setup.py:154,
    // `num_effective_layers`; models/gemma3n_causal.py:374 only reads another
    // layer's). They join the full pool at the other layers' shape.
    let shared = kv_shared_layers(config);
    if shared > 0 {
        let mut shapes = full
            .iter()
            .chain(&sliding)
            .map(|g| (g.kv_heads, g.k_dim, g.v_dim));
        match shapes.next() {
            Some(shape) if sliding.is_empty() && shapes.all(|s| s == shape) => {
                full.push(AttentionGroup {
                    layers: shared,
                    kv_heads: shape.0,
                    k_dim: shape.1,
                    v_dim: shape.2,
                })
            }
            _ => {
                return Err(KvError::Config {
                    what: POOLS,
                    problem: "KV-shared layers beside a sliding-window pool or attention \
                              layers of different shapes are not in kv's SGLang profile"
                        .to_owned(),
                })
            }
        }
    }

    if latent.is_none()
        && architectures
            .iter()
            .any(|a| MLA_ARCHITECTURES_READ_AS_HEADS.contains(a))
    {
        let layers = full
            .drain(..)
            .chain(sliding.drain(..))
            .try_fold(0u64, |sum, g| sum.checked_add(g.layers))
            .ok_or_else(|| overflow("MLA layers"))?;
        let width = ["kv_lora_rank", "qk_rope_head_dim"]
            .iter()
            .map(|key| {
                config.get(key).and_then(Value::as_u64).ok_or_else(|| {
                    refused(format!(
                        "SGLang caches an MLA latent here and `{key}` is not set"
                    ))
                })
            })
            .try_fold(0u64, |sum, width| {
                width.and_then(|w| {
                    sum.checked_add(w)
                        .ok_or_else(|| overflow("MLA latent width"))
                })
            })?;
        latent = Some((layers, width));
    }

    if architectures.contains(&"WhisperForConditionalGeneration") {
        whisper_layers(config, &mut full)?;
    }

    let repeat = attention_layer_repeats(&architectures, config)?;
    if repeat > 1 {
        if !sliding.is_empty() || !state.is_empty() {
            return Err(KvError::Config {
                what: POOLS,
                problem: "repeated attention layers beside sliding layers or a Mamba state \
                          are not in kv's SGLang profile"
                    .to_owned(),
            });
        }
        for group in &mut full {
            group.layers = mul(&[group.layers, repeat], "attention layers")?;
        }
        if let Some((layers, _)) = &mut latent {
            *layers = mul(&[*layers, repeat], "attention layers")?;
        }
    }

    // An SWA model with no sliding layer is refused by SGLang's SWA
    // configurator (model_executor/pool_configurator.py:668).
    if hybrid_swa && sliding.is_empty() && (!full.is_empty() || latent.is_some()) {
        return Err(refused(
            "AssertionError: Hybrid SWA model must have at least one SWA layer (the \
             architecture is on SGLang's hybrid-SWA list and no layer of the config slides)"
                .to_owned(),
        ));
    }

    if conv_state {
        return Err(KvError::Config {
            what: POOLS,
            problem: "Inkling's short-convolution state, which SGLang 0.5.23 keeps in a Mamba \
                      pool beside its SWA pools (layers/attention/linear/\
                      inkling_sconv_backend.py), is not in kv's SGLang profile"
                .to_owned(),
        });
    }

    // SGLang sizes these with other configurators than the ones kv follows.
    if !sliding.is_empty() {
        let other = if latent.is_some() {
            Some("an MLA latent beside sliding layers")
        } else if !state.is_empty() {
            Some("a Mamba state beside sliding layers")
        } else {
            None
        };
        if let Some(other) = other {
            return Err(KvError::Config {
                what: POOLS,
                problem: format!("{other} is not in kv's SGLang profile"),
            });
        }
    }

    // Bytes per token per pool, K and V apart.
    let (mut full_k, mut full_v) = (0u64, 0u64);
    let mut full_layers_bytes = Vec::new();
    for group in &full {
        let (k, v) = group.per_layer(attn_tp, element)?;
        full_k = add(full_k, mul(&[k, group.layers], "K bytes per token")?)?;
        full_v = add(full_v, mul(&[v, group.layers], "V bytes per token")?)?;
        full_layers_bytes.push((group.layers, k, v));
    }
    if let Some((layers, width)) = latent {
        full_k = add(
            full_k,
            mul(&[width, layers, element], "MLA bytes per token")?,
        )?;
    }
    // A DSA model's indexer keys live beside the latent, token for token
    // (the NSA token pool's `index_k` buffers).
    if let Some(bytes) = indexer {
        full_k = add(full_k, bytes)?;
    }
    let (mut swa_k, mut swa_v) = (0u64, 0u64);
    for group in &sliding {
        let (k, v) = group.per_layer(attn_tp, element)?;
        swa_k = add(swa_k, mul(&[k, group.layers], "SWA K bytes per token")?)?;
        swa_v = add(swa_v, mul(&[v, group.layers], "SWA V bytes per token")?)?;
    }
    let full_cell = add(full_k, full_v)?;
    let swa_cell = add(swa_k, swa_v)?;

    // A multimodal model's reservation comes off first, then the state pool
    // (`_profile_available_bytes`, mem_cache/kv_cache_configurator.py:3034-3040:
    // `rest = available_gb - reservation_gb`, exact in a double, as 100 MiB
    // is 0.09765625 GB; nothing left is SGLang's ValueError).
    let mm_reservation_bytes = if is_multimodal(config) {
        MM_RESERVATION_BYTES
    } else {
        0
    };
    let rest_bytes = match kv_cache_memory_bytes.checked_sub(mm_reservation_bytes) {
        Some(rest) if rest > 0 => rest,
        _ => {
            return Err(refused(format!(
                "ValueError: Loaded weights leave no GPU memory for the KV cache: the \
                 {kv_cache_memory_bytes} B left are within the multimodal reservation of \
                 {mm_reservation_bytes} B (SGLANG_VLM_CACHE_SIZE_MB 100)"
            )))
        }
    };
    // The state pool is split off next (`_handle_max_mamba_cache`).
    let mut available = rest_bytes;
    let mut mamba = None;
    if !state.is_empty() {
        let ssm_element = mamba_ssm_bytes(config);
        let (mut conv, mut ssm) = (0u64, 0u64);
        for s in &state {
            // vLLM's page padding is vLLM's; SGLang keeps the conv and SSM tensors.
            for part in s.parts.iter().filter(|p| matches!(p.name, "conv" | "ssm")) {
                let mut shape = part.shape;
                if let Some(dim) = part.split {
                    let whole = shape[dim];
                    if !whole.is_multiple_of(attn_tp) {
                        return Err(refused(format!(
                            "the {} state's {whole} heads or channels do not divide over \
                             {attn_tp} attention rank(s) (SGLang's divide() asserts)",
                            part.name
                        )));
                    }
                    shape[dim] = whole / attn_tp;
                }
                let is_conv = part.name == "conv";
                let bytes = mul(
                    &[
                        shape[0],
                        shape[1],
                        shape[2],
                        if is_conv { 2 } else { ssm_element },
                        s.layers,
                    ],
                    "state bytes per slot",
                )?;
                if is_conv {
                    conv = add(conv, bytes)?;
                } else {
                    ssm = add(ssm, bytes)?;
                }
            }
        }
        let per_slot = add(conv, ssm)?;
        let (slots, left) = mamba_split(rest_bytes, per_slot, settings.mamba_full_memory_ratio)?;
        let padded = slots
            .checked_add(1)
            .ok_or_else(|| overflow("state slots"))?;
        mamba = Some(SglangMambaPool {
            slots_per_request: mamba_slots_per_request(config),
            slots,
            bytes_per_slot: per_slot,
            conv_bytes: mul(&[conv, padded], "conv state bytes")?,
            ssm_bytes: mul(&[ssm, padded], "SSM state bytes")?,
        });
        available = left;
    }
    // A model of Mamba layers alone: SGLang's KV pool has no layer, a cell
    // of 0 bytes, and `max_total_tokens` or the context length for its
    // tokens (model_executor/pool_configurator.py:246-250, 637-647); what
    // the state pool leaves goes unused.
    // Checked for Mamba-1 (configs/mamba.py) against SGLang's own
    // configurator; another state-only model (Mamba2's own config class) is
    // not sized here.
    let state_only = full_cell == 0 && swa_cell == 0 && mamba.is_some() && is_mamba1(config);
    if full_cell == 0 && swa_cell == 0 && !state_only {
        return Err(refused(
            "the model holds no attention KV; kv sizes SGLang's pools for such a model only for \
             Mamba-1 (MambaForCausalLM, FalconMambaForCausalLM)"
                .to_owned(),
        ));
    }

    let page = if indexer.is_some() {
        DSA_PAGE
    } else {
        trtllm_mha_page(&architectures, settings.page_size)
    };
    let mut swa_before_cap = None;
    // Every attention layer sliding: SGLang's all-SWA pool, no full pool and
    // no ratio, its tokens `max_total_num_tokens` (pool_configurator.py:786,
    // 864-878).
    let all_swa = !sliding.is_empty() && full_cell == 0;
    let (cell_bytes, full_tokens, swa_tokens) = if state_only {
        let tokens = settings.max_total_tokens.unwrap_or(estimate.max_model_len);
        (0.0, tokens / page * page, None)
    } else if all_swa {
        let mut swa = available / swa_cell / page * page;
        if let Some(cap) = settings.max_total_tokens.filter(|cap| *cap < swa) {
            swa_before_cap = Some((0, swa));
            swa = cap / page * page;
        }
        (swa_cell as f64, 0, Some(swa))
    } else if sliding.is_empty() {
        let mut tokens = available / full_cell;
        if let Some(cap) = settings.max_total_tokens {
            tokens = tokens.min(cap);
        }
        (full_cell as f64, tokens / page * page, None)
    } else {
        let ratio = settings.swa_full_tokens_ratio;
        let cell = full_cell as f64 + ratio * swa_cell as f64;
        let tokens = float_to_u64(py_floordiv(available as f64, cell), "SWA pool tokens")?;
        let solve = |tokens: u64| -> Result<(u64, u64), KvError> {
            let full_tokens = tokens / page * page;
            let swa = float_to_u64(full_tokens as f64 * ratio, "SWA pool tokens")? / page * page;
            if let Some(window) = sliding_window(config) {
                if window.saturating_add(page) >= swa {
                    return Err(refused(format!(
                        "SWA pool ({swa} tokens) cannot hold even one request: the prefill \
                         admission floor is sliding_window_size ({window}) + page_size \
                         ({page}). Increase --swa-full-tokens-ratio or the total KV budget."
                    )));
                }
            }
            Ok((full_tokens, swa))
        };
        let (mut full_tokens, mut swa) = solve(tokens)?;
        // A smaller --max-total-tokens solves again, and SGLang logs both.
        if let Some(cap) = settings.max_total_tokens.filter(|cap| *cap < full_tokens) {
            swa_before_cap = Some((full_tokens, swa));
            (full_tokens, swa) = solve(cap)?;
        }
        (cell, full_tokens, Some(swa))
    };
    // What SGLang calls `max_total_num_tokens`: the full pool's, or the SWA
    // pool's where there is no full pool.
    let max_total = match swa_tokens {
        Some(swa) if all_swa => swa,
        _ => full_tokens,
    };
    if max_total == 0 {
        return Err(refused(format!(
            "{kv_cache_memory_bytes} B leave no whole token of {cell_bytes} B for the KV pool"
        )));
    }

    let rows = |tokens: u64| {
        tokens
            .checked_add(page)
            .ok_or_else(|| overflow("pool rows"))
    };
    let full_pool = SglangKvPool {
        tokens: full_tokens,
        k_bytes: mul(&[full_k, rows(full_tokens)?], "K pool bytes")?,
        v_bytes: mul(&[full_v, rows(full_tokens)?], "V pool bytes")?,
    };
    let swa_pool = match swa_tokens {
        Some(tokens) => Some(SglangKvPool {
            tokens,
            k_bytes: mul(&[swa_k, rows(tokens)?], "SWA K pool bytes")?,
            v_bytes: mul(&[swa_v, rows(tokens)?], "SWA V pool bytes")?,
        }),
        None => None,
    };

    // `resolve_max_num_reqs`.
    let context_len = estimate.max_model_len.max(1);
    let estimated = float_to_u64(
        max_total as f64 / context_len as f64 * 512.0,
        "estimated requests",
    )?
    .clamp(2048, 4096);
    let mut requests = match settings.max_running_requests {
        Some(asked) => (asked / settings.dp).max(1).min(max_total / 2),
        None => estimated.min(max_total / 2),
    };
    let mut capped_by_mamba = None;
    if let Some(pool) = &mamba {
        let ratio = pool.slots_per_request;
        let cap = pool.slots / ratio;
        if cap < requests {
            capped_by_mamba = Some(cap);
            requests = cap;
        }
        if requests == 0 {
            return Err(refused(format!(
                "Hybrid (mamba/linear-attention) state cache is too small to serve any \
                 requests. max_mamba_cache_size={}, mamba_ratio={ratio}, \
                 resulting max_num_reqs=0",
                pool.slots
            )));
        }
    }
    // TpModelWorker asserts both when it allocates the pools
    // (managers/tp_worker.py:420 and :425 in 0.5.23): a pool of 0 or 1
    // token leaves no request, and a context or pool of 1 token no request
    // length. (Its `max_req_input_len`, 5 tokens fewer, is not asserted: a
    // smaller pool starts, with a warning, and refuses long requests.)
    if requests == 0 {
        return Err(refused(format!(
            "AssertionError: max_running_request is zero (the pool of {max_total} \
             token(s) per worker leaves max_total_num_tokens // 2 = 0 requests); give \
             --max-total-tokens of at least 2"
        )));
    }
    let max_req_len = context_len.min(max_total).saturating_sub(1);
    if max_req_len == 0 {
        return Err(refused(format!(
            "AssertionError: Memory pool size is too small (max_req_len = min(context_len {} \
             - 1, max_total_num_tokens {max_total} - 1) = 0)",
            estimate.max_model_len
        )));
    }

    Ok(SglangPools {
        engine: SGLANG_ENGINE,
        kv_cache_memory_bytes,
        mm_reservation_bytes,
        attn_tp,
        attn_dp: settings.dp,
        dtype,
        page_size: page,
        mla: latent.is_some(),
        cell_bytes,
        full: full_pool,
        swa: swa_pool,
        mamba,
        max_running_requests: requests,
        capped_by_mamba,
        swa_before_cap,
    })
}

impl SglangPools {
    /// The lines SGLang 0.5.23 logs as it sizes and allocates these pools,
    /// character for character ("GB" is 2^30 bytes).
    pub fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if self.mm_reservation_bytes > 0 {
            lines.push(format!(
                "Reserving {} GB of the KV budget for post-sizing multimodal allocations \
                 (feature-transport pools + embedding cache).",
                gib(self.mm_reservation_bytes)
            ));
        }
        if let (Some(pool), Some(cap)) = (&self.mamba, self.capped_by_mamba) {
            lines.push(format!(
                "max_running_requests is capped to {cap} by the mamba state cache \
                 (max_mamba_cache_size={}, {} state slots per request). \
                 To raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, \
                 or halve the state size with --mamba-ssm-dtype bfloat16.",
                pool.slots, pool.slots_per_request
            ));
        }
        if let Some(pool) = &self.mamba {
            lines.push(format!(
                "Mamba Cache is allocated. max_mamba_cache_size: {}, conv_state size: {}GB, \
                 ssm_state size: {}GB ",
                pool.slots,
                gib(pool.conv_bytes),
                gib(pool.ssm_bytes)
            ));
        }
        let kv_line = |label: &str, pool: &SglangKvPool| {
            if self.mla {
                format!(
                    "{label}KV Cache is allocated. dtype: {}, #tokens: {}, KV size: {} GB",
                    self.dtype,
                    pool.tokens,
                    gib(pool.k_bytes)
                )
            } else {
                format!(
                    "{label}KV Cache is allocated. dtype: {}, #tokens: {}, K size: {} GB, \
                     V size: {} GB",
                    self.dtype,
                    pool.tokens,
                    gib(pool.k_bytes),
                    gib(pool.v_bytes)
                )
            }
        };
        match &self.swa {
            None => lines.push(kv_line("", &self.full)),
            Some(swa) => {
                let all_swa = self.full.tokens == 0;
                let solved = |full: u64, swa: u64| {
                    if all_swa {
                        format!("Use sliding window memory pool (all SWA). swa_layer_tokens={swa}")
                    } else {
                        format!(
                            "Use sliding window memory pool. full_layer_tokens={full}, \
                             swa_layer_tokens={swa}"
                        )
                    }
                };
                if let Some((full, swa)) = self.swa_before_cap {
                    lines.push(solved(full, swa));
                }
                lines.push(solved(self.full.tokens, swa.tokens));
                lines.push(kv_line("Full ", &self.full));
                lines.push(kv_line("SWA ", swa));
                let all = [
                    self.full.k_bytes,
                    self.full.v_bytes,
                    swa.k_bytes,
                    swa.v_bytes,
                ]
                .iter()
                .fold(0u128, |sum, b| sum + u128::from(*b));
                lines.push(format!(
                    "SWAKVPool mem usage: {} GB, swa size: {}, full size: {}",
                    gib_wide(all),
                    swa.tokens,
                    self.full.tokens
                ));
            }
        }
        lines
    }
}

/// `_handle_max_mamba_cache` with SGLang's float arithmetic, in GB as it
/// keeps it: the state budget `rest x r / (1 + r)`, its whole slots less the
/// padding slot, and the bytes left for the KV pool (`int(rest x 2^30)`).
fn mamba_split(rest_bytes: u64, per_slot: u64, ratio: f64) -> Result<(u64, u64), KvError> {
    if per_slot == 0 {
        return Err(refused("the state holds no bytes per slot".to_owned()));
    }
    let gb = GIB as f64;
    let rest = rest_bytes as f64 / gb;
    let budget_bytes = rest * ratio / (1.0 + ratio) * gb;
    let per = per_slot as f64;
    let slots = py_floordiv(budget_bytes - per, per);
    // Also catches NaN: no whole slot unless it is at least 1.
    if slots.is_nan() || slots < 1.0 {
        return Err(refused(format!(
            "Not enough GPU memory for hybrid (mamba/linear-attention) state cache: \
             {rest_bytes} B leave no whole state slot of {per_slot} B"
        )));
    }
    let slots = float_to_u64(slots, "state slots")?;
    let padded = slots
        .checked_add(1)
        .ok_or_else(|| overflow("state slots"))?;
    let state = u128::from(padded) * u128::from(per_slot);
    let left = rest - (state as f64) / gb;
    let left = float_to_u64(left * gb, "KV bytes after the state pool")?;
    Ok((slots, left))
}

/// Python's float `//` (CPython's `float_floor_div`) for the positive values
/// here: `(a - fmod(a, b)) / b`, snapped to the nearest integer where rounding
/// left it just below one.
fn py_floordiv(a: f64, b: f64) -> f64 {
    let div = (a - a % b) / b;
    let floor = div.floor();
    if div - floor > 0.5 {
        floor + 1.0
    } else {
        floor
    }
}

/// Python's `int(x)` for a float the arithmetic here keeps non-negative;
/// one past u64 (or not finite) is an error.
fn float_to_u64(x: f64, what: &str) -> Result<u64, KvError> {
    if (0.0..18_446_744_073_709_551_616.0).contains(&x) {
        Ok(x as u64)
    } else {
        Err(overflow(what))
    }
}

/// `f"{bytes / GB:.2f}"`: two decimals, ties to even as Python rounds the
/// exact quotient (`bytes / 2^30` is exact in a double below 2^53).
fn gib(bytes: u64) -> String {
    gib_wide(u128::from(bytes))
}

fn gib_wide(bytes: u128) -> String {
    let scaled = bytes * 100;
    let (whole, rem) = (scaled >> 30, scaled & u128::from(GIB - 1));
    let half = u128::from(GIB / 2);
    let hundredths = if rem > half || (rem == half && whole % 2 == 1) {
        whole + 1
    } else {
        whole
    };
    format!("{}.{:02}", hundredths / 100, hundredths % 100)
}

/// The `model_type`s whose config SGLang reads with a class of its own that
/// sets a dtype where the file writes none (srt/configs/longcat_flash.py:
/// `torch_dtype="bfloat16"`).
const SGLANG_CONFIG_DTYPES: &[(&str, &str)] = &[("longcat_flash", "bfloat16")];

/// The torch name and byte size of SGLang's KV dtype: the model dtype by
/// `_get_and_verify_dtype` (a float32 or unset checkpoint is served in
/// float16, Gemma in bfloat16; SGLang's own config classes may set one), or
/// the fp8 format asked for.
fn kv_dtype(config: &Value, asked: SglangKvDtype) -> (&'static str, u64) {
    match asked {
        SglangKvDtype::Fp8E4m3 => ("torch.float8_e4m3fn", 1),
        SglangKvDtype::Fp8E5m2 => ("torch.float8_e5m2", 1),
        SglangKvDtype::Auto => {
            let model_type = config.get("model_type").and_then(Value::as_str);
            let written = ["dtype", "torch_dtype"]
                .iter()
                .find_map(|k| config.get(k).and_then(Value::as_str))
                .or_else(|| {
                    SGLANG_CONFIG_DTYPES
                        .iter()
                        .find(|(family, _)| Some(*family) == model_type)
                        .map(|(_, dtype)| *dtype)
                });
            match written {
                Some("bfloat16") => ("torch.bfloat16", 2),
                Some("float16" | "half") => ("torch.float16", 2),
                _ => {
                    let gemma = config
                        .get("model_type")
                        .and_then(Value::as_str)
                        .is_some_and(|t| t.starts_with("gemma"));
                    if gemma {
                        ("torch.bfloat16", 2)
                    } else {
                        ("torch.float16", 2)
                    }
                }
            }
        }
    }
}

/// Whether SGLang serves the model as Mamba-1 (configs/mamba.py:
/// `MambaConfig`, `FalconMambaConfig`).
fn is_mamba1(config: &Value) -> bool {
    architectures(config)
        .iter()
        .any(|a| matches!(*a, "MambaForCausalLM" | "FalconMambaForCausalLM"))
}

/// The SSM state's bytes per element: `mamba_ssm_dtype` where the config
/// (or its `text_config`) sets one SGLang knows, else float32.
fn mamba_ssm_bytes(config: &Value) -> u64 {
    // Mamba-1's cache params are built with no config (configs/mamba.py:27,
    // `Mamba2CacheParams` without `dtype=`): float32 whatever it writes.
    if is_mamba1(config) {
        return 4;
    }
    let written = config
        .get("text_config")
        .and_then(|t| t.get("mamba_ssm_dtype"))
        .or_else(|| config.get("mamba_ssm_dtype"))
        .and_then(Value::as_str);
    match written {
        Some("bfloat16" | "float16") => 2,
        _ => 4,
    }
}

/// The page a DSA model runs on: SGLang sets `page_size` to 64 x
/// `index_kpool` for it on CUDA (arg_groups/model_overrides/deepseek_v2.py:171;
/// kv sizes `index_kpool` 1 only).
const DSA_PAGE: u64 = 64;

/// The architectures SGLang serves on TRT-LLM MHA by default on Hopper
/// (arg_groups/model_overrides/beam.py: "Use trtllm_mha as default attention
/// backend for Beam").
const TRTLLM_MHA_ARCHITECTURES: &[&str] = &["BeamForCausalLM"];
/// The pages TRT-LLM MHA runs; another is changed to 64 (overrides.py:
/// "TensorRT-LLM MHA only supports page_size of 16, 32, 64 or 128, changing
/// page_size from N to 64").
const TRTLLM_MHA_PAGES: [u64; 4] = [16, 32, 64, 128];

/// The page SGLang runs `page_size` as: 64 for a model it serves on TRT-LLM
/// MHA where that backend does not run the page asked (SGLang's default 1
/// among them), else the page asked.
fn trtllm_mha_page(architectures: &[&str], page_size: u64) -> u64 {
    let on_trtllm = architectures
        .first()
        .is_some_and(|arch| TRTLLM_MHA_ARCHITECTURES.contains(arch));
    if on_trtllm && !TRTLLM_MHA_PAGES.contains(&page_size) {
        64
    } else {
        page_size
    }
}

/// What kv has not checked of a DSA model's SGLang pools: an fp8 cache, a
/// page other than SGLang's 64 given.
fn check_dsa(settings: &SglangSettings) -> Result<(), KvError> {
    if settings.kv_cache_dtype != SglangKvDtype::Auto {
        return Err(KvError::Config {
            what: POOLS,
            problem: "an fp8 KV cache on a sparse-attention (DSA) model: SGLang stores its \
                      latent and indexer keys in a layout of their own, which kv has not \
                      checked; use auto"
                .to_owned(),
        });
    }
    if !matches!(settings.page_size, 1 | DSA_PAGE) {
        return Err(KvError::Config {
            what: POOLS,
            problem: format!(
                "--page-size {} on a sparse-attention (DSA) model: SGLang sets its page to \
                 {DSA_PAGE} for one, and kv has not checked another",
                settings.page_size
            ),
        });
    }
    Ok(())
}

/// Whisper's full pool as SGLang sizes it: a layer for each encoder layer,
/// each decoder self-attention and each cross-attention
/// (configs/model_config.py:1591, `encoder_layers + 2 * decoder_layers`,
/// `decoder_layers` defaulting to `num_hidden_layers`), all of the decoder's
/// attention shape, though only the decoder's self-attention writes there.
fn whisper_layers(config: &Value, full: &mut Vec<AttentionGroup>) -> Result<(), KvError> {
    let shape = |g: &AttentionGroup| (g.kv_heads, g.k_dim, g.v_dim);
    let Some(first) = full.first().map(shape) else {
        return Ok(());
    };
    if full.iter().any(|g| shape(g) != first) {
        return Err(KvError::Config {
            what: POOLS,
            problem: "Whisper with attention layers of different shapes is not in kv's SGLang \
                      profile"
                .to_owned(),
        });
    }
    let count = |key: &str| match config.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| KvError::Config {
            what: POOLS,
            problem: format!("`{key}` is not a layer count"),
        }),
    };
    let encoder = count("encoder_layers")?.unwrap_or(0);
    let decoder = match count("decoder_layers")? {
        Some(layers) => layers,
        None => count("num_hidden_layers")?.ok_or_else(|| KvError::Config {
            what: POOLS,
            problem: "Whisper's config sets neither `decoder_layers` nor `num_hidden_layers`"
                .to_owned(),
        })?,
    };
    let layers = add(encoder, mul(&[2, decoder], "Whisper's attention layers")?)?;
    *full = vec![AttentionGroup {
        layers,
        kv_heads: first.0,
        k_dim: first.1,
        v_dim: first.2,
    }];
    Ok(())
}

/// How many times SGLang's pool repeats each attention layer. Its
/// `ModelConfig.num_attention_layers` (configs/model_config.py:1581-1590) is
/// two a layer for LongCat-Flash (two attentions a layer), `loop_num` a layer
/// for IQuest's loop coder and `num_loops` for Nanbeige (read off the text
/// config, 1 where unset); the model runner then takes `max(layers,
/// num_attention_layers)` and multiplies it again by the top level's
/// `loop_num`, else `num_loops`, for any architecture
/// (model_runner_components/layer_setup.py:20, :157), so a looped model's
/// pool holds its layers `loops x loops` times, as SGLang's own configurator
/// sizes it.
fn attention_layer_repeats(architectures: &[&str], config: &Value) -> Result<u64, KvError> {
    let text = sglang_text_config(config);
    let count = |section: &Value, key: &str| -> Result<Option<u64>, KvError> {
        match section.get(key) {
            None => Ok(None),
            Some(value) => {
                value
                    .as_u64()
                    .filter(|n| *n > 0)
                    .map(Some)
                    .ok_or_else(|| KvError::Config {
                        what: POOLS,
                        problem: format!("`{key}` is {value}, not a positive count"),
                    })
            }
        }
    };
    let mut per_layer = 1;
    if architectures.contains(&"LongcatFlashForCausalLM") {
        per_layer = 2;
    }
    if architectures.contains(&"IQuestLoopCoderForCausalLM") {
        per_layer = count(text, "loop_num")?.unwrap_or(1);
    }
    if architectures.contains(&"NanbeigeForCausalLM") {
        per_layer = count(text, "num_loops")?.unwrap_or(1);
    }
    // `int(getattr(hf_config, "loop_num", getattr(hf_config, "num_loops", 1)) or 1)`:
    // a `loop_num` set to null counts as 1, whatever `num_loops` says.
    let key = if config.get("loop_num").is_some() {
        "loop_num"
    } else {
        "num_loops"
    };
    let loops = match config.get(key) {
        None | Some(Value::Null) => 1,
        Some(_) => count(config, key)?.unwrap_or(1),
    };
    per_layer
        .checked_mul(loops)
        .ok_or_else(|| overflow("looped attention layers"))
}

/// SGLang's `context_len` where it differs from the length kv derives
/// (vLLM's), with the reason, or `None` where SGLang takes kv's:
/// - `get_context_length` (utils/hf_transformers/common.py:677) takes the
///   first of `max_sequence_length`, `seq_length`, `max_seq_len`,
///   `model_max_length` and `max_position_embeddings`, else 2,048, times the
///   rope's `factor` unless the rope section holds
///   `original_max_position_embeddings` (transformers 5 writes one there for
///   YaRN and LongRoPE) or is Llama 3's. So a LongRoPE model is served at
///   its whole `max_position_embeddings` where vLLM takes the original
///   length, and a YaRN model at `max_position_embeddings` where vLLM takes
///   the original times the factor. Read on configs with no sub-config;
///   Whisper's config (no alias among those keys in transformers'
///   `WhisperConfig.attribute_map`) sets none, where kv, as vLLM, reads
///   `max_target_positions`;
/// - `_derive_context_length` (configs/model_config.py:1322) caps
///   EmbeddingGemma2Model at 8,192.
///
/// A length given on the command line replaces both.
///
/// ```
/// use kv_engines::estimate::sglang::context_len;
///
/// let embedding = serde_json::json!({"architectures": ["EmbeddingGemma2Model"]});
/// assert_eq!(context_len(&embedding, 2048), None);
/// assert_eq!(context_len(&embedding, 10_000).map(|c| c.0), Some(8192));
/// let whisper = serde_json::json!({"model_type": "whisper", "max_target_positions": 448});
/// assert_eq!(context_len(&whisper, 448).map(|c| c.0), Some(2048));
/// assert_eq!(context_len(&serde_json::json!({"architectures": ["LlamaForCausalLM"]}), 4096), None);
/// // YaRN x 4 over 32,768 original positions, 40,960 in all: vLLM derives
/// // 131,072, SGLang serves 40,960.
/// let yarn = serde_json::json!({
///     "max_position_embeddings": 40960,
///     "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
/// });
/// assert_eq!(context_len(&yarn, 131_072).map(|c| c.0), Some(40_960));
/// // Linear scaling x 2: both 8,192.
/// let linear = serde_json::json!({
///     "max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.0},
/// });
/// assert_eq!(context_len(&linear, 8192), None);
/// ```
pub fn context_len(config: &Value, derived: u64) -> Option<(u64, String)> {
    const KEYS: [&str; 5] = [
        "max_sequence_length",
        "seq_length",
        "max_seq_len",
        "model_max_length",
        "max_position_embeddings",
    ];
    let whisper = config.get("model_type").and_then(Value::as_str) == Some("whisper");
    let set = |key: &&str| config.get(*key).is_some_and(|v| !v.is_null());
    let sub_config = [
        "text_config",
        "llm_config",
        "language_config",
        "thinker_config",
    ]
    .iter()
    .any(set);
    let length = if whisper && !KEYS.iter().any(set) {
        (
            2048,
            "SGLang's get_context_length reads none of `max_sequence_length`, `seq_length`, \
             `max_seq_len`, `model_max_length`, `max_position_embeddings` here and takes 2048"
                .to_owned(),
        )
    } else if architectures(config).first() == Some(&"EmbeddingGemma2Model") {
        (
            derived.min(8192),
            "SGLang caps this model's context_len at 8192 (configs/model_config.py)".to_owned(),
        )
    } else if let (false, Some(key)) = (sub_config, KEYS.iter().find(|key| set(key))) {
        let value = config.get(*key).and_then(Value::as_u64)?;
        let factor = rope_length_factor(config);
        // int(factor x value): truncation, as Python's int() truncates.
        let scaled = factor * value as f64;
        // No length at all, or past u64 (a negative or absurd factor): kv's
        // own stands.
        if !(1.0..u64::MAX as f64).contains(&scaled) {
            return None;
        }
        let length = scaled as u64;
        let why = if factor == 1.0 {
            format!("SGLang's get_context_length takes `{key}` ({value})")
        } else {
            format!(
                "SGLang's get_context_length takes `{key}` ({value}) x the rope's factor {factor}"
            )
        };
        (length, why)
    } else {
        return None;
    };
    (length.0 != derived).then_some(length)
}

/// The model types whose transformers 5.19 config class (as SGLang 0.5.23
/// installs it) holds `rope_parameters` nested per layer type (each
/// default-built class whose `rope_parameters` values are all sections;
/// listed by instantiating every `CONFIG_MAPPING` class).
const PER_LAYER_TYPE_ROPE_MODEL_TYPES: &[&str] = &[
    "deepseek_v4",
    "diffusion_gemma",
    "diffusion_gemma_text",
    "embedding_gemma2",
    "embedding_gemma2_text",
    "gemma3",
    "gemma3_text",
    "gemma3n",
    "gemma3n_text",
    "gemma4",
    "gemma4_text",
    "gemma4_unified",
    "gemma4_unified_text",
    "laguna",
    "mellum",
    "mimo_v2_flash",
    "modernbert",
    "modernbert-decoder",
    "neomme",
    "olmo3",
    "shieldgemma2",
    "step3p5",
    "step3p7",
    "t5gemma2_decoder",
    "t5gemma2_encoder",
    "t5gemma2_text",
    "zaya",
];

/// The factor SGLang's `get_context_length` scales the length by: the rope
/// section's `factor`, 1 where the section holds
/// `original_max_position_embeddings` (transformers 5 writes one there for
/// YaRN and LongRoPE whatever the file says) or is Llama 3's.
fn rope_length_factor(config: &Value) -> f64 {
    let model_type = config.get("model_type").and_then(Value::as_str);
    if model_type.is_some_and(|t| PER_LAYER_TYPE_ROPE_MODEL_TYPES.contains(&t)) {
        // Their config classes nest the rope per layer type: no `factor`
        // at the top of `rope_scaling`.
        return 1.0;
    }
    let rope = ["rope_scaling", "rope_parameters"]
        .iter()
        .find_map(|key| config.get(*key).and_then(Value::as_object));
    let Some(rope) = rope else {
        return 1.0;
    };
    let kind = rope
        .get("rope_type")
        .or_else(|| rope.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if rope.contains_key("original_max_position_embeddings")
        || matches!(kind, "yarn" | "longrope" | "llama3")
    {
        return 1.0;
    }
    rope.get("factor").and_then(Value::as_f64).unwrap_or(1.0)
}

/// `ModelConfig.is_multimodal` (configs/model_config.py:690-826) with SGLang's
/// defaults: multimodal unless the first architecture is one SGLang turns
/// off (or a MiMo-V2 without both a vision and an audio config) or the config
/// says `language_model_only`; then an allow-listed architecture, a config
/// whose text model is a sub-config (`get_hf_text_config`,
/// utils/hf_transformers/common.py:547: `thinker_config`, `llm_config`,
/// `language_config` or `text_config`, except a `Llava*ForCausalLM`), or a
/// DeepSeek-V4.1 with vision layers. A sub-config a transformers class would
/// add by default, absent from the JSON, is not seen.
pub(crate) fn is_multimodal(config: &Value) -> bool {
    let architectures = architectures(config);
    let first = architectures.first().copied().unwrap_or("");
    let has = |key: &str| config.get(key).is_some_and(|v| !v.is_null());
    let disabled = MULTIMODAL_DISABLED_ARCHITECTURES.contains(&first)
        || (first == "MiMoV2ForCausalLM" && !(has("vision_config") && has("audio_config")));
    let lm_only = config
        .get("language_model_only")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if disabled || lm_only {
        return false;
    }
    let listed = architectures
        .iter()
        .any(|a| MULTIMODAL_ARCHITECTURES.contains(a));
    let llava_text = first.starts_with("Llava") && first.ends_with("ForCausalLM");
    let sub_config = !llava_text
        && [
            "thinker_config",
            "llm_config",
            "language_config",
            "text_config",
        ]
        .iter()
        .any(|k| has(k));
    let dsv41_vision = config.get("model_type").and_then(Value::as_str) == Some("deepseek_v41")
        && config
            .get("vision_n_layers")
            .and_then(Value::as_u64)
            .is_some_and(|n| n > 0);
    listed || sub_config || dsv41_vision
}

/// `is_hybrid_swa_model` (configs/model_config.py:2651-2697): an
/// allow-listed architecture (Beam only with a `sliding_attention` in its
/// `layer_types`, Laguna only with a `sliding_window`), or a config that says
/// `is_hybrid_swa`.
fn is_hybrid_swa(config: &Value, architectures: &[&str]) -> bool {
    let text = |key: &str| {
        config
            .get("text_config")
            .and_then(|t| t.get(key))
            .or_else(|| config.get(key))
    };
    if architectures
        .iter()
        .any(|a| HYBRID_SWA_ARCHITECTURES.contains(a))
    {
        if architectures.contains(&"BeamForCausalLM") {
            return text("layer_types")
                .and_then(Value::as_array)
                .is_some_and(|types| types.iter().any(|t| t == "sliding_attention"));
        }
        if architectures.contains(&"LagunaForCausalLM") {
            // Python truthiness of getattr(config, "sliding_window", 0).
            return text("sliding_window").is_some_and(|w| match w {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                Value::Array(a) => !a.is_empty(),
                Value::Object(o) => !o.is_empty(),
            });
        }
        return true;
    }
    text("is_hybrid_swa")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// ChatGLM's KV heads as SGLang's `get_total_num_kv_heads` reads them
/// (configs/model_config.py:1626): 1 with `multi_query`, else the first of
/// `n_head_kv`, `num_kv_heads`, `num_key_value_heads`,
/// `multi_query_group_num` and `num_attention_groups` that is set, whether
/// or not `multi_query_attention` is; vLLM's rule, which kv's detection
/// follows, counts the group number only with that flag (else every query
/// head). `None` for another model, or where no key is set (every query
/// head in both).
fn chatglm_kv_heads(config: &Value) -> Option<u64> {
    if config.get("model_type").and_then(Value::as_str) != Some("chatglm") {
        return None;
    }
    if config.get("multi_query").and_then(Value::as_bool) == Some(true) {
        return Some(1);
    }
    [
        "n_head_kv",
        "num_kv_heads",
        "num_key_value_heads",
        "multi_query_group_num",
        "num_attention_groups",
    ]
    .iter()
    .find_map(|key| config.get(key).and_then(Value::as_u64))
}

/// MiniMax M3 Sparse (configs/model_config.py:426, `is_minimax_sparse`, by
/// the first architecture): SGLang reads its `sparse_attention_config`
/// (`text_config`'s, else the top level's; none is its ValueError) and sizes
/// pools of its own for the sparse layers, which kv has not matched.
fn minimax_sparse(config: &Value, architectures: &[&str]) -> Result<(), KvError> {
    if !matches!(
        architectures.first(),
        Some(&("MiniMaxM3SparseForCausalLM" | "MiniMaxM3SparseForConditionalGeneration"))
    ) {
        return Ok(());
    }
    let section = config
        .get("text_config")
        .and_then(|text| text.get("sparse_attention_config"))
        .filter(|v| !v.is_null())
        .or_else(|| {
            config
                .get("sparse_attention_config")
                .filter(|v| !v.is_null())
        });
    match section {
        None => Err(refused(
            "ValueError: Could not find sparse config. Is it MiniMax M3 Sparse model? (no \
             `sparse_attention_config`, configs/model_config.py:456)"
                .to_owned(),
        )),
        Some(_) => Err(KvError::Config {
            what: POOLS,
            problem: "MiniMax M3 Sparse's sparse-attention pools (`sparse_attention_config`) \
                      are not in kv's SGLang profile"
                .to_owned(),
        }),
    }
}

/// The architectures SGLang 0.5.23 caches an MLA latent for
/// (configs/model_config.py:1366-1515, `ModelConfig._derive_model_shapes`);
/// Pixtral, DeepSeek-VL2 and the Bailing draft only on a condition, in
/// [`sglang_mla`].
const SGLANG_MLA_ARCHITECTURES: &[&str] = &[
    "DeepseekV2ForCausalLM",
    "DeepseekV32ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV3ForCausalLMNextN",
    "Glm4MoeLiteForCausalLM",
    "Glm4MoeLiteForCausalLMNextN",
    "GlmMoeDsaForCausalLM",
    "GlmMoeDsaForCausalLMNextN",
    "Glm5NextForConditionalGeneration",
    "Glm5NextForConditionalGenerationNextN",
    "LongcatFlashForCausalLM",
    "LongcatFlashForCausalLMNextN",
    "HYV4ForCausalLM",
    "HYV4ForCausalLMNextN",
    "DotsVLMForCausalLM",
    "Dots3NoteForCausalLM",
    "Dots3NoteForCausalLMNextN",
    "MistralLarge3ForCausalLM",
    "MistralLarge3ForCausalLMEagle",
    "KimiK25ForConditionalGeneration",
    "Eagle3DeepseekV2ForCausalLM",
    "GigaChat35ForCausalLM",
    "GigaChat35ForCausalLMNextN",
    "MiniCPM3ForCausalLM",
    "KimiVLForConditionalGeneration",
    "KimiLinearForCausalLM",
    "KimiK3LinearForCausalLM",
    "KimiK3ForConditionalGeneration",
    "BailingMoeV2_5ForCausalLM",
    "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration",
    "SarvamMLAForCausalLM",
];

/// Whether SGLang caches an MLA latent for this config: an architecture of
/// [`SGLANG_MLA_ARCHITECTURES`], Pixtral and the Bailing draft with a
/// `kv_lora_rank`, DeepSeek-VL2 unless its text model says `use_mla` false.
fn sglang_mla(architectures: &[&str], config: &Value) -> bool {
    let text = sglang_text_config(config);
    let key = |name: &str| text.get(name).filter(|v| !v.is_null());
    architectures.iter().any(|a| match *a {
        "PixtralForConditionalGeneration" | "BailingMoeForCausalLMNextN" => {
            key("kv_lora_rank").is_some()
        }
        "DeepseekVL2ForCausalLM" => key("use_mla").and_then(Value::as_bool) != Some(false),
        other => SGLANG_MLA_ARCHITECTURES.contains(&other),
    })
}

/// The text model's section as SGLang's `get_hf_text_config` picks it
/// (utils/hf_transformers/common.py:582): `thinker_config` (its
/// `text_config`), `llm_config`, `language_config`, `text_config`, else the
/// top level.
fn sglang_text_config(config: &Value) -> &Value {
    let section = |key: &str| config.get(key).filter(|v| v.is_object());
    if let Some(thinker) = section("thinker_config") {
        return thinker
            .get("text_config")
            .filter(|v| v.is_object())
            .unwrap_or(thinker);
    }
    ["llm_config", "language_config", "text_config"]
        .iter()
        .find_map(|key| section(key))
        .unwrap_or(config)
}

/// A latent kv's detection read, as the K and V heads SGLang keeps for an
/// architecture off its MLA list (`ModelConfig`: `head_dim`, else
/// `hidden_size // num_attention_heads`; `v_head_dim` where set and not 0,
/// else the head dim; `get_total_num_kv_heads`: `num_key_value_heads`, else
/// the attention heads).
fn latent_as_heads(config: &Value, layers: u64) -> Result<AttentionGroup, KvError> {
    let text = sglang_text_config(config);
    let count = |key: &str| text.get(key).and_then(Value::as_u64).filter(|n| *n > 0);
    let missing = |key: &str| {
        refused(format!(
            "SGLang caches K and V heads for this architecture (it is not on SGLang's MLA \
             list) and `{key}` is not a positive count"
        ))
    };
    let heads = count("num_attention_heads").ok_or_else(|| missing("num_attention_heads"))?;
    let k_dim = match count("head_dim") {
        Some(dim) => dim,
        None => count("hidden_size").ok_or_else(|| missing("hidden_size"))? / heads,
    };
    if k_dim == 0 {
        return Err(missing("head_dim"));
    }
    Ok(AttentionGroup {
        layers,
        kv_heads: count("num_key_value_heads").unwrap_or(heads),
        k_dim,
        v_dim: count("v_head_dim").unwrap_or(k_dim),
    })
}

/// `num_kv_shared_layers`, in `text_config` or at the top, as kv's
/// detection reads it (0 where unset).
fn kv_shared_layers(config: &Value) -> u64 {
    config
        .get("text_config")
        .and_then(|t| t.get("num_kv_shared_layers"))
        .or_else(|| config.get("num_kv_shared_layers"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// `architectures` as SGLang's config parser leaves them
/// (utils/hf_transformers/config.py:251-315, `_set_architectures`): a
/// `longcat_flash` model (or one listing `LongcatCausalLM`,
/// `LongcatFlashForCausalLM` or `LongcatFlashNgramForCausalLM` alone) is
/// `LongcatFlashForCausalLM`, a `multi_modality` one
/// `MultiModalityCausalLM`, whatever else the config lists.
fn architectures(config: &Value) -> Vec<&str> {
    let listed: Vec<&str> = config
        .get("architectures")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let longcat = matches!(
        listed.as_slice(),
        ["LongcatCausalLM" | "LongcatFlashForCausalLM" | "LongcatFlashNgramForCausalLM"]
    );
    match config.get("model_type").and_then(Value::as_str) {
        _ if longcat => vec!["LongcatFlashForCausalLM"],
        Some("longcat_flash") => vec!["LongcatFlashForCausalLM"],
        Some("multi_modality") => vec!["MultiModalityCausalLM"],
        _ => listed,
    }
}

fn sliding_window(config: &Value) -> Option<u64> {
    config
        .get("text_config")
        .and_then(|t| t.get("sliding_window"))
        .or_else(|| config.get("sliding_window"))
        .and_then(Value::as_u64)
}

fn mul(factors: &[u64], what: &'static str) -> Result<u64, KvError> {
    factors
        .iter()
        .try_fold(1u64, |product, f| product.checked_mul(*f))
        .ok_or_else(|| overflow(what))
}

fn add(a: u64, b: u64) -> Result<u64, KvError> {
    a.checked_add(b).ok_or_else(|| overflow("bytes per token"))
}

fn overflow(what: &str) -> KvError {
    KvError::Config {
        what: POOLS,
        problem: format!("{what} overflows u64"),
    }
}

fn refused(problem: String) -> KvError {
    KvError::Config {
        what: POOLS,
        problem: format!("SGLang would not start: {problem}"),
    }
}

#[cfg(test)]
mod tests {
    use super::{context_len, gib, py_floordiv};
    use serde_json::Value;

    #[test]
    fn context_len_scales_by_the_rope_factor_only_without_an_original_length() {
        let length = |config: Value, derived| context_len(&config, derived).map(|c| c.0);
        // Phi-3.5's LongRoPE: transformers 5 moves the top-level original
        // length into the rope section; SGLang serves all 131,072.
        let longrope = serde_json::json!({
            "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
            "rope_scaling": {"type": "longrope", "short_factor": [1.0], "long_factor": [1.0]},
        });
        assert_eq!(length(longrope, 4096), Some(131_072));
        // YaRN without an original length in the file: transformers 5 writes
        // one (the whole length); no factor.
        let yarn = serde_json::json!({
            "max_position_embeddings": 4096, "rope_scaling": {"type": "yarn", "factor": 4.0},
        });
        assert_eq!(length(yarn, 16_384), Some(4096));
        // Llama 3's rope: no factor.
        let llama3 = serde_json::json!({
            "max_position_embeddings": 131072,
            "rope_scaling": {"rope_type": "llama3", "factor": 8.0},
        });
        assert_eq!(length(llama3, 131_072), None);
        // Dynamic NTK x 2.5 in `rope_parameters`: 1,000 x 2.5, truncated.
        let dynamic = serde_json::json!({
            "max_position_embeddings": 1001,
            "rope_parameters": {"rope_type": "dynamic", "factor": 2.5},
        });
        assert_eq!(length(dynamic.clone(), 1001), Some(2502));
        let why = context_len(&dynamic, 1001).unwrap().1;
        assert_eq!(
            why,
            "SGLang's get_context_length takes `max_position_embeddings` (1001) x the rope's \
             factor 2.5"
        );
        // No factor: the key alone is said.
        let plain = serde_json::json!({"max_position_embeddings": 4096});
        assert_eq!(
            context_len(&plain, 2048).unwrap().1,
            "SGLang's get_context_length takes `max_position_embeddings` (4096)"
        );
        // A negative, an absurd or a zero length leaves kv's own.
        for (positions, factor) in [(1001, -2.0), (1001, 1e30), (0, 1.0)] {
            let odd = serde_json::json!({
                "max_position_embeddings": positions,
                "rope_scaling": {"rope_type": "dynamic", "factor": factor},
            });
            assert_eq!(length(odd, 1001), None);
        }
        // Gemma 3's config class nests the rope per layer type: the linear
        // factor 8 of its full layers does not scale SGLang's length.
        let gemma3 = serde_json::json!({
            "model_type": "gemma3_text", "max_position_embeddings": 131072,
            "rope_scaling": {"rope_type": "linear", "factor": 8.0},
        });
        assert_eq!(length(gemma3, 131_072), None);
        // The first key of SGLang's list wins over max_position_embeddings.
        let seq = serde_json::json!({"seq_length": 8192, "max_position_embeddings": 32768});
        assert_eq!(length(seq, 32_768), Some(8192));
        // A multimodal config's text section is read otherwise: not here.
        let wrapped = serde_json::json!({
            "max_position_embeddings": 100, "text_config": {"max_position_embeddings": 4096},
        });
        assert_eq!(length(wrapped, 4096), None);
    }

    #[test]
    fn gib_rounds_as_python_formats_two_decimals() {
        // Python: f"{x:.2f}" rounds exact ties to even: 0.125 -> 0.12,
        // 0.375 -> 0.38, 0.625 -> 0.62; just above a tie rounds up.
        assert_eq!(gib(1 << 27), "0.12");
        assert_eq!(gib(3 << 27), "0.38");
        assert_eq!(gib(5 << 27), "0.62");
        assert_eq!(gib((1 << 27) + 1), "0.13");
        assert_eq!(gib(40 << 30), "40.00");
        assert_eq!(gib(0), "0.00");
    }

    #[test]
    fn floordiv_is_pythons_not_the_floor_of_the_quotient() {
        // Python: 1.0 // 0.1 == 9.0 (fmod leaves 0.0999...), while
        // floor(1.0 / 0.1) == 10.0.
        assert_eq!(py_floordiv(1.0, 0.1), 9.0);
        assert_eq!(py_floordiv(42_949_672_960.0, 44_236.8), 970_903.0);
        assert_eq!(py_floordiv(0.5, 2.0), 0.0);
        assert_eq!(py_floordiv(6.0, 2.0), 3.0);
        // (a - fmod(a, b)) / b is 30319.999999999996 here; Python says 30320.0.
        assert_eq!(
            py_floordiv(177_211.258_938_582_7, 5.844_608_707_784_413),
            30_320.0
        );
    }
}
