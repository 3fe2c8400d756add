//! Which layers hold which cache: the layer pattern of a hybrid model, and
//! the sliding window.

use serde_json::Value;

use super::{keys, positive, shown, HfConfig, LAYERS};
use crate::pattern::PatternError;
use crate::{KvError, LayerKind, LayerPattern};

const LAYER_TYPES: &str = "layer_types";
const LAYERS_BLOCK_TYPE: &str = "layers_block_type";
const SLIDING_WINDOW_PATTERN: &str = "sliding_window_pattern";
const FULL_ATTENTION_INTERVAL: &str = "full_attention_interval";
const ATTN_LAYER_PERIOD: &str = "attn_layer_period";
const ATTN_LAYER_OFFSET: &str = "attn_layer_offset";
/// Every key [`HfConfig::layer_pattern`] reads, in order.
const PATTERN_KEYS: &[&str] = &[
    LAYER_TYPES,
    LAYERS_BLOCK_TYPE,
    SLIDING_WINDOW_PATTERN,
    FULL_ATTENTION_INTERVAL,
    ATTN_LAYER_PERIOD,
    ATTN_LAYER_OFFSET,
];
const SLIDING_WINDOW: &str = "sliding_window";
const USE_SLIDING_WINDOW: &str = "use_sliding_window";

const WHAT: &str = "layer pattern";

impl HfConfig {
    /// The hybrid layer pattern: which layers are full, sliding or linear
    /// attention, or Mamba, and how many of each.
    ///
    /// | key | pattern |
    /// |---|---|
    /// | `layer_types` | one name per layer (`"full_attention"`, `"sliding_attention"`, `"chunked_attention"`, `"linear_attention"`, `"mamba"`, `"attention"`) |
    /// | `layers_block_type` | the same, Jamba's spelling (`"attention"`, `"mamba"`) |
    /// | `sliding_window_pattern` N | layer `i` full attention when `(i + 1) % N == 0`, else sliding (Gemma-3) |
    /// | `full_attention_interval` N | layer `i` full attention when `(i + 1) % N == 0`, else linear (Qwen3-Next) |
    /// | `attn_layer_period` P with `attn_layer_offset` O | layer `i` attention when `i % P == O`, else Mamba (Jamba) |
    ///
    /// The layer count is read as for [`HfConfig::geometry`] (or
    /// [`HfConfig::with_layers`]); a list must have exactly that many
    /// entries. Each key is looked for as for [`HfConfig`] (explicit values,
    /// top level, `text_config`, `llm_config`; `null` is absent).
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
    /// use kv_core::{HfConfig, LayerKind};
    ///
    /// let qwen3_next = serde_json::json!({"num_hidden_layers": 48, "full_attention_interval": 4});
    /// let pattern = HfConfig::from_value(qwen3_next).layer_pattern()?;
    /// assert_eq!(pattern.count(LayerKind::FullAttention), 12);
    /// assert_eq!(pattern.count(LayerKind::LinearAttention), 36);
    /// # Ok::<(), kv_core::KvError>(())
    /// ```
    pub fn layer_pattern(&self) -> Result<LayerPattern, KvError> {
        let lists: Vec<(String, &Value)> = [LAYER_TYPES, LAYERS_BLOCK_TYPE]
            .into_iter()
            .filter_map(|key| self.find(&[key]))
            .collect();
        let every: Vec<(String, &Value, LayerKind, &'static str)> = [
            (SLIDING_WINDOW_PATTERN, LayerKind::SlidingAttention),
            (FULL_ATTENTION_INTERVAL, LayerKind::LinearAttention),
        ]
        .into_iter()
        .filter_map(|(key, rest)| {
            self.find(&[key])
                .map(|(name, value)| (name, value, rest, key))
        })
        .collect();
        let period = self.find(&[ATTN_LAYER_PERIOD]);
        let offset = self.find(&[ATTN_LAYER_OFFSET]);
        if lists.is_empty() && every.is_empty() && period.is_none() && offset.is_none() {
            return Err(KvError::Config {
                what: WHAT,
                problem: format!(
                    "none of {} is set; {}; fix the config or call .with_value(..)",
                    keys(PATTERN_KEYS),
                    self.looked_in()
                ),
            });
        }
        let layers = self.count_or("layers", self.layers, LAYERS, ".with_layers(..)")?;

        let mut rules: Vec<(String, LayerPattern)> = Vec::new();
        for (name, value, rest, key) in every {
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

        let mut listed: Vec<(String, LayerPattern)> = Vec::new();
        for (name, value) in lists {
            let key = if name.ends_with(LAYER_TYPES) {
                LAYER_TYPES
            } else {
                LAYERS_BLOCK_TYPE
            };
            listed.push((name.clone(), list_pattern(&name, key, value, layers)?));
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
                     pick one; remove one or give `{LAYER_TYPES}` with .with_value(..)",
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
        Ok(first)
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
                     null); {}; fix the config or call .with_value(..)",
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

/// A `layer_types`-style list, checked against the layer count.
fn list_pattern(
    name: &str,
    key: &'static str,
    value: &Value,
    layers: u64,
) -> Result<LayerPattern, KvError> {
    let bad = |problem: String| KvError::Config {
        what: WHAT,
        problem,
    };
    let Value::Array(entries) = value else {
        return Err(bad(format!(
            "`{name}` is {}; expected a list of layer kinds",
            shown(value)
        )));
    };
    let mut kinds = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let kind = entry.as_str().and_then(LayerKind::from_name);
        let Some(kind) = kind else {
            return Err(bad(format!(
                "`{name}[{index}]` is {}, not a layer kind kv knows ({})",
                shown(entry),
                LayerKind::names_list()
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
