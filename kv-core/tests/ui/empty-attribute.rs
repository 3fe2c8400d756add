use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
#[kv()]
struct Decoder;

fn main() {}
