//! The attribute forms the seed's models use, all accepted.
use kv_core::ModelLocalKv;
use kv_core::declare::DeclaredKv;

const BUCKETS: [u64; 9] = [1, 2, 4, 6, 8, 16, 32, 64, 128];
const fn bucket_sum() -> u64 {
    let mut sum = 0;
    let mut i = 0;
    while i < BUCKETS.len() {
        sum += BUCKETS[i];
        i += 1;
    }
    sum
}

#[derive(ModelLocalKv)]
#[kv(
    name = "graph_pool",
    cache = "captured DynamicCache per bucket",
    layers = 16, kv_heads = 64, head_dim = 1024 / 64, dtype = bf16,
    positions = bounded(4 + 7, because = "group_size 4 + max(delay_pattern) 7"),
    scope = model,
    rows = fixed(bucket_sum(), because = "sum of captured buckets (1,2,4,6,8,16,32,64,128)"),
    note = "one DynamicCache per captured bucket",
)]
struct MimoGraphPool;

#[derive(ModelLocalKv)]
struct Talker(
    #[kv(
        name = "static_cache",
        cache = "StaticCache",
        geometry = self.1,
        positions = bounded(2048, because = "hardcoded max_cache_len"),
        scope = invocation,
        rows = fixed(1, because = "calls are serialized"),
    )]
    (),
    kv_core::Geometry,
);

#[derive(ModelLocalKv)]
#[kv(transparent)]
struct GraphWrapper {
    #[kv(child)]
    runnable: std::sync::Arc<Talker>,
}

const _: () = assert!(<MimoGraphPool as DeclaredKv>::KV_DECLS.static_specs.len() == 1);

fn main() {
    let talker = Talker((), kv_core::Geometry::new(24, 2, 64, kv_core::DType::BF16));
    let mut out = Vec::new();
    talker.kv_declare(&mut out).unwrap();
    assert_eq!(out[0].peak_bytes(1), Ok(25_165_824));
    let _ = GraphWrapper { runnable: std::sync::Arc::new(talker) };
}
