//! Declarations estimated from an HF `config.json` alone, for a checkpoint
//! that has no annotated Rust yet: what vLLM would hold for it, group by
//! group. See [`estimate`].
//!
//! Files: `settings` (what an estimate is made with), `detect` (the
//! detection order), `families` (vLLM's rules per model family),
//! `vllm` (vLLM's sizing rules per kind of layer),
//! `max_len` and `refusals` (its length rule and what it will not start),
//! `indexer` (a sparse-attention model's indexer keys),
//! `pool` (its pool groups), `startup` (its start-up line), `lines` and
//! `export` (text and JSON).
//!
//! vLLM 0.33 is the default engine, its items at this path. Each other
//! engine is one public module of settings, rules and its own start-up lines:
//! [`sglang`] (SGLang 0.5.23, on kv's detection of a `config.json`) and
//! [`llamacpp`] (llama.cpp 0c1e57098, on a GGUF header).

mod deepseek_v4;
mod detect;
mod export;
mod families;
#[cfg(test)]
mod fixtures;
mod indexer;
mod inkling;
mod kda;
mod lines;
pub mod llamacpp;
mod max_len;
mod model_class;
pub(crate) mod moe_stages;
mod pool;
mod refusals;
#[cfg(test)]
mod served;
mod settings;
pub mod sglang;
mod startup;
mod step5;
mod vllm;

pub use detect::{estimate, Estimate};
pub use export::{
    EstimateRank, ExportedEstimate, ExportedEstimateCluster, ExportedEstimateRank, MAX_RANKS,
};
pub use lines::{charged_kinds, group_line, pool_line, totals_line};
pub use pool::{VllmPool, VllmPoolKind};
pub use settings::{
    EstimateSettings, VllmEngine, DEFAULT_BLOCK_SIZE, DEFAULT_MAX_NUM_BATCHED_TOKENS, VLLM_VERSION,
};
pub(crate) use startup::format_gib;
pub use startup::{vllm_startup, vllm_startup_by_stage, StartupOutcome, VllmStartup};
