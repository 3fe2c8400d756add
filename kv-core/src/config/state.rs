//! The modern cache kinds' dimensions: MLA latent, Mamba state, linear
//! attention (Gated DeltaNet) state.

use super::lookup::{keys, positive, shown, HfConfig, HIDDEN};
use super::models::{names_where, MambaVersion};
use crate::error::KvError;
use crate::spec::dtype::DType;

const KV_LORA_RANK: &[&str] = &["kv_lora_rank"];
const QK_ROPE_HEAD_DIM: &[&str] = &["qk_rope_head_dim"];

const D_STATE: &[&str] = &["mamba_d_state", "ssm_state_size", "state_size", "d_state"];
const D_CONV: &[&str] = &["mamba_d_conv", "conv_kernel", "d_conv"];
const EXPAND: &[&str] = &["mamba_expand", "expand"];
const N_GROUPS: &[&str] = &["mamba_n_groups", "mamba_ngroups", "n_groups"];
/// Mamba2 heads: the `mamba_`-prefixed spellings, then `num_heads` for a
/// pure Mamba2 config only (in a hybrid it could be attention's).
const HEADS: &[&str] = &["mamba_n_heads", "mamba_num_heads", "n_mamba_heads"];
const HEADS_PURE: &[&str] = &[
    "mamba_n_heads",
    "mamba_num_heads",
    "n_mamba_heads",
    "num_heads",
];
const HEAD_DIM: &[&str] = &["mamba_d_head", "mamba_head_dim", "mamba_headdim"];
const HEAD_DIM_PURE: &[&str] = &[
    "mamba_d_head",
    "mamba_head_dim",
    "mamba_headdim",
    "head_dim",
];
/// An inner width given outright; `intermediate_size` only for a pure Mamba
/// config (in a hybrid it is the MLP's width).
const D_INNER: &[&str] = &["mamba_d_ssm", "mamba_d_inner"];
const D_INNER_PURE: &[&str] = &["mamba_d_ssm", "mamba_d_inner", "intermediate_size"];

const LINEAR_KEY_HEADS: &[&str] = &["linear_num_key_heads"];
const LINEAR_VALUE_HEADS: &[&str] = &["linear_num_value_heads"];
const LINEAR_KEY_HEAD_DIM: &[&str] = &["linear_key_head_dim"];
const LINEAR_VALUE_HEAD_DIM: &[&str] = &["linear_value_head_dim"];
const LINEAR_CONV_KERNEL: &[&str] = &["linear_conv_kernel_dim"];

const SHORT_CONV_KERNEL: &[&str] = &["conv_L_cache"];

/// Multi-head latent attention (DeepSeek-V2/V3, Kimi): one latent of
/// `kv_lora_rank + qk_rope_head_dim` elements per token per layer, with no
/// K/V doubling. Read by [`HfConfig::mla`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MlaConfig {
    /// Every layer of the model (`num_hidden_layers`, ...): DeepSeek's layers
    /// are all MLA.
    pub layers: u64,
    /// `kv_lora_rank`: the compressed KV width (512 in DeepSeek-V2/V3).
    pub kv_lora_rank: u64,
    /// `qk_rope_head_dim`: the rotary part kept beside it (64).
    pub qk_rope_head_dim: u64,
    /// `torch_dtype` / `dtype`, or [`HfConfig::with_dtype`].
    pub dtype: DType,
}

impl MlaConfig {
    /// Elements per token per layer, `kv_lora_rank + qk_rope_head_dim`;
    /// `None` on overflow.
    pub const fn latent_width(&self) -> Option<u64> {
        self.kv_lora_rank.checked_add(self.qk_rope_head_dim)
    }
}

/// A Mamba layer's state dimensions. Read by [`HfConfig::mamba`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MambaConfig {
    /// Mamba1 or Mamba2; see [`HfConfig::mamba`] for how it is decided.
    pub version: MambaVersion,
    /// Every layer of the model (`num_hidden_layers`, ...), not only the Mamba
    /// ones: for a hybrid, count those with
    /// `layer_pattern()?.count(LayerKind::Mamba)`.
    pub layers: u64,
    /// The model width (`hidden_size`, `d_model`).
    pub hidden: u64,
    /// The expansion factor (`mamba_expand`, `expand`).
    pub expand: u64,
    /// The inner width: a key that gives it outright, else `expand x hidden`.
    pub d_inner: u64,
    /// The SSM state size.
    pub d_state: u64,
    /// The convolution kernel width.
    pub d_conv: u64,
    /// Mamba2's groups; `None` for Mamba1.
    pub n_groups: Option<u64>,
    /// Mamba2's heads; `None` for Mamba1.
    pub heads: Option<u64>,
    /// Mamba2's head dim (`heads x head_dim == d_inner`); `None` for Mamba1.
    pub head_dim: Option<u64>,
}

/// A linear-attention layer's state dimensions (Qwen3-Next's Gated DeltaNet).
/// Read by [`HfConfig::linear_attention`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinearAttentionConfig {
    /// `linear_num_key_heads`.
    pub key_heads: u64,
    /// `linear_num_value_heads`.
    pub value_heads: u64,
    /// `linear_key_head_dim`.
    pub key_head_dim: u64,
    /// `linear_value_head_dim`.
    pub value_head_dim: u64,
    /// `linear_conv_kernel_dim`.
    pub conv_kernel: u64,
}

/// A short-convolution layer's state dimensions (LFM2's `conv` layers).
/// Read by [`HfConfig::short_conv`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShortConvConfig {
    /// The convolution's channels: `conv_dim` (LFM2), `hidden_size` (LFM2-MoE).
    pub channels: u64,
    /// `conv_L_cache`: the kernel width; the state keeps one input less.
    pub kernel: u64,
}

impl HfConfig {
    /// Multi-head latent attention dimensions.
    ///
    /// | value | keys |
    /// |---|---|
    /// | layers | as [`HfConfig::geometry`], or [`HfConfig::with_layers`] |
    /// | kv_lora_rank | `kv_lora_rank` |
    /// | qk_rope_head_dim | `qk_rope_head_dim` |
    /// | dtype | as [`HfConfig::geometry`], or [`HfConfig::with_dtype`] |
    ///
    /// Sections, `null`, and errors as for [`HfConfig`]: a missing key names
    /// every key tried and every section looked in; zero, negative, a float
    /// or a string is an error naming key and value.
    ///
    /// ```
    /// let v2_lite = serde_json::json!({
    ///     "num_hidden_layers": 27, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
    ///     "torch_dtype": "bfloat16",
    /// });
    /// let mla = kv_core::HfConfig::from_value(v2_lite).mla()?;
    /// assert_eq!((mla.layers, mla.latent_width()), (27, Some(576)));
    /// # Ok::<(), kv_core::KvError>(())
    /// ```
    pub fn mla(&self) -> Result<MlaConfig, KvError> {
        self.uniform_layers()?;
        Ok(MlaConfig {
            layers: self.layer_count()?,
            kv_lora_rank: self.count_or("kv_lora_rank", None, KV_LORA_RANK)?,
            qk_rope_head_dim: self.count_or("qk_rope_head_dim", None, QK_ROPE_HEAD_DIM)?,
            dtype: self.dtype()?,
        })
    }

    /// Says which Mamba the config describes, instead of deciding it from
    /// `model_type` (see [`HfConfig::mamba`]).
    pub fn with_mamba_version(mut self, version: MambaVersion) -> HfConfig {
        self.mamba_version = Some(version);
        self
    }

    /// Mamba state dimensions.
    ///
    /// **Version.** Decided by `model_type`, never by which keys happen to be
    /// present: `mamba`, `falcon_mamba`, `jamba` are Mamba1; `mamba2`,
    /// `bamba`, `granitemoehybrid`, `nemotron_h`, `zamba2`, `falcon_h1` are
    /// Mamba2. Any other `model_type`, or none, is an error unless
    /// [`HfConfig::with_mamba_version`] says which.
    ///
    /// | value | keys, first found |
    /// |---|---|
    /// | layers | as [`HfConfig::geometry`] (every layer; for a hybrid, count the Mamba ones with [`HfConfig::layer_pattern`]) |
    /// | hidden | `hidden_size`, `d_model` |
    /// | expand | `mamba_expand`, `expand` |
    /// | d_inner | `mamba_d_ssm`, `mamba_d_inner`, and for `mamba` / `falcon_mamba` / `mamba2` also `intermediate_size`; if none is set, `expand x hidden`; for `nemotron_h`, heads x head_dim (vLLM's NemotronH) |
    /// | d_state | `mamba_d_state`, `ssm_state_size`, `state_size`, `d_state` |
    /// | d_conv | `mamba_d_conv`, `conv_kernel`, `d_conv` |
    /// | n_groups (Mamba2) | `mamba_n_groups`, `mamba_ngroups`, `n_groups` |
    /// | heads (Mamba2) | `mamba_n_heads`, `mamba_num_heads`, `n_mamba_heads`, and for `mamba2` also `num_heads` |
    /// | head_dim (Mamba2) | `mamba_d_head`, `mamba_head_dim`, `mamba_headdim`, and for `mamba2` also `head_dim` |
    ///
    /// The plain `num_heads`, `head_dim` and `intermediate_size` are read only
    /// for a Mamba-only `model_type` (and not when the version was given
    /// explicitly for an unknown one): in a hybrid they describe attention or
    /// the MLP. For Mamba2, `heads x head_dim` must equal `d_inner`. For
    /// Mamba1, groups, heads and head dim are `None` and not read.
    ///
    /// ```
    /// let jamba = serde_json::json!({
    ///     "model_type": "jamba", "num_hidden_layers": 32, "hidden_size": 4096,
    ///     "mamba_expand": 2, "mamba_d_state": 16, "mamba_d_conv": 4,
    /// });
    /// let mamba = kv_core::HfConfig::from_value(jamba).mamba()?;
    /// assert_eq!(mamba.version, kv_core::config::MambaVersion::Mamba1);
    /// assert_eq!((mamba.d_inner, mamba.d_state, mamba.d_conv), (8192, 16, 4));
    /// # Ok::<(), kv_core::KvError>(())
    /// ```
    pub fn mamba(&self) -> Result<MambaConfig, KvError> {
        let (version, pure, inner_from_heads) = self.mamba_version_of()?;
        let layers = self.layer_count()?;
        let hidden = self.count_or("hidden", None, HIDDEN)?;
        let expand = self.count_or("mamba expand", None, EXPAND)?;
        let d_inner_keys = if pure { D_INNER_PURE } else { D_INNER };
        let inner_from_heads = inner_from_heads && version == MambaVersion::Mamba2;
        // The key each value came from, as the file spells it, for messages.
        let named = |tried: &[&str]| {
            self.find(tried)
                .map_or_else(|| keys(tried), |(key, _)| format!("`{key}`"))
        };
        let d_inner_from = match self.find(d_inner_keys) {
            Some((key, _)) => format!("`{key}`"),
            None => format!("{} {expand} x {} {hidden}", named(EXPAND), named(HIDDEN)),
        };
        let mut d_inner = match self.find(d_inner_keys) {
            Some((key, value)) => positive("mamba d_inner", &key, value)?,
            None => expand.checked_mul(hidden).ok_or_else(|| KvError::Config {
                what: "mamba d_inner",
                problem: format!(
                    "expand {expand} x hidden {hidden} overflows u64 (no explicit {} set)",
                    keys(d_inner_keys)
                ),
            })?,
        };
        let d_state = self.count_or("mamba d_state", None, D_STATE)?;
        let d_conv = self.count_or("mamba d_conv", None, D_CONV)?;
        let (n_groups, heads, head_dim) = match version {
            MambaVersion::Mamba1 => (None, None, None),
            MambaVersion::Mamba2 => {
                let n_groups = self.count_or("mamba n_groups", None, N_GROUPS)?;
                let heads_keys = if pure { HEADS_PURE } else { HEADS };
                let heads = self.count_or("mamba heads", None, heads_keys)?;
                let dim_keys = if pure { HEAD_DIM_PURE } else { HEAD_DIM };
                let head_dim = self.count_or("mamba head_dim", None, dim_keys)?;
                if inner_from_heads {
                    d_inner = heads.checked_mul(head_dim).ok_or_else(|| KvError::Config {
                        what: "mamba d_inner",
                        problem: format!(
                            "Mamba2 heads {heads} x head_dim {head_dim} overflows u64"
                        ),
                    })?;
                } else if heads.checked_mul(head_dim) != Some(d_inner) {
                    return Err(KvError::Config {
                        what: "mamba head_dim",
                        problem: format!(
                            "Mamba2 heads {} {heads} x head_dim {} {head_dim} is not d_inner \
                             {d_inner_from} = {d_inner}; the config contradicts itself; fix it \
                             or give the values",
                            named(heads_keys),
                            named(dim_keys)
                        ),
                    });
                }
                (Some(n_groups), Some(heads), Some(head_dim))
            }
        };
        Ok(MambaConfig {
            version,
            layers,
            hidden,
            expand,
            d_inner,
            d_state,
            d_conv,
            n_groups,
            heads,
            head_dim,
        })
    }

    /// The version, whether the model is Mamba only, and whether its mixer
    /// is `heads x head_dim` wide: the family's [`MambaRule`](super::models::MambaRule).
    fn mamba_version_of(&self) -> Result<(MambaVersion, bool, bool), KvError> {
        let found = self.find(&["model_type"]);
        let known = found.as_ref().and_then(|(_, value)| {
            let rule = super::models::model_type(value.as_str()?)?.mamba?;
            Some((rule.version, rule.only, rule.inner_from_heads))
        });
        match (self.mamba_version, known) {
            (Some(version), Some((_, pure, inner))) => Ok((version, pure, inner)),
            (Some(version), None) => Ok((version, false, false)),
            (None, Some(known)) => Ok(known),
            (None, None) => {
                let types = names_where(|row| row.mamba.is_some());
                let seen = match &found {
                    Some((key, value)) => format!("`{key}` is {}", shown(value)),
                    None => format!("`model_type` is not set; {}", self.looked_in()),
                };
                Err(KvError::Config {
                    what: "mamba version",
                    problem: format!(
                        "cannot tell Mamba1 from Mamba2: {seen}, not one of {}; give \
                         `model_type` (or say the version: HfConfig::with_mamba_version)",
                        keys(&types)
                    ),
                })
            }
        }
    }

    /// Linear-attention (Gated DeltaNet) state dimensions.
    ///
    /// | value | key |
    /// |---|---|
    /// | key heads | `linear_num_key_heads` |
    /// | value heads | `linear_num_value_heads` |
    /// | key head dim | `linear_key_head_dim` |
    /// | value head dim | `linear_value_head_dim` |
    /// | conv kernel | `linear_conv_kernel_dim` |
    ///
    /// Sections, `null`, and errors as for [`HfConfig`]. Layers are not read
    /// here: count the linear ones with [`HfConfig::layer_pattern`].
    pub fn linear_attention(&self) -> Result<LinearAttentionConfig, KvError> {
        let read = |what, keys_tried| self.count_or(what, None, keys_tried);
        Ok(LinearAttentionConfig {
            key_heads: read("linear key heads", LINEAR_KEY_HEADS)?,
            value_heads: read("linear value heads", LINEAR_VALUE_HEADS)?,
            key_head_dim: read("linear key head dim", LINEAR_KEY_HEAD_DIM)?,
            value_head_dim: read("linear value head dim", LINEAR_VALUE_HEAD_DIM)?,
            conv_kernel: read("linear conv kernel", LINEAR_CONV_KERNEL)?,
        })
    }
}

impl HfConfig {
    /// Short-convolution (LFM2 `conv` layer) state dimensions.
    ///
    /// | value | key |
    /// |---|---|
    /// | channels | `conv_dim` for `model_type` `lfm2`, `hidden_size` for `lfm2_moe` |
    /// | kernel | `conv_L_cache` |
    ///
    /// Any other `model_type` is an error: which width a `conv` layer has is
    /// the family's. Sections, `null`, and errors as for [`HfConfig`].
    ///
    /// ```
    /// let lfm2 = serde_json::json!({"model_type": "lfm2", "conv_dim": 2048, "conv_L_cache": 3});
    /// let conv = kv_core::HfConfig::from_value(lfm2).short_conv()?;
    /// assert_eq!((conv.channels, conv.kernel), (2048, 3));
    /// # Ok::<(), kv_core::KvError>(())
    /// ```
    pub fn short_conv(&self) -> Result<ShortConvConfig, KvError> {
        let known = self
            .model_types()
            .into_iter()
            .find_map(|name| super::models::model_type(name)?.short_conv_width);
        let Some(width) = known else {
            let types = names_where(|row| row.short_conv_width.is_some());
            return Err(KvError::Config {
                what: "short conv width",
                problem: format!(
                    "`conv` layers of a `model_type` kv does not know ({}; known: {}); \
                     kv cannot tell which key gives their width",
                    match self.model_types().first() {
                        Some(name) => format!("`model_type` is {name:?}"),
                        None => "no `model_type`".to_owned(),
                    },
                    keys(&types)
                ),
            });
        };
        Ok(ShortConvConfig {
            channels: self.count_or("short conv width", None, &[width])?,
            kernel: self.count_or("short conv kernel", None, SHORT_CONV_KERNEL)?,
        })
    }
}
