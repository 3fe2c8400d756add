use kv_core::{DType, ModelLocalKv, StatePart};

static PARTS: [StatePart; 1] = [StatePart::mamba_ssm(8192, 16, DType::F16)];

// Recurrent state is per sequence: it holds no positions.
#[derive(ModelLocalKv)]
#[kv(
    name = "mamba",
    cache = "MambaCache",
    state = kv_core::RecurrentState::new(28, &PARTS),
    positions = bounded(4096, because = "max_model_len"),
    scope = request,
    rows = max_num_seqs,
)]
struct Jamba;

fn main() {}
