use kv_core::ModelLocalKv;

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
    rows = max_num_seqs,
    only_when = "async_chunk",
)]
struct Decoder {
    chunk_size: usize,
}

fn main() {}
