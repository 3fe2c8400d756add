use kv_core::{DType, ModelLocalKv, RecurrentState, StatePart};

// A const state with a zero dimension: d_state 0 holds nothing.
static PARTS: [StatePart; 2] = [
    StatePart::mamba_conv_transformers(8192, 4, DType::F16),
    StatePart::mamba_ssm(8192, 0, DType::F16),
];

#[derive(ModelLocalKv)]
#[kv(
    name = "mamba",
    cache = "MambaCache",
    state = RecurrentState::new(28, &PARTS),
    scope = request,
    rows = max_num_seqs,
)]
struct Jamba;

fn main() {}
