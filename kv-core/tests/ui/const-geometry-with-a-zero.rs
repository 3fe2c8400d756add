// A whole const geometry with a zero dimension: the derive cannot see the
// value, so the const check refuses it, pointing at the geometry.
use kv_core::{DType, Geometry, ModelLocalKv};

const GEOMETRY: Geometry = Geometry::new(32, 0, 128, DType::F32);

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
