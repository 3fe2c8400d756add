use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Model {
    #[kv(child, rows = max_num_seqs)]
    decoder: Decoder,
}

#[derive(ModelLocalKv)]
struct Decoder;

fn main() {}
