//! What one SGLang 0.5.23 rank holds under DP attention (`--dp-size D
//! --enable-dp-attention`) for the classes whose models split their
//! attention over the attention group of `tp / D` ranks
//! (`get_attention_tp_size`) and the rest over all of `tp`: GPT-OSS,
//! DeepSeek-V2/V3, Qwen3-Next, GLM-4.5, PhiMoE; and what SGLang refuses
//! there. Every figure is worked out by hand below from SGLang's classes
//! (gpt_oss.py, deepseek_v2.py, qwen3_next.py, phimoe.py,
//! layers/dp_attention.py). SGLang's own classes built on the meta device
//! at rank 0 gave the same totals on the same configs
//! (scripts/sglang/compare_weights_hf.py --dp 2, 4 and 8 on
//! scripts/vllm/fit-configs: GPT-OSS 95,136 B at TP 2 DP 2; DeepSeek-V3
//! 1,360,144 B and 1,048,576 B of copies at TP 2 DP 2, 759,568 B and
//! 262,144 B at TP 4 DP 2; Qwen3-Next 110,424 B at TP 4 DP 2).

mod common;

use common::*;
use kv_engines::fit::sglang::loaded_weights_with_dp_attention as held_under_dp;
use serde_json::{json, Value};

#[test]
fn gpt_oss_keeps_its_attention_whole_when_dp_equals_tp() {
    // TP 2 DP 2: the attention group is one rank. A layer: qkv 16,384 and
    // its bias 256, o 8,192 and its bias 128, the 4 sinks 8 (all whole);
    // the router whole, 520; w13 split over tp, 8,192 and its float32 bias
    // 256; w2 4,096 and its float32 bias whole, 1,024; two norms 256:
    // 39,312. The vocabulary split over tp: 8,192 twice; the norm 128.
    let held = held_under_dp(&gpt_oss_config(), &gpt_oss_checkpoint(), 2, 2).unwrap();
    assert_eq!(held.tensor_bytes, 2 * 39_312 + 2 * 8_192 + 128);
    assert_eq!(held.tensor_bytes, 95_136);
}

#[test]
fn deepseek_copies_w_kc_and_w_vc_of_the_heads_its_attention_group_holds() {
    let (config, tensors) = (deepseek_v3_config(), deepseek_v3_checkpoint());
    // TP 2 DP 2: each layer's attention whole, 660,800 (as at TP 1); the
    // dense MLP 6,144 and the MoE 15,888 split over tp (the router whole,
    // the experts and the shared expert halved), the vocabulary halved.
    let held = held_under_dp(&config, &tensors, 2, 2).unwrap();
    assert_eq!(
        held.tensor_bytes,
        2 * 660_800 + 6_144 + 15_888 + 2 * 8_192 + 128
    );
    assert_eq!(held.tensor_bytes, 1_360_144);
    // Both heads on the rank: w_kc and w_vc are both copies, the whole
    // kv_b again a layer (at TP 2 without DP, one head a rank, w_vc is a
    // view and only w_kc a copy: 131,072 a layer).
    assert_eq!(held.other_tensor_bytes, 2 * 524_288);
    // TP 4 DP 2: the attention over 2 ranks, a head each: q_a, kv_a and
    // the norms whole 79,168, q_b 12,288, kv_b 262,144, o 16,384; the MLP
    // 3,072, the MoE 528 + 6,144 + 1,536 and the vocabulary 4,096 twice.
    let held = held_under_dp(&config, &tensors, 4, 2).unwrap();
    assert_eq!(
        held.tensor_bytes,
        2 * (79_168 + 12_288 + 262_144 + 16_384) + 3_072 + 8_208 + 2 * 4_096 + 128
    );
    assert_eq!(held.tensor_bytes, 759_568);
    assert_eq!(held.other_tensor_bytes, 2 * 131_072);
    // DeepSeek-V3.2's model is the same class under DP attention.
    let mut sparse = config.clone();
    sparse["architectures"] = json!(["DeepseekV32ForCausalLM"]);
    let held = held_under_dp(&sparse, &tensors, 2, 2).unwrap();
    assert_eq!(
        (held.tensor_bytes, held.other_tensor_bytes),
        (1_360_144, 2 * 524_288)
    );
    // More ranks than its 4 experts: deepseek_v2.py's MoE refuses, with
    // or without DP attention.
    for dp in [1, 8] {
        let words = held_under_dp(&config, &tensors, 8, dp).unwrap_err();
        assert_eq!(
            words,
            "SGLang refuses: ValueError: Tensor parallel size 8 is greater than the number of \
             experts 4."
        );
    }
}

fn qwen3_next_config() -> Value {
    serde_json::from_str(include_str!(
        "../../scripts/vllm/fit-configs/test-qwen3-next-small.json"
    ))
    .unwrap()
}

#[test]
fn qwen3_next_splits_its_gated_deltanet_over_the_attention_group() {
    // Layer 0 is Gated DeltaNet: 2 key heads and 4 value heads of 16.
    // in_proj_qkvz (2 x 32 + 2 x 64 = 192 rows) 24,576 B, in_proj_ba (8
    // rows) 1,024, the convolution (128 channels of 4) 1,024, A_log
    // float32 16, dt_bias 8, out_proj 8,192, its gated norm (16) whole, 32.
    let tensors = [
        bf16("model.layers.0.linear_attn.in_proj_qkvz.weight", &[192, 64]),
        bf16("model.layers.0.linear_attn.in_proj_ba.weight", &[8, 64]),
        bf16("model.layers.0.linear_attn.conv1d.weight", &[128, 1, 4]),
        bf16("model.layers.0.linear_attn.A_log", &[4]),
        bf16("model.layers.0.linear_attn.dt_bias", &[4]),
        bf16("model.layers.0.linear_attn.out_proj.weight", &[64, 64]),
        bf16("model.layers.0.linear_attn.norm.weight", &[16]),
    ];
    let bytes = |tp, dp| {
        held_under_dp(&qwen3_next_config(), &tensors, tp, dp).map(|held| held.tensor_bytes)
    };
    // TP 4: everything but the norm split four ways.
    assert_eq!(bytes(4, 1), Ok(6_144 + 256 + 256 + 4 + 2 + 2_048 + 32));
    // DP 2: over the attention group of 2.
    assert_eq!(bytes(4, 2), Ok(12_288 + 512 + 512 + 8 + 4 + 4_096 + 32));
    // DP 4: the group is one rank; the layer whole.
    assert_eq!(
        bytes(4, 4),
        Ok(24_576 + 1_024 + 1_024 + 16 + 8 + 8_192 + 32)
    );
    // Its MoE (4 experts) refuses 8 ranks, as qwen2_moe.py's block does.
    assert!(bytes(8, 8)
        .unwrap_err()
        .contains("Tensor parallel size 8 is greater than the number of experts 4."));
}

#[test]
fn qwen3_next_needs_the_interval_sglangs_config_places_its_layers_by() {
    // SGLang's own Qwen3NextConfig reads `full_attention_interval`, never
    // `layer_types` (transformers 5's default config writes only those).
    let mut config = qwen3_next_config();
    config
        .as_object_mut()
        .unwrap()
        .remove("full_attention_interval");
    config["layer_types"] = json!(["linear_attention", "full_attention"].repeat(2));
    let words = held_under_dp(&config, &[], 1, 1).unwrap_err();
    assert!(
        words.contains(
            "AttributeError: 'Qwen3NextConfig' object has no attribute 'full_attention_interval'"
        ),
        "{words}"
    );
}

#[test]
fn phimoe_takes_dp_attention_only_with_one_rank_of_attention() {
    let config: Value = serde_json::from_str(include_str!(
        "../../scripts/vllm/fit-configs/phi-3.5-moe-instruct.json"
    ))
    .unwrap();
    // phimoe.py's attention all-reduces over all of tp; SGLang refuses an
    // attention group between one rank and tp
    // (`reject_attn_tp_shard_with_tp_reduce`).
    let words = held_under_dp(&config, &[], 4, 2).unwrap_err();
    assert_eq!(
        words,
        "SGLang refuses: ValueError: PhiMoEAttention shards over the attention TP group (2 \
         ranks) but all-reduces over the full TP group (4 ranks), so it does not support \
         --attn-dp-size 2 yet. Use --attn-dp-size equal to --tp-size, or drop --attn-dp-size 2."
    );
    // One rank of attention (dp = tp) and no DP at all are served.
    assert!(held_under_dp(&config, &[], 4, 4).is_ok());
    assert!(held_under_dp(&config, &[], 4, 1).is_ok());
}

#[test]
fn laguna_gpt_oss_and_glm_4_5_split_attention_over_the_group_and_llama_over_all_of_tp() {
    // laguna.py, gpt_oss.py and glm4_moe.py split their attention over the
    // attention group.
    let laguna: Value = serde_json::from_str(include_str!(
        "../../scripts/vllm/fit-configs/test-laguna-small.json"
    ))
    .unwrap();
    assert!(held_under_dp(&laguna, &[], 2, 2).is_ok());
    // Its 4 experts take 4 ranks, and refuse 8, in laguna.py's words.
    assert!(held_under_dp(&laguna, &[], 4, 1).is_ok());
    assert_eq!(
        held_under_dp(&laguna, &[], 8, 8).unwrap_err(),
        "SGLang refuses: ValueError: TP size 8 > num_experts 4."
    );
    assert!(held_under_dp(&gpt_oss_config(), &[], 2, 2).is_ok());
    let glm45: Value = serde_json::from_str(include_str!(
        "../../scripts/vllm/fit-configs/test-glm-4.5-small.json"
    ))
    .unwrap();
    assert!(held_under_dp(&glm45, &[], 2, 2).is_ok());
    // exaone4.py's q, k, v and o take `parallel_group="attn_tp"`: at TP 2
    // DP 2 a rank holds each layer's attention whole, 8,192 + 4,096 +
    // 4,096 + 8,192 B (the test config's 4 layers; no other tensor here).
    let exaone: Value = serde_json::from_str(include_str!(
        "../../scripts/vllm/fit-configs/test-exaone4-small.json"
    ))
    .unwrap();
    let attention: Vec<_> = (0..4)
        .flat_map(|layer| {
            let at = |part: &str| format!("model.layers.{layer}.self_attn.{part}.weight");
            [
                bf16(&at("q_proj"), &[64, 64]),
                bf16(&at("k_proj"), &[32, 64]),
                bf16(&at("v_proj"), &[32, 64]),
                bf16(&at("o_proj"), &[64, 64]),
            ]
        })
        .collect();
    let bytes = |dp| held_under_dp(&exaone, &attention, 2, dp).map(|h| h.tensor_bytes);
    assert_eq!(bytes(2), Ok(4 * 24_576));
    assert_eq!(bytes(1), Ok(4 * 12_288));
    // Its attention asserts all of tp divides the 4 query heads all the same.
    let words = held_under_dp(&exaone, &attention, 8, 8).unwrap_err();
    assert!(
        words.contains("all 8 TP ranks divide its 4 query heads"),
        "{words}"
    );
    // llama.py's attention stays split over all of tp: 4 heads refuse 8
    // ranks whatever --dp (SGLang's pools follow tp / dp all the same).
    let mut llama = laguna;
    llama["architectures"] = json!(["LlamaForCausalLM"]);
    assert!(held_under_dp(&llama, &[], 2, 2).is_ok());
    let words = held_under_dp(&llama, &[], 8, 8).unwrap_err();
    assert!(
        words.contains("attention asserts, whatever --dp, that all 8 TP ranks divide"),
        "{words}"
    );
}
