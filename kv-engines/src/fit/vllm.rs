//! vLLM 0.33's KV budget on one GPU (`determine_available_memory`,
//! v1/worker/gpu_worker.py; `request_memory`, v1/worker/utils.py):
//!
//! ```text
//! requested = ceil(total_memory x gpu_memory_utilization)
//! available = requested - (weights + non-torch + activation peak) - CUDA graphs
//! ```
//!
//! The weights are what `Model loading took X GiB` counts: every parameter
//! and buffer the model class allocates, each rounded up to the CUDA caching
//! allocator's 512-byte block (`max_memory_allocated`). The other three are
//! measured by vLLM's profile run on the GPU (`memory_profiling`,
//! utils/mem_utils.py: the memory consumed beyond the weights since start-up,
//! the transient torch peak, and `profile_cudagraph_memory`, subtracted by
//! default since `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS` is 1); kv takes
//! them as inputs and never guesses them.

use kv_core::DType;
use serde::Serialize;
use serde_json::Value;

use super::config::{bias_refusal, checked_class, layer_index, text_section};
use super::rotary::{
    gemma3_rotary_tables, gemma4_rotary_tables, inv_freq_elements, is_mrope, layer_types,
    minicpm3_table_shape, mla_rotary_table_shape, per_layer_type_rotary_tables, rotary_dim_unset,
    rotary_table_shape_or, scaled_rotary_table_shape,
};
use super::shard::{mamba2_sizes, ShardingEngine, TpLayout};
use super::transformer_h::{
    transformer_h_checkpoint, transformer_h_text, BLOOM, DBRX, GPT2, TRANSFORMER_H,
};
use crate::estimate::format_gib;
use crate::stored_tensor::StoredTensor;

mod checked;
mod gemma4;
mod language_model;

pub use checked::CHECKED_ARCHITECTURES;

pub use language_model::{language_model_config, LanguageModel, LANGUAGE_MODEL_ONLY_ARCHITECTURES};

/// Beam (vllm/models/beam): its router's weight and correction bias and
/// its rotary table in float32, as vLLM's class built on meta holds them.
const BEAM: &str = "BeamForCausalLM";

/// Laguna: a rope per layer type, a float32 router correction bias.
const LAGUNA: &str = "LagunaForCausalLM";

/// Gemma 3n (text): AltUp, LAuReL and per-layer inputs beside Gemma 3's
/// layers, checked at TP 1 without a pipeline.
const GEMMA3N: &str = "Gemma3nForCausalLM";

/// The classes that keep `normalizer` (`hidden_size ** 0.5`, one scalar in
/// the served dtype) as a buffer.
const GEMMA_NORMALIZER: &[&str] = &[
    "GemmaForCausalLM",
    "Gemma2ForCausalLM",
    "Gemma3ForCausalLM",
    "Gemma4ForCausalLM",
];

/// The classes with multi-head latent attention (`DeepseekV2MLAAttention`):
/// the rotary table is `qk_rope_head_dim` wide
/// ([`mla_rotary_table_shape`]); the router's `e_score_correction_bias` is
/// a float32 parameter where `topk_method` is `noaux_tc` (and absent
/// otherwise); MTP layers (`model.layers.N` for N from
/// `num_hidden_layers`, `num_nextn_predict_layers` of them) are skipped by
/// the loader (`get_spec_layer_idx_from_weight_name`) unless speculative
/// decoding loads them, which kv does not model.
const LATENT_ATTENTION: &[&str] = &[
    "AXK1ForCausalLM",
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "GlmMoeDsaForCausalLM",
];

/// The latent-attention classes with a sparse-attention indexer
/// (`vllm.models.deepseek_v32`): its `wq_b`, `wk` and `weights_proj`
/// replicated (the last two one allocation, `wk_weights_proj`), its
/// `k_norm` a float32 LayerNorm, and a rotary table of its own beside the
/// latent's, NeoX-style unless `indexer_rope_interleave` (then `get_rope`
/// hands back the latent's table).
const SPARSE_INDEXER: &[&str] = &["DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"];

/// The classes vLLM 0.33 serves through its Transformers backend
/// (`_TRANSFORMERS_SUPPORTED_MODELS`, models/registry.py): the Hugging Face
/// model itself, whose rotary module keeps `inv_freq` and
/// `original_inv_freq` (float32, [`inv_freq_elements`] each) in place of
/// vLLM's cos/sin cache; OLMo 3 one pair per layer type.
const TRANSFORMERS_BACKEND: &[&str] = &[
    "GlmForCausalLM",
    "GPTNeoXForCausalLM",
    "OlmoForCausalLM",
    "Olmo2ForCausalLM",
    "Olmo3ForCausalLM",
    "PhiForCausalLM",
    "SeedOssForCausalLM",
    "SmolLM3ForCausalLM",
    "Starcoder2ForCausalLM",
];

/// The classes whose vLLM model builds the embedding, the final norm and
/// the LM head on every pipeline stage (only the decoder layers outside the
/// stage are `PPMissingLayer`). The other checked classes build the
/// embedding on the first stage (and on the last where it is tied: the head
/// is then the embedding), the final norm and the head on the last. Read
/// off vLLM 0.33's own models on the meta device, one shipped config of
/// each class at pp 2, tied and untied, on 2026-12-06 and 2026-12-07.
const WHOLE_ON_EVERY_STAGE: &[&str] = &[
    "CohereForCausalLM",
    "Cohere2ForCausalLM",
    "GemmaForCausalLM",
    "Gemma2ForCausalLM",
    "Gemma3ForCausalLM",
    "GraniteMoeForCausalLM",
    "MixtralForCausalLM",
    "OlmoeForCausalLM",
    "Qwen2MoeForCausalLM",
    "Qwen3MoeForCausalLM",
    "StableLmForCausalLM",
    "JambaForCausalLM",
    "NemotronHForCausalLM",
    "Cohere2MoeForCausalLM",
    "MiniCPM3ForCausalLM",
    "PhiMoEForCausalLM",
    "FalconMambaForCausalLM",
    "MambaForCausalLM",
    "GptOssForCausalLM",
    "Gemma4ForCausalLM",
];

/// The classes that build the embedding and the head on every stage but
/// the final norm on the last only (read off vLLM's classes at PP 2 and 3,
/// 2026-12-07).
const EMBEDDING_AND_HEAD_ON_EVERY_STAGE: &[&str] = &[LFM2, "Qwen3NextForCausalLM"];

/// The classes that build the embedding on every stage, the head and the
/// final norm on the last only (qwen3_5.py: `Qwen3_5Model` builds
/// `embed_tokens` unconditionally).
const EMBEDDING_ON_EVERY_STAGE: &[&str] = &["Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM"];

/// The classes with Gated DeltaNet layers whose loader drops the MTP
/// module's tensors (`mtp.`: their mappers map it to nothing).
const GATED_DELTA: &[&str] = &[
    "Qwen3NextForCausalLM",
    "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM",
];

/// The CUDA caching allocator's smallest block: every tensor takes a
/// multiple of it.
const BLOCK: u64 = 512;

/// The Granite MoE classes, whose embedding and head kv does not place
/// under a pipeline (a middle stage holds both, tied or not).
const GRANITE_MOE: &[&str] = &[
    "GraniteMoeHybridForCausalLM",
    "GraniteMoeSharedForCausalLM",
    "GraniteMoeSWAForCausalLM",
];

/// One pipeline stage of vLLM's: `index` of `stages`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineStage {
    /// `--pipeline-parallel-size`.
    pub stages: u64,
    /// This stage, from 0.
    pub index: u64,
}

impl PipelineStage {
    /// No pipeline: one stage holding every layer.
    pub const WHOLE: PipelineStage = PipelineStage {
        stages: 1,
        index: 0,
    };
}

/// Which of a checkpoint's tensors one stage loads.
struct StageShare<'a> {
    class: &'a str,
    stage: PipelineStage,
    /// The decoder layers it builds: `first..end`.
    layers: std::ops::Range<u64>,
    tied: bool,
}

impl StageShare<'_> {
    fn new<'a>(
        class: &'a str,
        stage: PipelineStage,
        layer_count: u64,
        tied: bool,
    ) -> Result<StageShare<'a>, String> {
        if stage.index >= stage.stages {
            return Err(format!(
                "stage {} of {}: stages count from 0",
                stage.index, stage.stages
            ));
        }
        if stage.stages > 1 && GRANITE_MOE.contains(&class) {
            // Its class builds the embedding and the head on every stage,
            // and a middle stage holds both, tied or not (vLLM's class on
            // meta at PP 3): a placement kv does not model.
            return Err(format!(
                "kv has not checked where vLLM's `{class}` holds its embedding and head under \
                 a pipeline"
            ));
        }
        if stage.stages > 1 && tied && class == "Ernie4_5_MoeForCausalLM" {
            // Its head ties itself to an embedding a later stage does not
            // build (vLLM 0.33's class on meta at PP 2).
            return Err(format!(
                "vLLM fails: `{class}` with tied embeddings under a pipeline: 'PPMissingLayer' \
                 object has no attribute 'tie_weights'"
            ));
        }
        let parts = kv_core::Parallel::new(1, stage.stages)
            .and_then(|p| p.stage_layers(layer_count))
            .map_err(|e| e.to_string())?;
        let index = usize::try_from(stage.index).map_err(|_| "the stage overflows usize")?;
        let first: u64 = parts[..index].iter().sum();
        Ok(StageShare {
            class,
            stage,
            layers: first..first + parts[index],
            tied,
        })
    }

    /// Whether the stage loads tensor `name`.
    fn holds(&self, name: &str) -> Result<bool, String> {
        if let Some(index) = layer_index(name)? {
            return Ok(self.layers.contains(&index));
        }
        if self.stage.stages == 1 || TRANSFORMER_H.contains(&self.class) {
            return Ok(true);
        }
        let first = self.stage.index == 0;
        let last = self.stage.index + 1 == self.stage.stages;
        let norm_everywhere = WHOLE_ON_EVERY_STAGE.contains(&self.class);
        let everywhere = norm_everywhere || EMBEDDING_AND_HEAD_ON_EVERY_STAGE.contains(&self.class);
        let embedding_everywhere = everywhere || EMBEDDING_ON_EVERY_STAGE.contains(&self.class);
        // The embedding and the final norm under each family's name
        // (Nemotron-H's `embeddings` and `norm_f`, Jamba's and Phi's
        // `final_layernorm`, LFM2's `embedding_norm`, which is its final
        // norm).
        let embedding = ["model.embed_tokens.", "model.embeddings."];
        let final_norm = [
            "model.norm.",
            "model.norm_f.",
            "model.final_layernorm.",
            "model.embedding_norm.",
        ];
        if embedding.iter().any(|p| name.starts_with(p)) {
            Ok(embedding_everywhere || first || (self.tied && last))
        } else if name.starts_with("lm_head.") {
            Ok(everywhere || last)
        } else if final_norm.iter().any(|p| name.starts_with(p)) {
            Ok(norm_everywhere || last)
        } else if self.class == gemma4::CLASS
            && gemma4::PER_LAYER_INPUTS.iter().any(|p| name.starts_with(p))
        {
            Ok(true)
        } else {
            Err(format!(
                "`{name}`: kv does not know which pipeline stage vLLM loads it on (it knows \
                 `model.layers.N.`, {}, {} and `lm_head.`)",
                embedding.map(|p| format!("`{p}`")).join(", "),
                final_norm.map(|p| format!("`{p}`")).join(", ")
            ))
        }
    }
}

/// The hybrid classes: only their attention layers keep the four float32
/// scales (and build the rotary table); their linear-attention, Mamba and
/// convolution layers keep none. Which layers attend is read from the
/// layer pattern as kv-core reads it.
const HYBRID: &[&str] = &[
    ZAMBA2,
    LFM2_MOE,
    "GraniteMoeHybridForCausalLM",
    "JambaForCausalLM",
    "Lfm2ForCausalLM",
    "NemotronHForCausalLM",
    "Qwen3NextForCausalLM",
    "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM",
];

/// The classes without attention (Mamba's mixers only): no scales, no
/// rotary table.
const ATTENTION_FREE: &[&str] = &[
    "FalconMambaForCausalLM",
    "MambaForCausalLM",
    "Mamba2ForCausalLM",
];

/// The classes whose Mamba mixers vLLM builds as `MambaMixer2`, split over
/// TP ranks as [`TpLayout::with_mamba2`] says.
const MAMBA2_MIXERS: &[&str] = &[
    "Mamba2ForCausalLM",
    "NemotronHForCausalLM",
    "GraniteMoeHybridForCausalLM",
    "FalconH1ForCausalLM",
];

/// The Mamba mixers' `A_log` (vLLM's parameter `A`) is float32 whatever the
/// served dtype, as Gated DeltaNet's is.
const MAMBA_A: &[&str] = &[".mamba.A_log", ".mixer.A_log", ".linear_attn.A_log"];

/// The stage's layers with attention, each keeping four float32 scales:
/// every layer, but a [`HYBRID`] class's attention layers only.
fn attention_layers_on_stage(
    config: &Value,
    class: &str,
    layers: &std::ops::Range<u64>,
) -> Result<u64, String> {
    if ATTENTION_FREE.contains(&class) {
        return Ok(0);
    }
    if !HYBRID.contains(&class) {
        return Ok(layers.end - layers.start);
    }
    let pattern = kv_core::HfConfig::from_value(config.clone())
        .layer_pattern()
        .map_err(|e| e.to_string())?;
    use kv_core::pattern::LayerKind;
    Ok([
        LayerKind::FullAttention,
        LayerKind::SlidingAttention,
        LayerKind::ChunkedAttention,
    ]
    .iter()
    // Zamba2's hybrid layers run the shared block's attention, each with
    // an `Attention` of its own (zamba2.py, `dpa_list`).
    .chain((class == ZAMBA2).then_some(&LayerKind::Hybrid))
    .map(|&kind| pattern.count_in(kind, layers.start, layers.end))
    .sum())
}

/// Zamba2 (zamba2.py): its hybrid layers share `num_mem_blocks` attention
/// blocks, hybrid layer `k` running block `k % num_mem_blocks`; vLLM builds
/// each block once and loads every hybrid layer's copy of it
/// (`model.layers.N.shared_transformer.`) into that one.
const ZAMBA2: &str = "Zamba2ForCausalLM";

/// LFM2 (lfm2.py): its head tied to the embedding whatever the config says.
const LFM2: &str = "Lfm2ForCausalLM";

/// LFM2-MoE (lfm2_moe.py): LFM2's layers with experts after its first
/// `num_dense_layers`, its head tied alike, its router's `expert_bias` (the
/// gate's `e_score_correction_bias`) float32.
const LFM2_MOE: &str = "Lfm2MoeForCausalLM";

/// For Zamba2, the shared block and parameter a checkpoint tensor of a
/// hybrid layer's `shared_transformer` loads into: `(block, rest of the
/// name)`; None for any other tensor.
fn zamba2_shared(text: &Value, name: &str) -> Result<Option<(u64, String)>, String> {
    let Some((layer, rest)) = name
        .strip_prefix("model.layers.")
        .and_then(|n| n.split_once(".shared_transformer."))
    else {
        return Ok(None);
    };
    let ids: Vec<u64> = text
        .get("hybrid_layer_ids")
        .and_then(Value::as_array)
        .ok_or("the config has no `hybrid_layer_ids` list")?
        .iter()
        .map(|id| id.as_u64().ok_or("`hybrid_layer_ids` holds a non-integer"))
        .collect::<Result<_, _>>()?;
    let blocks = text
        .get("num_mem_blocks")
        .and_then(Value::as_u64)
        .filter(|&b| b > 0)
        .ok_or("the config has no positive `num_mem_blocks`")?;
    let hybrid = layer
        .parse::<u64>()
        .ok()
        .and_then(|l| ids.iter().position(|&id| id == l))
        .ok_or_else(|| {
            format!("`{name}`: layer {layer} is not one of `hybrid_layer_ids` {ids:?}")
        })?;
    Ok(Some((hybrid as u64 % blocks, rest.to_owned())))
}

/// Whether the class builds no rotary embedding: Jamba's and Nemotron-H's
/// attention has no positions, OPT's are learned; Granite 4.0-H's has none unless
/// `position_embedding_type` is `rope` (granitemoehybrid.py).
fn without_rotary(text: &Value, class: &str) -> bool {
    match class {
        // OPT learns its positions (`embed_positions`, a tensor of the
        // checkpoint).
        "JambaForCausalLM" | "NemotronHForCausalLM" | "OPTForCausalLM" | GPT2 | BLOOM => true,
        // zamba2.py builds a rope only with `use_mem_rope`.
        ZAMBA2 => text.get("use_mem_rope").and_then(Value::as_bool) != Some(true),
        "GraniteMoeHybridForCausalLM" => {
            text.get("position_embedding_type").and_then(Value::as_str) != Some("rope")
        }
        _ => false,
    }
}

/// What vLLM holds once it has loaded a checkpoint, as `Model loading took`
/// counts it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct VllmLoadedWeights {
    /// The dtype vLLM serves in (`dtype=auto`).
    pub dtype: &'static str,
    /// The checkpoint's tensors as vLLM holds them: served dtype, the
    /// vocabulary padded, each rounded to 512 bytes.
    pub tensor_bytes: u64,
    /// Tensors the loader skips: `rotary_emb.inv_freq`, and a stored
    /// `lm_head.weight` tied to the embedding.
    pub skipped_bytes: u64,
    /// Copies of a shared block loaded into the one vLLM holds (Zamba2's
    /// `shared_transformer` at each hybrid layer): not held again.
    pub repeated_bytes: u64,
    /// The rotary table, in the served dtype (`cache.to(dtype)`); for OLMo,
    /// OLMo 2 and Starcoder2 their two float32 `inv_freq` vectors.
    pub rotary_bytes: u64,
    /// `_k_scale`, `_v_scale`, `_q_scale`, `_prob_scale`: four float32
    /// scalars per attention layer, a 512-byte block each (and Gemma's one
    /// `normalizer`).
    pub scale_bytes: u64,
    /// The model's other buffers: Falcon-H1's `mup_vector`, one a Mamba
    /// mixer as wide as the rank's `in_proj` rows, in the served dtype.
    pub other_buffer_bytes: u64,
}

impl VllmLoadedWeights {
    /// Everything held, in bytes: what vLLM logs as `Model loading took`.
    pub fn total(&self) -> Option<u64> {
        self.tensor_bytes
            .checked_add(self.rotary_bytes)?
            .checked_add(self.scale_bytes)?
            .checked_add(self.other_buffer_bytes)
    }
}

/// One element's bytes in the served dtype.
fn served_width(dtype: DType) -> Result<u64, String> {
    dtype
        .bytes_for(1)
        .map_err(|_| "the served dtype's width overflows".to_owned())
}

fn round_to_block(bytes: u64) -> Option<u64> {
    bytes.checked_next_multiple_of(BLOCK)
}

/// What vLLM holds on one tensor-parallel rank of `tp` for `tensors` of a
/// checkpoint with `config`, served in `dtype` (the estimate's, vLLM's
/// `dtype=auto`); or why kv cannot say.
pub fn loaded_weights(
    config: &Value,
    tensors: &[StoredTensor],
    dtype: DType,
    tp: u64,
) -> Result<VllmLoadedWeights, String> {
    loaded_weights_on_stage(config, tensors, dtype, tp, PipelineStage::WHOLE)
}

/// What vLLM holds on one rank and stage for `model`
/// ([`LanguageModel`]): its text class's weights
/// ([`loaded_weights_on_stage`]) and the tensors beside it, each whole in
/// the served dtype.
pub fn loaded_language_model_on_stage(
    model: &LanguageModel,
    dtype: DType,
    tp: u64,
    stage: PipelineStage,
) -> Result<VllmLoadedWeights, String> {
    if let Some(why) = model.tower_refusal(tp) {
        return Err(why);
    }
    let mut loaded = loaded_on_stage(
        &model.config,
        &model.tensors,
        dtype,
        tp,
        stage,
        model.mrope_positions(),
    )?;
    let element = served_width(dtype)?;
    for tensor in &model.beside {
        let bytes = tensor
            .shape
            .iter()
            .try_fold(element, |n, &d| n.checked_mul(d))
            .and_then(round_to_block)
            .and_then(|b| loaded.tensor_bytes.checked_add(b))
            .ok_or_else(|| format!("`{}`: its bytes overflow u64", tensor.name))?;
        loaded.tensor_bytes = bytes;
    }
    Ok(loaded)
}

/// [`loaded_weights`] on one pipeline stage: its decoder layers (vLLM's
/// partition, [`kv_core::Parallel::stage_layers`]), the embedding, the
/// final norm and the head where its class builds them
/// (`WHOLE_ON_EVERY_STAGE`), its own rotary table and its layers' scales.
///
/// ```
/// use kv_core::DType;
/// use kv_engines::fit::vllm::{loaded_weights_on_stage, PipelineStage};
/// use kv_engines::weights::StoredTensor;
///
/// let config = serde_json::json!({
///     "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
///     "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 128,
///     "max_position_embeddings": 100, "torch_dtype": "bfloat16",
/// });
/// let tensor = |name: &str, shape: &[u64]| {
///     StoredTensor::new(name.into(), "BF16".into(), shape.to_vec(), shape.iter().product::<u64>() * 2)
/// };
/// let tensors = [
///     tensor("model.embed_tokens.weight", &[128, 64]),
///     tensor("model.layers.1.mlp.down_proj.weight", &[64, 64]),
///     tensor("lm_head.weight", &[128, 64]),
/// ];
/// // The last of 2 stages: layer 1 (8,192 B) and the head (16,384 B).
/// let last = PipelineStage { stages: 2, index: 1 };
/// let held = loaded_weights_on_stage(&config, &tensors, DType::BF16, 1, last).unwrap();
/// assert_eq!(held.tensor_bytes, 8_192 + 16_384);
/// ```
pub fn loaded_weights_on_stage(
    config: &Value,
    tensors: &[StoredTensor],
    dtype: DType,
    tp: u64,
    stage: PipelineStage,
) -> Result<VllmLoadedWeights, String> {
    loaded_on_stage(config, tensors, dtype, tp, stage, None)
}

/// [`loaded_weights_on_stage`]; with `mrope_positions`, the
/// `positions_factor` the class as built hands `MRotaryEmbedding`
/// ([`is_mrope`]), its table that many times `max_position_embeddings`
/// rows.
fn loaded_on_stage(
    config: &Value,
    tensors: &[StoredTensor],
    dtype: DType,
    tp: u64,
    stage: PipelineStage,
    mrope_positions: Option<u64>,
) -> Result<VllmLoadedWeights, String> {
    if let Some(why) = language_model::towers_refusal(config) {
        return Err(why);
    }
    let text = text_section(config);
    let class = checked_class(
        config,
        CHECKED_ARCHITECTURES,
        "vLLM",
        "scripts/vllm/loaded_weights.py",
    )?;
    if class == BEAM && stage.stages > 1 {
        // Its full-attention layers have no rope: a stage of those alone
        // would hold no table, a placement kv has not checked.
        return Err(format!(
            "kv has not checked what vLLM's `{class}` holds on each stage of a pipeline"
        ));
    }
    let transformer_h = TRANSFORMER_H.contains(&class);
    let (named_text, renamed);
    let (text, tensors, masks) = if transformer_h {
        named_text = transformer_h_text(class, text)?;
        let masks;
        (renamed, masks) = transformer_h_checkpoint(tensors)?;
        (&named_text, &renamed[..], masks)
    } else {
        (text, tensors, 0)
    };
    // zamba2.py's heads (and its rope) are `attention_head_dim` wide.
    let zamba2_text;
    let text = if class == ZAMBA2 {
        let width = text
            .get("attention_head_dim")
            .cloned()
            .ok_or("the config has no `attention_head_dim`")?;
        let mut with = text.clone();
        if let Some(fields) = with.as_object_mut() {
            fields.insert("head_dim".into(), width);
        }
        zamba2_text = with;
        &zamba2_text
    } else {
        text
    };
    let element = served_width(dtype)?;
    let count = |key: &str| {
        text.get(key)
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("the config has no `{key}`"))
    };
    // zamba2.py and lfm2.py tie their head to the embedding whatever the
    // config says.
    let tied = matches!(class, ZAMBA2 | LFM2 | LFM2_MOE)
        || text
            .get("tie_word_embeddings")
            .or_else(|| config.get("tie_word_embeddings"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    let plain_mamba = matches!(class, "MambaForCausalLM" | "FalconMambaForCausalLM");
    let mamba2 = if MAMBA2_MIXERS.contains(&class) {
        mamba2_sizes(config, tp)?
    } else {
        None
    };
    let layout = TpLayout::new(text, tp, ShardingEngine::Vllm)?
        .with_plain_mamba(plain_mamba)
        .with_mamba2(mamba2)
        .with_conv1d(class == GPT2);
    let layer_count = count("num_hidden_layers")?;
    if class == DBRX {
        // FusedMoE splits each expert's inner width over the ranks.
        let inner = count("moe_intermediate_size")?;
        if !inner.is_multiple_of(tp) {
            return Err(format!(
                "vLLM refuses: {inner} is not divisible by {tp} (`ffn_config.ffn_hidden_size`)"
            ));
        }
    }
    let share = StageShare::new(class, stage, layer_count, tied)?;
    let latent = LATENT_ATTENTION.contains(&class);
    if SPARSE_INDEXER.contains(&class) {
        // IndexCache: layers that reuse an earlier layer's top-k build no
        // indexer of their own, a layout kv has not checked.
        let shared = text
            .get("index_topk_freq")
            .is_some_and(|f| f.as_u64() != Some(1))
            || text.get("index_topk_pattern").is_some_and(|p| !p.is_null());
        if shared {
            return Err(format!(
                "`{class}` with `index_topk_freq` or `index_topk_pattern`: layers that share \
                 an earlier layer's indexer, which kv has not checked in vLLM's class"
            ));
        }
    }
    let glm_moe = class == "Glm4MoeForCausalLM";
    // glm4.py's and glm4_moe.py's attention `setdefault` a partial rotary
    // factor of 0.5 where the config names none.
    let half_rotary_default = glm_moe || class == "Glm4ForCausalLM";
    let ernie_moe = class == "Ernie4_5_MoeForCausalLM";
    if class == "GptOssForCausalLM" {
        // gpt_oss.py gives each rank `num_key_value_heads // tp` KV heads,
        // never replicating them: none at all past one a rank.
        let kv_heads = text
            .get("num_key_value_heads")
            .and_then(Value::as_u64)
            .ok_or("the config has no `num_key_value_heads`")?;
        if tp > kv_heads {
            return Err(format!(
                "vLLM refuses: ZeroDivisionError: integer modulo by zero (GPT-OSS gives each of \
                 {tp} ranks {kv_heads} // {tp} = 0 KV heads)"
            ));
        }
    }
    if class == "PhiMoEForCausalLM" {
        // phimoe.py builds q, k, v, o and the head with `bias=True`
        // whatever the config says: biases a checkpoint without them
        // leaves unloaded.
        for key in ["attention_bias", "lm_head_bias"] {
            if text.get(key).and_then(Value::as_bool) != Some(true) {
                return Err(bias_refusal("vLLM", class, key));
            }
        }
    }
    if ernie_moe {
        let experts = text
            .get("moe_num_experts")
            .and_then(Value::as_u64)
            .ok_or("the config has no `moe_num_experts`")?;
        if tp > experts {
            // ernie45_moe.py, Ernie4_5_MoeMoE.__init__.
            return Err(format!(
                "vLLM refuses: Tensor parallel size {tp} is greater than the number of experts \
                 {experts}."
            ));
        }
    }
    let mtp_layers = if latent || glm_moe {
        text.get("num_nextn_predict_layers")
            .and_then(Value::as_u64)
            .unwrap_or(0)
    } else {
        0
    };
    // A stage with no MoE layer fails to build in these classes.
    let hf = kv_core::HfConfig::from_value(config.clone());
    crate::estimate::moe_stages::check_stage(&hf, stage.stages, stage.index)
        .map_err(|words| format!("vLLM refuses: {words}"))?;
    let gated_delta = GATED_DELTA.contains(&class);
    let is_gemma4 = class == gemma4::CLASS;
    let is_gemma3n = class == GEMMA3N;
    if class == ZAMBA2 && tp > 1 {
        return Err(format!(
            "kv has not checked how vLLM's `{class}` splits its Mamba mixers, shared blocks \
             and their LoRA adapters above TP 1"
        ));
    }
    if (is_gemma3n || class == ZAMBA2) && stage.stages > 1 {
        // gemma3n.py's and zamba2.py's classes do not implement SupportsPP.
        return Err(format!(
            "vLLM refuses: Pipeline parallelism is not supported for this model \
             (`{class}` does not implement `SupportsPP`)"
        ));
    }
    let v_slots = if is_gemma4 {
        gemma4::v_slots(text, tensors)?
    } else {
        Vec::new()
    };
    // glm4.py builds q, k and v biases only where `attention_bias` is
    // true, and its loader skips a checkpoint's biases it has no parameter
    // for (GLM-4.1V's text config, transformers' default, names none).
    let unbiased_glm4 = class == "Glm4ForCausalLM"
        && text.get("attention_bias").and_then(Value::as_bool) != Some(true);
    let mut allocations: std::collections::BTreeMap<String, u64> = Default::default();
    let mut skipped_bytes = masks;
    // Zamba2's shared blocks, each held once however many copies load it.
    let mut shared_loaded = std::collections::HashSet::new();
    let mut repeated_bytes = 0u64;
    let mut other_buffer_bytes = 0u64;
    for tensor in tensors.iter().chain(&v_slots) {
        let name = tensor.name.as_str();
        let is_head = name == "lm_head.weight";
        // Qwen3-Next's MTP module (its mapper drops `mtp.`) and ERNIE 4.5
        // MoE's (its mapper drops any name with `mtp` in it).
        let mut skipped = name.contains("rotary_emb.inv_freq")
            || (tied && is_head)
            || (gated_delta && name.starts_with("mtp."))
            || (ernie_moe && name.contains("mtp"))
            || (is_gemma4 && gemma4::dropped(text, name)?)
            || (unbiased_glm4
                && [".q_proj.bias", ".k_proj.bias", ".v_proj.bias"]
                    .iter()
                    .any(|b| name.ends_with(b)));
        if let Some(index) = layer_index(name)? {
            if index >= layer_count {
                // An MTP layer: the loader skips it.
                skipped = index - layer_count < mtp_layers;
                if !skipped {
                    return Err(format!(
                        "`{name}`: layer {index}, but the config has {layer_count} layers \
                         and {mtp_layers} MTP layers after them; vLLM's class has no such \
                         parameter"
                    ));
                }
            }
        }
        if let Some(slot) = (class == ZAMBA2)
            .then(|| zamba2_shared(text, name))
            .transpose()?
            .flatten()
        {
            if !shared_loaded.insert(slot) {
                // A later copy loads into the block an earlier one did.
                repeated_bytes = repeated_bytes
                    .checked_add(tensor.bytes)
                    .ok_or("the repeated tensors' bytes overflow u64")?;
                continue;
            }
        }
        if skipped {
            skipped_bytes = skipped_bytes
                .checked_add(tensor.bytes)
                .ok_or("the skipped tensors' bytes overflow u64")?;
            continue;
        }
        if is_head && class == "Gemma2ForCausalLM" {
            // Its logits come from the embedding: the class has no head.
            return Err(format!(
                "`{name}`: vLLM's `{class}` has no LM head of its own (its logits come from \
                 the embedding), so it cannot load an untied checkpoint"
            ));
        }
        // The Mamba classes' mapper renames `backbone.` to `model.`
        // (mamba.py, mamba2.py), where the stage's placement reads it.
        let mapped = match name.strip_prefix("backbone.") {
            Some(rest) if ATTENTION_FREE.contains(&class) => format!("model.{rest}"),
            _ => name.to_owned(),
        };
        if !share.holds(&mapped)? {
            continue;
        }
        if class == "AXK1ForCausalLM" && name.ends_with(".post_mlp_layernorm.weight") {
            // Counted below, one a layer, whatever the checkpoint holds.
            continue;
        }
        let correction_bias = latent && name.ends_with(".gate.e_score_correction_bias");
        // AXK1.py reads `topk_method` with `noaux_tc` as its default.
        let topk_default = if class == "AXK1ForCausalLM" {
            "noaux_tc"
        } else {
            ""
        };
        let topk = text
            .get("topk_method")
            .and_then(Value::as_str)
            .unwrap_or(topk_default);
        if correction_bias && topk != "noaux_tc" {
            return Err(format!(
                "`{name}`: vLLM's `{class}` builds no `e_score_correction_bias` unless \
                 `topk_method` is `noaux_tc`, so it cannot load this checkpoint"
            ));
        }
        // GLM-4.5's and ERNIE 4.5 MoE's router: weight and correction bias
        // both float32 (ERNIE's bias stored as `moe_statics.…`, [1, E]).
        let glm_router = (glm_moe || ernie_moe || class == BEAM)
            && (name.ends_with(".mlp.gate.weight")
                || (name.contains(".mlp.") && name.ends_with(".e_score_correction_bias")));
        let indexer_norm = SPARSE_INDEXER.contains(&class) && name.contains(".indexer.k_norm.");
        // Laguna's router correction bias is float32 whatever the served
        // dtype (laguna.py), and built whatever `topk_method` says.
        let laguna_bias = (class == LAGUNA && name.ends_with(".gate.e_score_correction_bias"))
            || (class == LFM2_MOE && name.ends_with(".feed_forward.expert_bias"));
        // Gemma 3n's AltUp keeps its output scale in float32 (gemma3n.py).
        let altup_scale = is_gemma3n && name.ends_with(".altup.correct_output_scale");
        if correction_bias
            || laguna_bias
            || altup_scale
            || glm_router
            || indexer_norm
            || MAMBA_A.iter().any(|suffix| name.ends_with(suffix))
        {
            // A float32 parameter of its own, whatever the served dtype.
            let (allocation, elements) = layout.share(tensor, false)?;
            let bytes = elements
                .checked_mul(4)
                .ok_or_else(|| format!("`{name}`: its bytes overflow u64"))?;
            allocations.insert(allocation, bytes);
            continue;
        }
        if !matches!(tensor.dtype.as_str(), "F16" | "BF16" | "F32" | "F64") {
            return Err(format!(
                "`{name}` is stored as {}: kv has not checked how vLLM loads weights that are \
                 not floating point",
                tensor.dtype
            ));
        }
        let (allocation, elements) = layout.share(tensor, is_head)?;
        let bytes = elements
            .checked_mul(element)
            .ok_or_else(|| format!("`{name}`: its bytes overflow u64"))?;
        if class == "FalconH1ForCausalLM" && name.ends_with(".mamba.in_proj.weight") {
            // falcon_h1.py's `mup_vector`: `torch.ones(1, in_proj rows / tp)`.
            let columns = tensor.shape.get(1).copied().unwrap_or(1).max(1);
            let vector = (elements / columns)
                .checked_mul(element)
                .and_then(round_to_block)
                .ok_or_else(|| format!("`{name}`: its mup_vector's bytes overflow u64"))?;
            other_buffer_bytes = other_buffer_bytes
                .checked_add(vector)
                .ok_or("the buffers' bytes overflow u64")?;
        }
        let slot = allocations.entry(allocation).or_default();
        *slot = slot
            .checked_add(bytes)
            .ok_or_else(|| format!("`{name}`: its bytes overflow u64"))?;
    }
    if class == "AXK1ForCausalLM" {
        // AXK1.py builds a `post_mlp_layernorm` in every layer, the dense
        // ones too, where transformers' checkpoints keep one in each MoE
        // layer's MLP only.
        let hidden = count("hidden_size")?;
        for layer in share.layers.clone() {
            let norm = hidden
                .checked_mul(element)
                .ok_or("the norms' bytes overflow u64")?;
            allocations.insert(format!("model.layers.{layer}.post_mlp_layernorm"), norm);
        }
    }
    let tensor_bytes = allocations
        .values()
        .try_fold(0u64, |sum, &bytes| sum.checked_add(round_to_block(bytes)?))
        .ok_or("the tensors' bytes overflow u64")?;
    let attention_layers = attention_layers_on_stage(config, class, &share.layers)?;
    let rotary_bytes = if attention_layers == 0 || without_rotary(text, class) {
        // No attention layer on the stage builds a rotary embedding.
        0
    } else if TRANSFORMERS_BACKEND.contains(&class) {
        let pairs = if class == "Olmo3ForCausalLM" {
            layer_types(text)?.len() as u64
        } else {
            1
        };
        inv_freq_elements(text)?
            .checked_mul(4)
            .and_then(round_to_block)
            .and_then(|one| one.checked_mul(2 * pairs))
            .ok_or("the rotary buffers' bytes overflow u64")?
    } else {
        // vLLM's cos/sin caches, `[rows, dim]` each in the served dtype.
        let tables = if latent {
            let table = mla_rotary_table_shape(text)?;
            let interleaved = text
                .get("indexer_rope_interleave")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if SPARSE_INDEXER.contains(&class) && !interleaved {
                vec![table, table]
            } else {
                vec![table]
            }
        } else if class == "MiniCPM3ForCausalLM" {
            vec![minicpm3_table_shape(text)?]
        } else if class == LAGUNA {
            per_layer_type_rotary_tables(text, share.layers.clone())?
        } else if class == "Gemma3ForCausalLM" || is_gemma3n {
            gemma3_rotary_tables(text, share.layers.clone())?
        } else if class == gemma4::CLASS {
            gemma4_rotary_tables(text, &gemma4::kinds(&hf, text, &share.layers)?)?
        } else if half_rotary_default && rotary_dim_unset(text) {
            vec![rotary_table_shape_or(text, 0.5)?]
        } else {
            let (rows, dim) = scaled_rotary_table_shape(text)?;
            let factor = mrope_positions.filter(|_| is_mrope(text)).unwrap_or(1);
            let rows = rows
                .checked_mul(factor)
                .ok_or("the rotary table's rows overflow u64")?;
            vec![(rows, dim)]
        };
        // gpt_oss.py asks get_rope for a float32 table.
        let width = if class == "GptOssForCausalLM" || class == BEAM {
            4
        } else {
            element
        };
        tables
            .iter()
            .try_fold(0u64, |sum, &(rows, dim)| {
                let table = rows.checked_mul(dim)?.checked_mul(width)?;
                sum.checked_add(round_to_block(table)?)
            })
            .ok_or("the rotary tables' bytes overflow u64")?
    };
    let normalizer = if GEMMA_NORMALIZER.contains(&class) {
        BLOCK
    } else {
        0
    };
    if is_gemma3n {
        // A bf16 scalar a layer (AltUp's `router_input_scale`) and four
        // in its decoder (`embed_scale`, `embed_scale_per_layer`,
        // `per_layer_input_scale`, `per_layer_projection_scale`), a block
        // each.
        other_buffer_bytes = layer_count
            .checked_add(4)
            .and_then(|n| n.checked_mul(BLOCK))
            .and_then(|b| other_buffer_bytes.checked_add(b))
            .ok_or("the buffers' bytes overflow u64")?;
    }
    if is_gemma4 {
        other_buffer_bytes = other_buffer_bytes
            .checked_add(gemma4::buffer_bytes(
                text,
                share.layers.end - share.layers.start,
            )?)
            .ok_or("the buffers' bytes overflow u64")?;
    }
    let scale_bytes = attention_layers
        .checked_mul(4 * BLOCK)
        .and_then(|scales| scales.checked_add(normalizer))
        .ok_or("the attention scales' bytes overflow u64")?;
    Ok(VllmLoadedWeights {
        dtype: dtype.name(),
        tensor_bytes,
        skipped_bytes,
        repeated_bytes,
        rotary_bytes,
        scale_bytes,
        other_buffer_bytes,
    })
}

/// What vLLM's budget rests on.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct VllmMemoryInputs {
    /// The GPU's total memory as CUDA reports it (`torch.cuda.mem_get_info`).
    pub total_memory_bytes: u64,
    /// `--gpu-memory-utilization` (vLLM's default 0.9).
    pub gpu_memory_utilization: f64,
    /// What `Model loading took` counts.
    pub weights_bytes: u64,
    /// Memory consumed beyond the weights from start-up to the end of the
    /// profile run (`total_consumed - weights_memory`: the CUDA context's
    /// growth, NCCL, cuBLAS workspaces, persistent buffers).
    pub non_torch_bytes: u64,
    /// The profile run's transient torch peak (`transient_peak_headroom`).
    pub activation_bytes: u64,
    /// `profile_cudagraph_memory()` (0 with `--enforce-eager`).
    pub cuda_graph_bytes: u64,
}

impl VllmMemoryInputs {
    /// Inputs with nothing profiled yet (each profiled part 0) and vLLM's
    /// default utilization.
    pub fn new(total_memory_bytes: u64, weights_bytes: u64) -> VllmMemoryInputs {
        VllmMemoryInputs {
            total_memory_bytes,
            gpu_memory_utilization: 0.9,
            weights_bytes,
            non_torch_bytes: 0,
            activation_bytes: 0,
            cuda_graph_bytes: 0,
        }
    }
}

/// vLLM's budget for the KV cache, and the lines it logs on the way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct VllmBudget {
    /// `ceil(total x utilization)`.
    pub requested_bytes: u64,
    /// What is left for the KV cache: positive, else vLLM refuses.
    pub available_bytes: u64,
    /// `Model loading took X GiB memory`, `Available KV cache memory: X GiB`.
    pub lines: Vec<String>,
}

/// vLLM's KV cache budget for `inputs`; or its refusal, in its words.
pub fn kv_cache_budget(inputs: &VllmMemoryInputs) -> Result<VllmBudget, String> {
    let utilization = inputs.gpu_memory_utilization;
    if !(utilization > 0.0 && utilization <= 1.0) {
        return Err(format!(
            "gpu_memory_utilization {utilization} is not in (0, 1]"
        ));
    }
    if inputs.total_memory_bytes >= 1 << 53 {
        return Err("the GPU's memory is beyond what a double holds exactly".into());
    }
    // Python's math.ceil(int * float): the int is exact as a double here.
    let requested = (inputs.total_memory_bytes as f64 * utilization).ceil() as u64;
    let taken = [
        inputs.weights_bytes,
        inputs.non_torch_bytes,
        inputs.activation_bytes,
        inputs.cuda_graph_bytes,
    ]
    .iter()
    .try_fold(0u64, |sum, &b| sum.checked_add(b))
    .ok_or("the memory taken overflows u64")?;
    let loading = format!(
        "Model loading took {} GiB memory",
        format_gib(inputs.weights_bytes)
    );
    match requested.checked_sub(taken).filter(|&left| left > 0) {
        Some(available) => Ok(VllmBudget {
            requested_bytes: requested,
            available_bytes: available,
            lines: vec![
                loading,
                format!("Available KV cache memory: {} GiB", format_gib(available)),
            ],
        }),
        // vLLM logs the figure, negative or 0, then
        // _check_enough_kv_cache_memory refuses.
        None => Err(format!(
            "{loading}; Available KV cache memory: {}{} GiB; then: No available memory for the cache blocks. Try increasing \
             `gpu_memory_utilization` when initializing the engine (this flag also controls \
             CPU memory reservation on the CPU backend, despite its name). See \
             https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
            if taken > requested { "-" } else { "" },
            format_gib(taken.abs_diff(requested))
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(name: &str, dtype: &str, shape: &[u64], bytes: u64) -> StoredTensor {
        StoredTensor::new(name.into(), dtype.into(), shape.to_vec(), bytes)
    }

    fn small(extra: serde_json::Value) -> Value {
        let mut config = serde_json::json!({
            "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
            "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
            "max_position_embeddings": 100, "vocab_size": 100,
            "torch_dtype": "bfloat16", "tie_word_embeddings": true,
        });
        for (k, v) in extra.as_object().unwrap() {
            config[k] = v.clone();
        }
        config
    }

    /// A 3-layer checkpoint: embedding and head 128 x 64 (16,384 B each in
    /// bf16), one 64 x 64 matrix a layer (8,192 B), the final norm (128 B,
    /// a 512-byte block).
    fn three_layers() -> Vec<StoredTensor> {
        let mut tensors = vec![
            tensor("model.embed_tokens.weight", "BF16", &[128, 64], 16_384),
            tensor("lm_head.weight", "BF16", &[128, 64], 16_384),
            tensor("model.norm.weight", "BF16", &[64], 128),
        ];
        for layer in 0..3 {
            tensors.push(tensor(
                &format!("model.layers.{layer}.mlp.down_proj.weight"),
                "BF16",
                &[64, 64],
                8_192,
            ));
        }
        tensors
    }

    fn on_stage(config: &Value, stages: u64, index: u64) -> Result<(u64, u64), String> {
        let stage = PipelineStage { stages, index };
        let held = loaded_weights_on_stage(config, &three_layers(), DType::BF16, 1, stage)?;
        Ok((held.tensor_bytes, held.scale_bytes))
    }

    #[test]
    fn each_pipeline_stage_holds_its_layers_and_what_its_class_builds_there() {
        let qwen2 = |tied: bool| {
            small(
                serde_json::json!({"num_hidden_layers": 3, "vocab_size": 128,
                                     "tie_word_embeddings": tied}),
            )
        };
        // vLLM's partition of 3 layers over 2 stages: 2, 1. Untied: the
        // first stage holds the embedding and layers 0, 1; the last layer 2,
        // the norm and the head. 4 scales of 512 B a layer.
        assert_eq!(
            on_stage(&qwen2(false), 2, 0),
            Ok((16_384 + 2 * 8_192, 2 * 2_048))
        );
        assert_eq!(
            on_stage(&qwen2(false), 2, 1),
            Ok((8_192 + 512 + 16_384, 2_048))
        );
        // Tied: the last stage builds the embedding too (the head is it).
        assert_eq!(
            on_stage(&qwen2(true), 2, 1),
            Ok((16_384 + 8_192 + 512, 2_048))
        );
        // Three stages: the middle one holds layer 1 alone.
        assert_eq!(on_stage(&qwen2(false), 3, 1), Ok((8_192, 2_048)));
        // Mixtral builds the embedding, the norm and the head on every stage.
        let mixtral = small(serde_json::json!({"architectures": ["MixtralForCausalLM"],
            "model_type": "mixtral", "num_hidden_layers": 3, "vocab_size": 128,
            "tie_word_embeddings": false}));
        let whole = 16_384 + 16_384 + 512;
        assert_eq!(on_stage(&mixtral, 2, 0), Ok((whole + 2 * 8_192, 2 * 2_048)));
        assert_eq!(on_stage(&mixtral, 2, 1), Ok((whole + 8_192, 2_048)));
        // One stage holds all: the same as without a pipeline.
        let all = loaded_weights(&qwen2(false), &three_layers(), DType::BF16, 1).unwrap();
        assert_eq!(
            on_stage(&qwen2(false), 1, 0),
            Ok((all.tensor_bytes, all.scale_bytes))
        );
    }

    #[test]
    fn a_tensor_no_stage_is_known_to_hold_is_refused_under_a_pipeline_only() {
        let config = small(serde_json::json!({"num_hidden_layers": 3, "vocab_size": 128}));
        let mut tensors = three_layers();
        tensors.push(tensor("model.vision_tower.weight", "BF16", &[64], 128));
        let stage = PipelineStage {
            stages: 2,
            index: 0,
        };
        let refused =
            loaded_weights_on_stage(&config, &tensors, DType::BF16, 1, stage).unwrap_err();
        assert!(
            refused.contains("`model.vision_tower.weight`: kv does not know which pipeline stage"),
            "{refused}"
        );
        assert!(loaded_weights(&config, &tensors, DType::BF16, 1).is_ok());
        tensors.pop();
        tensors.push(tensor("model.layers.x.weight", "BF16", &[64], 128));
        let refused =
            loaded_weights_on_stage(&config, &tensors, DType::BF16, 1, stage).unwrap_err();
        assert!(refused.contains("no layer index"), "{refused}");
        // A stage past the last, or more stages than layers.
        let past = PipelineStage {
            stages: 2,
            index: 2,
        };
        assert!(loaded_weights_on_stage(&config, &[], DType::BF16, 1, past)
            .unwrap_err()
            .contains("stages count from 0"));
        let four = PipelineStage {
            stages: 4,
            index: 0,
        };
        assert!(loaded_weights_on_stage(&config, &[], DType::BF16, 1, four)
            .unwrap_err()
            .contains("pp 4 is larger than the 3 layers"));
    }

    #[test]
    fn loaded_weights_pad_the_vocabulary_and_round_each_tensor_to_a_block() {
        let tensors = [
            // 100 rows stored, built with 128: 128 x 64 x 2 = 16,384.
            tensor("model.embed_tokens.weight", "BF16", &[100, 64], 12_800),
            tensor("lm_head.weight", "BF16", &[100, 64], 12_800),
            tensor(
                "model.layers.0.self_attn.rotary_emb.inv_freq",
                "F32",
                &[8],
                32,
            ),
            // 64 x 2 = 128 bytes: one 512-byte block.
            tensor("model.norm.weight", "BF16", &[64], 128),
            // float32 on disk, bf16 served: 64 x 64 x 2 = 8,192.
            tensor(
                "model.layers.0.mlp.down_proj.weight",
                "F32",
                &[64, 64],
                16_384,
            ),
        ];
        let loaded =
            loaded_weights(&small(serde_json::json!({})), &tensors, DType::BF16, 1).unwrap();
        assert_eq!(loaded.dtype, "bf16");
        assert_eq!(loaded.tensor_bytes, 16_384 + 512 + 8_192);
        assert_eq!(loaded.skipped_bytes, 12_800 + 32);
        // 100 positions x 16 (64 / 4) x 2 = 3,200: seven blocks, 3,584.
        assert_eq!(loaded.rotary_bytes, 3_584);
        // 2 layers x 4 scales x 512.
        assert_eq!(loaded.scale_bytes, 4_096);
        assert_eq!(loaded.total(), Some(25_088 + 3_584 + 4_096));
        // Untied, the head is loaded, padded alike.
        let untied = small(serde_json::json!({"tie_word_embeddings": false}));
        let loaded = loaded_weights(&untied, &tensors, DType::BF16, 1).unwrap();
        assert_eq!(
            (loaded.tensor_bytes, loaded.skipped_bytes),
            (25_088 + 16_384, 32)
        );
        // Served in float32 (dtype given so): 4 bytes an element.
        let loaded = loaded_weights(&untied, &tensors[..1], DType::F32, 1).unwrap();
        assert_eq!((loaded.tensor_bytes, loaded.rotary_bytes), (32_768, 6_656));
    }

    #[test]
    fn llama_31_8b_as_vllms_own_class_holds_it() {
        // scripts/vllm/loaded_weights.py on the published config: parameters
        // 16,060,522,496 B, the bf16 cos_sin_cache [131072, 128] 33,554,432,
        // 128 scales of 512: 16,094,142,464.
        let config = serde_json::json!({
            "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
            "num_attention_heads": 32, "num_hidden_layers": 32, "head_dim": 128,
            "max_position_embeddings": 131072, "vocab_size": 128256,
            "rope_scaling": {"rope_type": "llama3", "factor": 8.0},
        });
        let tensors = [
            tensor(
                "model.embed_tokens.weight",
                "BF16",
                &[128256, 4096],
                1_050_673_152,
            ),
            tensor("lm_head.weight", "BF16", &[128256, 4096], 1_050_673_152),
            // The 32 layers and the final norm, as one tensor of their
            // 32 x 218,112,000 + 4,096 = 6,979,588,096 parameters (what
            // rounding sees is each tensor's bytes, all multiples of 512).
            tensor(
                "model.layers.0.all",
                "BF16",
                &[6_979_588_096],
                13_959_176_192,
            ),
        ];
        let loaded = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
        assert_eq!(loaded.tensor_bytes, 16_060_522_496);
        assert_eq!(loaded.rotary_bytes, 33_554_432);
        assert_eq!(loaded.scale_bytes, 65_536);
        assert_eq!(loaded.total(), Some(16_094_142_464));
    }

    #[test]
    fn each_rank_holds_its_share_in_vllms_merged_allocations() {
        // 4 query heads, 2 KV heads of 16 (64 / 4), over 4 ranks: one query
        // head a rank, and each KV head replicated on two ranks.
        let config =
            small(serde_json::json!({"num_key_value_heads": 2, "tie_word_embeddings": true}));
        let tensors = [
            // Vocabulary 100 padded to 128, 32 rows a rank: 32 x 64 x 2 = 4,096.
            tensor("model.embed_tokens.weight", "BF16", &[100, 64], 12_800),
            // qkv_proj: q 16 rows + k 16 + v 16 (one head each) x 64 =
            // 3,072 elements, 6,144 B in one allocation (three would take
            // 2,048 each after rounding).
            tensor(
                "model.layers.0.self_attn.q_proj.weight",
                "BF16",
                &[64, 64],
                8_192,
            ),
            tensor(
                "model.layers.0.self_attn.k_proj.weight",
                "BF16",
                &[32, 64],
                4_096,
            ),
            tensor(
                "model.layers.0.self_attn.v_proj.weight",
                "BF16",
                &[32, 64],
                4_096,
            ),
            // Their biases: 16 + 16 + 16 elements = 96 B, one 512-byte block.
            tensor("model.layers.0.self_attn.q_proj.bias", "BF16", &[64], 128),
            tensor("model.layers.0.self_attn.k_proj.bias", "BF16", &[32], 64),
            tensor("model.layers.0.self_attn.v_proj.bias", "BF16", &[32], 64),
            // Row-parallel: 64 x 16 x 2 = 2,048; its bias whole, 128 B -> 512.
            tensor(
                "model.layers.0.self_attn.o_proj.weight",
                "BF16",
                &[64, 64],
                8_192,
            ),
            tensor("model.layers.0.self_attn.o_proj.bias", "BF16", &[64], 128),
            // gate_up_proj: 2 x 32 x 64 x 2 = 8,192; down: 64 x 32 x 2 = 4,096.
            tensor(
                "model.layers.0.mlp.gate_proj.weight",
                "BF16",
                &[128, 64],
                16_384,
            ),
            tensor(
                "model.layers.0.mlp.up_proj.weight",
                "BF16",
                &[128, 64],
                16_384,
            ),
            tensor(
                "model.layers.0.mlp.down_proj.weight",
                "BF16",
                &[64, 128],
                16_384,
            ),
        ];
        let loaded = loaded_weights(&config, &tensors, DType::BF16, 4).unwrap();
        assert_eq!(
            loaded.tensor_bytes,
            4_096 + 6_144 + 512 + 2_048 + 512 + 8_192 + 4_096
        );
        // At 2 ranks each holds one KV head of its own: q 32 + k 16 + v 16
        // rows x 64 x 2 = 8,192.
        let two = loaded_weights(&config, &tensors[1..4], DType::BF16, 2).unwrap();
        assert_eq!(two.tensor_bytes, 8_192);
        // Refused in vLLM's words: 3 ranks over 2 KV heads; 128 padded rows
        // over 3 ranks; a width the ranks do not divide.
        // (the embedding is built first, so its refusal comes first).
        let e = loaded_weights(&config, &[], DType::BF16, 3).unwrap_err();
        assert_eq!(e, "vLLM refuses: 128 is not divisible by 3");
        let mut vocab_192 = config.clone();
        vocab_192["vocab_size"] = serde_json::json!(192);
        let e = loaded_weights(&vocab_192, &[], DType::BF16, 3).unwrap_err();
        assert_eq!(e, "vLLM refuses: 3 is not divisible by 2");
        let odd = [tensor(
            "model.layers.0.mlp.down_proj.weight",
            "BF16",
            &[64, 6],
            768,
        )];
        let e = loaded_weights(&config, &odd, DType::BF16, 4).unwrap_err();
        assert_eq!(e, "vLLM refuses: 6 is not divisible by 4");
        let odd = [tensor(
            "model.layers.0.mlp.up_proj.weight",
            "BF16",
            &[6, 64],
            768,
        )];
        let e = loaded_weights(&config, &odd, DType::BF16, 4).unwrap_err();
        assert_eq!(e, "vLLM refuses: 6 is not divisible by 4");
        let odd = [tensor(
            "model.layers.0.self_attn.q_proj.weight",
            "BF16",
            &[6, 64],
            768,
        )];
        let e = loaded_weights(&config, &odd, DType::BF16, 4).unwrap_err();
        assert_eq!(e, "vLLM refuses: 6 is not divisible by 4");
        let odd = [tensor(
            "model.layers.0.self_attn.k_proj.weight",
            "BF16",
            &[3, 64],
            384,
        )];
        let e = loaded_weights(&config, &odd, DType::BF16, 4).unwrap_err();
        assert_eq!(e, "vLLM refuses: 3 is not divisible by 2");
        assert!(loaded_weights(&config, &[], DType::BF16, 0).is_err());
        // vLLM does not pad 32,000 rows further for 3 ranks, as SGLang does.
        let mut vocab_32000 = small(
            serde_json::json!({"num_key_value_heads": 3, "num_attention_heads": 3, "hidden_size": 48}),
        );
        vocab_32000["vocab_size"] = serde_json::json!(32000);
        let e = loaded_weights(&vocab_32000, &[], DType::BF16, 3).unwrap_err();
        assert_eq!(e, "vLLM refuses: 32000 is not divisible by 3");
    }

    /// A Mixtral of hidden 512, 4 experts of 1,024, 8 heads and 4 KV heads.
    fn small_mixtral(layers: u64, positions: u64, vocab: u64) -> Value {
        serde_json::json!({
            "architectures": ["MixtralForCausalLM"], "hidden_size": 512,
            "intermediate_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 4,
            "num_hidden_layers": layers, "num_local_experts": 4,
            "max_position_embeddings": positions, "vocab_size": vocab, "torch_dtype": "bfloat16",
        })
    }

    #[test]
    fn experts_merge_into_two_allocations_a_layer_and_split_over_ranks() {
        // A Mixtral of 2 layers, hidden 512, 4 experts of 1,024, 8 heads and
        // 4 KV heads of 64. A layer at tp 1: qkv (512 + 256 + 256) x 512 x 2
        // = 1,048,576; o 524,288; the router 4 x 512 x 2 = 4,096; w13 4 x
        // 2,048 x 512 x 2 = 8,388,608; w2 4,194,304; two norms 2,048:
        // 14,161,920. x 2 + embedding and head 2 x 32,768,000 + the final
        // norm 1,024 = 93,860,864 (vLLM's own class: the same).
        let config = small_mixtral(2, 4096, 32000);
        let tensors = crate::fit::tensors_from_config(&config).unwrap();
        let one = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
        assert_eq!(one.tensor_bytes, 93_860_864);
        // tp 2: every split halves, the router and norms stay whole:
        // (524,288 + 262,144 + 4,096 + 4,194,304 + 2,097,152 + 2,048) x 2 +
        // 2 x 16,384,000 + 1,024 = 46,937,088.
        let two = loaded_weights(&config, &tensors, DType::BF16, 2).unwrap();
        assert_eq!(two.tensor_bytes, 46_937_088);
        // Over 4 ranks 4 KV heads are one a rank; the experts' 1,024 rows
        // split too. Over 3, the vocabulary is refused first.
        let e = loaded_weights(&config, &tensors, DType::BF16, 3).unwrap_err();
        assert_eq!(e, "vLLM refuses: 32000 is not divisible by 3");
        // An expert width 4 ranks do not divide, in the same words.
        let mut odd = config.clone();
        odd["intermediate_size"] = serde_json::json!(1026);
        let tensors = crate::fit::tensors_from_config(&odd).unwrap();
        let e = loaded_weights(&odd, &tensors, DType::BF16, 4).unwrap_err();
        assert_eq!(e, "vLLM refuses: 1026 is not divisible by 4");
    }

    #[test]
    fn experts_as_transformers_5_saves_them_and_names_kv_does_not_know() {
        // The small Mixtral of the test above, its experts fused: gate_up
        // [4, 2,048, 512] and down [4, 512, 1,024]; over 2 ranks each halves
        // (the 1,024-wide inner size split): 4,194,304 and 2,097,152.
        let config = small_mixtral(1, 64, 64);
        let fused = [
            tensor(
                "model.layers.0.mlp.experts.gate_up_proj",
                "BF16",
                &[4, 2048, 512],
                8_388_608,
            ),
            tensor(
                "model.layers.0.mlp.experts.down_proj",
                "BF16",
                &[4, 512, 1024],
                4_194_304,
            ),
        ];
        let two = loaded_weights(&config, &fused, DType::BF16, 2).unwrap();
        assert_eq!(two.tensor_bytes, 4_194_304 + 2_097_152);
        // Llama 4's orientation, gate_up [4, 512, 2,048]: the same split.
        let turned = [tensor(
            "model.layers.0.feed_forward.experts.gate_up_proj",
            "BF16",
            &[4, 512, 2048],
            8_388_608,
        )];
        assert_eq!(
            loaded_weights(&config, &turned, DType::BF16, 2)
                .unwrap()
                .tensor_bytes,
            4_194_304
        );
        // An inner size 3 ranks do not divide, in vLLM's words; a shape
        // that is not [experts, rows, columns], named.
        let e = loaded_weights(&config, &fused, DType::BF16, 3).unwrap_err();
        assert_eq!(e, "vLLM refuses: 64 is not divisible by 3");
        let mut vocab_192 = config.clone();
        vocab_192["vocab_size"] = serde_json::json!(192);
        let e = loaded_weights(&vocab_192, &fused, DType::BF16, 3).unwrap_err();
        assert!(e.starts_with("vLLM refuses: "), "{e}");
        let flat = [tensor(
            "model.layers.0.mlp.experts.down_proj",
            "BF16",
            &[2048, 1024],
            4_194_304,
        )];
        let e = loaded_weights(&config, &flat, DType::BF16, 2).unwrap_err();
        assert!(e.contains("[experts, rows, columns]"), "{e}");
        // A tensor of a kind kv has not seen sharded: whole at TP 1, named
        // above it.
        let unknown = [tensor(
            "model.layers.0.mlp.w_in.weight",
            "BF16",
            &[2048, 512],
            2_097_152,
        )];
        assert_eq!(
            loaded_weights(&config, &unknown, DType::BF16, 1)
                .unwrap()
                .tensor_bytes,
            2_097_152
        );
        let e = loaded_weights(&config, &unknown, DType::BF16, 2).unwrap_err();
        assert_eq!(
            e,
            "kv does not know how vLLM shards `model.layers.0.mlp.w_in.weight` over 2 TP ranks"
        );
        // Only a router's `proj` is known whole (Gemma 4's).
        let proj = [tensor(
            "model.layers.0.mlp.proj.weight",
            "BF16",
            &[2048, 512],
            2_097_152,
        )];
        let e = loaded_weights(&config, &proj, DType::BF16, 2).unwrap_err();
        assert!(e.contains("shards `model.layers.0.mlp.proj.weight`"), "{e}");
        let odd_expert = [tensor(
            "model.layers.0.mlp.experts.0.w4.weight",
            "BF16",
            &[8, 8],
            128,
        )];
        let e = loaded_weights(&config, &odd_expert, DType::BF16, 2).unwrap_err();
        assert!(
            e.contains("`model.layers.0.mlp.experts.0.w4.weight`"),
            "{e}"
        );
        // The inner size is the one that is not the hidden size: 36 of
        // [2, 36, 48] divides over 9 ranks where 48 would not
        // (2 x 36 x 48 / 9 = 384 elements, 768 B, one 1,024-byte block).
        let nine = serde_json::json!({
            "architectures": ["MixtralForCausalLM"], "hidden_size": 48,
            "num_attention_heads": 9, "num_key_value_heads": 9, "num_hidden_layers": 1,
            "max_position_embeddings": 4, "vocab_size": 576, "torch_dtype": "bfloat16",
        });
        let narrow = [tensor(
            "model.layers.0.mlp.experts.gate_up_proj",
            "BF16",
            &[2, 36, 48],
            6_912,
        )];
        assert_eq!(
            loaded_weights(&nine, &narrow, DType::BF16, 9)
                .unwrap()
                .tensor_bytes,
            1_024
        );
        // Another tensor of an experts module is no fused projection.
        let scale = [tensor("model.layers.0.mlp.experts.scale", "BF16", &[4], 8)];
        assert_eq!(
            loaded_weights(&config, &scale, DType::BF16, 1)
                .unwrap()
                .tensor_bytes,
            512
        );
        // Norms, routers and a row-parallel bias stay whole on every rank.
        let whole = [
            tensor("model.layers.0.mlp.gate.weight", "BF16", &[4, 512], 4_096),
            tensor(
                "model.layers.0.input_layernorm.weight",
                "BF16",
                &[512],
                1_024,
            ),
            tensor(
                "model.layers.0.self_attn.o_proj.bias",
                "BF16",
                &[512],
                1_024,
            ),
            tensor(
                "model.layers.0.feed_forward.router.weight",
                "BF16",
                &[4, 512],
                4_096,
            ),
            tensor(
                "model.layers.0.mlp.shared_expert_gate.weight",
                "BF16",
                &[1, 512],
                1_024,
            ),
        ];
        let two = loaded_weights(&config, &whole, DType::BF16, 2).unwrap();
        assert_eq!(two.tensor_bytes, 4_096 + 1_024 + 1_024 + 4_096 + 1_024);
    }

    #[test]
    fn classes_that_hold_other_buffers() {
        // Gemma: one more 512-byte scalar, its normalizer, beside 2 layers'
        // 4 scales: 4,096 + 512.
        let mut gemma = small(serde_json::json!({}));
        gemma["architectures"] = serde_json::json!(["GemmaForCausalLM"]);
        let loaded = loaded_weights(&gemma, &[], DType::BF16, 1).unwrap();
        assert_eq!((loaded.scale_bytes, loaded.rotary_bytes), (4_608, 3_584));
        // OLMo: inv_freq and original_inv_freq, 16 / 2 float32 = 32 B each,
        // a block each, in place of the 3,584-byte cache.
        for class in [
            "OlmoForCausalLM",
            "Olmo2ForCausalLM",
            "Starcoder2ForCausalLM",
        ] {
            let mut olmo = small(serde_json::json!({}));
            olmo["architectures"] = serde_json::json!([class]);
            let loaded = loaded_weights(&olmo, &[], DType::BF16, 1).unwrap();
            assert_eq!(
                (loaded.scale_bytes, loaded.rotary_bytes),
                (4_096, 1_024),
                "{class}"
            );
        }
        // A head of 512: 256 float32 = 1,024 B each, two blocks each.
        let mut wide = small(serde_json::json!({"head_dim": 512}));
        wide["architectures"] = serde_json::json!(["OlmoForCausalLM"]);
        let loaded = loaded_weights(&wide, &[], DType::BF16, 1).unwrap();
        assert_eq!(loaded.rotary_bytes, 2_048);
    }

    #[test]
    fn loaded_weights_refuse_what_kv_has_not_checked() {
        let refusal = |config: Value, tensors: &[StoredTensor]| {
            loaded_weights(&config, tensors, DType::BF16, 1).unwrap_err()
        };
        let mut other = small(serde_json::json!({}));
        other["architectures"] = serde_json::json!(["KimiLinearForCausalLM"]);
        assert!(refusal(other, &[]).contains("`KimiLinearForCausalLM`"));
        // Phi-3's fused qkv_proj: 4 query heads and 2 KV heads of 16 rows
        // ((4 + 2 x 2) x 16 = 128). Over 4 ranks: one query head a rank,
        // each KV head on two, (1 + 2 x 1) x 16 x 64 x 2 = 6,144 B; a row
        // count the heads do not divide is refused in vLLM's words.
        let mut phi3 = small(serde_json::json!({"num_key_value_heads": 2}));
        phi3["architectures"] = serde_json::json!(["Phi3ForCausalLM"]);
        let qkv = |rows: u64| {
            [tensor(
                "model.layers.0.self_attn.qkv_proj.weight",
                "BF16",
                &[rows, 64],
                rows * 128,
            )]
        };
        let at = |tp| {
            loaded_weights(&phi3, &qkv(128), DType::BF16, tp)
                .unwrap()
                .tensor_bytes
        };
        assert_eq!(at(1), 16_384);
        assert_eq!(at(4), 6_144);
        let words = loaded_weights(&phi3, &qkv(100), DType::BF16, 2).unwrap_err();
        assert_eq!(words, "vLLM refuses: 100 is not divisible by 8");
        // One KV head: (4 + 2 x 1) x 16 = 96 rows; at TP 2 two query heads
        // and the KV head on both, (2 + 2) x 16 x 64 x 2 = 8,192 B.
        phi3["num_key_value_heads"] = serde_json::json!(1);
        let held = loaded_weights(&phi3, &qkv(96), DType::BF16, 2).unwrap();
        assert_eq!(held.tensor_bytes, 8_192);
        // A class kv checked at TP 1 only would be refused above it.
        let mut hunyuan = small(serde_json::json!({}));
        hunyuan["architectures"] = serde_json::json!(["HunYuanDenseV1ForCausalLM"]);
        assert!(loaded_weights(&hunyuan, &[], DType::BF16, 1)
            .unwrap_err()
            .contains("`HunYuanDenseV1ForCausalLM`"));
        let quantized = small(serde_json::json!({"quantization_config": {"quant_method": "fp8"}}));
        assert!(refusal(quantized, &[]).contains("quantized"));
        let packed = [tensor(
            "model.layers.0.mlp.up_proj.weight",
            "U8",
            &[64, 32],
            2_048,
        )];
        let words = refusal(small(serde_json::json!({})), &packed);
        assert!(
            words.contains("`model.layers.0.mlp.up_proj.weight` is stored as U8"),
            "{words}"
        );
        let flat = [tensor(
            "model.embed_tokens.weight",
            "BF16",
            &[6_400],
            12_800,
        )];
        assert!(refusal(small(serde_json::json!({})), &flat).contains("[vocab, hidden]"));
        let mut no_vocab = small(serde_json::json!({}));
        no_vocab.as_object_mut().unwrap().remove("vocab_size");
        assert!(refusal(no_vocab, &[]).contains("`vocab_size`"));
        let mut no_layers = small(serde_json::json!({}));
        no_layers
            .as_object_mut()
            .unwrap()
            .remove("num_hidden_layers");
        assert!(refusal(no_layers, &[]).contains("`num_hidden_layers`"));
        // A rope kind kv has not checked is refused by its name.
        let dynamic = small(serde_json::json!({"rope_scaling": {"rope_type": "dynamic"}}));
        assert!(refusal(dynamic, &[]).contains("`dynamic`"));
        let huge = [tensor("model.layers.0.w", "BF16", &[u64::MAX / 2, 1], 0)];
        assert!(refusal(small(serde_json::json!({})), &huge).contains("overflow"));
    }

    #[test]
    fn the_budget_is_what_vllm_subtracts() {
        // 81,559 MiB = 85,520,809,984 B x 0.9 = 76,968,728,985.6, ceil
        // 76,968,728,986; less 16,094,142,464 + 2^30 + 2^30 + 2^29 =
        // 58,190,231,962 = 54.194 GiB.
        let mut inputs = VllmMemoryInputs::new(85_520_809_984, 16_094_142_464);
        inputs.non_torch_bytes = 1 << 30;
        inputs.activation_bytes = 1 << 30;
        inputs.cuda_graph_bytes = 1 << 29;
        let budget = kv_cache_budget(&inputs).unwrap();
        assert_eq!(budget.requested_bytes, 76_968_728_986);
        assert_eq!(budget.available_bytes, 58_190_231_962);
        assert_eq!(
            budget.lines,
            [
                "Model loading took 14.99 GiB memory",
                "Available KV cache memory: 54.19 GiB"
            ]
        );
        // 16 GiB x 0.9 = 15,461,882,265.6 -> 15,461,882,266: the weights
        // alone overdraw it by 632,260,198 B (0.589 GiB).
        let words = kv_cache_budget(&VllmMemoryInputs::new(16 << 30, 16_094_142_464)).unwrap_err();
        assert!(
            words.contains("Available KV cache memory: -0.59 GiB; then: No available memory for the cache blocks."),
            "{words}"
        );
        // Exactly nothing left is refused too.
        let mut exact = VllmMemoryInputs::new(1000, 900);
        exact.gpu_memory_utilization = 0.9;
        assert!(kv_cache_budget(&exact)
            .unwrap_err()
            .contains("memory: 0.0 GiB"));
        exact.weights_bytes = 899;
        assert_eq!(kv_cache_budget(&exact).unwrap().available_bytes, 1);
        exact.gpu_memory_utilization = 0.0;
        assert!(kv_cache_budget(&exact)
            .unwrap_err()
            .contains("not in (0, 1]"));
        exact.gpu_memory_utilization = 1.5;
        assert!(kv_cache_budget(&exact)
            .unwrap_err()
            .contains("not in (0, 1]"));
        exact.gpu_memory_utilization = 1.0;
        assert_eq!(kv_cache_budget(&exact).unwrap().available_bytes, 101);
        exact.total_memory_bytes = 1 << 53;
        assert!(kv_cache_budget(&exact).is_err());
        exact.total_memory_bytes = 1000;
        exact.activation_bytes = u64::MAX;
        assert!(kv_cache_budget(&exact).unwrap_err().contains("overflows"));
    }
}
