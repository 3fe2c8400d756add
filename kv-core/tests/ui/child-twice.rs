use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Leaf;

#[derive(ModelLocalKv)]
struct Model {
    #[kv(child)]
    #[kv(child)]
    talker: Leaf,
    #[kv(child, child)]
    decoder: Leaf,
}

fn main() {}
