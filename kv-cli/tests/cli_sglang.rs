//! `kv estimate --engine sglang`: SGLang 0.5.23's lines reach the output
//! (figures worked out by hand in comments), and bad usage exits 2.

use serde_json::Value;

mod support;
use support::*;

#[test]
fn sglang_prints_its_own_lines() {
    // Llama-3-8B sets no length: SGLang's context_len falls back to 2048.
    // 32 layers x 8 heads x (128 + 128) x 2 B = 131,072 B a token;
    // 42,949,672,960 // 131,072 = 327,680 tokens; K (327,681 x 65,536 B) = 20.00 GiB.
    // Requests: int(327,680 / 2,048 x 512) = 81,920, capped at 4,096.
    let out = kv(&[
        "estimate",
        "--engine",
        "sglang",
        &shipped("llama-3-8b"),
        "--kv-cache-memory-bytes",
        "40G",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(
            "  KV Cache is allocated. dtype: torch.bfloat16, #tokens: 327680, K size: 20.00 GB, V size: 20.00 GB\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("max_running_requests 4096 per worker"),
        "{stdout}"
    );
}

#[test]
fn sglang_json_names_the_engine_and_carries_the_lines() {
    // DeepSeek-V2-Lite's latent on every rank: (512 + 64) x 27 x 2 = 31,104 B;
    // 42,949,672,960 // 31,104 = 1,380,840 tokens, at TP 8 with DP attention 4 too.
    let out = kv(&[
        "estimate",
        "--engine",
        "sglang",
        &shipped("deepseek-v2-lite"),
        "--kv-cache-memory-bytes",
        "42949672960",
        "--tp",
        "8",
        "--dp",
        "4",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json[0]["engine"], "sglang 0.5.23");
    assert_eq!(json[0]["pools"]["attn_tp"], 2);
    assert_eq!(
        json[0]["lines"][0],
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1380840, KV size: 40.00 GB"
    );
}

#[test]
fn sglang_bad_usage_and_refusals() {
    let config = shipped("llama-3-8b");
    // No budget: usage, exit 2.
    let out = kv(&["estimate", "--engine", "sglang", &config]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--kv-cache-memory-bytes"));
    // A KV format SGLang's profile here does not take: usage, exit 2.
    let out = kv(&[
        "estimate",
        "--engine",
        "sglang",
        &config,
        "--kv-cache-memory-bytes",
        "8G",
        "--kv-cache-dtype",
        "q8_0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    // Pipeline stages are not in the profile: usage, exit 2.
    let out = kv(&[
        "estimate",
        "--engine",
        "sglang",
        &config,
        "--kv-cache-memory-bytes",
        "8G",
        "--pp",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(2));
    // Jamba: SGLang has no model class for it; the file's problem, exit 1.
    let out = kv(&[
        "estimate",
        "--engine",
        "sglang",
        &shipped("jamba-v0.1"),
        "--kv-cache-memory-bytes",
        "8G",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("JambaForCausalLM has no SGlang implementation"));
}

#[test]
fn a_length_above_the_models_is_refused_not_replaced_by_the_fallback() {
    // Gemma-3-27B's length is 131,072 (its loader default); 1,000,000 asked
    // is refused. SGLang's 2048 fallback is for a config with no length at
    // all, never for a length given on the command line.
    let out = kv(&[
        "estimate",
        "--engine",
        "sglang",
        &shipped("gemma-3-27b"),
        "--kv-cache-memory-bytes",
        "40g",
        "--positions",
        "1000000",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("max_model_len 1000000 is greater than the model's 131072"),
        "{stderr}"
    );
    assert!(!text(&out.stdout).contains("KV Cache is allocated"));
}

/// `kv estimate --engine sglang FILE --kv-cache-memory-bytes 1GiB EXTRA...`.
fn at_one_gib(file: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "estimate",
        "--engine",
        "sglang",
        file,
        "--kv-cache-memory-bytes",
        "1073741824",
    ];
    args.extend_from_slice(extra);
    kv(&args)
}

#[test]
fn sglang_caps_embedding_gemma_2s_context_at_8192() {
    // Two sliding and two full layers of 8 heads x (128 + 128) x 2 B: 8,192
    // B a token in each pool, 8,192 + 0.8 x 8,192 = 14,745.6 a full token;
    // 1 GiB (less SGLang's multimodal reservation) holds under 72,818. At the
    // config's 131,072: int(tokens / 131,072 x 512) is under 2,048, raised
    // to it. SGLang caps this model's context at 8,192: int(tokens / 8,192 x
    // 512) is over 4,096 (tokens over 65,536), held to it.
    let dir = scratch("embedding-gemma-2");
    let config = r#"{"architectures": ["EmbeddingGemma2Model"], "num_hidden_layers": 4,
        "num_attention_heads": 8, "num_key_value_heads": 8, "head_dim": 128,
        "hidden_size": 1024, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
        "sliding_window": 512, "layer_types": ["sliding_attention", "full_attention",
        "sliding_attention", "full_attention"]}"#;
    let file = write(&dir, "config.json", config);
    let out = at_one_gib(&file, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("max_running_requests 4096 per worker"),
        "{stdout}"
    );
    assert!(
        stdout.contains("SGLang caps this model's context_len at 8192"),
        "{stdout}"
    );
    // A length given is SGLang's --context-length: not capped.
    let stdout = text(&at_one_gib(&file, &["--positions", "131072"]).stdout);
    assert!(
        stdout.contains("max_running_requests 2048 per worker"),
        "{stdout}"
    );
    // A config whose length is the cap already is read as it is, unsaid.
    let file = write(&dir, "config.json", config.replace("131072", "8192"));
    let stdout = text(&at_one_gib(&file, &[]).stdout);
    assert!(
        stdout.contains("max_running_requests 4096 per worker"),
        "{stdout}"
    );
    assert!(!stdout.contains("SGLang caps"), "{stdout}");
}

#[test]
fn the_settings_line_says_the_page_sglang_runs() {
    // Beam runs on TRT-LLM MHA, whose page replaces the 1 asked with 64.
    let dir = scratch("beam-page");
    let config = r#"{"architectures": ["BeamForCausalLM"], "num_hidden_layers": 4,
        "num_attention_heads": 8, "num_key_value_heads": 8, "head_dim": 128,
        "hidden_size": 1024, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}"#;
    let beam = write(&dir, "config.json", config);
    let settings_line = |file: &str| {
        let out = at_one_gib(file, &[]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        stdout
            .lines()
            .find(|l| l.contains("settings:"))
            .unwrap_or_default()
            .to_owned()
    };
    let line = settings_line(&beam);
    assert!(
        line.contains("page size 64 (its attention backend's, for the 1 asked),"),
        "{line}"
    );
    let llama = write(
        &dir,
        "llama.json",
        config.replace("BeamForCausalLM", "LlamaForCausalLM"),
    );
    let line = settings_line(&llama);
    assert!(line.contains("page size 1,"), "{line}");
}

#[test]
fn whisper_pools_every_layer_sglang_counts_at_sglangs_context_length() {
    // whisper-large-v3: SGLang's pool has encoder_layers + 2 x
    // decoder_layers = 32 + 64 = 96 layers of 20 heads of 64 (f16): 96 x
    // 20 x 128 x 2 = 491,520 B a token. 7,777,777,777 B less the
    // multimodal 104,857,600 = 7,672,920,177 B: 15,610 tokens (15,610.6).
    // Its config sets none of the keys SGLang's get_context_length reads,
    // so context_len is 2,048 (vLLM's, and kv's, 448 is
    // `max_target_positions`): int(15,610 / 2,048 x 512) = 3,902 requests.
    // SGLang's own configurator (the registry run): 15,610 and 3,902.
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/configs/whisper-large-v3"
    );
    let out = kv(&[
        "estimate",
        "--engine",
        "sglang",
        config,
        "--kv-cache-memory-bytes",
        "7777777777",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("#tokens: 15610, K size: 3.57 GB"),
        "{stdout}"
    );
    assert!(
        stdout.contains("max_running_requests 3902 per worker"),
        "{stdout}"
    );
    assert!(
        stdout.contains("SGLang's get_context_length reads none of")
            && stdout.contains("where kv derives 448"),
        "{stdout}"
    );
    // A length given is SGLang's --context-length: 15,610 / 448 x 512 =
    // 17,840, held to 4,096.
    let out = kv(&[
        "estimate",
        "--engine",
        "sglang",
        config,
        "--kv-cache-memory-bytes",
        "7777777777",
        "--positions",
        "448",
    ]);
    assert!(text(&out.stdout).contains("max_running_requests 4096 per worker"));
}
