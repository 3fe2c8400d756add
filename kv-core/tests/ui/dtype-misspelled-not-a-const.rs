use kv_core::{DType, ModelLocalKv};

// `bf61` is a misspelled dtype name; `my_dtype` (below, in ui-pass) is a const.
#[allow(non_upper_case_globals)]
const bf61: DType = DType::BF16;

#[derive(ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "sliding DynamicCache",
    layers = 8,
    kv_heads = 16,
    head_dim = 64,
    dtype = bf61,
    positions = bounded(71, because = "sliding_window(72) - 1"),
    scope = request,
    rows = max_num_seqs,
)]
struct Decoder;

fn main() {}
