use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
#[kv(crate = "kv core")]
struct Decoder;

fn main() {}
