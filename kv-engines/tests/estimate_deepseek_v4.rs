//! DeepSeek-V4 on vLLM 0.33 (Hopper, FlashMLA's sparse kernels): a
//! sliding-window latent in every layer; beside it, a compressed latent and
//! its compressor's float32 state in each CSA (4 tokens a state) and HCA
//! (128) layer, and an indexer's keys and compressor state in each CSA
//! layer. Every page is padded to 576 B and the cache packed block-outermost.
//! Figures worked out by hand from vLLM's rules (models/deepseek_v4,
//! `kv_cache_interface.py`, `kv_cache_planning.py`), each in a comment; this
//! small model, the registry's and the published layout were also run
//! through vLLM's own objects (scripts/vllm/compare.py: all agree).

mod common;

use common::{pools, refused, row};

use kv_core::{Parallel, Storage};
use kv_engines::estimate::{estimate, EstimateSettings};
use serde_json::{json, Value};

/// A DeepSeek-V4 no script ships: 5 layers, sliding-only, CSA, HCA, CSA,
/// HCA; window 128, 8,192 positions.
fn small_v4() -> Value {
    json!({
        "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
        "torch_dtype": "bfloat16", "hidden_size": 4096, "num_hidden_layers": 5,
        "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512,
        "q_lora_rank": 1024, "o_groups": 8, "o_lora_rank": 1024, "index_head_dim": 128,
        "index_n_heads": 64, "index_topk": 512, "sliding_window": 128,
        "max_position_embeddings": 8192, "num_nextn_predict_layers": 1,
        "compress_rates": {"compressed_sparse_attention": 4,
                           "heavily_compressed_attention": 128},
        "layer_types": ["sliding_attention", "compressed_sparse_attention",
                        "heavily_compressed_attention", "compressed_sparse_attention",
                        "heavily_compressed_attention"],
    })
}

/// Each declaration's row at 8,192 positions, 2 x 2,048 tokens in flight.
const ROWS: [(&str, u64); 7] = [
    // Every layer: 64 x 584 = 37,376 B up to 576: 37,440 a page of 64
    // tokens; cdiv(min(127 + 4,096, 8,192), 64) + 1 = 67 pages, 5 layers.
    ("sliding_window_latent", 5 * 67 * 37_440),
    // CSA: 256 / 4 = 64 states of 584 B: 37,440; cdiv(8,192, 256) = 32.
    ("compressed_latent_c4", 2 * 32 * 37_440),
    // 4 slots of 2 x 2 x 512 float32 = 32,768 B up to 32,832; window 8:
    // cdiv(min(7 + 4,096, 8,192), 4) + 1 = 1,027 pages.
    ("c4_compressor_state", 2 * 1027 * 32_832),
    // 64 states of 128 + 4 B = 8,448 up to 8,640; 32 pages.
    ("indexer_keys_c4", 2 * 32 * 8640),
    // 4 slots of 2 x 2 x 128 float32 = 8,192 up to 8,640; 1,027 pages.
    ("indexer_compressor_state", 2 * 1027 * 8640),
    // HCA: 256 / 128 = 2 states of 584 = 1,168 up to 1,728; 32 pages.
    ("compressed_latent_c128", 2 * 32 * 1728),
    // 8 slots of 2 x 512 float32 = 32,768 up to 32,832; window 128:
    // cdiv(4,223, 8) + 1 = 529 pages.
    ("c128_compressor_state", 2 * 529 * 32_832),
];

#[test]
fn every_layer_keeps_a_sliding_latent_and_compressed_layers_their_own_caches() {
    let e = estimate(&small_v4(), &EstimateSettings::new()).unwrap();
    assert_eq!(e.max_model_len, 8192);
    assert_eq!(e.block_size, 256);
    let names: Vec<&str> = e.specs.iter().map(|s| &*s.name).collect();
    assert_eq!(names, ROWS.map(|(name, _)| name));
    for (name, bytes) in ROWS {
        assert_eq!(row(&e, name), bytes, "{name}");
    }
    // Per position, a state's share of its padded page: 585 x 5 + 585 x 2 +
    // 8,208 x 2 + 135 x 2 + 2,160 x 2 + 864 x 2 + 4,104 x 2.
    let ranks = e.ranks(Parallel::new(1, 1).unwrap(), 256).unwrap();
    assert_eq!(ranks[0].totals.per_position, 35_037);
    assert_eq!(
        ranks[0].totals.per_row,
        ROWS.iter().map(|(_, b)| b).sum::<u64>()
    );
}

#[test]
fn vllm_packs_each_bucket_of_one_block_and_window() {
    let e = estimate(&small_v4(), &EstimateSettings::new()).unwrap();
    let pool = &pools(&e, 1, 1)[0];
    assert!(pool.packed);
    // Buckets: sliding (64, w128) 5 x 37,440; MLA (256) 2 x 37,440, 2 x
    // 8,640, 2 x 1,728, balanced; states (4, w8) 2 x 32,832, 2 x 8,640;
    // states (8, w128) 2 x 32,832. Repeats: the d in [2, 5] padding
    // [5, 2, 2, 2] least, 2; the sliding bucket cut in cdiv(5, 2) = 3.
    let groups: Vec<(&str, u64)> = pool.kinds.iter().map(|k| (&*k.name, k.groups)).collect();
    assert_eq!(
        groups,
        [
            ("sliding_window_latent", 3),
            ("compressed_latent_c4", 1),
            ("c4_compressor_state", 1),
            ("indexer_keys_c4", 0),
            ("indexer_compressor_state", 0),
            ("compressed_latent_c128", 0),
            ("c128_compressor_state", 1),
        ]
    );
    assert_eq!(pool.group_size, 2);
    // The widest group is the MLA one: 2 x (37,440 + 8,640 + 1,728).
    assert_eq!(pool.bytes_per_block, 95_616);
    assert_eq!(pool.widest_group_layers, 6);
    assert_eq!(pool.page_bytes, 37_440);
    // 3 x 67 + 32 + 1,027 + 529.
    assert_eq!(pool.blocks_per_request, 1789);
    assert_eq!(pool.per_row_bytes, 1789 * 95_616);
}

#[test]
fn pipeline_stages_hold_their_layers_and_every_group() {
    let e = estimate(&small_v4(), &EstimateSettings::new().pipeline_stages(2)).unwrap();
    // vLLM splits 5 layers 3 + 2; 3 x 2,048 tokens in flight: sliding
    // cdiv(127 + 6,144, 64) + 1 = 99, CSA states cdiv(7 + 6,144, 4) + 1 =
    // 1,539, HCA states cdiv(6,271, 8) + 1 = 785.
    let stages = pools(&e, 1, 2);
    for pool in &stages {
        // One of each compressed kind, and one sliding latent in each of
        // the three sliding groups: 37,440 + 8,640 + 1,728.
        assert_eq!(pool.bytes_per_block, 47_808);
        assert_eq!(pool.blocks_per_request, 3 * 99 + 32 + 1539 + 785);
    }
    let held: Vec<u64> = stages[0].kinds.iter().map(|k| k.layers_on_rank).collect();
    assert_eq!(held, [3, 1, 1, 1, 1, 1, 1]);
}

#[test]
fn every_format_is_fp8_ds_mla_and_tp_changes_nothing() {
    for name in ["fp8", "fp8_e4m3", "fp8_e5m2"] {
        let settings = EstimateSettings::new().kv_format(Storage::from_name(name).unwrap());
        let e = estimate(&small_v4(), &settings).unwrap();
        for (name, bytes) in ROWS {
            assert_eq!(row(&e, name), bytes, "{name}");
        }
    }
    // One head of each cache, never split: every rank of TP 8 holds it all.
    let tp8 = estimate(&small_v4(), &EstimateSettings::new().tensor_parallel(8)).unwrap();
    let tp8 = pools(&tp8, 8, 1);
    assert_eq!(tp8.len(), 8);
    assert!(tp8.iter().all(|pool| pool.per_row_bytes == 1789 * 95_616));
}

#[test]
fn layer_kinds_come_from_layer_types_else_compress_ratios_else_the_default() {
    // The legacy per-layer ratios give the same layers (transformers maps 0,
    // 4 and 128 to layer types), an MTP entry past the layers ignored.
    let mut legacy = small_v4();
    legacy.as_object_mut().unwrap().remove("layer_types");
    legacy["compress_ratios"] = json!([0, 4, 128, 4, 128, 0]);
    let e = estimate(&legacy, &EstimateSettings::new()).unwrap();
    for (name, bytes) in ROWS {
        assert_eq!(row(&e, name), bytes, "{name}");
    }
    // Neither: transformers' default, HCA HCA HCA CSA HCA: 1 CSA, 4 HCA.
    legacy.as_object_mut().unwrap().remove("compress_ratios");
    let e = estimate(&legacy, &EstimateSettings::new()).unwrap();
    assert_eq!(row(&e, "compressed_latent_c4"), 32 * 37_440);
    assert_eq!(row(&e, "compressed_latent_c128"), 4 * 32 * 1728);
    assert!(
        e.detected.contains("transformers' default"),
        "{}",
        e.detected
    );
    // A type `compress_rates` leaves out has no ratio: sliding alone.
    let mut only_csa = small_v4();
    only_csa["compress_rates"] = json!({"compressed_sparse_attention": 4});
    let e = estimate(&only_csa, &EstimateSettings::new()).unwrap();
    assert!(e.specs.iter().all(|s| !s.name.contains("c128")));
    assert_eq!(e.specs.len(), 5);
}

#[test]
fn vllm_refuses_a_format_that_is_not_fp8_dcp_and_other_ratios_in_its_words() {
    let bf16 = refused(
        &small_v4(),
        EstimateSettings::new().kv_format(Storage::from_name("bfloat16").unwrap()),
    );
    assert!(
        bf16.contains(
            "would not start: ValueError: DeepseekV4 fp8_ds_mla layout only supports fp8"
        ),
        "{bf16}"
    );
    let dcp = refused(
        &small_v4(),
        EstimateSettings::new()
            .tensor_parallel(2)
            .decode_context_parallel(2),
    );
    assert!(dcp.contains("DCP not support sliding window"), "{dcp}");
    let mut two = small_v4();
    two["compress_rates"]["compressed_sparse_attention"] = json!(2);
    let text = refused(&two, EstimateSettings::new());
    assert!(
        text.contains("assert compress_ratio in [4, 128] (layer 1"),
        "{text}"
    );
    // The legacy scalar folds in over the map.
    let mut legacy = small_v4();
    legacy["compress_rate_hca"] = json!(64);
    let text = refused(&legacy, EstimateSettings::new());
    assert!(text.contains("layer 2"), "{text}");
}

#[test]
fn what_kv_has_not_checked_is_refused_by_name() {
    let per_token_head = refused(
        &small_v4(),
        EstimateSettings::new().kv_format(Storage::from_name("fp8_per_token_head").unwrap()),
    );
    assert!(
        per_token_head.contains("per-token-head"),
        "{per_token_head}"
    );
    let block = refused(&small_v4(), EstimateSettings::new().block_size(16));
    assert!(block.contains("blocks of 256 only"), "{block}");
    // 256 given is the block vLLM takes.
    let given = estimate(&small_v4(), &EstimateSettings::new().block_size(256)).unwrap();
    assert_eq!(row(&given, "compressed_latent_c4"), 2 * 32 * 37_440);
    let mtp = refused(&small_v4(), EstimateSettings::new().speculative_tokens(1));
    assert!(mtp.contains("MTP layers"), "{mtp}");
    let mut head = small_v4();
    head["head_dim"] = json!(256);
    let text = refused(&head, EstimateSettings::new());
    assert!(text.contains("`head_dim` 256"), "{text}");
}

#[test]
fn a_bad_layer_list_names_the_key() {
    let error = |patch: Value| {
        let mut config = small_v4();
        if let (Value::Object(base), Value::Object(patch)) = (&mut config, patch) {
            base.extend(patch);
        }
        refused(&config, EstimateSettings::new())
    };
    let text = error(json!({"layer_types": ["sliding_attention"]}));
    assert!(text.contains("lists 1 layers, fewer than the 5"), "{text}");
    let text = error(
        json!({"layer_types": ["sliding_attention", "full_attention",
        "sliding_attention", "sliding_attention", "sliding_attention"]}),
    );
    assert!(
        text.contains("`layer_types[1]` is \"full_attention\""),
        "{text}"
    );
    let text = error(json!({"layer_types": "SCHCH"}));
    assert!(text.contains("not a list of layer types"), "{text}");
    let text = error(json!({"layer_types": null, "compress_ratios": [0, 4, 2, 4, 128]}));
    assert!(text.contains("`compress_ratios[2]` is 2"), "{text}");
    let text = error(json!({"sliding_window": 0}));
    assert!(text.contains("`sliding_window` is 0"), "{text}");
    let text = error(json!({"compress_rates": [4, 128]}));
    assert!(text.contains("not a map of layer types"), "{text}");
}

#[test]
fn each_compressor_state_slides_over_its_own_window() {
    use kv_core::spec::Bound;
    use kv_core::PositionPolicy;
    let e = estimate(&small_v4(), &EstimateSettings::new()).unwrap();
    let window = |name: &str| {
        let spec = e.specs.iter().find(|s| s.name == name).unwrap();
        match spec.positions().map(|p| &p.bound) {
            Some(Bound::Policy(PositionPolicy::VllmSlidingWindow {
                window, block_size, ..
            })) => (*window, *block_size),
            other => panic!("{name}: {other:?}"),
        }
    };
    // coff x ratio: 2 x 4 for CSA, 1 x 128 for HCA (compressor.py:164);
    // blocks 4 and 8; the sliding latent's window 128 in blocks of 64.
    assert_eq!(window("c4_compressor_state"), (8, 4));
    assert_eq!(window("indexer_compressor_state"), (8, 4));
    assert_eq!(window("c128_compressor_state"), (128, 8));
    assert_eq!(window("sliding_window_latent"), (128, 64));
}

#[test]
fn a_wider_indexer_key_keeps_its_scales_and_the_words_say_how_pages_pad() {
    // index_head_dim 512: 512 fp8 + 512 / 128 x 4 B of scales = 528 B a
    // state, 64 of them 33,792 B up to 576: 33,984 = 531 B a state; its
    // compressor 2 x 2 x 512 float32 = 8,192 B a slot, 4 a page 32,768 up
    // to 32,832 = 8,208.
    let mut config = small_v4();
    config["index_head_dim"] = json!(512);
    let e = estimate(&config, &EstimateSettings::new()).unwrap();
    assert_eq!(row(&e, "indexer_keys_c4"), 2 * 32 * 33_984);
    assert_eq!(row(&e, "indexer_compressor_state"), 2 * 1027 * 32_832);
    let cache = |name: &str| {
        e.specs
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.cache.to_string())
            .unwrap()
    };
    let text = cache("sliding_window_latent");
    assert!(
        text.contains("a page of 37376 B padded to 37440 B: 585 B a token"),
        "{text}"
    );
    let text = cache("compressed_latent_c128");
    assert!(
        text.contains("block 256 tokens = 2 states, a page of 1168 B padded to 1728 B"),
        "{text}"
    );
    assert!(
        e.convention
            .contains("block_size 256 (DeepSeek-V4's sparse MLA kernels run blocks of 256 only"),
        "{}",
        e.convention
    );
}
