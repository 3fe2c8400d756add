//! What a vLLM 0.33 model class asserts when vLLM builds it on Hopper, of
//! its config or of the attention backend vLLM picks for it: a config the
//! class fails on never starts, so it is refused in vLLM's words (file and
//! line) before any cache is sized. Only an architecture named in the
//! config's `architectures` is judged.

use kv_core::KvError;
use serde_json::{Map, Value};

use super::settings::VLLM_VERSION;

/// One class's assertion: the architectures it is built for, and the words
/// of its failure where the config (or the platform) fails it.
struct ClassCheck {
    architectures: &'static [&'static str],
    fails: fn(&Top) -> Option<String>,
}

/// The config's top level, values given on the command line first.
struct Top<'a> {
    config: &'a Value,
    given: &'a Map<String, Value>,
}

impl Top<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        self.given.get(key).or_else(|| self.config.get(key))
    }

    /// `key` of the text model: `text_config`'s, else the top level's.
    fn text(&self, key: &str) -> Option<&Value> {
        self.given
            .get(key)
            .or_else(|| self.config.get("text_config")?.get(key))
            .or_else(|| self.config.get(key))
    }
}

/// Qwen4-Exp's output gates (qwen_gdn_linear_attn.py:659).
const QWEN4_EXP_GATES: [&str; 3] = ["silu", "swish", "sigmoid"];

const CHECKS: &[ClassCheck] = &[
    ClassCheck {
        // cohere_compass.py:2326 `CohereCompassForCausalLM.__init__`:
        // `assert config.tie_word_embeddings`. The language model's config
        // takes the top level's value (`VllmConfig.with_hf_config` copies it
        // for a multimodal model, config/vllm.py:1011), and transformers'
        // `CohereCompassConfig` defaults it to false.
        architectures: &["CohereCompassForConditionalGeneration"],
        fails: |top| {
            let tied = top.get("tie_word_embeddings").and_then(Value::as_bool);
            (tied != Some(true)).then(|| {
                let given = match top.get("tie_word_embeddings") {
                    Some(value) => format!("`tie_word_embeddings` is {value}"),
                    None => "`tie_word_embeddings` is not set at the top level (transformers' \
                             CohereCompassConfig defaults it to false)"
                        .to_owned(),
                };
                format!(
                    "{given}, and CohereCompassForCausalLM asserts it \
                     (AssertionError: assert config.tie_word_embeddings, \
                     model_executor/models/cohere_compass.py:2326)"
                )
            })
        },
    },
    ClassCheck {
        // models/flint/model.py:318: the fused kernel writes the cache in
        // FlashInfer's layout, and the class asserts that FlashInfer runs its
        // attention. On Hopper vLLM 0.33 picks FLASH_ATTN for its layers (a
        // bf16 cache with sinks, which FlashAttention 3 takes), so the class
        // fails unless FlashInfer is asked for.
        architectures: &["FlintForCausalLM"],
        fails: |_| {
            Some(
                "on Hopper vLLM picks FLASH_ATTN for Flint's attention, and FlintForCausalLM \
                 asserts FlashInfer (AssertionError: Flint requires FlashInfer attention, \
                 models/flint/model.py:318); with `--attention-backend FLASHINFER` vLLM builds \
                 it, a backend whose figures kv has not checked for Flint"
                    .to_owned(),
            )
        },
    },
    ClassCheck {
        // qwen_gdn_linear_attn.py:659-664: `getattr(config,
        // "output_gate_type", "silu")` then an assert; transformers'
        // Qwen4ExpTextConfig defaults the key to None (its own model reads
        // `output_gate_type or hidden_act`), so a config without it fails.
        architectures: &["Qwen4ExpForCausalLM", "Qwen4ExpForConditionalGeneration"],
        fails: |top| {
            let gate = top.text("output_gate_type");
            let named = gate
                .and_then(Value::as_str)
                .is_some_and(|g| QWEN4_EXP_GATES.contains(&g));
            (!named).then(|| {
                let given = match gate {
                    Some(value) => format!("`output_gate_type` is {value}"),
                    None => "`output_gate_type` is not set (transformers' Qwen4ExpTextConfig \
                             defaults it to None)"
                        .to_owned(),
                };
                format!(
                    "{given}, and Qwen4-Exp's Gated DeltaNet asserts one of {} (AssertionError: \
                     unsupported output_gate_type, \
                     model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py:662)",
                    QWEN4_EXP_GATES.join(", ")
                )
            })
        },
    },
    ClassCheck {
        // models/step5/nvidia/model.py:1854-1858: the layout is the
        // `sparse_config` section's, and a checkpoint without one is refused.
        architectures: &["Step5ForCausalLM", "Step5ForConditionalGeneration"],
        fails: |top| {
            top.text("sparse_config")
                .is_none_or(Value::is_null)
                .then(|| {
                    "the config has no `sparse_config` section (NotImplementedError: Step5 \
                 requires a checkpoint with a sparse_config section; dense-only checkpoints \
                 are not supported, models/step5/nvidia/model.py:1855)"
                        .to_owned()
                })
        },
    },
    ClassCheck {
        // models/kimi_k3/nvidia/model.py:744: an MLA layer asserts
        // `mla_use_nope` ("Kimi-K3 MLA (MultiHeadLatentAttention) is
        // NoPE-only"); every layer is MLA where `linear_attn_config` is
        // unset, and the layers `kda_layers` leaves out where it is.
        architectures: &["KimiK3ForConditionalGeneration"],
        fails: |top| {
            let nope = top.text("mla_use_nope").and_then(Value::as_bool) == Some(true);
            (!nope && kimi_has_mla_layers(top)).then(|| {
                "`mla_use_nope` is not true and the model has MLA layers, which Kimi K3's \
                 class asserts (AssertionError: Kimi-K3 MLA (MultiHeadLatentAttention) is \
                 NoPE-only, models/kimi_k3/nvidia/model.py:744)"
                    .to_owned()
            })
        },
    },
    ClassCheck {
        // model_executor/models/bailing_moe_v3.py:686: every KDA layer
        // raises unless `no_kda_lora` (read with a default of false).
        architectures: &[
            "BailingMoeV3ForCausalLM",
            "BailingMoeV3VLForConditionalGeneration",
        ],
        fails: |top| {
            let no_lora = top.text("no_kda_lora").and_then(Value::as_bool) == Some(true);
            (!no_lora && bailing_has_kda_layers(top)).then(|| {
                "`no_kda_lora` is not true, and BailingMoeV3 builds its KDA layers only with \
                 it (ValueError: BailingMoeV3 KDA currently expects no_kda_lora=True, \
                 model_executor/models/bailing_moe_v3.py:687)"
                    .to_owned()
            })
        },
    },
];

/// Whether BailingMoeV3 has a KDA layer: one not the last of a whole group
/// of `layer_group_size` (unreadable counts leave it to the estimate).
fn bailing_has_kda_layers(top: &Top) -> bool {
    let count = |key| top.text(key).and_then(Value::as_u64);
    match (count("num_hidden_layers"), count("layer_group_size")) {
        (Some(layers), Some(group)) => group > 1 && layers >= group,
        _ => true,
    }
}

/// Whether a Kimi config has a layer `linear_attn_config.kda_layers` does
/// not list (1-based, within `num_hidden_layers`).
fn kimi_has_mla_layers(top: &Top) -> bool {
    let layers = top.text("num_hidden_layers").and_then(Value::as_u64);
    let listed = top
        .text("linear_attn_config")
        .and_then(|linear| linear.get("kda_layers"))
        .and_then(Value::as_array);
    match (layers, listed) {
        (Some(layers), Some(listed)) => {
            let mut kda: Vec<u64> = listed
                .iter()
                .filter_map(Value::as_u64)
                .filter(|n| (1..=layers).contains(n))
                .collect();
            kda.sort_unstable();
            kda.dedup();
            (kda.len() as u64) < layers
        }
        _ => true,
    }
}

/// vLLM's refusal where the model class the config names fails on it.
pub(super) fn check(config: &Value, given: &Map<String, Value>) -> Result<(), KvError> {
    let top = Top { config, given };
    let named: Vec<&str> = top
        .get("architectures")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // vLLM builds the first architecture it serves.
    let Some(check) = named.first().and_then(|first| {
        CHECKS
            .iter()
            .find(|check| check.architectures.contains(first))
    }) else {
        return Ok(());
    };
    match (check.fails)(&top) {
        Some(words) => Err(would_not_start(format!(
            "{words}; kv's figures follow vLLM's rules, so it gives none"
        ))),
        None => Ok(()),
    }
}

/// vLLM's refusal while building the model class, in its words: `vLLM 0.33
/// would not start: PROBLEM`.
pub(super) fn would_not_start(problem: impl std::fmt::Display) -> KvError {
    KvError::Config {
        what: "model class",
        problem: format!("vLLM {VLLM_VERSION} would not start: {problem}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(config: Value, given: Map<String, Value>) -> Option<String> {
        check(&config, &given).err().map(|error| error.to_string())
    }

    #[test]
    fn cohere_compass_needs_tied_embeddings_at_the_top_level() {
        let none = Map::new();
        let untied = serde_json::json!({
            "architectures": ["CohereCompassForConditionalGeneration"],
            "tie_word_embeddings": false,
            "text_config": {"tie_word_embeddings": true},
        });
        let words = refused(untied.clone(), none.clone()).expect("refused");
        assert!(words.contains("`tie_word_embeddings` is false"), "{words}");
        assert!(words.contains("cohere_compass.py:2326"), "{words}");
        // The text config's own value does not count: the top level's does.
        let unset = serde_json::json!({
            "architectures": ["CohereCompassForConditionalGeneration"],
            "text_config": {"tie_word_embeddings": true},
        });
        let words = refused(unset, none.clone()).expect("refused");
        assert!(words.contains("defaults it to false"), "{words}");
        let tied = serde_json::json!({
            "architectures": ["CohereCompassForConditionalGeneration"],
            "tie_word_embeddings": true,
        });
        assert_eq!(refused(tied, none.clone()), None);
        // A value given on the command line counts as the config's.
        let mut given = Map::new();
        given.insert("tie_word_embeddings".into(), Value::Bool(true));
        assert_eq!(refused(untied, given), None);
    }

    #[test]
    fn qwen4_exp_needs_a_gate_vllm_knows() {
        let none = Map::new();
        let config = |gate: Value| {
            serde_json::json!({
                "architectures": ["Qwen4ExpForCausalLM"],
                "text_config": {"output_gate_type": gate},
            })
        };
        let words = refused(config(Value::Null), none.clone()).expect("refused");
        assert!(words.contains("`output_gate_type` is null"), "{words}");
        assert!(words.contains("qwen_gdn_linear_attn.py:662"), "{words}");
        let words = refused(config("gelu".into()), none.clone()).expect("refused");
        assert!(words.contains("`output_gate_type` is \"gelu\""), "{words}");
        let unset = serde_json::json!({"architectures": ["Qwen4ExpForConditionalGeneration"]});
        let words = refused(unset, none.clone()).expect("refused");
        assert!(words.contains("defaults it to None"), "{words}");
        for gate in QWEN4_EXP_GATES {
            assert_eq!(refused(config(gate.into()), none.clone()), None);
        }
        // At the top level of a text-only config.
        let flat = serde_json::json!({
            "architectures": ["Qwen4ExpForCausalLM"], "output_gate_type": "sigmoid",
        });
        assert_eq!(refused(flat, none), None);
    }

    #[test]
    fn step5_needs_a_sparse_config_section() {
        let none = Map::new();
        let dense = serde_json::json!({"architectures": ["Step5ForCausalLM"]});
        let words = refused(dense, none.clone()).expect("refused");
        assert!(words.contains("no `sparse_config` section"), "{words}");
        let null = serde_json::json!({
            "architectures": ["Step5ForConditionalGeneration"],
            "text_config": {"sparse_config": null},
        });
        assert!(refused(null, none.clone()).is_some());
        let sparse = serde_json::json!({
            "architectures": ["Step5ForCausalLM"], "sparse_config": {"enabled": false},
        });
        assert_eq!(refused(sparse, none), None);
    }

    #[test]
    fn kimi_k3s_mla_layers_must_be_nope() {
        let none = Map::new();
        let config = |nope: bool, kda: Value| {
            serde_json::json!({
                "architectures": ["KimiK3ForConditionalGeneration"],
                "text_config": {
                    "num_hidden_layers": 3, "mla_use_nope": nope,
                    "linear_attn_config": {"kda_layers": kda},
                },
            })
        };
        let words = refused(config(false, serde_json::json!([1, 2])), none.clone());
        assert!(words.expect("refused").contains("model.py:744"));
        assert_eq!(
            refused(config(true, serde_json::json!([1, 2])), none.clone()),
            None
        );
        // Every layer KDA (numbers past the model count for none): no MLA.
        let all = serde_json::json!([3, 1, 2, 2, 9]);
        assert_eq!(refused(config(false, all), none.clone()), None);
        // No `linear_attn_config`: every layer MLA.
        let bare = serde_json::json!({"architectures": ["KimiK3ForConditionalGeneration"]});
        assert!(refused(bare, none).is_some());
    }

    #[test]
    fn bailing_needs_no_kda_lora_where_it_has_kda_layers() {
        let none = Map::new();
        let config = |no_lora: bool, layers: u64, group: u64| {
            serde_json::json!({
                "architectures": ["BailingMoeV3VLForConditionalGeneration"],
                "text_config": {
                    "num_hidden_layers": layers, "layer_group_size": group,
                    "no_kda_lora": no_lora,
                },
            })
        };
        let words = refused(config(false, 20, 5), none.clone()).expect("refused");
        assert!(words.contains("bailing_moe_v3.py:687"), "{words}");
        assert_eq!(refused(config(true, 20, 5), none.clone()), None);
        // Groups of one, or fewer layers than a group: every layer MLA.
        assert_eq!(refused(config(false, 20, 1), none.clone()), None);
        assert_eq!(refused(config(false, 4, 5), none.clone()), None);
        let unread = serde_json::json!({"architectures": ["BailingMoeV3ForCausalLM"]});
        assert!(refused(unread, none).is_some());
    }

    #[test]
    fn flint_is_refused_on_hoppers_backend_and_others_are_not_judged() {
        let none = Map::new();
        let flint = serde_json::json!({"architectures": ["FlintForCausalLM"]});
        let words = refused(flint, none.clone()).expect("refused");
        assert!(words.contains("model.py:318"), "{words}");
        assert!(words.contains("--attention-backend FLASHINFER"), "{words}");
        // Only the first architecture is the one vLLM builds.
        let second = serde_json::json!({
            "architectures": ["LlamaForCausalLM", "FlintForCausalLM"],
        });
        assert_eq!(refused(second, none.clone()), None);
        assert_eq!(refused(serde_json::json!({}), none), None);
    }
}
