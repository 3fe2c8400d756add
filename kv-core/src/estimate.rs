//! Declarations estimated from an HF `config.json` alone (feature `json`),
//! for a checkpoint that has no annotated Rust yet: what vLLM would hold for
//! it, group by group. See [`estimate`].
//!
//! Files: `settings` (what an estimate is made with), `detect` (the
//! detection order), `vllm` (vLLM's sizing rules per kind of layer),
//! `max_len` and `refusals` (its length rule and what it will not start),
//! `pool` (its pool groups), `startup` (its start-up line), `lines` and
//! `export` (text and JSON). Other engines' profiles take the same detection:
//! `sglang` (SGLang 0.5.23's pools and lines).

mod detect;
mod export;
#[cfg(test)]
mod fixtures;
mod lines;
mod max_len;
mod pool;
mod refusals;
#[cfg(test)]
mod served;
mod settings;
mod sglang;
mod startup;
mod vllm;

pub use detect::{estimate, Estimate};
pub use export::{EstimateRank, ExportedEstimate, ExportedEstimateCluster, ExportedEstimateRank};
pub use lines::{charged_kinds, group_line, pool_line, totals_line};
pub use pool::{VllmPool, VllmPoolKind};
pub use settings::{
    EstimateSettings, VllmEngine, DEFAULT_BLOCK_SIZE, DEFAULT_MAX_NUM_BATCHED_TOKENS, VLLM_VERSION,
};
pub use sglang::{
    sglang_pools, SglangKvDtype, SglangKvPool, SglangMambaPool, SglangPools, SglangSettings,
    SGLANG_ENGINE,
};
pub use startup::{vllm_startup, StartupOutcome, VllmStartup};
