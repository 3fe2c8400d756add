//! Three small models laid out as Rust engines lay theirs out, each run on
//! the CPU to its peak, each declared where its caches live:
//!
//! - [`pipeline`] over [`models::mistral`] and [`layers`]: mistral.rs's
//!   shape. The engine holds `Arc<Mutex<dyn Pipeline>>`, the pipeline a
//!   `Box<dyn NormalModel>`, the model an `EitherCache` whose normal case is
//!   `Arc<Mutex<NormalCache>>`, one `KvCache` per layer; the pipeline,
//!   the models and the layers are sibling modules, as in mistral.rs.
//! - [`models::llama`]: candle-transformers' llama. Its `Cache` is kept
//!   beside the model, not in it (two roots), with the rotary tables and a
//!   memo of one causal mask per prompt length beside the per-layer K/V.
//! - [`models::mimi`]: Mimi's streaming stages as trait objects, each a
//!   `candle_core::StreamingModule` holding its own state.
//!
//! Weights are zeros; every forward refuses to go past the bound its
//! declaration states, so each bound is true.

pub mod layers;
pub mod models;
pub mod peak;
pub mod pipeline;
