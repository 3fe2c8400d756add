//! `kv estimate --engine llama.cpp MODEL.gguf`: what llama.cpp holds for a
//! GGUF model (`kv_engines::estimate::llamacpp`), printed as llama.cpp's own
//! cache lines.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kv_core::units::{human_bytes, thousands};
use kv_core::Storage;
use kv_engines::estimate::llamacpp::{
    estimate, FlashAttn, GgmlType, LlamaCppEstimate, LlamaCppSettings, LLAMACPP_COMMIT,
};
use kv_engines::gguf::GgufMetadata;
use serde_json::Value;

use crate::input::{regular_file, Problem};
use crate::message::usage_error;
use crate::output::{emit, emit_json_array, StdoutFailed};
use crate::Format;

/// llama.cpp's settings (with --engine llama.cpp), named as llama-server
/// names them; unset ones take its defaults.
#[derive(Clone, clap::Args)]
#[command(next_help_heading = "llama.cpp (--engine llama.cpp)")]
pub struct LlamaCppArgs {
    /// llama.cpp -c/--ctx-size: cells over all sequences (padded to 256);
    /// 0 or unset for the model's context_length.
    #[arg(long, value_name = "N")]
    ctx_size: Option<u32>,
    /// llama.cpp -np/--parallel: sequences (n_seq_max), 1 to 256; default 1.
    #[arg(long, value_name = "N")]
    parallel: Option<u32>,
    /// llama.cpp -ub/--ubatch-size: default 512.
    #[arg(long, value_name = "N")]
    ubatch_size: Option<u32>,
    /// llama.cpp -b/--batch-size: default 2048 (bounds the micro-batch).
    #[arg(long, value_name = "N")]
    batch_size: Option<u32>,
    /// llama.cpp -kvu/--kv-unified: one cache stream for every sequence.
    #[arg(long)]
    kv_unified: bool,
    /// llama.cpp --swa-full: the sliding-window cache at full size.
    #[arg(long)]
    swa_full: bool,
    /// llama.cpp -fa/--flash-attn: on, off or auto (default).
    #[arg(long, value_name = "on|off|auto", value_parser = parse_flash_attn)]
    flash_attn: Option<FlashAttn>,
    /// llama.cpp -ctk/--cache-type-k: f32, f16 (default), bf16, q8_0, q4_0,
    /// q4_1, q5_0, q5_1, iq4_nl.
    #[arg(long, value_name = "TYPE", value_parser = parse_type)]
    cache_type_k: Option<GgmlType>,
    /// llama.cpp -ctv/--cache-type-v: as --cache-type-k; a quantized V needs
    /// flash attention.
    #[arg(long, value_name = "TYPE", value_parser = parse_type)]
    cache_type_v: Option<GgmlType>,
}

impl LlamaCppArgs {
    /// llama.cpp's settings; `kv_format` (`--kv-format`, as vLLM's
    /// `--kv-cache-dtype` types K and V alike) is `-ctk T -ctv T` where T is
    /// a cache type llama.cpp takes, and is refused otherwise or beside
    /// either of them (exit 2).
    pub(crate) fn settings(&self, kv_format: Option<Storage>) -> LlamaCppSettings {
        let mut s = LlamaCppSettings::default();
        if let Some(storage) = kv_format {
            if let Some(flag) = [
                (self.cache_type_k.is_some(), "--cache-type-k"),
                (self.cache_type_v.is_some(), "--cache-type-v"),
            ]
            .into_iter()
            .find_map(|(given, flag)| given.then_some(flag))
            {
                usage_error(
                    clap::error::ErrorKind::ArgumentConflict,
                    &format!(
                        "--kv-format {storage} types K and V alike (llama.cpp's -ctk and -ctv); \
                         give it or {flag}, not both"
                    ),
                )
            }
            let Some(cache_type) = GgmlType::from_name(&storage.to_string()) else {
                usage_error(
                    clap::error::ErrorKind::ValueValidation,
                    &format!(
                        "invalid value for '--kv-format': {storage} is not a cache type llama.cpp \
                         takes; one of {}",
                        cache_type_names()
                    ),
                )
            };
            s.type_k = cache_type;
            s.type_v = cache_type;
        }
        s.n_ctx = self.ctx_size.unwrap_or(s.n_ctx);
        s.n_seq = self.parallel.unwrap_or(s.n_seq);
        s.n_ubatch = self.ubatch_size.unwrap_or(s.n_ubatch);
        s.n_batch = self.batch_size.unwrap_or(s.n_batch);
        s.kv_unified = self.kv_unified;
        s.swa_full = self.swa_full;
        s.flash_attn = self.flash_attn.unwrap_or(s.flash_attn);
        s.type_k = self.cache_type_k.unwrap_or(s.type_k);
        s.type_v = self.cache_type_v.unwrap_or(s.type_v);
        s
    }
}

fn parse_flash_attn(text: &str) -> Result<FlashAttn, String> {
    match text {
        "on" => Ok(FlashAttn::On),
        "off" => Ok(FlashAttn::Off),
        "auto" => Ok(FlashAttn::Auto),
        _ => Err(format!("`{text}` is not on, off or auto")),
    }
}

/// `f32, f16, bf16, q8_0, ...`: the cache types llama.cpp takes.
fn cache_type_names() -> String {
    let names: Vec<&str> = GgmlType::ALL.iter().map(|t| t.name()).collect();
    names.join(", ")
}

fn parse_type(text: &str) -> Result<GgmlType, String> {
    GgmlType::from_name(text).ok_or_else(|| {
        format!(
            "`{text}` is not a cache type llama.cpp takes here; one of {}",
            cache_type_names()
        )
    })
}

/// Estimates every GGUF file; `Ok(false)` when any could not be.
pub fn run(
    files: &[PathBuf],
    args: &LlamaCppArgs,
    kv_format: Option<Storage>,
    format: Format,
) -> Result<bool, StdoutFailed> {
    let settings = args.settings(kv_format);
    let mut done = Vec::new();
    let mut ok = true;
    for file in files {
        match estimate_file(file, &settings) {
            Ok(estimated) => {
                if format != Format::Json {
                    emit(&render(file, &estimated, format))?;
                }
                done.push((file, estimated));
            }
            Err(problem) => {
                problem.report();
                ok = false;
            }
        }
    }
    if format == Format::Json {
        let all: Vec<Value> = done
            .iter()
            .map(|(file, estimated)| {
                let mut value = serde_json::to_value(estimated).unwrap_or_default();
                if let Value::Object(map) = &mut value {
                    map.insert("source".to_owned(), file.display().to_string().into());
                }
                value
            })
            .collect();
        emit_json_array(all)?;
    }
    Ok(ok)
}

fn estimate_file(file: &Path, settings: &LlamaCppSettings) -> Result<LlamaCppEstimate, Problem> {
    // A FIFO would block the GGUF reader and a device never end it.
    regular_file(file)?;
    let meta = GgufMetadata::from_path(file).map_err(|e| Problem::new(file, e))?;
    estimate(&meta, settings).map_err(|e| Problem::new(file, e))
}

/// The settings llama.cpp settled on, in one line.
pub(crate) fn settings_line(e: &LlamaCppEstimate) -> String {
    format!(
        "llama.cpp {} (llama-cpp-python 0.3.36): {}, n_ctx {} ({} per sequence), {} sequence{}, \
         n_ubatch {}, flash attention {}",
        &LLAMACPP_COMMIT[..9],
        e.architecture,
        e.n_ctx,
        e.n_ctx_seq,
        e.n_seq,
        if e.n_seq == 1 { "" } else { "s" },
        e.n_ubatch,
        if e.flash_attn { "on" } else { "off" },
    )
}

fn render(file: &Path, e: &LlamaCppEstimate, format: Format) -> String {
    let settings = settings_line(e);
    let total = format!(
        "total: {} ({} B)",
        human_bytes(e.bytes()),
        thousands(e.bytes())
    );
    let mut out = String::new();
    if format == Format::Markdown {
        let _ = writeln!(out, "### `{}`\n\n{settings}\n\n```", file.display());
        for line in e.lines() {
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out, "```\n\n{total}\n");
    } else {
        let _ = writeln!(out, "{}\n  {settings}", file.display());
        for line in e.lines() {
            let _ = writeln!(out, "  {line}");
        }
        let _ = writeln!(out, "  {total}");
    }
    out
}
