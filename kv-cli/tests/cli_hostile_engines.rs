//! Hostile input (issue 35) through `kv estimate`, for what the engines'
//! rules and the GGUF reader refuse: each is one clear line naming the key
//! or the flag, with a failing exit code, never a panic (101) nor a figure.

use std::path::PathBuf;
use std::process::Output;

mod support;
use support::*;

/// `out` is a refusal (exit 1 or 2, nothing on stdout, no panic) whose
/// stderr holds `words`.
fn assert_refused(out: &Output, words: &str) {
    let stderr = text(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "{:?}: {stderr}",
        out.status
    );
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains(words), "{stderr}");
}

fn write(name: &str, bytes: &[u8]) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kv-cli-hostile-engines");
    std::fs::create_dir_all(&dir).unwrap();
    support::write(&dir, name, bytes)
}

/// [`support::llama_gguf`] in a file named `name`.
fn llama_gguf(name: &str, skip: &[&str], extra: &[(&str, u32, Vec<u8>)]) -> String {
    write(name, &support::llama_gguf(skip, extra))
}

fn llamacpp(file: &str) -> Output {
    kv(&["estimate", "--engine", "llama.cpp", file])
}

#[test]
fn a_block_size_whose_hybrid_alignment_overflows_is_refused_not_a_panic() {
    // lcm(2^58 + 1, 64) = 2^64 + 64: one past what u64 holds.
    let out = kv(&[
        "estimate",
        &shipped("qwen3-next-80b-a3b"),
        "--block-size",
        "288230376151711745",
    ]);
    assert_refused(
        &out,
        "`block_size` 288230376151711745 (--block-size) makes the hybrid alignment \
         lcm(288230376151711745, 64) overflow u64",
    );
}

#[test]
fn tp_4096_by_pp_4096_is_refused_before_any_rank_is_built() {
    let config = serde_json::json!({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "num_hidden_layers": 4096, "num_attention_heads": 4096,
        "num_key_value_heads": 4096, "hidden_size": 262_144, "head_dim": 64,
        "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
    });
    let file = write("wide.json", config.to_string().as_bytes());
    let out = kv(&["estimate", &file, "--tp", "4096", "--pp", "4096"]);
    assert_refused(
        &out,
        "tp 4096 x pp 4096 (--tp, --pp) makes 16777216 ranks; kv sizes at most 4096 ranks \
         per estimate",
    );
}

#[test]
fn a_gguf_with_a_duplicated_key_is_refused_in_ggmls_words() {
    let file = llama_gguf(
        "duplicate.gguf",
        &[],
        &[("llama.block_count", 4, 1u32.to_le_bytes().to_vec())],
    );
    assert_refused(
        &llamacpp(&file),
        "`llama.block_count` is given twice (metadata entries 1 and 6); llama.cpp refuses: \
         duplicate key 'llama.block_count' for tensors 1 and 6",
    );
}

#[test]
fn a_gguf_sizing_its_layers_to_0_bytes_is_refused_naming_the_key() {
    // head_count_kv 0, head_count 0, no heads at all, a negative count.
    let kv_zero = llama_gguf(
        "kv-zero.gguf",
        &["llama.attention.head_count_kv"],
        &[(
            "llama.attention.head_count_kv",
            4,
            0u32.to_le_bytes().to_vec(),
        )],
    );
    assert_refused(
        &llamacpp(&kv_zero),
        "`llama.attention.head_count_kv` is 0 for layer 0 of 32",
    );
    let no_heads = llama_gguf(
        "no-heads.gguf",
        &[
            "llama.attention.head_count",
            "llama.attention.head_count_kv",
        ],
        &[],
    );
    assert_refused(
        &llamacpp(&no_heads),
        "no `llama.attention.head_count` nor `llama.attention.head_count_kv`",
    );
    let negative = llama_gguf(
        "negative.gguf",
        &["llama.attention.head_count_kv"],
        &[(
            "llama.attention.head_count_kv",
            5,
            (-8i32).to_le_bytes().to_vec(),
        )],
    );
    assert_refused(
        &llamacpp(&negative),
        "key llama.attention.head_count_kv has wrong type i32 but expected type u32",
    );
    let zero_key = llama_gguf(
        "zero-key.gguf",
        &[],
        &[("llama.attention.key_length", 4, 0u32.to_le_bytes().to_vec())],
    );
    assert_refused(
        &llamacpp(&zero_key),
        "`llama.attention.key_length` is 0 for layer 0 of 32",
    );
}

#[test]
fn a_long_array_is_read_past_and_one_claiming_more_than_the_file_is_refused() {
    // 4 MiB of u8 (a vocabulary's scores, say) before nothing: read past.
    let mut blob = (4u64 << 20).to_le_bytes().to_vec();
    blob.splice(0..0, 0u32.to_le_bytes());
    blob.extend(vec![1u8; 4 << 20]);
    let file = llama_gguf("blob.gguf", &[], &[("tokenizer.scores", 9, blob)]);
    let out = llamacpp(&file);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // 2^32 u8 elements claimed, 3 bytes there: refused at the length.
    let mut claim = 0u32.to_le_bytes().to_vec();
    claim.extend((1u64 << 32).to_le_bytes());
    claim.extend([1, 2, 3]);
    let file = llama_gguf("claim.gguf", &[], &[("blob", 9, claim)]);
    assert_refused(
        &llamacpp(&file),
        "truncated GGUF header: `blob` needs 4294967296 bytes",
    );
}

#[test]
fn cells_past_uint32_name_the_files_key_and_the_flag() {
    let file = llama_gguf(
        "long.gguf",
        &["llama.context_length"],
        &[("llama.context_length", 4, u32::MAX.to_le_bytes().to_vec())],
    );
    assert_refused(
        &llamacpp(&file),
        "`llama.context_length` 4294967295 (1 sequence(s)) makes 4294967296 cells in all once \
         padded to 256, more than llama.cpp's uint32 counts; give fewer with --ctx-size",
    );
}

#[test]
fn sglang_refuses_a_pool_that_leaves_no_request() {
    let out = kv(&[
        "estimate",
        &shipped("llama-3-8b"),
        "--engine",
        "sglang",
        "--kv-cache-memory-bytes",
        "40000000000",
        "--max-total-tokens",
        "1",
    ]);
    assert_refused(&out, "AssertionError: max_running_request is zero");
}

#[test]
fn sglang_names_a_refused_kv_format_not_its_debug_form() {
    let out = kv(&[
        "estimate",
        &shipped("llama-3-8b"),
        "--engine",
        "sglang",
        "--kv-cache-memory-bytes",
        "40000000000",
        "--kv-format",
        "q4_0",
    ]);
    assert_refused(&out, "q4_0: kv's SGLang profile takes fp8_e4m3 or fp8_e5m2");
    assert!(!text(&out.stderr).contains("Blocks("));
}
