//! What the candle caches need from a Qwen2/Qwen3-style HF `config.json`:
//! the geometry, read by kv-core's [`HfConfig`], and the sliding window.

use kv_core::{Geometry, HfConfig, KvError};

/// What the caches here need from a config.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ModelConfig {
    /// Layers, KV heads and head dim; dtype from `torch_dtype`.
    pub geometry: Geometry,
    /// `sliding_window`, where the config has a positive one.
    pub sliding_window: Option<u64>,
}

/// Reads a config's text: the geometry through [`HfConfig`] (a missing key is
/// an error naming every key tried), and the sliding window.
pub(crate) fn parse(text: &str) -> Result<ModelConfig, KvError> {
    let value = kv_core::config::parse_json(text).map_err(|e| KvError::ConfigFile {
        path: "<config.json text>".into(),
        problem: e.to_string(),
    })?;
    let config = HfConfig::from_value(value);
    // kv-core's reader: `null`, absent, or `use_sliding_window: false` (Qwen2
    // writes a window it does not use) is no window.
    Ok(ModelConfig {
        sliding_window: config.sliding_window_if_set()?,
        geometry: config.geometry()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kv_core::DType;

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
    fn geometry_errors_are_kv_cores_naming_every_key_tried() {
        let err =
            parse(r#"{"num_attention_heads": 2, "hidden_size": 8, "torch_dtype": "float16"}"#)
                .unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with("kv: cannot read layers from the config"),
            "{message}"
        );
        for key in ["num_hidden_layers", "encoder_layers", "num_layers"] {
            assert!(message.contains(key), "{message}");
        }
    }

    #[test]
    fn a_bad_sliding_window_is_an_error_not_a_guess() {
        let base =
            r#""num_layers": 1, "num_attention_heads": 2, "head_dim": 4, "torch_dtype": "float16""#;
        let err = parse(&format!(r#"{{{base}, "sliding_window": 0}}"#)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "kv: cannot read sliding_window from the config: `sliding_window` is 0; a count must be positive"
        );
        let config = parse(&format!(r#"{{{base}, "sliding_window": 4096}}"#)).unwrap();
        assert_eq!(config.sliding_window, Some(4096));
        assert!(parse("[1, 2]").is_err());
    }
}
