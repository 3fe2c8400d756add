//! What SGLang 0.5.23 holds once it has loaded a checkpoint: its tensors
//! in the served dtype, as each rank's share, and the rotary buffers its
//! model builds beside them.

use serde::Serialize;
use serde_json::Value;

use crate::fit::config::{bias_refusal, checked_class, joined, layer_index, text_section};
use crate::fit::rotary::head_dim;
use crate::fit::shard::{mamba2_sizes, ShardingEngine, TpLayout, SHARDED_ARCHITECTURES};
use crate::fit::transformer_h::{transformer_h_checkpoint, transformer_h_text, GPT2, GPTJ};
use crate::stored_tensor::StoredTensor;

use super::rotary::{rotary_buffer_bytes, TRANSFORMERS_BACKEND};

/// The architectures whose built model kv has checked: SGLang 0.5.23's
/// own classes built on the meta device hold the checkpoint's tensors in
/// the served dtype (each rank's share, as `TpLayout::share` cuts it), its routers
/// where the class keeps them in float32, and the rotary buffers of
/// `fit::sglang::rotary`, and nothing else (scripts/sglang/loaded_buffers.py
/// and compare_weights_hf.py, TP 1, 2, 4 and 8).
pub const CHECKED_ARCHITECTURES: &[&str] = &joined::<CHECKED_COUNT>(
    &joined::<SHARDED_COUNT>(SHARDED_ARCHITECTURES, SGLANG_ONLY_ARCHITECTURES),
    TP1_ONLY_ARCHITECTURES,
);

/// Of [`CHECKED_ARCHITECTURES`], those checked for SGLang beyond the
/// classes both engines share (on 2026-12-07), at TP 1, 2, 4 and 8.
const SGLANG_ONLY_ARCHITECTURES: &[&str] = &[
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "Ernie4_5ForCausalLM",
    "Gemma3ForCausalLM",
    "Glm4ForCausalLM",
    "Glm4MoeForCausalLM",
    "GptOssForCausalLM",
    "MiniCPM3ForCausalLM",
    "Olmo3ForCausalLM",
    "PhiForCausalLM",
    "PhiMoEForCausalLM",
    "Qwen3NextForCausalLM",
    "SeedOssForCausalLM",
    "SmolLM3ForCausalLM",
    "StableLmForCausalLM",
    "Gemma2ForCausalLM",
    "OPTForCausalLM",
    "ApertusForCausalLM",
    "DeepseekV32ForCausalLM",
    "Exaone4ForCausalLM",
    "LagunaForCausalLM",
    GPT2,
    GPTJ,
    LFM2,
    LFM2_MOE,
    "GraniteMoeHybridForCausalLM",
    "NemotronHForCausalLM",
];
const SHARDED_COUNT: usize = SHARDED_ARCHITECTURES.len() + SGLANG_ONLY_ARCHITECTURES.len();

/// Of [`CHECKED_ARCHITECTURES`], the classes whose SGLang 0.5.23 model splits
/// its attention (Qwen3-Next's Gated DeltaNet too) over `tp / dp` ranks
/// under DP attention (`get_attention_tp_size`), checked on its own classes
/// built on meta (scripts/sglang/compare_weights_tp.py and
/// compare_weights_hf.py `--dp`); the others split it over all of `tp`
/// whatever `--dp`, as at `--dp 1` (checked end to end, their pools
/// following `tp / dp`: scripts/sglang/compare_fit.py).
const DP_ATTENTION_ARCHITECTURES: &[&str] = &[
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "Qwen2MoeForCausalLM",
    "Llama4ForCausalLM",
    "GptOssForCausalLM",
    "Glm4MoeForCausalLM",
    "PhiMoEForCausalLM",
    "Qwen3NextForCausalLM",
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "LagunaForCausalLM",
    "Exaone4ForCausalLM",
];

/// Of [`CHECKED_ARCHITECTURES`], those checked at TP 1 only: HunYuan's
/// shards were never compared (transformers cannot build its shipped
/// config); GPT-NeoX's tensors have names [`TpLayout::share`] does not know;
/// the Mamba hybrids' mixers may replicate their groups.
const TP1_ONLY_ARCHITECTURES: &[&str] = &["HunYuanDenseV1ForCausalLM", "GPTNeoXForCausalLM"];

/// LFM2 (lfm2.py): a head of its own even where tied, filled from the
/// embedding once loaded, and an int32 `_intermediate_state_indices` of
/// 256 in each short-convolution layer.
const LFM2: &str = "Lfm2ForCausalLM";

/// LFM2-MoE (lfm2_moe.py): LFM2's head and indices, and its routers'
/// `expert_bias` float32.
const LFM2_MOE: &str = "Lfm2MoeForCausalLM";

/// The bytes of one LFM2 convolution layer's `_intermediate_state_indices`
/// (`torch.arange(256, dtype=torch.int32)`).
const LFM2_CONV_INDEX_BYTES: u64 = 256 * 4;
const CHECKED_COUNT: usize = SHARDED_COUNT + TP1_ONLY_ARCHITECTURES.len();

/// The hybrids whose Mamba mixers kv has checked at TP 1 (their mixers
/// above it are refused by name): Granite 4.0-H and Nemotron-H (dense).
const MAMBA_HYBRIDS: &[&str] = &["GraniteMoeHybridForCausalLM", "NemotronHForCausalLM"];

/// What SGLang holds once it has loaded a checkpoint: its tensors in the
/// served dtype, less those its loader skips, and the rotary table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LoadedWeights {
    /// The dtype SGLang serves in (`dtype=auto`), as torch names it.
    pub dtype: &'static str,
    /// The checkpoint's tensors as SGLang holds them.
    pub tensor_bytes: u64,
    /// Tensors the loader skips: stale `rotary_emb.inv_freq`, and a stored
    /// `lm_head.weight` of a model that ties it to the embedding.
    pub skipped_bytes: u64,
    /// The rotary buffers its model builds: `cos_sin_cache` tables (float32,
    /// LongRoPE's in the served dtype), or a Hugging Face rotary module's
    /// frequencies.
    pub rotary_bytes: u64,
    /// Tensors its modules hold that are neither parameters nor buffers:
    /// DeepSeek's `w_kc` and `w_vc`, the latent attention's `kv_b_proj`
    /// split and made contiguous once loaded (`post_load_weights`), as many
    /// bytes again as that projection; Llama 4's unlearned qk norms' weights.
    pub other_tensor_bytes: u64,
    /// Buffers beside the rotary ones: Qwen3-Next's `gemma_weight`, a copy
    /// of each `GemmaRMSNorm`'s weight plus one (layers/layernorm.py).
    pub other_buffer_bytes: u64,
}

impl LoadedWeights {
    /// Everything held, in bytes.
    pub fn total(&self) -> Option<u64> {
        self.tensor_bytes
            .checked_add(self.rotary_bytes)?
            .checked_add(self.other_tensor_bytes)?
            .checked_add(self.other_buffer_bytes)
    }
}

/// SGLang's dtype for `dtype=auto` (`_get_and_verify_dtype`,
/// configs/model_config.py): the config's `dtype` or `torch_dtype`;
/// float32, or none, is served in float16, bfloat16 for Gemma.
fn served_dtype(config: &Value) -> (&'static str, u64) {
    let text = text_section(config);
    let named = ["dtype", "torch_dtype"].iter().find_map(|k| {
        text.get(*k)
            .and_then(Value::as_str)
            .or_else(|| config.get(*k).and_then(Value::as_str))
    });
    match named {
        Some("bfloat16") => ("bfloat16", 2),
        Some("float16" | "half") => ("float16", 2),
        _ => {
            let model_type = text
                .get("model_type")
                .or_else(|| config.get("model_type"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if model_type.starts_with("gemma") {
                ("bfloat16", 2)
            } else {
                ("float16", 2)
            }
        }
    }
}

/// What SGLang holds on one tensor-parallel rank of `tp` for `tensors` of a
/// checkpoint with `config`; or why kv cannot say.
pub fn loaded_weights(
    config: &Value,
    tensors: &[StoredTensor],
    tp: u64,
) -> Result<LoadedWeights, String> {
    loaded_weights_with_dp_attention(config, tensors, tp, 1)
}

/// [`loaded_weights`] under `--enable-dp-attention` with `--dp-size dp`:
/// each rank holds the attention of `tp / dp` ranks (q, k, v and o split
/// over its DP group, KV heads replicated where it has more ranks than
/// heads), the MLP, the experts and the vocabulary still split over `tp`
/// (SGLang 0.5.23's model classes built on the meta device,
/// scripts/sglang/compare_weights_tp.py and compare_weights_hf.py --dp).
pub fn loaded_weights_with_dp_attention(
    config: &Value,
    tensors: &[StoredTensor],
    tp: u64,
    dp: u64,
) -> Result<LoadedWeights, String> {
    let text = text_section(config);
    let class = checked_class(
        config,
        CHECKED_ARCHITECTURES,
        "SGLang",
        "scripts/sglang/loaded_buffers.py",
    )?;
    if tp > 1 && TP1_ONLY_ARCHITECTURES.contains(&class) {
        return Err(format!(
            "kv has not checked how SGLang shards `{class}` over TP ranks (checked at TP 1 \
             only: {})",
            TP1_ONLY_ARCHITECTURES.join(", ")
        ));
    }
    // GPT-2's and GPT-J's sizes under their own keys, their checkpoints'
    // names as the loaders name them, the causal masks they skip.
    let (named_text, renamed);
    let (text, tensors, masks) = if matches!(class, GPT2 | GPTJ) {
        named_text = transformer_h_text(class, text)?;
        let masks;
        (renamed, masks) = transformer_h_checkpoint(tensors)?;
        (&named_text, &renamed[..], masks)
    } else {
        (text, tensors, 0)
    };
    let (dtype, element) = served_dtype(config);
    // gemma2.py builds no head and skips `lm_head.weight` whatever the
    // config says: the embedding is the head; gpt2.py's head is its `wte`.
    let tied = matches!(class, "Gemma2ForCausalLM" | GPT2)
        || text
            .get("tie_word_embeddings")
            .or_else(|| config.get("tie_word_embeddings"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    if dp == 0 || !tp.is_multiple_of(dp) {
        return Err(format!(
            "--dp-size {dp} with --enable-dp-attention must divide --tp-size {tp} (SGLang \
             splits attention over tp / dp ranks)"
        ));
    }
    // The other classes' models read no attention TP: their attention stays
    // split over all of tp whatever --dp (its pools still follow tp / dp,
    // as SGLang's configurator sizes them).
    let attn_tp = if DP_ATTENTION_ARCHITECTURES.contains(&class) {
        tp / dp
    } else {
        tp
    };
    // The estimate checks the heads against the attention group of tp /
    // dp; these models' attention asserts them against all of tp, EXAONE
    // 4's too (exaone4.py: `get_parallel().tp_size`) although its layers
    // split over the group.
    if dp > 1 && (attn_tp == tp || class == "Exaone4ForCausalLM") {
        if let Some(heads) = text.get("num_attention_heads").and_then(Value::as_u64) {
            if !heads.is_multiple_of(tp) {
                return Err(format!(
                    "SGLang would not start: `{class}`'s attention asserts, whatever --dp, \
                     that all {tp} TP ranks divide its {heads} query heads"
                ));
            }
        }
    }
    if dp > 1 && MAMBA_HYBRIDS.contains(&class) {
        // Their mixers hold more a rank under DP attention than at --dp 1
        // (compare_fit.py: 8,401,894,400 B against 8,234,122,240 on
        // Nemotron-H-8B at TP 2 DP 2), a split kv has not read.
        return Err(format!(
            "kv has not checked how SGLang splits `{class}`'s Mamba mixers under DP attention \
             (--dp {dp}); its weights are checked at --dp 1"
        ));
    }
    if class == "NemotronHForCausalLM" {
        // SGLang's NemotronHConfig (configs/nemotron_h.py) reads
        // `mamba_n_groups`, 8 where absent, never the published configs'
        // `n_groups`: a checkpoint of other groups would not load.
        let built = text
            .get("mamba_n_groups")
            .and_then(Value::as_u64)
            .unwrap_or(8);
        let given = text.get("n_groups").and_then(Value::as_u64);
        if let Some(given) = given.filter(|&g| g != built) {
            return Err(format!(
                "SGLang's NemotronHConfig reads `mamba_n_groups` ({built}{}), not `n_groups` \
                 ({given}): its mixers are built for {built} groups, the checkpoint's for \
                 {given}, and their shapes differ; kv does not size a load that cannot match",
                if text.get("mamba_n_groups").is_some() {
                    ""
                } else {
                    ", its default"
                }
            ));
        }
    }
    if class == "PhiMoEForCausalLM" && 1 < attn_tp && attn_tp < tp {
        // phimoe.py's attention all-reduces over all of tp
        // (`reject_attn_tp_shard_with_tp_reduce`, layers/dp_attention.py).
        return Err(format!(
            "SGLang refuses: ValueError: PhiMoEAttention shards over the attention TP group \
             ({attn_tp} ranks) but all-reduces over the full TP group ({tp} ranks), so it does \
             not support --attn-dp-size {dp} yet. Use --attn-dp-size equal to --tp-size, or \
             drop --attn-dp-size {dp}."
        ));
    }
    // The mixture-of-experts blocks that refuse more ranks than experts
    // (glm4_moe.py, deepseek_v2.py, qwen2_moe.py, which Qwen3-Next's
    // layers use, and qwen3_moe.py).
    let experts_key = match class {
        "Glm4MoeForCausalLM"
        | "DeepseekV2ForCausalLM"
        | "DeepseekV3ForCausalLM"
        | "DeepseekV32ForCausalLM" => Some("n_routed_experts"),
        "Qwen2MoeForCausalLM" | "Qwen3MoeForCausalLM" | "Qwen3NextForCausalLM" => {
            Some("num_experts")
        }
        _ => None,
    };
    if let Some(experts) = experts_key
        .and_then(|key| text.get(key))
        .and_then(Value::as_u64)
    {
        if tp > experts {
            return Err(format!(
                "SGLang refuses: ValueError: Tensor parallel size {tp} is greater than the \
                 number of experts {experts}."
            ));
        }
    }
    if class == "LagunaForCausalLM" {
        // laguna.py's MoE block, in its own words.
        if let Some(experts) = text.get("num_experts").and_then(Value::as_u64) {
            if tp > experts {
                return Err(format!(
                    "SGLang refuses: ValueError: TP size {tp} > num_experts {experts}."
                ));
            }
        }
    }
    if class == "PhiMoEForCausalLM"
        && text.get("lm_head_bias").and_then(Value::as_bool) != Some(true)
    {
        // phimoe.py's head has a bias whatever the config says.
        return Err(bias_refusal("SGLang", class, "lm_head_bias"));
    }
    if TRANSFORMERS_BACKEND.contains(&class) {
        // The backend's attention divides both head counts by the ranks
        // (transformers.py, `divide(num_kv_heads, tp_size)`): KV heads
        // are never replicated.
        for key in ["num_attention_heads", "num_key_value_heads"] {
            if let Some(heads) = text.get(key).and_then(Value::as_u64) {
                if !heads.is_multiple_of(tp) {
                    return Err(format!("SGLang refuses: {heads} is not divisible by {tp}"));
                }
            }
        }
    }
    let moe_layers = text
        .get("hybrid_override_pattern")
        .and_then(Value::as_str)
        .is_some_and(|pattern| pattern.contains('E'));
    if class == "NemotronHForCausalLM" && moe_layers {
        return Err(
            "kv has checked SGLang's dense Nemotron-H only, not its mixture-of-experts layers \
             (`E` in `hybrid_override_pattern`)"
                .into(),
        );
    }
    if class == "Qwen3NextForCausalLM" && text.get("full_attention_interval").is_none() {
        // SGLang's own Qwen3NextConfig (configs/qwen3_next.py) places the
        // full-attention layers by it alone (`layers_block_type`), and the
        // model reads that when it is built; `layer_types` is not read.
        return Err(
            "SGLang would not start: AttributeError: 'Qwen3NextConfig' object has no attribute \
             'full_attention_interval' (SGLang's Qwen3-Next config places its attention layers \
             by it; give it as the published configs do)"
                .into(),
        );
    }
    if class == "Exaone4ForCausalLM" {
        // exaone4.py takes `len(sliding_window_pattern)` ("LLLG") where the
        // pattern is truthy; transformers 5's Exaone4Config holds a number
        // there (4 unless the file says otherwise, 0 without a window).
        let windowed = text.get("sliding_window").is_some_and(|w| !w.is_null());
        let number = match text.get("sliding_window_pattern") {
            Some(Value::String(_)) => None,
            Some(Value::Null) => None,
            Some(other) => other.as_u64(),
            None => Some(4),
        };
        if windowed && number.is_some_and(|n| n != 0) {
            return Err(
                "SGLang would not start: TypeError: object of type 'int' has no len() \
                 (SGLang's EXAONE 4 model reads `sliding_window_pattern` as a string such as \
                 \"LLLG\", as the published configs write it beside `layer_types`)"
                    .into(),
            );
        }
    }
    if class == "Gemma2ForCausalLM" {
        // gemma2.py's MLP reads both keys (transformers 5's Gemma2Config
        // writes only `hidden_activation`) and takes one activation.
        let act = |key| text.get(key).and_then(Value::as_str);
        // Unset, `hidden_activation` is the config class's default.
        let activation = act("hidden_activation").or(Some("gelu_pytorch_tanh"));
        match (act("hidden_act"), activation) {
            (None, _) => {
                return Err(
                    "SGLang would not start: AttributeError: 'Gemma2Config' object has \
                     no attribute 'hidden_act' (SGLang's Gemma 2 model reads it beside \
                     `hidden_activation`; give it as the published configs do)"
                        .into(),
                )
            }
            (Some("gelu_pytorch_tanh"), Some("gelu_pytorch_tanh")) => {}
            _ => {
                return Err(
                    "SGLang refuses: ValueError: Gemma2 uses `gelu_pytorch_tanh` as the \
                     hidden activation function. Please set `hidden_act` and \
                     `hidden_activation` to `gelu_pytorch_tanh`."
                        .into(),
                )
            }
        }
    }
    // DeepSeek-V3.2 is DeepSeek-V3 with a sparse-attention indexer beside
    // each latent attention (deepseek_v2.py, layers/attention/dsa).
    let sparse = class == "DeepseekV32ForCausalLM";
    let latent = sparse || matches!(class, "DeepseekV2ForCausalLM" | "DeepseekV3ForCausalLM");
    if latent && text.get("moe_layer_freq").is_none_or(Value::is_null) {
        // deepseek_v2.py reads it; transformers 5's DeepSeek config classes
        // do not set it, so only a config that names it builds.
        let config_class = match class {
            "DeepseekV2ForCausalLM" => "DeepseekV2Config",
            "DeepseekV3ForCausalLM" => "DeepseekV3Config",
            _ => "_DeepseekV32ConfigAlias",
        };
        return Err(format!(
            "SGLang would not start: AttributeError: '{config_class}' object has no attribute \
             'moe_layer_freq' (SGLang's DeepSeek model reads it; give it as the published \
             configs do)"
        ));
    }
    // The indexer's key norm: a LayerNorm in float32 on CUDA (weight and
    // bias), or an RMSNorm in the served dtype under `index_k_norm_type:
    // rms` (dsa_indexer.py).
    let indexer_rms_norm = text.get("index_k_norm_type").and_then(Value::as_str) == Some("rms");
    let mamba2 = if MAMBA_HYBRIDS.contains(&class) {
        mamba2_sizes(config, tp)?
    } else {
        None
    };
    let layout = TpLayout::new(text, tp, ShardingEngine::Sglang)?
        .with_attention_tp(attn_tp)?
        .with_mamba2(mamba2)
        .with_conv1d(class == GPT2);
    let layer_count = text.get("num_hidden_layers").and_then(Value::as_u64);
    let glm_moe = class == "Glm4MoeForCausalLM";
    // DeepSeek's loader skips layers past the config's when it has MTP
    // layers (deepseek_weight_loader.py, `NextNDisabledConfig`).
    let deepseek_mtp = latent
        && text
            .get("num_nextn_predict_layers")
            .and_then(Value::as_u64)
            .is_some_and(|n| n > 0);
    let noaux = text.get("topk_method").and_then(Value::as_str) == Some("noaux_tc");
    let router_fp32 = text.get("router_fp32").and_then(Value::as_bool) == Some(true);
    let (mut tensor_bytes, mut skipped_bytes, mut other_tensor_bytes) = (0u64, masks, 0u64);
    let mut other_buffer_bytes = 0u64;
    // Their norms are GemmaRMSNorm, each with a `gemma_weight` buffer as
    // large as its weight (layers/layernorm.py).
    let gemma_norms = matches!(class, "Qwen3NextForCausalLM" | "Gemma2ForCausalLM");
    let apertus = class == "ApertusForCausalLM";
    for tensor in tensors {
        let name = tensor.name.as_str();
        let past_the_layers = match (layer_index(name)?, layer_count) {
            (Some(index), Some(count)) if index >= count => Some(index),
            _ => None,
        };
        // GLM-4.5's loader skips every tensor its model has no parameter
        // for, the MTP layer a published checkpoint ships among them
        // (glm4_moe.py, `load_weights`: `if name not in params_dict:
        // continue`).
        let mtp_layer = (glm_moe || deepseek_mtp) && past_the_layers.is_some();
        if let (Some(index), false) = (past_the_layers, mtp_layer) {
            return Err(format!(
                "`{name}`: layer {index}, but the config has {} layers; kv has not checked \
                 what SGLang's `{class}` does with a layer it has no parameter for",
                layer_count.unwrap_or(0)
            ));
        }
        // llama.py's load_weights (and its kin): these are never loaded.
        if name.contains("rotary_emb.inv_freq") || (tied && name == "lm_head.weight") || mtp_layer {
            skipped_bytes = skipped_bytes
                .checked_add(tensor.bytes)
                .ok_or("the skipped tensors' bytes overflow u64")?;
            continue;
        }
        // GLM-4.5's router (`Glm4MoeGate`): weight and correction bias
        // float32 whatever the served dtype, whole on every rank.
        // Laguna's (laguna.py) too.
        let float32_router = (glm_moe || class == "LagunaForCausalLM")
            && (name.ends_with(".mlp.gate.weight")
                || name.ends_with(".mlp.gate.e_score_correction_bias"));
        // GPT-OSS's expert biases (gpt_oss.py's FusedMoE: `w13_weight_bias`,
        // `w2_weight_bias`) are float32 too.
        let float32_expert_bias = class == "GptOssForCausalLM"
            && (name.ends_with(".experts.gate_up_proj_bias")
                || name.ends_with(".experts.down_proj_bias"));
        // DeepSeek's router (`MoEGate`): its weight float32 under
        // `router_fp32`, its correction bias float32, and built only for
        // `noaux_tc`.
        let correction_bias = latent && name.ends_with(".mlp.gate.e_score_correction_bias");
        if correction_bias && !noaux {
            return Err(format!(
                "`{name}`: SGLang's `{class}` builds no `e_score_correction_bias` unless \
                 `topk_method` is `noaux_tc`; kv has not checked what its loader does with one"
            ));
        }
        let float32_router = float32_router
            || correction_bias
            || (latent && router_fp32 && name.ends_with(".mlp.gate.weight"));
        // Qwen3-Next's Gated DeltaNet and the Mamba mixers keep `A_log`
        // (their `A`) in float32.
        let float32_decay = (class == "Qwen3NextForCausalLM"
            && name.ends_with(".linear_attn.A_log"))
            || (class == LFM2_MOE && name.ends_with(".feed_forward.expert_bias"))
            || (MAMBA_HYBRIDS.contains(&class)
                && (name.ends_with(".mixer.A_log") || name.ends_with(".mamba.A_log")));
        // Apertus' xIELU (layers/activation.py, `XIELU()`): its four
        // scalars bfloat16 whatever the served dtype (as wide as any dtype
        // SGLang serves); `beta` and `eps` are buffers, counted below
        // whether the checkpoint stores them or not.
        let xielu = apertus && name.contains(".act_fn.");
        if xielu && (name.ends_with(".beta") || name.ends_with(".eps")) {
            continue;
        }
        let indexer_norm = sparse && name.contains(".indexer.k_norm.");
        if indexer_norm && indexer_rms_norm && name.ends_with(".bias") {
            // The RMSNorm has no bias; the loader skips a bias it has no
            // parameter for (deepseek_weight_loader.py).
            skipped_bytes = skipped_bytes
                .checked_add(tensor.bytes)
                .ok_or("the skipped tensors' bytes overflow u64")?;
            continue;
        }
        let element = if float32_router
            || float32_expert_bias
            || float32_decay
            || (indexer_norm && !indexer_rms_norm)
        {
            4
        } else {
            element
        };
        if !matches!(tensor.dtype.as_str(), "F16" | "BF16" | "F32" | "F64") {
            return Err(format!(
                "`{}` is stored as {}: kv has not checked how SGLang loads weights that are not \
                 floating point",
                tensor.name, tensor.dtype
            ));
        }
        let elements = if class == "Gemma3ForCausalLM" && tensor.name == "model.embed_tokens.weight"
        {
            // Gemma 3's embedding is a plain `nn.Embedding`
            // (`Gemma3TextScaledWordEmbedding`, gemma3_causal.py): the
            // vocabulary whole and unpadded on every rank.
            tensor
                .shape
                .iter()
                .try_fold(1u64, |n, &d| n.checked_mul(d))
                .ok_or_else(|| format!("`{}`: its elements overflow u64", tensor.name))?
        } else {
            layout.share(tensor, tensor.name == "lm_head.weight")?.1
        };
        let bytes = elements
            .checked_mul(element)
            .ok_or_else(|| format!("`{}`: its bytes overflow u64", tensor.name))?;
        tensor_bytes = tensor_bytes
            .checked_add(bytes)
            .ok_or("the tensors' bytes overflow u64")?;
        let gemma_norm = gemma_norms
            && (name == "model.norm.weight"
                || [
                    ".input_layernorm.weight",
                    ".post_attention_layernorm.weight",
                    ".pre_feedforward_layernorm.weight",
                    ".post_feedforward_layernorm.weight",
                    ".self_attn.q_norm.weight",
                    ".self_attn.k_norm.weight",
                ]
                .iter()
                .any(|suffix| name.ends_with(suffix)));
        if gemma_norm {
            // Its `gemma_weight` buffer: the weight again, plus one.
            other_buffer_bytes = other_buffer_bytes
                .checked_add(bytes)
                .ok_or("the buffers' bytes overflow u64")?;
        }
        if latent && name.ends_with(".self_attn.kv_b_proj.weight") {
            // Split with the heads: over the attention group.
            let copies = latent_copies(text, tensor, bytes, attn_tp)?;
            other_tensor_bytes = other_tensor_bytes
                .checked_add(copies)
                .ok_or("the other tensors' bytes overflow u64")?;
        }
    }
    if class == "Llama4ForCausalLM"
        && text.get("use_qk_norm").and_then(Value::as_bool) == Some(true)
    {
        // llama4.py: every layer but each fourth uses rope, and there a qk
        // norm without a learned weight, `torch.ones(head_dim)`, a plain
        // tensor in the served dtype.
        let layers = layer_count.ok_or("the config has no `num_hidden_layers`")?;
        let rope_layers = layers - layers / 4;
        let norms = rope_layers
            .checked_mul(head_dim(text)?)
            .and_then(|elements| elements.checked_mul(element))
            .ok_or("the qk norms' bytes overflow u64")?;
        other_tensor_bytes = other_tensor_bytes
            .checked_add(norms)
            .ok_or("the other tensors' bytes overflow u64")?;
    }
    if class == "Gemma2ForCausalLM" {
        // gemma2.py's embedding scale, `sqrt(hidden_size)`, a scalar buffer
        // in the served dtype.
        other_buffer_bytes = other_buffer_bytes
            .checked_add(element)
            .ok_or("the buffers' bytes overflow u64")?;
    }
    if matches!(class, LFM2 | LFM2_MOE) {
        let pattern = kv_core::HfConfig::from_value(config.clone())
            .layer_pattern()
            .map_err(|e| e.to_string())?;
        let layers = layer_count.ok_or("the config has no `num_hidden_layers`")?;
        let conv_layers = pattern.count_in(kv_core::pattern::LayerKind::ShortConv, 0, layers);
        other_buffer_bytes = conv_layers
            .checked_mul(LFM2_CONV_INDEX_BYTES)
            .and_then(|bytes| other_buffer_bytes.checked_add(bytes))
            .ok_or("the buffers' bytes overflow u64")?;
        if tied {
            // Its own head (a `ParallelLMHead` built whatever the config
            // says), the embedding copied in once loaded (lfm2.py,
            // `load_weights`).
            let embedding = tensors
                .iter()
                .find(|t| t.name == "model.embed_tokens.weight")
                .ok_or("the checkpoint has no `model.embed_tokens.weight` to tie the head to")?;
            let head = StoredTensor::new(
                "lm_head.weight".into(),
                embedding.dtype.clone(),
                embedding.shape.clone(),
                embedding.bytes,
            );
            let head_bytes = layout
                .share(&head, true)?
                .1
                .checked_mul(element)
                .ok_or("the head's bytes overflow u64")?;
            // A parameter of the model as built, as the checkpoint's are.
            tensor_bytes = tensor_bytes
                .checked_add(head_bytes)
                .ok_or("the tensors' bytes overflow u64")?;
        }
    }
    if apertus {
        // Two bfloat16 scalars a layer's activation: 4 B.
        let layers = layer_count.ok_or("the config has no `num_hidden_layers`")?;
        other_buffer_bytes = layers
            .checked_mul(4)
            .and_then(|bytes| other_buffer_bytes.checked_add(bytes))
            .ok_or("the buffers' bytes overflow u64")?;
    }
    let rotary_bytes = rotary_buffer_bytes(text, class)?;
    Ok(LoadedWeights {
        dtype,
        tensor_bytes,
        skipped_bytes,
        rotary_bytes,
        other_tensor_bytes,
        other_buffer_bytes,
    })
}

/// The bytes of `w_kc` and `w_vc` beside one rank's `kv_b_proj` of `bytes`
/// (deepseek_weight_loader.py, `post_load_weights`): the projection split
/// per head into its nope part (`w_kc`, transposed and made contiguous: a
/// copy always) and its value part (`w_vc`, made contiguous: a copy unless
/// the rank holds one head, where that slice is contiguous already and
/// `contiguous()` returns it as it is).
fn latent_copies(
    text: &Value,
    kv_b: &StoredTensor,
    bytes: u64,
    attn_tp: u64,
) -> Result<u64, String> {
    let count = |key: &str| {
        text.get(key)
            .and_then(Value::as_u64)
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("the config has no `{key}` for w_kc and w_vc"))
    };
    let (nope, value) = (count("qk_nope_head_dim")?, count("v_head_dim")?);
    let per_head = nope
        .checked_add(value)
        .ok_or("the head widths overflow u64")?;
    let rows = kv_b.shape.first().copied().unwrap_or(0);
    let heads_per_rank = (rows / per_head) / attn_tp.max(1);
    // bytes x nope / (nope + value), exact: the rank's rows are whole heads.
    let split = |part: u64| {
        (bytes as u128 * part as u128 / per_head as u128)
            .try_into()
            .map_err(|_| "w_kc's bytes overflow u64".to_owned())
    };
    let w_kc: u64 = split(nope)?;
    let w_vc: u64 = if heads_per_rank > 1 { split(value)? } else { 0 };
    w_kc.checked_add(w_vc)
        .ok_or_else(|| "w_kc and w_vc's bytes overflow u64".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dp_attention_splits_the_attention_over_its_group_and_the_rest_over_tp() {
        // A Qwen3: 8 heads of 64 (q 512 x 256), 4 KV heads (k, v 256 x 256),
        // o 256 x 512, an MLP of 512, a vocabulary of 1,024 x 256, bf16.
        let config = serde_json::json!({
            "architectures": ["Qwen3ForCausalLM"], "hidden_size": 256,
            "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64,
            "num_hidden_layers": 1, "vocab_size": 1024, "intermediate_size": 512,
            "max_position_embeddings": 128, "torch_dtype": "bfloat16",
            "tie_word_embeddings": true,
        });
        let tensor = |name: &str, shape: &[u64]| {
            StoredTensor::new(
                name.into(),
                "BF16".into(),
                shape.to_vec(),
                shape.iter().product::<u64>() * 2,
            )
        };
        let tensors = [
            tensor("model.embed_tokens.weight", &[1024, 256]),
            tensor("model.layers.0.self_attn.q_proj.weight", &[512, 256]),
            tensor("model.layers.0.self_attn.k_proj.weight", &[256, 256]),
            tensor("model.layers.0.self_attn.v_proj.weight", &[256, 256]),
            tensor("model.layers.0.self_attn.o_proj.weight", &[256, 512]),
            // Row-parallel layers' biases: whole on every rank, 512 B each.
            tensor("model.layers.0.self_attn.o_proj.bias", &[256]),
            tensor("model.layers.0.mlp.down_proj.bias", &[256]),
            tensor("model.layers.0.mlp.down_proj.weight", &[256, 512]),
        ];
        let bytes = |dp: u64| {
            loaded_weights_with_dp_attention(&config, &tensors, 4, dp).map(|l| l.tensor_bytes)
        };
        // tp 4: the vocabulary (1,024 x 256 x 2 B = 524,288) and the MLP's
        // down (262,144) split four ways: 131,072 + 65,536. Attention: q and
        // o 262,144 each, k and v 131,072 each: 786,432, split four ways:
        // 196,608 (one KV head a rank).
        assert_eq!(bytes(1), Ok(131_072 + 65_536 + 196_608 + 1_024));
        // dp 2: attention over 2 ranks (2 KV heads each): 393,216.
        assert_eq!(bytes(2), Ok(131_072 + 65_536 + 393_216 + 1_024));
        // dp 4: attention whole on every rank: 786,432.
        assert_eq!(bytes(4), Ok(131_072 + 65_536 + 786_432 + 1_024));
        assert!(bytes(3).unwrap_err().contains("must divide --tp-size 4"));
        // A class whose model splits attention over all of tp holds its dp 1
        // weights under DP attention.
        let mut llama = config.clone();
        llama["architectures"] = serde_json::json!(["LlamaForCausalLM"]);
        let at =
            |dp| loaded_weights_with_dp_attention(&llama, &tensors, 4, dp).map(|l| l.tensor_bytes);
        assert_eq!(at(2), Ok(131_072 + 65_536 + 196_608 + 1_024));
        assert_eq!(at(2), at(1));
        // Its attention still asserts all of tp divides the query heads.
        let refused = loaded_weights_with_dp_attention(&llama, &tensors, 16, 16).unwrap_err();
        assert!(
            refused.contains("that all 16 TP ranks divide its 8 query heads"),
            "{refused}"
        );
    }

    fn tensor(name: &str, dtype: &str, shape: &[u64], bytes: u64) -> StoredTensor {
        StoredTensor::new(name.into(), dtype.into(), shape.to_vec(), bytes)
    }

    fn llama(extra: serde_json::Value) -> Value {
        let mut config = serde_json::json!({
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "max_position_embeddings": 128,
            "torch_dtype": "float32",
            "tie_word_embeddings": true,
            "vocab_size": 100,
        });
        for (k, v) in extra.as_object().unwrap() {
            config[k] = v.clone();
        }
        config
    }

    #[test]
    fn loaded_weights_convert_to_the_served_dtype_and_skip_what_the_loader_skips() {
        let tensors = [
            // float32 on disk, float16 once served, the vocabulary padded to
            // 64 (VocabParallelEmbedding): 128 x 64 x 2 = 16,384.
            tensor("model.embed_tokens.weight", "F32", &[100, 64], 25_600),
            // Tied to the embedding: never loaded.
            tensor("lm_head.weight", "BF16", &[100, 64], 12_800),
            tensor(
                "model.layers.0.self_attn.rotary_emb.inv_freq",
                "F32",
                &[8],
                32,
            ),
            // 64 x 64 x 2 = 8,192.
            tensor(
                "model.layers.0.self_attn.q_proj.weight",
                "BF16",
                &[64, 64],
                8_192,
            ),
        ];
        let loaded = loaded_weights(&llama(serde_json::json!({})), &tensors, 1).unwrap();
        assert_eq!(loaded.dtype, "float16");
        assert_eq!(loaded.tensor_bytes, 16_384 + 8_192);
        assert_eq!(loaded.skipped_bytes, 12_800 + 32);
        // 128 positions x 16 (64 / 4 heads) x 4 bytes.
        assert_eq!(loaded.rotary_bytes, 8_192);
        assert_eq!(loaded.total(), Some(32_768));

        // Untied, the head is loaded, padded alike; bfloat16 is served as
        // it is: 16,384 x 2 + 8,192.
        let untied =
            llama(serde_json::json!({"tie_word_embeddings": false, "torch_dtype": "bfloat16"}));
        let loaded = loaded_weights(&untied, &tensors, 1).unwrap();
        assert_eq!(loaded.dtype, "bfloat16");
        assert_eq!((loaded.tensor_bytes, loaded.skipped_bytes), (40_960, 32));

        // Gemma's float32 is served in bfloat16; head_dim given is used:
        // 128 x 256 x 4 = 131,072.
        let gemma = serde_json::json!({
            "architectures": ["GemmaForCausalLM"], "model_type": "gemma",
            "hidden_size": 64, "num_attention_heads": 4, "head_dim": 256,
            "max_position_embeddings": 128, "torch_dtype": "float32", "vocab_size": 100,
        });
        let loaded = loaded_weights(&gemma, &tensors[..1], 1).unwrap();
        assert_eq!((loaded.dtype, loaded.tensor_bytes), ("bfloat16", 16_384));
        assert_eq!(loaded.rotary_bytes, 131_072);
        // Gemma given float16 keeps it.
        let mut gemma16 = gemma.clone();
        gemma16["torch_dtype"] = serde_json::json!("float16");
        assert_eq!(loaded_weights(&gemma16, &[], 1).unwrap().dtype, "float16");
        // No dtype at all: float16.
        let mut none = llama(serde_json::json!({}));
        none.as_object_mut().unwrap().remove("torch_dtype");
        assert_eq!(loaded_weights(&none, &[], 1).unwrap().dtype, "float16");
        // llama3 scaling keeps the one table.
        let llama3 =
            llama(serde_json::json!({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}));
        assert_eq!(loaded_weights(&llama3, &[], 1).unwrap().rotary_bytes, 8_192);
        // YaRN's table (YaRNScalingRotaryEmbedding) has `original x factor`
        // rows, the original count `max_position_embeddings` when the rope
        // section names none: 128 x 4 = 512 rows x 16 x 4 B; 32,768 x 2.5
        // = 81,920 rows when it names 32,768.
        let yarn = llama(serde_json::json!({"rope_scaling": {"type": "yarn", "factor": 4.0}}));
        assert_eq!(loaded_weights(&yarn, &[], 1).unwrap().rotary_bytes, 32_768);
        let yarn = llama(
            serde_json::json!({"rope_scaling": {"rope_type": "yarn", "factor": 2.5,
            "original_max_position_embeddings": 32_768}}),
        );
        assert_eq!(
            loaded_weights(&yarn, &[], 1).unwrap().rotary_bytes,
            81_920 * 16 * 4
        );
    }

    #[test]
    fn loaded_weights_refuse_what_kv_has_not_checked() {
        let refusal = |config: Value, tensors: &[StoredTensor]| {
            loaded_weights(&config, tensors, 1).unwrap_err()
        };
        let mut other = llama(serde_json::json!({}));
        other["architectures"] = serde_json::json!(["DbrxForCausalLM"]);
        assert!(refusal(other, &[]).contains("`DbrxForCausalLM`"));
        // Checked at tp 1 (its rotary table), not how SGLang shards it.
        let mut hunyuan = llama(serde_json::json!({}));
        hunyuan["architectures"] = serde_json::json!(["HunYuanDenseV1ForCausalLM"]);
        assert!(loaded_weights(&hunyuan, &[], 1).is_ok());
        let words = loaded_weights(&hunyuan, &[], 2).unwrap_err();
        assert!(
            words.contains("how SGLang shards `HunYuanDenseV1ForCausalLM`"),
            "{words}"
        );
        let quantized = llama(serde_json::json!({"quantization_config": {"quant_method": "fp8"}}));
        assert!(refusal(quantized, &[]).contains("quantized"));
        // A null quantization_config is none.
        assert!(loaded_weights(
            &llama(serde_json::json!({"quantization_config": null})),
            &[],
            1
        )
        .is_ok());
        let packed = [tensor(
            "model.layers.0.mlp.gate_proj.weight",
            "U8",
            &[64, 32],
            2_048,
        )];
        let words = refusal(llama(serde_json::json!({})), &packed);
        assert!(
            words.contains("`model.layers.0.mlp.gate_proj.weight` is stored as U8"),
            "{words}"
        );
        let dynamic =
            llama(serde_json::json!({"rope_scaling": {"type": "dynamic", "factor": 4.0}}));
        assert!(refusal(dynamic, &[]).contains("rope_type `dynamic`"));
        // Qwen2's attention reads no partial factor (Llama's does).
        let qwen2 = serde_json::json!(["Qwen2ForCausalLM"]);
        let mut partial = llama(serde_json::json!({"partial_rotary_factor": 0.5}));
        partial["architectures"] = qwen2.clone();
        let words = refusal(partial, &[]);
        assert!(words.contains("partial rotary dim"), "{words}");
        let mut nested = llama(
            serde_json::json!({"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.25}}),
        );
        nested["architectures"] = qwen2;
        assert!(refusal(nested, &[]).contains("partial rotary dim"));
        let mut no_positions = llama(serde_json::json!({}));
        no_positions
            .as_object_mut()
            .unwrap()
            .remove("max_position_embeddings");
        assert!(refusal(no_positions, &[]).contains("`max_position_embeddings`"));
        let no_heads = llama(serde_json::json!({"num_attention_heads": 0}));
        assert!(refusal(no_heads, &[]).contains("`num_attention_heads` is 0"));
        let huge = [tensor(
            "model.embed_tokens.weight",
            "F16",
            &[u64::MAX, 2],
            0,
        )];
        assert!(refusal(llama(serde_json::json!({})), &huge).contains("overflow"));
    }

    #[test]
    fn sglang_pads_a_vocabulary_the_ranks_do_not_divide() {
        // 32,000 rows (a multiple of 64) over 3 ranks: SGLang pads to 64 x 3
        // = 192 instead: 32,064 / 3 = 10,688 rows x 8 x 2 B = 171,008 a rank.
        let config = serde_json::json!({
            "architectures": ["LlamaForCausalLM"], "hidden_size": 24,
            "num_attention_heads": 3, "max_position_embeddings": 4,
            "vocab_size": 32000, "torch_dtype": "bfloat16",
        });
        let embed = [tensor(
            "model.embed_tokens.weight",
            "BF16",
            &[32000, 8],
            512_000,
        )];
        let loaded = loaded_weights(&config, &embed, 3).unwrap();
        assert_eq!(loaded.tensor_bytes, 171_008);
        // 3 KV heads over 2 ranks: refused in SGLang's words.
        assert_eq!(
            loaded_weights(&config, &embed, 2).unwrap_err(),
            "SGLang refuses: 3 is not divisible by 2"
        );
        // With 2 heads, 32,000 over 2 ranks needs no more padding: 16,000 x
        // 8 x 2.
        let mut two_heads = config.clone();
        two_heads["num_attention_heads"] = serde_json::json!(2);
        two_heads["hidden_size"] = serde_json::json!(16);
        assert_eq!(
            loaded_weights(&two_heads, &embed, 2).unwrap().tensor_bytes,
            256_000
        );
    }

    #[test]
    fn the_checked_classes_are_the_sharded_ones_then_sglangs_then_tp1_only() {
        let count = SHARDED_ARCHITECTURES.len() + SGLANG_ONLY_ARCHITECTURES.len() + 2;
        assert_eq!(CHECKED_ARCHITECTURES.len(), count);
        assert_eq!(
            CHECKED_ARCHITECTURES[..SHARDED_ARCHITECTURES.len()],
            *SHARDED_ARCHITECTURES
        );
        assert_eq!(
            CHECKED_ARCHITECTURES[SHARDED_ARCHITECTURES.len()..count - 2],
            *SGLANG_ONLY_ARCHITECTURES
        );
        assert_eq!(CHECKED_ARCHITECTURES[count - 2..], *TP1_ONLY_ARCHITECTURES);
        assert_eq!(TP1_ONLY_ARCHITECTURES[0], "HunYuanDenseV1ForCausalLM");
    }
}
