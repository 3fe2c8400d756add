//! A variant's declarations follow every rule a struct's do, each reported
//! under its token; an enum cannot be `transparent`; a name is unique among
//! the type's own declarations and each variant's.
use kv_core::ModelLocalKv;

#[derive(ModelLocalKv)]
#[kv(transparent)]
#[kv(
    name = "graph",
    cache = "pool",
    layers = 1, kv_heads = 1, head_dim = 1, dtype = f32,
    positions = bounded(1, because = "one"),
    scope = model,
    rows = fixed(1, because = "one pool"),
)]
enum LayerCache {
    #[kv(
        name = "graph",
        cache = "static",
        layers = 1, kv_heads = 1, head_dim = 1, dtype = f32,
        positions = bounded(1, because = "one"),
        scope = request,
        rows = max_num_seqs,
    )]
    Static,
    #[kv(
        name = "zero",
        cache = "static",
        layers = 1, kv_heads = 1, head_dim = 1, dtype = f32,
        positions = bounded(0, because = "window"),
        scope = request,
        rows = max_num_seqs,
    )]
    Zero,
    #[kv(
        name = "kv",
        cache = " ",
        layers = 1, kv_heads = 1, head_dim = 1, dtype = f32,
        positions = bounded(window, because = "window"),
        scope = request,
        only_when = "enabled",
    )]
    Windowed { window: usize, on: bool },
    Tuple(#[kv(child, skip, because = "both")] u32),
}

fn main() {}
