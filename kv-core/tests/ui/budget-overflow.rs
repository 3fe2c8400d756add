use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
#[kv(
    name = "cache",
    cache = "StaticCache",
    layers = 24, kv_heads = 2, head_dim = 64, dtype = bf16,
    positions = bounded(2048, because = "max_cache_len"),
    scope = request,
    rows = max_num_seqs,
)]
struct Wide;

// 24 MiB a row times u64::MAX rows overflows u64: never within a budget.
kv_core::assert_kv_budget!(Wide, max_num_seqs = u64::MAX, ceiling = u64::MAX);

fn main() {}
