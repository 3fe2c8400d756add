//! `kv estimate --engine sglang`: SGLang 0.5.23's pools and start-up lines
//! for each config (`kv_engines::estimate::sglang::sglang_pools`), from
//! `--kv-cache-memory-bytes`.

use std::fmt::Write as _;
use std::path::Path;

use kv_core::{DType, KvError, Storage};
use kv_engines::estimate::sglang::{sglang_pools, SglangKvDtype, SglangPools, SglangSettings};
use kv_engines::estimate::EstimateSettings;
use serde_json::{json, Value};

use crate::estimate_args::Args;
use crate::input::{expand, read_config, Problem};
use crate::message::usage_error;
use crate::output::{emit, emit_json_array, StdoutFailed};
use crate::Format;

/// One config's pools and what was detected.
pub(crate) struct Sized {
    source: String,
    detected: String,
    pub(crate) pools: SglangPools,
    /// SGLang's context_len: the model's length, or `--positions`.
    pub(crate) max_model_len: u64,
}

/// Sizes every config's pools; `Ok(false)` when any could not be.
pub fn run(args: &Args) -> Result<bool, StdoutFailed> {
    let (files, mut problems) = expand(&args.configs, Some("config.json"));
    for problem in &problems {
        problem.report();
    }
    let Some(bytes) = args.kv_cache_memory_bytes else {
        usage_error(
            clap::error::ErrorKind::MissingRequiredArgument,
            "--engine sglang needs --kv-cache-memory-bytes B (the memory SGLang has left for \
             its KV pools after the weights, per GPU)",
        )
    };
    let settings = settings(args);
    let mut done = Vec::new();
    for file in &files {
        match size_file(file, &settings, bytes, args) {
            Ok(sized) => {
                if args.format != Format::Json {
                    emit(&render(&sized, &settings, "--kv-cache-memory-bytes"))?;
                }
                done.push(sized);
            }
            Err(problem) => {
                problem.report();
                problems.push(problem);
            }
        }
    }
    if args.format == Format::Json {
        emit_json_array(done.iter().map(to_json).collect())?;
    }
    Ok(problems.is_empty())
}

/// SGLang's settings from `kv estimate`'s flags.
pub(crate) fn settings(args: &Args) -> SglangSettings {
    let kv_cache_dtype = match args.kv_format {
        None => SglangKvDtype::Auto,
        Some(Storage::Dense(DType::F8E4M3)) => SglangKvDtype::Fp8E4m3,
        Some(Storage::Dense(DType::F8E5M2)) => SglangKvDtype::Fp8E5m2,
        Some(other) => usage_error(
            clap::error::ErrorKind::ValueValidation,
            &format!(
                "invalid value for '--kv-cache-dtype': {other}: kv's SGLang profile takes \
                 fp8_e4m3 or fp8_e5m2 (omit the flag for auto, the model dtype)"
            ),
        ),
    };
    let mut settings = SglangSettings::default();
    settings.tp = args.tp;
    settings.dp = args.sglang.dp;
    settings.kv_cache_dtype = kv_cache_dtype;
    settings.swa_full_tokens_ratio = args.sglang.swa_full_tokens_ratio;
    settings.mamba_full_memory_ratio = args.sglang.mamba_full_memory_ratio;
    settings.max_running_requests = args.sglang.max_running_requests;
    settings.max_total_tokens = args.sglang.max_total_tokens;
    settings
}

pub(crate) fn size_file(
    file: &Path,
    settings: &SglangSettings,
    bytes: u64,
    args: &Args,
) -> Result<Sized, Problem> {
    let config = read_config(file, args.read.max_file_bytes)?;
    let attn_tp = settings.attn_tp().map_err(|e| Problem::new(file, e))?;
    // kv's detection gives the geometry; SGLang's own rules size it. The
    // length is the model's own, SGLang's context_len.
    let mut estimate_settings = EstimateSettings::new()
        .tensor_parallel(attn_tp)
        .for_another_engine();
    if let Some(positions) = args.positions {
        estimate_settings = estimate_settings.positions(positions);
    }
    for (key, value) in &args.values {
        estimate_settings = estimate_settings.set(key, value.clone());
    }
    let estimate = match kv_engines::estimate::estimate(&config, &estimate_settings) {
        // A config with no length: SGLang's get_context_length falls back to 2048.
        Err(KvError::Config {
            what: "max_model_len",
            ..
        }) if args.positions.is_none() => {
            kv_engines::estimate::estimate(&config, &estimate_settings.clone().positions(2048))
        }
        other => other,
    }
    .map_err(|e| match e {
        // Only TP reaches kv's layout checks here; SGLang's attention layers
        // assert the same division when the model is built.
        KvError::Parallel { problem, .. } => Problem::new(
            file,
            format!(
                "SGLang would not start either: its attention layers assert that TP divides \
                 the query heads (attention tp {attn_tp}); kv's check: {problem}"
            ),
        ),
        other => Problem::new(file, other),
    })?;
    let mut estimate = estimate;
    let sglang_length = kv_engines::estimate::sglang::context_len(&config, estimate.max_model_len)
        .filter(|_| args.positions.is_none());
    if let Some((length, why)) = sglang_length {
        let derived = estimate.max_model_len;
        // SGLang's own length, above vLLM's where SGLang reads fewer keys.
        let sglang_settings = estimate_settings
            .positions(length)
            .allow_long_max_model_len(true);
        estimate = kv_engines::estimate::estimate(&config, &sglang_settings)
            .map_err(|e| Problem::new(file, e))?;
        estimate.detected = format!("{}; {why}, where kv derives {derived}", estimate.detected);
    }
    if args.strict {
        crate::strict::refuse_unverified(file, &estimate)?;
    }
    let pools =
        sglang_pools(&config, &estimate, settings, bytes).map_err(|e| Problem::new(file, e))?;
    Ok(Sized {
        source: file.display().to_string(),
        detected: estimate.detected,
        pools,
        max_model_len: estimate.max_model_len,
    })
}

/// The page as SGLang runs it, and the one asked where its backend set
/// another.
fn page_size(asked: u64, run: u64) -> String {
    if asked == run {
        run.to_string()
    } else {
        format!("{run} (its attention backend's, for the {asked} asked)")
    }
}

/// The pools as text; `budget` names where the budget came from.
pub(crate) fn render(sized: &Sized, settings: &SglangSettings, budget: &str) -> String {
    let pools = &sized.pools;
    let mut out = String::new();
    let _ = writeln!(out, "{}", sized.source);
    let _ = writeln!(out, "  detected: {}", sized.detected);
    let _ = writeln!(
        out,
        "  settings: {}: tp {}, dp {} (attention tp {} per worker, each with its own pools), \
         page size {}, kv dtype {}; {budget} {} per GPU",
        pools.engine,
        settings.tp,
        settings.dp,
        pools.attn_tp,
        page_size(settings.page_size, pools.page_size),
        pools.dtype,
        pools.kv_cache_memory_bytes
    );
    for line in pools.lines() {
        let _ = writeln!(out, "  {line}");
    }
    let _ = writeln!(
        out,
        "  max_running_requests {} per worker",
        pools.max_running_requests
    );
    out
}

pub(crate) fn to_json(sized: &Sized) -> Value {
    json!({
        "source": sized.source,
        "detected": sized.detected,
        "engine": sized.pools.engine,
        "pools": sized.pools,
        "lines": sized.pools.lines(),
    })
}
