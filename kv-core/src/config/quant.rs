//! KV cache quantization declared in a config's `quantization_config`.

use serde_json::{Map, Value};

use super::lookup::{positive, shown, HfConfig};
use crate::error::KvError;

const QUANTIZATION_CONFIG: &str = "quantization_config";
const KV_CACHE_SCHEME: &str = "kv_cache_scheme";
const KV_CACHE_QUANT_ALGO: &str = "kv_cache_quant_algo";
const WHAT: &str = "kv cache quantization";

/// Float or integer quantization.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KvQuantType {
    /// `"type": "float"` (FP8 and the like).
    Float,
    /// `"type": "int"`.
    Int,
}

/// How a config says its KV cache is quantized. Read by
/// [`HfConfig::kv_cache_scheme`]. Data only: what it costs in bytes is the
/// storage format's business.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct KvCacheScheme {
    /// Where it was read: `quantization_config.kv_cache_scheme` or
    /// `quantization_config.kv_cache_quant_algo` (with its section prefix).
    pub source: String,
    /// Bits per element (`num_bits`); `None` for the string form, which does
    /// not say.
    pub num_bits: Option<u64>,
    /// Float or integer (`type`); `None` for the string form.
    pub kind: Option<KvQuantType>,
    /// The scale granularity as written (`strategy`: `"tensor"`,
    /// `"channel"`, `"token"`, `"attn_head"`, `"group"`, ...); `None` when
    /// the config does not say.
    pub strategy: Option<String>,
    /// `dynamic`: scales computed at run time rather than stored (the string
    /// form: `"dynamic"` is `true`, `"static"` is `false`); `None` when not
    /// said.
    pub dynamic: Option<bool>,
    /// `symmetric`; `None` when not said.
    pub symmetric: Option<bool>,
}

impl HfConfig {
    /// The KV cache quantization the config declares, if any.
    ///
    /// | source | keys read |
    /// |---|---|
    /// | compressed-tensors (llm-compressor) | `quantization_config.kv_cache_scheme` as an object: `num_bits` (required), `type` `"float"` / `"int"` (required), `strategy`, `dynamic`, `symmetric` (optional); other keys are ignored |
    /// | `quant_method: "fp8"` / AMD Quark checkpoints | `quantization_config.kv_cache_scheme` as the string `"static"` or `"dynamic"`: it says scales are stored (or not), not the element format, so `num_bits` and `kind` are `None` (vLLM takes the format from `--kv-cache-dtype`) |
    /// | NVIDIA ModelOpt | `quantization_config.kv_cache_quant_algo`: only `"FP8"` is recognised (8-bit float, strategy not stated) |
    ///
    /// `quantization_config` is looked for as any key of [`HfConfig`]
    /// (explicit values, top level, the nested sections).
    ///
    /// `Ok(None)` when the config declares no KV quantization: no
    /// `quantization_config`, or one with neither key (or both `null`, as
    /// weight-only checkpoints write `"kv_cache_scheme": null`). That says
    /// only what the config declares: an engine flag such as vLLM's
    /// `--kv-cache-dtype fp8` quantizes a cache whatever the config says.
    ///
    /// Errors, naming key and value: a `quantization_config` or
    /// `kv_cache_scheme` that is neither an object nor `"static"` /
    /// `"dynamic"`, a missing or non-positive
    /// `num_bits`, a `type` other than `"float"` / `"int"`, a `strategy` that
    /// is not a string, a `dynamic` / `symmetric` that is not a boolean, a
    /// `kv_cache_quant_algo` other than `"FP8"`, and both keys set at once.
    ///
    /// ```
    /// use kv_core::{HfConfig};
    /// use kv_core::config::KvQuantType;
    ///
    /// let fp8_kv = serde_json::json!({"quantization_config": {
    ///     "quant_method": "compressed-tensors",
    ///     "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor",
    ///                         "dynamic": false, "symmetric": true},
    /// }});
    /// let scheme = HfConfig::from_value(fp8_kv).kv_cache_scheme()?.unwrap();
    /// assert_eq!((scheme.num_bits, scheme.kind), (Some(8), Some(KvQuantType::Float)));
    /// assert_eq!(scheme.strategy.as_deref(), Some("tensor"));
    /// # Ok::<(), kv_core::KvError>(())
    /// ```
    pub fn kv_cache_scheme(&self) -> Result<Option<KvCacheScheme>, KvError> {
        let Some((name, quantization)) = self.find(&[QUANTIZATION_CONFIG]) else {
            return Ok(None);
        };
        let Value::Object(quantization) = quantization else {
            return Err(error(format!(
                "`{name}` is {}; expected an object",
                shown(quantization)
            )));
        };
        let scheme = non_null(quantization, KV_CACHE_SCHEME);
        let algo = non_null(quantization, KV_CACHE_QUANT_ALGO);
        match (scheme, algo) {
            (None, None) => Ok(None),
            (Some(_), Some(_)) => Err(error(format!(
                "`{name}` sets both `{KV_CACHE_SCHEME}` and `{KV_CACHE_QUANT_ALGO}`; \
                 kv does not pick one"
            ))),
            (Some(scheme), None) => {
                read_scheme(&format!("{name}.{KV_CACHE_SCHEME}"), scheme).map(Some)
            }
            (None, Some(algo)) => {
                let key = format!("{name}.{KV_CACHE_QUANT_ALGO}");
                match algo.as_str() {
                    Some("FP8") => Ok(Some(KvCacheScheme {
                        source: key,
                        num_bits: Some(8),
                        kind: Some(KvQuantType::Float),
                        strategy: None,
                        dynamic: None,
                        symmetric: None,
                    })),
                    _ => Err(error(format!(
                        "`{key}` is {}; kv recognises only \"FP8\"",
                        shown(algo)
                    ))),
                }
            }
        }
    }
}

fn read_scheme(name: &str, scheme: &Value) -> Result<KvCacheScheme, KvError> {
    let string_form = |dynamic: bool| KvCacheScheme {
        source: name.to_owned(),
        num_bits: None,
        kind: None,
        strategy: None,
        dynamic: Some(dynamic),
        symmetric: None,
    };
    let scheme = match scheme {
        Value::Object(scheme) => scheme,
        Value::String(text) if text == "static" => return Ok(string_form(false)),
        Value::String(text) if text == "dynamic" => return Ok(string_form(true)),
        other => {
            return Err(error(format!(
                "`{name}` is {}; expected an object with `num_bits` and `type`, or \"static\" \
                 or \"dynamic\"",
                shown(other)
            )))
        }
    };
    let num_bits = match non_null(scheme, "num_bits") {
        Some(value) => positive(WHAT, &format!("{name}.num_bits"), value)?,
        None => {
            return Err(error(format!(
                "`{name}.num_bits` is not set; kv reads `num_bits` and `type` from it"
            )))
        }
    };
    let kind = match non_null(scheme, "type") {
        Some(Value::String(text)) if text == "float" => KvQuantType::Float,
        Some(Value::String(text)) if text == "int" => KvQuantType::Int,
        Some(other) => {
            return Err(error(format!(
                "`{name}.type` is {}; expected \"float\" or \"int\"",
                shown(other)
            )))
        }
        None => {
            return Err(error(format!(
                "`{name}.type` is not set; kv reads `num_bits` and `type` from it"
            )))
        }
    };
    let strategy = match non_null(scheme, "strategy") {
        None => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(other) => {
            return Err(error(format!(
                "`{name}.strategy` is {}; expected a string",
                shown(other)
            )))
        }
    };
    let flag = |key: &str| match non_null(scheme, key) {
        None => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(*flag)),
        Some(other) => Err(error(format!(
            "`{name}.{key}` is {}; expected true or false",
            shown(other)
        ))),
    };
    Ok(KvCacheScheme {
        source: name.to_owned(),
        num_bits: Some(num_bits),
        kind: Some(kind),
        strategy,
        dynamic: flag("dynamic")?,
        symmetric: flag("symmetric")?,
    })
}

fn non_null<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).filter(|value| !value.is_null())
}

fn error(problem: String) -> KvError {
    KvError::Config {
        what: WHAT,
        problem,
    }
}
