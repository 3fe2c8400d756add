//! The lookup's rules, on configs of the real key layout.

use serde_json::json;

use serde_json::Value;

use super::lookup::{DTypeRule, HfConfig};
use super::models::MambaVersion;
use crate::error::KvError;
use crate::pattern::LayerKind;
use crate::spec::dtype::DType;
use crate::spec::layout::Geometry;

fn ming_talker() -> Value {
    json!({
        "architectures": ["Qwen2ForCausalLM"],
        "num_hidden_layers": 24,
        "num_key_value_heads": 2,
        "hidden_size": 896,
        "num_attention_heads": 14,
        "torch_dtype": "bfloat16"
    })
}

fn error_of(config: Value) -> KvError {
    HfConfig::from_value(config).geometry().unwrap_err()
}

fn without(mut config: Value, key: &str) -> Value {
    config.as_object_mut().unwrap().remove(key);
    config
}

#[test]
fn ming_talker_static_cache_is_25_165_824_bytes() {
    // StaticCache of max_cache_len 2048, one row (calls are serialized).
    let geometry = HfConfig::from_value(ming_talker()).geometry().unwrap();
    assert_eq!(geometry, Geometry::new(24, 2, 64, DType::BF16));
    assert_eq!(geometry.bytes_per_row(2048), Ok(25_165_824));
}

#[test]
fn missing_layers_names_every_key_and_section() {
    let err = error_of(without(ming_talker(), "num_hidden_layers"));
    assert_eq!(
        err.to_string(),
        "kv: cannot read layers from the config: none of `num_hidden_layers`, \
         `encoder_layers`, `num_layers`, `n_layer`, `n_layers` is set; looked at the top \
         level, then `text_config` (absent), then `llm_config` (absent), then \
         `thinker_config.text_config` (absent), then `language_config` (absent); give \
         `num_hidden_layers`"
    );
}

#[test]
fn the_thinkers_text_model_is_a_section_and_named_with_its_path() {
    // Qwen2.5-Omni's layout: the text model under `thinker_config`, beside a
    // talker whose keys must not be read. 28 layers x 4 KV heads x head dim
    // 3584 / 28 = 128, bf16: 28 x 4 x 128 x 2 (K, V) x 2 B = 57,344 B a token.
    let omni = json!({
        "model_type": "qwen2_5_omni",
        "thinker_config": {
            "model_type": "qwen2_5_omni_thinker",
            "text_config": {
                "model_type": "qwen2_5_omni_text", "num_hidden_layers": 28,
                "num_attention_heads": 28, "num_key_value_heads": 4, "hidden_size": 3584,
                "max_position_embeddings": 32768, "torch_dtype": "bfloat16",
            },
        },
        "talker_config": {"num_hidden_layers": 24, "num_key_value_heads": 2},
    });
    let config = HfConfig::from_value(omni);
    let geometry = config.geometry().unwrap();
    assert_eq!(geometry, Geometry::new(28, 4, 128, DType::BF16));
    assert_eq!(geometry.bytes_per_row(1), Ok(57_344));
    let (name, value) = config.value("max_position_embeddings").unwrap();
    assert_eq!(
        (name.as_str(), value.as_u64()),
        (
            "thinker_config.text_config.max_position_embeddings",
            Some(32768)
        )
    );
    assert_eq!(config.model_types(), ["qwen2_5_omni_text", "qwen2_5_omni"]);
    // A thinker that is not an object, or without a text model, is no section.
    for thinker in [json!(3), json!({"text_config": 3}), json!({})] {
        let bare = json!({"thinker_config": thinker, "num_key_value_heads": 2});
        let text = HfConfig::from_value(bare)
            .geometry()
            .unwrap_err()
            .to_string();
        let state = if thinker.get("text_config").is_some() {
            "(not an object)"
        } else {
            "(absent)"
        };
        assert!(
            text.contains(&format!("then `thinker_config.text_config` {state}")),
            "{text}"
        );
    }
}

#[test]
fn missing_kv_heads_names_every_key() {
    let config = without(
        without(ming_talker(), "num_key_value_heads"),
        "num_attention_heads",
    );
    let err = error_of(without(config, "hidden_size"));
    let KvError::Config { what, problem } = &err.into_problems()[0] else {
        panic!()
    };
    assert_eq!(*what, "kv_heads");
    assert!(
        problem.starts_with(
            "none of `n_head_kv`, `num_kv_heads`, `num_key_value_heads`, \
             `multi_query_group_num`, `num_attention_groups` nor the attention heads \
             (`num_attention_heads`, `n_head`, `n_heads`, `encoder_attention_heads`) is \
             set; looked at the top level"
        ),
        "{problem}"
    );
    assert!(problem.ends_with("give `num_key_value_heads`"), "{problem}");
}

#[test]
fn kv_heads_fall_back_to_attention_heads() {
    let config = without(ming_talker(), "num_key_value_heads");
    assert_eq!(
        HfConfig::from_value(config).geometry().unwrap().kv_heads,
        14
    );
}

#[test]
fn missing_head_dim_sources_name_their_keys() {
    let no_hidden = error_of(without(ming_talker(), "hidden_size"));
    let KvError::Config { what, problem } = no_hidden else {
        panic!()
    };
    assert_eq!(what, "head_dim");
    assert!(
        problem.starts_with(
            "`head_dim` is not set and no hidden size (`hidden_size`, `d_model`, `n_embd`) to derive it from; looked at"
        ),
        "{problem}"
    );
    let no_heads = error_of(without(
        without(ming_talker(), "num_attention_heads"),
        "num_key_value_heads",
    ));
    // kv heads fall back to the attention heads, so both fail, together.
    let problems = no_heads.into_problems();
    assert!(matches!(
        problems[..],
        [
            KvError::Config {
                what: "kv_heads",
                ..
            },
            KvError::Config {
                what: "head_dim",
                ..
            }
        ]
    ));
    let no_heads = HfConfig::from_value(without(ming_talker(), "num_attention_heads"))
        .geometry()
        .unwrap_err();
    assert!(
        no_heads
            .to_string()
            .contains("no attention heads (`num_attention_heads`, `n_head`, `n_heads`, `encoder_attention_heads`)"),
        "{no_heads}"
    );
}

#[test]
fn missing_dtype_names_both_keys() {
    let err = error_of(without(ming_talker(), "torch_dtype"));
    let KvError::Config { what, problem } = err else {
        panic!()
    };
    assert_eq!(what, "dtype");
    assert!(
        problem.starts_with("none of `torch_dtype`, `dtype` is set"),
        "{problem}"
    );
    assert!(problem.ends_with("give `torch_dtype`"), "{problem}");
}

#[test]
fn newer_dtype_key_is_read() {
    let mut config = without(ming_talker(), "torch_dtype");
    config["dtype"] = json!("float32");
    assert_eq!(
        HfConfig::from_value(config)
            .geometry()
            .unwrap()
            .storage
            .dtype()
            .unwrap(),
        DType::F32
    );
}

#[test]
fn explicit_head_dim_wins_over_config() {
    let mut config = ming_talker();
    config["head_dim"] = json!(128);
    assert_eq!(
        HfConfig::from_value(config.clone())
            .geometry()
            .unwrap()
            .head_dim,
        128
    );
    let fixed = HfConfig::from_value(config)
        .with_head_dim(96)
        .geometry()
        .unwrap();
    assert_eq!(fixed.head_dim, 96);
}

#[test]
fn explicit_values_fill_what_the_config_lacks() {
    let geometry = HfConfig::from_value(json!({}))
        .with_layers(3)
        .with_kv_heads(4)
        .with_head_dim(5)
        .with_dtype(DType::F16)
        .geometry()
        .unwrap();
    assert_eq!(geometry, Geometry::new(3, 4, 5, DType::F16));
    let zero = HfConfig::from_value(ming_talker())
        .with_layers(0)
        .geometry()
        .unwrap_err();
    assert!(
        zero.to_string().contains("the explicit layers is 0"),
        "{zero}"
    );
}

#[test]
fn hidden_not_divisible_by_heads_is_an_error() {
    let mut config = ming_talker();
    config["hidden_size"] = json!(900);
    let err = error_of(config);
    assert_eq!(
        err.to_string(),
        "kv: cannot read head_dim from the config: `hidden_size` 900 is not divisible by \
         `num_attention_heads` 14; give `head_dim`"
    );
}

#[test]
fn encoder_configs_use_encoder_keys() {
    // Whisper-style: encoder_layers, encoder_attention_heads, d_model.
    let whisper = json!({
        "encoder_layers": 24,
        "encoder_attention_heads": 16,
        "d_model": 1024,
        "torch_dtype": "bfloat16"
    });
    let geometry = HfConfig::from_value(whisper).geometry().unwrap();
    assert_eq!(geometry, Geometry::new(24, 16, 64, DType::BF16));
}

#[test]
fn wrong_types_are_rejected_with_key_and_value() {
    let cases = [
        (
            json!("24"),
            "`num_hidden_layers` is \"24\"; expected a positive integer",
        ),
        (json!(24.5), "`num_hidden_layers` is 24.5; not an integer"),
        (json!(24.0), "`num_hidden_layers` is 24.0; not an integer"),
        (
            json!(-3),
            "`num_hidden_layers` is -3; a count cannot be negative",
        ),
        (
            json!(0),
            "`num_hidden_layers` is 0; a count must be positive",
        ),
        (
            json!(true),
            "`num_hidden_layers` is true; expected a positive integer",
        ),
        (
            json!([24]),
            "`num_hidden_layers` is [24]; expected a positive integer",
        ),
    ];
    for (value, expected) in cases {
        let mut config = ming_talker();
        config["num_hidden_layers"] = value;
        let err = error_of(config);
        assert!(
            matches!(err, KvError::Config { what: "layers", .. }),
            "{err:?}"
        );
        assert!(err.to_string().ends_with(expected), "{err}");
    }
    let huge: Value =
        serde_json::from_str(r#"{"num_hidden_layers": 18446744073709551616}"#).unwrap();
    let err = error_of(huge);
    assert!(
        err.to_string()
            .contains("`num_hidden_layers` is 1.8446744073709552e+19; more than u64 can hold"),
        "{err}"
    );
    let mut config = ming_talker();
    config["torch_dtype"] = json!("complex64");
    let err = error_of(config);
    assert!(
        err.to_string()
            .contains("`torch_dtype` is \"complex64\", not a dtype"),
        "{err}"
    );
    let mut config = ming_talker();
    config["torch_dtype"] = json!(16);
    assert!(matches!(
        error_of(config),
        KvError::Config { what: "dtype", .. }
    ));
}

#[test]
fn configs_are_equal_when_they_read_alike_whatever_was_asked() {
    let a = HfConfig::from_value(ming_talker());
    let b = HfConfig::from_value(ming_talker());
    a.geometry().unwrap();
    assert!(a.was_asked("num_hidden_layers") && !b.was_asked("num_hidden_layers"));
    assert_eq!(a, b);
    let differ: [HfConfig; 9] = [
        HfConfig::from_value(json!({})),
        HfConfig::from_path_text_for_tests(ming_talker()),
        b.clone().with_layers(1),
        b.clone().with_kv_heads(1),
        b.clone().with_head_dim(1),
        b.clone().with_dtype(DType::F16),
        b.clone().with_dtype_rule(DTypeRule::VllmAuto),
        b.clone().with_value("x", 1),
        b.clone().with_mamba_version(MambaVersion::Mamba1),
    ];
    for other in differ {
        assert_ne!(other, b, "{other:?}");
    }
}

#[test]
fn a_model_type_given_over_the_config_brings_its_loader_defaults() {
    let bare = json!({"num_hidden_layers": 4, "num_attention_heads": 8,
                      "num_key_value_heads": 4, "torch_dtype": "bfloat16"});
    // No head_dim and no hidden size: nothing to derive it from.
    assert!(HfConfig::from_value(bare.clone()).geometry().is_err());
    let gemma = HfConfig::from_value(bare).with_value("model_type", "gemma3_text");
    assert_eq!(gemma.geometry().unwrap().head_dim, 256);
    assert_eq!(
        gemma.notes(),
        ["`head_dim` 256 (transformers Gemma3TextConfig default)"]
    );
    // Any other key given leaves the family alone.
    let other = HfConfig::from_value(json!({"model_type": "gemma3_text"})).with_value("x", 1);
    assert!(other.family().is_some());
}

#[test]
fn null_counts_as_absent() {
    let mut config = ming_talker();
    config["head_dim"] = Value::Null;
    assert_eq!(
        HfConfig::from_value(config).geometry().unwrap().head_dim,
        64
    );
}

#[test]
fn text_config_is_read_after_the_top_level() {
    // Llava-style: the language model in text_config, the dtype at the top.
    let config = json!({
        "torch_dtype": "float16",
        "vision_config": {"num_hidden_layers": 99},
        "text_config": without(ming_talker(), "torch_dtype")
    });
    assert_eq!(
        HfConfig::from_value(config).geometry().unwrap(),
        Geometry::new(24, 2, 64, DType::F16)
    );
    // The top level decides a value it holds.
    let config = json!({"num_hidden_layers": 2, "text_config": ming_talker()});
    assert_eq!(HfConfig::from_value(config).geometry().unwrap().layers, 2);
}

#[test]
fn llm_config_is_read_after_text_config() {
    // InternVL-style: llm_config only.
    let config = json!({"llm_config": ming_talker()});
    assert_eq!(
        HfConfig::from_value(config).geometry().unwrap(),
        Geometry::new(24, 2, 64, DType::BF16)
    );
    let config = json!({
        "text_config": {"num_hidden_layers": 7},
        "llm_config": ming_talker()
    });
    let geometry = HfConfig::from_value(config).geometry().unwrap();
    assert_eq!(geometry.layers, 7);
    assert_eq!(geometry.kv_heads, 2);
}

#[test]
fn errors_in_nested_sections_name_the_section() {
    let mut talker = ming_talker();
    talker["num_key_value_heads"] = json!(-2);
    let err = error_of(json!({"text_config": talker}));
    assert!(
        err.to_string()
            .contains("`text_config.num_key_value_heads` is -2"),
        "{err}"
    );
    let err = error_of(json!({"text_config": 3}));
    assert!(
        err.to_string()
            .contains("then `text_config` (not an object)"),
        "{err}"
    );
}

#[test]
fn any_json_gives_an_error_not_a_panic() {
    for config in [
        json!(null),
        json!(1),
        json!("x"),
        json!([1, 2]),
        json!({"text_config": []}),
    ] {
        // Every value is missing, and all are named at once.
        let problems = error_of(config).into_problems();
        let whats: Vec<&str> = problems
            .iter()
            .map(|p| match p {
                KvError::Config { what, .. } => *what,
                _ => "?",
            })
            .collect();
        assert_eq!(whats, ["layers", "kv_heads", "head_dim", "dtype"]);
    }
    assert!(error_of(json!([]))
        .to_string()
        .contains("top level (not a JSON object)"));
}

#[test]
fn from_path_reads_a_file_and_names_it_in_errors() {
    let dir = std::env::temp_dir().join(format!("kv-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("config.json");
    std::fs::write(&good, ming_talker().to_string()).unwrap();
    let geometry = HfConfig::from_path(&good).unwrap().geometry().unwrap();
    assert_eq!(geometry, Geometry::new(24, 2, 64, DType::BF16));

    let sparse = dir.join("sparse.json");
    std::fs::write(&sparse, "{}").unwrap();
    let err = HfConfig::from_path(&sparse)
        .unwrap()
        .geometry()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("of `{}`", sparse.display())),
        "{err}"
    );

    let broken = dir.join("broken.json");
    std::fs::write(&broken, "{ not json").unwrap();
    let err = HfConfig::from_path(&broken).unwrap_err();
    assert!(
        matches!(err, KvError::ConfigFile { ref path, .. } if *path == broken.display().to_string())
    );
    let missing = HfConfig::from_path(dir.join("absent.json")).unwrap_err();
    assert!(matches!(missing, KvError::ConfigFile { .. }));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_layer_count_falls_back_to_the_length_of_the_per_layer_list() {
    // transformers 5.20's NemotronHConfig writes no `num_hidden_layers`: it
    // is the length of `layers_block_type`.
    let listed = |key: &str, list: Value| {
        let mut config = without(ming_talker(), "num_hidden_layers");
        config[key] = list;
        HfConfig::from_value(config)
    };
    let nemotron = listed(
        "layers_block_type",
        json!(["linear_attention", "moe", "full_attention", "mlp"]),
    );
    assert_eq!(nemotron.geometry().unwrap().layers, 4);
    assert!(nemotron.notes().contains(
        &"layers 4: the length of `layers_block_type`, as none of `num_hidden_layers`, \
          `encoder_layers`, `num_layers`, `n_layer`, `n_layers` is set"
            .to_owned()
    ));
    let types = listed(
        "layer_types",
        json!(["full_attention", "sliding_attention"]),
    );
    assert_eq!(types.geometry().unwrap().layers, 2);
    assert_eq!(
        listed("hybrid_override_pattern", json!("M-M*"))
            .geometry()
            .unwrap()
            .layers,
        4
    );
    // An empty list, or one of another type, counts nothing: the error names the keys.
    for empty in [json!([]), json!(""), json!(7)] {
        let text = listed("layers_block_type", empty)
            .geometry()
            .unwrap_err()
            .to_string();
        assert!(text.contains("none of `num_hidden_layers`"), "{text}");
    }
    // A count written wins over the list's length.
    let mut both = ming_talker();
    both["layer_types"] = json!(vec!["full_attention"; 24]);
    let config = HfConfig::from_value(both);
    assert_eq!(config.geometry().unwrap().layers, 24);
    assert!(config.notes().iter().all(|n| !n.contains("the length of")));
}

#[test]
fn kv_shared_layers_without_a_pattern_share_from_full_attention() {
    // No pattern key: every layer full attention, the last 2 sharing K/V.
    let config = HfConfig::from_value(json!({"num_hidden_layers": 4, "num_kv_shared_layers": 2}));
    let pattern = config.layer_pattern().unwrap();
    assert_eq!(pattern.count(crate::pattern::LayerKind::FullAttention), 2);
    assert_eq!(pattern.count(crate::pattern::LayerKind::KvShared), 2);
}

#[test]
fn a_family_reads_its_own_layer_kind_names() {
    // Qwen4-Exp's `indexed_attention` is its full attention; to any other
    // family it is no layer kind kv knows.
    let qwen4 = json!({
        "model_type": "qwen4_exp_text", "num_hidden_layers": 3,
        "layer_types": ["linear_attention", "indexed_attention", "qwen_sparse_attention"],
    });
    let pattern = HfConfig::from_value(qwen4.clone()).layer_pattern().unwrap();
    assert_eq!(pattern.count(LayerKind::FullAttention), 2);
    assert_eq!(pattern.count(LayerKind::LinearAttention), 1);
    let mut other = qwen4;
    other["model_type"] = json!("qwen3_next");
    let text = HfConfig::from_value(other)
        .layer_pattern()
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("`layer_types[1]` is \"indexed_attention\""),
        "{text}"
    );
}

#[test]
fn exaones_string_pattern_is_read_only_as_its_layer_types() {
    // EXAONE 4's published configs write `"LLLG"` beside `layer_types`;
    // transformers 5's Exaone4Config reads the list, never the string.
    let mut config = json!({
        "num_hidden_layers": 4, "sliding_window": 8, "sliding_window_pattern": "LLLG",
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    });
    let pattern = HfConfig::from_value(config.clone())
        .layer_pattern()
        .unwrap();
    let kinds: Vec<LayerKind> = pattern.kinds().collect();
    use LayerKind::{FullAttention as Full, SlidingAttention as Sliding};
    assert_eq!(kinds, [Sliding, Full, Sliding, Full]);
    // The string alone: transformers 5 fails on it; kv says what to give.
    config.as_object_mut().unwrap().remove("layer_types");
    let error = HfConfig::from_value(config).layer_pattern().unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("`sliding_window_pattern` is \"LLLG\", a string"),
        "{text}"
    );
    assert!(text.contains("give `layer_types`"), "{text}");
}
