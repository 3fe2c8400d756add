//! `kv estimate --engine llama.cpp` on GGUF headers written here: llama.cpp's
//! own lines (as it logged them for this geometry), JSON, refusals and usage.

use std::path::PathBuf;

use serde_json::Value;

mod support;
use support::*;

/// Llama-3-8B's geometry as a GGUF header, in a fresh file named `name`.
fn llama_gguf(name: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kv-cli-llamacpp");
    std::fs::create_dir_all(&dir).unwrap();
    write(&dir, name, support::llama_gguf(&[], &[]))
}

#[test]
fn prints_llama_cpps_lines() {
    let file = llama_gguf("text.gguf");
    let out = kv(&[
        "estimate",
        "--engine",
        "llama.cpp",
        &file,
        "--ctx-size",
        "8192",
        "--cache-type-k",
        "q8_0",
        "--cache-type-v",
        "q8_0",
        "--flash-attn",
        "on",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    // 1024 elements a row, q8_0 1088 B, x 8192 cells x 32 layers = 272 MiB.
    assert!(
        stdout.contains(
            "  llama_kv_cache: size =  544.00 MiB (  8192 cells,  32 layers,  1/1 seqs), K \
             (q8_0):  272.00 MiB, V (q8_0):  272.00 MiB\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("total: 544.00 MiB (570,425,344 B)"),
        "{stdout}"
    );
    assert!(!stdout.contains("enabling flash_attn"), "{stdout}");
}

#[test]
fn json_names_the_engine_and_the_file() {
    let file = llama_gguf("json.gguf");
    let out = kv(&[
        "estimate",
        "--engine",
        "llama.cpp",
        &file,
        "--ctx-size",
        "5000",
        "--parallel",
        "3",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = &json[0];
    assert_eq!(first["engine"], "llama.cpp");
    assert_eq!(first["source"], file.as_str());
    // 5000 pads to 5120, / 3 = 1706, padded to 1792 cells a stream.
    assert_eq!(first["memory"]["cache"]["cells"], 1792);
    assert_eq!(first["memory"]["cache"]["streams"], 3);
    assert_eq!(first["n_ctx"], 5376);
}

#[test]
fn refusals_exit_1_with_llama_cpps_reason() {
    let file = llama_gguf("refused.gguf");
    let out = kv(&[
        "estimate",
        "--engine",
        "llama.cpp",
        &file,
        "--cache-type-v",
        "q4_0",
        "--flash-attn",
        "off",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("quantized V cache requires flash_attn to be enabled"));
    // A file that is not GGUF.
    let out = kv(&["estimate", "--engine", "llama.cpp", "Cargo.toml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("not a GGUF file"));
}

#[test]
fn llama_cpp_flags_are_usage_errors_elsewhere() {
    let file = llama_gguf("usage.gguf");
    let out = kv(&["estimate", &file, "--ctx-size", "4096"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--ctx-size does not apply to --engine vllm: it is llama.cpp's -c; vLLM's length is --positions"));
    let out = kv(&[
        "estimate",
        "--engine",
        "llama.cpp",
        &file,
        "--cache-type-k",
        "q8",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("iq4_nl"));
    let out = kv(&[
        "estimate",
        "--engine",
        "llama.cpp",
        &file,
        "--flash-attn",
        "yes",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn auto_flash_attention_turns_on_for_a_quantized_v_and_markdown_fences_the_lines() {
    let file = llama_gguf("auto.gguf");
    let out = kv(&[
        "estimate",
        "--engine",
        "llama.cpp",
        &file,
        "--ctx-size",
        "4096",
        "--cache-type-v",
        "q8_0",
        "--flash-attn",
        "auto",
        "--ubatch-size",
        "256",
        "--batch-size",
        "1024",
        "--format",
        "markdown",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    // K: 1024 x 2 B x 4096 x 32 = 256 MiB; V: 1088 B x 4096 x 32 = 136 MiB.
    assert!(
        stdout.contains(
            "```\nllama_init_from_model: enabling flash_attn since it is required for quantized \
             V cache\nllama_kv_cache: size =  392.00 MiB (  4096 cells,  32 layers,  1/1 \
             seqs), K (f16):  256.00 MiB, V (q8_0):  136.00 MiB\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("n_ubatch 256, flash attention on"),
        "{stdout}"
    );
    // Off, with f16 V, is taken as given.
    let out = kv(&[
        "estimate",
        "--engine",
        "llama.cpp",
        &file,
        "--flash-attn",
        "off",
        "--parallel",
        "2",
        "--kv-unified",
    ]);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("flash attention off"), "{stdout}");
    // context_length 8192, unified: one stream of 8192 cells for 2 sequences.
    assert!(
        stdout.contains("(  8192 cells,  32 layers,  2/1 seqs)"),
        "{stdout}"
    );
}
