//! A parking_lot lock without kv-core's `parking_lot` feature: the error
//! says which feature, and never asks to derive on another crate's type.
use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct NormalCache;

#[derive(ModelLocalKv)]
struct Model {
    #[kv(child)]
    cache: std::sync::Arc<parking_lot::Mutex<NormalCache>>,
}

fn main() {}
