//! What vLLM 0.33's Gemma 4 (models/gemma4.py) builds that its checkpoint
//! does not say: the rope of each layer's kind, the V slot of a layer whose
//! K is its V, the K and V a KV-shared layer drops, and a router's buffer.

use serde_json::Value;

use super::BLOCK;
use crate::fit::config::layer_index;
use crate::stored_tensor::StoredTensor;

/// The class this file answers for.
pub(super) const CLASS: &str = "Gemma4ForCausalLM";

/// The per-layer inputs outside the layers (`Gemma4Model`), built on
/// every pipeline stage: it has no pipeline check.
pub(super) const PER_LAYER_INPUTS: [&str; 3] = [
    "model.embed_tokens_per_layer.",
    "model.per_layer_model_projection.",
    "model.per_layer_projection_norm.",
];

/// The kind (`full_attention` or `sliding_attention`, `layer_types[i]`)
/// and the head width of each layer in `layers`: a full layer's is
/// `global_head_dim` or its `per_layer_config` entry, as kv-core reads it.
/// KV-shared layers keep their kind's rope (`Gemma4Attention` builds it
/// for every layer).
pub(super) fn kinds(
    hf: &kv_core::HfConfig,
    text: &Value,
    layers: &std::ops::Range<u64>,
) -> Result<Vec<(&'static str, u64)>, String> {
    use kv_core::pattern::LayerKind;
    layers
        .clone()
        .map(|layer| {
            let (name, kind) = match layer_type(text, layer)? {
                "full_attention" => ("full_attention", LayerKind::FullAttention),
                "sliding_attention" => ("sliding_attention", LayerKind::SlidingAttention),
                other => {
                    return Err(format!(
                        "`layer_types[{layer}]` is `{other}`: Gemma 4's layers are \
                         `full_attention` or `sliding_attention`"
                    ))
                }
            };
            let head_dim = hf.kind_geometry(kind).map_err(|e| e.to_string())?.head_dim;
            Ok((name, head_dim))
        })
        .collect()
}

/// `layer_types[layer]`, which Gemma 4's classes index for every layer.
fn layer_type(text: &Value, layer: u64) -> Result<&str, String> {
    usize::try_from(layer)
        .ok()
        .and_then(|i| text.get("layer_types")?.as_array()?.get(i))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            format!("the config's `layer_types` has no name for layer {layer} (Gemma 4 reads one)")
        })
}

/// The first KV-shared layer: `num_hidden_layers - num_kv_shared_layers`.
fn first_kv_shared(text: &Value) -> Result<u64, String> {
    let layers = text
        .get("num_hidden_layers")
        .and_then(Value::as_u64)
        .ok_or("the config has no `num_hidden_layers`")?;
    let shared = match text.get("num_kv_shared_layers") {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_u64().ok_or("`num_kv_shared_layers` is not a count")?,
    };
    layers.checked_sub(shared).ok_or_else(|| {
        format!("`num_kv_shared_layers` ({shared}) is more than the {layers} layers")
    })
}

/// Whether the loader drops `name`: a KV-shared layer has no K or V
/// projection and no K norm, and gemma4.py's mapper maps the ones a
/// checkpoint still ships to nothing.
pub(super) fn dropped(text: &Value, name: &str) -> Result<bool, String> {
    let Some(layer) = layer_index(name)? else {
        return Ok(false);
    };
    if layer < first_kv_shared(text)? {
        return Ok(false);
    }
    Ok(["k_proj", "v_proj", "k_norm"]
        .iter()
        .any(|part| name.contains(&format!(".self_attn.{part}."))))
}

/// The V slots vLLM fills from K: with `attention_k_eq_v`, each full layer
/// before the KV-shared ones ships `k_proj` only, and its `qkv_proj` keeps
/// a V part the size of K all the same (the mapper loads K into both). One
/// `v_proj` the shape of its `k_proj` for each such layer the checkpoint
/// holds no `v_proj` for.
pub(super) fn v_slots(text: &Value, tensors: &[StoredTensor]) -> Result<Vec<StoredTensor>, String> {
    if text.get("attention_k_eq_v").and_then(Value::as_bool) != Some(true) {
        return Ok(Vec::new());
    }
    let first_shared = first_kv_shared(text)?;
    let mut slots = Vec::new();
    for tensor in tensors
        .iter()
        .filter(|t| t.name.contains(".self_attn.k_proj."))
    {
        let Some(layer) = layer_index(&tensor.name)? else {
            continue;
        };
        let v_name = tensor
            .name
            .replace(".self_attn.k_proj.", ".self_attn.v_proj.");
        if layer >= first_shared
            || layer_type(text, layer)? != "full_attention"
            || tensors.iter().any(|t| t.name == v_name)
        {
            continue;
        }
        slots.push(StoredTensor {
            name: v_name,
            ..tensor.clone()
        });
    }
    Ok(slots)
}

/// Whether the layers build a MoE block: gemma4.py asks whether
/// `num_experts` is set, not `enable_moe_block`. Each such layer's router
/// keeps one scalar buffer (`root_size`); a block without an expert width
/// is vLLM's ValueError.
pub(super) fn moe_layers(text: &Value) -> Result<bool, String> {
    if text.get("num_experts").is_none_or(Value::is_null) {
        return Ok(false);
    }
    let width = ["moe_intermediate_size", "expert_intermediate_size"]
        .iter()
        .any(|key| text.get(key).is_some_and(|v| !v.is_null()));
    if !width {
        return Err(
            "vLLM refuses: ValueError: Gemma4 MoE requires an expert intermediate size".into(),
        );
    }
    Ok(true)
}

/// The scalar buffers of a stage of `layers` layers: with per-layer
/// inputs (`hidden_size_per_layer_input` > 0), `Gemma4Model`'s
/// `embed_scale_per_layer`, `per_layer_input_scale` and
/// `per_layer_projection_scale`; with a MoE block, each layer's router's
/// `root_size`. A block each.
pub(super) fn buffer_bytes(text: &Value, layers: u64) -> Result<u64, String> {
    let per_layer_inputs = text
        .get("hidden_size_per_layer_input")
        .and_then(Value::as_u64)
        .is_some_and(|width| width > 0);
    let routers = if moe_layers(text)? { layers } else { 0 };
    u64::from(per_layer_inputs)
        .checked_mul(3)
        .and_then(|scalars| scalars.checked_add(routers))
        .and_then(|scalars| scalars.checked_mul(BLOCK))
        .ok_or_else(|| "Gemma 4's buffers' bytes overflow u64".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tensor(name: &str, shape: &[u64]) -> StoredTensor {
        StoredTensor {
            name: name.into(),
            dtype: "BF16".into(),
            shape: shape.to_vec(),
            bytes: shape.iter().product::<u64>() * 2,
        }
    }

    #[test]
    fn shared_layers_drop_k_v_and_the_k_norm_only() {
        let text = json!({"num_hidden_layers": 4, "num_kv_shared_layers": 2});
        let dropped = |name| dropped(&text, name).unwrap();
        assert!(dropped("model.layers.2.self_attn.k_proj.weight"));
        assert!(dropped("model.layers.3.self_attn.v_proj.weight"));
        assert!(dropped("model.layers.2.self_attn.k_norm.weight"));
        assert!(!dropped("model.layers.2.self_attn.q_proj.weight"));
        assert!(!dropped("model.layers.2.self_attn.q_norm.weight"));
        assert!(!dropped("model.layers.1.self_attn.k_proj.weight"));
        assert!(!dropped("model.norm.weight"));
        let none = json!({"num_hidden_layers": 4});
        assert!(!super::dropped(&none, "model.layers.3.self_attn.k_proj.weight").unwrap());
        let past = json!({"num_hidden_layers": 4, "num_kv_shared_layers": 5});
        let refused = super::dropped(&past, "model.layers.3.self_attn.k_proj.weight").unwrap_err();
        assert!(refused.contains("more than the 4 layers"), "{refused}");
    }

    #[test]
    fn k_eq_v_adds_a_v_slot_to_unshared_full_layers_without_one() {
        let text = json!({
            "num_hidden_layers": 4, "num_kv_shared_layers": 1, "attention_k_eq_v": true,
            "layer_types": ["sliding_attention", "full_attention", "full_attention",
                            "full_attention"],
        });
        let tensors = [
            tensor("model.layers.0.self_attn.k_proj.weight", &[32, 64]),
            tensor("model.layers.1.self_attn.k_proj.weight", &[64, 64]),
            tensor("model.layers.2.self_attn.k_proj.weight", &[64, 64]),
            tensor("model.layers.2.self_attn.v_proj.weight", &[64, 64]),
            tensor("model.layers.3.self_attn.k_proj.weight", &[64, 64]),
        ];
        let slots = v_slots(&text, &tensors).unwrap();
        // Layer 0 is sliding, 2 has its own V, 3 is KV-shared.
        assert_eq!(slots.len(), 1);
        assert_eq!(slots[0].name, "model.layers.1.self_attn.v_proj.weight");
        assert_eq!(
            (slots[0].shape.as_slice(), slots[0].bytes),
            (&[64, 64][..], 8_192)
        );
        let mut off = text.clone();
        off["attention_k_eq_v"] = json!(false);
        assert!(v_slots(&off, &tensors).unwrap().is_empty());
    }

    #[test]
    fn three_scalars_for_per_layer_inputs_and_one_a_router() {
        let ple = json!({"hidden_size_per_layer_input": 8});
        assert_eq!(buffer_bytes(&ple, 5).unwrap(), 3 * 512);
        assert_eq!(
            buffer_bytes(&json!({"hidden_size_per_layer_input": 0}), 5).unwrap(),
            0
        );
        let moe = json!({"hidden_size_per_layer_input": 8, "num_experts": 4,
                         "moe_intermediate_size": 16});
        assert_eq!(buffer_bytes(&moe, 5).unwrap(), (3 + 5) * 512);
        assert!(buffer_bytes(&moe, u64::MAX).is_err());
    }

    #[test]
    fn a_moe_block_needs_an_expert_width() {
        assert!(!moe_layers(&json!({"num_experts": null})).unwrap());
        assert!(!moe_layers(&json!({"enable_moe_block": true})).unwrap());
        assert!(moe_layers(&json!({"num_experts": 4, "moe_intermediate_size": 16})).unwrap());
        assert!(moe_layers(&json!({"num_experts": 4, "expert_intermediate_size": 16})).unwrap());
        let refused = moe_layers(&json!({"num_experts": 4})).unwrap_err();
        assert!(refused.contains("requires an expert intermediate size"));
    }
}
