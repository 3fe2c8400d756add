use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Talker {
    #[kv(
        cache = "StaticCache",
        layers = self.layers, kv_heads = 2, head_dim = 64, dtype = bf16,
        positions = bounded(2048, because = "hardcoded max_cache_len"),
        scope = invocation,
        rows = fixed(1, because = "calls are serialized"),
    )]
    cache: (),
    layers: f32,
}

fn main() {}
