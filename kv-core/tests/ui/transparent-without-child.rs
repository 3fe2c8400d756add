use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
#[kv(transparent)]
struct Wrapper {
    runnable: u8,
}

fn main() {}
