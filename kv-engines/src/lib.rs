//! For people sizing a checkpoint for an inference engine before serving
//! it, and for the `kv` command: what vLLM 0.33, SGLang 0.5.23 and llama.cpp
//! hold for an HF `config.json` or a GGUF header, by each engine's rules.
//! Model authors declaring the caches their own code holds, and engines
//! integrating the derive, want [kv-core](kv_core) instead; this crate
//! builds on its public API alone (declarations, collection, export,
//! [`HfConfig`](kv_core::HfConfig)).
//!
//! - [`estimate`]: what vLLM would hold for a `config.json`, group by group,
//!   its pool and start-up line; [`estimate::sglang`] and
//!   [`estimate::llamacpp`] for the other engines.
//! - [`gguf`]: a GGUF file's header, for llama.cpp's geometry, and its
//!   tensor infos.
//! - [`weights`]: a checkpoint's weights from its safetensors or GGUF
//!   headers.
//! - [`fit`]: named GPUs and each engine's memory budget around its pool.
//!
//! ```
//! use kv_engines::estimate::{estimate, EstimateSettings};
//!
//! let llama = serde_json::json!({
//!     "num_hidden_layers": 32, "num_key_value_heads": 8, "hidden_size": 4096,
//!     "num_attention_heads": 32, "torch_dtype": "bfloat16",
//! });
//! let e = estimate(&llama, &EstimateSettings::new().positions(8192))?;
//! // 32 layers x 8 KV heads x (128 + 128) x 2 bytes.
//! assert_eq!(e.collection()?.totals(256)?.per_position, 131_072);
//! # Ok::<(), kv_core::KvError>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod estimate;
pub mod fit;
pub mod gguf;
mod stored_tensor;
pub mod weights;
