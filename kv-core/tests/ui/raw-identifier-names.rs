use kv_core::ModelLocalKv;

// `r#type` names the declaration `type`, as `name = "type"` does: a duplicate.
#[derive(ModelLocalKv)]
struct r#Encoder {
    #[kv(
    cache = "sliding DynamicCache",
    layers = 8,
    kv_heads = 16,
    head_dim = 64,
    dtype = f32,
    positions = bounded(71, because = "sliding_window(72) - 1"),
    scope = request,
    rows = max_num_seqs,
    )]
    r#type: (),
    #[kv(
        name = "type",
        cache = "sliding DynamicCache",
    layers = 8,
    kv_heads = 16,
    head_dim = 64,
    dtype = f32,
    positions = bounded(71, because = "sliding_window(72) - 1"),
    scope = request,
    rows = max_num_seqs,
    )]
    cross: (),
}

fn main() {}
