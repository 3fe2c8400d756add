//! Kimi K3 and BailingMoeV3 on vLLM 0.33: Kimi Delta Attention (KDA) state
//! in some layers (`linear_attn_config.kda_layers`; all but each
//! `layer_group_size`-th), an MLA latent in the others.
//! Figures worked out by hand from vLLM's rules (`kda_state_shape`,
//! `kda_state_dtype`, the hybrid block of platforms/interface.py with its
//! 128-token floor for MLA, FlashKDA's checkpoint page), each in a comment;
//! the published Kimi K3 and Ling-3.0 layouts were run through vLLM's own
//! objects (scripts/vllm/registry.py, compare.py: 919 of 919 quantities each).

mod common;

use common::row;

use kv_core::Storage;
use kv_engines::estimate::{estimate, EstimateSettings};
use serde_json::{json, Value};

/// A Kimi-K3-like text model no script ships: 4 layers, the first three
/// KDA (4 heads of 128, conv kernel 4, a bounded gate), the last MLA.
fn small_k3() -> Value {
    json!({
        "architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3",
        "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "kimi_linear", "num_hidden_layers": 4, "hidden_size": 1024,
            "num_attention_heads": 8, "num_key_value_heads": 8, "kv_lora_rank": 512,
            "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
            "mla_use_nope": true, "max_position_embeddings": 8192,
            "linear_attn_config": {
                "kda_layers": [1, 2, 3], "full_attn_layers": [4], "num_heads": 4,
                "head_dim": 128, "short_conv_kernel_size": 4, "gate_lower_bound": -5.0,
                "use_full_rank_gate": true,
            },
        },
    })
}

#[test]
fn kda_state_pads_to_a_latent_page_on_a_128_token_floor() {
    let e = estimate(&small_k3(), &EstimateSettings::new()).unwrap();
    // A KDA layer: conv 3 x (3 x 4 x 128) = 4,608 bf16 = 9,216 B; recurrent
    // 4 x 128 x 128 float32 = 262,144 B: 271,360 B. The latent is 576 x 2 =
    // 1,152 B a token; the block is 128 x cdiv(271,360, 128 x 1,152) = 256,
    // a page 256 x 1,152 = 294,912 B, which the state is padded to.
    assert_eq!(e.block_size, 256);
    // FlashKDA exports a prefill checkpoint: 2 + 1 pages a KDA layer.
    assert_eq!(row(&e, "kda"), 3 * 3 * 294_912);
    // The MLA layer: 8,192 positions x 1,152 B, 32 whole blocks.
    assert_eq!(row(&e, "mla_latent"), 8192 * 1152);
    assert!(
        e.detected.contains("KDA) in the 3 layers"),
        "{}",
        e.detected
    );
}

#[test]
fn without_flashkda_there_is_no_checkpoint_page() {
    // No `gate_lower_bound`: FlashKDA does not run, 2 pages a layer.
    let mut config = small_k3();
    config["text_config"]["linear_attn_config"]
        .as_object_mut()
        .unwrap()
        .remove("gate_lower_bound");
    let e = estimate(&config, &EstimateSettings::new()).unwrap();
    assert_eq!(row(&e, "kda"), 3 * 2 * 294_912);
}

#[test]
fn tensor_parallelism_splits_the_state_and_fp8_halves_the_latent() {
    // TP 2: conv 1,536 / 2 channels x 3 x 2 B = 4,608 B, recurrent 2 x 128 x
    // 128 x 4 B = 131,072 B: 135,680 B a rank; 128 x cdiv(135,680, 147,456)
    // = 128 tokens.
    let e = estimate(&small_k3(), &EstimateSettings::new().tensor_parallel(2)).unwrap();
    assert_eq!(e.block_size, 128);
    // fp8: 576 B a token, 128 x cdiv(271,360, 73,728) = 512 tokens.
    let fp8 = EstimateSettings::new().kv_format(Storage::from_name("fp8").unwrap());
    let e = estimate(&small_k3(), &fp8).unwrap();
    assert_eq!(e.block_size, 512);
    assert_eq!(row(&e, "mla_latent"), 8192 * 576);
}

#[test]
fn every_layer_kda_holds_no_latent_and_no_prefix_caching() {
    let mut config = small_k3();
    config["text_config"]["linear_attn_config"]["kda_layers"] = json!([1, 2, 3, 4]);
    let e = estimate(&config, &EstimateSettings::new()).unwrap();
    let names: Vec<&str> = e.specs.iter().map(|s| s.name.as_ref()).collect();
    assert_eq!(names, ["kda"]);
    // No attention: mode none, one unpadded page of 271,360 B a layer.
    assert_eq!(row(&e, "kda"), 4 * 271_360);
    // No KDA layer listed: every layer MLA, no state declared.
    config["text_config"]["linear_attn_config"]["kda_layers"] = json!([]);
    let e = estimate(&config, &EstimateSettings::new()).unwrap();
    let names: Vec<&str> = e.specs.iter().map(|s| s.name.as_ref()).collect();
    assert_eq!(names, ["mla_latent"]);
    assert_eq!(row(&e, "mla_latent"), 4 * 8192 * 1152);
}

#[test]
fn kimi_linears_own_kda_is_refused_by_name() {
    let mut config = small_k3();
    config["architectures"] = json!(["KimiLinearForCausalLM"]);
    config["text_config"]["linear_attn_config"]["use_full_rank_gate"] = json!(false);
    let text = estimate(&config, &EstimateSettings::new())
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("`text_config.linear_attn_config.use_full_rank_gate` is not true"),
        "{text}"
    );
}

/// A BailingMoeV3-like text model no script ships: 7 layers in groups of 3.
fn small_bailing() -> Value {
    json!({
        "architectures": ["BailingMoeV3VLForConditionalGeneration"],
        "model_type": "bailing_moe_v3_vl", "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "bailing_hybrid", "num_hidden_layers": 7, "layer_group_size": 3,
            "hidden_size": 1024, "num_attention_heads": 4, "num_key_value_heads": 4,
            "head_dim": 128, "short_conv_kernel_size": 4, "kv_lora_rank": 512,
            "qk_rope_head_dim": 64, "max_position_embeddings": 8192, "no_kda_lora": true,
        },
    })
}

#[test]
fn bailing_keeps_kda_in_all_but_each_groups_last_layer_and_the_tail() {
    let e = estimate(&small_bailing(), &EstimateSettings::new()).unwrap();
    // MLA at 2 and 5 (each group's last) and 6 (past the last whole group);
    // KDA at 0, 1, 3, 4. The state is the small Kimi's (4 heads of 128,
    // kernel 4): 271,360 B, on blocks of 256 tokens, padded to 294,912 B.
    // BailingMoeV3's KDA never runs FlashKDA: 2 pages a layer.
    assert_eq!(e.block_size, 256);
    assert_eq!(row(&e, "kda"), 4 * 2 * 294_912);
    assert_eq!(row(&e, "mla_latent"), 3 * 8192 * 1152);
    // Without `no_kda_lora` vLLM's class raises.
    let mut lora = small_bailing();
    lora["text_config"]["no_kda_lora"] = json!(false);
    let text = estimate(&lora, &EstimateSettings::new())
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("BailingMoeV3 KDA currently expects no_kda_lora=True"),
        "{text}"
    );
}

#[test]
fn sglangs_pools_for_kda_are_refused_until_checked() {
    use kv_engines::estimate::sglang::{sglang_pools, SglangSettings};
    let config = small_bailing();
    let e = estimate(&config, &EstimateSettings::new().for_another_engine()).unwrap();
    let text = sglang_pools(&config, &e, &SglangSettings::default(), 40 << 30)
        .unwrap_err()
        .to_string();
    assert!(text.contains("Kimi Delta Attention (KDA) state"), "{text}");
}
