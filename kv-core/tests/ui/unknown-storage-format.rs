use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
#[kv(
    name = "kv",
    cache = "llama.cpp KV cache",
    layers = 32, kv_heads = 8, head_dim = 128, dtype = f16, kv_format = q8,
    positions = bounded(8192, because = "n_ctx"),
    scope = request,
    rows = max_num_seqs,
)]
struct Llama;

fn main() {}
