//! What SGLang 0.5.23 holds once it has loaded a checkpoint of the classes
//! whose layout differs from Llama's: Gemma 3 (a plain embedding, a table
//! per theta), GLM-4.5 (a float32 router, an MTP layer, half a head
//! rotated), OLMo 3 (a table per layer type), the classes it serves through
//! its Transformers backend (frequencies instead of a table, heads never
//! replicated), MiniCPM3, StableLM and Phi (partial rotary dims). Every
//! figure is worked out by hand below from SGLang's classes
//! (models/gemma3_causal.py, glm4_moe.py, olmo2.py, transformers.py,
//! minicpm3.py, stablelm.py) and its rotary layer (float32 tables of
//! `[rows, rotary_dim]`, one per distinct `get_rope` key). The same
//! configs, built by transformers and by SGLang's own classes on the meta
//! device, gave these totals (scripts/sglang/compare_weights_hf.py, the
//! configs in scripts/vllm/fit-configs: Gemma 3 241,152 B and 5,184 B at
//! TP 1, 130,560 B at TP 2, 87,552 B at TP 4; GLM-4.5 126,608 B and
//! 1,280 B at TP 1, 64,144 B at TP 2; OLMo 3 6,400 B of tables).

mod common;

use common::*;
use kv_engines::fit::sglang::loaded_weights;
use kv_engines::weights::StoredTensor;
use serde_json::{json, Value};

/// Hidden 64, 4 heads of 16, 2 KV heads, 6 layers (the sixth full, the
/// others sliding), a vocabulary of 128, 40 positions; the full layers'
/// rope linear x 2.5 at theta 1,000,000, the sliding ones' at 10,000.
fn gemma3_config() -> Value {
    json!({
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
        "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "num_hidden_layers": 6, "vocab_size": 128,
        "max_position_embeddings": 40, "intermediate_size": 32, "sliding_window": 8,
        "sliding_window_pattern": 6, "rope_scaling": {"rope_type": "linear", "factor": 2.5},
        "rope_theta": 1_000_000.0, "rope_local_base_freq": 10_000.0,
        "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    })
}

fn gemma3_checkpoint() -> Vec<StoredTensor> {
    gemma_checkpoint(6, true)
}

/// Gemma 2's and 3's layout at hidden 64 (4 heads of 16, 2 KV heads, an
/// MLP of 32, four norms a layer), 128 words, tied; Gemma 3 adds q and k
/// norms.
fn gemma_checkpoint(layers: u64, qk_norms: bool) -> Vec<StoredTensor> {
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.norm.weight", &[64]),
    ];
    for layer in 0..layers {
        let at = |part: &str| format!("model.layers.{layer}.{part}.weight");
        tensors.extend([
            bf16(&at("self_attn.q_proj"), &[64, 64]),
            bf16(&at("self_attn.k_proj"), &[32, 64]),
            bf16(&at("self_attn.v_proj"), &[32, 64]),
            bf16(&at("self_attn.o_proj"), &[64, 64]),
            bf16(&at("mlp.gate_proj"), &[32, 64]),
            bf16(&at("mlp.up_proj"), &[32, 64]),
            bf16(&at("mlp.down_proj"), &[64, 32]),
            bf16(&at("input_layernorm"), &[64]),
            bf16(&at("post_attention_layernorm"), &[64]),
            bf16(&at("pre_feedforward_layernorm"), &[64]),
            bf16(&at("post_feedforward_layernorm"), &[64]),
        ]);
        if qk_norms {
            tensors.push(bf16(&at("self_attn.q_norm"), &[16]));
            tensors.push(bf16(&at("self_attn.k_norm"), &[16]));
        }
    }
    tensors
}

#[test]
fn gemma_3_keeps_its_embedding_whole_on_every_rank() {
    let held = |tp| loaded_weights(&gemma3_config(), &gemma3_checkpoint(), tp).unwrap();
    // TP 1, one layer: q 8,192, k and v 4,096 each, o 8,192, q_norm and
    // k_norm 32 each, gate and up 4,096 each, down 4,096, four norms 128
    // each: 37,440. Six layers 224,640, the embedding 16,384 (no padding:
    // a plain nn.Embedding), the final norm 128.
    assert_eq!(held(1).tensor_bytes, 224_640 + 16_384 + 128);
    // TP 2: the embedding still whole; a layer's q 4,096, k and v one head
    // each (2,048), o 4,096, gate, up and down 2,048 each, the norms whole
    // (64 + 512): 19,008.
    assert_eq!(held(2).tensor_bytes, 6 * 19_008 + 16_384 + 128);
    // TP 4: one q head (2,048); the 2 KV heads replicated, one a rank
    // (2,048 each); o 2,048; gate, up and down 1,024 each: 11,840.
    assert_eq!(held(4).tensor_bytes, 6 * 11_840 + 16_384 + 128);
    // An untied head is SGLang's ParallelLMHead: split and padded (128 rows
    // over 2 ranks: 64 x 64 x 2 = 8,192).
    let mut untied = gemma3_config();
    untied["tie_word_embeddings"] = json!(false);
    let mut tensors = gemma3_checkpoint();
    tensors.push(bf16("lm_head.weight", &[128, 64]));
    let held = loaded_weights(&untied, &tensors, 2).unwrap();
    assert_eq!(held.tensor_bytes, 6 * 19_008 + 16_384 + 128 + 8_192);
    // A vocabulary of 100 is held as 100 rows, not padded to 128.
    let mut small = gemma3_config();
    small["vocab_size"] = json!(100);
    let embedding = [bf16("model.embed_tokens.weight", &[100, 64])];
    assert_eq!(
        loaded_weights(&small, &embedding, 2).unwrap().tensor_bytes,
        12_800
    );
}

#[test]
fn gemma_3_holds_an_unscaled_table_per_theta_and_two_frequency_buffers() {
    // Each attention asks for a `default` table whatever the scaling:
    // 40 x 16 x 4 = 2,560 B at theta 1,000,000 and again at 10,000; the
    // model's two Hugging Face rotary modules keep 8 float32 each (64 B).
    let held = loaded_weights(&gemma3_config(), &[], 1).unwrap();
    assert_eq!(held.rotary_bytes, 2 * 2_560 + 64);
    // One theta for both layer types: one table.
    let mut one_theta = gemma3_config();
    one_theta["rope_local_base_freq"] = json!(1_000_000.0);
    assert_eq!(
        loaded_weights(&one_theta, &[], 1).unwrap().rotary_bytes,
        2_560 + 64
    );
    // Every layer sliding (a pattern of 7 over 6 layers): one table.
    let mut sliding = gemma3_config();
    sliding["sliding_window_pattern"] = json!(7);
    assert_eq!(
        loaded_weights(&sliding, &[], 1).unwrap().rotary_bytes,
        2_560 + 64
    );
    // transformers 5's nested parameters, as the published 1B's config
    // reads once saved: two thetas, two tables.
    let mut nested = gemma3_config();
    for key in ["rope_scaling", "rope_theta", "rope_local_base_freq"] {
        nested.as_object_mut().unwrap().remove(key);
    }
    nested["rope_parameters"] = json!({
        "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
    });
    assert_eq!(
        loaded_weights(&nested, &[], 1).unwrap().rotary_bytes,
        2 * 2_560 + 64
    );
    // Refused: a partial factor, a rope kind kv has not checked.
    let mut partial = gemma3_config();
    partial["partial_rotary_factor"] = json!(0.5);
    let words = loaded_weights(&partial, &[], 1).unwrap_err();
    assert!(words.contains("partial rotary factor"), "{words}");
    let mut yarn = gemma3_config();
    yarn["rope_scaling"] = json!({"rope_type": "yarn", "factor": 4.0});
    let words = loaded_weights(&yarn, &[], 1).unwrap_err();
    assert!(words.contains("rope_type `yarn`"), "{words}");
}

/// Hidden 64, 4 heads of 16, 2 KV heads; layer 0 dense (32 wide), layer 1
/// MoE (4 routed experts and 1 shared, 16 wide); one MTP layer; 128 words,
/// 40 positions, untied.
fn glm45_config() -> Value {
    json!({
        "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "num_hidden_layers": 2, "first_k_dense_replace": 1, "n_routed_experts": 4,
        "n_shared_experts": 1, "moe_intermediate_size": 16, "intermediate_size": 32,
        "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1,
        "num_nextn_predict_layers": 1, "attention_bias": false, "vocab_size": 128,
        "max_position_embeddings": 40, "rope_theta": 10_000.0,
        "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    })
}

fn glm45_layer(layer: u64, moe: bool) -> Vec<StoredTensor> {
    let at = |part: &str| format!("model.layers.{layer}.{part}");
    let mut tensors = vec![
        bf16(&at("self_attn.q_proj.weight"), &[64, 64]),
        bf16(&at("self_attn.k_proj.weight"), &[32, 64]),
        bf16(&at("self_attn.v_proj.weight"), &[32, 64]),
        bf16(&at("self_attn.o_proj.weight"), &[64, 64]),
        bf16(&at("input_layernorm.weight"), &[64]),
        bf16(&at("post_attention_layernorm.weight"), &[64]),
    ];
    if !moe {
        tensors.extend([
            bf16(&at("mlp.gate_proj.weight"), &[32, 64]),
            bf16(&at("mlp.up_proj.weight"), &[32, 64]),
            bf16(&at("mlp.down_proj.weight"), &[64, 32]),
        ]);
        return tensors;
    }
    tensors.extend([
        bf16(&at("mlp.gate.weight"), &[4, 64]),
        f32(&at("mlp.gate.e_score_correction_bias"), &[4]),
        bf16(&at("mlp.shared_experts.gate_proj.weight"), &[16, 64]),
        bf16(&at("mlp.shared_experts.up_proj.weight"), &[16, 64]),
        bf16(&at("mlp.shared_experts.down_proj.weight"), &[64, 16]),
    ]);
    for expert in 0..4 {
        let at = |p: &str| format!("model.layers.{layer}.mlp.experts.{expert}.{p}.weight");
        tensors.extend([
            bf16(&at("gate_proj"), &[16, 64]),
            bf16(&at("up_proj"), &[16, 64]),
            bf16(&at("down_proj"), &[64, 16]),
        ]);
    }
    tensors
}

fn glm45_checkpoint() -> Vec<StoredTensor> {
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.norm.weight", &[64]),
        bf16("lm_head.weight", &[128, 64]),
    ];
    tensors.extend(glm45_layer(0, false));
    tensors.extend(glm45_layer(1, true));
    tensors
}

#[test]
fn glm_4_5_keeps_its_router_in_float32_and_skips_the_mtp_layer() {
    // TP 1. Layer 0: q, k, v 16,384; o 8,192; gate and up 8,192; down
    // 4,096; two norms 256: 37,120. Layer 1: attention and norms 24,832;
    // the router's weight in float32, 4 x 64 x 4 = 1,024, and its bias
    // 16; the experts' gate and up 4 x 32 x 64 x 2 = 16,384, their down
    // 8,192; the shared expert 4,096 + 2,048: 51,584 + 1,040 = 56,592.
    // Embedding and head 16,384 each, the norm 128.
    let mut tensors = glm45_checkpoint();
    let held = loaded_weights(&glm45_config(), &tensors, 1).unwrap();
    assert_eq!(held.tensor_bytes, 37_120 + 56_592 + 2 * 16_384 + 128);
    assert_eq!(held.tensor_bytes, 126_608);
    // Half of each head rotated (the class's default 0.5): 40 x 8 x 4.
    assert_eq!(held.rotary_bytes, 1_280);
    // TP 2: everything split but the router and the norms (1,040 + 128 +
    // 4 x 128): the other 124,928 halve.
    let held = loaded_weights(&glm45_config(), &tensors, 2).unwrap();
    assert_eq!(held.tensor_bytes, (126_608 - 1_680) / 2 + 1_680);
    // The published MTP layer (model.layers.2, past the config's two)
    // is skipped, whatever it holds.
    let mtp = glm45_layer(2, true);
    let mtp_bytes: u64 = mtp.iter().map(|t| t.bytes).sum();
    tensors.extend(mtp);
    tensors.push(bf16("model.layers.2.eh_proj.weight", &[64, 128]));
    let held = loaded_weights(&glm45_config(), &tensors, 1).unwrap();
    assert_eq!(held.tensor_bytes, 126_608);
    assert_eq!(held.skipped_bytes, mtp_bytes + 16_384);
    // The loader skips any name its model lacks, MTP layers or not.
    let mut no_mtp = glm45_config();
    no_mtp["num_nextn_predict_layers"] = json!(0);
    assert_eq!(
        loaded_weights(&no_mtp, &tensors, 1).unwrap().tensor_bytes,
        126_608
    );
    // Other classes' loaders are not read for it: refused, not guessed.
    let mut qwen3 = no_mtp.clone();
    qwen3["architectures"] = json!(["Qwen3ForCausalLM"]);
    let words = loaded_weights(&qwen3, &glm45_layer(2, false), 1).unwrap_err();
    assert!(
        words.contains("`model.layers.2.self_attn.q_proj.weight`: layer 2, but the config has 2"),
        "{words}"
    );
    // A partial factor the config names is read: a quarter of 16.
    let mut quarter = glm45_config();
    quarter["partial_rotary_factor"] = json!(0.25);
    assert_eq!(loaded_weights(&quarter, &[], 1).unwrap().rotary_bytes, 640);
}

#[test]
fn olmo_3_holds_a_table_per_layer_type() {
    // Served by SGLang's OLMo 2 class: the sliding layers ask for a
    // `default` table, the full ones for the config's rope; the keys differ,
    // so two tables of 50 x 16 x 4 = 3,200 B.
    let config = json!({
        "architectures": ["Olmo3ForCausalLM"], "model_type": "olmo3", "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
        "intermediate_size": 32, "vocab_size": 100, "max_position_embeddings": 50,
        "sliding_window": 16, "layer_types": ["sliding_attention", "full_attention"],
        "rope_theta": 500_000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    });
    assert_eq!(loaded_weights(&config, &[], 1).unwrap().rotary_bytes, 6_400);
    // YaRN x 4 over 16 original positions on the full layers: 64 rows
    // there (4,096 B), the sliding table unscaled.
    let mut yarn = config.clone();
    yarn["rope_scaling"] = json!({"rope_type": "yarn", "factor": 4.0,
                                  "original_max_position_embeddings": 16});
    assert_eq!(
        loaded_weights(&yarn, &[], 1).unwrap().rotary_bytes,
        3_200 + 4_096
    );
    // Full layers only: one table.
    let mut full = config.clone();
    full["layer_types"] = json!(["full_attention", "full_attention"]);
    assert_eq!(loaded_weights(&full, &[], 1).unwrap().rotary_bytes, 3_200);
    let mut other = config.clone();
    other["layer_types"] = json!(["sliding_attention", "linear_attention"]);
    let words = loaded_weights(&other, &[], 1).unwrap_err();
    assert!(words.contains("`linear_attention`"), "{words}");
    let mut none = config;
    none.as_object_mut().unwrap().remove("layer_types");
    assert!(loaded_weights(&none, &[], 1)
        .unwrap_err()
        .contains("`layer_types`"));
}

#[test]
fn the_transformers_backend_keeps_frequencies_and_never_replicates_kv_heads() {
    // SmolLM3's shape: 16 heads of 128, 4 KV heads. transformers' rotary
    // module keeps inv_freq and original_inv_freq, 64 float32 each.
    let config = json!({
        "architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3",
        "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 4,
        "vocab_size": 128, "max_position_embeddings": 32_768,
        "rope_parameters": {"rope_type": "default", "rope_theta": 2_000_000.0},
        "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    });
    assert_eq!(loaded_weights(&config, &[], 1).unwrap().rotary_bytes, 512);
    // 4 KV heads over 4 ranks divide; over 8 SGLang's backend asserts.
    assert!(loaded_weights(&config, &[], 4).is_ok());
    assert_eq!(
        loaded_weights(&config, &[], 8).unwrap_err(),
        "SGLang refuses: 4 is not divisible by 8"
    );
    // Its own classes replicate them instead (Qwen3 at TP 8 is answered).
    let mut qwen3 = config.clone();
    qwen3["architectures"] = json!(["Qwen3ForCausalLM"]);
    assert!(loaded_weights(&qwen3, &[], 8).is_ok());
    // GPT-NeoX rotates a quarter of each head (rotary_pct): 24 of 96, 12
    // float32 each; checked at TP 1 only.
    let neox = json!({
        "architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox",
        "hidden_size": 6144, "num_attention_heads": 64, "rotary_pct": 0.25,
        "vocab_size": 50_432, "max_position_embeddings": 2048, "torch_dtype": "float16",
    });
    assert_eq!(loaded_weights(&neox, &[], 1).unwrap().rotary_bytes, 96);
    let words = loaded_weights(&neox, &[], 2).unwrap_err();
    assert!(words.contains("checked at TP 1 only"), "{words}");
}

#[test]
fn partial_rotary_dims_where_each_class_reads_them() {
    let config = |class: &str, extra: Value| {
        let mut config = json!({
            "architectures": [class], "hidden_size": 64, "num_attention_heads": 4,
            "vocab_size": 128, "max_position_embeddings": 40, "torch_dtype": "float16",
        });
        for (key, value) in extra.as_object().unwrap() {
            config[key] = value.clone();
        }
        config
    };
    let rotary = |config: &Value| loaded_weights(config, &[], 1).map(|l| l.rotary_bytes);
    // Phi: int(0.5 x 16) = 8 dims, 40 x 8 x 4 = 1,280.
    let phi = config("PhiForCausalLM", json!({"partial_rotary_factor": 0.5}));
    assert_eq!(rotary(&phi), Ok(1_280));
    // StableLM reads `rope_pct` before `partial_rotary_factor`: a quarter,
    // 4 dims, 640.
    let stablelm = config(
        "StableLmForCausalLM",
        json!({"rope_pct": 0.25, "partial_rotary_factor": 0.5}),
    );
    assert_eq!(rotary(&stablelm), Ok(640));
    let stablelm = config("StableLmForCausalLM", json!({"partial_rotary_factor": 0.5}));
    assert_eq!(rotary(&stablelm), Ok(1_280));
    // Unset, transformers' config classes give their own defaults: Phi
    // half a head (1,280), StableLM a quarter (640), even where the rope
    // section names another factor (their attribute is read, not it).
    let nested = json!({"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.4}});
    assert_eq!(rotary(&config("PhiForCausalLM", nested.clone())), Ok(1_280));
    assert_eq!(rotary(&config("StableLmForCausalLM", nested)), Ok(640));
    // GLM-4 rotates half a head unless told: 1,280.
    assert_eq!(rotary(&config("Glm4ForCausalLM", json!({}))), Ok(1_280));
    // Llama's attention (llama.py) reads the factor: 1,280.
    let llama = config("LlamaForCausalLM", json!({"partial_rotary_factor": 0.5}));
    assert_eq!(rotary(&llama), Ok(1_280));
    // It reads the top level only: a factor the rope section alone names
    // leaves the whole head rotated, 40 x 16 x 4 = 2,560.
    let nested = config(
        "LlamaForCausalLM",
        json!({"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}}),
    );
    assert_eq!(rotary(&nested), Ok(2_560));
    // GLM-4 reads the rope section first: a quarter there over a half at
    // the top level, 4 dims, 640.
    let glm = config(
        "Glm4ForCausalLM",
        json!({"partial_rotary_factor": 0.5,
               "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.25}}),
    );
    assert_eq!(rotary(&glm), Ok(640));
    // Qwen3's reads none: kv refuses rather than guess which it builds.
    let qwen3 = config("Qwen3ForCausalLM", json!({"partial_rotary_factor": 0.5}));
    assert!(rotary(&qwen3)
        .unwrap_err()
        .contains("partial rotary dim (8)"));
    // MiniCPM3 rotates the rope part of each latent head: 32 of a
    // `hidden_size / heads` of 64, as its published config gives no
    // `head_dim`: 40 x 32 x 4 = 5,120.
    let minicpm3 = json!({
        "architectures": ["MiniCPM3ForCausalLM"], "hidden_size": 2560,
        "num_attention_heads": 40, "qk_rope_head_dim": 32, "qk_nope_head_dim": 64,
        "kv_lora_rank": 256, "q_lora_rank": 768, "vocab_size": 73_448,
        "max_position_embeddings": 40, "torch_dtype": "bfloat16",
    });
    assert_eq!(rotary(&minicpm3), Ok(5_120));
}

#[test]
fn longrope_keeps_three_caches_in_the_served_dtype() {
    // rope_variant.py's Phi3LongRoPEScaledRotaryEmbedding: the short cache
    // (8 rows), the long one (40) and both end to end (48), each x 16 in
    // bfloat16: 2 x 48 x 16 x 2 = 3,072 B.
    let config = json!({
        "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2,
        "vocab_size": 128, "max_position_embeddings": 40,
        "original_max_position_embeddings": 8, "torch_dtype": "bfloat16",
        "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.0], "long_factor": [1.0, 1.0]},
    });
    let rotary = |config: &Value| loaded_weights(config, &[], 1).map(|held| held.rotary_bytes);
    assert_eq!(rotary(&config), Ok(3_072));
    // Served in float16 (a float32 config): the same width.
    let mut float32 = config.clone();
    float32["torch_dtype"] = json!("float32");
    assert_eq!(rotary(&float32), Ok(3_072));
    // Phi-4-mini's three quarters of a head (llama.py reads the factor):
    // 12 dims, 2 x 48 x 12 x 2 = 2,304.
    let mut partial = config.clone();
    partial["partial_rotary_factor"] = json!(0.75);
    assert_eq!(rotary(&partial), Ok(2_304));
    // PhiMoE's head has a bias whatever the config says: without
    // `lm_head_bias` the config is refused.
    let mut moe = config;
    moe["architectures"] = json!(["PhiMoEForCausalLM"]);
    let words = rotary(&moe).unwrap_err();
    assert!(words.contains("`lm_head_bias` is not true"), "{words}");
    moe["lm_head_bias"] = json!(true);
    assert_eq!(rotary(&moe), Ok(3_072));
}

#[test]
fn gpt_oss_keeps_its_expert_biases_in_float32() {
    let (config, tensors) = (gpt_oss_config(), gpt_oss_checkpoint());
    // TP 1, a layer: qkv 16,384 and its bias 256; o 8,192 and its bias
    // 128; the sinks 8; the router 512 and its bias 8; w13 16,384 and its
    // bias in float32, 4 x 32 x 4 = 512; w2 8,192 and its bias 4 x 64 x 4
    // = 1,024; two norms 256: 51,856. The embedding and the head 16,384
    // each, the norm 128. The YaRN table 32 x 16 x 4 = 2,048.
    let held = loaded_weights(&config, &tensors, 1).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 51_856 + 2 * 16_384 + 128);
    assert_eq!(held.rotary_bytes, 2_048);
    // TP 2: qkv 8,192 and 128; o 4,096 and its whole bias 128; the sinks
    // of 2 heads 4; the router whole 520; w13 8,192 and its bias split,
    // 256; w2 4,096 and its bias whole, 1,024; norms 256: 26,892.
    let held = loaded_weights(&config, &tensors, 2).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 26_892 + 2 * 8_192 + 128);
}

#[test]
fn deepseek_keeps_w_kc_and_w_vc_beside_its_latent_projection() {
    // TP 1, a layer's attention: q_a 4,096, its norm 64, q_b 384 x 32 x 2 =
    // 24,576, kv_a (the latent and the rope key) 576 x 64 x 2 = 73,728, its
    // norm 1,024, kv_b 512 x 512 x 2 = 524,288, o 64 x 256 x 2 = 32,768,
    // two layer norms 256: 660,800. Layer 0's MLP: gate and up 8,192, down
    // 4,096. Layer 1's MoE: the router 512 (bf16), its correction bias in
    // float32, 16; the experts 4 x 3 x 1,024 x 2 = 24,576; the shared
    // expert 6,144: 31,248. The embedding and the head 16,384 each, the
    // norm 128. No 512-byte blocks: SGLang's harness counts elements.
    let held = loaded_weights(&deepseek_v3_config(), &deepseek_v3_checkpoint(), 1).unwrap();
    assert_eq!(
        held.tensor_bytes,
        2 * 660_800 + 12_288 + 31_248 + 2 * 16_384 + 128
    );
    assert_eq!(held.tensor_bytes, 1_398_032);
    // post_load_weights splits kv_b into w_kc and w_vc, contiguous copies:
    // 524,288 again a layer.
    assert_eq!(held.other_tensor_bytes, 2 * 524_288);
    // The latent rope's YaRN table, float32: ceil(10 x 2.5) x 64 x 4.
    assert_eq!(held.rotary_bytes, 25 * 64 * 4);
    assert_eq!(held.total(), Some(1_398_032 + 1_048_576 + 6_400));
    // TP 2: q_a, kv_a and their norms whole (79,168 with the layer norms),
    // q_b 12,288, kv_b 262,144, o 16,384; the MLP 6,144; the router
    // whole, the experts and the shared expert halved, 15,888; the
    // vocabulary halved, 8,192 twice.
    let held = loaded_weights(&deepseek_v3_config(), &deepseek_v3_checkpoint(), 2).unwrap();
    assert_eq!(
        held.tensor_bytes,
        2 * (79_168 + 12_288 + 262_144 + 16_384) + 6_144 + 15_888 + 2 * 8_192 + 128
    );
    // One head a rank: w_vc's slice of kv_b is contiguous already, so
    // `contiguous()` returns it as it is; only w_kc is a copy, half of
    // the rank's kv_b (131,072) a layer.
    assert_eq!(held.other_tensor_bytes, 2 * 131_072);
    // The MTP layer a published checkpoint ships is skipped.
    let mut tensors = deepseek_v3_checkpoint();
    let mtp = deepseek_mtp_layer();
    let mtp_bytes: u64 = mtp.iter().map(|t| t.bytes).sum();
    tensors.extend(mtp);
    let held = loaded_weights(&deepseek_v3_config(), &tensors, 1).unwrap();
    assert_eq!(
        (held.tensor_bytes, held.skipped_bytes),
        (1_398_032, mtp_bytes)
    );
    assert_eq!(held.other_tensor_bytes, 2 * 524_288);
}

#[test]
fn deepseek_rules_refuse_what_sglang_cannot_build_or_kv_has_not_checked() {
    let refusal =
        |config: &Value| loaded_weights(config, &deepseek_v3_checkpoint(), 1).unwrap_err();
    // transformers 5's config classes set no `moe_layer_freq`, which
    // SGLang's model reads.
    let mut no_freq = deepseek_v3_config();
    no_freq.as_object_mut().unwrap().remove("moe_layer_freq");
    let words = refusal(&no_freq);
    assert!(
        words.contains("'DeepseekV3Config' object has no attribute 'moe_layer_freq'"),
        "{words}"
    );
    no_freq["architectures"] = json!(["DeepseekV2ForCausalLM"]);
    let words = refusal(&no_freq);
    assert!(
        words.contains("'DeepseekV2Config' object has no attribute 'moe_layer_freq'"),
        "{words}"
    );
    // A correction bias without `noaux_tc`: the class builds none.
    let mut greedy = deepseek_v3_config();
    greedy["topk_method"] = json!("greedy");
    assert!(refusal(&greedy).contains("`e_score_correction_bias`"));
    // `router_fp32`: the router's weight in float32, 4 x 64 x 2 more.
    let mut fp32 = deepseek_v3_config();
    fp32["router_fp32"] = json!(true);
    let held = loaded_weights(&fp32, &deepseek_v3_checkpoint(), 1).unwrap();
    assert_eq!(held.tensor_bytes, 1_398_032 + 512);
    // Heads without a nope part: w_kc has no width kv can split by.
    let mut no_nope = deepseek_v3_config();
    no_nope["qk_nope_head_dim"] = json!(0);
    assert!(refusal(&no_nope).contains("`qk_nope_head_dim`"));
    // Without MTP layers, a layer past the config's is refused.
    let mut no_mtp = deepseek_v3_config();
    no_mtp["num_nextn_predict_layers"] = json!(0);
    let mut tensors = deepseek_v3_checkpoint();
    tensors.extend(deepseek_mtp_layer());
    let words = loaded_weights(&no_mtp, &tensors, 1).unwrap_err();
    assert!(words.contains("layer 2, but the config has 2"), "{words}");
}

#[test]
fn llama_4_keeps_its_unlearned_qk_norms_as_plain_tensors() {
    // llama4.py: each layer but every fourth uses rope, and there a qk norm
    // with no learned weight, `torch.ones(head_dim)` held as a plain
    // tensor: 8 layers, 6 of them with rope, 16 wide in bfloat16: 192 B.
    let config = json!({
        "architectures": ["Llama4ForCausalLM"], "model_type": "llama4_text",
        "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "num_hidden_layers": 8, "vocab_size": 128,
        "max_position_embeddings": 40, "use_qk_norm": true, "torch_dtype": "bfloat16",
    });
    let held = loaded_weights(&config, &[], 1).unwrap();
    assert_eq!(held.other_tensor_bytes, 6 * 16 * 2);
    // Not at every TP: the same norms on each rank.
    assert_eq!(
        loaded_weights(&config, &[], 2).unwrap().other_tensor_bytes,
        192
    );
    let mut without = config;
    without["use_qk_norm"] = json!(false);
    assert_eq!(
        loaded_weights(&without, &[], 1).unwrap().other_tensor_bytes,
        0
    );
}

#[test]
fn qwen3_next_keeps_a_gemma_weight_beside_each_norm() {
    // scripts/vllm/fit-configs/test-qwen3-next-small.json: 4 layers, every
    // second one full attention (4 heads of 16, 2 KV heads, q and k norms),
    // the others Gated DeltaNet; a quarter of each head rotated.
    let config: Value = serde_json::from_str(include_str!(
        "../../scripts/vllm/fit-configs/test-qwen3-next-small.json"
    ))
    .unwrap();
    let mut tensors = vec![bf16("model.norm.weight", &[64])];
    for layer in 0..4 {
        let at = |part: &str| format!("model.layers.{layer}.{part}");
        tensors.push(bf16(&at("input_layernorm.weight"), &[64]));
        tensors.push(bf16(&at("post_attention_layernorm.weight"), &[64]));
        if layer % 2 == 1 {
            tensors.push(bf16(&at("self_attn.q_norm.weight"), &[16]));
            tensors.push(bf16(&at("self_attn.k_norm.weight"), &[16]));
        } else {
            // The decay's log, float32 once loaded whatever it is stored
            // as: 4 heads x 4 B.
            tensors.push(bf16(&at("linear_attn.A_log"), &[4]));
        }
    }
    let held = loaded_weights(&config, &tensors, 1).unwrap();
    // Norms: 128 + 4 x 256 + 2 x 64 = 1,280 B; two decays 32 B.
    assert_eq!(held.tensor_bytes, 1_280 + 32);
    // Each norm is a GemmaRMSNorm with a `gemma_weight` buffer as large.
    assert_eq!(held.other_buffer_bytes, 1_280);
    // One table of 50 x int(16 x 0.25) = 4, float32: 800 B.
    assert_eq!(held.rotary_bytes, 800);
    // The factor at the top level is read; unset, the config class's 0.25;
    // only in the rope section, not read.
    let mut half = config.clone();
    half["partial_rotary_factor"] = json!(0.5);
    assert_eq!(loaded_weights(&half, &[], 1).unwrap().rotary_bytes, 1_600);
    let mut nested = config;
    nested
        .as_object_mut()
        .unwrap()
        .remove("partial_rotary_factor");
    nested["rope_parameters"] = json!({"rope_type": "default", "partial_rotary_factor": 0.5});
    assert_eq!(loaded_weights(&nested, &[], 1).unwrap().rotary_bytes, 800);
}

#[test]
fn nemotron_h_keeps_its_decay_in_float32_and_no_table() {
    // A Mamba layer and an attention layer; the attention has no positions.
    let config = json!({
        "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
        "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "num_hidden_layers": 2, "hybrid_override_pattern": "M*",
        "vocab_size": 128, "max_position_embeddings": 40, "torch_dtype": "bfloat16",
    });
    let tensors = [
        bf16("model.layers.0.mixer.A_log", &[8]),
        bf16("model.layers.0.mixer.D", &[8]),
        bf16("model.layers.1.mixer.q_proj.weight", &[64, 64]),
    ];
    // A_log in float32, 32 B; D 16 B; q 8,192 B.
    let held = loaded_weights(&config, &tensors, 1).unwrap();
    assert_eq!((held.tensor_bytes, held.rotary_bytes), (32 + 16 + 8_192, 0));
    // Above TP 1 its mixers split by the config's heads: this config names
    // none, so kv-core's Nemotron-H default (128) stands, which the
    // checkpoint's 8 contradict: refused by name.
    let words = loaded_weights(&config, &tensors, 2).unwrap_err();
    assert!(
        words.contains(
            "`model.layers.0.mixer.A_log` has 8 rows; the config's Mamba2 mixer gives 128"
        ),
        "{words}"
    );
    // Its mixture-of-experts layers are not checked.
    let mut moe = config.clone();
    moe["hybrid_override_pattern"] = json!("M*E");
    let words = loaded_weights(&moe, &tensors, 1).unwrap_err();
    assert!(
        words.contains("`E` in `hybrid_override_pattern`"),
        "{words}"
    );
    // Granite 4.0-H builds a table only with rope positions.
    let mut granite = config;
    granite["architectures"] = json!(["GraniteMoeHybridForCausalLM"]);
    granite["layer_types"] = json!(["mamba", "attention"]);
    assert_eq!(loaded_weights(&granite, &[], 1).unwrap().rotary_bytes, 0);
    granite["position_embedding_type"] = json!("rope");
    assert_eq!(
        loaded_weights(&granite, &[], 1).unwrap().rotary_bytes,
        40 * 16 * 4
    );
}

/// scripts/vllm/fit-configs/test-gemma-2-small.json: hidden 64, 4 heads of
/// 16, 2 KV heads, 2 layers, an MLP of 32, 128 words, 40 positions.
fn gemma2_config() -> Value {
    serde_json::from_str(include_str!(
        "../../scripts/vllm/fit-configs/test-gemma-2-small.json"
    ))
    .unwrap()
}

fn gemma2_checkpoint() -> Vec<StoredTensor> {
    gemma_checkpoint(2, false)
}

#[test]
fn gemma_2_keeps_a_gemma_weight_beside_each_norm_and_its_embedding_scale() {
    let (config, tensors) = (gemma2_config(), gemma2_checkpoint());
    // TP 1, a layer: q 8,192, k and v 4,096 each, o 8,192, gate, up and
    // down 4,096 each, four norms 512: 37,376. The embedding 16,384 (128
    // words, a multiple of 64), the norm 128.
    let held = loaded_weights(&config, &tensors, 1).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 37_376 + 16_384 + 128);
    assert_eq!(held.tensor_bytes, 91_264);
    // One float32 table of 40 x 16 for both layer kinds: 2,560.
    assert_eq!(held.rotary_bytes, 2_560);
    // Each GemmaRMSNorm's `gemma_weight` (2 x 512 + 128), and the
    // embedding's `normalizer`, a bfloat16 scalar: 1,154.
    assert_eq!(held.other_buffer_bytes, 1_152 + 2);
    // TP 2: q 4,096, k and v 2,048, o 4,096, the MLP 2,048 x 3, the norms
    // whole 512: 18,944 a layer; the embedding halved.
    let held = loaded_weights(&config, &tensors, 2).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 18_944 + 8_192 + 128);
    // gemma2.py builds no head: a checkpoint's `lm_head.weight` is skipped
    // even where the config unties it.
    let mut untied = config.clone();
    untied["tie_word_embeddings"] = json!(false);
    let mut with_head = tensors.clone();
    with_head.push(bf16("lm_head.weight", &[128, 64]));
    let held = loaded_weights(&untied, &with_head, 1).unwrap();
    assert_eq!((held.tensor_bytes, held.skipped_bytes), (91_264, 16_384));
}

#[test]
fn gemma_2_needs_both_activation_keys_sglang_reads() {
    let tensors = gemma2_checkpoint();
    // transformers 5's Gemma2Config writes `hidden_activation` alone.
    let mut config = gemma2_config();
    config.as_object_mut().unwrap().remove("hidden_act");
    let words = loaded_weights(&config, &tensors, 1).unwrap_err();
    assert!(
        words.contains("'Gemma2Config' object has no attribute 'hidden_act'"),
        "{words}"
    );
    // Another activation: gemma2.py's ValueError.
    config["hidden_act"] = json!("gelu");
    let words = loaded_weights(&config, &tensors, 1).unwrap_err();
    assert!(
        words.contains("Please set `hidden_act` and `hidden_activation` to `gelu_pytorch_tanh`"),
        "{words}"
    );
    // Without `hidden_activation`, the config class's default is the one
    // gemma2.py takes.
    config["hidden_act"] = json!("gelu_pytorch_tanh");
    config.as_object_mut().unwrap().remove("hidden_activation");
    assert!(loaded_weights(&config, &tensors, 1).is_ok());
}

#[test]
fn opt_holds_its_learned_positions_and_no_table() {
    // scripts/vllm/fit-configs/test-opt-small.json: hidden 64, 4 heads, one
    // layer, an FFN of 128, 100 words, 32 positions (34 rows: OPT offsets
    // them by 2), tied.
    let config: Value = serde_json::from_str(include_str!(
        "../../scripts/vllm/fit-configs/test-opt-small.json"
    ))
    .unwrap();
    let tensors = opt_small_checkpoint();
    // TP 1: the vocabulary padded to 128 rows, 16,384; the positions 4,352;
    // the final norm 256. The layer: q, k, v, o 32,768 and their biases
    // 512, two norms 512, fc1 16,384 and 256, fc2 16,384 and 128: 66,944.
    let held = loaded_weights(&config, &tensors, 1).unwrap();
    assert_eq!(held.tensor_bytes, 16_384 + 4_352 + 256 + 66_944);
    assert_eq!(held.tensor_bytes, 87_936);
    // opt.py builds no rotary layer.
    assert_eq!(held.rotary_bytes, 0);
    // TP 2: the vocabulary halved, 8,192; the positions and the final norm
    // whole. q, k, v halved 12,288 and their biases 192; o 4,096 and its
    // bias whole 128; fc1 8,192 and 128; fc2 8,192 and its bias whole 128;
    // the norms 512: 33,856.
    let held = loaded_weights(&config, &tensors, 2).unwrap();
    assert_eq!(held.tensor_bytes, 8_192 + 4_352 + 256 + 33_856);
}

#[test]
fn apertus_keeps_xielus_beta_and_eps_as_bfloat16_buffers() {
    // scripts/vllm/fit-configs/test-apertus-small.json, one layer.
    let mut config: Value = serde_json::from_str(include_str!(
        "../../scripts/vllm/fit-configs/test-apertus-small.json"
    ))
    .unwrap();
    let tensors = apertus_small_checkpoint();
    // TP 1, the layer: qkv 16,384, o 8,192, q and k norms 64, up and down
    // 8,192, alpha_p and alpha_n 4, two norms 256: 33,092. The embedding
    // and the head 16,384 each, the norm 128.
    let held = loaded_weights(&config, &tensors, 1).unwrap();
    assert_eq!(held.tensor_bytes, 33_092 + 2 * 16_384 + 128);
    // beta and eps are XIELU's buffers, bfloat16: 4 B a layer.
    assert_eq!(held.other_buffer_bytes, 4);
    assert_eq!(held.rotary_bytes, 50 * 16 * 4);
    // Two layers: two pairs of buffers, whether the checkpoint stores them
    // or not.
    config["num_hidden_layers"] = json!(2);
    assert_eq!(
        loaded_weights(&config, &tensors, 1)
            .unwrap()
            .other_buffer_bytes,
        8
    );
    config["num_hidden_layers"] = json!(1);
    // Another class's tensors of those names are counted as tensors.
    let mut llama = config.clone();
    llama["architectures"] = json!(["LlamaForCausalLM"]);
    let held = loaded_weights(&llama, &tensors, 1).unwrap();
    assert_eq!(held.tensor_bytes, 33_092 + 4 + 2 * 16_384 + 128);
    assert_eq!(held.other_buffer_bytes, 0);
    // TP 2: qkv 8,192, o 4,096, the norms and scalars whole; up and down
    // 4,096; the vocabulary halved.
    let held = loaded_weights(&config, &tensors, 2).unwrap();
    assert_eq!(held.tensor_bytes, 16_708 + 2 * 8_192 + 128);
}

/// The DeepSeek-V3 model above with DeepSeek-V3.2's indexer (4 heads of
/// 128) beside each latent attention
/// (scripts/vllm/fit-configs/test-deepseek-v32-small.json).
fn deepseek_v32(extra: Value) -> (Value, Vec<StoredTensor>) {
    let mut config = deepseek_v3_config();
    config["architectures"] = json!(["DeepseekV32ForCausalLM"]);
    config["model_type"] = json!("deepseek_v32");
    config["index_n_heads"] = json!(4);
    config["index_head_dim"] = json!(128);
    config["index_topk"] = json!(4);
    for (key, value) in extra.as_object().unwrap() {
        config[key] = value.clone();
    }
    let mut tensors = deepseek_v3_checkpoint();
    for layer in 0..2 {
        let at = |part: &str| format!("model.layers.{layer}.self_attn.indexer.{part}");
        tensors.extend([
            bf16(&at("wq_b.weight"), &[512, 32]),
            bf16(&at("wk.weight"), &[128, 64]),
            bf16(&at("weights_proj.weight"), &[4, 64]),
            bf16(&at("k_norm.weight"), &[128]),
            bf16(&at("k_norm.bias"), &[128]),
        ]);
    }
    (config, tensors)
}

#[test]
fn deepseek_v32_keeps_its_indexer_whole_its_key_norm_in_float32_and_a_second_table() {
    let (config, tensors) = deepseek_v32(json!({}));
    // DeepSeek-V3's 1,398,032 B, and a layer's indexer, replicated: wq_b
    // 32,768, wk 16,384, weights_proj 512, the key norm's weight and bias
    // as a float32 LayerNorm 1,024: 50,688.
    let held = loaded_weights(&config, &tensors, 1).unwrap();
    assert_eq!(held.tensor_bytes, 1_398_032 + 2 * 50_688);
    // The indexer's own table beside the latent's: 2 x 25 x 64 x 4.
    assert_eq!(held.rotary_bytes, 2 * 6_400);
    assert_eq!(held.other_tensor_bytes, 2 * 524_288);
    // TP 2: DeepSeek-V3's 778,512 B, the indexers whole.
    let held = loaded_weights(&config, &tensors, 2).unwrap();
    assert_eq!(held.tensor_bytes, 778_512 + 2 * 50_688);
    // `index_k_norm_type: rms`: an RMSNorm, its weight in the served dtype
    // (256 B); the loader skips the bias it has no parameter for.
    let (rms, tensors) = deepseek_v32(json!({"index_k_norm_type": "rms"}));
    let held = loaded_weights(&rms, &tensors, 1).unwrap();
    assert_eq!(
        held.tensor_bytes,
        1_398_032 + 2 * (32_768 + 16_384 + 512 + 256)
    );
    assert_eq!(held.skipped_bytes, 2 * 256);
    // SGLang's config class for it lacks `moe_layer_freq` too.
    let (mut no_freq, tensors) = deepseek_v32(json!({}));
    no_freq.as_object_mut().unwrap().remove("moe_layer_freq");
    let words = loaded_weights(&no_freq, &tensors, 1).unwrap_err();
    assert!(
        words.contains("'_DeepseekV32ConfigAlias' object has no attribute 'moe_layer_freq'"),
        "{words}"
    );
}

#[test]
fn exaone_4_needs_its_pattern_as_a_string_and_holds_one_table() {
    // scripts/vllm/fit-configs/test-exaone4-small.json: hidden 64, 4 heads
    // of 16, 2 KV heads, 4 layers ("LLLG"), an MLP of 32, 130 words, 40
    // positions, Llama 3's rope, untied.
    let config: Value = serde_json::from_str(include_str!(
        "../../scripts/vllm/fit-configs/test-exaone4-small.json"
    ))
    .unwrap();
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[130, 64]),
        bf16("model.norm.weight", &[64]),
        bf16("lm_head.weight", &[130, 64]),
    ];
    for layer in 0..4 {
        let at = |part: &str| format!("model.layers.{layer}.{part}");
        tensors.extend([
            bf16(&at("self_attn.q_proj.weight"), &[64, 64]),
            bf16(&at("self_attn.k_proj.weight"), &[32, 64]),
            bf16(&at("self_attn.v_proj.weight"), &[32, 64]),
            bf16(&at("self_attn.o_proj.weight"), &[64, 64]),
            bf16(&at("self_attn.q_norm.weight"), &[16]),
            bf16(&at("self_attn.k_norm.weight"), &[16]),
            bf16(&at("mlp.gate_proj.weight"), &[32, 64]),
            bf16(&at("mlp.up_proj.weight"), &[32, 64]),
            bf16(&at("mlp.down_proj.weight"), &[64, 32]),
            bf16(&at("post_attention_layernorm.weight"), &[64]),
            bf16(&at("post_feedforward_layernorm.weight"), &[64]),
        ]);
    }
    // TP 1, a layer: q 8,192, k and v 4,096, o 8,192, the q and k norms 64,
    // the MLP 12,288, two norms 256: 37,184. The vocabulary padded to 192
    // rows (a multiple of 64): 24,576 for the embedding and the head each.
    let held = loaded_weights(&config, &tensors, 1).unwrap();
    assert_eq!(held.tensor_bytes, 4 * 37_184 + 2 * 24_576 + 128);
    // One float32 table for every layer: 40 x 16 x 4.
    assert_eq!(held.rotary_bytes, 2_560);
    // TP 2: q 4,096, k and v 2,048, o 4,096, the MLP 6,144, norms whole
    // 320: 18,752; the 192 rows halved, 12,288 each.
    let held = loaded_weights(&config, &tensors, 2).unwrap();
    assert_eq!(held.tensor_bytes, 4 * 18_752 + 2 * 12_288 + 128);
    // transformers 5's default config holds the pattern as a number, on
    // which exaone4.py's `len()` fails; without a window it is 0, unread.
    let mut number = config.clone();
    number["sliding_window_pattern"] = json!(4);
    let words = loaded_weights(&number, &tensors, 1).unwrap_err();
    assert!(
        words.contains("TypeError: object of type 'int' has no len()"),
        "{words}"
    );
    number
        .as_object_mut()
        .unwrap()
        .remove("sliding_window_pattern");
    assert!(loaded_weights(&number, &tensors, 1).is_err());
    number["sliding_window"] = Value::Null;
    assert!(loaded_weights(&number, &tensors, 1).is_ok());
}

#[test]
fn laguna_keeps_its_router_in_float32_and_a_table_per_layer_types_rope() {
    // scripts/vllm/fit-configs/test-laguna-small.json: 3 layers (full, then
    // two sliding), layer 0 dense, the others 4 experts of 32 and a shared
    // expert of 32; the full layers' rope rotates half of each head.
    let config: Value = serde_json::from_str(include_str!(
        "../../scripts/vllm/fit-configs/test-laguna-small.json"
    ))
    .unwrap();
    let tensors = laguna_small_checkpoint();
    // A layer's attention: qkv 16,384, o 8,192, the gate 512, the q and k
    // norms 64, two norms 256: 25,408. Layer 0's MLP 49,152. Layers 1 and
    // 2: the router float32 1,024 and its bias 16, w13 32,768, w2 16,384,
    // the shared expert 12,288: 62,480. The embedding and the head 16,384
    // each, the norm 128.
    let held = loaded_weights(&config, &tensors, 1).unwrap();
    assert_eq!(
        held.tensor_bytes,
        3 * 25_408 + 49_152 + 2 * 62_480 + 2 * 16_384 + 128
    );
    assert_eq!(held.tensor_bytes, 283_232);
    // Float32 tables: the full layers' 100 x 8 (half of 16), the sliding
    // layers' 100 x 16.
    assert_eq!(held.rotary_bytes, 100 * 8 * 4 + 100 * 16 * 4);
    // TP 2: a layer's attention qkv 8,192, o 4,096, the gate 256 (split
    // with the heads), the norms whole 320: 12,864. Layer 0's MLP 24,576;
    // layers 1 and 2 the router and its bias whole 1,040, w13 16,384, w2
    // 8,192, the shared expert 6,144: 31,760. The vocabulary halved.
    let held = loaded_weights(&config, &tensors, 2).unwrap();
    assert_eq!(
        held.tensor_bytes,
        3 * 12_864 + 24_576 + 2 * 31_760 + 2 * 8_192 + 128
    );
}

#[test]
fn gpt_2_reads_its_own_keys_ties_its_head_to_wte_and_skips_the_masks() {
    // Under the original names, without `transformer.`. A layer at TP 1:
    // c_attn 24,576 and its bias 384, c_proj 8,192 and 128, four norm
    // tensors 512, c_fc 32,768 and 512, the MLP's c_proj 32,768 and 128:
    // 99,968. wte padded to 128 rows 16,384, wpe 4,096, ln_f 256; no table.
    let (config, tensors) = gpt2_small();
    let held = loaded_weights(&config, &tensors, 1).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 99_968 + 16_384 + 4_096 + 256);
    assert_eq!(held.rotary_bytes, 0);
    // The causal masks (2,048 B each) are skipped.
    assert_eq!(held.skipped_bytes, 2 * 2_048);
    // TP 2: c_attn 12,288 and 192, c_proj 4,096 and its bias whole 128,
    // the norms 512, c_fc 16,384 and 256, the MLP's c_proj 16,384 and 128:
    // 50,368; wte's 128 rows halved, wpe and ln_f whole.
    let held = loaded_weights(&config, &tensors, 2).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 50_368 + 8_192 + 4_096 + 256);
}

#[test]
fn gpt_j_rotates_rotary_dim_of_each_head_and_keeps_a_head_bias() {
    // A layer at TP 1: ln_1 256, q, k, v and out 32,768, fc_in 32,768 and
    // 512, fc_out 32,768 and 128: 99,200. wte and the head padded to 128
    // rows, 16,384 each, the head's bias 256; ln_f 256.
    let (config, tensors) = gpt_j_small();
    let held = loaded_weights(&config, &tensors, 1).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 99_200 + 2 * 16_384 + 256 + 256);
    // attn.bias 2,048 and attn.masked_bias 2 a layer, skipped.
    assert_eq!(held.skipped_bytes, 2 * 2_050);
    // gpt_j.py: a float32 table of n_positions x rotary_dim, 32 x 8.
    assert_eq!(held.rotary_bytes, 32 * 8 * 4);
    // TP 2: q, k, v 12,288, out 4,096, fc_in 16,384 and 256, fc_out 16,384
    // and its bias whole 128, ln_1 256: 49,792; the vocabulary halved, the
    // head's bias too (128).
    let held = loaded_weights(&config, &tensors, 2).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 49_792 + 2 * 8_192 + 128 + 256);
}

// SGLang's lfm2.py at TP 1, bf16:
//   the embedding, its vocabulary padded to 128: 128 x 64 x 2 = 16,384; and
//     a head of its own though tied, filled from it: 16,384 more.
//   a convolution layer: conv 64 x 3 x 2 = 384, in_proj 192 x 64 x 2 =
//     24,576, out_proj 8,192; the MLP w1, w3 and w2 16,384 each; two norms
//     128 each: 82,560; two of them 165,120.
//   the attention layer: q 8,192, k and v 4,096 each, out 8,192, the q and
//     k norms 32 each; the MLP 49,152 and norms 256: 74,048.
//   the final norm 128.
// Tensors 16,384 x 2 + 165,120 + 74,048 + 128 = 272,064. Buffers: the
// rotary cos/sin cache [32, 16] in float32, 2,048, and each convolution
// layer's `_intermediate_state_indices`, 256 int32: 2 x 1,024.
// SGLang's own class built on meta gave 272,064 and 4,096
// (scripts/sglang/compare_weights_hf.py).
#[test]
fn lfm2_holds_a_head_of_its_own_and_its_convolutions_indices() {
    let held = loaded_weights(&lfm2_config(), &lfm2_checkpoint(), 1).unwrap();
    assert_eq!(held.tensor_bytes, 272_064);
    assert_eq!(held.rotary_bytes, 2_048);
    assert_eq!(held.other_buffer_bytes, 2_048);
    assert_eq!(held.other_tensor_bytes, 0);
    // Untied, the checkpoint's own head, the same bytes.
    let mut untied = lfm2_config();
    untied["tie_word_embeddings"] = json!(false);
    let mut with_head = lfm2_checkpoint();
    with_head.push(bf16("lm_head.weight", &[100, 64]));
    let held = loaded_weights(&untied, &with_head, 1).unwrap();
    assert_eq!(held.tensor_bytes, 272_064);
    // Tied, a stored head is skipped and the copy held all the same.
    let held = loaded_weights(&lfm2_config(), &with_head, 1).unwrap();
    assert_eq!(held.tensor_bytes, 272_064);
    assert_eq!(held.skipped_bytes, 12_800);
    // Tied with no embedding to copy: refused, naming it.
    let headless: Vec<StoredTensor> = lfm2_checkpoint()
        .into_iter()
        .filter(|t| t.name != "model.embed_tokens.weight")
        .collect();
    let e = loaded_weights(&lfm2_config(), &headless, 1).unwrap_err();
    assert!(e.contains("no `model.embed_tokens.weight`"), "{e}");
    // At TP 2: the embedding's and the head's 64 rows a rank 8,192 each; a
    // convolution layer conv 32 x 3 x 2 = 192, in_proj 96 x 64 x 2 =
    // 12,288, out_proj 64 x 32 x 2 = 4,096, w1, w3 and w2 8,192 each, norms
    // 256: 41,408, two 82,816; the attention layer (2 heads, 1 KV head a
    // rank) q 4,096, k and v 2,048 each, out 4,096, the q and k norms 64,
    // the MLP 24,576, norms 256: 37,184; the final norm 128: 136,512, as
    // SGLang's class at TP 2.
    let held = loaded_weights(&lfm2_config(), &lfm2_checkpoint(), 2).unwrap();
    assert_eq!(held.tensor_bytes, 136_512);
    assert_eq!(held.other_buffer_bytes, 2_048);
}

// SGLang's lfm2_moe.py at TP 1: LFM2's embedding and own head 16,384 each;
// layer 0 as LFM2's convolution layer, 82,560; the MoE layers' block: the
// router bias float32 4 x 4 = 16, w13 4 x 64 x 64 x 2 = 32,768, w2 4 x 64
// x 32 x 2 = 16,384, the gate 4 x 64 x 2 = 512: 49,680; layers 1 and 3
// (attention 24,640 + norms 256 + the block) 74,576 each; layer 2
// (convolution 33,152 + norms 256 + the block) 83,088; the final norm 128:
// 347,696. Buffers: the cos/sin cache 2,048 and two convolution layers'
// indices 2,048. SGLang's class on meta: 347,648 B of bfloat16 and 48 of
// float32 parameters, 4,096 of buffers (compare_weights_hf.py).
#[test]
fn lfm2_moe_keeps_its_router_bias_in_float32_beside_lfm2s_head() {
    let held = loaded_weights(&lfm2_moe_config(), &lfm2_moe_checkpoint(), 1).unwrap();
    assert_eq!(held.tensor_bytes, 347_696);
    assert_eq!(held.rotary_bytes, 2_048);
    assert_eq!(held.other_buffer_bytes, 2_048);
}

#[test]
fn lfm2_splits_its_convolutions_biases_and_checks_each_split() {
    // With `conv_bias`, each convolution layer's three biases at TP 2: the
    // conv's 64 split, 32 x 2 = 64; in_proj's 192 in three parts split,
    // 96 x 2 = 192; out_proj's whole on every rank, 64 x 2 = 128: 384 a
    // layer over 136,512, two layers: 137,280, as SGLang's class at TP 2.
    let mut biased = lfm2_config();
    biased["conv_bias"] = json!(true);
    let mut tensors = lfm2_checkpoint();
    for layer in [0, 2] {
        for (part, width) in [("conv", 64), ("in_proj", 192), ("out_proj", 64)] {
            tensors.push(bf16(
                &format!("model.layers.{layer}.conv.{part}.bias"),
                &[width],
            ));
        }
    }
    let held = loaded_weights(&biased, &tensors, 2).unwrap();
    assert_eq!(held.tensor_bytes, 137_280);
    // in_proj's three parts each split: 200 rows halve, but not in thirds.
    let reshaped = |name: &str, shape: &[u64]| -> Vec<StoredTensor> {
        lfm2_checkpoint()
            .into_iter()
            .map(|t| if t.name == name { bf16(name, shape) } else { t })
            .collect()
    };
    let odd = reshaped("model.layers.0.conv.in_proj.weight", &[200, 64]);
    let e = loaded_weights(&lfm2_config(), &odd, 2).unwrap_err();
    assert!(e.contains("200"), "{e}");
    // w2 is split by its columns: 130 do not divide over 4 ranks, its 64
    // rows would.
    let odd = reshaped("model.layers.0.feed_forward.w2.weight", &[64, 130]);
    let e = loaded_weights(&lfm2_config(), &odd, 4).unwrap_err();
    assert!(e.contains("130"), "{e}");
    // LFM2-MoE at TP 2: the embedding and head 8,192 each; layer 0 41,408
    // (LFM2's at TP 2); the block: the bias whole 16, w13 4 x 32 x 64 x 2
    // = 16,384, w2 4 x 64 x 16 x 2 = 8,192, the gate whole 512: 25,104;
    // layers 1 and 3 (attention 12,352 + norms 256 + the block) 37,712
    // each; layer 2 (convolution 16,576 + norms 256 + the block) 41,936;
    // the final norm 128: 175,280, as SGLang's class at TP 2.
    let held = loaded_weights(&lfm2_moe_config(), &lfm2_moe_checkpoint(), 2).unwrap();
    assert_eq!(held.tensor_bytes, 175_280);
    // A router bias anywhere but LFM2-MoE's `feed_forward` is not guessed
    // above TP 1.
    let mut stray = lfm2_moe_checkpoint();
    stray.push(bf16("model.layers.1.mlp.expert_bias", &[4]));
    let e = loaded_weights(&lfm2_moe_config(), &stray, 2).unwrap_err();
    assert!(e.contains("`model.layers.1.mlp.expert_bias`"), "{e}");
}

/// scripts/vllm/fit-configs/test-nemotron-h-small.json: a Mamba2 layer
/// (hidden 64, 4 heads of 32, one group of state 16, kernel 4) then an
/// attention layer (4 heads of 16, 2 KV heads), 128 words, untied.
fn nemotron_h_config() -> Value {
    json!({
        "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
        "hidden_size": 64, "num_hidden_layers": 2, "hybrid_override_pattern": "M*",
        "mamba_num_heads": 4, "mamba_head_dim": 32, "n_groups": 1, "mamba_n_groups": 1,
        "ssm_state_size": 16, "conv_kernel": 4, "expand": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "intermediate_size": 128, "vocab_size": 128, "tie_word_embeddings": false,
        "max_position_embeddings": 64, "torch_dtype": "bfloat16"
    })
}

fn nemotron_h_checkpoint() -> Vec<StoredTensor> {
    let m = |part: &str| format!("model.layers.0.mixer.{part}");
    let a = |part: &str| format!("model.layers.1.mixer.{part}");
    vec![
        bf16("model.embeddings.weight", &[128, 64]),
        bf16("model.layers.0.norm.weight", &[64]),
        bf16(&m("dt_bias"), &[4]),
        bf16(&m("A_log"), &[4]),
        bf16(&m("D"), &[4]),
        bf16(&m("conv1d.weight"), &[160, 1, 4]),
        bf16(&m("conv1d.bias"), &[160]),
        bf16(&m("in_proj.weight"), &[292, 64]),
        bf16(&m("norm.weight"), &[128]),
        bf16(&m("out_proj.weight"), &[64, 128]),
        bf16("model.layers.1.norm.weight", &[64]),
        bf16(&a("q_proj.weight"), &[64, 64]),
        bf16(&a("k_proj.weight"), &[32, 64]),
        bf16(&a("v_proj.weight"), &[32, 64]),
        bf16(&a("o_proj.weight"), &[64, 64]),
        bf16("model.norm_f.weight", &[64]),
        bf16("lm_head.weight", &[128, 64]),
    ]
}

// SGLang's Nemotron-H at TP 2: the embedding and the head, 64 rows a rank,
// 8,192 each; layer 0's norm 128; its mixer with its one group replicated
// to one a rank (2 groups: the convolution 128 + 2 x 2 x 16 = 192 rows,
// in_proj 192 + 128 + 4 = 324, each halved): in_proj 162 x 64 x 2 =
// 20,736, conv1d 96 x 4 x 2 = 768 and its bias 192, dt_bias and D 4 each,
// A float32 8, the gated norm 128, out_proj 64 x 64 x 2 = 8,192: 30,032;
// layer 1's norm 128, q 32 x 64 x 2 = 4,096, one KV head a rank, k and v
// 2,048 each, o 64 x 32 x 2 = 4,096: 12,416; norm_f 128. In all 59,088,
// as SGLang's class at TP 2 (compare_weights_hf.py).
#[test]
fn nemotron_h_splits_its_mamba2_mixer_over_the_ranks() {
    let held = loaded_weights(&nemotron_h_config(), &nemotron_h_checkpoint(), 2).unwrap();
    assert_eq!(held.tensor_bytes, 59_088);
    // SGLang's config reads `mamba_n_groups` (8 where absent), not the
    // published `n_groups`: a checkpoint of other groups does not match.
    let mut published = nemotron_h_config();
    published.as_object_mut().unwrap().remove("mamba_n_groups");
    let e = loaded_weights(&published, &nemotron_h_checkpoint(), 1).unwrap_err();
    assert!(
        e.contains("reads `mamba_n_groups` (8, its default), not `n_groups` (1)"),
        "{e}"
    );
    let mut given = nemotron_h_config();
    given["mamba_n_groups"] = json!(2);
    let e = loaded_weights(&given, &nemotron_h_checkpoint(), 1).unwrap_err();
    assert!(
        e.contains("reads `mamba_n_groups` (2), not `n_groups` (1)"),
        "{e}"
    );
    // Under DP attention its mixers hold more a rank: not guessed.
    let e = kv_engines::fit::sglang::loaded_weights_with_dp_attention(
        &nemotron_h_config(),
        &nemotron_h_checkpoint(),
        2,
        2,
    )
    .unwrap_err();
    assert!(
        e.contains("Mamba mixers under DP attention (--dp 2)"),
        "{e}"
    );
}

#[test]
fn granite_4_h_splits_its_shared_mlp() {
    // A Granite 4.0-H attention layer's shared MLP only (hidden 64, shared
    // width 128): at TP 2 `input_linear` [256, 64] gate and up halved,
    // 128 x 64 x 2 = 16,384; `output_linear` [64, 128] by its columns, 64 x
    // 64 x 2 = 8,192, its bias whole, 64 x 2 = 128.
    let config = json!({
        "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid",
        "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_hidden_layers": 1, "layer_types": ["attention"], "vocab_size": 128,
        "shared_intermediate_size": 128, "mamba_n_heads": 4, "mamba_d_head": 32,
        "mamba_n_groups": 1, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
        "max_position_embeddings": 64, "torch_dtype": "bfloat16"
    });
    let mlp = |part: &str| format!("model.layers.0.shared_mlp.{part}");
    let tensors = vec![
        bf16(&mlp("input_linear.weight"), &[256, 64]),
        bf16(&mlp("output_linear.weight"), &[64, 128]),
        bf16(&mlp("output_linear.bias"), &[64]),
    ];
    let held = loaded_weights(&config, &tensors, 2).unwrap();
    assert_eq!(held.tensor_bytes, 16_384 + 8_192 + 128);
    // Each half of input_linear split: 258 rows halve, but not in quarters.
    let mut odd = tensors.clone();
    odd[0] = bf16(&mlp("input_linear.weight"), &[258, 64]);
    let e = loaded_weights(&config, &odd, 2).unwrap_err();
    assert!(e.contains("258 is not divisible by 4"), "{e}");
    // output_linear by its columns: 130 do not divide over 4 ranks.
    let mut odd = tensors.clone();
    odd[1] = bf16(&mlp("output_linear.weight"), &[64, 130]);
    let e = loaded_weights(&config, &odd, 4).unwrap_err();
    assert!(e.contains("130 is not divisible by 4"), "{e}");
    // Elsewhere than a shared MLP, `input_linear` is not guessed.
    let stray = vec![bf16("model.layers.0.mlp.input_linear.weight", &[256, 64])];
    let e = loaded_weights(&config, &stray, 2).unwrap_err();
    assert!(
        e.contains("`model.layers.0.mlp.input_linear.weight`"),
        "{e}"
    );
}
