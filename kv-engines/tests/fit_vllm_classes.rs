//! What vLLM 0.33 holds once it has loaded a checkpoint of the classes
//! whose layout differs from Llama's: DeepSeek-V3 (multi-head latent
//! attention, routed and shared experts, an MTP layer) and Gemma 3 (a
//! rotary table per layer type), per tensor-parallel rank and per pipeline
//! stage. Every figure is worked out by hand below from vLLM's classes
//! (models/deepseek_v2.py, models/gemma3.py) and the 512-byte blocks of the
//! CUDA caching allocator. The same configs, built by transformers and by
//! vLLM's own classes on the meta device, gave these totals
//! (scripts/vllm/compare_weights_hf.py: DeepSeek with `--mtp` 1,409,024 B at
//! TP 1, 789,504 B at TP 2, 696,320 B and 716,288 B at PP 2; Gemma 3
//! 274,432 B at TP 1, 102,912 B, 102,912 B and 106,496 B at PP 3).

mod common;

use common::*;
use kv_core::DType;
use kv_engines::fit::vllm::{loaded_weights, loaded_weights_on_stage, PipelineStage};
use kv_engines::weights::StoredTensor;
use serde_json::{json, Value};

fn tensor_bytes(tensors: &[StoredTensor]) -> u64 {
    tensors.iter().map(|t| t.bytes).sum()
}

// One layer's attention at TP 1, in 512-byte blocks:
//   fused_qkv_a_proj (q_a_proj and kv_a_proj_with_mqa, one allocation):
//     (32 + 576) x 64 x 2 = 77,824
//   q_a_layernorm 64 -> 512; q_b_proj 384 x 32 x 2 = 24,576;
//   kv_a_layernorm 1,024; kv_b_proj 512 x 512 x 2 = 524,288;
//   o_proj 64 x 256 x 2 = 32,768; the two layer norms 512 each
//   = 662,016
// Layer 0's MLP: gate_up 64 x 64 x 2 = 8,192, down 64 x 32 x 2 = 4,096.
// Layer 1's MoE: gate 4 x 64 x 2 -> 512; the correction bias, float32
//   4 x 4 -> 512; w13 4 x 32 x 64 x 2 = 16,384; w2 4 x 64 x 16 x 2 = 8,192;
//   the shared expert's gate_up 32 x 64 x 2 = 4,096, down 64 x 16 x 2 = 2,048
//   = 31,744
// Embedding and head 128 x 64 x 2 = 16,384 each; the final norm 512.
// The rotary table: ceil(10 x 2.5) = 25 rows of qk_rope_head_dim 64 in bf16,
// 3,200 -> 3,584. The scales: 4 float32 a layer, a block each: 2,048 a layer.

#[test]
fn deepseek_v3_at_tp_1_skips_the_mtp_layer() {
    let mut tensors = deepseek_v3_checkpoint();
    tensors.extend(deepseek_mtp_layer());
    let held = loaded_weights(&deepseek_v3_config(), &tensors, DType::BF16, 1).unwrap();
    assert_eq!(
        held.tensor_bytes,
        16_384 + 16_384 + 512 + 2 * 662_016 + 12_288 + 31_744
    );
    assert_eq!(held.skipped_bytes, tensor_bytes(&deepseek_mtp_layer()));
    assert_eq!(held.rotary_bytes, 3_584);
    assert_eq!(held.scale_bytes, 4_096);
    assert_eq!(held.total(), Some(1_409_024));
}

#[test]
fn deepseek_v3_at_tp_2_splits_the_up_projections_and_replicates_the_down_ones() {
    // Per rank: the vocabulary's 64 rows (8,192 each for the embedding and
    // the head), the norm 512. Attention: fused_qkv_a_proj whole 77,824,
    // q_a_layernorm 512, q_b_proj 12,288, kv_a_layernorm 1,024, kv_b_proj
    // 262,144, o_proj 16,384, the layer norms 1,024 = 371,200. Layer 0's
    // MLP 4,096 + 2,048; layer 1: gate 512 and bias 512 whole, w13 8,192,
    // w2 4,096, the shared expert 2,048 + 1,024 = 16,384.
    let held = loaded_weights(
        &deepseek_v3_config(),
        &deepseek_v3_checkpoint(),
        DType::BF16,
        2,
    )
    .unwrap();
    assert_eq!(
        held.tensor_bytes,
        8_192 + 8_192 + 512 + 2 * 371_200 + 6_144 + 16_384
    );
    assert_eq!(held.total(), Some(789_504));
}

#[test]
fn deepseek_v3_on_two_pipeline_stages() {
    let mut tensors = deepseek_v3_checkpoint();
    tensors.extend(deepseek_mtp_layer());
    let stage = |index| {
        loaded_weights_on_stage(
            &deepseek_v3_config(),
            &tensors,
            DType::BF16,
            1,
            PipelineStage { stages: 2, index },
        )
        .unwrap()
        .total()
    };
    // Stage 0: the embedding, layer 0, the rotary table, 4 scales.
    assert_eq!(stage(0), Some(16_384 + 662_016 + 12_288 + 3_584 + 2_048));
    // Stage 1: layer 1, the final norm and the head.
    assert_eq!(
        stage(1),
        Some(662_016 + 31_744 + 512 + 16_384 + 3_584 + 2_048)
    );
    assert_eq!(stage(0), Some(696_320));
    assert_eq!(stage(1), Some(716_288));
}

#[test]
fn the_yarn_table_rounds_its_rows_up() {
    // 10 x 2.42 = 24.2 positions: torch.arange gives 25 rows, 25 x 64 x 2 =
    // 3,200 -> 3,584; 24 rows would be 3,072.
    let mut config = deepseek_v3_config();
    config["rope_scaling"]["factor"] = json!(2.42);
    let held = loaded_weights(&config, &deepseek_v3_checkpoint(), DType::BF16, 1).unwrap();
    assert_eq!(held.rotary_bytes, 3_584);
    // Without scaling: max_position_embeddings rows, 25 x 64 x 2.
    config["rope_scaling"] = Value::Null;
    config["max_position_embeddings"] = json!(24);
    let held = loaded_weights(&config, &deepseek_v3_checkpoint(), DType::BF16, 1).unwrap();
    assert_eq!(held.rotary_bytes, 3_072);
}

#[test]
fn what_vllm_cannot_load_or_kv_has_not_checked_is_refused() {
    let refused = |config: Value, tensors: Vec<StoredTensor>| {
        loaded_weights(&config, &tensors, DType::BF16, 1).unwrap_err()
    };
    // vLLM builds no correction bias unless topk_method is noaux_tc.
    let mut greedy = deepseek_v3_config();
    greedy["topk_method"] = json!("greedy");
    let why = refused(greedy, deepseek_v3_checkpoint());
    assert!(
        why.contains("`model.layers.1.mlp.gate.e_score_correction_bias`"),
        "{why}"
    );
    assert!(why.contains("`noaux_tc`"), "{why}");
    // A layer past the MTP layers, and an MTP layer the config does not have.
    let mut tensors = deepseek_v3_checkpoint();
    tensors.push(bf16("model.layers.3.enorm.weight", &[64]));
    let why = refused(deepseek_v3_config(), tensors);
    assert!(
        why.contains("layer 3, but the config has 2 layers and 1 MTP layers"),
        "{why}"
    );
    let mut no_mtp = deepseek_v3_config();
    no_mtp["num_nextn_predict_layers"] = json!(0);
    let mut tensors = deepseek_v3_checkpoint();
    tensors.extend(deepseek_mtp_layer());
    assert!(refused(no_mtp, tensors).contains("layer 2, but the config has 2 layers"));
    // Rotary tables kv has not checked: DeepSeek's llama-style scaling
    // (`attention_factor` 1) and any other kind.
    let mut llama_scaling = deepseek_v3_config();
    llama_scaling["rope_scaling"]["attention_factor"] = json!(1.0);
    assert!(refused(llama_scaling, deepseek_v3_checkpoint()).contains("rope_type `yarn`"));
    let mut linear = deepseek_v3_config();
    linear["rope_scaling"]["type"] = json!("linear");
    assert!(refused(linear, deepseek_v3_checkpoint()).contains("rope_type `linear`"));
    let mut no_factor = deepseek_v3_config();
    no_factor["rope_scaling"]["factor"] = json!(0);
    assert!(refused(no_factor, deepseek_v3_checkpoint()).contains("positive `factor`"));
    let mut huge = deepseek_v3_config();
    huge["rope_scaling"]["original_max_position_embeddings"] = json!(1u64 << 53);
    assert!(refused(huge, deepseek_v3_checkpoint()).contains("beyond what a double holds"));
    // The MoE's width must divide over the ranks.
    let why = loaded_weights(
        &deepseek_v3_config(),
        &deepseek_v3_checkpoint(),
        DType::BF16,
        3,
    )
    .unwrap_err();
    assert!(why.contains("not divisible by 3"), "{why}");
}

#[test]
fn exaone_4_and_ernie_4_5_hold_what_a_llama_of_their_shape_holds() {
    // Exaone 4: q and k norms of head_dim 16 (32 B -> 512 each) beside
    // Llama's tensors, and a norm after the MLP. Hidden 64, 4 heads of 16,
    // 2 KV heads, intermediate 32, vocabulary 128, 1 layer, 100 positions.
    let config = json!({
        "architectures": ["Exaone4ForCausalLM"], "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "num_hidden_layers": 1, "vocab_size": 128, "max_position_embeddings": 100,
        "intermediate_size": 32, "torch_dtype": "bfloat16", "tie_word_embeddings": false,
    });
    let tensors = [
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.layers.0.self_attn.q_proj.weight", &[64, 64]),
        bf16("model.layers.0.self_attn.k_proj.weight", &[32, 64]),
        bf16("model.layers.0.self_attn.v_proj.weight", &[32, 64]),
        bf16("model.layers.0.self_attn.o_proj.weight", &[64, 64]),
        bf16("model.layers.0.self_attn.q_norm.weight", &[16]),
        bf16("model.layers.0.self_attn.k_norm.weight", &[16]),
        bf16("model.layers.0.mlp.gate_proj.weight", &[32, 64]),
        bf16("model.layers.0.mlp.up_proj.weight", &[32, 64]),
        bf16("model.layers.0.mlp.down_proj.weight", &[64, 32]),
        bf16("model.layers.0.post_attention_layernorm.weight", &[64]),
        bf16("model.layers.0.post_feedforward_layernorm.weight", &[64]),
        bf16("model.norm.weight", &[64]),
        bf16("lm_head.weight", &[128, 64]),
    ];
    // TP 2: embedding and head 64 x 64 x 2 = 8,192 each; qkv (32 + 16 + 16)
    // x 64 x 2 = 8,192; o_proj 64 x 32 x 2 = 4,096; the two head norms 512
    // each; gate_up 32 x 64 x 2 = 4,096; down 64 x 16 x 2 = 2,048; three
    // norms 512 each. Rotary 100 x 16 x 2 = 3,200 -> 3,584; 4 scales 2,048.
    let held = loaded_weights(&config, &tensors, DType::BF16, 2).unwrap();
    assert_eq!(
        held.tensor_bytes,
        8_192 * 2 + 8_192 + 4_096 + 1_024 + 4_096 + 2_048 + 1_536
    );
    assert_eq!(held.total(), Some(37_376 + 3_584 + 2_048));
    let mut ernie = config.clone();
    ernie["architectures"] = json!(["Ernie4_5ForCausalLM"]);
    assert_eq!(
        loaded_weights(&ernie, &tensors, DType::BF16, 2)
            .unwrap()
            .total(),
        held.total()
    );
}

/// Gemma 3 as published (4B, 12B, 27B), small: 6 layers, every 6th full
/// (layer 5), the full layers' rope linear x 2.5 at theta 1,000,000, the
/// sliding ones default at 10,000; 40 positions; hidden 64, 4 heads and 2
/// KV heads of 16; tied.
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
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.norm.weight", &[64]),
    ];
    for layer in 0..6 {
        let at = |part: &str| format!("model.layers.{layer}.{part}.weight");
        tensors.extend([
            bf16(&at("self_attn.q_proj"), &[64, 64]),
            bf16(&at("self_attn.k_proj"), &[32, 64]),
            bf16(&at("self_attn.v_proj"), &[32, 64]),
            bf16(&at("self_attn.o_proj"), &[64, 64]),
            bf16(&at("self_attn.q_norm"), &[16]),
            bf16(&at("self_attn.k_norm"), &[16]),
            bf16(&at("mlp.gate_proj"), &[32, 64]),
            bf16(&at("mlp.up_proj"), &[32, 64]),
            bf16(&at("mlp.down_proj"), &[64, 32]),
            bf16(&at("input_layernorm"), &[64]),
            bf16(&at("post_attention_layernorm"), &[64]),
            bf16(&at("pre_feedforward_layernorm"), &[64]),
            bf16(&at("post_feedforward_layernorm"), &[64]),
        ]);
    }
    tensors
}

// One Gemma 3 layer at TP 1: qkv (64 + 32 + 32) x 64 x 2 = 16,384; o_proj
// 8,192; q_norm and k_norm 32 B -> 512 each; gate_up 64 x 64 x 2 = 8,192;
// down 4,096; four norms 512 each = 39,936. The embedding 16,384 and the
// final norm 512 (on every stage), the normalizer 512. The tables: the
// sliding layers' 40 x 16 x 2 = 1,280 -> 1,536; the full layer's 2.5 x 40 =
// 100 rows, 3,200 -> 3,584. Scales 2,048 a layer.

#[test]
fn gemma_3_holds_a_rotary_table_per_layer_type_and_its_normalizer() {
    let held = loaded_weights(&gemma3_config(), &gemma3_checkpoint(), DType::BF16, 1).unwrap();
    assert_eq!(held.tensor_bytes, 16_384 + 6 * 39_936 + 512);
    assert_eq!(held.rotary_bytes, 1_536 + 3_584);
    assert_eq!(held.scale_bytes, 6 * 2_048 + 512);
    assert_eq!(held.total(), Some(274_432));
    // Without the scaling and with one theta, both kinds ask for the same
    // rope: one table, as get_rope caches it.
    let mut same = gemma3_config();
    same["rope_scaling"] = Value::Null;
    same["rope_local_base_freq"] = json!(1_000_000.0);
    let held = loaded_weights(&same, &gemma3_checkpoint(), DType::BF16, 1).unwrap();
    assert_eq!(held.rotary_bytes, 1_536);
    // transformers' form: per-type rope_parameters and layer_types.
    let mut nested = gemma3_config();
    nested["rope_parameters"] = json!({
        "full_attention": {"rope_type": "linear", "factor": 2.5, "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
    });
    nested["rope_scaling"] = Value::Null;
    nested["layer_types"] = json!([
        "sliding_attention",
        "full_attention",
        "sliding_attention",
        "sliding_attention",
        "sliding_attention",
        "sliding_attention"
    ]);
    let stage = |config: &Value, index| {
        let stage = PipelineStage { stages: 3, index };
        loaded_weights_on_stage(config, &gemma3_checkpoint(), DType::BF16, 1, stage)
            .unwrap()
            .rotary_bytes
    };
    assert_eq!(stage(&nested, 0), 1_536 + 3_584);
    assert_eq!(stage(&nested, 2), 1_536);
}

#[test]
fn gemma_3_on_three_stages_each_with_its_own_tables() {
    let stage = |index| {
        let stage = PipelineStage { stages: 3, index };
        loaded_weights_on_stage(
            &gemma3_config(),
            &gemma3_checkpoint(),
            DType::BF16,
            1,
            stage,
        )
        .unwrap()
        .total()
    };
    // Stages of 2 layers. Each: the embedding, the final norm, the
    // normalizer, 2 layers, their scales; stages 0 and 1 the sliding table
    // only, stage 2 (layers 4 and 5) both.
    let common = 16_384 + 512 + 512 + 2 * 39_936 + 2 * 2_048;
    assert_eq!(stage(0), Some(common + 1_536));
    assert_eq!(stage(1), Some(common + 1_536));
    assert_eq!(stage(2), Some(common + 1_536 + 3_584));
    assert_eq!(stage(0), Some(102_912));
    assert_eq!(stage(2), Some(106_496));
}

#[test]
fn gemma_rules_refuse_what_vllm_cannot_load_or_kv_has_not_checked() {
    let refused = |config: Value, tensors: &[StoredTensor]| {
        loaded_weights(&config, tensors, DType::BF16, 1).unwrap_err()
    };
    let mut yarn = gemma3_config();
    yarn["rope_scaling"] = json!({"rope_type": "yarn", "factor": 4.0});
    assert!(
        refused(yarn, &gemma3_checkpoint()).contains("rope_type `yarn` (full_attention layers)")
    );
    let mut types = gemma3_config();
    types["layer_types"] = json!(["sliding_attention"]);
    assert!(refused(types, &gemma3_checkpoint()).contains("`layer_types` has no entry for layer 1"));
    let mut chunked = gemma3_config();
    chunked["layer_types"] = json!(vec!["chunked_attention"; 6]);
    assert!(
        refused(chunked, &gemma3_checkpoint()).contains("`layer_types[0]` is `chunked_attention`")
    );
    let mut no_head_dim = gemma3_config();
    no_head_dim.as_object_mut().unwrap().remove("head_dim");
    assert!(refused(no_head_dim, &gemma3_checkpoint()).contains("`head_dim`"));
    let mut zero = gemma3_config();
    zero["sliding_window_pattern"] = json!(0);
    assert!(refused(zero, &gemma3_checkpoint()).contains("`sliding_window_pattern`"));
    // Gemma 2's class has no head: an untied checkpoint does not load.
    let mut gemma2 = gemma3_config();
    gemma2["architectures"] = json!(["Gemma2ForCausalLM"]);
    gemma2["tie_word_embeddings"] = json!(false);
    let mut untied = gemma3_checkpoint();
    untied.push(bf16("lm_head.weight", &[128, 64]));
    assert!(refused(gemma2, &untied).contains("no LM head of its own"));
}

fn f16(name: &str, shape: &[u64]) -> StoredTensor {
    let bytes = shape.iter().product::<u64>() * 2;
    StoredTensor::new(name.into(), "F16".into(), shape.to_vec(), bytes)
}

/// Phi-2, small (scripts/vllm/fit-configs/test-phi-2-small.json): vLLM
/// serves it through its Transformers backend, the Hugging Face model with
/// vLLM's parallel layers, so the rotary part is transformers' `inv_freq`
/// pair, and the head's bias is registered at load, a row per padded
/// vocabulary row of the rank. vLLM's own class gave 73,216 B at TP 2.
#[test]
fn phi_2_through_the_transformers_backend_at_tp_2() {
    let config = json!({
        "architectures": ["PhiForCausalLM"], "model_type": "phi", "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 1,
        "intermediate_size": 256, "vocab_size": 100, "max_position_embeddings": 50,
        "partial_rotary_factor": 0.5, "tie_word_embeddings": false, "torch_dtype": "float16",
    });
    let mut tensors = vec![
        f16("model.embed_tokens.weight", &[100, 64]),
        f16("model.final_layernorm.weight", &[64]),
        f16("model.final_layernorm.bias", &[64]),
        f16("lm_head.weight", &[100, 64]),
        f16("lm_head.bias", &[100]),
    ];
    for (part, shape) in [
        ("self_attn.q_proj", [64, 64]),
        ("self_attn.k_proj", [64, 64]),
        ("self_attn.v_proj", [64, 64]),
        ("self_attn.dense", [64, 64]),
        ("mlp.fc1", [256, 64]),
        ("mlp.fc2", [64, 256]),
    ] {
        tensors.push(f16(&format!("model.layers.0.{part}.weight"), &shape));
        tensors.push(f16(&format!("model.layers.0.{part}.bias"), &shape[..1]));
    }
    tensors.push(f16("model.layers.0.input_layernorm.weight", &[64]));
    tensors.push(f16("model.layers.0.input_layernorm.bias", &[64]));
    // Per rank of 2: the vocabulary's 128 padded rows split, 64 x 64 x 2 =
    // 8,192 for the embedding and for the head, the head's bias 64 x 2 ->
    // 512; q, k and v half their rows in one qkv_proj, 3 x 32 x 64 x 2 =
    // 12,288, their biases one allocation of 96 x 2 -> 512; dense (row
    // parallel) 64 x 32 x 2 = 4,096, its bias whole -> 512; fc1 128 x 64 x 2
    // = 16,384 and its bias split -> 512; fc2 64 x 128 x 2 = 16,384, its
    // bias whole -> 512; four norm tensors 512 each.
    let held = loaded_weights(&config, &tensors, DType::F16, 2).unwrap();
    assert_eq!(
        held.tensor_bytes,
        8_192 + 8_192 + 512 + 12_288 + 512 + 4_096 + 512 + 16_384 + 512 + 16_384 + 512 + 4 * 512
    );
    // The rotated part: int(16 x 0.5) = 8, so inv_freq holds 4 float32
    // (16 B -> 512), and original_inv_freq as many.
    assert_eq!(held.rotary_bytes, 1_024);
    assert_eq!(held.total(), Some(73_216));
    // transformers computes inv_freq the same way for YaRN (the table's
    // length does not enter it); a rope it computes otherwise is refused.
    let mut yarn = config.clone();
    yarn["rope_scaling"] = json!({"rope_type": "yarn", "factor": 4.0});
    let held = loaded_weights(&yarn, &tensors, DType::F16, 2).unwrap();
    assert_eq!(held.rotary_bytes, 1_024);
    let mut proportional = config.clone();
    proportional["rope_scaling"] = json!({"rope_type": "proportional"});
    let why = loaded_weights(&proportional, &tensors, DType::F16, 2).unwrap_err();
    assert!(why.contains("rope_type `proportional`"), "{why}");
}

/// OLMo 3, small (scripts/vllm/fit-configs/test-olmo-3-small.json):
/// transformers' rotary module keeps an `inv_freq` pair per layer type.
/// vLLM's own class gave 117,248 B at TP 1 and 64,000 B at TP 2.
#[test]
fn olmo_3_keeps_a_pair_of_rotary_buffers_per_layer_type() {
    let config = json!({
        "architectures": ["Olmo3ForCausalLM"], "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
        "intermediate_size": 32, "vocab_size": 100, "max_position_embeddings": 50,
        "layer_types": ["sliding_attention", "full_attention"],
        "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    });
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[100, 64]),
        bf16("model.norm.weight", &[64]),
        bf16("lm_head.weight", &[100, 64]),
    ];
    for layer in 0..2 {
        for (part, shape) in [
            ("self_attn.q_proj", &[64, 64][..]),
            ("self_attn.k_proj", &[32, 64]),
            ("self_attn.v_proj", &[32, 64]),
            ("self_attn.o_proj", &[64, 64]),
            ("self_attn.q_norm", &[64]),
            ("self_attn.k_norm", &[32]),
            ("mlp.gate_proj", &[32, 64]),
            ("mlp.up_proj", &[32, 64]),
            ("mlp.down_proj", &[64, 32]),
            ("post_attention_layernorm", &[64]),
            ("post_feedforward_layernorm", &[64]),
        ] {
            tensors.push(bf16(&format!("model.layers.{layer}.{part}.weight"), shape));
        }
    }
    // TP 1: embedding and head 128 padded rows x 64 x 2 = 16,384 each, the
    // norm 512; a layer: qkv 128 x 64 x 2 = 16,384, o 8,192, q_norm and
    // k_norm 512 each, gate_up 8,192, down 4,096, two norms 1,024 = 38,912.
    // The rotary buffers: 2 layer types x 2 buffers x (8 float32 -> 512).
    let held = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 16_384 + 512 + 2 * 38_912);
    assert_eq!(held.rotary_bytes, 2_048);
    assert_eq!(held.total(), Some(117_248));
    // TP 2: halves but for the norms; a layer 8,192 + 4,096 + 1,024 +
    // 4,096 + 2,048 + 1,024 = 20,480.
    let held = loaded_weights(&config, &tensors, DType::BF16, 2).unwrap();
    assert_eq!(
        held.total(),
        Some(2 * 8_192 + 512 + 2 * 20_480 + 2_048 + 4_096)
    );
    assert_eq!(held.total(), Some(64_000));
    // One layer type: one pair.
    let mut one = config.clone();
    one["layer_types"] = json!(["full_attention", "full_attention"]);
    let held = loaded_weights(&one, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(held.rotary_bytes, 1_024);
    let mut none = config.clone();
    none.as_object_mut().unwrap().remove("layer_types");
    let why = loaded_weights(&none, &tensors, DType::BF16, 1).unwrap_err();
    assert!(why.contains("`layer_types`"), "{why}");
}

/// GLM-4-0414 (vLLM's own `Glm4ForCausalLM`): the checkpoint's fused
/// gate_up_proj split half by half, and a rotary table of the rotated part
/// only, `[max_position_embeddings, int(head_dim x 0.5)]`.
#[test]
fn glm_4_fused_gate_up_and_a_partial_rotary_table() {
    let config = json!({
        "architectures": ["Glm4ForCausalLM"], "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "num_hidden_layers": 1, "vocab_size": 128, "max_position_embeddings": 100,
        "partial_rotary_factor": 0.5, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    });
    let tensors = [bf16("model.layers.0.mlp.gate_up_proj.weight", &[64, 64])];
    // TP 2: 32 x 64 x 2 = 4,096. The table: 100 x 8 x 2 = 1,600 -> 2,048.
    let held = loaded_weights(&config, &tensors, DType::BF16, 2).unwrap();
    assert_eq!(held.tensor_bytes, 4_096);
    assert_eq!(held.rotary_bytes, 2_048);
    // 64 rows, two halves of 32: 32 ranks would split each half to 1 row,
    // 64 ranks cannot (rows not divisible by 2 x 64).
    let mut wide = config.clone();
    wide["num_attention_heads"] = json!(64);
    wide["num_key_value_heads"] = json!(64);
    let why = loaded_weights(&wide, &tensors, DType::BF16, 64).unwrap_err();
    assert_eq!(why, "vLLM refuses: 64 is not divisible by 128");
    let mut odd = config.clone();
    odd["partial_rotary_factor"] = json!(1.5);
    let why = loaded_weights(&odd, &tensors, DType::BF16, 1).unwrap_err();
    assert!(why.contains("(0, 1]"), "{why}");
}

/// Qwen3-Next, small (scripts/vllm/fit-configs/test-qwen3-next-small.json):
/// 4 layers, every 2nd full attention (1 and 3), the others Gated
/// DeltaNet (2 key heads and 4 value heads of 16, a kernel of 4); each with
/// 4 experts of 16 and a shared expert of 16. vLLM's own class gave
/// 309,248 B at TP 1, 163,840 B at TP 2, and 101,888 B, 171,008 B and
/// 102,400 B at PP 3.
fn qwen3_next_config() -> Value {
    json!({
        "architectures": ["Qwen3NextForCausalLM"], "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "num_hidden_layers": 4, "full_attention_interval": 2, "linear_num_key_heads": 2,
        "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 4, "num_experts": 4, "moe_intermediate_size": 16,
        "shared_expert_intermediate_size": 16, "vocab_size": 128,
        "max_position_embeddings": 50, "partial_rotary_factor": 0.25,
        "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    })
}

fn qwen3_next_checkpoint() -> Vec<StoredTensor> {
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.norm.weight", &[64]),
        bf16("lm_head.weight", &[128, 64]),
        // The MTP module the published checkpoint ships: not loaded.
        bf16("mtp.fc.weight", &[64, 128]),
        bf16("mtp.layers.0.self_attn.q_proj.weight", &[128, 64]),
    ];
    for layer in 0..4u64 {
        let at = |part: &str| format!("model.layers.{layer}.{part}");
        if layer % 2 == 0 {
            tensors.extend([
                bf16(&at("linear_attn.in_proj_qkvz.weight"), &[192, 64]),
                bf16(&at("linear_attn.in_proj_ba.weight"), &[8, 64]),
                bf16(&at("linear_attn.conv1d.weight"), &[128, 1, 4]),
                bf16(&at("linear_attn.dt_bias"), &[4]),
                bf16(&at("linear_attn.A_log"), &[4]),
                bf16(&at("linear_attn.norm.weight"), &[16]),
                bf16(&at("linear_attn.out_proj.weight"), &[64, 64]),
            ]);
        } else {
            tensors.extend([
                bf16(&at("self_attn.q_proj.weight"), &[128, 64]),
                bf16(&at("self_attn.k_proj.weight"), &[32, 64]),
                bf16(&at("self_attn.v_proj.weight"), &[32, 64]),
                bf16(&at("self_attn.o_proj.weight"), &[64, 64]),
                bf16(&at("self_attn.q_norm.weight"), &[16]),
                bf16(&at("self_attn.k_norm.weight"), &[16]),
            ]);
        }
        tensors.extend([
            bf16(&at("input_layernorm.weight"), &[64]),
            bf16(&at("post_attention_layernorm.weight"), &[64]),
            bf16(&at("mlp.gate.weight"), &[4, 64]),
            bf16(&at("mlp.shared_expert.gate_proj.weight"), &[16, 64]),
            bf16(&at("mlp.shared_expert.up_proj.weight"), &[16, 64]),
            bf16(&at("mlp.shared_expert.down_proj.weight"), &[64, 16]),
            bf16(&at("mlp.shared_expert_gate.weight"), &[1, 64]),
        ]);
        tensors.extend(experts(&at("mlp"), 4, 16));
    }
    tensors
}

// TP 1, in 512-byte blocks. A DeltaNet layer: in_proj_qkvz (2 x 32 + 2 x
// 64 = 192 rows) 24,576; in_proj_ba 1,024; conv1d 128 x 4 x 2 = 1,024;
// dt_bias 512; A_log, float32 in vLLM, 16 B -> 512; its norm 512; out_proj
// 8,192 = 36,352. An attention layer: qkv (q gated: 128 rows; k and v 32)
// 24,576, o_proj 8,192, q_norm and k_norm 512 each = 33,792. Every layer:
// two norms 1,024 and the MoE: router 512, w13 16,384, w2 8,192, the shared
// expert's gate_up 4,096 and down 2,048, its gate 512 = 31,744. Embedding
// and head 16,384 each, the norm 512. The table: int(16 x 0.25) = 4 wide,
// 50 x 4 x 2 = 400 -> 512. Scales: the 2 attention layers only.
#[test]
fn qwen3_next_holds_scales_for_its_attention_layers_only() {
    let held = loaded_weights(
        &qwen3_next_config(),
        &qwen3_next_checkpoint(),
        DType::BF16,
        1,
    )
    .unwrap();
    let deltanet = 36_352 + 1_024 + 31_744;
    let attention = 33_792 + 1_024 + 31_744;
    assert_eq!(
        held.tensor_bytes,
        2 * 16_384 + 512 + 2 * deltanet + 2 * attention
    );
    assert_eq!(held.skipped_bytes, 64 * 128 * 2 + 128 * 64 * 2);
    assert_eq!(held.rotary_bytes, 512);
    assert_eq!(held.scale_bytes, 2 * 2_048);
    assert_eq!(held.total(), Some(309_248));
}

#[test]
fn qwen3_next_at_tp_2_and_on_three_stages() {
    // TP 2: every projection into the heads, the convolution, A_log and
    // dt_bias split; out_proj by columns; the DeltaNet norm whole. A
    // DeltaNet layer 12,288 + 512 + 512 + 512 + 512 + 512 + 4,096, an
    // attention layer (8 query heads' rows halved, one KV head each)
    // 12,288 + 4,096 + 512 + 512, the MoE 512 + 8,192 + 4,096 + 2,048 +
    // 1,024 + 512.
    let held = loaded_weights(
        &qwen3_next_config(),
        &qwen3_next_checkpoint(),
        DType::BF16,
        2,
    )
    .unwrap();
    let moe = 512 + 8_192 + 4_096 + 2_048 + 1_024 + 512;
    let deltanet = 18_944 + 1_024 + moe;
    let attention = 17_408 + 1_024 + moe;
    assert_eq!(
        held.total(),
        Some(2 * 8_192 + 512 + 2 * deltanet + 2 * attention + 512 + 4_096)
    );
    assert_eq!(held.total(), Some(163_840));
    // PP 3 (layers 0 | 1, 2 | 3): the embedding and the head on every
    // stage, the final norm on the last; stage 0 holds a DeltaNet layer
    // only, so no rotary table and no scales.
    let stage = |index| {
        let stage = PipelineStage { stages: 3, index };
        loaded_weights_on_stage(
            &qwen3_next_config(),
            &qwen3_next_checkpoint(),
            DType::BF16,
            1,
            stage,
        )
        .unwrap()
    };
    let (deltanet, attention) = (69_120, 66_560);
    assert_eq!(stage(0).rotary_bytes, 0);
    assert_eq!(stage(0).total(), Some(2 * 16_384 + deltanet));
    assert_eq!(
        stage(1).total(),
        Some(2 * 16_384 + attention + deltanet + 512 + 2_048)
    );
    assert_eq!(
        stage(2).total(),
        Some(2 * 16_384 + 512 + attention + 512 + 2_048)
    );
    assert_eq!(stage(0).total(), Some(101_888));
    assert_eq!(stage(1).total(), Some(171_008));
    assert_eq!(stage(2).total(), Some(102_400));
}

#[test]
fn float32_parameters_take_their_own_width() {
    // 256 routed experts' correction bias: 1,024 B in float32, two blocks
    // (in bf16 it would fit one).
    let mut config = deepseek_v3_config();
    config["n_routed_experts"] = json!(256);
    let bias = [StoredTensor::new(
        "model.layers.1.mlp.gate.e_score_correction_bias".into(),
        "BF16".into(),
        vec![256],
        512,
    )];
    let held = loaded_weights(&config, &bias, DType::BF16, 1).unwrap();
    assert_eq!(held.tensor_bytes, 1_024);
    // Qwen3-Next's A_log of 256 value heads: float32, 128 a rank at TP 2
    // (512 B, one block); dt_bias in the served dtype, 256 B -> 512.
    let per_head = [
        bf16("model.layers.0.linear_attn.A_log", &[256]),
        bf16("model.layers.0.linear_attn.dt_bias", &[256]),
    ];
    let at = |tp| {
        loaded_weights(&qwen3_next_config(), &per_head, DType::BF16, tp)
            .unwrap()
            .tensor_bytes
    };
    assert_eq!(at(1), 1_024 + 512);
    assert_eq!(at(2), 512 + 512);
    // The DeltaNet's norm (RMSNormGated over one head's values) is whole on
    // every rank: 512 x 2 = 1,024 at TP 2 too.
    let norm = [bf16("model.layers.0.linear_attn.norm.weight", &[512])];
    let held = loaded_weights(&qwen3_next_config(), &norm, DType::BF16, 2).unwrap();
    assert_eq!(held.tensor_bytes, 1_024);
    let why = loaded_weights(&qwen3_next_config(), &per_head[..1], DType::BF16, 3).unwrap_err();
    assert!(why.contains("not divisible by 3"), "{why}");
    // Without a layer pattern kv cannot say which layers hold scales.
    let mut no_pattern = qwen3_next_config();
    no_pattern
        .as_object_mut()
        .unwrap()
        .remove("full_attention_interval");
    let why = loaded_weights(&no_pattern, &per_head, DType::BF16, 1).unwrap_err();
    assert!(why.contains("full_attention_interval"), "{why}");
}

#[test]
fn gemma_3s_thetas_and_factors_decide_how_many_tables() {
    let tables = |config: &Value| {
        loaded_weights(config, &gemma3_checkpoint(), DType::BF16, 1)
            .unwrap()
            .rotary_bytes
    };
    // Neither theta given: transformers' defaults, 1,000,000 for the full
    // layers and 10,000 for the sliding ones: two tables of 40 rows.
    let mut defaults = gemma3_config();
    for key in ["rope_scaling", "rope_theta", "rope_local_base_freq"] {
        defaults.as_object_mut().unwrap().remove(key);
    }
    assert_eq!(tables(&defaults), 2 * 1_536);
    // The sliding layers' theta given as the full layers' default: one.
    let mut one = defaults.clone();
    one["rope_local_base_freq"] = json!(1_000_000.0);
    assert_eq!(tables(&one), 1_536);
    // A linear factor that is not positive and finite is refused.
    for factor in [json!(0.0), json!(-1.0)] {
        let mut bad = gemma3_config();
        bad["rope_scaling"]["factor"] = factor;
        let why = loaded_weights(&bad, &gemma3_checkpoint(), DType::BF16, 1).unwrap_err();
        assert!(why.contains("positive `factor`"), "{why}");
    }
}

#[test]
fn rotary_refusals_at_their_bounds() {
    // A partial factor of 0 rotates nothing: refused, as 1.5 is.
    let mut zero = qwen3_next_config();
    zero["partial_rotary_factor"] = json!(0.0);
    let why = loaded_weights(&zero, &[], DType::BF16, 1).unwrap_err();
    assert!(why.contains("(0, 1]"), "{why}");
    // YaRN rows past 2^53: refused when the product is, even if the
    // original count is below it.
    let mut huge = deepseek_v3_config();
    huge["rope_scaling"]["original_max_position_embeddings"] = json!(1u64 << 52);
    huge["rope_scaling"]["factor"] = json!(4.0);
    let why = loaded_weights(&huge, &[], DType::BF16, 1).unwrap_err();
    assert!(why.contains("beyond what a double holds"), "{why}");
}

/// Jamba, small (scripts/vllm/fit-configs/test-jamba-small.json): layer 0
/// Mamba with a dense MLP, layer 1 attention with 2 experts; the Mamba
/// inner size 2 x 64 = 128, a state of 16, a kernel of 4, dt rank 4. vLLM's
/// own class gave 171,008 B at TP 1.
#[test]
fn jamba_holds_a_float32_a_no_rotary_table_and_scales_for_attention_only() {
    let config = json!({
        "architectures": ["JambaForCausalLM"], "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
        "attn_layer_period": 2, "attn_layer_offset": 1, "num_experts": 2,
        "intermediate_size": 32, "mamba_d_state": 16, "mamba_d_conv": 4,
        "mamba_expand": 2, "vocab_size": 128, "max_position_embeddings": 50,
        "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    });
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.final_layernorm.weight", &[64]),
        bf16("lm_head.weight", &[128, 64]),
    ];
    for (part, shape) in [
        ("mamba.A_log", &[128, 16][..]),
        ("mamba.D", &[128]),
        ("mamba.conv1d.weight", &[128, 1, 4]),
        ("mamba.conv1d.bias", &[128]),
        ("mamba.in_proj.weight", &[256, 64]),
        ("mamba.x_proj.weight", &[36, 128]),
        ("mamba.dt_proj.weight", &[128, 4]),
        ("mamba.dt_proj.bias", &[128]),
        ("mamba.out_proj.weight", &[64, 128]),
        ("mamba.dt_layernorm.weight", &[4]),
        ("mamba.b_layernorm.weight", &[16]),
        ("mamba.c_layernorm.weight", &[16]),
        ("feed_forward.gate_proj.weight", &[32, 64]),
        ("feed_forward.up_proj.weight", &[32, 64]),
        ("feed_forward.down_proj.weight", &[64, 32]),
        ("input_layernorm.weight", &[64]),
        ("pre_ff_layernorm.weight", &[64]),
    ] {
        tensors.push(bf16(&format!("model.layers.0.{part}"), shape));
    }
    for (part, shape) in [
        ("self_attn.q_proj.weight", &[64, 64][..]),
        ("self_attn.k_proj.weight", &[32, 64]),
        ("self_attn.v_proj.weight", &[32, 64]),
        ("self_attn.o_proj.weight", &[64, 64]),
        ("feed_forward.router.weight", &[2, 64]),
        ("input_layernorm.weight", &[64]),
        ("pre_ff_layernorm.weight", &[64]),
    ] {
        tensors.push(bf16(&format!("model.layers.1.{part}"), shape));
    }
    tensors.extend(experts("model.layers.1.feed_forward", 2, 32));
    // Layer 0: in_proj 256 x 64 x 2 = 32,768; conv1d 1,024 and its bias
    // 512; x_proj 36 x 128 x 2 = 9,216; dt_proj 1,024 and its bias 512;
    // A_log 128 x 16 in float32 = 8,192 (4,096 in bf16); D 512; out_proj
    // 16,384; three small norms 512 each; the MLP 8,192 + 4,096; two norms
    // 1,024 = 84,992. Layer 1: qkv 16,384, o 8,192, router 512, w13 16,384,
    // w2 8,192, two norms 1,024 = 50,688. Embedding and head 16,384 each,
    // the final norm 512. No rotary table: Jamba's attention has no
    // positions. Scales: layer 1 only.
    let held = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 16_384 + 512 + 84_992 + 50_688);
    assert_eq!(held.rotary_bytes, 0);
    assert_eq!(held.scale_bytes, 2_048);
    assert_eq!(held.total(), Some(171_008));
    // PP 2 (vLLM's class on meta gave 118,272 B and 86,016 B): Jamba
    // builds the embedding, the final norm and the head on every stage.
    let stage = |index| {
        let stage = PipelineStage { stages: 2, index };
        loaded_weights_on_stage(&config, &tensors, DType::BF16, 1, stage)
            .unwrap()
            .total()
    };
    assert_eq!(stage(0), Some(84_992 + 2 * 16_384 + 512));
    assert_eq!(stage(1), Some(50_688 + 2 * 16_384 + 512 + 2_048));
    assert_eq!((stage(0), stage(1)), (Some(118_272), Some(86_016)));
    // A Mamba mixer's shards (its groups may be replicated) kv has not
    // checked: refused above TP 1, by name.
    let why = loaded_weights(&config, &tensors, DType::BF16, 2).unwrap_err();
    assert!(why.contains("shards `model.layers.0.mamba."), "{why}");
    // Granite 4.0-H's head and embedding under a pipeline: refused.
    let mut granite = config.clone();
    granite["architectures"] = json!(["GraniteMoeHybridForCausalLM"]);
    let stage = PipelineStage {
        stages: 2,
        index: 0,
    };
    let why = loaded_weights_on_stage(&granite, &tensors, DType::BF16, 1, stage).unwrap_err();
    assert!(why.contains("under a pipeline"), "{why}");
    // Granite 4.0-H builds a table only with `rope` positions.
    let held = loaded_weights(&granite, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(held.rotary_bytes, 0);
    // With them: 50 positions x head_dim 16 x 2 = 1,600 -> 2,048.
    granite["position_embedding_type"] = json!("rope");
    let held = loaded_weights(&granite, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(held.rotary_bytes, 2_048);
}

/// GLM-4.5, small (scripts/vllm/fit-configs/test-glm-4.5-small.json):
/// vLLM's `Glm4MoeForCausalLM` keeps the router's weight and correction
/// bias in float32, rotates half of each head when the config names no
/// factor, and skips the MTP layer. vLLM's own class gave 134,144 B.
#[test]
fn glm_4_5_keeps_its_router_in_float32_and_rotates_half_a_head() {
    let config = json!({
        "architectures": ["Glm4MoeForCausalLM"], "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "num_hidden_layers": 2, "first_k_dense_replace": 1, "n_routed_experts": 4,
        "n_shared_experts": 1, "moe_intermediate_size": 16, "intermediate_size": 32,
        "num_nextn_predict_layers": 1, "vocab_size": 128, "max_position_embeddings": 40,
        "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    });
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.norm.weight", &[64]),
        bf16("lm_head.weight", &[128, 64]),
        bf16("model.layers.2.eh_proj.weight", &[64, 128]),
        bf16("model.layers.0.mlp.gate_proj.weight", &[32, 64]),
        bf16("model.layers.0.mlp.up_proj.weight", &[32, 64]),
        bf16("model.layers.0.mlp.down_proj.weight", &[64, 32]),
        bf16("model.layers.1.mlp.gate.weight", &[4, 64]),
        bf16("model.layers.1.mlp.gate.e_score_correction_bias", &[4]),
        bf16(
            "model.layers.1.mlp.shared_experts.gate_proj.weight",
            &[16, 64],
        ),
        bf16(
            "model.layers.1.mlp.shared_experts.up_proj.weight",
            &[16, 64],
        ),
        bf16(
            "model.layers.1.mlp.shared_experts.down_proj.weight",
            &[64, 16],
        ),
    ];
    for layer in 0..2 {
        for (part, shape) in [
            ("self_attn.q_proj.weight", [64, 64]),
            ("self_attn.k_proj.weight", [32, 64]),
            ("self_attn.v_proj.weight", [32, 64]),
            ("self_attn.o_proj.weight", [64, 64]),
        ] {
            tensors.push(bf16(&format!("model.layers.{layer}.{part}"), &shape));
        }
        tensors.push(bf16(
            &format!("model.layers.{layer}.input_layernorm.weight"),
            &[64],
        ));
        tensors.push(bf16(
            &format!("model.layers.{layer}.post_attention_layernorm.weight"),
            &[64],
        ));
    }
    tensors.extend(experts("model.layers.1.mlp", 4, 16));
    // Layer 0: qkv 16,384, o 8,192, gate_up 8,192, down 4,096, two norms
    // 1,024 = 37,888. Layer 1: attention 24,576 and two norms 1,024; the
    // router 4 x 64 in float32 = 1,024 (512 in bf16), its bias 16 B -> 512;
    // w13 16,384, w2 8,192; the shared expert 4,096 + 2,048 = 57,856. The
    // embedding and head 16,384 each, the norm 512. The table: half of 16
    // rotated, 40 x 8 x 2 = 640 -> 1,024. Scales 2 x 2,048.
    let held = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 16_384 + 512 + 37_888 + 57_856);
    assert_eq!(held.skipped_bytes, 64 * 128 * 2);
    assert_eq!(held.rotary_bytes, 1_024);
    assert_eq!(held.total(), Some(134_144));
    // A factor the config names wins: the whole head rotated, 40 x 16 x 2
    // = 1,280 -> 1,536.
    let mut whole = config.clone();
    whole["partial_rotary_factor"] = json!(1.0);
    let held = loaded_weights(&whole, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(held.rotary_bytes, 1_536);
}

#[test]
fn numbered_norms_are_whole_and_granite_moe_is_refused_under_a_pipeline() {
    // HyperCLOVA X's `post_norm1`: a norm, whole on each of 2 ranks.
    let config = json!({
        "architectures": ["HyperCLOVAXForCausalLM"], "hidden_size": 512,
        "num_attention_heads": 4, "num_hidden_layers": 1, "vocab_size": 128,
        "max_position_embeddings": 40, "torch_dtype": "bfloat16",
    });
    let norm = [bf16("model.layers.0.post_norm1.weight", &[512])];
    let held = loaded_weights(&config, &norm, DType::BF16, 2).unwrap();
    assert_eq!(held.tensor_bytes, 1_024);
    for class in ["GraniteMoeSharedForCausalLM", "GraniteMoeSWAForCausalLM"] {
        let mut granite = config.clone();
        granite["architectures"] = json!([class]);
        let stage = PipelineStage {
            stages: 2,
            index: 1,
        };
        let why = loaded_weights_on_stage(&granite, &norm, DType::BF16, 1, stage).unwrap_err();
        assert!(why.contains("under a pipeline"), "{why}");
    }
}

#[test]
fn ernie_4_5_moe_keeps_its_router_in_float32_and_drops_its_mtp_weights() {
    let config = json!({
        "architectures": ["Ernie4_5_MoeForCausalLM"], "hidden_size": 64,
        "num_attention_heads": 8, "num_key_value_heads": 8, "num_hidden_layers": 2,
        "moe_num_experts": 4, "vocab_size": 128, "max_position_embeddings": 40,
        "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    });
    let tensors = [
        // 4 x 64 in float32 = 1,024 (512 in bf16); the bias, stored [1, 4]
        // under `moe_statics`, 16 B -> 512; both whole on every rank.
        bf16("model.layers.1.mlp.gate.weight", &[4, 64]),
        bf16(
            "model.layers.1.mlp.moe_statics.e_score_correction_bias",
            &[1, 4],
        ),
        // Its mapper drops every name with `mtp` in it.
        bf16("mtp_block.0.mlp.gate.weight", &[4, 64]),
        bf16("model.mtp_linear_proj.0.weight", &[64, 128]),
    ];
    for tp in [1, 2, 4] {
        let held = loaded_weights(&config, &tensors, DType::BF16, tp).unwrap();
        assert_eq!(held.tensor_bytes, 1_024 + 512, "tp {tp}");
        assert_eq!(held.skipped_bytes, 4 * 64 * 2 + 64 * 128 * 2);
    }
    let why = loaded_weights(&config, &tensors, DType::BF16, 8).unwrap_err();
    assert!(
        why.contains("Tensor parallel size 8 is greater than the number of experts 4."),
        "{why}"
    );
    let stage = PipelineStage {
        stages: 2,
        index: 0,
    };
    let why = loaded_weights_on_stage(&config, &tensors, DType::BF16, 1, stage).unwrap_err();
    assert!(
        why.contains("'PPMissingLayer' object has no attribute 'tie_weights'"),
        "{why}"
    );
    let mut untied = config.clone();
    untied["tie_word_embeddings"] = json!(false);
    assert!(loaded_weights_on_stage(&untied, &tensors, DType::BF16, 1, stage).is_ok());
}

/// YaRN on vLLM's own table (`YaRNScalingRotaryEmbedding`): `original x
/// factor` rows. Qwen3-8B with the published 4 x 32,768 scaling gave
/// vLLM's class a [131072, 128] table (scripts/vllm/compare_weights_hf.py),
/// as did Ministral 3's 16 x 16,384 [262144, 128].
#[test]
fn a_yarn_table_holds_the_original_positions_times_the_factor() {
    let mut config = json!({
        "architectures": ["Qwen3ForCausalLM"], "hidden_size": 64,
        "num_attention_heads": 4, "head_dim": 16, "num_hidden_layers": 1,
        "vocab_size": 128, "max_position_embeddings": 100, "torch_dtype": "bfloat16",
        "rope_scaling": {"rope_type": "yarn", "factor": 2.5,
                         "original_max_position_embeddings": 10},
    });
    let rotary =
        |config: &Value| loaded_weights(config, &[], DType::BF16, 1).map(|h| h.rotary_bytes);
    // 25 rows x 16 x 2 = 800 -> 1,024.
    assert_eq!(rotary(&config), Ok(1_024));
    // No original count: transformers' reading, max_position_embeddings:
    // 250 rows x 16 x 2 = 8,000 -> 8,192.
    config["rope_scaling"]
        .as_object_mut()
        .unwrap()
        .remove("original_max_position_embeddings");
    assert_eq!(rotary(&config), Ok(8_192));
    for factor in [json!(-2.0), json!(0.0)] {
        config["rope_scaling"]["factor"] = factor;
        assert!(rotary(&config).unwrap_err().contains("positive `factor`"));
    }
    config["rope_scaling"]["factor"] = json!(2.0);
    config["rope_scaling"]["mrope_section"] = json!([8, 12, 12]);
    assert!(rotary(&config).unwrap_err().contains("`mrope_section`"));
}

#[test]
fn opt_learns_its_positions_and_holds_no_rotary_table() {
    // vLLM's class on the registry's OPT config: 250,552,320 B, no table.
    // Here: the vocabulary of 100 padded to 128 rows (16,384 B), the
    // learned positions 42 x 64 x 2 = 5,376 -> 5,632, one scale set.
    let config = json!({
        "architectures": ["OPTForCausalLM"], "hidden_size": 64,
        "num_attention_heads": 4, "num_hidden_layers": 1, "vocab_size": 100,
        "max_position_embeddings": 40, "tie_word_embeddings": true,
        "torch_dtype": "float16",
    });
    let tensors = [
        f16("model.decoder.embed_tokens.weight", &[100, 64]),
        f16("model.decoder.embed_positions.weight", &[42, 64]),
    ];
    let held = loaded_weights(&config, &tensors, DType::F16, 1).unwrap();
    assert_eq!(held.tensor_bytes, 16_384 + 5_632);
    assert_eq!(held.rotary_bytes, 0);
    assert_eq!(held.total(), Some(16_384 + 5_632 + 2_048));
}

#[test]
fn minicpm3_rotates_the_rope_part_of_each_latent_head() {
    // minicpm3.py: `get_rope(qk_rope_head_dim, ...)`. The published config
    // names no `head_dim`, where `hidden_size / heads` would be 64: the
    // table is [40, 32] in bfloat16, 2,560 B (five 512-byte blocks).
    let config = json!({
        "architectures": ["MiniCPM3ForCausalLM"], "model_type": "minicpm3",
        "hidden_size": 2560, "num_attention_heads": 40, "num_key_value_heads": 40,
        "qk_rope_head_dim": 32, "qk_nope_head_dim": 64, "kv_lora_rank": 256,
        "q_lora_rank": 768, "v_head_dim": 64, "num_hidden_layers": 1, "vocab_size": 73_448,
        "max_position_embeddings": 40, "torch_dtype": "bfloat16",
    });
    let held = loaded_weights(&config, &[], DType::BF16, 1).unwrap();
    assert_eq!(held.rotary_bytes, 2_560);
    let mut no_rope_dim = config;
    no_rope_dim
        .as_object_mut()
        .unwrap()
        .remove("qk_rope_head_dim");
    let words = loaded_weights(&no_rope_dim, &[], DType::BF16, 1).unwrap_err();
    assert!(words.contains("`qk_rope_head_dim`"), "{words}");
}

/// Phi-3.5-mini's layout at a small size: hidden 64, 4 heads of 16,
/// LongRoPE over 8 original and 40 positions.
fn longrope_config(class: &str) -> Value {
    json!({
        "architectures": [class], "model_type": "phi3", "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2,
        "vocab_size": 128, "max_position_embeddings": 40,
        "original_max_position_embeddings": 8, "torch_dtype": "bfloat16",
        "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.0], "long_factor": [1.0, 1.0]},
    })
}

#[test]
fn longrope_keeps_its_short_and_long_caches_end_to_end() {
    // Phi3LongRoPEScaledRotaryEmbedding: one `long_short_cos_sin_cache` of
    // 8 + 40 = 48 rows x 16 in bfloat16, 1,536 B (three blocks).
    let rotary =
        |config: &Value| loaded_weights(config, &[], DType::BF16, 1).map(|held| held.rotary_bytes);
    let config = longrope_config("Phi3ForCausalLM");
    assert_eq!(rotary(&config), Ok(1_536));
    // Phi-4-mini rotates three quarters of each head: 12 dims, 1,152 B, one
    // more block than 1,024: 1,536 still; half a head, 8 dims: 768 -> 1,024.
    let mut half = config.clone();
    half["partial_rotary_factor"] = json!(0.5);
    assert_eq!(rotary(&half), Ok(1_024));
    // The original count inside the rope section (transformers 5 moves it
    // there) is read first: 24 + 40 = 64 rows, 2,048 B.
    let mut inside = config.clone();
    inside["rope_scaling"]["original_max_position_embeddings"] = json!(24);
    assert_eq!(rotary(&inside), Ok(2_048));
    // Without one, vLLM's get_rope fails: refused, naming the key.
    let mut none = config;
    none.as_object_mut()
        .unwrap()
        .remove("original_max_position_embeddings");
    let words = rotary(&none).unwrap_err();
    assert!(
        words.contains("`original_max_position_embeddings`"),
        "{words}"
    );
}

#[test]
fn phimoe_holds_its_embedding_norm_and_head_on_every_stage() {
    let mut config = longrope_config("PhiMoEForCausalLM");
    config["attention_bias"] = json!(true);
    config["lm_head_bias"] = json!(true);
    config["tie_word_embeddings"] = json!(false);
    let tensors = [
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.norm.weight", &[64]),
        bf16("model.norm.bias", &[64]),
        bf16("lm_head.weight", &[128, 64]),
        bf16("lm_head.bias", &[128]),
        bf16("model.layers.0.input_layernorm.weight", &[64]),
        bf16("model.layers.1.input_layernorm.weight", &[64]),
    ];
    // On each of 2 stages: the embedding and the head 16,384 each, the
    // norm's weight and bias and the head's bias 512 each (a block), one
    // layer's norm 512, its 4 scales 2,048, the table 1,536.
    for index in 0..2 {
        let stage = PipelineStage { stages: 2, index };
        let held = loaded_weights_on_stage(&config, &tensors, DType::BF16, 1, stage).unwrap();
        assert_eq!(held.tensor_bytes, 2 * 16_384 + 3 * 512 + 512);
        assert_eq!(held.total(), Some(2 * 16_384 + 4 * 512 + 2_048 + 1_536));
    }
    // phimoe.py builds these biases whatever the config says: a config
    // without them is refused, not answered as if they were absent.
    for key in ["attention_bias", "lm_head_bias"] {
        let mut unbiased = config.clone();
        unbiased[key] = json!(false);
        let words = loaded_weights(&unbiased, &tensors, DType::BF16, 1).unwrap_err();
        assert!(words.contains(&format!("`{key}` is not true")), "{words}");
    }
}

#[test]
fn the_rope_sections_partial_factor_comes_first() {
    // A Llama of 4 heads of 16 over 64 positions, bfloat16. vLLM's get_rope
    // reads the rope section's factor, which transformers 5 keeps over a
    // top-level one: a half, 8 dims, 64 x 8 x 2 = 1,024 B.
    let mut config = json!({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 1,
        "vocab_size": 128, "max_position_embeddings": 64, "torch_dtype": "bfloat16",
        "partial_rotary_factor": 0.75,
        "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5},
    });
    let rotary =
        |config: &Value| loaded_weights(config, &[], DType::BF16, 1).map(|held| held.rotary_bytes);
    assert_eq!(rotary(&config), Ok(1_024));
    // The top level alone: three quarters, 12 dims, 1,536 B.
    config["rope_parameters"] = json!({"rope_type": "default"});
    assert_eq!(rotary(&config), Ok(1_536));
}

/// scripts/vllm/fit-configs/test-mamba-small.json: hidden 64, the mixer
/// 128 wide with a state of 16, a kernel of 4 and a rank of 4; 2 layers;
/// 128 words, tied.
fn mamba_config() -> Value {
    json!({
        "architectures": ["MambaForCausalLM"], "model_type": "mamba", "hidden_size": 64,
        "intermediate_size": 128, "expand": 2, "state_size": 16, "conv_kernel": 4,
        "time_step_rank": 4, "num_hidden_layers": 2, "vocab_size": 128, "use_bias": false,
        "use_conv_bias": true, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    })
}

fn mamba_checkpoint() -> Vec<StoredTensor> {
    let mut tensors = vec![
        bf16("backbone.embeddings.weight", &[128, 64]),
        bf16("backbone.norm_f.weight", &[64]),
    ];
    for layer in 0..2 {
        let at = |part: &str| format!("backbone.layers.{layer}.{part}");
        tensors.extend([
            bf16(&at("norm.weight"), &[64]),
            f32(&at("mixer.A_log"), &[128, 16]),
            bf16(&at("mixer.D"), &[128]),
            bf16(&at("mixer.conv1d.weight"), &[128, 1, 4]),
            bf16(&at("mixer.conv1d.bias"), &[128]),
            bf16(&at("mixer.in_proj.weight"), &[256, 64]),
            bf16(&at("mixer.x_proj.weight"), &[4 + 2 * 16, 128]),
            bf16(&at("mixer.dt_proj.weight"), &[128, 4]),
            bf16(&at("mixer.dt_proj.bias"), &[128]),
            bf16(&at("mixer.out_proj.weight"), &[64, 128]),
        ]);
    }
    tensors
}

#[test]
fn mamba_holds_no_scales_no_table_and_its_a_in_float32() {
    // TP 1, a layer: its norm 128 B -> 512; A 128 x 16 float32 8,192; D
    // 256 -> 512; conv1d 1,024 and its bias 512; in_proj 256 x 64 x 2 =
    // 32,768; x_proj 36 x 128 x 2 = 9,216; dt_proj 1,024 and its bias 512;
    // out_proj 16,384: 70,656. The embedding 16,384 (the head is tied),
    // norm_f 512. No attention: no scales, no rotary table.
    let held = loaded_weights(&mamba_config(), &mamba_checkpoint(), DType::BF16, 1).unwrap();
    assert_eq!(held.tensor_bytes, 16_384 + 512 + 2 * 70_656);
    assert_eq!((held.rotary_bytes, held.scale_bytes), (0, 0));
    // TP 2: every mixer tensor split by its 128 intermediate rows, x_proj
    // and out_proj by their columns: norm 512, A 4,096, D 512, conv1d 512
    // and 512, in_proj 16,384, x_proj 4,608, dt_proj 512 and 512, out_proj
    // 8,192: 36,352. The vocabulary halves: 8,192.
    let held = loaded_weights(&mamba_config(), &mamba_checkpoint(), DType::BF16, 2).unwrap();
    assert_eq!(held.tensor_bytes, 8_192 + 512 + 2 * 36_352);
    // Two stages: each holds the embedding and norm_f beside its layer.
    for index in 0..2 {
        let stage = PipelineStage { stages: 2, index };
        let held =
            loaded_weights_on_stage(&mamba_config(), &mamba_checkpoint(), DType::BF16, 1, stage)
                .unwrap();
        assert_eq!(held.total(), Some(16_384 + 512 + 70_656));
    }
    // A mixer 6 wide at TP 2: in_proj's two halves of 6 rows split 3 and
    // 3 (6 x 64 x 2 -> 1,024), A's 6 rows 3 a rank (192 -> 512); 5 wide
    // does not split, and is refused in vLLM's words.
    let narrow = |width: u64| {
        let mut config = mamba_config();
        config["intermediate_size"] = json!(width);
        let tensors = [
            f32("backbone.layers.0.mixer.A_log", &[width, 16]),
            bf16("backbone.layers.0.mixer.in_proj.weight", &[2 * width, 64]),
        ];
        loaded_weights(&config, &tensors, DType::BF16, 2).map(|held| held.tensor_bytes)
    };
    assert_eq!(narrow(6), Ok(1_024 + 512));
    assert!(narrow(5).unwrap_err().contains("is not divisible by"));
    // Only the Mamba classes' mapper renames `backbone.`: another class's
    // tensor of that name has no stage kv can place.
    let mut llama = mamba_config();
    llama["architectures"] = json!(["LlamaForCausalLM"]);
    llama["num_attention_heads"] = json!(4);
    let stage = PipelineStage {
        stages: 2,
        index: 0,
    };
    let words =
        loaded_weights_on_stage(&llama, &mamba_checkpoint(), DType::BF16, 1, stage).unwrap_err();
    assert!(words.contains("`backbone."), "{words}");
    // Mamba2's mixers may replicate their groups: refused above TP 1.
    let mut mamba2 = mamba_config();
    mamba2["architectures"] = json!(["Mamba2ForCausalLM"]);
    let words = loaded_weights(&mamba2, &mamba_checkpoint(), DType::BF16, 2).unwrap_err();
    assert!(words.contains("over 2 TP ranks"), "{words}");
    // An attention tensor in a config without heads is refused by name.
    let mut tensors = mamba_checkpoint();
    tensors.push(bf16("backbone.layers.0.self_attn.k_proj.weight", &[64, 64]));
    let words = loaded_weights(&mamba_config(), &tensors, DType::BF16, 1).unwrap_err();
    assert!(words.contains("no `num_attention_heads`"), "{words}");
}

#[test]
fn glm_4_5_needs_a_moe_layer_on_every_stage() {
    // Two layers, the first dense: at PP 2 stage 0 holds the dense layer
    // alone, and vLLM's class fails to build there.
    let config = json!({
        "architectures": ["Glm4MoeForCausalLM"], "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "num_hidden_layers": 2, "first_k_dense_replace": 1, "n_routed_experts": 4,
        "n_shared_experts": 1, "moe_intermediate_size": 16, "intermediate_size": 32,
        "vocab_size": 128, "max_position_embeddings": 40, "torch_dtype": "bfloat16",
    });
    let stage = |stages, index| {
        loaded_weights_on_stage(
            &config,
            &[],
            DType::BF16,
            1,
            PipelineStage { stages, index },
        )
    };
    let words = stage(2, 0).unwrap_err();
    assert!(
        words.starts_with("vLLM refuses: pp 2: stage 0 holds layers 0 to 0, none of them MoE")
            && words.contains("\"RuntimeError: No Glm4MoE layer found in model.layers."),
        "{words}"
    );
    assert!(stage(2, 1).is_ok());
    assert!(stage(1, 0).is_ok());
    // Every layer dense: no stage builds.
    let mut dense = config.clone();
    dense["first_k_dense_replace"] = json!(2);
    let words = loaded_weights(&dense, &[], DType::BF16, 1).unwrap_err();
    assert!(words.contains("stage 0 holds layers 0 to 1"), "{words}");
}

#[test]
fn gpt_oss_splits_its_sinks_and_expert_biases_and_keeps_a_float32_table() {
    // TP 1, a layer: qkv 128 x 64 x 2 = 16,384 and its bias -> 512; o
    // 8,192 and its bias 512; the sinks 8 B -> 512; the router 512 and its
    // bias 512; w13 4 x 32 x 64 x 2 = 16,384 and its bias 256 -> 512; w2
    // 8,192 and its bias 512; two norms 1,024: 53,760. The embedding and
    // the head 16,384 each, the norm 512.
    let held = loaded_weights(&gpt_oss_config(), &gpt_oss_checkpoint(), DType::BF16, 1).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 53_760 + 2 * 16_384 + 512);
    // gpt_oss.py asks for a float32 YaRN table: 8 x 4 = 32 rows x 16 x 4.
    assert_eq!(held.rotary_bytes, 2_048);
    assert_eq!(held.total(), Some(146_944));
    // TP 2: qkv one KV head and two q heads, 8,192, its bias 512; o 4,096
    // and its whole bias 512; the sinks 2 heads, 512; the router whole,
    // 1,024; w13 split with I, 8,192 and its bias 512; w2 4,096 and its
    // whole bias 512; norms 1,024: 29,184. The vocabulary halves: 8,192
    // each for the embedding and the head.
    let held = loaded_weights(&gpt_oss_config(), &gpt_oss_checkpoint(), DType::BF16, 2).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 29_184 + 2 * 8_192 + 512);
    assert_eq!(held.total(), Some(81_408));
    // 2 KV heads over 4 ranks: gpt_oss.py gives each rank 2 // 4 = 0 and
    // vLLM's attention fails on them; refused in its words.
    let words =
        loaded_weights(&gpt_oss_config(), &gpt_oss_checkpoint(), DType::BF16, 4).unwrap_err();
    assert!(
        words.starts_with("vLLM refuses: ZeroDivisionError: integer modulo by zero"),
        "{words}"
    );
    // Two stages: each holds the embedding, the norm and the head.
    for index in 0..2 {
        let stage = PipelineStage { stages: 2, index };
        let held = loaded_weights_on_stage(
            &gpt_oss_config(),
            &gpt_oss_checkpoint(),
            DType::BF16,
            1,
            stage,
        )
        .unwrap();
        assert_eq!(held.tensor_bytes, 53_760 + 2 * 16_384 + 512);
    }
}

#[test]
fn falcon_h1_keeps_a_mup_vector_beside_each_mixer() {
    // scripts/vllm/fit-configs/test-falcon-h1-small.json: every layer has
    // attention (4 heads of 16, 2 KV heads) and a Mamba2 mixer (8 heads of
    // 16, one group, a state of 16) side by side, and an MLP of 32.
    let config: Value = serde_json::from_str(include_str!(
        "../../scripts/vllm/fit-configs/test-falcon-h1-small.json"
    ))
    .unwrap();
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.final_layernorm.weight", &[64]),
        bf16("lm_head.weight", &[128, 64]),
    ];
    for layer in 0..2 {
        let at = |part: &str| format!("model.layers.{layer}.{part}");
        tensors.extend([
            bf16(&at("self_attn.q_proj.weight"), &[64, 64]),
            bf16(&at("self_attn.k_proj.weight"), &[32, 64]),
            bf16(&at("self_attn.v_proj.weight"), &[32, 64]),
            bf16(&at("self_attn.o_proj.weight"), &[64, 64]),
            bf16(&at("mamba.A_log"), &[8]),
            bf16(&at("mamba.D"), &[8]),
            bf16(&at("mamba.dt_bias"), &[8]),
            bf16(&at("mamba.conv1d.weight"), &[160, 1, 4]),
            bf16(&at("mamba.conv1d.bias"), &[160]),
            // z and x (128 each), B and C (16 each), dt (8): 296 rows.
            bf16(&at("mamba.in_proj.weight"), &[296, 64]),
            bf16(&at("mamba.out_proj.weight"), &[64, 128]),
            bf16(&at("feed_forward.gate_proj.weight"), &[32, 64]),
            bf16(&at("feed_forward.up_proj.weight"), &[32, 64]),
            bf16(&at("feed_forward.down_proj.weight"), &[64, 32]),
            bf16(&at("input_layernorm.weight"), &[64]),
            bf16(&at("pre_ff_layernorm.weight"), &[64]),
        ]);
    }
    // A layer: qkv 16,384, o 8,192; A in float32, D and dt_bias: 512 each;
    // conv1d 1,280 -> 1,536 and its bias 512; in_proj 37,888; out_proj
    // 16,384; gate_up 8,192, down 4,096; two norms 1,024: 95,744. The
    // embedding and the head 16,384 each, the final norm 512.
    let held = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 95_744 + 2 * 16_384 + 512);
    // falcon_h1.py's `mup_vector`: 296 bf16 a layer, 592 -> 1,024.
    assert_eq!(held.other_buffer_bytes, 2 * 1_024);
    // Every layer attends: scales on both, and a [40, 16] table, 1,536.
    assert_eq!((held.scale_bytes, held.rotary_bytes), (2 * 2_048, 1_536));
    assert_eq!(held.total(), Some(232_448));
    // A stage of one layer holds one vector.
    let stage = PipelineStage {
        stages: 2,
        index: 1,
    };
    let held = loaded_weights_on_stage(&config, &tensors, DType::BF16, 1, stage).unwrap();
    assert_eq!(held.other_buffer_bytes, 1_024);
}

#[test]
fn axk1_builds_a_post_mlp_norm_in_every_layer() {
    // AXK1 is DeepSeek-V3's layout with a `post_mlp_layernorm` in each
    // layer, the dense one too; its `topk_method` defaults to `noaux_tc`,
    // so the correction bias is built without the config naming it.
    let mut config = deepseek_v3_config();
    config["architectures"] = json!(["AXK1ForCausalLM"]);
    config.as_object_mut().unwrap().remove("topk_method");
    let mut tensors = deepseek_v3_checkpoint();
    // transformers' checkpoints keep it in the MoE layer's MLP only.
    tensors.push(bf16("model.layers.1.mlp.post_mlp_layernorm.weight", &[64]));
    let held = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
    // DeepSeek-V3's 1,401,344 B, and two norms of 64 x 2 -> 512 each.
    assert_eq!(
        held.tensor_bytes,
        16_384 + 16_384 + 512 + 2 * 662_016 + 12_288 + 31_744 + 2 * 512
    );
    // One stage of two holds its own layer's norm.
    let stage = PipelineStage {
        stages: 2,
        index: 0,
    };
    let first = loaded_weights_on_stage(&config, &tensors, DType::BF16, 1, stage).unwrap();
    // Stage 0: the embedding, layer 0 (attention, dense MLP), its norm.
    assert_eq!(first.tensor_bytes, 16_384 + 662_016 + 12_288 + 512);
    // DeepSeek-V3 itself without `topk_method` cannot load the bias.
    let mut deepseek = deepseek_v3_config();
    deepseek.as_object_mut().unwrap().remove("topk_method");
    assert!(loaded_weights(&deepseek, &tensors, DType::BF16, 1).is_err());
}

fn gemma4_config() -> Value {
    serde_json::from_str(include_str!(
        "../../scripts/vllm/fit-configs/test-gemma-4-small.json"
    ))
    .unwrap()
}

/// scripts/vllm/fit-configs/test-gemma-4-small.json as transformers writes
/// it (tied, so no head): layer 0 sliding with heads of 16, layer 1 full
/// with heads of 32 (`per_layer_config`), 4 heads and 2 KV heads each, and
/// per-layer inputs of 8 over a vocabulary of 128.
fn gemma4_checkpoint() -> Vec<StoredTensor> {
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.norm.weight", &[64]),
        bf16("model.embed_tokens_per_layer.weight", &[128, 16]),
        bf16("model.per_layer_model_projection.weight", &[16, 64]),
        bf16("model.per_layer_projection_norm.weight", &[8]),
    ];
    for (layer, head) in [(0, 16), (1, 32)] {
        let at = |part: &str| format!("model.layers.{layer}.{part}");
        tensors.extend([
            bf16(&at("layer_scalar"), &[1]),
            bf16(&at("self_attn.q_proj.weight"), &[4 * head, 64]),
            bf16(&at("self_attn.k_proj.weight"), &[2 * head, 64]),
            bf16(&at("self_attn.v_proj.weight"), &[2 * head, 64]),
            bf16(&at("self_attn.o_proj.weight"), &[64, 4 * head]),
            bf16(&at("self_attn.q_norm.weight"), &[head]),
            bf16(&at("self_attn.k_norm.weight"), &[head]),
            bf16(&at("mlp.gate_proj.weight"), &[32, 64]),
            bf16(&at("mlp.up_proj.weight"), &[32, 64]),
            bf16(&at("mlp.down_proj.weight"), &[64, 32]),
            bf16(&at("input_layernorm.weight"), &[64]),
            bf16(&at("post_attention_layernorm.weight"), &[64]),
            bf16(&at("pre_feedforward_layernorm.weight"), &[64]),
            bf16(&at("post_feedforward_layernorm.weight"), &[64]),
            bf16(&at("per_layer_input_gate.weight"), &[8, 64]),
            bf16(&at("per_layer_projection.weight"), &[64, 8]),
            bf16(&at("post_per_layer_input_norm.weight"), &[64]),
        ]);
    }
    tensors
}

// Gemma 4 at TP 1, in 512-byte blocks:
//   layer 0: qkv (64 + 32 + 32) x 64 x 2 = 16,384; o 8,192; q_norm, k_norm
//     and layer_scalar 512 each; gate_up 8,192; down 4,096; five norms
//     2,560; the per-layer gate 8 x 64 x 2 = 1,024 and projection 1,024
//     = 43,008
//   layer 1: qkv (128 + 64 + 64) x 64 x 2 = 32,768; o 16,384; then as
//     layer 0: 1,536 + 8,192 + 4,096 + 2,560 + 2,048 = 67,584
//   the embedding 16,384, the final norm 512, the per-layer embedding
//   128 x 16 x 2 = 4,096, its projection 16 x 64 x 2 = 2,048, its norm 512.
// Tables: the sliding layers' default rope over 16 dims, 40 x 16 x 2 =
// 1,280 -> 1,536; the full layers' proportional rope keeps its whole head
// of 32, 40 x 32 x 2 = 2,560. Scales 2,048 a layer and the normalizer 512;
// the three per-layer-input scalars 512 each.
// At TP 2 the vocabularies split (64 rows each), the column-parallel
// per-layer projection too (8 rows, 1,024), the per-layer gate and
// projection out stay whole: layer 0 8,192 + 4,096 + 1,536 + 4,096 +
// 2,048 + 2,560 + 2,048 = 24,576, layer 1 16,384 + 8,192 + the same
// 12,288 = 36,864, and 8,192 + 512 + 2,048 + 1,024 + 512 beside them.

#[test]
fn gemma_4_holds_a_table_per_kind_and_head_and_its_per_layer_inputs() {
    let held = loaded_weights(&gemma4_config(), &gemma4_checkpoint(), DType::BF16, 1).unwrap();
    assert_eq!(
        held.tensor_bytes,
        43_008 + 67_584 + 16_384 + 512 + 4_096 + 2_048 + 512
    );
    assert_eq!(held.rotary_bytes, 1_536 + 2_560);
    assert_eq!(held.scale_bytes, 2 * 2_048 + 512);
    assert_eq!(held.other_buffer_bytes, 3 * 512);
    // compare_weights_hf.py's total for this config at TP 1.
    assert_eq!(held.total(), Some(144_384));
    let held = loaded_weights(&gemma4_config(), &gemma4_checkpoint(), DType::BF16, 2).unwrap();
    assert_eq!(
        held.tensor_bytes,
        24_576 + 36_864 + 8_192 + 512 + 2_048 + 1_024 + 512
    );
    assert_eq!(held.total(), Some(83_968));
    // Without per-layer inputs there are no scalars beside them.
    let mut plain = gemma4_config();
    plain["hidden_size_per_layer_input"] = json!(0);
    let plain_tensors: Vec<StoredTensor> = gemma4_checkpoint()
        .into_iter()
        .filter(|t| !t.name.contains("per_layer"))
        .collect();
    let held = loaded_weights(&plain, &plain_tensors, DType::BF16, 1).unwrap();
    assert_eq!(held.other_buffer_bytes, 0);
    // A default rope on the full layers with a quarter of their head: 8
    // dims, 40 x 8 x 2 = 640 -> 1,024.
    let mut quarter = gemma4_config();
    quarter["rope_parameters"]["full_attention"]["rope_type"] = json!("default");
    let held = loaded_weights(&quarter, &gemma4_checkpoint(), DType::BF16, 1).unwrap();
    assert_eq!(held.rotary_bytes, 1_536 + 1_024);
    // Both kinds asking for the same rope and head share one table.
    let mut shared = gemma4_config();
    shared["per_layer_config"] = json!({});
    shared["rope_parameters"]["full_attention"] =
        shared["rope_parameters"]["sliding_attention"].clone();
    let tensors: Vec<StoredTensor> = gemma4_checkpoint()
        .into_iter()
        .map(|t| {
            if t.name.starts_with("model.layers.1.self_attn") {
                let shape: Vec<u64> = t
                    .shape
                    .iter()
                    .map(|&d| match d {
                        128 => 64,
                        32 => 16,
                        d => d,
                    })
                    .collect();
                bf16(&t.name, &shape)
            } else {
                t
            }
        })
        .collect();
    let held = loaded_weights(&shared, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(held.rotary_bytes, 1_536);
}

#[test]
fn gemma_4_refuses_a_rope_it_has_not_checked_or_a_kind_without_one() {
    let refused = |config: Value| {
        loaded_weights(&config, &gemma4_checkpoint(), DType::BF16, 1)
            .unwrap_err()
            .to_string()
    };
    let mut yarn = gemma4_config();
    yarn["rope_parameters"]["full_attention"]["rope_type"] = json!("yarn");
    assert!(refused(yarn).contains("rope_type `yarn` (full_attention layers)"));
    let mut missing = gemma4_config();
    missing["rope_parameters"]
        .as_object_mut()
        .unwrap()
        .remove("sliding_attention");
    assert!(refused(missing).contains("`rope_parameters.sliding_attention`"));
    let mut factor = gemma4_config();
    factor["rope_parameters"]["sliding_attention"]["partial_rotary_factor"] = json!(1.5);
    assert!(refused(factor.clone()).contains("`partial_rotary_factor` is not a fraction"));
    factor["rope_parameters"]["sliding_attention"]["partial_rotary_factor"] = json!(0.0);
    assert!(refused(factor.clone()).contains("`partial_rotary_factor` is not a fraction"));
    // The bound itself: the whole head.
    factor["rope_parameters"]["sliding_attention"]["partial_rotary_factor"] = json!(1.0);
    let held = loaded_weights(&factor, &gemma4_checkpoint(), DType::BF16, 1).unwrap();
    assert_eq!(held.rotary_bytes, 1_536 + 2_560);
}
#[test]
fn gemma_4_builds_all_but_its_layers_on_every_stage() {
    // On each of two stages: the embedding 16,384, the final norm 512 and
    // the per-layer inputs' 4,096 + 2,048 + 512, the normalizer 512 and the
    // three scalars 1,536 = 25,600; then its own layer with its scales and
    // its kind's table: layer 0 43,008 + 2,048 + 1,536, layer 1 67,584 +
    // 2,048 + 2,560 (vLLM's classes on the meta device: 72,192 and 97,792).
    let stage = |index| {
        let stage = PipelineStage { stages: 2, index };
        loaded_weights_on_stage(
            &gemma4_config(),
            &gemma4_checkpoint(),
            DType::BF16,
            1,
            stage,
        )
        .unwrap()
        .total()
    };
    assert_eq!(stage(0), Some(25_600 + 43_008 + 2_048 + 1_536));
    assert_eq!(stage(1), Some(25_600 + 67_584 + 2_048 + 2_560));
    // The names are Gemma 4's: another class does not place them.
    let mut gemma3 = gemma4_config();
    gemma3["architectures"] = json!(["Gemma3ForCausalLM"]);
    let stage = PipelineStage {
        stages: 2,
        index: 0,
    };
    let refused = loaded_weights_on_stage(&gemma3, &gemma4_checkpoint(), DType::BF16, 1, stage)
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("`model.embed_tokens_per_layer.weight`: kv does not know"),
        "{refused}"
    );
}

/// Gemma 4 with the layouts of its larger checkpoints, in a config no
/// script ships: 4 layers (sliding, full, sliding, full), the last two
/// KV-shared, full layers whose K is their V, and a MoE block of 4 experts
/// of 16 beside each MLP.
fn gemma4_shared_moe_config() -> Value {
    let mut config = gemma4_config();
    config["num_hidden_layers"] = json!(4);
    config["layer_types"] = json!([
        "sliding_attention",
        "full_attention",
        "sliding_attention",
        "full_attention"
    ]);
    config["per_layer_config"] = json!({"01": {"head_dim": 32}, "03": {"head_dim": 32}});
    config["num_kv_shared_layers"] = json!(2);
    config["attention_k_eq_v"] = json!(true);
    config["num_experts"] = json!(4);
    config["top_k_experts"] = json!(2);
    config["moe_intermediate_size"] = json!(16);
    config["enable_moe_block"] = json!(true);
    config
}

/// Its checkpoint as the original ones ship it: the shared layers still
/// carry a K and V projection and a K norm (vLLM drops them); layer 1
/// has no V (K is its V).
fn gemma4_shared_moe_checkpoint() -> Vec<StoredTensor> {
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.norm.weight", &[64]),
        bf16("model.embed_tokens_per_layer.weight", &[128, 32]),
        bf16("model.per_layer_model_projection.weight", &[32, 64]),
        bf16("model.per_layer_projection_norm.weight", &[8]),
    ];
    for (layer, head) in [(0, 16), (1, 32), (2, 16), (3, 32)] {
        let at = |part: &str| format!("model.layers.{layer}.{part}");
        tensors.extend([
            bf16(&at("layer_scalar"), &[1]),
            bf16(&at("self_attn.q_proj.weight"), &[4 * head, 64]),
            bf16(&at("self_attn.k_proj.weight"), &[2 * head, 64]),
            bf16(&at("self_attn.k_norm.weight"), &[head]),
            bf16(&at("self_attn.o_proj.weight"), &[64, 4 * head]),
            bf16(&at("self_attn.q_norm.weight"), &[head]),
            bf16(&at("mlp.gate_proj.weight"), &[32, 64]),
            bf16(&at("mlp.up_proj.weight"), &[32, 64]),
            bf16(&at("mlp.down_proj.weight"), &[64, 32]),
            bf16(&at("input_layernorm.weight"), &[64]),
            bf16(&at("post_attention_layernorm.weight"), &[64]),
            bf16(&at("pre_feedforward_layernorm.weight"), &[64]),
            bf16(&at("post_feedforward_layernorm.weight"), &[64]),
            bf16(&at("per_layer_input_gate.weight"), &[8, 64]),
            bf16(&at("per_layer_projection.weight"), &[64, 8]),
            bf16(&at("post_per_layer_input_norm.weight"), &[64]),
            bf16(&at("router.scale"), &[64]),
            bf16(&at("router.per_expert_scale"), &[4]),
            bf16(&at("router.proj.weight"), &[4, 64]),
            bf16(&at("experts.gate_up_proj"), &[4, 32, 64]),
            bf16(&at("experts.down_proj"), &[4, 64, 16]),
            bf16(&at("post_feedforward_layernorm_1.weight"), &[64]),
            bf16(&at("post_feedforward_layernorm_2.weight"), &[64]),
            bf16(&at("pre_feedforward_layernorm_2.weight"), &[64]),
        ]);
        if layer != 1 {
            tensors.push(bf16(&at("self_attn.v_proj.weight"), &[2 * head, 64]));
        }
    }
    tensors
}

// At TP 1, in every layer: layer_scalar and q_norm 512 each, gate_up
// 8,192, down 4,096, eight norms 4,096, the per-layer gate and projection
// 2,048; the MoE block: router scale, per-expert scale and projection 512
// each, w13 4 x 32 x 64 x 2 = 16,384, w2 4 x 64 x 16 x 2 = 8,192: 45,568.
// Then the attention: layer 0 qkv (64 + 32 + 32) x 64 x 2 = 16,384, o
// 8,192, k_norm 512; layer 1 qkv (128 + 64 + 64) x 64 x 2 = 32,768 (V's
// slot filled from K), o 16,384, k_norm 512; the shared layers q and o
// only: layer 2 8,192 + 8,192, layer 3 16,384 + 16,384. Beside them the
// embedding 16,384, the final norm 512, the per-layer embedding 128 x 32 x
// 2 = 8,192, its projection 32 x 64 x 2 = 4,096, its norm 512. The shared
// layers' K and V and K norms are skipped, their bytes as stored: layer
// 2's 32 x 64 x 2 = 4,096 twice and 32, layer 3's 8,192 twice and 64. Buffers: three per-layer-input scalars and a
// router's root_size a layer, 7 x 512.
// At TP 2 each layer's common part is 512 + 512 + 4,096 + 2,048 + 4,096 +
// 2,048 + 1,536 + 8,192 + 4,096 = 27,136, the attention 8,192 + 4,096 +
// 512, 16,384 + 8,192 + 512, 4,096 + 4,096, 8,192 + 8,192; beside them
// 8,192 + 512 + 4,096 + 2,048 + 512.

#[test]
fn gemma_4_fills_v_from_k_drops_shared_layers_kv_and_keeps_a_router_buffer() {
    let config = gemma4_shared_moe_config();
    let tensors = gemma4_shared_moe_checkpoint();
    let held = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
    let layers = 4 * 45_568 + (16_384 + 8_192 + 512) + (32_768 + 16_384 + 512) + 16_384 + 32_768;
    assert_eq!(
        held.tensor_bytes,
        layers + 16_384 + 512 + 8_192 + 4_096 + 512
    );
    assert_eq!(
        held.skipped_bytes,
        (4_096 + 4_096 + 32) + (8_192 + 8_192 + 64)
    );
    assert_eq!(held.other_buffer_bytes, 7 * 512);
    // Every layer attends (the shared ones read another's cache) and
    // builds its kind's rope.
    assert_eq!(
        (held.scale_bytes, held.rotary_bytes),
        (4 * 2_048 + 512, 1_536 + 2_560)
    );
    // vLLM's class on the meta device: 352,256 B and 202,752 B.
    assert_eq!(held.total(), Some(352_256));
    let held = loaded_weights(&config, &tensors, DType::BF16, 2).unwrap();
    let layers = 4 * 27_136 + (8_192 + 4_096 + 512) + (16_384 + 8_192 + 512) + 8_192 + 16_384;
    assert_eq!(
        held.tensor_bytes,
        layers + 8_192 + 512 + 4_096 + 2_048 + 512
    );
    assert_eq!(held.total(), Some(202_752));
    // The second of two stages: layers 2 and 3, so two routers' buffers
    // beside the three per-layer-input scalars.
    let stage = PipelineStage {
        stages: 2,
        index: 1,
    };
    let held = loaded_weights_on_stage(&config, &tensors, DType::BF16, 1, stage).unwrap();
    assert_eq!(held.other_buffer_bytes, 5 * 512);
    // An expert block with no width is vLLM's ValueError.
    let mut no_width = config.clone();
    no_width
        .as_object_mut()
        .unwrap()
        .remove("moe_intermediate_size");
    let refused = loaded_weights(&no_width, &tensors, DType::BF16, 1).unwrap_err();
    assert!(
        refused.contains("Gemma4 MoE requires an expert intermediate size"),
        "{refused}"
    );
}

/// Qwen3.5, small (scripts/vllm/fit-configs/test-qwen3.5-small.json): its
/// text model under `text_config`, 4 layers, the last full attention, the
/// others Gated DeltaNet (2 key heads and 4 value heads of 16) whose
/// projections the checkpoint ships apart (`in_proj_qkv`, `in_proj_z`,
/// `in_proj_a`, `in_proj_b`). vLLM's own class gave 231,936 B at TP 1,
/// 122,368 B at TP 2, and 115,712 B and 132,608 B at PP 2.
fn qwen3_5_config() -> Value {
    json!({
        "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5",
        "torch_dtype": "bfloat16", "tie_word_embeddings": false,
        "text_config": {
            "model_type": "qwen3_5_text", "hidden_size": 64, "intermediate_size": 32,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
            "num_hidden_layers": 4,
            "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                            "full_attention"],
            "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
            "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "vocab_size": 128,
            "max_position_embeddings": 50, "tie_word_embeddings": false,
            "rope_parameters": {"rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                                "rope_type": "default"},
        },
    })
}

fn qwen3_5_checkpoint() -> Vec<StoredTensor> {
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.norm.weight", &[64]),
        bf16("lm_head.weight", &[128, 64]),
        // The MTP module: its mapper drops `mtp.`.
        bf16("mtp.fc.weight", &[64, 128]),
    ];
    for layer in 0..4u64 {
        let at = |part: &str| format!("model.layers.{layer}.{part}");
        if layer < 3 {
            tensors.extend([
                bf16(&at("linear_attn.in_proj_qkv.weight"), &[128, 64]),
                bf16(&at("linear_attn.in_proj_z.weight"), &[64, 64]),
                bf16(&at("linear_attn.in_proj_a.weight"), &[4, 64]),
                bf16(&at("linear_attn.in_proj_b.weight"), &[4, 64]),
                bf16(&at("linear_attn.conv1d.weight"), &[128, 1, 4]),
                bf16(&at("linear_attn.dt_bias"), &[4]),
                bf16(&at("linear_attn.A_log"), &[4]),
                bf16(&at("linear_attn.norm.weight"), &[16]),
                bf16(&at("linear_attn.out_proj.weight"), &[64, 64]),
            ]);
        } else {
            tensors.extend([
                bf16(&at("self_attn.q_proj.weight"), &[128, 64]),
                bf16(&at("self_attn.k_proj.weight"), &[32, 64]),
                bf16(&at("self_attn.v_proj.weight"), &[32, 64]),
                bf16(&at("self_attn.o_proj.weight"), &[64, 64]),
                bf16(&at("self_attn.q_norm.weight"), &[16]),
                bf16(&at("self_attn.k_norm.weight"), &[16]),
            ]);
        }
        tensors.extend([
            bf16(&at("input_layernorm.weight"), &[64]),
            bf16(&at("post_attention_layernorm.weight"), &[64]),
            bf16(&at("mlp.gate_proj.weight"), &[32, 64]),
            bf16(&at("mlp.up_proj.weight"), &[32, 64]),
            bf16(&at("mlp.down_proj.weight"), &[64, 32]),
        ]);
    }
    tensors
}

// TP 1, in 512-byte blocks. A DeltaNet layer: in_proj_qkv (2 x 32 + 64 =
// 128 rows) and in_proj_z (64 rows) fused, 16,384 + 8,192 = 24,576;
// in_proj_a and in_proj_b fused, 512 + 512 = 1,024; conv1d 128 x 4 x 2 =
// 1,024; dt_bias 512; A_log (float32) 512; its norm 512; out_proj 8,192 =
// 36,352. The attention layer: qkv (q gated, 128 rows) 24,576, o_proj
// 8,192, q_norm and k_norm 512 each = 33,792. Every layer: gate_up 8,192,
// down 4,096, two norms 1,024. Embedding and head 16,384 each, the norm
// 512; the table int(16 x 0.25) = 4 wide, 50 x 4 x 2 = 400 -> 512; the
// attention layer's 4 scales 2,048.
#[test]
fn qwen3_5_fuses_its_split_deltanet_projections() {
    let held = loaded_weights(&qwen3_5_config(), &qwen3_5_checkpoint(), DType::BF16, 1).unwrap();
    let (deltanet, attention) = (36_352 + 13_312, 33_792 + 13_312);
    assert_eq!(
        held.tensor_bytes,
        3 * deltanet + attention + 2 * 16_384 + 512
    );
    assert_eq!(held.skipped_bytes, 64 * 128 * 2);
    assert_eq!((held.rotary_bytes, held.scale_bytes), (512, 2_048));
    assert_eq!(held.total(), Some(231_936));
    // TP 2: each projection into the heads, the convolution, dt_bias and
    // A_log split (qkvz 12,288, ba 512, conv 512, 512, 512), the norm whole
    // (512), out_proj by columns (4,096); the attention layer's 2 query
    // heads and 1 KV head (12,288), o_proj 4,096, its norms 1,024; the MLP
    // halved (6,144); the vocabulary (128, a multiple of 64) halved.
    let held = loaded_weights(&qwen3_5_config(), &qwen3_5_checkpoint(), DType::BF16, 2).unwrap();
    let (deltanet, attention) = (18_944 + 7_168, 17_408 + 7_168);
    assert_eq!(
        held.total(),
        Some(3 * deltanet + attention + 2 * 8_192 + 512 + 512 + 2_048)
    );
    assert_eq!(held.total(), Some(122_368));
}

#[test]
fn qwen3_5_builds_its_embedding_on_every_stage_and_its_head_on_the_last() {
    // PP 2 (layers 0, 1 | 2, 3): stage 0 two DeltaNet layers and the
    // embedding, no table and no scales; stage 1 the embedding again, a
    // DeltaNet and the attention layer, the head, the norm, the table and
    // the scales.
    let stage = |index| {
        loaded_weights_on_stage(
            &qwen3_5_config(),
            &qwen3_5_checkpoint(),
            DType::BF16,
            1,
            PipelineStage { stages: 2, index },
        )
        .unwrap()
        .total()
    };
    let (deltanet, attention) = (49_664, 47_104);
    assert_eq!(stage(0), Some(2 * deltanet + 16_384));
    assert_eq!(
        stage(1),
        Some(deltanet + attention + 16_384 + 16_384 + 512 + 512 + 2_048)
    );
    assert_eq!((stage(0), stage(1)), (Some(115_712), Some(132_608)));
}

#[test]
fn split_projections_outside_a_deltanet_layer_are_not_guessed() {
    // The fused names are Gated DeltaNet's: elsewhere vLLM's sharding of a
    // tensor so named is unknown, refused above TP 1.
    for name in ["in_proj_z", "in_proj_a"] {
        let mut tensors = qwen3_5_checkpoint();
        tensors.push(bf16(
            &format!("model.layers.3.self_attn.{name}.weight"),
            &[64, 64],
        ));
        let why = loaded_weights(&qwen3_5_config(), &tensors, DType::BF16, 2).unwrap_err();
        assert!(why.contains("kv does not know how vLLM shards"), "{why}");
    }
}

/// DeepSeek-V3.2, small (scripts/vllm/fit-configs/test-deepseek-v32-small.json):
/// the DeepSeek-V3 above with a sparse-attention indexer of 4 heads of 128
/// in each layer. vLLM's own class gave 1,513,984 B at TP 1, 894,464 B at
/// TP 2, and 750,592 B and 770,560 B at PP 2.
fn deepseek_v32_config() -> Value {
    let mut config = deepseek_v3_config();
    config["architectures"] = json!(["DeepseekV32ForCausalLM"]);
    config["model_type"] = json!("deepseek_v32");
    config["index_n_heads"] = json!(4);
    config["index_head_dim"] = json!(128);
    config["index_topk"] = json!(4);
    config
}

fn deepseek_v32_checkpoint() -> Vec<StoredTensor> {
    let mut tensors = deepseek_v3_checkpoint();
    for layer in 0..2 {
        let at = |part: &str| format!("model.layers.{layer}.self_attn.indexer.{part}");
        tensors.extend([
            bf16(&at("wq_b.weight"), &[4 * 128, 32]),
            bf16(&at("wk.weight"), &[128, 64]),
            bf16(&at("weights_proj.weight"), &[4, 64]),
            bf16(&at("k_norm.weight"), &[128]),
            bf16(&at("k_norm.bias"), &[128]),
        ]);
    }
    tensors
}

// Each layer's indexer, replicated at every TP: wq_b 512 x 32 x 2 =
// 32,768; wk and weights_proj one allocation, (128 + 4) x 64 x 2 = 16,896;
// k_norm's weight and bias float32, 512 B each -> 512 and 512 = 50,688. A
// second rotary table, NeoX-style, as large as the latent's: 3,584.
#[test]
fn deepseek_v32_replicates_its_indexer_and_keeps_a_second_table() {
    let tp1 = loaded_weights(
        &deepseek_v32_config(),
        &deepseek_v32_checkpoint(),
        DType::BF16,
        1,
    )
    .unwrap();
    assert_eq!(tp1.rotary_bytes, 2 * 3_584);
    assert_eq!(tp1.total(), Some(1_409_024 + 2 * 50_688 + 3_584));
    assert_eq!(tp1.total(), Some(1_513_984));
    let tp2 = loaded_weights(
        &deepseek_v32_config(),
        &deepseek_v32_checkpoint(),
        DType::BF16,
        2,
    )
    .unwrap();
    assert_eq!(tp2.total(), Some(789_504 + 2 * 50_688 + 3_584));
    // Interleaved indexer rope: get_rope hands back the latent's table.
    let mut interleaved = deepseek_v32_config();
    interleaved["indexer_rope_interleave"] = json!(true);
    let held = loaded_weights(&interleaved, &deepseek_v32_checkpoint(), DType::BF16, 1).unwrap();
    assert_eq!(held.rotary_bytes, 3_584);
    // PP 2: a layer and both tables a stage.
    let stage = |index| {
        loaded_weights_on_stage(
            &deepseek_v32_config(),
            &deepseek_v32_checkpoint(),
            DType::BF16,
            1,
            PipelineStage { stages: 2, index },
        )
        .unwrap()
        .total()
    };
    assert_eq!((stage(0), stage(1)), (Some(750_592), Some(770_560)));
    // Layers that share an indexer (IndexCache) are refused.
    let mut shared = deepseek_v32_config();
    shared["index_topk_freq"] = json!(2);
    let why = loaded_weights(&shared, &deepseek_v32_checkpoint(), DType::BF16, 1).unwrap_err();
    assert!(why.contains("index_topk_freq"), "{why}");
    let mut pattern = deepseek_v32_config();
    pattern["index_topk_pattern"] = json!("FS");
    assert!(loaded_weights(&pattern, &deepseek_v32_checkpoint(), DType::BF16, 1).is_err());
    // A null pattern and a frequency of 1 are the default: every layer its own.
    pattern["index_topk_pattern"] = Value::Null;
    pattern["index_topk_freq"] = json!(1);
    let held = loaded_weights(&pattern, &deepseek_v32_checkpoint(), DType::BF16, 1).unwrap();
    assert_eq!(held.total(), Some(1_513_984));
}

#[test]
fn indexer_names_outside_an_indexer_are_not_guessed() {
    // `wq_b` and `wk` are replicated inside `indexer` only; elsewhere kv does
    // not know how vLLM shards them, and says so above TP 1.
    for name in ["wq_b", "wk"] {
        let mut tensors = deepseek_v32_checkpoint();
        tensors.push(bf16(
            &format!("model.layers.0.self_attn.{name}.weight"),
            &[64, 64],
        ));
        let why = loaded_weights(&deepseek_v32_config(), &tensors, DType::BF16, 2).unwrap_err();
        assert!(why.contains("kv does not know how vLLM shards"), "{why}");
    }
}

/// Apertus, small (scripts/vllm/fit-configs/test-apertus-small.json): one
/// layer, 4 heads and 2 KV heads of 16 with q and k norms, an up-projection
/// alone (no gate) into xIELU, whose scalars the checkpoint ships. vLLM's
/// own class gave 74,240 B at TP 1 and 41,472 B at TP 2.
#[test]
fn apertus_keeps_its_xielu_scalars_whole_on_every_rank() {
    let config = json!({
        "architectures": ["ApertusForCausalLM"], "model_type": "apertus",
        "hidden_size": 64, "intermediate_size": 32, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 1,
        "vocab_size": 128, "max_position_embeddings": 50, "hidden_act": "xielu",
        "tie_word_embeddings": false, "torch_dtype": "bfloat16",
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    });
    let tensors = apertus_small_checkpoint();
    // TP 1: qkv 16,384, o_proj 8,192, the q and k norms 1,024, up and down
    // 8,192, four xIELU scalars 2,048, two norms 1,024 = 36,864; embedding
    // and head 16,384 each, the norm 512; the table 50 x 16 x 2 = 1,600 ->
    // 2,048; the scales 2,048.
    let held = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(
        held.total(),
        Some(36_864 + 2 * 16_384 + 512 + 2_048 + 2_048)
    );
    assert_eq!(held.total(), Some(74_240));
    // TP 2: qkv 8,192, o_proj 4,096, norms 1,024, up and down 4,096, the
    // scalars whole 2,048, two norms 1,024; the vocabulary halved.
    let held = loaded_weights(&config, &tensors, DType::BF16, 2).unwrap();
    assert_eq!(held.total(), Some(20_480 + 2 * 8_192 + 512 + 2_048 + 2_048));
    assert_eq!(held.total(), Some(41_472));
}

/// Gemma 3n (text), small (scripts/vllm/fit-configs/test-gemma-3n-small.json):
/// 4 layers of width 64, 4 heads and 2 KV heads of 16, the last 2 layers
/// sharing the earlier layers' KV (q alone), an MLP of 128, AltUp over 4
/// streams, LAuReL of rank 4, per-layer inputs of 8 from a vocabulary of
/// 128; 100 positions, sliding and full layers alternating. vLLM's own
/// class gave 431,104 B at TP 1 and 244,736 B at TP 2.
fn gemma3n_small() -> (Value, Vec<StoredTensor>) {
    let config = json!({
        "architectures": ["Gemma3nForCausalLM"], "model_type": "gemma3n_text",
        "hidden_size": 64, "intermediate_size": [128, 128, 128, 128],
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "vocab_size": 256, "vocab_size_per_layer_input": 128,
        "hidden_size_per_layer_input": 8, "max_position_embeddings": 100,
        "num_kv_shared_layers": 2, "sliding_window": 16, "tie_word_embeddings": true,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
                        "full_attention"],
        "rope_parameters": {
            "full_attention": {"rope_theta": 1000000.0, "rope_type": "default"},
            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
        "torch_dtype": "bfloat16",
    });
    let mut tensors = Vec::new();
    for i in 0..3 {
        tensors.push(bf16(
            &format!("model.altup_projections.{i}.weight"),
            &[64, 64],
        ));
        tensors.push(bf16(
            &format!("model.altup_unembed_projections.{i}.weight"),
            &[64, 64],
        ));
    }
    tensors.extend([
        bf16("model.embed_tokens.weight", &[256, 64]),
        bf16("model.embed_tokens_per_layer.weight", &[128, 32]),
        bf16("model.norm.weight", &[64]),
        bf16("model.per_layer_model_projection.weight", &[32, 64]),
        bf16("model.per_layer_projection_norm.weight", &[8]),
    ]);
    for layer in 0..4 {
        let at = |part: &str| format!("model.layers.{layer}.{part}");
        for (name, shape) in [
            ("altup.correct_output_scale", &[64][..]),
            ("altup.correction_coefs.weight", &[4, 4]),
            ("altup.modality_router.weight", &[4, 64]),
            ("altup.prediction_coefs.weight", &[16, 4]),
            ("altup.router_norm.weight", &[64]),
            ("input_layernorm.weight", &[64]),
            ("post_attention_layernorm.weight", &[64]),
            ("post_feedforward_layernorm.weight", &[64]),
            ("post_per_layer_input_norm.weight", &[64]),
            ("pre_feedforward_layernorm.weight", &[64]),
            ("laurel.linear_left.weight", &[4, 64]),
            ("laurel.linear_right.weight", &[64, 4]),
            ("laurel.post_laurel_norm.weight", &[64]),
            ("mlp.gate_proj.weight", &[128, 64]),
            ("mlp.up_proj.weight", &[128, 64]),
            ("mlp.down_proj.weight", &[64, 128]),
            ("per_layer_input_gate.weight", &[8, 64]),
            ("per_layer_projection.weight", &[64, 8]),
            ("self_attn.q_proj.weight", &[64, 64]),
            ("self_attn.q_norm.weight", &[16]),
            ("self_attn.o_proj.weight", &[64, 64]),
        ] {
            tensors.push(bf16(&at(name), shape));
        }
        if layer < 2 {
            tensors.push(bf16(&at("self_attn.k_proj.weight"), &[32, 64]));
            tensors.push(bf16(&at("self_attn.v_proj.weight"), &[32, 64]));
            tensors.push(bf16(&at("self_attn.k_norm.weight"), &[16]));
        }
    }
    (config, tensors)
}

#[test]
fn gemma_3n_holds_altups_scale_in_float32_and_a_table_per_layer_type() {
    // A layer at TP 1, in blocks: AltUp's five parts 512 each (the output
    // scale float32, 256 B); five norms 2,560; LAuReL 512 x 3; gate_up
    // 32,768, down 16,384; the per-layer gate and projection 1,024 each;
    // o_proj 8,192, q_norm 512: 66,560. Layers 0 and 1 add qkv (64 + 32 +
    // 32) x 64 x 2 = 16,384 and k_norm 512; the shared 2 and 3 q alone,
    // 8,192. Outside: AltUp's 6 projections 8,192 each, the embedding
    // 32,768 (tied), the per-layer one 8,192, the norm 512, the per-layer
    // projection 4,096 and its norm 512. Two rotary tables (theta 10^4 and
    // 10^6), 100 x 16 x 2 = 3,200 -> 3,584 each; the scales 2,048 a layer;
    // a bf16 scalar a layer (`router_input_scale`) and four in the decoder.
    let (config, tensors) = gemma3n_small();
    let held = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
    let layers = 2 * (66_560 + 16_384 + 512) + 2 * (66_560 + 8_192);
    let outside = 6 * 8_192 + 32_768 + 8_192 + 512 + 4_096 + 512;
    assert_eq!(held.tensor_bytes, layers + outside);
    assert_eq!(held.rotary_bytes, 2 * 3_584);
    assert_eq!(held.scale_bytes, 4 * 2_048);
    assert_eq!(held.other_buffer_bytes, (4 + 4) * 512);
    assert_eq!(held.total(), Some(431_104));
}

#[test]
fn gemma_3n_at_tp_2_splits_altups_projections_and_laurel() {
    // A layer: AltUp and the norms whole 5,120; LAuReL [2, 64] and [64, 2]
    // still a block each, 1,536; gate_up 16,384, down 8,192; the per-layer
    // gate and projection whole 2,048; o_proj 4,096, q_norm 512: 37,888.
    // Layers 0 and 1: qkv (32 + 16 + 16) x 64 x 2 = 8,192, k_norm 512;
    // 2 and 3: q 4,096. Outside: AltUp's projections 4,096 each, the
    // embedding 16,384, the per-layer one 4,096 (64 of its 128 rows), the
    // norm 512, the per-layer projection 2,048, its norm 512.
    let (config, tensors) = gemma3n_small();
    let held = loaded_weights(&config, &tensors, DType::BF16, 2).unwrap();
    let layers = 2 * (37_888 + 8_192 + 512) + 2 * (37_888 + 4_096);
    let outside = 6 * 4_096 + 16_384 + 4_096 + 512 + 2_048 + 512;
    assert_eq!(held.tensor_bytes, layers + outside);
    assert_eq!(held.total(), Some(244_736));
    // vLLM's class does not implement SupportsPP.
    let stage = PipelineStage {
        stages: 2,
        index: 0,
    };
    let why = loaded_weights_on_stage(&config, &tensors, DType::BF16, 1, stage).unwrap_err();
    assert!(
        why.contains("Pipeline parallelism is not supported"),
        "{why}"
    );
}

/// Laguna, small (scripts/vllm/fit-configs/test-laguna-small.json): 3
/// layers of width 64, 4 heads and 2 KV heads of 16 with a gate a head,
/// layer 0 dense (MLP 128), layers 1 and 2 of 4 experts (32 wide) and a
/// shared one; a full layer (rope theta 5 x 10^5 on half of each head) and
/// two sliding ones (10^4, whole heads); 100 positions. vLLM's own class
/// gave 300,544 B at TP 1, 161,280 B at TP 2, 192,000 B and 112,128 B at
/// PP 2.
fn laguna_small() -> (Value, Vec<StoredTensor>) {
    let config = json!({
        "architectures": ["LagunaForCausalLM"], "model_type": "laguna",
        "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 32, "num_hidden_layers": 3,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "num_attention_heads_per_layer": [4, 4, 4], "vocab_size": 128,
        "max_position_embeddings": 100, "num_experts": 4, "num_experts_per_tok": 2,
        "sliding_window": 16, "gating": true, "tie_word_embeddings": false,
        "layer_types": ["full_attention", "sliding_attention", "sliding_attention"],
        "mlp_layer_types": ["dense", "sparse", "sparse"],
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 500000.0,
                               "partial_rotary_factor": 0.5},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0,
                                  "partial_rotary_factor": 1.0}},
        "torch_dtype": "bfloat16",
    });
    let tensors = laguna_small_checkpoint();
    (config, tensors)
}

#[test]
fn laguna_holds_a_rotary_table_per_layer_types_rope_and_a_float32_bias() {
    // A layer's attention: qkv (64 + 32 + 32) x 64 x 2 = 16,384, o_proj
    // 8,192, the gate 512, q and k norms 512 each, two norms 512 each:
    // 27,136. Layer 0's MLP: gate_up 32,768, down 16,384. Layers 1 and 2:
    // w13 4 x 64 x 64 x 2 = 32,768, w2 16,384, the router 512, its bias in
    // float32 (16 B) 512, the shared expert 8,192 + 4,096: 62,464. The
    // embedding and head 16,384 each, the norm 512. Two tables: the full
    // layer's 100 x 8 x 2 = 1,600 -> 2,048, the sliding layers' 100 x 16 x
    // 2 = 3,200 -> 3,584. The scales 2,048 a layer.
    let (config, tensors) = laguna_small();
    let held = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(
        held.tensor_bytes,
        3 * 27_136 + 49_152 + 2 * 62_464 + 2 * 16_384 + 512
    );
    assert_eq!(held.rotary_bytes, 2_048 + 3_584);
    assert_eq!(held.total(), Some(300_544));
    // Stage 0 of 2: layers 0 and 1, the embedding, both layer types'
    // tables; stage 1: layer 2, the norm, the head, the sliding table.
    let stage = |index| {
        loaded_weights_on_stage(
            &config,
            &tensors,
            DType::BF16,
            1,
            PipelineStage { stages: 2, index },
        )
        .unwrap()
        .total()
    };
    assert_eq!(
        stage(0),
        Some(2 * 27_136 + 49_152 + 62_464 + 16_384 + 2_048 + 3_584 + 2 * 2_048)
    );
    assert_eq!(stage(0), Some(192_000));
    assert_eq!(
        stage(1),
        Some(27_136 + 62_464 + 16_384 + 512 + 3_584 + 2_048)
    );
    assert_eq!(stage(1), Some(112_128));
}

#[test]
fn laguna_at_tp_2_splits_its_gate_with_the_heads() {
    // A layer's attention: qkv (32 + 16 + 16) x 64 x 2 = 8,192, o_proj
    // 4,096, the gate [2, 64] 256 -> 512, the norms 2,048: 14,848. Layer
    // 0's MLP halved: 24,576. Layers 1 and 2: w13 16,384, w2 8,192, the
    // router and bias 1,024 whole, the shared expert 4,096 + 2,048:
    // 31,744. Embedding and head 8,192 each, the norm 512.
    let (config, tensors) = laguna_small();
    let held = loaded_weights(&config, &tensors, DType::BF16, 2).unwrap();
    assert_eq!(
        held.tensor_bytes,
        3 * 14_848 + 24_576 + 2 * 31_744 + 2 * 8_192 + 512
    );
    assert_eq!(held.total(), Some(161_280));
}

#[test]
fn gpt_2_reads_its_own_keys_pads_wte_and_skips_the_masks() {
    // A layer at TP 1: c_attn 64 x 192 x 2 = 24,576 and its bias 512;
    // c_proj 8,192 + 512; four norm tensors 512 each; c_fc 32,768 + 512;
    // the MLP's c_proj 32,768 + 512: 102,400. wte padded to 128 rows,
    // 16,384; wpe 4,096; ln_f 1,024; no rotary table; the scales 2,048 a
    // layer. The masks (2,048 B each) are skipped.
    let (config, tensors) = gpt2_small();
    let held = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 102_400 + 16_384 + 4_096 + 1_024);
    assert_eq!(held.skipped_bytes, 2 * 2_048);
    assert_eq!(held.rotary_bytes, 0);
    assert_eq!(held.total(), Some(230_400));
}

#[test]
fn gpt_2_splits_its_transposed_conv1d_weights_and_holds_the_rest_on_every_stage() {
    // TP 2, a layer: c_attn 12,288 + 512, c_proj 4,096 + its bias whole
    // 512, the norms 2,048, c_fc 16,384 + 512, the MLP's c_proj 16,384 +
    // 512: 53,248. wte 64 rows, 8,192; wpe and ln_f whole.
    let (config, tensors) = gpt2_small();
    let held = loaded_weights(&config, &tensors, DType::BF16, 2).unwrap();
    assert_eq!(
        held.total(),
        Some(2 * 53_248 + 8_192 + 4_096 + 1_024 + 4_096)
    );
    assert_eq!(held.total(), Some(123_904));
    // PP 2: each stage its layer, and wte, wpe and ln_f, which gpt2.py
    // builds on every stage.
    for index in 0..2 {
        let stage = PipelineStage { stages: 2, index };
        let held = loaded_weights_on_stage(&config, &tensors, DType::BF16, 1, stage).unwrap();
        assert_eq!(held.total(), Some(102_400 + 16_384 + 4_096 + 1_024 + 2_048));
    }
    // TP 8: 4 heads do not divide over 8 ranks.
    let why = loaded_weights(&config, &tensors, DType::BF16, 8).unwrap_err();
    assert!(why.contains("is not divisible by 8"), "{why}");
}

/// BLOOM, as transformers' defaults give it (the registry's config), under
/// the published checkpoints' names (no `transformer.` prefix): 2 layers
/// (`n_layer`) of width 64, 8 heads (`n_head`), ALiBi (no rotary table), a
/// vocabulary of 250,880, tied. vLLM's own class gave 32,323,584 B at TP 1,
/// 16,168,960 B at TP 2 and 32,219,136 B on each stage of PP 2.
fn bloom_small() -> (Value, Vec<StoredTensor>) {
    let config = json!({
        "architectures": ["BloomForCausalLM"], "model_type": "bloom", "hidden_size": 64,
        "n_layer": 2, "n_head": 8, "vocab_size": 250880, "tie_word_embeddings": true,
        "torch_dtype": "bfloat16",
    });
    let mut tensors = vec![
        bf16("word_embeddings.weight", &[250880, 64]),
        bf16("word_embeddings_layernorm.weight", &[64]),
        bf16("word_embeddings_layernorm.bias", &[64]),
        bf16("ln_f.weight", &[64]),
        bf16("ln_f.bias", &[64]),
    ];
    for layer in 0..2 {
        let at = |part: &str| format!("h.{layer}.{part}");
        for (name, shape) in [
            ("input_layernorm.weight", &[64][..]),
            ("input_layernorm.bias", &[64]),
            ("self_attention.query_key_value.weight", &[192, 64]),
            ("self_attention.query_key_value.bias", &[192]),
            ("self_attention.dense.weight", &[64, 64]),
            ("self_attention.dense.bias", &[64]),
            ("post_attention_layernorm.weight", &[64]),
            ("post_attention_layernorm.bias", &[64]),
            ("mlp.dense_h_to_4h.weight", &[256, 64]),
            ("mlp.dense_h_to_4h.bias", &[256]),
            ("mlp.dense_4h_to_h.weight", &[64, 256]),
            ("mlp.dense_4h_to_h.bias", &[64]),
        ] {
            tensors.push(bf16(&at(name), shape));
        }
    }
    (config, tensors)
}

#[test]
fn bloom_splits_its_fused_attention_with_the_heads_and_keeps_alibi_tableless() {
    // A layer at TP 1: four norm tensors 512 each; query_key_value 192 x
    // 64 x 2 = 24,576 + 512; dense 8,192 + 512; dense_h_to_4h 32,768 +
    // 512; dense_4h_to_h 32,768 + 512: 102,400. The embedding 250,880 x 64
    // x 2 = 32,112,640 (a multiple of 64 rows already), its norm and ln_f
    // 1,024 each; the scales 2,048 a layer.
    let (config, tensors) = bloom_small();
    let held = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(held.rotary_bytes, 0);
    assert_eq!(
        held.total(),
        Some(2 * 102_400 + 32_112_640 + 2 * 1_024 + 2 * 2_048)
    );
    assert_eq!(held.total(), Some(32_323_584));
    // TP 2, a layer: the norms 2,048; query_key_value 12,288 + 512; dense
    // 4,096 + its bias whole 512; dense_h_to_4h 16,384 + 512;
    // dense_4h_to_h 16,384 + 512: 53,248. The embedding's 125,440 rows
    // 16,056,320.
    let held = loaded_weights(&config, &tensors, DType::BF16, 2).unwrap();
    assert_eq!(
        held.total(),
        Some(2 * 53_248 + 16_056_320 + 2 * 1_024 + 2 * 2_048)
    );
    assert_eq!(held.total(), Some(16_168_960));
    // PP 2: each stage its layer beside the embedding and both norms.
    for index in 0..2 {
        let stage = PipelineStage { stages: 2, index };
        let held = loaded_weights_on_stage(&config, &tensors, DType::BF16, 1, stage).unwrap();
        assert_eq!(held.total(), Some(102_400 + 32_112_640 + 2_048 + 2_048));
    }
}

#[test]
fn gpt_j_rotates_rotary_dim_of_each_head_and_pads_its_head_bias() {
    // A layer at TP 1: ln_1 1,024; qkv 3 x 8,192; out_proj 8,192; fc_in
    // 32,768 + 512; fc_out 32,768 + 512: 100,352. wte and the head padded
    // to 128 rows, 16,384 each; the head's bias 128 x 2 -> 512; ln_f
    // 1,024. The table 32 x 8 x 2 = 512; the scales 2,048 a layer; the
    // masks skipped.
    let (config, tensors) = gpt_j_small();
    let held = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(held.rotary_bytes, 512);
    assert_eq!(held.skipped_bytes, 2 * (2_048 + 2));
    assert_eq!(
        held.total(),
        Some(2 * 100_352 + 2 * 16_384 + 512 + 1_024 + 512 + 2 * 2_048)
    );
    assert_eq!(held.total(), Some(239_616));
    // TP 2, a layer: ln_1 1,024; qkv 12,288; out_proj 4,096; fc_in 16,384
    // + 512; fc_out 16,384 + its bias whole 512: 51,200. wte and the head
    // 64 rows, 8,192 each; the head's bias 64 x 2 -> 512.
    let held = loaded_weights(&config, &tensors, DType::BF16, 2).unwrap();
    assert_eq!(
        held.total(),
        Some(2 * 51_200 + 2 * 8_192 + 512 + 1_024 + 512 + 2 * 2_048)
    );
    assert_eq!(held.total(), Some(124_928));
}

/// OPT, small (scripts/vllm/fit-configs/test-opt-small.json): one layer of
/// width 64, 4 heads with biases, an MLP of 128 (`fc1`, `fc2`), 32 learned
/// positions (34 rows: OPT offsets them by 2), a vocabulary of 100, tied.
/// vLLM's own class gave 93,696 B at TP 1 and 52,736 B at TP 2.
#[test]
fn opt_at_tp_2_keeps_its_positions_and_row_biases_whole() {
    let config = json!({
        "architectures": ["OPTForCausalLM"], "model_type": "opt", "hidden_size": 64,
        "ffn_dim": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
        "vocab_size": 100, "max_position_embeddings": 32, "word_embed_proj_dim": 64,
        "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    });
    let tensors = opt_small_checkpoint();
    // TP 2: the embedding's 64 rows 8,192; the positions whole, 34 x 64 x
    // 2 = 4,352 -> 4,608; the final norm 1,024. The layer: qkv 96 x 64 x 2
    // = 12,288 and its bias 192 -> 512; out_proj 64 x 32 x 2 = 4,096 and
    // its bias whole 512; the attention's norm 1,024; fc1 8,192 + 512; fc2
    // 8,192 + its bias whole 512; the layer's final norm 1,024: 36,864.
    // No rotary table; the scales 2,048.
    let held = loaded_weights(&config, &tensors, DType::BF16, 2).unwrap();
    assert_eq!(held.rotary_bytes, 0);
    assert_eq!(held.total(), Some(8_192 + 4_608 + 1_024 + 36_864 + 2_048));
    assert_eq!(held.total(), Some(52_736));
}

/// DBRX, small (scripts/vllm/fit-configs/test-dbrx-small.json): 2 blocks of
/// width 64 (`d_model`), 4 heads and 2 KV heads of 16 in one `Wqkv`, 4
/// experts 32 wide (`ffn_config`), each projection of every expert stacked
/// in one tensor; 32 positions (`max_seq_len`), a vocabulary of 100,
/// untied. vLLM's own class gave 188,928 B at TP 1 and 98,816 B at TP 2.
fn dbrx_small() -> (Value, Vec<StoredTensor>) {
    let config = json!({
        "architectures": ["DbrxForCausalLM"], "model_type": "dbrx", "d_model": 64,
        "n_heads": 4, "n_layers": 2, "max_seq_len": 32, "vocab_size": 100,
        "attn_config": {"kv_n_heads": 2, "rope_theta": 10000},
        "ffn_config": {"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2},
        "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    });
    let mut tensors = vec![
        bf16("transformer.wte.weight", &[100, 64]),
        bf16("transformer.norm_f.weight", &[64]),
        bf16("lm_head.weight", &[100, 64]),
    ];
    for block in 0..2 {
        let at = |part: &str| format!("transformer.blocks.{block}.{part}");
        for (name, shape) in [
            ("ffn.experts.mlp.w1", &[128, 64][..]),
            ("ffn.experts.mlp.v1", &[128, 64]),
            ("ffn.experts.mlp.w2", &[128, 64]),
            ("ffn.router.layer.weight", &[4, 64]),
            ("norm_attn_norm.attn.Wqkv.weight", &[128, 64]),
            ("norm_attn_norm.attn.out_proj.weight", &[64, 64]),
            ("norm_attn_norm.norm_1.weight", &[64]),
            ("norm_attn_norm.norm_2.weight", &[64]),
        ] {
            tensors.push(bf16(&at(name), shape));
        }
    }
    (config, tensors)
}

#[test]
fn dbrx_reads_its_nested_sizes_and_merges_its_stacked_experts() {
    // A block at TP 1: w1 and v1 one allocation, 2 x 128 x 64 x 2 =
    // 32,768; w2 16,384; the router 512; Wqkv 16,384; out_proj 8,192; two
    // norms 512 each: 75,264. wte and the head padded to 128 rows, 16,384
    // each; norm_f 512; the table 32 x 16 x 2 = 1,024; the scales 2,048 a
    // block.
    let (config, tensors) = dbrx_small();
    let held = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 75_264 + 2 * 16_384 + 512);
    assert_eq!(held.rotary_bytes, 1_024);
    assert_eq!(held.total(), Some(188_928));
    // TP 2, a block: w13 16,384, w2 8,192, the router whole 512, Wqkv (2
    // heads and one of each KV head) 64 x 64 x 2 = 8,192, out_proj 4,096,
    // the norms 1,024: 38,400; wte and the head 8,192 each.
    let held = loaded_weights(&config, &tensors, DType::BF16, 2).unwrap();
    assert_eq!(
        held.total(),
        Some(2 * 38_400 + 2 * 8_192 + 512 + 1_024 + 2 * 2_048)
    );
    assert_eq!(held.total(), Some(98_816));
    // An expert width TP does not divide: FusedMoE refuses.
    let mut odd = config.clone();
    odd["ffn_config"]["ffn_hidden_size"] = json!(30);
    let why = loaded_weights(&odd, &tensors, DType::BF16, 4).unwrap_err();
    assert!(why.contains("30 is not divisible by 4"), "{why}");
}

/// GLM-4's text class as GLM-4.1V and GLM-OCR build it from transformers'
/// defaults: no `partial_rotary_factor` (glm4.py `setdefault`s 0.5) and no
/// `attention_bias` (glm4.py builds no q, k, v biases, and its loader skips
/// the checkpoint's). vLLM's own class, under --language-model-only on the
/// registry's GLM-4.1V and GLM-OCR configs, agreed at TP 1 to 4 and PP 2.
#[test]
fn glm_4_without_attention_bias_skips_the_checkpoints_biases() {
    let config = json!({
        "architectures": ["Glm4ForCausalLM"], "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "num_hidden_layers": 1, "vocab_size": 128, "max_position_embeddings": 100,
        "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    });
    let tensors = [
        bf16("model.layers.0.self_attn.q_proj.bias", &[64]),
        bf16("model.layers.0.self_attn.k_proj.bias", &[32]),
        bf16("model.layers.0.self_attn.v_proj.bias", &[32]),
    ];
    // The table rotates half of each head: 100 x 8 x 2 = 1,600 -> 2,048.
    let held = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
    assert_eq!((held.tensor_bytes, held.skipped_bytes), (0, 128 + 64 + 64));
    assert_eq!(held.rotary_bytes, 2_048);
    // With `attention_bias`, one qkv bias of 128 x 2 -> 512.
    let mut biased = config.clone();
    biased["attention_bias"] = json!(true);
    let held = loaded_weights(&biased, &tensors, DType::BF16, 1).unwrap();
    assert_eq!((held.tensor_bytes, held.skipped_bytes), (512, 0));
}

#[test]
fn lagunas_router_bias_is_float32_whatever_the_served_dtype() {
    // A bias of 256 experts: 512 B stored, 1,024 B held.
    let (config, tensors) = laguna_small();
    let without: Vec<StoredTensor> = tensors
        .iter()
        .filter(|t| !t.name.ends_with("e_score_correction_bias"))
        .cloned()
        .collect();
    let mut with = without.clone();
    with.push(bf16(
        "model.layers.1.mlp.gate.e_score_correction_bias",
        &[256],
    ));
    let bytes = |tensors: &[StoredTensor]| {
        loaded_weights(&config, tensors, DType::BF16, 1)
            .unwrap()
            .tensor_bytes
    };
    assert_eq!(bytes(&with) - bytes(&without), 1_024);
}

#[test]
fn gpt_j_with_no_heads_is_refused_not_divided_by() {
    let (mut config, tensors) = gpt_j_small();
    config["n_head"] = json!(0);
    let why = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap_err();
    assert!(why.contains("positive `n_head`"), "{why}");
}

#[test]
fn zero_sizes_under_the_older_keys_are_refused_not_divided_by() {
    for tp in [1, 2] {
        let (mut gpt2, tensors) = gpt2_small();
        gpt2["n_head"] = json!(0);
        assert!(loaded_weights(&gpt2, &tensors, DType::BF16, tp).is_err());
        let (mut bloom, tensors) = bloom_small();
        bloom["n_head"] = json!(0);
        assert!(loaded_weights(&bloom, &tensors, DType::BF16, tp).is_err());
        let (mut dbrx, tensors) = dbrx_small();
        dbrx["attn_config"]["kv_n_heads"] = json!(0);
        assert!(loaded_weights(&dbrx, &tensors, DType::BF16, tp).is_err());
    }
}

/// Beam, small (scripts/vllm/fit-configs/test-beam-small.json): 2 layers
/// of width 64, 4 heads and 2 KV heads of 16 with an output gate and its
/// bias a head, layer 0 dense (MLP 128), layer 1 of 4 experts (32 wide); a
/// sliding layer (rope) and a full one (none); 32 positions. vLLM's own
/// class gave 211,968 B at TP 1 and 113,664 B at TP 2.
#[test]
fn beam_keeps_its_router_and_rotary_table_in_float32() {
    let config = json!({
        "architectures": ["BeamForCausalLM"], "model_type": "beam", "hidden_size": 64,
        "intermediate_size": 128, "moe_intermediate_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "num_experts": 4, "num_experts_per_tok": 2, "vocab_size": 128,
        "max_position_embeddings": 32, "sliding_window": 16,
        "layer_types": ["sliding_attention", "full_attention"],
        "mlp_layer_types": ["dense", "sparse"],
        "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                            "full_attention": null},
        "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    });
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.norm.weight", &[64]),
        bf16("lm_head.weight", &[128, 64]),
        bf16("model.layers.0.mlp.gate_proj.weight", &[128, 64]),
        bf16("model.layers.0.mlp.up_proj.weight", &[128, 64]),
        bf16("model.layers.0.mlp.down_proj.weight", &[64, 128]),
        bf16("model.layers.1.mlp.experts.gate_up_proj", &[4, 64, 64]),
        bf16("model.layers.1.mlp.experts.down_proj", &[4, 64, 32]),
        bf16("model.layers.1.mlp.gate.weight", &[4, 64]),
        bf16("model.layers.1.mlp.gate.e_score_correction_bias", &[4]),
    ];
    for layer in 0..2 {
        let at = |part: &str| format!("model.layers.{layer}.{part}");
        for (name, shape) in [
            ("self_attn.q_proj.weight", &[64, 64][..]),
            ("self_attn.k_proj.weight", &[32, 64]),
            ("self_attn.v_proj.weight", &[32, 64]),
            ("self_attn.gate_proj.weight", &[64, 64]),
            ("self_attn.gate_bias", &[4]),
            ("self_attn.o_proj.weight", &[64, 64]),
            ("self_attn.q_norm.weight", &[16]),
            ("self_attn.k_norm.weight", &[16]),
            ("input_layernorm.weight", &[64]),
            ("post_attention_layernorm.weight", &[64]),
            ("pre_feedforward_layernorm.weight", &[64]),
            ("post_feedforward_layernorm.weight", &[64]),
        ] {
            tensors.push(bf16(&at(name), shape));
        }
    }
    // A layer's attention at TP 1: qkv 16,384, the output gate 8,192,
    // o_proj 8,192, the gate's bias 512, q and k norms 1,024, four norms
    // 2,048: 36,352. Layer 0's MLP 32,768 + 16,384; layer 1's experts
    // 32,768 + 16,384, the router in float32 4 x 64 x 4 = 1,024, its bias
    // 16 B -> 512. Embedding and head 16,384 each, the norm 512. The table
    // in float32, 32 x 16 x 4 = 2,048; the scales 2,048 a layer.
    let held = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(
        held.tensor_bytes,
        2 * 36_352 + 49_152 + 50_688 + 2 * 16_384 + 512
    );
    assert_eq!(held.rotary_bytes, 2_048);
    assert_eq!(held.total(), Some(211_968));
    // TP 2: a layer's attention qkv 8,192, the gate 4,096, o_proj 4,096,
    // the gate's bias (2 heads) 512, the norms 3,072: 19,968. The dense MLP
    // 24,576; the experts 16,384 + 8,192, the router and bias whole 1,536.
    let held = loaded_weights(&config, &tensors, DType::BF16, 2).unwrap();
    assert_eq!(
        held.tensor_bytes,
        2 * 19_968 + 24_576 + 26_112 + 2 * 8_192 + 512
    );
    assert_eq!(held.total(), Some(113_664));
    let stage = PipelineStage {
        stages: 2,
        index: 0,
    };
    assert!(loaded_weights_on_stage(&config, &tensors, DType::BF16, 1, stage).is_err());
}

// vLLM's lfm2.py at TP 1 on test-lfm2-small.json, bf16, in 512-byte blocks:
//   the embedding, its vocabulary padded to 128: 128 x 64 x 2 = 16,384; the
//     head tied to it whatever the config says (lfm2.py ties it).
//   a convolution layer: conv 64 x 3 x 2 = 384 -> 512, in_proj 192 x 64 x 2
//     = 24,576, out_proj 8,192; w1 and w3 in one w13 32,768, w2 16,384; two
//     norms 512 each: 83,456; two of them 166,912.
//   the attention layer: q, k and v in one qkv_proj 8,192 + 4,096 + 4,096
//     = 16,384, out_proj 8,192, the q and k norms 512 each; the MLP 49,152
//     and norms 1,024: 75,776.
//   the final norm 512.
// Tensors 16,384 + 166,912 + 75,776 + 512 = 259,584; the rotary table
// [32, 16] in bf16 1,024; one attention layer's four scales 2,048: 262,656,
// what vLLM's own class built on meta holds (compare_weights_hf.py).
#[test]
fn lfm2_ties_its_head_whatever_the_config_says() {
    let held = loaded_weights(&lfm2_config(), &lfm2_checkpoint(), DType::BF16, 1).unwrap();
    assert_eq!(held.tensor_bytes, 259_584);
    assert_eq!(held.rotary_bytes, 1_024);
    assert_eq!(held.scale_bytes, 2_048);
    assert_eq!(held.total(), Some(262_656));
    // Untied, a stored head is skipped: vLLM holds the embedding as head.
    let mut untied = lfm2_config();
    untied["tie_word_embeddings"] = json!(false);
    let mut with_head = lfm2_checkpoint();
    with_head.push(bf16("lm_head.weight", &[100, 64]));
    let held = loaded_weights(&untied, &with_head, DType::BF16, 1).unwrap();
    assert_eq!(held.total(), Some(262_656));
    assert_eq!(held.skipped_bytes, 12_800);
}

// At TP 2: the embedding's 64 rows a rank 8,192; a convolution layer conv
// 32 x 3 x 2 = 192 -> 512, in_proj 96 x 64 x 2 = 12,288, out_proj 64 x 32
// x 2 = 4,096, w13 16,384, w2 8,192, norms 1,024: 42,496, two 84,992; the
// attention layer 2 heads and 1 KV head a rank, qkv (32 + 16 + 16) x 64 x 2
// = 8,192, out 4,096, the q and k norms whole 1,024, the MLP 24,576, norms
// 1,024: 38,912; the final norm 512. Tensors 132,608, with the table and
// scales 135,680, as vLLM's class at TP 2 (compare_weights_hf.py).
#[test]
fn lfm2_splits_its_convolutions_and_mlp_over_the_ranks() {
    let held = loaded_weights(&lfm2_config(), &lfm2_checkpoint(), DType::BF16, 2).unwrap();
    assert_eq!(held.tensor_bytes, 132_608);
    assert_eq!(held.total(), Some(135_680));
    // in_proj's three parts must each divide: 198 rows over 3 x 4 do not.
    let mut odd = lfm2_checkpoint();
    for t in &mut odd {
        if t.name == "model.layers.0.conv.in_proj.weight" {
            *t = bf16(&t.name.clone(), &[198, 64]);
        }
    }
    let e = loaded_weights(&lfm2_config(), &odd, DType::BF16, 4).unwrap_err();
    assert!(e.contains("198"), "{e}");
}

// vLLM's lfm2_moe.py at TP 1, in 512-byte blocks: the embedding 16,384
// (the head tied to it); layer 0 as LFM2's convolution layer, 83,456; the
// MoE layers' block: the router bias float32 4 x 4 -> 512, w13 4 x 64 x 64
// x 2 = 32,768, w2 4 x 64 x 32 x 2 = 16,384, the gate 4 x 64 x 2 = 512:
// 50,176; layer 1 and 3 (attention 24,576 + norms 1,024 + the block)
// 76,800 each; layer 2 (convolution 33,280 + norms 1,024 + the block)
// 84,480; the final norm 512. Tensors 338,432; the table 1,024 and two
// attention layers' scales 4,096: 343,552, as vLLM's class
// (compare_weights_hf.py). At TP 2: the embedding 8,192; layer 0 42,496
// (LFM2's at TP 2); the block: the bias whole 512, w13 4 x 32 x 64 x 2 =
// 16,384, w2 4 x 64 x 16 x 2 = 8,192, the gate whole 512: 25,600; layers 1
// and 3 (attention 13,312 + norms 1,024 + the block) 39,936 each; layer 2
// (convolution 16,896 + norms 1,024 + the block) 43,520; the final norm
// 512: 174,592, with the table and scales 179,712, as vLLM's class.
#[test]
fn lfm2_moe_keeps_its_router_bias_in_float32() {
    let held = loaded_weights(&lfm2_moe_config(), &lfm2_moe_checkpoint(), DType::BF16, 1).unwrap();
    assert_eq!(held.tensor_bytes, 338_432);
    assert_eq!(held.scale_bytes, 4_096);
    assert_eq!(held.total(), Some(343_552));
    let held = loaded_weights(&lfm2_moe_config(), &lfm2_moe_checkpoint(), DType::BF16, 2).unwrap();
    assert_eq!(held.total(), Some(179_712));
}

#[test]
fn lfm2_moe_router_bias_is_rounded_as_float32() {
    // 200 experts: the bias float32 800 B -> 1,024 a layer (bfloat16 would
    // be 400 -> 512); w13 200 x 64 x 64 x 2 = 1,638,400, w2 200 x 64 x 32 x
    // 2 = 819,200, the gate 200 x 64 x 2 = 25,600. Each MoE layer holds
    // 512 + 1,605,632 + 802,816 + 25,088 = 2,434,048 more than with 4
    // experts; three of them over 338,432: 7,640,576.
    let mut config = lfm2_moe_config();
    config["num_experts"] = json!(200);
    let tensors: Vec<StoredTensor> = lfm2_moe_checkpoint()
        .into_iter()
        .map(|t| {
            let mut shape = t.shape.clone();
            if t.name.contains(".feed_forward.") && shape.first() == Some(&4) {
                shape[0] = 200;
            }
            bf16(&t.name, &shape)
        })
        .collect();
    let held = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(held.tensor_bytes, 7_640_576);
}

/// scripts/vllm/fit-configs/test-mamba2-small.json: one Mamba2 layer,
/// hidden 64, inner 128 in 4 heads of 32, one group of state 16, kernel 4,
/// 128 words, tied.
fn mamba2_config(n_groups: u64) -> Value {
    json!({
        "architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2",
        "hidden_size": 64, "expand": 2, "num_heads": 4, "head_dim": 32,
        "n_groups": n_groups, "state_size": 16, "conv_kernel": 4,
        "num_hidden_layers": 1, "vocab_size": 128, "tie_word_embeddings": true,
        "torch_dtype": "bfloat16"
    })
}

fn mamba2_checkpoint(n_groups: u64) -> Vec<StoredTensor> {
    let conv = 128 + 2 * n_groups * 16;
    let m = |part: &str| format!("backbone.layers.0.mixer.{part}");
    vec![
        bf16("backbone.embeddings.weight", &[128, 64]),
        bf16("backbone.layers.0.norm.weight", &[64]),
        bf16(&m("in_proj.weight"), &[128 + conv + 4, 64]),
        bf16(&m("conv1d.weight"), &[conv, 1, 4]),
        bf16(&m("conv1d.bias"), &[conv]),
        bf16(&m("dt_bias"), &[4]),
        bf16(&m("A_log"), &[4]),
        bf16(&m("D"), &[4]),
        bf16(&m("norm.weight"), &[128]),
        bf16(&m("out_proj.weight"), &[64, 128]),
        bf16("backbone.norm_f.weight", &[64]),
    ]
}

// vLLM's MambaMixer2 at TP 2 with one group: the group is replicated to
// one a rank (`extra_groups_for_head_shards`: 2 groups), so the
// convolution is 128 + 2 x 2 x 16 = 192 rows and in_proj 192 + 128 + 4 =
// 324, each halved. In 512-byte blocks: the embedding 64 x 64 x 2 = 8,192;
// the layer's norm 512; in_proj 162 x 64 x 2 = 20,736 -> 20,992; conv1d 96 x
// 4 x 2 = 768 -> 1,024 and its bias 512; dt_bias, A (float32) and D 512
// each; the gated norm 64 x 2 -> 512; out_proj 64 x 64 x 2 = 8,192; norm_f
// 512: 41,984, as vLLM's class at TP 2 (compare_weights_hf.py).
#[test]
fn mamba2_replicates_a_single_group_over_the_ranks() {
    let held = loaded_weights(&mamba2_config(1), &mamba2_checkpoint(1), DType::BF16, 2).unwrap();
    assert_eq!(held.total(), Some(41_984));
    // Two groups at TP 2 split: conv 128 + 64 = 192 rows as before, the
    // stored tensors now that wide too: the same bytes a rank.
    let held = loaded_weights(&mamba2_config(2), &mamba2_checkpoint(2), DType::BF16, 2).unwrap();
    assert_eq!(held.total(), Some(41_984));
    // Three groups over 2 ranks: vLLM asserts.
    let e = loaded_weights(&mamba2_config(3), &mamba2_checkpoint(3), DType::BF16, 2).unwrap_err();
    assert!(
        e.contains("only for n_groups 3 divisible by tp 2, or a single group"),
        "{e}"
    );
    // 4 heads over 8 ranks: refused.
    let e = loaded_weights(&mamba2_config(1), &mamba2_checkpoint(1), DType::BF16, 8).unwrap_err();
    assert!(e.contains("4 is not divisible by 8"), "{e}");
    // An in_proj the config does not give.
    let mut wrong = mamba2_checkpoint(1);
    wrong[2] = bf16("backbone.layers.0.mixer.in_proj.weight", &[300, 64]);
    let e = loaded_weights(&mamba2_config(1), &wrong, DType::BF16, 2).unwrap_err();
    assert!(
        e.contains("has 300 rows; the config's Mamba2 mixer gives 292"),
        "{e}"
    );
}

#[test]
fn mamba2_biases_and_parameters_kv_does_not_know() {
    // `use_bias`: in_proj's bias split with its rows, 162 x 2 = 324 -> 512;
    // out_proj's whole on every rank, 64 x 2 = 128 -> 512: 41,984 + 1,024,
    // as vLLM's class at TP 2 (compare_weights_hf.py: 43,008).
    let mut biased = mamba2_checkpoint(1);
    biased.push(bf16("backbone.layers.0.mixer.in_proj.bias", &[292]));
    biased.push(bf16("backbone.layers.0.mixer.out_proj.bias", &[64]));
    let held = loaded_weights(&mamba2_config(1), &biased, DType::BF16, 2).unwrap();
    assert_eq!(held.total(), Some(43_008));
    // A mixer parameter of a name kv does not know is not guessed above
    // TP 1.
    let mut stray = mamba2_checkpoint(1);
    stray.push(bf16("backbone.layers.0.mixer.gate_bias", &[4]));
    let e = loaded_weights(&mamba2_config(1), &stray, DType::BF16, 2).unwrap_err();
    assert!(e.contains("`backbone.layers.0.mixer.gate_bias`"), "{e}");
}
