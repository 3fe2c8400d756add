//! One row per model family, holding every rule that is the family's as its
//! loader reads it: the defaults its loader applies to keys a published
//! `config.json` leaves out, how its KV heads and head dim are spelled, its
//! Mamba layers, short-conv width. A new family is one row. Each row with
//! defaults names its source, and [`HfConfig::notes`](super::HfConfig::notes)
//! says which defaults were applied. How an engine treats a family (what it
//! holds, its KV format, pipeline support) is the engine's: kv-engines keeps
//! those rules, by [`HfConfig::family`](super::HfConfig::family).

use crate::pattern::LayerKind;

/// How a family's KV heads are spelled, beyond the generic keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KvHeads {
    /// `n_head_kv`, `num_kv_heads`, `num_key_value_heads`,
    /// `multi_query_group_num`, else `num_attention_heads` (vLLM's
    /// `get_total_num_kv_heads`).
    Generic,
    /// `multi_query: true` means one KV head unless
    /// `new_decoder_architecture` (vLLM's `FalconModelArchConfigConvertor`;
    /// GPT-BigCode's attention builds one KV head under `multi_query`).
    MultiQueryFlag,
    /// `attn_config.kv_n_heads`, else `num_attention_heads` (vLLM's MPT model
    /// and `DbrxModelArchConfigConvertor`).
    AttnConfig,
    /// `multi_query_group_num` when `multi_query_attention`, else
    /// `num_attention_heads`; head dim `kv_channels` (vLLM's ChatGLM model).
    ChatGlm,
    /// Generic heads; head dim `2 x hidden_size / num_attention_heads`, which
    /// transformers' `Zamba2Config` sets as `attention_head_dim` over any the
    /// config writes (the shared block attends over the hidden state
    /// concatenated with the embeddings; vLLM's
    /// `Zamba2ModelArchConfigConvertor.get_head_size` reads it).
    Zamba2,
    /// MLA-shaped keys, plain heads cached: `num_attention_heads` K/V heads
    /// of `qk_nope_head_dim + qk_rope_head_dim`, V padded to that width
    /// (vLLM's `MiniCPM3Attention`).
    MiniCpm3,
}

/// Which Mamba a config describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MambaVersion {
    /// Mamba (selective scan): ssm state `(d_inner, d_state)`, conv
    /// `(d_inner, d_conv)`; no heads or groups.
    Mamba1,
    /// Mamba2 (SSD): ssm state `(heads, head_dim, d_state)`, conv over
    /// `d_inner + 2 x n_groups x d_state` channels.
    Mamba2,
}

/// A family's Mamba layers, as its vLLM model builds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MambaRule {
    pub version: MambaVersion,
    /// Mamba in every layer: the plain keys `num_heads`, `head_dim`,
    /// `intermediate_size` are Mamba's (in a hybrid they may be attention's
    /// or the MLP's, and are not read).
    pub only: bool,
    /// The mixer is `heads x head_dim` wide whatever `expand x hidden` says
    /// (vLLM's NemotronH builds it with `intermediate_size = mamba_num_heads
    /// * mamba_head_dim`: Nemotron-H-4B's 112 x 64 = 7,168, not 2 x 3,072).
    pub inner_from_heads: bool,
    /// Layer lists say `linear_attention` for its Mamba2 layers: transformers
    /// 5 saves Nemotron-H's `M` so (`NemotronHConfig._pattern_to_list`), and
    /// vLLM reads it back as `M` (the `hybrid_override_pattern` property).
    pub listed_as_linear_attention: bool,
}

const fn mamba(version: MambaVersion, only: bool) -> Option<MambaRule> {
    Some(MambaRule {
        version,
        only,
        inner_from_heads: false,
        listed_as_linear_attention: false,
    })
}

/// One family.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ModelType {
    /// The `model_type` values (a multimodal wrapper's and its text model's).
    pub names: &'static [&'static str],
    /// Keys the loader fills when the config leaves them out, as JSON text.
    pub defaults: &'static [(&'static str, &'static str)],
    /// Where the defaults come from, e.g. "transformers Gemma3TextConfig default".
    pub source: &'static str,
    pub kv_heads: KvHeads,
    /// Its Mamba layers, where it has any.
    pub mamba: Option<MambaRule>,
    /// The key that gives its short-conv (`conv`) layers' width: LFM2's
    /// `ShortConv` is `conv_dim` wide, LFM2-MoE's `hidden_size` wide (vLLM's
    /// `Lfm2ForCausalLM` and `Lfm2MoeForCausalLM`
    /// `get_mamba_state_shape_from_config`).
    pub short_conv_width: Option<&'static str>,
    /// `layer_types` names of the family's own, and the kind each is to
    /// the loader.
    pub layer_kind_names: &'static [(&'static str, LayerKind)],
}

const fn generic(names: &'static [&'static str]) -> ModelType {
    ModelType {
        names,
        defaults: &[],
        source: "",
        kv_heads: KvHeads::Generic,
        mamba: None,
        short_conv_width: None,
        layer_kind_names: &[],
    }
}

/// The table. Defaults are transformers 5.25's config classes (their
/// dataclass fields and `__post_init__`); spellings are as vLLM 0.33 reads
/// them.
pub(crate) const MODEL_TYPES: &[ModelType] = &[
    ModelType {
        // Gemma2Config: layer_types alternate, sliding first ((i + 1) % 2).
        defaults: &[
            ("sliding_window_pattern", "2"),
            ("sliding_window", "4096"),
            ("num_attention_heads", "8"),
            ("num_key_value_heads", "4"),
            ("head_dim", "256"),
            ("max_position_embeddings", "8192"),
        ],
        source: "transformers Gemma2Config default",
        ..generic(&["gemma2"])
    },
    ModelType {
        // Gemma3TextConfig.__post_init__: sliding_window_pattern 6.
        defaults: &[
            ("sliding_window_pattern", "6"),
            ("sliding_window", "4096"),
            ("num_attention_heads", "8"),
            ("num_key_value_heads", "4"),
            ("head_dim", "256"),
            ("max_position_embeddings", "131072"),
        ],
        source: "transformers Gemma3TextConfig default",
        ..generic(&["gemma3_text", "gemma3"])
    },
    ModelType {
        // HYV3Config (HY-V3, Hunyuan 3): its published config writes no
        // length; transformers' class (which vLLM and SGLang load) says
        // 131,072.
        defaults: &[
            ("max_position_embeddings", "131072"),
            ("num_hidden_layers", "80"),
            ("num_attention_heads", "64"),
            ("num_key_value_heads", "8"),
            ("head_dim", "128"),
        ],
        source: "transformers HYV3Config default",
        ..generic(&["hy_v3"])
    },
    ModelType {
        // Gemma4TextConfig: without `layer_types`, every 6th layer full (and
        // transformers forces the last to full, which kv does not: published
        // configs write `layer_types`). Its full-attention layers take
        // `global_head_dim` (512) and, under `attention_k_eq_v`,
        // `num_global_key_value_heads` (config/per_layer.rs).
        defaults: &[
            ("sliding_window_pattern", "6"),
            ("sliding_window", "512"),
            ("num_hidden_layers", "30"),
            ("num_attention_heads", "8"),
            ("num_key_value_heads", "4"),
            ("head_dim", "256"),
            ("max_position_embeddings", "131072"),
        ],
        source: "transformers Gemma4TextConfig default",
        ..generic(&["gemma4_text", "gemma4"])
    },
    ModelType {
        // Gemma3nTextConfig: every 5th layer full; the last
        // num_kv_shared_layers reuse earlier layers' K/V.
        defaults: &[
            ("sliding_window_pattern", "5"),
            ("sliding_window", "512"),
            ("num_kv_shared_layers", "15"),
            ("num_hidden_layers", "35"),
            ("num_attention_heads", "8"),
            ("num_key_value_heads", "2"),
            ("head_dim", "256"),
            ("max_position_embeddings", "32768"),
        ],
        source: "transformers Gemma3nTextConfig default",
        ..generic(&["gemma3n_text", "gemma3n"])
    },
    ModelType {
        // Llama4TextConfig: a NoPE (full attention) layer every 4th, the
        // rest chunked over attention_chunk_size.
        defaults: &[
            ("attention_chunk_size", "8192"),
            ("no_rope_layer_interval", "4"),
            ("num_attention_heads", "40"),
            ("num_key_value_heads", "8"),
            ("head_dim", "128"),
            ("max_position_embeddings", "131072"),
        ],
        source: "transformers Llama4TextConfig default",
        ..generic(&["llama4_text", "llama4"])
    },
    ModelType {
        defaults: &[
            ("multi_query", "true"),
            ("new_decoder_architecture", "false"),
        ],
        source: "transformers FalconConfig default",
        kv_heads: KvHeads::MultiQueryFlag,
        ..generic(&["falcon", "RefinedWeb", "RefinedWebModel"])
    },
    ModelType {
        defaults: &[("multi_query", "true")],
        source: "transformers GPTBigCodeConfig default",
        kv_heads: KvHeads::MultiQueryFlag,
        ..generic(&["gpt_bigcode"])
    },
    ModelType {
        kv_heads: KvHeads::AttnConfig,
        ..generic(&["mpt", "dbrx"])
    },
    ModelType {
        // ChatGLM only: model_type `glm` is GLM-4 in transformers form
        // (GlmForCausalLM), whose KV heads are `num_key_value_heads`.
        kv_heads: KvHeads::ChatGlm,
        ..generic(&["chatglm"])
    },
    ModelType {
        mamba: mamba(MambaVersion::Mamba1, true),
        ..generic(&["mamba", "falcon_mamba"])
    },
    ModelType {
        defaults: &[("max_position_embeddings", "262144")],
        source: "transformers JambaConfig default",
        mamba: mamba(MambaVersion::Mamba1, false),
        ..generic(&["jamba"])
    },
    ModelType {
        mamba: mamba(MambaVersion::Mamba2, true),
        ..generic(&["mamba2"])
    },
    ModelType {
        mamba: mamba(MambaVersion::Mamba2, false),
        ..generic(&["bamba"])
    },
    ModelType {
        mamba: mamba(MambaVersion::Mamba2, false),
        ..generic(&["granitemoehybrid"])
    },
    ModelType {
        // NemotronHConfig: `head_dim` 128 whatever hidden / heads is (the
        // published configs write `attention_head_dim`, which it does not
        // read); layers from `hybrid_override_pattern` (layers.rs).
        defaults: &[
            ("head_dim", "128"),
            ("num_attention_heads", "32"),
            ("num_key_value_heads", "8"),
            ("mamba_num_heads", "128"),
            ("mamba_head_dim", "64"),
            ("n_groups", "8"),
            ("ssm_state_size", "128"),
            ("conv_kernel", "4"),
            ("expand", "2"),
        ],
        source: "transformers NemotronHConfig default",
        mamba: Some(MambaRule {
            version: MambaVersion::Mamba2,
            only: false,
            inner_from_heads: true,
            listed_as_linear_attention: true,
        }),
        ..generic(&["nemotron_h"])
    },
    ModelType {
        kv_heads: KvHeads::Zamba2,
        mamba: mamba(MambaVersion::Mamba2, false),
        ..generic(&["zamba2"])
    },
    ModelType {
        mamba: mamba(MambaVersion::Mamba2, false),
        ..generic(&["falcon_h1"])
    },
    ModelType {
        defaults: &[("max_target_positions", "448")],
        source: "transformers WhisperConfig default",
        ..generic(&["whisper"])
    },
    ModelType {
        // `kv_lora_rank` is set, but vLLM caches plain K/V heads.
        kv_heads: KvHeads::MiniCpm3,
        ..generic(&["minicpm3"])
    },
    ModelType {
        short_conv_width: Some("conv_dim"),
        ..generic(&["lfm2"])
    },
    ModelType {
        short_conv_width: Some("hidden_size"),
        ..generic(&["lfm2_moe"])
    },
    ModelType {
        defaults: &[("max_position_embeddings", "131072")],
        source: "transformers MistralConfig default",
        ..generic(&["mistral"])
    },
    ModelType {
        defaults: &[("max_position_embeddings", "32768")],
        source: "transformers Qwen3NextConfig default",
        ..generic(&["qwen3_next"])
    },
    ModelType {
        // vLLM 0.33 models/qwen4_exp/nvidia/model.py:94 `_QSA_LAYER_TYPES`:
        // these layers run Qwen3-Next's gated full attention (with QSA's
        // caches beside it where `indexer_n_heads` is set).
        layer_kind_names: &[
            ("indexed_attention", LayerKind::FullAttention),
            ("qwen_sparse_attention", LayerKind::FullAttention),
        ],
        ..generic(&["qwen4_exp_text", "qwen4_exp"])
    },
    // Families read by the generic keys alone: known, so not reported as
    // unknown (an engine may still have rules of its own for them).
    generic(&[
        "rwkv",
        "rwkv5",
        "rwkv6",
        "rwkv7",
        "deepseek_v2",
        "deepseek_v3",
        "kimi_k2",
        "llama",
        "mixtral",
        "ministral",
        "mistral3",
        "starcoder2",
        "qwen2",
        "qwen2_moe",
        "qwen2_vl",
        "qwen2_5_vl",
        "qwen3",
        "qwen3_moe",
        "qwen3_vl",
        "phi",
        "phi3",
        "phimoe",
        "gemma",
        "cohere",
        "cohere2",
        "olmo",
        "olmo2",
        "internlm2",
        "granite",
        "granitemoe",
        "gpt2",
        "gpt_neox",
        "gptj",
        "opt",
        "bloom",
        "baichuan",
        "yi",
        "exaone",
        "hunyuan",
        "hunyuan_v1_dense",
        "hunyuan_v1_moe",
        "llava",
        "internvl_chat",
        "mllama",
        "gpt_oss",
        "glm",
        "glm4",
        "glm4_moe",
        // BailingMoeV3's text model: kv-engines refuses it by name (KDA).
        "bailing_hybrid",
        // Kimi-Linear and Kimi K3's text model: kv-engines refuses them by
        // name (KDA).
        "kimi_linear",
        "kimi_k3",
        // Step-5: kv-engines reads its sliding and sparse (DSA) layers.
        "step5",
        // DeepSeek-V4: kv-engines reads its sliding, compressed and indexer
        // caches.
        "deepseek_v4",
        // GigaChat3.5 (MLA beside Gated DeltaNet) and Zaya (CCA's
        // convolution state): kv-engines refuses them by name.
        "gigachat3_5",
        "zaya",
        // Inkling (vLLM's own InklingModelConfig and its multimodal
        // wrapper): kv-engines reads its `local_layer_ids` and conv state.
        "inkling_text",
        "inkling_model",
        "inkling_mm_model",
        "inkling",
    ]),
];

/// The `model_type`s of the families `wanted` picks, in table order.
pub(crate) fn names_where(wanted: impl Fn(&ModelType) -> bool) -> Vec<&'static str> {
    MODEL_TYPES
        .iter()
        .filter(|row| wanted(row))
        .flat_map(|row| row.names.iter().copied())
        .collect()
}

/// The row for `model_type`, if kv knows it.
pub(crate) fn model_type(name: &str) -> Option<&'static ModelType> {
    MODEL_TYPES.iter().find(|row| row.names.contains(&name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_is_json_and_every_row_with_defaults_names_its_source() {
        for row in MODEL_TYPES {
            for (key, text) in row.defaults {
                assert!(
                    serde_json::from_str::<serde_json::Value>(text).is_ok(),
                    "{key}: {text}"
                );
            }
            assert_eq!(
                row.defaults.is_empty(),
                row.source.is_empty(),
                "{:?}",
                row.names
            );
        }
    }

    #[test]
    fn the_state_rules_are_vllms_model_classes() {
        use MambaVersion::{Mamba1, Mamba2};
        // vLLM 0.33: MambaMixer in mamba.py and jamba.py; MambaMixer2 in
        // mamba2.py, granitemoehybrid.py, nemotron_h.py, zamba2.py,
        // falcon_h1.py (and bamba.py, which 0.33 no longer registers).
        let version =
            |v: MambaVersion| names_where(|row| row.mamba.is_some_and(|m| m.version == v));
        assert_eq!(version(Mamba1), ["mamba", "falcon_mamba", "jamba"]);
        assert_eq!(
            version(Mamba2),
            [
                "mamba2",
                "bamba",
                "granitemoehybrid",
                "nemotron_h",
                "zamba2",
                "falcon_h1"
            ]
        );
        let only = names_where(|row| row.mamba.is_some_and(|m| m.only));
        assert_eq!(only, ["mamba", "falcon_mamba", "mamba2"]);
        // NemotronH alone: a heads x head_dim mixer, Mamba2 layers listed as
        // linear_attention.
        for rule in [
            |m: MambaRule| m.inner_from_heads,
            |m: MambaRule| m.listed_as_linear_attention,
        ] {
            assert_eq!(
                names_where(|row| row.mamba.is_some_and(rule)),
                ["nemotron_h"]
            );
        }
        let widths: Vec<(&str, &str)> = MODEL_TYPES
            .iter()
            .filter_map(|row| Some((row.names[0], row.short_conv_width?)))
            .collect();
        assert_eq!(widths, [("lfm2", "conv_dim"), ("lfm2_moe", "hidden_size")]);
    }

    #[test]
    fn no_model_type_is_in_two_rows() {
        let mut seen = std::collections::BTreeSet::new();
        for row in MODEL_TYPES {
            for name in row.names {
                assert!(seen.insert(*name), "{name} twice");
            }
        }
        assert_eq!(
            model_type("gemma3").unwrap().source,
            "transformers Gemma3TextConfig default"
        );
        assert!(model_type("not_a_model").is_none());
    }
}
