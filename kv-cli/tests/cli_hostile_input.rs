//! Issue 35, the `kv` command's side: flags an engine does not read are
//! refused by name; files that are too big, not regular, GGUF where JSON is
//! wanted, or walked in a circle are one clear line; bytes from a file are
//! escaped and cut before they reach stderr; a failed write to stdout is an
//! error; `kv merge` refuses ranks of different models.

use std::path::Path;
use std::process::{Command, Output};

mod support;
use support::*;

/// Each engine's profile, with the flags it needs to run on its file.
fn engine_args(engine: &str, config: &str, gguf: &str) -> Vec<String> {
    let mut args = vec![
        "estimate".to_owned(),
        "--engine".to_owned(),
        engine.to_owned(),
    ];
    match engine {
        "vllm" => args.extend([config.to_owned(), "--positions".into(), "8192".into()]),
        "sglang" => args.extend([
            config.to_owned(),
            "--kv-cache-memory-bytes".into(),
            "8G".into(),
        ]),
        _ => args.push(gguf.to_owned()),
    }
    args
}

/// Every flag of `kv estimate` that one engine's profile does not read, with
/// a value, and the words its refusal must hold (what to use instead).
const REFUSED: &[(&str, &[&str], &str)] = &[
    // vLLM: SGLang's and llama.cpp's own flags.
    ("vllm", &["--dp", "2"], "vLLM's data-parallel replicas"),
    (
        "vllm",
        &["--swa-full-tokens-ratio", "0.5"],
        "it is SGLang's",
    ),
    (
        "vllm",
        &["--mamba-full-memory-ratio", "0.5"],
        "it is SGLang's",
    ),
    (
        "vllm",
        &["--max-running-requests", "8"],
        "vLLM's is --max-num-seqs",
    ),
    (
        "vllm",
        &["--max-total-tokens", "8192"],
        "--kv-cache-memory-bytes",
    ),
    (
        "vllm",
        &["--ctx-size", "4096"],
        "vLLM's length is --positions",
    ),
    ("vllm", &["--parallel", "4"], "vLLM's is --max-num-seqs"),
    (
        "vllm",
        &["--ubatch-size", "512"],
        "--max-num-batched-tokens",
    ),
    (
        "vllm",
        &["--batch-size", "2048"],
        "--max-num-batched-tokens",
    ),
    ("vllm", &["--kv-unified"], "it is llama.cpp's -kvu"),
    ("vllm", &["--swa-full"], "it is llama.cpp's"),
    ("vllm", &["--flash-attn", "on"], "it is llama.cpp's -fa"),
    ("vllm", &["--cache-type-k", "q8_0"], "vLLM's is --kv-format"),
    ("vllm", &["--cache-type-v", "q8_0"], "vLLM's is --kv-format"),
    // SGLang: vLLM's and llama.cpp's.
    ("sglang", &["--max-num-seqs", "8"], "--max-running-requests"),
    (
        "sglang",
        &["--allow-long-max-model-len"],
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN",
    ),
    ("sglang", &["--speculative-tokens", "2"], "draft model"),
    ("sglang", &["--no-prefix-caching"], "--disable-radix-cache"),
    (
        "sglang",
        &["--no-async-scheduling"],
        "--disable-overlap-schedule",
    ),
    ("sglang", &["--pp", "2"], "--pp-size"),
    ("sglang", &["--pp", "1"], "--pp-size"),
    ("sglang", &["--dcp", "2"], "decode context parallelism"),
    (
        "sglang",
        &["--dcp-interleave", "2"],
        "decode context parallelism",
    ),
    ("sglang", &["--block-size", "32"], "--page-size"),
    (
        "sglang",
        &["--max-num-batched-tokens", "4096"],
        "--chunked-prefill-size",
    ),
    (
        "sglang",
        &["--format", "markdown"],
        "give --format text or json",
    ),
    (
        "sglang",
        &["--ctx-size", "4096"],
        "SGLang's length is --positions",
    ),
    ("sglang", &["--parallel", "4"], "--max-running-requests"),
    ("sglang", &["--ubatch-size", "512"], "it is llama.cpp's -ub"),
    ("sglang", &["--batch-size", "2048"], "it is llama.cpp's -b"),
    ("sglang", &["--kv-unified"], "it is llama.cpp's -kvu"),
    ("sglang", &["--swa-full"], "--swa-full-tokens-ratio"),
    ("sglang", &["--flash-attn", "off"], "it is llama.cpp's -fa"),
    (
        "sglang",
        &["--cache-type-k", "q8_0"],
        "--kv-format fp8_e4m3",
    ),
    (
        "sglang",
        &["--cache-type-v", "q8_0"],
        "--kv-format fp8_e4m3",
    ),
    // llama.cpp: vLLM's and SGLang's.
    ("llama.cpp", &["--tp", "2"], "one llama.cpp process"),
    ("llama.cpp", &["--pp", "2"], "one llama.cpp process"),
    (
        "llama.cpp",
        &["--kv-cache-memory-bytes", "8G"],
        "--ctx-size and --parallel",
    ),
    (
        "llama.cpp",
        &["--positions", "4096"],
        "llama.cpp's length is --ctx-size",
    ),
    ("llama.cpp", &["--max-num-seqs", "4"], "--parallel"),
    ("llama.cpp", &["--set", "a=1"], "--override-kv"),
    ("llama.cpp", &["--dp", "2"], "it is SGLang's --dp-size"),
    (
        "llama.cpp",
        &["--allow-long-max-model-len"],
        "give --ctx-size alone",
    ),
    ("llama.cpp", &["--speculative-tokens", "1"], "draft model"),
    ("llama.cpp", &["--no-prefix-caching"], "no such setting"),
    ("llama.cpp", &["--no-async-scheduling"], "no such setting"),
    ("llama.cpp", &["--dcp", "2"], "decode context parallelism"),
    (
        "llama.cpp",
        &["--dcp-interleave", "2"],
        "decode context parallelism",
    ),
    ("llama.cpp", &["--block-size", "32"], "--ctx-size"),
    (
        "llama.cpp",
        &["--max-num-batched-tokens", "512"],
        "--batch-size and --ubatch-size",
    ),
    (
        "llama.cpp",
        &["--swa-full-tokens-ratio", "0.5"],
        "llama.cpp's is --swa-full",
    ),
    (
        "llama.cpp",
        &["--mamba-full-memory-ratio", "0.5"],
        "it is SGLang's",
    ),
    (
        "llama.cpp",
        &["--max-running-requests", "4"],
        "llama.cpp's is --parallel",
    ),
    ("llama.cpp", &["--max-total-tokens", "4096"], "--ctx-size"),
];

#[test]
fn a_flag_the_engine_does_not_read_is_refused_by_name() {
    let dir = scratch("flags");
    let gguf = write(&dir, "llama.gguf", llama_gguf(&[], &[]));
    let config = shipped("llama-3-8b");
    // Each profile runs as given, so a refusal is the flag's alone.
    for engine in ["vllm", "sglang", "llama.cpp"] {
        let args = engine_args(engine, &config, &gguf);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = kv(&args);
        assert!(out.status.success(), "{engine}: {}", stderr(&out));
    }
    for (engine, flag, instead) in REFUSED {
        let mut args = engine_args(engine, &config, &gguf);
        args.extend(flag.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = kv(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(stdout(&out).is_empty(), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        // How the refusal names the flag.
        let name = match flag[0] {
            "--format" => "--format markdown",
            other => other,
        };
        assert!(
            err.starts_with(&format!(
                "error: {name} does not apply to --engine {engine}: "
            )),
            "{args:?}: {err}"
        );
        assert!(err.contains(instead), "{args:?}: {err}");
    }
}

#[test]
fn a_flag_the_engine_reads_still_applies() {
    let dir = scratch("flags_applied");
    let gguf = write(&dir, "llama.gguf", llama_gguf(&[], &[]));
    let config = shipped("llama-3-8b");
    // SGLang reads --positions, --tp, --set and --kv-format fp8_e4m3.
    let mut args = engine_args("sglang", &config, &gguf);
    args.extend(
        [
            "--positions",
            "4096",
            "--tp",
            "2",
            "--kv-format",
            "fp8_e4m3",
            "--set",
            "torch_dtype=bfloat16",
        ]
        .map(String::from),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = kv(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("tp 2"), "{}", stdout(&out));
    // The Debug form of a storage format is gone from SGLang's refusal.
    let mut args = engine_args("sglang", &config, &gguf);
    args.extend(["--kv-format", "q4_0"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = kv(&args);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: invalid value for '--kv-cache-dtype': q4_0: kv's SGLang profile takes \
         fp8_e4m3 or fp8_e5m2 (omit the flag for auto, the model dtype)\n"
    );
    // llama.cpp reads --kv-format as -ctk T -ctv T (vLLM's --kv-cache-dtype
    // types K and V alike): the same lines.
    let lines = |args: &[&str]| {
        let mut all = vec![
            "estimate",
            "--engine",
            "llama.cpp",
            &gguf,
            "--flash-attn",
            "on",
        ];
        all.extend(args);
        let out = kv(&all);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stdout(&out)
    };
    let typed = lines(&["--kv-format", "q8_0"]);
    assert!(
        typed.contains("K (q8_0):  272.00 MiB, V (q8_0):  272.00 MiB"),
        "{typed}"
    );
    assert_eq!(
        typed,
        lines(&["--cache-type-k", "q8_0", "--cache-type-v", "q8_0"])
    );
    assert_eq!(
        lines(&["--kv-cache-dtype", "bf16"]),
        lines(&["--cache-type-k", "bf16", "--cache-type-v", "bf16"])
    );
    // A format llama.cpp's cache does not take, or beside -ctk/-ctv: exit 2.
    for (args, says) in [
        (
            &["--kv-format", "fp8"][..],
            "error: invalid value for '--kv-format': f8e4m3 is not a cache type llama.cpp takes; \
             one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl\n",
        ),
        (
            &["--kv-format", "q8_0", "--cache-type-k", "f16"][..],
            "error: --kv-format q8_0 types K and V alike (llama.cpp's -ctk and -ctv); give it or \
             --cache-type-k, not both\n",
        ),
    ] {
        let mut all = vec!["estimate", "--engine", "llama.cpp", &gguf];
        all.extend(args);
        let out = kv(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(stderr(&out), says, "{args:?}");
    }
    // A default is not a flag given: vLLM runs with SGLang's defaults unset.
    let out = kv(&["estimate", &config, "--positions", "4096", "--tp", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Each rank's report from `kv estimate --format json`, written as
/// `{prefix}{tp}_{pp}.json`; the paths in rank order.
fn rank_reports(dir: &Path, prefix: &str, args: &[&str]) -> Vec<String> {
    let mut all = vec!["estimate", "--format", "json"];
    all.extend(args);
    let out = kv(&all);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let estimate: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    estimate[0]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rank| {
            let p = &rank["report"]["parallel"];
            let name = format!("{prefix}{}_{}.json", p["tp_rank"], p["pp_rank"]);
            write(dir, &name, rank["report"].to_string())
        })
        .collect()
}

#[test]
fn merge_refuses_ranks_of_different_models() {
    let dir = scratch("merge_models");
    let llama = shipped("llama-3-8b");
    let mistral = shipped("mistral-7b-v0.1");
    let layout = ["--positions", "4096", "--tp", "2"];
    let a = rank_reports(&dir, "llama", &[&[llama.as_str()][..], &layout].concat());
    let b = rank_reports(
        &dir,
        "mistral",
        &[&[mistral.as_str()][..], &layout].concat(),
    );
    // Llama's rank 0 with Mistral's rank 1: one layout, two models.
    let out = kv(&["merge", &a[0], &b[1]]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).is_empty());
    assert_eq!(
        stderr(&out),
        format!(
            "kv: {}: cannot merge: not a rank of the same model as {} (rank tp=0 pp=0): \
             pipeline stage 0 holds declarations sliding_attention here, full_attention there\n",
            b[1], a[0]
        )
    );
    // Llama with 28 layers: same declaration, another layer count in one stage.
    let c = rank_reports(
        &dir,
        "short",
        &[
            &[llama.as_str(), "--set", "num_hidden_layers=28"][..],
            &layout,
        ]
        .concat(),
    );
    let out = kv(&["merge", &a[0], &c[1]]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!(
            "kv: {}: cannot merge: not a rank of the same model as {} (rank tp=0 pp=0): \
             declaration `full_attention` has layers 28 here, 32 there \
             (ranks of one pipeline stage hold the same)\n",
            c[1], a[0]
        )
    );
    // Across pipeline stages: 4 KV heads in one stage, 8 in the other.
    let stages = ["--positions", "4096", "--pp", "2"];
    let d = rank_reports(&dir, "stages", &[&[llama.as_str()][..], &stages].concat());
    let e = rank_reports(
        &dir,
        "fewer_heads",
        &[
            &[llama.as_str(), "--set", "num_key_value_heads=4"][..],
            &stages,
        ]
        .concat(),
    );
    let out = kv(&["merge", &d[0], &e[1]]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!(
            "kv: {}: cannot merge: not a rank of the same model as {} (rank tp=0 pp=0): \
             declaration `full_attention` has kv_heads 4 here, 8 there\n",
            e[1], d[0]
        )
    );
    // The ranks of one model still merge, hybrids' uneven stages included.
    for (prefix, args) in [
        (
            "gemma",
            vec![
                shipped("gemma-3-27b"),
                "--set".into(),
                "sliding_window_pattern=6".into(),
            ],
        ),
        ("jamba", vec![shipped("jamba-v0.1")]),
        ("lite", vec![shipped("deepseek-v2-lite")]),
    ] {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend(["--positions", "4096", "--tp", "2", "--pp", "4"]);
        let files = rank_reports(&dir, prefix, &all);
        let mut merge = vec!["merge"];
        merge.extend(files.iter().map(String::as_str));
        let out = kv(&merge);
        assert!(out.status.success(), "{prefix}: {}", stderr(&out));
    }
}

/// `kv` with stdout sent to `stdout`.
fn kv_to(args: &[&str], stdout: std::process::Stdio) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kv"))
        .args(args)
        .stdout(stdout)
        .output()
        .expect("the kv binary runs")
}

/// A rank report (tp=1) of Llama-3-8B, from `kv estimate --format json`.
fn one_report(dir: &Path) -> String {
    let llama = shipped("llama-3-8b");
    rank_reports(dir, "report", &[llama.as_str(), "--positions", "4096"]).remove(0)
}

#[cfg(unix)]
#[test]
fn a_file_that_is_not_regular_is_refused_by_name() {
    let dir = scratch("not_regular");
    let fifo = dir.join("config.json");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let fifo = fifo.display().to_string();
    for (args, file, kind) in [
        (
            vec!["estimate", "/dev/zero"],
            "/dev/zero",
            "a character device",
        ),
        (
            vec!["table", "/dev/zero"],
            "/dev/zero",
            "a character device",
        ),
        (
            vec!["merge", "/dev/zero"],
            "/dev/zero",
            "a character device",
        ),
        (
            vec!["estimate", "--engine", "llama.cpp", "/dev/zero"],
            "/dev/zero",
            "a character device",
        ),
        (
            vec![
                "estimate",
                "--engine",
                "sglang",
                "/dev/zero",
                "--kv-cache-memory-bytes",
                "8G",
            ],
            "/dev/zero",
            "a character device",
        ),
        // No writer: opening it would block for ever.
        (
            vec!["estimate", fifo.as_str()],
            fifo.as_str(),
            "a FIFO (named pipe)",
        ),
        (
            vec!["table", fifo.as_str()],
            fifo.as_str(),
            "a FIFO (named pipe)",
        ),
    ] {
        let out = kv(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            stderr(&out),
            format!("kv: {file}: {kind}, not a regular file; give a file kv can read to its end\n"),
            "{args:?}"
        );
    }
}

#[test]
fn a_file_above_the_limit_is_refused_and_the_flag_raises_it() {
    let dir = scratch("limit");
    // Llama-3-8B's config, padded to 2,000 bytes exactly.
    let mut text = std::fs::read_to_string(shipped("llama-3-8b")).unwrap();
    text.push_str(&" ".repeat(2000 - text.len()));
    let config = write(&dir, "config.json", &text);
    let out = kv(&[
        "estimate",
        &config,
        "--positions",
        "4096",
        "--max-file-bytes",
        "1999",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!(
            "kv: {config}: the file is larger than 1,999 bytes, the most kv reads of a \
             config.json; raise the limit with --max-file-bytes BYTES\n"
        )
    );
    // At the limit: read.
    let out = kv(&[
        "estimate",
        &config,
        "--positions",
        "4096",
        "--max-file-bytes",
        "2000",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The default, 16 MiB: a file one byte above it is refused, whatever it holds.
    let big = write(&dir, "big.json", vec![b' '; (16 << 20) + 1]);
    for command in ["estimate", "table", "merge"] {
        let out = kv(&[command, &big]);
        assert_eq!(out.status.code(), Some(1), "{command}");
        assert!(
            stderr(&out).starts_with(&format!(
                "kv: {big}: the file is larger than 16,777,216 bytes, the most kv reads of a"
            )),
            "{command}: {}",
            stderr(&out)
        );
    }
    // Reports are bounded too, and the flag raises it for them.
    let report = one_report(&dir);
    let out = kv(&["table", &report, "--max-file-bytes", "10"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("the most kv reads of a kv report; raise the limit"));
    let out = kv(&["merge", &report, "--max-file-bytes", "10"]);
    assert_eq!(out.status.code(), Some(1));
    let out = kv(&["merge", &report, "--max-file-bytes", "1000000"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = kv(&["estimate", &config, "--max-file-bytes", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

#[cfg(unix)]
#[test]
fn a_directory_walk_stops_at_a_link_cycle_and_reads_each_file_once() {
    let dir = scratch("cycle");
    std::fs::copy(shipped("llama-3-8b"), dir.join("config.json")).unwrap();
    // A link back up, a link to the same file, and a link to a link.
    std::os::unix::fs::symlink(".", dir.join("a")).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::os::unix::fs::symlink("../config.json", dir.join("sub/config.json")).unwrap();
    std::os::unix::fs::symlink("../a", dir.join("sub/up")).unwrap();
    let out = kv(&["estimate", dir.to_str().unwrap(), "--positions", "4096"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let sources: Vec<&str> = text.lines().filter(|l| !l.starts_with(' ')).collect();
    assert_eq!(
        sources,
        [dir.join("config.json").display().to_string()],
        "{text}"
    );
    // kv merge walks the same way: the report once, not once per path.
    let reports = scratch("cycle_reports");
    one_report(&reports);
    std::os::unix::fs::symlink(".", reports.join("loop")).unwrap();
    let out = kv(&["merge", reports.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_gguf_file_given_where_json_is_read_is_named() {
    let dir = scratch("gguf");
    let gguf = write(&dir, "llama.gguf", llama_gguf(&[], &[]));
    for (args, says) in [
        (
            vec!["estimate", gguf.as_str()],
            "not a config.json; use --engine llama.cpp for GGUF files",
        ),
        (
            vec![
                "estimate",
                "--engine",
                "sglang",
                gguf.as_str(),
                "--kv-cache-memory-bytes",
                "8G",
            ],
            "not a config.json; use --engine llama.cpp for GGUF files",
        ),
        (
            vec!["table", gguf.as_str()],
            "not a kv report; kv merge and kv table read reports (Collection::export JSON)",
        ),
        (
            vec!["merge", gguf.as_str()],
            "not a kv report; kv merge and kv table read reports (Collection::export JSON)",
        ),
    ] {
        let out = kv(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            stderr(&out),
            format!("kv: {gguf}: this is a GGUF file, {says}\n"),
            "{args:?}"
        );
    }
    // Other bytes that are not UTF-8: where, not "stream did not contain".
    let latin1 = write(&dir, "config.json", b"{\"model_type\": \"caf\xe9\"}");
    let out = kv(&["estimate", &latin1]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!("kv: {latin1}: not UTF-8 text (an invalid byte at offset 19); expected JSON\n")
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_failed_write_to_stdout_is_an_error() {
    let dir = scratch("full");
    let gguf = write(&dir, "llama.gguf", llama_gguf(&[], &[]));
    let report = one_report(&dir);
    let llama = shipped("llama-3-8b");
    let commands: Vec<Vec<&str>> = vec![
        vec!["estimate", &llama, "--positions", "4096"],
        vec![
            "estimate",
            &llama,
            "--positions",
            "4096",
            "--format",
            "json",
        ],
        vec![
            "estimate",
            "--engine",
            "sglang",
            &llama,
            "--kv-cache-memory-bytes",
            "8G",
        ],
        vec!["estimate", "--engine", "llama.cpp", &gguf],
        vec!["table", &report],
        vec!["merge", &report],
    ];
    for args in &commands {
        // A full disk: one line, exit 1.
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = kv_to(args, full.into());
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            stderr(&out),
            "kv: cannot write to stdout: No space left on device (os error 28)\n",
            "{args:?}"
        );
        // A closed pipe (`| head` done reading): exit 1, quietly, no panic.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = kv_to(args, writer.into());
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(stderr(&out), "", "{args:?}");
    }
}

/// A GGUF v3 header of one key: `general.architecture` = `architecture`.
fn gguf_of_architecture(architecture: &[u8]) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend(0u64.to_le_bytes());
    out.extend(1u64.to_le_bytes());
    let key = b"general.architecture";
    out.extend((key.len() as u64).to_le_bytes());
    out.extend(key);
    out.extend(8u32.to_le_bytes());
    out.extend((architecture.len() as u64).to_le_bytes());
    out.extend(architecture);
    out
}

#[test]
fn bytes_from_a_file_reach_stderr_escaped_and_cut() {
    let dir = scratch("escaped");
    let mut architecture = b"\x1b[2J\x1b]0;owned\x07".to_vec();
    architecture.extend([b'A'; 20_000]);
    let gguf = write(&dir, "evil.gguf", gguf_of_architecture(&architecture));
    let out = kv(&["estimate", "--engine", "llama.cpp", &gguf]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(!err.bytes().any(|b| b < 0x20 && b != b'\n'), "{err:?}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.chars().count() < 1000,
        "{} characters",
        err.chars().count()
    );
    assert!(
        err.contains("architecture `\\u{1b}[2J\\u{1b}]0;owned\\u{7}AAAA"),
        "{err}"
    );
    assert!(err.contains(" characters cut]...AAAA"), "{err}");
    // A file's name is escaped too (never cut: it is the user's path).
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt as _;
        let reports = scratch("escaped_name");
        let name = std::ffi::OsStr::from_bytes(b"\x1b[2Jrank\xe2\x80\xae.json");
        std::fs::write(reports.join(name), "{}").unwrap();
        let out = kv(&["merge", reports.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1));
        let err = stderr(&out);
        assert!(!err.bytes().any(|b| b < 0x20 && b != b'\n'), "{err:?}");
        assert!(
            err.starts_with(&format!(
                "kv: {}/\\u{{1b}}[2Jrank\\u{{202e}}.json: not a kv report",
                reports.display()
            )),
            "{err}"
        );
    }
}

#[test]
fn merge_and_table_refuse_a_format_they_would_not_print() {
    let dir = scratch("merge_markdown");
    let report = one_report(&dir);
    let out = kv(&["merge", &report, "--format", "markdown"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: --format markdown does not apply to kv merge: its cluster view is text; give \
         --format text or json\n"
    );
    assert!(stdout(&out).is_empty());
    // kv table's --markdown beside --format would override it: refused.
    let out = kv(&["table", &report, "--markdown", "--format", "json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("error: the argument '--markdown' cannot be used with '--format"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bytes_from_a_file_reach_stdout_escaped() {
    let dir = scratch("stdout_escaped");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shipped("llama-3-8b")).unwrap()).unwrap();
    config["model_type"] = serde_json::Value::from("llama\u{1b}[2J\u{202e}\u{7f}");
    let file = write(&dir, "config.json", config.to_string());
    let text = kv(&["estimate", &file, "--positions", "8192"]);
    assert_eq!(text.status.code(), Some(0), "{}", stderr(&text));
    let shown = stdout(&text);
    assert!(
        !shown
            .chars()
            .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
        "{shown}"
    );
    assert!(shown.contains(r"llama\u{1b}[2J\u{202e}\u{7f}"), "{shown}");
    // JSON keeps the value, escaped the JSON way.
    let json = kv(&["estimate", &file, "--positions", "8192", "--format", "json"]);
    let shown = stdout(&json);
    assert!(
        !shown
            .chars()
            .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
        "{shown}"
    );
    let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert!(
        back.to_string().contains("llama\\u001b[2J\u{202e}\u{7f}"),
        "{back}"
    );
}

#[test]
fn merge_and_table_escape_their_output_as_their_format_reads() {
    let dir = scratch("merge_table_escaped");
    let files = rank_reports(
        &dir,
        "ranks",
        &[&shipped("llama-3-8b"), "--positions", "4096", "--tp", "2"],
    );
    // The declaration renamed with DEL and a bidi mark, in both ranks.
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(text.contains("\"full_attention\""), "{text}");
        let renamed = text.replace("\"full_attention\"", "\"full\\u007f\\u202eattention\"");
        std::fs::write(file, renamed).unwrap();
    }
    let raw = |text: &str| text.chars().any(|c| c == '\u{7f}' || c == '\u{202e}');
    for args in [
        vec!["merge", &files[0], &files[1]],
        vec!["table", &files[0]],
    ] {
        let text = kv(&args);
        assert_eq!(text.status.code(), Some(0), "{args:?}: {}", stderr(&text));
        let shown = stdout(&text);
        assert!(!raw(&shown), "{shown}");
        // The table names declarations (the cluster view counts them).
        if args[0] == "table" {
            assert!(shown.contains(r"full\u{7f}\u{202e}attention"), "{shown}");
        }
        let mut json_args = args.clone();
        json_args.extend(["--format", "json"]);
        let json = kv(&json_args);
        assert_eq!(json.status.code(), Some(0), "{args:?}: {}", stderr(&json));
        let shown = stdout(&json);
        assert!(
            !raw(&shown) && shown.contains(r"full\u007f\u202eattention"),
            "{shown}"
        );
        // The same value reads back.
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert!(back.to_string().contains("full\u{7f}\u{202e}attention"));
    }
}

#[test]
fn strict_refuses_a_family_kv_has_not_been_checked_on() {
    let dir = scratch("strict");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shipped("llama-3-8b")).unwrap()).unwrap();
    config["model_type"] = serde_json::Value::from("brand_new");
    let file = write(&dir, "config.json", config.to_string());
    // Without --strict: sized by the generic rules, and said.
    let out = kv(&["estimate", &file, "--positions", "8192"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("the family is unverified (--strict refuses it)"),
        "{}",
        stdout(&out)
    );
    let refusal = format!(
        "kv: {file}: `model_type` brand_new is not in kv's table of model families, so kv \
         would size it by its generic rules, unverified for this family; --strict refuses it \
         (without --strict the estimate is printed and says so)\n"
    );
    for engine in [
        &["--engine", "vllm"][..],
        &[
            "--engine",
            "sglang",
            "--kv-cache-memory-bytes",
            "40000000000",
        ],
    ] {
        let mut args = vec!["estimate", &file, "--positions", "8192", "--strict"];
        args.extend(engine);
        let out = kv(&args);
        assert_eq!(out.status.code(), Some(1), "{engine:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{}", stdout(&out));
        assert_eq!(stderr(&out), refusal, "{engine:?}");
    }
    // A family kv knows passes --strict.
    let out = kv(&[
        "estimate",
        &shipped("llama-3-8b"),
        "--positions",
        "8192",
        "--strict",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}
