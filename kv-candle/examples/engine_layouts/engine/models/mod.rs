//! The models, each in a module of its own; what the pipeline asks of a
//! model is a trait, as mistral.rs's `NormalModel` is.

pub mod llama;
pub mod mimi;
pub mod mistral;

use candle_core::{Result, Tensor};
use kv_candle::Measure;
use kv_core::ModelLocalKv;

/// A decoder the pipeline drives. `ModelLocalKv` is a supertrait, so a
/// `Box<dyn NormalModel>` is visited through the trait: its caches are in
/// the report whichever model is loaded; `Measure`, so a test can weigh
/// what it holds.
pub trait NormalModel: ModelLocalKv + Measure + Send + Sync {
    /// One step for a batch `(batch, len, hidden)`.
    fn forward(&self, x: &Tensor) -> Result<Tensor>;

    /// The model as itself, for a caller that knows its type.
    fn as_any(&self) -> &dyn std::any::Any;
}
