//! A const set of tensors is checked at compile time: a zero dimension, a
//! memo whose range is empty or whose reason is blank.
use kv_core::{DType, ModelLocalKv, TensorPart, Tensors};

const ZERO: &[TensorPart] = &[TensorPart::new("cos", [4096, 0, 1], DType::F32)];
const BLANK: &[TensorPart] = &[TensorPart::square_per_length("mask", 2, 4096, DType::U8, " ")];

#[derive(ModelLocalKv)]
#[kv(name = "rope", cache = "cos/sin tables", tensors = Tensors::new(ZERO), scope = model,
     rows = fixed(1, because = "one table"))]
#[kv(name = "masks", cache = "mask memo", tensors = Tensors::new(BLANK), scope = model,
     rows = fixed(1, because = "one memo"))]
struct Cache;

fn main() {}
