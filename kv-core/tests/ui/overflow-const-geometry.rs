// A whole const geometry whose bytes per position overflow u64.
use kv_core::{DType, Geometry, ModelLocalKv};

const GEOMETRY: Geometry = Geometry::new(u64::MAX / 2, 4, 128, DType::F32);

#[derive(ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "StaticCache",
    geometry = GEOMETRY,
    positions = bounded(2048, because = "max_cache_len"),
    scope = request,
    rows = max_num_seqs,
)]
struct Decoder;

fn main() {}
