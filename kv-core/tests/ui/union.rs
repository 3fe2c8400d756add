use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
union Cache {
    sliding: u32,
    fixed: u64,
}

fn main() {}
