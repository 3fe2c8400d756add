// Checked with `cargo check` only (no pass case in this suite, so trybuild
// does not build): the const rules must fire without codegen, as in an IDE.
// layers = u64::MAX / 2 through a const: bytes per position still fit
// (u64::MAX - 1), two positions do not.
use kv_core::ModelLocalKv;

const LAYERS: u64 = u64::MAX / 2;

#[derive(ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "StaticCache",
    layers = LAYERS,
    kv_heads = 1,
    head_dim = 1,
    dtype = u8,
    positions = bounded(2, because = "two decode positions"),
    scope = request,
    rows = max_num_seqs,
)]
struct Decoder;

fn main() {}
