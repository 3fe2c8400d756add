//! Which layers hold which cache: the layer pattern of a hybrid model, and
//! the sliding window.

use serde_json::Value;

use super::lookup::{keys, positive, shown, HfConfig, LAYERS};
use crate::error::KvError;
use crate::pattern::{LayerKind, LayerPattern, PatternError};

const LAYER_TYPES: &str = "layer_types";
const LAYERS_BLOCK_TYPE: &str = "layers_block_type";
const HYBRID_OVERRIDE_PATTERN: &str = "hybrid_override_pattern";
const SLIDING_WINDOW_PATTERN: &str = "sliding_window_pattern";
const FULL_ATTENTION_INTERVAL: &str = "full_attention_interval";
const ATTN_LAYER_PERIOD: &str = "attn_layer_period";
const ATTN_LAYER_OFFSET: &str = "attn_layer_offset";
/// Every key [`HfConfig::layer_pattern`] reads, in order.
const PATTERN_KEYS: &[&str] = &[
    LAYER_TYPES,
    LAYERS_BLOCK_TYPE,
    HYBRID_OVERRIDE_PATTERN,
    SLIDING_WINDOW_PATTERN,
    FULL_ATTENTION_INTERVAL,
    ATTN_LAYER_PERIOD,
    ATTN_LAYER_OFFSET,
];
const NO_ROPE_LAYERS: &str = "no_rope_layers";
const NO_ROPE_LAYER_INTERVAL: &str = "no_rope_layer_interval";
const ATTENTION_CHUNK_SIZE: &str = "attention_chunk_size";
const NUM_KV_SHARED_LAYERS: &str = "num_kv_shared_layers";
/// Lists built into a pattern are materialized: no real model comes close.
const MAX_LISTED_LAYERS: u64 = 1 << 20;
const SLIDING_WINDOW: &str = "sliding_window";
const USE_SLIDING_WINDOW: &str = "use_sliding_window";

const WHAT: &str = "layer pattern";

impl HfConfig {
    /// The layer count: given ([`HfConfig::with_layers`]), else the
    /// config's, else, where the config writes none, the length of its
    /// per-layer list (`layer_types`, `layers_block_type`,
    /// `hybrid_override_pattern`), noted: transformers' NemotronHConfig
    /// derives `num_hidden_layers` so, and a valid config's list has that
    /// many entries whatever its class. None of them is an error naming
    /// every key.
    pub(super) fn layer_count(&self) -> Result<u64, KvError> {
        if self.layers.is_some() || self.find(LAYERS).is_some() {
            return self.count_or("layers", self.layers, LAYERS);
        }
        for key in [LAYER_TYPES, LAYERS_BLOCK_TYPE, HYBRID_OVERRIDE_PATTERN] {
            let length = match self.find_in(&[key], false) {
                Some((name, Value::Array(list))) if !list.is_empty() => (name, list.len()),
                Some((name, Value::String(text))) if !text.is_empty() => {
                    (name, text.chars().count())
                }
                _ => continue,
            };
            let (name, length) = (length.0, u64::try_from(length.1).unwrap_or(u64::MAX));
            self.note(format!(
                "layers {length}: the length of `{name}`, as none of {} is set",
                keys(LAYERS)
            ));
            return Ok(length);
        }
        self.count_or("layers", self.layers, LAYERS)
    }

    /// The hybrid layer pattern: which layers are full, sliding or linear
    /// attention, or Mamba, and how many of each.
    ///
    /// | key | pattern |
    /// |---|---|
    /// | `layer_types` | one name per layer (`"full_attention"`, `"sliding_attention"`, `"chunked_attention"`, `"linear_attention"`, `"mamba"`, `"attention"`) |
    /// | `layers_block_type` | the same, Jamba's spelling (`"attention"`, `"mamba"`) |
    /// | `hybrid_override_pattern` | one character per layer, as vLLM's Nemotron-H reads it: `*` attention, `M` Mamba2, `-` MLP, `E` MoE (the last two hold nothing) |
    /// | `sliding_window_pattern` N | layer `i` full attention when `(i + 1) % N == 0`, else sliding (Gemma-3) |
    /// | `full_attention_interval` N | layer `i` full attention when `(i + 1) % N == 0`, else linear (Qwen3-Next) |
    /// | `attn_layer_period` P with `attn_layer_offset` O | layer `i` attention when `i % P == O`, else Mamba (Jamba) |
    ///
    /// The layer count is read as for [`HfConfig::geometry`] (or
    /// [`HfConfig::with_layers`]); a list must have exactly that many
    /// entries. Each key is looked for as for [`HfConfig`] (explicit values,
    /// top level, the nested sections; `null` is absent).
    ///
    /// When a list and a rule are both set, they must agree on every layer
    /// (transformers would use the list); the list is returned. Two rules
    /// without a list are an error: kv does not pick one. An unknown layer
    /// name, a zero interval or period, an offset not below the period, a
    /// period without its offset, and a missing key are errors that name the
    /// keys. Gemma-3-27B's published config leaves `sliding_window_pattern`
    /// to transformers' default; give it with
    /// `.with_value("sliding_window_pattern", 6)`.
    ///
    /// ```
    /// use kv_core::HfConfig;
    /// use kv_core::pattern::LayerKind;
    ///
    /// let qwen3_next = serde_json::json!({"num_hidden_layers": 48, "full_attention_interval": 4});
    /// let pattern = HfConfig::from_value(qwen3_next).layer_pattern()?;
    /// assert_eq!(pattern.count(LayerKind::FullAttention), 12);
    /// assert_eq!(pattern.count(LayerKind::LinearAttention), 36);
    /// # Ok::<(), kv_core::KvError>(())
    /// ```
    pub fn layer_pattern(&self) -> Result<LayerPattern, KvError> {
        // A pattern the config writes wins over any a loader would default.
        let defaults = !PATTERN_KEYS
            .iter()
            .chain([&NO_ROPE_LAYER_INTERVAL])
            .any(|key| self.written(key))
            // An empty `no_rope_layers` asks the loader to build it.
            && self
                .find_in(&[NO_ROPE_LAYERS], false)
                .is_none_or(|(_, v)| v.as_array().is_some_and(Vec::is_empty));
        let shared = match self.find(&[NUM_KV_SHARED_LAYERS]) {
            Some((name, value)) => match value.as_u64() {
                Some(0) => None,
                _ => Some((name.clone(), positive(WHAT, &name, value)?)),
            },
            None => None,
        };
        let pattern = match self.base_pattern(defaults)? {
            Some(pattern) => pattern,
            None if shared.is_some() => {
                let layers = self.layer_count()?;
                LayerPattern::every_nth(
                    layers,
                    1,
                    LayerKind::FullAttention,
                    LayerKind::FullAttention,
                    "every layer",
                )
                .map_err(|e| pattern_error("num_hidden_layers", e))?
            }
            None => {
                return Err(KvError::Config {
                    what: WHAT,
                    problem: format!(
                        "none of {} is set; {}; give one",
                        keys(PATTERN_KEYS),
                        self.looked_in()
                    ),
                })
            }
        };
        match shared {
            None => Ok(pattern),
            Some((name, shared)) => kv_shared_tail(pattern, &name, shared),
        }
    }

    /// Whether [`HfConfig::layer_pattern`] finds any key to build from: a
    /// config without one has the same kind of layer throughout.
    pub fn has_layer_pattern(&self) -> bool {
        PATTERN_KEYS.iter().any(|key| self.find(&[key]).is_some())
            || self
                .find(&[NUM_KV_SHARED_LAYERS])
                .is_some_and(|(_, v)| v.as_u64() != Some(0))
            || (self.find(&[ATTENTION_CHUNK_SIZE]).is_some()
                && (self.find(&[NO_ROPE_LAYERS]).is_some()
                    || self.find(&[NO_ROPE_LAYER_INTERVAL]).is_some()))
    }

    /// The pattern from the pattern keys; `None` when none is set.
    fn base_pattern(&self, defaults: bool) -> Result<Option<LayerPattern>, KvError> {
        let lists: Vec<(String, &Value)> =
            [LAYER_TYPES, LAYERS_BLOCK_TYPE, HYBRID_OVERRIDE_PATTERN]
                .into_iter()
                .filter_map(|key| self.find_in(&[key], defaults))
                .collect();
        let every: Vec<(String, &Value, LayerKind, &'static str)> = [
            (SLIDING_WINDOW_PATTERN, LayerKind::SlidingAttention),
            (FULL_ATTENTION_INTERVAL, LayerKind::LinearAttention),
        ]
        .into_iter()
        .filter_map(|(key, rest)| {
            self.find_in(&[key], defaults)
                .map(|(name, value)| (name, value, rest, key))
        })
        .collect();
        let period = self.find_in(&[ATTN_LAYER_PERIOD], defaults);
        let offset = self.find_in(&[ATTN_LAYER_OFFSET], defaults);
        // Llama 4: layers with RoPE attend within chunks, NoPE layers attend
        // to everything (transformers' Llama4TextConfig.layer_types).
        let chunked = match self.find_in(&[ATTENTION_CHUNK_SIZE], defaults) {
            Some(_) => (
                self.find_in(&[NO_ROPE_LAYERS], defaults)
                    .filter(|(_, v)| v.as_array().is_none_or(|list| !list.is_empty())),
                self.find_in(&[NO_ROPE_LAYER_INTERVAL], defaults),
            ),
            None => (None, None),
        };
        if lists.is_empty()
            && every.is_empty()
            && period.is_none()
            && offset.is_none()
            && chunked.0.is_none()
            && chunked.1.is_none()
        {
            return Ok(None);
        }
        let layers = self.layer_count()?;

        let mut rules: Vec<(String, LayerPattern)> = Vec::new();
        for (name, value, rest, key) in every {
            // EXAONE 4 writes `"LLLG"` beside `layer_types`; transformers 5
            // reads the list and never the string (Exaone4Config), and
            // cannot build a config with the string alone.
            if value.is_string() && key == SLIDING_WINDOW_PATTERN {
                if !lists.is_empty() {
                    continue;
                }
                return Err(KvError::Config {
                    what: WHAT,
                    problem: format!(
                        "`{name}` is {value}, a string, and no `{LAYER_TYPES}` lists the \
                         layers: transformers 5 reads such a pattern only as a number (it \
                         fails with a TypeError here); give `{LAYER_TYPES}` as the published \
                         EXAONE 4 configs do"
                    ),
                });
            }
            let n = positive(WHAT, &name, value)?;
            let pattern = LayerPattern::every_nth(layers, n, LayerKind::FullAttention, rest, key)
                .map_err(|e| pattern_error(&name, e))?;
            rules.push((name, pattern));
        }
        match (period, offset) {
            (None, None) => {}
            (Some((name, _)), None) | (None, Some((name, _))) => {
                return Err(KvError::Config {
                    what: WHAT,
                    problem: format!(
                        "`{name}` is set but not its partner; Jamba's pattern needs both \
                         `{ATTN_LAYER_PERIOD}` and `{ATTN_LAYER_OFFSET}`; {}",
                        self.looked_in()
                    ),
                })
            }
            (Some((period_name, period)), Some((offset_name, offset))) => {
                let period = positive(WHAT, &period_name, period)?;
                let offset = match offset.as_u64() {
                    Some(offset) => offset,
                    // Not a u64: let `positive` name the problem.
                    None => positive(WHAT, &offset_name, offset)?,
                };
                let pattern = LayerPattern::period_offset(
                    layers,
                    period,
                    offset,
                    LayerKind::FullAttention,
                    LayerKind::Mamba,
                    (ATTN_LAYER_PERIOD, ATTN_LAYER_OFFSET),
                )
                .map_err(|e| pattern_error(&format!("{period_name}`/`{offset_name}"), e))?;
                rules.push((format!("{period_name}`/`{offset_name}"), pattern));
            }
        }
        match chunked {
            (Some((name, value)), _) => {
                rules.push((name.clone(), no_rope_list(&name, value, layers)?))
            }
            (None, Some((name, value))) => {
                // An empty or absent `no_rope_layers` is built from the interval.
                let every = positive(WHAT, &name, value)?;
                let pattern = LayerPattern::every_nth(
                    layers,
                    every,
                    LayerKind::FullAttention,
                    LayerKind::ChunkedAttention,
                    NO_ROPE_LAYER_INTERVAL,
                )
                .map_err(|e| pattern_error(&name, e))?;
                rules.push((name, pattern));
            }
            (None, None) => {}
        }

        let mut listed: Vec<(String, LayerPattern)> = Vec::new();
        for (name, value) in lists {
            let pattern = if name.ends_with(HYBRID_OVERRIDE_PATTERN) {
                override_pattern(&name, value, layers)?
            } else {
                let key = if name.ends_with(LAYER_TYPES) {
                    LAYER_TYPES
                } else {
                    LAYERS_BLOCK_TYPE
                };
                let spellings = self
                    .family_row()
                    .map_or(&[][..], |row| row.layer_kind_names);
                let pattern = list_pattern(&name, key, value, layers, spellings)?;
                if self
                    .family_row()
                    .and_then(|row| row.mamba)
                    .is_some_and(|rule| rule.listed_as_linear_attention)
                {
                    linear_as_mamba(&name, &pattern)?
                } else {
                    pattern
                }
            };
            listed.push((name.clone(), pattern));
        }

        let Some((first_name, first)) = listed.first().or(rules.first()).cloned() else {
            return Err(no_pattern_built());
        };
        if listed.is_empty() && rules.len() > 1 {
            let names: Vec<&str> = rules.iter().map(|(name, _)| name.as_str()).collect();
            return Err(KvError::Config {
                what: WHAT,
                problem: format!(
                    "{} are all set and no `{LAYER_TYPES}` lists the layers; kv does not \
                     pick one; remove one or give `{LAYER_TYPES}`",
                    keys(&names)
                ),
            });
        }
        for (name, other) in listed.iter().chain(&rules).skip(1) {
            // `first` is a list here, so this walks at most its length.
            if let Some((layer, (a, b))) = first
                .kinds()
                .zip(other.kinds())
                .enumerate()
                .find(|(_, (a, b))| a != b)
            {
                return Err(KvError::Config {
                    what: WHAT,
                    problem: format!(
                        "`{first_name}` and `{name}` disagree: layer {layer} is {a} in one \
                         and {b} in the other; fix the config"
                    ),
                });
            }
        }
        Ok(Some(first))
    }

    /// The sliding window, in positions: `Some(window)`, or `None` when the
    /// config says there is none.
    ///
    /// | value | key |
    /// |---|---|
    /// | window | `sliding_window` |
    ///
    /// `None` when `sliding_window` is `null` (Jamba, and most configs that
    /// have no window), or when the section that holds it also sets
    /// `use_sliding_window: false` (Qwen2 writes a window it does not use).
    /// A config with no `sliding_window` key at all is an error naming the key
    /// and every section looked in: a missing key is not a "no" (give it with
    /// `.with_value("sliding_window", serde_json::Value::Null)` if it means
    /// one). Zero, negative, a float or a string is an error naming key and
    /// value; so is a `use_sliding_window` that is not a boolean.
    ///
    /// Which layers the window applies to is [`HfConfig::layer_pattern`]'s
    /// business: Mistral-7B-v0.1 windows every layer, Gemma-3 only its
    /// sliding ones.
    pub fn sliding_window(&self) -> Result<Option<u64>, KvError> {
        // `with_value(key, null)` counts as "given": it is looked up with nulls.
        let Some((name, value, section)) = self.find_with_null(SLIDING_WINDOW) else {
            return Err(KvError::Config {
                what: SLIDING_WINDOW,
                problem: format!(
                    "`{SLIDING_WINDOW}` is not set (a config without a window writes it as \
                     null); {}; give `sliding_window`",
                    self.looked_in()
                ),
            });
        };
        if value.is_null() {
            return Ok(None);
        }
        match section.get(USE_SLIDING_WINDOW) {
            None | Some(Value::Null) | Some(Value::Bool(true)) => {}
            Some(Value::Bool(false)) => return Ok(None),
            Some(other) => {
                return Err(KvError::Config {
                    what: SLIDING_WINDOW,
                    problem: format!(
                        "`{USE_SLIDING_WINDOW}` beside `{name}` is {}; expected true or false",
                        shown(other)
                    ),
                })
            }
        }
        positive(SLIDING_WINDOW, &name, value).map(Some)
    }
}

impl HfConfig {
    /// [`HfConfig::sliding_window`] for a reader that takes a config with no
    /// `sliding_window` key at all as having no window (a plain Llama config
    /// does not write it); a bad value is still an error.
    ///
    /// ```
    /// let qwen2 = serde_json::json!({"sliding_window": 32768, "use_sliding_window": false});
    /// assert_eq!(kv_core::HfConfig::from_value(qwen2).sliding_window_if_set()?, None);
    /// let llama = serde_json::json!({"num_hidden_layers": 32});
    /// assert_eq!(kv_core::HfConfig::from_value(llama).sliding_window_if_set()?, None);
    /// # Ok::<(), kv_core::KvError>(())
    /// ```
    pub fn sliding_window_if_set(&self) -> Result<Option<u64>, KvError> {
        if self.find_with_null(SLIDING_WINDOW).is_none() {
            return Ok(None);
        }
        self.sliding_window()
    }
}

/// Llama 4's `no_rope_layers`: 1 where a layer has RoPE (chunked attention),
/// 0 where it has none (full attention).
fn no_rope_list(name: &str, value: &Value, layers: u64) -> Result<LayerPattern, KvError> {
    kinds_list(
        (name, NO_ROPE_LAYERS),
        value,
        layers,
        (
            "a list of 0 and 1",
            "; expected 1 (RoPE, chunked attention) or 0 (NoPE, full attention)",
        ),
        |entry| match entry.as_u64() {
            Some(1) => Some(LayerKind::ChunkedAttention),
            Some(0) => Some(LayerKind::FullAttention),
            _ => None,
        },
    )
}

/// The pattern with its last `shared` layers holding no K/V of their own
/// (Gemma-3n's `num_kv_shared_layers`: they read earlier layers' caches).
fn kv_shared_tail(pattern: LayerPattern, name: &str, shared: u64) -> Result<LayerPattern, KvError> {
    let layers = pattern.layers();
    if shared >= layers {
        return Err(KvError::Config {
            what: WHAT,
            problem: format!(
                "`{name}` is {shared} but the model has {layers} layers: at least one layer \
                 must keep its own K/V"
            ),
        });
    }
    if layers > MAX_LISTED_LAYERS {
        return Err(KvError::Config {
            what: WHAT,
            problem: format!(
                "`{name}` on {layers} layers: kv lists shared layers one by one, up to \
                 {MAX_LISTED_LAYERS}"
            ),
        });
    }
    let owners = layers - shared;
    let kinds: Vec<LayerKind> = pattern
        .kinds()
        .enumerate()
        .map(|(i, kind)| {
            if (i as u64) < owners {
                kind
            } else {
                LayerKind::KvShared
            }
        })
        .collect();
    // The reason keeps where the kinds came from, and says what sharing did.
    let key = format!(
        "{}, the last {shared} kv_shared by {NUM_KV_SHARED_LAYERS}",
        pattern.source()
    );
    LayerPattern::from_kinds(kinds, key).map_err(|e| pattern_error(name, e))
}

/// `pattern` with its `linear_attention` layers read as Mamba.
fn linear_as_mamba(name: &str, pattern: &LayerPattern) -> Result<LayerPattern, KvError> {
    let kinds = pattern
        .kinds()
        .map(|kind| match kind {
            LayerKind::LinearAttention => LayerKind::Mamba,
            other => other,
        })
        .collect();
    LayerPattern::from_kinds(kinds, pattern.source()).map_err(|e| pattern_error(name, e))
}

/// Nemotron-H's `hybrid_override_pattern`: one character per layer, read
/// as vLLM 0.33's `NemotronHModel` builds its layers (`ALL_DECODER_LAYER_TYPES`),
/// checked against the layer count.
fn override_pattern(name: &str, value: &Value, layers: u64) -> Result<LayerPattern, KvError> {
    let bad = |problem: String| KvError::Config {
        what: WHAT,
        problem,
    };
    let Value::String(text) = value else {
        return Err(bad(format!(
            "`{name}` is {}; expected a string of `*` (attention), `M` (Mamba2), `-` (MLP) \
             and `E` (MoE), one per layer",
            shown(value)
        )));
    };
    let mut kinds = Vec::with_capacity(text.len());
    for (index, symbol) in text.chars().enumerate() {
        kinds.push(match symbol {
            '*' => LayerKind::FullAttention,
            'M' => LayerKind::Mamba,
            '-' | 'E' => LayerKind::Mlp,
            other => {
                return Err(bad(format!(
                    "`{name}` has {other:?} at layer {index}; vLLM's Nemotron-H knows `*` \
                     (attention), `M` (Mamba2), `-` (MLP) and `E` (MoE)"
                )))
            }
        });
    }
    if kinds.len() as u64 != layers {
        return Err(bad(format!(
            "`{name}` has {} layers but the model has {layers}; vLLM builds one layer per \
             character, so give `num_hidden_layers` {}",
            kinds.len(),
            kinds.len()
        )));
    }
    LayerPattern::from_kinds(kinds, HYBRID_OVERRIDE_PATTERN).map_err(|e| pattern_error(name, e))
}

/// A `layer_types`-style list, checked against the layer count; a name of
/// the family's own (`spellings`) is read as its kind.
fn list_pattern(
    name: &str,
    key: &'static str,
    value: &Value,
    layers: u64,
    spellings: &[(&str, LayerKind)],
) -> Result<LayerPattern, KvError> {
    let own: String = spellings.iter().map(|(n, _)| format!(", {n}")).collect();
    let unknown = format!(
        ", not a layer kind kv knows ({}{own})",
        LayerKind::names_list()
    );
    kinds_list(
        (name, key),
        value,
        layers,
        ("a list of layer kinds", &unknown),
        |entry| {
            let entry = entry.as_str()?;
            spellings
                .iter()
                .find(|(spelled, _)| *spelled == entry)
                .map(|(_, kind)| *kind)
                .or_else(|| LayerKind::from_name(entry))
        },
    )
}

/// A list with one entry per layer, each read by `kind_of`; `(list, entry)`
/// say what the list and a bad entry should have been.
fn kinds_list(
    (name, key): (&str, &'static str),
    value: &Value,
    layers: u64,
    (list, entry_expected): (&str, &str),
    kind_of: impl Fn(&Value) -> Option<LayerKind>,
) -> Result<LayerPattern, KvError> {
    let bad = |problem: String| KvError::Config {
        what: WHAT,
        problem,
    };
    let Value::Array(entries) = value else {
        return Err(bad(format!(
            "`{name}` is {}; expected {list}",
            shown(value)
        )));
    };
    let mut kinds = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let Some(kind) = kind_of(entry) else {
            return Err(bad(format!(
                "`{name}[{index}]` is {}{entry_expected}",
                shown(entry)
            )));
        };
        kinds.push(kind);
    }
    if kinds.len() as u64 != layers {
        return Err(bad(format!(
            "`{name}` lists {} layers but the model has {layers}",
            kinds.len()
        )));
    }
    LayerPattern::from_kinds(kinds, key).map_err(|e| pattern_error(name, e))
}

fn pattern_error(name: &str, error: PatternError) -> KvError {
    KvError::Config {
        what: WHAT,
        problem: format!("`{name}`: {error}"),
    }
}

/// At least one pattern is built once a key is found; an error, not a panic,
/// should that ever change.
fn no_pattern_built() -> KvError {
    KvError::Config {
        what: WHAT,
        problem: "no pattern was built from the keys found".to_owned(),
    }
}
