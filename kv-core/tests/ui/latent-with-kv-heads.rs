use kv_core::ModelLocalKv;

// An MLA latent is shared by every head: it has no KV heads of its own.
#[derive(ModelLocalKv)]
#[kv(
    name = "latent",
    cache = "MLA latent",
    latent = kv_core::Latent::new(27, 512, 64, kv_core::DType::BF16),
    kv_heads = 16,
    positions = bounded(4096, because = "max_model_len"),
    scope = request,
    rows = max_num_seqs,
)]
struct DeepSeek;

fn main() {}
