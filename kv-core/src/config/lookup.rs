//! The lookup: [`HfConfig`], the sections it searches and in what order, the
//! loader defaults, what readers asked and said, and the checks every value
//! read from the config passes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value};

use super::models::{self, MambaVersion};
use super::text::parse_json;
use crate::error::KvError;
use crate::spec::dtype::DType;

pub(super) const LAYERS: &[&str] = &[
    "num_hidden_layers",
    "encoder_layers",
    "num_layers",
    "n_layer",
    "n_layers",
];
pub(super) const HIDDEN: &[&str] = &["hidden_size", "d_model", "n_embd"];

/// Nested sections searched after the top level, in order, by their dotted
/// path: `thinker_config.text_config` is the text model of Qwen2.5-Omni and
/// Qwen3-Omni, what their `get_text_config` returns and vLLM serves;
/// `language_config` that of DeepSeek-VL2, DeepSeek-OCR and Janus, which
/// SGLang's `get_hf_text_config` serves.
pub(super) const NESTED_SECTIONS: [&str; 4] = [
    "text_config",
    "llm_config",
    "thinker_config.text_config",
    "language_config",
];

/// The value at a dotted `path` below `top`, `None` where a step is absent
/// or not an object.
pub(super) fn nested<'a>(top: Option<&'a Map<String, Value>>, path: &str) -> Option<&'a Value> {
    let mut steps = path.split('.');
    let first = top?.get(steps.next()?)?;
    steps.try_fold(first, |value, step| value.as_object()?.get(step))
}

/// How [`HfConfig`] turns the config's dtype into the one the cache is sized in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DTypeRule {
    /// The dtype the config writes.
    #[default]
    AsWritten,
    /// vLLM's `--dtype auto` on a GPU with bf16: a float32 checkpoint is
    /// served in bfloat16 ("Downcast for float32 models",
    /// `vllm/config/model.py _resolve_auto_dtype`); any other dtype as written.
    /// A config with no dtype key (GPT-2, GPT-J, BLOOM) is float32 to vLLM
    /// when no safetensors header says otherwise
    /// (`ModelArchConfigConvertorBase.get_torch_dtype`), so bfloat16 too;
    /// said in [`HfConfig::notes`].
    VllmAuto,
}

/// Where a value was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Section {
    /// Given over the config ([`HfConfig::with_value`]).
    Explicit,
    /// The config's top level.
    Top,
    /// One of the nested sections (`text_config`, `llm_config`, ...).
    Nested(&'static str),
    /// The model family's loader default (see `models.rs`).
    Default(&'static str),
}

/// A HuggingFace-style model config and the values given explicitly over it.
///
/// # Lookup
///
/// Each value is read from the first key found, in this order:
///
/// | value | keys |
/// |---|---|
/// | layers | `num_hidden_layers`, `encoder_layers`, `num_layers`, `n_layer`, `n_layers` (MPT, DBRX) |
/// | kv heads | `n_head_kv`, `num_kv_heads`, `num_key_value_heads`, `multi_query_group_num`, `num_attention_groups` (vLLM's `get_total_num_kv_heads`); else the attention heads, said in [`HfConfig::notes`] |
/// | attention heads | `num_attention_heads`, `n_head`, `n_heads`, `encoder_attention_heads` |
/// | head dim | `head_dim`, `hidden_size_per_head`; else hidden (`hidden_size`, `d_model`, `n_embd`) / attention heads |
/// | dtype | `torch_dtype`, `dtype` (newer transformers), parsed by [`DType::from_torch_dtype`], then [`DTypeRule`] |
///
/// Families spell some of these their own way, as vLLM reads them: Falcon and
/// GPT-BigCode's `multi_query: true` is one KV head (not with Falcon's
/// `new_decoder_architecture`); MPT and DBRX keep `kv_n_heads` in
/// `attn_config`; ChatGLM's `multi_query_group_num` counts only with
/// `multi_query_attention`, and its head dim is `kv_channels`; Zamba2's head
/// dim is `2 x hidden / attention heads` whatever the config writes (its
/// shared attention runs over twice the hidden width). More KV heads than
/// attention heads is an error.
///
/// Keys are looked for at the top level first, then in `text_config`,
/// `llm_config`, `thinker_config.text_config` and `language_config`: the first section that holds any of a value's keys decides
/// that value, and within a section the keys are tried in the order above. So
/// a multimodal config that keeps its language model in `text_config` and its
/// `torch_dtype` at the top level reads both. A key set to `null` counts as
/// absent (HF writes `null` for "not set").
///
/// **Loader defaults.** A key the config leaves out entirely, where the
/// family's loader fills it (`model_type` `gemma2`, `gemma3`, `gemma3n`,
/// `llama4`, `falcon`, `gpt_bigcode`, `nemotron_h`: transformers' config
/// classes), takes the
/// loader's default; each one applied is named with its source in
/// [`HfConfig::notes`]. A key set to `null` is not defaulted.
///
/// The modern cache kinds have their own readers, each documenting its keys
/// in the same way and following the same rules:
///
/// | reader | returns | keys |
/// |---|---|---|
/// | [`HfConfig::mla`] | [`MlaConfig`](super::MlaConfig) | `kv_lora_rank`, `qk_rope_head_dim`, layers, dtype |
/// | [`HfConfig::mamba`] | [`MambaConfig`](super::MambaConfig) | `mamba_d_state` / `state_size`, `mamba_d_conv` / `conv_kernel`, `mamba_expand` / `expand`, groups, heads, head dim, ... |
/// | [`HfConfig::linear_attention`] | [`LinearAttentionConfig`](super::LinearAttentionConfig) | `linear_num_key_heads`, `linear_num_value_heads`, `linear_key_head_dim`, `linear_value_head_dim`, `linear_conv_kernel_dim` |
/// | [`HfConfig::layer_pattern`] | [`LayerPattern`](crate::LayerPattern) | `layer_types`, `layers_block_type`, `hybrid_override_pattern`, `sliding_window_pattern`, `full_attention_interval`, `attn_layer_period` + `attn_layer_offset`, `no_rope_layers` + `attention_chunk_size`, `num_kv_shared_layers` |
/// | [`HfConfig::sliding_window`] | `Option<u64>` | `sliding_window` (`null`: none), `use_sliding_window` |
/// | [`HfConfig::kv_cache_scheme`] | `Option<`[`KvCacheScheme`](super::KvCacheScheme)`>` | `quantization_config.kv_cache_scheme`, `quantization_config.kv_cache_quant_algo` |
///
/// Nothing is guessed: a missing key is an error that names every key tried and
/// every section looked in; a value that is not a positive integer (a string, a
/// float, a negative number, zero, more than `u64` holds) is an error naming
/// the key and the value; a hidden size the heads do not divide is an error,
/// not a floor. When several of the geometry's keys are missing, one error
/// ([`KvError::Several`]) names them all. Any value can be given explicitly
/// with the `with_*` methods, which win over the config; any key at all with
/// [`HfConfig::with_value`].
///
/// # Example
///
/// ```
/// use kv_core::{DType, Geometry, HfConfig};
///
/// let talker = serde_json::json!({
///     "num_hidden_layers": 24,
///     "num_key_value_heads": 2,
///     "hidden_size": 896,
///     "num_attention_heads": 14,
///     "torch_dtype": "bfloat16",
/// });
/// let geometry = HfConfig::from_value(talker).geometry()?;
/// assert_eq!(geometry, Geometry::new(24, 2, 64, DType::BF16));
///
/// // A value the config lacks or gets wrong is given explicitly.
/// let fp8 = HfConfig::from_value(serde_json::json!({"num_layers": 2, "head_dim": 64, "num_attention_heads": 8}))
///     .with_dtype(DType::F8E4M3)
///     .geometry()?;
/// assert_eq!(fp8, Geometry::new(2, 8, 64, DType::F8E4M3));
/// # Ok::<(), kv_core::KvError>(())
/// ```
#[derive(Clone, Debug)]
pub struct HfConfig {
    config: Value,
    /// Where the config came from, for error messages; `None` for a value.
    source: Option<String>,
    pub(super) layers: Option<u64>,
    pub(super) kv_heads: Option<u64>,
    pub(super) head_dim: Option<u64>,
    pub(super) dtype: Option<DType>,
    pub(super) dtype_rule: DTypeRule,
    /// Keys given with [`HfConfig::with_value`], looked at before the config.
    overrides: Map<String, Value>,
    /// For a value given in another key's stead ([`HfConfig::with_value_from`]),
    /// the key the file spells, which messages name instead of `explicit.KEY`.
    spelled: BTreeMap<String, String>,
    pub(super) mamba_version: Option<MambaVersion>,
    /// The family's loader defaults and their source.
    defaults: Map<String, Value>,
    defaults_source: &'static str,
    /// What readers asked for and said, shared by clones (a reader that
    /// clones the config to give it values still reads this config).
    tracking: Arc<Mutex<Tracking>>,
}

/// What readers asked for and said.
#[derive(Debug, Default)]
struct Tracking {
    /// Every key a reader asked for, to tell a given value nothing reads.
    asked: BTreeSet<String>,
    /// How values were read, in the order said: defaults applied, rules used.
    notes: Vec<String>,
}

/// Two configs are equal when they read alike: what readers asked of them
/// so far does not count.
impl PartialEq for HfConfig {
    fn eq(&self, other: &HfConfig) -> bool {
        self.config == other.config
            && self.source == other.source
            && self.layers == other.layers
            && self.kv_heads == other.kv_heads
            && self.head_dim == other.head_dim
            && self.dtype == other.dtype
            && self.dtype_rule == other.dtype_rule
            && self.overrides == other.overrides
            && self.mamba_version == other.mamba_version
    }
}

impl HfConfig {
    /// A config already parsed as JSON.
    pub fn from_value(config: Value) -> HfConfig {
        let mut hf = HfConfig {
            config,
            source: None,
            layers: None,
            kv_heads: None,
            head_dim: None,
            dtype: None,
            dtype_rule: DTypeRule::AsWritten,
            overrides: Map::new(),
            spelled: BTreeMap::new(),
            mamba_version: None,
            defaults: Map::new(),
            defaults_source: "",
            tracking: Arc::default(),
        };
        hf.load_defaults();
        hf
    }

    /// Reads and parses a `config.json` ([`parse_json`]: `NaN` and `Infinity`
    /// are read, as Python's `json` reads them). An unreadable file or invalid
    /// JSON is [`KvError::ConfigFile`]; missing keys are reported by
    /// [`HfConfig::geometry`].
    pub fn from_path(path: impl AsRef<Path>) -> Result<HfConfig, KvError> {
        let path = path.as_ref();
        let file_error = |problem: String| KvError::ConfigFile {
            path: path.display().to_string(),
            problem,
        };
        let text = std::fs::read_to_string(path).map_err(|e| file_error(e.to_string()))?;
        let config = parse_json(&text).map_err(|e| file_error(e.to_string()))?;
        Ok(HfConfig {
            source: Some(path.display().to_string()),
            ..HfConfig::from_value(config)
        })
    }

    #[cfg(test)]
    pub(super) fn from_path_text_for_tests(config: Value) -> HfConfig {
        HfConfig {
            source: Some("config.json".to_owned()),
            ..HfConfig::from_value(config)
        }
    }

    /// Uses `layers` instead of reading it.
    pub fn with_layers(mut self, layers: u64) -> HfConfig {
        self.layers = Some(layers);
        self
    }

    /// Uses `kv_heads` instead of reading it.
    pub fn with_kv_heads(mut self, kv_heads: u64) -> HfConfig {
        self.kv_heads = Some(kv_heads);
        self
    }

    /// Uses `head_dim` instead of reading or deriving it.
    pub fn with_head_dim(mut self, head_dim: u64) -> HfConfig {
        self.head_dim = Some(head_dim);
        self
    }

    /// Uses `dtype` instead of reading it (e.g. a cache stored in another
    /// dtype than the weights).
    pub fn with_dtype(mut self, dtype: DType) -> HfConfig {
        self.dtype = Some(dtype);
        self
    }

    /// Reads the dtype by `rule` (default [`DTypeRule::AsWritten`]).
    pub fn with_dtype_rule(mut self, rule: DTypeRule) -> HfConfig {
        self.dtype_rule = rule;
        self
    }

    /// Uses `value` for `key`, ahead of every section of the config: the way
    /// to supply a key a published config leaves to its loader's default
    /// (Gemma-3-27B's `sliding_window_pattern`, for one) or gets wrong. Errors
    /// name it `explicit.KEY`. `null` counts as absent, as in a config.
    pub fn with_value(mut self, key: &str, value: impl Into<Value>) -> HfConfig {
        self.overrides.insert(key.to_owned(), value.into());
        if key == "model_type" {
            self.load_defaults();
        }
        self
    }

    /// Uses `value` for `key` as [`HfConfig::with_value`] does, where the
    /// file gave it as `spelled` (Whisper's `decoder_attention_heads` read as
    /// `num_attention_heads`): messages and notes name `spelled`.
    pub fn with_value_from(
        mut self,
        key: &str,
        value: impl Into<Value>,
        spelled: &str,
    ) -> HfConfig {
        self.spelled.insert(key.to_owned(), spelled.to_owned());
        self.with_value(key, value)
    }

    /// How values were read, one sentence each: every loader default applied
    /// (with its source), the dtype rule, the KV-head rule where it is not a
    /// KV-head key. Filled as readers run; each said once.
    pub fn notes(&self) -> Vec<String> {
        self.tracking().notes.clone()
    }

    fn tracking(&self) -> MutexGuard<'_, Tracking> {
        // The tracking holds no invariant a panic could break.
        self.tracking
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a reader has asked for `key` so far, whether or not any
    /// section sets it: with [`HfConfig::unread_values`], how a caller tells
    /// a value it gave (in a nested section, say) that nothing reads.
    pub fn was_asked(&self, key: &str) -> bool {
        self.tracking().asked.contains(key)
    }

    /// The keys given with [`HfConfig::with_value`] that no reader has asked
    /// for so far: after a reader has run, a value nothing reads (a typo, a
    /// key of another family), which would otherwise change nothing silently.
    pub fn unread_values(&self) -> Vec<String> {
        let tracking = self.tracking();
        self.overrides
            .keys()
            .filter(|key| !tracking.asked.contains(key.as_str()))
            .cloned()
            .collect()
    }

    /// The model family the config is read as: the first `model_type` of
    /// [`HfConfig::model_types`] (the text model's, where it has its own),
    /// where kv's table of model families has it (its loader defaults and
    /// its spellings of KV heads, head dim and Mamba keys apply); `None`
    /// where it has none, and the config is read by the generic keys alone.
    /// An engine's rules for a family are keyed by this name.
    ///
    /// ```
    /// use kv_core::HfConfig;
    ///
    /// let gemma = HfConfig::from_value(serde_json::json!({"model_type": "gemma3"}));
    /// assert_eq!(gemma.family(), Some("gemma3"));
    /// let unknown = HfConfig::from_value(serde_json::json!({"model_type": "my_model"}));
    /// assert_eq!(unknown.family(), None);
    /// ```
    pub fn family(&self) -> Option<&'static str> {
        let first = *self.model_types().first()?;
        let row = models::model_type(first)?;
        row.names.iter().copied().find(|name| *name == first)
    }

    /// The model family's row, by [`HfConfig::family`]'s rule.
    pub(super) fn family_row(&self) -> Option<&'static models::ModelType> {
        self.model_types()
            .first()
            .and_then(|name| models::model_type(name))
    }

    /// The top level's `architectures` (vLLM picks its model class by these,
    /// not by `model_type`); entries that are not strings are left out.
    pub fn architectures(&self) -> Vec<&str> {
        self.config
            .get("architectures")
            .and_then(Value::as_array)
            .map(|list| list.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    /// The `model_type` values present: given, then nested sections, then top.
    pub fn model_types(&self) -> Vec<&str> {
        let top = self.config.as_object();
        let nested = NESTED_SECTIONS
            .into_iter()
            .filter_map(|section| nested(top, section));
        let given = self.overrides.get("model_type");
        given
            .into_iter()
            .chain(nested.filter_map(|section| section.get("model_type")))
            .chain(top.and_then(|map| map.get("model_type")))
            .filter_map(Value::as_str)
            .collect()
    }

    fn load_defaults(&mut self) {
        let (defaults, source) = match self.family_row() {
            Some(row) => (
                row.defaults
                    .iter()
                    .filter_map(|(key, text)| {
                        serde_json::from_str(text)
                            .ok()
                            .map(|v| ((*key).to_owned(), v))
                    })
                    .collect(),
                row.source,
            ),
            None => (Map::new(), ""),
        };
        self.defaults = defaults;
        self.defaults_source = source;
    }

    /// Adds `sentence` to [`HfConfig::notes`], unless it is there already:
    /// how a reader outside this module (an engine's rule, a model's own
    /// reading of a key) read a value, said beside the lookup's own notes.
    pub fn note(&self, sentence: String) {
        let notes = &mut self.tracking().notes;
        if !notes.contains(&sentence) {
            notes.push(sentence);
        }
    }

    /// An explicit value (checked positive), else the first of `keys` found.
    pub(super) fn count_or(
        &self,
        what: &'static str,
        explicit: Option<u64>,
        keys_tried: &[&str],
    ) -> Result<u64, KvError> {
        if let Some(value) = explicit {
            if value == 0 {
                return Err(KvError::Config {
                    what,
                    problem: format!("the explicit {what} is 0; a count must be positive"),
                });
            }
            return Ok(value);
        }
        match self.find(keys_tried) {
            Some((key, value)) => positive(what, &key, value),
            None => Err(KvError::Config {
                what,
                problem: format!(
                    "none of {} is set; {}; give `{}`",
                    keys(keys_tried),
                    self.looked_in(),
                    keys_tried.first().copied().unwrap_or(what)
                ),
            }),
        }
    }

    /// The sections in lookup order: explicit values, the top level, each
    /// nested section that is an object, then the family's loader defaults.
    fn sections(&self) -> impl Iterator<Item = (Section, &Map<String, Value>)> {
        let top = self.config.as_object();
        let explicit =
            Some((Section::Explicit, &self.overrides)).filter(|(_, map)| !map.is_empty());
        let top_level = top.map(|map| (Section::Top, map));
        let nested = NESTED_SECTIONS.into_iter().filter_map(move |section| {
            nested(top, section)
                .and_then(Value::as_object)
                .map(|map| (Section::Nested(section), map))
        });
        let defaults = Some((Section::Default(self.defaults_source), &self.defaults))
            .filter(|(_, map)| !map.is_empty());
        explicit
            .into_iter()
            .chain(top_level)
            .chain(nested)
            .chain(defaults)
    }

    /// The first non-null key found, as `section.key`, and its value. A
    /// loader default is used only where no section writes the key at all
    /// (`null` included), and is noted.
    pub(super) fn find(&self, keys_tried: &[&str]) -> Option<(String, &Value)> {
        self.find_in(keys_tried, true)
    }

    /// Whether the config itself (or a given value) writes `key`, not `null`;
    /// a loader default does not count.
    pub(crate) fn written(&self, key: &str) -> bool {
        self.sections().any(|(section, map)| {
            !matches!(section, Section::Default(_)) && map.get(key).is_some_and(|v| !v.is_null())
        })
    }

    /// [`HfConfig::find`], with or without the loader defaults.
    pub(super) fn find_in(&self, keys_tried: &[&str], defaults: bool) -> Option<(String, &Value)> {
        {
            let asked = &mut self.tracking().asked;
            for key in keys_tried {
                if !asked.contains(*key) {
                    asked.insert((*key).to_owned());
                }
            }
        }
        let found = self
            .sections()
            .filter(|(section, _)| defaults || !matches!(section, Section::Default(_)))
            .find_map(|(section, map)| {
                keys_tried.iter().find_map(|key| match map.get(*key) {
                    None | Some(Value::Null) => None,
                    Some(value) => Some((section, *key, value)),
                })
            })?;
        if let (Section::Default(source), key, value) = found {
            let written_as_null = self
                .sections()
                .any(|(section, map)| section != Section::Default(source) && map.contains_key(key));
            if written_as_null {
                return None;
            }
            self.note(format!("`{key}` {value} ({source})"));
        }
        Some((self.qualified(found.0, found.1), found.2))
    }

    /// The first non-null `key`, as `section.key`, and its value: one key,
    /// for readers beside this module that look up as the config does (the
    /// sections in order, then the family's loader default, noted).
    ///
    /// ```
    /// use kv_core::HfConfig;
    ///
    /// let config = HfConfig::from_value(serde_json::json!({
    ///     "text_config": {"attention_chunk_size": 8192},
    /// }));
    /// let (name, value) = config.value("attention_chunk_size").unwrap();
    /// assert_eq!((name.as_str(), value.as_u64()), ("text_config.attention_chunk_size", Some(8192)));
    /// assert!(config.value("sliding_window").is_none());
    /// ```
    pub fn value(&self, key: &str) -> Option<(String, &Value)> {
        self.find(&[key])
    }

    /// `key` as a positive count with its qualified name, `None` when no
    /// section sets it; a value that is not one is an error naming it (as
    /// `what`).
    pub fn count_if_set(
        &self,
        what: &'static str,
        key: &str,
    ) -> Result<Option<(String, u64)>, KvError> {
        match self.find(&[key]) {
            Some((name, value)) => positive(what, &name, value).map(|count| Some((name, count))),
            None => Ok(None),
        }
    }

    /// Like [`HfConfig::find`], but a key set to `null` is found (as `null`),
    /// with the section that holds it.
    pub(crate) fn find_with_null(
        &self,
        key: &str,
    ) -> Option<(String, &Value, &Map<String, Value>)> {
        self.tracking().asked.insert(key.to_owned());
        let (section, value, map) = self
            .sections()
            .find_map(|(section, map)| map.get(key).map(|value| (section, value, map)))?;
        if let Section::Default(source) = section {
            self.note(format!("`{key}` {value} ({source})"));
        }
        Some((self.qualified(section, key), value, map))
    }

    /// "looked at the top level, `text_config` (absent), ..." and the source.
    pub(super) fn looked_in(&self) -> String {
        let top = self.config.as_object();
        let mut text = String::from(if self.overrides.is_empty() {
            "looked at the top level"
        } else {
            "looked at the explicit values, then the top level"
        });
        if top.is_none() {
            text.push_str(" (not a JSON object)");
        }
        for section in NESTED_SECTIONS {
            let state = match nested(top, section) {
                None | Some(Value::Null) => " (absent)",
                Some(Value::Object(_)) => "",
                Some(_) => " (not an object)",
            };
            let _ = write!(text, ", then `{section}`{state}");
        }
        if !self.defaults_source.is_empty() {
            let _ = write!(text, ", then the {}s", self.defaults_source);
        }
        if let Some(path) = &self.source {
            let _ = write!(text, " of `{path}`");
        }
        text
    }
}

impl HfConfig {
    /// `key` at the top level, `section.key` in a section, `key (source)`
    /// for a loader default; a value given in a file's key's stead is named
    /// as the file spells it.
    fn qualified(&self, section: Section, key: &str) -> String {
        match section {
            Section::Top => key.to_owned(),
            Section::Explicit => match self.spelled.get(key) {
                Some(spelled) => spelled.clone(),
                None => format!("explicit.{key}"),
            },
            Section::Nested(name) => format!("{name}.{key}"),
            Section::Default(source) => format!("{key} ({source})"),
        }
    }
}

/// At least one error was collected when a value failed; an error, not a
/// panic, should that ever change.
pub(super) fn no_error_collected() -> KvError {
    KvError::Config {
        what: "geometry",
        problem: "a value failed without an error".to_owned(),
    }
}

/// A JSON value that must be a positive integer that fits `u64`.
pub(super) fn positive(what: &'static str, key: &str, value: &Value) -> Result<u64, KvError> {
    let problem = match value.as_u64() {
        Some(0) => "a count must be positive",
        Some(count) => return Ok(count),
        None => match value {
            Value::Number(n) if n.is_i64() => "a count cannot be negative",
            // serde_json parses integers beyond u64 as floats.
            Value::Number(n) if n.as_f64().is_some_and(|f| f >= u64::MAX as f64) => {
                "more than u64 can hold"
            }
            Value::Number(_) => "not an integer",
            _ => "expected a positive integer",
        },
    };
    Err(KvError::Config {
        what,
        problem: format!("`{key}` is {}; {problem}", shown(value)),
    })
}

/// A value as it reads in JSON, cut short for messages.
pub(super) fn shown(value: &Value) -> String {
    const LIMIT: usize = 60;
    let text = value.to_string();
    match text.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// `` `a`, `b`, `c` ``
pub(super) fn keys(list: &[&str]) -> String {
    let quoted: Vec<String> = list.iter().map(|k| format!("`{k}`")).collect();
    quoted.join(", ")
}
