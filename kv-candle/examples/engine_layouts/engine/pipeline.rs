//! The engine and its pipeline, as mistral.rs holds them: the engine keeps
//! `Arc<Mutex<dyn Pipeline>>`, the pipeline keeps the loaded model as a
//! `Box<dyn NormalModel>`. Neither knows the model's type; the report
//! reaches its caches through the traits.

use std::sync::{Arc, Mutex};

use candle_core::{bail, Result, Tensor};
use kv_candle::{Measure, Meter};
use kv_core::ModelLocalKv;

use crate::engine::models::NormalModel;

/// What the engine drives.
pub trait Pipeline: ModelLocalKv + Measure + Send {
    /// One scheduler step over a batch `(batch, len, hidden)`.
    fn step(&mut self, x: &Tensor) -> Result<Tensor>;

    /// The pipeline as itself, for a caller that knows its type.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// A pipeline of one plain model.
#[derive(ModelLocalKv)]
pub struct NormalPipeline {
    #[kv(child)]
    model: Box<dyn NormalModel>,
}

impl NormalPipeline {
    pub fn new(model: Box<dyn NormalModel>) -> Self {
        NormalPipeline { model }
    }
}

impl Measure for NormalPipeline {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        meter.add(&*self.model).map(drop)
    }
}

impl Pipeline for NormalPipeline {
    fn step(&mut self, x: &Tensor) -> Result<Tensor> {
        self.model.forward(x)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl NormalPipeline {
    /// The model it drives.
    pub fn model(&self) -> &dyn NormalModel {
        &*self.model
    }
}

/// The engine: its pipeline behind a lock, shared with its workers.
#[derive(ModelLocalKv)]
pub struct Engine {
    #[kv(child)]
    pub pipeline: Arc<Mutex<dyn Pipeline>>,
}

impl Engine {
    pub fn new(pipeline: impl Pipeline + 'static) -> Self {
        Engine {
            pipeline: Arc::new(Mutex::new(pipeline)),
        }
    }

    pub fn step(&self, x: &Tensor) -> Result<Tensor> {
        let Ok(mut pipeline) = self.pipeline.lock() else {
            bail!("the pipeline is poisoned")
        };
        pipeline.step(x)
    }
}
