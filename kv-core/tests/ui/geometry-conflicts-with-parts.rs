use kv_core::ModelLocalKv;

const GEOMETRY: kv_core::Geometry = kv_core::Geometry::new(8, 16, 64, kv_core::DType::F32);

#[derive(ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "sliding DynamicCache",
    positions = bounded(71, because = "sliding_window(72) - 1"),
    scope = request,
    rows = max_num_seqs,
    geometry = GEOMETRY,
    layers = 8,
)]
struct Decoder;

fn main() {}
