//! Per-layer overrides: refused where they move a cache, accepted where
//! they do not, on the key layouts transformers writes.

use serde_json::{json, Value};

use super::super::lookup::HfConfig;
use crate::pattern::LayerKind;
use crate::spec::dtype::DType;
use crate::spec::layout::Geometry;

/// A Gemma-4-like text config: 6 layers, the last full attention.
fn gemma_4(extra: Value) -> Value {
    let mut config = json!({
        "model_type": "gemma4_text",
        "num_hidden_layers": 6,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "global_head_dim": 256,
        "torch_dtype": "bfloat16",
        "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
                        "sliding_attention", "sliding_attention", "full_attention"],
    });
    merge(&mut config, extra);
    config
}

/// A plain config of no family that builds overrides.
fn plain(extra: Value) -> Value {
    let mut config = json!({
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "torch_dtype": "bfloat16",
    });
    merge(&mut config, extra);
    config
}

fn merge(config: &mut Value, extra: Value) {
    let map = config.as_object_mut().unwrap();
    for (key, value) in extra.as_object().unwrap() {
        map.insert(key.clone(), value.clone());
    }
}

fn refusal(config: Value) -> String {
    HfConfig::from_value(config)
        .geometry()
        .unwrap_err()
        .to_string()
}

fn geometry(config: Value) -> Geometry {
    HfConfig::from_value(config).geometry().unwrap()
}

#[test]
fn a_written_head_dim_override_is_refused_with_the_layer_and_both_values() {
    let text = refusal(plain(json!({"per_layer_config": {"3": {"head_dim": 256}}})));
    assert!(text.starts_with("kv: cannot read per-layer values from the config: "));
    assert!(
        text.contains("`per_layer_config` gives layers values"),
        "{text}"
    );
    assert!(
        text.contains("layer 3: `head_dim` 256 (the config's: 128)"),
        "{text}"
    );
    assert!(!text.contains("more"), "{text}");
}

#[test]
fn overrides_of_the_mlp_or_equal_to_the_global_value_are_accepted() {
    // transformers drops an override equal to the global value itself.
    let config = plain(json!({"per_layer_config": {
        "0": {"intermediate_size": 1024, "rope_theta": 10000.0},
        "2": {"head_dim": 128, "num_key_value_heads": 2},
        "3": {"skip": []},
    }}));
    assert_eq!(geometry(config), Geometry::new(4, 2, 128, DType::BF16));
    // An empty map and a null one are no overrides at all.
    assert!(HfConfig::from_value(plain(json!({"per_layer_config": {}})))
        .geometry()
        .is_ok());
    assert!(
        HfConfig::from_value(plain(json!({"per_layer_config": null})))
            .geometry()
            .is_ok()
    );
}

#[test]
fn five_differing_layers_list_four_and_count_the_fifth() {
    let overrides: serde_json::Map<String, Value> = (0..5)
        .map(|layer| (format!("{layer:02}"), json!({"num_key_value_heads": 8})))
        .collect();
    let mut config = plain(json!({"per_layer_config": overrides}));
    merge(&mut config, json!({"num_hidden_layers": 5}));
    let text = refusal(config);
    assert!(
        text.contains("layer 0: `num_key_value_heads` 8 (the config's: 2)"),
        "{text}"
    );
    assert!(text.contains("layer 3: "), "{text}");
    assert!(!text.contains("layer 4: "), "{text}");
    assert!(text.contains(", and 1 more;"), "{text}");
}

#[test]
fn a_window_removed_on_a_full_layer_is_accepted_and_on_a_sliding_layer_refused() {
    let with = |layer: &str| {
        let mut config = gemma_4(json!({"sliding_window": 512}));
        merge(
            &mut config,
            json!({"per_layer_config": {layer: {"sliding_window": null}}}),
        );
        HfConfig::from_value(config).geometry()
    };
    assert!(with("5").is_ok());
    let text = with("4").unwrap_err().to_string();
    assert!(
        text.contains("layer 4: `sliding_window` null (the config's: 512)"),
        "{text}"
    );
    // A key the config leaves unset, overridden to null, moves nothing.
    let unset = plain(json!({"per_layer_config": {"1": {"attention_chunk_size": null}}}));
    assert!(HfConfig::from_value(unset).geometry().is_ok());
    // Set where the config leaves it unset: refused, said unset.
    let set = plain(json!({"per_layer_config": {"1": {"attention_chunk_size": 8192}}}));
    assert!(refusal(set).contains("layer 1: `attention_chunk_size` 8192 (the config's: unset)"));
}

#[test]
fn a_skipped_module_is_refused() {
    let text = refusal(plain(
        json!({"per_layer_config": {"2": {"skip": ["attention"]}}}),
    ));
    assert!(
        text.contains("layer 2: `skip` [\"attention\"] (the config's: unset)"),
        "{text}"
    );
}

#[test]
fn a_malformed_per_layer_config_names_what_is_wrong() {
    let text = refusal(plain(json!({"per_layer_config": [1, 2]})));
    assert!(
        text.contains("`per_layer_config` is [1,2]; expected an object"),
        "{text}"
    );
    let text = refusal(plain(
        json!({"per_layer_config": {"first": {"head_dim": 64}}}),
    ));
    assert!(
        text.contains("has the key \"first\"; expected a layer index"),
        "{text}"
    );
    let text = refusal(plain(json!({"per_layer_config": {"1": 64}})));
    assert!(
        text.contains("`per_layer_config.1` is 64; expected an object of overrides"),
        "{text}"
    );
}

#[test]
fn the_per_layer_config_of_a_text_section_is_read() {
    let config = json!({"model_type": "x", "text_config": plain(
        json!({"per_layer_config": {"1": {"head_dim": 64}}}))});
    let text = refusal(config);
    assert!(
        text.contains("`text_config.per_layer_config` gives"),
        "{text}"
    );
}

#[test]
fn gemma_4_without_per_layer_config_takes_transformers_global_head_dim() {
    // `global_head_dim` unset: transformers' 512 on the full layers.
    let mut config = gemma_4(json!({}));
    config.as_object_mut().unwrap().remove("global_head_dim");
    let text = refusal(config);
    assert!(
        text.contains("`model_type` gemma4_text (transformers builds"),
        "{text}"
    );
    assert!(
        text.contains(
            "`global_head_dim` 512 (512, transformers' default: the config does not write it) \
             where `head_dim` is 256"
        ),
        "{text}"
    );
    // Written, and the same as `head_dim`: every layer alike.
    assert_eq!(
        geometry(gemma_4(json!({}))),
        Geometry::new(6, 4, 256, DType::BF16)
    );
    // Written and different.
    let text = refusal(gemma_4(json!({"global_head_dim": 512})));
    assert!(
        text.contains("`global_head_dim` 512 where `head_dim` is 256"),
        "{text}"
    );
}

#[test]
fn gemma_4_global_kv_heads_apply_only_with_k_eq_v() {
    let heads = json!({"num_global_key_value_heads": 1});
    assert!(HfConfig::from_value(gemma_4(heads.clone()))
        .geometry()
        .is_ok());
    let mut gated = gemma_4(heads);
    merge(&mut gated, json!({"attention_k_eq_v": true}));
    let text = refusal(gated);
    assert!(
        text.contains("`num_global_key_value_heads` 1 where `num_key_value_heads` is 4"),
        "{text}"
    );
    let mut same = gemma_4(json!({"num_global_key_value_heads": 4, "attention_k_eq_v": true}));
    assert!(HfConfig::from_value(same.take()).geometry().is_ok());
}

#[test]
fn embedding_gemma_2_takes_one_global_kv_head_ungated() {
    let mut config = gemma_4(json!({"model_type": "embedding_gemma2_text"}));
    assert!(refusal(config.clone()).contains("`num_global_key_value_heads` 1 where"));
    merge(&mut config, json!({"num_key_value_heads": 1}));
    assert_eq!(geometry(config), Geometry::new(6, 1, 256, DType::BF16));
}

#[test]
fn neomme_alternates_a_long_window() {
    let neomme = |extra: Value| {
        let mut config = plain(json!({"model_type": "neomme", "sliding_window": 256}));
        merge(&mut config, extra);
        config
    };
    let text = refusal(neomme(json!({})));
    assert!(
        text.contains("`default_long_sliding_window` 1024 where `sliding_window` is 256"),
        "{text}"
    );
    assert!(
        HfConfig::from_value(neomme(json!({"default_long_sliding_window": 256})))
            .geometry()
            .is_ok()
    );
}

#[test]
fn step_3_5_sliding_heads_from_either_key() {
    let step = |extra: Value| {
        let mut config = plain(json!({"model_type": "step3p5"}));
        merge(&mut config, extra);
        config
    };
    assert!(HfConfig::from_value(step(json!({}))).geometry().is_ok());
    let text = refusal(step(json!({"num_sliding_attention_heads": 16})));
    assert!(text.contains("`num_sliding_attention_heads` 16 where `num_attention_heads` is 8"));
    let text = refusal(step(
        json!({"attention_other_setting": {"num_attention_heads": 4}}),
    ));
    assert!(
        text.contains("`attention_other_setting.num_attention_heads` 4 where"),
        "{text}"
    );
    assert!(
        HfConfig::from_value(step(json!({"num_sliding_attention_heads": 8})))
            .geometry()
            .is_ok()
    );
    assert!(refusal(step(
        json!({"model_type": "step3p7", "num_sliding_attention_heads": 2})
    ))
    .contains("`model_type` step3p7 (transformers builds"));
}

#[test]
fn an_mla_latent_is_refused_alike() {
    let config = json!({
        "num_hidden_layers": 4, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
        "torch_dtype": "bfloat16", "per_layer_config": {"1": {"kv_lora_rank": 256}},
    });
    let text = HfConfig::from_value(config).mla().unwrap_err().to_string();
    assert!(
        text.contains("layer 1: `kv_lora_rank` 256 (the config's: 512)"),
        "{text}"
    );
}

fn kind(config: Value, kind: LayerKind) -> Result<Geometry, crate::KvError> {
    HfConfig::from_value(config).kind_geometry(kind)
}

#[test]
fn each_kind_takes_the_head_its_layers_agree_on() {
    // Built from the family's keys: the full layer takes `global_head_dim`
    // and, under `attention_k_eq_v`, `num_global_key_value_heads`.
    let config = gemma_4(json!({
        "global_head_dim": 512, "num_global_key_value_heads": 2, "attention_k_eq_v": true,
    }));
    assert_eq!(
        kind(config.clone(), LayerKind::FullAttention).unwrap(),
        Geometry::new(6, 2, 512, DType::BF16)
    );
    assert_eq!(
        kind(config.clone(), LayerKind::SlidingAttention).unwrap(),
        Geometry::new(6, 4, 256, DType::BF16)
    );
    // The whole-model reading still refuses: one geometry cannot hold both.
    assert!(refusal(config).contains("kv sizes every layer of a kind with one geometry"));
    // Written per layer, on every layer of the kind alike.
    let written = gemma_4(json!({"per_layer_config": {"05": {"head_dim": 512}}}));
    assert_eq!(
        kind(written.clone(), LayerKind::FullAttention)
            .unwrap()
            .head_dim,
        512
    );
    assert_eq!(
        kind(written, LayerKind::SlidingAttention).unwrap().head_dim,
        256
    );
    // No overrides: the config's geometry for every kind.
    assert_eq!(
        kind(plain(json!({})), LayerKind::FullAttention).unwrap(),
        Geometry::new(4, 2, 128, DType::BF16)
    );
}

#[test]
fn layers_of_one_kind_that_differ_are_refused_naming_two_of_them() {
    let mut config = gemma_4(json!({"per_layer_config": {"1": {"head_dim": 128}}}));
    merge(&mut config, json!({"sliding_window": 512}));
    let text = kind(config.clone(), LayerKind::SlidingAttention)
        .unwrap_err()
        .to_string();
    assert!(
        text.contains(
            "`per_layer_config` gives the sliding_attention layers different `head_dim`: layer 0 \
             256, layer 1 128"
        ),
        "{text}"
    );
    // The full layer is alike with itself.
    assert_eq!(
        kind(config, LayerKind::FullAttention).unwrap().head_dim,
        256
    );
}

#[test]
fn an_override_kv_does_not_read_per_kind_is_refused_for_every_kind() {
    let config = gemma_4(json!({"per_layer_config": {"5": {"sliding_window": 4096}}}));
    let text = kind(config, LayerKind::SlidingAttention)
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("layer 5: `sliding_window` 4096 (the config's: 512)"),
        "{text}"
    );
    assert!(
        text.contains("kv reads a kind's `head_dim` and `num_key_value_heads`"),
        "{text}"
    );
}

#[test]
fn a_kind_override_that_is_no_count_or_too_many_heads_is_an_error() {
    let text = kind(
        gemma_4(json!({"per_layer_config": {"5": {"head_dim": "wide"}}})),
        LayerKind::FullAttention,
    )
    .unwrap_err()
    .to_string();
    assert!(
        text.contains("sets `head_dim` to \"wide\" on layer 5; expected a positive integer"),
        "{text}"
    );
    let text = kind(
        gemma_4(json!({"per_layer_config": {"5": {"num_key_value_heads": 0}}})),
        LayerKind::FullAttention,
    )
    .unwrap_err()
    .to_string();
    assert!(text.contains("expected a positive integer"), "{text}");
    let text = kind(
        gemma_4(json!({"per_layer_config": {"5": {"num_key_value_heads": 16}}})),
        LayerKind::FullAttention,
    )
    .unwrap_err()
    .to_string();
    assert!(
        text.contains("gives the full_attention layers 16 KV heads but the config has 8"),
        "{text}"
    );
    // Exactly as many KV heads as attention heads is allowed.
    assert_eq!(
        kind(
            gemma_4(json!({"per_layer_config": {"5": {"num_key_value_heads": 8}}})),
            LayerKind::FullAttention,
        )
        .unwrap()
        .kv_heads,
        8
    );
}

#[test]
fn only_a_kind_that_takes_overrides_says_so() {
    let said = |config: Value, kind: LayerKind| {
        let hf = HfConfig::from_value(config);
        hf.kind_geometry(kind).unwrap();
        hf.notes().join("; ")
    };
    // Built from the family's keys: the full layers take them.
    let built = gemma_4(json!({"global_head_dim": 512}));
    assert!(said(built.clone(), LayerKind::FullAttention)
        .contains("full_attention layers: `head_dim` 512, 4 KV heads, from `model_type`"),);
    assert!(!said(built, LayerKind::SlidingAttention).contains("sliding_attention layers:"));
    // Written for layer 5, the full one.
    let written = gemma_4(json!({"per_layer_config": {"5": {"head_dim": 512}}}));
    assert!(said(written.clone(), LayerKind::FullAttention)
        .contains("full_attention layers: `head_dim` 512, 4 KV heads, from `per_layer_config`"));
    assert!(!said(written, LayerKind::SlidingAttention).contains("layers: `head_dim`"));
}

#[test]
fn four_differing_layers_are_all_listed_and_none_counted() {
    let overrides: serde_json::Map<String, Value> = (0..4)
        .map(|layer| (layer.to_string(), json!({"num_key_value_heads": 8})))
        .collect();
    let text = refusal(plain(json!({"per_layer_config": overrides})));
    assert!(text.contains("layer 3: "), "{text}");
    assert!(!text.contains("more"), "{text}");
}
