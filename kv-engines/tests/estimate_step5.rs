//! Step-5 on vLLM 0.33: sliding layers, and sparse (DSA) layers that keep a
//! summary cache and a one-page tail ring beside their K/V, packed
//! block-outermost (`_get_packed_kv_cache_groups`). Figures worked out by
//! hand from vLLM's rules (models/step5/nvidia, `kv_cache_planning.py`),
//! each in a comment; the published layout, the registry's and this small
//! one were run through vLLM's own objects (scripts/vllm/compare.py).

mod common;

use common::{pools, refused, row};

use kv_core::{Parallel, Storage};
use kv_engines::estimate::{estimate, vllm_startup, EstimateSettings};
use serde_json::{json, Value};

/// A Step-5 no script ships: 6 layers and 1 MTP layer, the first 6 of
/// `layer_types` sliding, sliding, DSA, sliding, sliding, DSA; 16 heads in 2
/// KV groups of 192, window 128.
fn small_step5() -> Value {
    json!({
        "architectures": ["Step5ForCausalLM"], "model_type": "step5",
        "torch_dtype": "bfloat16", "hidden_size": 1024, "num_hidden_layers": 6,
        "num_nextn_predict_layers": 1, "num_attention_heads": 16, "num_attention_groups": 2,
        "head_dim": 192, "sliding_window": 128, "max_seq_len": 8192,
        "use_head_wise_attn_gate": true, "use_moe": true, "moe_num_experts": 8,
        "moe_top_k": 2, "moe_intermediate_size": 256, "share_expert_dim": 256,
        "moe_layers_enum": "2,3,4,5", "need_fp32_gate": true, "use_moe_router_bias": true,
        "moe_router_activation": "sigmoid", "norm_expert_weight": true,
        "layer_types": ["sliding_attention", "sliding_attention", "full_attention",
                        "sliding_attention", "sliding_attention", "full_attention",
                        "full_attention"],
        "sparse_config": {"num_provider_groups": 2, "sparse_indexer_num_heads": 8},
    })
}

#[test]
fn each_dsa_layer_keeps_a_summary_and_a_ring_beside_its_k_v() {
    let e = estimate(&small_step5(), &EstimateSettings::new()).unwrap();
    assert_eq!(e.max_model_len, 8192);
    // Sliding: min(127 + 2 x 2,048, 8,192) = 4,223 tokens, 4,224 + 16 =
    // 4,240 x 2 heads x 192 x 2 (K, V) x 2 B x 4 layers.
    assert_eq!(row(&e, "sliding_attention"), 4240 * 2 * 192 * 4 * 4);
    // DSA K/V: 8,192 x 1,536 B x 2 layers.
    assert_eq!(row(&e, "full_attention"), 8192 * 1536 * 2);
    // Summary: 256 B per 8 tokens = 32 B a token, 8,192 x 32 x 2 layers.
    assert_eq!(row(&e, "summary_cache"), 8192 * 32 * 2);
    // Ring: one K/V page, 16 x 1,536 B, a layer.
    assert_eq!(row(&e, "tail_ring"), 16 * 1536 * 2);
}

#[test]
fn vllm_packs_the_groups_block_outermost() {
    let e = estimate(&small_step5(), &EstimateSettings::new()).unwrap();
    let pool = &pools(&e, 1, 1)[0];
    assert!(pool.packed);
    // Buckets: sliding 4 x 24,576 B; DSA 2 x 24,576 (K/V) + 2 x 512
    // (summary), balanced; rings 2 x 24,576. Repeats: the d in [2, 4]
    // padding [4, 2, 2] least: 2. Sliding 2 groups, DSA 1, rings 1 (the DSA
    // group's 50,176 B hold 2 ring pages).
    let groups: Vec<(&str, u64)> = pool.kinds.iter().map(|k| (&*k.name, k.groups)).collect();
    assert_eq!(
        groups,
        [
            ("sliding_attention", 2),
            ("full_attention", 1),
            ("summary_cache", 0),
            ("tail_ring", 1)
        ]
    );
    assert_eq!(pool.group_size, 2);
    // The widest group is the DSA one, 50,176 B, rounded up to lcm(the K/V's
    // 8-token kernel page 8 x 2 x 192 x 4 = 12,288, the ring's 1,024):
    // 61,440.
    assert_eq!(pool.bytes_per_block, 61_440);
    // 2 x (cdiv(4,223, 16) + 1) + 8,192 / 16 + 1 = 530 + 512 + 1.
    assert_eq!(pool.blocks_per_request, 1043);
    assert_eq!(pool.per_row_bytes, 1043 * 61_440);
}

#[test]
fn groups_that_do_not_divide_are_packed_not_padded() {
    // 7 layers: S S F S S F S (and the MTP entry): 5 sliding, 2 DSA. Repeats:
    // the d in [2, 5] padding [5, 2, 2] least: 2 (1 of padding). Sliding
    // cdiv(5, 2) = 3 groups, DSA 1, rings 1 (the DSA group's 50,176 B hold
    // 2). No layer is charged as padding: the words say packed, not padded.
    let mut config = small_step5();
    config["num_hidden_layers"] = json!(7);
    config["layer_types"] = json!([
        "sliding_attention",
        "sliding_attention",
        "full_attention",
        "sliding_attention",
        "sliding_attention",
        "full_attention",
        "sliding_attention",
        "full_attention"
    ]);
    let e = estimate(&config, &EstimateSettings::new()).unwrap();
    for spec in &e.specs {
        assert!(!spec.cache.contains("pool groups"), "{}", spec.cache);
        assert!(spec
            .note
            .as_deref()
            .unwrap_or("")
            .contains("Step-5: 5 sliding and 2 sparse"));
    }
    let pool = &pools(&e, 1, 1)[0];
    assert_eq!(pool.kinds[0].groups, 3);
    assert_eq!(pool.bytes_per_block, 61_440);
    // 3 x 265 + 512 + 1.
    assert_eq!(pool.blocks_per_request, 1308);
}

#[test]
fn a_larger_block_is_packed_again() {
    let e = estimate(&small_step5(), &EstimateSettings::new().block_size(32)).unwrap();
    let pool = &pools(&e, 1, 1)[0];
    // Pages at 32: sliding, K/V and ring 49,152 B, summary 1,024. The DSA
    // group's 2 x 50,176 = 100,352 B, up to a multiple of 12,288 (8 tokens
    // of K/V): 110,592. 2 x (cdiv(4,223, 32) + 1) + 256 + 1 = 523.
    assert_eq!(pool.bytes_per_block, 110_592);
    assert_eq!(pool.blocks_per_request, 523);
}

#[test]
fn pipeline_stages_are_charged_every_group() {
    // PP 2: layers 0-2 (2 sliding, 1 DSA) and 3-5 (the same). A stage's
    // widest group: the DSA one, 24,576 + 512 = 25,088 B, up to 36,864; a
    // request still takes every group's blocks. 3 x 2,048 in flight:
    // min(127 + 6,144, 8,192) = 6,271, cdiv 16 = 392 + 1 = 393 per sliding
    // group: 2 x 393 + 512 + 1 = 1,299.
    let e = estimate(&small_step5(), &EstimateSettings::new().pipeline_stages(2)).unwrap();
    for stage in pools(&e, 1, 2) {
        assert_eq!(stage.bytes_per_block, 36_864);
        assert_eq!(stage.blocks_per_request, 1299);
    }
}

#[test]
fn a_stage_with_no_dsa_layer_is_refused_as_unchecked() {
    // PP 3: layers 0-1 (both sliding), 2-3, 4-5.
    let text = refused(&small_step5(), EstimateSettings::new().pipeline_stages(3));
    assert!(
        text.contains("pipeline stage 0 (layers 0..2) holds no sparse (DSA)"),
        "{text}"
    );
}

#[test]
fn vllms_start_up_line_counts_the_packed_blocks() {
    // 100 MiB: 104,857,600 / 61,440 = 1,706 blocks; 1,706 / 1,043 x 8,192 =
    // 13,399.4 tokens; 1.64x.
    let startup = vllm_startup(
        &small_step5(),
        &EstimateSettings::new(),
        Parallel::new(1, 1).unwrap(),
        100 << 20,
    )
    .unwrap();
    assert_eq!(
        startup.message,
        "GPU KV cache size: 13,399 tokens, Maximum concurrency for 8,192 tokens per request: \
         1.64x"
    );
}

#[test]
fn without_a_window_every_layer_is_dsa() {
    // No `sliding_window`: every layer is DSA (model.py:908), one bucket of
    // 6 K/V + 6 summaries and one of 6 rings: 6 x 25,088 = 150,528 B, up to
    // 159,744; 512 + 1 blocks.
    let mut config = small_step5();
    config.as_object_mut().unwrap().remove("sliding_window");
    let e = estimate(&config, &EstimateSettings::new()).unwrap();
    let names: Vec<&str> = e.specs.iter().map(|s| &*s.name).collect();
    assert_eq!(names, ["full_attention", "summary_cache", "tail_ring"]);
    let pool = &pools(&e, 1, 1)[0];
    assert_eq!(pool.bytes_per_block, 159_744);
    assert_eq!(pool.blocks_per_request, 513);
}

#[test]
fn what_vllm_refuses_is_refused_in_its_words() {
    // fp8 halves the K/V page to 12,288 B: 12 ring rows, enough for 7 and
    // five speculative tokens, not for six.
    let fp8 = || EstimateSettings::new().kv_format(Storage::from_name("fp8").unwrap());
    assert!(estimate(&small_step5(), &fp8().speculative_tokens(5)).is_ok());
    let text = refused(&small_step5(), fp8().speculative_tokens(6));
    assert!(
        text.contains("Step5 CSA tail ring needs 13 rows of 1024 bytes in one 12288-byte KV page"),
        "{text}"
    );
    // TP 2 at fp8: one head of 192 a rank, 16 x 192 x 2 x 1 B = 6,144 B: 6
    // rows. (At bf16, TP 4 keeps one replicated head, 12,288 B: it starts.)
    let text = refused(&small_step5(), fp8().tensor_parallel(2));
    assert!(
        text.contains("needs 7 rows of 1024 bytes in one 6144-byte"),
        "{text}"
    );
    assert!(estimate(&small_step5(), &EstimateSettings::new().tensor_parallel(4)).is_ok());
    let e5m2 = EstimateSettings::new().kv_format(Storage::from_name("fp8_e5m2").unwrap());
    let text = refused(&small_step5(), e5m2);
    assert!(
        text.contains("FlashAttention does not support fp8_e5m2"),
        "{text}"
    );
    let text = refused(&small_step5(), EstimateSettings::new().block_size(20));
    assert!(
        text.contains("Step5 KV blocks must align to eight-token regions"),
        "{text}"
    );
    let text = refused(&small_step5(), EstimateSettings::new().block_size(24));
    assert!(text.contains("a block of 24 on Step-5"), "{text}");
    // The list must hold the MTP layer too.
    let mut short = small_step5();
    short["layer_types"].as_array_mut().unwrap().pop();
    let text = refused(&short, EstimateSettings::new());
    assert!(
        text.contains("expected at least 7 entries, got 6"),
        "{text}"
    );
    let mut providers = small_step5();
    providers["sparse_config"]["num_provider_groups"] = json!(4);
    let text = refused(&providers, EstimateSettings::new());
    assert!(
        text.contains("provider groups must align with attention KV groups: 4 != 2"),
        "{text}"
    );
    let mut indexer = small_step5();
    indexer["sparse_config"]["sparse_indexer_num_heads"] = json!(16);
    let text = refused(&indexer, EstimateSettings::new());
    assert!(
        text.contains("index_tp_size in (2, 4), got 8 (16 / 2)"),
        "{text}"
    );
    let mut bias = small_step5();
    bias["use_moe_router_bias"] = json!(false);
    let text = refused(&bias, EstimateSettings::new());
    assert!(
        text.contains("Step5 MoE currently requires use_moe_router_bias=true"),
        "{text}"
    );
    // No MoE layer among the dense ones: no router to check.
    bias["moe_layers_enum"] = json!("6");
    assert!(estimate(&bias, &EstimateSettings::new()).is_ok());
    let mut narrow = small_step5();
    narrow["head_dim"] = json!(64);
    let text = refused(&narrow, EstimateSettings::new());
    assert!(
        text.contains("head dimensions 128 or 192, got 64"),
        "{text}"
    );
    narrow["head_dim"] = json!(128);
    let text = refused(&narrow, EstimateSettings::new());
    assert!(
        text.contains("DSA kernels require head_size 192, got 128"),
        "{text}"
    );
    let mut ungated = small_step5();
    ungated["use_head_wise_attn_gate"] = json!(false);
    let text = refused(&ungated, EstimateSettings::new());
    assert!(
        text.contains("require use_head_wise_attn_gate=true"),
        "{text}"
    );
    let mut heads = small_step5();
    heads["num_attention_heads"] = json!(24);
    let text = refused(&heads, EstimateSettings::new());
    assert!(
        text.contains("4, 8, or 16 local query heads per KV group, got 12"),
        "{text}"
    );
}

#[test]
fn the_edges_of_vllms_checks() {
    // DCP where vLLM's config checks let it through (TP 4 > 2 KV heads):
    // Step-5's attention refuses it.
    let text = refused(
        &small_step5(),
        EstimateSettings::new()
            .tensor_parallel(4)
            .decode_context_parallel(2),
    );
    assert!(
        text.contains("Step5 does not support decode context parallelism"),
        "{text}"
    );
    // TP 2: one KV group a rank, 8 query heads in it: sized.
    assert!(estimate(&small_step5(), &EstimateSettings::new().tensor_parallel(2)).is_ok());
    // The indexer's heads must divide into the provider groups.
    for (heads, providers) in [(7, 2), (8, 0)] {
        let mut config = small_step5();
        config["sparse_config"]["sparse_indexer_num_heads"] = json!(heads);
        config["sparse_config"]["num_provider_groups"] = json!(providers);
        let text = refused(&config, EstimateSettings::new());
        assert!(
            text.contains("must be positive and divisible by index_tp_size"),
            "{text}"
        );
    }
    // Every layer sliding: no DSA layer, no ring to check, even at fp8 on
    // TP 2 or on two pipeline stages.
    let mut sliding = small_step5();
    sliding["layer_types"] = json!(vec!["sliding_attention"; 7]);
    let fp8 = EstimateSettings::new().kv_format(Storage::from_name("fp8").unwrap());
    let e = estimate(&sliding, &fp8.tensor_parallel(2)).unwrap();
    let names: Vec<&str> = e.specs.iter().map(|s| &*s.name).collect();
    assert_eq!(names, ["sliding_attention"]);
    assert!(estimate(&sliding, &EstimateSettings::new().pipeline_stages(2)).is_ok());
    // A window and no sliding layer: DSA declarations alone.
    let mut dense = small_step5();
    dense["layer_types"] = json!(vec!["full_attention"; 7]);
    let e = estimate(&dense, &EstimateSettings::new()).unwrap();
    let names: Vec<&str> = e.specs.iter().map(|s| &*s.name).collect();
    assert_eq!(names, ["full_attention", "summary_cache", "tail_ring"]);
}
