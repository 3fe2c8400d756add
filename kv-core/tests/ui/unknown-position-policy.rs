use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "sliding DynamicCache",
    layers = 8, kv_heads = 16, head_dim = 64, dtype = f32,
    positions = window_minus_on(72),
    scope = request,
    rows = max_num_seqs,
)]
struct CodecDecoder;

fn main() {}
