// head_dim + v_head_dim overflows before any product.
use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
#[kv(
    name = "mla",
    cache = "latent cache",
    layers = 1,
    kv_heads = 1,
    head_dim = 18446744073709551615,
    v_head_dim = 1,
    dtype = u8,
    positions = bounded(1, because = "one position"),
    scope = request,
    rows = max_num_seqs,
)]
struct Attention;

fn main() {}
