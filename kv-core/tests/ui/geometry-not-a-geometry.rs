use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Talker {
    #[kv(
        cache = "StaticCache",
        geometry = self.config.num_layers,
        positions = bounded(2048, because = "hardcoded max_cache_len"),
        scope = invocation,
        rows = fixed(1, because = "calls are serialized"),
    )]
    cache: (),
    config: Config,
}

struct Config {
    num_layers: u32,
}

fn main() {}
