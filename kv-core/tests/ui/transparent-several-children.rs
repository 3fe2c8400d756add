use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
struct Talker;

// Both children at the wrapper's own path: their declarations would share
// full names.
#[derive(ModelLocalKv)]
#[kv(transparent)]
struct Wrapper {
    #[kv(child)]
    first: Talker,
    #[kv(child)]
    second: Talker,
}

fn main() {}
