use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Talker {
    #[kv(
        cache = "StaticCache",
        layers = 24, kv_heads = 2, head_dim = 64, dtype = self.torch_dtype,
        positions = bounded(2048, because = "hardcoded max_cache_len"),
        scope = invocation,
        rows = fixed(1, because = "calls are serialized"),
    )]
    cache: (),
    torch_dtype: &'static str,
}

fn main() {}
