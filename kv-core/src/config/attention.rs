//! The attention geometry read from a config: layers, KV heads by the
//! family's rule, head dim, dtype.

use serde_json::Value;

use super::lookup::{keys, no_error_collected, positive, shown, DTypeRule, HfConfig, HIDDEN};
use super::models;
use crate::error::KvError;
use crate::spec::dtype::DType;
use crate::spec::layout::Geometry;

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
const ATTENTION_HEADS: &[&str] = &[
    "num_attention_heads",
    "n_head",
    "n_heads",
    "encoder_attention_heads",
];
const DTYPE: &[&str] = &["torch_dtype", "dtype"];

impl HfConfig {
    /// The geometry: explicit values where given, the config's otherwise.
    /// Keys and values use `head_dim` alike; see [`HfConfig`] for the
    /// lookup order. Every value that cannot be read is reported at once.
    /// Layers that would differ from each other (transformers'
    /// `per_layer_config`, or the keys a family builds it from) are refused
    /// by name: one geometry would size them wrong.
    pub fn geometry(&self) -> Result<Geometry, KvError> {
        self.config_geometry(self.uniform_layers())
            .map(|(geometry, ())| geometry)
    }

    /// The config's geometry beside `also` (what else the caller read),
    /// every error of either reported at once.
    pub(super) fn config_geometry<T>(
        &self,
        also: Result<T, KvError>,
    ) -> Result<(Geometry, T), KvError> {
        let layers = self.layer_count();
        let kv_heads = self.read_kv_heads();
        let head_dim = self.head_dim();
        let dtype = self.dtype();
        match (layers, kv_heads, head_dim, dtype, also) {
            (Ok(layers), Ok(kv_heads), Ok(head_dim), Ok(dtype), Ok(also)) => {
                Ok((Geometry::new(layers, kv_heads, head_dim, dtype), also))
            }
            (layers, kv_heads, head_dim, dtype, also) => {
                let errors = [
                    layers.err(),
                    kv_heads.err(),
                    head_dim.err(),
                    dtype.err(),
                    also.err(),
                ];
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
            .family_row()
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
    /// sets one (vLLM then reads 0, which every TP size divides). Keys as in
    /// the lookup table above.
    pub fn attention_heads(&self) -> Result<Option<(String, u64)>, KvError> {
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
        let rule = self.family_row().map(|row| row.kv_heads);
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

    /// The model dtype: the one given ([`HfConfig::with_dtype`]), else the
    /// config's, by the dtype rule ([`HfConfig::with_dtype_rule`]); what
    /// [`HfConfig::geometry`] stores K/V in, and recurrent state takes.
    pub fn dtype(&self) -> Result<DType, KvError> {
        match self.dtype {
            Some(dtype) => Ok(dtype),
            None => self.read_dtype(),
        }
    }

    fn read_dtype(&self) -> Result<DType, KvError> {
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
}
