use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
#[kv(crate = "kv_core")]
#[kv(crate = "::kv_core")]
struct Model;

fn main() {}
