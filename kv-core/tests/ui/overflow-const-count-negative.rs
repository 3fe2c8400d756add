// A const count of a signed type that is negative.
use kv_core::ModelLocalKv;

const LAYERS: i64 = -24;

#[derive(ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "StaticCache",
    layers = LAYERS,
    kv_heads = 1,
    head_dim = 1,
    dtype = u8,
    positions = bounded(1, because = "one position"),
    scope = request,
    rows = max_num_seqs,
)]
struct Decoder;

fn main() {}
