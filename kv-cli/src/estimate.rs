//! `kv estimate`: declarations estimated from HF configs (`kv_core::estimate::estimate`),
//! collected and divided per rank as a model's own would be.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kv_core::estimate::{EstimateRank, EstimateSettings, StartupOutcome};
use kv_core::export::{ExportedEstimate, ExportedEstimateCluster};
use kv_core::units::{human_bytes, thousands};
use kv_core::{KvError, Parallel, Storage, Table};
use serde_json::Value;

use crate::input::{emit, expand, read_config, Problem};
use crate::Format;

/// `kv estimate` arguments.
#[derive(clap::Args)]
pub struct Args {
    /// HF config.json files, or directories (every config.json under them,
    /// sorted); GGUF files with --engine llama.cpp.
    #[arg(required = true)]
    pub(crate) configs: Vec<PathBuf>,
    /// Whose rules: vllm (0.33, the default), sglang (0.5.23: its pools and
    /// start-up lines from --kv-cache-memory-bytes), or llama.cpp (0c1e57098:
    /// its cache lines from a GGUF header).
    #[arg(long, value_enum, default_value_t = Engine::Vllm)]
    engine: Engine,
    #[command(flatten)]
    pub(crate) sglang: crate::sglang::SglangArgs,
    #[command(flatten)]
    llamacpp: crate::llamacpp::LlamaCppArgs,
    /// Sequences in flight (vLLM max_num_seqs).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    max_num_seqs: u64,
    /// Positions per sequence (vLLM max_model_len); without it the model's
    /// length is derived as vLLM derives it (max_position_embeddings, ...), and said.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) positions: Option<u64>,
    /// Allows --positions above the model's length (vLLM's
    /// VLLM_ALLOW_LONG_MAX_MODEL_LEN=1); refused otherwise, as vLLM refuses it.
    #[arg(long)]
    allow_long_max_model_len: bool,
    /// vLLM num_speculative_tokens: each Mamba / Gated DeltaNet layer keeps
    /// one more state page per token, and Mamba2 / Gated DeltaNet conv states
    /// one more input.
    #[arg(long, default_value_t = 0)]
    speculative_tokens: u64,
    /// vLLM --no-enable-prefix-caching: Mamba cache mode none (1 state page)
    /// instead of align (2, or 3 with prefill checkpoints).
    #[arg(long)]
    no_prefix_caching: bool,
    /// vLLM --no-async-scheduling: one batch in flight instead of two, which
    /// sliding and chunked layers keep tokens for.
    #[arg(long)]
    no_async_scheduling: bool,
    /// How attention K/V and MLA latents are stored: a dtype (bf16, f8e4m3,
    /// ...), a block format (q8_0, q4_0, nvfp4, ...), or vLLM's
    /// --kv-cache-dtype name (fp8, fp8_e5m2, int8_per_token_head, ...).
    #[arg(long, visible_alias = "kv-cache-dtype", value_parser = parse_storage)]
    pub(crate) kv_format: Option<Storage>,
    /// Tensor-parallel size (1 to 4096): figures are per rank.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub(crate) tp: u64,
    /// Pipeline-parallel size (1 to 4096): figures are per rank.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub(crate) pp: u64,
    /// vLLM --decode-context-parallel-size (1 to 4096): the TP ranks that
    /// would hold copies of the same KV heads each hold cdiv(max_model_len,
    /// N) tokens of every full-attention and MLA row instead. vLLM's rules
    /// on TP, KV heads and layer kinds apply (a layout it refuses exits 2).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub(crate) dcp: u64,
    /// vLLM --cp-kv-cache-interleave-size: tokens stored on one DCP rank
    /// before the next; must divide the block size. Moves no figure.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    dcp_interleave: u64,
    /// vLLM block_size, in tokens.
    #[arg(long, default_value_t = kv_core::estimate::DEFAULT_BLOCK_SIZE, value_parser = clap::value_parser!(u64).range(1..))]
    block_size: u64,
    /// vLLM max_num_batched_tokens (bounds a sliding window's blocks).
    #[arg(long, default_value_t = kv_core::estimate::DEFAULT_MAX_NUM_BATCHED_TOKENS, value_parser = clap::value_parser!(u64).range(1..))]
    max_num_batched_tokens: u64,
    /// vLLM --kv-cache-memory-bytes (per rank), as vLLM reads it (1000000,
    /// 25.6k, 8g decimal; 8G binary): prints the start-up line vLLM would log
    /// (`GPU KV cache size: ...`), or the error it would raise.
    #[arg(long, value_name = "BYTES", value_parser = parse_memory_bytes)]
    pub(crate) kv_cache_memory_bytes: Option<u64>,
    /// KEY=VALUE given over every config (VALUE read as JSON, else as a
    /// string), e.g. sliding_window_pattern=6 or torch_dtype=bfloat16;
    /// SECTION.KEY=VALUE sets it in that section (text_config.layer_types=...).
    /// A key nothing reads is an error.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_set)]
    pub(crate) values: Vec<(String, Value)>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
}

fn parse_storage(name: &str) -> Result<Storage, String> {
    Storage::from_name(name).ok_or_else(|| {
        format!(
            "`{name}` is not a storage format kv knows; one of {}",
            Storage::names_list()
        )
    })
}

/// vLLM's `human_readable_int`: an integer, or a number with a decimal
/// suffix (k, m, g, t: 10^3..10^12, `int(float(number) * multiplier)`) or a
/// binary one (K, M, G, T: 2^10..2^40, whole numbers only). 0 is refused:
/// vLLM reads it as unset.
fn parse_memory_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let bytes = match text.char_indices().last() {
        Some((at, suffix)) if "kmgtKMGT".contains(suffix) => {
            let number = &text[..at];
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            let well_formed = match number.split_once('.') {
                Some((whole, fraction)) => digits(whole) && digits(fraction),
                None => digits(number),
            };
            if !well_formed {
                return Err(format!(
                    "`{text}` is not a byte count (e.g. 8589934592, 8G, 8.5g)"
                ));
            }
            let (decimal, binary_shift) = match suffix.to_ascii_lowercase() {
                'k' => (1e3, 10),
                'm' => (1e6, 20),
                'g' => (1e9, 30),
                _ => (1e12, 40),
            };
            if suffix.is_ascii_lowercase() {
                let scaled = number.parse::<f64>().map_err(|e| e.to_string())? * decimal;
                if scaled >= 18_446_744_073_709_551_616.0 {
                    return Err(format!("`{text}` is more bytes than kv counts (u64)"));
                }
                scaled as u64
            } else {
                if number.contains('.') {
                    return Err(format!(
                        "`{text}`: decimals are not allowed with binary suffixes like {suffix} \
                         (vLLM refuses them too); did you mean {number}{}?",
                        suffix.to_ascii_lowercase()
                    ));
                }
                number
                    .parse::<u64>()
                    .ok()
                    .and_then(|n| n.checked_mul(1u64 << binary_shift))
                    .ok_or_else(|| format!("`{text}` is more bytes than kv counts (u64)"))?
            }
        }
        _ => text
            .parse::<u64>()
            .map_err(|e| format!("`{text}` is not a byte count: {e}"))?,
    };
    if bytes == 0 {
        return Err("0 bytes: vLLM reads 0 as unset and profiles the GPU instead".to_owned());
    }
    Ok(bytes)
}

fn parse_set(text: &str) -> Result<(String, Value), String> {
    let Some((key, value)) = text.split_once('=') else {
        return Err(format!("`{text}` is not KEY=VALUE"));
    };
    if key.trim().is_empty() {
        return Err(format!("`{text}` has an empty key"));
    }
    let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
    Ok((key.trim().to_owned(), value))
}

/// One config's estimate, divided per rank by kv-core: the ranks (their
/// declarations, for the group lines) and the exported figures.
struct Estimated {
    exported: ExportedEstimate,
    ranks: Vec<EstimateRank>,
}

/// The engine whose rules `kv estimate` follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// vLLM 0.33.
    Vllm,
    /// SGLang 0.5.23.
    Sglang,
    /// llama.cpp 0c1e57098 (llama-cpp-python 0.3.36), from a GGUF header.
    #[value(name = "llama.cpp")]
    LlamaCpp,
}

pub fn run(args: &Args) -> bool {
    match (args.engine, args.llamacpp.first_given()) {
        (Engine::LlamaCpp, _) => {
            return crate::llamacpp::run(&args.configs, &args.llamacpp, args.format)
        }
        (_, Some(flag)) => clap::Error::raw(
            clap::error::ErrorKind::ArgumentConflict,
            format!("{flag} applies to --engine llama.cpp only\n"),
        )
        .exit(),
        (Engine::Sglang, None) => return crate::sglang::run(args),
        (Engine::Vllm, None) => {}
    }
    let (files, mut problems) = expand(&args.configs, Some("config.json"));
    for problem in &problems {
        problem.report();
    }
    let mut settings = EstimateSettings::new()
        .block_size(args.block_size)
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
    if let Some(storage) = args.kv_format {
        settings = settings.kv_format(storage);
    }
    for (key, value) in &args.values {
        settings = settings.set(key, value.clone());
    }
    let mut done = Vec::new();
    for file in &files {
        match estimate_file(file, &settings, args) {
            Ok(estimated) => {
                if args.format != Format::Json {
                    emit(&render(&estimated, args));
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
        let all: Vec<Value> = done.iter().map(to_json).collect();
        let text = serde_json::to_string_pretty(&Value::Array(all)).unwrap_or_default();
        emit(&(text + "\n"));
    }
    problems.is_empty()
}

fn estimate_file(
    file: &Path,
    settings: &EstimateSettings,
    args: &Args,
) -> Result<Estimated, Vec<Problem>> {
    let config = read_config(file).map_err(|p| vec![p])?;
    let estimate = kv_core::estimate::estimate(&config, settings).map_err(|e| {
        e.into_problems()
            .into_iter()
            .map(|e| problem(file, e, args))
            .collect::<Vec<_>>()
    })?;
    let mut estimated = estimated(file, estimate, args).map_err(|p| vec![p])?;
    if let Some(bytes) = args.kv_cache_memory_bytes {
        let layout = Parallel::new(args.tp, args.pp).map_err(|e| vec![Problem::new(file, e)])?;
        let startup = kv_core::estimate::vllm_startup(&config, settings, layout, bytes)
            .map_err(|e| vec![Problem::new(file, e)])?;
        estimated.exported = estimated.exported.with_vllm_startup(startup);
    }
    Ok(estimated)
}

/// A value a flag gave that cannot be used (a length the model refuses, a
/// KV format vLLM refuses for the model): bad usage, exit 2.
fn usage(file: &Path, flag: &str, problem: &str) -> ! {
    let problem = problem.strip_prefix("kv: ").unwrap_or(problem);
    clap::Error::raw(
        clap::error::ErrorKind::ValueValidation,
        format!(
            "invalid value for '{flag}': {}: {problem}\n",
            file.display()
        ),
    )
    .exit()
}

/// A --tp/--pp/--dcp layout vLLM would not start with: bad usage, exit 2.
fn refused_layout(file: &Path, problem: &str) -> ! {
    clap::Error::raw(
        clap::error::ErrorKind::ArgumentConflict,
        format!(
            "the layout --tp/--pp/--dcp/--dcp-interleave is refused: {}: {problem}\n",
            file.display()
        ),
    )
    .exit()
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
        } if args.kv_format.is_some() => clap::Error::raw(
            clap::error::ErrorKind::ValueValidation,
            format!(
                "invalid value for '--kv-format': {}: {problem}\n",
                file.display()
            ),
        )
        .exit(),
        KvError::Config {
            what: "kv_format", ..
        } => Problem::new(file, error),
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
        KvError::Config { .. } => Problem::new(
            file,
            format!("{error}; on the command line, give a key with --set KEY=VALUE"),
        ),
        _ => Problem::new(file, error),
    }
}

fn estimated(
    file: &Path,
    estimate: kv_core::estimate::Estimate,
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

fn render(estimated: &Estimated, args: &Args) -> String {
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
                    kv_core::estimate::totals_line(&rank.totals, args.max_num_seqs)
                );
                let _ = writeln!(
                    out,
                    "- {name}: {}",
                    kv_core::estimate::pool_line(&rank.pool, &rank.totals, args.max_num_seqs)
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
                        kv_core::estimate::group_line(&entry.spec, args.max_num_seqs)
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
                    kv_core::estimate::totals_line(&rank.totals, args.max_num_seqs)
                );
                let _ = writeln!(
                    body,
                    "{indent}{}",
                    kv_core::estimate::pool_line(&rank.pool, &rank.totals, args.max_num_seqs)
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

fn to_json(estimated: &Estimated) -> Value {
    serde_json::to_value(&estimated.exported).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::parse_memory_bytes;

    #[test]
    fn memory_bytes_read_as_vllms_human_readable_int() {
        for (text, bytes) in [
            ("1000000", 1_000_000),
            (" 7 ", 7),
            ("1k", 1_000),
            ("25.6k", 25_600),
            ("2m", 2_000_000),
            ("8g", 8_000_000_000),
            ("1.5t", 1_500_000_000_000),
            ("1K", 1 << 10),
            ("2M", 2 << 20),
            ("8G", 8 << 30),
            ("3T", 3 << 40),
            // int(float("0.0015") * 1000) = int(1.5) = 1.
            ("0.0015k", 1),
        ] {
            assert_eq!(parse_memory_bytes(text), Ok(bytes), "{text}");
        }
        for (text, why) in [
            ("0", "vLLM reads 0 as unset"),
            ("0k", "vLLM reads 0 as unset"),
            ("1.5G", "did you mean 1.5g?"),
            ("G", "is not a byte count"),
            ("1.k", "is not a byte count"),
            ("-1k", "is not a byte count"),
            ("8x", "is not a byte count"),
            ("16777216T", "more bytes than kv counts"),
            ("18446744073709551.616k", "more bytes than kv counts"),
        ] {
            let error = parse_memory_bytes(text).unwrap_err();
            assert!(error.contains(why), "{text}: {error}");
        }
        // The largest binary count that fits: 2^24 - 1 tebibytes.
        assert_eq!(parse_memory_bytes("16777215T"), Ok(16_777_215 << 40));
    }
}
