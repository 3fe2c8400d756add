//! Configs built in tests, shared by the unit tests of `estimate` and by
//! `tests/estimate_published.rs` and `tests/estimate_pool.rs` (which include
//! this file by path).

use std::path::PathBuf;

use serde_json::{json, Value};

/// A config shipped in `examples/configs`.
pub(super) fn shipped(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/configs")
        .join(name)
        .join("config.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `config` with each of `extra`'s keys set over it.
pub(super) fn with_keys(mut config: Value, extra: Value) -> Value {
    if let (Some(map), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
        for (key, value) in extra {
            map.insert(key.clone(), value.clone());
        }
    }
    config
}

/// A two-layer Llama (4 heads, 2 KV heads of 64, bf16), with `extra`'s keys.
pub(super) fn tiny(extra: Value) -> Value {
    with_keys(
        json!({
            "model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 64, "torch_dtype": "bfloat16"
        }),
        extra,
    )
}
