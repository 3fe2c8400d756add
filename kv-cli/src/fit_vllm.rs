//! `kv fit CHECKPOINT --engine vllm --gpu H100`: vLLM 0.33's KV budget for a
//! checkpoint on a named GPU: the weights exactly as vLLM holds them once
//! loaded, less the parts vLLM's profile run measures when they are given;
//! then the lines `kv estimate --kv-cache-memory-bytes` prints for it.

use std::fmt::Write as _;
use std::path::Path;

use kv_core::config::{DTypeRule, HfConfig};
use kv_core::Parallel;
use kv_engines::estimate::{vllm_startup_by_stage, StartupOutcome, VllmStartup};
use kv_engines::fit::vllm::{
    kv_cache_budget, language_model_config, loaded_language_model_on_stage,
    loaded_weights_on_stage, LanguageModel, PipelineStage, VllmBudget, VllmLoadedWeights,
    VllmMemoryInputs,
};
use kv_engines::weights::{FileData, StoredTensor};
use serde_json::{json, Value};

use crate::estimate::{estimate_file, render, settings, to_json, Estimated};
use crate::estimate_args::Args;
use crate::fit_plot::{concurrency_svg, Curve};
use crate::fit_shared::TP_SIZES;
use crate::input::{expand, read_config, Problem};
use crate::output::{emit, emit_json_array, StdoutFailed};
use crate::Format;

const GIB: f64 = (1u64 << 30) as f64;

/// The flags of `kv fit` that vLLM's budget reads (`crate::fit::FitArgs`).
pub(crate) struct VllmFitFlags {
    pub gpu_memory_utilization: Option<f64>,
    pub total_gpu_memory_gib: Option<f64>,
    pub non_torch_bytes: Option<u64>,
    pub activation_bytes: Option<u64>,
    pub cuda_graph_bytes: Option<u64>,
    pub plot: Option<std::path::PathBuf>,
    pub weights_from_config: bool,
    /// What the weight files must hold past their headers.
    pub data: FileData,
    pub language_model_only: bool,
}

/// What vLLM loads: the checkpoint's tensors into the class its config
/// names, or under --language-model-only its text model.
#[derive(Clone, Copy)]
enum Held<'a> {
    Whole {
        config: &'a Value,
        tensors: &'a [StoredTensor],
    },
    LanguageModel(&'a LanguageModel),
}

/// The budget, and what it rests on.
struct Budget {
    gpu: String,
    total_bytes: u64,
    total_given: bool,
    stored_bytes: u64,
    files: usize,
    weights_source: String,
    loaded: VllmLoadedWeights,
    inputs: VllmMemoryInputs,
    profiled_given: bool,
    requested_bytes: u64,
    /// The smallest stage's memory for the cache (the only stage's without
    /// a pipeline).
    available_bytes: u64,
    lines: Vec<String>,
    /// Each pipeline stage's weights and memory for the cache (one entry
    /// without a pipeline).
    stages: Vec<StageFit>,
    by_tp: Vec<TpAnswer>,
}

/// One pipeline stage's weights and what vLLM leaves it for the cache.
struct StageFit {
    weights_bytes: u64,
    available_bytes: u64,
}

/// One stage's weights, the inputs of its budget, and the budget (or why
/// vLLM would have none).
type StageBudget = (
    VllmLoadedWeights,
    VllmMemoryInputs,
    Result<VllmBudget, String>,
);

/// Every pipeline stage of `tp` x `pp`: what it loads and its budget with
/// the profiled parts in `given` (the same on every rank).
fn stage_budgets(
    held: Held,
    dtype: kv_core::DType,
    given: &VllmMemoryInputs,
    tp: u64,
    pp: u64,
) -> Result<Vec<StageBudget>, String> {
    (0..pp)
        .map(|index| {
            let stage = PipelineStage { stages: pp, index };
            let loaded = match held {
                Held::Whole { config, tensors } => {
                    loaded_weights_on_stage(config, tensors, dtype, tp, stage)?
                }
                Held::LanguageModel(model) => {
                    loaded_language_model_on_stage(model, dtype, tp, stage)?
                }
            };
            let mut inputs = given.clone();
            inputs.weights_bytes = loaded.total().ok_or("the weights' bytes overflow u64")?;
            let budget = kv_cache_budget(&inputs);
            Ok((loaded, inputs, budget))
        })
        .collect()
}

/// What vLLM would do at one tensor-parallel size on this GPU.
struct TpAnswer {
    tp: u64,
    weights_bytes: Option<u64>,
    available_bytes: Option<u64>,
    starts: bool,
    said: String,
    /// vLLM's maximum concurrency (`num_blocks / blocks_per_request`) at
    /// each context length that starts: 1,024, doubling, up to the model's
    /// max_model_len.
    concurrency: Vec<(u64, f64)>,
}

/// Sizes each checkpoint; `Ok(false)` when any could not be.
pub fn run(args: &Args, fit: &VllmFitFlags, gpu: &str, gpu_mib: u64) -> Result<bool, StdoutFailed> {
    let (files, mut problems) = expand(&args.configs, Some("config.json"));
    for problem in &problems {
        problem.report();
    }
    if fit.plot.is_some() && files.len() + problems.len() > 1 {
        crate::message::usage_error(
            clap::error::ErrorKind::ArgumentConflict,
            "--plot draws one config: give one",
        )
    }
    let settings = settings(args);
    let mut done = Vec::new();
    for file in &files {
        let sized = budget(file, args, fit, gpu, gpu_mib).and_then(|budget| {
            let mut with_budget = args.clone();
            with_budget.kv_cache_memory_bytes = Some(budget.available_bytes);
            let mut estimated =
                estimate_file(file, &settings, &with_budget).map_err(|mut p| p.swap_remove(0))?;
            if budget.stages.len() > 1 {
                // Each stage holds other weights, so has its own budget.
                let config = read_config(file, args.read.max_file_bytes)?;
                let memory: Vec<u64> = budget.stages.iter().map(|s| s.available_bytes).collect();
                let layout = Parallel::new(args.tp, args.pp).map_err(|e| Problem::new(file, e))?;
                let startup = vllm_startup_by_stage(&config, &settings, layout, &memory)
                    .map_err(|e| Problem::new(file, e))?;
                estimated = estimated.with_vllm_startup(startup);
            }
            Ok((budget, estimated, with_budget))
        });
        match sized {
            Ok((budget, estimated, with_budget)) => {
                if let Some(path) = &fit.plot {
                    if let Err(problem) = plot(path, file, &budget, args.max_num_seqs) {
                        problem.report();
                        problems.push(problem);
                        continue;
                    }
                }
                if args.format != Format::Json {
                    let lines = render(&estimated, &with_budget);
                    let (source, rest) = lines.split_once('\n').unwrap_or((&lines, ""));
                    emit(&format!("{source}\n{}{rest}", render_budget(&budget)))?;
                }
                done.push((budget, estimated));
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
                .map(|(budget, estimated): &(Budget, Estimated)| {
                    let mut value = to_json(estimated);
                    value["fit"] = budget_json(budget);
                    value
                })
                .collect(),
        )?;
    }
    Ok(problems.is_empty())
}

fn budget(
    file: &Path,
    args: &Args,
    fit: &VllmFitFlags,
    gpu: &str,
    gpu_mib: u64,
) -> Result<Budget, Problem> {
    let config = read_config(file, args.read.max_file_bytes)?;
    let folder = crate::fit_shared::folder_of(file);
    // Computed weights are the text class's own; read ones are renamed.
    let weights = if fit.language_model_only && fit.weights_from_config {
        let text = language_model_config(&config).map_err(|e| Problem::new(file, e))?;
        crate::fit_shared::weights(file, &text, true, fit.data)?
    } else {
        crate::fit_shared::weights(file, &config, fit.weights_from_config, fit.data)?
    };
    let language_model = match (fit.language_model_only, fit.weights_from_config) {
        (false, _) => None,
        (true, false) => Some(LanguageModel::read(&config, weights.tensors())),
        (true, true) => Some(LanguageModel::computed(&config, weights.tensors().to_vec())),
    }
    .transpose()
    .map_err(|e| Problem::new(folder, e))?;
    let held = match &language_model {
        Some(model) => Held::LanguageModel(model),
        None => Held::Whole {
            config: &config,
            tensors: weights.tensors(),
        },
    };
    let stored_bytes = weights.total_bytes().map_err(|e| Problem::new(folder, e))?;
    let dtype = HfConfig::from_value(config.clone())
        .with_dtype_rule(DTypeRule::VllmAuto)
        .dtype()
        .map_err(|e| Problem::new(file, e))?;
    let (total_bytes, total_given) = match fit.total_gpu_memory_gib {
        Some(gib) => ((gib * GIB).round() as u64, true),
        None => (
            gpu_mib
                .checked_mul(1 << 20)
                .ok_or_else(|| Problem::new(file, "the GPU's memory in bytes overflows u64"))?,
            false,
        ),
    };
    let mut given = VllmMemoryInputs::new(total_bytes, 0);
    given.gpu_memory_utilization = fit.gpu_memory_utilization.unwrap_or(0.9);
    given.non_torch_bytes = fit.non_torch_bytes.unwrap_or(0);
    given.activation_bytes = fit.activation_bytes.unwrap_or(0);
    given.cuda_graph_bytes = fit.cuda_graph_bytes.unwrap_or(0);
    let profiled_given = fit.non_torch_bytes.is_some()
        && fit.activation_bytes.is_some()
        && fit.cuda_graph_bytes.is_some();
    let stages =
        stage_budgets(held, dtype, &given, args.tp, args.pp).map_err(|e| Problem::new(file, e))?;
    let by_tp: Vec<TpAnswer> = TP_SIZES
        .iter()
        .map(|&tp| at_tp(&config, held, dtype, &given, args, tp))
        .collect();
    let mut fits = Vec::with_capacity(stages.len());
    let mut binding: Option<(VllmLoadedWeights, VllmMemoryInputs, VllmBudget)> = None;
    for (index, (loaded, inputs, budget)) in stages.into_iter().enumerate() {
        let budget = budget.map_err(|e| {
            let smallest = match by_tp.iter().find(|a| a.starts) {
                Some(a) => format!("--tp {} starts: {}", a.tp, a.said),
                None => format!("none of --tp {TP_SIZES:?} starts"),
            };
            let stage = if args.pp > 1 {
                format!(", pipeline stage {index}")
            } else {
                String::new()
            };
            Problem::new(
                file,
                format!("{e} (at --tp {}{stage}; {smallest})", args.tp),
            )
        })?;
        fits.push(StageFit {
            weights_bytes: inputs.weights_bytes,
            available_bytes: budget.available_bytes,
        });
        // The stage with the least memory for its cache sets the lines shown.
        if binding
            .as_ref()
            .is_none_or(|(_, _, b)| budget.available_bytes < b.available_bytes)
        {
            binding = Some((loaded, inputs, budget));
        }
    }
    let Some((loaded, inputs, budget)) = binding else {
        return Err(Problem::new(file, "no pipeline stage to size"));
    };
    Ok(Budget {
        gpu: gpu.to_owned(),
        total_bytes,
        total_given,
        stored_bytes,
        files: weights.files().len(),
        weights_source: match &language_model {
            Some(model) => format!(
                "{}; vLLM loads its language model alone, as `{}` \
                 (--language-model-only: no towers built)",
                crate::fit_shared::source(&weights),
                model.class()
            ),
            None => crate::fit_shared::source(&weights),
        },
        loaded,
        inputs,
        profiled_given,
        requested_bytes: budget.requested_bytes,
        available_bytes: budget.available_bytes,
        lines: budget.lines,
        stages: fits,
        by_tp,
    })
}

/// vLLM at `tp` ranks: each rank's weights, its budget with the profiled
/// parts as given, and whether one request at max_model_len fits.
fn at_tp(
    config: &Value,
    held: Held,
    dtype: kv_core::DType,
    given: &VllmMemoryInputs,
    args: &Args,
    tp: u64,
) -> TpAnswer {
    let mut answer = TpAnswer {
        tp,
        weights_bytes: None,
        available_bytes: None,
        starts: false,
        said: String::new(),
        concurrency: Vec::new(),
    };
    let stages = match stage_budgets(held, dtype, given, tp, args.pp) {
        Ok(stages) => stages,
        Err(e) => {
            answer.said = e;
            return answer;
        }
    };
    let mut memory = Vec::with_capacity(stages.len());
    let mut heaviest = 0;
    for (_, inputs, budget) in &stages {
        heaviest = heaviest.max(inputs.weights_bytes);
        match budget {
            Ok(budget) => memory.push(budget.available_bytes),
            Err(_) => {
                answer.said = format!(
                    "No available memory for the cache blocks: the weights take {} a rank",
                    kv_core::units::human_bytes(inputs.weights_bytes)
                );
                answer.weights_bytes = Some(heaviest);
                return answer;
            }
        }
    }
    answer.weights_bytes = Some(heaviest);
    answer.available_bytes = memory.iter().copied().min();
    let mut at = args.clone();
    at.tp = tp;
    let layout = match Parallel::new(tp, args.pp) {
        Ok(layout) => layout,
        Err(e) => {
            answer.said = e.to_string();
            return answer;
        }
    };
    let startup = match vllm_startup_by_stage(config, &settings(&at), layout, &memory) {
        Ok(startup) => startup,
        Err(e) => {
            answer.said = e.to_string();
            return answer;
        }
    };
    answer.starts = matches!(startup.outcome, StartupOutcome::Starts { .. });
    answer.said = startup.message;
    for length in context_lengths(startup.max_model_len) {
        let at_length = settings(&at).positions(length);
        if let Ok(VllmStartup {
            outcome:
                StartupOutcome::Starts {
                    num_blocks,
                    blocks_per_request,
                    ..
                },
            ..
        }) = vllm_startup_by_stage(config, &at_length, layout, &memory)
        {
            // get_kv_cache_capacity's ratio, as vLLM's line prints it.
            answer
                .concurrency
                .push((length, num_blocks as f64 / blocks_per_request.max(1) as f64));
        }
    }
    answer
}

/// 1,024, 2,048, ... below `max_model_len`, then `max_model_len` itself.
fn context_lengths(max_model_len: u64) -> Vec<u64> {
    let mut lengths: Vec<u64> = std::iter::successors(Some(1024u64), |l| l.checked_mul(2))
        .take_while(|&l| l < max_model_len)
        .collect();
    lengths.push(max_model_len);
    lengths
}

fn render_budget(b: &Budget) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "  gpu: {}", b.gpu);
    let total = if b.total_given {
        "as given (--total-gpu-memory-gib)".to_owned()
    } else {
        "nvidia-smi's figure, an upper bound: CUDA reports less to vLLM (an H100's 79.65 \
         GiB is 79.1 to 79.3 in vLLM logs people posted); give --total-gpu-memory-gib from \
         vLLM's log"
            .to_owned()
    };
    let _ = writeln!(out, "  total memory: {} B, {total}", b.total_bytes);
    let _ = writeln!(out, "  weights: {} B {}", b.stored_bytes, b.weights_source);
    let mut skipped = if b.loaded.skipped_bytes > 0 {
        format!(", {} B the loader skips", b.loaded.skipped_bytes)
    } else {
        String::new()
    };
    if b.loaded.repeated_bytes > 0 {
        skipped += &format!(
            ", {} B copies of a shared block loaded into the one held",
            b.loaded.repeated_bytes
        );
    }
    let other = if b.loaded.other_buffer_bytes > 0 {
        format!(" + other buffers {} B", b.loaded.other_buffer_bytes)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  loaded: {} B in {}{skipped} + rotary table {} B + attention scales {} B{other} = {} B",
        b.loaded.tensor_bytes,
        b.loaded.dtype,
        b.loaded.rotary_bytes,
        b.loaded.scale_bytes,
        b.inputs.weights_bytes
    );
    let _ = writeln!(
        out,
        "  requested: ceil({} x {}) = {} B",
        b.total_bytes, b.inputs.gpu_memory_utilization, b.requested_bytes
    );
    if b.stages.len() > 1 {
        let stages: Vec<String> = b
            .stages
            .iter()
            .enumerate()
            .map(|(i, s)| {
                format!(
                    "stage {i}: weights {} B, cache {} B",
                    s.weights_bytes, s.available_bytes
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "  pipeline: {}; the lines below are the stage with the least for its cache, and \
             every rank takes the smallest rank's block count",
            stages.join("; ")
        );
    }
    if b.profiled_given {
        let _ = writeln!(
            out,
            "  profiled (given): non-torch {} B, activation peak {} B, CUDA graphs {} B",
            b.inputs.non_torch_bytes, b.inputs.activation_bytes, b.inputs.cuda_graph_bytes
        );
    } else {
        let _ = writeln!(
            out,
            "  profiled: not all given (non-torch {} B, activation peak {} B, CUDA graphs {} B): \
             the budget is an upper bound. vLLM subtracts what its profile run measures; give \
             --non-torch-bytes, --activation-bytes and --cuda-graph-bytes from a run's log \
             (VLLM_LOGGING_LEVEL=DEBUG prints them)",
            b.inputs.non_torch_bytes, b.inputs.activation_bytes, b.inputs.cuda_graph_bytes
        );
    }
    for line in &b.lines {
        let _ = writeln!(out, "  {line}");
    }
    match b.by_tp.iter().find(|a| a.starts) {
        Some(first) => {
            let _ = writeln!(out, "  smallest --tp that starts: {}", first.tp);
        }
        None => {
            let _ = writeln!(out, "  smallest --tp that starts: none of {:?}", TP_SIZES);
        }
    }
    for a in &b.by_tp {
        let _ = writeln!(out, "    tp {}: {}", a.tp, a.said);
    }
    out
}

fn budget_json(b: &Budget) -> Value {
    json!({
        "gpu": b.gpu,
        "total_memory_bytes": b.total_bytes,
        "total_memory_given": b.total_given,
        "stored_bytes": b.stored_bytes,
        "files": b.files,
        "weights_source": b.weights_source,
        "loaded": b.loaded,
        "weights_bytes": b.inputs.weights_bytes,
        "gpu_memory_utilization": b.inputs.gpu_memory_utilization,
        "requested_bytes": b.requested_bytes,
        "non_torch_bytes": b.inputs.non_torch_bytes,
        "activation_bytes": b.inputs.activation_bytes,
        "cuda_graph_bytes": b.inputs.cuda_graph_bytes,
        "profiled_given": b.profiled_given,
        "upper_bound": !(b.profiled_given && b.total_given),
        "available_kv_cache_memory_bytes": b.available_bytes,
        "stages": b.stages.iter().map(|s| json!({
            "weights_bytes": s.weights_bytes,
            "available_kv_cache_memory_bytes": s.available_bytes,
        })).collect::<Vec<_>>(),
        "lines": b.lines,
        "by_tp": b.by_tp.iter().map(|a| json!({
            "tp": a.tp,
            "weights_bytes": a.weights_bytes,
            "available_kv_cache_memory_bytes": a.available_bytes,
            "starts": a.starts,
            "said": a.said,
            "concurrency": a.concurrency,
        })).collect::<Vec<_>>(),
        "smallest_tp": b.by_tp.iter().find(|a| a.starts).map(|a| a.tp),
    })
}

/// Draws `budget`'s concurrency curves to `path`.
fn plot(path: &Path, file: &Path, budget: &Budget, max_num_seqs: u64) -> Result<(), Problem> {
    let curves: Vec<Curve> = budget
        .by_tp
        .iter()
        .map(|a| Curve {
            tp: a.tp,
            points: a.concurrency.clone(),
        })
        .collect();
    let bound = if budget.profiled_given && budget.total_given {
        "profiled parts as given"
    } else {
        "an upper bound (profiled parts not all given)"
    };
    let svg = concurrency_svg(
        &format!(
            "{} on {}: vLLM 0.33",
            file.parent()
                .and_then(Path::file_name)
                .unwrap_or(file.as_os_str())
                .to_string_lossy(),
            budget.gpu.split(" (").next().unwrap_or(&budget.gpu)
        ),
        &format!(
            "Each request at its full length, memory alone; weights from the headers; {bound}"
        ),
        &curves,
        max_num_seqs,
    )
    .map_err(|e| Problem::new(path, format!("cannot draw the plot: {e}")))?;
    std::fs::write(path, svg).map_err(|e| Problem::new(path, format!("cannot write the plot: {e}")))
}
