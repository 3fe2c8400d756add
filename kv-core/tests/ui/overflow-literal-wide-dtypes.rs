use kv_core::ModelLocalKv;

// All literals in f64 and f32: multiplied while expanding with their element
// sizes (8 and 4 bytes), each reported at its fixed row count by kv-core's
// checks (one type's checks stop at its first overflow, so two types).
#[derive(ModelLocalKv)]
#[kv(
    name = "doubles",
    cache = "EncoderDecoderCache",
    layers = 80, kv_heads = 8, head_dim = 128, dtype = f64,
    positions = bounded(1099511627776, because = "2^40 positions"),
    scope = session,
    rows = fixed(16, because = "one cache per session"),
)]
struct Encoder;

mod f32s {
use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
#[kv(
    name = "floats",
    cache = "EncoderDecoderCache",
    layers = 80, kv_heads = 8, head_dim = 128, dtype = f32,
    positions = bounded(1099511627776, because = "2^40 positions"),
    scope = session,
    rows = fixed(32, because = "one cache per session"),
)]
struct Encoder;
}

fn main() {}
