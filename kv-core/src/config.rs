//! Geometry read from a HuggingFace-style `config.json`, for caches whose shape is
//! known only after the checkpoint is loaded. The lookup rules are documented
//! on [`HfConfig`].

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value};

use crate::error::KvError;
use crate::spec::dtype::DType;
use crate::spec::layout::Geometry;

mod layers;
mod models;
mod quant;
mod state;
mod text;

pub(crate) use models::{Holds, KvCacheDtype};
pub use quant::{KvCacheScheme, KvQuantType};
pub use state::{LinearAttentionConfig, MambaConfig, MambaVersion, MlaConfig, ShortConvConfig};
pub use text::parse_json;

const LAYERS: &[&str] = &[
    "num_hidden_layers",
    "encoder_layers",
    "num_layers",
    "n_layer",
    "n_layers",
];
/// vLLM's `CONFIG_FIELD_ALIASES["total_num_kv_heads"]`, in its order.
const KV_HEADS: &[&str] = &[
    "n_head_kv",
    "num_kv_heads",
    "num_key_value_heads",
    "multi_query_group_num",
    "num_attention_groups",
];
const HEAD_DIM: &[&str] = &["head_dim", "hidden_size_per_head"];
const HEAD_DIM_CHATGLM: &[&str] = &["head_dim", "kv_channels"];
/// None: `Zamba2Config.__post_init__` sets `attention_head_dim` over any the
/// config writes (and `head_dim` is its alias).
const HEAD_DIM_ZAMBA2: &[&str] = &[];
const HIDDEN: &[&str] = &["hidden_size", "d_model", "n_embd"];
const ATTENTION_HEADS: &[&str] = &[
    "num_attention_heads",
    "n_head",
    "n_heads",
    "encoder_attention_heads",
];
const DTYPE: &[&str] = &["torch_dtype", "dtype"];

/// Nested sections searched after the top level, in order.
const NESTED_SECTIONS: [&str; 2] = ["text_config", "llm_config"];

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
enum Section {
    /// Given over the config ([`HfConfig::with_value`]).
    Explicit,
    /// The config's top level.
    Top,
    /// `text_config` or `llm_config`.
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
/// Keys are looked for at the top level first, then in `text_config`, then in
/// `llm_config`: the first section that holds any of a value's keys decides
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
/// | [`HfConfig::mla`] | [`MlaConfig`] | `kv_lora_rank`, `qk_rope_head_dim`, layers, dtype |
/// | [`HfConfig::mamba`] | [`MambaConfig`] | `mamba_d_state` / `state_size`, `mamba_d_conv` / `conv_kernel`, `mamba_expand` / `expand`, groups, heads, head dim, ... |
/// | [`HfConfig::linear_attention`] | [`LinearAttentionConfig`] | `linear_num_key_heads`, `linear_num_value_heads`, `linear_key_head_dim`, `linear_value_head_dim`, `linear_conv_kernel_dim` |
/// | [`HfConfig::layer_pattern`] | [`LayerPattern`](crate::LayerPattern) | `layer_types`, `layers_block_type`, `hybrid_override_pattern`, `sliding_window_pattern`, `full_attention_interval`, `attn_layer_period` + `attn_layer_offset`, `no_rope_layers` + `attention_chunk_size`, `num_kv_shared_layers` |
/// | [`HfConfig::sliding_window`] | `Option<u64>` | `sliding_window` (`null`: none), `use_sliding_window` |
/// | [`HfConfig::kv_cache_scheme`] | `Option<`[`KvCacheScheme`]`>` | `quantization_config.kv_cache_scheme`, `quantization_config.kv_cache_quant_algo` |
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
    layers: Option<u64>,
    kv_heads: Option<u64>,
    head_dim: Option<u64>,
    dtype: Option<DType>,
    dtype_rule: DTypeRule,
    /// Keys given with [`HfConfig::with_value`], looked at before the config.
    overrides: Map<String, Value>,
    mamba_version: Option<MambaVersion>,
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
    fn from_path_text_for_tests(config: Value) -> HfConfig {
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

    /// Whether a reader has asked for `key` so far.
    pub(crate) fn was_asked(&self, key: &str) -> bool {
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

    /// The model family's row, by the first `model_type` of
    /// [`HfConfig::model_types`] (the text model's, where it has its own).
    pub(crate) fn family(&self) -> Option<&'static models::ModelType> {
        self.model_types()
            .first()
            .and_then(|name| models::model_type(name))
    }

    /// The top level's `architectures` (vLLM picks its model class by these,
    /// not by `model_type`); entries that are not strings are left out.
    pub(crate) fn architectures(&self) -> Vec<&str> {
        self.config
            .get("architectures")
            .and_then(Value::as_array)
            .map(|list| list.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    /// The `model_type` values present: given, then nested sections, then top.
    pub(crate) fn model_types(&self) -> Vec<&str> {
        let top = self.config.as_object();
        let nested = NESTED_SECTIONS
            .into_iter()
            .filter_map(|section| top.and_then(|map| map.get(section)));
        let given = self.overrides.get("model_type");
        given
            .into_iter()
            .chain(nested.filter_map(|section| section.get("model_type")))
            .chain(top.and_then(|map| map.get("model_type")))
            .filter_map(Value::as_str)
            .collect()
    }

    fn load_defaults(&mut self) {
        let (defaults, source) = match self.family() {
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

    pub(crate) fn note(&self, sentence: String) {
        let notes = &mut self.tracking().notes;
        if !notes.contains(&sentence) {
            notes.push(sentence);
        }
    }

    /// The geometry: explicit values where given, the config's otherwise.
    /// Keys and values use `head_dim` alike; see [`HfConfig`] for the
    /// lookup order. Every value that cannot be read is reported at once.
    pub fn geometry(&self) -> Result<Geometry, KvError> {
        let layers = self.count_or("layers", self.layers, LAYERS);
        let kv_heads = self.read_kv_heads();
        let head_dim = self.head_dim();
        let dtype = match self.dtype {
            Some(dtype) => Ok(dtype),
            None => self.read_dtype(),
        };
        match (layers, kv_heads, head_dim, dtype) {
            (Ok(layers), Ok(kv_heads), Ok(head_dim), Ok(dtype)) => {
                Ok(Geometry::new(layers, kv_heads, head_dim, dtype))
            }
            (layers, kv_heads, head_dim, dtype) => {
                let errors = [layers.err(), kv_heads.err(), head_dim.err(), dtype.err()];
                Err(KvError::from_all(errors.into_iter().flatten().collect())
                    .unwrap_or_else(no_error_collected))
            }
        }
    }

    /// The KV heads, by the family's rule, checked against the attention heads.
    fn read_kv_heads(&self) -> Result<u64, KvError> {
        const WHAT: &str = "kv_heads";
        if let Some(kv_heads) = self.kv_heads {
            return self.count_or(WHAT, Some(kv_heads), KV_HEADS);
        }
        let rule = self
            .family()
            .map_or(models::KvHeads::Generic, |row| row.kv_heads);
        let kv_heads = match rule {
            models::KvHeads::MultiQueryFlag
                if !self.flag("new_decoder_architecture")? && self.flag("multi_query")? =>
            {
                self.note(
                    "1 KV head: `multi_query` is true (multi-query attention, as vLLM reads \
                     Falcon and GPT-BigCode)"
                        .to_owned(),
                );
                1
            }
            models::KvHeads::AttnConfig => match self.find(&["attn_config"]) {
                Some((name, Value::Object(attn))) if attn.get("kv_n_heads").is_some() => {
                    let key = format!("{name}.kv_n_heads");
                    positive(WHAT, &key, &attn["kv_n_heads"])?
                }
                _ => self.attention_heads_as_kv_heads("`attn_config.kv_n_heads`")?,
            },
            models::KvHeads::MiniCpm3 => self.minicpm3_kv_heads()?,
            models::KvHeads::ChatGlm => {
                if self.flag("multi_query_attention")? {
                    self.count_or(WHAT, None, &["multi_query_group_num"])?
                } else {
                    self.attention_heads_as_kv_heads(
                        "`multi_query_attention` true with `multi_query_group_num`",
                    )?
                }
            }
            _ => match self.find(KV_HEADS) {
                Some((key, value)) => positive(WHAT, &key, value)?,
                None => self.attention_heads_as_kv_heads(&keys(KV_HEADS))?,
            },
        };
        if let Some((key, heads)) = self.find(ATTENTION_HEADS) {
            if let Ok(heads) = positive("attention heads", &key, heads) {
                if kv_heads > heads {
                    return Err(KvError::Config {
                        what: WHAT,
                        problem: format!(
                            "{kv_heads} KV heads but `{key}` is {heads}: a model cannot have \
                             more KV heads than attention heads; fix the config"
                        ),
                    });
                }
            }
        }
        Ok(kv_heads)
    }

    /// MiniCPM3: every attention head caches its own K/V, whatever
    /// `num_key_value_heads` says (vLLM builds its `Attention` with
    /// `num_kv_heads` = the attention heads).
    fn minicpm3_kv_heads(&self) -> Result<u64, KvError> {
        let Some((key, value)) = self.find(ATTENTION_HEADS) else {
            return Err(KvError::Config {
                what: "kv_heads",
                problem: format!(
                    "MiniCPM3 caches one K/V head per attention head, but none of {} is \
                     set; {}; give `num_attention_heads`",
                    keys(ATTENTION_HEADS),
                    self.looked_in()
                ),
            });
        };
        let heads = positive("kv_heads", &key, value)?;
        self.note(format!(
            "MiniCPM3: MLA-shaped keys, but vLLM caches plain heads: kv heads = `{key}` \
             {heads}, head dim `qk_nope_head_dim` + `qk_rope_head_dim`, V padded to it \
             (`MiniCPM3Attention`)"
        ));
        Ok(heads)
    }

    /// The query heads with the key that set them, `None` where no section
    /// sets one (vLLM then reads 0, which every TP size divides).
    pub(crate) fn attention_heads(&self) -> Result<Option<(String, u64)>, KvError> {
        match self.find(ATTENTION_HEADS) {
            Some((key, value)) => positive("attention heads", &key, value).map(|n| Some((key, n))),
            None => Ok(None),
        }
    }

    /// No KV-head key: every attention head has its own K/V (vLLM's fallback).
    fn attention_heads_as_kv_heads(&self, tried: &str) -> Result<u64, KvError> {
        match self.find(ATTENTION_HEADS) {
            Some((key, value)) => {
                let heads = positive("kv_heads", &key, value)?;
                self.note(format!(
                    "kv heads = `{key}` {heads}: none of {tried} is set, so every attention \
                     head keeps its own K/V (multi-head attention, vLLM's fallback)"
                ));
                Ok(heads)
            }
            None => Err(KvError::Config {
                what: "kv_heads",
                problem: format!(
                    "none of {tried} nor the attention heads ({}) is set; {}; give `{}`",
                    keys(ATTENTION_HEADS),
                    self.looked_in(),
                    KV_HEADS[2]
                ),
            }),
        }
    }

    /// A boolean key; absent or `null` is false, anything but a bool an error.
    fn flag(&self, key: &'static str) -> Result<bool, KvError> {
        match self.find(&[key]) {
            None => Ok(false),
            Some((_, Value::Bool(flag))) => Ok(*flag),
            Some((name, other)) => Err(KvError::Config {
                what: key,
                problem: format!("`{name}` is {}; expected true or false", shown(other)),
            }),
        }
    }

    fn head_dim(&self) -> Result<u64, KvError> {
        let rule = self.family().map(|row| row.kv_heads);
        let head_dim_keys = match rule {
            Some(models::KvHeads::ChatGlm) => HEAD_DIM_CHATGLM,
            Some(models::KvHeads::Zamba2) => HEAD_DIM_ZAMBA2,
            Some(models::KvHeads::MiniCpm3) if self.head_dim.is_none() => {
                return self.qk_head_dim();
            }
            _ => HEAD_DIM,
        };
        if self.head_dim.is_some() || self.find(head_dim_keys).is_some() {
            return self.count_or("head_dim", self.head_dim, head_dim_keys);
        }
        let missing = |what: &str| KvError::Config {
            what: "head_dim",
            problem: format!(
                "`head_dim` is not set and {what}; {}; give `head_dim`",
                self.looked_in()
            ),
        };
        let Some((hidden_key, hidden)) = self.find(HIDDEN) else {
            return Err(missing(&format!(
                "no hidden size ({}) to derive it from",
                keys(HIDDEN)
            )));
        };
        let Some((heads_key, heads)) = self.find(ATTENTION_HEADS) else {
            return Err(missing(&format!(
                "no attention heads ({}) to derive it from",
                keys(ATTENTION_HEADS)
            )));
        };
        let hidden = positive("head_dim", &hidden_key, hidden)?;
        let heads = positive("head_dim", &heads_key, heads)?;
        if rule == Some(models::KvHeads::Zamba2) {
            return self.zamba2_head_dim((&hidden_key, hidden), (&heads_key, heads));
        }
        if hidden % heads != 0 {
            return Err(KvError::Config {
                what: "head_dim",
                problem: format!(
                    "`{hidden_key}` {hidden} is not divisible by `{heads_key}` {heads}; \
                     give `head_dim`"
                ),
            });
        }
        Ok(hidden / heads)
    }

    /// Zamba2's shared attention runs over the hidden state and the
    /// embeddings side by side: `attention_hidden_size` is `2 x hidden_size`
    /// and `attention_head_dim` its share per head, whatever the config
    /// writes (transformers' `Zamba2Config.__post_init__`); vLLM's
    /// `Zamba2Attention` requires `heads x attention_head_dim` to be the width.
    fn zamba2_head_dim(
        &self,
        (hidden_key, hidden): (&str, u64),
        (heads_key, heads): (&str, u64),
    ) -> Result<u64, KvError> {
        let width = hidden.checked_mul(2).ok_or_else(|| KvError::Config {
            what: "head_dim",
            problem: format!("2 x `{hidden_key}` {hidden} overflows u64"),
        })?;
        if width % heads != 0 {
            return Err(KvError::Config {
                what: "head_dim",
                problem: format!(
                    "Zamba2's attention width 2 x `{hidden_key}` = {width} is not divisible \
                     by `{heads_key}` {heads} (vLLM refuses it); give `attention_head_dim`"
                ),
            });
        }
        self.note(format!(
            "head dim = 2 x `{hidden_key}` / `{heads_key}` = {}: Zamba2's shared attention \
             runs over the hidden state and the embeddings side by side (transformers' \
             Zamba2Config.attention_head_dim)",
            width / heads
        ));
        Ok(width / heads)
    }

    /// `qk_nope_head_dim + qk_rope_head_dim`: the head MiniCPM3 caches
    /// (`head_dim`, which transformers sets to the rotary part, is not it).
    fn qk_head_dim(&self) -> Result<u64, KvError> {
        let nope = self.count_or("head_dim", None, &["qk_nope_head_dim"]);
        let rope = self.count_or("head_dim", None, &["qk_rope_head_dim"]);
        let (nope, rope) = match (nope, rope) {
            (Ok(nope), Ok(rope)) => (nope, rope),
            (nope, rope) => {
                return Err(KvError::from_all(
                    [nope.err(), rope.err()].into_iter().flatten().collect(),
                )
                .unwrap_or_else(no_error_collected))
            }
        };
        nope.checked_add(rope).ok_or_else(|| KvError::Config {
            what: "head_dim",
            problem: format!("`qk_nope_head_dim` {nope} + `qk_rope_head_dim` {rope} overflows u64"),
        })
    }

    pub(crate) fn read_dtype(&self) -> Result<DType, KvError> {
        let Some((key, value)) = self.find(DTYPE) else {
            if self.dtype_rule == DTypeRule::VllmAuto {
                // vLLM reads the weights' dtype from their safetensors
                // header, else takes float32 (`get_torch_dtype`), and auto
                // serves float32 in bfloat16 (`_resolve_auto_dtype`).
                self.note(format!(
                    "dtype bf16: none of {} is set, which vLLM resolves as float32 (its \
                     default when the config has no dtype and no safetensors header says \
                     one), and its dtype=auto serves float32 in bfloat16 on a bf16 GPU \
                     (Ampere, Hopper); give `torch_dtype` if the weights are another dtype",
                    keys(DTYPE)
                ));
                return Ok(DType::BF16);
            }
            return Err(KvError::Config {
                what: "dtype",
                problem: format!(
                    "none of {} is set; {}; give `torch_dtype`",
                    keys(DTYPE),
                    self.looked_in()
                ),
            });
        };
        let unknown = |shown: &str| KvError::Config {
            what: "dtype",
            problem: format!(
                "`{key}` is {shown}, not a dtype kv knows (torch names like \"bfloat16\", \
                 or {}); give `torch_dtype`",
                DType::names_list()
            ),
        };
        let written = match value {
            Value::String(text) => {
                DType::from_torch_dtype(text).ok_or_else(|| unknown(&shown(value)))?
            }
            other => return Err(unknown(&shown(other))),
        };
        Ok(match self.dtype_rule {
            DTypeRule::VllmAuto if written == DType::F32 => {
                self.note(format!(
                    "dtype bf16: `{key}` is float32, which vLLM's dtype=auto serves in \
                     bfloat16 (\"Downcast for float32 models\")"
                ));
                DType::BF16
            }
            DTypeRule::VllmAuto => {
                self.note(format!(
                    "dtype {written} as `{key}` writes it (vLLM's dtype=auto)"
                ));
                written
            }
            DTypeRule::AsWritten => written,
        })
    }

    /// An explicit value (checked positive), else the first of `keys` found.
    fn count_or(
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
            top.and_then(|map| map.get(section))
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
    fn find(&self, keys_tried: &[&str]) -> Option<(String, &Value)> {
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
    fn find_in(&self, keys_tried: &[&str], defaults: bool) -> Option<(String, &Value)> {
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
        Some((qualified(found.0, found.1), found.2))
    }

    /// The first non-null `key`, as `section.key`, and its value: one key,
    /// for readers beside this module that look up as the config does.
    pub(crate) fn value(&self, key: &str) -> Option<(String, &Value)> {
        self.find(&[key])
    }

    /// `key` as a positive count with its qualified name, `None` when no
    /// section sets it; a value that is not one is an error naming it.
    pub(crate) fn count_if_set(
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
        Some((qualified(section, key), value, map))
    }

    /// "looked at the top level, `text_config` (absent), ..." and the source.
    fn looked_in(&self) -> String {
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
            let state = match top.and_then(|map| map.get(section)) {
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

/// `key` at the top level, `section.key` in a section, `key (source)` for a
/// loader default.
fn qualified(section: Section, key: &str) -> String {
    match section {
        Section::Top => key.to_owned(),
        Section::Explicit => format!("explicit.{key}"),
        Section::Nested(name) => format!("{name}.{key}"),
        Section::Default(source) => format!("{key} ({source})"),
    }
}

/// At least one error was collected when a value failed; an error, not a
/// panic, should that ever change.
fn no_error_collected() -> KvError {
    KvError::Config {
        what: "geometry",
        problem: "a value failed without an error".to_owned(),
    }
}

/// A JSON value that must be a positive integer that fits `u64`.
fn positive(what: &'static str, key: &str, value: &Value) -> Result<u64, KvError> {
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
fn shown(value: &Value) -> String {
    const LIMIT: usize = 60;
    let text = value.to_string();
    match text.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// `` `a`, `b`, `c` ``
fn keys(list: &[&str]) -> String {
    let quoted: Vec<String> = list.iter().map(|k| format!("`{k}`")).collect();
    quoted.join(", ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ming_talker() -> Value {
        json!({
            "architectures": ["Qwen2ForCausalLM"],
            "num_hidden_layers": 24,
            "num_key_value_heads": 2,
            "hidden_size": 896,
            "num_attention_heads": 14,
            "torch_dtype": "bfloat16"
        })
    }

    fn error_of(config: Value) -> KvError {
        HfConfig::from_value(config).geometry().unwrap_err()
    }

    fn without(mut config: Value, key: &str) -> Value {
        config.as_object_mut().unwrap().remove(key);
        config
    }

    #[test]
    fn ming_talker_static_cache_is_25_165_824_bytes() {
        // StaticCache of max_cache_len 2048, one row (calls are serialized).
        let geometry = HfConfig::from_value(ming_talker()).geometry().unwrap();
        assert_eq!(geometry, Geometry::new(24, 2, 64, DType::BF16));
        assert_eq!(geometry.bytes_per_row(2048), Ok(25_165_824));
    }

    #[test]
    fn missing_layers_names_every_key_and_section() {
        let err = error_of(without(ming_talker(), "num_hidden_layers"));
        assert_eq!(
            err.to_string(),
            "kv: cannot read layers from the config: none of `num_hidden_layers`, \
             `encoder_layers`, `num_layers`, `n_layer`, `n_layers` is set; looked at the top \
             level, then `text_config` (absent), then `llm_config` (absent); give \
             `num_hidden_layers`"
        );
    }

    #[test]
    fn missing_kv_heads_names_every_key() {
        let config = without(
            without(ming_talker(), "num_key_value_heads"),
            "num_attention_heads",
        );
        let err = error_of(without(config, "hidden_size"));
        let KvError::Config { what, problem } = &err.into_problems()[0] else {
            panic!()
        };
        assert_eq!(*what, "kv_heads");
        assert!(
            problem.starts_with(
                "none of `n_head_kv`, `num_kv_heads`, `num_key_value_heads`, \
                 `multi_query_group_num`, `num_attention_groups` nor the attention heads \
                 (`num_attention_heads`, `n_head`, `n_heads`, `encoder_attention_heads`) is \
                 set; looked at the top level"
            ),
            "{problem}"
        );
        assert!(problem.ends_with("give `num_key_value_heads`"), "{problem}");
    }

    #[test]
    fn kv_heads_fall_back_to_attention_heads() {
        let config = without(ming_talker(), "num_key_value_heads");
        assert_eq!(
            HfConfig::from_value(config).geometry().unwrap().kv_heads,
            14
        );
    }

    #[test]
    fn missing_head_dim_sources_name_their_keys() {
        let no_hidden = error_of(without(ming_talker(), "hidden_size"));
        let KvError::Config { what, problem } = no_hidden else {
            panic!()
        };
        assert_eq!(what, "head_dim");
        assert!(
            problem.starts_with(
                "`head_dim` is not set and no hidden size (`hidden_size`, `d_model`, `n_embd`) to derive it from; looked at"
            ),
            "{problem}"
        );
        let no_heads = error_of(without(
            without(ming_talker(), "num_attention_heads"),
            "num_key_value_heads",
        ));
        // kv heads fall back to the attention heads, so both fail, together.
        let problems = no_heads.into_problems();
        assert!(matches!(
            problems[..],
            [
                KvError::Config {
                    what: "kv_heads",
                    ..
                },
                KvError::Config {
                    what: "head_dim",
                    ..
                }
            ]
        ));
        let no_heads = HfConfig::from_value(without(ming_talker(), "num_attention_heads"))
            .geometry()
            .unwrap_err();
        assert!(
            no_heads
                .to_string()
                .contains("no attention heads (`num_attention_heads`, `n_head`, `n_heads`, `encoder_attention_heads`)"),
            "{no_heads}"
        );
    }

    #[test]
    fn missing_dtype_names_both_keys() {
        let err = error_of(without(ming_talker(), "torch_dtype"));
        let KvError::Config { what, problem } = err else {
            panic!()
        };
        assert_eq!(what, "dtype");
        assert!(
            problem.starts_with("none of `torch_dtype`, `dtype` is set"),
            "{problem}"
        );
        assert!(problem.ends_with("give `torch_dtype`"), "{problem}");
    }

    #[test]
    fn newer_dtype_key_is_read() {
        let mut config = without(ming_talker(), "torch_dtype");
        config["dtype"] = json!("float32");
        assert_eq!(
            HfConfig::from_value(config)
                .geometry()
                .unwrap()
                .storage
                .dtype()
                .unwrap(),
            DType::F32
        );
    }

    #[test]
    fn explicit_head_dim_wins_over_config() {
        let mut config = ming_talker();
        config["head_dim"] = json!(128);
        assert_eq!(
            HfConfig::from_value(config.clone())
                .geometry()
                .unwrap()
                .head_dim,
            128
        );
        let fixed = HfConfig::from_value(config)
            .with_head_dim(96)
            .geometry()
            .unwrap();
        assert_eq!(fixed.head_dim, 96);
    }

    #[test]
    fn explicit_values_fill_what_the_config_lacks() {
        let geometry = HfConfig::from_value(json!({}))
            .with_layers(3)
            .with_kv_heads(4)
            .with_head_dim(5)
            .with_dtype(DType::F16)
            .geometry()
            .unwrap();
        assert_eq!(geometry, Geometry::new(3, 4, 5, DType::F16));
        let zero = HfConfig::from_value(ming_talker())
            .with_layers(0)
            .geometry()
            .unwrap_err();
        assert!(
            zero.to_string().contains("the explicit layers is 0"),
            "{zero}"
        );
    }

    #[test]
    fn hidden_not_divisible_by_heads_is_an_error() {
        let mut config = ming_talker();
        config["hidden_size"] = json!(900);
        let err = error_of(config);
        assert_eq!(
            err.to_string(),
            "kv: cannot read head_dim from the config: `hidden_size` 900 is not divisible by \
             `num_attention_heads` 14; give `head_dim`"
        );
    }

    #[test]
    fn encoder_configs_use_encoder_keys() {
        // Whisper-style: encoder_layers, encoder_attention_heads, d_model.
        let whisper = json!({
            "encoder_layers": 24,
            "encoder_attention_heads": 16,
            "d_model": 1024,
            "torch_dtype": "bfloat16"
        });
        let geometry = HfConfig::from_value(whisper).geometry().unwrap();
        assert_eq!(geometry, Geometry::new(24, 16, 64, DType::BF16));
    }

    #[test]
    fn wrong_types_are_rejected_with_key_and_value() {
        let cases = [
            (
                json!("24"),
                "`num_hidden_layers` is \"24\"; expected a positive integer",
            ),
            (json!(24.5), "`num_hidden_layers` is 24.5; not an integer"),
            (json!(24.0), "`num_hidden_layers` is 24.0; not an integer"),
            (
                json!(-3),
                "`num_hidden_layers` is -3; a count cannot be negative",
            ),
            (
                json!(0),
                "`num_hidden_layers` is 0; a count must be positive",
            ),
            (
                json!(true),
                "`num_hidden_layers` is true; expected a positive integer",
            ),
            (
                json!([24]),
                "`num_hidden_layers` is [24]; expected a positive integer",
            ),
        ];
        for (value, expected) in cases {
            let mut config = ming_talker();
            config["num_hidden_layers"] = value;
            let err = error_of(config);
            assert!(
                matches!(err, KvError::Config { what: "layers", .. }),
                "{err:?}"
            );
            assert!(err.to_string().ends_with(expected), "{err}");
        }
        let huge: Value =
            serde_json::from_str(r#"{"num_hidden_layers": 18446744073709551616}"#).unwrap();
        let err = error_of(huge);
        assert!(
            err.to_string()
                .contains("`num_hidden_layers` is 1.8446744073709552e+19; more than u64 can hold"),
            "{err}"
        );
        let mut config = ming_talker();
        config["torch_dtype"] = json!("complex64");
        let err = error_of(config);
        assert!(
            err.to_string()
                .contains("`torch_dtype` is \"complex64\", not a dtype"),
            "{err}"
        );
        let mut config = ming_talker();
        config["torch_dtype"] = json!(16);
        assert!(matches!(
            error_of(config),
            KvError::Config { what: "dtype", .. }
        ));
    }

    #[test]
    fn configs_are_equal_when_they_read_alike_whatever_was_asked() {
        let a = HfConfig::from_value(ming_talker());
        let b = HfConfig::from_value(ming_talker());
        a.geometry().unwrap();
        assert!(a.was_asked("num_hidden_layers") && !b.was_asked("num_hidden_layers"));
        assert_eq!(a, b);
        let differ: [HfConfig; 9] = [
            HfConfig::from_value(json!({})),
            HfConfig::from_path_text_for_tests(ming_talker()),
            b.clone().with_layers(1),
            b.clone().with_kv_heads(1),
            b.clone().with_head_dim(1),
            b.clone().with_dtype(DType::F16),
            b.clone().with_dtype_rule(DTypeRule::VllmAuto),
            b.clone().with_value("x", 1),
            b.clone().with_mamba_version(MambaVersion::Mamba1),
        ];
        for other in differ {
            assert_ne!(other, b, "{other:?}");
        }
    }

    #[test]
    fn a_model_type_given_over_the_config_brings_its_loader_defaults() {
        let bare = json!({"num_hidden_layers": 4, "num_attention_heads": 8,
                          "num_key_value_heads": 4, "torch_dtype": "bfloat16"});
        // No head_dim and no hidden size: nothing to derive it from.
        assert!(HfConfig::from_value(bare.clone()).geometry().is_err());
        let gemma = HfConfig::from_value(bare).with_value("model_type", "gemma3_text");
        assert_eq!(gemma.geometry().unwrap().head_dim, 256);
        assert_eq!(
            gemma.notes(),
            ["`head_dim` 256 (transformers Gemma3TextConfig default)"]
        );
        // Any other key given leaves the family alone.
        let other = HfConfig::from_value(json!({"model_type": "gemma3_text"})).with_value("x", 1);
        assert!(other.family().is_some());
    }

    #[test]
    fn null_counts_as_absent() {
        let mut config = ming_talker();
        config["head_dim"] = Value::Null;
        assert_eq!(
            HfConfig::from_value(config).geometry().unwrap().head_dim,
            64
        );
    }

    #[test]
    fn text_config_is_read_after_the_top_level() {
        // Llava-style: the language model in text_config, the dtype at the top.
        let config = json!({
            "torch_dtype": "float16",
            "vision_config": {"num_hidden_layers": 99},
            "text_config": without(ming_talker(), "torch_dtype")
        });
        assert_eq!(
            HfConfig::from_value(config).geometry().unwrap(),
            Geometry::new(24, 2, 64, DType::F16)
        );
        // The top level decides a value it holds.
        let config = json!({"num_hidden_layers": 2, "text_config": ming_talker()});
        assert_eq!(HfConfig::from_value(config).geometry().unwrap().layers, 2);
    }

    #[test]
    fn llm_config_is_read_after_text_config() {
        // InternVL-style: llm_config only.
        let config = json!({"llm_config": ming_talker()});
        assert_eq!(
            HfConfig::from_value(config).geometry().unwrap(),
            Geometry::new(24, 2, 64, DType::BF16)
        );
        let config = json!({
            "text_config": {"num_hidden_layers": 7},
            "llm_config": ming_talker()
        });
        let geometry = HfConfig::from_value(config).geometry().unwrap();
        assert_eq!(geometry.layers, 7);
        assert_eq!(geometry.kv_heads, 2);
    }

    #[test]
    fn errors_in_nested_sections_name_the_section() {
        let mut talker = ming_talker();
        talker["num_key_value_heads"] = json!(-2);
        let err = error_of(json!({"text_config": talker}));
        assert!(
            err.to_string()
                .contains("`text_config.num_key_value_heads` is -2"),
            "{err}"
        );
        let err = error_of(json!({"text_config": 3}));
        assert!(
            err.to_string()
                .contains("then `text_config` (not an object)"),
            "{err}"
        );
    }

    #[test]
    fn any_json_gives_an_error_not_a_panic() {
        for config in [
            json!(null),
            json!(1),
            json!("x"),
            json!([1, 2]),
            json!({"text_config": []}),
        ] {
            // Every value is missing, and all are named at once.
            let problems = error_of(config).into_problems();
            let whats: Vec<&str> = problems
                .iter()
                .map(|p| match p {
                    KvError::Config { what, .. } => *what,
                    _ => "?",
                })
                .collect();
            assert_eq!(whats, ["layers", "kv_heads", "head_dim", "dtype"]);
        }
        assert!(error_of(json!([]))
            .to_string()
            .contains("top level (not a JSON object)"));
    }

    #[test]
    fn from_path_reads_a_file_and_names_it_in_errors() {
        let dir = std::env::temp_dir().join(format!("kv-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("config.json");
        std::fs::write(&good, ming_talker().to_string()).unwrap();
        let geometry = HfConfig::from_path(&good).unwrap().geometry().unwrap();
        assert_eq!(geometry, Geometry::new(24, 2, 64, DType::BF16));

        let sparse = dir.join("sparse.json");
        std::fs::write(&sparse, "{}").unwrap();
        let err = HfConfig::from_path(&sparse)
            .unwrap()
            .geometry()
            .unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("of `{}`", sparse.display())),
            "{err}"
        );

        let broken = dir.join("broken.json");
        std::fs::write(&broken, "{ not json").unwrap();
        let err = HfConfig::from_path(&broken).unwrap_err();
        assert!(
            matches!(err, KvError::ConfigFile { ref path, .. } if *path == broken.display().to_string())
        );
        let missing = HfConfig::from_path(dir.join("absent.json")).unwrap_err();
        assert!(matches!(missing, KvError::ConfigFile { .. }));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
