use kv_core::ModelLocalKv;

// All literals: multiplied while expanding, reported at the fixed row count.
#[derive(ModelLocalKv)]
#[kv(
    name = "sessions",
    cache = "EncoderDecoderCache",
    layers = 80,
    kv_heads = 8,
    head_dim = 128,
    dtype = bf16,
    positions = bounded(1099511627776, because = "2^40 positions"),
    scope = session,
    rows = fixed(100, because = "one cache per session"),
)]
struct Encoder;

fn main() {}
