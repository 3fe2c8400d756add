use kv_core::ModelLocalKv;

// transformers' static sliding cache keeps min(W, max_cache_len): both are inputs.
#[derive(ModelLocalKv)]
#[kv(
    name = "sliding",
    cache = "StaticSlidingWindowLayer",
    layers = 52, kv_heads = 16, head_dim = 128, dtype = bf16,
    positions = window_capped(1024),
    scope = request,
    rows = max_num_seqs,
)]
struct Gemma3;

fn main() {}
