//! Published configs whose vLLM 0.33 model class reads them its own way
//! (Falcon's cache dtype, Nemotron-H's pattern, MiniCPM3's heads), vLLM's
//! KV format names, and configs without a dtype; keys and layout as
//! published, figures worked out by hand from vLLM's source.

use kv_core::pattern::LayerKind;
use kv_core::Storage;
use serde_json::{json, Value};

use super::detect::{estimate, Estimate};
use super::settings::EstimateSettings;

fn at(positions: u64) -> EstimateSettings {
    EstimateSettings::new().positions(positions)
}

fn format(name: &str) -> Storage {
    Storage::from_name(name).unwrap()
}

fn per_position(e: &Estimate) -> u64 {
    e.specs
        .iter()
        .map(|s| s.layout.bytes_per_position().unwrap().unwrap())
        .sum()
}

fn names(e: &Estimate) -> Vec<(&str, u64)> {
    e.specs
        .iter()
        .map(|s| (s.name.as_ref(), s.layout.layers()))
        .collect()
}

fn falcon_7b() -> Value {
    json!({
        "alibi": false, "apply_residual_connection_post_layernorm": false,
        "architectures": ["FalconForCausalLM"], "attention_dropout": 0.0, "bias": false,
        "bos_token_id": 11, "eos_token_id": 11, "hidden_dropout": 0.0, "hidden_size": 4544,
        "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "falcon",
        "multi_query": true, "new_decoder_architecture": false, "num_attention_heads": 71,
        "num_hidden_layers": 32, "parallel_attn": true, "torch_dtype": "bfloat16",
        "transformers_version": "4.27.4", "use_cache": true, "vocab_size": 65024
    })
}

fn falcon_40b() -> Value {
    json!({
        "alibi": false, "apply_residual_connection_post_layernorm": false,
        "architectures": ["FalconForCausalLM"], "attention_dropout": 0.0, "bias": false,
        "bos_token_id": 11, "eos_token_id": 11, "hidden_dropout": 0.0, "hidden_size": 8192,
        "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "falcon",
        "new_decoder_architecture": true, "num_attention_heads": 128,
        "num_hidden_layers": 60, "num_kv_heads": 8, "parallel_attn": true,
        "torch_dtype": "bfloat16", "transformers_version": "4.27.4", "use_cache": true,
        "vocab_size": 65024
    })
}

#[test]
fn falcon_keeps_the_model_dtype_whatever_kv_format_is_asked() {
    // vLLM's falcon.py builds `Attention` without `cache_config` (rotary and
    // ALiBi alike), so `kv_cache_dtype` is "auto": bf16 K/V.
    // Falcon-7B: 32 layers x 1 KV head x 64 (4544 / 71) x (K + V) x 2 B.
    let e = estimate(&falcon_7b(), &at(2048).kv_format(format("fp8"))).unwrap();
    assert_eq!(per_position(&e), 8_192);
    let assumes = e.specs[0].assumes.as_deref().unwrap();
    assert!(
        assumes.starts_with("the KV format f8e4m3 asked is not applied: vLLM 0.33's Falcon"),
        "{assumes}"
    );
    assert!(
        assumes.ends_with("K/V in the model dtype bf16"),
        "{assumes}"
    );
    assert!(
        e.detected
            .contains("the KV format f8e4m3 asked is not applied"),
        "{}",
        e.detected
    );
    assert!(e.specs[0].cache.contains("bf16"), "{}", e.specs[0].cache);
    // Falcon-40B: 60 layers x 8 KV heads x 64 x 2 x 2 B = 122,880, not the
    // 60 x 8 x 2 x (64 + 4) = 65,280 of int8_per_token_head.
    let asked = at(2048).kv_format(format("int8_per_token_head"));
    let e = estimate(&falcon_40b(), &asked).unwrap();
    assert_eq!(per_position(&e), 122_880);
    // Nothing asked, nothing said.
    let e = estimate(&falcon_40b(), &at(2048)).unwrap();
    assert_eq!(e.specs[0].assumes, None);
    assert!(!e.detected.contains("not applied"), "{}", e.detected);
}

#[test]
fn falcons_kv_cache_scheme_still_applies_without_the_cache_config() {
    // `Attention` takes the scheme's fp8 when its kv_cache_dtype is auto,
    // which it always is for Falcon: 32 x 1 x 64 x 2 x 1 B, whatever is asked.
    let mut config = falcon_7b();
    config["quantization_config"] = json!({"kv_cache_scheme": {"num_bits": 8, "type": "float"}});
    let e = estimate(&config, &at(2048).kv_format(format("bfloat16"))).unwrap();
    assert_eq!(per_position(&e), 4_096);
    let assumes = e.specs[0].assumes.as_deref().unwrap();
    assert!(assumes.contains("not applied"), "{assumes}");
    assert!(assumes.contains("K/V in f8e4m3 as"), "{assumes}");
    // Another family takes the format asked over the scheme.
    let mut llama = llama_3_8b();
    llama["quantization_config"] = config["quantization_config"].clone();
    let e = estimate(&llama, &at(8192).kv_format(format("bfloat16"))).unwrap();
    assert_eq!(per_position(&e), 131_072);
}

fn llama_3_8b() -> Value {
    json!({
        "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
        "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "llama",
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "rope_theta": 500000.0, "torch_dtype": "bfloat16", "vocab_size": 128256
    })
}

#[test]
fn vllms_format_names_and_per_token_head_scales_on_llama_3_8b() {
    // 32 layers x 8 KV heads x (K + V): 512 vectors of 128 per token.
    // int8/fp8_per_token_head: 128 B + a 4 B float32 scale = 132 B each;
    // int4_per_token_head: 64 B + 4 B = 68 B; fp8 (e4m3 on CUDA), fp8_e4m3
    // and fp8_e5m2: 128 B; bfloat16, float16: 256 B.
    for (name, bytes) in [
        ("int8_per_token_head", 67_584),
        ("fp8_per_token_head", 67_584),
        ("int4_per_token_head", 34_816),
        ("fp8", 65_536),
        ("fp8_e4m3", 65_536),
        ("fp8_e5m2", 65_536),
        ("bfloat16", 131_072),
        ("float16", 131_072),
    ] {
        let e = estimate(&llama_3_8b(), &at(8192).kv_format(format(name))).unwrap();
        assert_eq!(per_position(&e), bytes, "{name}");
        // 8192 positions are 512 blocks of 16.
        assert_eq!(e.specs[0].bytes_per_row(), Ok(bytes * 8192), "{name}");
    }
    let e = estimate(
        &llama_3_8b(),
        &at(8192).kv_format(format("int8_per_token_head")),
    )
    .unwrap();
    assert!(
        e.specs[0].cache.contains("int8_per_token_head"),
        "{}",
        e.specs[0].cache
    );
}

#[test]
fn a_per_token_head_format_on_mla_is_refused_as_vllm_refuses_it() {
    let deepseek_v2_lite = json!({
        "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
        "num_hidden_layers": 27, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128, "num_attention_heads": 16, "num_key_value_heads": 16,
        "max_position_embeddings": 163840, "torch_dtype": "bfloat16"
    });
    let err = estimate(
        &deepseek_v2_lite,
        &at(8192).kv_format(format("int8_per_token_head")),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("int8_per_token_head on an MLA model: vLLM 0.33 has no MLA attention backend"),
        "{err}"
    );
    // fp8 is taken: 27 x (512 + 64) x 1 B.
    let e = estimate(&deepseek_v2_lite, &at(8192).kv_format(format("fp8"))).unwrap();
    assert_eq!(per_position(&e), 15_552);
}

fn minicpm3_4b() -> Value {
    json!({
        "architectures": ["MiniCPM3ForCausalLM"], "bos_token_id": 1, "eos_token_id": [2, 73440],
        "hidden_act": "silu", "hidden_size": 2560, "initializer_range": 0.1,
        "intermediate_size": 6400, "max_position_embeddings": 32768, "model_type": "minicpm3",
        "num_attention_heads": 40, "num_hidden_layers": 62, "num_key_value_heads": 40,
        "qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "q_lora_rank": 768,
        "kv_lora_rank": 256, "rms_norm_eps": 1e-05, "scale_emb": 12, "dim_model_base": 256,
        "scale_depth": 1.4, "torch_dtype": "bfloat16", "vocab_size": 73448
    })
}

#[test]
fn minicpm3_caches_plain_heads_not_an_mla_latent() {
    let e = estimate(&minicpm3_4b(), &at(8192)).unwrap();
    // vLLM's MiniCPM3Attention: Attention(40 heads, qk_head_dim 64 + 32 = 96,
    // num_kv_heads 40), V padded to 96: 62 x 40 x (96 + 96) x 2 B, not the
    // 62 x (256 + 32) x 2 = 35,712 of an MLA latent.
    assert_eq!(per_position(&e), 952_320);
    assert_eq!(names(&e), [("full_attention", 62)]);
    assert!(
        e.detected.starts_with("attention in every layer"),
        "{}",
        e.detected
    );
    assert!(
        e.detected
            .contains("MiniCPM3: MLA-shaped keys, but vLLM caches plain heads: kv heads = `num_attention_heads` 40"),
        "{}",
        e.detected
    );
    // transformers 5 saves `head_dim` as the rotary part (32) and may drop
    // num_key_value_heads; vLLM reads neither.
    let mut saved = minicpm3_4b();
    saved["head_dim"] = json!(32);
    saved["num_key_value_heads"] = json!(8);
    assert_eq!(per_position(&estimate(&saved, &at(8192)).unwrap()), 952_320);
    // A head dim given explicitly wins, as for every family.
    let given = kv_core::config::HfConfig::from_value(minicpm3_4b())
        .with_head_dim(128)
        .geometry()
        .unwrap();
    assert_eq!((given.kv_heads, given.head_dim), (40, 128));
    // Without its rope part, the head is not known: the key is named.
    let mut broken = minicpm3_4b();
    broken.as_object_mut().unwrap().remove("qk_rope_head_dim");
    let err = estimate(&broken, &at(8192)).unwrap_err().to_string();
    assert!(err.contains("`qk_rope_head_dim`"), "{err}");
}

/// `M` Mamba2, `*` attention, `-` MLP: 24 / 4 / 24.
const NEMOTRON_H_PATTERN: &str = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-";

fn nemotron_h_8b() -> Value {
    json!({
        "architectures": ["NemotronHForCausalLM"], "attention_bias": false,
        "attention_head_dim": 128, "chunk_size": 128, "conv_kernel": 4, "expand": 2,
        "hidden_size": 4096, "hybrid_override_pattern": NEMOTRON_H_PATTERN,
        "intermediate_size": 21504, "layer_norm_epsilon": 1e-05, "mamba_head_dim": 64,
        "mamba_hidden_act": "silu", "mamba_num_heads": 128, "mamba_proj_bias": false,
        "max_position_embeddings": 8192, "mlp_hidden_act": "relu2", "model_type": "nemotron_h",
        "n_groups": 8, "num_attention_heads": 32, "num_hidden_layers": 52,
        "num_key_value_heads": 8, "rescale_prenorm_residual": true, "residual_in_fp32": false,
        "sliding_window": null, "ssm_state_size": 128, "torch_dtype": "bfloat16",
        "use_bias": false, "use_conv_bias": true, "vocab_size": 131072
    })
}

#[test]
fn nemotron_h_8b_has_4_attention_and_24_mamba2_layers() {
    let e = estimate(&nemotron_h_8b(), &at(8192)).unwrap();
    // The 24 `-` layers hold nothing.
    assert_eq!(names(&e), [("mamba", 24), ("full_attention", 4)]);
    // Mamba2 state: conv (128 x 64 + 2 x 8 x 128) x (4 - 1) = 10,240 x 3 bf16
    // = 61,440 B; ssm 128 x 64 x 128 float32 (NemotronH's default
    // mamba_ssm_cache_dtype) = 4,194,304 B; 4,255,744 B in all.
    // Attention: 8 heads x 128 x (K + V) x 2 B = 4,096 B per token per layer:
    // block 16 x cdiv(4,255,744, 16 x 4,096) = 16 x 65 = 1,040, page
    // 1,040 x 4,096 = 4,259,840 B, 3 pages in align mode (Mamba2 checkpoints).
    assert_eq!(e.block_size, 1040);
    assert_eq!(e.specs[0].bytes_per_row(), Ok(24 * 3 * 4_259_840));
    // cdiv(8192, 1040) = 8 blocks = 8,320 positions.
    assert_eq!(e.specs[1].bytes_per_row(), Ok(4 * 4096 * 8320));
    let per_row: u64 = e.specs.iter().map(|s| s.bytes_per_row().unwrap()).sum();
    assert_eq!(per_row, 443_023_360);
    assert!(
        e.detected.contains("(hybrid_override_pattern)"),
        "{}",
        e.detected
    );
    // `attention_head_dim` is not NemotronHConfig's key: its head_dim is 128.
    assert!(
        e.detected
            .contains("`head_dim` 128 (transformers NemotronHConfig default)"),
        "{}",
        e.detected
    );
    // The pattern places each kind for pipeline stages: layers 0-25 hold
    // 12 M and the attention layers 7 and 18.
    let pattern = kv_core::config::HfConfig::from_value(nemotron_h_8b())
        .layer_pattern()
        .unwrap();
    assert_eq!(pattern.count_in(LayerKind::Mamba, 0, 26), 12);
    assert_eq!(pattern.count_in(LayerKind::FullAttention, 0, 26), 2);
    assert_eq!(pattern.count(LayerKind::Mlp), 24);
}

#[test]
fn nemotron_h_saved_by_transformers_5_lists_its_mamba_as_linear_attention() {
    // NemotronHConfig._pattern_to_list: M linear_attention, - mlp,
    // * full_attention, E moe; vLLM reads the list back as the pattern.
    let list: Vec<&str> = NEMOTRON_H_PATTERN
        .chars()
        .map(|c| match c {
            'M' => "linear_attention",
            '-' => "mlp",
            '*' => "full_attention",
            _ => "moe",
        })
        .collect();
    let mut saved = nemotron_h_8b();
    saved
        .as_object_mut()
        .unwrap()
        .remove("hybrid_override_pattern");
    saved["layers_block_type"] = json!(list);
    let e = estimate(&saved, &at(8192)).unwrap();
    let published = estimate(&nemotron_h_8b(), &at(8192)).unwrap();
    assert_eq!(names(&e), [("mamba", 24), ("full_attention", 4)]);
    // 24 x 3 x 4,259,840 + 4 x 4,096 x 8,320, as from the pattern.
    let per_row: u64 = e.specs.iter().map(|s| s.bytes_per_row().unwrap()).sum();
    assert_eq!(per_row, 443_023_360);
    assert_eq!(e.block_size, published.block_size);
    // Both spellings at once must agree, layer by layer.
    saved["hybrid_override_pattern"] = json!(NEMOTRON_H_PATTERN);
    assert_eq!(estimate(&saved, &at(8192)).unwrap().block_size, 1040);
}

#[test]
fn nemotron_h_mamba_width_is_heads_times_head_dim_as_vllm_builds_it() {
    // Nemotron-H-4B's layout: hidden 3,072 and expand 2 (6,144), but 112
    // Mamba heads of 64 = 7,168, which vLLM builds the mixer with; attention
    // keeps NemotronHConfig's head_dim 128 (not 3,072 / 32 = 96).
    let mut config = nemotron_h_8b();
    for (key, value) in [
        ("hidden_size", json!(3072)),
        ("mamba_num_heads", json!(112)),
        ("intermediate_size", json!(12288)),
    ] {
        config[key] = value;
    }
    let e = estimate(&config, &at(8192)).unwrap();
    // conv (7,168 + 2 x 8 x 128) x 3 x 2 B = 55,296; ssm 112 x 64 x 128 x 4 B
    // = 3,670,016; 3,725,312 B. Block 16 x cdiv(3,725,312, 65,536) = 16 x 57
    // = 912, page 912 x 4,096 = 3,735,552 B.
    assert_eq!(e.block_size, 912);
    assert_eq!(e.specs[0].bytes_per_row(), Ok(24 * 3 * 3_735_552));
}

#[test]
fn nemotron_h_moe_layers_hold_nothing_and_a_bad_pattern_names_its_key() {
    // Nemotron-3-Nano's spelling: `E` (MoE) beside `M` and `*`.
    let mut config = nemotron_h_8b();
    config["hybrid_override_pattern"] = json!("MEMEM*EMEMEM*E");
    config["num_hidden_layers"] = json!(14);
    let e = estimate(&config, &at(8192)).unwrap();
    assert_eq!(names(&e), [("mamba", 6), ("full_attention", 2)]);
    for (pattern, layers, expected) in [
        (
            json!("MEM?"),
            4,
            "`hybrid_override_pattern` has '?' at layer 3; vLLM's Nemotron-H knows `*`",
        ),
        (
            json!("MEM*"),
            5,
            "`hybrid_override_pattern` has 4 layers but the model has 5; vLLM builds one \
             layer per character, so give `num_hidden_layers` 4",
        ),
        (
            json!(["M", "*"]),
            2,
            "`hybrid_override_pattern` is [\"M\",\"*\"]; expected a string",
        ),
    ] {
        config["hybrid_override_pattern"] = pattern;
        config["num_hidden_layers"] = json!(layers);
        let err = estimate(&config, &at(8192)).unwrap_err().to_string();
        assert!(err.contains(expected), "{err}");
    }
}

fn gpt2() -> Value {
    json!({
        "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
        "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256,
        "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
        "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
        "resid_pdrop": 0.1, "summary_activation": null, "summary_first_dropout": 0.1,
        "summary_proj_to_labels": true, "summary_type": "cls_index", "summary_use_proj": true,
        "vocab_size": 50257
    })
}

#[test]
fn a_config_without_a_dtype_is_float32_to_vllm_and_served_in_bf16() {
    // No torch_dtype: vLLM takes float32 (no safetensors header read), and
    // dtype=auto on Hopper downcasts it to bf16.
    // GPT-2: 12 layers x 12 heads x 64 (768 / 12) x (K + V) x 2 B.
    let e = estimate(&gpt2(), &EstimateSettings::new()).unwrap();
    assert_eq!(per_position(&e), 36_864);
    assert_eq!(e.max_model_len, 1024);
    assert_eq!(e.specs[0].bytes_per_row(), Ok(36_864 * 1024));
    assert!(
        e.detected.contains(
            "dtype bf16: none of `torch_dtype`, `dtype` is set, which vLLM resolves as float32"
        ),
        "{}",
        e.detected
    );
    // GPT-J-6B: 28 x 16 x 256 (4096 / 16) x 2 x 2 B.
    let gptj = json!({
        "activation_function": "gelu_new", "architectures": ["GPTJForCausalLM"],
        "model_type": "gptj", "n_embd": 4096, "n_head": 16, "n_layer": 28,
        "n_positions": 2048, "rotary_dim": 64, "vocab_size": 50400
    });
    assert_eq!(
        per_position(&estimate(&gptj, &EstimateSettings::new()).unwrap()),
        458_752
    );
    // BLOOM-560m: 24 x 16 x 64 (1024 / 16) x 2 x 2 B.
    let bloom = json!({
        "architectures": ["BloomForCausalLM"], "hidden_size": 1024, "model_type": "bloom",
        "n_head": 16, "n_layer": 24, "vocab_size": 250880
    });
    assert_eq!(per_position(&estimate(&bloom, &at(2048)).unwrap()), 98_304);
    // A dtype written is read as before.
    let mut f16 = gpt2();
    f16["torch_dtype"] = json!("float16");
    let e = estimate(&f16, &EstimateSettings::new()).unwrap();
    assert_eq!(per_position(&e), 36_864);
    assert!(
        e.detected.contains("dtype f16 as `torch_dtype` writes it")
            && !e.detected.contains("dtype bf16"),
        "{}",
        e.detected
    );
}
