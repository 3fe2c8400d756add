// Every literal fits in u64; layers x kv_heads x (head_dim + v_head_dim)
// x dtype does not.
use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Decoder {
    #[kv(
        cache = "StaticCache",
        layers = 18446744073709551615,
        kv_heads = 2,
        head_dim = 64,
        dtype = bf16,
        positions = bounded(1, because = "one position"),
        scope = request,
        rows = max_num_seqs,
    )]
    cache: (),
}

fn main() {}
