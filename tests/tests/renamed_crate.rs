//! A crate that depends on kv-core under another name points the derive at it
//! with `#[kv(crate = "...")]`.

use renamed_kv::declare::DeclaredKv;
use renamed_kv::ModelLocalKv;

#[derive(renamed_kv::ModelLocalKv)]
#[kv(crate = "renamed_kv")]
#[kv(
    name = "local_transformer",
    cache = "DynamicCache",
    layers = 16, kv_heads = 64, head_dim = 16, dtype = bf16,
    positions = bounded(11, because = "group_size 4 + max(delay_pattern) 7"),
    scope = invocation,
    rows = max_num_seqs,
)]
struct MimoLocalTransformer;

#[derive(renamed_kv::ModelLocalKv)]
#[kv(crate = "renamed_kv")]
struct MimoAudio {
    #[kv(child)]
    local: MimoLocalTransformer,
}

#[test]
fn the_derive_reaches_kv_core_through_the_renamed_path() {
    let decls = <MimoLocalTransformer as DeclaredKv>::KV_DECLS;
    assert_eq!(decls.static_specs[0].bytes_per_row(), Ok(720_896));
    let mut out = Vec::new();
    MimoLocalTransformer.kv_declare(&mut out).unwrap();
    assert_eq!(out[0].peak_bytes(3), Ok(3 * 720_896));
    let model = MimoAudio {
        local: MimoLocalTransformer,
    };
    let mut out = Vec::new();
    model.kv_declare(&mut out).unwrap();
    assert!(out.is_empty(), "the parent declares nothing itself");
}
