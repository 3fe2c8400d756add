//! The modern models side by side with the peers, table-driven.
//!
//! kv's figures come from the example's declarations (`kv_examples::modern`),
//! read from the shipped configs. Every other figure here is written by hand
//! from the peers' published formulas (`shared/reference/PEERS.md`), apart
//! from `modern::peers::PEERS` (the data the page prints), which is checked
//! against these hand-written numbers too: a slip in either side fails.

use kv_core::pattern::LayerKind;
use kv_core::spec::Layout;
use kv_core::{BlockFormat, HfConfig, KvSpec, ModelLocalKv, Storage};
use kv_examples::modern::{
    config_path, kv_figures, modern_models, peers, KvFigures, DEPLOYMENT,
    GEMMA3_SLIDING_WINDOW_PATTERN,
};

/// Figures one peer gives for one model: `(per token, per row)`, `None`
/// where the peer has no such cache or formula.
type Pair = Option<(u64, u64)>;

/// One row of the table: the model, kv's figures, and each peer's, all by hand.
struct Expected {
    model: &'static str,
    kv: (u64, u64),
    vllm: Pair,
    llama_cpp: Pair,
    transformers: Pair,
    naive: Pair,
}

/// Every figure written out by hand. Units: bytes. Positions at the
/// deployment: max_model_len 8192, 2048 batched tokens x 2 batches in flight
/// (vLLM 0.33, async scheduling), block 16 (hybrids: raised by vLLM's rule);
/// llama.cpp n_ctx 8192 for one sequence, n_ubatch 512; StaticCache 8192.
fn table() -> Vec<Expected> {
    vec![
        Expected {
            model: "Llama-3-8B",
            // L x K,V x kvh x hd x bf16 = 131,072 B per token; x 8192 positions.
            kv: (32 * 2 * 8 * 128 * 2, 32 * 2 * 8 * 128 * 2 * 8192),
            // page_size_bytes = B 16 x kvh 8 x (hd 128 + hdv 128) x 2 = 65,536 per layer;
            // max_memory_usage_bytes = cdiv(8192, 16) = 512 pages per layer.
            vllm: Some((65_536 / 16 * 32, 512 * 65_536 * 32)),
            // ggml_row_size(f16, 1024) = 2048 B, K and V, 8192 cells (already a multiple of 256).
            llama_cpp: Some(((2048 + 2048) * 32, (2048 + 2048) * 32 * 8192)),
            // StaticCache: zeros(1, 8, 8192, 128) bf16 for K and V, 32 layers.
            transformers: Some((131_072, 2 * 32 * (8 * 8192 * 128) * 2)),
            naive: Some((131_072, 1_073_741_824)),
        },
        Expected {
            model: "Mistral-7B-v0.1",
            // vLLM 0.33 SlidingWindowSpec: min(4096 - 1 + 2 x 2048, 8192) = 8191
            // tokens -> cdiv(8191, 16) = 512 blocks, + 1 = 513 blocks = 8208 positions.
            kv: (131_072, 131_072 * 8208),
            vllm: Some((131_072, 513 * 65_536 * 32)),
            // llama.cpp has no SWA for Mistral-7B-v0.1: n_ctx 8192 cells.
            llama_cpp: Some((131_072, 1_073_741_824)),
            // StaticSlidingWindowLayer: min(4096, 8192) = 4096 positions.
            transformers: Some((131_072, 4096 * 131_072)),
            naive: Some((131_072, 1_073_741_824)),
        },
        Expected {
            model: "Gemma-3-27B",
            // 16 kvh x (128 + 128) x 2 B = 8,192 B per layer per token, 62 layers.
            // Sliding (52): min(1024 - 1 + 2 x 2048, 8192) = 5119 -> cdiv(5119, 16)
            // = 320 blocks, + 1 = 321 blocks = 5136 positions. Global (10): 8192.
            kv: (8192 * 62, 8192 * 52 * 5136 + 8192 * 10 * 8192),
            vllm: Some((507_904, (52 * 321 + 10 * 512) * (16 * 8192))),
            // SWA cells: GGML_PAD(min(8192, 1024 x 1 + 512), 256) = 1536.
            llama_cpp: Some((507_904, 8192 * (52 * 1536 + 10 * 8192))),
            // StaticSlidingWindowLayer min(1024, 8192) = 1024 on the sliding layers.
            transformers: Some((507_904, 8192 * (52 * 1024 + 10 * 8192))),
            naive: Some((507_904, 507_904 * 8192)),
        },
        Expected {
            model: "DeepSeek-V2-Lite",
            // 27 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x bf16 = 31,104 B.
            kv: (27 * 576 * 2, 31_104 * 8192),
            // MLA page: 16 x 576 x 2 = 18,432 B per layer, 512 pages.
            vllm: Some((18_432 / 16 * 27, 18_432 * 512 * 27)),
            llama_cpp: None,
            // transformers 5.25 caches the latent: K (1, 1, 8192, 512) and V
            // (1, 1, 8192, 64) in bf16 per layer = 1,152 B per token per layer.
            transformers: Some((1_152 * 27, 1_152 * 8192 * 27)),
            // 2 x 27 x 16 (num_attention_heads) x 128 (2048 / 16) x 2.
            naive: Some((221_184, 221_184 * 8192)),
        },
        Expected {
            model: "Jamba-v0.1",
            // 4 attention layers x 8 x 256 x 2 = 16,384 B per token (4,096 per layer).
            // Mamba page: conv 3 x 8192 + ssm 8192 x 16 = 155,648 bf16 elements =
            // 311,296 B. vLLM block: 16 x cdiv(311_296, 16 x 4_096 = 65_536) = 16 x 5
            // = 80 tokens; page 80 x 4,096 = 327,680 B. Attention: cdiv(8192, 80) =
            // 103 pages per layer; Mamba: 2 pages per layer (align mode).
            kv: (16_384, 4 * 103 * 327_680 + 28 * 2 * 327_680),
            vllm: Some((16_384, 4 * 103 * 327_680 + 28 * 2 * 327_680)),
            // Recurrent r (3 x 8192) and s (16 x 8192) in f32, one per sequence.
            llama_cpp: Some((16_384, 16_384 * 8192 + 28 * 155_648 * 4)),
            // conv (8192, 4) in bf16 + ssm (8192, 16) in f32 = 589,824 B per layer.
            transformers: Some((16_384, 16_384 * 8192 + 28 * 589_824)),
            naive: Some((131_072, 1_073_741_824)),
        },
        Expected {
            model: "Qwen3-Next-80B-A3B",
            // 12 full layers x 2 kvh x (256 + 256) x 2 B = 24,576 B per token
            // (2,048 per layer). DeltaNet page: ssm 32 x 128 x 128 = 524,288 + conv
            // 8192 x 3 = 24,576 elements, bf16: 1,097,728 B. vLLM block (Hopper,
            // FlashInfer's 64-token checkpoints): 64 x cdiv(1_097_728, 64 x 2_048 =
            // 131_072) = 64 x 9 = 576; page 576 x 2,048 = 1,179,648 B. Attention:
            // cdiv(8192, 576) = 15 pages per layer; DeltaNet: 3 pages per layer.
            kv: (24_576, 12 * 15 * 1_179_648 + 36 * 3 * 1_179_648),
            vllm: Some((24_576, 12 * 15 * 1_179_648 + 36 * 3 * 1_179_648)),
            llama_cpp: None,
            // ssm f32: 524,288 x 4; conv 8192 x 4 positions x 2 B.
            transformers: Some((24_576, 24_576 * 8192 + 36 * (2_097_152 + 65_536))),
            // 2 x 48 x 2 x 256 x 2 = 98,304 B per token.
            naive: Some((98_304, 98_304 * 8192)),
        },
        Expected {
            model: "Whisper-large-v3",
            // 32 decoder layers x 20 heads x 64 x 2 (K,V) x 2 (f16) x 1500 positions.
            kv: (32 * 20 * 64 * 2 * 2, 32 * 20 * 64 * 2 * 2 * 1500),
            // Cross-attention page 16 x 20 x 128 x 2 = 81,920 B;
            // cdiv(max_num_encoder_input_tokens = max_num_batched_tokens 2048, 16)
            // = 128 pages.
            vllm: Some((163_840, 128 * 81_920 * 32)),
            llama_cpp: None,
            transformers: Some((163_840, 245_760_000)),
            naive: Some((0, 0)),
        },
        Expected {
            model: "Llama-3-8B q8_0 KV",
            // q8_0: 34 B per 32 elements. A 128-wide head is 4 blocks = 136 B.
            // 32 layers x 8 heads x (K 136 + V 136) = 69,632 B; 8192 cells.
            kv: (32 * 8 * (136 + 136), 69_632 * 8192),
            // vLLM fp8 (its 8-bit KV): 1 B per element.
            vllm: Some((65_536, 65_536 * 8192)),
            llama_cpp: Some((69_632, 570_425_344)),
            transformers: None,
            naive: Some((131_072, 1_073_741_824)),
        },
    ]
}

fn kv_of(model: &str) -> KvFigures {
    let models = modern_models().expect("the shipped configs load");
    let found = models
        .iter()
        .find(|m| m.name == model)
        .unwrap_or_else(|| panic!("{model} is not among modern_models()"));
    kv_figures(found.root.as_ref()).expect("declarations are valid")
}

fn pair(figure: &peers::PeerFigure) -> Pair {
    match (figure.per_token, figure.per_row) {
        (Some(token), Some(row)) => Some((token, row)),
        (None, None) => None,
        other => panic!("a figure gives both or neither: {other:?}"),
    }
}

#[test]
fn kv_figures_match_the_hand_arithmetic() {
    for row in table() {
        let kv = kv_of(row.model);
        assert_eq!((kv.per_token, kv.per_row), row.kv, "{}: kv", row.model);
    }
}

#[test]
fn the_printed_peer_figures_match_the_hand_arithmetic() {
    for row in table() {
        let printed = peers::peer_row(row.model)
            .unwrap_or_else(|| panic!("{}: no row in modern::peers::PEERS", row.model));
        assert_eq!(pair(&printed.vllm), row.vllm, "{}: vLLM", row.model);
        assert_eq!(
            pair(&printed.llama_cpp),
            row.llama_cpp,
            "{}: llama.cpp",
            row.model
        );
        assert_eq!(
            pair(&printed.transformers),
            row.transformers,
            "{}: transformers",
            row.model
        );
        assert_eq!(pair(&printed.naive), row.naive, "{}: naive", row.model);
    }
}

#[test]
fn every_model_has_peers_and_every_peer_row_a_model() {
    let models: Vec<&str> = modern_models().unwrap().iter().map(|m| m.name).collect();
    let printed: Vec<&str> = peers::PEERS.iter().map(|r| r.model).collect();
    let tested: Vec<&str> = table().iter().map(|r| r.model).collect();
    assert_eq!(models, printed);
    assert_eq!(models, tested);
}

/// Where kv and a peer agree the line says so; where they differ it says why;
/// always one line.
#[test]
fn every_difference_is_explained_in_one_line() {
    for row in table() {
        let printed = peers::peer_row(row.model).unwrap();
        for (who, figure) in printed.named() {
            let why = figure.why;
            assert!(
                !why.trim().is_empty() && !why.contains('\n'),
                "{}: {who}: {why:?}",
                row.model
            );
            match pair(figure) {
                Some(peer) => assert_eq!(
                    why.starts_with("agrees"),
                    peer == row.kv,
                    "{}: {who} gives {peer:?}, kv {:?}, and says {why:?}",
                    row.model,
                    row.kv
                ),
                None => assert!(
                    why.starts_with("not compared: "),
                    "{}: {who}: {why}",
                    row.model
                ),
            }
        }
    }
}

/// Where kv describes a peer's cache, it gives that peer's figure exactly.
#[test]
fn kv_reproduces_the_engine_each_declaration_names() {
    let models = modern_models().unwrap();
    for row in table() {
        let model = models.iter().find(|m| m.name == row.model).unwrap();
        let mut specs = Vec::new();
        model.root.kv_declare(&mut specs).unwrap();
        let engine = specs[0].cache.split_whitespace().next().unwrap();
        let peer = match engine {
            "vLLM" => row.vllm,
            "llama.cpp" => row.llama_cpp,
            "transformers" => row.transformers,
            other => panic!("{}: unknown engine {other}", row.model),
        };
        assert!(
            specs.iter().all(|s| s.cache.starts_with(engine)),
            "{}: one engine per model",
            row.model
        );
        assert_eq!(peer, Some(row.kv), "{}: {engine}", row.model);
    }
}

fn declared(model: &str) -> Vec<KvSpec> {
    let models = modern_models().unwrap();
    let found = models.iter().find(|m| m.name == model).unwrap();
    let mut specs = Vec::new();
    found.root.kv_declare(&mut specs).unwrap();
    specs
}

#[test]
fn the_issues_figures() {
    // DeepSeek-V2-Lite: 27 x 576 x 2 = 31,104 B per token.
    let latent = &declared("DeepSeek-V2-Lite")[0];
    assert_eq!(latent.layout.bytes_per_position(), Some(Ok(31_104)));
    assert_eq!(27 * 576 * 2, 31_104);
    // Llama-3-8B: 131,072 B per token.
    assert_eq!(kv_of("Llama-3-8B").per_token, 131_072);
    // Whisper cross-attention: 32 x 20 x 64 x 2 (K,V) x 2 (f16) x 1500.
    let cross = &declared("Whisper-large-v3")[0];
    assert_eq!(cross.bytes_per_row(), Ok(32 * 20 * 64 * 2 * 2 * 1500));
    assert_eq!(cross.positions().map(|p| p.count), Some(1500));
    // q8_0: 34 bytes per 32 elements.
    assert_eq!(
        (
            BlockFormat::Q8_0.block_bytes(),
            BlockFormat::Q8_0.block_elems()
        ),
        (34, 32)
    );
    let q8 = &declared("Llama-3-8B q8_0 KV")[0];
    let geometry = q8.geometry().unwrap();
    assert_eq!(geometry.storage, Storage::Blocks(BlockFormat::Q8_0));
    assert_eq!(geometry.bytes_per_head(), Ok(128 / 32 * 34 * 2));
}

/// Issue #19: the peer table's figures that were wrong, each against hand
/// arithmetic from the peer's source.
#[test]
fn issue_19_figures() {
    let peer = |model: &str| peers::peer_row(model).unwrap();
    // transformers 5.25 caches DeepSeek-V2-Lite's compressed latent:
    // 27 layers x (512 + 64) x 2 B = 31,104 B per token, as vLLM.
    let deepseek = peer("DeepSeek-V2-Lite");
    assert_eq!(deepseek.transformers.per_token, Some(31_104));
    assert_eq!(deepseek.transformers.per_row, Some(31_104 * 8192));
    assert_eq!(deepseek.transformers.per_row, deepseek.vllm.per_row);
    // transformers' Jamba ssm state is f32: per layer conv 8192 x 4 x 2 +
    // ssm 8192 x 16 x 4 = 65,536 + 524,288; 4 attention layers x 2 x 8 x 8192
    // x 128 x 2 = 134,217,728; 134,217,728 + 28 x 589,824 = 150,732,800 B.
    assert_eq!(peer("Jamba-v0.1").transformers.per_row, Some(150_732_800));
    assert_eq!(150_732_800, 143 * 1_048_576 + 786_432); // 143.75 MiB
                                                        // llama.cpp at 256 sequences and n_ctx 8192 with separate caches: each
                                                        // GGML_PAD(8192 / 256 = 32, 256) = 256 cells, 65,536 cells in all, x 69,632 B
                                                        // per cell = 4,563,402,752 B = 4,352 MiB (not 256 x 544 MiB = 139,264 MiB).
    assert_eq!(256 * 256 * 69_632_u64, 4_563_402_752);
    assert_eq!(4_563_402_752_u64, 4352 * 1_048_576);
    let q8 = peer("Llama-3-8B q8_0 KV").llama_cpp.why;
    assert!(q8.contains("GGML_PAD(8192 / 256, 256) = 256 cells"), "{q8}");
    assert!(q8.contains("4,352 MiB"), "{q8}");
    // ... so kv declares one cache, not one per max_num_seqs.
    let cache = &declared("Llama-3-8B q8_0 KV")[0];
    assert_eq!(cache.rows.count(256), 1);
    assert_eq!(cache.peak_bytes(256), Ok(69_632 * 8192));
    // vLLM 0.33, 2 x 2048 tokens in flight: Mistral-7B-v0.1 cdiv(min(4095 +
    // 4096, 8192), 16) + 1 = 513 blocks; Gemma-3-27B sliding cdiv(min(1023 +
    // 4096, 8192), 16) + 1 = 321 blocks, per row (52 x 321 + 10 x 512) x 16 x
    // 8,192 = 2,858,942,464 B.
    assert_eq!(
        peer("Mistral-7B-v0.1").vllm.per_row,
        Some(513 * 16 * 131_072)
    );
    assert_eq!(peer("Gemma-3-27B").vllm.per_row, Some(2_858_942_464));
    assert_eq!(kv_of("Gemma-3-27B").per_row, 2_858_942_464);
    // Jamba-v0.1 in vLLM 0.33: 4 x 33,751,040 (103 blocks of 80) + 28 x 655,360.
    assert_eq!(103 * 80 * 4096, 33_751_040);
    assert_eq!(2 * 327_680, 655_360);
    assert_eq!(
        peer("Jamba-v0.1").vllm.per_row,
        Some(4 * 33_751_040 + 28 * 655_360)
    );
    assert_eq!(kv_of("Jamba-v0.1").per_row, 153_354_240);
    // Qwen3-Next-80B-A3B in vLLM 0.33 on Hopper: 12 x 15 x 1,179,648 + 36 x 3
    // x 1,179,648 = 212,336,640 + 127,401,984.
    assert_eq!(kv_of("Qwen3-Next-80B-A3B").per_row, 339_738_624);
    assert_eq!(212_336_640 + 127_401_984, 339_738_624);
}

#[test]
fn every_figure_names_the_version_it_follows() {
    for row in peers::PEERS {
        for (who, figure) in row.named() {
            let versioned = match who {
                "transformers" => {
                    figure.why.contains("transformers 5.25") || figure.per_row.is_none()
                }
                _ => true,
            };
            assert!(versioned, "{}: {who}: {}", row.model, figure.why);
        }
    }
    let page = kv_examples::modern::modern_docs_markdown().unwrap();
    for needle in [
        "vLLM 0.33",
        "transformers 5.25",
        "async scheduling on",
        "prefix caching on",
    ] {
        assert!(page.contains(needle), "{needle} missing from the page");
    }
}

#[test]
fn gemma3_has_52_sliding_and_10_global_layers() {
    let specs = declared("Gemma-3-27B");
    let layers: Vec<(&str, u64)> = specs
        .iter()
        .map(|s| (s.name.as_ref(), s.layout.layers()))
        .collect();
    assert_eq!(layers, [("sliding", 52), ("global", 10)]);
    let config = HfConfig::from_path(config_path("gemma-3-27b")).unwrap();
    // The published config leaves the pattern to transformers' default (6):
    // the model supplies it explicitly, and says so; kv-core's model-family
    // table supplies the same default, and both give 52 sliding and 10 global.
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(config_path("gemma-3-27b")).unwrap())
            .unwrap();
    assert!(raw.get("sliding_window_pattern").is_none());
    assert_eq!(GEMMA3_SLIDING_WINDOW_PATTERN, 6);
    for pattern in [
        config
            .clone()
            .with_value("sliding_window_pattern", 6)
            .layer_pattern(),
        config.layer_pattern(),
    ] {
        let pattern = pattern.unwrap();
        assert_eq!(pattern.count(LayerKind::SlidingAttention), 52);
        assert_eq!(pattern.count(LayerKind::FullAttention), 10);
    }
    for spec in &specs {
        assert!(
            spec.note
                .as_deref()
                .is_some_and(|n| n.contains("sliding_window_pattern 6")),
            "{spec:?}"
        );
    }
}

#[test]
fn hybrids_split_their_layers_by_the_config_pattern() {
    let jamba = declared("Jamba-v0.1");
    let kinds: Vec<(&str, u64)> = jamba
        .iter()
        .map(|s| (s.layout.kind(), s.layout.layers()))
        .collect();
    assert_eq!(kinds, [("attention", 4), ("recurrent", 28)]);
    // vLLM 0.33's block for Jamba: 16 x cdiv(311,296, 16 x 4,096) = 80.
    let attention = jamba[0].positions().unwrap();
    assert_eq!(attention.count, 103 * 80);
    let Layout::Recurrent(state) = &jamba[1].layout else {
        panic!("Jamba's Mamba layers are recurrent state")
    };
    // vLLM Mamba1: conv (d_conv - 1, d_inner), ssm (d_inner, d_state), and
    // 80 x 4,096 - 311,296 = 16,384 B of padding up to the attention page.
    let shapes: Vec<[u64; 3]> = state.parts.iter().map(|p| p.shape).collect();
    assert_eq!(shapes, [[3, 8192, 1], [8192, 16, 1], [16_384, 1, 1]]);
    assert_eq!(state.bytes_per_layer(), Ok(327_680));
    assert_eq!(state.slots, 2);
    assert_eq!(state.bytes_per_row(), Ok(28 * 2 * 327_680));

    let qwen = declared("Qwen3-Next-80B-A3B");
    let kinds: Vec<(&str, u64)> = qwen
        .iter()
        .map(|s| (s.layout.kind(), s.layout.layers()))
        .collect();
    assert_eq!(kinds, [("attention", 12), ("recurrent", 36)]);
    // 64 x cdiv(1,097,728, 64 x 2,048) = 576; cdiv(8192, 576) = 15 blocks.
    assert_eq!(qwen[0].positions().unwrap().count, 15 * 576);
    let Layout::Recurrent(state) = &qwen[1].layout else {
        panic!("Qwen3-Next's linear layers are recurrent state")
    };
    // vLLM: conv (2 x 16 x 128 + 32 x 128, conv_kernel 4 - 1), ssm (32, 128, 128),
    // and 576 x 2,048 - 1,097,728 = 81,920 B of padding.
    let shapes: Vec<[u64; 3]> = state.parts.iter().map(|p| p.shape).collect();
    assert_eq!(shapes, [[8192, 3, 1], [32, 128, 128], [81_920, 1, 1]]);
    assert_eq!(state.bytes_per_layer(), Ok(1_179_648));
    assert_eq!(state.slots, 3);
}

#[test]
fn vllm_hybrid_block_size_follows_vllms_rule() {
    use kv_examples::modern::vllm_hybrid_block_size;
    // Jamba: 16 x cdiv(311_296, 65_536) = 16 x 5.
    assert_eq!(vllm_hybrid_block_size(311_296, 4_096, 16, 16), Some(80));
    // Qwen3-Next on Hopper: 64 x cdiv(1_097_728, 131_072) = 64 x 9; with
    // Triton's 16-token alignment 16 x cdiv(1_097_728, 32_768) = 16 x 34.
    assert_eq!(vllm_hybrid_block_size(1_097_728, 2_048, 64, 16), Some(576));
    assert_eq!(vllm_hybrid_block_size(1_097_728, 2_048, 16, 16), Some(544));
    // Never below the configured block; a page that already fits keeps it.
    assert_eq!(vllm_hybrid_block_size(100, 4_096, 16, 16), Some(16));
    assert_eq!(vllm_hybrid_block_size(1, 1, 0, 16), None);
    assert_eq!(vllm_hybrid_block_size(u64::MAX, 2, u64::MAX, 16), None);
}

#[test]
fn sliding_reasons_are_generated_from_the_policy() {
    let mistral = &declared("Mistral-7B-v0.1")[0];
    let positions = mistral.positions().unwrap();
    assert_eq!(positions.count, 8208);
    // The in-flight tokens: 2 x 2048, whatever kv-core calls its input.
    let reason = positions.reason();
    assert!(
        reason.starts_with("(cdiv(min(sliding_window(4096) - 1 + ")
            && reason.ends_with("(4096), max_model_len(8192)), block(16)) + 1) blocks of 16"),
        "{reason}"
    );
    let assumes = mistral.assumes.as_deref().unwrap_or_default();
    assert!(
        assumes.contains("2 batches in flight (async scheduling) x max_num_batched_tokens 2048"),
        "{assumes}"
    );
    assert_eq!(
        (
            DEPLOYMENT.max_model_len,
            DEPLOYMENT.max_num_batched_tokens,
            DEPLOYMENT.vllm_batches_in_flight,
            DEPLOYMENT.block_size,
            DEPLOYMENT.max_num_seqs
        ),
        (8192, 2048, 2, 16, 256)
    );
    assert_eq!(kv_examples::modern::VLLM_IN_FLIGHT_TOKENS, 2 * 2048);
}

#[test]
fn naive_errors_are_the_points_of_the_page() {
    // (naive - kv) / kv, from the hand-written figures.
    let error = |model: &str| {
        let row = table().into_iter().find(|r| r.model == model).unwrap();
        let naive = row.naive.unwrap().1 as f64;
        ((naive - row.kv.1 as f64) / row.kv.1 as f64 * 1000.0).round() / 10.0
    };
    assert_eq!(error("Llama-3-8B"), 0.0);
    assert_eq!(error("Mistral-7B-v0.1"), -0.2);
    assert_eq!(error("Gemma-3-27B"), 45.5);
    assert_eq!(error("DeepSeek-V2-Lite"), 611.1);
    assert_eq!(error("Jamba-v0.1"), 600.2);
    assert_eq!(error("Qwen3-Next-80B-A3B"), 137.0);
    assert_eq!(error("Whisper-large-v3"), -100.0);
    assert_eq!(error("Llama-3-8B q8_0 KV"), 88.2);
    let page = kv_examples::modern::side_by_side_markdown().unwrap();
    for figure in [
        "-0.2%", "+45.5%", "+611.1%", "+600.2%", "+137.0%", "-100.0%", "+88.2%",
    ] {
        assert!(page.contains(figure), "{figure} missing from the table");
    }
}
