use kv_core::ModelLocalKv;

struct Linear;

#[derive(ModelLocalKv)]
struct Attention {
    #[kv(child)]
    q_proj: Linear,
}

fn main() {}
