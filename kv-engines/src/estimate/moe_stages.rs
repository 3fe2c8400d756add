//! vLLM 0.33's refusal of a pipeline stage that holds no MoE layer: these
//! MoE classes read their expert counts off one of the stage's own MoE
//! layers once the model is built (`extract_moe_parameters`, an
//! `example_moe`) and fail when the stage has none. The stage's layers are
//! vLLM's partition ([`kv_core::Parallel::stage_layers`]).

use kv_core::{HfConfig, KvError, Parallel};
use serde_json::Value;

/// Which layers of a class build a MoE block.
#[derive(Clone, Copy, PartialEq)]
enum MoeLayers {
    /// Layers from `first_k_dense_replace` on, where `n_routed_experts` is
    /// set (glm4_moe.py `Glm4MoeDecoderLayer`).
    PastFirstKDense,
    /// Layers from `num_dense_layers` on (lfm2_moe.py).
    PastNumDense,
    /// Layers not in `mlp_only_layers` whose `(i + 1)` is a multiple of
    /// `decoder_sparse_step`, where `num_experts` > 0 (qwen3_moe.py,
    /// qwen3_next.py).
    SparseStep,
    /// `E` in `hybrid_override_pattern`, `moe` in `layers_block_type`
    /// (transformers' form); none at all builds no MoE and is not checked
    /// (nemotron_h.py `has_moe`).
    NemotronPattern,
}

/// Each class, its rule, and the error it raises (file and line in vLLM
/// 0.33's model_executor/models).
const CLASSES: &[(&str, MoeLayers, &str)] = &[
    (
        "Glm4MoeForCausalLM",
        MoeLayers::PastFirstKDense,
        "RuntimeError: No Glm4MoE layer found in model.layers. (glm4_moe.py:509)",
    ),
    (
        "Lfm2MoeForCausalLM",
        MoeLayers::PastNumDense,
        "RuntimeError: No Lfm2MoeSparseMoeBlock layer found in the model.layers. \
         (lfm2_moe.py:616)",
    ),
    (
        "Qwen3MoeForCausalLM",
        MoeLayers::SparseStep,
        "RuntimeError: No Qwen3MoE layer found in the model.layers. (qwen3_moe.py:607)",
    ),
    (
        "Qwen3NextForCausalLM",
        MoeLayers::SparseStep,
        "RuntimeError: No Qwen3Next layer found in the model.layers. (qwen3_next.py:800)",
    ),
    (
        "NemotronHForCausalLM",
        MoeLayers::NemotronPattern,
        "AssertionError: assert example_moe is not None (nemotron_h.py:869)",
    ),
    (
        "NemotronHPuzzleForCausalLM",
        MoeLayers::NemotronPattern,
        "AssertionError: assert example_moe is not None (nemotron_h.py:869)",
    ),
];

/// vLLM's refusal where one of `pp` stages of this config's class holds no
/// MoE layer, naming the first such stage.
pub(crate) fn check(hf: &HfConfig, pp: u64) -> Result<(), String> {
    (0..pp).try_for_each(|stage| check_stage(hf, pp, stage))
}

/// vLLM's refusal where stage `stage` (0-based) of `pp` holds no MoE layer
/// of this config's class, with the stage's layers in the message. A
/// config of another class, or whose MoE layers kv cannot read, is not
/// judged here (its figures are refused or given elsewhere).
pub(crate) fn check_stage(hf: &HfConfig, pp: u64, stage: u64) -> Result<(), String> {
    let Some(&(class, rule, error)) = CLASSES
        .iter()
        .find(|(class, ..)| hf.architectures().contains(class))
    else {
        return Ok(());
    };
    let Some(moe) = moe_layers(hf, rule).filter(|moe| !moe.is_empty()) else {
        return Ok(());
    };
    if rule == MoeLayers::NemotronPattern && !moe.contains(&true) {
        return Ok(());
    }
    let layers = u64::try_from(moe.len()).map_err(|_| "the layer count overflows u64")?;
    let parts = Parallel::new(1, pp)
        .and_then(|p| p.stage_layers(layers))
        .map_err(|e: KvError| e.to_string())?;
    let index = usize::try_from(stage).map_err(|_| "the stage overflows usize")?;
    let Some(&part) = parts.get(index) else {
        return Err(format!("stage {stage} of {pp} does not exist"));
    };
    let start: u64 = parts[..index].iter().sum();
    let end = start + part;
    // Both within `moe.len()`: the partition sums to it.
    if !moe[start as usize..end as usize].contains(&true) {
        return Err(format!(
            "pp {pp}: stage {stage} holds layers {start} to {}, none of them MoE, and vLLM's \
             {class} reads its expert counts off one of the stage's MoE layers (vLLM: \
             \"{error}\")",
            end.saturating_sub(1)
        ));
    }
    Ok(())
}

/// Whether each layer builds a MoE block, `None` where the config does not
/// say in the keys the class reads. A key the config leaves out takes
/// transformers 5's default for the class (`first_k_dense_replace` 1,
/// `num_dense_layers` 2, `decoder_sparse_step` 1, `num_experts` 128 or
/// 512).
fn moe_layers(hf: &HfConfig, rule: MoeLayers) -> Option<Vec<bool>> {
    let count = |key: &str| hf.value(key).map(|(_, v)| v.as_u64());
    let layers = usize::try_from(count("num_hidden_layers").flatten().unwrap_or(0)).ok()?;
    let from = |first: u64| Some((0..layers).map(|i| i as u64 >= first).collect());
    match rule {
        MoeLayers::PastFirstKDense => {
            // `n_routed_experts is not None`; kv reads a null one as
            // unset, and the two differ (no MoE, or transformers' 128):
            // neither is judged.
            hf.value("n_routed_experts")?;
            from(count("first_k_dense_replace").unwrap_or(Some(1))?)
        }
        MoeLayers::PastNumDense => from(count("num_dense_layers").unwrap_or(Some(2))?),
        MoeLayers::SparseStep => {
            let experts = count("num_experts").unwrap_or(Some(1))?;
            let step = count("decoder_sparse_step").unwrap_or(Some(1))?;
            let dense: Vec<u64> = match hf.value("mlp_only_layers") {
                None => Vec::new(),
                Some((_, Value::Array(list))) => {
                    list.iter().map(Value::as_u64).collect::<Option<_>>()?
                }
                Some(_) => return None,
            };
            if step == 0 {
                return None;
            }
            Some(
                (0..layers as u64)
                    .map(|i| !dense.contains(&i) && experts > 0 && (i + 1) % step == 0)
                    .collect(),
            )
        }
        MoeLayers::NemotronPattern => {
            if let Some((_, Value::String(pattern))) = hf.value("hybrid_override_pattern") {
                return Some(pattern.chars().map(|c| c == 'E').collect());
            }
            let (_, Value::Array(kinds)) = hf
                .value("layers_block_type")
                .or_else(|| hf.value("layer_types"))?
            else {
                return None;
            };
            Some(kinds.iter().map(|k| k.as_str() == Some("moe")).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(value: Value) -> HfConfig {
        HfConfig::from_value(value)
    }

    #[test]
    fn glm_4_5_needs_a_moe_layer_on_every_stage() {
        let glm = |first: u64| {
            config(
                json!({"architectures": ["Glm4MoeForCausalLM"], "num_hidden_layers": 4,
                          "first_k_dense_replace": first, "n_routed_experts": 8}),
            )
        };
        // Two stages of two: layers 0-1 and 2-3.
        assert!(check(&glm(1), 2).is_ok());
        let refused = check(&glm(2), 2).unwrap_err();
        assert!(
            refused.contains("stage 0 holds layers 0 to 1, none of them MoE")
                && refused.contains("No Glm4MoE layer found in model.layers."),
            "{refused}"
        );
        assert!(check(&glm(2), 1).is_ok());
        assert!(check(&glm(4), 1).is_err());
        // transformers' default: the first layer dense.
        let default = config(json!({"architectures": ["Glm4MoeForCausalLM"],
            "num_hidden_layers": 2, "n_routed_experts": 8}));
        assert!(check(&default, 2)
            .unwrap_err()
            .contains("stage 0 holds layers 0 to 0"));
        // Routed experts null or unset: not judged.
        for experts in [json!(null), json!(8)] {
            let mut value = json!({"architectures": ["Glm4MoeForCausalLM"],
                "num_hidden_layers": 4, "first_k_dense_replace": 4});
            if !experts.is_null() {
                assert!(check(&config(value.clone()), 1).is_ok());
            }
            value["n_routed_experts"] = experts.clone();
            assert_eq!(check(&config(value), 1).is_err(), !experts.is_null());
        }
    }

    #[test]
    fn qwen3_moe_reads_its_sparse_step_and_mlp_only_layers() {
        let qwen = |extra: Value| {
            let mut value = json!({"architectures": ["Qwen3MoeForCausalLM"],
                                   "num_hidden_layers": 4, "num_experts": 8});
            value
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            config(value)
        };
        assert!(check(&qwen(json!({})), 4).is_ok());
        // Every second layer: 1 and 3; four stages of one.
        let refused = check(&qwen(json!({"decoder_sparse_step": 2})), 4).unwrap_err();
        assert!(refused.contains("stage 0 holds layers 0 to 0"), "{refused}");
        assert!(check(&qwen(json!({"decoder_sparse_step": 2})), 2).is_ok());
        let refused = check(&qwen(json!({"mlp_only_layers": [2, 3]})), 2).unwrap_err();
        assert!(refused.contains("stage 1 holds layers 2 to 3"), "{refused}");
        assert!(check(&qwen(json!({"num_experts": 0})), 1).is_err());
        // What kv cannot read is not judged here.
        assert!(check(&qwen(json!({"decoder_sparse_step": 0})), 4).is_ok());
        assert!(check(&qwen(json!({"mlp_only_layers": "2"})), 4).is_ok());
    }

    #[test]
    fn nemotron_h_reads_its_pattern_in_either_form() {
        let pattern = config(json!({"architectures": ["NemotronHForCausalLM"],
            "hybrid_override_pattern": "M*E-"}));
        assert!(check(&pattern, 1).is_ok());
        let refused = check(&pattern, 2).unwrap_err();
        assert!(
            refused.contains("stage 0 holds layers 0 to 1")
                && refused.contains("nemotron_h.py:869"),
            "{refused}"
        );
        // No MoE anywhere builds none: nothing to read.
        let dense = config(json!({"architectures": ["NemotronHForCausalLM"],
            "hybrid_override_pattern": "M*M-"}));
        assert!(check(&dense, 2).is_ok());
        let listed = config(json!({"architectures": ["NemotronHPuzzleForCausalLM"],
            "layers_block_type": ["linear_attention", "moe", "full_attention", "mlp"]}));
        assert!(check(&listed, 2)
            .unwrap_err()
            .contains("stage 1 holds layers 2 to 3"));
        assert!(check(&listed, 1).is_ok());
    }

    #[test]
    fn lfm2_moe_counts_its_dense_layers_and_other_classes_pass() {
        let lfm = config(json!({"architectures": ["Lfm2MoeForCausalLM"],
            "num_hidden_layers": 4, "num_dense_layers": 2}));
        assert!(check(&lfm, 1).is_ok());
        assert!(check(&lfm, 2)
            .unwrap_err()
            .contains("Lfm2MoeSparseMoeBlock"));
        let llama = config(json!({"architectures": ["LlamaForCausalLM"],
            "num_hidden_layers": 4}));
        assert!(check(&llama, 4).is_ok());
    }
}
