use kv_core::ModelLocalKv;

const HEADS: u64 = 16;
const GROUPS: u64 = 16;

// Generic only over a lifetime: its const checks run under `cargo check` as
// for any concrete type.
#[derive(ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "sliding DynamicCache",
    layers = 8,
    kv_heads = HEADS - GROUPS,
    head_dim = 64,
    dtype = f32,
    positions = bounded(71, because = "sliding_window(72) - 1"),
    scope = request,
    rows = max_num_seqs,
)]
struct Decoder<'a> {
    config: &'a str,
}

fn main() {}
