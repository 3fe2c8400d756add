//! Geometry from a Qwen2/Qwen3-style HF `config.json`. Private and small on
//! purpose: kv-core is growing a shared reader, which will replace this.

use kv_core::{DType, Geometry, KvError};
use serde_json::{Map, Value};

/// What the caches here need from a config.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ModelConfig {
    /// Layers, KV heads and head dim; dtype from `torch_dtype`.
    pub geometry: Geometry,
    /// `sliding_window`, where the config has a positive one.
    pub sliding_window: Option<u64>,
}

const LAYERS: &[&str] = &["num_hidden_layers", "encoder_layers", "num_layers"];
const KV_HEADS: &[&str] = &[
    "num_key_value_heads",
    "num_attention_heads",
    "encoder_attention_heads",
];
const HIDDEN: &[&str] = &["hidden_size", "d_model"];
const HEADS: &[&str] = &["num_attention_heads", "encoder_attention_heads"];

/// Reads a config's text. A missing key is an error naming every key tried.
pub(crate) fn parse(text: &str) -> Result<ModelConfig, KvError> {
    let value: Value = serde_json::from_str(text).map_err(|e| KvError::ConfigFile {
        path: "<config.json text>".into(),
        problem: e.to_string(),
    })?;
    let Value::Object(map) = value else {
        return Err(KvError::ConfigFile {
            path: "<config.json text>".into(),
            problem: "the top level is not a JSON object".into(),
        });
    };
    let layers = first_count(&map, "layers", LAYERS)?;
    let kv_heads = first_count(&map, "kv_heads", KV_HEADS)?;
    let head_dim = match count_at(&map, "head_dim", "head_dim")? {
        Some(dim) => dim,
        None => {
            let hidden =
                first_count(&map, "head_dim", HIDDEN).map_err(|e| head_dim_error(e, HIDDEN))?;
            let heads =
                first_count(&map, "head_dim", HEADS).map_err(|e| head_dim_error(e, HEADS))?;
            if hidden % heads != 0 {
                return Err(KvError::Config {
                    what: "head_dim",
                    problem: format!(
                        "no `head_dim`, and hidden size {hidden} is not a multiple of {heads} heads"
                    ),
                });
            }
            hidden / heads
        }
    };
    let dtype = match map.get("torch_dtype").or_else(|| map.get("dtype")) {
        Some(Value::String(name)) => {
            DType::from_torch_dtype(name).ok_or_else(|| KvError::Config {
                what: "dtype",
                problem: format!(
                    "`torch_dtype` is {name:?}; expected one of {}",
                    DType::names_list()
                ),
            })?
        }
        Some(other) => {
            return Err(KvError::Config {
                what: "dtype",
                problem: format!("`torch_dtype` is {other}, not a string"),
            })
        }
        None => {
            return Err(KvError::Config {
                what: "dtype",
                problem: "tried `torch_dtype`, `dtype`: none is present".into(),
            })
        }
    };
    // Qwen2 writes `sliding_window` even when `use_sliding_window` is false.
    let sliding_window = match map.get("use_sliding_window") {
        Some(Value::Bool(false)) => None,
        _ => count_at(&map, "sliding_window", "sliding_window")?,
    };
    Ok(ModelConfig {
        geometry: Geometry::new(layers, kv_heads, head_dim, dtype),
        sliding_window,
    })
}

fn head_dim_error(error: KvError, keys: &[&str]) -> KvError {
    match error {
        KvError::Config { problem, .. } => KvError::Config {
            what: "head_dim",
            problem: format!(
                "no `head_dim`, and for hidden / heads: {problem} ({})",
                keys.join(", ")
            ),
        },
        other => other,
    }
}

/// The first of `keys` present, as a positive integer.
fn first_count(
    map: &Map<String, Value>,
    what: &'static str,
    keys: &[&str],
) -> Result<u64, KvError> {
    for key in keys {
        if let Some(count) = count_at(map, what, key)? {
            return Ok(count);
        }
    }
    let tried: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    Err(KvError::Config {
        what,
        problem: format!("tried {}: none is present", tried.join(", ")),
    })
}

/// `key` as a positive integer; `None` where absent or null.
fn count_at(
    map: &Map<String, Value>,
    what: &'static str,
    key: &str,
) -> Result<Option<u64>, KvError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_u64() {
            Some(count) if count > 0 => Ok(Some(count)),
            _ => Err(KvError::Config {
                what,
                problem: format!("`{key}` is {value}; expected a positive integer"),
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qwen2_head_dim_is_hidden_over_heads() {
        let config = parse(
            r#"{"num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
                "hidden_size": 896, "torch_dtype": "bfloat16", "sliding_window": 32768,
                "use_sliding_window": false}"#,
        )
        .unwrap();
        assert_eq!(config.geometry, Geometry::new(24, 2, 64, DType::BF16));
        assert_eq!(config.sliding_window, None);
    }

    #[test]
    fn qwen3_head_dim_key_wins() {
        let config = parse(
            r#"{"num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
                "hidden_size": 1024, "head_dim": 128, "torch_dtype": "float32",
                "sliding_window": null}"#,
        )
        .unwrap();
        assert_eq!(config.geometry, Geometry::new(28, 8, 128, DType::F32));
        assert_eq!(config.sliding_window, None);
    }

    #[test]
    fn a_missing_key_names_every_key_tried() {
        let err =
            parse(r#"{"num_attention_heads": 2, "hidden_size": 8, "torch_dtype": "float16"}"#)
                .unwrap_err();
        assert_eq!(
            err.to_string(),
            "kv: cannot read layers from the config: tried `num_hidden_layers`, \
             `encoder_layers`, `num_layers`: none is present"
        );
        let err = parse(r#"{"num_layers": 2, "num_attention_heads": 2, "torch_dtype": "float16"}"#)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("`hidden_size`, `d_model`: none is present"),
            "{err}"
        );
    }

    #[test]
    fn bad_values_are_errors_not_guesses() {
        let err = parse(r#"{"num_layers": 0, "num_attention_heads": 2, "head_dim": 4, "torch_dtype": "float16"}"#)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("`num_layers` is 0; expected a positive integer"),
            "{err}"
        );
        let err = parse(r#"{"num_layers": 1, "num_attention_heads": 3, "hidden_size": 8, "torch_dtype": "float16"}"#)
            .unwrap_err();
        assert!(
            err.to_string().contains("not a multiple of 3 heads"),
            "{err}"
        );
        let err = parse(r#"{"num_layers": 1, "num_attention_heads": 2, "head_dim": 4, "torch_dtype": "complex64"}"#)
            .unwrap_err();
        assert!(err.to_string().contains("\"complex64\""), "{err}");
    }
}
