use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Model {
    #[kv(child)]
    layers: Vec<u32>,
}

fn main() {}
