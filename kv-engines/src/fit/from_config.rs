//! The tensors a Hugging Face checkpoint of a dense decoder stores, from
//! its config alone, for `kv fit --weights-from-config`: the classes whose
//! loaded weights kv has checked in both engines, with the names and shapes
//! their `save_pretrained` writes.

use serde_json::Value;

use super::config::{architecture, text_section};
use crate::stored_tensor::StoredTensor;

/// The classes whose checkpoints kv can write out from a config.
pub const FROM_CONFIG_ARCHITECTURES: &[&str] = &[
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "MixtralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
];

/// Every tensor the checkpoint of `config` stores, in its `torch_dtype`;
/// or why kv cannot say.
pub fn tensors_from_config(config: &Value) -> Result<Vec<StoredTensor>, String> {
    let text = text_section(config);
    let architecture = architecture(config);
    if !FROM_CONFIG_ARCHITECTURES.contains(&architecture) {
        return Err(format!(
            "kv computes the weights from a config for {} only, not `{architecture}`: give the \
             checkpoint's safetensors",
            FROM_CONFIG_ARCHITECTURES.join(", ")
        ));
    }
    let (dtype, width): (&str, u64) = match text
        .get("torch_dtype")
        .or_else(|| text.get("dtype"))
        .or_else(|| config.get("torch_dtype"))
        .and_then(Value::as_str)
    {
        Some("bfloat16") => ("BF16", 2),
        Some("float16") => ("F16", 2),
        Some("float32") => ("F32", 4),
        other => {
            return Err(format!(
                "the config's `torch_dtype` is {other:?}: the stored dtype is unknown, so kv \
                 cannot compute the weights (give the checkpoint's safetensors)"
            ))
        }
    };
    let count = |key: &str| {
        text.get(key)
            .and_then(Value::as_u64)
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("the config has no `{key}` above 0"))
    };
    let flag = |key: &str| text.get(key).and_then(Value::as_bool).unwrap_or(false);
    let hidden = count("hidden_size")?;
    let heads = count("num_attention_heads")?;
    let kv_heads = match text.get("num_key_value_heads") {
        Some(v) if !v.is_null() => count("num_key_value_heads")?,
        _ => heads,
    };
    let head_dim = match text.get("head_dim") {
        Some(v) if !v.is_null() => count("head_dim")?,
        _ => hidden / heads,
    };
    let intermediate = count("intermediate_size")?;
    let vocab = count("vocab_size")?;
    let layers = count("num_hidden_layers")?;
    let tied = flag("tie_word_embeddings")
        || config
            .get("tie_word_embeddings")
            .and_then(Value::as_bool)
            .unwrap_or(false);
    // Qwen2 always biases q, k and v; Llama and Mistral when
    // `attention_bias` says so (o too), and the MLP when `mlp_bias` does.
    let qkv_bias = architecture == "Qwen2ForCausalLM" || flag("attention_bias");
    let o_bias = architecture != "Qwen2ForCausalLM" && flag("attention_bias");
    let mlp_bias = flag("mlp_bias");
    let q = heads
        .checked_mul(head_dim)
        .ok_or("the query width overflows")?;
    let kv = kv_heads
        .checked_mul(head_dim)
        .ok_or("the KV width overflows")?;
    let moe = Moe::read(architecture, text)?;
    // Untrusted counts: every tensor is a name in memory, so the count is
    // bounded before any is made (the largest published: 128 experts x 94
    // layers).
    if layers > MAX_LAYERS {
        return Err(format!(
            "`num_hidden_layers` is {layers}; kv computes at most {MAX_LAYERS} layers"
        ));
    }
    let experts = moe.experts();
    if experts.saturating_mul(layers) > MAX_EXPERT_LAYERS {
        return Err(format!(
            "{experts} experts x {layers} layers; kv computes at most {MAX_EXPERT_LAYERS} \
             expert layers"
        ));
    }
    let mut shapes: Vec<(String, Vec<u64>)> =
        vec![("model.embed_tokens.weight".into(), vec![vocab, hidden])];
    for i in 0..layers {
        let p = format!("model.layers.{i}.");
        let mut add = |name: &str, shape: Vec<u64>| shapes.push((format!("{p}{name}"), shape));
        add("self_attn.q_proj.weight", vec![q, hidden]);
        add("self_attn.k_proj.weight", vec![kv, hidden]);
        add("self_attn.v_proj.weight", vec![kv, hidden]);
        add("self_attn.o_proj.weight", vec![hidden, q]);
        if qkv_bias {
            add("self_attn.q_proj.bias", vec![q]);
            add("self_attn.k_proj.bias", vec![kv]);
            add("self_attn.v_proj.bias", vec![kv]);
        }
        if o_bias {
            add("self_attn.o_proj.bias", vec![hidden]);
        }
        if matches!(architecture, "Qwen3ForCausalLM" | "Qwen3MoeForCausalLM") {
            add("self_attn.q_norm.weight", vec![head_dim]);
            add("self_attn.k_norm.weight", vec![head_dim]);
        }
        match moe.sparse(i) {
            Some((prefix, router, experts, width, [gate, up, down])) => {
                add(&format!("{prefix}.{router}.weight"), vec![experts, hidden]);
                for e in 0..experts {
                    let expert = format!("{prefix}.experts.{e}");
                    add(&format!("{expert}.{gate}.weight"), vec![width, hidden]);
                    add(&format!("{expert}.{up}.weight"), vec![width, hidden]);
                    add(&format!("{expert}.{down}.weight"), vec![hidden, width]);
                }
            }
            None => {
                add("mlp.gate_proj.weight", vec![intermediate, hidden]);
                add("mlp.up_proj.weight", vec![intermediate, hidden]);
                add("mlp.down_proj.weight", vec![hidden, intermediate]);
            }
        }
        if mlp_bias {
            add("mlp.gate_proj.bias", vec![intermediate]);
            add("mlp.up_proj.bias", vec![intermediate]);
            add("mlp.down_proj.bias", vec![hidden]);
        }
        add("input_layernorm.weight", vec![hidden]);
        add("post_attention_layernorm.weight", vec![hidden]);
    }
    shapes.push(("model.norm.weight".into(), vec![hidden]));
    if !tied {
        shapes.push(("lm_head.weight".into(), vec![vocab, hidden]));
    }
    shapes
        .into_iter()
        .map(|(name, shape)| {
            let bytes = shape
                .iter()
                .try_fold(width, |n, &d| n.checked_mul(d))
                .ok_or_else(|| format!("`{name}`: its bytes overflow u64"))?;
            Ok(StoredTensor::new(name, dtype.into(), shape, bytes))
        })
        .collect()
}

/// The most layers computed (llama.cpp's `LLAMA_MAX_LAYERS` is 512).
const MAX_LAYERS: u64 = 1024;
/// The most experts x layers computed.
const MAX_EXPERT_LAYERS: u64 = 65_536;

/// A mixture of experts' layout, as its class writes its checkpoint.
enum Moe {
    /// Every layer dense.
    Dense,
    /// Mixtral: `block_sparse_moe.gate` and experts `w1`, `w3`, `w2` of
    /// `intermediate_size` in every layer.
    Mixtral { experts: u64, width: u64 },
    /// Qwen3-MoE: `mlp.gate` and experts `gate_proj`, `up_proj`,
    /// `down_proj` of `moe_intermediate_size` in the layers that are sparse:
    /// not in `mlp_only_layers`, and `(i + 1) % decoder_sparse_step == 0`.
    Qwen3 {
        experts: u64,
        width: u64,
        step: u64,
        dense: Vec<u64>,
    },
}

/// A sparse layer's prefix, router name, experts, width and projections.
type Sparse = (&'static str, &'static str, u64, u64, [&'static str; 3]);

impl Moe {
    fn read(architecture: &str, text: &Value) -> Result<Moe, String> {
        let count = |key: &str| {
            text.get(key)
                .and_then(Value::as_u64)
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("the config has no `{key}` above 0"))
        };
        Ok(match architecture {
            "MixtralForCausalLM" => Moe::Mixtral {
                experts: count("num_local_experts")?,
                width: count("intermediate_size")?,
            },
            "Qwen3MoeForCausalLM" => Moe::Qwen3 {
                experts: count("num_experts")?,
                width: count("moe_intermediate_size")?,
                step: match text.get("decoder_sparse_step") {
                    Some(v) if !v.is_null() => count("decoder_sparse_step")?,
                    _ => 1,
                },
                dense: match text.get("mlp_only_layers") {
                    Some(Value::Array(layers)) => layers
                        .iter()
                        .map(|l| l.as_u64().ok_or("`mlp_only_layers` holds a non-index"))
                        .collect::<Result<_, _>>()?,
                    Some(Value::Null) | None => Vec::new(),
                    Some(_) => return Err("`mlp_only_layers` is not a list".into()),
                },
            },
            _ => Moe::Dense,
        })
    }

    fn experts(&self) -> u64 {
        match self {
            Moe::Dense => 0,
            Moe::Mixtral { experts, .. } | Moe::Qwen3 { experts, .. } => *experts,
        }
    }

    fn sparse(&self, layer: u64) -> Option<Sparse> {
        match self {
            Moe::Dense => None,
            Moe::Mixtral { experts, width } => Some((
                "block_sparse_moe",
                "gate",
                *experts,
                *width,
                ["w1", "w3", "w2"],
            )),
            Moe::Qwen3 {
                experts,
                width,
                step,
                dense,
            } => ((layer + 1).is_multiple_of(*step) && !dense.contains(&layer)).then_some((
                "mlp",
                "gate",
                *experts,
                *width,
                ["gate_proj", "up_proj", "down_proj"],
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_31_8b_is_its_published_index() {
        // The published model.safetensors.index.json: 291 tensors,
        // total_size 16,060,522,496.
        let config = serde_json::json!({
            "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
            "intermediate_size": 14336, "num_attention_heads": 32,
            "num_hidden_layers": 32, "num_key_value_heads": 8, "head_dim": 128,
            "vocab_size": 128256, "torch_dtype": "bfloat16", "tie_word_embeddings": false,
        });
        let tensors = tensors_from_config(&config).unwrap();
        assert_eq!(tensors.len(), 291);
        assert_eq!(tensors.iter().map(|t| t.bytes).sum::<u64>(), 16_060_522_496);
        assert!(tensors.iter().all(|t| t.dtype == "BF16"));
    }

    #[test]
    fn biases_norms_and_ties_by_class() {
        let base = |arch: &str, extra: serde_json::Value| {
            let mut c = serde_json::json!({
                "architectures": [arch], "hidden_size": 8, "intermediate_size": 16,
                "num_attention_heads": 2, "num_key_value_heads": 1, "num_hidden_layers": 1,
                "vocab_size": 10, "torch_dtype": "float32",
            });
            for (k, v) in extra.as_object().unwrap() {
                c[k] = v.clone();
            }
            tensors_from_config(&c).unwrap()
        };
        let names = |t: &[StoredTensor]| t.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        // Llama: embed, 4 attention, 3 MLP, 2 norms, the final norm, the head.
        let llama = base("LlamaForCausalLM", serde_json::json!({}));
        assert_eq!(llama.len(), 12);
        // f32 [10, 8] = 320 B; q: 2 heads of 8 / 2 = 4.
        assert_eq!(llama[0].bytes, 320);
        assert_eq!(llama[1].shape, vec![8, 8]);
        // Null KV heads and head_dim are the defaults: k is 2 heads x 4.
        let nulls = base(
            "LlamaForCausalLM",
            serde_json::json!({"num_key_value_heads": null, "head_dim": null}),
        );
        assert_eq!(nulls[2].shape, vec![8, 8]);
        // A text section nested under the model's config, tied at the top.
        let nested = tensors_from_config(&serde_json::json!({
            "architectures": ["LlamaForCausalLM"], "tie_word_embeddings": true,
            "text_config": {
                "hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2,
                "num_hidden_layers": 1, "vocab_size": 10, "torch_dtype": "float32",
            },
        }))
        .unwrap();
        assert!(!names(&nested).contains(&"lm_head.weight".to_owned()));
        assert_eq!(nested.len(), 11);
        let biased = base(
            "LlamaForCausalLM",
            serde_json::json!({"attention_bias": true, "mlp_bias": true}),
        );
        assert_eq!(biased.len(), 12 + 4 + 3);
        let qwen2 = names(&base(
            "Qwen2ForCausalLM",
            serde_json::json!({"tie_word_embeddings": true}),
        ));
        assert!(qwen2.contains(&"model.layers.0.self_attn.k_proj.bias".to_owned()));
        assert!(!qwen2.contains(&"model.layers.0.self_attn.o_proj.bias".to_owned()));
        assert!(!qwen2.contains(&"lm_head.weight".to_owned()));
        let qwen3 = base("Qwen3ForCausalLM", serde_json::json!({"head_dim": 16}));
        let q_norm = qwen3
            .iter()
            .find(|t| t.name.ends_with("q_norm.weight"))
            .unwrap();
        assert_eq!((q_norm.shape.clone(), q_norm.bytes), (vec![16], 64));
        // q: 2 heads x 16 = 32 rows of 8.
        assert_eq!(qwen3[1].shape, vec![32, 8]);
    }

    #[test]
    fn mixtures_of_experts_by_class() {
        // Mixtral-8x7B: per layer q, o 4,096^2, k, v 1,024 x 4,096 =
        // 41,943,040; 8 experts x 3 x 14,336 x 4,096 = 1,409,286,144; the
        // router 8 x 4,096; two norms 8,192: 1,451,270,144 x 32 =
        // 46,440,644,608; embedding and head 2 x 32,000 x 4,096 =
        // 262,144,000; the final norm 4,096: 46,702,792,704 parameters x 2.
        let mixtral = serde_json::json!({
            "architectures": ["MixtralForCausalLM"], "hidden_size": 4096,
            "intermediate_size": 14336, "num_attention_heads": 32,
            "num_key_value_heads": 8, "num_hidden_layers": 32, "num_local_experts": 8,
            "vocab_size": 32000, "torch_dtype": "bfloat16",
        });
        let tensors = tensors_from_config(&mixtral).unwrap();
        assert_eq!(tensors.len(), 1 + 32 * (4 + 1 + 24 + 2) + 2);
        assert_eq!(tensors.iter().map(|t| t.bytes).sum::<u64>(), 93_405_585_408);
        assert!(tensors
            .iter()
            .any(|t| t.name == "model.layers.31.block_sparse_moe.experts.7.w2.weight"));
        // Qwen3-MoE with 4 layers, 4 experts of 8, step 2 and layer 3 kept
        // dense: layer 1 alone is sparse (layers 0 and 2 are off the step).
        let qwen3 = serde_json::json!({
            "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 16,
            "intermediate_size": 32, "moe_intermediate_size": 8, "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 8, "num_hidden_layers": 4,
            "num_experts": 4, "decoder_sparse_step": 2, "mlp_only_layers": [3],
            "vocab_size": 10, "torch_dtype": "bfloat16",
        });
        let tensors = tensors_from_config(&qwen3).unwrap();
        let experts: Vec<&str> = tensors
            .iter()
            .filter(|t| t.name.contains(".experts."))
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(experts.len(), 4 * 3);
        assert!(experts
            .iter()
            .all(|n| n.starts_with("model.layers.1.mlp.experts.")));
        let router = tensors
            .iter()
            .find(|t| t.name == "model.layers.1.mlp.gate.weight")
            .unwrap();
        assert_eq!(router.shape, vec![4, 16]);
        let dense = tensors
            .iter()
            .filter(|t| t.name.ends_with("mlp.gate_proj.weight"))
            .count();
        assert_eq!(dense, 3);
        // A null step is the default 1: every layer but 3 sparse.
        let mut stepless = qwen3.clone();
        stepless["decoder_sparse_step"] = serde_json::Value::Null;
        let tensors = tensors_from_config(&stepless).unwrap();
        assert_eq!(
            tensors
                .iter()
                .filter(|t| t.name.ends_with("mlp.gate.weight"))
                .count(),
            3
        );
        // No experts is refused, not read as a model of empty layers.
        let mut none = qwen3.clone();
        none["num_experts"] = serde_json::json!(0);
        assert!(tensors_from_config(&none)
            .unwrap_err()
            .contains("`num_experts` above 0"));
        let mut bad = qwen3.clone();
        bad["mlp_only_layers"] = serde_json::json!("3");
        assert!(tensors_from_config(&bad)
            .unwrap_err()
            .contains("not a list"));
        bad["mlp_only_layers"] = serde_json::json!([-1]);
        assert!(tensors_from_config(&bad).unwrap_err().contains("non-index"));
        bad.as_object_mut().unwrap().remove("mlp_only_layers");
        bad.as_object_mut().unwrap().remove("num_experts");
        assert!(tensors_from_config(&bad)
            .unwrap_err()
            .contains("`num_experts` above 0"));
    }

    #[test]
    fn what_it_cannot_compute_is_named() {
        let mut c = serde_json::json!({
            "architectures": ["GemmaForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
            "num_attention_heads": 2, "num_hidden_layers": 1, "vocab_size": 10,
            "torch_dtype": "bfloat16",
        });
        assert!(tensors_from_config(&c)
            .unwrap_err()
            .contains("not `GemmaForCausalLM`"));
        c["architectures"] = serde_json::json!(["LlamaForCausalLM"]);
        c.as_object_mut().unwrap().remove("torch_dtype");
        assert!(tensors_from_config(&c)
            .unwrap_err()
            .contains("`torch_dtype` is None"));
        c["torch_dtype"] = serde_json::json!("bfloat16");
        c["intermediate_size"] = serde_json::json!(0);
        assert!(tensors_from_config(&c)
            .unwrap_err()
            .contains("`intermediate_size` above 0"));
        c["intermediate_size"] = serde_json::json!(u64::MAX);
        assert!(tensors_from_config(&c).unwrap_err().contains("overflow"));
        // Counts that would make billions of names are refused first.
        c["intermediate_size"] = serde_json::json!(16);
        c["num_hidden_layers"] = serde_json::json!(1u64 << 40);
        assert!(tensors_from_config(&c)
            .unwrap_err()
            .contains("at most 1024 layers"));
        c["num_hidden_layers"] = serde_json::json!(1024);
        assert_eq!(tensors_from_config(&c).unwrap().len(), 1 + 1024 * 9 + 2);
        c["architectures"] = serde_json::json!(["MixtralForCausalLM"]);
        c["num_local_experts"] = serde_json::json!(65);
        assert!(tensors_from_config(&c)
            .unwrap_err()
            .contains("65 experts x 1024 layers"));
        c["num_local_experts"] = serde_json::json!(64);
        assert!(tensors_from_config(&c).is_ok());
    }
}
