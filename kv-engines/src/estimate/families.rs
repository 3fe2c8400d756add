//! vLLM 0.33's rules for a model family, where they are not its keys': what
//! it holds, whether its attention takes `--kv-cache-dtype`, pipeline
//! support, its SSM state dtype, and whether RoPE scaling moves its length.
//! A family is kv-core's ([`HfConfig::family`]: its loader defaults and
//! spellings); a family with no row here takes [`FamilyRules::DEFAULT`], and
//! a config kv-core reads by the generic keys alone has no rules at all.

use kv_core::HfConfig;

/// Whether a family's attention takes vLLM's `--kv-cache-dtype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KvCacheDtype {
    /// The format asked for (its `Attention` is built with the cache config).
    Asked,
    /// Never: K/V stay in the model dtype (or a `kv_cache_scheme`'s fp8);
    /// the words say why.
    Ignored(&'static str),
}

/// What a family holds, when its keys alone would not say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Holds {
    /// Whatever its keys say (attention, a pattern, ...); `kv_lora_rank`
    /// does not make it MLA.
    ByKeys,
    /// MLA where `kv_lora_rank` is set (vLLM's `is_deepseek_mla` list), else
    /// attention by its keys.
    Mla,
    /// Mamba state in every layer, no attention.
    MambaOnly,
    /// Attention and Mamba2 side by side in every layer, each with its cache
    /// (vLLM's `FalconH1ParallelHybrid`), whatever pattern keys say.
    MambaAndAttentionInEveryLayer,
    /// Kimi Delta Attention state in some layers, an MLA latent in the others
    /// (vLLM's Kimi K3 and BailingMoeV3 models, [`super::kda`]).
    KdaBesideMla,
    /// Step-5's sliding and sparse (DSA) layers, packed block-outermost
    /// ([`super::step5`]).
    Step5,
    /// DeepSeek-V4's sliding, compressed and indexer caches, each in
    /// blocks of its own, packed block-outermost ([`super::deepseek_v4`]).
    DeepseekV4,
    /// Inkling's local and global attention, each layer with a conv state
    /// paged beside it ([`super::inkling`]).
    Inkling,
    /// No attention and no state kv sizes: the words say what it keeps.
    Unsized(&'static str),
}

/// Where a family's SSM state dtype comes from in vLLM 0.33.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SsmDtype {
    /// The model dtype (`mamba_ssm_cache_dtype auto`).
    Model,
    /// The config's `mamba_ssm_cache_dtype`, else float32 (the words say
    /// whose default that is).
    ConfigElseF32(&'static str),
}

/// One family's rules.
#[derive(Clone, Copy, Debug)]
pub(super) struct FamilyRules {
    /// The `model_type` values, as kv-core's table of families names them.
    pub names: &'static [&'static str],
    pub holds: Holds,
    pub kv_cache_dtype: KvCacheDtype,
    /// vLLM's model class, where it lacks `SupportsPP`: vLLM 0.33 refuses
    /// `pipeline_parallel_size > 1` for it (`verify_with_parallel_config`).
    pub no_pipeline: Option<&'static str>,
    /// The SSM state's dtype when the config sets no `mamba_ssm_cache_dtype`.
    pub ssm_dtype: SsmDtype,
    /// Caches the family keeps where some keys are set, which kv does not
    /// size: the words say what they are.
    pub unsized_when: Option<fn(&HfConfig) -> Option<String>>,
}

impl FamilyRules {
    /// A family vLLM reads by its keys alone.
    pub const DEFAULT: FamilyRules = FamilyRules {
        names: &[],
        holds: Holds::ByKeys,
        kv_cache_dtype: KvCacheDtype::Asked,
        no_pipeline: None,
        ssm_dtype: SsmDtype::Model,
        unsized_when: None,
    };
}

/// The families whose rules are not [`FamilyRules::DEFAULT`].
const FAMILIES: &[FamilyRules] = &[
    FamilyRules {
        names: &["gemma3n_text", "gemma3n"],
        // vLLM 0.33 models/gemma3n.py, gemma3n_mm.py: neither class
        // implements SupportsPP.
        no_pipeline: Some("Gemma3nForConditionalGeneration / Gemma3nForCausalLM"),
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        names: &["falcon", "RefinedWeb", "RefinedWebModel"],
        kv_cache_dtype: KvCacheDtype::Ignored(
            "vLLM 0.33's Falcon builds its `Attention` without the cache config \
             (`model_executor/models/falcon.py`), so the K/V stay in the model dtype",
        ),
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        names: &["mamba", "falcon_mamba"],
        holds: Holds::MambaOnly,
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        names: &["mamba2"],
        holds: Holds::MambaOnly,
        // vLLM 0.33 models/mamba2.py: Mamba2ForCausalLM lacks SupportsPP
        // (MambaForCausalLM has it).
        no_pipeline: Some("Mamba2ForCausalLM"),
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        names: &["nemotron_h"],
        ssm_dtype: SsmDtype::ConfigElseF32("vLLM's default for NemotronH"),
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        names: &["zamba2"],
        // vLLM 0.33 models/zamba2.py: `Zamba2ForCausalLM(nn.Module,
        // HasInnerState, IsHybrid)`.
        no_pipeline: Some("Zamba2ForCausalLM"),
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        names: &["falcon_h1"],
        holds: Holds::MambaAndAttentionInEveryLayer,
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        names: &["whisper"],
        // vLLM 0.33 models/whisper.py: WhisperForConditionalGeneration
        // lacks SupportsPP.
        no_pipeline: Some("WhisperForConditionalGeneration"),
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        // vLLM 0.33 models/inkling: `local_layer_ids`, and a conv state in
        // every layer.
        names: &[
            "inkling_text",
            "inkling_model",
            "inkling_mm_model",
            "inkling",
        ],
        holds: Holds::Inkling,
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        // vLLM 0.33 models/bailing_moe_v3.py `_is_kda_layer`: every
        // `layer_group_size`-th layer (and the tail) is MLA, the rest KDA.
        names: &["bailing_hybrid"],
        holds: Holds::KdaBesideMla,
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        // vLLM 0.33 models/kimi_k3 (which serves Kimi-Linear too): the
        // layers of `linear_attn_config.kda_layers` run KDA, the others MLA.
        names: &["kimi_linear", "kimi_k3"],
        holds: Holds::KdaBesideMla,
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        // SGLang 0.5.23 configs/gigachat35.py `_resolve_layer_types`: the
        // layers of `layer_types` or `full_attention_layers` run MLA, every
        // other layer (all of them by default) Gated DeltaNet.
        names: &["gigachat3_5"],
        holds: Holds::Unsized(
            "GigaChat3.5 keeps Gated DeltaNet state in its linear layers (every layer but \
             `full_attention_layers`, all of them by default) beside an MLA latent in the \
             others, which kv's estimator does not size yet (read as MLA in every layer, it \
             would be sized wrong)",
        ),
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        names: &["zaya"],
        unsized_when: Some(zaya_unsized),
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        names: &["step5"],
        holds: Holds::Step5,
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        names: &["deepseek_v4"],
        holds: Holds::DeepseekV4,
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        names: &["rwkv", "rwkv5", "rwkv6", "rwkv7"],
        holds: Holds::Unsized(
            "RWKV has no attention: each layer keeps a fixed time-mix and channel-mix \
             state, which kv's estimator does not size; declare it with \
             `state(...)` in Rust",
        ),
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        names: &["qwen4_exp_text", "qwen4_exp"],
        unsized_when: Some(qwen4_exp_unsized),
        ..FamilyRules::DEFAULT
    },
    FamilyRules {
        // vLLM's `is_deepseek_mla` list, of the families kv knows.
        names: &["deepseek_v2", "deepseek_v3", "kimi_k2"],
        holds: Holds::Mla,
        ..FamilyRules::DEFAULT
    },
];

/// Qwen4-Exp's caches beside its Gated DeltaNet state and gated attention
/// (vLLM 0.33 models/qwen4_exp/nvidia): QSA's, where `indexer_n_heads` is
/// set (`common/qsa_cache.py`: a one-block ring of raw keys and a
/// compressed-key cache a layer), and PLE's short-conv state on the
/// `ple_layer_ids` layers (`ple_layer.py`).
fn qwen4_exp_unsized(hf: &HfConfig) -> Option<String> {
    if let Some((name, heads)) = hf.value("indexer_n_heads").filter(|(_, v)| !v.is_null()) {
        return Some(format!(
            "`{name}` {heads}: Qwen4-Exp's QSA keeps a one-block ring of raw keys and a \
             compressed-key cache beside each attention layer, which kv does not size yet"
        ));
    }
    match hf.value("ple_layer_ids") {
        Some((name, serde_json::Value::Array(ids))) if !ids.is_empty() => Some(format!(
            "`{name}` lists {} layer(s): Qwen4-Exp's PLE keeps a short-conv state on them, \
             which kv does not size yet",
            ids.len()
        )),
        _ => None,
    }
}

/// Zaya's compressed convolutional attention (SGLang 0.5.23 models/zaya.py,
/// `cca` true by default in transformers' ZayaConfig): a convolution state
/// beside each attention layer's K/V, in SGLang's state pool.
fn zaya_unsized(hf: &HfConfig) -> Option<String> {
    let cca = hf.value("cca").map(|(name, value)| (name, value.as_bool()));
    match cca {
        Some((_, Some(false))) => None,
        Some((name, _)) => Some(format!(
            "`{name}` is set: Zaya's compressed convolutional attention keeps a convolution \
             state beside each layer's K/V, which kv does not size yet"
        )),
        None => Some(
            "`cca` is not set (transformers' ZayaConfig defaults it to true): Zaya's \
             compressed convolutional attention keeps a convolution state beside each \
             layer's K/V, which kv does not size yet"
                .to_owned(),
        ),
    }
}

/// vLLM's rules for the config's family; `None` where kv-core reads it by
/// the generic keys alone (no family).
pub(super) fn rules(hf: &HfConfig) -> Option<FamilyRules> {
    let family = hf.family()?;
    Some(
        FAMILIES
            .iter()
            .find(|row| row.names.contains(&family))
            .copied()
            .unwrap_or(FamilyRules::DEFAULT),
    )
}

/// Whether the config's length keys are already scaled by its RoPE scaling:
/// vLLM skips the `factor` for every `model_type` containing "gemma3"
/// ("Gemma3's max_model_len (128K) is already scaled by RoPE scaling"), of
/// the families kv-core knows.
pub(super) fn rope_already_scaled(hf: &HfConfig) -> bool {
    hf.family().is_some_and(|name| name.contains("gemma3"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_where(wanted: impl Fn(&FamilyRules) -> bool) -> Vec<&'static str> {
        FAMILIES
            .iter()
            .filter(|row| wanted(row))
            .flat_map(|row| row.names.iter().copied())
            .collect()
    }

    fn config(model_type: &str) -> HfConfig {
        HfConfig::from_value(serde_json::json!({ "model_type": model_type }))
    }

    #[test]
    fn every_family_is_kv_cores_and_in_one_row() {
        let mut seen = std::collections::BTreeSet::new();
        for name in names_where(|_| true) {
            assert!(seen.insert(name), "{name} twice");
            assert_eq!(config(name).family(), Some(name), "not in kv-core's table");
        }
        assert!(rules(&config("not_a_model")).is_none());
        let llama = rules(&config("llama")).unwrap();
        assert_eq!(llama.holds, Holds::ByKeys);
    }

    #[test]
    fn only_falcon_ignores_the_kv_cache_dtype() {
        // vLLM 0.33: of the model files of the families kv knows, only
        // falcon.py builds its `Attention` without `cache_config`.
        let ignored = names_where(|row| matches!(row.kv_cache_dtype, KvCacheDtype::Ignored(_)));
        assert_eq!(ignored, ["falcon", "RefinedWeb", "RefinedWebModel"]);
    }

    #[test]
    fn only_nemotron_h_keeps_its_ssm_state_in_float32_by_default() {
        // vLLM 0.33: `NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype`.
        let f32_state = names_where(|row| row.ssm_dtype != SsmDtype::Model);
        assert_eq!(f32_state, ["nemotron_h"]);
    }

    #[test]
    fn the_rope_factor_is_skipped_for_gemma3_families_only() {
        let scaled: Vec<&str> = [
            "gemma3_text",
            "gemma3",
            "gemma3n_text",
            "gemma3n",
            "gemma2",
            "llama",
            // No family kv-core knows: read by the generic keys, scaled.
            "my_gemma3",
        ]
        .into_iter()
        .filter(|name| rope_already_scaled(&config(name)))
        .collect();
        assert_eq!(scaled, ["gemma3_text", "gemma3", "gemma3n_text", "gemma3n"]);
    }
}
