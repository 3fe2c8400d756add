//! `kv fit CHECKPOINT --engine sglang --gpu H100 --avail-mem-gb 78.43`:
//! SGLang's KV pool for a checkpoint on a named GPU, from the weights its
//! own safetensors headers give, SGLang's default `mem_fraction_static` for
//! that GPU, and the free memory SGLang starts from; then the pools and
//! lines `kv estimate --engine sglang` prints for that budget. `--engine
//! vllm` is `crate::fit_vllm`.

use std::fmt::Write as _;
use std::path::Path;

use kv_engines::fit::gpus::{gpu, gpu_names, Gpu};
use kv_engines::fit::sglang::{
    default_mem_fraction_static, kv_pool_budget, loaded_weights, unsupported_for_default,
    LoadedWeights, SglangMemoryDefaults, SglangMemoryInputs,
};
use serde_json::{json, Value};

use crate::estimate_args::{Args, Engine};
use crate::fit_vllm::VllmFitFlags;
use crate::input::{expand, read_config, Problem};
use crate::message::usage_error;
use crate::output::{emit, emit_json_array, StdoutFailed};
use crate::sglang::{render, settings, size_file, to_json};
use crate::Format;

const GIB: f64 = (1u64 << 30) as f64;

/// The largest `--gpu-memory-mib`: 16 TiB.
const MAX_GPU_MIB: u64 = 1 << 24;

/// The flags only `kv fit` reads.
#[derive(clap::Args)]
pub struct FitArgs {
    /// The GPU, by name (T4, A10, L4, RTX4090, RTX5090, A100-40GB, L40S, H100, A100-80GB,
    /// H200, B200): its memory as nvidia-smi reports it sets SGLang's
    /// defaults.
    #[arg(long, required_unless_present = "gpu_memory_mib")]
    pub(crate) gpu: Option<String>,
    /// A GPU kv does not list: its memory.total as `nvidia-smi
    /// --query-gpu=memory.total --format=csv` prints it, in MiB.
    /// At most 16 TiB (16777216): no GPU comes near it, and it keeps every
    /// figure derived from it exact.
    #[arg(long, conflicts_with = "gpu", value_parser = clap::value_parser!(u64).range(1..=MAX_GPU_MIB))]
    pub(crate) gpu_memory_mib: Option<u64>,
    /// SGLang: the free memory it starts loading from, in GiB, as it logs it
    /// (`Load weight begin. avail mem=78.43 GB`): the GPU's memory less the
    /// CUDA context and anything else on the card. Published H100 logs show
    /// 78.43 to 78.81. Required with --engine sglang.
    #[arg(long, value_parser = parse_gib)]
    pub(crate) avail_mem_gb: Option<f64>,
    /// SGLang --mem-fraction-static [default: SGLang's own for the GPU].
    #[arg(long, value_parser = parse_fraction)]
    pub(crate) mem_fraction_static: Option<f64>,
    /// SGLang --chunked-prefill-size [default: SGLang's own for the GPU].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) chunked_prefill_size: Option<u64>,
    /// vLLM --gpu-memory-utilization [default: 0.9, vLLM's].
    #[arg(long, value_parser = parse_fraction)]
    pub(crate) gpu_memory_utilization: Option<f64>,
    /// vLLM: the GPU's total memory as CUDA reports it, in GiB (vLLM's
    /// `total_gpu_memory`) [default: nvidia-smi's, an upper bound].
    #[arg(long, value_parser = parse_gib)]
    pub(crate) total_gpu_memory_gib: Option<f64>,
    /// vLLM: memory consumed beyond the weights by the end of its profile
    /// run (`total consumed` less `weights memory` in its debug line).
    #[arg(long)]
    pub(crate) non_torch_bytes: Option<u64>,
    /// vLLM: the profile run's transient activation peak.
    #[arg(long)]
    pub(crate) activation_bytes: Option<u64>,
    /// vLLM: its CUDA-graph memory estimate (0 with --enforce-eager).
    #[arg(long)]
    pub(crate) cuda_graph_bytes: Option<u64>,
    /// vLLM: write an SVG of its maximum concurrency against the context
    /// length for TP 1, 2, 4 and 8 to this file (one config only).
    #[arg(long, value_name = "FILE.svg")]
    pub(crate) plot: Option<std::path::PathBuf>,
    /// Compute the weights from the config instead of reading the
    /// checkpoint's headers (Llama, Mistral, Mixtral, Qwen2, Qwen3 and
    /// Qwen3-MoE classes), said so.
    #[arg(long)]
    pub(crate) weights_from_config: bool,
}

impl FitArgs {
    /// The flags given that only the other engine reads.
    fn foreign(&self, engine: Engine) -> Option<&'static str> {
        let sglang = [
            ("--avail-mem-gb", self.avail_mem_gb.is_some()),
            ("--mem-fraction-static", self.mem_fraction_static.is_some()),
            (
                "--chunked-prefill-size",
                self.chunked_prefill_size.is_some(),
            ),
        ];
        let vllm = [
            (
                "--gpu-memory-utilization",
                self.gpu_memory_utilization.is_some(),
            ),
            (
                "--total-gpu-memory-gib",
                self.total_gpu_memory_gib.is_some(),
            ),
            ("--non-torch-bytes", self.non_torch_bytes.is_some()),
            ("--activation-bytes", self.activation_bytes.is_some()),
            ("--cuda-graph-bytes", self.cuda_graph_bytes.is_some()),
            ("--plot", self.plot.is_some()),
        ];
        let other: &[(&'static str, bool)] = match engine {
            Engine::Sglang => &vllm,
            _ => &sglang,
        };
        other
            .iter()
            .find(|(_, given)| *given)
            .map(|(flag, _)| *flag)
    }
}

/// `kv fit`: `kv estimate`'s flags and its own.
#[derive(clap::Args)]
pub struct Command {
    #[command(flatten)]
    pub(crate) estimate: Args,
    #[command(flatten)]
    pub(crate) fit: FitArgs,
}

fn parse_gib(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x < 1e9 => Ok(x),
        _ => Err(format!("`{text}` is not a positive number of GiB")),
    }
}

fn parse_fraction(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 1.0 => Ok(x),
        _ => Err(format!("`{text}` is not a fraction in (0, 1]")),
    }
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
pub fn run(command: &Command) -> Result<bool, StdoutFailed> {
    let args = &command.estimate;
    let fit = &command.fit;
    if args.engine == Engine::LlamaCpp {
        usage_error(
            clap::error::ErrorKind::InvalidValue,
            "kv fit takes --engine sglang or vllm for now: llama.cpp's budget holds its \
             compute buffers, which kv does not predict yet (use kv estimate --engine \
             llama.cpp for its caches)",
        )
    }
    if let Some(flag) = fit.foreign(args.engine) {
        let engine = if args.engine == Engine::Sglang {
            "sglang"
        } else {
            "vllm"
        };
        usage_error(
            clap::error::ErrorKind::ArgumentConflict,
            &format!(
                "{flag} does not apply to kv fit --engine {engine}: the other engine reads it"
            ),
        )
    }
    if args.kv_cache_memory_bytes.is_some() {
        usage_error(
            clap::error::ErrorKind::ArgumentConflict,
            "--kv-cache-memory-bytes does not apply to kv fit: kv fit computes the budget from \
             the weights and --avail-mem-gb (use kv estimate to give it yourself)",
        )
    }
    // The weights are sharded over TP only: a stage of a pipeline, or an
    // attention TP narrower than TP, holds other tensors.
    if args.pp > 1 {
        usage_error(
            clap::error::ErrorKind::InvalidValue,
            "kv fit sizes one rank of --tp N with every layer: how an engine splits the \
             weights over pipeline stages is not modelled yet (give --pp 1)",
        )
    }
    if args.speculative_tokens > 0 {
        usage_error(
            clap::error::ErrorKind::InvalidValue,
            "kv fit does not count a drafter's weights, nor the MTP layers vLLM loads only \
             for speculative decoding: --speculative-tokens is not modelled yet in kv fit",
        )
    }
    if args.sglang.dp > 1 {
        usage_error(
            clap::error::ErrorKind::InvalidValue,
            "kv fit --engine sglang shards attention over --tp: with --dp, SGLang's \
             attention TP is tp / dp, which is not modelled yet (give --dp 1)",
        )
    }
    let (gpu_label, gpu_mib) = match (&fit.gpu, fit.gpu_memory_mib) {
        (Some(name), _) => match gpu(name) {
            Some(Gpu {
                name,
                product,
                memory_mib,
                ..
            }) => (
                format!("{name} ({product}, {memory_mib} MiB per nvidia-smi)"),
                *memory_mib,
            ),
            None => usage_error(
                clap::error::ErrorKind::InvalidValue,
                &format!(
                    "--gpu `{name}` is not a GPU kv lists ({}); give --gpu-memory-mib with \
                     what nvidia-smi reports instead",
                    gpu_names()
                ),
            ),
        },
        (None, Some(mib)) => (format!("{mib} MiB per nvidia-smi"), mib),
        (None, None) => unreachable!("clap requires --gpu or --gpu-memory-mib"),
    };
    if args.engine == Engine::Vllm {
        if let Some(gib) = fit
            .total_gpu_memory_gib
            .filter(|g| g * 1024.0 > gpu_mib as f64)
        {
            usage_error(
                clap::error::ErrorKind::InvalidValue,
                &format!(
                    "--total-gpu-memory-gib {gib} is more than the GPU's {gpu_mib} MiB \
                     (CUDA reports at most what nvidia-smi does)"
                ),
            )
        }
        let flags = VllmFitFlags {
            gpu_memory_utilization: fit.gpu_memory_utilization,
            total_gpu_memory_gib: fit.total_gpu_memory_gib,
            non_torch_bytes: fit.non_torch_bytes,
            activation_bytes: fit.activation_bytes,
            cuda_graph_bytes: fit.cuda_graph_bytes,
            plot: fit.plot.clone(),
            weights_from_config: fit.weights_from_config,
        };
        return crate::fit_vllm::run(args, &flags, &gpu_label, gpu_mib);
    }
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
        let by_tp = by_tp(file, args, fit, avail_mem_gb, &gpu_label, gpu_mib);
        let sized = budget(file, args, fit, avail_mem_gb, &gpu_label, gpu_mib)
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

/// The TP sizes tried for the smallest that holds a request: one node's.
const TP_SIZES: [u64; 4] = [1, 2, 4, 8];

/// SGLang at each of [`TP_SIZES`] on this GPU: whether a worker's pool
/// holds one request of max_model_len (SGLang starts with less, warning,
/// and refuses longer requests), and its pool line or refusal.
fn by_tp(
    file: &Path,
    args: &Args,
    fit: &FitArgs,
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
    fit: &FitArgs,
    avail_mem_gb: f64,
    gpu_label: &str,
    gpu_mib: u64,
) -> Result<Budget, Problem> {
    let config = read_config(file, args.read.max_file_bytes)?;
    let folder = file.parent().unwrap_or(Path::new("."));
    let weights = crate::fit_weights::weights(file, &config, fit.weights_from_config)?;
    let stored_bytes = weights.total_bytes().map_err(|e| Problem::new(folder, e))?;
    let by_dtype = weights
        .bytes_by_dtype()
        .map_err(|e| Problem::new(folder, e))?
        .into_iter()
        .map(|(dtype, bytes)| (dtype.to_owned(), bytes))
        .collect();
    let loaded =
        loaded_weights(&config, weights.tensors(), args.tp).map_err(|e| Problem::new(file, e))?;
    let loaded_bytes = loaded
        .total()
        .ok_or_else(|| Problem::new(folder, "the weights' bytes overflow u64"))?;
    let (defaults, mem_fraction_static) = match fit.mem_fraction_static {
        Some(given) => (None, given),
        None => {
            if let Some(why) = unsupported_for_default(&config, args.sglang.dp, args.pp) {
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
            inputs.chunked_prefill_size = fit.chunked_prefill_size;
            inputs.max_running_requests = args.sglang.max_running_requests;
            inputs.max_total_tokens = args.sglang.max_total_tokens;
            inputs.model_path = folder.display().to_string();
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
        weights_source: crate::fit_weights::source(&weights),
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
    let _ = writeln!(
        out,
        "  loaded: {} B in {}{skipped} + rotary table {} B (float32) = {:.2} GiB",
        b.loaded.tensor_bytes,
        b.loaded.dtype,
        b.loaded.rotary_bytes,
        (b.loaded.tensor_bytes as f64 + b.loaded.rotary_bytes as f64) / GIB
    );
    match &b.defaults {
        Some(d) => {
            let _ = writeln!(
                out,
                "  mem_fraction_static: {} (SGLang's default: {} MiB reserved for \
                 chunked_prefill_size {}, decode graph max_bs {}, {} prefill graph sizes up to \
                 {} tokens)",
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
