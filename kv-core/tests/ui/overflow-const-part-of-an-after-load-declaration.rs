use kv_core::ModelLocalKv;

// Rows are read after load, but the geometry and positions are const: their
// product is checked at compile time all the same.
#[derive(ModelLocalKv)]
#[kv(
    name = "streaming_encoder",
    cache = "EncoderDecoderCache",
    layers = 1u64 << 40, kv_heads = 1u64 << 10, head_dim = 64, dtype = bf16,
    positions = bounded(1u64 << 20, because = "embed_positions rows"),
    scope = session,
    rows = fixed(self.sessions, because = "one cache per duplex session"),
)]
struct Encoder {
    sessions: u32,
}

fn main() {}
