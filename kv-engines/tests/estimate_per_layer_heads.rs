//! Layers of two head sizes (Gemma 4: 256-wide sliding heads, 512-wide
//! full-attention heads from `global_head_dim`) on vLLM 0.33. vLLM makes the
//! smaller page as large as the larger by holding more tokens in its block
//! (`unify_kv_cache_spec_page_size`), and an fp8 cache of 512-wide heads
//! runs on FlashAttention 4's 64-token page on Hopper. Figures worked out by
//! hand, each in a comment; the layout was run through vLLM's own objects on
//! 2026-12-06 (scripts/vllm/compare.py: every quantity of 38 layouts of a
//! Gemma-4-31B-like and a Gemma-4-E2B-like config).

use kv_core::{DType, Parallel, Storage};
use kv_engines::estimate::{estimate, EstimateSettings};
use serde_json::{json, Value};

/// A Gemma-4-31B-like text config, cut to 12 layers (every 6th full): 16
/// sliding KV heads of 256, 4 full ones of 512 (`attention_k_eq_v`), a
/// window of 1,024, 8,192 positions.
fn gemma_4() -> Value {
    let layer_types: Vec<&str> = (1..=12)
        .map(|i| {
            if i % 6 == 0 {
                "full_attention"
            } else {
                "sliding_attention"
            }
        })
        .collect();
    json!({
        "architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text",
        "num_hidden_layers": 12, "num_attention_heads": 32, "num_key_value_heads": 16,
        "head_dim": 256, "global_head_dim": 512, "num_global_key_value_heads": 4,
        "attention_k_eq_v": true, "sliding_window": 1024, "layer_types": layer_types,
        "max_position_embeddings": 8192, "torch_dtype": "bfloat16",
    })
}

/// (blocks a request takes, bytes of a block, each kind's tokens a block)
/// on rank 0.
fn pool_at(settings: EstimateSettings, tp: u64) -> (u64, u64, Vec<u64>) {
    let e = estimate(&gemma_4(), &settings.tensor_parallel(tp)).unwrap();
    let ranks = e.ranks(Parallel::new(tp, 1).unwrap(), 1).unwrap();
    let pool = &ranks[0].pool;
    let blocks = pool.kinds.iter().map(|k| k.block_size).collect();
    (pool.blocks_per_request, pool.bytes_per_block, blocks)
}

#[test]
fn each_kind_takes_its_own_heads_and_the_smaller_page_holds_more_tokens() {
    let e = estimate(&gemma_4(), &EstimateSettings::new()).unwrap();
    assert_eq!(e.block_size, 16);
    // Per token a layer: sliding 16 x 256 x 2 (K, V) x 2 B = 16,384 B; full
    // 4 x 512 x 2 x 2 B = 8,192 B.
    let per_position: Vec<(&str, u64)> = e
        .specs
        .iter()
        .map(|s| {
            (
                s.name.as_ref(),
                s.layout.bytes_per_position().unwrap().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        per_position,
        [
            ("sliding_attention", 10 * 16_384),
            ("full_attention", 2 * 8_192)
        ]
    );
    assert!(
        e.detected
            .contains("full_attention layers: `head_dim` 512, 4 KV heads"),
        "{}",
        e.detected
    );
    // Pages of 16 tokens: sliding 262,144 B, full 131,072 B: the full
    // kind's block holds 32 tokens. Groups of 2 (the fewest layers of a
    // kind): 5 sliding, 1 full; a block spans 2 x 262,144 = 524,288 B. A
    // request: sliding min(1,023 + 2 x 2,048, 8,192) = 5,119 tokens,
    // cdiv(5,119, 16) + 1 = 321 blocks a group; full cdiv(8,192, 32) = 256.
    // 5 x 321 + 256 = 1,861 blocks.
    assert_eq!(
        pool_at(EstimateSettings::new(), 1),
        (1_861, 524_288, vec![16, 32])
    );
}

#[test]
fn an_fp8_cache_of_512_wide_heads_takes_flash_attention_4s_64_token_page() {
    let fp8 = || EstimateSettings::new().kv_format(Storage::Dense(DType::F8E4M3));
    let e = estimate(&gemma_4(), &fp8()).unwrap();
    assert_eq!(e.block_size, 64);
    assert!(
        e.convention.contains("FlashAttention 4"),
        "{}",
        e.convention
    );
    // Pages of 64 tokens at 1 B: sliding 524,288 B, full 262,144 B (128
    // tokens a block). Sliding cdiv(5,119, 64) + 1 = 81 blocks, full
    // cdiv(8,192, 128) = 64: 5 x 81 + 64 = 469 blocks of 2 x 524,288 B.
    assert_eq!(pool_at(fp8(), 1), (469, 1_048_576, vec![64, 128]));
    // A block given is kept, as vLLM keeps it: at 32, sliding 8,192 x 32 =
    // 262,144 B, full 131,072 B (64 tokens); cdiv(5,119, 32) + 1 = 161 and
    // cdiv(8,192, 64) = 128: 5 x 161 + 128 = 933 blocks.
    assert_eq!(
        pool_at(fp8().block_size(32), 1),
        (933, 524_288, vec![32, 64])
    );
    // A 16-bit cache keeps 16 tokens a block whatever the heads.
    assert_eq!(
        estimate(&gemma_4(), &EstimateSettings::new())
            .unwrap()
            .block_size,
        16
    );
}

#[test]
fn tensor_parallelism_moves_which_page_is_larger() {
    // tp 4: sliding 4 heads (4,096 B a token), full max(1, 4 / 4) = 1 head
    // (2,048 B): still half, still 32 tokens; blocks as at tp 1, a block a
    // quarter: 2 x 65,536 = 131,072 B.
    assert_eq!(
        pool_at(EstimateSettings::new(), 4),
        (1_861, 131_072, vec![16, 32])
    );
    // tp 8: sliding 2 heads (2,048 B), full 1 head replicated (2,048 B):
    // equal pages, both 16 tokens a block; full cdiv(8,192, 16) = 512:
    // 5 x 321 + 512 = 2,117 blocks of 2 x 32,768 B.
    assert_eq!(
        pool_at(EstimateSettings::new(), 8),
        (2_117, 65_536, vec![16, 16])
    );
}
