//! Hostile input (issue 35), at the engines: values from a file or a flag
//! that would overflow, size a model with layers to 0 bytes, or make the
//! GGUF reader hold what the file only claims. Each is an error naming the
//! key, the flag or the byte offset; none panics. Figures are worked out by
//! hand in the comments.

use kv_core::{KvError, Parallel};
use kv_engines::estimate::llamacpp::{estimate as llamacpp, LlamaCppSettings};
use kv_engines::estimate::sglang::{sglang_pools, SglangSettings};
use kv_engines::estimate::{estimate, EstimateSettings, MAX_RANKS};
use kv_engines::gguf::{
    GgufMetadata, GgufValue, KEPT_ELEMENTS, KEPT_STRING_BYTES, MAX_ENTRIES, MAX_KEY_BYTES,
};
use serde_json::{json, Value};

/// One metadata value, written with its GGUF type id.
#[derive(Clone)]
enum W {
    U8(u8),
    U32(u32),
    I32(i32),
    U64(u64),
    Str(&'static str),
    /// A string built at run time.
    Text(String),
    /// An array: element type id, then each element's bytes as written.
    Array(u32, u64, Vec<u8>),
}

/// A GGUF v3 header: `tensors`, then each entry as written.
fn header_with<K: AsRef<str>>(tensors: u64, entries: &[(K, W)]) -> Vec<u8> {
    fn string(out: &mut Vec<u8>, text: &str) {
        out.extend((text.len() as u64).to_le_bytes());
        out.extend(text.as_bytes());
    }
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend(tensors.to_le_bytes());
    out.extend((entries.len() as u64).to_le_bytes());
    for (key, value) in entries {
        string(&mut out, key.as_ref());
        match value {
            W::U8(v) => {
                out.extend(0u32.to_le_bytes());
                out.push(*v);
            }
            W::U32(v) => {
                out.extend(4u32.to_le_bytes());
                out.extend(v.to_le_bytes());
            }
            W::I32(v) => {
                out.extend(5u32.to_le_bytes());
                out.extend(v.to_le_bytes());
            }
            W::U64(v) => {
                out.extend(10u32.to_le_bytes());
                out.extend(v.to_le_bytes());
            }
            W::Str(v) => {
                out.extend(8u32.to_le_bytes());
                string(&mut out, v);
            }
            W::Text(v) => {
                out.extend(8u32.to_le_bytes());
                string(&mut out, v);
            }
            W::Array(inner, len, bytes) => {
                out.extend(9u32.to_le_bytes());
                out.extend(inner.to_le_bytes());
                out.extend(len.to_le_bytes());
                out.extend(bytes);
            }
        }
    }
    out
}

fn header<K: AsRef<str>>(entries: &[(K, W)]) -> Vec<u8> {
    header_with(0, entries)
}

/// The problem of a refused header, read with its size known (as a file is).
fn refused(bytes: &[u8]) -> String {
    match GgufMetadata::read_sized(bytes, Some(bytes.len() as u64), "model.gguf") {
        Err(KvError::ConfigFile { problem, .. }) => problem,
        other => panic!("not refused: {other:?}"),
    }
}

fn u32s(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn i32s(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

// ---- The GGUF reader, as gguf.cpp reads -----------------------------------

#[test]
fn a_duplicated_key_is_refused_in_ggmls_words() {
    let file = header(&[
        ("general.architecture", W::Str("llama")),
        ("llama.block_count", W::U32(32)),
        ("llama.block_count", W::U32(1)),
    ]);
    assert_eq!(
        refused(&file),
        "`llama.block_count` is given twice (metadata entries 1 and 2); llama.cpp refuses: \
         duplicate key 'llama.block_count' for tensors 1 and 2"
    );
}

#[test]
fn an_empty_key_is_refused() {
    let file = header(&[("", W::U32(1))]);
    assert_eq!(
        refused(&file),
        "metadata entry 0 has an empty key; llama.cpp refuses: key 0 is empty"
    );
}

#[test]
fn an_array_of_arrays_is_refused_naming_the_key() {
    // Element type 9 (GGUF_TYPE_ARRAY): gguf.cpp's switch has no case for it.
    let file = header(&[("nested", W::Array(9, 1, Vec::new()))]);
    assert_eq!(
        refused(&file),
        "`nested` is an array of GGUF type 9; llama.cpp refuses: key nested has invalid GGUF \
         type 9"
    );
    // A type GGUF does not define, as an element: the same words.
    let file = header(&[("odd", W::Array(13, 0, Vec::new()))]);
    assert!(refused(&file).contains("key odd has invalid GGUF type 13"));
}

#[test]
fn counts_above_int64_max_are_refused_as_gguf_cpp_reads_them() {
    // gguf.cpp reads both counts as int64_t: 2^63 is -9223372036854775808.
    let file = header_with::<&str>(1 << 63, &[]);
    assert_eq!(
        refused(&file),
        "the number of tensors (at byte 8) is 9223372036854775808, above INT64_MAX; llama.cpp \
         refuses: number of tensors is -9223372036854775808 but must be in [0, ...]"
    );
    // INT64_MAX itself is a count gguf.cpp takes (its data is never read).
    let at_max = header_with::<&str>(i64::MAX as u64, &[]);
    let meta = GgufMetadata::read(&at_max[..], "model.gguf").unwrap();
    assert_eq!(meta.tensor_count(), i64::MAX as u64);
    let mut file = header::<&str>(&[]);
    file[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(refused(&file).starts_with(
        "the number of key value pairs (at byte 16) is 18446744073709551615, above INT64_MAX"
    ));
}

#[test]
fn more_entries_than_kv_holds_are_refused_before_any_is_read() {
    let mut file = header::<&str>(&[]);
    file[16..24].copy_from_slice(&(MAX_ENTRIES + 1).to_le_bytes());
    assert_eq!(
        refused(&file),
        "the header has 65537 metadata entries; kv reads at most 65536 (published models hold \
         a few dozen)"
    );
    // At the bound itself the count is taken, and the file ends where it ends.
    file[16..24].copy_from_slice(&MAX_ENTRIES.to_le_bytes());
    assert!(refused(&file).starts_with(
        "truncated GGUF header: the file ends inside the key of metadata entry 0 of 65536"
    ));
}

#[test]
fn a_length_past_the_end_of_the_file_is_refused_before_it_is_allocated() {
    // A string value claiming 2^40 bytes in a file of a few dozen: the size
    // is known, so nothing is read for it.
    let mut file = header(&[("name", W::Str("x"))]);
    let at = file.len() - 9;
    file[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert_eq!(
        refused(&file),
        format!(
            "truncated GGUF header: `name` needs 1099511627776 bytes at byte {}, but the file \
             has 1 left (llama.cpp: exceeds remaining file size)",
            at + 8
        )
    );
    // A u8 array of 2^32 elements (the 4 GiB the issue saw) in a file with 3
    // bytes after its length: refused at the length.
    let file = header(&[("blob", W::Array(0, 1 << 32, vec![1, 2, 3]))]);
    assert!(
        refused(&file).contains("`blob` needs 4294967296 bytes"),
        "{}",
        refused(&file)
    );
    // Strings take at least their 8-byte length each: 2^60 of them cannot fit.
    let file = header(&[("tokens", W::Array(8, 1 << 60, Vec::new()))]);
    assert!(refused(&file).contains("`tokens` needs 9223372036854775808 bytes"));
    // u64 elements whose bytes overflow 2^64: said so, not wrapped.
    let file = header(&[("wide", W::Array(10, u64::MAX, Vec::new()))]);
    assert!(refused(&file).contains("`wide` needs more than 2^64 bytes"));
}

#[test]
fn long_arrays_are_kept_as_their_type_and_length() {
    // 1,000,000 u8 elements: read past, not held.
    let file = header(&[("blob", W::Array(0, 1_000_000, vec![7; 1_000_000]))]);
    let meta = GgufMetadata::read(&file[..], "model.gguf").unwrap();
    let Some(GgufValue::Array(blob)) = meta.get("blob") else {
        panic!("no array");
    };
    assert_eq!(
        (blob.element_type(), blob.len(), blob.items()),
        ("u8", 1_000_000, None)
    );
    // KEPT_ELEMENTS u32s are kept, one more is not.
    let kept: Vec<u32> = (0..KEPT_ELEMENTS as u32).collect();
    let file = header(&[
        ("kept", W::Array(4, KEPT_ELEMENTS, u32s(&kept))),
        ("long", W::Array(4, KEPT_ELEMENTS + 1, u32s(&[0; 513]))),
        ("after", W::U8(9)),
    ]);
    let meta = GgufMetadata::read(&file[..], "model.gguf").unwrap();
    let Some(GgufValue::Array(array)) = meta.get("kept") else {
        panic!("no array");
    };
    assert_eq!(array.items().map(<[GgufValue]>::len), Some(512));
    assert_eq!(array.items().unwrap()[511], GgufValue::U32(511));
    let Some(GgufValue::Array(array)) = meta.get("long") else {
        panic!("no array");
    };
    assert_eq!((array.len(), array.items()), (513, None));
    // Reading went on at the right byte after the skipped array.
    assert_eq!(meta.get("after"), Some(&GgufValue::U8(9)));
}

// ---- llama.cpp's loader: types and 0-byte models ---------------------------

/// A llama header with these `llama.*` keys after the architecture.
fn llama(keys: &[(&str, W)]) -> Vec<u8> {
    let mut entries = vec![("general.architecture".to_owned(), W::Str("llama"))];
    for (suffix, value) in keys {
        entries.push((format!("llama.{suffix}"), value.clone()));
    }
    header(&entries)
}

/// The message of llama.cpp's estimate of `file` at its defaults.
fn llama_refusal(file: &[u8]) -> String {
    let meta = GgufMetadata::read(file, "model.gguf").unwrap();
    match llamacpp(&meta, &LlamaCppSettings::default()) {
        Err(e) => e.to_string(),
        Ok(e) => panic!("not refused: {} bytes", e.bytes()),
    }
}

fn base(heads: W, kv_heads: Option<W>) -> Vec<(&'static str, W)> {
    let mut keys = vec![
        ("block_count", W::U32(32)),
        ("context_length", W::U32(8192)),
        ("embedding_length", W::U32(4096)),
        ("attention.head_count", heads),
    ];
    if let Some(kv) = kv_heads {
        keys.push(("attention.head_count_kv", kv));
    }
    keys
}

#[test]
fn zero_or_missing_heads_are_refused_naming_the_key() {
    let kv_zero = llama_refusal(&llama(&base(W::U32(32), Some(W::U32(0)))));
    assert_eq!(
        kv_zero,
        "kv: cannot read config `model.gguf`: `llama.attention.head_count_kv` is 0 for layer 0 \
         of 32: the layer \
         would hold no cache and the estimate 0 bytes; kv refuses it"
    );
    // head_count 0 and no head_count_kv: the KV heads default to it.
    let heads_zero = llama_refusal(&llama(&base(W::U32(0), None)));
    assert!(
        heads_zero.contains(
            "`llama.attention.head_count` is 0 (no `llama.attention.head_count_kv`, so it gives \
             the KV heads) for layer 0 of 32"
        ),
        "{heads_zero}"
    );
    // No head count at all.
    let mut keys = base(W::U32(0), None);
    keys.pop();
    let none = llama_refusal(&llama(&keys));
    assert!(
        none.contains(
            "no `llama.attention.head_count` nor `llama.attention.head_count_kv` for layer 0 \
             of 32"
        ),
        "{none}"
    );
    // KV heads given but no head_count: llama.cpp reads no key_length then
    // (n_embd_head_k is set only where n_head > 0), so the heads are 0 wide.
    let mut keys = base(W::U32(0), Some(W::U32(8)));
    keys.remove(3);
    let zero_wide = llama_refusal(&llama(&keys));
    assert!(
        zero_wide.contains("`llama.attention.head_count` is 0 or absent, so llama.cpp reads no `llama.attention.key_length`"),
        "{zero_wide}"
    );
}

#[test]
fn a_negative_head_count_is_refused_in_llama_cpps_words_or_kvs() {
    // A scalar i32: get_key<uint32_t> takes a u32 only.
    let scalar = llama_refusal(&llama(&base(W::I32(-8), None)));
    assert!(
        scalar.contains(
            "`llama.attention.head_count` is i32 -8; llama.cpp refuses: key \
             llama.attention.head_count has wrong type i32 but expected type u32"
        ),
        "{scalar}"
    );
    // An i32 array: get_arr copies its bits, so -8 would be 4294967288 heads.
    let mut per_layer = vec![8i32; 32];
    per_layer[5] = -8;
    let array = llama_refusal(&llama(&base(
        W::U32(32),
        Some(W::Array(5, 32, i32s(&per_layer))),
    )));
    assert!(
        array.contains(
            "`llama.attention.head_count_kv` is -8 for layer 5; llama.cpp would read it as \
             uint32 4294967288, which kv refuses"
        ),
        "{array}"
    );
}

#[test]
fn per_layer_arrays_follow_get_key_or_arr() {
    let short = llama_refusal(&llama(&base(
        W::U32(32),
        Some(W::Array(4, 2, u32s(&[8, 8]))),
    )));
    assert!(
        short.contains(
            "llama.cpp refuses: key llama.attention.head_count_kv has wrong array length; \
             expected 32, got 2"
        ),
        "{short}"
    );
    let bytes = llama_refusal(&llama(&base(
        W::U32(32),
        Some(W::Array(0, 32, vec![8; 32])),
    )));
    assert!(
        bytes.contains(
            "llama.cpp refuses: llama.attention.head_count_kv is not a \
             string/float32/uint32/int32/uint64 array"
        ),
        "{bytes}"
    );
    let wide = llama_refusal(&llama(&base(
        W::U32(32),
        Some(W::Array(10, 32, vec![0; 32 * 8])),
    )));
    assert!(
        wide.contains("llama.attention.head_count_kv has wrong array element type u64"),
        "{wide}"
    );
    // A u64 scalar is refused where llama.cpp wants its uint32.
    let scalar = llama_refusal(&llama(&base(W::U32(32), Some(W::U64(8)))));
    assert!(
        scalar
            .contains("key llama.attention.head_count_kv has wrong type u64 but expected type u32"),
        "{scalar}"
    );
}

#[test]
fn zero_key_or_value_lengths_are_refused_naming_the_key() {
    for suffix in ["attention.key_length", "attention.value_length"] {
        let mut keys = base(W::U32(32), Some(W::U32(8)));
        keys.push((suffix, W::U32(0)));
        let got = llama_refusal(&llama(&keys));
        assert!(
            got.contains(&format!("`llama.{suffix}` is 0 for layer 0 of 32")),
            "{got}"
        );
    }
    // No lengths, and an embedding narrower than the heads: 16 / 32 = 0.
    let mut keys = base(W::U32(32), Some(W::U32(8)));
    keys[2] = ("embedding_length", W::U32(16));
    let got = llama_refusal(&llama(&keys));
    assert!(
        got.contains(
            "`llama.embedding_length` 16 / `llama.attention.head_count` 32 makes a head of 0"
        ),
        "{got}"
    );
}

#[test]
fn a_recurrent_model_of_only_mtp_layers_is_refused() {
    let file = header(&[
        ("general.architecture", W::Str("mamba")),
        ("mamba.block_count", W::U32(4)),
        ("mamba.nextn_predict_layers", W::U32(4)),
        ("mamba.context_length", W::U32(4096)),
        ("mamba.embedding_length", W::U32(256)),
        ("mamba.ssm.conv_kernel", W::U32(4)),
        ("mamba.ssm.inner_size", W::U32(512)),
        ("mamba.ssm.state_size", W::U32(16)),
        ("mamba.ssm.time_step_rank", W::U32(16)),
    ]);
    assert!(llama_refusal(&file).contains(
        "`mamba.nextn_predict_layers` is 4, every one of the 4 layers: llama.cpp keeps no state \
         for MTP layers, so the estimate would be 0 bytes"
    ));
}

#[test]
fn cells_past_uint32_name_the_context_length_key_when_no_n_ctx_was_given() {
    // context_length 4,294,967,295 padded to 256 is 4,294,967,296 = 2^32.
    let mut keys = base(W::U32(32), Some(W::U32(8)));
    keys[1] = ("context_length", W::U32(u32::MAX));
    let got = llama_refusal(&llama(&keys));
    assert!(
        got.contains(
            "`llama.context_length` 4294967295 (1 sequence(s)) makes 4294967296 cells in all \
             once padded to 256, more than llama.cpp's uint32 counts; give fewer with --ctx-size"
        ),
        "{got}"
    );
    // One cell fewer before padding fits: 4,294,967,040 = 2^32 - 256.
    let mut keys = base(W::U32(32), Some(W::U32(8)));
    keys[1] = ("context_length", W::U32(u32::MAX - 255));
    let meta = GgufMetadata::read(&llama(&keys)[..], "model.gguf").unwrap();
    assert_eq!(
        llamacpp(&meta, &LlamaCppSettings::default()).unwrap().n_ctx,
        4_294_967_040
    );
}

// ---- vLLM: checked arithmetic and a bound on ranks -------------------------

fn shipped(name: &str) -> Value {
    let path = format!(
        "{}/../examples/configs/{name}/config.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn the_hybrid_alignment_lcm_is_checked_at_its_boundary() {
    // Qwen3-Next: Gated DeltaNet with prefix caching aligns blocks to
    // lcm(block, 64). An odd block b makes 64 b: 2^58 + 1 gives 2^64 + 64,
    // past u64; 2^58 - 1 gives 2^64 - 64, which fits (and the block sizes
    // after it are checked in their turn).
    let config = shipped("qwen3-next-80b-a3b");
    let at = |block: u64| {
        estimate(
            &config,
            &EstimateSettings::new().positions(4096).block_size(block),
        )
        .map(|e| e.block_size)
        .map_err(|e| e.to_string())
    };
    assert_eq!(
        at((1 << 58) + 1).unwrap_err(),
        "kv: `block_size` 288230376151711745 (--block-size) makes the hybrid alignment \
         lcm(288230376151711745, 64) overflow u64"
    );
    let fits = at((1 << 58) - 1);
    assert!(
        fits.as_ref().map_or_else(|e| !e.contains("lcm"), |_| true),
        "{fits:?}"
    );
    assert!(at(u64::MAX).is_err());
}

#[test]
fn more_ranks_than_the_bound_are_refused_naming_the_flags() {
    let config = shipped("llama-3-8b");
    let e = estimate(&config, &EstimateSettings::new().positions(4096)).unwrap();
    let refused = |pp: u64| match e.ranks(Parallel::new(1, pp).unwrap(), 1) {
        Err(err) => err.to_string(),
        Ok(ranks) => format!("{} ranks", ranks.len()),
    };
    assert_eq!(MAX_RANKS, 4_096);
    assert!(refused(4_097).contains(
        "tp 1 x pp 4097 (--tp, --pp) makes 4097 ranks; kv sizes at most 4096 ranks per \
         estimate"
    ));
    // At the bound the count is taken (the layout is then checked as before).
    assert!(!refused(4_096).contains("ranks per estimate"));
    // tp 4096 x pp 4096: 16,777,216, refused before anything else is checked.
    let err = e
        .ranks(Parallel::new(4096, 4096).unwrap(), 1)
        .unwrap_err()
        .to_string();
    assert!(err.contains("makes 16777216 ranks"), "{err}");
}

#[test]
fn a_conv_kernel_of_1_is_refused_naming_the_key() {
    let mut jamba = shipped("jamba-v0.1");
    jamba["mamba_d_conv"] = json!(1);
    let err = estimate(&jamba, &EstimateSettings::new().positions(4096))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`mamba_d_conv` is 1: the conv state keeps kernel - 1 = 0 inputs"),
        "{err}"
    );
    // Mamba1's conv state does not grow with speculative tokens (vLLM's
    // `mamba1_state_shape`): still empty, still refused.
    let err = estimate(
        &jamba,
        &EstimateSettings::new()
            .positions(4096)
            .speculative_tokens(2),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("`mamba_d_conv` is 1"), "{err}");
    let mut next = shipped("qwen3-next-80b-a3b");
    next["linear_conv_kernel_dim"] = json!(1);
    let err = estimate(&next, &EstimateSettings::new().positions(4096))
        .unwrap_err()
        .to_string();
    assert!(err.contains("`linear_conv_kernel_dim` is 1"), "{err}");
    // With one speculative token the state keeps 1 - 1 + 1 = 1 input: taken.
    assert!(estimate(
        &next,
        &EstimateSettings::new()
            .positions(4096)
            .speculative_tokens(1)
    )
    .is_ok());
}

#[test]
fn whisper_heads_of_0_are_named_as_the_config_spells_them() {
    let mut whisper = shipped("whisper-large-v3");
    whisper["decoder_attention_heads"] = json!(0);
    let err = estimate(&whisper, &EstimateSettings::new())
        .unwrap_err()
        .to_string();
    assert!(err.contains("`decoder_attention_heads` is 0"), "{err}");
    assert!(!err.contains("explicit."), "{err}");
    // The detected line names it as the file does too.
    let e = estimate(&shipped("whisper-large-v3"), &EstimateSettings::new()).unwrap();
    assert!(
        e.detected
            .contains("kv heads = `decoder_attention_heads` 20"),
        "{}",
        e.detected
    );
    assert!(!e.detected.contains("explicit."), "{}", e.detected);
}

// ---- SGLang: a pool that leaves no request ---------------------------------

fn qwen3_8b() -> Value {
    json!({
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
        "num_hidden_layers": 36, "num_key_value_heads": 8,
        "max_position_embeddings": 40960, "torch_dtype": "bfloat16",
    })
}

fn sglang_with_total(positions: u64, tokens: u64) -> Result<u64, String> {
    let config = qwen3_8b();
    let e = estimate(&config, &EstimateSettings::new().positions(positions)).unwrap();
    let mut settings = SglangSettings::default();
    settings.max_total_tokens = Some(tokens);
    sglang_pools(&config, &e, &settings, 40 << 30)
        .map(|p| p.max_running_requests)
        .map_err(|e| e.to_string())
}

#[test]
fn max_total_tokens_that_leave_no_request_are_refused_as_sglang_asserts() {
    // TpModelWorker (tp_worker.py:420, SGLang 0.5.23): max_running_requests
    // = min(2048.., 1 // 2 = 0) is asserted positive.
    let one = sglang_with_total(40960, 1).unwrap_err();
    assert!(
        one.contains("SGLang would not start: AssertionError: max_running_request is zero"),
        "{one}"
    );
    // 2 tokens: 2 // 2 = 1 request, max_req_len = min(40960, 2) - 1 = 1:
    // SGLang starts (its max_req_input_len, 5 fewer, is not asserted).
    assert_eq!(sglang_with_total(40960, 2), Ok(1));
    // 7 tokens: 7 // 2 = 3 requests.
    assert_eq!(sglang_with_total(40960, 7), Ok(3));
    // tp_worker.py:425: a context of 1 token leaves max_req_len
    // min(1, 100) - 1 = 0.
    let context = sglang_with_total(1, 100).unwrap_err();
    assert!(
        context.contains(
            "AssertionError: Memory pool size is too small (max_req_len = min(context_len 1 - 1, \
             max_total_num_tokens 100 - 1) = 0)"
        ),
        "{context}"
    );
    assert_eq!(sglang_with_total(2, 100), Ok(50));
}

#[test]
fn long_strings_are_kept_as_their_length_and_keys_are_bounded_by_the_spec() {
    // A 2 MiB chat template: past KEPT_STRING_BYTES (1 MiB), read past.
    let mut file = header(&[("template", W::Str("x")), ("after", W::U8(9))]);
    let at = file.iter().rposition(|&b| b == b'x').unwrap();
    let template = vec![b'{'; 2 << 20];
    file.splice(at..=at, template);
    file[at - 8..at].copy_from_slice(&(2u64 << 20).to_le_bytes());
    let meta = GgufMetadata::read(&file[..], "model.gguf").unwrap();
    assert_eq!(meta.get("template"), Some(&GgufValue::LongText(2 << 20)));
    assert_eq!(meta.get("after"), Some(&GgufValue::U8(9)));
    // 1 MiB exactly is kept.
    let name = W::Text("n".repeat(KEPT_STRING_BYTES as usize));
    let meta = GgufMetadata::read(&header(&[("name", name)])[..], "model.gguf").unwrap();
    assert!(matches!(meta.get("name"), Some(GgufValue::Text(t)) if t.len() == 1 << 20));
    // A key of MAX_KEY_BYTES + 1 is refused before it is read.
    let long_key = "k".repeat(MAX_KEY_BYTES as usize + 1);
    let got = refused(&header(&[(long_key.as_str(), W::U8(1))]));
    assert_eq!(
        got,
        "the key of metadata entry 0 of 1 is 65536 bytes long (at byte 24); the GGUF \
         specification bounds keys to 65535 bytes"
    );
}

#[test]
fn config_heads_or_head_dim_of_0_are_refused_naming_the_key() {
    let with = |key: &str, value: Value| {
        let mut config = qwen3_8b();
        config[key] = value;
        config
    };
    for (key, value, words) in [
        (
            "num_key_value_heads",
            json!(0),
            "`num_key_value_heads` is 0",
        ),
        ("head_dim", json!(0), "`head_dim` is 0"),
        (
            "num_attention_heads",
            json!(0),
            "`num_attention_heads` is 0",
        ),
    ] {
        // SGLang's pools are sized from this estimate (sglang_pools takes
        // it), so a refusal here is SGLang's too.
        let err = estimate(&with(key, value), &EstimateSettings::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains(words), "{key}: {err}");
    }
    // No head_dim, and a hidden size the heads do not divide: 16 / 32.
    let mut narrow = with("hidden_size", json!(16));
    narrow.as_object_mut().unwrap().remove("head_dim");
    let err = estimate(&narrow, &EstimateSettings::new())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`hidden_size` 16 is not divisible by `num_attention_heads` 32"),
        "{err}"
    );
}

#[test]
fn an_architecture_of_another_type_is_refused_in_llama_cpps_words() {
    let meta =
        GgufMetadata::read(&header(&[("general.architecture", W::U32(1))])[..], "m").unwrap();
    assert!(meta.architecture().unwrap_err().to_string().contains(
        "`general.architecture` is a u32, not a string; llama.cpp refuses: key \
         general.architecture has wrong type u32 but expected type str"
    ));
}

#[test]
fn long_arrays_of_every_fixed_width_are_read_past_at_their_width() {
    // Past KEPT_ELEMENTS, an array is skipped by its element size: 2 bytes
    // for u16/i16 (types 2, 3), 8 for u64/i64/f64 (10..=12). A wrong size
    // would read `after` at the wrong byte.
    for (kind, width) in [(2u32, 2usize), (3, 2), (10, 8), (11, 8), (12, 8)] {
        let len = KEPT_ELEMENTS + 88;
        let file = header(&[
            ("long", W::Array(kind, len, vec![0; len as usize * width])),
            ("after", W::U8(9)),
        ]);
        let meta = GgufMetadata::read_sized(&file[..], Some(file.len() as u64), "model.gguf")
            .unwrap_or_else(|e| panic!("type {kind}: {e}"));
        let Some(GgufValue::Array(array)) = meta.get("long") else {
            panic!("type {kind}: no array");
        };
        assert_eq!((array.len(), array.is_empty()), (len, false), "type {kind}");
        assert_eq!(meta.get("after"), Some(&GgufValue::U8(9)), "type {kind}");
    }
    let meta = GgufMetadata::read(
        &header(&[("none", W::Array(4, 0, Vec::new()))])[..],
        "m.gguf",
    )
    .unwrap();
    let Some(GgufValue::Array(empty)) = meta.get("none") else {
        panic!("no array");
    };
    assert!(empty.is_empty());
}

#[test]
fn a_count_for_every_layer_is_kept_up_to_kept_elements_layers() {
    let meta = GgufMetadata::read(
        &llama(&[("attention.head_count_kv", W::U32(8))])[..],
        "model.gguf",
    )
    .unwrap();
    let at_bound = meta
        .per_layer("attention.head_count_kv", KEPT_ELEMENTS)
        .unwrap()
        .unwrap();
    assert_eq!((at_bound.len() as u64, at_bound[0]), (KEPT_ELEMENTS, 8));
    let past = meta
        .per_layer("attention.head_count_kv", KEPT_ELEMENTS + 1)
        .unwrap_err()
        .to_string();
    assert!(
        past.contains("`llama.attention.head_count_kv` for 513 layers: kv keeps at most 512"),
        "{past}"
    );
}

#[test]
fn a_foreign_magic_is_shown_as_hex_and_printable_bytes() {
    let got = refused(b"G GU\x1b\x00\x00\x00");
    assert!(
        got.contains("bytes 47 20 47 55 ('G GU')"),
        "a space is shown, a control byte never: {got}"
    );
    let got = refused(b"\x1b[2J\x00\x00\x00\x00");
    assert!(got.contains("bytes 1b 5b 32 4a ('?[2J')"), "{got}");
}

#[test]
fn a_per_layer_array_of_bools_is_read_as_llama_cpps_get_arr_reads_it() {
    // get_arr takes BOOL, UINT32 and INT32 arrays for a uint32 array: true
    // is 1 KV head. 32 layers x 8192 cells x (K 128 + V 128) x 2 B (f16) =
    // 134,217,728 B.
    let keys = base(W::U32(32), Some(W::Array(7, 32, vec![1; 32])));
    let meta = GgufMetadata::read(&llama(&keys)[..], "model.gguf").unwrap();
    let sized = llamacpp(&meta, &LlamaCppSettings::default()).unwrap();
    assert_eq!(sized.bytes(), 134_217_728);
}

#[test]
fn a_full_layers_zero_width_is_named_by_its_own_key_beside_the_sliding_one() {
    // Gemma 3: layers 0..=4 slide (their key_length_swa is 64), layer 5 is
    // full and its key_length is 0.
    let file = header(&[
        ("general.architecture", W::Str("gemma3")),
        ("gemma3.block_count", W::U32(6)),
        ("gemma3.context_length", W::U32(4096)),
        ("gemma3.embedding_length", W::U32(256)),
        ("gemma3.attention.head_count", W::U32(4)),
        ("gemma3.attention.head_count_kv", W::U32(1)),
        ("gemma3.attention.sliding_window", W::U32(512)),
        ("gemma3.attention.key_length", W::U32(0)),
        ("gemma3.attention.key_length_swa", W::U32(64)),
        ("gemma3.attention.value_length", W::U32(64)),
        ("gemma3.attention.value_length_swa", W::U32(64)),
    ]);
    let got = llama_refusal(&file);
    assert!(
        got.contains("`gemma3.attention.key_length` is 0 for layer 5 of 6"),
        "{got}"
    );
}
