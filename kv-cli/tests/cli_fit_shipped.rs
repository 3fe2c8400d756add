//! `kv fit` on the shipped checkpoint folder, `examples/checkpoints/llama-3.1-8b`:
//! the published Llama-3.1-8B's config, index and four shard headers
//! without their data, read with `--headers-only`. The README's question,
//! "does it fit on an H100 at 8,192 tokens with 64 sequences, and what
//! will the engine log?", answered as the README shows it. Figures worked
//! out by hand from vLLM's and SGLang's source.

use serde_json::Value;

mod support;
use support::*;

fn shipped_checkpoint() -> String {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/checkpoints/llama-3.1-8b/config.json")
        .display()
        .to_string()
}

/// `kv fit` on the shipped checkpoint with `--headers-only` and `args`:
/// its output, which must hold each of `lines`.
fn fit_has_lines(args: &[&str], lines: &[&str]) {
    let config = shipped_checkpoint();
    let mut all = vec!["fit", config.as_str(), "--headers-only"];
    all.extend_from_slice(args);
    let out = kv(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for line in lines {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

#[test]
fn the_readmes_question_under_vllm() {
    fit_has_lines(
        &[
            "--gpu",
            "H100",
            "--positions",
            "8192",
            "--max-num-seqs",
            "64",
        ],
        &[
            // 291 tensors, the index's total_size; the four files hold their
            // headers alone, said so.
            "  weights: 16060522496 B stored in 4 file(s), as their headers give them \
             (--headers-only: 4 of them end before their data, which is not read)\n",
            // vLLM's rotary table [131,072, 128] in bf16: 33,554,432 B; four
            // float32 scales in a 512-byte block each, 32 layers: 65,536 B.
            "  loaded: 16060522496 B in bf16 + rotary table 33554432 B + attention scales 65536 B \
             = 16094142464 B\n",
            // 81,559 MiB = 85,520,809,984 B; x 0.9 = 76,968,728,985.6, ceil.
            "  requested: ceil(85520809984 x 0.9) = 76968728986 B\n",
            // 16,094,142,464 / 2^30 = 14.989 GiB.
            "  Model loading took 14.99 GiB memory\n",
            // 76,968,728,986 - 16,094,142,464 = 60,874,586,522 B = 56.693 GiB.
            "  Available KV cache memory: 56.69 GiB\n",
            "  smallest --tp that starts: 1\n",
            // A block: 16 tokens x 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B
            // = 2,097,152 B; 60,874,586,522 // 2,097,152 = 29,027 blocks x 16 =
            // 464,432 tokens; / 8,192 = 56.69 requests.
            "    tp 1: GPU KV cache size: 464,432 tokens, Maximum concurrency for 8,192 tokens per \
             request: 56.69x\n",
            // 64 requests of 8,192 tokens: 64 x 512 blocks + the null block.
            "  vLLM needs --kv-cache-memory-bytes 68,721,573,888 (64.00 GiB) per rank for \
             max_num_seqs 64",
        ],
    );
}

#[test]
fn the_readmes_question_under_sglang() {
    fit_has_lines(
        &[
            "--engine",
            "sglang",
            "--gpu",
            "H100",
            "--avail-mem-gb",
            "78.43",
            "--positions",
            "8192",
            "--max-running-requests",
            "64",
        ],
        &[
            // The weights plus SGLang's float32 rotary table [131,072, 128]:
            // 16,060,522,496 + 67,108,864 = 16,127,631,360 B = 15.02 GiB.
            "  loaded: 16060522496 B in bfloat16 + rotary buffers 67108864 B = 15.02 GiB\n",
            // 64 running requests cap the decode graph at 64: 512 + 8,192 x 1.5
            // + 1 / 8 x 1,024 + 64 x 2 + 58 x 8 = 13,520 MiB reserved;
            // round((81,559 - 13,520) / 81,559, 3) = round(0.83423, 3).
            "  mem_fraction_static: 0.834 (SGLang's default: 13520 MiB reserved for \
             chunked_prefill_size 8192, decode graph max_bs 64, 58 prefill graph sizes up to 8192 \
             tokens)\n",
            "  Load weight end. avail mem=63.41 GB, mem usage=15.02 GB\n",
            // (78.43 - 15.02003) - 78.43 x 0.166 = 50.39059 GiB, x 2^30, int.
            "  KV pool budget: 63.41 - 78.43 x (1 - 0.834) GiB = 54106487067 B\n",
            // 131,072 B a token: 412,799 tokens; / 8,192 = 50.39 requests.
            "  smallest --tp whose pool holds one request: 1 (#tokens: 412799 a worker, 50 \
             request(s) of 8192 tokens, max_running_requests 64)\n",
            "  KV Cache is allocated. dtype: torch.bfloat16, #tokens: 412799, K size: 25.20 GB, V \
             size: 25.20 GB\n",
        ],
    );
}

#[test]
fn headers_alone_are_refused_unless_asked_for() {
    let config = shipped_checkpoint();
    let out = kv(&["fit", &config, "--gpu", "H100"]);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("model-00001-of-00004.safetensors: the tensors cover 4976689152 bytes of data, but the file has 0 after its header")
            && e.contains("the files hold their headers whole: give --headers-only if they were fetched without their data"),
        "{e}"
    );
    // Asked for headers, the other way of sizing the weights is refused.
    let out = kv(&[
        "fit",
        &config,
        "--gpu",
        "H100",
        "--headers-only",
        "--weights-from-config",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("cannot be used with"),
        "{}",
        stderr(&out)
    );
    // In JSON, the same weights.
    let out = kv(&[
        "fit",
        &config,
        "--headers-only",
        "--gpu",
        "H100",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json[0]["fit"]["stored_bytes"], 16_060_522_496u64, "{json}");
}

#[test]
fn a_bare_config_path_reads_the_folder_it_is_run_in() {
    // `kv fit config.json` from inside the checkpoint: the config's folder
    // is the empty path, read as `.` (it was refused as "not a checkpoint").
    let folder = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/checkpoints/llama-3.1-8b");
    for engine in [
        &["--engine", "vllm"][..],
        &["--engine", "sglang", "--avail-mem-gb", "78.43"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kv"))
            .args(["fit", "config.json", "--headers-only", "--gpu", "H100"])
            .args(engine)
            .current_dir(&folder)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stdout(&out).contains("  weights: 16060522496 B stored in 4 file(s)"),
            "{}",
            stdout(&out)
        );
    }
}
