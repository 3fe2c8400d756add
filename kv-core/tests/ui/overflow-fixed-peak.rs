// Bytes per row fit (2^52); a fixed count of 2^13 rows makes the peak 2^65.
use kv_core::ModelLocalKv;

const SESSIONS: u64 = 1 << 13;

#[derive(ModelLocalKv)]
#[kv(
    name = "sessions",
    cache = "EncoderDecoderCache",
    layers = 1048576,
    kv_heads = 8,
    head_dim = 128,
    dtype = bf16,
    positions = bounded(1048576, because = "max_position_embeddings"),
    scope = session,
    rows = fixed(SESSIONS, because = "one cache per session"),
)]
struct Encoder;

fn main() {}
