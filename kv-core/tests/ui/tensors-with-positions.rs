//! Tensors beside the caches have their own shapes and no positions.
use kv_core::{DType, ModelLocalKv, TensorPart};

const ROPE: &[TensorPart] = &[TensorPart::new("cos", [4096, 64, 1], DType::F32)];

#[derive(ModelLocalKv)]
#[kv(
    name = "rope",
    cache = "cos/sin tables",
    tensors = kv_core::Tensors::new(ROPE),
    layers = 32,
    positions = bounded(4096, because = "max_position_embeddings"),
    scope = model,
    rows = fixed(1, because = "one table"),
)]
struct Cache;

fn main() {}
