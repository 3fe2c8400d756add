//! The trial's mistake: a parent holds an owner but forgets `#[kv(child)]`,
//! and the owner's declarations would vanish from the report.
use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "sliding DynamicCache",
    layers = 8, kv_heads = 16, head_dim = 64, dtype = f32,
    positions = bounded(71, because = "sliding_window(72) - 1"),
    scope = request,
    rows = max_num_seqs,
)]
struct Decoder;

#[derive(ModelLocalKv)]
struct Model {
    hidden: usize,
    decoder: Decoder,
}

fn main() {
    let model = Model { hidden: 1, decoder: Decoder };
    let _ = (model.hidden, &model.decoder);
}
