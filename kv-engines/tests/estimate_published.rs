//! Published configs as their `config.json` files spell them (keys and
//! layout as published; irrelevant keys left out), each with the figure vLLM
//! 0.33 holds, worked out by hand in the test from vLLM's rules.

use serde_json::{json, Value};

#[allow(dead_code)]
#[path = "../src/estimate/fixtures.rs"]
mod fixtures;

use fixtures::{tiny, with_keys};
use kv_core::pattern::LayerKind;
use kv_core::spec::Layout;
use kv_core::{KvError, KvSpec};
use kv_engines::estimate::{estimate, Estimate, EstimateSettings};

fn at(positions: u64) -> EstimateSettings {
    EstimateSettings::new().positions(positions)
}

fn per_position(e: &Estimate) -> u64 {
    e.specs
        .iter()
        .map(|s| s.layout.bytes_per_position().unwrap().unwrap())
        .sum()
}

fn per_row(e: &Estimate) -> u64 {
    e.specs.iter().map(|s| s.bytes_per_row().unwrap()).sum()
}

fn names(specs: &[KvSpec]) -> Vec<(&str, u64)> {
    specs
        .iter()
        .map(|s| (s.name.as_ref(), s.layout.layers()))
        .collect()
}

fn falcon_7b() -> Value {
    json!({
        "alibi": false, "architectures": ["FalconForCausalLM"], "bias": false,
        "hidden_size": 4544, "model_type": "falcon", "multi_query": true,
        "new_decoder_architecture": false, "num_attention_heads": 71,
        "num_hidden_layers": 32, "parallel_attn": true, "torch_dtype": "bfloat16",
        "vocab_size": 65024
    })
}

#[test]
fn falcon_7b_multi_query_holds_one_kv_head() {
    let e = estimate(&falcon_7b(), &at(2048)).unwrap();
    // 32 layers x 1 KV head x 64 (4544 / 71) x (K + V) x 2 B.
    assert_eq!(per_position(&e), 32 * 64 * 2 * 2);
    assert_eq!(per_position(&e), 8_192);
    assert!(
        e.detected.contains("1 KV head: `multi_query` is true"),
        "{}",
        e.detected
    );
    // FalconConfig defaults multi_query to true: a config without it is MQA too.
    let mut unset = falcon_7b();
    unset.as_object_mut().unwrap().remove("multi_query");
    assert_eq!(per_position(&estimate(&unset, &at(2048)).unwrap()), 8_192);
}

#[test]
fn falcon_40b_new_decoder_architecture_reads_its_kv_heads() {
    let falcon_40b = json!({
        "model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128,
        "num_hidden_layers": 60, "num_kv_heads": 8, "new_decoder_architecture": true,
        "multi_query": true, "torch_dtype": "bfloat16"
    });
    let e = estimate(&falcon_40b, &at(2048)).unwrap();
    // multi_query is ignored with new_decoder_architecture: 60 x 8 x 64 x 2 x 2.
    assert_eq!(per_position(&e), 122_880);
}

#[test]
fn starcoder_gpt_bigcode_is_multi_query_and_served_in_bf16() {
    let starcoder = json!({
        "model_type": "gpt_bigcode", "n_embd": 6144, "n_head": 48, "n_layer": 40,
        "n_positions": 8192, "multi_query": true, "torch_dtype": "float32"
    });
    let e = estimate(&starcoder, &EstimateSettings::new()).unwrap();
    // 40 layers x 1 KV head x 128 (6144 / 48) x 2 x 2 B (float32 served as bf16).
    assert_eq!(per_position(&e), 20_480);
    // max_model_len from n_positions, GPT-2's key.
    assert_eq!(e.max_model_len, 8192);
    assert!(
        e.detected.contains("`n_positions` of the config"),
        "{}",
        e.detected
    );
    assert!(
        e.detected.contains("dtype bf16: `torch_dtype` is float32"),
        "{}",
        e.detected
    );
}

#[test]
fn mpt_and_dbrx_keep_kv_heads_in_attn_config() {
    let mpt_7b = json!({
        "model_type": "mpt", "d_model": 4096, "n_heads": 32, "n_layers": 32,
        "max_seq_len": 2048, "attn_config": {"attn_type": "multihead_attention"},
        "torch_dtype": "bfloat16"
    });
    let e = estimate(&mpt_7b, &EstimateSettings::new()).unwrap();
    // No kv_n_heads: every head keeps K/V. 32 x 32 x 128 x 2 x 2 B.
    assert_eq!(per_position(&e), 524_288);
    assert_eq!(e.max_model_len, 2048);
    assert!(
        e.detected.contains("kv heads = `n_heads` 32"),
        "{}",
        e.detected
    );
    let dbrx = json!({
        "model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 40,
        "max_seq_len": 32768, "attn_config": {"kv_n_heads": 8, "rope_theta": 500000},
        "torch_dtype": "bfloat16"
    });
    // 40 x 8 x 128 x 2 x 2 B.
    assert_eq!(per_position(&estimate(&dbrx, &at(8192)).unwrap()), 163_840);
}

#[test]
fn chatglm_groups_kv_heads_and_uses_kv_channels() {
    let chatglm3 = json!({
        "model_type": "chatglm", "num_layers": 28, "hidden_size": 4096,
        "num_attention_heads": 32, "kv_channels": 128, "multi_query_attention": true,
        "multi_query_group_num": 2, "seq_length": 8192, "torch_dtype": "float16"
    });
    let e = estimate(&chatglm3, &EstimateSettings::new()).unwrap();
    // 28 x 2 groups x 128 x 2 x 2 B, at seq_length 8192.
    assert_eq!(per_position(&e), 28_672);
    assert_eq!(e.max_model_len, 8192);
}

#[test]
fn glm_4_in_transformers_form_reads_the_generic_kv_heads() {
    // THUDM/glm-4-9b-hf: model_type `glm` (GlmForCausalLM, which vLLM 0.33
    // serves through its Transformers backend) keeps its 2 KV heads in
    // `num_key_value_heads`, not ChatGLM's `multi_query_group_num`.
    // 40 layers x 2 heads x 128 x 2 (K, V) x 2 B = 40,960 B per token (vLLM's
    // page at block 16: 16 x 2 x 128 x 2 x 2 = 16,384 B per layer).
    let glm = json!({
        "architectures": ["GlmForCausalLM"], "model_type": "glm", "head_dim": 128,
        "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 40,
        "num_key_value_heads": 2, "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
    });
    let e = estimate(&glm, &at(3000)).unwrap();
    assert_eq!(per_position(&e), 40_960);
}

#[test]
fn a_config_with_more_kv_heads_than_heads_is_refused() {
    let bad = json!({
        "model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 8,
        "num_key_value_heads": 16, "head_dim": 64, "torch_dtype": "bfloat16"
    });
    let err = estimate(&bad, &at(4096)).unwrap_err().to_string();
    assert!(
        err.contains("16 KV heads but `num_attention_heads` is 8"),
        "{err}"
    );
}

fn gemma_3n_e4b() -> Value {
    let layer_types: Vec<&str> = (0..35)
        .map(|i| {
            if (i + 1) % 5 == 0 {
                "full_attention"
            } else {
                "sliding_attention"
            }
        })
        .collect();
    json!({
        "architectures": ["Gemma3nForConditionalGeneration"], "model_type": "gemma3n",
        "text_config": {
            "model_type": "gemma3n_text", "hidden_size": 2048, "num_hidden_layers": 35,
            "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
            "sliding_window": 512, "num_kv_shared_layers": 15, "layer_types": layer_types,
            "max_position_embeddings": 32768
        },
        "torch_dtype": "bfloat16"
    })
}

#[test]
fn gemma_3n_shared_layers_hold_no_kv() {
    let e = estimate(&gemma_3n_e4b(), &at(8192)).unwrap();
    // 20 of 35 layers keep K/V: 2 heads x 256 x 2 x 2 B = 2,048 B each.
    assert_eq!(per_position(&e), 20 * 2048);
    assert_eq!(per_position(&e), 40_960);
    // The first 20 layers: every 5th full, so 16 sliding and 4 full.
    assert_eq!(
        names(&e.specs),
        [("sliding_attention", 16), ("full_attention", 4)]
    );
    let pattern = &e.specs[0].layer_group.as_ref().unwrap().pattern;
    assert_eq!(pattern.layers(), 35);
    assert_eq!(pattern.count(LayerKind::KvShared), 15);
    // The reason keeps the list the kinds came from.
    assert_eq!(
        pattern.source(),
        "layer_types, the last 15 kv_shared by num_kv_shared_layers"
    );
    // Sliding: min(511 + 4096, 8192) = 4607 -> 288 blocks + 1 = 289 blocks.
    assert_eq!(e.specs[0].positions().unwrap().count, 289 * 16);
    assert_eq!(per_row(&e), 16 * 2048 * 289 * 16 + 4 * 2048 * 8192);
}

fn maverick(no_rope_layers: Value) -> Value {
    json!({
        "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
        "text_config": {
            "model_type": "llama4_text", "attention_chunk_size": 8192,
            "no_rope_layers": no_rope_layers, "num_hidden_layers": 48,
            "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
            "hidden_size": 5120, "max_position_embeddings": 1048576,
            "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                             "original_max_position_embeddings": 8192, "rope_type": "llama3"},
            "interleave_moe_layer_step": 2
        },
        "torch_dtype": "bfloat16"
    })
}

#[test]
fn llama_4_maverick_is_chunked_in_3_of_4_layers() {
    // no_rope_layers: 1 where a layer has RoPE (chunked), 0 every 4th (NoPE, full).
    let listed: Vec<u64> = (0..48).map(|i| u64::from((i + 1) % 4 != 0)).collect();
    for config in [maverick(json!(listed)), maverick(json!([]))] {
        // An empty list is built from no_rope_layer_interval's default, 4.
        let e = estimate(&config, &EstimateSettings::new()).unwrap();
        assert_eq!(
            e.max_model_len, 1_048_576,
            "llama3 RoPE is not scaled again"
        );
        assert_eq!(
            names(&e.specs),
            [("chunked_attention", 36), ("full_attention", 12)]
        );
        // 8 x 128 x 2 x 2 B = 4,096 B per token per layer.
        // Full: 12 x 4,096 x 1,048,576. Chunked, two batches in flight:
        // cdiv(min(8192 + 2 x 2048, 1,048,576), 16) = 768 blocks = 12,288 positions.
        assert_eq!(
            per_row(&e),
            12 * 4096 * 1_048_576 + 36 * 4096 * 12_288,
            "{}",
            e.detected
        );
        assert_eq!(per_row(&e), 53_351_546_880);
        // With one batch in flight (vLLM before it counted them): 10,240 positions.
        let one = estimate(&config, &EstimateSettings::new().async_scheduling(false)).unwrap();
        assert_eq!(per_row(&one), 53_049_556_992);
    }
    // Against every layer full: 48 x 4,096 x 1,048,576 = 206,158,430,208.
    let e = estimate(&maverick(json!([])), &at(16_384)).unwrap();
    assert_eq!(per_row(&e), 12 * 4096 * 16_384 + 36 * 4096 * 12_288);
}

#[test]
fn gemma_2_9b_alternates_and_is_served_in_bf16() {
    let gemma_2_9b = json!({
        "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
        "cache_implementation": "hybrid", "head_dim": 256, "hidden_size": 3584,
        "max_position_embeddings": 8192, "num_attention_heads": 16,
        "num_hidden_layers": 42, "num_key_value_heads": 8, "query_pre_attn_scalar": 256,
        "sliding_window": 4096, "torch_dtype": "float32"
    });
    let e = estimate(&gemma_2_9b, &EstimateSettings::new()).unwrap();
    assert_eq!(
        names(&e.specs),
        [("sliding_attention", 21), ("full_attention", 21)]
    );
    // bf16, not f32: 8 x 256 x 2 x 2 B = 8,192 B per token per layer.
    // Sliding: min(4095 + 4096, 8192) = 8191 -> 512 blocks + 1 = 8,208 positions.
    assert_eq!(per_row(&e), 21 * 8192 * 8208 + 21 * 8192 * 8192);
    assert_eq!(per_row(&e), 2_821_324_800);
    assert!(e
        .detected
        .contains("`sliding_window_pattern` 2 (transformers Gemma2Config default)"));
    assert!(
        e.detected.contains("Downcast for float32 models"),
        "{}",
        e.detected
    );
}

#[test]
fn phi_3_mini_slides_every_layer_with_no_pattern() {
    let phi_3_mini_4k = json!({
        "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 3072,
        "max_position_embeddings": 4096, "num_attention_heads": 32,
        "num_hidden_layers": 32, "num_key_value_heads": 32,
        "original_max_position_embeddings": 4096, "rope_scaling": null,
        "sliding_window": 2047, "torch_dtype": "bfloat16"
    });
    let e = estimate(&phi_3_mini_4k, &EstimateSettings::new()).unwrap();
    // min(2046 + 4096, 4096) = 4096 -> 256 blocks + 1 = 4,112 positions.
    assert_eq!(e.specs[0].positions().unwrap().count, 4112);
    // 32 x 32 x 96 x 2 x 2 B.
    assert_eq!(per_row(&e), 393_216 * 4112);
    assert!(e.detected.starts_with("sliding attention in every layer"));
}

fn gemma_3_4b() -> Value {
    json!({
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
        "text_config": {
            "hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
            "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024
        },
        "vision_config": {"num_hidden_layers": 27, "model_type": "siglip_vision_model"},
        "torch_dtype": "bfloat16"
    })
}

#[test]
fn gemma_3_4b_takes_every_left_out_value_from_its_loader() {
    let e = estimate(&gemma_3_4b(), &at(8192)).unwrap();
    for default in [
        "`num_key_value_heads` 4",
        "`head_dim` 256",
        "`sliding_window_pattern` 6",
    ] {
        assert!(
            e.detected.contains(&format!(
                "{default} (transformers Gemma3TextConfig default)"
            )),
            "{default}: {}",
            e.detected
        );
    }
    // 34 layers, every 6th full: 5 full, 29 sliding; 4 x 256 x 2 x 2 = 4,096 B.
    assert_eq!(
        names(&e.specs),
        [("sliding_attention", 29), ("full_attention", 5)]
    );
    // Sliding: min(1023 + 4096, 8192) = 5119 -> 320 + 1 = 321 blocks.
    assert_eq!(per_row(&e), 29 * 4096 * 321 * 16 + 5 * 4096 * 8192);
    // Its length is the loader's 131,072, not scaled by the linear factor
    // (vLLM skips Gemma-3's).
    assert_eq!(
        estimate(&gemma_3_4b(), &EstimateSettings::new())
            .unwrap()
            .max_model_len,
        131_072
    );
}

#[test]
fn a_null_in_the_config_is_not_replaced_by_a_loader_default() {
    let mut config = gemma_3_4b();
    config["text_config"]["sliding_window"] = Value::Null;
    // The pattern still has sliding layers, but the config says no window.
    let err = estimate(&config, &at(8192)).unwrap_err().to_string();
    assert!(err.contains("`sliding_window` is null"), "{err}");
}

#[test]
fn an_unknown_model_type_is_said_and_rwkv_says_it_has_no_attention() {
    let odd = json!({
        "model_type": "brand_new", "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 64, "torch_dtype": "bfloat16"
    });
    let e = estimate(&odd, &at(1024)).unwrap();
    assert!(
        e.detected.contains(
            "`model_type` brand_new is not in kv's table of model families: read by the \
             generic keys, no loader defaults applied; the family is unverified (--strict \
             refuses it)"
        ),
        "{}",
        e.detected
    );
    assert_eq!(
        e.unverified_family.as_deref(),
        Some("`model_type` brand_new is not in kv's table of model families")
    );
    let mut unnamed = odd.clone();
    unnamed.as_object_mut().unwrap().remove("model_type");
    let e = estimate(&unnamed, &at(1024)).unwrap();
    assert_eq!(e.unverified_family.as_deref(), Some("no `model_type`"));
    let mut llama = odd.clone();
    llama["model_type"] = json!("llama");
    let e = estimate(&llama, &at(1024)).unwrap();
    assert_eq!(e.unverified_family, None);
    assert!(!e.detected.contains("unverified"), "{}", e.detected);
    let rwkv = json!({"model_type": "rwkv", "num_hidden_layers": 24, "hidden_size": 2048});
    let err = estimate(&rwkv, &at(1024)).unwrap_err().to_string();
    assert!(
        err.contains("`model_type` rwkv: RWKV has no attention"),
        "{err}"
    );
}

#[test]
fn every_missing_key_is_reported_in_one_run() {
    let sparse = json!({"model_type": "qwen2", "hidden_size": 896});
    let err = estimate(&sparse, &at(1024)).unwrap_err();
    let whats: Vec<&'static str> = err
        .clone()
        .into_problems()
        .iter()
        .map(|p| match p {
            KvError::Config { what, .. } => *what,
            _ => "?",
        })
        .collect();
    // No dtype key is not missing: vLLM resolves it (float32, served in bf16).
    assert_eq!(whats, ["layers", "kv_heads", "head_dim"]);
    assert_eq!(err.to_string().lines().count(), 3);
}

#[test]
fn a_given_value_nothing_reads_is_an_error_and_a_dotted_key_sets_its_section() {
    let typo = at(8192).set("sliding_window_patern", 6);
    let err = estimate(&gemma_3_4b(), &typo).unwrap_err().to_string();
    assert!(
        err.contains("`sliding_window_patern` given, but nothing"),
        "{err}"
    );
    // text_config.sliding_window_pattern = 2: 17 full, 17 sliding.
    let dotted = at(8192).set("text_config.sliding_window_pattern", 2);
    let e = estimate(&gemma_3_4b(), &dotted).unwrap();
    assert_eq!(
        names(&e.specs),
        [("sliding_attention", 17), ("full_attention", 17)]
    );
    let unread = at(8192).set("text_config.not_a_key", 2);
    assert!(estimate(&gemma_3_4b(), &unread).is_err());
}

#[test]
fn positions_past_the_models_length_are_refused_unless_allowed() {
    let err = estimate(&falcon_7b_with_length(), &at(4096)).unwrap_err();
    assert_eq!(
        err,
        KvError::LongerThanModel {
            given: 4096,
            model: 2048,
            source: "`max_position_embeddings` of the config".into(),
        }
    );
    assert_eq!(
        err.to_string(),
        "kv: max_model_len 4096 is greater than the model's 2048 (`max_position_embeddings` \
         of the config); vLLM refuses it (VLLM_ALLOW_LONG_MAX_MODEL_LEN), and so does kv \
         unless a longer length is allowed"
    );
    let allowed = at(4096).allow_long_max_model_len(true);
    assert_eq!(
        estimate(&falcon_7b_with_length(), &allowed)
            .unwrap()
            .max_model_len,
        4096
    );
    // An overflowing length names max_model_len, not an internal declaration.
    let huge = at(u64::MAX).allow_long_max_model_len(true);
    let err = estimate(&falcon_7b_with_length(), &huge).unwrap_err();
    assert!(
        matches!(
            err,
            KvError::Config {
                what: "max_model_len",
                ..
            }
        ),
        "{err}"
    );
    assert!(err
        .to_string()
        .contains("full_attention at max_model_len 18446744073709551615"));
}

fn falcon_7b_with_length() -> Value {
    let mut config = falcon_7b();
    config["max_position_embeddings"] = json!(2048);
    config
}

#[test]
fn a_linearly_scaled_rope_lengthens_the_model_as_vllm_does() {
    let config = tiny(json!({
        "max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.0}
    }));
    let e = estimate(&config, &EstimateSettings::new()).unwrap();
    assert_eq!(e.max_model_len, 8192);
}

#[test]
fn a_rope_factor_vllm_would_multiply_by_must_be_a_number() {
    // vLLM: `derived_max_model_len *= scaling_factor`; a string fails there.
    let bad = tiny(json!({
        "max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": "2"}
    }));
    let err = estimate(&bad, &EstimateSettings::new())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`rope_scaling.factor` is \"2\", not a number"),
        "{err}"
    );
    // A factor of 1.0 scales nothing, and the length is the config's own.
    let one = tiny(json!({
        "max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 1.0}
    }));
    let e = estimate(&one, &EstimateSettings::new()).unwrap();
    assert_eq!(e.max_model_len, 4096);
    assert!(
        e.detected
            .contains("max_model_len 4096 (`max_position_embeddings` of the config)"),
        "{}",
        e.detected
    );
    // A null factor falls back to 1.0, as vLLM falls back.
    let null = tiny(json!({
        "max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": null}
    }));
    assert_eq!(
        estimate(&null, &EstimateSettings::new())
            .unwrap()
            .max_model_len,
        4096
    );
    // Where vLLM does not apply the factor (a llama3 RoPE), it is not read.
    let llama3 = tiny(json!({
        "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "llama3", "factor": "8"}
    }));
    assert_eq!(
        estimate(&llama3, &EstimateSettings::new())
            .unwrap()
            .max_model_len,
        4096
    );
    // Gemma 3's lengths are already scaled: a factor of 8 moves nothing, and
    // even a bad one is not read (vLLM skips the block for "gemma3" types).
    // Its loader's 131,072 stands.
    for factor in [json!(8.0), json!("8")] {
        let mut gemma = gemma_3_4b();
        gemma["text_config"]["rope_scaling"]["factor"] = factor.clone();
        let e = estimate(&gemma, &EstimateSettings::new()).unwrap();
        assert_eq!(e.max_model_len, 131_072, "{factor}");
    }
}

#[test]
fn non_finite_floats_in_a_config_file_read_as_python_reads_them() {
    // Mamba-Codestral's config, as save_pretrained writes it.
    let text = r#"{"model_type": "mamba2", "hidden_size": 4096, "num_hidden_layers": 64,
        "expand": 2, "state_size": 128, "conv_kernel": 4, "n_groups": 8, "num_heads": 128,
        "head_dim": 64, "time_step_limit": [0.0, Infinity], "torch_dtype": "bfloat16"}"#;
    let config = kv_core::config::parse_json(text).unwrap();
    let e = estimate(&config, &at(4096)).unwrap();
    // Mamba2, attention-free (no prefix caching, one page): conv 3 x (8192 +
    // 2 x 8 x 128) + ssm 128 x 64 x 128, bf16, x 64 layers.
    assert_eq!(
        per_row(&e),
        64 * (3 * (8192 + 2 * 8 * 128) + 128 * 64 * 128) * 2
    );
}

#[test]
fn qwen2_5_writes_a_window_it_does_not_use() {
    let qwen2_5_7b = json!({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
        "max_position_embeddings": 32768, "max_window_layers": 28,
        "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
        "sliding_window": 131072, "use_sliding_window": false, "torch_dtype": "bfloat16"
    });
    let e = estimate(&qwen2_5_7b, &at(8192)).unwrap();
    assert!(
        e.detected.starts_with("attention in every layer"),
        "{}",
        e.detected
    );
    // 28 x 4 x 128 x 2 x 2 B over 8192 positions.
    assert_eq!(per_row(&e), 57_344 * 8192);
}

#[test]
fn a_mamba2_hybrid_keeps_three_pages_in_align_mode() {
    // Granite-4.0-H's key layout: a layer_types list of "mamba" and
    // "attention", mamba_* keys for the Mamba2 mixer.
    let mut layer_types = vec!["mamba"; 40];
    for i in [5, 15, 25, 35] {
        layer_types[i] = "attention";
    }
    let granite = json!({
        "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid",
        "hidden_size": 4096, "num_hidden_layers": 40, "num_attention_heads": 32,
        "num_key_value_heads": 8, "layer_types": layer_types, "mamba_d_conv": 4,
        "mamba_d_head": 64, "mamba_d_state": 128, "mamba_expand": 2, "mamba_n_groups": 1,
        "mamba_n_heads": 128, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"
    });
    let e = estimate(&granite, &at(8192)).unwrap();
    assert_eq!(names(&e.specs), [("mamba", 36), ("full_attention", 4)]);
    // State: conv 3 x (8192 + 2 x 1 x 128) + ssm 128 x 64 x 128 elements, bf16
    // = 2,147,840 B. Attention: 8 x 128 x 2 x 2 = 4,096 B per token per
    // layer, so the block is 16 x cdiv(2,147,840, 65,536) = 528 and the page
    // 528 x 4,096 = 2,162,688 B. Mamba2 exports a prefill checkpoint: 3 pages.
    assert_eq!(e.block_size, 528);
    assert_eq!(e.specs[0].bytes_per_row(), Ok(36 * 3 * 2_162_688));
    // cdiv(8192, 528) = 16 blocks = 8,448 positions.
    assert_eq!(e.specs[1].bytes_per_row(), Ok(4 * 4096 * 8448));
}

#[test]
fn an_mla_model_is_one_latent_per_layer() {
    let kimi_k2 = json!({
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2",
        "num_hidden_layers": 61, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128, "num_attention_heads": 64, "num_key_value_heads": 64,
        "max_position_embeddings": 131072, "torch_dtype": "bfloat16"
    });
    let e = estimate(&kimi_k2, &at(8192)).unwrap();
    // 61 x (512 + 64) x 2 B.
    assert_eq!(per_position(&e), 70_272);
}

#[test]
fn a_bad_no_rope_list_or_sharing_every_layer_is_an_error_naming_the_key() {
    let err = estimate(&maverick(json!([1, 1, 0])), &at(8192))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`text_config.no_rope_layers` lists 3 layers but the model has 48"),
        "{err}"
    );
    let mut listed: Vec<Value> = (0..48).map(|_| json!(1)).collect();
    listed[5] = json!(2);
    let err = estimate(&maverick(json!(listed)), &at(8192))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "`text_config.no_rope_layers[5]` is 2; expected 1 (RoPE, chunked attention) or 0"
        ),
        "{err}"
    );
    let err = estimate(&maverick(json!("every 4th")), &at(8192))
        .unwrap_err()
        .to_string();
    assert!(err.contains("expected a list of 0 and 1"), "{err}");
    let mut all_shared = gemma_3n_e4b();
    all_shared["text_config"]["num_kv_shared_layers"] = json!(35);
    let err = estimate(&all_shared, &at(8192)).unwrap_err().to_string();
    assert!(
        err.contains("`text_config.num_kv_shared_layers` is 35 but the model has 35 layers"),
        "{err}"
    );
    // Zero shared layers: every layer keeps its own K/V.
    let mut none_shared = gemma_3n_e4b();
    none_shared["text_config"]["num_kv_shared_layers"] = json!(0);
    assert_eq!(
        per_position(&estimate(&none_shared, &at(8192)).unwrap()),
        35 * 2048
    );
}

#[test]
fn chatglm_without_multi_query_attention_keeps_every_head_in_its_dtype() {
    let chatglm = json!({
        "model_type": "chatglm", "num_layers": 28, "num_attention_heads": 32,
        "kv_channels": 128, "multi_query_attention": false, "multi_query_group_num": 2,
        "seq_length": 8192, "torch_dtype": "float16"
    });
    let e = estimate(&chatglm, &EstimateSettings::new()).unwrap();
    // vLLM's ChatGLM counts groups only with multi_query_attention: 32 heads
    // of kv_channels 128 (no hidden size to derive it from), float16 kept.
    assert_eq!(per_position(&e), 28 * 32 * 128 * 2 * 2);
    let geometry = e.specs[0].geometry().unwrap();
    assert_eq!(
        geometry.storage,
        kv_core::Storage::Dense(kv_core::DType::F16)
    );
    assert!(
        e.detected.contains("kv heads = `num_attention_heads` 32"),
        "{}",
        e.detected
    );
}

#[test]
fn a_pattern_the_config_writes_wins_over_the_loaders() {
    // Gemma-3-4B with its own layer_types (every 4th full), which the loader's
    // default (every 6th) would contradict.
    let layer_types: Vec<&str> = (0..34)
        .map(|i| {
            if (i + 1) % 4 == 0 {
                "full_attention"
            } else {
                "sliding_attention"
            }
        })
        .collect();
    let mut config = gemma_3_4b();
    config["text_config"]["layer_types"] = json!(layer_types);
    let e = estimate(&config, &at(8192)).unwrap();
    assert_eq!(
        names(&e.specs),
        [("sliding_attention", 26), ("full_attention", 8)]
    );
    assert!(
        !e.detected.contains("`sliding_window_pattern` 6"),
        "{}",
        e.detected
    );
}

#[test]
fn the_family_is_said_only_when_kv_does_not_know_it() {
    let known = estimate(&falcon_7b(), &at(2048)).unwrap();
    assert!(
        !known.detected.contains("not in kv's table"),
        "{}",
        known.detected
    );
    assert!(
        !known.detected.contains("no `model_type`"),
        "{}",
        known.detected
    );
    let mut anonymous = falcon_7b();
    anonymous.as_object_mut().unwrap().remove("model_type");
    let e = estimate(&anonymous, &at(2048)).unwrap();
    assert!(
        e.detected
            .contains("no `model_type`: read by the generic keys"),
        "{}",
        e.detected
    );
    // Without its family, Falcon's multi_query is not read: 71 KV heads.
    assert_eq!(per_position(&e), 32 * 71 * 64 * 2 * 2);
}

#[test]
fn sharing_without_a_pattern_and_patterns_from_chunk_keys_alone() {
    let plain = |extra: Value| {
        with_keys(
            json!({
                "model_type": "brand_new", "num_hidden_layers": 8, "num_attention_heads": 4,
                "num_key_value_heads": 2, "head_dim": 64, "torch_dtype": "bfloat16"
            }),
            extra,
        )
    };
    // The last 3 of 8 layers share: 5 full layers of 2 x 64 x 2 x 2 B.
    let e = estimate(&plain(json!({"num_kv_shared_layers": 3})), &at(1024)).unwrap();
    assert_eq!(names(&e.specs), [("full_attention", 5)]);
    // None shared, or a chunk size with no NoPE keys: plain attention.
    for extra in [
        json!({"num_kv_shared_layers": 0}),
        json!({"attention_chunk_size": 256}),
    ] {
        let e = estimate(&plain(extra), &at(1024)).unwrap();
        assert!(
            e.detected.starts_with("attention in every layer"),
            "{}",
            e.detected
        );
        assert_eq!(per_position(&e), 8 * 256 * 2);
    }
    // A chunk size with its own no_rope_layers list, in any family.
    let listed = json!({"attention_chunk_size": 256, "no_rope_layers": [1, 0, 1, 0, 1, 0, 1, 0]});
    let e = estimate(&plain(listed), &at(1024)).unwrap();
    assert_eq!(
        names(&e.specs),
        [("chunked_attention", 4), ("full_attention", 4)]
    );
}

#[test]
fn a_no_rope_list_unlike_the_loaders_interval_is_the_configs() {
    // Every 2nd layer NoPE, against Llama4TextConfig's default of every 4th.
    let listed: Vec<u64> = (0..48).map(|i| u64::from((i + 1) % 2 != 0)).collect();
    let e = estimate(&maverick(json!(listed)), &at(8192)).unwrap();
    assert_eq!(
        names(&e.specs),
        [("chunked_attention", 24), ("full_attention", 24)]
    );
}

#[test]
fn shared_layers_are_listed_up_to_a_bound() {
    let config = |layers: u64| {
        kv_core::HfConfig::from_value(json!({
            "num_hidden_layers": layers, "num_kv_shared_layers": 1,
        }))
    };
    let at_bound = config(1 << 20).layer_pattern().unwrap();
    assert_eq!(at_bound.count(LayerKind::KvShared), 1);
    let err = config((1 << 20) + 1)
        .layer_pattern()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("kv lists shared layers one by one, up to 1048576"),
        "{err}"
    );
}

#[test]
fn the_models_length_is_the_smallest_key_and_longrope_starts_short() {
    let e = estimate(
        &tiny(json!({"max_position_embeddings": 4096, "n_positions": 2048})),
        &EstimateSettings::new(),
    )
    .unwrap();
    assert_eq!(e.max_model_len, 2048);
    assert!(
        e.detected.contains("(`n_positions` of the config)"),
        "{}",
        e.detected
    );
    // On a tie the first key vLLM lists is named.
    let e = estimate(
        &tiny(json!({"max_position_embeddings": 4096, "max_seq_len": 4096})),
        &EstimateSettings::new(),
    )
    .unwrap();
    assert!(
        e.detected
            .contains("(`max_position_embeddings` of the config)"),
        "{}",
        e.detected
    );
    // The model's own length may be given.
    assert!(estimate(&tiny(json!({"max_position_embeddings": 4096})), &at(4096)).is_ok());
    // Phi-3-mini-128k: LongRoPE defaults to the original length.
    let phi3_128k = tiny(json!({
        "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
        "rope_scaling": {"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]}
    }));
    let e = estimate(&phi3_128k, &EstimateSettings::new()).unwrap();
    assert_eq!(e.max_model_len, 4096);
    assert!(
        e.detected.contains("vLLM's default for LongRoPE"),
        "{}",
        e.detected
    );
    // Without LongRoPE the original length is not used.
    let mut plain = phi3_128k.clone();
    plain["rope_scaling"] = Value::Null;
    assert_eq!(
        estimate(&plain, &EstimateSettings::new())
            .unwrap()
            .max_model_len,
        131_072
    );
}

/// A small Jamba-like hybrid: 4 layers (one attention), Mamba1 with
/// `d_inner` 2 x `hidden`.
fn small_hybrid(hidden: u64, d_state: u64) -> Value {
    json!({
        "model_type": "jamba", "num_hidden_layers": 4, "attn_layer_period": 4,
        "attn_layer_offset": 3, "hidden_size": hidden, "num_attention_heads": 8,
        "num_key_value_heads": 8, "head_dim": 128, "mamba_d_state": d_state,
        "mamba_d_conv": 4, "mamba_expand": 2, "torch_dtype": "bfloat16"
    })
}

#[test]
fn a_hybrid_state_smaller_than_a_block_is_padded_to_one_attention_page() {
    // State: d_inner 512 x (3 conv + 16 ssm) x 2 B = 19,456 B; one attention
    // page at block 16 is 16 x 8 x 128 x 2 x 2 = 65,536 B: the block stays 16
    // and the state page is padded to 65,536 B, 2 pages in align mode.
    let e = estimate(&small_hybrid(256, 16), &at(1024)).unwrap();
    assert_eq!(e.block_size, 16);
    assert_eq!(e.specs[0].bytes_per_row(), Ok(3 * 2 * 65_536));
    assert!(
        e.convention
            .contains("already holds the state page of 19456 B"),
        "{}",
        e.convention
    );
    // Exactly one page (d_inner 2048 x (3 + 13) x 2 B = 65,536 B): no padding.
    let e = estimate(&small_hybrid(1024, 13), &at(1024)).unwrap();
    assert_eq!(e.block_size, 16);
    assert_eq!(e.specs[0].bytes_per_row(), Ok(3 * 2 * 65_536));
    let Layout::Recurrent(state) = &e.specs[0].layout else {
        panic!("{:?}", e.specs[0].layout)
    };
    assert!(state.parts.iter().all(|p| p.name != "page_padding"));
}

#[test]
fn a_gated_deltanet_block_is_a_multiple_of_the_asked_block_and_64() {
    let mut qwen3_next: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/configs/qwen3-next-80b-a3b/config.json"
        ))
        .unwrap(),
    )
    .unwrap();
    qwen3_next["torch_dtype"] = json!("bfloat16");
    // lcm(80, 64) = 320: 320 x cdiv(1,097,728, 320 x 2,048) = 640.
    let e = estimate(&qwen3_next, &at(8192).block_size(80)).unwrap();
    assert_eq!(e.block_size, 640);
}

#[test]
fn a_rope_factor_that_makes_no_length_is_an_error() {
    let scaled = |len: u64, factor: f64| {
        tiny(json!({
            "max_position_embeddings": len,
            "rope_scaling": {"rope_type": "linear", "factor": factor}
        }))
    };
    for (len, factor) in [(4096, 0.0), (4096, 1e300), (1 << 32, 4_294_967_296.0)] {
        let err = estimate(&scaled(len, factor), &EstimateSettings::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a length"), "{len} x {factor}: {err}");
    }
    assert_eq!(
        estimate(&scaled(4096, 0.5), &EstimateSettings::new())
            .unwrap()
            .max_model_len,
        2048
    );
}

#[test]
fn an_estimate_divides_per_rank_and_exports_what_it_divided() {
    let e = estimate(&falcon_40b_like(), &at(2048).tensor_parallel(2)).unwrap();
    assert_eq!(e.collection().unwrap().entries().len(), 1);
    let ranks = e.ranks(kv_core::Parallel::new(2, 2).unwrap(), 10).unwrap();
    assert_eq!(ranks.len(), 4);
    // 60 layers, 8 KV heads of 64: each rank holds 30 layers x 4 heads x 256 B.
    for rank in &ranks {
        assert_eq!(rank.totals.per_position, 30 * 4 * 64 * 2 * 2);
        assert_eq!(rank.totals.per_row, 30 * 4 * 64 * 2 * 2 * 2048);
        assert_eq!(rank.totals.total, 10 * 30 * 4 * 64 * 2 * 2 * 2048);
    }
    let exported = e
        .export("falcon", kv_core::Parallel::new(2, 2).unwrap(), 10)
        .unwrap();
    assert_eq!(exported.ranks.len(), 4);
    assert_eq!(exported.ranks[3].per_row_bytes, ranks[3].totals.per_row);
    assert_eq!(exported.ranks[3].report.parallel.pp_rank, 1);
}

fn falcon_40b_like() -> Value {
    json!({
        "model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128,
        "num_hidden_layers": 60, "num_kv_heads": 8, "new_decoder_architecture": true,
        "max_position_embeddings": 2048, "torch_dtype": "bfloat16"
    })
}

/// Rank `(tp_rank, pp_rank)`'s declaration `name`, as `layout` divides `e`.
fn rank_spec(e: &Estimate, layout: kv_core::Parallel, at: (u64, u64), name: &str) -> KvSpec {
    let index = layout
        .ranks()
        .position(|p| (p.tp_rank, p.pp_rank) == at)
        .unwrap();
    let ranks = e.ranks(layout, 1).unwrap();
    ranks[index]
        .collection
        .entries()
        .iter()
        .find(|entry| entry.spec.name == name)
        .unwrap_or_else(|| panic!("no {name} on rank {at:?}"))
        .spec
        .clone()
}

/// A rank's state parts, `(name, shape)`.
fn parts_of(spec: &KvSpec) -> Vec<(&'static str, [u64; 3])> {
    let Layout::Recurrent(state) = &spec.layout else {
        panic!("{:?}", spec.layout)
    };
    state.parts.iter().map(|p| (p.name, p.shape)).collect()
}

fn shipped_qwen3_next() -> Value {
    let mut qwen3_next: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/configs/qwen3-next-80b-a3b/config.json"
        ))
        .unwrap(),
    )
    .unwrap();
    qwen3_next["torch_dtype"] = json!("bfloat16");
    qwen3_next
}

#[test]
fn qwen3_nexts_block_at_tp_8_is_sized_from_one_ranks_shard() {
    let e = estimate(&shipped_qwen3_next(), &at(8192).tensor_parallel(8)).unwrap();
    // One rank at tp 8: max(1, 2 / 8) = 1 KV head x 256 x (K + V) x 2 B =
    // 1,024 B per token per layer. Its Gated DeltaNet state: conv
    // (2 x 16 x 128 + 32 x 128) / 8 = 1,024 channels x 3 positions x 2 B =
    // 6,144 B, ssm 32 / 8 = 4 heads x 128 x 128 x 2 B = 131,072 B: 137,216 B.
    // On the 64-token checkpoint grid: 64 x cdiv(137,216, 64 x 1,024) =
    // 64 x 3 = 192 (vLLM 0.33's block at tp 8; the whole model's figures
    // gave 576).
    assert_eq!(e.block_size, 192);
    assert_eq!(e.tensor_parallel, 8);
    assert!(
        e.convention.contains(
            "block_size 192 (raised from 16: 64 x cdiv(state page 137216 B, 64 x 1024 B \
             per token per attention layer, one rank's of tp 8)"
        ),
        "{}",
        e.convention
    );
    let layout = kv_core::Parallel::new(8, 1).unwrap();
    let linear = rank_spec(&e, layout, (7, 0), "linear_attention");
    // Each rank's page is 192 x 1,024 = 196,608 B: the state and
    // 196,608 - 137,216 = 59,392 B of padding.
    assert_eq!(
        parts_of(&linear),
        [
            ("conv", [1024, 3, 1]),
            ("ssm", [4, 128, 128]),
            ("page_padding", [59_392, 1, 1])
        ]
    );
    // 36 layers x 3 pages (align mode, with the prefill checkpoint).
    assert_eq!(linear.bytes_per_row(), Ok(36 * 3 * 196_608));
    assert!(
        linear
            .cache
            .contains("3 page(s) of 196608 B per rank at tp 8, state 137216 B padded"),
        "{}",
        linear.cache
    );
    // cdiv(8192, 192) = 43 blocks = 8,256 positions of 12 layers x 1,024 B.
    let full = rank_spec(&e, layout, (0, 0), "full_attention");
    assert_eq!(full.bytes_per_row(), Ok(12 * 1024 * 8256));
    // An estimate is for one tp: another is refused, not silently resized.
    let err = e
        .ranks(kv_core::Parallel::new(2, 1).unwrap(), 1)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("the estimate was made for tp 8, not tp 2"),
        "{err}"
    );
}

#[test]
fn every_pipeline_stage_takes_the_ranks_block_and_holds_its_own_layers() {
    let settings = at(8192).tensor_parallel(8).pipeline_stages(2);
    let e = estimate(&shipped_qwen3_next(), &settings).unwrap();
    // The block is the model's, not the stage's: 192 on both stages.
    assert_eq!(e.block_size, 192);
    let layout = kv_core::Parallel::new(8, 2).unwrap();
    // 48 layers split 24 / 24; full attention every 4th: 6 full and 18
    // linear per stage.
    for stage in 0..2 {
        let linear = rank_spec(&e, layout, (3, stage), "linear_attention");
        assert_eq!(linear.bytes_per_row(), Ok(18 * 3 * 196_608));
        let full = rank_spec(&e, layout, (3, stage), "full_attention");
        assert_eq!(full.bytes_per_row(), Ok(6 * 1024 * 8256));
    }
}

/// Granite-4.0-H-Small's published keys (ibm-granite/granite-4.0-h-small):
/// 40 layers, attention at 5, 15, 25, 35, Mamba2 with one group.
fn granite_4_0_h_small() -> Value {
    let mut layer_types = vec!["mamba"; 40];
    for i in [5, 15, 25, 35] {
        layer_types[i] = "attention";
    }
    json!({
        "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid",
        "hidden_size": 4096, "num_hidden_layers": 40, "num_attention_heads": 32,
        "num_key_value_heads": 8, "layer_types": layer_types, "mamba_d_conv": 4,
        "mamba_d_head": 64, "mamba_d_state": 128, "mamba_expand": 2, "mamba_n_groups": 1,
        "mamba_n_heads": 128, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"
    })
}

#[test]
fn granite_4_0_hs_one_mamba2_group_is_repeated_on_every_rank() {
    // tp 2: vLLM pads n_groups 1 to 2 (extra_groups_for_head_shards), so a
    // rank's conv is (8192 + 2 x 2 x 128) / 2 = 4,352 channels x 3 x 2 B =
    // 26,112 B (not 8,448 / 2 = 4,224), its ssm 64 heads x 64 x 128 x 2 B =
    // 1,048,576 B: 1,074,688 B. Attention 8 / 2 = 4 heads x 128 x 2 x 2 B =
    // 2,048 B per token: block 16 x cdiv(1,074,688, 32,768) = 16 x 33 = 528,
    // page 528 x 2,048 = 1,081,344 B, padding 6,656 B.
    let e = estimate(&granite_4_0_h_small(), &at(8192).tensor_parallel(2)).unwrap();
    assert_eq!(e.block_size, 528);
    let layout = kv_core::Parallel::new(2, 1).unwrap();
    let mamba = rank_spec(&e, layout, (1, 0), "mamba");
    assert_eq!(
        parts_of(&mamba),
        [
            ("conv", [3, 4352, 1]),
            ("ssm", [64, 64, 128]),
            ("page_padding", [6_656, 1, 1])
        ]
    );
    assert_eq!(mamba.bytes_per_row(), Ok(36 * 3 * 1_081_344));
    assert!(
        mamba
            .cache
            .contains("1 groups (repeated on each of the 2 tp ranks"),
        "{}",
        mamba.cache
    );
    // cdiv(8192, 528) = 16 blocks = 8,448 positions, 4 layers x 2,048 B.
    let full = rank_spec(&e, layout, (0, 0), "full_attention");
    assert_eq!(full.bytes_per_row(), Ok(4 * 2048 * 8448));

    // tp 8: groups 1 -> 8; conv (8192 + 2 x 8 x 128) / 8 = 1,280 channels x 3
    // x 2 B = 7,680 B, ssm 16 x 64 x 128 x 2 B = 262,144 B: 269,824 B. One KV
    // head x 128 x 2 x 2 B = 512 B per token: block 16 x cdiv(269,824, 8,192)
    // = 16 x 33 = 528, page 528 x 512 = 270,336 B, padding 512 B.
    let e = estimate(&granite_4_0_h_small(), &at(8192).tensor_parallel(8)).unwrap();
    assert_eq!(e.block_size, 528);
    let mamba = rank_spec(&e, kv_core::Parallel::new(8, 1).unwrap(), (5, 0), "mamba");
    assert_eq!(
        parts_of(&mamba),
        [
            ("conv", [3, 1280, 1]),
            ("ssm", [16, 64, 128]),
            ("page_padding", [512, 1, 1])
        ]
    );
    assert!(
        mamba
            .cache
            .contains("3 page(s) of 270336 B per rank at tp 8, state 269824 B padded"),
        "{}",
        mamba.cache
    );
}

#[test]
fn mamba2_groups_or_heads_tp_does_not_split_are_refused_as_vllm_refuses_them() {
    // MambaMixer2: "If tensor parallel world size does not divide
    // num_groups, then num_groups must equal 1".
    let mut three_groups = granite_4_0_h_small();
    three_groups["mamba_n_groups"] = json!(3);
    let err = estimate(&three_groups, &at(8192).tensor_parallel(2)).unwrap_err();
    assert!(
        err.to_string()
            .contains("Mamba2 n_groups 3 is neither 1 nor divisible by tp 2"),
        "{err}"
    );
    // tp 3 does not divide Granite's 32 query heads: vLLM refuses that
    // first (`verify_with_parallel_config`).
    let err = estimate(&granite_4_0_h_small(), &at(8192).tensor_parallel(3)).unwrap_err();
    assert!(
        err.to_string()
            .contains("tp 3 does not divide the 32 query heads"),
        "{err}"
    );
    // With 48 query and 24 KV heads (of 128), tp 3 passes that check; then (one
    // group, 3 in all) the conv's 8192 + 2 x 3 x 128 = 8,960 channels do not
    // divide by 3.
    let mut heads_split = granite_4_0_h_small();
    heads_split["num_attention_heads"] = json!(48);
    heads_split["num_key_value_heads"] = json!(24);
    heads_split["head_dim"] = json!(128);
    let err = estimate(&heads_split, &at(8192).tensor_parallel(3)).unwrap_err();
    assert!(
        err.to_string()
            .contains("state part `conv` has 8960 heads/channels, which tp 3 does not split"),
        "{err}"
    );
    // Whole groups are kept whole: 4 groups at tp 2 are 2 per rank.
    let mut four_groups = granite_4_0_h_small();
    four_groups["mamba_n_groups"] = json!(4);
    let e = estimate(&four_groups, &at(8192).tensor_parallel(2)).unwrap();
    let mamba = rank_spec(&e, kv_core::Parallel::new(2, 1).unwrap(), (0, 0), "mamba");
    // (8192 + 2 x 4 x 128) / 2 = 4,608 channels.
    assert_eq!(parts_of(&mamba)[0], ("conv", [3, 4608, 1]));
}

/// Falcon-H1-7B-Instruct's published keys (tiiuae): attention and Mamba2 in
/// every layer.
fn falcon_h1_7b() -> Value {
    json!({
        "architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1",
        "hidden_size": 3072, "num_hidden_layers": 44, "num_attention_heads": 12,
        "num_key_value_heads": 2, "head_dim": 128, "attn_layer_indices": null,
        "mamba_d_conv": 4, "mamba_d_head": 128, "mamba_d_ssm": 3072, "mamba_d_state": 256,
        "mamba_expand": 2, "mamba_n_groups": 1, "mamba_n_heads": 24,
        "max_position_embeddings": 262144, "torch_dtype": "bfloat16"
    })
}

#[test]
fn falcon_h1_holds_attention_and_mamba2_in_every_layer() {
    let e = estimate(&falcon_h1_7b(), &at(8192)).unwrap();
    // vLLM registers model.layers.i.self_attn.attn and model.layers.{44 + i}.mixer
    // for each of the 44 layers.
    assert_eq!(names(&e.specs), [("full_attention", 44), ("mamba", 44)]);
    // Attention: 2 KV heads x 128 x 2 x 2 B = 1,024 B per token per layer.
    // Mamba2 (mamba_d_ssm 3072, not expand x hidden): conv (3072 + 2 x 1 x
    // 256) x 3 x 2 B = 21,504 B, ssm 24 x 128 x 256 x 2 B = 1,572,864 B:
    // 1,594,368 B. Block 16 x cdiv(1,594,368, 16,384) = 16 x 98 = 1,568, page
    // 1,568 x 1,024 = 1,605,632 B, 3 pages in align mode.
    assert_eq!(e.block_size, 1568);
    assert_eq!(e.specs[1].bytes_per_row(), Ok(44 * 3 * 1_605_632));
    // cdiv(8192, 1568) = 6 blocks = 9,408 positions.
    assert_eq!(e.specs[0].bytes_per_row(), Ok(44 * 1024 * 9408));
    assert_eq!(per_row(&e), 211_943_424 + 423_886_848);
    assert!(
        e.detected.starts_with(
            "attention and Mamba2 side by side in every layer (`model_type` falcon_h1"
        ),
        "{}",
        e.detected
    );
    assert!(e.specs.iter().all(|s| s.validate("falcon_h1").is_ok()));
    // Both groups are placed in every layer, by rule (the count is the config's).
    for spec in &e.specs {
        let group = spec.layer_group.as_ref().unwrap();
        assert_eq!(group.pattern.source(), "the family's rule");
        assert_eq!(group.pattern.count(group.kind), 44);
    }

    // tp 2, pp 2: one KV head x 128 x 2 x 2 B = 512 B per token; groups 1 ->
    // 2: conv (3072 + 2 x 2 x 256) / 2 = 2,048 x 3 x 2 B = 12,288 B, ssm 12 x
    // 128 x 256 x 2 B = 786,432 B: 798,720 B; block 16 x cdiv(798,720, 8,192)
    // = 16 x 98 = 1,568, page 802,816 B. Each stage: 22 layers of each.
    let settings = at(8192).tensor_parallel(2).pipeline_stages(2);
    let e = estimate(&falcon_h1_7b(), &settings).unwrap();
    assert_eq!(e.block_size, 1568);
    let layout = kv_core::Parallel::new(2, 2).unwrap();
    let mamba = rank_spec(&e, layout, (1, 1), "mamba");
    assert_eq!(mamba.bytes_per_row(), Ok(22 * 3 * 802_816));
    assert_eq!(parts_of(&mamba)[0], ("conv", [3, 2048, 1]));
    let full = rank_spec(&e, layout, (1, 1), "full_attention");
    assert_eq!(full.bytes_per_row(), Ok(22 * 512 * 9408));
}

/// LFM2-1.2B's published keys (LiquidAI/LFM2-1.2B): 16 layers, attention at
/// 2, 5, 8, 10, 12, 14 (`full_attn_idxs`), the rest gated short convs.
fn lfm2_1_2b() -> Value {
    let mut layer_types = vec!["conv"; 16];
    for i in [2, 5, 8, 10, 12, 14] {
        layer_types[i] = "full_attention";
    }
    json!({
        "architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2", "hidden_size": 2048,
        "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
        "num_heads": 32, "block_dim": 2048, "conv_dim": 2048, "conv_dim_out": 2048,
        "conv_L_cache": 3, "conv_bias": false, "full_attn_idxs": [2, 5, 8, 10, 12, 14],
        "layer_types": layer_types, "max_position_embeddings": 128000,
        "torch_dtype": "bfloat16"
    })
}

#[test]
fn lfm2s_conv_layers_keep_a_short_conv_state_padded_to_the_attention_page() {
    let e = estimate(&lfm2_1_2b(), &at(8192)).unwrap();
    assert_eq!(names(&e.specs), [("short_conv", 10), ("full_attention", 6)]);
    // No hybrid layer: each group is placed in the config's own pattern.
    for spec in &e.specs {
        let group = spec.layer_group.as_ref().unwrap();
        assert_eq!(group.pattern.source(), "layer_types");
    }
    // Short conv: conv_dim 2048 x (conv_L_cache - 1 = 2) x 2 B = 8,192 B.
    // Attention: 8 heads x 64 (2048 / 32) x 2 x 2 B = 2,048 B per token, so
    // the block stays 16 (16 x cdiv(8,192, 32,768) = 16) and the state is
    // padded to 16 x 2,048 = 32,768 B; no prefill checkpoint: 2 pages.
    assert_eq!(e.block_size, 16);
    assert_eq!(e.specs[0].bytes_per_row(), Ok(10 * 2 * 32_768));
    assert_eq!(e.specs[1].bytes_per_row(), Ok(6 * 2048 * 8192));
    assert!(
        e.specs[0]
            .cache
            .contains("short conv: 2048 channels over conv_L_cache - 1 = 2 positions, bf16"),
        "{}",
        e.specs[0].cache
    );
    assert!(
        e.specs[0]
            .cache
            .contains("mode align: 2 page(s) of 32768 B, state 8192 B padded"),
        "{}",
        e.specs[0].cache
    );
    assert!(
        e.convention
            .contains("(one attention page, 16 x 2048 B, already holds the state page of 8192 B)"),
        "{}",
        e.convention
    );
    // tp 2: 1,024 channels x 2 x 2 B = 4,096 B; 4 heads x 64 x 2 x 2 B =
    // 1,024 B per token: block 16, page 16,384 B.
    let e = estimate(&lfm2_1_2b(), &at(8192).tensor_parallel(2)).unwrap();
    let conv = rank_spec(
        &e,
        kv_core::Parallel::new(2, 1).unwrap(),
        (1, 0),
        "short_conv",
    );
    assert_eq!(
        parts_of(&conv),
        [("conv", [1024, 2, 1]), ("page_padding", [12_288, 1, 1])]
    );
    assert_eq!(conv.bytes_per_row(), Ok(10 * 2 * 16_384));
    // Without conv_dim vLLM's Lfm2 cannot build its layers: named, not guessed.
    let mut no_width = lfm2_1_2b();
    no_width.as_object_mut().unwrap().remove("conv_dim");
    let err = estimate(&no_width, &at(8192)).unwrap_err().to_string();
    assert!(err.contains("`conv_dim`"), "{err}");
    // A `conv` layer in a family kv does not know has no width to read.
    let unknown = tiny(json!({"layer_types": ["conv", "full_attention"], "conv_L_cache": 3}));
    let err = estimate(&unknown, &at(8192)).unwrap_err().to_string();
    assert!(
        err.contains("`conv` layers of a `model_type` kv does not know (`model_type` is \"llama\""),
        "{err}"
    );
}

/// LFM2-8B-A1B's published keys (LiquidAI/LFM2-8B-A1B): 24 layers, attention
/// at 2, 6, 10, 14, 18, 21; its short convs are `hidden_size` wide.
fn lfm2_8b_a1b() -> Value {
    let mut layer_types = vec!["conv"; 24];
    for i in [2, 6, 10, 14, 18, 21] {
        layer_types[i] = "full_attention";
    }
    json!({
        "architectures": ["Lfm2MoeForCausalLM"], "model_type": "lfm2_moe",
        "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 32,
        "num_key_value_heads": 8, "conv_L_cache": 3, "layer_types": layer_types,
        "num_experts": 32, "num_experts_per_tok": 4, "max_position_embeddings": 128000,
        "torch_dtype": "bfloat16"
    })
}

#[test]
fn lfm2_moes_short_convs_are_hidden_size_wide() {
    // vLLM's Lfm2MoeShortConvDecoderLayer: hidden_size 2048 x 2 x 2 B = 8,192
    // B; 8 heads x 64 x 2 x 2 B = 2,048 B per token: block 16, page 32,768 B.
    let e = estimate(&lfm2_8b_a1b(), &at(8192)).unwrap();
    assert_eq!(names(&e.specs), [("short_conv", 18), ("full_attention", 6)]);
    assert_eq!(e.block_size, 16);
    assert_eq!(e.specs[0].bytes_per_row(), Ok(18 * 2 * 32_768));
}

/// Zyphra/Zamba2-2.7B's keys (as transformers' Zamba2Config writes them):
/// 54 layers, 9 of them `hybrid` (Mamba2 beside a shared attention block),
/// every layer a Mamba2 mixer. The hybrid positions are reconstructed; the
/// figures depend on their count only.
fn zamba2_2_7b() -> Value {
    let mut blocks = vec!["mamba"; 54];
    for i in [6, 12, 18, 24, 30, 36, 42, 47, 51] {
        blocks[i] = "hybrid";
    }
    json!({
        "architectures": ["Zamba2ForCausalLM"], "model_type": "zamba2", "hidden_size": 2560,
        "num_hidden_layers": 54, "layers_block_type": blocks, "num_attention_heads": 32,
        "num_key_value_heads": 32, "num_mem_blocks": 2, "mamba_d_conv": 4,
        "mamba_d_state": 64, "mamba_expand": 2, "mamba_headdim": 64, "mamba_ngroups": 1,
        "n_mamba_heads": 80, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"
    })
}

#[test]
fn zamba2s_hybrid_layers_hold_mamba2_and_one_attention_layer_each() {
    let e = estimate(&zamba2_2_7b(), &EstimateSettings::new()).unwrap();
    // Every layer's Mamba2 mixer (54), and one vLLM Attention per hybrid
    // layer (9: `Zamba2Attention.dpa_list`, one per block index).
    assert_eq!(names(&e.specs), [("mamba", 54), ("full_attention", 9)]);
    // Attention: 32 heads x 160 (2 x 2560 / 32, Zamba2Config's
    // attention_head_dim) x 2 x 2 B = 20,480 B per token. Mamba2: d_inner 2 x
    // 2560 = 5,120; conv (5120 + 2 x 64) x 3 x 2 B = 31,488 B, ssm 80 x 64 x
    // 64 x 2 B = 655,360 B: 686,848 B. Block 16 x cdiv(686,848, 327,680) =
    // 48, page 48 x 20,480 = 983,040 B, 3 pages.
    assert_eq!(e.block_size, 48);
    assert_eq!(e.specs[0].bytes_per_row(), Ok(54 * 3 * 983_040));
    // max_model_len 4096: cdiv(4096, 48) = 86 blocks = 4,128 positions.
    assert_eq!(e.specs[1].bytes_per_row(), Ok(9 * 20_480 * 4128));
    assert!(
        e.detected
            .contains("head dim = 2 x `hidden_size` / `num_attention_heads` = 160"),
        "{}",
        e.detected
    );
    assert!(e.specs.iter().all(|s| s.validate("zamba2").is_ok()));
    // Zamba2Config sets attention_head_dim over what a config writes (the
    // older `kv_channels`-style 80, here): still 160.
    let mut written = zamba2_2_7b();
    written["attention_head_dim"] = json!(80);
    written["head_dim"] = json!(80);
    let given = estimate(&written, &EstimateSettings::new()).unwrap();
    assert_eq!(given.specs, e.specs);
    // vLLM's Zamba2Attention refuses a width the heads do not divide:
    // 2 x 2560 = 5,120 over 48 heads.
    let mut uneven = zamba2_2_7b();
    uneven["num_attention_heads"] = json!(48);
    uneven["num_key_value_heads"] = json!(48);
    let err = estimate(&uneven, &EstimateSettings::new())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("attention width 2 x `hidden_size` = 5120 is not divisible by"),
        "{err}"
    );

    // tp 2: 16 heads x 160 x 2 x 2 B = 10,240 B; groups 1 -> 2: conv (5120 +
    // 2 x 2 x 64) / 2 = 2,688 x 3 x 2 B = 16,128 B, ssm 40 x 64 x 64 x 2 B =
    // 327,680 B: 343,808 B; block 16 x cdiv(343,808, 163,840) = 48, page
    // 491,520 B.
    let e = estimate(&zamba2_2_7b(), &EstimateSettings::new().tensor_parallel(2)).unwrap();
    assert_eq!(e.block_size, 48);
    let mamba = rank_spec(&e, kv_core::Parallel::new(2, 1).unwrap(), (0, 0), "mamba");
    assert_eq!(parts_of(&mamba)[0], ("conv", [3, 2688, 1]));
    assert_eq!(mamba.bytes_per_row(), Ok(54 * 3 * 491_520));
}
