use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "sliding DynamicCache",
    layers = 8, kv_heads = 16, head_dim = 64, dtype = f32,
    positions = bounded(71, because = "sliding_window(72) - 1"),
    scope = request,
    rows = max_num_seqs,
    only_when = "async_chunk",
)]
struct Qwen3Tts {
    async_chunk: bool,
}

// 256 rows x 4.44 MiB = 1.11 GiB, over a 1 GiB ceiling. The declaration is
// gated on async_chunk and still counts.
kv_core::assert_kv_budget!(Qwen3Tts, max_num_seqs = 256, ceiling = kv_core::units::GIB);

fn main() {
    let _ = Qwen3Tts { async_chunk: true }.async_chunk;
}
