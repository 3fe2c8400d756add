//! Sparse-attention (DSA) models on vLLM 0.33: an MLA latent and an
//! indexer's keys per layer, in one pool group on 64-token blocks. Figures
//! worked out by hand from vLLM's rules (`DeepseekV32IndexerCache`,
//! `UniformTypeKVCacheSpecs`, FLASH_ATTN_MLA_SPARSE), each in a comment; the
//! published DeepSeek-V3.2 and GLM-5 layouts were run through vLLM's own
//! objects (scripts/vllm/registry.py).

use kv_core::{KvError, Parallel, Storage};
use kv_engines::estimate::sglang::{sglang_pools, SglangKvDtype, SglangSettings};
use kv_engines::estimate::{estimate, vllm_startup, EstimateSettings, StartupOutcome};
use serde_json::{json, Value};

/// A GLM-5-like layout no script ships: 8 layers, a 512 + 64 latent, a
/// 128-wide indexer, 65,536 positions.
fn small_dsa() -> Value {
    json!({
        "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa",
        "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 16,
        "hidden_size": 2048, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128, "v_head_dim": 128, "index_topk": 1024,
        "index_head_dim": 128, "index_n_heads": 16, "max_position_embeddings": 65536,
        "torch_dtype": "bfloat16",
    })
}

fn refusal(result: Result<impl std::fmt::Debug, KvError>) -> String {
    result.unwrap_err().to_string()
}

#[test]
fn the_latent_and_the_indexer_keys_share_one_group_of_64_token_blocks() {
    let e = estimate(&small_dsa(), &EstimateSettings::new()).unwrap();
    assert_eq!(e.block_size, 64);
    assert!(
        e.convention.contains(
            "block_size 64 (FLASH_ATTN_MLA_SPARSE for the latent and DEEPSEEK_V32_INDEXER for \
             the indexer keys"
        ),
        "{}",
        e.convention
    );
    let names: Vec<&str> = e.specs.iter().map(|s| s.name.as_ref()).collect();
    assert_eq!(names, ["mla_latent", "indexer_keys"]);
    // Per token per layer: latent (512 + 64) x 2 B = 1,152 B; keys 128 fp8 +
    // one float32 scale = 132 B. 8 layers x 65,536 positions.
    assert_eq!(e.specs[0].bytes_per_row(), Ok(8 * 1152 * 65_536));
    assert_eq!(e.specs[1].bytes_per_row(), Ok(8 * 132 * 65_536));
    let ranks = e.ranks(Parallel::new(1, 1).unwrap(), 4).unwrap();
    let pool = &ranks[0].pool;
    // One group of 16 layers; a block is 8 x (64 x 1,152) + 8 x (64 x 132)
    // = 589,824 + 67,584 = 657,408 B; a request takes 65,536 / 64 = 1,024.
    assert!(pool.one_group);
    assert_eq!(pool.group_size, 16);
    assert_eq!(pool.widest_group_layers, 16);
    assert_eq!(pool.page_bytes, 73_728);
    assert_eq!(pool.bytes_per_block, 657_408);
    assert_eq!(pool.blocks_per_request, 1024);
    assert_eq!(pool.per_row_bytes, 673_185_792);
    assert_eq!(pool.peak_bytes, 4 * 673_185_792);
    let groups: Vec<(&str, u64, u64, u64)> = pool
        .kinds
        .iter()
        .map(|k| (k.name.as_str(), k.groups, k.charged_layers, k.page_bytes))
        .collect();
    assert_eq!(
        groups,
        [("mla_latent", 1, 8, 73_728), ("indexer_keys", 0, 8, 8_448)]
    );
}

#[test]
fn pipeline_stages_take_their_layers_of_both_and_tp_replicates_them() {
    let e = estimate(&small_dsa(), &EstimateSettings::new().pipeline_stages(2)).unwrap();
    // 4 layers a stage: 4 x 73,728 + 4 x 8,448 = 328,704 B a block.
    let ranks = e.ranks(Parallel::new(1, 2).unwrap(), 1).unwrap();
    let blocks: Vec<u64> = ranks.iter().map(|r| r.pool.bytes_per_block).collect();
    assert_eq!(blocks, [328_704, 328_704]);
    assert!(ranks.iter().all(|r| r.pool.widest_group_layers == 8));
    // The latent and the keys are one vector a token: every TP rank holds all.
    let e = estimate(&small_dsa(), &EstimateSettings::new().tensor_parallel(2)).unwrap();
    let ranks = e.ranks(Parallel::new(2, 1).unwrap(), 1).unwrap();
    assert!(ranks.iter().all(|r| r.pool.bytes_per_block == 657_408));
}

#[test]
fn the_start_up_line_counts_blocks_of_the_group() {
    // 10 GiB = 10,737,418,240 B / 657,408 B: 16,332 blocks (657,408 x
    // 16,332 = 10,736,787,456; one more is 10,737,444,864, past it);
    // 16,332 / 1,024 x 65,536 = 1,045,248 tokens; 15.949x.
    let startup = vllm_startup(
        &small_dsa(),
        &EstimateSettings::new(),
        Parallel::new(1, 1).unwrap(),
        10 << 30,
    )
    .unwrap();
    assert_eq!(
        startup.outcome,
        StartupOutcome::Starts {
            bytes_per_block: 657_408,
            num_blocks: 16_332,
            blocks_per_request: 1024,
            num_tokens: 1_045_248,
        }
    );
    assert_eq!(
        startup.message,
        "GPU KV cache size: 1,045,248 tokens, Maximum concurrency for 65,536 tokens per \
         request: 15.95x"
    );
}

#[test]
fn what_kv_has_not_checked_is_refused_by_name() {
    let e5m2 = EstimateSettings::new().kv_format(Storage::from_name("fp8_e5m2").unwrap());
    let text = refusal(estimate(&small_dsa(), &e5m2));
    assert!(
        text.contains(
            "f8e5m2 on a sparse-attention (DSA) model: kv has checked vLLM 0.33's sparse \
             latents in 16 bits and in f8e4m3"
        ),
        "{text}"
    );
    // `fp8_ds_mla`'s 656 B token is a 512 + 64 latent's alone.
    let mut narrow = small_dsa();
    narrow["kv_lora_rank"] = json!(256);
    let fp8 = EstimateSettings::new().kv_format(Storage::from_name("fp8").unwrap());
    let text = refusal(estimate(&narrow, &fp8));
    assert!(text.contains("this one is 256 + 64"), "{text}");
    let text = refusal(estimate(
        &small_dsa(),
        &EstimateSettings::new().block_size(16),
    ));
    assert!(
        text.contains(
            "indexer keys run only on DEEPSEEK_V32_INDEXER, whose block is 64, not the 16 given"
        ),
        "{text}"
    );
    assert!(estimate(&small_dsa(), &EstimateSettings::new().block_size(64)).is_ok());
    let dcp = EstimateSettings::new()
        .tensor_parallel(2)
        .decode_context_parallel(2);
    let text = refusal(estimate(&small_dsa(), &dcp));
    assert!(
        text.contains("decode context parallelism 2 on a sparse-attention"),
        "{text}"
    );
    let mut no_head = small_dsa();
    no_head.as_object_mut().unwrap().remove("index_head_dim");
    let text = refusal(estimate(&no_head, &EstimateSettings::new()));
    assert!(
        text.contains("`index_topk` makes it a sparse-attention (DSA) model"),
        "{text}"
    );
}

#[test]
fn sglang_keeps_the_indexer_keys_beside_the_latent_on_pages_of_64() {
    // A token is 8 x (1,152 + 132) = 10,272 B; 42,949,672,960 // 10,272 =
    // 4,181,237, down to a page of 64: 4,181,184. The pool holds one page
    // more: 4,181,248 x 10,272 = 42,949,779,456 B = 40.0001 GiB. The cache
    // is bfloat16 on Hopper whatever the model's dtype (here float16).
    let mut config = small_dsa();
    config["torch_dtype"] = json!("float16");
    let e = estimate(&config, &EstimateSettings::new()).unwrap();
    let pools = sglang_pools(&config, &e, &SglangSettings::default(), 40 << 30).unwrap();
    assert_eq!(pools.full.tokens, 4_181_184);
    assert_eq!(pools.dtype, "torch.bfloat16");
    assert_eq!(
        pools.lines(),
        ["KV Cache is allocated. dtype: torch.bfloat16, #tokens: 4181184, KV size: 40.00 GB"]
    );
    // fp8 and another page are SGLang layouts kv has not checked.
    let mut fp8 = SglangSettings::default();
    fp8.kv_cache_dtype = SglangKvDtype::Fp8E4m3;
    let text = refusal(sglang_pools(&config, &e, &fp8, 40 << 30));
    assert!(
        text.contains("an fp8 KV cache on a sparse-attention (DSA) model"),
        "{text}"
    );
    let mut paged = SglangSettings::default();
    paged.page_size = 16;
    let text = refusal(sglang_pools(&config, &e, &paged, 40 << 30));
    assert!(
        text.contains("--page-size 16 on a sparse-attention (DSA) model"),
        "{text}"
    );
    paged.page_size = 64;
    assert_eq!(
        sglang_pools(&config, &e, &paged, 40 << 30)
            .unwrap()
            .full
            .tokens,
        4_181_184
    );
}

#[test]
fn an_fp8_latent_takes_vllms_fp8_ds_mla_layout() {
    // FLASHMLA_SPARSE's `fp8_ds_mla`: 512 fp8 + 4 float32 scales (16 B) +
    // 64 bf16 RoPE (128 B) = 656 B a token a layer; the keys stay 132 B.
    // A block: 8 x 64 x 656 + 8 x 64 x 132 = 335,872 + 67,584 = 403,456 B.
    let fp8 = EstimateSettings::new().kv_format(Storage::from_name("fp8").unwrap());
    let e = estimate(&small_dsa(), &fp8).unwrap();
    assert_eq!(e.block_size, 64);
    assert!(
        e.convention.contains("FLASHMLA_SPARSE for the fp8 latent"),
        "{}",
        e.convention
    );
    assert_eq!(e.specs[0].bytes_per_row(), Ok(8 * 656 * 65_536));
    assert_eq!(e.specs[1].bytes_per_row(), Ok(8 * 132 * 65_536));
    let ranks = e.ranks(Parallel::new(1, 1).unwrap(), 1).unwrap();
    assert_eq!(ranks[0].pool.page_bytes, 41_984);
    assert_eq!(ranks[0].pool.bytes_per_block, 403_456);
}

/// An HY-V4-like layout no script ships: 8 sparse layers, three of them
/// with an indexer of their own.
fn small_hy_v4() -> Value {
    let mut config = small_dsa();
    config["architectures"] = json!(["HYV4ForCausalLM"]);
    config["model_type"] = json!("hy_v4");
    config["layer_types"] = json!(vec!["indexed_attention"; 8]);
    config["indexer_types"] =
        json!(["full", "full", "shared", "shared", "shared", "full", "shared", "shared"]);
    config
}

#[test]
fn hy_v4s_shared_layers_keep_no_indexer_keys() {
    // Latents on all 8 layers, keys on the 3 "full" ones: 8 x 1,152 + 3 x
    // 132 = 9,612 B a token; a block 8 x 73,728 + 3 x 8,448 = 615,168 B.
    let e = estimate(&small_hy_v4(), &EstimateSettings::new()).unwrap();
    assert!(
        e.detected.contains("on the 3 layers `indexer_types` gives"),
        "{}",
        e.detected
    );
    assert_eq!(e.specs[1].bytes_per_row(), Ok(3 * 132 * 65_536));
    let ranks = e.ranks(Parallel::new(1, 1).unwrap(), 1).unwrap();
    assert_eq!(ranks[0].pool.bytes_per_block, 615_168);
    // fp8: 8 x 64 x 656 + 3 x 8,448 = 335,872 + 25,344 = 361,216 B.
    let fp8 = EstimateSettings::new().kv_format(Storage::from_name("fp8").unwrap());
    let e = estimate(&small_hy_v4(), &fp8).unwrap();
    let ranks = e.ranks(Parallel::new(1, 1).unwrap(), 1).unwrap();
    assert_eq!(ranks[0].pool.bytes_per_block, 361_216);
    // Two stages of 4 layers: "full" at 0 and 1 on the first, 5 on the
    // second: 4 x 73,728 + 2 x 8,448 = 311,808 and + 1 x 8,448 = 303,360.
    let e = estimate(&small_hy_v4(), &EstimateSettings::new().pipeline_stages(2)).unwrap();
    let ranks = e.ranks(Parallel::new(1, 2).unwrap(), 1).unwrap();
    let blocks: Vec<u64> = ranks.iter().map(|r| r.pool.bytes_per_block).collect();
    assert_eq!(blocks, [311_808, 303_360]);
}

#[test]
fn hy_v4_without_indexer_types_follows_its_frequency_or_pattern() {
    let bytes_per_block = |config: &Value| {
        let e = estimate(config, &EstimateSettings::new()).unwrap();
        e.ranks(Parallel::new(1, 1).unwrap(), 1).unwrap()[0]
            .pool
            .bytes_per_block
    };
    let mut by_freq = small_hy_v4();
    by_freq.as_object_mut().unwrap().remove("indexer_types");
    // Neither key: every layer keeps keys, 8 x 73,728 + 8 x 8,448.
    assert_eq!(bytes_per_block(&by_freq), 657_408);
    // Frequency 3 from offset 2: max(i - 1, 0) % 3 == 0 keeps layers 0, 1,
    // 4 and 7: 589,824 + 4 x 8,448 = 623,616.
    by_freq["index_topk_freq"] = json!(3);
    assert_eq!(bytes_per_block(&by_freq), 623_616);
    // Offset 0: max(i + 1, 0) % 3 == 0 keeps 2 and 5: 589,824 + 16,896.
    by_freq["index_skip_topk_offset"] = json!(0);
    assert_eq!(bytes_per_block(&by_freq), 606_720);
    // A pattern's "S" shares: "FSFSSSSS" keeps 0 and 2 (and the pattern
    // wins over the frequency).
    by_freq["index_topk_pattern"] = json!("FSFSSSSS");
    assert_eq!(bytes_per_block(&by_freq), 606_720);
    by_freq["index_topk_pattern"] = json!("FSSSSSSS");
    assert_eq!(bytes_per_block(&by_freq), 589_824 + 8_448);
}

#[test]
fn hy_v4s_indexers_vllm_refuses_or_kv_has_not_checked_are_refused_by_name() {
    let mut short = small_hy_v4();
    short["indexer_types"] = json!(["full", "shared"]);
    let text = refusal(estimate(&short, &EstimateSettings::new()));
    assert!(
        text.contains("`indexer_types` has 2 entries for 8 layers (vLLM: \"indexer_types must"),
        "{text}"
    );
    let mut other = small_hy_v4();
    other["indexer_types"][3] = json!("half");
    let text = refusal(estimate(&other, &EstimateSettings::new()));
    assert!(text.contains("`indexer_types` has \"half\""), "{text}");
    // A dense MLA layer among sparse ones kv has not checked.
    let mut dense = small_hy_v4();
    dense["layer_types"][7] = json!("full_attention");
    let text = refusal(estimate(&dense, &EstimateSettings::new()));
    assert!(
        text.contains("`layer_types` has \"full_attention\": HY-V4 runs dense MLA"),
        "{text}"
    );
    let mut untyped = small_hy_v4();
    untyped.as_object_mut().unwrap().remove("layer_types");
    let text = refusal(estimate(&untyped, &EstimateSettings::new()));
    assert!(text.contains("`layer_types` is not set"), "{text}");
}

#[test]
fn shared_or_pooled_indexers_are_refused_by_name() {
    // Outside HY-V4's class a "shared" layer kv has not checked; GLM-5-Next
    // pools keys.
    let mut shared = small_dsa();
    shared["indexer_types"] =
        json!(["full", "shared", "full", "full", "full", "full", "full", "full"]);
    let text = refusal(estimate(&shared, &EstimateSettings::new()));
    assert!(
        text.contains("`indexer_types` has \"shared\": layers without an indexer"),
        "{text}"
    );
    assert!(text.contains("checked only for HY-V4"), "{text}");
    let mut all_full = small_dsa();
    all_full["indexer_types"] = json!(vec!["full"; 8]);
    assert!(estimate(&all_full, &EstimateSettings::new()).is_ok());
    let mut pooled = small_dsa();
    pooled["index_kpool"] = json!(16);
    let text = refusal(estimate(&pooled, &EstimateSettings::new()));
    assert!(
        text.contains("`index_kpool` 16: indexer keys pooled over 16 positions"),
        "{text}"
    );
    pooled["index_kpool"] = json!(1);
    assert!(estimate(&pooled, &EstimateSettings::new()).is_ok());
}

#[test]
fn a_latent_alone_keeps_the_ordinary_grouping() {
    // Without `index_topk`: one latent, no indexer, vLLM's ordinary group.
    let mut v3 = small_dsa();
    for key in ["index_topk", "index_head_dim", "index_n_heads"] {
        v3.as_object_mut().unwrap().remove(key);
    }
    v3["architectures"] = json!(["DeepseekV3ForCausalLM"]);
    v3["model_type"] = json!("deepseek_v3");
    let e = estimate(&v3, &EstimateSettings::new()).unwrap();
    assert_eq!(e.block_size, 16);
    let ranks = e.ranks(Parallel::new(1, 1).unwrap(), 1).unwrap();
    assert!(!ranks[0].pool.one_group);
    // 8 layers x 16 x 1,152 B.
    assert_eq!(ranks[0].pool.bytes_per_block, 8 * 16 * 1152);
}
