//! `kv estimate`: declarations estimated from HF configs (`kv_engines::estimate::estimate`),
//! collected and divided per rank as a model's own would be.

use std::fmt::Write as _;
use std::path::Path;

use kv_core::units::{human_bytes, thousands};
use kv_core::{KvError, Parallel, Table};
use kv_engines::estimate::{
    EstimateRank, EstimateSettings, ExportedEstimate, ExportedEstimateCluster, StartupOutcome,
};
use serde_json::Value;

use crate::estimate_args::{Args, Engine};
use crate::input::{expand, read_config, Problem};
use crate::message::usage_error;
use crate::output::{emit, emit_json_array, StdoutFailed};
use crate::Format;

/// One config's estimate, divided per rank by kv-core: the ranks (their
/// declarations, for the group lines) and the exported figures.
pub(crate) struct Estimated {
    exported: ExportedEstimate,
    ranks: Vec<EstimateRank>,
}

impl Estimated {
    /// The start-up vLLM would log, in place of the one for one budget on
    /// every rank (`kv fit`'s pipeline stages each have their own).
    pub(crate) fn with_vllm_startup(
        mut self,
        startup: kv_engines::estimate::VllmStartup,
    ) -> Estimated {
        self.exported = self.exported.with_vllm_startup(startup);
        self
    }
}

/// Estimates every config; `Ok(false)` when any could not be.
pub fn run(args: &Args) -> Result<bool, StdoutFailed> {
    // Flags the engine does not read were refused before (`crate::flags`).
    match args.engine {
        Engine::LlamaCpp => {
            return crate::llamacpp::run(&args.configs, &args.llamacpp, args.kv_format, args.format)
        }
        Engine::Sglang => return crate::sglang::run(args),
        Engine::Vllm => {}
    }
    let (files, mut problems) = expand(&args.configs, Some("config.json"));
    for problem in &problems {
        problem.report();
    }
    let settings = settings(args);
    let mut done = Vec::new();
    for file in &files {
        match estimate_file(file, &settings, args) {
            Ok(estimated) => {
                if args.format != Format::Json {
                    emit(&render(&estimated, args))?;
                }
                done.push(estimated);
            }
            Err(found) => {
                for problem in found {
                    problem.report();
                    problems.push(problem);
                }
            }
        }
    }
    if args.format == Format::Json {
        emit_json_array(done.iter().map(to_json).collect())?;
    }
    Ok(problems.is_empty())
}

/// The estimate settings `args` give.
pub(crate) fn settings(args: &Args) -> EstimateSettings {
    let mut settings = EstimateSettings::new()
        .max_num_batched_tokens(args.max_num_batched_tokens)
        .pipeline_stages(args.pp)
        .tensor_parallel(args.tp)
        .decode_context_parallel(args.dcp)
        .dcp_interleave(args.dcp_interleave)
        .async_scheduling(!args.no_async_scheduling)
        .prefix_caching(!args.no_prefix_caching)
        .speculative_tokens(args.speculative_tokens)
        .allow_long_max_model_len(args.allow_long_max_model_len);
    if let Some(positions) = args.positions {
        settings = settings.positions(positions);
    }
    if let Some(block_size) = args.block_size {
        settings = settings.block_size(block_size);
    }
    if let Some(storage) = args.kv_format {
        settings = settings.kv_format(storage);
    }
    for (key, value) in &args.values {
        settings = settings.set(key, value.clone());
    }
    settings
}

pub(crate) fn estimate_file(
    file: &Path,
    settings: &EstimateSettings,
    args: &Args,
) -> Result<Estimated, Vec<Problem>> {
    let config = read_config(file, args.read.max_file_bytes).map_err(|p| vec![p])?;
    let estimate = kv_engines::estimate::estimate(&config, settings).map_err(|e| {
        e.into_problems()
            .into_iter()
            .map(|e| problem(file, e, args))
            .collect::<Vec<_>>()
    })?;
    if args.strict {
        crate::strict::refuse_unverified(file, &estimate).map_err(|p| vec![p])?;
    }
    let mut estimated = estimated(file, estimate, args).map_err(|p| vec![p])?;
    if let Some(bytes) = args.kv_cache_memory_bytes {
        let layout = Parallel::new(args.tp, args.pp).map_err(|e| vec![Problem::new(file, e)])?;
        let startup = kv_engines::estimate::vllm_startup(&config, settings, layout, bytes)
            .map_err(|e| vec![Problem::new(file, e)])?;
        estimated.exported = estimated.exported.with_vllm_startup(startup);
    }
    Ok(estimated)
}

/// A value a flag gave that cannot be used (a length the model refuses, a
/// KV format vLLM refuses for the model): bad usage, exit 2.
fn usage(file: &Path, flag: &str, problem: &str) -> ! {
    let problem = problem.strip_prefix("kv: ").unwrap_or(problem);
    usage_error(
        clap::error::ErrorKind::ValueValidation,
        &format!("invalid value for '{flag}': {}: {problem}", file.display()),
    )
}

/// A --tp/--pp/--dcp layout vLLM would not start with: bad usage, exit 2.
fn refused_layout(file: &Path, problem: &str) -> ! {
    usage_error(
        clap::error::ErrorKind::ArgumentConflict,
        &format!(
            "the layout --tp/--pp/--dcp/--dcp-interleave is refused: {}: {problem}",
            file.display()
        ),
    )
}

/// One problem in CLI words: a length the flag gave that the model refuses
/// or that overflows is bad usage (exit 2, naming the flag), and so is a
/// layout vLLM would not start with; a key a config lacks is given with --set.
fn problem(file: &Path, error: KvError, args: &Args) -> Problem {
    match &error {
        KvError::Parallel { problem, .. } => refused_layout(file, problem),
        KvError::Config {
            what: "kv_format",
            problem,
        } if args.kv_format.is_some() => usage(file, "--kv-format", problem),
        KvError::Config {
            what: "kv_format", ..
        } => Problem::new(file, error),
        KvError::Config {
            what: "block_size",
            problem,
        } => usage(file, "--block-size", problem),
        KvError::LongerThanModel { .. } => usage(
            file,
            "--positions",
            &format!("{error} (--allow-long-max-model-len allows it)"),
        ),
        KvError::Config {
            what: "max_model_len",
            problem,
        } if args.positions.is_some() => usage(file, "--positions", problem),
        KvError::Config {
            what: "kv format",
            problem,
        } => usage(file, "--kv-format", problem),
        KvError::Config {
            what: "max_model_len",
            ..
        } => Problem::new(file, format!("{error}; give it with --positions N")),
        // No key given on the command line makes layers alike, makes vLLM
        // serve an architecture it retired, builds a class that fails, sizes
        // caches kv does not, or mends a flag kv has not checked.
        KvError::Config {
            what:
                "per-layer values"
                | "sparse-attention indexer"
                | "architectures"
                | "model class"
                | "model"
                | "estimate settings",
            ..
        } => Problem::new(file, error),
        KvError::Config { .. } => Problem::new(
            file,
            format!("{error}; on the command line, give a key with --set KEY=VALUE"),
        ),
        _ => Problem::new(file, error),
    }
}

fn estimated(
    file: &Path,
    estimate: kv_engines::estimate::Estimate,
    args: &Args,
) -> Result<Estimated, Problem> {
    let source = file.display().to_string();
    let problem = |e: KvError| Problem::new(file, e);
    let layout = Parallel::new(args.tp, args.pp).map_err(problem)?;
    let ranks = estimate.ranks(layout, args.max_num_seqs).map_err(problem)?;
    let exported = estimate
        .export(&source, layout, args.max_num_seqs)
        .map_err(problem)?;
    Ok(Estimated { exported, ranks })
}

/// A rank as the Markdown table labels it: `tp=0 pp=0`.
fn rank_name(rank: &EstimateRank) -> String {
    let p = rank.collection.parallel();
    format!("tp={} pp={}", p.tp_rank, p.pp_rank)
}

fn settings_line(estimated: &Estimated, args: &Args) -> String {
    format!(
        "max_model_len {}, max_num_seqs {}, tp {}, pp {}{}; {}",
        estimated.exported.max_model_len,
        args.max_num_seqs,
        args.tp,
        args.pp,
        if args.dcp > 1 {
            format!(", dcp {}", args.dcp)
        } else {
            String::new()
        },
        estimated.exported.convention
    )
}

pub(crate) fn render(estimated: &Estimated, args: &Args) -> String {
    let mut out = String::new();
    let several = estimated.ranks.len() > 1;
    match args.format {
        Format::Markdown => {
            let _ = writeln!(out, "### `{}`\n", estimated.exported.source);
            let _ = writeln!(out, "Detected: {}.\n", estimated.exported.detected);
            let _ = writeln!(out, "Settings: {}.\n", settings_line(estimated, args));
            // One table (kv-core's, as `kv table` prints), every rank's
            // declarations in it; then each rank's totals and vLLM's pool.
            let table = estimated
                .ranks
                .iter()
                .fold(Table::new(args.max_num_seqs), |table, rank| {
                    table.collection(&rank_name(rank), &rank.collection)
                });
            out.push_str(&table.to_markdown());
            out.push('\n');
            for rank in &estimated.ranks {
                let name = rank_name(rank);
                let _ = writeln!(
                    out,
                    "- {name}: {}",
                    kv_engines::estimate::totals_line(&rank.totals, args.max_num_seqs)
                );
                let _ = writeln!(
                    out,
                    "- {name}: {}",
                    kv_engines::estimate::pool_line(&rank.pool, &rank.totals, args.max_num_seqs)
                );
            }
            out.push('\n');
            for line in vllm_lines(estimated, args) {
                let _ = writeln!(out, "{line}\n");
            }
        }
        _ => {
            let _ = writeln!(out, "{}", estimated.exported.source);
            let _ = writeln!(out, "  detected: {}", estimated.exported.detected);
            let _ = writeln!(out, "  settings: {}", settings_line(estimated, args));
            let indent = if several { "    " } else { "  " };
            // Ranks that hold the same are printed once, with their count.
            let mut groups: Vec<(String, Vec<(u64, u64)>)> = Vec::new();
            for rank in &estimated.ranks {
                let mut body = String::new();
                for entry in rank.collection.entries() {
                    let _ = writeln!(
                        body,
                        "{indent}{}",
                        kv_engines::estimate::group_line(&entry.spec, args.max_num_seqs)
                    );
                    if let Some(assumes) = &entry.spec.assumes {
                        let _ = writeln!(body, "{indent}  (assumes {assumes})");
                    }
                    if let Some(share) = &entry.share {
                        let _ = writeln!(body, "{indent}  ({share})");
                    }
                }
                let _ = writeln!(
                    body,
                    "{indent}{}",
                    kv_engines::estimate::totals_line(&rank.totals, args.max_num_seqs)
                );
                let _ = writeln!(
                    body,
                    "{indent}{}",
                    kv_engines::estimate::pool_line(&rank.pool, &rank.totals, args.max_num_seqs)
                );
                let p = rank.collection.parallel();
                match groups.iter_mut().find(|(b, _)| *b == body) {
                    Some((_, ranks)) => ranks.push((p.tp_rank, p.pp_rank)),
                    None => groups.push((body, vec![(p.tp_rank, p.pp_rank)])),
                }
            }
            for (body, ranks) in &groups {
                if several {
                    let _ = writeln!(out, "  {}:", rank_set(ranks));
                }
                out.push_str(body);
            }
            if several {
                let _ = writeln!(out, "  {}", cluster_line(&estimated.exported.cluster));
            }
            for line in vllm_lines(estimated, args) {
                let _ = writeln!(out, "  {line}");
            }
        }
    }
    out
}

/// The memory vLLM needs for `--max-num-seqs` requests, and its start-up
/// with `--kv-cache-memory-bytes` where given.
fn vllm_lines(estimated: &Estimated, args: &Args) -> Vec<String> {
    let exported = &estimated.exported;
    let widest = estimated
        .ranks
        .iter()
        .map(|r| r.pool.bytes_per_block)
        .max()
        .unwrap_or(0);
    let blocks = estimated
        .ranks
        .first()
        .map_or(0, |r| r.pool.blocks_per_request);
    let needed = exported.cluster.kv_cache_memory_bytes_needed;
    let mut lines = vec![format!(
        "vLLM needs --kv-cache-memory-bytes {} ({}) per rank for max_num_seqs {} at \
         max_model_len {}: {} B per block x ({} x {} blocks + the null block)",
        thousands(needed),
        human_bytes(needed),
        args.max_num_seqs,
        exported.max_model_len,
        thousands(widest),
        args.max_num_seqs,
        thousands(blocks)
    )];
    let Some(startup) = &exported.vllm_startup else {
        return lines;
    };
    let given = thousands(startup.kv_cache_memory_bytes);
    match &startup.outcome {
        StartupOutcome::Starts {
            bytes_per_block,
            num_blocks,
            blocks_per_request,
            ..
        } => {
            lines.push(format!(
                "vLLM start-up at --kv-cache-memory-bytes {given} per rank: {}",
                startup.message
            ));
            lines.push(format!(
                "  ({} blocks = {given} B // {} B per block, the null block among them as \
                 vLLM counts it; a request at max_model_len takes {})",
                thousands(*num_blocks),
                thousands(*bytes_per_block),
                thousands(*blocks_per_request)
            ));
        }
        StartupOutcome::Refused {
            tp_rank,
            pp_rank,
            needed_bytes,
            available_bytes,
            ..
        } => lines.push(format!(
            "vLLM would not start at --kv-cache-memory-bytes {given} per rank: rank tp={tp_rank} \
             pp={pp_rank} needs {} B for one request and has {} B after the null block; \
             ValueError: {}",
            thousands(*needed_bytes),
            thousands(*available_bytes),
            startup.message
        )),
        StartupOutcome::NoMemory {
            tp_rank,
            pp_rank,
            bytes_per_block,
        } => lines.push(format!(
            "vLLM would not start at --kv-cache-memory-bytes {given} per rank: rank tp={tp_rank} \
             pp={pp_rank} holds back one block ({} B, the null block) and has nothing left; \
             ValueError: {}",
            thousands(*bytes_per_block),
            startup.message
        )),
        _ => lines.push(startup.message.clone()),
    }
    lines
}

/// `rank tp=0 pp=1`, or `ranks tp=0-15 pp=0 (16 identical)`.
fn rank_set(ranks: &[(u64, u64)]) -> String {
    if let [(tp, pp)] = ranks {
        return format!("rank tp={tp} pp={pp}");
    }
    let mut stages: Vec<(u64, Vec<u64>)> = Vec::new();
    for (tp, pp) in ranks {
        match stages.iter_mut().find(|(stage, _)| stage == pp) {
            Some((_, tps)) => tps.push(*tp),
            None => stages.push((*pp, vec![*tp])),
        }
    }
    let parts: Vec<String> = stages
        .iter()
        .map(|(pp, tps)| {
            let contiguous = tps.windows(2).all(|w| w[1] == w[0] + 1);
            let tp = match (tps.first(), tps.last()) {
                (Some(first), Some(last)) if contiguous && first != last => {
                    format!("{first}-{last}")
                }
                _ => tps.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
            };
            format!("tp={tp} pp={pp}")
        })
        .collect();
    format!("ranks {} ({} identical)", parts.join(", "), ranks.len())
}

/// The cluster: every rank's bytes added up, and the largest rank (kv-core's).
fn cluster_line(cluster: &ExportedEstimateCluster) -> String {
    let shown = |b: u64| format!("{} B ({})", thousands(b), human_bytes(b));
    format!(
        "cluster: {} ranks, {} per row, {} at peak in all; largest rank {} at peak",
        cluster.totals.rank_count,
        shown(cluster.per_row_bytes),
        shown(cluster.totals.total_bytes),
        shown(cluster.totals.largest_device_bytes)
    )
}

pub(crate) fn to_json(estimated: &Estimated) -> Value {
    serde_json::to_value(&estimated.exported).unwrap_or(Value::Null)
}
