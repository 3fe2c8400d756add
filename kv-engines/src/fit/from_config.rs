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
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
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
        if architecture == "Qwen3ForCausalLM" {
            add("self_attn.q_norm.weight", vec![head_dim]);
            add("self_attn.k_norm.weight", vec![head_dim]);
        }
        add("mlp.gate_proj.weight", vec![intermediate, hidden]);
        add("mlp.up_proj.weight", vec![intermediate, hidden]);
        add("mlp.down_proj.weight", vec![hidden, intermediate]);
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
        // f32 [10, 8] = 320 B.
        assert_eq!(llama[0].bytes, 320);
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
    }
}
