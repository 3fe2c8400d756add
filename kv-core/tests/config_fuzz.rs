//! Geometry from arbitrary JSON: always `Ok` with positive dimensions or a
//! clear `KvError`, never a panic. `PROPTEST_CASES` raises the case count.

#![cfg(feature = "json")]

use kv_core::{HfConfig, KvError};
use proptest::prelude::*;
use serde_json::{Map, Number, Value};

/// Keys the lookup reads, and some it must ignore.
const KEYS: &[&str] = &[
    "num_hidden_layers",
    "encoder_layers",
    "num_layers",
    "num_key_value_heads",
    "num_attention_heads",
    "encoder_attention_heads",
    "head_dim",
    "hidden_size",
    "d_model",
    "torch_dtype",
    "dtype",
    "text_config",
    "llm_config",
    "vocab_size",
    "",
    // The modern readers' keys.
    "model_type",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "mamba_d_state",
    "state_size",
    "ssm_state_size",
    "mamba_d_conv",
    "conv_kernel",
    "mamba_expand",
    "expand",
    "mamba_n_groups",
    "n_groups",
    "mamba_n_heads",
    "num_heads",
    "mamba_head_dim",
    "mamba_d_ssm",
    "intermediate_size",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "layer_types",
    "layers_block_type",
    "sliding_window_pattern",
    "full_attention_interval",
    "attn_layer_period",
    "attn_layer_offset",
    "sliding_window",
    "use_sliding_window",
    "quantization_config",
    "kv_cache_scheme",
    "kv_cache_quant_algo",
    "num_bits",
    "type",
    "strategy",
    "dynamic",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (0u64..4096).prop_map(|n| Value::Number(n.into())),
        any::<u64>().prop_map(|n| Value::Number(n.into())),
        any::<i64>().prop_map(|n| Value::Number(n.into())),
        any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        prop_oneof![
            Just("bfloat16"),
            Just("float32"),
            Just("torch.float16"),
            Just("f8e4m3"),
            Just("complex128"),
            Just(""),
            // model types, layer kinds, quantization words the readers match on
            Just("jamba"),
            Just("mamba2"),
            Just("nemotron_h"),
            Just("full_attention"),
            Just("sliding_attention"),
            Just("linear_attention"),
            Just("mamba"),
            Just("attention"),
            Just("float"),
            Just("int"),
            Just("static"),
            Just("FP8"),
        ]
        .prop_map(|s| Value::String(s.to_string())),
        ".{0,12}".prop_map(Value::String),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 64, 10, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..10).prop_map(|pairs| {
                let map: Map<String, Value> =
                    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
                Value::Object(map)
            }),
        ]
    })
}

fn check(result: Result<kv_core::Geometry, KvError>) -> Result<(), TestCaseError> {
    match result {
        Ok(geometry) => {
            prop_assert!(geometry.layers > 0 && geometry.kv_heads > 0 && geometry.head_dim > 0);
        }
        Err(error) => {
            // One problem, or several at once: each a config error about a
            // geometry value.
            for problem in error.into_problems() {
                match problem {
                    KvError::Config { what, problem } => {
                        prop_assert!(["layers", "kv_heads", "head_dim", "dtype"].contains(&what));
                        prop_assert!(!problem.is_empty());
                    }
                    other => prop_assert!(false, "unexpected error kind: {other}"),
                }
            }
        }
    }
    Ok(())
}

/// Configs that mostly hold the modern keys with plausible values, so the
/// readers get past "missing" into their arithmetic and cross-checks.
fn modern_config() -> impl Strategy<Value = Value> {
    let small = prop_oneof![
        (0u64..10).prop_map(|n| Value::Number(n.into())),
        (-3i64..0).prop_map(|n| Value::Number(n.into())),
        Just(Value::Null),
        leaf(),
    ];
    let kinds = prop::collection::vec(
        prop::sample::select(
            &[
                "full_attention",
                "sliding_attention",
                "linear_attention",
                "mamba",
                "attention",
                "hybrid",
            ][..],
        )
        .prop_map(|k| Value::String(k.to_string())),
        0..10,
    )
    .prop_map(Value::Array);
    let entry = prop_oneof![small.clone(), kinds, json()];
    (
        prop::collection::vec((prop::sample::select(KEYS), entry), 0..24),
        small,
    )
        .prop_map(|(pairs, layers)| {
            let mut map: Map<String, Value> =
                pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            map.entry("num_hidden_layers").or_insert(layers);
            Value::Object(map)
        })
}

/// Every modern reader on one config: `Ok` with positive numbers, or a
/// `KvError::Config` with a non-empty problem; never a panic, never another
/// error kind.
fn check_modern(config: &HfConfig) -> Result<(), TestCaseError> {
    fn config_error(error: KvError) -> Result<(), TestCaseError> {
        match error {
            KvError::Config { what, problem } => {
                prop_assert!(!what.is_empty() && !problem.is_empty());
            }
            other => prop_assert!(false, "unexpected error kind: {other}"),
        }
        Ok(())
    }
    match config.mla() {
        Ok(mla) => prop_assert!(mla.layers > 0 && mla.kv_lora_rank > 0 && mla.qk_rope_head_dim > 0),
        Err(error) => config_error(error)?,
    }
    match config.mamba() {
        Ok(m) => {
            prop_assert!(
                m.layers > 0 && m.hidden > 0 && m.d_inner > 0 && m.d_state > 0 && m.d_conv > 0
            );
            if let (Some(heads), Some(dim)) = (m.heads, m.head_dim) {
                prop_assert_eq!(heads.checked_mul(dim), Some(m.d_inner));
            }
        }
        Err(error) => config_error(error)?,
    }
    match config.linear_attention() {
        Ok(l) => prop_assert!(l.key_heads > 0 && l.value_heads > 0 && l.conv_kernel > 0),
        Err(error) => config_error(error)?,
    }
    match config.layer_pattern() {
        Ok(pattern) => {
            let total: u64 = pattern.groups().iter().map(|(_, n)| n).sum();
            prop_assert_eq!(total, pattern.layers());
            prop_assert!(!pattern.reason().is_empty());
        }
        Err(error) => config_error(error)?,
    }
    match config.sliding_window() {
        Ok(window) => prop_assert!(window != Some(0)),
        Err(error) => config_error(error)?,
    }
    match config.kv_cache_scheme() {
        Ok(scheme) => prop_assert!(!matches!(scheme, Some(s) if s.num_bits == Some(0))),
        Err(error) => config_error(error)?,
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(2_000)
    ))]

    #[test]
    fn arbitrary_json_gives_a_geometry_or_a_config_error(config in json()) {
        check(HfConfig::from_value(config).geometry())?;
    }

    #[test]
    fn modern_readers_give_numbers_or_a_config_error(config in json()) {
        check_modern(&HfConfig::from_value(config))?;
    }

    #[test]
    fn modern_readers_on_plausible_configs(config in modern_config()) {
        check_modern(&HfConfig::from_value(config))?;
    }

    #[test]
    fn modern_readers_read_nested_sections_and_explicit_values(
        config in json(),
        key in prop::sample::select(KEYS),
        value in json(),
        layers in any::<u64>(),
    ) {
        let wrapped = serde_json::json!({"text_config": config.clone(), "llm_config": config});
        check_modern(&HfConfig::from_value(wrapped).with_value(key, value).with_layers(layers))?;
    }

    #[test]
    fn overrides_never_panic_either(config in json(), layers in any::<u64>(), heads in any::<u64>()) {
        let result = HfConfig::from_value(config).with_layers(layers).with_kv_heads(heads).geometry();
        if let Ok(geometry) = &result {
            prop_assert_eq!(geometry.layers, layers);
        }
        check(result)?;
    }

    #[test]
    fn arbitrary_file_contents_give_a_clear_file_error(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let dir = std::env::temp_dir().join(format!("kv-config-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.json");
        std::fs::write(&path, &bytes).unwrap();
        match HfConfig::from_path(&path) {
            Ok(config) => { let _ = config.geometry(); }
            Err(KvError::ConfigFile { path: named, problem }) => {
                prop_assert!(named.ends_with("config.json"));
                prop_assert!(!problem.is_empty());
            }
            Err(other) => prop_assert!(false, "unexpected error kind: {other}"),
        }
    }
}

#[test]
fn huge_and_nested_values_are_rejected_with_the_key() {
    let config = serde_json::json!({
        "num_hidden_layers": 1e300,
        "text_config": {"num_key_value_heads": 18446744073709551615u64},
    });
    let error = HfConfig::from_value(config)
        .geometry()
        .unwrap_err()
        .to_string();
    assert!(error.contains("num_hidden_layers"), "{error}");
    // A file nested past serde_json's recursion limit is a file error, never a stack overflow.
    let nested = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let dir = std::env::temp_dir().join(format!("kv-config-deep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), nested).unwrap();
    let error = HfConfig::from_path(dir.join("config.json")).unwrap_err();
    assert!(matches!(error, KvError::ConfigFile { .. }), "{error}");
    assert!(error.to_string().contains("recursion limit"), "{error}");
    let deep = (0..100).fold(serde_json::json!(1), |v, _| serde_json::json!([v]));
    let error = HfConfig::from_value(serde_json::json!({ "num_hidden_layers": deep }))
        .geometry()
        .unwrap_err()
        .to_string();
    assert!(error.contains("num_hidden_layers"), "{error}");
}
