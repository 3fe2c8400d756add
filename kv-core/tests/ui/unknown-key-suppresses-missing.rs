use kv_core::ModelLocalKv;

// `scpoe` is taken for `scope`: reported once, as unknown, not also as missing.
#[derive(ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "sliding DynamicCache",
    layers = 8,
    kv_heads = 16,
    head_dim = 64,
    dtype = f32,
    positions = bounded(71, because = "sliding_window(72) - 1"),
    scpoe = request,
    rows = max_num_seqs,
)]
struct Decoder;

fn main() {}
