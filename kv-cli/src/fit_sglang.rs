//! `kv fit --engine sglang`: SGLang's KV pool for a checkpoint on a GPU,
//! from the weights as SGLang holds them once loaded, its default
//! `mem_fraction_static` for the GPU and the free memory it starts from;
//! then the pools and lines `kv estimate --engine sglang` prints.

use std::fmt::Write as _;
use std::path::Path;

use kv_engines::fit::sglang::{
    default_mem_fraction_static, kv_pool_budget, loaded_weights_with_dp_attention,
    unsupported_for_default, uses_mla_backend, LoadedWeights, SglangMemoryDefaults,
    SglangMemoryInputs,
};
use kv_engines::weights::FileData;
use serde_json::{json, Value};

use crate::estimate_args::Args;
use crate::fit_shared::TP_SIZES;
use crate::input::{expand, read_config, Problem};
use crate::message::usage_error;
use crate::output::{emit, emit_json_array, StdoutFailed};
use crate::sglang::{render, settings, size_file, to_json};
use crate::Format;

const GIB: f64 = (1u64 << 30) as f64;

/// The flags of `kv fit` that SGLang's budget reads (`crate::fit::FitArgs`).
pub(crate) struct SglangFitFlags {
    pub avail_mem_gb: Option<f64>,
    pub mem_fraction_static: Option<f64>,
    pub chunked_prefill_size: Option<u64>,
    pub weights_from_config: bool,
    /// What the weight files must hold past their headers.
    pub data: FileData,
}

/// What `kv fit` adds above the pools: the GPU, the weights, the budget.
struct Budget {
    gpu: String,
    stored_bytes: u64,
    files: usize,
    weights_source: String,
    by_dtype: Vec<(String, u64)>,
    loaded: LoadedWeights,
    defaults: Option<SglangMemoryDefaults>,
    mem_fraction_static: f64,
    avail_before_gib: f64,
    avail_after_gib: f64,
    budget_bytes: u64,
}

/// Sizes each checkpoint; `Ok(false)` when any could not be.
pub fn run(
    args: &Args,
    fit: &SglangFitFlags,
    gpu_label: &str,
    gpu_mib: u64,
) -> Result<bool, StdoutFailed> {
    let Some(avail_mem_gb) = fit.avail_mem_gb else {
        usage_error(
            clap::error::ErrorKind::MissingRequiredArgument,
            "kv fit --engine sglang needs --avail-mem-gb: the free memory SGLang logs as \
             `Load weight begin. avail mem=X GB`",
        )
    };
    if avail_mem_gb * 1024.0 > gpu_mib as f64 {
        usage_error(
            clap::error::ErrorKind::InvalidValue,
            &format!("--avail-mem-gb {avail_mem_gb} is more than the GPU's {gpu_mib} MiB"),
        )
    }
    let (files, mut problems) = expand(&args.configs, Some("config.json"));
    for problem in &problems {
        problem.report();
    }
    let settings = settings(args);
    let mut done = Vec::new();
    for file in &files {
        let by_tp = by_tp(file, args, fit, avail_mem_gb, gpu_label, gpu_mib);
        let sized = budget(file, args, fit, avail_mem_gb, gpu_label, gpu_mib)
            .and_then(|budget| {
                let sized = size_file(file, &settings, budget.budget_bytes, args)?;
                Ok((budget, sized))
            })
            .map_err(|mut problem| {
                problem.message = format!("{} ({})", problem.message, smallest(&by_tp));
                problem
            });
        match sized {
            Ok((budget, sized)) => {
                if args.format != Format::Json {
                    // The source line first, then the budget, then the pools.
                    let pools = render(&sized, &settings, "pool budget");
                    let (source, rest) = pools.split_once('\n').unwrap_or((&pools, ""));
                    let mut head = render_budget(&budget);
                    let _ = writeln!(head, "  {}", smallest(&by_tp));
                    for (tp, _, said) in &by_tp {
                        let _ = writeln!(head, "    tp {tp}: {said}");
                    }
                    emit(&format!("{source}\n{head}{rest}"))?;
                }
                done.push((budget, sized, by_tp));
            }
            Err(problem) => {
                problem.report();
                problems.push(problem);
            }
        }
    }
    if args.format == Format::Json {
        emit_json_array(
            done.iter()
                .map(|(budget, sized, by_tp)| {
                    let mut value = to_json(sized);
                    value["fit"] = budget_json(budget);
                    value["fit"]["by_tp"] = by_tp
                        .iter()
                        .map(|(tp, holds, said)| json!({"tp": tp, "holds_one_request": holds, "said": said}))
                        .collect();
                    value["fit"]["smallest_tp"] = json!(by_tp.iter().find(|a| a.1).map(|a| a.0));
                    value
                })
                .collect(),
        )?;
    }
    Ok(problems.is_empty())
}

/// SGLang at each of [`TP_SIZES`] on this GPU: whether a worker's pool
/// holds one request of max_model_len (SGLang starts with less, warning,
/// and refuses longer requests), and its pool line or refusal.
fn by_tp(
    file: &Path,
    args: &Args,
    fit: &SglangFitFlags,
    avail_mem_gb: f64,
    gpu_label: &str,
    gpu_mib: u64,
) -> Vec<(u64, bool, String)> {
    TP_SIZES
        .iter()
        .map(|&tp| {
            let mut at = args.clone();
            at.tp = tp;
            let sized = budget(file, &at, fit, avail_mem_gb, gpu_label, gpu_mib)
                .and_then(|b| size_file(file, &settings(&at), b.budget_bytes, &at));
            match sized {
                Ok(sized) => {
                    let tokens = sized.pools.full.tokens;
                    let length = sized.max_model_len;
                    (
                        tp,
                        tokens >= length,
                        format!(
                            "#tokens: {tokens} a worker, {} request(s) of {length} tokens, \
                             max_running_requests {}",
                            tokens / length.max(1),
                            sized.pools.max_running_requests
                        ),
                    )
                }
                Err(problem) => (tp, false, problem.message),
            }
        })
        .collect()
}

/// The line that names the smallest TP size whose pool holds a request.
fn smallest(by_tp: &[(u64, bool, String)]) -> String {
    match by_tp.iter().find(|a| a.1) {
        Some((tp, _, said)) => format!("smallest --tp whose pool holds one request: {tp} ({said})"),
        None => format!("none of --tp {TP_SIZES:?} holds one request"),
    }
}

fn budget(
    file: &Path,
    args: &Args,
    fit: &SglangFitFlags,
    avail_mem_gb: f64,
    gpu_label: &str,
    gpu_mib: u64,
) -> Result<Budget, Problem> {
    let config = read_config(file, args.read.max_file_bytes)?;
    let folder = crate::fit_shared::folder_of(file);
    let weights = crate::fit_shared::weights(file, &config, fit.weights_from_config, fit.data)?;
    let stored_bytes = weights.total_bytes().map_err(|e| Problem::new(folder, e))?;
    let by_dtype = weights
        .bytes_by_dtype()
        .map_err(|e| Problem::new(folder, e))?
        .into_iter()
        .map(|(dtype, bytes)| (dtype.to_owned(), bytes))
        .collect();
    let loaded =
        loaded_weights_with_dp_attention(&config, weights.tensors(), args.tp, args.sglang.dp)
            .map_err(|e| Problem::new(file, e))?;
    let loaded_bytes = loaded
        .total()
        .ok_or_else(|| Problem::new(folder, "the weights' bytes overflow u64"))?;
    let (defaults, mem_fraction_static) = match fit.mem_fraction_static {
        Some(given) => (None, given),
        None => {
            if let Some(why) = unsupported_for_default(&config, args.pp) {
                return Err(Problem::new(
                    file,
                    format!(
                        "kv does not compute SGLang's default --mem-fraction-static for {why}; \
                         give --mem-fraction-static (SGLang logs the one it chose in its \
                         server_args line)"
                    ),
                ));
            }
            let mut inputs = SglangMemoryInputs::new(gpu_mib);
            inputs.tp = args.tp;
            inputs.dp = args.sglang.dp;
            inputs.chunked_prefill_size = fit.chunked_prefill_size;
            inputs.max_running_requests = args.sglang.max_running_requests;
            inputs.max_total_tokens = args.sglang.max_total_tokens;
            inputs.model_path = folder.display().to_string();
            inputs.mla = uses_mla_backend(&config);
            let defaults =
                default_mem_fraction_static(&inputs).map_err(|e| Problem::new(file, e))?;
            let fraction = defaults.mem_fraction_static;
            (Some(defaults), fraction)
        }
    };
    let avail_after_gib = avail_mem_gb - loaded_bytes as f64 / GIB;
    if avail_after_gib <= 0.0 {
        return Err(Problem::new(
            file,
            format!(
                "the weights do not fit: they take {:.2} GiB once loaded, and SGLang starts \
                 from {} GiB free (torch.OutOfMemoryError while loading)",
                loaded_bytes as f64 / GIB,
                avail_mem_gb
            ),
        ));
    }
    let budget_bytes = kv_pool_budget(avail_mem_gb, avail_after_gib, mem_fraction_static)
        .map_err(|e| Problem::new(file, e))?;
    Ok(Budget {
        gpu: gpu_label.to_owned(),
        stored_bytes,
        files: weights.files().len(),
        weights_source: crate::fit_shared::source(&weights),
        by_dtype,
        loaded,
        defaults,
        mem_fraction_static,
        avail_before_gib: avail_mem_gb,
        avail_after_gib,
        budget_bytes,
    })
}

fn render_budget(b: &Budget) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "  gpu: {}", b.gpu);
    let dtypes: Vec<String> = b
        .by_dtype
        .iter()
        .map(|(dtype, bytes)| format!("{dtype} {bytes} B"))
        .collect();
    let _ = writeln!(
        out,
        "  weights: {} B {} ({})",
        b.stored_bytes,
        b.weights_source,
        dtypes.join(", "),
    );
    let skipped = if b.loaded.skipped_bytes > 0 {
        format!(", {} B the loader skips", b.loaded.skipped_bytes)
    } else {
        String::new()
    };
    let mut post_load = String::new();
    if b.loaded.other_buffer_bytes > 0 {
        post_load += &format!(" + other buffers {} B", b.loaded.other_buffer_bytes);
    }
    if b.loaded.other_tensor_bytes > 0 {
        post_load += &format!(" + other tensors {} B", b.loaded.other_tensor_bytes);
    }
    let _ = writeln!(
        out,
        "  loaded: {} B in {}{skipped} + rotary buffers {} B{post_load} = {:.2} GiB",
        b.loaded.tensor_bytes,
        b.loaded.dtype,
        b.loaded.rotary_bytes,
        b.loaded.total().unwrap_or(u64::MAX) as f64 / GIB
    );
    match &b.defaults {
        Some(d) => {
            let dp = if d.dp_attention_mib > 0.0 {
                format!(
                    ", {} MiB of it for DP attention's decode graphs (the chunk is reserved \
                     for before SGLang divides it by --dp)",
                    d.dp_attention_mib
                )
            } else {
                String::new()
            };
            // Under MLA the prefill graph reserves a fixed 1,536 MiB.
            let mla = if d.prefill_graph_mib != d.prefill_graph_sizes as f64 * 8.0 {
                format!(
                    " ({} MiB for the MLA backend's prefill graph)",
                    d.prefill_graph_mib
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "  mem_fraction_static: {} (SGLang's default: {} MiB reserved for \
                 chunked_prefill_size {}, decode graph max_bs {}, {} prefill graph sizes up to \
                 {} tokens{mla}{dp})",
                d.mem_fraction_static,
                d.reserved_mib,
                d.chunked_prefill_size,
                d.decode_graph_max_bs,
                d.prefill_graph_sizes,
                d.prefill_graph_max_tokens
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  mem_fraction_static: {} (given)",
                b.mem_fraction_static
            );
        }
    }
    let _ = writeln!(
        out,
        "  Load weight begin. avail mem={:.2} GB",
        b.avail_before_gib
    );
    let _ = writeln!(
        out,
        "  Load weight end. avail mem={:.2} GB, mem usage={:.2} GB",
        b.avail_after_gib,
        b.avail_before_gib - b.avail_after_gib
    );
    let _ = writeln!(
        out,
        "  KV pool budget: {:.2} - {:.2} x (1 - {}) GiB = {} B",
        b.avail_after_gib, b.avail_before_gib, b.mem_fraction_static, b.budget_bytes
    );
    out
}

fn budget_json(b: &Budget) -> Value {
    json!({
        "gpu": b.gpu,
        "stored_weight_bytes": b.stored_bytes,
        "weight_files": b.files,
        "weights_source": b.weights_source,
        "weight_bytes_by_dtype": b
            .by_dtype
            .iter()
            .map(|(dtype, bytes)| (dtype.clone(), json!(bytes)))
            .collect::<serde_json::Map<_, _>>(),
        "loaded": b.loaded,
        "mem_fraction_static": b.mem_fraction_static,
        "defaults": b.defaults,
        "avail_mem_before_load_gib": b.avail_before_gib,
        "avail_mem_after_load_gib": b.avail_after_gib,
        "kv_pool_budget_bytes": b.budget_bytes,
    })
}
