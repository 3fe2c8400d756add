use kv_core::ModelLocalKv;

// Four mistakes, all reported at once, each under its token: a policy
// written with brackets, a policy without its window (twice), a format one
// letter off.
#[derive(ModelLocalKv)]
#[kv(
    name = "brackets",
    cache = "sliding DynamicCache",
    layers = 8, kv_heads = 16, head_dim = 64, dtype = f32,
    positions = window_minus_one[72],
    scope = request,
    rows = max_num_seqs,
)]
#[kv(
    name = "empty",
    cache = "sliding DynamicCache",
    layers = 8, kv_heads = 16, head_dim = 64, dtype = f32,
    positions = window(),
    scope = request,
    rows = max_num_seqs,
)]
#[kv(
    name = "typo",
    cache = "llama.cpp KV cache",
    layers = 8, kv_heads = 16, head_dim = 64, kv_format = q4_2,
    positions = bounded(8, because = "n_ctx"),
    scope = request,
    rows = max_num_seqs,
)]
#[kv(
    name = "no_window",
    cache = "StaticSlidingWindowLayer",
    layers = 8, kv_heads = 16, head_dim = 64, dtype = f32,
    positions = window_capped(, max_cache_len = 4096),
    scope = request,
    rows = max_num_seqs,
)]
struct Typos;

fn main() {}
