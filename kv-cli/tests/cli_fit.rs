//! `kv fit --engine sglang`: a checkpoint's weights from its own
//! safetensors header, SGLang 0.5.23's default `mem_fraction_static` for a
//! named GPU, its pool budget, then its pools. Figures worked out by hand
//! from SGLang's source (arg_groups/memory_hook.py,
//! mem_cache/kv_cache_configurator.py) and a published start-up log.

use std::fs;
use std::path::Path;

use serde_json::{json, Value};

mod support;
use support::*;

/// Llama-3.1-8B-Instruct's published config.
fn llama_31_8b_config() -> Value {
    json!({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
        "num_hidden_layers": 32, "num_key_value_heads": 8, "head_dim": 128,
        "max_position_embeddings": 131072, "rope_theta": 500000.0,
        "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "torch_dtype": "bfloat16", "vocab_size": 128256, "tie_word_embeddings": false
    })
}

/// A safetensors file of BF16 tensors with these shapes, its data sparse.
fn write_bf16_safetensors(path: &Path, tensors: &[(String, Vec<u64>)]) {
    let mut header = serde_json::Map::new();
    let mut at = 0u64;
    for (name, shape) in tensors {
        let bytes = shape.iter().product::<u64>() * 2;
        header.insert(
            name.clone(),
            json!({"dtype": "BF16", "shape": shape, "data_offsets": [at, at + bytes]}),
        );
        at += bytes;
    }
    let json = serde_json::to_vec(&Value::Object(header)).unwrap();
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend(json);
    fs::write(path, &out).unwrap();
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(out.len() as u64 + at)
        .unwrap();
}

/// Llama-3.1-8B's 291 tensors: embed [128256, 4096] and lm_head alike
/// (525,336,576 each); per layer q and o [4096, 4096], k and v [1024, 4096],
/// gate, up [14336, 4096] and down [4096, 14336], two norms [4096]:
/// 218,112,000; the final norm 4,096. 2 x 525,336,576 + 32 x 218,112,000 +
/// 4,096 = 8,030,261,248 parameters, x 2 B = 16,060,522,496 B: the
/// published index's `total_size`.
fn llama_31_8b(dir: &Path) {
    fs::write(dir.join("config.json"), llama_31_8b_config().to_string()).unwrap();
    write_bf16_safetensors(
        &dir.join("model.safetensors"),
        &llama_tensors(32, 4096, 1024, 14336, 128256),
    );
}

/// `kv fit --format json`'s stages: (weights, memory for the cache) each.
fn stage_figures(fit: &Value) -> Vec<(u64, u64)> {
    fit["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["weights_bytes"].as_u64().unwrap(),
                s["available_kv_cache_memory_bytes"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The tensors a Hugging Face Llama checkpoint stores, untied: `layers`
/// layers of width `hidden`, K and V `kv_width` wide, an MLP of
/// `intermediate`, a vocabulary of `vocab`.
fn llama_tensors(
    layers: u64,
    hidden: u64,
    kv_width: u64,
    intermediate: u64,
    vocab: u64,
) -> Vec<(String, Vec<u64>)> {
    let mut tensors = vec![("model.embed_tokens.weight".to_owned(), vec![vocab, hidden])];
    for i in 0..layers {
        for (name, shape) in [
            ("self_attn.q_proj", vec![hidden, hidden]),
            ("self_attn.k_proj", vec![kv_width, hidden]),
            ("self_attn.v_proj", vec![kv_width, hidden]),
            ("self_attn.o_proj", vec![hidden, hidden]),
            ("mlp.gate_proj", vec![intermediate, hidden]),
            ("mlp.up_proj", vec![intermediate, hidden]),
            ("mlp.down_proj", vec![hidden, intermediate]),
            ("input_layernorm", vec![hidden]),
            ("post_attention_layernorm", vec![hidden]),
        ] {
            tensors.push((format!("model.layers.{i}.{name}.weight"), shape));
        }
    }
    tensors.push(("model.norm.weight".to_owned(), vec![hidden]));
    tensors.push(("lm_head.weight".to_owned(), vec![vocab, hidden]));
    tensors
}

#[test]
fn llama_31_8b_on_an_h100_as_sglang_logs_it() {
    let dir = scratch("fit-llama");
    llama_31_8b(&dir);
    let out = kv(&[
        "fit",
        dir.to_str().unwrap(),
        "--engine",
        "sglang",
        "--gpu",
        "h100",
        "--avail-mem-gb",
        "78.43",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = stdout(&out);
    // Loaded: the weights plus SGLang's float32 rotary table [131072, 128]:
    // 16,060,522,496 + 67,108,864 = 16,127,631,360 B = 15.02003 GiB.
    // A published SGLang log of this model on an H100 (sglang issue logs,
    // 2026-02): "Load weight begin. avail mem=78.43 GB", "Load weight end.
    // ... avail mem=63.41 GB, mem usage=15.02 GB".
    assert!(
        stdout.contains("  Load weight begin. avail mem=78.43 GB\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  Load weight end. avail mem=63.41 GB, mem usage=15.02 GB\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  weights: 16060522496 B stored in 1 file(s) (BF16 16060522496 B)\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "  loaded: 16060522496 B in bfloat16 + rotary buffers 67108864 B = 15.02 GiB\n"
        ),
        "{stdout}"
    );
    // H100, 81,559 MiB: chunked prefill 8,192, decode graph max_bs 256,
    // prefill graph 58 sizes up to 8,192. reserved = 512 + 8,192 x 1.5 +
    // 1 / 8 x 1,024 + 256 x 2 + 58 x 8 = 13,904 MiB (above the 10,240
    // floor); round((81,559 - 13,904) / 81,559, 3) = round(0.82952, 3) = 0.83.
    assert!(
        stdout.contains("  mem_fraction_static: 0.83 (SGLang's default: 13904 MiB reserved"),
        "{stdout}"
    );
    // rest = (78.43 - 16,127,631,360 / 2^30) - 78.43 x (1 - 0.83)
    //      = 63.40997... - 13.3331 = 50.07687... GiB; int(x 2^30) = 53,769,632,782 B.
    assert!(stdout.contains("= 53769632782 B\n"), "{stdout}");
    // 131,072 B a token: 53,769,632,782 // 131,072 = 410,229 tokens;
    // K: 410,230 x 65,536 B = 25.04 GiB.
    assert!(
        stdout.contains("#tokens: 410229, K size: 25.04 GB, V size: 25.04 GB"),
        "{stdout}"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn other_gpus_and_flags_move_the_default_fraction() {
    let dir = scratch("fit-gpus");
    llama_31_8b(&dir);
    let run = |extra: &[&str]| {
        let mut args = vec![
            "fit",
            dir.to_str().unwrap(),
            "--engine",
            "sglang",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let out = kv(&args);
        assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        json[0]["fit"].clone()
    };
    // H200, 143,771 MiB, tp 1: reserved 512 + 12,288 + 128 + 512 + 464 =
    // 13,904; (143,771 - 13,904) / 143,771 = 0.90329 -> 0.903.
    let fit = run(&["--gpu", "H200", "--avail-mem-gb", "139.5"]);
    assert_eq!(fit["mem_fraction_static"], 0.903);
    assert_eq!(fit["defaults"]["reserved_mib"], 13904.0);
    // B200, 183,359 MiB: chunked prefill 16,384, max_bs 512, 74 prefill
    // sizes: 512 + 24,576 + 128 + 1,024 + 592 = 26,832 MiB;
    // 156,527 / 183,359 = 0.85366 -> 0.854.
    let fit = run(&["--gpu", "B200", "--avail-mem-gb", "178"]);
    assert_eq!(fit["mem_fraction_static"], 0.854);
    assert_eq!(fit["defaults"]["prefill_graph_sizes"], 74);
    // A100-40GB, 40,960 MiB: chunked prefill 4,096, max_bs 32, 50 prefill
    // sizes; below 60 GiB, no 10 GiB floor: 512 + 6,144 + 128 + 64 + 400 =
    // 7,248; 33,712 / 40,960 = 0.82305 -> 0.823.
    let fit = run(&["--gpu", "a100-40gb", "--avail-mem-gb", "39"]);
    assert_eq!(fit["mem_fraction_static"], 0.823);
    // H100 with --chunked-prefill-size 1024: activation at least 2,048
    // tokens (3,072), 38 prefill sizes: 512 + 3,072 + 128 + 512 + 304 =
    // 4,528, raised to the 10,240 floor; 71,319 / 81,559 = 0.87445 -> 0.874.
    let fit = run(&[
        "--gpu",
        "H100",
        "--avail-mem-gb",
        "78.43",
        "--chunked-prefill-size",
        "1024",
    ]);
    assert_eq!(fit["mem_fraction_static"], 0.874);
    assert_eq!(fit["defaults"]["reserved_mib"], 10240.0);
    // --max-running-requests 64 caps the decode graph: 512 + 12,288 + 128
    // + 128 + 464 = 13,520; 68,039 / 81,559 = 0.83423 -> 0.834.
    let fit = run(&[
        "--gpu",
        "H100",
        "--avail-mem-gb",
        "78.43",
        "--max-running-requests",
        "64",
    ]);
    assert_eq!(fit["mem_fraction_static"], 0.834);
    assert_eq!(fit["defaults"]["decode_graph_max_bs"], 64);
    // An unlisted GPU by its nvidia-smi memory, 46,068 MiB (an L40S's):
    // chunked prefill 4,096, max_bs 32, 50 sizes: 512 + 6,144 + 128 + 64 +
    // 400 = 7,248; 38,820 / 46,068 = 0.84267 -> 0.843.
    let fit = run(&["--gpu-memory-mib", "46068", "--avail-mem-gb", "44"]);
    assert_eq!(fit["mem_fraction_static"], 0.843);
    assert_eq!(fit["gpu"], "46068 MiB per nvidia-smi");
    // Given, it is used as given.
    let fit = run(&[
        "--gpu",
        "H100",
        "--avail-mem-gb",
        "78.43",
        "--mem-fraction-static",
        "0.9",
    ]);
    assert_eq!(fit["mem_fraction_static"], 0.9);
    assert_eq!(fit["defaults"], Value::Null);
    // rest = 63.40997... - 78.43 x 0.1 = 55.56697... GiB.
    let budget = fit["kv_pool_budget_bytes"].as_u64().unwrap();
    assert_eq!(budget, 59_664_582_770);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_llama_2_path_caps_the_prefill_graph() {
    // SGLang caps the prefill graph at 4,096 tokens when the model path
    // names llama-2. A100-40GB with --chunked-prefill-size 8192: 50 sizes
    // instead of 58: 512 + 12,288 + 128 + 64 + 400 = 13,392;
    // 27,568 / 40,960 = 0.67305 -> 0.673 (0.671 without the cap).
    let root = scratch("fit-llama2");
    let dir = root.join("Llama-2-7b-hf");
    fs::create_dir_all(&dir).unwrap();
    llama_31_8b(&dir);
    let out = kv(&[
        "fit",
        dir.to_str().unwrap(),
        "--engine",
        "sglang",
        "--gpu",
        "A100-40GB",
        "--avail-mem-gb",
        "39",
        "--chunked-prefill-size",
        "8192",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json[0]["fit"]["mem_fraction_static"], 0.673);
    assert_eq!(json[0]["fit"]["defaults"]["prefill_graph_max_tokens"], 4096);
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn weights_that_do_not_fit_are_refused_in_sglangs_words() {
    let dir = scratch("fit-small");
    llama_31_8b(&dir);
    // A T4: 14.5 GiB free is less than the 15.02 GiB the weights take.
    let out = kv(&[
        "fit",
        dir.to_str().unwrap(),
        "--engine",
        "sglang",
        "--gpu",
        "T4",
        "--avail-mem-gb",
        "14.5",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("the weights do not fit: they take 15.02 GiB"),
        "{}",
        stderr(&out)
    );
    // An L40S, 44 GiB free, at --mem-fraction-static 0.35: after loading
    // 28.97997 GiB are free; the slack is 44 x 0.65 = 28.6; rest > 0. At 0.3:
    // slack 30.8 > 28.98: SGLang refuses, minimum 1 - 28.97997 / 44 = 0.34136.
    let run = |fraction: &str| {
        kv(&[
            "fit",
            dir.to_str().unwrap(),
            "--engine",
            "sglang",
            "--gpu",
            "L40S",
            "--avail-mem-gb",
            "44",
            "--mem-fraction-static",
            fraction,
        ])
    };
    assert!(run("0.35").status.success());
    let out = run("0.3");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(
            "Raise --mem-fraction-static above 0.342 (minimum viable = 1 - available/pre = 0.3414)"
        ),
        "{}",
        stderr(&out)
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn what_kv_fit_refuses() {
    let dir = scratch("fit-refuse");
    llama_31_8b(&dir);
    let path = dir.to_str().unwrap();
    let base = ["fit", path, "--gpu", "H100", "--avail-mem-gb", "78.43"];
    let usage = |extra: &[&str], want: &str| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let out = kv(&args);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stdout(&out));
        assert!(stderr(&out).contains(want), "{extra:?}: {}", stderr(&out));
    };
    // vLLM is the default engine: SGLang's flag is refused for it.
    usage(&[], "--avail-mem-gb does not apply to kv fit --engine vllm");
    usage(
        &["--engine", "llama.cpp"],
        "--avail-mem-gb does not apply to kv fit --engine llama.cpp",
    );
    usage(
        &["--engine", "sglang", "--activation-bytes", "1"],
        "--activation-bytes does not apply to kv fit --engine sglang",
    );
    let out = kv(&["fit", path, "--gpu", "H100", "--total-gpu-memory-gib", "80"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--total-gpu-memory-gib 80 is more than the GPU's 81559 MiB"),
        "{}",
        stderr(&out)
    );
    // A GPU memory no GPU has is refused, not wrapped.
    let out = kv(&["fit", path, "--gpu-memory-mib", "17592186044417"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("17592186044417"), "{}", stderr(&out));
    let out = kv(&["fit", path, "--gpu", "H100", "--speculative-tokens", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("does not count a drafter's weights"),
        "{}",
        stderr(&out)
    );
    // vLLM's pipeline stages are sized; SGLang's are not yet.
    let out = kv(&[
        "fit",
        path,
        "--gpu",
        "H100",
        "--engine",
        "sglang",
        "--avail-mem-gb",
        "78.43",
        "--pp",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--pp does not apply to --engine sglang"),
        "{}",
        stderr(&out)
    );
    // DP attention: Llama's SGLang model splits its attention over all of tp
    // whatever --dp, so a rank holds the weights of --tp 2 alone; its pools
    // follow the attention group of one rank.
    let loaded = |dp: &str| {
        let out = kv(&[
            base.as_slice(),
            &["--engine", "sglang", "--dp", dp, "--tp", "2"],
        ]
        .concat());
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        let line = text
            .lines()
            .find(|l| l.contains("loaded:"))
            .unwrap()
            .to_owned();
        (line, text)
    };
    let (with_dp, text) = loaded("2");
    assert_eq!(with_dp, loaded("1").0);
    assert!(
        text.contains("tp 2, dp 2 (attention tp 1 per worker"),
        "{text}"
    );
    usage(
        &["--engine", "sglang", "--kv-cache-memory-bytes", "8G"],
        "--kv-cache-memory-bytes does not apply to kv fit",
    );
    usage(
        &["--engine", "sglang", "--max-num-seqs", "8"],
        "--max-num-seqs does not apply",
    );
    usage(
        &["--engine", "sglang", "--gpu-memory-mib", "1000"],
        "cannot be used with",
    );
    usage(
        &["--engine", "sglang", "--mem-fraction-static", "1.5"],
        "not a fraction in (0, 1]",
    );
    usage(
        &["--engine", "sglang", "--mem-fraction-static", "NaN"],
        "not a fraction",
    );
    let out = kv(&[
        "fit",
        path,
        "--engine",
        "sglang",
        "--gpu",
        "H100",
        "--avail-mem-gb",
        "80",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("more than the GPU's 81559 MiB"),
        "{}",
        stderr(&out)
    );
    let out = kv(&[
        "fit",
        path,
        "--engine",
        "sglang",
        "--gpu",
        "H101",
        "--avail-mem-gb",
        "7",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("`H101` is not a GPU kv lists (T4, A10, L4,"),
        "{}",
        stderr(&out)
    );
    let out = kv(&["fit", path, "--engine", "sglang", "--avail-mem-gb", "7"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--gpu"), "{}", stderr(&out));
    let out = kv(&[
        "fit",
        path,
        "--engine",
        "sglang",
        "--gpu",
        "H100",
        "--avail-mem-gb",
        "-1",
    ]);
    assert_eq!(out.status.code(), Some(2));

    // A RoPE kv has not checked: no figure, and why.
    let mut config = llama_31_8b_config();
    config["rope_scaling"] = json!({"rope_type": "dynamic", "factor": 4.0});
    fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let out = kv(&[
        "fit",
        path,
        "--engine",
        "sglang",
        "--gpu",
        "H100",
        "--avail-mem-gb",
        "78",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("rotary table"), "{}", stderr(&out));
    // An MLA model: SGLang's prefill graph reserves 1,536 MiB instead of 8
    // a size; on an H100 at tp 1, 14,976 MiB in all: 0.816.
    let mut config = llama_31_8b_config();
    config["kv_lora_rank"] = json!(512);
    config["qk_rope_head_dim"] = json!(64);
    fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let out = kv(&[
        "fit",
        path,
        "--engine",
        "sglang",
        "--gpu",
        "H100",
        "--avail-mem-gb",
        "78",
    ]);
    assert!(
        stdout(&out).contains(
            "mem_fraction_static: 0.816 (SGLang's default: 14976 MiB reserved for \
             chunked_prefill_size 8192, decode graph max_bs 256, 58 prefill graph sizes up to \
             8192 tokens (1536 MiB for the MLA backend's prefill graph))"
        ),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    // No weights next to the config.
    fs::write(dir.join("config.json"), llama_31_8b_config().to_string()).unwrap();
    fs::remove_file(dir.join("model.safetensors")).unwrap();
    let out = kv(&[
        "fit",
        path,
        "--engine",
        "sglang",
        "--gpu",
        "H100",
        "--avail-mem-gb",
        "78",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no .safetensors file"),
        "{}",
        stderr(&out)
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn llama_31_8b_on_an_h100_as_vllm_budgets_it() {
    let dir = scratch("fit-vllm");
    llama_31_8b(&dir);
    let path = dir.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["fit", path, "--gpu", "H100", "--positions", "8192"];
        args.extend_from_slice(extra);
        kv(&args)
    };
    // Every profiled part given: total 79.11 GiB = 84,943,715,696.64 ->
    // 84,943,715,697 B; x 0.9 = 76,449,344,127.3, ceil 76,449,344,128.
    // Loaded (vLLM's own class on meta, scripts/vllm/loaded_weights.py):
    // 16,060,522,496 + bf16 rotary [131072, 128] 33,554,432 + 32 layers x 4
    // float32 scales x 512 = 16,094,142,464 B = 14.989 GiB.
    // Available: 76,449,344,128 - 16,094,142,464 - 375,809,638 -
    // 1,331,439,862 = 58,647,952,164 B = 54.620 GiB.
    let out = run(&[
        "--total-gpu-memory-gib",
        "79.11",
        "--non-torch-bytes",
        "375809638",
        "--activation-bytes",
        "1331439862",
        "--cuda-graph-bytes",
        "0",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for line in [
        "  total memory: 84943715697 B, as given (--total-gpu-memory-gib)\n",
        "  loaded: 16060522496 B in bf16 + rotary table 33554432 B + attention scales 65536 B \
         = 16094142464 B\n",
        "  requested: ceil(84943715697 x 0.9) = 76449344128 B\n",
        "  Model loading took 14.99 GiB memory\n",
        "  Available KV cache memory: 54.62 GiB\n",
        // 131,072 B a token x 16 = 2,097,152 B a block: 58,647,952,164 //
        // 2,097,152 = 27,965 blocks; a request at 8,192 takes 512 blocks:
        // 27,965 / 512 x 8,192 = 447,440 tokens; 54.619x.
        "GPU KV cache size: 447,440 tokens, Maximum concurrency for 8,192 tokens per request: \
         54.62x",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }
    assert!(!text.contains("upper bound"), "{text}");
    // Nothing profiled given: nvidia-smi's 81,559 MiB = 85,520,809,984 B,
    // x 0.9 = 76,968,728,985.6 -> 76,968,728,986; less the weights alone:
    // 60,874,586,522 B = 56.694 GiB, said to be an upper bound.
    let out = run(&["--gpu-memory-utilization", "0.9", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let fit = &json[0]["fit"];
    assert_eq!(fit["total_memory_bytes"], 85_520_809_984u64);
    assert_eq!(fit["requested_bytes"], 76_968_728_986u64);
    assert_eq!(fit["available_kv_cache_memory_bytes"], 60_874_586_522u64);
    assert_eq!(fit["upper_bound"], true);
    assert_eq!(fit["lines"][1], "Available KV cache memory: 56.69 GiB");
    // Each of 8 ranks: the vocabulary 128,256 / 8 = 16,032 rows x 4,096 x 2
    // = 131,334,144 for the embedding and again for the head; a layer: qkv
    // (512 + 128 + 128) x 4,096 x 2 = 6,291,456, o 4,096 x 512 x 2 =
    // 4,194,304, gate_up 2 x 1,792 x 4,096 x 2 = 29,360,128, down
    // 14,680,064, two norms 16,384: 54,542,336 x 32 = 1,745,354,752; the
    // final norm 8,192; the rotary table and scales whole: 2,041,651,200 B
    // (vLLM's own class at tp 8, scripts/vllm/loaded_weights.py --tp 8).
    let out = run(&["--tp", "8", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json[0]["fit"]["weights_bytes"], 2_041_651_200u64);
    assert_eq!(json[0]["fit"]["loaded"]["tensor_bytes"], 2_008_031_232u64);
    let out = run(&[]);
    assert!(
        stdout(&out).contains("the budget is an upper bound"),
        "{}",
        stdout(&out)
    );
    // A T4: 15,360 MiB = 16,106,127,360 B x 0.9 = 14,495,514,624; the
    // weights overdraw it by 1,598,627,840 B = 1.489 GiB.
    let out = kv(&["fit", path, "--gpu", "T4"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(
            "Available KV cache memory: -1.49 GiB; then: No available memory for the cache blocks."
        ),
        "{}",
        stderr(&out)
    );
    // The smallest TP that starts, each rank's weights as vLLM shards them.
    // T4 at tp 4: 14,495,514,624 - 4,049,149,952 = 10,446,364,672 B; a
    // rank's token: 2 KV heads x 128 x 2 x 2 B x 32 layers = 32,768 B, a
    // block 524,288: 19,924 blocks, a request 8,192: 19,924 x 16 = 318,784
    // tokens, 2.43x. At tp 2 one request's 8 GiB does not fit 6.0 GiB.
    assert!(
        stderr(&out).contains(
            "(at --tp 1; --tp 4 starts: GPU KV cache size: 318,784 tokens, Maximum concurrency \
             for 131,072 tokens per request: 2.43x)"
        ),
        "{}",
        stderr(&out)
    );
    // L4 (23,034 MiB = 24,152,899,584 B x 0.9 -> 21,737,609,626) at tp 2:
    // less 8,064,147,456 = 13,673,462,170 B; 65,536 B a token, 1,048,576 a
    // block: 13,040 blocks, x 16 = 208,640 tokens, 1.59x.
    let out = kv(&["fit", path, "--gpu", "L4"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("  smallest --tp that starts: 2\n"), "{text}");
    assert!(
        text.contains(
            "    tp 2: GPU KV cache size: 208,640 tokens, Maximum concurrency for 131,072 tokens \
             per request: 1.59x\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("    tp 1: To serve at least one request with the model's max seq len"),
        "{text}"
    );
    // An architecture kv has not checked vLLM's class for is refused by name.
    let mut config = llama_31_8b_config();
    config["architectures"] = json!(["DoryForCausalLM"]);
    fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let out = kv(&["fit", path, "--gpu", "H100"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("what vLLM's `DoryForCausalLM` holds once loaded"),
        "{}",
        stderr(&out)
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn llama_31_8b_over_two_pipeline_stages_as_vllm_loads_them() {
    let dir = scratch("fit-vllm-pp");
    llama_31_8b(&dir);
    let path = dir.to_str().unwrap();
    let out = kv(&[
        "fit",
        path,
        "--gpu",
        "H100",
        "--positions",
        "8192",
        "--pp",
        "2",
        "--total-gpu-memory-gib",
        "79.11",
        "--non-torch-bytes",
        "375809638",
        "--activation-bytes",
        "1331439862",
        "--cuda-graph-bytes",
        "0",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let fit = &json[0]["fit"];
    // 16 layers a stage, 436,224,000 B each (qkv 50,331,648 + o 33,554,432
    // + gate_up 234,881,024 + down 117,440,512 + two norms 8,192 each); each
    // stage its own rotary table (33,554,432) and its layers' scales (16 x
    // 4 x 512). Stage 0: the embedding 1,050,673,152 B: 8,063,844,352 B.
    // Stage 1: the final norm 8,192 and the head 1,050,673,152:
    // 8,063,852,544 B (vLLM's own class per stage,
    // scripts/vllm/loaded_weights.py --pp 2 --stage S).
    let stages = stage_figures(fit);
    // Each: 76,449,344,128 requested, less its weights, 375,809,638 and
    // 1,331,439,862.
    assert_eq!(
        stages,
        [
            (8_063_844_352, 66_678_250_276),
            (8_063_852_544, 66_678_242_084)
        ]
    );
    // The lines are the stage with the least for its cache: stage 1.
    assert_eq!(fit["weights_bytes"], 8_063_852_544u64);
    assert_eq!(fit["available_kv_cache_memory_bytes"], 66_678_242_084u64);
    // A block on a stage: 16 layers x 16 tokens x 4,096 B = 1,048,576 B;
    // both stages hold 63,589 blocks; a request at 8,192 takes 512: 63,589
    // x 16 = 1,017,424 tokens, 124.20x.
    assert_eq!(
        json[0]["vllm_startup"]["message"],
        "GPU KV cache size: 1,017,424 tokens, Maximum concurrency for 8,192 tokens per \
         request: 124.20x"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_stage_with_the_most_layers_sets_every_ranks_blocks() {
    // 7 layers over 3 stages: vLLM gives 2, 3, 2. A vocabulary of 65,536
    // x 1,024 (134,217,728 B) outweighs a layer: qkv 3,072 x 1,024 x 2 B =
    // 6,291,456, o 2,097,152, gate_up 4,194,304, down 2,097,152, two norms
    // of 2,048: 14,684,160 B.
    let dir = scratch("fit-vllm-pp3");
    let config = json!({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": 1024, "intermediate_size": 1024, "num_attention_heads": 8,
        "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 7,
        "max_position_embeddings": 4096, "vocab_size": 65536,
        "torch_dtype": "bfloat16", "tie_word_embeddings": false,
    });
    fs::write(dir.join("config.json"), config.to_string()).unwrap();
    write_bf16_safetensors(
        &dir.join("model.safetensors"),
        &llama_tensors(7, 1024, 1024, 1024, 65536),
    );
    let path = dir.to_str().unwrap();
    let run = |pp: &str, format: &str| {
        kv(&[
            "fit",
            path,
            "--gpu-memory-mib",
            "4096",
            "--pp",
            pp,
            "--format",
            format,
        ])
    };
    let out = run("3", "json");
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    // Each stage: its layers, its rotary table (4,096 x 128 x 2 B =
    // 1,048,576) and 4 x 512 B of scales a layer; stage 0 the embedding,
    // stage 2 the norm (2,048) and the head. ceil(4,294,967,296 x 0.9) =
    // 3,865,470,567 B less each.
    let stages = stage_figures(&json[0]["fit"]);
    assert_eq!(
        stages,
        [
            (164_638_720, 3_700_831_847),
            (45_107_200, 3_820_363_367),
            (164_640_768, 3_700_829_799)
        ]
    );
    // A block: 4,096 B a token a layer x 16 = 65,536 B a layer: 131,072,
    // 196,608 and 131,072 B. Blocks: 28,235, 19,431 and 28,235: every rank
    // takes 19,431 (not the least memory over the widest block: 18,823).
    // A request at 4,096 takes 256: 19,431 x 16 = 310,896 tokens, 75.90x.
    assert_eq!(
        json[0]["vllm_startup"]["message"],
        "GPU KV cache size: 310,896 tokens, Maximum concurrency for 4,096 tokens per \
         request: 75.90x"
    );
    let text = stdout(&run("3", "text"));
    assert!(
        text.contains(
            "  pipeline: stage 0: weights 164638720 B, cache 3700831847 B; stage 1: weights \
             45107200 B, cache 3820363367 B; stage 2: weights 164640768 B, cache 3700829799 B;"
        ),
        "{text}"
    );
    assert!(!stdout(&run("1", "text")).contains("pipeline:"));
    // A stage whose weights overdraw its budget is named.
    let out = kv(&["fit", path, "--gpu-memory-mib", "160", "--pp", "3"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("(at --tp 1, pipeline stage 0;"),
        "{}",
        stderr(&out)
    );
    let out = kv(&["fit", path, "--gpu-memory-mib", "160"]);
    assert!(stderr(&out).contains("(at --tp 1;"), "{}", stderr(&out));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn llama_31_8b_over_two_h100s_as_sglang_shards_it() {
    let dir = scratch("fit-sglang-tp2");
    llama_31_8b(&dir);
    let out = kv(&[
        "fit",
        dir.to_str().unwrap(),
        "--engine",
        "sglang",
        "--gpu",
        "H100",
        "--avail-mem-gb",
        "78.43",
        "--tp",
        "2",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // A rank: the vocabulary 64,128 rows x 4,096 x 2 = 525,336,576 for the
    // embedding and the head; a layer: qkv (2,048 + 512 + 512) x 4,096 x 2
    // = 25,165,824, o 16,777,216, gate_up 2 x 7,168 x 4,096 x 2 =
    // 117,440,512, down 58,720,256, norms 16,384: 218,120,192 x 32 =
    // 6,979,846,144; the final norm 8,192: 8,030,527,488 B (SGLang's own
    // class at tp 2, scripts/sglang/compare_weights_tp.py), plus the float32
    // rotary table 67,108,864: 8,097,636,352 = 7.5415 GiB.
    assert!(
        text.contains(
            "  loaded: 8030527488 B in bfloat16 + rotary buffers 67108864 B = 7.54 GiB\n"
        ),
        "{text}"
    );
    // tp 2 on 81,559 MiB: 512 + 12,288 + 2 / 8 x 1,024 + 256 x 2 + 58 x 8
    // = 14,032 MiB; (81,559 - 14,032) / 81,559 = 0.82795 -> 0.828 (SGLang's
    // own, scripts/sglang/mem_fraction.py).
    assert!(text.contains("  mem_fraction_static: 0.828 ("), "{text}");
    // 78.43 - 7.54148 = 70.88849 GiB after; less 78.43 x 0.172 = 13.48996:
    // 57.39853 GiB = 61,631,200,648 B; a rank's token is 4 KV heads x 128 x
    // 2 x 2 B x 32 = 65,536 B: 940,417 tokens.
    assert!(text.contains("= 61631200648 B\n"), "{text}");
    assert!(text.contains("#tokens: 940417,"), "{text}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn concurrency_against_context_per_tp_as_json_and_svg() {
    let dir = scratch("fit-plot");
    llama_31_8b(&dir);
    let path = dir.to_str().unwrap();
    let svg = dir.join("fit.svg");
    let out = kv(&[
        "fit",
        path,
        "--gpu",
        "L4",
        "--format",
        "json",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let by_tp = &json[0]["fit"]["by_tp"];
    // tp 1 on an L4: 21,737,609,626 - 16,094,142,464 = 5,643,467,162 B //
    // 2,097,152 B a block = 2,691 blocks. At 1,024 tokens a request takes
    // 64 blocks: 42.046875x; at 32,768, 2,048: 1.31396484375x; at 65,536
    // (4,096 blocks) it does not start, so the line stops.
    let tp1 = by_tp[0]["concurrency"].as_array().unwrap();
    assert_eq!(tp1[0], json!([1024, 42.046875]));
    assert_eq!(tp1.last().unwrap(), &json!([32768, 1.31396484375]));
    assert_eq!(tp1.len(), 6);
    // tp 2 reaches the model's 131,072: 13,040 / 8,192 = 1.591796875x.
    let tp2 = by_tp[1]["concurrency"].as_array().unwrap();
    assert_eq!(tp2.last().unwrap(), &json!([131072, 1.591796875]));
    assert_eq!(json[0]["fit"]["smallest_tp"], 2);
    let drawn = fs::read_to_string(&svg).unwrap();
    assert!(drawn.starts_with("<svg"), "{drawn}");
    for label in [
        "tp 1",
        "tp 2",
        "tp 4",
        "tp 8",
        "max_num_seqs 256",
        "128K",
        "1K",
    ] {
        assert!(drawn.contains(label), "{label}");
    }
    // One config only; SGLang's fit does not draw it.
    let out = kv(&[
        "fit",
        path,
        path,
        "--gpu",
        "L4",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--plot draws one config"),
        "{}",
        stderr(&out)
    );
    let out = kv(&[
        "fit",
        path,
        "--engine",
        "sglang",
        "--gpu",
        "L4",
        "--avail-mem-gb",
        "21",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--plot does not apply to kv fit --engine sglang"),
        "{}",
        stderr(&out)
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn weights_from_the_config_alone_when_asked() {
    let dir = scratch("fit-config-only");
    fs::write(dir.join("config.json"), llama_31_8b_config().to_string()).unwrap();
    let path = dir.to_str().unwrap();
    // No checkpoint: refused, saying how to compute them instead.
    let out = kv(&["fit", path, "--gpu", "H100"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no weights: the folder has no `model.safetensors.index.json`"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("give --weights-from-config"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("--headers-only"), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("cannot read config"),
        "{}",
        stderr(&out)
    );
    // Computed: the 291 tensors of the published checkpoint, 16,060,522,496
    // B (its index's total_size), and the same figures as from the headers.
    for engine in [
        &["--engine", "vllm"][..],
        &["--engine", "sglang", "--avail-mem-gb", "78.43"],
    ] {
        let mut args = vec!["fit", path, "--gpu", "H100", "--weights-from-config"];
        args.extend_from_slice(engine);
        let out = kv(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(
            text.contains(
                "  weights: 16060522496 B computed from the config (--weights-from-config: no \
                 checkpoint read)"
            ),
            "{text}"
        );
    }
    let out = kv(&[
        "fit",
        path,
        "--gpu",
        "H100",
        "--weights-from-config",
        "--format",
        "json",
    ]);
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json[0]["fit"]["weights_bytes"], 16_094_142_464u64);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sglang_names_the_smallest_tp_whose_pool_holds_a_request() {
    let dir = scratch("fit-sglang-by-tp");
    llama_31_8b(&dir);
    let path = dir.to_str().unwrap();
    // An L4 with 21.5 GiB free: at tp 1 SGLang's default 0.684 leaves
    // nothing once 15.02 GiB of weights are in. At tp 4: 4,015,529,984 B
    // of weights a rank + the float32 rotary table 67,108,864 = 3.80225
    // GiB; the default (memory_hook.py, 23,034 MiB, tp 4: chunk 4,096,
    // max_bs 160, 50 prefill sizes: 512 + 6,144 + 512 + 320 + 400 = 7,888
    // MiB) round3(15,146 / 23,034) = 0.658; 21.5 - 3.80225 - 21.5 x 0.342
    // = 10.34475 GiB = 11,107,586,736 B; 2 KV heads x 128 x 2 x 2 B x 32 =
    // 32,768 B a token: 338,976 tokens, 2 requests of 131,072.
    let out = kv(&[
        "fit",
        path,
        "--engine",
        "sglang",
        "--gpu",
        "L4",
        "--avail-mem-gb",
        "21.5",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let words = stderr(&out);
    assert!(
        words.contains("Raise --mem-fraction-static above 0.699"),
        "{words}"
    );
    assert!(
        words.contains(
            "(smallest --tp whose pool holds one request: 4 (#tokens: 338976 a worker, 2 \
             request(s) of 131072 tokens"
        ),
        "{words}"
    );
    // With room at tp 1 it is listed first, with each size's pool.
    let out = kv(&[
        "fit",
        path,
        "--engine",
        "sglang",
        "--gpu",
        "H100",
        "--avail-mem-gb",
        "78.43",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json[0]["fit"]["smallest_tp"], 1);
    assert_eq!(json[0]["fit"]["by_tp"][1]["tp"], 2);
    // tp 2: the figure of llama_31_8b_over_two_h100s_as_sglang_shards_it.
    assert!(json[0]["fit"]["by_tp"][1]["said"]
        .as_str()
        .unwrap()
        .starts_with("#tokens: 940417 a worker"));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn flags_at_their_bounds() {
    let dir = scratch("fit-bounds");
    llama_31_8b(&dir);
    let path = dir.to_str().unwrap();
    let sglang = |extra: &[&str]| {
        let mut args = vec!["fit", path, "--engine", "sglang", "--gpu", "H100"];
        args.extend_from_slice(extra);
        kv(&args)
    };
    for bad in [
        "--avail-mem-gb=0",
        "--avail-mem-gb=-1",
        "--avail-mem-gb=NaN",
        "--avail-mem-gb=inf",
        "--avail-mem-gb=1e9",
    ] {
        let out = sglang(&[bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            stderr(&out).contains("is not a positive number of GiB"),
            "{bad}: {}",
            stderr(&out)
        );
    }
    let out = sglang(&["--avail-mem-gb", "70", "--mem-fraction-static", "0"]);
    assert!(
        stderr(&out).contains("not a fraction in (0, 1]"),
        "{}",
        stderr(&out)
    );
    // Exactly the GPU's 81,559 MiB = 79.6474609375 GiB is allowed, for
    // either engine's figure.
    let out = sglang(&["--avail-mem-gb", "79.6474609375"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = kv(&[
        "fit",
        path,
        "--gpu",
        "H100",
        "--total-gpu-memory-gib",
        "79.6474609375",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // --plot with one config and a folder that holds none: still two.
    let svg = dir.join("p.svg");
    let missing = dir.join("empty");
    fs::create_dir_all(&missing).unwrap();
    let out = kv(&[
        "fit",
        path,
        missing.to_str().unwrap(),
        "--gpu",
        "H100",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--plot draws one config"),
        "{}",
        stderr(&out)
    );
    // One profiled part given is not all of them: still an upper bound,
    // in the text, the JSON and the plot.
    let out = kv(&[
        "fit",
        path,
        "--gpu",
        "H100",
        "--activation-bytes",
        "1",
        "--total-gpu-memory-gib",
        "79",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("  profiled: not all given"),
        "{}",
        stdout(&out)
    );
    assert!(fs::read_to_string(&svg).unwrap().contains("an upper bound"));
    let out = kv(&[
        "fit",
        path,
        "--gpu",
        "H100",
        "--non-torch-bytes",
        "1",
        "--cuda-graph-bytes",
        "1",
        "--format",
        "json",
    ]);
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json[0]["fit"]["profiled_given"], false);
    // Lengths double from 1K to the model's 131,072 once each: 8 points.
    let tp8 = json[0]["fit"]["by_tp"][3]["concurrency"]
        .as_array()
        .unwrap();
    assert_eq!(tp8.len(), 8);
    assert_eq!(tp8[7][0], 131072);
    assert_eq!(tp8[6][0], 65536);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn what_the_loader_skips_is_said() {
    let dir = scratch("fit-skips");
    // Tied, yet the checkpoint stores lm_head.weight: both engines skip it.
    let mut config = llama_31_8b_config();
    config["tie_word_embeddings"] = json!(true);
    llama_31_8b(&dir);
    fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let path = dir.to_str().unwrap();
    let out = kv(&["fit", path, "--gpu", "H100"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // 128,256 x 4,096 x 2 = 1,050,673,152 B skipped.
    assert!(
        stdout(&out).contains(", 1050673152 B the loader skips + rotary table"),
        "{}",
        stdout(&out)
    );
    let out = kv(&[
        "fit",
        path,
        "--engine",
        "sglang",
        "--gpu",
        "H100",
        "--avail-mem-gb",
        "78.43",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(", 1050673152 B the loader skips + rotary buffers"),
        "{}",
        stdout(&out)
    );
    // Nothing skipped: nothing said.
    llama_31_8b(&dir);
    let out = kv(&["fit", path, "--gpu", "H100"]);
    assert!(
        !stdout(&out).contains("the loader skips"),
        "{}",
        stdout(&out)
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sglang_under_dp_attention_reserves_for_each_dp_ranks_decode_graph() {
    // Qwen3-8B's geometry on an H100 at tp 4, dp 2: SGLang's default
    // fraction reserves 512 + 8,192 x 1.5 + 512 + 512 x 2 + 512 x 2 x 3 +
    // 512 x 2 x 1.5 + 58 x 8 = 19,408 MiB: (81,559 - 19,408) / 81,559 =
    // 0.76204 -> 0.762 (SGLang's ServerArgs says 0.762:
    // scripts/sglang/mem_fraction.py).
    let dir = scratch("fit-sglang-dp");
    let config = json!({
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
        "intermediate_size": 12288, "num_attention_heads": 32, "num_key_value_heads": 8,
        "head_dim": 128, "num_hidden_layers": 36, "vocab_size": 151936,
        "max_position_embeddings": 40960, "rope_theta": 1000000.0,
        "torch_dtype": "bfloat16", "tie_word_embeddings": false,
    });
    fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let file = dir.join("config.json");
    let at_tp_4 = |extra: &[&str]| {
        let mut args = vec![
            "fit",
            file.to_str().unwrap(),
            "--engine",
            "sglang",
            "--gpu",
            "H100",
            "--avail-mem-gb",
            "78.43",
            "--tp",
            "4",
            "--weights-from-config",
        ];
        args.extend_from_slice(extra);
        let out = kv(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let text = at_tp_4(&["--dp", "2"]);
    assert!(
        text.contains(
            "  mem_fraction_static: 0.762 (SGLang's default: 19408 MiB reserved for \
             chunked_prefill_size 4096, decode graph max_bs 512, 58 prefill graph sizes up to \
             8192 tokens, 4608 MiB of it for DP attention's decode graphs"
        ),
        "{text}"
    );
    // Without DP attention: 14,800 MiB, 0.819, and nothing said of it.
    let text = at_tp_4(&[]);
    assert!(
        text.contains(
            "  mem_fraction_static: 0.819 (SGLang's default: 14800 MiB reserved for \
             chunked_prefill_size 8192, decode graph max_bs 512, 58 prefill graph sizes up to \
             8192 tokens)\n"
        ),
        "{text}"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sglang_counts_what_deepseek_makes_after_loading() {
    let dir = scratch("fit-deepseek");
    // One DeepSeek-V2 layer, latent attention and a dense MLP: hidden 64,
    // 2 heads of 128 + 64 for q and k and 128 for v, q's rank 32, the
    // latent 512; 128 words, 25 positions.
    let config = json!({
        "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
        "hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 2,
        "q_lora_rank": 32, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 128,
        "num_hidden_layers": 1, "first_k_dense_replace": 1, "moe_layer_freq": 1,
        "n_routed_experts": 4, "intermediate_size": 32, "moe_intermediate_size": 16,
        "max_position_embeddings": 25, "torch_dtype": "bfloat16",
        "tie_word_embeddings": false,
    });
    fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let layer = |part: &str| format!("model.layers.0.{part}");
    let tensors: Vec<(String, Vec<u64>)> = vec![
        ("model.embed_tokens.weight".into(), vec![128, 64]),
        ("model.norm.weight".into(), vec![64]),
        ("lm_head.weight".into(), vec![128, 64]),
        (layer("self_attn.q_a_proj.weight"), vec![32, 64]),
        (layer("self_attn.q_a_layernorm.weight"), vec![32]),
        (layer("self_attn.q_b_proj.weight"), vec![384, 32]),
        (layer("self_attn.kv_a_proj_with_mqa.weight"), vec![576, 64]),
        (layer("self_attn.kv_a_layernorm.weight"), vec![512]),
        (layer("self_attn.kv_b_proj.weight"), vec![512, 512]),
        (layer("self_attn.o_proj.weight"), vec![64, 256]),
        (layer("input_layernorm.weight"), vec![64]),
        (layer("post_attention_layernorm.weight"), vec![64]),
        (layer("mlp.gate_proj.weight"), vec![32, 64]),
        (layer("mlp.up_proj.weight"), vec![32, 64]),
        (layer("mlp.down_proj.weight"), vec![64, 32]),
    ];
    write_bf16_safetensors(&dir.join("model.safetensors"), &tensors);
    let path = dir.to_str().unwrap();
    let out = kv(&[
        "fit",
        path,
        "--engine",
        "sglang",
        "--gpu",
        "H100",
        "--avail-mem-gb",
        "78",
        "--mem-fraction-static",
        "0.8",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The tensors: 4,096 + 64 + 24,576 + 73,728 + 1,024 + 524,288 + 32,768
    // + 256 + 12,288 for the layer, 32,896 for the embedding, head and norm:
    // 705,984 B. The latent rope's table 25 x 64 x 4 = 6,400. w_kc and w_vc:
    // kv_b's 524,288 again. 1,236,672 B in all.
    assert!(
        stdout(&out).contains(
            "  loaded: 705984 B in bfloat16 + rotary buffers 6400 B + other tensors 524288 B = \
             0.00 GiB\n"
        ),
        "{}",
        stdout(&out)
    );
    let out = kv(&[
        "fit",
        path,
        "--engine",
        "sglang",
        "--gpu",
        "H100",
        "--avail-mem-gb",
        "78",
        "--mem-fraction-static",
        "0.8",
        "--format",
        "json",
    ]);
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json[0]["fit"]["loaded"]["other_tensor_bytes"], 524_288);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn vllm_names_the_buffers_beside_the_scales() {
    // Falcon-H1's mixers each keep a `mup_vector` buffer
    // (scripts/vllm/fit-configs/test-falcon-h1-small.json, one layer).
    let dir = scratch("fit-falcon-h1");
    let mut config: Value = serde_json::from_str(include_str!(
        "../../scripts/vllm/fit-configs/test-falcon-h1-small.json"
    ))
    .unwrap();
    config["num_hidden_layers"] = json!(1);
    fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let at = |part: &str| format!("model.layers.0.{part}");
    let tensors: Vec<(String, Vec<u64>)> = vec![
        ("model.embed_tokens.weight".into(), vec![128, 64]),
        ("model.final_layernorm.weight".into(), vec![64]),
        ("lm_head.weight".into(), vec![128, 64]),
        (at("self_attn.q_proj.weight"), vec![64, 64]),
        (at("mamba.in_proj.weight"), vec![296, 64]),
    ];
    write_bf16_safetensors(&dir.join("model.safetensors"), &tensors);
    let out = kv(&["fit", dir.to_str().unwrap(), "--gpu", "H100"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // q 8,192 and in_proj 37,888 (both already whole blocks), the embedding
    // and the head 16,384 each, the norm 512: 79,360. The table [40, 16] in
    // bf16, 1,536; one layer's scales 2,048; the vector 296 x 2 -> 1,024.
    assert!(
        stdout(&out).contains(
            "  loaded: 79360 B in bf16 + rotary table 1536 B + attention scales 2048 B + other \
             buffers 1024 B = 83968 B\n"
        ),
        "{}",
        stdout(&out)
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sglang_names_the_buffers_beside_the_rotary_ones() {
    // Qwen3-Next's norms each keep a `gemma_weight` buffer as large
    // (scripts/vllm/fit-configs/test-qwen3-next-small.json).
    let dir = scratch("fit-qwen3-next");
    fs::write(
        dir.join("config.json"),
        include_str!("../../scripts/vllm/fit-configs/test-qwen3-next-small.json"),
    )
    .unwrap();
    let tensors: Vec<(String, Vec<u64>)> = vec![
        ("model.embed_tokens.weight".into(), vec![128, 64]),
        ("model.norm.weight".into(), vec![64]),
        ("model.layers.0.input_layernorm.weight".into(), vec![64]),
    ];
    write_bf16_safetensors(&dir.join("model.safetensors"), &tensors);
    let out = kv(&[
        "fit",
        dir.to_str().unwrap(),
        "--engine",
        "sglang",
        "--gpu",
        "H100",
        "--avail-mem-gb",
        "78",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The embedding 16,384 and two norms 256: 16,640 B; the table 50 x 4 x
    // 4 = 800; the norms' buffers 256.
    assert!(
        stdout(&out).contains(
            "  loaded: 16640 B in bfloat16 + rotary buffers 800 B + other buffers 256 B = \
             0.00 GiB\n"
        ),
        "{}",
        stdout(&out)
    );
    fs::remove_dir_all(&dir).unwrap();
}

/// LLaVA around Llama-3.1-8B, under the published LLaVA checkpoints' names
/// (`language_model.model.`, `language_model.lm_head.`) with a vision
/// tower and projector beside.
fn llava_on_llama_31_8b(dir: &Path) {
    let mut text = llama_31_8b_config();
    text.as_object_mut().unwrap().remove("architectures");
    let config = json!({
        "architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
        "text_config": text, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
        "vision_config": {"num_attention_heads": 16, "intermediate_size": 4096},
    });
    fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let mut tensors: Vec<(String, Vec<u64>)> = llama_tensors(32, 4096, 1024, 14336, 128256)
        .into_iter()
        .map(|(name, shape)| (format!("language_model.{name}"), shape))
        .collect();
    tensors.push((
        "vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight".into(),
        vec![4096, 1024],
    ));
    tensors.push((
        "multi_modal_projector.linear_1.weight".into(),
        vec![4096, 1024],
    ));
    write_bf16_safetensors(&dir.join("model.safetensors"), &tensors);
}

#[test]
fn a_multimodal_checkpoint_under_language_model_only_loads_its_text_model() {
    let dir = scratch("fit-llava");
    llava_on_llama_31_8b(&dir);
    let path = dir.to_str().unwrap();
    // Without the flag vLLM builds the towers too, which kv has not
    // checked: refused, naming the flag.
    let out = kv(&["fit", path, "--gpu", "H100"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("give --language-model-only"),
        "{}",
        stderr(&out)
    );
    // With it: Llama-3.1-8B's own figure (16,094,142,464 B, as above), the
    // tower's and projector's 16,777,216 B stored but not loaded.
    let out = kv(&["fit", path, "--gpu", "H100", "--language-model-only"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(
            "  weights: 16077299712 B stored in 1 file(s); vLLM loads its language model alone, \
             as `LlamaForCausalLM` (--language-model-only: no towers built)"
        ),
        "{}",
        stdout(&out)
    );
    for computed in [false, true] {
        let mut args = vec!["fit", path, "--gpu", "H100", "--language-model-only"];
        if computed {
            args.push("--weights-from-config");
        }
        args.extend(["--format", "json"]);
        let out = kv(&args);
        let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(json[0]["fit"]["weights_bytes"], 16_094_142_464u64);
    }
    // SGLang and llama.cpp have no such flag.
    let out = kv(&[
        "fit",
        path,
        "--gpu",
        "H100",
        "--engine",
        "sglang",
        "--language-model-only",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--language-model-only"),
        "{}",
        stderr(&out)
    );
    fs::remove_dir_all(&dir).unwrap();
}
