//! `kv fit`: its flags, the GPU, and the engine's fit (`crate::fit_sglang`,
//! `crate::fit_vllm`). With `--engine sglang --gpu H100 --avail-mem-gb 78.43`:
//! SGLang's KV pool for a checkpoint on a named GPU, from the weights its
//! own safetensors headers give, SGLang's default `mem_fraction_static` for
//! that GPU, and the free memory SGLang starts from; then the pools and
//! lines `kv estimate --engine sglang` prints for that budget. `--engine
//! vllm` is `crate::fit_vllm`, `--engine llama.cpp` `crate::fit_llamacpp`.

use kv_engines::fit::gpus::{gpu, gpu_names, Gpu};
use kv_engines::weights::FileData;

use crate::estimate_args::{Args, Engine};
use crate::fit_llamacpp::LlamaCppFitFlags;
use crate::fit_sglang::SglangFitFlags;
use crate::fit_vllm::VllmFitFlags;
use crate::message::usage_error;
use crate::output::StdoutFailed;

/// The largest `--gpu-memory-mib`: 16 TiB.
const MAX_GPU_MIB: u64 = 1 << 24;

/// The flags only `kv fit` reads.
#[derive(clap::Args)]
pub struct FitArgs {
    /// The GPU, by name (T4, A10, L4, RTX4090, RTX5090, A100-40GB, L40S, H100, A100-80GB,
    /// H200, B200): its memory as nvidia-smi reports it sets SGLang's
    /// defaults, vLLM's total unless --total-gpu-memory-gib is given, and
    /// llama.cpp's free memory unless --free-mib is given.
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
    /// The weight files may end anywhere after their headers: the first
    /// bytes of each shard or GGUF, fetched without the data
    /// (scripts/fetch_headers.py), are read as the whole files would be, and
    /// the output says which files hold less data than their headers give.
    #[arg(long, conflicts_with = "weights_from_config")]
    pub(crate) headers_only: bool,
    /// vLLM --language-model-only: a multimodal model's towers are not
    /// built, so the weights are its text model's alone (the classes kv
    /// has checked: LLaVA, Qwen2-VL, Gemma 3, ...; the others are refused).
    #[arg(long)]
    pub(crate) language_model_only: bool,
    /// llama.cpp -ngl/--n-gpu-layers: layers on the GPU, the output layer
    /// counted first, then the last layers, each with its caches [default:
    /// every one, llama.cpp's -1].
    #[arg(long, value_name = "N")]
    pub(crate) n_gpu_layers: Option<u32>,
    /// llama.cpp -lm/--load-mode: auto (the default), mmap or mmap+mlock map
    /// the host's weights from the file (CPU_Mapped); none, mlock or dio
    /// allocate them (CUDA_Host).
    #[arg(long, value_name = "MODE", value_parser = parse_load_mode)]
    pub(crate) load_mode: Option<bool>,
    /// llama.cpp: the GPU's free memory in MiB, as it logs it (`using device
    /// CUDA0 (...) - N MiB free`) [default: nvidia-smi's total, an upper
    /// bound].
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=MAX_GPU_MIB))]
    pub(crate) free_mib: Option<u64>,
    /// llama.cpp: its CUDA0 compute buffer in MiB, from a run's log (`CUDA0
    /// compute buffer size = X MiB`): decides whether the model fits.
    #[arg(long, value_name = "MIB", value_parser = parse_mib)]
    pub(crate) compute_buffer_mib: Option<f64>,
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
            ("--language-model-only", self.language_model_only),
        ];
        let llamacpp = [
            ("--n-gpu-layers", self.n_gpu_layers.is_some()),
            ("--load-mode", self.load_mode.is_some()),
            ("--free-mib", self.free_mib.is_some()),
            ("--compute-buffer-mib", self.compute_buffer_mib.is_some()),
            ("--weights-from-config", self.weights_from_config),
        ];
        let others: [&[(&'static str, bool)]; 2] = match engine {
            Engine::Sglang => [&vllm, &llamacpp[..4]],
            Engine::Vllm => [&sglang, &llamacpp[..4]],
            Engine::LlamaCpp => [&sglang, &vllm],
        };
        let own_refused: &[(&'static str, bool)] = match engine {
            // A GGUF file is its own checkpoint: there is no config to
            // compute its weights from.
            Engine::LlamaCpp => &llamacpp[4..],
            _ => &[],
        };
        // Bound first: a tail expression's temporaries would outlive the arrays.
        #[allow(clippy::let_and_return)]
        let given = others
            .into_iter()
            .flatten()
            .chain(own_refused)
            .find(|(_, given)| *given)
            .map(|(flag, _)| *flag);
        given
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

/// Whether llama.cpp's `--load-mode` maps the weights
/// (llama-model-loader.cpp: `use_mmap`).
fn parse_load_mode(text: &str) -> Result<bool, String> {
    match text {
        "auto" | "mmap" | "mmap+mlock" => Ok(true),
        "none" | "mlock" | "dio" => Ok(false),
        _ => Err(format!(
            "`{text}` is not a load mode llama.cpp takes (auto, none, mmap, mlock, mmap+mlock, dio)"
        )),
    }
}

fn parse_mib(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 && x <= MAX_GPU_MIB as f64 => Ok(x),
        _ => Err(format!(
            "`{text}` is not a number of MiB from 0 to {MAX_GPU_MIB}"
        )),
    }
}

fn parse_fraction(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 1.0 => Ok(x),
        _ => Err(format!("`{text}` is not a fraction in (0, 1]")),
    }
}

/// Sizes each checkpoint; `Ok(false)` when any could not be.
pub fn run(command: &Command) -> Result<bool, StdoutFailed> {
    let args = &command.estimate;
    let fit = &command.fit;
    if let Some(flag) = fit.foreign(args.engine) {
        let engine = match args.engine {
            Engine::Sglang => "sglang",
            Engine::Vllm => "vllm",
            Engine::LlamaCpp => "llama.cpp",
        };
        usage_error(
            clap::error::ErrorKind::ArgumentConflict,
            &format!("{flag} does not apply to kv fit --engine {engine}: another engine reads it"),
        )
    }
    if args.kv_cache_memory_bytes.is_some() {
        usage_error(
            clap::error::ErrorKind::ArgumentConflict,
            "--kv-cache-memory-bytes does not apply to kv fit: kv fit computes the budget from \
             the weights and --avail-mem-gb (use kv estimate to give it yourself)",
        )
    }
    if args.speculative_tokens > 0 {
        usage_error(
            clap::error::ErrorKind::InvalidValue,
            "kv fit does not count a drafter's weights, nor the MTP layers vLLM loads only \
             for speculative decoding: --speculative-tokens is not modelled yet in kv fit",
        )
    }
    let data = if fit.headers_only {
        FileData::MayEndAfterHeader
    } else {
        FileData::Whole
    };
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
    if args.engine == Engine::LlamaCpp {
        if let Some(free) = fit.free_mib.filter(|&free| free > gpu_mib) {
            usage_error(
                clap::error::ErrorKind::InvalidValue,
                &format!("--free-mib {free} is more than the GPU's {gpu_mib} MiB"),
            )
        }
        let flags = LlamaCppFitFlags {
            n_gpu_layers: fit.n_gpu_layers,
            mapped: fit.load_mode.unwrap_or(true),
            free_mib: fit.free_mib,
            compute_buffer_mib: fit.compute_buffer_mib,
            data,
        };
        return crate::fit_llamacpp::run(args, &flags, &gpu_label, gpu_mib);
    }
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
            data,
            language_model_only: fit.language_model_only,
        };
        return crate::fit_vllm::run(args, &flags, &gpu_label, gpu_mib);
    }
    let flags = SglangFitFlags {
        avail_mem_gb: fit.avail_mem_gb,
        mem_fraction_static: fit.mem_fraction_static,
        chunked_prefill_size: fit.chunked_prefill_size,
        weights_from_config: fit.weights_from_config,
        data,
    };
    crate::fit_sglang::run(args, &flags, &gpu_label, gpu_mib)
}
