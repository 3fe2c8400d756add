use kv_core::ModelLocalKv;

const CAPTURED_BUCKETS: usize = 0;

#[derive(ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "sliding DynamicCache",
    layers = 8,
    kv_heads = 16,
    head_dim = 64,
    dtype = f32,
    positions = bounded(71, because = "sliding_window(72) - 1"),
    scope = request,
    rows = fixed(CAPTURED_BUCKETS, because = "one row per captured bucket"),
)]
struct GraphPool;

fn main() {}
