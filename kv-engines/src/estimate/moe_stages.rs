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
    check_stages(hf, pp, None)
}

/// vLLM's refusal where stage `stage` (0-based) of `pp` holds no MoE layer
/// of this config's class.
pub(crate) fn check_stage(hf: &HfConfig, pp: u64, stage: u64) -> Result<(), String> {
    check_stages(hf, pp, Some(stage))
}

/// The stages of `pp` (or the one given) checked in order, the message
/// naming the stage and its layers. A config of another class, or whose
/// MoE layers kv cannot read, is not judged here (its figures are refused
/// or given elsewhere). Nothing is allocated per layer: a config's layer
/// count is untrusted.
fn check_stages(hf: &HfConfig, pp: u64, only: Option<u64>) -> Result<(), String> {
    let Some(&(class, rule, error)) = CLASSES
        .iter()
        .find(|(class, ..)| hf.architectures().contains(class))
    else {
        return Ok(());
    };
    let Some(layout) = MoeLayout::read(hf, rule).filter(|l| l.layers() > 0) else {
        return Ok(());
    };
    if rule == MoeLayers::NemotronPattern && !layout.any_in(0, layout.layers()) {
        return Ok(());
    }
    let parts = Parallel::new(1, pp)
        .and_then(|p| p.stage_layers(layout.layers()))
        .map_err(|e: KvError| e.to_string())?;
    if only.is_some_and(|stage| stage >= pp) {
        return Err(format!(
            "stage {} of {pp} does not exist",
            only.unwrap_or(pp)
        ));
    }
    let mut start = 0u64;
    for (stage, part) in (0u64..).zip(parts) {
        // The partition sums to the layer count: no overflow.
        let end = start + part;
        if only.is_none_or(|asked| asked == stage) && !layout.any_in(start, end) {
            return Err(format!(
                "pp {pp}: stage {stage} holds layers {start} to {}, none of them MoE, and \
                 vLLM's {class} reads its expert counts off one of the stage's MoE layers \
                 (vLLM: \"{error}\")",
                end.saturating_sub(1)
            ));
        }
        start = end;
    }
    Ok(())
}

/// Which of a config's layers build a MoE block, as its class reads them.
enum MoeLayout {
    /// Layers `first..layers`.
    From { layers: u64, first: u64 },
    /// Layers whose `(i + 1)` is a multiple of `step`, not in `dense`,
    /// where there are experts at all.
    Sparse {
        layers: u64,
        step: u64,
        dense: Vec<u64>,
        experts: bool,
    },
    /// One entry a layer, from a list or pattern the config spells out.
    Listed(Vec<bool>),
}

impl MoeLayout {
    /// `None` where the config does not say in the keys the class reads. A
    /// key the config leaves out takes transformers 5's default for the
    /// class (`first_k_dense_replace` 1, `num_dense_layers` 2,
    /// `decoder_sparse_step` 1, `num_experts` 128 or 512).
    fn read(hf: &HfConfig, rule: MoeLayers) -> Option<MoeLayout> {
        let count = |key: &str| hf.value(key).map(|(_, v)| v.as_u64());
        let layers = || count("num_hidden_layers").flatten();
        match rule {
            MoeLayers::PastFirstKDense => {
                // `n_routed_experts is not None`; kv reads a null one as
                // unset, and the two differ (no MoE, or transformers' 128):
                // neither is judged.
                hf.value("n_routed_experts")?;
                Some(MoeLayout::From {
                    layers: layers()?,
                    first: count("first_k_dense_replace").unwrap_or(Some(1))?,
                })
            }
            MoeLayers::PastNumDense => Some(MoeLayout::From {
                layers: layers()?,
                first: count("num_dense_layers").unwrap_or(Some(2))?,
            }),
            MoeLayers::SparseStep => {
                let experts = count("num_experts").unwrap_or(Some(1))? > 0;
                let step = count("decoder_sparse_step").unwrap_or(Some(1))?;
                let dense = match hf.value("mlp_only_layers") {
                    None => Vec::new(),
                    Some((_, Value::Array(list))) => {
                        list.iter().map(Value::as_u64).collect::<Option<_>>()?
                    }
                    Some(_) => return None,
                };
                (step > 0).then_some(MoeLayout::Sparse {
                    layers: layers()?,
                    step,
                    dense,
                    experts,
                })
            }
            MoeLayers::NemotronPattern => {
                // As long as the config's own text: bounded by its size.
                if let Some((_, Value::String(pattern))) = hf.value("hybrid_override_pattern") {
                    return Some(MoeLayout::Listed(
                        pattern.chars().map(|c| c == 'E').collect(),
                    ));
                }
                let (_, Value::Array(kinds)) = hf
                    .value("layers_block_type")
                    .or_else(|| hf.value("layer_types"))?
                else {
                    return None;
                };
                Some(MoeLayout::Listed(
                    kinds.iter().map(|k| k.as_str() == Some("moe")).collect(),
                ))
            }
        }
    }

    fn layers(&self) -> u64 {
        match self {
            MoeLayout::From { layers, .. } | MoeLayout::Sparse { layers, .. } => *layers,
            MoeLayout::Listed(listed) => listed.len() as u64,
        }
    }

    /// Whether a layer of `start..end` builds a MoE block.
    fn any_in(&self, start: u64, end: u64) -> bool {
        match self {
            MoeLayout::From { first, .. } => start.max(*first) < end,
            MoeLayout::Sparse {
                step,
                dense,
                experts,
                ..
            } => {
                // The candidates are `k x step - 1`; each one passed over is
                // in `dense`, so this runs at most `dense.len() + 1` times.
                let mut layer = (start + 1).div_ceil(*step).saturating_mul(*step) - 1;
                while *experts && layer < end {
                    if !dense.contains(&layer) {
                        return true;
                    }
                    let Some(next) = layer.checked_add(*step) else {
                        return false;
                    };
                    layer = next;
                }
                false
            }
            MoeLayout::Listed(listed) => listed
                .get(start as usize..end as usize)
                .is_some_and(|range| range.contains(&true)),
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
    fn a_huge_layer_count_is_arithmetic_not_a_list() {
        // 2^60 layers: nothing is allocated or walked a layer at a time.
        let glm = config(json!({"architectures": ["Glm4MoeForCausalLM"],
            "num_hidden_layers": 1u64 << 60, "first_k_dense_replace": 1u64 << 59,
            "n_routed_experts": 8}));
        assert!(check(&glm, 2)
            .unwrap_err()
            .contains("stage 0 holds layers 0 to"));
        assert!(check_stage(&glm, 2, 1).is_ok());
        assert!(check_stage(&glm, 2, 2)
            .unwrap_err()
            .contains("does not exist"));
        let qwen = config(json!({"architectures": ["Qwen3MoeForCausalLM"],
            "num_hidden_layers": 1u64 << 60, "num_experts": 8,
            "decoder_sparse_step": 1u64 << 58, "mlp_only_layers": [(1u64 << 58) - 1]}));
        // Stage 0 of 4 (layers 0 to 2^58 - 1) has one candidate, dense.
        let refused = check(&qwen, 4).unwrap_err();
        assert!(refused.contains("stage 0 holds layers 0 to"), "{refused}");
        assert!(check_stage(&qwen, 4, 1).is_ok());
    }

    #[test]
    fn no_layers_is_not_judged_here() {
        // kv's detection refuses a model of no layers with its own words.
        let empty = config(json!({"architectures": ["Lfm2MoeForCausalLM"],
            "num_hidden_layers": 0}));
        assert!(check(&empty, 1).is_ok());
    }

    #[test]
    fn the_sparse_step_skips_dense_candidates_in_a_stage() {
        // Step 2 over 8 layers: candidates 1, 3, 5, 7; 1 and 3 dense.
        let qwen = config(json!({"architectures": ["Qwen3MoeForCausalLM"],
            "num_hidden_layers": 8, "num_experts": 8, "decoder_sparse_step": 2,
            "mlp_only_layers": [1, 3]}));
        assert!(check_stage(&qwen, 2, 0).is_err());
        assert!(check_stage(&qwen, 2, 1).is_ok());
        // Layers 2 to 5 hold 3 (dense) and 5.
        assert!(check_stage(&qwen, 4, 1).is_err());
        assert!(check_stage(&qwen, 4, 2).is_ok());
        let all_dense = config(json!({"architectures": ["Qwen3MoeForCausalLM"],
            "num_hidden_layers": 4, "num_experts": 8, "decoder_sparse_step": 2,
            "mlp_only_layers": [1, 3]}));
        assert!(check(&all_dense, 1).is_err());
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
