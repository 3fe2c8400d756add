use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
enum Cache {
    Sliding,
    Static,
}

fn main() {}
