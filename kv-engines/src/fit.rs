//! Does it fit: a named GPU's memory and what an engine takes of it before
//! its KV pool, so that `kv fit` can size the pool from the checkpoint's
//! own headers instead of a budget the user must already know.
//!
//! - [`tensors_from_config`]: a dense decoder's checkpoint tensors from its
//!   config alone, for `kv fit --weights-from-config`.
//! - [`gpus`]: GPUs by name, with the memory `nvidia-smi` reports.
//! - [`llamacpp`]: llama.cpp's model buffers for a GGUF file, per device,
//!   from its tensor infos.
//! - [`sglang`]: SGLang 0.5.23's default `mem_fraction_static`, the memory
//!   its weights take once loaded, and the pool budget it profiles.
//! - [`vllm`]: vLLM 0.33's KV budget: the memory its weights take once
//!   loaded, exact, and the parts its profile run measures, as inputs.

mod config;
mod from_config;
pub mod gpus;
pub mod llamacpp;
mod rotary;
pub mod sglang;
mod shard;
mod transformer_h;
pub mod vllm;

pub use from_config::{tensors_from_config, FROM_CONFIG_ARCHITECTURES};
