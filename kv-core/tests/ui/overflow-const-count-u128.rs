// A const count of a wider type that does not fit in u64.
use kv_core::ModelLocalKv;

const POSITIONS: u128 = 1 << 64;

#[derive(ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "StaticCache",
    layers = 1,
    kv_heads = 1,
    head_dim = 1,
    dtype = u8,
    positions = bounded(POSITIONS, because = "max_cache_len"),
    scope = request,
    rows = max_num_seqs,
)]
struct Decoder;

fn main() {}
