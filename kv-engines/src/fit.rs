//! Does it fit: a named GPU's memory and what an engine takes of it before
//! its KV pool, so that `kv fit` can size the pool from the checkpoint's
//! own headers instead of a budget the user must already know.
//!
//! - [`gpus`]: GPUs by name, with the memory `nvidia-smi` reports.
//! - [`sglang`]: SGLang 0.5.23's default `mem_fraction_static`, the memory
//!   its weights take once loaded, and the pool budget it profiles.

pub mod gpus;
pub mod sglang;
