use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Draft;

#[derive(ModelLocalKv)]
struct Model {
    #[kv(skip, because = "  ")]
    draft: Draft,
}

fn main() {}
