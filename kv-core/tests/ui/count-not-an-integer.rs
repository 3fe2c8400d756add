use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Talker {
    #[kv(
        cache = "StaticCache",
        layers = 24, kv_heads = 2, head_dim = 64, dtype = bf16,
        positions = bounded(self.max_len, because = "max_cache_len from the config"),
        scope = invocation,
        rows = fixed(1, because = "calls are serialized"),
    )]
    cache: (),
    max_len: String,
}

fn main() {}
