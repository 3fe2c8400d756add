//! The modern readers against the shipped published configs
//! (`examples/configs/*/config.json`), and their errors.

#![cfg(feature = "json")]

use kv_core::config::{KvQuantType, MambaVersion};
use kv_core::pattern::LayerKind;
use kv_core::{DType, Geometry, HfConfig, KvError};
use serde_json::{json, Value};

fn shipped(name: &str) -> HfConfig {
    let path = format!(
        "{}/../examples/configs/{name}/config.json",
        env!("CARGO_MANIFEST_DIR")
    );
    HfConfig::from_path(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// The `what` and `problem` of a config error.
fn config_error<T: std::fmt::Debug>(result: Result<T, KvError>) -> (&'static str, String) {
    match result {
        Err(KvError::Config { what, problem }) => (what, problem),
        other => panic!("expected a config error, got {other:?}"),
    }
}

const SHIPPED: [&str; 9] = [
    "llama-3-8b",
    "mistral-7b-v0.1",
    "gemma-3-27b",
    "deepseek-v2-lite",
    "jamba-v0.1",
    "qwen3-next-80b-a3b",
    "whisper-large-v3",
    "hy3-fp8",
    "ming-talker",
];

#[test]
fn every_shipped_config_keeps_model_type_and_architectures() {
    for name in SHIPPED {
        let path = format!(
            "{}/../examples/configs/{name}/config.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(config["model_type"].is_string(), "{name}");
        assert!(config["architectures"][0].is_string(), "{name}");
    }
}

#[test]
fn dense_attention_models_read_their_geometry() {
    let llama = shipped("llama-3-8b").geometry().unwrap();
    assert_eq!(llama, Geometry::new(32, 8, 128, DType::BF16));
    // 131,072 B per token (PEERS): 2 x 32 x 8 x 128 x 2.
    assert_eq!(
        2 * llama.layers * llama.kv_heads * llama.head_dim * 2,
        131_072
    );
    let mistral = shipped("mistral-7b-v0.1");
    assert_eq!(
        mistral.geometry().unwrap(),
        Geometry::new(32, 8, 128, DType::BF16)
    );
    assert_eq!(mistral.sliding_window().unwrap(), Some(4096));
    let whisper = shipped("whisper-large-v3").geometry().unwrap();
    assert_eq!(whisper, Geometry::new(32, 20, 64, DType::F16));
}

#[test]
fn gemma_3_27b_has_52_sliding_and_10_global_layers() {
    let gemma = shipped("gemma-3-27b");
    assert_eq!(
        gemma.geometry().unwrap(),
        Geometry::new(62, 16, 128, DType::BF16)
    );
    assert_eq!(gemma.sliding_window().unwrap(), Some(1024));

    // The published file leaves the pattern to transformers' Gemma3TextConfig,
    // whose default (6) is applied and said in the notes.
    let defaulted = gemma.layer_pattern().unwrap();
    assert!(gemma.notes().contains(
        &"`sliding_window_pattern` 6 (transformers Gemma3TextConfig default)".to_owned()
    ));
    // A family kv has no row for gets no default: the error names every key.
    let unknown = shipped("gemma-3-27b").with_value("model_type", "not_gemma");
    let (what, problem) = config_error(unknown.layer_pattern());
    assert_eq!(what, "layer pattern");
    assert_eq!(
        problem,
        format!(
            "none of `layer_types`, `layers_block_type`, `hybrid_override_pattern`, \
             `sliding_window_pattern`, `full_attention_interval`, `attn_layer_period`, \
             `attn_layer_offset` is set; \
             looked at the explicit values, then the top level, then `text_config`, then \
             `llm_config` (absent), then `thinker_config.text_config` (absent), then \
             `language_config` (absent) of `{}/../examples/configs/gemma-3-27b/config.json`; give one",
            env!("CARGO_MANIFEST_DIR")
        )
    );

    let pattern = gemma
        .with_value("sliding_window_pattern", 6)
        .layer_pattern()
        .unwrap();
    assert_eq!(pattern, defaulted);
    assert_eq!(pattern.count(LayerKind::SlidingAttention), 52);
    assert_eq!(pattern.count(LayerKind::FullAttention), 10);
    assert_eq!(
        pattern.reason(),
        "every 6th layer is full_attention ((i + 1) % 6 == 0), the rest sliding_attention \
         (sliding_window_pattern 6): 52 sliding_attention, 10 full_attention of 62 layers"
    );
}

#[test]
fn deepseek_v2_lite_holds_a_576_wide_latent_in_27_layers() {
    let mla = shipped("deepseek-v2-lite").mla().unwrap();
    assert_eq!(
        (
            mla.layers,
            mla.kv_lora_rank,
            mla.qk_rope_head_dim,
            mla.dtype
        ),
        (27, 512, 64, DType::BF16)
    );
    assert_eq!(mla.latent_width(), Some(576));
}

#[test]
fn jamba_has_4_attention_and_28_mamba1_layers() {
    let jamba = shipped("jamba-v0.1");
    let pattern = jamba.layer_pattern().unwrap();
    assert_eq!(pattern.count(LayerKind::FullAttention), 4);
    assert_eq!(pattern.count(LayerKind::Mamba), 28);
    assert_eq!(
        pattern
            .indices(LayerKind::FullAttention)
            .collect::<Vec<_>>(),
        vec![4, 12, 20, 28]
    );
    let mamba = jamba.mamba().unwrap();
    assert_eq!(mamba.version, MambaVersion::Mamba1);
    assert_eq!(
        (mamba.layers, mamba.hidden, mamba.expand, mamba.d_inner),
        (32, 4096, 2, 8192)
    );
    assert_eq!((mamba.d_state, mamba.d_conv), (16, 4));
    assert_eq!(
        (mamba.n_groups, mamba.heads, mamba.head_dim),
        (None, None, None)
    );
    // Its attention layers: 8 KV heads of 128.
    assert_eq!(
        jamba.geometry().unwrap(),
        Geometry::new(32, 8, 128, DType::BF16)
    );
}

#[test]
fn qwen3_next_has_12_full_and_36_linear_layers() {
    let qwen = shipped("qwen3-next-80b-a3b");
    let pattern = qwen.layer_pattern().unwrap();
    assert_eq!(pattern.count(LayerKind::FullAttention), 12);
    assert_eq!(pattern.count(LayerKind::LinearAttention), 36);
    let linear = qwen.linear_attention().unwrap();
    assert_eq!(
        (
            linear.key_heads,
            linear.value_heads,
            linear.key_head_dim,
            linear.value_head_dim,
            linear.conv_kernel
        ),
        (16, 32, 128, 128, 4)
    );
    // The full-attention layers: 2 KV heads of 256; the dtype is not shipped.
    let geometry = qwen.clone().with_dtype(DType::BF16).geometry().unwrap();
    assert_eq!(geometry, Geometry::new(48, 2, 256, DType::BF16));
    let (what, _) = config_error(qwen.geometry());
    assert_eq!(what, "dtype");
}

#[test]
fn hy3_fp8_declares_static_kv_scales_but_not_the_format() {
    let scheme = shipped("hy3-fp8").kv_cache_scheme().unwrap().unwrap();
    assert_eq!(scheme.source, "quantization_config.kv_cache_scheme");
    assert_eq!((scheme.num_bits, scheme.kind), (None, None));
    assert_eq!(scheme.dynamic, Some(false));
    for unquantized in ["llama-3-8b", "gemma-3-27b", "jamba-v0.1"] {
        assert_eq!(shipped(unquantized).kv_cache_scheme().unwrap(), None);
    }
}

#[test]
fn compressed_tensors_kv_scheme_is_read_as_data() {
    let config = json!({"quantization_config": {
        "quant_method": "compressed-tensors",
        "kv_cache_scheme": {"num_bits": 8, "type": "int", "strategy": "attn_head",
                            "symmetric": true, "group_size": null},
    }});
    let scheme = HfConfig::from_value(config)
        .kv_cache_scheme()
        .unwrap()
        .unwrap();
    assert_eq!(scheme.num_bits, Some(8));
    assert_eq!(scheme.kind, Some(KvQuantType::Int));
    assert_eq!(scheme.strategy.as_deref(), Some("attn_head"));
    assert_eq!((scheme.dynamic, scheme.symmetric), (None, Some(true)));
    let float = json!({"quantization_config": {
        "kv_cache_scheme": {"num_bits": 8, "type": "float"},
    }});
    let float = HfConfig::from_value(float)
        .kv_cache_scheme()
        .unwrap()
        .unwrap();
    assert_eq!(
        (float.num_bits, float.kind),
        (Some(8), Some(KvQuantType::Float))
    );
    // The string form of AMD Quark / `quant_method: "fp8"` checkpoints.
    let dynamic = json!({"quantization_config": {"kv_cache_scheme": "dynamic"}});
    let dynamic = HfConfig::from_value(dynamic)
        .kv_cache_scheme()
        .unwrap()
        .unwrap();
    assert_eq!((dynamic.dynamic, dynamic.num_bits), (Some(true), None));
    // Weight-only checkpoints write `kv_cache_scheme: null`.
    let weight_only = json!({"quantization_config": {"kv_cache_scheme": null}});
    assert_eq!(
        HfConfig::from_value(weight_only).kv_cache_scheme().unwrap(),
        None
    );
    let modelopt = json!({"quantization_config": {"kv_cache_quant_algo": "FP8"}});
    let scheme = HfConfig::from_value(modelopt)
        .kv_cache_scheme()
        .unwrap()
        .unwrap();
    assert_eq!(scheme.num_bits, Some(8));
    assert_eq!(scheme.kind, Some(KvQuantType::Float));
}

#[test]
fn unreadable_kv_schemes_are_errors_naming_key_and_value() {
    let cases = [
        (
            json!({"quantization_config": 3}),
            "`quantization_config` is 3; expected an object",
        ),
        (
            json!({"quantization_config": {"kv_cache_scheme": {"type": "float"}}}),
            "`quantization_config.kv_cache_scheme.num_bits` is not set",
        ),
        (
            json!({"quantization_config": {"kv_cache_scheme": {"num_bits": 0, "type": "float"}}}),
            "`quantization_config.kv_cache_scheme.num_bits` is 0; a count must be positive",
        ),
        (
            json!({"quantization_config": {"kv_cache_scheme": {"num_bits": 8, "type": "fp"}}}),
            "`quantization_config.kv_cache_scheme.type` is \"fp\"; expected \"float\" or \"int\"",
        ),
        (
            json!({"quantization_config": {"kv_cache_scheme": {"num_bits": 8}}}),
            "`quantization_config.kv_cache_scheme.type` is not set",
        ),
        (
            json!({"quantization_config": {"kv_cache_scheme":
                {"num_bits": 8, "type": "int", "dynamic": "no"}}}),
            "`quantization_config.kv_cache_scheme.dynamic` is \"no\"; expected true or false",
        ),
        (
            json!({"quantization_config": {"kv_cache_scheme": "fp8"}}),
            "`quantization_config.kv_cache_scheme` is \"fp8\"; expected an object",
        ),
        (
            json!({"quantization_config": {"kv_cache_quant_algo": "NVFP4"}}),
            "`quantization_config.kv_cache_quant_algo` is \"NVFP4\"; kv recognises only \"FP8\"",
        ),
        (
            json!({"quantization_config": {"kv_cache_quant_algo": "FP8",
                "kv_cache_scheme": "static"}}),
            "sets both `kv_cache_scheme` and `kv_cache_quant_algo`",
        ),
    ];
    for (config, expected) in cases {
        let (what, problem) = config_error(HfConfig::from_value(config).kv_cache_scheme());
        assert_eq!(what, "kv cache quantization");
        assert!(problem.contains(expected), "{problem}");
    }
}

#[test]
fn missing_modern_keys_name_every_key_and_section() {
    let llama = shipped("llama-3-8b");
    let (what, problem) = config_error(llama.mla());
    assert_eq!(what, "kv_lora_rank");
    assert!(
        problem.starts_with(
            "none of `kv_lora_rank` is set; looked at the top level, then `text_config` \
             (absent), then `llm_config` (absent), then `thinker_config.text_config` \
             (absent), then `language_config` (absent) of `"
        ),
        "{problem}"
    );
    assert!(problem.ends_with("; give `kv_lora_rank`"), "{problem}");

    let (what, problem) = config_error(llama.linear_attention());
    assert_eq!(what, "linear key heads");
    assert!(
        problem.starts_with("none of `linear_num_key_heads` is set"),
        "{problem}"
    );

    let (what, problem) = config_error(llama.sliding_window());
    assert_eq!(what, "sliding_window");
    assert!(
        problem.starts_with(
            "`sliding_window` is not set (a config without a window writes it as null); \
             looked at the top level, then `text_config` (absent)"
        ),
        "{problem}"
    );

    let (what, problem) = config_error(llama.mamba());
    assert_eq!(what, "mamba version");
    assert!(
        problem.starts_with(
            "cannot tell Mamba1 from Mamba2: `model_type` is \"llama\", not one of `mamba`, \
             `falcon_mamba`, `jamba`, `mamba2`"
        ),
        "{problem}"
    );
    assert!(
        problem.ends_with("give `model_type` (or say the version: HfConfig::with_mamba_version)"),
        "{problem}"
    );

    // Mamba2 keys the shipped Jamba (Mamba1) lacks, when told it is Mamba2.
    let (what, problem) = config_error(
        shipped("jamba-v0.1")
            .with_mamba_version(MambaVersion::Mamba2)
            .mamba(),
    );
    assert_eq!(what, "mamba n_groups");
    assert!(
        problem.starts_with("none of `mamba_n_groups`, `mamba_ngroups`, `n_groups` is set"),
        "{problem}"
    );
}

#[test]
fn sliding_window_null_and_unused_windows_are_none() {
    let none = HfConfig::from_value(json!({"sliding_window": null}));
    assert_eq!(none.sliding_window().unwrap(), None);
    let qwen2 = HfConfig::from_value(json!({"sliding_window": 32768, "use_sliding_window": false}));
    assert_eq!(qwen2.sliding_window().unwrap(), None);
    let used = HfConfig::from_value(json!({"sliding_window": 4096, "use_sliding_window": true}));
    assert_eq!(used.sliding_window().unwrap(), Some(4096));
    let nested = HfConfig::from_value(json!({"text_config": {"sliding_window": 512}}));
    assert_eq!(nested.sliding_window().unwrap(), Some(512));
    // Given explicitly as null: no window.
    let explicit = shipped("llama-3-8b").with_value("sliding_window", Value::Null);
    assert_eq!(explicit.sliding_window().unwrap(), None);
    for (config, expected) in [
        (
            json!({"sliding_window": 0}),
            "`sliding_window` is 0; a count must be positive",
        ),
        (
            json!({"sliding_window": -1}),
            "`sliding_window` is -1; a count cannot be negative",
        ),
        (
            json!({"sliding_window": "4k"}),
            "`sliding_window` is \"4k\"; expected a positive integer",
        ),
        (
            json!({"sliding_window": 8, "use_sliding_window": 1}),
            "`use_sliding_window` beside `sliding_window` is 1; expected true or false",
        ),
    ] {
        let (what, problem) = config_error(HfConfig::from_value(config).sliding_window());
        assert_eq!(what, "sliding_window");
        assert_eq!(problem, expected);
    }
}

#[test]
fn bad_modern_values_name_key_and_value() {
    let mut v2 = json!({"num_hidden_layers": 27, "kv_lora_rank": 512,
                        "qk_rope_head_dim": 64, "torch_dtype": "bfloat16"});
    for (key, value, expected) in [
        (
            "kv_lora_rank",
            json!(0),
            "`kv_lora_rank` is 0; a count must be positive",
        ),
        (
            "kv_lora_rank",
            json!(-512),
            "`kv_lora_rank` is -512; a count cannot be negative",
        ),
        (
            "qk_rope_head_dim",
            json!(64.5),
            "`qk_rope_head_dim` is 64.5; not an integer",
        ),
        (
            "qk_rope_head_dim",
            json!("64"),
            "`qk_rope_head_dim` is \"64\"; expected a positive integer",
        ),
    ] {
        let saved = v2[key].clone();
        v2[key] = value;
        let (what, problem) = config_error(HfConfig::from_value(v2.clone()).mla());
        assert_eq!(what, key);
        assert_eq!(problem, expected);
        v2[key] = saved;
    }
    let mut qwen = json!({"linear_num_key_heads": 16, "linear_num_value_heads": 32,
                          "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                          "text_config": {"linear_conv_kernel_dim": false}});
    let (what, problem) = config_error(HfConfig::from_value(qwen.clone()).linear_attention());
    assert_eq!(what, "linear conv kernel");
    assert_eq!(
        problem,
        "`text_config.linear_conv_kernel_dim` is false; expected a positive integer"
    );
    qwen["text_config"]["linear_conv_kernel_dim"] = json!(4);
    assert_eq!(
        HfConfig::from_value(qwen)
            .linear_attention()
            .unwrap()
            .conv_kernel,
        4
    );
}

#[test]
fn mamba2_reads_heads_and_checks_them_against_d_inner() {
    // Nemotron-H-style keys: mamba_-prefixed heads, plain n_groups / conv_kernel / expand.
    let nemotron = json!({
        "model_type": "nemotron_h", "num_hidden_layers": 52, "hidden_size": 4096,
        "ssm_state_size": 128, "mamba_num_heads": 128, "mamba_head_dim": 64,
        "n_groups": 8, "conv_kernel": 4, "expand": 2,
        "head_dim": 128, "num_attention_heads": 32,
    });
    let mamba = HfConfig::from_value(nemotron.clone()).mamba().unwrap();
    assert_eq!(mamba.version, MambaVersion::Mamba2);
    assert_eq!((mamba.d_inner, mamba.d_state, mamba.d_conv), (8192, 128, 4));
    assert_eq!(
        (mamba.n_groups, mamba.heads, mamba.head_dim),
        (Some(8), Some(128), Some(64))
    );
    // A hybrid never reads attention's `head_dim` as Mamba's (Bamba's keys
    // alike; Nemotron-H's loader defaults `mamba_head_dim`).
    let mut bamba = nemotron.clone();
    bamba["model_type"] = json!("bamba");
    let mut no_mamba_head_dim = bamba.clone();
    no_mamba_head_dim
        .as_object_mut()
        .unwrap()
        .remove("mamba_head_dim");
    let (what, problem) = config_error(HfConfig::from_value(no_mamba_head_dim).mamba());
    assert_eq!(what, "mamba head_dim");
    assert!(
        problem.starts_with("none of `mamba_d_head`, `mamba_head_dim`, `mamba_headdim` is set"),
        "{problem}"
    );
    // Heads that do not multiply out to d_inner are a contradiction...
    let mut wrong = bamba;
    wrong["mamba_num_heads"] = json!(100);
    let (what, problem) = config_error(HfConfig::from_value(wrong).mamba());
    assert_eq!(what, "mamba head_dim");
    assert!(
        problem.starts_with(
            "Mamba2 heads `mamba_num_heads` 100 x head_dim `mamba_head_dim` 64 is not d_inner \
             `expand` 2 x `hidden_size` 4096 = 8192"
        ),
        "{problem}"
    );
    // ...except in Nemotron-H, whose mixer vLLM builds heads x head_dim wide.
    let mut nano = nemotron;
    nano["mamba_num_heads"] = json!(100);
    let mamba = HfConfig::from_value(nano).mamba().unwrap();
    assert_eq!((mamba.d_inner, mamba.expand), (6400, 2));
    // A pure Mamba2 config uses the plain keys.
    let pure = json!({
        "model_type": "mamba2", "num_hidden_layers": 64, "hidden_size": 2560,
        "state_size": 128, "conv_kernel": 4, "expand": 2, "n_groups": 1,
        "num_heads": 80, "head_dim": 64,
    });
    let mamba = HfConfig::from_value(pure).mamba().unwrap();
    assert_eq!((mamba.d_inner, mamba.heads), (5120, Some(80)));
    // Mamba1 takes an explicit intermediate_size over expand x hidden.
    let mamba1 = json!({
        "model_type": "mamba", "num_hidden_layers": 24, "hidden_size": 768,
        "state_size": 16, "conv_kernel": 4, "expand": 2, "intermediate_size": 1536,
    });
    let mamba = HfConfig::from_value(mamba1).mamba().unwrap();
    assert_eq!((mamba.version, mamba.d_inner), (MambaVersion::Mamba1, 1536));
    // Unknown model types need the version said; overflow is an error.
    let unknown = json!({"num_hidden_layers": 2, "hidden_size": u64::MAX,
                         "mamba_expand": 2, "mamba_d_state": 16, "mamba_d_conv": 4});
    let (what, problem) = config_error(HfConfig::from_value(unknown.clone()).mamba());
    assert_eq!(what, "mamba version");
    assert!(problem.contains("`model_type` is not set"), "{problem}");
    let (what, problem) = config_error(
        HfConfig::from_value(unknown)
            .with_mamba_version(MambaVersion::Mamba1)
            .mamba(),
    );
    assert_eq!(what, "mamba d_inner");
    assert!(problem.contains("overflows u64"), "{problem}");
}

#[test]
fn layer_pattern_keys_follow_their_configs() {
    let layers = |config: Value| HfConfig::from_value(config).layer_pattern();
    // layer_types, as newer configs write it out.
    let listed = layers(json!({
        "num_hidden_layers": 4,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    }))
    .unwrap();
    assert_eq!(
        listed.groups(),
        vec![
            (LayerKind::LinearAttention, 3),
            (LayerKind::FullAttention, 1)
        ]
    );
    // layers_block_type, Jamba's spelling.
    let jamba = layers(json!({
        "num_hidden_layers": 3, "layers_block_type": ["mamba", "attention", "mamba"],
    }))
    .unwrap();
    assert_eq!(jamba.kind_of(1), Some(LayerKind::FullAttention));
    // A list and a rule that agree: the list is returned.
    let both = layers(json!({
        "num_hidden_layers": 12, "sliding_window_pattern": 6,
        "layer_types": (0..12).map(|i| if (i + 1) % 6 == 0 { "full_attention" } else { "sliding_attention" }).collect::<Vec<_>>(),
    }))
    .unwrap();
    assert_eq!(both.source(), "layer_types");
    assert_eq!(both.count(LayerKind::FullAttention), 2);
}

#[test]
fn bad_layer_patterns_are_errors_naming_the_keys() {
    let cases = [
        (
            json!({"num_hidden_layers": 8, "sliding_window_pattern": 0}),
            "`sliding_window_pattern` is 0; a count must be positive",
        ),
        (
            json!({"num_hidden_layers": 8, "full_attention_interval": -4}),
            "`full_attention_interval` is -4; a count cannot be negative",
        ),
        (
            json!({"num_hidden_layers": 32, "attn_layer_period": 8, "attn_layer_offset": 8}),
            "`attn_layer_period`/`attn_layer_offset`: the offset 8 is not below the period 8",
        ),
        (
            json!({"num_hidden_layers": 32, "attn_layer_period": 0, "attn_layer_offset": 0}),
            "`attn_layer_period` is 0; a count must be positive",
        ),
        (
            json!({"num_hidden_layers": 32, "attn_layer_period": 8, "attn_layer_offset": -1}),
            "`attn_layer_offset` is -1; a count cannot be negative",
        ),
        (
            json!({"num_hidden_layers": 32, "attn_layer_period": 8}),
            "`attn_layer_period` is set but not its partner",
        ),
        (
            json!({"num_hidden_layers": 2, "layer_types": ["full_attention", "retention"]}),
            "`layer_types[1]` is \"retention\", not a layer kind kv knows",
        ),
        (
            json!({"num_hidden_layers": 3, "layer_types": ["full_attention"]}),
            "`layer_types` lists 1 layers but the model has 3",
        ),
        (
            json!({"num_hidden_layers": 3, "layer_types": "full_attention"}),
            "`layer_types` is \"full_attention\"; expected a list of layer kinds",
        ),
        (
            json!({"num_hidden_layers": 8, "sliding_window_pattern": 4, "full_attention_interval": 4}),
            "`sliding_window_pattern`, `full_attention_interval` are all set and no `layer_types`",
        ),
        (
            json!({"num_hidden_layers": 2, "sliding_window_pattern": 2,
                "layer_types": ["sliding_attention", "sliding_attention"]}),
            "`layer_types` and `sliding_window_pattern` disagree: layer 1 is sliding_attention \
          in one and full_attention in the other",
        ),
    ];
    for (config, expected) in cases {
        let (what, problem) = config_error(HfConfig::from_value(config).layer_pattern());
        assert_eq!(what, "layer pattern");
        assert!(
            problem.contains(expected),
            "{problem}\n  expected: {expected}"
        );
    }
    // The layer count is still required, named as for geometry.
    let (what, problem) =
        config_error(HfConfig::from_value(json!({"sliding_window_pattern": 6})).layer_pattern());
    assert_eq!(what, "layers");
    assert!(
        problem.starts_with("none of `num_hidden_layers`"),
        "{problem}"
    );
}
