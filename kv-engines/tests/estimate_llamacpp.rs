//! llama.cpp's caches for GGUF headers written byte by byte here, against
//! figures worked out by hand (in the comments) and lines llama.cpp 0c1e57098
//! logged for the same geometry (scripts/llamacpp/compare.py ran them).

use kv_core::KvError;
use kv_engines::estimate::llamacpp::{
    estimate, mib, CacheDevice, CachePlacement, FlashAttn, GgmlType, LlamaCppEstimate,
    LlamaCppSettings, Memory,
};
use kv_engines::gguf::GgufMetadata;

/// A metadata value as GGUF types it.
enum V {
    U32(u32),
    U64(u64),
    F32(f32),
    Str(&'static str),
    /// An array of u32.
    U32s(Vec<u32>),
    /// An array of i32.
    I32s(Vec<i32>),
    /// An array of bool.
    Bools(Vec<bool>),
}

/// A GGUF v3 header (no tensors) with `general.architecture` = `arch` and
/// each `(suffix, value)` as `{arch}.{suffix}`.
fn gguf(arch: &str, keys: &[(&str, V)]) -> GgufMetadata {
    fn string(out: &mut Vec<u8>, text: &str) {
        out.extend((text.len() as u64).to_le_bytes());
        out.extend(text.as_bytes());
    }
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend(0u64.to_le_bytes());
    out.extend((keys.len() as u64 + 1).to_le_bytes());
    string(&mut out, "general.architecture");
    out.extend(8u32.to_le_bytes());
    string(&mut out, arch);
    for (suffix, value) in keys {
        string(&mut out, &format!("{arch}.{suffix}"));
        match value {
            V::U32(v) => {
                out.extend(4u32.to_le_bytes());
                out.extend(v.to_le_bytes());
            }
            V::U64(v) => {
                out.extend(10u32.to_le_bytes());
                out.extend(v.to_le_bytes());
            }
            V::F32(v) => {
                out.extend(6u32.to_le_bytes());
                out.extend(v.to_le_bytes());
            }
            V::Str(v) => {
                out.extend(8u32.to_le_bytes());
                string(&mut out, v);
            }
            V::U32s(items) => {
                out.extend(9u32.to_le_bytes());
                out.extend(4u32.to_le_bytes());
                out.extend((items.len() as u64).to_le_bytes());
                for item in items {
                    out.extend(item.to_le_bytes());
                }
            }
            V::I32s(items) => {
                out.extend(9u32.to_le_bytes());
                out.extend(5u32.to_le_bytes());
                out.extend((items.len() as u64).to_le_bytes());
                for item in items {
                    out.extend(item.to_le_bytes());
                }
            }
            V::Bools(items) => {
                out.extend(9u32.to_le_bytes());
                out.extend(7u32.to_le_bytes());
                out.extend((items.len() as u64).to_le_bytes());
                out.extend(items.iter().map(|&b| u8::from(b)));
            }
        }
    }
    GgufMetadata::read(&out[..], "model.gguf").unwrap()
}

/// Llama-3-8B's cache geometry: 32 layers, 32 heads, 8 KV heads of 128.
fn llama3_8b() -> GgufMetadata {
    gguf(
        "llama",
        &[
            ("block_count", V::U32(32)),
            ("context_length", V::U32(8192)),
            ("embedding_length", V::U32(4096)),
            ("attention.head_count", V::U32(32)),
            ("attention.head_count_kv", V::U32(8)),
            ("rope.freq_base", V::F32(500000.0)),
        ],
    )
}

/// Gemma-3-27B's: 62 layers, 16 KV heads of 128, window `window`, the
/// default pattern (one full layer in 6).
fn gemma3(window: u32) -> GgufMetadata {
    gguf(
        "gemma3",
        &[
            ("block_count", V::U32(62)),
            ("context_length", V::U32(131072)),
            ("embedding_length", V::U32(5376)),
            ("attention.head_count", V::U32(32)),
            ("attention.head_count_kv", V::U32(16)),
            ("attention.key_length", V::U32(128)),
            ("attention.value_length", V::U32(128)),
            ("attention.sliding_window", V::U32(window)),
        ],
    )
}

/// Mamba with d_inner 512 (2 x n_embd 256), d_conv 4, d_state 16, 24 layers.
fn mamba() -> GgufMetadata {
    gguf(
        "mamba",
        &[
            ("block_count", V::U32(24)),
            ("context_length", V::U32(1048576)),
            ("embedding_length", V::U32(256)),
            ("ssm.conv_kernel", V::U32(4)),
            ("ssm.inner_size", V::U32(512)),
            ("ssm.state_size", V::U32(16)),
            ("ssm.time_step_rank", V::U32(16)),
        ],
    )
}

fn settings(n_ctx: u32, n_seq: u32) -> LlamaCppSettings {
    let mut s = LlamaCppSettings::default();
    s.n_ctx = n_ctx;
    s.n_seq = n_seq;
    s
}

fn with_types(mut s: LlamaCppSettings, k: GgmlType, v: GgmlType) -> LlamaCppSettings {
    s.type_k = k;
    s.type_v = v;
    s
}

fn run(meta: &GgufMetadata, s: &LlamaCppSettings) -> LlamaCppEstimate {
    estimate(meta, s).unwrap()
}

fn refusal(meta: &GgufMetadata, s: &LlamaCppSettings) -> String {
    estimate(meta, s).unwrap_err().to_string()
}

/// The (cells, layers, streams, K bytes, V bytes) of each cache.
fn caches(e: &LlamaCppEstimate) -> Vec<(u64, u64, u64, u64, u64)> {
    let of = |c: &kv_engines::estimate::llamacpp::KvCache| {
        (c.cells, c.layers, c.streams, c.k_bytes, c.v_bytes)
    };
    match &e.memory {
        Memory::KvCache { cache } => vec![of(cache)],
        Memory::Iswa { base, swa, .. } => vec![of(base), of(swa)],
        other => panic!("not a KV cache: {other:?}"),
    }
}

#[test]
fn q8_0_rows_are_34_bytes_per_32_elements() {
    // A row is 8 heads x 128 = 1024 elements = 32 blocks x 34 B = 1088 B;
    // x 8192 cells x 32 layers = 285,212,672 B = 272 MiB, for K and for V.
    let s = with_types(settings(8192, 1), GgmlType::Q8_0, GgmlType::Q8_0);
    let e = run(&llama3_8b(), &s);
    assert_eq!(caches(&e), [(8192, 32, 1, 285_212_672, 285_212_672)]);
    assert_eq!(e.bytes(), 570_425_344);
    // Logged by llama.cpp for this geometry (README, 2026-12-04).
    assert_eq!(
        e.lines(),
        [
            "llama_init_from_model: enabling flash_attn since it is required for quantized V cache",
            "llama_kv_cache: size =  544.00 MiB (  8192 cells,  32 layers,  1/1 seqs), K (q8_0):  \
             272.00 MiB, V (q8_0):  272.00 MiB",
            "llama_kv_cache: attn_rot_k = 1, n_embd_head_k_all = 128",
            "llama_kv_cache: attn_rot_v = 1, n_embd_head_k_all = 128",
        ]
    );
}

#[test]
fn every_block_type_has_ggml_bytes() {
    // 1024 elements a row: f32 4096 B, f16/bf16 2048, q8_0 32 x 34 = 1088,
    // q4_0 and iq4_nl 32 x 18 = 576, q4_1 640, q5_0 704, q5_1 768. At 256
    // cells (n_ctx 1 pads to 256) x 32 layers = 8192 rows.
    for (t, row) in [
        (GgmlType::F32, 4096),
        (GgmlType::F16, 2048),
        (GgmlType::Bf16, 2048),
        (GgmlType::Q8_0, 1088),
        (GgmlType::Q4_0, 576),
        (GgmlType::Q4_1, 640),
        (GgmlType::Q5_0, 704),
        (GgmlType::Q5_1, 768),
        (GgmlType::Iq4Nl, 576),
    ] {
        let e = run(&llama3_8b(), &with_types(settings(1, 1), t, t));
        assert_eq!(caches(&e), [(256, 32, 1, row * 8192, row * 8192)], "{t}");
        assert_eq!(GgmlType::from_name(t.name()), Some(t));
    }
    assert_eq!(GgmlType::from_name("q8"), None);
}

#[test]
fn each_sequence_has_a_stream_of_padded_cells_unless_unified() {
    // n_ctx 5000 pads to 5120; per stream 5120 / 3 = 1706, padded to 1792;
    // n_ctx becomes 3 x 1792 = 5376. K: 1024 x 2 B x 1792 x 3 x 32 =
    // 352,321,536 B = 336 MiB (llama.cpp: 672.00 MiB for K and V).
    let e = run(&llama3_8b(), &settings(5000, 3));
    assert_eq!((e.n_ctx, e.n_ctx_seq), (5376, 1792));
    assert_eq!(caches(&e), [(1792, 32, 3, 352_321_536, 352_321_536)]);
    assert_eq!(
        e.lines()[0],
        "llama_kv_cache: size =  672.00 MiB (  1792 cells,  32 layers,  3/3 seqs), K (f16):  \
         336.00 MiB, V (f16):  336.00 MiB"
    );
    // Unified: one stream of all 5120 cells: 1024 x 2 x 5120 x 32 =
    // 335,544,320 B = 320 MiB.
    let mut s = settings(5000, 3);
    s.kv_unified = true;
    let e = run(&llama3_8b(), &s);
    assert_eq!((e.n_ctx, e.n_ctx_seq), (5120, 5120));
    assert_eq!(caches(&e), [(5120, 32, 1, 335_544_320, 335_544_320)]);
    assert!(e.lines()[0].contains("(  5120 cells,  32 layers,  3/1 seqs)"));
}

#[test]
fn n_ctx_0_is_the_models_context_length_and_0_sequences_are_1() {
    // context_length 8192: 1024 x 2 x 8192 x 32 = 536,870,912 B each.
    let e = run(&llama3_8b(), &settings(0, 0));
    assert_eq!((e.n_ctx, e.n_seq), (8192, 1));
    assert_eq!(caches(&e), [(8192, 32, 1, 536_870_912, 536_870_912)]);
}

#[test]
fn head_count_kv_defaults_to_head_count_and_key_length_to_embedding_over_heads() {
    // No head_count_kv: 32 KV heads; no key_length: 4096 / 32 = 128. A row
    // is 4096 elements, 8192 B in f16; x 256 cells x 2 layers = 4 MiB.
    let meta = gguf(
        "qwen2",
        &[
            ("block_count", V::U32(2)),
            ("context_length", V::U32(256)),
            ("embedding_length", V::U32(4096)),
            ("attention.head_count", V::U32(32)),
        ],
    );
    let e = run(&meta, &settings(0, 1));
    assert_eq!(caches(&e), [(256, 2, 1, 4_194_304, 4_194_304)]);
}

#[test]
fn per_layer_kv_heads_size_each_layer_and_pad_v_without_flash_attention() {
    // 16 layers with 8, 8, 8, 8, 4, 4, 4, 4, 2, 2, 2, 2, 1, 1, 1, 1 KV heads
    // of 128: 60 heads, 7680 elements a position over all layers; x 2 B x
    // 4096 cells = 62,914,560 B (60 MiB) for K, and for V with flash
    // attention. Without it V is every layer as wide as the widest (1024):
    // 16 x 1024 x 2 x 4096 = 134,217,728 B (128 MiB), and llama.cpp warns.
    let heads = vec![8, 8, 8, 8, 4, 4, 4, 4, 2, 2, 2, 2, 1, 1, 1, 1];
    let meta = gguf(
        "llama",
        &[
            ("block_count", V::U32(16)),
            ("context_length", V::U32(4096)),
            ("embedding_length", V::U32(64)),
            ("attention.head_count", V::U32(32)),
            ("attention.head_count_kv", V::U32s(heads)),
            ("attention.key_length", V::U32(128)),
            ("attention.value_length", V::U32(128)),
        ],
    );
    let e = run(&meta, &settings(4096, 1));
    assert_eq!(caches(&e), [(4096, 16, 1, 62_914_560, 62_914_560)]);
    let mut s = settings(4096, 1);
    s.flash_attn = FlashAttn::Off;
    let e = run(&meta, &s);
    assert!(!e.flash_attn);
    assert_eq!(caches(&e), [(4096, 16, 1, 62_914_560, 134_217_728)]);
    // As llama.cpp logged them.
    assert_eq!(
        e.lines(),
        [
            "llama_kv_cache: the V embeddings have different sizes across layers and FA is not \
             enabled - padding V cache to 1024",
            "llama_kv_cache: size =  188.00 MiB (  4096 cells,  16 layers,  1/1 seqs), K (f16):   \
             60.00 MiB, V (f16):  128.00 MiB",
            "llama_kv_cache: attn_rot_k = 0, n_embd_head_k_all = 128",
            "llama_kv_cache: attn_rot_v = 0, n_embd_head_k_all = 128",
        ]
    );
}

#[test]
fn gemma3_keeps_its_sliding_layers_in_window_plus_ubatch_cells() {
    // 62 layers, one full in 6 (layers 5, 11, ..., 59): 10 full, 52 sliding.
    // 2 sequences, n_ctx 8192: 4096 cells a stream. SWA cells:
    // pad(min(4096, 1024 x 1 + 512), 256) = 1536. A row is 16 x 128 x 2 B =
    // 4096 B: full K 4096 x 4096 x 2 x 10 = 335,544,320 B (320 MiB); SWA K
    // 4096 x 1536 x 2 x 52 = 654,311,424 B (624 MiB).
    let e = run(&gemma3(1024), &settings(8192, 2));
    assert_eq!(
        caches(&e),
        [
            (4096, 10, 2, 335_544_320, 335_544_320),
            (1536, 52, 2, 654_311_424, 654_311_424)
        ]
    );
    assert_eq!(
        e.lines(),
        [
            "llama_kv_cache_iswa: creating non-SWA KV cache, size = 4096 cells",
            "llama_kv_cache: size =  640.00 MiB (  4096 cells,  10 layers,  2/2 seqs), K (f16):  \
             320.00 MiB, V (f16):  320.00 MiB",
            "llama_kv_cache: attn_rot_k = 0, n_embd_head_k_all = 128",
            "llama_kv_cache: attn_rot_v = 0, n_embd_head_k_all = 128",
            "llama_kv_cache_iswa: creating     SWA KV cache, size = 1536 cells",
            "llama_kv_cache: size = 1248.00 MiB (  1536 cells,  52 layers,  2/2 seqs), K (f16):  \
             624.00 MiB, V (f16):  624.00 MiB",
            "llama_kv_cache: attn_rot_k = 0, n_embd_head_k_all = 128",
            "llama_kv_cache: attn_rot_v = 0, n_embd_head_k_all = 128",
        ]
    );
}

#[test]
fn a_unified_sliding_cache_keeps_the_window_for_every_sequence() {
    // Unified: one stream of 8192; SWA pad(min(8192, 1024 x 2 + 512), 256)
    // = 2560.
    let mut s = settings(8192, 2);
    s.kv_unified = true;
    let e = run(&gemma3(1024), &s);
    assert_eq!(
        caches(&e).iter().map(|c| (c.0, c.2)).collect::<Vec<_>>(),
        [(8192, 1), (2560, 1)]
    );
}

#[test]
fn swa_full_makes_the_sliding_cache_full_size_and_says_so() {
    let mut s = settings(8192, 2);
    s.swa_full = true;
    let e = run(&gemma3(1024), &s);
    assert_eq!(
        caches(&e).iter().map(|c| c.0).collect::<Vec<_>>(),
        [4096, 4096]
    );
    assert_eq!(
        e.lines()[0],
        "llama_kv_cache_iswa: using full-size SWA cache (ref: \
         https://github.com/ggml-org/llama.cpp/pull/13194#issuecomment-2868343055)"
    );
    assert!(matches!(e.memory, Memory::Iswa { swa_full: true, .. }));
}

#[test]
fn the_sliding_cache_is_bounded_by_the_full_one_and_ubatch_by_batch_and_n_ctx() {
    // n_ctx 1000 pads to 1024: pad(min(1024, 1536)) = 1024.
    let e = run(&gemma3(1024), &settings(1000, 1));
    assert_eq!(caches(&e)[1].0, 1024);
    // Window 1200, ubatch 512: pad(min(4096, 1712)) = 1792. n_batch 300
    // clamps n_ubatch to 300: pad(1500) = 1536. n_ctx 250 clamps n_batch
    // to 250: pad(min(256, 1450)) = 256, n_ubatch 250.
    assert_eq!(caches(&run(&gemma3(1200), &settings(4096, 1)))[1].0, 1792);
    let mut s = settings(4096, 1);
    s.n_batch = 300;
    let e = run(&gemma3(1200), &s);
    assert_eq!((caches(&e)[1].0, e.n_ubatch), (1536, 300));
    let e = run(&gemma3(1200), &settings(250, 1));
    assert_eq!((caches(&e)[1].0, e.n_ubatch), (256, 250));
    // n_ubatch 0 is n_batch: 1200 + 2048 = 3248, pad 3328.
    let mut s = settings(4096, 1);
    s.n_ubatch = 0;
    assert_eq!(caches(&run(&gemma3(1200), &s))[1].0, 3328);
}

#[test]
fn a_pattern_array_names_the_sliding_layers_and_a_number_overrides_the_default() {
    // Flags for 12 layers, 4 false (full): layers 2, 5, 6, 11.
    let flags = vec![
        true, true, false, true, true, false, false, true, true, true, true, false,
    ];
    let meta = gguf(
        "gemma3",
        &[
            ("block_count", V::U32(12)),
            ("context_length", V::U32(8192)),
            ("embedding_length", V::U32(64)),
            ("attention.head_count", V::U32(8)),
            ("attention.head_count_kv", V::U32(4)),
            ("attention.key_length", V::U32(128)),
            ("attention.value_length", V::U32(128)),
            ("attention.sliding_window", V::U32(512)),
            ("attention.sliding_window_pattern", V::Bools(flags)),
        ],
    );
    let e = run(&meta, &settings(8192, 1));
    // SWA: pad(min(8192, 512 + 512)) = 1024. Row 4 x 128 x 2 = 1024 B:
    // full 1024 x 8192 x 4 = 33,554,432; SWA 1024 x 1024 x 8 = 8,388,608.
    assert_eq!(
        caches(&e),
        [
            (8192, 4, 1, 33_554_432, 33_554_432),
            (1024, 8, 1, 8_388_608, 8_388_608)
        ]
    );
    // A number: pattern 4 over 12 layers makes layers 3, 7, 11 full.
    let meta = gguf(
        "gemma3",
        &[
            ("block_count", V::U32(12)),
            ("context_length", V::U32(8192)),
            ("embedding_length", V::U32(64)),
            ("attention.head_count", V::U32(8)),
            ("attention.key_length", V::U32(128)),
            ("attention.sliding_window", V::U32(512)),
            ("attention.sliding_window_pattern", V::U32(4)),
        ],
    );
    let layers: Vec<u64> = caches(&run(&meta, &settings(8192, 1)))
        .iter()
        .map(|c| c.1)
        .collect();
    assert_eq!(layers, [3, 9]);
}

#[test]
fn pattern_flags_may_be_u32_and_up_to_512_long() {
    // u32 flags 1, 0, 1, 1 for 4 layers (extra ones ignored): layer 1 full.
    let layers = |flags: Vec<u32>| {
        let meta = gguf(
            "gemma3",
            &[
                ("block_count", V::U32(4)),
                ("context_length", V::U32(4096)),
                ("embedding_length", V::U32(64)),
                ("attention.head_count", V::U32(8)),
                ("attention.sliding_window", V::U32(512)),
                ("attention.sliding_window_pattern", V::U32s(flags)),
            ],
        );
        estimate(&meta, &settings(0, 1)).map(|e| caches(&e).iter().map(|c| c.1).collect::<Vec<_>>())
    };
    assert_eq!(layers(vec![1, 0, 1, 1]).unwrap(), [1, 3]);
    // As i32 flags: 0, 1, 1, 1 leaves layer 0 full.
    let meta = gguf(
        "gemma3",
        &[
            ("block_count", V::U32(4)),
            ("context_length", V::U32(4096)),
            ("embedding_length", V::U32(64)),
            ("attention.head_count", V::U32(8)),
            ("attention.sliding_window", V::U32(512)),
            (
                "attention.sliding_window_pattern",
                V::I32s(vec![0, 1, 1, 1]),
            ),
        ],
    );
    let e = run(&meta, &settings(0, 1));
    assert_eq!(caches(&e).iter().map(|c| c.1).collect::<Vec<_>>(), [1, 3]);
    let mut long = vec![1, 0, 1, 1];
    long.resize(512, 1);
    assert_eq!(layers(long.clone()).unwrap(), [1, 3]);
    long.push(1);
    assert!(layers(long).unwrap_err().to_string().contains(
        "array length 513 for key gemma3.attention.sliding_window_pattern exceeds max 512"
    ));
}

#[test]
fn gemma3_without_a_window_and_llama_with_one_hold_every_layer_full() {
    // gemma3 reads a window only when it is there and above 0.
    let meta = gguf(
        "gemma3",
        &[
            ("block_count", V::U32(6)),
            ("context_length", V::U32(4096)),
            ("embedding_length", V::U32(64)),
            ("attention.head_count", V::U32(8)),
            ("attention.head_count_kv", V::U32(4)),
            ("attention.key_length", V::U32(128)),
            ("attention.sliding_window", V::U32(0)),
        ],
    );
    assert!(matches!(
        run(&meta, &settings(0, 1)).memory,
        Memory::KvCache { .. }
    ));
    // llama (Mistral-7B converted) reads no window at all.
    let meta = gguf(
        "llama",
        &[
            ("block_count", V::U32(32)),
            ("context_length", V::U32(32768)),
            ("embedding_length", V::U32(4096)),
            ("attention.head_count", V::U32(32)),
            ("attention.head_count_kv", V::U32(8)),
            ("attention.sliding_window", V::U32(4096)),
        ],
    );
    assert_eq!(caches(&run(&meta, &settings(8192, 1)))[0].0, 8192);
}

#[test]
fn gemma2_windows_4096_by_default_one_layer_in_two() {
    // 42 layers: 21 full, 21 sliding. SWA pad(min(8192, 4096 + 512)) = 4608.
    let meta = gguf(
        "gemma2",
        &[
            ("block_count", V::U32(42)),
            ("context_length", V::U32(8192)),
            ("embedding_length", V::U32(3584)),
            ("attention.head_count", V::U32(16)),
            ("attention.head_count_kv", V::U32(8)),
            ("attention.key_length", V::U32(256)),
            ("attention.value_length", V::U32(256)),
        ],
    );
    let found: Vec<(u64, u64)> = caches(&run(&meta, &settings(8192, 1)))
        .iter()
        .map(|c| (c.0, c.1))
        .collect();
    assert_eq!(found, [(8192, 21), (4608, 21)]);
}

#[test]
fn mtp_layers_get_no_cache() {
    // 4 layers, the last one MTP (nextn_predict_layers 1): 3 in the cache.
    let meta = gguf(
        "qwen3",
        &[
            ("block_count", V::U32(4)),
            ("nextn_predict_layers", V::U32(1)),
            ("context_length", V::U32(256)),
            ("embedding_length", V::U32(64)),
            ("attention.head_count", V::U32(8)),
            ("attention.head_count_kv", V::U32(2)),
            ("attention.key_length", V::U32(128)),
        ],
    );
    // K: 2 x 128 x 2 B x 256 cells x 3 layers = 393,216 B. No value_length:
    // it is embedding / heads = 64 / 8 = 8, so V is 2 x 8 x 2 x 256 x 3 =
    // 24,576 B.
    assert_eq!(
        caches(&run(&meta, &settings(0, 1))),
        [(256, 3, 1, 393_216, 24_576)]
    );
    // A model that is only MTP layers keeps them all: 2 layers.
    let meta = gguf(
        "qwen3",
        &[
            ("block_count", V::U32(2)),
            ("nextn_predict_layers", V::U32(2)),
            ("context_length", V::U32(256)),
            ("embedding_length", V::U32(64)),
            ("attention.head_count", V::U32(8)),
        ],
    );
    assert_eq!(caches(&run(&meta, &settings(0, 1)))[0].1, 2);
}

#[test]
fn mtp_layers_of_a_sliding_model_are_in_neither_cache() {
    // 7 layers, the last MTP: pattern 6 over the 6 trunk layers makes 0-4
    // sliding and 5 full; layer 6 is in neither cache.
    let keys = |pattern: V| {
        vec![
            ("block_count", V::U32(7)),
            ("nextn_predict_layers", V::U32(1)),
            ("context_length", V::U32(4096)),
            ("embedding_length", V::U32(64)),
            ("attention.head_count", V::U32(8)),
            ("attention.key_length", V::U32(128)),
            ("attention.sliding_window", V::U32(512)),
            ("attention.sliding_window_pattern", pattern),
        ]
    };
    let layers = |pattern: V| -> Vec<u64> {
        caches(&run(&gguf("gemma3", &keys(pattern)), &settings(0, 1)))
            .iter()
            .map(|c| c.1)
            .collect()
    };
    assert_eq!(layers(V::U32(6)), [1, 5]);
    // Flags that mark the MTP layer sliding do not put it in the SWA cache.
    let flags = vec![true, true, true, true, true, false, true];
    assert_eq!(layers(V::Bools(flags)), [1, 5]);
}

/// gemma3 with 6 layers, all sliding (pattern 0, window 512), `kv_heads`
/// KV heads of 128.
fn all_sliding_gemma3(kv_heads: u32) -> GgufMetadata {
    gguf(
        "gemma3",
        &[
            ("block_count", V::U32(6)),
            ("context_length", V::U32(4096)),
            ("embedding_length", V::U32(64)),
            ("attention.head_count", V::U32(8)),
            ("attention.head_count_kv", V::U32(kv_heads)),
            ("attention.key_length", V::U32(128)),
            ("attention.value_length", V::U32(128)),
            ("attention.sliding_window", V::U32(512)),
            ("attention.sliding_window_pattern", V::U32(0)),
        ],
    )
}

#[test]
fn pattern_0_slides_every_layer_and_leaves_an_empty_full_cache() {
    // 6 layers, all sliding: the non-SWA cache has none (0 bytes, no head
    // size, no rotation). SWA: pad(min(4096, 512 + 512)) = 1024 cells; a row
    // is 4 x 128 = 512 elements = 16 q8_0 blocks = 544 B; x 1024 x 6 =
    // 3,342,336 B = 3.1875 MiB (3.19), K and V 6.375 MiB (6.38, ties to even).
    let meta = all_sliding_gemma3(4);
    let mut s = with_types(settings(4096, 1), GgmlType::Q8_0, GgmlType::Q8_0);
    s.flash_attn = FlashAttn::On;
    // As llama.cpp logged it.
    assert_eq!(
        run(&meta, &s).lines(),
        [
            "llama_kv_cache_iswa: creating non-SWA KV cache, size = 4096 cells",
            "llama_kv_cache: size =    0.00 MiB (  4096 cells,   0 layers,  1/1 seqs), K (q8_0):    \
             0.00 MiB, V (q8_0):    0.00 MiB",
            "llama_kv_cache: attn_rot_k = 0, n_embd_head_k_all = 0",
            "llama_kv_cache: attn_rot_v = 0, n_embd_head_k_all = 0",
            "llama_kv_cache_iswa: creating     SWA KV cache, size = 1024 cells",
            "llama_kv_cache: size =    6.38 MiB (  1024 cells,   6 layers,  1/1 seqs), K (q8_0):    \
             3.19 MiB, V (q8_0):    3.19 MiB",
            "llama_kv_cache: attn_rot_k = 1, n_embd_head_k_all = 128",
            "llama_kv_cache: attn_rot_v = 1, n_embd_head_k_all = 128",
        ]
    );
}

#[test]
fn an_mtp_layer_is_full_for_the_padding_of_v() {
    // gemma2, 2 layers, the last MTP: layer 0 slides (pattern 3: il % 3 <
    // 2), layer 1 would too but is full (MTP layers never slide). Without flash attention V is padded
    // to the widest of all layers: 2 KV heads x 128 (full) = 256, though the
    // one cached layer is 2 x 64 (value_length_swa) = 128 wide.
    let meta = gguf(
        "gemma2",
        &[
            ("block_count", V::U32(2)),
            ("nextn_predict_layers", V::U32(1)),
            ("context_length", V::U32(4096)),
            ("embedding_length", V::U32(64)),
            ("attention.head_count", V::U32(8)),
            ("attention.head_count_kv", V::U32(2)),
            ("attention.key_length", V::U32(128)),
            ("attention.value_length", V::U32(128)),
            ("attention.value_length_swa", V::U32(64)),
            ("attention.sliding_window_pattern", V::U32(3)),
        ],
    );
    let mut s = settings(4096, 1);
    s.flash_attn = FlashAttn::Off;
    let e = run(&meta, &s);
    let Memory::Iswa { base, swa, .. } = &e.memory else {
        panic!("{:?}", e.memory)
    };
    assert_eq!((base.layers, swa.layers), (0, 1));
    // SWA cells pad(min(4096, 4096 + 512)) = 4096; V 256 x 2 B x 4096.
    assert_eq!((swa.v_padded_to, swa.v_bytes), (Some(256), 2_097_152));
}

#[test]
fn a_row_that_is_not_whole_blocks_is_refused_naming_its_type() {
    // Without flash attention llama.cpp does not check heads against blocks;
    // a K row of 1 head of 80 is 2.5 q8_0 blocks, which ggml cannot lay out.
    let meta = gguf(
        "llama",
        &[
            ("block_count", V::U32(1)),
            ("context_length", V::U32(256)),
            ("embedding_length", V::U32(64)),
            ("attention.head_count", V::U32(1)),
            ("attention.key_length", V::U32(80)),
            ("attention.value_length", V::U32(80)),
        ],
    );
    let mut s = with_types(settings(0, 1), GgmlType::Q8_0, GgmlType::F16);
    s.flash_attn = FlashAttn::Off;
    match estimate(&meta, &s) {
        Err(KvError::InvalidValue { field, problem, .. }) => {
            assert_eq!(field, "type_k");
            assert!(problem.contains("a K row is 80 elements"), "{problem}");
        }
        other => panic!("{other:?}"),
    }
    // With flash attention, llama.cpp's own check names V's head.
    let s = with_types(settings(0, 1), GgmlType::F16, GgmlType::Q4_0);
    match estimate(&meta, &s) {
        Err(KvError::InvalidValue { field, problem, .. }) => {
            assert_eq!(field, "type_v");
            assert!(
                problem.contains(
                    "V cache type q4_0 with block size 32 does not divide n_embd_head_v=80"
                ),
                "{problem}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn keys_rotate_only_when_quantized_and_a_multiple_of_64() {
    let head = |dim: u32| {
        gguf(
            "llama",
            &[
                ("block_count", V::U32(8)),
                ("context_length", V::U32(4096)),
                ("embedding_length", V::U32(64)),
                ("attention.head_count", V::U32(8)),
                ("attention.head_count_kv", V::U32(4)),
                ("attention.key_length", V::U32(dim)),
                ("attention.value_length", V::U32(dim)),
            ],
        )
    };
    let q8 = with_types(settings(4096, 1), GgmlType::Q8_0, GgmlType::Q8_0);
    // 96 = 3 blocks of 32, not a multiple of 64: no rotation.
    let e = run(&head(96), &q8);
    assert_eq!(
        e.lines()[2..],
        [
            "llama_kv_cache: attn_rot_k = 0, n_embd_head_k_all = 96",
            "llama_kv_cache: attn_rot_v = 0, n_embd_head_k_all = 96",
        ]
    );
    // q8_0 K and f16 V without flash attention: K rotates, V does not.
    let mut s = with_types(settings(4096, 1), GgmlType::Q8_0, GgmlType::F16);
    s.flash_attn = FlashAttn::Off;
    let e = run(&head(128), &s);
    assert_eq!(
        e.lines()[1..],
        [
            "llama_kv_cache: attn_rot_k = 1, n_embd_head_k_all = 128",
            "llama_kv_cache: attn_rot_v = 0, n_embd_head_k_all = 128",
        ]
    );
    // 80 is not whole q8_0 blocks: llama.cpp refuses it with flash attention.
    assert!(refusal(&head(80), &q8).contains(
        "llama_init_from_model: K cache type q8_0 with block size 32 does not divide \
         n_embd_head_k=80"
    ));
}

#[test]
fn mamba_holds_f32_r_and_s_per_sequence() {
    // R: (4 - 1) x 512 = 1536 f32 = 6144 B a sequence a layer; x 8 x 24 =
    // 1,179,648 B = 1.125 MiB, printed 1.12 (ties to even, as glibc does).
    // S: 16 x 512 x 4 B x 8 x 24 = 6,291,456 B = 6 MiB. n_ctx plays no part.
    let e = run(&mamba(), &settings(4096, 8));
    let Memory::Recurrent { state } = &e.memory else {
        panic!("{:?}", e.memory)
    };
    assert_eq!(
        (state.cells, state.layers, state.r_bytes, state.s_bytes),
        (8, 24, 1_179_648, 6_291_456)
    );
    // As llama.cpp logged it.
    assert_eq!(
        e.lines(),
        [
            "llama_memory_recurrent: size =    7.12 MiB (     8 cells,  24 layers,  8 seqs  0 \
             rs_seq), R (f32):    1.12 MiB, S (f32):    6.00 MiB, P (f32):    0.00 MiB"
        ]
    );
}

#[test]
fn mamba2_counts_its_groups_in_the_conv_state() {
    // d_inner 512, d_state 128, 1 group: R (4 - 1) x (512 + 2 x 1 x 128) =
    // 2304 f32; S 128 x 512 = 65,536 f32. 2 sequences x 8 layers:
    // R 2304 x 4 x 16 = 147,456 B; S 65,536 x 4 x 16 = 4,194,304 B.
    let meta = gguf(
        "mamba2",
        &[
            ("block_count", V::U32(8)),
            ("context_length", V::U32(1048576)),
            ("embedding_length", V::U32(256)),
            ("ssm.conv_kernel", V::U32(4)),
            ("ssm.inner_size", V::U32(512)),
            ("ssm.state_size", V::U32(128)),
            ("ssm.time_step_rank", V::U32(16)),
            ("ssm.group_count", V::U32(1)),
        ],
    );
    let e = run(&meta, &settings(4096, 2));
    assert_eq!(e.bytes(), 147_456 + 4_194_304);
    // llama.cpp: 4.14 MiB (4,341,760 / 1,048,576 = 4.1406...), R 0.14.
    assert!(e.lines()[0].starts_with(
        "llama_memory_recurrent: size =    4.14 MiB (     2 cells,   8 layers,  2 seqs  0 \
         rs_seq), R (f32):    0.14 MiB"
    ));
}

#[test]
fn refusals_are_llama_cpps() {
    // A quantized V without flash attention.
    let mut s = with_types(settings(4096, 1), GgmlType::F16, GgmlType::Q8_0);
    s.flash_attn = FlashAttn::Off;
    let message = refusal(&llama3_8b(), &s);
    assert!(
        message.contains("quantized V cache requires flash_attn to be enabled"),
        "{message}"
    );
    // The same, even for a recurrent model (the check comes first).
    assert!(refusal(&mamba(), &s).contains("requires flash_attn"));
    // More sequences than LLAMA_MAX_SEQ.
    assert!(refusal(&llama3_8b(), &settings(4096, 257)).contains("n_seq_max must be <= 256"));
    // 256 is fine.
    assert_eq!(run(&llama3_8b(), &settings(4096, 256)).n_seq, 256);
    // No batch at all.
    let mut s = settings(4096, 1);
    s.n_batch = 0;
    s.n_ubatch = 0;
    assert!(refusal(&llama3_8b(), &s).contains("n_batch and n_ubatch cannot both be zero"));
    // No context anywhere.
    let meta = gguf(
        "llama",
        &[
            ("block_count", V::U32(1)),
            ("context_length", V::U32(0)),
            ("embedding_length", V::U32(64)),
            ("attention.head_count", V::U32(8)),
        ],
    );
    assert!(refusal(&meta, &settings(0, 1)).contains("cannot both be zero"));
    assert_eq!(run(&meta, &settings(256, 1)).n_ctx, 256);
}

#[test]
fn models_llama_cpp_would_not_load_are_refused_naming_why() {
    let base = [
        ("context_length", V::U32(4096)),
        ("embedding_length", V::U32(64)),
    ];
    let with = |arch: &str, more: Vec<(&'static str, V)>| {
        let mut keys: Vec<(&str, V)> = more;
        keys.extend(base.iter().map(|(k, v)| {
            (
                *k,
                match v {
                    V::U32(x) => V::U32(*x),
                    _ => unreachable!(),
                },
            )
        }));
        estimate(&gguf(arch, &keys), &settings(0, 1))
            .unwrap_err()
            .to_string()
    };
    let bert = with("bert", vec![("block_count", V::U32(2))]);
    assert!(bert.contains("architecture `bert`"), "{bert}");
    // The llama.cpp archs kv follows, each exact on its twin, are counted
    // and found in docs/coverage/llamacpp.tsv: listing them would make a
    // line too long for a terminal.
    assert!(bert.contains("(it follows "), "{bert}");
    assert!(
        bert.contains(" architectures, listed in docs/coverage/llamacpp.tsv)"),
        "{bert}"
    );
    // The error names the file.
    let meta = gguf("bert", &[]);
    match estimate(&meta, &settings(0, 1)) {
        Err(KvError::ConfigFile { path, .. }) => assert_eq!(path, "model.gguf"),
        other => panic!("{other:?}"),
    }
    match estimate(&gguf("llama", &[]), &settings(0, 1)) {
        Err(KvError::ConfigFile { path, problem }) => {
            assert_eq!(path, "model.gguf");
            assert!(problem.contains("no `llama.block_count`"), "{problem}");
        }
        other => panic!("{other:?}"),
    }
    assert!(with("llama", vec![("block_count", V::U32(0))]).contains("1 to 512 layers"));
    assert!(with("llama", vec![("block_count", V::U32(513))]).contains("1 to 512 layers"));
    // 512 is llama.cpp's LLAMA_MAX_LAYERS itself: taken.
    let meta = gguf(
        "llama",
        &[
            ("block_count", V::U32(512)),
            ("context_length", V::U32(256)),
            ("embedding_length", V::U32(64)),
            ("attention.head_count", V::U32(8)),
        ],
    );
    assert_eq!(caches(&run(&meta, &settings(0, 1)))[0].1, 512);
    assert!(with("llama", vec![]).contains("no `llama.block_count`"));
    assert!(with(
        "llama",
        vec![
            ("block_count", V::U32(2)),
            ("nextn_predict_layers", V::U32(3))
        ]
    )
    .contains("above the 2 layers"));
    // llama.cpp's get_key<uint32_t> takes a u32 and nothing else.
    assert!(
        with("llama", vec![("block_count", V::U64(1 << 33))]).contains(
            "`llama.block_count` is u64 8589934592; llama.cpp refuses: key llama.block_count has \
         wrong type u64 but expected type u32"
        )
    );
    // A window no layer slides in: gemma2 with pattern 1.
    assert!(with(
        "gemma2",
        vec![
            ("block_count", V::U32(4)),
            ("attention.sliding_window_pattern", V::U32(1))
        ]
    )
    .contains("is_swa_any"));
    // cohere2 must give its window.
    assert!(with("cohere2", vec![("block_count", V::U32(4))])
        .contains("no `cohere2.attention.sliding_window`"));
    // Mamba's expansion factor must be 2, and its keys are required.
    let ssm = |inner: u32| {
        vec![
            ("block_count", V::U32(2)),
            ("ssm.conv_kernel", V::U32(4)),
            ("ssm.inner_size", V::U32(inner)),
            ("ssm.state_size", V::U32(16)),
            ("ssm.time_step_rank", V::U32(4)),
        ]
    };
    assert!(with("mamba", ssm(96)).contains("expansion factor of 2"));
    assert!(with("mamba2", ssm(128)).contains("no `mamba2.ssm.group_count`"));
    // Wrongly typed keys.
    assert!(with(
        "llama",
        vec![
            ("block_count", V::U32(2)),
            ("attention.head_count", V::Str("32"))
        ]
    )
    .contains("head_count"));
    assert!(with(
        "llama",
        vec![
            ("block_count", V::U32(2)),
            ("attention.head_count_kv", V::U32s(vec![8, 8, 8]))
        ]
    )
    .contains("3 entries for 2 layers"));
}

#[test]
fn bytes_that_overflow_are_an_error_not_a_wrap() {
    // (2^32 - 1)^2 elements a row x 2 B overflows u64.
    let meta = gguf(
        "llama",
        &[
            ("block_count", V::U32(1)),
            ("context_length", V::U32(4096)),
            ("embedding_length", V::U32(64)),
            ("attention.head_count", V::U32(u32::MAX)),
            ("attention.key_length", V::U32(u32::MAX)),
            ("attention.value_length", V::U32(1)),
        ],
    );
    let err = estimate(&meta, &settings(0, 1)).unwrap_err();
    assert!(matches!(err, KvError::Overflow { .. }), "{err}");
    // n_ctx 2^32 - 1 pads to 2^32, past llama.cpp's uint32: refused.
    assert!(refusal(&llama3_8b(), &settings(u32::MAX, 1)).contains("uint32"));
}

#[test]
fn mib_is_a_float_of_the_bytes_printed_to_two_places_ties_to_even() {
    // 2^30 + 5242 B is 1024.0049991... MiB exactly, but as a float the count
    // rounds to 2^30 + 5248 (floats are 128 apart there): 1024.00500488...,
    // printed 1024.01.
    assert_eq!(mib((1 << 30) + 5242), "1024.01");
    // 0.125 MiB (131,072 B) ties: to even, 0.12; 0.375 MiB to 0.38.
    assert_eq!(mib(131_072), "   0.12");
    assert_eq!(mib(393_216), "   0.38");
    assert_eq!(mib(0), "   0.00");
    // Just above a tie rounds up: 131,073 B.
    assert_eq!(mib(131_073), "   0.13");
    // u64::MAX rounds to the float 2^64: 17,592,186,044,416 MiB.
    assert_eq!(mib(u64::MAX), "17592186044416.00");
}

#[test]
fn the_json_names_the_engine_and_its_commit() {
    let e = run(&gemma3(1024), &settings(8192, 2));
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(json["engine"], "llama.cpp");
    assert_eq!(json["commit"], "0c1e57098bba43ac29e6e3b677cdceebdd22334f");
    assert_eq!(json["memory"]["kind"], "iswa");
    assert_eq!(json["memory"]["swa"]["cells"], 1536);
    assert_eq!(json["memory"]["base"]["type_k"], "f16");
    assert_eq!(json["bytes"], 1_979_711_488u64);
    assert_eq!(json["lines"].as_array().unwrap().len(), 8);
}

mod any_header {
    use super::*;
    use proptest::prelude::*;

    /// A count as a GGUF might hold it: small, at a boundary, or anything.
    fn count() -> impl Strategy<Value = u32> {
        prop_oneof![0u32..600, Just(u32::MAX), Just(u32::MAX - 1), any::<u32>()]
    }

    proptest! {
        /// No header and no settings make the estimate panic; whatever it
        /// returns adds up.
        #[test]
        fn never_panics_and_adds_up(
            arch in prop::sample::select(vec!["llama", "gemma2", "gemma3", "cohere2", "mamba", "mamba2", "jamba", "falcon-h1", "granitehybrid", "nemotron_h", "qwen3next", "lfm2", "deepseek2", "llama4", "exaone4", "gemma3n", "minimax-01", "kimi-linear", "rwkv6", "deepseek32", "minimax-m3", "glm5-next", "qwen4exp", "nanbeige", "hrm_text", "gemma4", "smallthinker"]),
            layers in count(), heads in count(), kv_heads in count(), key in count(),
            window in count(), pattern in count(), inner in count(), state in count(),
            n_ctx in count(), n_seq in count(), ubatch in count(),
            unified: bool, swa_full: bool,
        ) {
            let meta = gguf(arch, &[
                ("block_count", V::U32(layers)),
                ("context_length", V::U32(n_ctx)),
                ("embedding_length", V::U32(inner / 2)),
                ("attention.head_count", V::U32(heads)),
                ("attention.head_count_kv", V::U32(kv_heads)),
                ("attention.key_length", V::U32(key)),
                ("attention.sliding_window", V::U32(window)),
                ("attention.sliding_window_pattern", V::U32(pattern)),
                ("ssm.conv_kernel", V::U32(4)),
                ("ssm.inner_size", V::U32(inner)),
                ("ssm.state_size", V::U32(state)),
                ("ssm.time_step_rank", V::U32(1)),
                ("ssm.group_count", V::U32(1)),
                // Reach the indexer, MLA, looped and hyper-connection rules.
                ("attention.key_length_mla", V::U32(key)),
                ("attention.value_length_mla", V::U32(key)),
                ("attention.q_lora_rank", V::U32(16)),
                ("attention.kv_lora_rank", V::U32(key)),
                ("kda.head_dim", V::U32(state)),
                ("attention.indexer.head_count", V::U32(1)),
                ("attention.indexer.key_length", V::U32(key)),
                ("attention.indexer.top_k", V::U32(4)),
                ("attention.indexer.kpool", V::U32(2)),
                ("attention.indexer.block_size", V::U32(1)),
                ("attention.indexer.local_blocks", V::U32(1)),
                ("hyper_connection.count", V::U32(4)),
                ("hyper_connection.low_rank", V::U32(1)),
                ("num_loops", V::U32(pattern)),
            ]);
            let mut s = settings(n_ctx, n_seq);
            s.n_ubatch = ubatch;
            s.kv_unified = unified;
            s.swa_full = swa_full;
            if let Ok(e) = estimate(&meta, &s) {
                let parts = match &e.memory {
                    Memory::KvCache { cache } => cache.k_bytes + cache.v_bytes,
                    Memory::Iswa { base, swa, .. } => {
                        base.k_bytes + base.v_bytes + swa.k_bytes + swa.v_bytes
                    }
                    Memory::Recurrent { state } => state.r_bytes + state.s_bytes + state.p_bytes,
                    Memory::Hybrid { attention, state } => {
                        attention.bytes() + state.r_bytes + state.s_bytes + state.p_bytes
                    }
                    Memory::Dsa { main, indexer, .. } => main.bytes() + indexer.bytes(),
                    Memory::HybridIdx { attention, state, indexer } => attention.bytes() + state.r_bytes + state.s_bytes + state.p_bytes + indexer.bytes(),
                    Memory::DsaIswa { main, indexer, swa, .. } => main.bytes() + indexer.bytes() + swa.bytes(),
                    _ => unreachable!(),
                };
                prop_assert_eq!(e.bytes(), parts);
                prop_assert!(!e.lines().is_empty());
            }
        }
    }
}

/// A hybrid's attention cache and state, as (KV cells, KV layers, K bytes,
/// V bytes, state layers printed, state layers held, R bytes, S bytes).
fn hybrid(e: &LlamaCppEstimate) -> (u64, u64, u64, u64, u64, u64, u64, u64) {
    let Memory::Hybrid { attention, state } = &e.memory else {
        panic!("not a hybrid: {:?}", e.memory)
    };
    let Memory::KvCache { cache } = attention.as_ref() else {
        panic!("not one KV cache: {attention:?}")
    };
    (
        cache.cells,
        cache.layers,
        cache.k_bytes,
        cache.v_bytes,
        state.layers,
        state.state_layers,
        state.r_bytes,
        state.s_bytes,
    )
}

/// Jamba-v0.1: 32 layers, attention at 4, 12, 20 and 28 (KV heads 8 there,
/// 0 elsewhere), 32 heads over 4096 (heads of 128), Mamba d_conv 4, d_inner
/// 8192, d_state 16.
fn jamba() -> GgufMetadata {
    let kv: Vec<u32> = (0..32).map(|il| if il % 8 == 4 { 8 } else { 0 }).collect();
    gguf(
        "jamba",
        &[
            ("block_count", V::U32(32)),
            ("context_length", V::U32(262144)),
            ("embedding_length", V::U32(4096)),
            ("attention.head_count", V::U32(32)),
            ("attention.head_count_kv", V::U32s(kv)),
            ("ssm.conv_kernel", V::U32(4)),
            ("ssm.inner_size", V::U32(8192)),
            ("ssm.state_size", V::U32(16)),
            ("ssm.time_step_rank", V::U32(256)),
        ],
    )
}

#[test]
fn jamba_holds_kv_for_its_attention_layers_and_state_for_the_rest() {
    // n_ctx 8192 over 2 sequences: 2 streams of pad(4096) = 4096 cells.
    // KV (llama_memory_hybrid's filter_attn: head_count_kv != 0): 4 layers
    // x 4096 cells x 2 streams x (8 x 128 = 1024) x 2 B = 67,108,864 B =
    // 64 MiB for K, and for V.
    // State (filter_recr: head_count_kv == 0): 28 layers x 2 sequences.
    // jamba reads no ssm.group_count, so R = (4 - 1) x 8192 = 24,576 f32 =
    // 98,304 B; x 56 = 5,505,024 B = 5.25 MiB. S = 16 x 8192 = 131,072 f32 =
    // 524,288 B; x 56 = 29,360,128 B = 28 MiB. Together 33.25 MiB.
    // llama_memory_recurrent prints n_layer() (32), not the 28 it holds.
    let e = run(&jamba(), &settings(8192, 2));
    assert_eq!(
        hybrid(&e),
        (4096, 4, 67_108_864, 67_108_864, 32, 28, 5_505_024, 29_360_128)
    );
    assert_eq!(e.bytes(), 2 * 67_108_864 + 5_505_024 + 29_360_128);
    // As llama.cpp logged it for a twin of this header (cache_lines.py
    // --no-weights on fixture.py's jamba with these keys, 2026-12-06).
    assert_eq!(
        e.lines(),
        [
            "llama_kv_cache: size =  128.00 MiB (  4096 cells,   4 layers,  2/2 seqs), K (f16):   \
             64.00 MiB, V (f16):   64.00 MiB",
            "llama_kv_cache: attn_rot_k = 0, n_embd_head_k_all = 128",
            "llama_kv_cache: attn_rot_v = 0, n_embd_head_k_all = 128",
            "llama_memory_recurrent: size =   33.25 MiB (     2 cells,  32 layers,  2 seqs  0 \
             rs_seq), R (f32):    5.25 MiB, S (f32):   28.00 MiB, P (f32):    0.00 MiB",
        ]
    );
    // Without flash attention V is transposed and padded to the widest
    // layer's (1024; the recurrent layers' are 0), and llama.cpp says so.
    let mut off = settings(8192, 2);
    off.flash_attn = FlashAttn::Off;
    let e = run(&jamba(), &off);
    assert_eq!(
        e.lines()[0],
        "llama_kv_cache: the V embeddings have different sizes across layers and FA is not \
         enabled - padding V cache to 1024"
    );
    assert_eq!(e.bytes(), 2 * 67_108_864 + 5_505_024 + 29_360_128);
}

#[test]
fn nemotron_h_skips_mlp_layers_in_both_caches() {
    // Layers M - M * - M: Mamba where head_count_kv and feed_forward_length
    // are 0, attention where only the FFN is 0, an MLP layer (FFN 21504)
    // in neither. KV: layer 3 alone, 4096 cells x (8 x 128) x 2 B =
    // 8,388,608 B = 8 MiB for K and for V.
    // R = (4 - 1) x (8192 + 2 x 8 groups x 128) = 30,720 f32 = 122,880 B,
    // x 3 layers = 368,640 B = 0.3515625 MiB (0.35). S = 128 x 8192 f32 =
    // 4 MiB, x 3 = 12,582,912 B. Together 12.3515625 MiB (12.35); the line
    // says 6 layers.
    let meta = gguf(
        "nemotron_h",
        &[
            ("block_count", V::U32(6)),
            ("context_length", V::U32(8192)),
            ("embedding_length", V::U32(4096)),
            (
                "feed_forward_length",
                V::U32s(vec![0, 21504, 0, 0, 21504, 0]),
            ),
            ("attention.head_count", V::U32(32)),
            ("attention.head_count_kv", V::U32s(vec![0, 0, 0, 8, 0, 0])),
            ("attention.key_length", V::U32(128)),
            ("attention.value_length", V::U32(128)),
            ("ssm.conv_kernel", V::U32(4)),
            ("ssm.inner_size", V::U32(8192)),
            ("ssm.state_size", V::U32(128)),
            ("ssm.group_count", V::U32(8)),
            ("ssm.time_step_rank", V::U32(128)),
        ],
    );
    let e = run(&meta, &settings(4096, 1));
    assert_eq!(
        hybrid(&e),
        (4096, 1, 8_388_608, 8_388_608, 6, 3, 368_640, 12_582_912)
    );
    // llama.cpp's lines for its twin.
    assert_eq!(
        e.lines()[0],
        "llama_kv_cache: size =   16.00 MiB (  4096 cells,   1 layers,  1/1 seqs), K (f16):    \
         8.00 MiB, V (f16):    8.00 MiB"
    );
    assert_eq!(
        e.lines()[3],
        "llama_memory_recurrent: size =   12.35 MiB (     1 cells,   6 layers,  1 seqs  0 \
         rs_seq), R (f32):    0.35 MiB, S (f32):   12.00 MiB, P (f32):    0.00 MiB"
    );
}

/// Qwen3-Next-80B-A3B: 48 layers, full attention every 4th (2 KV heads of
/// 256), Gated DeltaNet elsewhere (16 key heads of 128 as groups x
/// d_state, 32 value heads of 128 as d_inner 4096, d_conv 4).
fn qwen3next(keys: Vec<(&'static str, V)>) -> GgufMetadata {
    let mut all = vec![
        ("block_count", V::U32(48)),
        ("context_length", V::U32(262144)),
        ("embedding_length", V::U32(2048)),
        ("attention.head_count", V::U32(16)),
        ("attention.head_count_kv", V::U32(2)),
        ("attention.key_length", V::U32(256)),
        ("attention.value_length", V::U32(256)),
        ("ssm.conv_kernel", V::U32(4)),
        ("ssm.inner_size", V::U32(4096)),
        ("ssm.state_size", V::U32(128)),
        ("ssm.group_count", V::U32(16)),
        ("ssm.time_step_rank", V::U32(32)),
    ];
    // A key given replaces the default one (GGUF refuses a duplicate).
    all.retain(|(suffix, _)| !keys.iter().any(|(given, _)| given == suffix));
    all.extend(keys);
    gguf("qwen3next", &all)
}

#[test]
fn qwen3next_attends_every_fourth_layer() {
    // full_attention_interval 4 (the default): layer il is recurrent unless
    // (il + 1) % 4 == 0, so 12 attention layers and 36 recurrent ones.
    // KV: 12 x 8192 cells x (2 x 256 = 512) x 2 B = 100,663,296 B = 96 MiB
    // for K and for V.
    // R = (4 - 1) x (4096 + 2 x 16 x 128) = 24,576 f32 = 98,304 B, x 36 =
    // 3,538,944 B = 3.375 MiB, printed 3.38 (a tie, to even). S = 128 x
    // 4096 f32 = 2 MiB, x 36 = 72 MiB. Together 75.375 MiB, printed 75.38.
    let expected = (
        8192,
        12,
        100_663_296,
        100_663_296,
        48,
        36,
        3_538_944,
        75_497_472,
    );
    let e = run(&qwen3next(vec![]), &settings(8192, 1));
    assert_eq!(hybrid(&e), expected);
    assert_eq!(
        e.lines()[3],
        "llama_memory_recurrent: size =   75.38 MiB (     1 cells,  48 layers,  1 seqs  0 \
         rs_seq), R (f32):    3.38 MiB, S (f32):   72.00 MiB, P (f32):    0.00 MiB"
    );
    // The interval written out gives the same; an explicit per-layer flag
    // array wins over it.
    let e = run(
        &qwen3next(vec![("full_attention_interval", V::U32(4))]),
        &settings(8192, 1),
    );
    assert_eq!(hybrid(&e), expected);
    let flags: Vec<bool> = (0..48).map(|il| il >= 2).collect();
    let e = run(
        &qwen3next(vec![
            ("full_attention_interval", V::U32(4)),
            ("attention.recurrent_layers", V::Bools(flags)),
        ]),
        &settings(8192, 1),
    );
    // 2 attention layers: 2 x 8192 x 512 x 2 B = 16,777,216 B; 46 recurrent:
    // R 98,304 x 46 = 4,521,984 B, S 2 MiB x 46 = 96,468,992 B.
    assert_eq!(
        hybrid(&e),
        (8192, 2, 16_777_216, 16_777_216, 48, 46, 4_521_984, 96_468_992)
    );
}

#[test]
fn lfm2_keeps_a_short_conv_row_and_no_ssm_state() {
    // LFM2-1.2B: 16 layers, attention at 2, 5, 8, 10, 12 and 14 (8 KV heads
    // of 2048 / 32 = 64). KV: 6 x 4096 x 512 x 2 B = 25,165,824 B = 24 MiB
    // for K and for V. The 10 conv layers: R = 2048 x (l_cache 3 - 1) =
    // 4096 f32 = 16,384 B, x 10 = 163,840 B = 0.15625 MiB (0.16); no S.
    let kv = vec![0, 0, 8, 0, 0, 8, 0, 0, 8, 0, 8, 0, 8, 0, 8, 0];
    let meta = gguf(
        "lfm2",
        &[
            ("block_count", V::U32(16)),
            ("context_length", V::U32(128000)),
            ("embedding_length", V::U32(2048)),
            ("attention.head_count", V::U32(32)),
            ("attention.head_count_kv", V::U32s(kv)),
            ("shortconv.l_cache", V::U32(3)),
        ],
    );
    let e = run(&meta, &settings(4096, 1));
    assert_eq!(
        hybrid(&e),
        (4096, 6, 12_582_912 * 2, 12_582_912 * 2, 16, 10, 163_840, 0)
    );
    assert_eq!(
        e.lines()[3],
        "llama_memory_recurrent: size =    0.16 MiB (     1 cells,  16 layers,  1 seqs  0 \
         rs_seq), R (f32):    0.16 MiB, S (f32):    0.00 MiB, P (f32):    0.00 MiB"
    );
}

#[test]
fn falcon_h1_layers_hold_both_attention_and_state() {
    // Falcon-H1-0.5B: every one of 36 layers is in both caches. KV: 36 x
    // 4096 x (2 x 64 = 128) x 2 B = 37,748,736 B = 36 MiB for K and for V.
    // R = (4 - 1) x (1536 + 2 x 1 x 128) = 5376 f32 = 21,504 B, x 36 =
    // 774,144 B = 0.738... MiB (0.74). S = 128 x 1536 f32 = 786,432 B, x 36
    // = 28,311,552 B = 27 MiB. Together 27.738... MiB (27.74).
    let meta = gguf(
        "falcon-h1",
        &[
            ("block_count", V::U32(36)),
            ("context_length", V::U32(16384)),
            ("embedding_length", V::U32(1024)),
            ("attention.head_count", V::U32(8)),
            ("attention.head_count_kv", V::U32(2)),
            ("attention.key_length", V::U32(64)),
            ("attention.value_length", V::U32(64)),
            ("ssm.conv_kernel", V::U32(4)),
            ("ssm.inner_size", V::U32(1536)),
            ("ssm.state_size", V::U32(128)),
            ("ssm.group_count", V::U32(1)),
            ("ssm.time_step_rank", V::U32(24)),
        ],
    );
    let e = run(&meta, &settings(4096, 1));
    assert_eq!(
        hybrid(&e),
        (4096, 36, 37_748_736, 37_748_736, 36, 36, 774_144, 28_311_552)
    );
    assert_eq!(
        e.lines()[3],
        "llama_memory_recurrent: size =   27.74 MiB (     1 cells,  36 layers,  1 seqs  0 \
         rs_seq), R (f32):    0.74 MiB, S (f32):   27.00 MiB, P (f32):    0.00 MiB"
    );
}

#[test]
fn hybrid_keys_that_would_break_llama_cpp_are_refused_by_name() {
    // (il + 1) % 0 in llama.cpp: refused, naming the key.
    let zero = qwen3next(vec![("full_attention_interval", V::U32(0))]);
    let err = refusal(&zero, &settings(8192, 1));
    assert!(
        err.contains("`qwen3next.full_attention_interval` is 0"),
        "{err}"
    );
    // l_cache 0 would wrap (l_cache - 1) in uint32.
    let lfm2 = |l_cache| {
        gguf(
            "lfm2",
            &[
                ("block_count", V::U32(2)),
                ("context_length", V::U32(4096)),
                ("embedding_length", V::U32(2048)),
                ("attention.head_count", V::U32(32)),
                ("attention.head_count_kv", V::U32s(vec![8, 0])),
                ("shortconv.l_cache", V::U32(l_cache)),
            ],
        )
    };
    let err = refusal(&lfm2(0), &settings(4096, 1));
    assert!(err.contains("`lfm2.shortconv.l_cache` 0"), "{err}");
    // n_embd x (l_cache - 1) past uint32.
    let err = refusal(&lfm2(u32::MAX), &settings(4096, 1));
    assert!(err.contains("out of llama.cpp's uint32"), "{err}");
    // A state key llama.cpp requires, missing.
    let no_conv = gguf(
        "jamba",
        &[
            ("block_count", V::U32(2)),
            ("context_length", V::U32(4096)),
            ("embedding_length", V::U32(256)),
            ("attention.head_count", V::U32(4)),
            ("attention.head_count_kv", V::U32s(vec![4, 0])),
            ("ssm.inner_size", V::U32(512)),
            ("ssm.state_size", V::U32(16)),
            ("ssm.time_step_rank", V::U32(16)),
        ],
    );
    let err = refusal(&no_conv, &settings(4096, 1));
    assert!(err.contains("no `jamba.ssm.conv_kernel`"), "{err}");
    // d_state x d_inner past uint32 (n_embd_s()).
    let err = refusal(
        &qwen3next(vec![("ssm.inner_size", V::U32(u32::MAX))]),
        &settings(8192, 1),
    );
    assert!(
        err.contains("n_embd_r") || err.contains("n_embd_s"),
        "{err}"
    );
}

/// DeepSeek-V3 as convert_hf_to_gguf.py writes it now: 61 layers (+ `more`),
/// one KV head whose key is kv_lora_rank 512 + rope 64 = 576 and value 512,
/// with the MLA head sizes (192, 128) that make `is_mla()`.
fn deepseek_v3(more: Vec<(&'static str, V)>) -> GgufMetadata {
    let mut keys = vec![
        ("context_length", V::U32(163840)),
        ("embedding_length", V::U32(7168)),
        ("attention.head_count", V::U32(128)),
        ("attention.head_count_kv", V::U32(1)),
        ("attention.key_length", V::U32(576)),
        ("attention.value_length", V::U32(512)),
        ("attention.kv_lora_rank", V::U32(512)),
        ("rope.dimension_count", V::U32(64)),
    ];
    keys.extend(more);
    gguf("deepseek2", &keys)
}

#[test]
fn deepseek2_mla_caches_the_576_wide_latent_and_no_v() {
    let mla = || {
        vec![
            ("block_count", V::U32(61)),
            ("attention.key_length_mla", V::U32(192)),
            ("attention.value_length_mla", V::U32(128)),
        ]
    };
    // K: 61 layers x 8192 cells x 576 x 2 B = 575,668,224 B = 549 MiB. No
    // V tensor (has_v = !is_mla), and n_embd_head_v_all stays 0.
    let e = run(&deepseek_v3(mla()), &settings(8192, 1));
    assert_eq!(caches(&e), [(8192, 61, 1, 575_668_224, 0)]);
    // As llama.cpp logged it for the twin (fixture.py deepseek2, these keys).
    assert_eq!(
        e.lines(),
        [
            "llama_kv_cache: size =  549.00 MiB (  8192 cells,  61 layers,  1/1 seqs), K (f16):  \
             549.00 MiB, V (f16):    0.00 MiB",
            "llama_kv_cache: attn_rot_k = 0, n_embd_head_k_all = 576",
            "llama_kv_cache: attn_rot_v = 0, n_embd_head_k_all = 0",
        ]
    );
    // q8_0: 576 = 18 blocks x 34 B = 612 B a row; x 8192 x 61 = 305,823,744
    // B = 291.65625 MiB (291.66). 576 % 64 == 0, so K is rotated.
    let q8 = with_types(settings(8192, 1), GgmlType::Q8_0, GgmlType::Q8_0);
    let e = run(&deepseek_v3(mla()), &q8);
    assert_eq!(caches(&e), [(8192, 61, 1, 305_823_744, 0)]);
    assert_eq!(
        e.lines()[..3],
        [
            "llama_init_from_model: enabling flash_attn since it is required for quantized V \
             cache",
            "llama_kv_cache: size =  291.66 MiB (  8192 cells,  61 layers,  1/1 seqs), K (q8_0):  \
             291.66 MiB, V (q8_0):    0.00 MiB",
            "llama_kv_cache: attn_rot_k = 1, n_embd_head_k_all = 576",
        ]
    );
    // K and V of different types: llama.cpp refuses an MLA model.
    let mixed = with_types(settings(8192, 1), GgmlType::F16, GgmlType::Q8_0);
    assert!(refusal(&deepseek_v3(mla()), &mixed).contains(
        "llama_init_from_model: model does not support different K (f16) and V (q8_0) cache types"
    ));
    // The MTP layer (nextn_predict_layers 1 of 62) gets no cache: the same
    // 61 layers. (Not confirmed on a twin: llama.cpp's loader asserts
    // building the MTP tensors without weights.)
    let mut with_mtp = mla();
    with_mtp[0] = ("block_count", V::U32(62));
    with_mtp.push(("nextn_predict_layers", V::U32(1)));
    let e = run(&deepseek_v3(with_mtp), &settings(8192, 1));
    assert_eq!(caches(&e), [(8192, 61, 1, 575_668_224, 0)]);
    // Without the MLA sizes (older GGUFs) it is a plain cache: K 576 and V
    // 512 wide: V 61 x 8192 x 512 x 2 B = 511,705,088 B (488 MiB) beside
    // the same K; llama.cpp logged 1037.00 MiB for the twin with the MLA
    // sizes at 0 (its graph then aborts on the twin's MLA-shaped weights).
    let plain = deepseek_v3(vec![("block_count", V::U32(61))]);
    let e = run(&plain, &settings(8192, 1));
    assert_eq!(caches(&e), [(8192, 61, 1, 575_668_224, 511_705_088)]);
}

#[test]
fn grok_runs_without_flash_attention() {
    // Grok-1: 64 layers, 8 KV heads of 6144 / 48 = 128. llama.cpp forces
    // flash attention off for grok, so a quantized V is refused even when
    // flash attention is asked for. K: 64 x 8192 x 1024 x 2 B = 1 GiB; V
    // the same (transposed, all layers one width: no padding line).
    let meta = gguf(
        "grok",
        &[
            ("block_count", V::U32(64)),
            ("context_length", V::U32(8192)),
            ("embedding_length", V::U32(6144)),
            ("attention.head_count", V::U32(48)),
            ("attention.head_count_kv", V::U32(8)),
        ],
    );
    let e = run(&meta, &settings(8192, 1));
    assert!(!e.flash_attn);
    assert_eq!(caches(&e), [(8192, 64, 1, 1 << 30, 1 << 30)]);
    // As llama.cpp logged it for the twin.
    assert_eq!(
        e.lines()[..2],
        [
            "llama_init_from_model: flash_attn is not compatible with Grok - forcing off",
            "llama_kv_cache: size = 2048.00 MiB (  8192 cells,  64 layers,  1/1 seqs), K (f16): \
             1024.00 MiB, V (f16): 1024.00 MiB",
        ]
    );
    let mut q4 = with_types(settings(8192, 1), GgmlType::Q4_0, GgmlType::Q4_0);
    q4.flash_attn = FlashAttn::On;
    let err = refusal(&meta, &q4);
    assert!(
        err.contains(
            "llama_init_from_model: flash_attn is not compatible with Grok - forcing off; \
             llama_init_from_model: quantized V cache requires flash_attn to be enabled"
        ),
        "{err}"
    );
}

/// 8 KV heads of 128 (2048 B a row in f16) over `layers`, with `more`.
fn heads_8x128(arch: &str, layers: u32, more: Vec<(&'static str, V)>) -> GgufMetadata {
    let mut keys = vec![
        ("block_count", V::U32(layers)),
        ("context_length", V::U32(131072)),
        ("embedding_length", V::U32(5120)),
        ("attention.head_count", V::U32(40)),
        ("attention.head_count_kv", V::U32(8)),
        ("attention.key_length", V::U32(128)),
        ("attention.value_length", V::U32(128)),
    ];
    keys.extend(more);
    gguf(arch, &keys)
}

#[test]
fn llama4_chunks_attention_into_8192_whatever_the_key_says() {
    // Llama-4-Scout: 48 layers, 3 chunked in 4 (36), 12 full. n_ctx 32768:
    // full 12 x 32768 x 2048 B = 805,306,368 B = 768 MiB for K and for V;
    // chunked cells pad(min(32768, 8192 + 512)) = 8704: 36 x 8704 x 2048 B
    // = 641,728,512 B = 612 MiB. llama.cpp logged these for the twin.
    let scout = heads_8x128("llama4", 48, vec![]);
    let e = run(&scout, &settings(32768, 1));
    assert_eq!(
        caches(&e),
        [
            (32768, 12, 1, 805_306_368, 805_306_368),
            (8704, 36, 1, 641_728_512, 641_728_512)
        ]
    );
    assert_eq!(
        e.lines()[4],
        "llama_kv_cache_iswa: creating     SWA KV cache, size = 8704 cells"
    );
    // A window in the file does not change the chunk (n_swa = 8192 set
    // over it) ...
    let e = run(
        &heads_8x128(
            "llama4",
            48,
            vec![("attention.sliding_window", V::U32(1024))],
        ),
        &settings(32768, 1),
    );
    assert_eq!(caches(&e)[1].0, 8704);
    // ... but 0 turns chunking off: one cache of 48 full layers.
    let e = run(
        &heads_8x128("llama4", 48, vec![("attention.sliding_window", V::U32(0))]),
        &settings(32768, 1),
    );
    assert_eq!(caches(&e), [(32768, 48, 1, 3_221_225_472, 3_221_225_472)]);
}

#[test]
fn exaone4_slides_only_with_64_layers() {
    // EXAONE-4.0-32B: 64 layers, window 4096, 3 sliding in 4. n_ctx 16384:
    // full 16 x 16384 x 2048 B = 536,870,912 B = 512 MiB; sliding cells
    // pad(min(16384, 4096 + 512)) = 4608: 48 x 4608 x 2048 B = 452,984,832
    // B = 432 MiB. llama.cpp logged these for the twin.
    let e = run(
        &heads_8x128(
            "exaone4",
            64,
            vec![("attention.sliding_window", V::U32(4096))],
        ),
        &settings(16384, 1),
    );
    assert_eq!(
        caches(&e),
        [
            (16384, 16, 1, 536_870_912, 536_870_912),
            (4608, 48, 1, 452_984_832, 452_984_832)
        ]
    );
    // No window key: 4096 by default.
    let e = run(&heads_8x128("exaone4", 64, vec![]), &settings(16384, 1));
    assert_eq!(caches(&e)[1].0, 4608);
    // EXAONE-4.0-1.2B (30 layers): the window is read but never used.
    let e = run(
        &heads_8x128(
            "exaone4",
            30,
            vec![("attention.sliding_window", V::U32(4096))],
        ),
        &settings(16384, 1),
    );
    assert_eq!(caches(&e), [(16384, 30, 1, 1_006_632_960, 1_006_632_960)]);
}

#[test]
fn gemma3n_keeps_kv_in_its_first_20_layers_only() {
    // Gemma-3n-E4B: 35 layers, 2 KV heads of 256, window 512, 4 sliding in
    // 5. llama.cpp fixes n_layer_kv_from_start at 20: layers 20 to 34 reuse
    // layer 18's or 19's K/V. Of layers 0-19, 4, 9, 14 and 19 are full:
    // 4 x 8192 x (2 x 256 x 2 B = 1024 B) = 33,554,432 B = 32 MiB for K
    // and V; 16 sliding in pad(min(8192, 512 + 512)) = 1024 cells: 16 x
    // 1024 x 1024 B = 16 MiB. llama.cpp logged these for the twin.
    let meta = gguf(
        "gemma3n",
        &[
            ("block_count", V::U32(35)),
            ("context_length", V::U32(32768)),
            ("embedding_length", V::U32(2048)),
            ("attention.head_count", V::U32(8)),
            ("attention.head_count_kv", V::U32(2)),
            ("attention.key_length", V::U32(256)),
            ("attention.value_length", V::U32(256)),
            ("attention.sliding_window", V::U32(512)),
        ],
    );
    let e = run(&meta, &settings(8192, 1));
    assert_eq!(
        caches(&e),
        [
            (8192, 4, 1, 33_554_432, 33_554_432),
            (1024, 16, 1, 16_777_216, 16_777_216)
        ]
    );
}

/// Gemma-4-E2B-like: 35 layers, 20 of them sharing an earlier layer's K/V,
/// one KV head of 512 on full layers and 256 on sliding ones (4 in 5).
fn gemma4(shared: u32) -> GgufMetadata {
    let pattern = (0..35).map(|il| il % 5 != 4).collect();
    gguf(
        "gemma4",
        &[
            ("block_count", V::U32(35)),
            ("context_length", V::U32(131072)),
            ("embedding_length", V::U32(1536)),
            ("attention.head_count", V::U32(8)),
            ("attention.head_count_kv", V::U32(1)),
            ("attention.key_length", V::U32(512)),
            ("attention.value_length", V::U32(512)),
            ("attention.key_length_swa", V::U32(256)),
            ("attention.value_length_swa", V::U32(256)),
            ("attention.sliding_window", V::U32(512)),
            ("attention.sliding_window_pattern", V::Bools(pattern)),
            ("attention.shared_kv_layers", V::U32(shared)),
        ],
    )
}

#[test]
fn gemma4_shares_kv_past_block_count_minus_shared_layers() {
    // n_layer_kv_from_start = 35 - 20 = 15. Of layers 0-14, 4, 9 and 14
    // are full: 3 x 8192 x 512 x 2 B = 25,165,824 B = 24 MiB for K and V;
    // 12 sliding in 1024 cells, 256 wide: 12 x 1024 x 512 B = 6,291,456 B
    // = 6 MiB.
    let e = run(&gemma4(20), &settings(8192, 1));
    assert_eq!(
        caches(&e),
        [
            (8192, 3, 1, 25_165_824, 25_165_824),
            (1024, 12, 1, 6_291_456, 6_291_456)
        ]
    );
    // Without flash attention every V is padded to the widest (512), the
    // sliding cache's too: 12 x 1024 x 1024 B = 12 MiB; each cache says so.
    let mut off = settings(8192, 1);
    off.flash_attn = FlashAttn::Off;
    let e = run(&gemma4(20), &off);
    assert_eq!(caches(&e)[1], (1024, 12, 1, 6_291_456, 12_582_912));
    let padding = "llama_kv_cache: the V embeddings have different sizes across layers and FA \
                   is not enabled - padding V cache to 512";
    assert_eq!(e.lines().iter().filter(|l| *l == padding).count(), 2);
    // As llama.cpp logged it for the twin.
    assert_eq!(
        e.lines()[7],
        "llama_kv_cache: size =   18.00 MiB (  1024 cells,  12 layers,  1/1 seqs), K (f16):    \
         6.00 MiB, V (f16):   12.00 MiB"
    );
    // 34 or 36 shared layers leave fewer than 2 with K/V: llama.cpp's
    // reuse callback aborts (34) or the count goes negative (36).
    for shared in [34, 36] {
        let err = refusal(&gemma4(shared), &settings(8192, 1));
        assert!(
            err.contains("GGML_ASSERT(hparams.n_layer_kv_from_start >= 2)"),
            "{err}"
        );
    }
    // The pattern only as an array: a number is refused, naming the key.
    let as_number = gguf(
        "gemma4",
        &[
            ("block_count", V::U32(4)),
            ("context_length", V::U32(4096)),
            ("embedding_length", V::U32(1536)),
            ("attention.head_count", V::U32(8)),
            ("attention.sliding_window", V::U32(512)),
            ("attention.sliding_window_pattern", V::U32(5)),
        ],
    );
    let err = refusal(&as_number, &settings(4096, 1));
    assert!(
        err.contains("no array `gemma4.attention.sliding_window_pattern`"),
        "{err}"
    );
}

#[test]
fn cohere2moe_counts_its_pattern_dense_first() {
    // load_swa_pattern(ml, 4, true): layer il slides unless il % 4 == 0,
    // so of 6 layers 0 and 4 are full (gemma-style counting would make only
    // layer 3 full). 2 KV heads of 256 / 2 = 128: a row is 512 B in f16.
    // Full: 2 x 8192 x 512 B = 8,388,608 B (8 MiB); sliding in pad(min(8192,
    // 1024 + 512)) = 1536 cells: 4 x 1536 x 512 B = 3,145,728 B (3 MiB).
    // llama.cpp logged 16.00 and 6.00 MiB for the twin.
    let meta = gguf(
        "cohere2moe",
        &[
            ("block_count", V::U32(6)),
            ("context_length", V::U32(16384)),
            ("embedding_length", V::U32(256)),
            ("attention.head_count", V::U32(2)),
            ("attention.head_count_kv", V::U32(2)),
            ("attention.sliding_window", V::U32(1024)),
        ],
    );
    let e = run(&meta, &settings(8192, 1));
    assert_eq!(
        caches(&e),
        [
            (8192, 2, 1, 8_388_608, 8_388_608),
            (1536, 4, 1, 3_145_728, 3_145_728)
        ]
    );
}

#[test]
fn rwkv6_holds_token_shift_and_wkv_state() {
    // RWKV-6 1.6B: 24 layers, n_embd 2048, heads of 64; 2 sequences.
    // R = token_shift_count (2 by default) x 2048 = 4096 f32 = 16,384 B,
    // x 24 x 2 = 786,432 B = 0.75 MiB. S = 2048 x 64 = 131,072 f32 =
    // 524,288 B, x 48 = 25,165,824 B = 24 MiB. llama.cpp logged this line
    // for the twin (its graph then aborts on the twin's head count 0).
    let rwkv6 = |more: Vec<(&'static str, V)>| {
        let mut keys = vec![
            ("block_count", V::U32(24)),
            ("context_length", V::U32(1048576)),
            ("embedding_length", V::U32(2048)),
            ("wkv.head_size", V::U32(64)),
            ("time_mix_extra_dim", V::U32(32)),
            ("time_decay_extra_dim", V::U32(64)),
        ];
        keys.extend(more);
        gguf("rwkv6", &keys)
    };
    let e = run(&rwkv6(vec![]), &settings(4096, 2));
    assert_eq!(
        e.lines(),
        [
            "llama_memory_recurrent: size =   24.75 MiB (     2 cells,  24 layers,  2 seqs  0 \
             rs_seq), R (f32):    0.75 MiB, S (f32):   24.00 MiB, P (f32):    0.00 MiB"
        ]
    );
    assert_eq!(e.bytes(), 786_432 + 25_165_824);
    // A token shift of 3: R 3 x 2048 x 4 B x 48 = 1,179,648 B.
    let e = run(
        &rwkv6(vec![("token_shift_count", V::U32(3))]),
        &settings(4096, 2),
    );
    assert_eq!(e.bytes(), 1_179_648 + 25_165_824);
    // A width past uint32 is refused naming the keys.
    let err = refusal(
        &rwkv6(vec![("token_shift_count", V::U32(u32::MAX))]),
        &settings(4096, 2),
    );
    assert!(
        err.contains("`token_shift_count` x `embedding_length`"),
        "{err}"
    );
}

#[test]
fn minimax01_lightning_layers_hold_a_square_state_per_head() {
    // MiniMax-Text-01: 80 layers, softmax attention every 8th (7, 15, ...,
    // 79: 10 layers, 8 KV heads of 128), lightning attention in the other
    // 70. KV: 10 x 8192 x 1024 x 2 B = 167,772,160 B = 160 MiB for K and V.
    // S = 128^2 x 64 heads = 1,048,576 f32 = 4 MiB a layer, x 70 = 280 MiB;
    // no R (minimax-01 reads no conv keys). llama.cpp logged both lines for
    // the twin.
    let meta = gguf(
        "minimax-01",
        &[
            ("block_count", V::U32(80)),
            ("context_length", V::U32(1048576)),
            ("embedding_length", V::U32(6144)),
            ("attention.head_count", V::U32(64)),
            ("attention.head_count_kv", V::U32(8)),
            ("attention.key_length", V::U32(128)),
            ("attention.value_length", V::U32(128)),
        ],
    );
    let e = run(&meta, &settings(8192, 1));
    assert_eq!(
        hybrid(&e),
        (8192, 10, 167_772_160, 167_772_160, 80, 70, 0, 293_601_280)
    );
    assert_eq!(
        e.lines()[3],
        "llama_memory_recurrent: size =  280.00 MiB (     1 cells,  80 layers,  1 seqs  0 \
         rs_seq), R (f32):    0.00 MiB, S (f32):  280.00 MiB, P (f32):    0.00 MiB"
    );
}

#[test]
fn kimi_linear_pairs_mla_attention_with_kda_state() {
    // Kimi-Linear-like: 27 layers, MLA at 3, 7, 11, 15, 19, 23 and 26 (one
    // KV head of 576, no V), KDA (head_count_kv 0) in the other 20.
    // K: 7 x 8192 x 576 x 2 B = 66,060,288 B = 63 MiB.
    // R = 3 x (4 - 1) x 32 heads x 128 = 36,864 f32 = 147,456 B, x 20 =
    // 2,949,120 B = 2.8125 MiB (2.81). S = 128^2 x 32 = 524,288 f32 = 2 MiB,
    // x 20 = 40 MiB. Together 42.8125 MiB (42.81). As llama.cpp logged.
    let kv = (0..27)
        .map(|il| u32::from(il % 4 == 3 || il == 26))
        .collect();
    let meta = gguf(
        "kimi-linear",
        &[
            ("block_count", V::U32(27)),
            ("context_length", V::U32(1048576)),
            ("embedding_length", V::U32(2304)),
            ("attention.head_count", V::U32(32)),
            ("attention.head_count_kv", V::U32s(kv)),
            ("attention.key_length", V::U32(576)),
            ("attention.value_length", V::U32(512)),
            ("attention.key_length_mla", V::U32(192)),
            ("attention.value_length_mla", V::U32(128)),
            ("attention.kv_lora_rank", V::U32(512)),
            ("ssm.conv_kernel", V::U32(4)),
            ("kda.head_dim", V::U32(128)),
        ],
    );
    let e = run(&meta, &settings(8192, 1));
    assert_eq!(
        hybrid(&e),
        (8192, 7, 66_060_288, 0, 27, 20, 2_949_120, 41_943_040)
    );
    assert_eq!(
        e.lines()[0],
        "llama_kv_cache: size =   63.00 MiB (  8192 cells,   7 layers,  1/1 seqs), K (f16):   \
         63.00 MiB, V (f16):    0.00 MiB"
    );
    assert_eq!(
        e.lines()[3],
        "llama_memory_recurrent: size =   42.81 MiB (     1 cells,  27 layers,  1 seqs  0 \
         rs_seq), R (f32):    2.81 MiB, S (f32):   40.00 MiB, P (f32):    0.00 MiB"
    );
    // MLA: K and V types must agree.
    let mixed = with_types(settings(8192, 1), GgmlType::Q8_0, GgmlType::F16);
    assert!(refusal(&meta, &mixed).contains("model does not support different K"));
}

/// A DSA model's header: MLA (one KV head of 576, no V) with a lightning
/// indexer of 128-wide keys.
fn dsa(arch: &str, layers: u32, context: u32, more: Vec<(&'static str, V)>) -> GgufMetadata {
    let mut keys = vec![
        ("block_count", V::U32(layers)),
        ("context_length", V::U32(context)),
        ("embedding_length", V::U32(7168)),
        ("attention.head_count", V::U32(128)),
        ("attention.head_count_kv", V::U32(1)),
        ("attention.key_length", V::U32(576)),
        ("attention.value_length", V::U32(512)),
        ("attention.key_length_mla", V::U32(192)),
        ("attention.value_length_mla", V::U32(128)),
        ("attention.indexer.head_count", V::U32(64)),
        ("attention.indexer.key_length", V::U32(128)),
        ("attention.indexer.top_k", V::U32(2048)),
    ];
    keys.extend(more);
    gguf(arch, &keys)
}

/// The (cells, layers, K bytes, V bytes, rotated K) of a DSA model's main
/// and indexer caches.
type DsaCaches = [(u64, u64, u64, u64, bool); 2];

fn dsa_caches(e: &LlamaCppEstimate) -> DsaCaches {
    let Memory::Dsa { main, indexer, .. } = &e.memory else {
        panic!("not DSA: {:?}", e.memory)
    };
    let of = |c: &kv_engines::estimate::llamacpp::KvCache| {
        (c.cells, c.layers, c.k_bytes, c.v_bytes, c.attn_rot_k)
    };
    [of(main), of(indexer)]
}

#[test]
fn deepseek32_adds_a_rotated_indexer_key_cache() {
    // DeepSeek-V3.2: 61 layers. Main (MLA): 61 x 8192 x 576 x 2 B =
    // 575,668,224 B = 549 MiB, no V. Indexer: one 128-wide key a layer,
    // 61 x 8192 x 128 x 2 B = 127,926,272 B = 122 MiB; llama.cpp rotates
    // DeepSeek's indexer keys even in f16. As llama.cpp logged for the twin.
    let e = run(&dsa("deepseek32", 61, 163840, vec![]), &settings(8192, 1));
    assert_eq!(
        dsa_caches(&e),
        [
            (8192, 61, 575_668_224, 0, false),
            (8192, 61, 127_926_272, 0, true)
        ]
    );
    assert_eq!(
        e.lines()[4..7],
        [
            "llama_kv_cache_dsa: creating indexer KV cache, size = 8192 cells",
            "llama_kv_cache: size =  122.00 MiB (  8192 cells,  61 layers,  1/1 seqs), K (f16):  \
             122.00 MiB, V (f16):    0.00 MiB",
            "llama_kv_cache: attn_rot_k = 1, n_embd_head_k_all = 128",
        ]
    );
}

#[test]
fn glm_dsa_indexes_the_layers_its_types_name() {
    // GLM-5.2 (a 1M context, no indexer.types): llama.cpp's table gives
    // layers 0 and 1, then 2, 6, ..., 74: 2 + 19 = 21 layers. Main: 78 x
    // 8192 x 1152 B = 736,100,352 B = 702 MiB; indexer 21 x 8192 x 256 B =
    // 44,040,192 B = 42 MiB. As llama.cpp logged for the twin.
    let e = run(&dsa("glm-dsa", 78, 1048576, vec![]), &settings(8192, 1));
    assert_eq!(
        dsa_caches(&e),
        [
            (8192, 78, 736_100_352, 0, false),
            (8192, 21, 44_040_192, 0, true)
        ]
    );
    // GLM-5/5.1 (under 1M): every layer has an indexer.
    let e = run(&dsa("glm-dsa", 78, 202752, vec![]), &settings(8192, 1));
    assert_eq!(dsa_caches(&e)[1].1, 78);
    // indexer.types wins: 3 of 4 layers (llama.cpp: 6.00 MiB = 3 x 8192 x
    // 256 B for the twin).
    let types = V::U32s(vec![1, 0, 1, 1]);
    let e = run(
        &dsa(
            "glm-dsa",
            4,
            202752,
            vec![("attention.indexer.types", types)],
        ),
        &settings(8192, 1),
    );
    assert_eq!(dsa_caches(&e)[1].1, 3);
    // The indexer's width is required, as llama.cpp requires it.
    let mut keys = vec![
        ("block_count", V::U32(4)),
        ("context_length", V::U32(4096)),
        ("embedding_length", V::U32(7168)),
        ("attention.head_count", V::U32(128)),
        ("attention.indexer.head_count", V::U32(64)),
    ];
    keys.push(("attention.indexer.top_k", V::U32(2048)));
    let err = refusal(&gguf("glm-dsa", &keys), &settings(4096, 1));
    assert!(
        err.contains("no `glm-dsa.attention.indexer.key_length`"),
        "{err}"
    );
}

#[test]
fn hy_v4_indexes_only_with_a_top_k() {
    // top_k 0 (an all-full-attention checkpoint): one MLA cache, 4 x 8192 x
    // 1152 B = 37,748,736 B = 36 MiB, no indexer (llama.cpp logged 36.00
    // MiB and no DSA line for the twin).
    let hy = |top_k: u32, types: Vec<u32>| {
        let mut keys = vec![
            ("block_count", V::U32(4)),
            ("context_length", V::U32(262144)),
            ("embedding_length", V::U32(4096)),
            ("attention.head_count", V::U32(64)),
            ("attention.head_count_kv", V::U32(1)),
            ("attention.key_length", V::U32(576)),
            ("attention.value_length", V::U32(512)),
            ("attention.key_length_mla", V::U32(192)),
            ("attention.value_length_mla", V::U32(128)),
            ("rope.dimension_count", V::U32(64)),
            ("attention.indexer.head_count", V::U32(64)),
            ("attention.indexer.key_length", V::U32(128)),
            ("attention.indexer.top_k", V::U32(top_k)),
        ];
        keys.push(("attention.indexer.types", V::U32s(types)));
        gguf("hy_v4", &keys)
    };
    let e = run(&hy(0, vec![1, 0, 1, 0]), &settings(8192, 1));
    assert_eq!(caches(&e), [(8192, 4, 1, 37_748_736, 0)]);
    // With a top_k, layers 0 and 2 own an indexer: 2 x 8192 x 256 B =
    // 4 MiB, not rotated (hy_v4 is not one of the DeepSeek indexers).
    let e = run(&hy(2048, vec![1, 0, 1, 0]), &settings(8192, 1));
    assert_eq!(
        dsa_caches(&e),
        [
            (8192, 4, 37_748_736, 0, false),
            (8192, 2, 4_194_304, 0, false)
        ]
    );
    // Layer 0 without an indexer is refused as llama.cpp refuses it.
    let err = refusal(&hy(2048, vec![0, 1, 1, 1]), &settings(8192, 1));
    assert!(err.contains("hy_v4: layer 0 must own an indexer"), "{err}");
}

#[test]
fn nanbeige_repeats_its_layers_num_loops_times() {
    // 4 physical layers with 2, 2, 1, 1 KV heads of 256 / 2 = 128, looped 3
    // times: llama.cpp makes n_layer_all 12, each copy with its layer's
    // heads. K: 3 loops x (2 + 2 + 1 + 1) heads x 128 x 2 B x 4096 cells =
    // 18,874,368 B = 18 MiB, and V the same (llama.cpp logged 36.00 MiB,
    // 12 layers, for the twin).
    let nanbeige = |loops: u32| {
        gguf(
            "nanbeige",
            &[
                ("block_count", V::U32(4)),
                ("context_length", V::U32(4096)),
                ("embedding_length", V::U32(256)),
                ("attention.head_count", V::U32(2)),
                ("attention.head_count_kv", V::U32s(vec![2, 2, 1, 1])),
                ("num_loops", V::U32(loops)),
            ],
        )
    };
    let e = run(&nanbeige(3), &settings(4096, 1));
    assert_eq!(caches(&e), [(4096, 12, 1, 18_874_368, 18_874_368)]);
    assert!(refusal(&nanbeige(0), &settings(4096, 1)).contains("`nanbeige.num_loops` is 0"));
    // 4 x 129 = 516 layers: above LLAMA_MAX_LAYERS.
    assert!(refusal(&nanbeige(129), &settings(4096, 1)).contains("516 layers"));
}

#[test]
fn hrm_text_block_count_must_be_its_cache_slots() {
    // 1 layer per stack x 2 h-cycles x (2 l-cycles + 1) = 6 slots: a cache
    // of 6 layers, 2 KV heads of 128: 6 x 4096 x 512 B = 12 MiB for K.
    let hrm = |layers: u32| {
        gguf(
            "hrm_text",
            &[
                ("block_count", V::U32(layers)),
                ("context_length", V::U32(4096)),
                ("embedding_length", V::U32(256)),
                ("attention.head_count", V::U32(2)),
                ("hrm.layers_per_stack", V::U32(1)),
                ("hrm.h_cycles", V::U32(2)),
                ("hrm.l_cycles", V::U32(2)),
            ],
        )
    };
    let e = run(&hrm(6), &settings(4096, 1));
    assert_eq!(caches(&e), [(4096, 6, 1, 12_582_912, 12_582_912)]);
    let err = refusal(&hrm(5), &settings(4096, 1));
    assert!(
        err.contains("is 6 cache slots, not `hrm_text.block_count` 5"),
        "{err}"
    );
}

#[test]
fn laguna_slides_dense_first_only_with_a_window() {
    // 6 layers, window 512, pattern 4 dense-first: 0 and 4 full, 4 sliding.
    // Heads of 160 / 2 = 80, 2 KV heads: 320 B a row. Full: 2 x 4096 x 320
    // = 2,621,440 B (2.50 MiB); sliding in pad(min(4096, 512 + 512)) = 1024
    // cells: 4 x 1024 x 320 = 1,310,720 B (1.25 MiB), as llama.cpp logged
    // for the twin.
    let laguna = |window: u32| {
        gguf(
            "laguna",
            &[
                ("block_count", V::U32(6)),
                ("context_length", V::U32(4096)),
                ("embedding_length", V::U32(160)),
                ("attention.head_count", V::U32(2)),
                ("attention.sliding_window", V::U32(window)),
            ],
        )
    };
    let e = run(&laguna(512), &settings(4096, 1));
    assert_eq!(
        caches(&e),
        [
            (4096, 2, 1, 2_621_440, 2_621_440),
            (1024, 4, 1, 1_310_720, 1_310_720)
        ]
    );
    // No window (Laguna M.1): one full cache of 6 layers.
    let e = run(&laguna(0), &settings(4096, 1));
    assert_eq!(caches(&e), [(4096, 6, 1, 7_864_320, 7_864_320)]);
}

#[test]
fn kimi_k3_widens_v_to_its_latent_and_bailingmoe3_checks_its_gate() {
    // kimi-k3 sets n_embd_head_v_full to kv_lora_rank (512) whatever
    // value_length (128) says: without flash attention the padding line says
    // 512. 4 layers, MLA at layer 3 (one head of 576): K 4096 x 1152 B =
    // 4.5 MiB, no V. KDA in layers 0-2, one head of 128, d_conv 4: R = 3 x 3
    // x 128 = 1152 f32 = 4608 B, x 3 = 13,824 B; S = 128^2 f32 = 65,536 B, x
    // 3 = 196,608 B (0.1875 MiB, 0.19). As llama.cpp logged for the twin.
    let k3 = |arch: &str, more: Vec<(&'static str, V)>| {
        let mut keys = vec![
            ("block_count", V::U32(4)),
            ("context_length", V::U32(4096)),
            ("embedding_length", V::U32(128)),
            ("attention.head_count", V::U32(1)),
            ("attention.head_count_kv", V::U32s(vec![0, 0, 0, 1])),
            ("attention.key_length", V::U32(576)),
            ("attention.value_length", V::U32(128)),
            ("attention.key_length_mla", V::U32(192)),
            ("attention.value_length_mla", V::U32(128)),
            ("attention.kv_lora_rank", V::U32(512)),
            ("ssm.conv_kernel", V::U32(4)),
            ("kda.head_dim", V::U32(128)),
        ];
        keys.extend(more);
        gguf(arch, &keys)
    };
    let mut off = settings(4096, 1);
    off.flash_attn = FlashAttn::Off;
    let e = run(&k3("kimi-k3", vec![]), &off);
    assert_eq!(hybrid(&e), (4096, 1, 4_718_592, 0, 4, 3, 13_824, 196_608));
    assert_eq!(
        e.lines()[0],
        "llama_kv_cache: the V embeddings have different sizes across layers and FA is not \
         enabled - padding V cache to 512"
    );
    assert_eq!(
        e.lines()[4],
        "llama_memory_recurrent: size =    0.20 MiB (     1 cells,   4 layers,  1 seqs  0 \
         rs_seq), R (f32):    0.01 MiB, S (f32):    0.19 MiB, P (f32):    0.00 MiB"
    );
    // bailingmoe3 asserts its KDA gate: a lower bound of 0 is refused, and
    // one below 0 sizes as kimi-linear does (value_length stays 128 there).
    let zero = k3("bailingmoe3", vec![("kda.gate_lower_bound", V::F32(0.0))]);
    let err = refusal(&zero, &settings(4096, 1));
    assert!(
        err.contains("`bailingmoe3.kda.gate_lower_bound` is 0"),
        "{err}"
    );
    let e = run(
        &k3("bailingmoe3", vec![("kda.gate_lower_bound", V::F32(-5.0))]),
        &off,
    );
    assert!(e.lines()[0].ends_with("padding V cache to 128"));
}

#[test]
fn smallthinker_slides_4096_whatever_its_window_says() {
    // 8 layers, 2 KV heads of 128 (512 B a row), pattern 4 dense-first: 0
    // and 4 full, 6 sliding. sliding_window 1024 only switches the window
    // on: llama.cpp sets n_swa = 4096. Full: 2 x 16384 x 512 B = 16 MiB;
    // sliding in pad(min(16384, 4096 + 512)) = 4608 cells: 6 x 4608 x 512 B
    // = 14,155,776 B (13.5 MiB), as llama.cpp logged for the twin.
    let meta = gguf(
        "smallthinker",
        &[
            ("block_count", V::U32(8)),
            ("context_length", V::U32(16384)),
            ("embedding_length", V::U32(256)),
            ("attention.head_count", V::U32(2)),
            ("attention.sliding_window", V::U32(1024)),
        ],
    );
    let e = run(&meta, &settings(16384, 1));
    assert_eq!(
        caches(&e),
        [
            (16384, 2, 1, 16_777_216, 16_777_216),
            (4608, 6, 1, 14_155_776, 14_155_776)
        ]
    );
}

#[test]
fn minimax_m3_adds_an_msa_indexer_cache_past_its_dense_layers() {
    // 6 layers, 2 KV heads of 128 (512 B a row), 2 leading dense layers,
    // indexer keys of 64. Main (every layer): 6 x 4096 x 512 B = 12 MiB for
    // K and V. Indexer (layers 2-5, one head): K 4 x 4096 x 128 B = 2 MiB;
    // its V keeps the model's value width, one head: 4 x 4096 x 256 B =
    // 4 MiB. As llama.cpp logged for the twin.
    let meta = gguf(
        "minimax-m3",
        &[
            ("block_count", V::U32(6)),
            ("context_length", V::U32(4096)),
            ("embedding_length", V::U32(256)),
            ("attention.head_count", V::U32(2)),
            ("leading_dense_block_count", V::U32(2)),
            ("attention.indexer.head_count", V::U32(2)),
            ("attention.indexer.key_length", V::U32(64)),
            ("attention.indexer.top_k", V::U32(16)),
            ("attention.indexer.block_size", V::U32(4)),
            ("attention.indexer.local_blocks", V::U32(1)),
        ],
    );
    let e = run(&meta, &settings(4096, 1));
    assert_eq!(
        dsa_caches(&e),
        [
            (4096, 6, 12_582_912, 12_582_912, false),
            (4096, 4, 2_097_152, 4_194_304, false)
        ]
    );
    assert_eq!(
        e.lines()[4..6],
        [
            "llama_kv_cache_msa: creating indexer KV cache, size = 4096 cells",
            "llama_kv_cache: size =    6.00 MiB (  4096 cells,   4 layers,  1/1 seqs), K (f16):    \
             2.00 MiB, V (f16):    4.00 MiB",
        ]
    );
}

#[test]
fn dots3note_splits_dsa_full_layers_from_sliding_ones() {
    // 6 layers, full at 0 and 3 (pattern array), window 512; MLA keys of 576
    // on both kinds (1152 B a row), indexer keys of 128 on layers 0 and 3.
    // DSA main: 2 x 8192 x 1152 B = 18 MiB; indexer 2 x 8192 x 256 B = 4 MiB
    // (rotated: dots3note's is a DeepSeek indexer); SWA in pad(min(8192, 512
    // + 512)) = 1024 cells: 4 x 1024 x 1152 B = 4.5 MiB. No V anywhere.
    // As llama.cpp logged for the twin.
    let meta = gguf(
        "dots3note",
        &[
            ("block_count", V::U32(6)),
            ("context_length", V::U32(8192)),
            ("embedding_length", V::U32(128)),
            ("attention.head_count", V::U32(1)),
            ("attention.key_length", V::U32(576)),
            ("attention.value_length", V::U32(512)),
            ("attention.key_length_mla", V::U32(192)),
            ("attention.value_length_mla", V::U32(128)),
            ("attention.sliding_window", V::U32(512)),
            (
                "attention.sliding_window_pattern",
                V::U32s(vec![0, 1, 1, 0, 1, 1]),
            ),
            ("attention.indexer.head_count", V::U32(64)),
            ("attention.indexer.key_length", V::U32(128)),
            ("attention.indexer.top_k", V::U32(2048)),
            ("attention.indexer.types", V::U32s(vec![1, 0, 0, 1, 0, 0])),
        ],
    );
    let e = run(&meta, &settings(8192, 1));
    let Memory::DsaIswa {
        main, indexer, swa, ..
    } = &e.memory
    else {
        panic!("{:?}", e.memory)
    };
    let of = |c: &kv_engines::estimate::llamacpp::KvCache| {
        (c.cells, c.layers, c.k_bytes, c.v_bytes, c.attn_rot_k)
    };
    assert_eq!(
        [of(main), of(indexer), of(swa)],
        [
            (8192, 2, 18_874_368, 0, false),
            (8192, 2, 4_194_304, 0, true),
            (1024, 4, 4_718_592, 0, false)
        ]
    );
    assert_eq!(
        e.lines()[0],
        "llama_kv_cache_dsa_iswa: creating DSA KV cache, size = 8192 cells"
    );
    assert_eq!(
        e.lines()[1],
        "llama_kv_cache_dsa: creating main KV cache, size = 8192 cells"
    );
    assert_eq!(
        e.lines()[9],
        "llama_kv_cache_dsa_iswa: creating SWA KV cache, size = 1024 cells"
    );
    // --swa-full: the SWA cache as large as the DSA one, and llama.cpp says so.
    let mut full = settings(8192, 1);
    full.swa_full = true;
    let e = run(&meta, &full);
    assert!(e.lines()[0].starts_with("llama_kv_cache_dsa_iswa: using full-size SWA cache"));
    assert!(e
        .lines()
        .contains(&"llama_kv_cache_dsa_iswa: creating SWA KV cache, size = 8192 cells".to_owned()));
}

#[test]
fn glm5_next_adds_a_pooled_indexer_cache_to_its_hybrid() {
    // 4 layers: KDA in 0-2 (head_count_kv 0), K-only MLA in 3 (one head of
    // 512). Attention: 4096 x 512 x 2 B = 4 MiB, no V. State (one head of
    // 128, d_conv 4): R 3 x 3 x 128 f32 = 4608 B, x 3 = 13,824 B; S 128^2
    // f32 = 65,536 B, x 3 = 196,608 B (0.20 MiB together). Indexer (key,
    // gate and pooled value: 3 x 128 = 384 wide, one head) on layer 3:
    // 4096 x 768 B = 3 MiB, logged from a lambda as `operator()`. As
    // llama.cpp logged for the twin.
    let glm5 = |types: Option<Vec<u32>>| {
        let mut keys = vec![
            ("block_count", V::U32(4)),
            ("context_length", V::U32(4096)),
            ("embedding_length", V::U32(128)),
            ("attention.head_count", V::U32(1)),
            ("attention.head_count_kv", V::U32s(vec![0, 0, 0, 1])),
            ("attention.key_length", V::U32(512)),
            ("attention.value_length", V::U32(512)),
            ("attention.key_length_mla", V::U32(192)),
            ("attention.value_length_mla", V::U32(128)),
            ("attention.q_lora_rank", V::U32(512)),
            ("attention.kv_lora_rank", V::U32(512)),
            ("ssm.conv_kernel", V::U32(4)),
            ("kda.head_dim", V::U32(128)),
            ("attention.indexer.head_count", V::U32(64)),
            ("attention.indexer.key_length", V::U32(128)),
            ("attention.indexer.top_k", V::U32(2048)),
            ("attention.indexer.kpool", V::U32(4)),
        ];
        if let Some(types) = types {
            keys.push(("attention.indexer.types", V::U32s(types)));
        }
        gguf("glm5-next", &keys)
    };
    let e = run(&glm5(None), &settings(4096, 1));
    let Memory::HybridIdx {
        attention,
        state,
        indexer,
    } = &e.memory
    else {
        panic!("{:?}", e.memory)
    };
    assert_eq!(
        (attention.layers, attention.k_bytes, attention.v_bytes),
        (1, 4_194_304, 0)
    );
    assert_eq!(
        (
            state.layers,
            state.state_layers,
            state.r_bytes,
            state.s_bytes
        ),
        (4, 3, 13_824, 196_608)
    );
    assert_eq!(
        (indexer.layers, indexer.k_bytes, indexer.v_bytes),
        (1, 3_145_728, 0)
    );
    assert_eq!(
        e.lines()[4..6],
        [
            "operator(): creating indexer KV cache, size = 4096 cells",
            "llama_kv_cache: size =    3.00 MiB (  4096 cells,   1 layers,  1/1 seqs), K (f16):    \
             3.00 MiB, V (f16):    0.00 MiB",
        ]
    );
    // indexer.types without layer 3: an empty indexer cache.
    let e = run(&glm5(Some(vec![1, 1, 1, 0])), &settings(4096, 1));
    let Memory::HybridIdx { indexer, .. } = &e.memory else {
        panic!()
    };
    assert_eq!((indexer.layers, indexer.k_bytes), (0, 0));
    // A kpool that does not divide top_k is refused as llama.cpp asserts.
    let mut keys = vec![
        ("block_count", V::U32(4)),
        ("context_length", V::U32(4096)),
        ("embedding_length", V::U32(128)),
        ("attention.head_count", V::U32(1)),
        ("attention.head_count_kv", V::U32s(vec![0, 0, 0, 1])),
        ("attention.key_length_mla", V::U32(192)),
        ("attention.value_length_mla", V::U32(128)),
        ("attention.q_lora_rank", V::U32(512)),
        ("attention.kv_lora_rank", V::U32(512)),
        ("ssm.conv_kernel", V::U32(4)),
        ("kda.head_dim", V::U32(128)),
        ("attention.indexer.head_count", V::U32(64)),
        ("attention.indexer.key_length", V::U32(128)),
        ("attention.indexer.top_k", V::U32(2048)),
    ];
    keys.push(("attention.indexer.kpool", V::U32(3)));
    let err = refusal(&gguf("glm5-next", &keys), &settings(4096, 1));
    assert!(
        err.contains("`glm5-next.attention.indexer.kpool` 3"),
        "{err}"
    );
}

#[test]
fn qwen4exp_keeps_a_ple_conv_row_and_a_qsa_indexer() {
    // 2 layers, full attention every 2nd: layer 0 Gated DeltaNet (d_inner
    // 256, d_state 128, 2 groups, d_conv 4), layer 1 attention (2 KV heads
    // of 128: 512 B a row). Attention: 4096 x 512 B = 2 MiB for K and V.
    // R = 3 x (256 + 2 x 2 x 128) = 2304 f32 = 9216 B; S = 128 x 256 f32 =
    // 131,072 B (0.125, printed 0.12: a tie, to even); P, the PLE conv row on
    // layer 0 = (4 - 1) x ngram 3 x 4 hyper-connections x 256 = 9216 f32 =
    // 36,864 B (0.04). Together 177,152 B (0.17). QSA indexer on layer 1:
    // one head of 128, no V: 4096 x 256 B = 1 MiB. As llama.cpp logged for
    // the twin.
    let qwen4exp = |ple_layer: u32| {
        gguf(
            "qwen4exp",
            &[
                ("block_count", V::U32(2)),
                ("context_length", V::U32(4096)),
                ("embedding_length", V::U32(256)),
                ("attention.head_count", V::U32(2)),
                ("full_attention_interval", V::U32(2)),
                ("ssm.conv_kernel", V::U32(4)),
                ("ssm.inner_size", V::U32(256)),
                ("ssm.state_size", V::U32(128)),
                ("ssm.time_step_rank", V::U32(2)),
                ("ssm.group_count", V::U32(2)),
                ("hyper_connection.count", V::U32(4)),
                ("hyper_connection.low_rank", V::U32(8)),
                ("attention.indexer.head_count", V::U32(64)),
                ("attention.indexer.key_length", V::U32(128)),
                ("attention.indexer.top_k", V::U32(2048)),
                ("ple.layers", V::U32s(vec![ple_layer])),
                ("ple.ngram_size", V::U32(3)),
                ("ple.heads_per_ngram", V::U32(2)),
                ("ple.conv_kernel", V::U32(4)),
                ("ple.eos_token_id", V::U32(0)),
                ("embedding_length_per_layer_input", V::U32(64)),
            ],
        )
    };
    let e = run(&qwen4exp(0), &settings(4096, 1));
    let Memory::HybridIdx {
        attention,
        state,
        indexer,
    } = &e.memory
    else {
        panic!("{:?}", e.memory)
    };
    assert_eq!((attention.layers, attention.k_bytes), (1, 2_097_152));
    assert_eq!(
        (state.r_bytes, state.s_bytes, state.p_bytes),
        (9216, 131_072, 36_864)
    );
    assert_eq!(
        (indexer.layers, indexer.k_bytes, indexer.v_bytes),
        (1, 1_048_576, 0)
    );
    assert_eq!(
        e.lines()[3],
        "llama_memory_recurrent: size =    0.17 MiB (     1 cells,   2 layers,  1 seqs  0 \
         rs_seq), R (f32):    0.01 MiB, S (f32):    0.12 MiB, P (f32):    0.04 MiB"
    );
    // On a device: K and V 4,194,304 B, R, S and P 177,152 B (each a
    // multiple of 128), the indexer's K 1,048,576 B.
    assert_eq!(e.buffer_bytes(GPU, CacheDevice::Cuda), Some(5_420_032));
    // The PLE layer must be a linear-attention one, as llama.cpp requires.
    let err = refusal(&qwen4exp(1), &settings(4096, 1));
    assert!(
        err.contains("PLE layer 1 is not a linear attention layer"),
        "{err}"
    );
}

#[test]
fn dflash_slides_by_its_array_only_with_a_window() {
    // A DFlash draft with 4 layers, 2 KV heads of 128 (512 B a row), window
    // 512, layers 0 and 2 sliding. Full: 2 x 4096 x 512 B = 4 MiB for K and
    // V; sliding in pad(min(4096, 512 + 512)) = 1024 cells: 2 x 1024 x 512 B
    // = 1 MiB. As llama.cpp logged for the twin.
    let dflash = |more: Vec<(&'static str, V)>| {
        let mut keys = vec![
            ("block_count", V::U32(4)),
            ("context_length", V::U32(4096)),
            ("embedding_length", V::U32(256)),
            ("attention.head_count", V::U32(2)),
            ("target_layers", V::U32s(vec![0, 1])),
        ];
        keys.extend(more);
        gguf("dflash", &keys)
    };
    let e = run(
        &dflash(vec![
            ("attention.sliding_window", V::U32(512)),
            (
                "attention.sliding_window_pattern",
                V::Bools(vec![true, false, true, false]),
            ),
        ]),
        &settings(4096, 1),
    );
    assert_eq!(
        caches(&e),
        [
            (4096, 2, 1, 4_194_304, 4_194_304),
            (1024, 2, 1, 1_048_576, 1_048_576)
        ]
    );
    // No window: one cache of 4 layers.
    let e = run(&dflash(vec![]), &settings(4096, 1));
    assert_eq!(caches(&e), [(4096, 4, 1, 8_388_608, 8_388_608)]);
    // A DSpark DSV4 draft is refused by name.
    let err = refusal(
        &dflash(vec![("hyper_connection.count", V::U32(4))]),
        &settings(4096, 1),
    );
    assert!(err.contains("DSpark DSV4 draft"), "{err}");
}

// ---- each cache's buffer on a device (kv fit --engine llama.cpp) ----------

/// Every layer on the GPU; every layer on the host (a CPU-only build).
const GPU: CachePlacement = CachePlacement::Cuda { gpu_from: 0 };
const HOST: CachePlacement = CachePlacement::Cpu;

#[test]
fn each_cache_has_its_buffer_line_before_its_size_line() {
    // Llama-3-8B at 8,192 cells, a q8_0 V with flash attention on auto:
    // llama.cpp's line turning it on comes first. K (f16): 1,024 x 2 x
    // 8,192 = 16,777,216 B a layer; V (q8_0): 1,024 / 32 x 34 x 8,192 =
    // 8,912,896 B; rows of 1,024 elements, a multiple of 512, and both a
    // multiple of 128: 32 x 25,690,112 = 822,083,584 B = 784.00 MiB on
    // either device.
    let s = with_types(settings(8192, 1), GgmlType::F16, GgmlType::Q8_0);
    let e = run(&llama3_8b(), &s);
    assert_eq!(e.buffer_bytes(GPU, CacheDevice::Cuda), Some(822_083_584));
    assert_eq!(e.buffer_bytes(HOST, CacheDevice::Cpu), Some(822_083_584));
    let mut want = e.lines().to_vec();
    assert!(want[0].starts_with("llama_init_from_model: enabling flash_attn"));
    want.insert(
        1,
        "llama_kv_cache:      CUDA0 KV buffer size =   784.00 MiB".to_owned(),
    );
    assert_eq!(e.lines_placed(GPU), want);
    want[1] = "llama_kv_cache:        CPU KV buffer size =   784.00 MiB".to_owned();
    assert_eq!(e.lines_placed(HOST), want);
}

#[test]
fn cuda_pads_a_quantized_cache_row_and_an_empty_cache_has_no_buffer() {
    // gemma3, 6 layers, all sliding, 1 KV head of 128: the non-SWA cache
    // has no layers and makes no buffer. SWA: 1,024 cells; a q8_0 row of
    // 128 elements is 136 B, a tensor 139,264 B. CUDA adds ggml_row_size(q8_0,
    // 384) = 408 B and pads to 128: 139,776 B; 12 tensors 1,677,312 B =
    // 1.60 MiB. On the host: 12 x 139,264 = 1,671,168 B (a multiple of 32).
    let meta = all_sliding_gemma3(1);
    let mut s = with_types(settings(4096, 1), GgmlType::Q8_0, GgmlType::Q8_0);
    s.flash_attn = FlashAttn::On;
    let e = run(&meta, &s);
    assert_eq!(e.buffer_bytes(GPU, CacheDevice::Cuda), Some(1_677_312));
    assert_eq!(e.buffer_bytes(HOST, CacheDevice::Cpu), Some(1_671_168));
    let lines = e.lines_placed(GPU);
    let buffers: Vec<_> = lines.iter().filter(|l| l.contains("buffer size")).collect();
    assert_eq!(
        buffers,
        ["llama_kv_cache:      CUDA0 KV buffer size =     1.60 MiB"]
    );
    // Right before the SWA cache's size line.
    let at = lines
        .iter()
        .position(|l| l.contains("buffer size"))
        .unwrap();
    assert!(lines[at - 1].contains("creating     SWA KV cache"));
    assert!(lines[at + 1].contains("  6 layers"));
}

#[test]
fn a_recurrent_state_pads_each_layers_tensors() {
    // Mamba with n_embd 20: d_inner 40, d_conv 4, d_state 16; 24 layers, 1
    // sequence. R: 3 x 40 f32 = 480 B a layer, S: 16 x 40 x 4 = 2,560 B.
    // CUDA pads R to 512: 24 x (512 + 2,560) = 73,728 B; the host to 32
    // (480 already): 24 x 3,040 = 72,960 B.
    let meta = gguf(
        "mamba",
        &[
            ("block_count", V::U32(24)),
            ("context_length", V::U32(4096)),
            ("embedding_length", V::U32(20)),
            ("ssm.conv_kernel", V::U32(4)),
            ("ssm.inner_size", V::U32(40)),
            ("ssm.state_size", V::U32(16)),
            ("ssm.time_step_rank", V::U32(2)),
        ],
    );
    let e = run(&meta, &settings(4096, 1));
    assert_eq!(e.buffer_bytes(GPU, CacheDevice::Cuda), Some(73_728));
    assert_eq!(e.buffer_bytes(HOST, CacheDevice::Cpu), Some(72_960));
    let lines = e.lines_placed(GPU);
    assert_eq!(
        lines[0],
        "llama_memory_recurrent:      CUDA0 RS buffer size =     0.07 MiB"
    );
    assert_eq!(lines[1..], *e.lines());
    // 3 sequences: a row a cell. R 1,440 B a layer, CUDA's 1,536; S 7,680.
    let e = run(&meta, &settings(4096, 3));
    assert_eq!(
        e.buffer_bytes(GPU, CacheDevice::Cuda),
        Some(24 * (1_536 + 7_680))
    );
    assert_eq!(
        e.buffer_bytes(HOST, CacheDevice::Cpu),
        Some(24 * (1_440 + 7_680))
    );
}

/// Jamba-like: 4 layers, attention on layer 1 only (per-layer KV heads 0,
/// 8, 0, 0 of 128), Mamba elsewhere (d_inner 512, d_conv 4, d_state 16).
fn jamba_like() -> GgufMetadata {
    gguf(
        "jamba",
        &[
            ("block_count", V::U32(4)),
            ("context_length", V::U32(256)),
            ("embedding_length", V::U32(256)),
            ("attention.head_count", V::U32(8)),
            ("attention.head_count_kv", V::U32s(vec![0, 8, 0, 0])),
            ("attention.key_length", V::U32(128)),
            ("attention.value_length", V::U32(128)),
            ("ssm.conv_kernel", V::U32(4)),
            ("ssm.inner_size", V::U32(512)),
            ("ssm.state_size", V::U32(16)),
            ("ssm.time_step_rank", V::U32(16)),
        ],
    )
}

#[test]
fn a_hybrids_buffers_are_its_cache_and_its_state() {
    // Jamba-like: 4 layers, attention on layer 1 only (per-layer KV heads
    // 0, 8, 0, 0 of 128), Mamba elsewhere (d_inner 512, d_conv 4, d_state
    // 16). 256 cells, 1 sequence. KV: one layer, K and V 1,024 x 2 x 256 =
    // 524,288 B each. State: 3 layers of R 3 x 512 x 4 = 6,144 B and S 16 x
    // 512 x 4 = 32,768 B: 116,736 B. Together 1,165,312 B on either device.
    let meta = jamba_like();
    let e = run(&meta, &settings(256, 1));
    assert_eq!(e.buffer_bytes(GPU, CacheDevice::Cuda), Some(1_165_312));
    let lines = e.lines_placed(GPU);
    let buffers: Vec<_> = lines.iter().filter(|l| l.contains("buffer size")).collect();
    assert_eq!(
        buffers,
        [
            "llama_kv_cache:      CUDA0 KV buffer size =     1.00 MiB",
            "llama_memory_recurrent:      CUDA0 RS buffer size =     0.11 MiB",
        ]
    );
}

#[test]
fn a_layers_caches_follow_it_to_its_device() {
    // The Jamba-like hybrid above: attention on layer 1, state on layers 0,
    // 2 and 3. From layer 2 on the GPU: the KV cache (layer 1) on the host,
    // the state of layers 2 and 3 on the GPU, layer 0's on the host.
    let meta = jamba_like();
    let e = run(&meta, &settings(256, 1));
    let split = CachePlacement::Cuda { gpu_from: 2 };
    // One state layer: R 6,144 + S 32,768 = 38,912 B.
    assert_eq!(e.buffer_bytes(split, CacheDevice::Cuda), Some(2 * 38_912));
    assert_eq!(
        e.buffer_bytes(split, CacheDevice::Cpu),
        Some(1_048_576 + 38_912)
    );
    let lines = e.lines_placed(split);
    let buffers: Vec<_> = lines.iter().filter(|l| l.contains("buffer size")).collect();
    // The host's line first; a cache with no layer on a device has no line
    // for it.
    assert_eq!(
        buffers,
        [
            "llama_kv_cache:        CPU KV buffer size =     1.00 MiB",
            "llama_memory_recurrent:        CPU RS buffer size =     0.04 MiB",
            "llama_memory_recurrent:      CUDA0 RS buffer size =     0.07 MiB",
        ]
    );
    // Nothing on the GPU from past the last layer.
    let none = CachePlacement::Cuda { gpu_from: 5 };
    assert_eq!(e.buffer_bytes(none, CacheDevice::Cuda), Some(0));
    assert_eq!(e.lines_placed(none), e.lines_placed(HOST));
}

#[test]
fn graniteswitch_caches_its_router_layer_after_the_others() {
    // granite-switch.cpp: block_count 2, then a router layer (index 2) of
    // one KV head. 2 KV heads of 128 on layers 0 and 1: rows of 256 + 256 +
    // 128 = 640 f16 elements over the 3 layers, 1,280 B a cell. 4,096
    // cells over 2 sequences: 2,048 a stream, 2 streams: 2,048 x 2 x 1,280
    // = 5,242,880 B = 5 MiB for K and V each. As llama.cpp logged for the
    // twin.
    let switch = |extra: Vec<(&'static str, V)>| {
        let mut keys = vec![
            ("block_count", V::U32(2)),
            ("context_length", V::U32(4096)),
            ("embedding_length", V::U32(256)),
            ("attention.head_count", V::U32(2)),
            ("attention.head_count_kv", V::U32(2)),
            ("attention.key_length", V::U32(128)),
            ("attention.value_length", V::U32(128)),
        ];
        keys.extend(extra);
        gguf("graniteswitch", &keys)
    };
    let adapters = |count: u32, activate: Vec<u32>, substitute: Vec<u32>| {
        vec![
            ("adapters.count", V::U32(count)),
            ("adapters.lora_rank", V::U32(8)),
            ("adapters.token_ids_activate", V::U32s(activate)),
            ("adapters.token_ids_substitute", V::U32s(substitute)),
        ]
    };
    let e = run(
        &switch(adapters(2, vec![5, 6], vec![7, 8])),
        &settings(4096, 2),
    );
    assert_eq!(caches(&e), [(2048, 3, 2, 5_242_880, 5_242_880)]);
    assert_eq!(
        e.lines()[0],
        "llama_kv_cache: size =   10.00 MiB (  2048 cells,   3 layers,  2/2 seqs), K (f16):    \
         5.00 MiB, V (f16):    5.00 MiB"
    );
    // What its loader refuses, in its words.
    let refused = |extra| refusal(&switch(extra), &settings(4096, 2));
    assert!(refused(vec![]).contains("no `graniteswitch.adapters.count`"));
    let e = refused(adapters(2, vec![5], vec![7, 8]));
    assert!(
        e.contains(
            "adapter token id arrays (1 activate, 2 substitute) do not match adapter count 2"
        ),
        "{e}"
    );
    let e = refused(adapters(4097, vec![], vec![]));
    assert!(
        e.contains("graniteswitch: invalid adapter count 4097"),
        "{e}"
    );
    // 4,096 adapters of rank 4,096 are within its bounds.
    let ids: Vec<u32> = (0..4096).collect();
    let mut keys = adapters(4096, ids.clone(), ids);
    keys[1] = ("adapters.lora_rank", V::U32(4096));
    assert!(estimate(&switch(keys), &settings(4096, 2)).is_ok());
    let mut keys = adapters(1, vec![5], vec![7]);
    keys[1] = ("adapters.lora_rank", V::U32(4097));
    assert!(refused(keys).contains("graniteswitch: invalid lora rank 4097"));
    let mut keys = adapters(1, vec![5], vec![7]);
    keys.pop();
    assert!(refused(keys).contains("no `graniteswitch.adapters.token_ids_substitute`"));
    let mut keys = adapters(1, vec![5], vec![7]);
    keys[2] = ("adapters.token_ids_activate", V::U32(5));
    assert!(refused(keys).contains("expected type array"));
    // Up to 511 layers and the router: 512.
    let mut keys = adapters(1, vec![5], vec![7]);
    keys.push(("block_count", V::U32(512)));
    let meta = {
        let mut all = vec![
            ("context_length", V::U32(4096)),
            ("embedding_length", V::U32(256)),
            ("attention.head_count", V::U32(2)),
        ];
        all.extend(keys);
        gguf("graniteswitch", &all)
    };
    let e = refusal(&meta, &settings(4096, 1));
    assert!(
        e.contains("graniteswitch: block count 512 exceeds LLAMA_MAX_LAYERS"),
        "{e}"
    );
}

/// A DeepSeek-V4 no twin ships: 6 layers of one 512-wide key head, window
/// 128, CSA on layers 2 and 4, HCA on 3 and 5 (the 7th ratio, an MTP
/// layer's, is past `block_count`), an indexer key of 128.
fn deepseek4(ratios: Vec<u32>) -> GgufMetadata {
    deepseek4_with(ratios, Vec::new())
}

/// [`deepseek4`] with `overrides` in place of its keys of the same name.
fn deepseek4_with(ratios: Vec<u32>, overrides: Vec<(&str, V)>) -> GgufMetadata {
    let mut keys = vec![
        ("block_count", V::U32(6)),
        ("context_length", V::U32(8192)),
        ("embedding_length", V::U32(512)),
        ("attention.head_count", V::U32(8)),
        ("attention.head_count_kv", V::U32(1)),
        ("attention.key_length", V::U32(512)),
        ("attention.value_length", V::U32(512)),
        ("attention.q_lora_rank", V::U32(64)),
        ("attention.sliding_window", V::U32(128)),
        ("attention.indexer.head_count", V::U32(64)),
        ("attention.indexer.key_length", V::U32(128)),
        ("attention.indexer.top_k", V::U32(512)),
        ("attention.output_group_count", V::U32(8)),
        ("attention.output_lora_rank", V::U32(32)),
        ("hyper_connection.count", V::U32(4)),
        ("hyper_connection.sinkhorn_iterations", V::U32(2)),
        ("hash_layer_count", V::U32(0)),
        ("attention.compress_ratios", V::U32s(ratios)),
        ("expert_gating_func", V::U32(4)),
    ];
    for (key, value) in overrides {
        keys.retain(|(k, _)| *k != key);
        keys.push((key, value));
    }
    gguf("deepseek4", &keys)
}

fn published_ratios() -> Vec<u32> {
    vec![0, 0, 4, 128, 4, 128, 0]
}

#[test]
fn deepseek4_keeps_k_alone_in_a_raw_window_compressed_caches_and_states() {
    // n_ctx 8192 over 2 sequences: 4096 cells a sequence, and every DSV4
    // cache keeps a stream a sequence.
    let e = run(&deepseek4(published_ratios()), &settings(8192, 2));
    let Memory::Dsv4 {
        raw,
        csa,
        hca,
        lid,
        states,
    } = &e.memory
    else {
        panic!("not DSV4: {:?}", e.memory)
    };
    let Memory::Iswa { base, swa, .. } = &**raw else {
        panic!("raw is not an iswa: {raw:?}")
    };
    // Every layer slides: the full cache holds none. The window cache: 128
    // + 512 (n_ubatch) padded to 768 cells, 512 x 2 B of K a row, 2
    // streams, 6 layers.
    assert_eq!((base.cells, base.layers, base.bytes()), (4096, 0, 0));
    assert_eq!((swa.cells, swa.layers), (768, 6));
    assert_eq!((swa.k_bytes, swa.v_bytes), (1024 * 768 * 2 * 6, 0));
    // CSA: cdiv(4096, 4) = 1024 cells, layers 2 and 4.
    assert_eq!(csa.0, 1024);
    assert_eq!((csa.1.cells, csa.1.layers), (1024, 2));
    assert_eq!(csa.1.bytes(), 1024 * 1024 * 2 * 2);
    // HCA: cdiv(4096, 128) = 32, padded to 256 cells.
    assert_eq!((hca.0, hca.1.cells, hca.1.layers), (32, 256, 2));
    assert_eq!(hca.1.bytes(), 1024 * 256 * 2 * 2);
    // The indexer's 128-wide key (256 B) on the CSA layers.
    assert_eq!((lid.1.cells, lid.1.layers), (1024, 2));
    assert_eq!(lid.1.bytes(), 256 * 1024 * 2 * 2);
    // States, f32 kv and score a layer per stream: CSA 8 x 2 x 512, HCA
    // 128 x 512, the indexer's 8 x 2 x 128.
    let sizes: Vec<(&str, u64, u64, u64)> = states
        .iter()
        .map(|s| (s.name, s.state_size, s.n_embd_state, s.bytes))
        .collect();
    assert_eq!(
        sizes,
        [
            ("csa", 8, 1024, 8 * 1024 * 4 * 2 * 2 * 2),
            ("hca", 128, 512, 128 * 512 * 4 * 2 * 2 * 2),
            ("lid", 8, 256, 8 * 256 * 4 * 2 * 2 * 2),
        ]
    );
    assert_eq!(
        e.bytes(),
        9_437_184 + 4_194_304 + 1_048_576 + 1_048_576 + 262_144 + 2_097_152 + 65_536
    );
    assert_eq!(e.memory.bytes(), e.bytes());
    // llama.cpp's lines, as its own run printed them (cache_lines.py).
    let lines = e.lines();
    let at = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix}: {lines:#?}"))
    };
    assert_eq!(
        lines[at("llama_kv_cache_dsv4: creating DSV4 raw")],
        "llama_kv_cache_dsv4: creating DSV4 raw KV cache"
    );
    assert_eq!(
        lines[at("llama_kv_cache_dsv4: creating DSV4 HCA compressed") + 1],
        "llama_kv_cache: size =    1.00 MiB (   256 cells,   2 layers,  2/2 seqs), K (f16):    \
         1.00 MiB, V (f16):    0.00 MiB"
    );
    assert_eq!(
        lines[at("llama_kv_cache_dsv4: creating DSV4 HCA compressed")],
        "llama_kv_cache_dsv4: creating DSV4 HCA compressed KV cache, size = 32 cells"
    );
    assert_eq!(
        lines[at("llama_kv_cache_dsv4: creating DSV4 lightning-indexer KV") + 2],
        "llama_kv_cache: attn_rot_k = 1, n_embd_head_k_all = 128"
    );
    assert_eq!(
        lines[at("llama_dsv4_comp_state: hca")],
        "llama_dsv4_comp_state: hca ratio = 128, state = 128 x 512, streams = 2, rs_seq = 0, \
         layers = 2, size =    2.00 MiB"
    );
    assert_eq!(
        lines.last().map(String::as_str),
        Some(
            "llama_dsv4_comp_state: lid ratio = 4, state = 8 x 256, streams = 2, rs_seq = 0, \
         layers = 2, size =    0.06 MiB"
        )
    );
}

#[test]
fn deepseek4s_indexer_keeps_one_key_head_whatever_the_model_has() {
    // 2 KV heads: the raw window twice as wide (18 MiB, as llama.cpp logged
    // it for this geometry), the indexer still one 128-wide head (1 MiB).
    let keys = vec![("attention.head_count_kv", V::U32(2))];
    let e = run(
        &deepseek4_with(published_ratios(), keys),
        &settings(8192, 2),
    );
    let Memory::Dsv4 { raw, lid, .. } = &e.memory else {
        panic!("not DSV4")
    };
    let Memory::Iswa { swa, .. } = &**raw else {
        panic!("raw is not an iswa")
    };
    assert_eq!(swa.k_bytes, 2 * 1024 * 768 * 2 * 6);
    assert_eq!(lid.1.k_bytes, 256 * 1024 * 2 * 2);
}

#[test]
fn deepseek4s_ratios_may_be_i32_but_not_negative() {
    // get_arr copies i32 bits into uint32: the same layers as u32 ratios.
    let as_i32 = vec![(
        "attention.compress_ratios",
        V::I32s(vec![0, 0, 4, 128, 4, 128, 0]),
    )];
    let e = run(&deepseek4_with(Vec::new(), as_i32), &settings(8192, 2));
    assert_eq!(
        e.bytes(),
        run(&deepseek4(published_ratios()), &settings(8192, 2)).bytes()
    );
    let negative = vec![(
        "attention.compress_ratios",
        V::I32s(vec![0, 0, -4, 128, 4, 128]),
    )];
    let text = refusal(&deepseek4_with(Vec::new(), negative), &settings(8192, 2));
    assert!(text.contains("layer 2 is"), "{text}");
}

#[test]
fn deepseek4_keeps_a_stream_a_sequence_even_unified() {
    // --kv-unified: n_ctx_seq is the whole 8192, and each of the 2
    // sequences still has its own stream of it.
    let mut s = with_types(settings(8192, 2), GgmlType::Q8_0, GgmlType::Q8_0);
    s.kv_unified = true;
    let e = run(&deepseek4(published_ratios()), &s);
    let Memory::Dsv4 { raw, csa, .. } = &e.memory else {
        panic!("not DSV4")
    };
    let Memory::Iswa { base, swa, .. } = &**raw else {
        panic!("raw is not an iswa")
    };
    assert_eq!((base.cells, base.streams), (8192, 2));
    // The window is not multiplied by the sequences: 768 cells.
    assert_eq!(swa.cells, 768);
    // q8_0 keys rotate: 512 is a multiple of 64.
    assert!(swa.attn_rot_k);
    // cdiv(8192, 4) = 2048 cells; 512 q8_0 = 16 blocks of 34 B.
    assert_eq!((csa.0, csa.1.k_bytes), (2048, 544 * 2048 * 2 * 2));
}

#[test]
fn deepseek4_refuses_what_llama_cpp_refuses() {
    // K and V types must agree (the caches hold K alone).
    let text = refusal(
        &deepseek4(published_ratios()),
        &with_types(settings(3000, 3), GgmlType::Q8_0, GgmlType::F16),
    );
    assert!(
        text.contains("model does not support different K (q8_0) and V (f16) cache types"),
        "{text}"
    );
    // Fewer ratios than layers.
    let text = refusal(&deepseek4(vec![0, 4, 128]), &settings(4096, 1));
    assert!(
        text.contains("has 3 entries for 6 layers") && text.contains("shorter than block_count"),
        "{text}"
    );
    // Another MoE scoring.
    let other_scoring = gguf(
        "deepseek4",
        &[
            ("block_count", V::U32(2)),
            ("context_length", V::U32(8192)),
            ("embedding_length", V::U32(512)),
            ("attention.head_count", V::U32(8)),
            ("attention.head_count_kv", V::U32(1)),
            ("attention.key_length", V::U32(512)),
            ("attention.q_lora_rank", V::U32(64)),
            ("attention.sliding_window", V::U32(128)),
            ("attention.indexer.head_count", V::U32(64)),
            ("attention.indexer.key_length", V::U32(128)),
            ("attention.indexer.top_k", V::U32(512)),
            ("attention.output_group_count", V::U32(8)),
            ("attention.output_lora_rank", V::U32(32)),
            ("hyper_connection.count", V::U32(4)),
            ("hyper_connection.sinkhorn_iterations", V::U32(2)),
            ("hash_layer_count", V::U32(0)),
            ("attention.compress_ratios", V::U32s(vec![4, 128])),
            ("expert_gating_func", V::U32(1)),
            ("nextn_predict_layers", V::U32(0)),
        ],
    );
    let text = refusal(&other_scoring, &settings(4096, 1));
    assert!(text.contains("expects sqrtsoftplus MoE scoring"), "{text}");
    // MTP layers: kept only where their weights are in the file, which a
    // header does not say.
    let mtp = gguf(
        "deepseek4",
        &[
            ("block_count", V::U32(2)),
            ("nextn_predict_layers", V::U32(1)),
            ("context_length", V::U32(8192)),
            ("embedding_length", V::U32(512)),
            ("attention.head_count", V::U32(8)),
            ("attention.q_lora_rank", V::U32(64)),
            ("attention.sliding_window", V::U32(128)),
        ],
    );
    let text = refusal(&mtp, &settings(4096, 1));
    assert!(
        text.contains("`deepseek4.nextn_predict_layers` is 1"),
        "{text}"
    );
    // A key its loader requires.
    let no_window = gguf(
        "deepseek4",
        &[
            ("block_count", V::U32(2)),
            ("context_length", V::U32(8192)),
            ("embedding_length", V::U32(512)),
            ("attention.head_count", V::U32(8)),
            ("attention.q_lora_rank", V::U32(64)),
        ],
    );
    let text = refusal(&no_window, &settings(4096, 1));
    assert!(
        text.contains("no `deepseek4.attention.sliding_window`"),
        "{text}"
    );
}
