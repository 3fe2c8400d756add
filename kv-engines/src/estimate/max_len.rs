//! `max_model_len` as vLLM derives and checks it
//! (`vllm/config/model.py _get_and_verify_max_len`,
//! `ModelArchConfigConvertorBase.derive_max_model_len_and_key`).

use kv_core::{HfConfig, KvError};
use serde_json::Value;

use super::families::{self, Holds};
use super::settings::{config_error, EstimateSettings};

const WHAT: &str = "max_model_len";

/// The keys vLLM takes the smallest of, in its order.
const MAX_LEN_KEYS: [&str; 9] = [
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
];

/// RoPE types whose `factor` vLLM does not apply again (the config's length
/// is already scaled).
const UNSCALED_ROPE: [&str; 6] = [
    "su",
    "longrope",
    "llama3",
    "yarn",
    "deepseek_yarn",
    "deepseek_llama_scaling",
];

/// vLLM's `default_max_len` for a config with no length key.
const ASSUMED_LEN: u64 = 2048;
/// `model_type`s whose transformers 5.20 config class has no length key
/// either (BLOOM's ALiBi needs none), so a config without one is vLLM's
/// 2048 rather than a class default kv cannot see.
const NO_LENGTH_CLASSES: &[&str] = &["bloom"];

/// The model's length as vLLM derives it, with where it came from.
struct Derived {
    len: u64,
    source: String,
}

/// The `max_model_len` to size for, and a sentence saying where it came from.
pub(super) fn max_model_len(
    hf: &HfConfig,
    settings: &EstimateSettings,
) -> Result<(u64, String), KvError> {
    let derived = derive(hf)?;
    match (settings.positions, derived) {
        (Some(given), Some(derived)) if given > derived.len => {
            if settings.allow_long_max_model_len {
                Ok((
                    given,
                    format!(
                        "max_model_len {given} (given, above the model's {} from {}, allowed)",
                        derived.len, derived.source
                    ),
                ))
            } else {
                Err(KvError::LongerThanModel {
                    given,
                    model: derived.len,
                    source: derived.source,
                })
            }
        }
        (Some(given), _) => Ok((given, format!("max_model_len {given} (given)"))),
        (None, Some(derived)) => Ok((
            derived.len,
            format!("max_model_len {} ({})", derived.len, derived.source),
        )),
        // vLLM: "Assuming the model's maximum length is 2048" where the
        // config and its class set no length (Mamba's and BLOOM's classes
        // have none).
        (None, None)
            if families::rules(hf).is_some_and(|row| row.holds == Holds::MambaOnly)
                || hf
                    .model_types()
                    .iter()
                    .any(|t| NO_LENGTH_CLASSES.contains(t)) =>
        {
            Ok((
                ASSUMED_LEN,
                format!(
                    "max_model_len {ASSUMED_LEN} (vLLM's assumption when the config sets no \
                 length and its class has none: \"Assuming the model's maximum length is \
                 {ASSUMED_LEN}.\")"
                ),
            ))
        }
        (None, None) => Err(config_error(
            "max_model_len",
            format!(
                "no max_model_len was given and the config sets none of {} (looked at the \
                 given values, the top level, `text_config`, `llm_config`, \
                 `thinker_config.text_config`, `language_config`); give the length",
                MAX_LEN_KEYS
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// vLLM's derived length: the smallest of the length keys, `model_max_length`
/// over all, times a RoPE `factor` where vLLM applies one; LongRoPE defaults
/// to `original_max_position_embeddings`. `None` when no key is set.
fn derive(hf: &HfConfig) -> Result<Option<Derived>, KvError> {
    let mut found: Option<(u64, String)> = None;
    for key in MAX_LEN_KEYS {
        if let Some((name, len)) = hf.count_if_set(WHAT, key)? {
            if found.as_ref().is_none_or(|(least, _)| len < *least) {
                found = Some((len, name));
            }
        }
    }
    if let Some((name, len)) = hf.count_if_set(WHAT, "model_max_length")? {
        found = Some((len, name));
    }
    let Some((len, key)) = found else {
        return Ok(None);
    };
    let Some((rope_key, rope)) = hf
        .value("rope_scaling")
        .or_else(|| hf.value("rope_parameters"))
        .filter(|(_, v)| v.is_object())
    else {
        return Ok(Some(Derived {
            len,
            source: format!("`{key}` of the config"),
        }));
    };
    let rope_type = rope
        .get("rope_type")
        .or_else(|| rope.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("default");
    if rope_type == "longrope" {
        if let Some((name, len)) = hf.count_if_set(WHAT, "original_max_position_embeddings")? {
            return Ok(Some(Derived {
                len,
                source: format!("`{name}`: vLLM's default for LongRoPE"),
            }));
        }
    }
    let already_scaled = families::rope_already_scaled(hf);
    // Where vLLM applies `factor`, it multiplies by it as it is: a null falls
    // back to 1.0, and anything but a number fails the multiplication.
    let applied = !already_scaled && !UNSCALED_ROPE.contains(&rope_type);
    let factor = match rope.get("factor") {
        Some(value) if applied && !value.is_null() => Some(value.as_f64().ok_or_else(|| {
            config_error(
                "max_model_len",
                format!("`{rope_key}.factor` is {value}, not a number"),
            )
        })?),
        _ => None,
    };
    match factor {
        Some(factor) if factor != 1.0 => {
            let scaled = (len as f64) * factor;
            if !(scaled.is_finite() && scaled >= 1.0 && scaled < u64::MAX as f64) {
                return Err(config_error(
                    "max_model_len",
                    format!("`{key}` {len} x `{rope_key}.factor` {factor} is not a length"),
                ));
            }
            // vLLM truncates (`int(...)`); a fractional length is cut as it cuts it.
            Ok(Some(Derived {
                len: scaled as u64,
                source: format!(
                    "`{key}` {len} x `{rope_key}.factor` {factor} ({rope_type} RoPE, as vLLM scales it)"
                ),
            }))
        }
        _ => Ok(Some(Derived {
            len,
            source: format!("`{key}` of the config"),
        })),
    }
}
