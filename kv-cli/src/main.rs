//! `kv`: model-local KV for people who have a checkpoint but no annotated
//! Rust yet, and for engines' logs.
//!
//! - `kv estimate CONFIG.json...`: what vLLM holds for each HF config
//!   (`kv_engines::estimate::estimate`), one llama.cpp-style line per group;
//!   with `--engine llama.cpp`, what llama.cpp holds for each GGUF file.
//! - `kv fit CHECKPOINT --engine sglang --gpu H100 --avail-mem-gb 78.43`:
//!   SGLang's pools for a checkpoint on a GPU, from its weights' headers.
//! - `kv merge rank*.json`: per-rank reports as one cluster view
//!   (`kv_core::export::ClusterReport`).
//! - `kv table REPORT.json`: a report (`Collection::export`'s JSON) as a table.
//!
//! Exit codes: 0 for success, 1 for bad input (each problem one line
//! `kv: FILE: ...` on stderr; the other files are still reported) or a
//! failed write to stdout (`output::StdoutFailed`), 2 for bad usage (clap's,
//! and a flag the chosen engine does not read: `flags`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Subcommand, ValueEnum};

mod estimate;
mod estimate_args;
mod fit;
mod fit_llamacpp;
mod fit_plot;
mod fit_sglang;
mod fit_shared;
mod fit_vllm;
mod flags;
mod input;
mod llamacpp;
mod merge;
mod message;
mod output;
mod same_model;
mod sglang;
mod strict;
mod table;

#[derive(clap::Parser)]
#[command(
    name = "kv",
    version,
    about = "Model-local KV: estimate, fit, merge, table"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// How results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned text, llama.cpp-style KV lines.
    Text,
    /// GitHub-flavoured Markdown.
    Markdown,
    /// JSON on stdout.
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Estimates, from HF config.json files, what vLLM holds per position, per
    /// row and at peak, group by group.
    Estimate(Box<estimate_args::Args>),
    /// Does a checkpoint fit a named GPU: its weights per rank from the
    /// checkpoint's safetensors headers, the engine's memory budget for the
    /// GPU (vLLM 0.33's, or SGLang 0.5.23's default mem_fraction_static),
    /// the KV cache that leaves, and the lines the engine would log; for
    /// llama.cpp, a GGUF's model and KV buffers on the GPU from its tensor
    /// infos, and what its --fit margin leaves for the compute buffer.
    Fit(Box<fit::Command>),
    /// Merges per-rank reports (Collection::export JSON) into one cluster view.
    Merge {
        /// The reports, one per rank (files, or directories of *.json).
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        #[command(flatten)]
        read: input::ReadLimit,
    },
    /// Prints a report (Collection::export JSON) as a table.
    Table {
        /// The report.
        report: PathBuf,
        /// Markdown instead of aligned text (the same as --format markdown;
        /// refused beside --format, which it would override).
        #[arg(long, conflicts_with = "format")]
        markdown: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        #[command(flatten)]
        read: input::ReadLimit,
    },
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let ok = match cli.command {
        Command::Estimate(args) => {
            // Which flags were given (not defaulted) is known only here.
            if let Some(given) = matches.subcommand_matches("estimate") {
                flags::refuse_foreign_flags(given, args.engine, args.format);
            }
            estimate::run(&args)
        }
        Command::Fit(command) => {
            if let Some(given) = matches.subcommand_matches("fit") {
                flags::refuse_foreign_flags(
                    given,
                    command.estimate.engine,
                    command.estimate.format,
                );
            }
            fit::run(&command)
        }
        Command::Merge {
            reports,
            format,
            read,
        } => merge::run(&reports, format, read.max_file_bytes),
        Command::Table {
            report,
            markdown,
            format,
            read,
        } => table::run(
            &report,
            if markdown { Format::Markdown } else { format },
            read.max_file_bytes,
        ),
    };
    match ok {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(failed) => failed.exit_code(),
    }
}
