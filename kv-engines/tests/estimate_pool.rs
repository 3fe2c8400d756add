//! vLLM 0.33's pool groups and start-up line for estimated configs, with
//! figures worked out by hand from vLLM's rules (`kv_cache_planning.py`).

use serde_json::{json, Value};

#[allow(dead_code)]
#[path = "../src/estimate/fixtures.rs"]
mod fixtures;

use fixtures::{shipped, tiny};
use kv_core::Parallel;
use kv_engines::estimate::{
    estimate, vllm_startup, Estimate, EstimateSettings, StartupOutcome, VllmPool,
};

fn gemma_3_1b() -> Value {
    json!({
        "architectures": ["Gemma3ForCausalLM"], "attention_bias": false,
        "cache_implementation": "hybrid", "head_dim": 256, "hidden_size": 1152,
        "intermediate_size": 6912, "max_position_embeddings": 32768,
        "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 26,
        "num_key_value_heads": 1, "query_pre_attn_scalar": 256, "rope_scaling": null,
        "rope_local_base_freq": 10000, "rope_theta": 1000000, "sliding_window": 512,
        "sliding_window_pattern": 6, "torch_dtype": "bfloat16", "vocab_size": 262144
    })
}

fn at(len: u64) -> EstimateSettings {
    EstimateSettings::new().positions(len)
}

fn pools(e: &Estimate, tp: u64, pp: u64) -> Vec<VllmPool> {
    e.ranks(Parallel::new(tp, pp).unwrap(), 256)
        .unwrap()
        .into_iter()
        .map(|rank| rank.pool)
        .collect()
}

fn charged(pool: &VllmPool) -> Vec<(&str, u64, u64)> {
    pool.kinds
        .iter()
        .map(|k| (k.name.as_str(), k.layers_on_rank, k.charged_layers))
        .collect()
}

fn sum_per_row(e: &Estimate) -> u64 {
    e.specs.iter().map(|s| s.bytes_per_row().unwrap()).sum()
}

#[test]
fn gemma_3_1b_charges_22_sliding_layers_as_24() {
    let e = estimate(&gemma_3_1b(), &at(8192)).unwrap();
    // 1 KV head x 256 x (K + V) x 2 B = 1,024 B per token per layer; a
    // page is 16 tokens: 16,384 B. Sliding: min(511 + 2 x 2048, 8192) =
    // 4607 -> cdiv(4607, 16) = 288, + 1 = 289 blocks; full: 512 blocks.
    // 22 sliding, 4 full: group size 4 (22 >= 1.5 x 4), sliding in
    // cdiv(22, 4) = 6 groups (layers[i::6]: 4, 4, 4, 4, 3, 3).
    let pool = &pools(&e, 1, 1)[0];
    assert_eq!(pool.group_size, 4);
    assert_eq!(
        charged(pool),
        [("sliding_attention", 22, 24), ("full_attention", 4, 4)]
    );
    assert_eq!(pool.widest_group_layers, 4);
    assert_eq!(pool.page_bytes, 16_384);
    assert!(!pool.unequal_pages);
    assert_eq!(pool.bytes_per_block, 4 * 16_384);
    // 6 groups x 289 + 1 x 512 = 2,246 blocks.
    assert_eq!(pool.blocks_per_request, 2246);
    assert_eq!(pool.per_row_bytes, 65_536 * 2246);
    assert_eq!(pool.per_row_bytes, 147_193_856);
    assert_eq!(pool.peak_bytes, 147_193_856 * 256);
    // The sum of layers: (22 x 289 + 4 x 512) x 16,384 = 137,723,904,
    // 6.43% under vLLM's figure, as the issue measured.
    assert_eq!(sum_per_row(&e), 137_723_904);
    let sliding = &e.specs[0];
    assert!(
        sliding.cache.ends_with(
            "; vLLM 0.33's pool groups its 22 layers as 6 group(s) (4 x 4, 2 x 3 layers), \
             each charged as 4: 24 layers (group size 4, the fewest layers of a kind)"
        ),
        "{}",
        sliding.cache
    );
    assert!(!e.specs[1].cache.contains("pool"), "{}", e.specs[1].cache);
}

#[test]
fn gemma_3_1b_at_pp_2_charges_each_stage_its_widest_group() {
    let e = estimate(&gemma_3_1b(), &at(8192).pipeline_stages(2)).unwrap();
    // 3 batches in flight: min(511 + 3 x 2048, 8192) = 6655 -> 416 + 1
    // = 417 blocks. 26 layers split 13/13; full layers 5, 11 | 17, 23:
    // each stage 11 sliding, 2 full. Sliding groups (6, over the whole
    // model) hold cdiv(11, 6) = 2 of a stage's layers, full (1 group) 2:
    // a block spans 2 layers, and a request takes every group's blocks,
    // 6 x 417 + 512 = 3,014.
    let stages = pools(&e, 1, 2);
    for pool in &stages {
        assert_eq!(
            charged(pool),
            [("sliding_attention", 11, 12), ("full_attention", 2, 2)]
        );
        assert_eq!(pool.bytes_per_block, 2 * 16_384);
        assert_eq!(pool.blocks_per_request, 3014);
        assert_eq!(pool.per_row_bytes, 98_762_752);
    }
    // A stage's sum of layers: (11 x 417 + 2 x 512) x 16,384.
    let ranks = e.ranks(Parallel::new(1, 2).unwrap(), 256).unwrap();
    assert_eq!(ranks[0].totals.per_row, 91_930_624);
    assert_eq!(ranks[1].pool, stages[1]);
}

#[test]
fn gemma_3_27b_at_pp_3_has_a_wider_middle_stage() {
    let e = estimate(
        &shipped("gemma-3-27b"),
        &at(8192).pipeline_stages(3).set("sliding_window_pattern", 6),
    )
    .unwrap();
    // 16 heads x 128 x 2 x 2 B = 8,192 B per token per layer: a page of
    // 131,072 B. 52 sliding, 10 full: group size 10, sliding 6 groups.
    // 4 batches in flight: min(1023 + 4 x 2048, 8192) = 8192 -> 512 + 1 =
    // 513 blocks; full 512: a request takes 6 x 513 + 512 = 3,590.
    // 62 layers split 21/21/20 (vLLM gives the remainder to the stages
    // before the last); full layers 5, 11, 17 | 23, 29, 35, 41 | 47, 53, 59.
    let stages = pools(&e, 1, 3);
    let widest: Vec<u64> = stages.iter().map(|p| p.widest_group_layers).collect();
    // max(cdiv(18, 6), 3) = 3; max(cdiv(17, 6), 4) = 4; max(cdiv(17, 6), 3) = 3.
    assert_eq!(widest, [3, 4, 3]);
    assert_eq!(
        charged(&stages[1]),
        [("sliding_attention", 17, 24), ("full_attention", 4, 4)]
    );
    assert_eq!(stages[0].per_row_bytes, 3 * 131_072 * 3590);
    assert_eq!(stages[1].per_row_bytes, 1_882_193_920);
    // 10 GiB per rank: every rank takes the middle stage's count,
    // 10 GiB / 524,288 B = 20,480 blocks; 20,480 / 3,590 = 5.7047...;
    // x 8192 = 46,733.19 tokens.
    let startup = vllm_startup(
        &shipped("gemma-3-27b"),
        &at(8192).pipeline_stages(3).set("sliding_window_pattern", 6),
        Parallel::new(1, 3).unwrap(),
        10 << 30,
    )
    .unwrap();
    assert_eq!(
        startup.message,
        "GPU KV cache size: 46,733 tokens, Maximum concurrency for 8,192 tokens per request: \
         5.70x"
    );
    assert_eq!(
        startup.outcome,
        StartupOutcome::Starts {
            bytes_per_block: 524_288,
            num_blocks: 20_480,
            blocks_per_request: 3590,
            num_tokens: 46_733,
        }
    );
}

#[test]
fn a_stage_is_charged_for_groups_it_holds_no_layer_of() {
    let config = tiny(json!({
        "num_hidden_layers": 4, "sliding_window": 4,
        "layer_types": ["full_attention", "full_attention", "sliding_attention",
                        "sliding_attention"],
    }));
    let settings = at(64).pipeline_stages(2);
    let e = estimate(&config, &settings).unwrap();
    // 2 KV heads x 64 x 2 x 2 B = 512 B per token per layer, a page of
    // 8,192 B. Groups of 2: one full, one sliding. Stage 0 holds the two
    // full layers, stage 1 the two sliding ones; each stage's block spans
    // 2 layers, and a request takes both groups' blocks: full 64 / 16 = 4,
    // sliding (3 batches in flight) cdiv(min(3 + 6144, 64), 16) + 1 = 5.
    let stages = pools(&e, 1, 2);
    assert_eq!(
        charged(&stages[0]),
        [("full_attention", 2, 2), ("sliding_attention", 0, 2)]
    );
    assert_eq!(
        charged(&stages[1]),
        [("full_attention", 0, 2), ("sliding_attention", 2, 2)]
    );
    for pool in &stages {
        assert_eq!(pool.bytes_per_block, 2 * 8192);
        assert_eq!(pool.blocks_per_request, 4 + 5);
        assert_eq!(pool.per_row_bytes, 147_456);
    }
    assert_eq!(stages[0].kinds[1].blocks_per_layer, 5);
    assert_eq!(stages[1].kinds[0].blocks_per_layer, 4);
    // The stage's own layers hold 2 x 4 x 8,192 B.
    let ranks = e.ranks(Parallel::new(1, 2).unwrap(), 1).unwrap();
    assert_eq!(ranks[0].totals.per_row, 65_536);
    // 1 MiB: 64 blocks of 16,384 B; 64 / 9 x 64 = 455.1 tokens.
    let startup = vllm_startup(&config, &settings, Parallel::new(1, 2).unwrap(), 1 << 20).unwrap();
    assert_eq!(
        startup.message,
        "GPU KV cache size: 455 tokens, Maximum concurrency for 64 tokens per request: 7.11x"
    );
}

#[test]
fn one_kind_and_whole_groups_charge_the_sum_of_layers() {
    // Jamba: 28 Mamba, 4 attention: group size 4, Mamba in 7 whole groups.
    let jamba = estimate(&shipped("jamba-v0.1"), &at(8192)).unwrap();
    let pool = &pools(&jamba, 1, 1)[0];
    // A block: 4 layers x 327,680 B; a request: 7 x 2 state pages + 103
    // attention blocks of 80 = 117 blocks.
    assert_eq!(pool.bytes_per_block, 4 * 327_680);
    assert_eq!(pool.blocks_per_request, 7 * 2 + 103);
    assert_eq!(pool.per_row_bytes, 153_354_240);
    assert_eq!(sum_per_row(&jamba), 153_354_240);
    assert!(jamba.specs.iter().all(|s| !s.cache.contains("pool")));
    // Llama: one group of 32 layers; at tp 2 each rank's page halves.
    let llama = estimate(&shipped("llama-3-8b"), &at(8192).tensor_parallel(2)).unwrap();
    let ranks = pools(&llama, 2, 1);
    // 4 heads x 128 x 2 x 2 B x 16 tokens = 32,768 B; 32 layers; 512 blocks.
    assert_eq!(ranks[1].bytes_per_block, 32 * 32_768);
    assert_eq!(ranks[1].per_row_bytes, 32 * 32_768 * 512);
    assert_eq!(ranks[1].group_size, 32);
}

#[test]
fn the_group_size_is_the_most_layers_under_one_and_a_half_times_the_fewest() {
    let sliding = "sliding_attention";
    let full = "full_attention";
    let config = |kinds: &[&str]| {
        tiny(json!({
            "num_hidden_layers": kinds.len(), "layer_types": kinds, "sliding_window": 4
        }))
    };
    // 2 sliding, 3 full: 3 is not under 1.5 x 2, so groups of 2; full in
    // cdiv(3, 2) = 2 groups, charged as 4.
    let e = estimate(&config(&[sliding, full, sliding, full, full]), &at(64)).unwrap();
    let pool = &pools(&e, 1, 1)[0];
    assert_eq!(pool.group_size, 2);
    assert_eq!(charged(pool), [(sliding, 2, 2), (full, 3, 4)]);
    assert!(e.specs[1].cache.ends_with(
        "its 3 layers as 2 group(s) (1 x 2, 1 x 1 layers), each charged as 2: 4 layers \
         (group size 2, the fewest layers of a kind)"
    ));
    // 3 sliding, 4 full: 4 < 4.5, so groups of 4; sliding's one group of
    // 3 is charged as 4.
    let e = estimate(
        &config(&[sliding, full, sliding, full, sliding, full, full]),
        &at(64),
    )
    .unwrap();
    let pool = &pools(&e, 1, 1)[0];
    assert_eq!(pool.group_size, 4);
    assert_eq!(charged(pool), [(sliding, 3, 4), (full, 4, 4)]);
    assert!(e.specs[0].cache.ends_with(
        "its 3 layers as 1 group(s) (1 x 3 layers), each charged as 4: 4 layers (group \
         size 4, the most layers of a kind, as that is under 1.5 x the fewest)"
    ));
}

#[test]
fn a_small_memory_predicts_vllms_start_up_line() {
    let e = estimate(&gemma_3_1b(), &at(8192)).unwrap();
    assert_eq!(pools(&e, 1, 1)[0].bytes_per_block, 65_536);
    // 300 MiB = 314,572,800 B: 4,800 blocks of 65,536 (the null block
    // among them, as vLLM's line counts it). 4,800 / 2,246 = 2.1371...;
    // x 8192 = 17,507.39 tokens.
    let startup = vllm_startup(
        &gemma_3_1b(),
        &at(8192),
        Parallel::new(1, 1).unwrap(),
        300 << 20,
    )
    .unwrap();
    assert_eq!(
        startup.message,
        "GPU KV cache size: 17,507 tokens, Maximum concurrency for 8,192 tokens per request: \
         2.14x"
    );
    assert_eq!(
        startup.outcome,
        StartupOutcome::Starts {
            bytes_per_block: 65_536,
            num_blocks: 4800,
            blocks_per_request: 2246,
            num_tokens: 17_507,
        }
    );
    // Exactly one request and the null block: 2,247 blocks; 2,247 / 2,246
    // x 8192 = 8,195.6 tokens.
    let exact = 65_536 * 2247;
    let startup = vllm_startup(
        &gemma_3_1b(),
        &at(8192),
        Parallel::new(1, 1).unwrap(),
        exact,
    )
    .unwrap();
    assert_eq!(
        startup.message,
        "GPU KV cache size: 8,195 tokens, Maximum concurrency for 8,192 tokens per request: \
         1.00x"
    );
}

#[test]
fn too_little_memory_is_vllms_refusal_with_its_longest_length() {
    let refused = |bytes: u64| {
        vllm_startup(
            &gemma_3_1b(),
            &at(8192),
            Parallel::new(1, 1).unwrap(),
            bytes,
        )
        .unwrap()
    };
    // 100 MiB less the null block: 104,792,064 B = 1,599 blocks, under
    // the 2,246 one request takes (147,193,856 B: 0.137 GiB). Up to 4607
    // tokens a request takes 6 x (cdiv(len, 16) + 1) + cdiv(len, 16) =
    // 7 x cdiv(len, 16) + 6 blocks: <= 1,599 while cdiv(len, 16) <= 227,
    // so len <= 3632.
    let startup = refused(100 << 20);
    assert_eq!(
        startup.outcome,
        StartupOutcome::Refused {
            tp_rank: 0,
            pp_rank: 0,
            needed_bytes: 147_193_856,
            available_bytes: 104_792_064,
            estimated_max_model_len: 3632,
        }
    );
    assert_eq!(
        startup.message,
        "To serve at least one request with the model's max seq len (8192), (0.14 GiB KV \
         cache is needed, which is larger than the available KV cache memory (0.1 GiB). \
         Based on the available memory, the estimated maximum model length is 3632. Try \
         increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU \
         backend) or decreasing `max_model_len` when initializing the engine. See \
         https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    );
    // One byte short of one request and the null block: 2,245 blocks and
    // 65,535 B. Past 4607 tokens the sliding groups take 289 blocks each;
    // full takes 511 up to 8176 tokens: 1,734 + 511 = 2,245 fits.
    let short = refused(65_536 * 2247 - 1);
    assert!(
        matches!(
            short.outcome,
            StartupOutcome::Refused {
                estimated_max_model_len: 8176,
                available_bytes: 147_193_855,
                ..
            }
        ),
        "{short:?}"
    );
    // One byte over the null block: not one token fits (13 blocks), and
    // vLLM leaves its estimate out.
    let byte = refused(65_537);
    assert!(matches!(
        byte.outcome,
        StartupOutcome::Refused {
            estimated_max_model_len: 0,
            available_bytes: 1,
            ..
        }
    ));
    assert!(
        byte.message.contains("memory (0.0 GiB). Try increasing"),
        "{}",
        byte.message
    );
    // Only the null block: nothing left at all.
    let none = refused(65_536);
    assert_eq!(
        none.outcome,
        StartupOutcome::NoMemory {
            tp_rank: 0,
            pp_rank: 0,
            bytes_per_block: 65_536
        }
    );
    assert!(none
        .message
        .starts_with("No available memory for the cache blocks."));
}

#[test]
fn a_refusal_names_the_first_stage_that_does_not_fit() {
    // Gemma-3-27B at pp 3: stage 1's block is 4 pages (524,288 B), its
    // request 1,882,193,920 B; stages 0 and 2 need 1,411,645,440 B. With
    // 1.5 GiB (1,610,612,736 B) stage 0 fits and stage 1 does not.
    let settings = at(8192).pipeline_stages(3).set("sliding_window_pattern", 6);
    let startup = vllm_startup(
        &shipped("gemma-3-27b"),
        &settings,
        Parallel::new(1, 3).unwrap(),
        3 << 29,
    )
    .unwrap();
    // Stage 1 has 1,610,612,736 - 524,288 = 1,610,088,448 B: 3,071 blocks
    // of 524,288. A request takes 6 x (cdiv(min(9215, len), 16) + 1) +
    // cdiv(len, 16): at len 6992, 6 x 438 + 437 = 3,065; at 6993,
    // 6 x 439 + 438 = 3,072 > 3,071.
    assert_eq!(
        startup.outcome,
        StartupOutcome::Refused {
            tp_rank: 0,
            pp_rank: 1,
            needed_bytes: 1_882_193_920,
            available_bytes: 1_610_088_448,
            estimated_max_model_len: 6992,
        }
    );
}

#[test]
fn the_longest_length_is_bisected_over_a_long_range() {
    // A two-layer Llama at 2^40 positions: a block spans 2 layers of 16 x
    // 512 B, 16,384 B. 1 MiB less the null block is 1,032,192 B, 63
    // blocks: 1,008 tokens. vLLM bisects 1..=2^40 in about 40 steps.
    let startup = vllm_startup(
        &tiny(json!({})),
        &at(1 << 40),
        Parallel::new(1, 1).unwrap(),
        1 << 20,
    )
    .unwrap();
    assert!(
        matches!(
            startup.outcome,
            StartupOutcome::Refused {
                estimated_max_model_len: 1008,
                ..
            }
        ),
        "{startup:?}"
    );
    // 1 TiB and the null block: 2^40 B = 2^26 blocks, 2^30 tokens.
    let startup = vllm_startup(
        &tiny(json!({})),
        &at(1 << 40),
        Parallel::new(1, 1).unwrap(),
        (1 << 40) + 16_384,
    )
    .unwrap();
    assert!(
        matches!(
            startup.outcome,
            StartupOutcome::Refused {
                estimated_max_model_len: 1_073_741_824,
                ..
            }
        ),
        "{startup:?}"
    );
}
