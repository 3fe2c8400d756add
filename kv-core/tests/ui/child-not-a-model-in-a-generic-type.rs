// In a generic type only children whose type names a parameter get an
// inferred `KvChild` bound; a concrete child is checked where it is visited,
// with the same message as in a plain type.
use kv_core::ModelLocalKv;

struct Linear;

#[derive(ModelLocalKv)]
struct Wrapper<M> {
    #[kv(child)]
    inner: M,
    #[kv(child)]
    q_proj: Linear,
}

fn main() {}
