//! `kv fit --engine llama.cpp MODEL.gguf --gpu NAME`: what llama.cpp puts
//! on one CUDA GPU for a GGUF file: its model buffer
//! (`kv_engines::fit::llamacpp`, from the tensor infos) and its KV cache
//! (`kv_engines::estimate::llamacpp`), each with llama.cpp's own line, then
//! what is left for the compute buffer after `--fit`'s 1024 MiB margin.
//! The compute buffer depends on llama.cpp's graph and is not predicted:
//! given (`--compute-buffer-mib`, from a run's log) it decides the fit.

use std::fmt::Write as _;
use std::path::Path;

use kv_core::units::thousands;
use kv_engines::estimate::llamacpp::{
    buffer_mib, estimate, CacheDevice, CachePlacement, LlamaCppEstimate, LLAMACPP_COMMIT,
};
use kv_engines::fit::llamacpp::{load_tensors, LoadedModel, Offload, FIT_MARGIN_BYTES};
use kv_engines::gguf::GgufFile;
use kv_engines::weights::FileData;
use serde_json::Value;

use crate::estimate_args::Args;
use crate::input::{regular_file, Problem};
use crate::output::{emit, emit_json_array, StdoutFailed};
use crate::Format;

const MIB: u64 = 1 << 20;

/// The flags only `kv fit --engine llama.cpp` reads.
pub struct LlamaCppFitFlags {
    /// `-ngl`.
    pub n_gpu_layers: Option<u32>,
    /// `--load-mode`: the host's weights mapped from the file.
    pub mapped: bool,
    /// The GPU's free memory as llama.cpp logs it, in MiB.
    pub free_mib: Option<u64>,
    /// The compute buffer on the GPU, from a run's log, in MiB.
    pub compute_buffer_mib: Option<f64>,
    /// What the GGUF must hold past its header.
    pub data: FileData,
}

/// What `kv fit` found for one GGUF file (JSON: its `fit` member).
struct Fit {
    /// The GPU's free memory kv starts from.
    free_bytes: u64,
    /// Whether that is llama.cpp's own figure (`--free-mib`) or nvidia-smi's
    /// total, an upper bound.
    free_given: bool,
    /// `--fit`'s margin.
    margin_bytes: u64,
    /// The model buffer and the KV cache on the GPU.
    held_bytes: u64,
    /// What that leaves for the compute buffer (negative: short by).
    left_for_compute_bytes: i128,
    /// The compute buffer given, if any.
    compute_bytes: Option<u64>,
    /// With the compute buffer given: whether all of it fits.
    fits: Option<bool>,
    /// Whether the file holds every tensor's data (`--headers-only` reads
    /// one that does not).
    data_whole: bool,
}

/// Sizes every GGUF file; `Ok(false)` when any could not be.
pub fn run(
    args: &Args,
    flags: &LlamaCppFitFlags,
    gpu_label: &str,
    gpu_mib: u64,
) -> Result<bool, StdoutFailed> {
    let settings = args.llamacpp.settings(args.kv_format);
    let mut offload = Offload::gpu();
    if let Some(n) = flags.n_gpu_layers {
        offload = offload.gpu_layers(n);
    }
    if !flags.mapped {
        offload = offload.no_mmap();
    }
    let mut ok = true;
    let mut done = Vec::new();
    for file in &args.configs {
        match fit_file(file, &settings, &offload, flags, gpu_mib) {
            Ok((loaded, kv, fit)) => {
                if args.format != Format::Json {
                    emit(&render(file, gpu_label, &loaded, &kv, &fit, flags))?;
                }
                done.push((file, loaded, kv, fit));
            }
            Err(problem) => {
                problem.report();
                ok = false;
            }
        }
    }
    if args.format == Format::Json {
        let all = done
            .iter()
            .map(|(file, loaded, kv, fit)| {
                serde_json::json!({
                    "source": file.display().to_string(),
                    "engine": "llama.cpp",
                    "commit": LLAMACPP_COMMIT,
                    "gpu": gpu_label,
                    "model": loaded,
                    "model_lines": loaded.lines(),
                    "kv": kv,
                    "kv_lines": kv_lines(kv, loaded),
                    "fit": {
                        "free_bytes": fit.free_bytes,
                        "free_given": fit.free_given,
                        "margin_bytes": fit.margin_bytes,
                        "held_bytes": fit.held_bytes,
                        "left_for_compute_bytes": i64::try_from(fit.left_for_compute_bytes).ok(),
                        "compute_bytes": fit.compute_bytes,
                        "fits": fit.fits,
                        "data_whole": fit.data_whole,
                    },
                })
            })
            .collect::<Vec<Value>>();
        emit_json_array(all)?;
    }
    Ok(ok)
}

fn fit_file(
    file: &Path,
    settings: &kv_engines::estimate::llamacpp::LlamaCppSettings,
    offload: &Offload,
    flags: &LlamaCppFitFlags,
    gpu_mib: u64,
) -> Result<(LoadedModel, LlamaCppEstimate, Fit), Problem> {
    let problem = |e| Problem::new(file, e);
    let refuse = |message: String| {
        Problem::new(
            file,
            kv_core::KvError::Config {
                what: "kv fit --engine llama.cpp",
                problem: message,
            },
        )
    };
    // A FIFO would block the GGUF reader and a device never end it.
    regular_file(file)?;
    let gguf = GgufFile::from_path_as(file, flags.data).map_err(|e| {
        // A file that ends after its tensor infos is read when asked: say
        // so, where that is what it is.
        let cut = flags.data == FileData::Whole
            && GgufFile::from_path_as(file, FileData::MayEndAfterHeader).is_ok();
        match e {
            kv_core::KvError::ConfigFile { path, problem } if cut => Problem::new(
                Path::new(&path),
                problem
                    + "; the file holds its tensor infos whole: give --headers-only if it was \
                       fetched without its data",
            ),
            other => problem(other),
        }
    })?;
    let loaded = load_tensors(&gguf, offload).map_err(problem)?;
    let kv = estimate(gguf.metadata(), settings).map_err(problem)?;
    // Each layer's caches are on its device (offload_kqv, the default).
    let kv_on_gpu = kv
        .buffer_bytes(placement(&loaded), CacheDevice::Cuda)
        .ok_or_else(|| refuse("the cache's bytes on the GPU overflow u64".to_owned()))?;
    let held = loaded.bytes_in("CUDA0").checked_add(kv_on_gpu);
    let held = held.ok_or_else(|| refuse("the bytes on the GPU overflow u64".to_owned()))?;
    let free_bytes = flags.free_mib.unwrap_or(gpu_mib).saturating_mul(MIB);
    let left = i128::from(free_bytes) - i128::from(FIT_MARGIN_BYTES) - i128::from(held);
    let compute_bytes = flags
        .compute_buffer_mib
        .map(|mib| (mib * MIB as f64).ceil() as u64);
    Ok((
        loaded,
        kv,
        Fit {
            free_bytes,
            free_given: flags.free_mib.is_some(),
            margin_bytes: FIT_MARGIN_BYTES,
            held_bytes: held,
            left_for_compute_bytes: left,
            compute_bytes,
            fits: compute_bytes.map(|c| left >= i128::from(c)),
            data_whole: gguf.is_whole(),
        },
    ))
}

/// Where llama.cpp puts each layer's caches: with the layer.
fn placement(loaded: &LoadedModel) -> CachePlacement {
    CachePlacement::Cuda {
        gpu_from: loaded.gpu_from,
    }
}

/// The cache lines, each constructor's buffer lines before its size line,
/// as llama.cpp logs them.
fn kv_lines(kv: &LlamaCppEstimate, loaded: &LoadedModel) -> Vec<String> {
    kv.lines_placed(placement(loaded))
}

fn render(
    file: &Path,
    gpu_label: &str,
    loaded: &LoadedModel,
    kv: &LlamaCppEstimate,
    fit: &Fit,
    flags: &LlamaCppFitFlags,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", file.display());
    let _ = writeln!(
        out,
        "  {}; {} layers, on {gpu_label}",
        crate::llamacpp::settings_line(kv),
        loaded.layers
    );
    if !fit.data_whole {
        let _ = writeln!(
            out,
            "  --headers-only: the file holds less data than its tensor infos give; the \
             buffers are its tensor infos'"
        );
    }
    for line in loaded.lines().iter().chain(&kv_lines(kv, loaded)) {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(why) = &loaded.host_buffers_unlisted {
        let _ = writeln!(
            out,
            "  host: {} B of weights; {why}",
            thousands(loaded.host_weight_bytes)
        );
    }
    let free = if fit.free_given {
        format!("{} B free (--free-mib)", thousands(fit.free_bytes))
    } else {
        format!(
            "{} B (nvidia-smi's total: an upper bound on the free memory; give --free-mib \
             from llama.cpp's `using device CUDA0 (...) - N MiB free`)",
            thousands(fit.free_bytes)
        )
    };
    let _ = writeln!(out, "  GPU: {free}");
    let _ = writeln!(
        out,
        "  on the GPU: model buffer {} B + KV cache {} B = {} B; --fit keeps {} B free",
        thousands(loaded.bytes_in("CUDA0")),
        thousands(fit.held_bytes - loaded.bytes_in("CUDA0")),
        thousands(fit.held_bytes),
        thousands(fit.margin_bytes),
    );
    let left = fit.left_for_compute_bytes;
    if left < 0 {
        let _ = writeln!(
            out,
            "  does not fit before any compute buffer: short by {} B; llama.cpp's --fit (on by \
             default) would shrink the context or keep layers on the host",
            thousands_i(-left)
        );
        return out;
    }
    let _ = writeln!(
        out,
        "  left for llama.cpp's CUDA0 compute buffer: {} B ({})",
        thousands_i(left),
        buffer_mib(u64::try_from(left).unwrap_or(u64::MAX)).trim()
    );
    match (fit.compute_bytes, fit.fits) {
        (Some(compute), Some(true)) => {
            let _ = writeln!(
                out,
                "  fits: the compute buffer given ({} MiB, {} B) leaves {} B",
                flags.compute_buffer_mib.unwrap_or_default(),
                thousands(compute),
                thousands_i(left - i128::from(compute))
            );
        }
        (Some(compute), _) => {
            let _ = writeln!(
                out,
                "  does not fit: the compute buffer given ({} B) is {} B more; llama.cpp's --fit \
                 (on by default) would shrink the context or keep layers on the host",
                thousands(compute),
                thousands_i(i128::from(compute) - left)
            );
        }
        (None, _) => {
            let _ = writeln!(
                out,
                "  the compute buffer depends on llama.cpp's graph and is not predicted: give \
                 --compute-buffer-mib from its `CUDA0 compute buffer size = X MiB` line to decide"
            );
        }
    }
    out
}

fn thousands_i(n: i128) -> String {
    thousands(u64::try_from(n).unwrap_or(u64::MAX))
}
