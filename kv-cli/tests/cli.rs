//! Runs the built `kv` binary on the shipped configs (figures asserted equal
//! to kv-core's), on bad files and bad usage, and on reports written here.

use std::path::Path;
use std::process::Output;

use kv_core::export::ClusterReport;
use kv_core::units::thousands;
use kv_core::{Collection, KvError, KvSpec, ModelLocalKv, Parallel};
use kv_engines::estimate::EstimateSettings;
use serde_json::Value;

mod support;
use support::*;

struct Declared(Vec<KvSpec>);

impl ModelLocalKv for Declared {
    fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
        out.extend(self.0.iter().cloned());
        Ok(())
    }
}

/// The library's side: kv-core's estimate, collected.
fn library(name: &str, settings: &EstimateSettings) -> Collection {
    let text = std::fs::read_to_string(shipped(name)).unwrap();
    let config: Value = serde_json::from_str(&text).unwrap();
    let estimate = kv_engines::estimate::estimate(&config, settings).unwrap();
    let collection = kv_core::collect(&Declared(estimate.specs));
    assert!(collection.skipped().is_empty());
    collection
}

/// Every shipped config, with the values its published file leaves out.
const SHIPPED: &[(&str, &[(&str, &str)])] = &[
    ("deepseek-v2-lite", &[]),
    ("gemma-3-27b", &[("sliding_window_pattern", "6")]),
    ("hy3-fp8", &[]),
    ("jamba-v0.1", &[]),
    ("llama-3-8b", &[]),
    ("ming-talker", &[]),
    ("mistral-7b-v0.1", &[]),
    ("qwen3-next-80b-a3b", &[("torch_dtype", "bfloat16")]),
    ("whisper-large-v3", &[]),
];

#[test]
fn estimate_prints_the_library_figures_for_every_shipped_config() {
    assert_eq!(
        std::fs::read_dir(configs())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().is_dir())
            .count(),
        SHIPPED.len(),
        "a shipped config is not covered"
    );
    for (name, values) in SHIPPED {
        let file = shipped(name);
        // 8192 positions for all; Whisper's decoder holds 448, so the longer
        // length is allowed, as vLLM allows it with VLLM_ALLOW_LONG_MAX_MODEL_LEN.
        let mut settings = EstimateSettings::new()
            .positions(8192)
            .allow_long_max_model_len(true);
        let mut args = vec![
            "estimate".to_owned(),
            file.clone(),
            "--positions".into(),
            "8192".into(),
            "--allow-long-max-model-len".into(),
            "--max-num-seqs".into(),
            "256".into(),
        ];
        for (key, value) in *values {
            // As the command reads it: JSON where it parses, else a string.
            let parsed = serde_json::from_str(value).unwrap_or(Value::String(value.to_string()));
            settings = settings.set(key, parsed);
            args.push("--set".into());
            args.push(format!("{key}={value}"));
        }
        let collection = library(name, &settings);
        let totals = collection.totals(256).unwrap();
        let per_position: u64 = collection
            .entries()
            .iter()
            .filter_map(|e| e.spec.layout.bytes_per_position())
            .map(|b| b.unwrap())
            .sum();
        let per_row: u64 = collection
            .entries()
            .iter()
            .map(|e| e.spec.bytes_per_row().unwrap())
            .sum();

        // Text: the totals line and one line per group.
        let args_ref: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = kv(&args_ref);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let text = stdout(&out);
        let expected = format!(
            "total: {} B per position, {} B per row",
            thousands(per_position),
            thousands(per_row)
        );
        assert!(
            text.contains(&expected),
            "{name}: {text}\nwanted {expected}"
        );
        assert!(
            text.contains(&format!("{} B at peak", thousands(totals.total))),
            "{name}: {text}"
        );
        for entry in collection.entries() {
            let peak = entry.spec.peak_bytes(256).unwrap();
            let line = text
                .lines()
                .find(|l| {
                    l.trim_start()
                        .starts_with(&format!("{}: size = ", entry.spec.name))
                })
                .unwrap_or_else(|| panic!("{name}: no line for {}", entry.spec.name));
            assert!(
                line.contains(&format!("{:.2} MiB (", peak as f64 / (1u64 << 20) as f64)),
                "{line}"
            );
            assert!(
                line.ends_with(&format!("at peak {} B", thousands(peak))),
                "{line}"
            );
        }

        // JSON: the same figures, and the library's export.
        let mut json_args = args_ref.clone();
        json_args.extend(["--format", "json"]);
        let out = kv(&json_args);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
        let rank = &json[0]["ranks"][0];
        assert_eq!(rank["per_position_bytes"], per_position, "{name}");
        assert_eq!(rank["per_row_bytes"], per_row, "{name}");
        assert_eq!(rank["report"]["total_bytes"], totals.total, "{name}");
        // The same export, but for the owner's type name (the test's, here).
        let mut expected = collection.to_json(256);
        for d in expected["declarations"].as_array_mut().unwrap() {
            d["owner_type"] = "kv_engines::estimate::export::FromConfig".into();
        }
        assert_eq!(rank["report"], expected, "{name}");
    }
}

#[test]
fn hand_worked_figures_reach_the_output() {
    let out = kv(&["estimate", &shipped("llama-3-8b"), "--positions", "8192"]);
    let text = stdout(&out);
    // 32 layers x 8 heads x (128 + 128) x 2 bytes.
    assert!(text.contains("total: 131,072 B per position"), "{text}");
    assert!(text.contains(
        "full_attention: size = 262144.00 MiB (  8192 cells,  32 layers, 256/256 seqs), \
         K (bf16): 131072.00 MiB, V (bf16): 131072.00 MiB"
    ));
    let out = kv(&[
        "estimate",
        &shipped("deepseek-v2-lite"),
        "--positions",
        "8192",
    ]);
    // 27 layers x (512 + 64) x 2 bytes.
    assert!(stdout(&out).contains("total: 31,104 B per position"));
    let out = kv(&[
        "estimate",
        &shipped("gemma-3-27b"),
        "--positions",
        "8192",
        "--set",
        "sliding_window_pattern=6",
    ]);
    let text = stdout(&out);
    assert!(text.contains("52 layers"), "{text}");
    assert!(text.contains("10 layers"), "{text}");
    let out = kv(&["estimate", &shipped("jamba-v0.1"), "--positions", "8192"]);
    let text = stdout(&out);
    assert!(
        text.contains("mamba: size = ") && text.contains(" 28 layers"),
        "{text}"
    );
    assert!(text.contains("   4 layers"), "{text}");
}

/// Gemma-3-27B at 8192, `sliding_window_pattern` 6, and `extra` flags.
fn gemma_3_27b(extra: &[&str]) -> Output {
    let file = shipped("gemma-3-27b");
    let mut args = vec![
        "estimate",
        &file,
        "--positions",
        "8192",
        "--set",
        "sliding_window_pattern=6",
    ];
    args.extend(extra);
    kv(&args)
}

#[test]
fn vllms_pool_and_start_up_line_beside_the_sum_of_layers() {
    // 52 sliding, 10 full; 8,192 B per token per layer, a page of 131,072 B.
    // Group size 10: sliding in 6 groups, charged as 60. Sliding: min(1023 +
    // 2 x 2048, 8192) = 5119 -> 320 + 1 = 321 blocks; full 512. A block spans
    // 10 layers (1,310,720 B); a request takes 6 x 321 + 512 = 2,438 blocks:
    // 3,195,535,360 B. The sum of layers, 2,858,942,464 B, is 10.53% less.
    let out = gemma_3_27b(&["--kv-cache-memory-bytes", "4G"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "vLLM's pool (groups of 10 layers): sliding_attention 52 layers charged as 60 (6 \
             group(s)), full_attention 10 layers charged as 10 (1 group(s)); a block spans 10 \
             layer(s) x 131,072 B = 1,310,720 B, a request takes 2,438 blocks: 3,195,535,360 B \
             per row"
        ),
        "{text}"
    );
    assert!(text.contains("the sum of layers is 10.53% less"), "{text}");
    // 256 requests and the null block: 1,310,720 x (256 x 2,438 + 1) B.
    assert!(
        text.contains(
            "vLLM needs --kv-cache-memory-bytes 818,058,362,880 (761.88 GiB) per rank for \
             max_num_seqs 256 at max_model_len 8192"
        ),
        "{text}"
    );
    // 4G is 4 x 2^30 B: 3,276 blocks of 1,310,720; 3,276 / 2,438 = 1.3437;
    // x 8192 = 11,007.8 tokens.
    assert!(
        text.contains(
            "vLLM start-up at --kv-cache-memory-bytes 4,294,967,296 per rank: GPU KV cache \
             size: 11,007 tokens, Maximum concurrency for 8,192 tokens per request: 1.34x"
        ),
        "{text}"
    );
    // 3g is 3 x 10^9 B: 2,998,689,280 B after the null block, 2,287 blocks.
    // Past 5119 tokens a request takes 1,926 + cdiv(len, 16) blocks: <= 2,287
    // up to 5776 tokens.
    let out = gemma_3_27b(&["--kv-cache-memory-bytes", "3g", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let startup = &json[0]["vllm_startup"];
    assert_eq!(startup["outcome"], "refused");
    assert_eq!(startup["kv_cache_memory_bytes"], 3_000_000_000u64);
    assert_eq!(startup["needed_bytes"], 3_195_535_360u64);
    assert_eq!(startup["available_bytes"], 2_998_689_280u64);
    assert_eq!(startup["estimated_max_model_len"], 5776);
    assert!(startup["message"]
        .as_str()
        .unwrap()
        .starts_with("To serve at least one request with the model's max seq len (8192), (2.98 GiB KV cache is needed, which is larger than the available KV cache memory (2.79 GiB). Based on the available memory, the estimated maximum model length is 5776."));
    let rank = &json[0]["ranks"][0];
    assert_eq!(rank["vllm_pool"]["per_row_bytes"], 3_195_535_360u64);
    assert_eq!(rank["per_row_bytes"], 2_858_942_464u64);
    assert_eq!(
        json[0]["cluster"]["kv_cache_memory_bytes_needed"],
        818_058_362_880u64
    );
    let back: Vec<kv_engines::estimate::ExportedEstimate> =
        serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), json);
    // The text says vLLM would not start, with its words.
    let out = gemma_3_27b(&["--kv-cache-memory-bytes", "3g"]);
    let text = stdout(&out);
    assert!(
        text.contains(
            "vLLM would not start at --kv-cache-memory-bytes 3,000,000,000 per rank: rank tp=0 \
             pp=0 needs 3,195,535,360 B for one request and has 2,998,689,280 B after the null \
             block; ValueError: To serve"
        ),
        "{text}"
    );
    // Markdown has the pool's row and the same lines.
    let out = gemma_3_27b(&["--kv-cache-memory-bytes", "25.6k", "--format", "markdown"]);
    let text = stdout(&out);
    assert!(
        text.contains(
            "- tp=0 pp=0: vLLM's pool (groups of 10 layers): sliding_attention 52 layers \
             charged as 60"
        ),
        "{text}"
    );
    // The sliding group's cache says why: 52 = 4 x 9 + 2 x 8 (layers[i::6]).
    assert!(
        text.contains(
            "vLLM 0.33's pool groups its 52 layers as 6 group(s) (4 x 9, 2 x 8 layers), each \
             charged as 10: 60 layers (group size 10, the fewest layers of a kind)"
        ),
        "{text}"
    );
    // 25.6k is int(25.6 x 1000) = 25,600 B: not one block of 1,310,720.
    assert!(
        text.contains("vLLM would not start at --kv-cache-memory-bytes 25,600 per rank")
            && text.contains("ValueError: No available memory for the cache blocks."),
        "{text}"
    );
}

#[test]
fn positions_come_from_max_position_embeddings_or_are_asked_for() {
    let out = kv(&["estimate", &shipped("ming-talker")]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("max_model_len 32768 (`max_position_embeddings` of the config)"));
    let file = shipped("llama-3-8b");
    let out = kv(&["estimate", &file]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with(&format!("kv: {file}: ")), "{err}");
    assert!(err.contains("max_position_embeddings") && err.contains("--positions N"));
    // A length past the model's is refused as vLLM refuses it: bad usage.
    let out = kv(&["estimate", &shipped("ming-talker"), "--positions", "65536"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "invalid value for '--positions': {}: max_model_len 65536 is greater than the \
             model's ",
            shipped("ming-talker")
        )) && err.contains("(--allow-long-max-model-len allows it)"),
        "{err}"
    );
    let out = kv(&[
        "estimate",
        &shipped("ming-talker"),
        "--positions",
        "65536",
        "--allow-long-max-model-len",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_key_left_to_the_loader_is_defaulted_and_one_with_no_default_is_asked_for() {
    let out = kv(&["estimate", &shipped("gemma-3-27b"), "--positions", "8192"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("`sliding_window_pattern` 6 (transformers Gemma3TextConfig default)")
    );
    // No dtype key: resolved as vLLM resolves it, and said.
    let out = kv(&[
        "estimate",
        &shipped("qwen3-next-80b-a3b"),
        "--positions",
        "8192",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("dtype bf16: none of `torch_dtype`, `dtype` is set"),
        "{}",
        stdout(&out)
    );
    let dir = scratch("no-default");
    let file = write(
        &dir,
        "config.json",
        r#"{"model_type": "llama", "num_key_value_heads": 8, "head_dim": 128, "torch_dtype": "bfloat16"}"#,
    );
    let out = kv(&["estimate", &file, "--positions", "8192"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with(&format!("kv: {file}: ")), "{err}");
    assert!(err.contains("give `num_hidden_layers`"), "{err}");
    assert!(err.contains("--set KEY=VALUE"), "{err}");
    // A key nothing reads is an error, not a silent no-op.
    let out = kv(&[
        "estimate",
        &shipped("gemma-3-27b"),
        "--positions",
        "8192",
        "--set",
        "sliding_window_patern=6",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("`sliding_window_patern` given, but nothing"));
}

#[test]
fn a_directory_with_one_broken_file_reports_the_others() {
    let dir = scratch("directory");
    for name in ["llama-3-8b", "mistral-7b-v0.1"] {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::copy(shipped(name), dir.join(name).join("config.json")).unwrap();
        // A checkpoint folder holds other JSON beside its config: not read.
        write(
            &dir.join(name),
            "tokenizer_config.json",
            "{\"model_max_length\": 1}",
        );
        write(
            &dir.join(name),
            "generation_config.json",
            "{\"do_sample\": true}",
        );
        write(
            &dir.join(name),
            "model.safetensors.index.json",
            "{\"weight_map\": {}}",
        );
    }
    std::fs::create_dir_all(dir.join("broken")).unwrap();
    let broken = write(
        &dir.join("broken"),
        "config.json",
        "{\"num_hidden_layers\": 32,",
    );
    write(&dir, "notes.txt", "not a config");
    let out = kv(&["estimate", dir.to_str().unwrap(), "--positions", "8192"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("llama-3-8b/config.json"), "{text}");
    assert!(text.contains("mistral-7b-v0.1/config.json"), "{text}");
    assert!(!text.contains("tokenizer_config"), "{text}");
    assert!(text.find("llama").unwrap() < text.find("mistral").unwrap());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("kv: {broken}: invalid JSON")),
        "{err}"
    );

    // The whole shipped directory: every file reported (Qwen3-Next's
    // missing dtype is resolved as vLLM resolves it; Whisper's 448 decoder
    // positions are allowed past).
    let out = kv(&[
        "estimate",
        configs().to_str().unwrap(),
        "--positions",
        "8192",
        "--allow-long-max-model-len",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).matches("  total: ").count(), SHIPPED.len());
}

#[test]
fn bad_files_are_one_line_naming_the_file_and_the_key() {
    let dir = scratch("bad");
    let cases = [
        ("invalid.json", "{ not json", "invalid JSON"),
        ("empty.json", "", "the file is empty"),
        ("blank.json", "  \n", "the file is empty"),
        ("array.json", "[1, 2]", "num_hidden_layers"),
        ("null.json", "null", "num_hidden_layers"),
        (
            "missing.json",
            r#"{"num_hidden_layers": 32, "torch_dtype": "bfloat16"}"#,
            "num_key_value_heads",
        ),
        (
            "wrong_type.json",
            r#"{"num_hidden_layers": "32", "num_key_value_heads": 8, "head_dim": 128, "torch_dtype": "bfloat16"}"#,
            "`num_hidden_layers` is \"32\"",
        ),
        (
            "negative.json",
            r#"{"num_hidden_layers": -1, "num_key_value_heads": 8, "head_dim": 128, "torch_dtype": "bfloat16"}"#,
            "cannot be negative",
        ),
        (
            "dtype.json",
            r#"{"num_hidden_layers": 2, "num_key_value_heads": 8, "head_dim": 128, "torch_dtype": "complex64"}"#,
            "`torch_dtype`",
        ),
        (
            "overflow.json",
            r#"{"num_hidden_layers": 18446744073709551615, "num_key_value_heads": 8, "head_dim": 128, "torch_dtype": "bfloat16"}"#,
            "overflows u64",
        ),
        (
            "bad_window.json",
            r#"{"model_type": "mistral", "num_hidden_layers": 2, "num_key_value_heads": 8, "head_dim": 128, "torch_dtype": "bfloat16", "sliding_window": "big"}"#,
            "`sliding_window`",
        ),
        (
            "bad_pattern.json",
            r#"{"num_hidden_layers": 4, "num_key_value_heads": 8, "head_dim": 128, "torch_dtype": "bfloat16", "layer_types": ["full_attention", "moe", "x", "y"]}"#,
            "layer_types",
        ),
        (
            "bad_mla.json",
            r#"{"num_hidden_layers": 4, "kv_lora_rank": 512, "torch_dtype": "bfloat16"}"#,
            "qk_rope_head_dim",
        ),
    ];
    for (name, text, key) in cases {
        let file = write(&dir, name, text);
        let out = kv(&["estimate", &file, "--positions", "8192"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        // Each problem is one line naming the file; every missing value at
        // once (layers, KV heads, head dim: the dtype vLLM resolves).
        let expected_lines = match name {
            "array.json" | "null.json" => 3,
            "missing.json" => 2,
            _ => 1,
        };
        assert_eq!(err.lines().count(), expected_lines, "{name}: {err}");
        for line in err.lines() {
            assert!(line.starts_with(&format!("kv: {file}: ")), "{name}: {err}");
        }
        assert!(err.contains(key), "{name}: wanted {key} in {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        assert!(stdout(&out).is_empty(), "{name}");
    }
    let missing = dir.join("absent.json").display().to_string();
    let out = kv(&["estimate", &missing, "--positions", "8192"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).starts_with(&format!("kv: {missing}: ")));
    // Huge positions overflow cleanly, as bad usage naming the flag.
    let out = kv(&[
        "estimate",
        &shipped("llama-3-8b"),
        "--positions",
        "18446744073709551615",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("'--positions'") && err.contains("overflow"),
        "{err}"
    );
    assert!(!err.contains("FromConfig"), "{err}");
    // A config saved with NaN / Infinity (transformers' save_pretrained) is read.
    let file = write(
        &dir,
        "codestral.json",
        r#"{"model_type": "mamba2", "hidden_size": 4096, "num_hidden_layers": 64,
            "expand": 2, "state_size": 128, "conv_kernel": 4, "n_groups": 8,
            "num_heads": 128, "head_dim": 64, "time_step_limit": [0.0, Infinity],
            "torch_dtype": "bfloat16"}"#,
    );
    let out = kv(&["estimate", &file, "--positions", "4096"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn bad_usage_exits_2() {
    let llama = shipped("llama-3-8b");
    for args in [
        vec![],
        vec!["estimate"],
        vec!["frobnicate"],
        vec!["estimate", &llama, "--kv-format", "q3_k"],
        vec!["estimate", &llama, "--tp", "0"],
        vec!["estimate", &llama, "--positions", "zero"],
        vec!["estimate", &llama, "--set", "no_equals"],
        vec!["estimate", &llama, "--format", "yaml"],
        vec!["estimate", &llama, "--kv-cache-memory-bytes", "0"],
        vec!["estimate", &llama, "--kv-cache-memory-bytes", "1.5G"],
        vec!["estimate", &llama, "--kv-cache-memory-bytes", "8x"],
        vec![
            "estimate",
            &llama,
            "--kv-cache-memory-bytes",
            "99999999999T",
        ],
        vec!["merge"],
        vec!["table"],
    ] {
        let out = kv(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
    assert!(kv(&["--help"]).status.success());
}

#[test]
fn markdown_json_kv_format_and_ranks() {
    let llama = shipped("llama-3-8b");
    let out = kv(&[
        "estimate",
        &llama,
        "--positions",
        "8192",
        "--format",
        "markdown",
    ]);
    let text = stdout(&out);
    // kv-core's table, as `kv table` prints it, then each rank's totals.
    assert!(text.contains("| Model "), "{text}");
    assert!(text.contains("| tp=0 pp=0.full_attention "), "{text}");
    assert!(
        text.contains("- tp=0 pp=0: total: 131,072 B per position"),
        "{text}"
    );

    let out = kv(&[
        "estimate",
        &llama,
        "--positions",
        "8192",
        "--kv-format",
        "q8_0",
    ]);
    // 128 elements in q8_0: 4 blocks of 34 bytes, for K and V, 8 heads, 32 layers.
    assert!(stdout(&out).contains(&format!(
        "total: {} B per position",
        thousands(32 * 8 * 2 * 136)
    )));

    let out = kv(&[
        "estimate",
        &llama,
        "--positions",
        "8192",
        "--tp",
        "2",
        "--pp",
        "2",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let ranks = json[0]["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4);
    // A quarter each: half the layers, half the heads.
    for rank in ranks {
        assert_eq!(rank["report"]["total_bytes"], 274_877_906_944u64 / 4);
    }
    // A hybrid's groups are cut by the model's layers.
    let out = kv(&[
        "estimate",
        &shipped("jamba-v0.1"),
        "--positions",
        "8192",
        "--pp",
        "2",
        "--format",
        "json",
    ]);
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let settings = EstimateSettings::new().positions(8192);
    let whole = library("jamba-v0.1", &settings);
    for (i, rank) in json[0]["ranks"].as_array().unwrap().iter().enumerate() {
        let parallel = Parallel::new(1, 2).unwrap().at(0, i as u64).unwrap();
        let expected = whole.for_rank(parallel).unwrap().totals(256).unwrap().total;
        assert_eq!(rank["report"]["total_bytes"], expected);
    }
    // TP that does not divide the query heads is a layout vLLM refuses:
    // bad usage, naming the file and vLLM's reason.
    let out = kv(&["estimate", &llama, "--positions", "8192", "--tp", "3"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        format!(
            "error: the layout --tp/--pp/--dcp/--dcp-interleave is refused: {llama}: vLLM 0.33 \
             would not start: tp 3 does not divide the 32 query heads (`num_attention_heads`) \
             (vLLM: \"Total number of attention heads (32) must be divisible by tensor \
             parallel size (3).\")\n"
        )
    );
}

#[test]
fn decode_context_parallel_halves_each_ranks_tokens_and_vllms_refusals_exit_2() {
    let llama = shipped("llama-3-8b");
    let out = kv(&[
        "estimate",
        &llama,
        "--positions",
        "8192",
        "--tp",
        "16",
        "--dcp",
        "2",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // Per rank: 1 KV head, 32 x 1 x 256 x 2 B = 16,384 B per token, over
    // cdiv(8192, 2) = 4096 tokens = 67,108,864 B per row; 16 ranks add to
    // 1 GiB per row, 256 GiB at 256 rows.
    assert!(text.contains("tp 16, pp 1, dcp 2;"), "{text}");
    assert!(
        text.contains("per position 16,384 B, per row 67,108,864 B, at peak 17,179,869,184 B"),
        "{text}"
    );
    assert!(
        text.contains(
            "cluster: 16 ranks, 1,073,741,824 B (1.00 GiB) per row, 274,877,906,944 B \
             (256.00 GiB) at peak in all"
        ),
        "{text}"
    );
    let out = kv(&[
        "estimate",
        &llama,
        "--positions",
        "8192",
        "--tp",
        "16",
        "--dcp",
        "2",
        "--format",
        "json",
    ]);
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json[0]["decode_context_parallel"], 2);
    assert_eq!(json[0]["ranks"][15]["per_row_bytes"], 67_108_864u64);
    assert_eq!(json[0]["cluster"]["per_row_bytes"], 1_073_741_824u64);
    for (args, says) in [
        (
            vec!["--tp", "8", "--dcp", "2"],
            "tp 8 is not above the model's 8 KV heads",
        ),
        (
            vec!["--tp", "16", "--dcp", "2", "--dcp-interleave", "32"],
            "cp_kv_cache_interleave_size (32)",
        ),
    ] {
        let mut all = vec!["estimate", &llama, "--positions", "8192"];
        all.extend(args);
        let out = kv(&all);
        assert_eq!(out.status.code(), Some(2), "{all:?}");
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
        assert!(stdout(&out).is_empty());
    }
    let whisper = shipped("whisper-large-v3");
    let out = kv(&["estimate", &whisper, "--positions", "448", "--pp", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("WhisperForConditionalGeneration does not implement `SupportsPP`"),
        "{}",
        stderr(&out)
    );
    let out = kv(&["estimate", &llama, "--dcp", "0"]);
    assert_eq!(out.status.code(), Some(2));
    // A KV format no MLA backend takes is bad usage of --kv-format.
    let lite = shipped("deepseek-v2-lite");
    let out = kv(&[
        "estimate",
        &lite,
        "--positions",
        "8192",
        "--kv-format",
        "nvfp4",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with(&format!(
            "error: invalid value for '--kv-format': {lite}: vLLM 0.33 would not start"
        )),
        "{}",
        stderr(&out)
    );
    // A block no attention backend runs is bad usage of --block-size.
    let out = kv(&[
        "estimate",
        &llama,
        "--positions",
        "8192",
        "--block-size",
        "8",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with(&format!(
            "error: invalid value for '--block-size': {llama}: vLLM 0.33 would not start: no \
             attention backend on Hopper runs a block of 8 tokens"
        )),
        "{}",
        stderr(&out)
    );
    // 16 given for an fp8 latent: TRITON_MLA at 16, said in the convention.
    let out = kv(&[
        "estimate",
        &lite,
        "--positions",
        "3000",
        "--kv-format",
        "fp8",
        "--block-size",
        "16",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("block_size 16 (TRITON_MLA"),
        "{}",
        stdout(&out)
    );
    let out = kv(&[
        "estimate",
        &lite,
        "--positions",
        "3000",
        "--kv-format",
        "fp8",
    ]);
    assert!(
        stdout(&out).contains("block_size 64 (FLASHMLA"),
        "{}",
        stdout(&out)
    );
}

fn rank_reports(dir: &Path, max_num_seqs: u64) -> (Vec<String>, Collection) {
    let whole = library("llama-3-8b", &EstimateSettings::new().positions(8192));
    let layout = Parallel::new(2, 1).unwrap();
    let files = layout
        .ranks()
        .map(|rank| {
            let report = whole.for_rank(rank).unwrap().export(max_num_seqs);
            write(
                dir,
                &format!("rank{}.json", rank.tp_rank),
                serde_json::to_string_pretty(&report).unwrap(),
            )
        })
        .collect();
    (files, whole)
}

#[test]
fn merge_prints_the_cluster_view() {
    let dir = scratch("merge");
    let (files, whole) = rank_reports(&dir, 256);
    let out = kv(&["merge", &files[0], &files[1]]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("Model-local KV across tp=2 pp=1 at max_num_seqs=256"),
        "{text}"
    );
    let reports = files
        .iter()
        .map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap());
    let cluster = ClusterReport::merge(reports).unwrap();
    assert_eq!(cluster.totals.total_bytes, whole.totals(256).unwrap().total);
    assert_eq!(text, format!("{cluster}\n"));
    // A directory of them, and JSON.
    let out = kv(&["merge", dir.to_str().unwrap(), "--format", "json"]);
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["total_bytes"], cluster.totals.total_bytes);
    assert_eq!(json["rank_count"], 2);
    assert_eq!(json["schema_version"], kv_core::export::SCHEMA_VERSION);
    // It is kv-core's shape, and reads back into the same cluster view.
    let back: kv_core::export::ExportedCluster = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(back.merge_again().unwrap(), cluster);
    // So does an estimate's JSON.
    let out = kv(&[
        "estimate",
        &shipped("jamba-v0.1"),
        "--positions",
        "8192",
        "--format",
        "json",
    ]);
    let estimates: Vec<kv_engines::estimate::ExportedEstimate> =
        serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(estimates[0].schema_version, kv_core::export::SCHEMA_VERSION);
    assert_eq!(estimates[0].block_size, 80);
    // 153,354,240 B per row: Jamba's hybrid pages (kv-core's estimate tests).
    assert_eq!(estimates[0].ranks[0].per_row_bytes, 153_354_240);
    // One rank: the cluster is that rank.
    assert_eq!(estimates[0].cluster.totals.rank_count, 1);
    assert_eq!(estimates[0].cluster.per_row_bytes, 153_354_240);
    assert_eq!(
        Some(estimates[0].cluster.totals.largest_device_bytes),
        estimates[0].ranks[0].report.total_bytes
    );
}

#[test]
fn an_estimates_cluster_is_what_merge_makes_of_its_ranks_reports() {
    let out = kv(&[
        "estimate",
        &shipped("llama-3-8b"),
        "--positions",
        "8192",
        "--tp",
        "2",
        "--pp",
        "2",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let estimate: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let dir = scratch("merge_an_estimate");
    let files: Vec<String> = estimate[0]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, rank)| write(&dir, &format!("rank{i}.json"), rank["report"].to_string()))
        .collect();
    let mut args = vec!["merge", "--format", "json"];
    args.extend(files.iter().map(String::as_str));
    let out = kv(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let merged: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let cluster = &estimate[0]["cluster"];
    // Every figure merge adds up, under the same name in the estimate.
    let mut names = 0;
    for (name, figure) in merged.as_object().unwrap() {
        if name != "schema_version" && name != "reports" {
            assert_eq!(&cluster[name], figure, "{name}");
            names += 1;
        }
    }
    assert_eq!(names, 7);
    // Llama-3-8B: 32 layers x 8 heads x 128 x (K + V) x 2 B x 8192 positions
    // x 256 rows = 256 GiB; a quarter per rank, the first named.
    assert_eq!(cluster["total_bytes"], 256u64 << 30);
    assert_eq!(cluster["largest_device_bytes"], 64u64 << 30);
    assert_eq!(cluster["largest_device_tp_rank"], 0);
    assert_eq!(cluster["largest_device_pp_rank"], 0);
}

#[test]
fn merge_names_the_file_that_does_not_belong() {
    let dir = scratch("merge_bad");
    let (files, _) = rank_reports(&dir, 256);
    let other = scratch("merge_bad_other");
    let (odd, _) = rank_reports(&other, 128);
    let out = kv(&["merge", &files[0], &odd[1]]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with(&format!("kv: {}: ", odd[1])), "{err}");
    assert!(
        err.contains(&format!(
            "cannot merge: rank tp=1 pp=0 is at max_num_seqs=128, the first report ({}) at \
             max_num_seqs=256",
            files[0]
        )),
        "{err}"
    );
    // The same rank twice.
    let out = kv(&["merge", &files[0], &files[0]]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!(
            "kv: {0}: cannot merge: rank tp=0 pp=0 appears twice (also {0})\n",
            files[0]
        )
    );
    // A rank missing: kv-core's message, naming the files.
    let out = kv(&["merge", &files[0]]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.starts_with(&format!("kv: {}: ", files[0])), "{err}");
    // Figures that do not add up (kv-core's view would underflow on them).
    let mut report: Value =
        serde_json::from_str(&std::fs::read_to_string(&files[1]).unwrap()).unwrap();
    report["total_bytes"] = 0.into();
    let bad = write(&other, "inconsistent.json", report.to_string());
    let out = kv(&["merge", &files[0], &bad]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.starts_with(&format!("kv: {bad}: ")), "{err}");
    assert!(
        err.contains("cannot merge: rank tp=1 pp=0's figures disagree: device "),
        "{err}"
    );
    assert!(err.trim_end().ends_with("is not its total 0 B"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // A report of schema 1 (an estimate's cluster had other names then):
    // its version and this kv's.
    let mut report: Value =
        serde_json::from_str(&std::fs::read_to_string(&files[1]).unwrap()).unwrap();
    report["schema_version"] = 1.into();
    let old = write(&other, "old.json", report.to_string());
    let out = kv(&["merge", &files[0], &old]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!("kv: {old}: cannot merge: rank tp=1 pp=0 has schema version 1, this kv reads 2\n")
    );
    // Not a report: the key serde missed.
    let out = kv(&["merge", &files[0], &shipped("llama-3-8b")]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("missing field `schema_version`"), "{err}");
    assert!(err.contains(&shipped("llama-3-8b")), "{err}");
}

#[test]
fn table_prints_a_report() {
    let dir = scratch("table");
    let whole = library(
        "gemma-3-27b",
        &EstimateSettings::new()
            .positions(8192)
            .set("sliding_window_pattern", 6),
    );
    let file = write(
        &dir,
        "report.json",
        serde_json::to_string(&whole.export(256)).unwrap(),
    );
    let out = kv(&["table", &file, "--markdown"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("| Model ") && lines[0].contains("Peak @ max_num_seqs=256"));
    assert!(lines[1].starts_with("| ---"));
    assert!(lines[2].starts_with("| sliding_attention "), "{text}");
    assert!(lines[3].starts_with("| full_attention "), "{text}");
    let total = kv_core::units::human_bytes(whole.totals(256).unwrap().total);
    assert!(
        text.contains(&format!("total {total} at max_num_seqs=256")),
        "{text}"
    );
    // One renderer: the table is kv_core::Table's, as for the live model.
    let live = kv_core::Table::new(256)
        .rows(whole.entries().iter().map(|e| (e.path.as_str(), &e.spec)))
        .to_markdown();
    assert!(text.starts_with(&live), "{text}");
    let out = kv(&["table", &file]);
    assert!(stdout(&out).starts_with("Model "));

    for (name, text, key) in [
        ("empty.json", "", "empty"),
        ("list.json", "[]", "expected struct"),
        (
            "partial.json",
            r#"{"schema_version": 1}"#,
            "missing field `max_num_seqs`",
        ),
        (
            "wrong.json",
            r#"{"schema_version": "one"}"#,
            "invalid type: string \"one\"",
        ),
    ] {
        let bad = write(&dir, name, text);
        let out = kv(&["table", &bad]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(err.starts_with(&format!("kv: {bad}: ")), "{name}: {err}");
        assert!(err.contains(key), "{name}: {err}");
    }
}

#[test]
fn identical_ranks_print_once_with_their_count_and_the_cluster_total() {
    let llama = shipped("llama-3-8b");
    let out = kv(&["estimate", &llama, "--positions", "8192", "--tp", "16"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.matches("full_attention: size").count(), 1, "{text}");
    assert!(
        text.contains("  ranks tp=0-15 pp=0 (16 identical):"),
        "{text}"
    );
    // 8 KV heads on 16 ranks: one head each (replicated), 32 layers x 256 x
    // 2 B x 8192 positions x 256 rows = 34,359,738,368 B per rank; 16 ranks.
    assert!(
        text.contains(
            "cluster: 16 ranks, 2,147,483,648 B (2.00 GiB) per row, \
             549,755,813,888 B (512.00 GiB) at peak in all; largest rank \
             34,359,738,368 B (32.00 GiB) at peak"
        ),
        "{text}"
    );
    // Stages hold different layers: each stage is its own block.
    let out = kv(&[
        "estimate",
        &llama,
        "--positions",
        "8192",
        "--tp",
        "2",
        "--pp",
        "2",
    ]);
    let text = stdout(&out);
    assert!(
        text.contains("  ranks tp=0-1 pp=0 (2 identical):"),
        "{text}"
    );
    assert!(
        text.contains("  ranks tp=0-1 pp=1 (2 identical):"),
        "{text}"
    );
}

#[test]
fn a_hybrids_block_is_set_from_one_ranks_shard() {
    let args = |tp: &str| {
        kv(&[
            "estimate",
            &shipped("qwen3-next-80b-a3b"),
            "--positions",
            "8192",
            "--set",
            "torch_dtype=bfloat16",
            "--tp",
            tp,
            "--format",
            "json",
        ])
    };
    // One rank at tp 8: 1 KV head x 256 x 2 x 2 B = 1,024 B per token; its
    // Gated DeltaNet state 1,024 x 3 x 2 + 4 x 128 x 128 x 2 = 137,216 B:
    // 64 x cdiv(137,216, 65,536) = 192. The whole model's figures gave 576.
    for (tp, block) in [("1", 576), ("8", 192)] {
        let out = args(tp);
        assert!(out.status.success(), "{}", stderr(&out));
        let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(json[0]["block_size"], block, "tp {tp}");
    }
}

#[test]
fn vllms_kv_cache_dtype_names_are_kv_formats_and_falcon_ignores_them() {
    let llama = shipped("llama-3-8b");
    // int8_per_token_head: 32 layers x 8 heads x (K + V) x (128 + 4) B.
    for (flag, name, bytes) in [
        ("--kv-format", "int8_per_token_head", 67_584),
        ("--kv-cache-dtype", "int4_per_token_head", 34_816),
        ("--kv-cache-dtype", "fp8", 65_536),
        ("--kv-format", "fp8_e5m2", 65_536),
    ] {
        let out = kv(&["estimate", &llama, "--positions", "8192", flag, name]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        assert!(
            stdout(&out).contains(&format!("total: {} B per position", thousands(bytes))),
            "{name}: {}",
            stdout(&out)
        );
    }
    // No MLA backend of vLLM 0.33 takes a per-token-head format: bad usage.
    let out = kv(&[
        "estimate",
        &shipped("deepseek-v2-lite"),
        "--positions",
        "8192",
        "--kv-format",
        "int8_per_token_head",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("invalid value for '--kv-format'")
            && stderr(&out).contains("int8_per_token_head on an MLA model"),
        "{}",
        stderr(&out)
    );
    let out = kv(&["estimate", &llama, "--kv-format", "fp8_e4m2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("int4_per_token_head"),
        "{}",
        stderr(&out)
    );
    // Falcon-7B keeps bf16 K/V: 32 layers x 1 head x 64 x 2 x 2 B.
    let dir = scratch("falcon-format");
    let falcon = write(
        &dir,
        "config.json",
        r#"{"alibi": false, "architectures": ["FalconForCausalLM"], "bias": false,
            "hidden_size": 4544, "model_type": "falcon", "multi_query": true,
            "new_decoder_architecture": false, "num_attention_heads": 71,
            "num_hidden_layers": 32, "parallel_attn": true, "torch_dtype": "bfloat16"}"#,
    );
    let out = kv(&[
        "estimate",
        &falcon,
        "--positions",
        "2048",
        "--kv-cache-dtype",
        "fp8",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("total: 8,192 B per position"), "{text}");
    assert!(
        text.contains("(assumes the KV format f8e4m3 asked is not applied: vLLM 0.33's Falcon"),
        "{text}"
    );
}

#[test]
fn a_gemma_4_config_is_sized_on_both_engines_with_its_wider_full_layers() {
    // The layout Gemma 4's published configs write (no `per_layer_config`):
    // transformers builds one from `global_head_dim` on the full-attention
    // layers, so one geometry would size them at half their head.
    let dir = scratch("gemma-4");
    let config = serde_json::json!({
        "architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
        "text_config": {
            "model_type": "gemma4_text", "num_hidden_layers": 12, "num_attention_heads": 16,
            "num_key_value_heads": 8, "head_dim": 256, "global_head_dim": 512,
            "num_global_key_value_heads": 2, "attention_k_eq_v": true,
            "sliding_window": 1024, "max_position_embeddings": 32768, "dtype": "bfloat16",
        },
    });
    let file = write(&dir, "config.json", config.to_string());
    let run = |engine: &str| {
        kv(&[
            "estimate",
            "--engine",
            engine,
            "--kv-cache-memory-bytes",
            "42949672960",
            &file,
        ])
    };
    // vLLM: every 6th of 12 layers full (transformers' pattern): 10 sliding
    // layers of 8 x 256 (8,192 B a token), 2 full of 2 x 512 (4,096 B), on
    // 32 tokens a block so their page is the sliding one's 131,072 B. Groups
    // of 2: a block 262,144 B. A request: 5 sliding groups x (cdiv(1,023 +
    // 4,096, 16) + 1 = 321) + cdiv(32,768, 32) = 1,024: 2,629 blocks. 40 GiB
    // / 262,144 = 163,840 blocks: 62.32 requests, int(163,840 / 2,629 x
    // 32,768) = 2,042,110 tokens.
    let out = run("vllm");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "full_attention layers: `head_dim` 512, 2 KV heads, from `model_type` gemma4_text"
        ),
        "{text}"
    );
    assert!(
        text.contains("(1 group(s), 32 tokens a block to fill the largest page)"),
        "{text}"
    );
    assert!(
        text.contains(
            "a block spans 2 layer(s) x 131,072 B = 262,144 B, a request takes 2,629 blocks"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "GPU KV cache size: 2,042,110 tokens, Maximum concurrency for 32,768 tokens per \
             request: 62.32x"
        ),
        "{text}"
    );
    // SGLang keeps each kind in its own pool with its own heads: at the
    // full pool's 581,120 tokens, K is 581,120 x 2 layers x 2 heads x 512 x
    // 2 B = 2,380,267,520 B (2.22 GiB); at the sliding pool's 464,896, K is
    // 464,896 x 10 x 8 x 256 x 2 B = 19,038,994,432 B (17.73 GiB). (The
    // token counts are SGLang's SWA split, checked on its own code for the
    // Gemma 4 family's defaults: scripts/sglang/registry.py.)
    let out = run("sglang");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("#tokens: 581120, K size: 2.22 GB, V size: 2.22 GB"),
        "{text}"
    );
    assert!(
        text.contains("#tokens: 464896, K size: 17.73 GB, V size: 17.73 GB"),
        "{text}"
    );
}

#[test]
fn a_sparse_attention_model_is_sized_with_its_indexer_on_both_engines() {
    // GLM-5's layout: an MLA latent and a DSA indexer beside it, 8 layers.
    let dir = scratch("dsa");
    let config = serde_json::json!({
        "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa",
        "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 16,
        "kv_lora_rank": 512, "qk_rope_head_dim": 64, "index_topk": 1024,
        "index_head_dim": 128, "index_n_heads": 8, "max_position_embeddings": 65536,
        "torch_dtype": "bfloat16",
    });
    let file = write(&dir, "config.json", config.to_string());
    let out = kv(&["estimate", "--max-num-seqs", "1", &file]);
    let said = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    // 8 x (64 x 1,152) + 8 x (64 x 132) = 657,408 B a block; 1,024 blocks.
    assert!(
        said.contains(
            "vLLM's pool (one group of all 16 layers: mla_latent and indexer_keys); a block \
             holds each layer's page side by side: 8 x 73,728 B + 8 x 8,448 B = 657,408 B, a \
             request takes 1,024 blocks: 673,185,792 B per row"
        ),
        "{said}"
    );
    // SGLang: 8 x 1,284 = 10,272 B a token; 40 GiB // 10,272 = 4,181,237,
    // down to its DSA page of 64: 4,181,184.
    let out = kv(&[
        "estimate",
        "--engine",
        "sglang",
        "--kv-cache-memory-bytes",
        "42949672960",
        &file,
    ]);
    let said = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        said.contains(
            "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 4181184, KV size: 40.00 GB"
        ),
        "{said}"
    );
}

#[test]
fn an_architecture_vllm_retired_is_refused_on_vllm_and_sized_on_sglang() {
    // vLLM 0.33 no longer serves Xverse; SGLang 0.5.23 registers it.
    let dir = scratch("xverse");
    let file = write(
        &dir,
        "config.json",
        r#"{"architectures": ["XverseForCausalLM"], "model_type": "xverse",
            "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8,
            "hidden_size": 1024, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}"#,
    );
    let run = |engine: &str| {
        kv(&[
            "estimate",
            "--engine",
            engine,
            "--kv-cache-memory-bytes",
            "1073741824",
            &file,
        ])
    };
    let out = run("vllm");
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("vLLM 0.33 would not start: it no longer serves XverseForCausalLM"),
        "{said}"
    );
    // No key on the command line makes vLLM serve it, so none is suggested.
    assert!(!said.contains("--set"), "{said}");
    // SGLang: 4 layers x 8 heads x 128 x 2 (K, V) x 2 B = 16,384 B a token;
    // 1 GiB holds 65,536 tokens, K 65,536 x 8,192 B = 0.50 GiB.
    let out = run("sglang");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("#tokens: 65536, K size: 0.50 GB, V size: 0.50 GB"),
        "{text}"
    );
}

#[test]
fn a_class_that_fails_or_caches_kv_does_not_size_suggests_no_key() {
    // Flint's class asserts FlashInfer, which vLLM does not pick on Hopper;
    // Step-5's DSA kernels run 192-wide heads only. Neither is a key to give
    // on the command line, so none is suggested.
    let dir = scratch("no-key-helps");
    let flint = write(
        &dir,
        "flint.json",
        r#"{"architectures": ["FlintForCausalLM"], "num_hidden_layers": 4,
            "num_attention_heads": 8, "num_key_value_heads": 8, "hidden_size": 1024,
            "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}"#,
    );
    let step5 = write(
        &dir,
        "step5.json",
        r#"{"architectures": ["Step5ForCausalLM"], "model_type": "step5",
            "num_hidden_layers": 4, "num_attention_heads": 8, "num_attention_groups": 2,
            "hidden_size": 1024, "head_dim": 128, "max_seq_len": 8192,
            "sparse_config": {"enabled": true}, "torch_dtype": "bfloat16"}"#,
    );
    for (file, words) in [
        (
            &flint,
            "vLLM 0.33 would not start: on Hopper vLLM picks FLASH_ATTN",
        ),
        (
            &step5,
            "NotImplementedError: Step5 DSA kernels require head_size 192, got 128",
        ),
    ] {
        let out = kv(&["estimate", file]);
        let said = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{said}");
        assert!(said.contains(words), "{said}");
        assert!(!said.contains("--set"), "{said}");
    }
}
