//! What each reader does with one input, as `kv` would do it: read, then
//! size at a few settings, then render. Each outcome is what a run checks.

use kv_core::export::{ClusterReport, ExportedReport};
use kv_core::{Parallel, Table};
use kv_engines::estimate::llamacpp::{self, FlashAttn, GgmlType, LlamaCppSettings};
use kv_engines::estimate::sglang::{sglang_pools, SglangSettings};
use kv_engines::estimate::{estimate, vllm_startup, EstimateSettings};
use kv_engines::gguf::GgufMetadata;
use serde_json::Value;

/// One figure or one refusal.
#[derive(Debug)]
pub enum Outcome {
    /// A figure: `bytes` for a model of `layers` layers (0 where the input
    /// gives none), made by `what`.
    Sized {
        what: &'static str,
        bytes: u64,
        layers: u64,
    },
    /// An error, as `kv` would print it.
    Refused(String),
    /// Read and rendered, with no figure to check (a report).
    Read,
}

/// The readers fuzzed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `kv estimate --engine llama.cpp MODEL.gguf`.
    Gguf,
    /// `kv estimate config.json` (vLLM, its start-up line) and `--engine sglang`.
    Config,
    /// `kv table` and `kv merge` of report JSON.
    Report,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Gguf => "gguf",
            Target::Config => "config",
            Target::Report => "report",
        }
    }

    pub fn from_name(name: &str) -> Option<Target> {
        [Target::Gguf, Target::Config, Target::Report]
            .into_iter()
            .find(|t| t.name() == name)
    }

    /// What the reader makes of `data`; `flags` are the values a case gives
    /// the command's flags (`--block-size`, `--positions`, `--tp`, ...).
    pub fn run(self, data: &[u8], other_rank: Option<&[u8]>, flags: &Flags) -> Vec<Outcome> {
        match self {
            Target::Gguf => gguf(data, flags),
            Target::Config => config(data, flags),
            Target::Report => report(data, other_rank.unwrap_or_default()),
        }
    }
}

/// Flag values a case sets beside the defaults, each on a boundary.
#[derive(Clone, Debug)]
pub struct Flags {
    pub block_size: u64,
    pub positions: u64,
    pub tensor_parallel: u64,
    pub max_num_seqs: u64,
    pub kv_cache_memory_bytes: u64,
    pub n_ctx: u32,
    pub n_seq: u32,
    pub n_ubatch: u32,
}

fn refused(error: impl ToString) -> Outcome {
    Outcome::Refused(error.to_string())
}

fn gguf(data: &[u8], flags: &Flags) -> Vec<Outcome> {
    let meta = match GgufMetadata::read(data, "case.gguf") {
        Ok(meta) => meta,
        Err(error) => return vec![refused(error)],
    };
    let layers = meta
        .architecture()
        .ok()
        .and_then(|arch| meta.get(&format!("{arch}.block_count")))
        .and_then(|value| value.as_count())
        .unwrap_or(0);
    let mut settings = vec![LlamaCppSettings::default()];
    let mut small = LlamaCppSettings::default();
    small.n_ctx = flags.n_ctx;
    small.n_seq = flags.n_seq;
    small.n_ubatch = flags.n_ubatch;
    small.swa_full = true;
    settings.push(small);
    let mut quantized = LlamaCppSettings::default();
    quantized.n_ctx = u32::MAX;
    quantized.kv_unified = true;
    quantized.flash_attn = FlashAttn::On;
    quantized.type_k = GgmlType::Q8_0;
    quantized.type_v = GgmlType::Q4_0;
    settings.push(quantized);
    settings
        .iter()
        .map(|settings| match llamacpp::estimate(&meta, settings) {
            Ok(estimate) => {
                std::hint::black_box(estimate.lines().join("\n"));
                Outcome::Sized {
                    what: "llama.cpp's memory",
                    bytes: estimate.bytes(),
                    layers,
                }
            }
            Err(error) => refused(error),
        })
        .collect()
}

/// The layer count a config states, at its top or in `text_config`.
fn layers_of(config: &Value) -> u64 {
    let keys = [
        "num_hidden_layers",
        "n_layer",
        "num_layers",
        "n_layers",
        "decoder_layers",
    ];
    [config, &config["text_config"]]
        .iter()
        .flat_map(|section| keys.iter().filter_map(|key| section[key].as_u64()))
        .max()
        .unwrap_or(0)
}

fn config(data: &[u8], flags: &Flags) -> Vec<Outcome> {
    let config: Value = match serde_json::from_slice(data) {
        Ok(config) => config,
        Err(error) => return vec![refused(error)],
    };
    let layers = layers_of(&config);
    let mut outcomes = Vec::new();
    for (tp, settings) in [
        (1, EstimateSettings::new()),
        (
            flags.tensor_parallel,
            EstimateSettings::new()
                .positions(flags.positions)
                .tensor_parallel(flags.tensor_parallel)
                .block_size(flags.block_size),
        ),
    ] {
        let layout = match Parallel::new(tp, 1) {
            Ok(layout) => layout,
            Err(error) => {
                outcomes.push(refused(error));
                continue;
            }
        };
        let made = match estimate(&config, &settings) {
            Ok(made) => made,
            Err(error) => {
                outcomes.push(refused(error));
                continue;
            }
        };
        outcomes.push(match made.export("case.json", layout, flags.max_num_seqs) {
            Ok(exported) => Outcome::Sized {
                what: "vLLM's estimate",
                bytes: exported.cluster.totals.total_bytes,
                layers,
            },
            Err(error) => refused(error),
        });
        outcomes.push(
            match vllm_startup(&config, &settings, layout, flags.kv_cache_memory_bytes) {
                Ok(startup) => {
                    std::hint::black_box(format!("{startup:?}"));
                    Outcome::Read
                }
                Err(error) => refused(error),
            },
        );
        if tp == 1 {
            outcomes.push(
                match sglang_pools(&config, &made, &SglangSettings::default(), 8 << 30) {
                    Ok(pools) => {
                        std::hint::black_box(pools.lines());
                        Outcome::Sized {
                            what: "SGLang's full pool",
                            bytes: pools.full.k_bytes.saturating_add(pools.full.v_bytes),
                            layers,
                        }
                    }
                    Err(error) => refused(error),
                },
            );
        }
    }
    outcomes
}

fn report(data: &[u8], other_rank: &[u8]) -> Vec<Outcome> {
    let read = |bytes: &[u8]| -> Result<ExportedReport, String> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        serde_json::from_value(value).map_err(|e| e.to_string())
    };
    let (mine, other) = match (read(data), read(other_rank)) {
        (Ok(mine), Ok(other)) => (mine, other),
        (Err(error), _) | (_, Err(error)) => return vec![Outcome::Refused(error)],
    };
    let table = Table::new(16).report(&mine).to_markdown();
    std::hint::black_box(table);
    vec![
        match ClusterReport::merge_labelled([("a.json", mine), ("b.json", other)]) {
            Ok(cluster) => {
                std::hint::black_box(cluster.to_string());
                Outcome::Read
            }
            Err(error) => refused(error),
        },
    ]
}
