//! Inkling on vLLM 0.33: local (sliding) layers from `local_layer_ids`,
//! global ones elsewhere, and in every layer a short-convolution state
//! paged as a sliding window whose window and block are the kernel
//! (`models/inkling/nvidia/sconv_swa_attn.py`). Figures worked out by hand
//! from vLLM's rules (`SlidingWindowSpec.max_memory_usage_bytes`,
//! `unify_kv_cache_spec_page_size`, `_get_kv_cache_groups_uniform_page_size`),
//! each in a comment; the published layout and the registry's defaults were
//! run through vLLM's own objects (scripts/vllm/compare.py).

mod common;

use common::row;

use kv_core::{Parallel, Storage};
use kv_engines::estimate::sglang::{sglang_pools, SglangSettings};
use kv_engines::estimate::{estimate, vllm_startup, Estimate, EstimateSettings, VllmPool};
use serde_json::{json, Value};

/// An Inkling no script ships: 8 layers, 6 local (4 KV heads of 64, window
/// 128) and 2 global (2 KV heads of 64), hidden 1,024, kernel 4.
fn small_inkling() -> Value {
    json!({
        "architectures": ["InklingForConditionalGeneration"], "model_type": "inkling_mm_model",
        "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "inkling_text", "num_hidden_layers": 8, "hidden_size": 1024,
            "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
            "swa_num_attention_heads": 8, "swa_num_key_value_heads": 4, "swa_head_dim": 64,
            "sliding_window_size": 128, "conv_kernel_size": 4, "local_layer_ids": [0, 1, 2, 4, 5, 6],
            "max_position_embeddings": 8192, "n_routed_experts": 8, "num_experts_per_tok": 2,
            "n_shared_experts": 1, "shared_expert_sink": true, "moe_intermediate_size": 256,
            "intermediate_size": 2048,
            "layer_types": ["hybrid_sliding", "hybrid_sliding", "hybrid_sliding", "hybrid",
                            "hybrid_sliding", "hybrid_sliding", "hybrid_sliding", "hybrid"],
        },
    })
}

fn pool(e: &Estimate, tp: u64) -> VllmPool {
    e.ranks(Parallel::new(tp, 1).unwrap(), 256).unwrap()[0]
        .pool
        .clone()
}

/// Each kind's (name, tokens a block, blocks a request takes per group).
fn blocks(pool: &VllmPool) -> Vec<(&str, u64, u64)> {
    pool.kinds
        .iter()
        .map(|k| (k.name.as_str(), k.block_size, k.blocks_per_layer))
        .collect()
}

#[test]
fn each_layer_keeps_a_conv_state_beside_its_attention() {
    let e = estimate(&small_inkling(), &EstimateSettings::new()).unwrap();
    // Conv heads: local 2 x 64 + 2 x (1,024 // 4) = 640, up to 1,024;
    // global 2 x 64 + 2 x (1,024 // 2) = 1,152, up to 2,048. A conv window
    // of 4 in blocks of 4 with 2,048 x 2 tokens in flight: min(3 + 4,096,
    // 8,192) = 4,099 tokens, 1,025 blocks + 1 = 1,026 blocks, 4,104 tokens.
    // Local: 4,104 x 4 heads x 1,024 x 2 B x 6 layers.
    assert_eq!(row(&e, "local_conv_state"), 4104 * 4 * 1024 * 2 * 6);
    // Global: 4,104 x 2 heads x 2,048 x 2 B x 2 layers.
    assert_eq!(row(&e, "global_conv_state"), 4104 * 2 * 2048 * 2 * 2);
    // Sliding attention, window 128 in blocks of 16: min(127 + 4,096,
    // 8,192) = 4,223, 4,224 + 16 = 4,240 tokens x 4 heads x 64 x 2 (K, V)
    // x 2 B x 6 layers.
    assert_eq!(row(&e, "sliding_attention"), 4240 * 4 * 64 * 4 * 6);
    // Full attention: 8,192 x 2 x 64 x 4 x 2 layers.
    assert_eq!(row(&e, "full_attention"), 8192 * 2 * 64 * 4 * 2);
    assert_eq!(e.block_size, 16);
}

#[test]
fn the_pool_scales_attention_blocks_to_the_conv_page() {
    let e = estimate(&small_inkling(), &EstimateSettings::new()).unwrap();
    let pool = pool(&e, 1);
    // Pages: both conv states 4 x 4 x 1,024 x 2 = 4 x 2 x 2,048 x 2 =
    // 32,768 B; sliding 16 x 4 x 64 x 4 = 16,384 (block x 2 = 32); full 16
    // x 2 x 64 x 4 = 8,192 (block x 4 = 64). At block 32 the sliding window
    // takes cdiv(4,223, 32) + 1 = 133 blocks; full 8,192 / 64 = 128.
    assert_eq!(
        blocks(&pool),
        [
            ("local_conv_state", 4, 1026),
            ("sliding_attention", 32, 133),
            ("global_conv_state", 4, 1026),
            ("full_attention", 64, 128),
        ]
    );
    // The conv states are not one spec (4 heads of 1,024, 2 of 2,048), so
    // four kinds of 6, 6, 2, 2 layers: groups of 2 (6 is not under 1.5 x
    // 2), 3 + 3 + 1 + 1 groups. A block spans 2 layers x 32,768 B.
    assert_eq!(pool.group_size, 2);
    assert_eq!(pool.bytes_per_block, 65_536);
    // 3 x 1,026 + 3 x 133 + 1,026 + 128 = 4,631 blocks a request.
    assert_eq!(pool.blocks_per_request, 4631);
    assert_eq!(pool.per_row_bytes, 4631 * 65_536);
}

#[test]
fn vllms_start_up_line_counts_the_conv_blocks() {
    // 1 GiB: 16,384 blocks of 65,536 B. 16,384 / 4,631 x 8,192 =
    // 28,982.4 tokens; 16,384 / 4,631 = 3.538.
    let startup = vllm_startup(
        &small_inkling(),
        &EstimateSettings::new(),
        Parallel::new(1, 1).unwrap(),
        1 << 30,
    )
    .unwrap();
    assert_eq!(
        startup.message,
        "GPU KV cache size: 28,982 tokens, Maximum concurrency for 8,192 tokens per request: \
         3.54x"
    );
}

#[test]
fn fp8_halves_the_attention_but_not_the_conv_state() {
    let settings = EstimateSettings::new().kv_format(Storage::from_name("fp8").unwrap());
    let e = estimate(&small_inkling(), &settings).unwrap();
    // The conv state stays bf16: 4,104 x 2 x 2,048 x 2 x 2.
    assert_eq!(row(&e, "global_conv_state"), 4104 * 2 * 2048 * 2 * 2);
    assert_eq!(row(&e, "full_attention"), 8192 * 2 * 64 * 2 * 2);
    let pool = pool(&e, 1);
    // fp8 pages: sliding 16 x 4 x 64 x 2 = 8,192 (block x 4 = 64: cdiv(4,223,
    // 64) + 1 = 67 blocks); full 16 x 2 x 64 x 2 = 4,096 (block x 8 = 128:
    // 64 blocks). 3 x 1,026 + 3 x 67 + 1,026 + 64 = 4,369.
    assert_eq!(
        blocks(&pool),
        [
            ("local_conv_state", 4, 1026),
            ("sliding_attention", 64, 67),
            ("global_conv_state", 4, 1026),
            ("full_attention", 128, 64),
        ]
    );
    assert_eq!(pool.blocks_per_request, 4369);
}

#[test]
fn tensor_parallelism_splits_the_conv_heads_and_keeps_their_width() {
    let e = estimate(
        &small_inkling(),
        &EstimateSettings::new().tensor_parallel(2),
    )
    .unwrap();
    let pool = pool(&e, 2);
    // TP 2: conv pages 4 x 2 x 1,024 x 2 = 4 x 1 x 2,048 x 2 = 16,384 B;
    // sliding 16 x 2 x 64 x 4 = 8,192 (x 2), full 16 x 1 x 64 x 4 = 4,096
    // (x 4): the same blocks, half the bytes.
    assert_eq!(pool.bytes_per_block, 2 * 16_384);
    assert_eq!(pool.blocks_per_request, 4631);
}

#[test]
fn without_local_layer_ids_every_layer_is_global_with_one_conv_spec() {
    // vLLM's InklingModelConfig reads no `layer_types`: null ids, no local
    // layer. Every conv state is then one spec, one declaration of 8 layers.
    let mut config = small_inkling();
    config["text_config"]["local_layer_ids"] = Value::Null;
    let e = estimate(&config, &EstimateSettings::new()).unwrap();
    let names: Vec<&str> = e.specs.iter().map(|s| &*s.name).collect();
    assert_eq!(names, ["conv_state", "full_attention"]);
    assert_eq!(row(&e, "conv_state"), 4104 * 2 * 2048 * 2 * 8);
    let pool = pool(&e, 1);
    // Two kinds of 8 layers: one group each, a block of 8 x 32,768 B;
    // 1,026 + 128 blocks a request.
    assert_eq!(pool.bytes_per_block, 8 * 32_768);
    assert_eq!(pool.blocks_per_request, 1026 + 128);
}

#[test]
fn equal_heads_make_one_conv_spec_over_local_and_global_layers() {
    // swa heads as the global ones: every layer's conv state is the same
    // spec, grouped with all 8 layers: kinds of 8, 6 and 2 layers.
    let mut config = small_inkling();
    config["text_config"]["swa_num_key_value_heads"] = json!(2);
    let e = estimate(&config, &EstimateSettings::new()).unwrap();
    let names: Vec<&str> = e.specs.iter().map(|s| &*s.name).collect();
    assert_eq!(names, ["conv_state", "sliding_attention", "full_attention"]);
    let pool = pool(&e, 1);
    // Groups of 2: 4 + 3 + 1. Sliding page 16 x 2 x 64 x 4 = 8,192 (block
    // 64: cdiv(4,223, 64) + 1 = 67). 4 x 1,026 + 3 x 67 + 128 = 4,433.
    assert_eq!(pool.group_size, 2);
    assert_eq!(pool.blocks_per_request, 4433);
}

#[test]
fn what_vllm_asserts_while_building_is_refused_in_its_words() {
    let refused = |config: &Value, settings: EstimateSettings| {
        estimate(config, &settings).unwrap_err().to_string()
    };
    // TP 4: the local layers' 4 KV heads pass, the global layers' 2 do not.
    let text = refused(&small_inkling(), EstimateSettings::new().tensor_parallel(4));
    assert!(
        text.contains("sconv SWA cache supports tp_size <= num_kv_heads (2), got 4"),
        "{text}"
    );
    let mut half = small_inkling();
    half["torch_dtype"] = json!("float16");
    let text = refused(&half, EstimateSettings::new());
    assert!(
        text.contains("sconv SWA cache supports bfloat16 only, got torch.float16"),
        "{text}"
    );
    let mut odd = small_inkling();
    odd["text_config"]["swa_num_attention_heads"] = json!(6);
    let text = refused(&odd, EstimateSettings::new().tensor_parallel(4));
    assert!(
        text.contains("6 query heads are not divisible by tensor parallel 4"),
        "{text}"
    );
    // InklingMoE takes only the served checkpoint's kind: shared sink experts.
    let mut sinkless = small_inkling();
    sinkless["text_config"]["shared_expert_sink"] = json!(false);
    let text = refused(&sinkless, EstimateSettings::new());
    assert!(
        text.contains(
            "moe.py:420: assert config.n_shared_experts > 0 and config.shared_expert_sink"
        ),
        "{text}"
    );
    // Every layer dense: no MoE layer asserts.
    sinkless["text_config"]["dense_mlp_idx"] = json!(8);
    assert!(estimate(&sinkless, &EstimateSettings::new()).is_ok());
    let text = refused(
        &small_inkling(),
        EstimateSettings::new().speculative_tokens(1),
    );
    assert!(text.contains("MTP draft layers"), "{text}");
    let mut bad = small_inkling();
    bad["text_config"]["local_layer_ids"] = json!([0, 8]);
    let text = refused(&bad, EstimateSettings::new());
    assert!(
        text.contains("`text_config.local_layer_ids[1]` is 8"),
        "{text}"
    );
}

#[test]
fn sglang_refuses_the_conv_state_and_a_model_with_no_local_layer() {
    let settings = EstimateSettings::new().for_another_engine();
    let e = estimate(&small_inkling(), &settings).unwrap();
    let text = sglang_pools(&small_inkling(), &e, &SglangSettings::default(), 1 << 34)
        .unwrap_err()
        .to_string();
    assert!(text.contains("Inkling's short-convolution state"), "{text}");
    // SGLang starts; it is kv that has not profiled it.
    assert!(!text.contains("would not start"), "{text}");
    let mut global = small_inkling();
    global["text_config"]["local_layer_ids"] = json!([]);
    let e = estimate(&global, &settings).unwrap();
    let text = sglang_pools(&global, &e, &SglangSettings::default(), 1 << 34)
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("Hybrid SWA model must have at least one SWA layer"),
        "{text}"
    );
}

#[test]
fn what_kv_has_not_checked_is_refused_and_the_edges_are_answered() {
    let refused = |config: &Value, settings: EstimateSettings| {
        estimate(config, &settings).unwrap_err().to_string()
    };
    // A block vLLM builds (Inkling pins its backends) but kv has not checked.
    let text = refused(&small_inkling(), EstimateSettings::new().block_size(8));
    assert!(text.contains("a block of 8 on Inkling"), "{text}");
    // A multiple of 16 given is answered: the attention pages fill the conv
    // page at 32 (local: 32 x 4 x 64 x 4 = 32,768 B) and 32 x 2 = 64.
    let e = estimate(&small_inkling(), &EstimateSettings::new().block_size(32)).unwrap();
    assert_eq!(e.block_size, 32);
    assert_eq!(pool(&e, 1).bytes_per_block, 65_536);
    let text = refused(
        &small_inkling(),
        EstimateSettings::new()
            .tensor_parallel(8)
            .decode_context_parallel(2),
    );
    assert!(
        text.contains("decode context parallelism 2 on Inkling"),
        "{text}"
    );
    // A 512-wide head is refused; 256 is the widest answered.
    let mut wide = small_inkling();
    wide["text_config"]["head_dim"] = json!(512);
    let text = refused(&wide, EstimateSettings::new());
    assert!(text.contains("a head of 512"), "{text}");
    wide["text_config"]["head_dim"] = json!(256);
    assert!(estimate(&wide, &EstimateSettings::new()).is_ok());
}

#[test]
fn each_of_inkling_moes_assertions_is_refused() {
    let refused = |key: &str, value: Value| {
        let mut config = small_inkling();
        config["text_config"][key] = value;
        estimate(&config, &EstimateSettings::new())
            .unwrap_err()
            .to_string()
    };
    let gate = "assert config.gate_activation == \"sigmoid\" and config.norm_after_topk";
    assert!(refused("gate_activation", json!("softmax")).contains(gate));
    assert!(refused("norm_after_topk", json!(false)).contains(gate));
    let shared = "assert config.n_shared_experts > 0 and config.shared_expert_sink";
    assert!(refused("n_shared_experts", json!(0)).contains(shared));
    let interleaved = "assert config.inference_moe_w13_interleaved";
    assert!(refused("inference_moe_w13_interleaved", json!(false)).contains(interleaved));
    // The served kind, spelled out, passes.
    let mut served = small_inkling();
    served["text_config"]["gate_activation"] = json!("sigmoid");
    served["text_config"]["norm_after_topk"] = json!(true);
    assert!(estimate(&served, &EstimateSettings::new()).is_ok());
}
