//! Layers that differ from the config's global values: transformers'
//! `per_layer_config` (a sparse map from a layer's index to the attributes
//! that differ there), and the builder keys of the families whose
//! transformers config turns them into such a map (Gemma 4's
//! `global_head_dim`, NeoMME's long windows, Step 3.5's sliding heads).
//!
//! kv sizes every layer of a kind with one geometry. Where every layer of a
//! kind takes the same `head_dim` and `num_key_value_heads`, the kind is
//! sized with them ([`HfConfig::kind_geometry`]: a Gemma 4's full-attention
//! layers hold twice the head of its sliding ones); any other override that
//! moves a cache, or one that differs within a kind, is refused by name,
//! never sized as the config's global values.

use std::cell::OnceCell;

use serde_json::{Map, Value};

use super::lookup::{shown, HfConfig};
use crate::error::KvError;
use crate::pattern::{LayerKind, LayerPattern};
use crate::spec::layout::Geometry;

const PER_LAYER_CONFIG: &str = "per_layer_config";
const WHAT: &str = "per-layer values";
/// Overrides that size nothing kv sizes: the MLP and its experts, rotary
/// embedding, norms, scaling. Any other key is read as moving a cache.
const SIZES_NO_CACHE: &[&str] = &[
    "intermediate_size",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "share_expert_dim",
    "hidden_act",
    "hidden_activation",
    "num_experts",
    "num_local_experts",
    "n_routed_experts",
    "n_shared_experts",
    "num_experts_per_tok",
    "enable_moe_block",
    "use_double_wide_mlp",
    "mlp_bias",
    "attention_bias",
    "rope_parameters",
    "rope_scaling",
    "rope_theta",
    "partial_rotary_factor",
    "rms_norm_eps",
    "layer_norm_eps",
    "query_pre_attn_scalar",
    "attn_logit_softcapping",
];
/// The families whose config class builds `per_layer_config` from
/// `global_head_dim` and `num_global_key_value_heads` on its full-attention
/// layers (transformers 5.20 `configuration_gemma4.py` and its copies), with
/// the default of `num_global_key_value_heads` where it applies ungated.
const GLOBAL_HEAD_FAMILIES: &[(&str, Option<u64>)] = &[
    ("gemma4", None),
    ("gemma4_text", None),
    ("gemma4_unified", None),
    ("gemma4_unified_text", None),
    ("diffusion_gemma", None),
    ("diffusion_gemma_text", None),
    ("embedding_gemma2", Some(1)),
    ("embedding_gemma2_text", Some(1)),
];
/// transformers' default `global_head_dim` in those classes.
const DEFAULT_GLOBAL_HEAD_DIM: u64 = 512;
/// How many differing layers a refusal lists before counting the rest.
const LISTED: usize = 4;
/// The overrides a kind's geometry takes, where its layers agree on them.
const HEAD_DIM: &str = "head_dim";
const KV_HEADS: &str = "num_key_value_heads";

/// Which layers an override applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layers {
    /// One layer, by index (a written `per_layer_config`).
    One(u64),
    /// Every layer of a kind (a family's builder keys).
    Kind(LayerKind),
}

/// One override that moves a cache.
#[derive(Clone, Debug)]
struct Moving {
    layers: Layers,
    /// The key the override sets in a layer's config (`head_dim`, ...).
    key: String,
    value: Value,
    /// How a refusal words it.
    said: String,
}

/// The overrides that move a cache, and where they come from.
struct Overrides {
    /// "`per_layer_config`", or the family whose keys build one.
    source: String,
    moving: Vec<Moving>,
}

impl HfConfig {
    /// Refuses a config whose layers differ in what sizes a cache: an entry
    /// of `per_layer_config` that sets such a key to a value other than the
    /// config's, or, where the config writes no `per_layer_config`, the keys
    /// a family's config class builds one from. Overrides of the MLP,
    /// experts, rotary embedding and norms are accepted (they size no
    /// cache), as is `sliding_window: null` on a full-attention layer.
    ///
    /// ```
    /// use kv_core::HfConfig;
    ///
    /// let gemma_4 = serde_json::json!({
    ///     "model_type": "gemma4_text", "num_hidden_layers": 6, "num_key_value_heads": 4,
    ///     "head_dim": 256, "torch_dtype": "bfloat16",
    ///     "per_layer_config": {"5": {"head_dim": 512}},
    /// });
    /// let refused = HfConfig::from_value(gemma_4).geometry().unwrap_err().to_string();
    /// assert!(refused.contains("layer 5: `head_dim` 512 (the config's: 256)"));
    /// ```
    pub(super) fn uniform_layers(&self) -> Result<(), KvError> {
        match self.overrides()? {
            Some(overrides) if !overrides.moving.is_empty() => Err(overrides.refusal(
                "kv sizes every layer of a kind with one geometry, and this reading wants \
                 one for every layer",
            )),
            _ => Ok(()),
        }
    }

    /// The geometry of the layers of `kind` (without a layer count: the
    /// caller sets it): the config's, with the `head_dim` and
    /// `num_key_value_heads` that transformers' `per_layer_config` (or the
    /// keys a family builds it from) gives every layer of that kind. A kind
    /// whose layers differ among themselves in those, or an override of
    /// anything else that moves a cache, is refused by name.
    ///
    /// ```
    /// use kv_core::pattern::LayerKind;
    /// use kv_core::HfConfig;
    ///
    /// let gemma_4 = HfConfig::from_value(serde_json::json!({
    ///     "model_type": "gemma4_text", "num_hidden_layers": 6, "num_attention_heads": 8,
    ///     "num_key_value_heads": 4, "head_dim": 256, "torch_dtype": "bfloat16",
    ///     "sliding_window": 512,
    ///     "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
    ///                     "sliding_attention", "sliding_attention", "full_attention"],
    /// }));
    /// // transformers' default `global_head_dim` (512) on the full-attention layer.
    /// assert_eq!(gemma_4.kind_geometry(LayerKind::FullAttention)?.head_dim, 512);
    /// assert_eq!(gemma_4.kind_geometry(LayerKind::SlidingAttention)?.head_dim, 256);
    /// # Ok::<(), kv_core::KvError>(())
    /// ```
    pub fn kind_geometry(&self, kind: LayerKind) -> Result<Geometry, KvError> {
        let (mut geometry, overrides) = self.config_geometry(self.overrides())?;
        let (head_dim, kv_heads) = (geometry.head_dim, geometry.kv_heads);
        let Some(overrides) = overrides.filter(|o| !o.moving.is_empty()) else {
            return Ok(geometry);
        };
        if overrides
            .moving
            .iter()
            .any(|m| m.key != HEAD_DIM && m.key != KV_HEADS)
        {
            return Err(overrides.refusal(
                "kv reads a kind's `head_dim` and `num_key_value_heads` from per-layer values, \
                 not the others",
            ));
        }
        let pattern = self.layer_pattern()?;
        let of_kind: Vec<u64> = (0u64..)
            .zip(pattern.kinds())
            .filter(|(_, k)| *k == kind)
            .map(|(i, _)| i)
            .collect();
        geometry.head_dim = overrides.for_kind(kind, &of_kind, HEAD_DIM, head_dim)?;
        geometry.kv_heads = overrides.for_kind(kind, &of_kind, KV_HEADS, kv_heads)?;
        if let Some((_, heads)) = self.attention_heads()? {
            if geometry.kv_heads > heads {
                return Err(KvError::Config {
                    what: WHAT,
                    problem: format!(
                        "{} gives the {kind} layers {} KV heads but the config has {heads} \
                         attention heads: a model cannot have more KV heads than attention \
                         heads; fix the config",
                        overrides.source, geometry.kv_heads
                    ),
                });
            }
        }
        let overridden = overrides.moving.iter().any(|m| match m.layers {
            Layers::Kind(k) => k == kind,
            Layers::One(layer) => of_kind.contains(&layer),
        });
        if overridden {
            self.note(format!(
                "{kind} layers: `head_dim` {}, {} KV heads, from {}",
                geometry.head_dim, geometry.kv_heads, overrides.source
            ));
        }
        Ok(geometry)
    }

    /// The overrides that move a cache: a written `per_layer_config`'s, else
    /// those a family's config class would build; `None` where neither.
    fn overrides(&self) -> Result<Option<Overrides>, KvError> {
        match self.find_with_null(PER_LAYER_CONFIG) {
            Some((_, Value::Null, _)) | None => Ok(self.built_overrides()),
            Some((name, value, _)) => self.written_overrides(&name, value),
        }
    }

    /// The layers of a written `per_layer_config` whose overrides move a
    /// cache, each as "layer I: `key` V (the config's: G)".
    fn written_overrides(&self, name: &str, value: &Value) -> Result<Option<Overrides>, KvError> {
        let Value::Object(entries) = value else {
            return Err(KvError::Config {
                what: WHAT,
                problem: format!(
                    "`{name}` is {}; expected an object from layer index to overrides",
                    shown(value)
                ),
            });
        };
        let mut differing = Vec::new();
        // Built once, and only where a layer drops its window.
        let pattern = OnceCell::new();
        for (index, overrides) in entries {
            let Ok(layer) = index.parse::<u64>() else {
                return Err(KvError::Config {
                    what: WHAT,
                    problem: format!("`{name}` has the key \"{index}\"; expected a layer index"),
                });
            };
            let Value::Object(overrides) = overrides else {
                return Err(KvError::Config {
                    what: WHAT,
                    problem: format!(
                        "`{name}.{index}` is {}; expected an object of overrides",
                        shown(overrides)
                    ),
                });
            };
            differing.extend(self.moving_overrides(layer, overrides, &pattern));
        }
        Ok(Some(Overrides {
            source: format!("`{name}`"),
            moving: differing,
        }))
    }

    /// One layer's overrides that move a cache.
    fn moving_overrides(
        &self,
        layer: u64,
        overrides: &Map<String, Value>,
        pattern: &OnceCell<Option<LayerPattern>>,
    ) -> Vec<Moving> {
        let mut moving = Vec::new();
        for (key, value) in overrides {
            if SIZES_NO_CACHE.contains(&key.as_str()) {
                continue;
            }
            if key == "skip" && value.as_array().is_some_and(Vec::is_empty) {
                continue;
            }
            let global = self
                .find_with_null(key)
                .map(|(_, global, _)| global.clone());
            if global.as_ref() == Some(value) || (global.is_none() && value.is_null()) {
                continue;
            }
            let full_attention = || {
                let pattern = pattern.get_or_init(|| self.layer_pattern().ok());
                let kind = pattern
                    .as_ref()
                    .and_then(|p| p.kinds().nth(usize::try_from(layer).unwrap_or(usize::MAX)));
                kind == Some(LayerKind::FullAttention)
            };
            if key == "sliding_window" && value.is_null() && full_attention() {
                continue;
            }
            let global = match global {
                Some(global) => shown(&global),
                None => "unset".to_owned(),
            };
            moving.push(Moving {
                layers: Layers::One(layer),
                key: key.clone(),
                value: value.clone(),
                said: format!(
                    "layer {layer}: `{key}` {} (the config's: {global})",
                    shown(value)
                ),
            });
        }
        moving
    }

    /// Where no `per_layer_config` is written: the overrides a family's
    /// config class would build, where they differ.
    fn built_overrides(&self) -> Option<Overrides> {
        let model_types = self.model_types();
        // The section's own type first (`gemma4_text` within a `gemma4`).
        if let Some((family, ungated_kv_heads)) = model_types.iter().find_map(|model_type| {
            GLOBAL_HEAD_FAMILIES
                .iter()
                .find(|(family, _)| family == model_type)
        }) {
            return Some(self.global_head_overrides(family, *ungated_kv_heads));
        }
        if model_types.contains(&"neomme") {
            return Some(self.neomme_windows());
        }
        let step = model_types
            .iter()
            .find(|t| **t == "step3p5" || **t == "step3p7")?;
        Some(self.step3p5_sliding_heads(step))
    }

    /// Gemma 4's full-attention layers: `global_head_dim` (512 when unset)
    /// and, where `attention_k_eq_v` (or the family's default), the
    /// `num_global_key_value_heads`.
    fn global_head_overrides(&self, family: &str, ungated_kv_heads: Option<u64>) -> Overrides {
        let read = |key: &str| self.find(&[key]).and_then(|(_, v)| v.as_u64());
        let (global_head_dim, said) = match read("global_head_dim") {
            Some(dim) => (dim, String::new()),
            None => (
                DEFAULT_GLOBAL_HEAD_DIM,
                format!(" ({DEFAULT_GLOBAL_HEAD_DIM}, transformers' default: the config does not write it)"),
            ),
        };
        let mut moving = Vec::new();
        let full = Layers::Kind(LayerKind::FullAttention);
        if read("head_dim") != Some(global_head_dim) {
            moving.push(Moving {
                layers: full,
                key: HEAD_DIM.to_owned(),
                value: Value::from(global_head_dim),
                said: format!(
                    "the full-attention layers' `global_head_dim` {global_head_dim}{said} where \
                     `head_dim` is {}",
                    shown_or_unset(self.find(&["head_dim"]).map(|(_, v)| v))
                ),
            });
        }
        let gated = self
            .find(&["attention_k_eq_v"])
            .is_some_and(|(_, v)| v == &Value::Bool(true));
        let global_kv_heads = match ungated_kv_heads {
            Some(default) => Some(read("num_global_key_value_heads").unwrap_or(default)),
            None if gated => read("num_global_key_value_heads"),
            None => None,
        };
        if let Some(heads) = global_kv_heads {
            if read("num_key_value_heads") != Some(heads) {
                moving.push(Moving {
                    layers: full,
                    key: KV_HEADS.to_owned(),
                    value: Value::from(heads),
                    said: format!(
                        "the full-attention layers' `num_global_key_value_heads` {heads} where \
                         `num_key_value_heads` is {}",
                        shown_or_unset(self.find(&["num_key_value_heads"]).map(|(_, v)| v))
                    ),
                });
            }
        }
        Overrides {
            source: format!(
                "`model_type` {family} (transformers builds its `per_layer_config` from these keys)"
            ),
            moving,
        }
    }

    /// NeoMME: every second sliding layer takes `default_long_sliding_window`
    /// (1024 unset) instead of `sliding_window`.
    fn neomme_windows(&self) -> Overrides {
        let long = self
            .find(&["default_long_sliding_window"])
            .and_then(|(_, v)| v.as_u64())
            .unwrap_or(1024);
        let window = self.find(&["sliding_window"]).and_then(|(_, v)| v.as_u64());
        let moving = if window == Some(long) {
            Vec::new()
        } else {
            vec![Moving {
                layers: Layers::Kind(LayerKind::SlidingAttention),
                key: "sliding_window".to_owned(),
                value: Value::from(long),
                said: format!(
                    "every second sliding layer's window `default_long_sliding_window` {long} \
                     where `sliding_window` is {}",
                    shown_or_unset(self.find(&["sliding_window"]).map(|(_, v)| v))
                ),
            }]
        };
        Overrides {
            source: "`model_type` neomme (transformers builds its `per_layer_config` from these \
                     keys)"
                .to_owned(),
            moving,
        }
    }

    /// Step 3.5: the sliding layers' `num_sliding_attention_heads` (or the
    /// legacy `attention_other_setting.num_attention_heads`).
    fn step3p5_sliding_heads(&self, model_type: &str) -> Overrides {
        let heads = self.find(&["num_attention_heads"]).map(|(_, v)| v.clone());
        let sliding = self
            .find(&["num_sliding_attention_heads"])
            .map(|(key, v)| (key, v.clone()))
            .or_else(|| {
                let (key, other) = self.find(&["attention_other_setting"])?;
                let value = other.get("num_attention_heads")?.clone();
                Some((format!("{key}.num_attention_heads"), value))
            });
        let moving = match sliding {
            Some((key, value)) if Some(&value) != heads.as_ref() => vec![Moving {
                layers: Layers::Kind(LayerKind::SlidingAttention),
                key: "num_attention_heads".to_owned(),
                said: format!(
                    "the sliding layers' `{key}` {} where `num_attention_heads` is {}",
                    shown(&value),
                    shown_or_unset(heads.as_ref())
                ),
                value,
            }],
            _ => Vec::new(),
        };
        Overrides {
            source: format!(
                "`model_type` {model_type} (transformers builds its `per_layer_config` from \
                 these keys)"
            ),
            moving,
        }
    }
}

impl Overrides {
    /// The refusal: the overrides, the first few listed, and `why`.
    fn refusal(&self, why: &str) -> KvError {
        let mut listed: Vec<String> = self
            .moving
            .iter()
            .take(LISTED)
            .map(|m| m.said.clone())
            .collect();
        if self.moving.len() > LISTED {
            listed.push(format!("and {} more", self.moving.len() - LISTED));
        }
        KvError::Config {
            what: WHAT,
            problem: format!(
                "{} gives layers values that size their caches differently from the config's: \
                 {}; {why}, so it refuses rather than size those layers by the config's global \
                 values",
                self.source,
                listed.join(", ")
            ),
        }
    }

    /// The value of `key` on every layer of `kind` (`of_kind`, their
    /// indices), where they agree: an override, else the config's `global`.
    fn for_kind(
        &self,
        kind: LayerKind,
        of_kind: &[u64],
        key: &str,
        global: u64,
    ) -> Result<u64, KvError> {
        let mut values: Vec<(u64, u64)> = Vec::with_capacity(of_kind.len());
        for &layer in of_kind {
            let mut value = global;
            for m in self.moving.iter().filter(|m| m.key == key) {
                let applies = match m.layers {
                    Layers::Kind(k) => k == kind,
                    Layers::One(index) => index == layer,
                };
                if !applies {
                    continue;
                }
                value = m
                    .value
                    .as_u64()
                    .filter(|v| *v > 0)
                    .ok_or_else(|| KvError::Config {
                        what: WHAT,
                        problem: format!(
                            "{} sets `{key}` to {} on layer {layer}; expected a positive integer",
                            self.source,
                            shown(&m.value)
                        ),
                    })?;
            }
            values.push((layer, value));
        }
        let Some(&(_, first)) = values.first() else {
            return Ok(global);
        };
        if let Some(&(other, differs)) = values.iter().find(|(_, v)| *v != first) {
            return Err(KvError::Config {
                what: WHAT,
                problem: format!(
                    "{} gives the {kind} layers different `{key}`: layer {} {first}, layer \
                     {other} {differs}; kv sizes every layer of a kind with one geometry, so it \
                     refuses rather than size them alike",
                    self.source, values[0].0
                ),
            });
        }
        Ok(first)
    }
}

fn shown_or_unset(value: Option<&Value>) -> String {
    value.map_or_else(|| "unset".to_owned(), shown)
}

#[cfg(test)]
mod tests;
