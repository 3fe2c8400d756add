//! Declarations estimated from an HF `config.json` alone (feature `json`),
//! for a checkpoint that has no annotated Rust yet: what vLLM would hold for
//! it, group by group. See [`estimate`].

use serde_json::{Map, Value};

use crate::config::MambaVersion;
use crate::{
    DType, Geometry, HfConfig, KvError, KvSpec, Latent, LayerKind, LayerPattern, Overflow,
    PositionPolicy, Positions, RecurrentState, Rows, Scope, StatePart, Storage,
};

/// vLLM's default KV block size, in tokens.
pub const DEFAULT_BLOCK_SIZE: u64 = 16;
/// vLLM's `max_num_batched_tokens` for online serving (the scheduler's token
/// budget per step), which bounds what a sliding-window cache keeps.
pub const DEFAULT_MAX_NUM_BATCHED_TOKENS: u64 = 2048;

/// Model types whose every layer slides over `sliding_window` when the
/// config gives a window and no layer pattern (vLLM's Mistral, Mixtral and
/// Starcoder2 models pass `config.sliding_window` to every layer).
const ALL_SLIDING: &[&str] = &["mistral", "mixtral", "starcoder2"];

/// Model types that are Mamba in every layer, with no attention.
const MAMBA_ONLY: &[&str] = &["mamba", "falcon_mamba", "mamba2"];

/// Where the estimator's own keys are looked for (through [`HfConfig`]).
const LOOKED_IN: &str = "looked at the given values, the top level, `text_config`, `llm_config`";

/// How [`estimate`] sizes the caches: the engine settings a config does not
/// hold, and values given over the config.
///
/// The convention is vLLM's, and each declaration's `cache` names it:
/// full attention and MLA hold `cdiv(max_model_len, block_size)` blocks,
/// sliding attention follows `SlidingWindowSpec`, chunked local attention
/// `ChunkedLocalAttentionSpec`, and Mamba / Gated DeltaNet state is
/// `MambaSpec` (one state per sequence, no speculative decoding).
///
/// ```
/// use kv_core::{Storage};
/// use kv_core::estimate::EstimateSettings;
///
/// let settings = EstimateSettings::new()
///     .positions(8192)
///     .kv_format(Storage::from_name("q8_0").unwrap())
///     .set("sliding_window_pattern", 6);
/// assert_eq!(settings.block_size, 16);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct EstimateSettings {
    /// vLLM `max_model_len`. `None`: read `max_position_embeddings` from the
    /// config, and say so; it is an error when the config lacks it.
    pub positions: Option<u64>,
    /// vLLM `block_size` (default [`DEFAULT_BLOCK_SIZE`]).
    pub block_size: u64,
    /// vLLM `max_num_batched_tokens` (default
    /// [`DEFAULT_MAX_NUM_BATCHED_TOKENS`]).
    pub max_num_batched_tokens: u64,
    /// How attention K/V and MLA latents are stored (vLLM
    /// `--kv-cache-dtype`); `None`: the model dtype, or what the config's
    /// `kv_cache_scheme` states.
    pub kv_format: Option<Storage>,
    /// Keys given over the config ([`HfConfig::with_value`]).
    pub values: Map<String, Value>,
}

impl Default for EstimateSettings {
    fn default() -> EstimateSettings {
        EstimateSettings::new()
    }
}

impl EstimateSettings {
    /// No positions (read from the config), vLLM's default block size and
    /// token budget, the model's dtype, no values given.
    pub fn new() -> EstimateSettings {
        EstimateSettings {
            positions: None,
            block_size: DEFAULT_BLOCK_SIZE,
            max_num_batched_tokens: DEFAULT_MAX_NUM_BATCHED_TOKENS,
            kv_format: None,
            values: Map::new(),
        }
    }

    /// Sizes for sequences of `max_model_len` positions.
    pub fn positions(mut self, max_model_len: u64) -> EstimateSettings {
        self.positions = Some(max_model_len);
        self
    }

    /// vLLM's `block_size`.
    pub fn block_size(mut self, block_size: u64) -> EstimateSettings {
        self.block_size = block_size;
        self
    }

    /// vLLM's `max_num_batched_tokens`.
    pub fn max_num_batched_tokens(mut self, tokens: u64) -> EstimateSettings {
        self.max_num_batched_tokens = tokens;
        self
    }

    /// Stores attention K/V and MLA latents as `storage`.
    pub fn kv_format(mut self, storage: Storage) -> EstimateSettings {
        self.kv_format = Some(storage);
        self
    }

    /// Uses `value` for `key`, over every section of the config (a key the
    /// published config leaves to its loader's default).
    pub fn set(mut self, key: &str, value: impl Into<Value>) -> EstimateSettings {
        self.values.insert(key.to_owned(), value.into());
        self
    }
}

/// What [`estimate`] found in a config and the declarations it makes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Estimate {
    /// What was detected, in words: MLA, a hybrid pattern (with its rule and
    /// counts), sliding or plain attention, and where `max_model_len` came from.
    pub detected: String,
    /// The `max_model_len` the figures are for.
    pub max_model_len: u64,
    /// One declaration per group of layers, rows `max_num_seqs`.
    pub specs: Vec<KvSpec>,
}

/// Estimates what vLLM holds for a model from its HF `config.json`.
///
/// Detection, in this order, stated in [`Estimate::detected`] and in each
/// declaration's note:
///
/// 1. **MLA** when `kv_lora_rank` is set: one latent per layer
///    ([`HfConfig::mla`]).
/// 2. **A hybrid layer pattern** when [`HfConfig::layer_pattern`] finds one:
///    one declaration per kind of layer, each placed in the pattern with
///    [`KvSpec::in_layers`] so pipeline stages split it by layer; full
///    attention, sliding attention ([`HfConfig::sliding_window`]), chunked
///    attention (`attention_chunk_size`), Mamba ([`HfConfig::mamba`]) and
///    Gated DeltaNet ([`HfConfig::linear_attention`]).
/// 3. **An encoder-decoder** (Whisper) when `max_source_positions` is set:
///    the decoder's self-attention over `max_model_len`, and its
///    cross-attention over the encoder's `max_source_positions` (vLLM's
///    `CrossAttentionSpec`: whole blocks), both over `decoder_layers` with
///    `decoder_attention_heads` where the config has them.
/// 4. **Mamba only** for `model_type` `mamba`, `falcon_mamba`, `mamba2`.
/// 5. **Plain attention** otherwise ([`HfConfig::geometry`]). A sliding window
///    with no layer pattern slides every layer only for the model types whose
///    engines slide every layer (`mistral`, `mixtral`, `starcoder2`); for any
///    other it is an error naming `sliding_window_pattern` and `layer_types`,
///    since loaders default the pattern (transformers' `Gemma3TextConfig`
///    uses 6) and kv does not guess it.
///
/// Positions are [`EstimateSettings::positions`], else the config's
/// `max_position_embeddings` (said in `detected` and in every note); neither
/// is an error. Recurrent state takes the model dtype (vLLM's
/// `mamba_cache_dtype auto`), never `kv_format`.
///
/// ```
/// use kv_core::estimate::{estimate, EstimateSettings};
///
/// let llama = serde_json::json!({
///     "num_hidden_layers": 32, "num_key_value_heads": 8, "hidden_size": 4096,
///     "num_attention_heads": 32, "torch_dtype": "bfloat16",
/// });
/// let estimate = estimate(&llama, &EstimateSettings::new().positions(8192))?;
/// assert_eq!(estimate.specs[0].layout.bytes_per_position(), Some(Ok(131_072)));
/// assert_eq!(estimate.specs[0].bytes_per_row(), Ok(131_072 * 8192));
/// # Ok::<(), kv_core::KvError>(())
/// ```
pub fn estimate(config: &Value, settings: &EstimateSettings) -> Result<Estimate, KvError> {
    let mut hf = HfConfig::from_value(config.clone());
    for (key, value) in &settings.values {
        hf = hf.with_value(key, value.clone());
    }
    let (max_model_len, source) = match settings.positions {
        Some(count) => (count, "given".to_owned()),
        None => match hf.value("max_position_embeddings") {
            Some((key, value)) => match value.as_u64().filter(|n| *n > 0) {
                Some(count) => (count, format!("`{key}` of the config")),
                None => {
                    return Err(config_error(
                        "max_model_len",
                        format!("`{key}` is {value}; expected a positive integer"),
                    ))
                }
            },
            None => {
                return Err(config_error(
                    "max_model_len",
                    format!(
                        "no positions were given and `max_position_embeddings` is not set \
                         ({}); give them (`kv estimate --positions N`, \
                         EstimateSettings::positions)",
                        LOOKED_IN
                    ),
                ))
            }
        },
    };
    for (name, value) in [
        ("block_size", settings.block_size),
        ("max_num_batched_tokens", settings.max_num_batched_tokens),
        ("positions", max_model_len),
    ] {
        if value == 0 {
            return Err(config_error(
                "estimate settings",
                format!("`{name}` is 0; it must be positive"),
            ));
        }
    }
    let builder = Builder {
        settings,
        max_model_len,
        source: format!("max_model_len {max_model_len} ({source})"),
    };
    let model_type = hf.value("model_type").and_then(|(_, v)| v.as_str());
    let (detected, specs) = if hf.value("kv_lora_rank").is_some() {
        let mla = hf.mla()?;
        let detected = format!(
            "MLA: `kv_lora_rank` {} + `qk_rope_head_dim` {} per token per layer, {} layers",
            mla.kv_lora_rank, mla.qk_rope_head_dim, mla.layers
        );
        let latent = Latent::new(
            mla.layers,
            mla.kv_lora_rank,
            mla.qk_rope_head_dim,
            mla.dtype,
        );
        let spec = builder.latent(latent, &detected, &hf)?;
        (detected, vec![spec])
    } else if let Some(pattern) = pattern(&hf)? {
        let detected = format!("hybrid layer pattern: {}", pattern.reason());
        let mut specs = Vec::new();
        for (kind, count) in pattern.groups() {
            let spec = builder.group(&hf, kind, count, &detected)?;
            specs.push(spec.in_layers(pattern.clone(), kind));
        }
        (detected, specs)
    } else if let Some((key, encoder)) = hf.value("max_source_positions") {
        encoder_decoder(&hf, &builder, &key, encoder)?
    } else if let Some(kind) = model_type.filter(|t| MAMBA_ONLY.contains(t)) {
        let detected = format!("Mamba in every layer (`model_type` {kind})");
        let spec = builder.mamba(&hf, None, &detected)?;
        (detected, vec![spec])
    } else {
        let geometry = hf.geometry()?;
        match sliding_window(&hf)? {
            None => {
                let detected =
                    "plain attention: no layer pattern, no sliding window, no MLA".to_owned();
                let spec = builder.full(geometry, "full_attention", &detected, &hf)?;
                (detected, vec![spec])
            }
            Some(window) => match model_type.filter(|t| ALL_SLIDING.contains(t)) {
                Some(kind) => {
                    let detected = format!(
                        "sliding attention in every layer: `sliding_window` {window} and no \
                         layer pattern (`model_type` {kind} slides every layer)"
                    );
                    let spec = builder.sliding(geometry, window, &detected, &hf)?;
                    (detected, vec![spec])
                }
                None => {
                    let default = if model_type.is_some_and(|t| t.starts_with("gemma3")) {
                        " (transformers' Gemma3TextConfig defaults it to 6)"
                    } else {
                        ""
                    };
                    return Err(config_error(
                        "layer pattern",
                        format!(
                            "`sliding_window` is {window} but no layer pattern says which \
                             layers slide: neither `sliding_window_pattern`{default} nor \
                             `layer_types` is set ({}) and `model_type` {} is not one that \
                             slides every layer; kv does not guess: give it \
                             (`kv estimate --set sliding_window_pattern=N`, \
                             EstimateSettings::set)",
                            LOOKED_IN,
                            model_type.map_or("(none)".to_owned(), |t| format!("`{t}`"))
                        ),
                    ));
                }
            },
        }
    };
    Ok(Estimate {
        detected: format!("{detected}; {}", builder.source),
        max_model_len,
        specs,
    })
}

/// Whisper-style: decoder self-attention and cross-attention over the
/// encoder's positions, with the decoder's layers and heads.
fn encoder_decoder(
    hf: &HfConfig,
    builder: &Builder<'_>,
    key: &str,
    encoder: &Value,
) -> Result<(String, Vec<KvSpec>), KvError> {
    let encoder_positions = encoder.as_u64().filter(|n| *n > 0).ok_or_else(|| {
        config_error(
            "max_source_positions",
            format!("`{key}` is {encoder}; expected a positive integer"),
        )
    })?;
    // The decoder's layers and heads, where the config gives them apart
    // from the encoder's; read through HfConfig so they are checked alike.
    let mut decoder = hf.clone();
    let mut said = Vec::new();
    for (from, to) in [
        ("decoder_layers", "num_hidden_layers"),
        ("decoder_attention_heads", "num_attention_heads"),
    ] {
        if let Some((name, value)) = hf.value(from) {
            decoder = decoder.with_value(to, value.clone());
            said.push(format!("`{name}` {value}"));
        }
    }
    let geometry = decoder.geometry()?;
    let detected = format!(
        "encoder-decoder: `{key}` {encoder_positions} encoder positions; decoder {} layers, {} heads of {}{}",
        geometry.layers,
        geometry.kv_heads,
        geometry.head_dim,
        if said.is_empty() {
            String::new()
        } else {
            format!(" ({})", said.join(", "))
        }
    );
    let self_attention = builder.full(geometry, "self_attention", &detected, hf)?;
    let cross = Positions::from_policy(PositionPolicy::PaddedTo {
        count: encoder_positions,
        multiple: builder.settings.block_size,
    })
    .map_err(overflow("cross_attention"))?;
    let cross_attention = builder.attention(
        "cross_attention",
        "CrossAttentionSpec",
        geometry,
        cross,
        &detected,
        hf,
    )?;
    Ok((detected, vec![self_attention, cross_attention]))
}

/// The layer pattern, `None` when the config sets none of its keys.
fn pattern(hf: &HfConfig) -> Result<Option<LayerPattern>, KvError> {
    const KEYS: [&str; 6] = [
        "layer_types",
        "layers_block_type",
        "sliding_window_pattern",
        "full_attention_interval",
        "attn_layer_period",
        "attn_layer_offset",
    ];
    if KEYS.iter().all(|key| hf.value(key).is_none()) {
        return Ok(None);
    }
    hf.layer_pattern().map(Some)
}

/// The sliding window; a config without the key has none (a bad value is
/// still an error).
fn sliding_window(hf: &HfConfig) -> Result<Option<u64>, KvError> {
    if hf.find_with_null("sliding_window").is_none() {
        return Ok(None);
    }
    hf.sliding_window()
}

fn config_error(what: &'static str, problem: String) -> KvError {
    KvError::Config { what, problem }
}

fn overflow(name: &'static str) -> impl Fn(Overflow) -> KvError {
    move |o| KvError::Overflow {
        declaration: name.to_owned(),
        step: o.step,
    }
}

struct Builder<'a> {
    settings: &'a EstimateSettings,
    max_model_len: u64,
    source: String,
}

impl Builder<'_> {
    fn note(&self, detected: &str) -> String {
        format!(
            "estimated from config.json: {detected}; {}; vLLM block_size {}, \
             max_num_batched_tokens {}",
            self.source, self.settings.block_size, self.settings.max_num_batched_tokens
        )
    }

    /// The KV storage: `kv_format`, else what the config's scheme says, else
    /// the model dtype; with a sentence when it is not the model dtype.
    fn storage(&self, dtype: DType, hf: &HfConfig) -> Result<(Storage, Option<String>), KvError> {
        if let Some(storage) = self.settings.kv_format {
            return Ok((storage, Some(format!("K/V stored as {storage} (given)"))));
        }
        match hf.kv_cache_scheme()? {
            None => Ok((Storage::Dense(dtype), None)),
            Some(scheme) => match (scheme.num_bits, scheme.kind) {
                (Some(8), Some(crate::config::KvQuantType::Float)) => Ok((
                    Storage::Dense(DType::F8E4M3),
                    Some(format!("K/V in f8e4m3 as `{}` states", scheme.source)),
                )),
                _ => Ok((
                    Storage::Dense(dtype),
                    Some(format!(
                        "`{}` declares KV quantization without an element format kv reads: \
                         figures use the model dtype {dtype} (vLLM's --kv-cache-dtype auto); \
                         give the format with --kv-format",
                        scheme.source
                    )),
                )),
            },
        }
    }

    fn attention(
        &self,
        name: &'static str,
        cache: &str,
        geometry: Geometry,
        positions: Positions,
        detected: &str,
        hf: &HfConfig,
    ) -> Result<KvSpec, KvError> {
        let dtype = geometry.storage.dtype().unwrap_or(DType::BF16);
        let (storage, said) = self.storage(dtype, hf)?;
        let spec = KvSpec::attention(
            name,
            format!("vLLM {cache} (paged K/V, {storage})"),
            geometry.with_storage(storage),
            positions,
            Scope::Request,
            Rows::MaxNumSeqs,
        )
        .note(self.note(detected));
        Ok(match said {
            Some(said) => spec.assumes(said),
            None => spec,
        })
    }

    fn full_positions(&self) -> Result<Positions, KvError> {
        Positions::from_policy(PositionPolicy::PaddedTo {
            count: self.max_model_len,
            multiple: self.settings.block_size,
        })
        .map_err(overflow("full_attention"))
    }

    fn full(
        &self,
        geometry: Geometry,
        name: &'static str,
        detected: &str,
        hf: &HfConfig,
    ) -> Result<KvSpec, KvError> {
        let positions = self.full_positions()?;
        self.attention(name, "FullAttentionSpec", geometry, positions, detected, hf)
    }

    fn sliding(
        &self,
        geometry: Geometry,
        window: u64,
        detected: &str,
        hf: &HfConfig,
    ) -> Result<KvSpec, KvError> {
        let positions = Positions::from_policy(PositionPolicy::VllmSlidingWindow {
            window,
            max_num_batched_tokens: self.settings.max_num_batched_tokens,
            max_model_len: self.max_model_len,
            block_size: self.settings.block_size,
        })
        .map_err(overflow("sliding_attention"))?;
        self.attention(
            "sliding_attention",
            "SlidingWindowSpec",
            geometry,
            positions,
            detected,
            hf,
        )
    }

    fn latent(&self, latent: Latent, detected: &str, hf: &HfConfig) -> Result<KvSpec, KvError> {
        let dtype = latent.storage.dtype().unwrap_or(DType::BF16);
        let (storage, said) = self.storage(dtype, hf)?;
        let spec = KvSpec::latent(
            "mla_latent",
            format!("vLLM MLAAttentionSpec (paged latent, {storage})"),
            latent.with_storage(storage),
            self.full_positions()?,
            Scope::Request,
            Rows::MaxNumSeqs,
        )
        .note(self.note(detected));
        Ok(match said {
            Some(said) => spec.assumes(said),
            None => spec,
        })
    }

    fn group(
        &self,
        hf: &HfConfig,
        kind: LayerKind,
        count: u64,
        detected: &str,
    ) -> Result<KvSpec, KvError> {
        match kind {
            LayerKind::FullAttention => self.full(
                hf.geometry()?.with_layers(count),
                "full_attention",
                detected,
                hf,
            ),
            LayerKind::SlidingAttention => {
                let window = hf.sliding_window()?.ok_or_else(|| {
                    config_error(
                        "sliding_window",
                        "the layer pattern has sliding_attention layers but `sliding_window` \
                         is null; give it (`kv estimate --set sliding_window=N`)"
                            .to_owned(),
                    )
                })?;
                self.sliding(hf.geometry()?.with_layers(count), window, detected, hf)
            }
            LayerKind::ChunkedAttention => {
                let chunk = match hf.value("attention_chunk_size") {
                    Some((key, value)) => value.as_u64().filter(|n| *n > 0).ok_or_else(|| {
                        config_error(
                            "attention_chunk_size",
                            format!("`{key}` is {value}; expected a positive integer"),
                        )
                    })?,
                    None => {
                        return Err(config_error(
                            "attention_chunk_size",
                            format!(
                                "the layer pattern has chunked_attention layers but \
                                 `attention_chunk_size` is not set ({}); give it \
                                 (`kv estimate --set attention_chunk_size=N`)",
                                LOOKED_IN
                            ),
                        ))
                    }
                };
                let positions = Positions::from_policy(PositionPolicy::VllmChunkedLocal {
                    chunk,
                    max_num_batched_tokens: self.settings.max_num_batched_tokens,
                    max_model_len: self.max_model_len,
                    block_size: self.settings.block_size,
                })
                .map_err(overflow("chunked_attention"))?;
                self.attention(
                    "chunked_attention",
                    "ChunkedLocalAttentionSpec",
                    hf.geometry()?.with_layers(count),
                    positions,
                    detected,
                    hf,
                )
            }
            LayerKind::Mamba => self.mamba(hf, Some(count), detected),
            LayerKind::LinearAttention => {
                let linear = hf.linear_attention()?;
                let dtype = model_dtype(hf)?;
                let conv = StatePart::gated_delta_conv(
                    linear.key_heads,
                    linear.key_head_dim,
                    linear.value_heads,
                    linear.value_head_dim,
                    linear.conv_kernel.saturating_sub(1),
                    dtype,
                )
                .map_err(overflow("linear_attention"))?;
                let ssm = StatePart::gated_delta_ssm(
                    linear.value_heads,
                    linear.value_head_dim,
                    linear.key_head_dim,
                )
                .with_storage(Storage::Dense(dtype));
                Ok(KvSpec::recurrent(
                    "linear_attention",
                    format!("vLLM MambaSpec (Gated DeltaNet conv + ssm state, {dtype})"),
                    RecurrentState::from_parts(count, vec![conv, ssm]),
                    Scope::Request,
                    Rows::MaxNumSeqs,
                )
                .assumes("no speculative decoding: vLLM keeps 1 + num_speculative_tokens states")
                .note(format!(
                    "conv over conv_kernel - 1 = {} positions, ssm (value heads, value dim, \
                     key dim), model dtype; {}",
                    linear.conv_kernel.saturating_sub(1),
                    self.note(detected)
                )))
            }
        }
    }

    /// Mamba state over `layers` (every layer when `None`).
    fn mamba(&self, hf: &HfConfig, layers: Option<u64>, detected: &str) -> Result<KvSpec, KvError> {
        let mamba = hf.mamba()?;
        let dtype = model_dtype(hf)?;
        let layers = layers.unwrap_or(mamba.layers);
        let (parts, version) = match mamba.version {
            MambaVersion::Mamba1 => (
                // vLLM's Mamba1 conv is (d_conv - 1, d_inner).
                vec![
                    StatePart::new(
                        "conv",
                        [mamba.d_conv.saturating_sub(1), mamba.d_inner, 1],
                        dtype,
                    )
                    .split_on(1),
                    StatePart::mamba_ssm(mamba.d_inner, mamba.d_state, dtype),
                ],
                "Mamba1",
            ),
            _ => {
                let missing = |what: &'static str| {
                    config_error(
                        what,
                        format!("Mamba2 state needs its {what}; give it with `kv estimate --set`"),
                    )
                };
                let groups = mamba.n_groups.ok_or_else(|| missing("mamba n_groups"))?;
                let heads = mamba.heads.ok_or_else(|| missing("mamba heads"))?;
                let head_dim = mamba.head_dim.ok_or_else(|| missing("mamba head_dim"))?;
                (
                    vec![
                        StatePart::mamba2_conv(
                            mamba.d_inner,
                            groups,
                            mamba.d_state,
                            mamba.d_conv,
                            dtype,
                        )
                        .map_err(overflow("mamba"))?,
                        StatePart::mamba2_ssm(heads, head_dim, mamba.d_state, dtype),
                    ],
                    "Mamba2",
                )
            }
        };
        Ok(KvSpec::recurrent(
            "mamba",
            format!("vLLM MambaSpec ({version} conv + ssm state, {dtype})"),
            RecurrentState::from_parts(layers, parts),
            Scope::Request,
            Rows::MaxNumSeqs,
        )
        .assumes("no speculative decoding: vLLM keeps 1 + num_speculative_tokens states")
        .note(format!(
            "d_inner {}, d_state {}, d_conv {}, model dtype; {}",
            mamba.d_inner,
            mamba.d_state,
            mamba.d_conv,
            self.note(detected)
        )))
    }
}

/// The model dtype, which recurrent state takes (vLLM's `mamba_cache_dtype auto`).
fn model_dtype(hf: &HfConfig) -> Result<DType, KvError> {
    // geometry() reads the dtype with HfConfig's rules; layers, heads and
    // head dim are given so only the dtype can fail.
    let geometry = hf
        .clone()
        .with_layers(1)
        .with_kv_heads(1)
        .with_head_dim(1)
        .geometry()?;
    Ok(geometry.storage.dtype().unwrap_or(DType::BF16))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn shipped(name: &str) -> Value {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../examples/configs")
            .join(name)
            .join("config.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn at_8192() -> EstimateSettings {
        EstimateSettings::new().positions(8192)
    }

    fn per_token(spec: &KvSpec) -> u64 {
        spec.layout.bytes_per_position().unwrap().unwrap()
    }

    #[test]
    fn llama_3_8b_is_131_072_bytes_per_token() {
        let e = estimate(&shipped("llama-3-8b"), &at_8192()).unwrap();
        assert_eq!(e.specs.len(), 1);
        // 32 layers x 8 heads x (128 + 128) x 2 bytes.
        assert_eq!(per_token(&e.specs[0]), 32 * 8 * 256 * 2);
        assert_eq!(per_token(&e.specs[0]), 131_072);
        // 8192 positions are 512 whole blocks of 16.
        assert_eq!(e.specs[0].bytes_per_row(), Ok(131_072 * 8192));
        assert!(e.detected.starts_with("plain attention"), "{}", e.detected);
        assert!(e.detected.contains("max_model_len 8192 (given)"));
        assert!(e.specs[0].cache.contains("FullAttentionSpec"));
    }

    #[test]
    fn deepseek_v2_lite_is_31_104_bytes_per_token() {
        let e = estimate(&shipped("deepseek-v2-lite"), &at_8192()).unwrap();
        // 27 layers x (512 + 64) x 2 bytes, no K/V doubling.
        assert_eq!(per_token(&e.specs[0]), 27 * 576 * 2);
        assert_eq!(per_token(&e.specs[0]), 31_104);
        assert!(e.detected.starts_with("MLA"));
    }

    #[test]
    fn mistral_slides_every_layer_by_vllm_rules() {
        let e = estimate(&shipped("mistral-7b-v0.1"), &at_8192()).unwrap();
        assert_eq!(e.specs.len(), 1);
        // min(4095 + 2048, 8192) = 6143 -> 384 blocks of 16, + 1 block = 6160.
        assert_eq!(e.specs[0].positions().unwrap().count, 6160);
        assert_eq!(e.specs[0].bytes_per_row(), Ok(131_072 * 6160));
        assert!(e.detected.contains("sliding attention in every layer"));
    }

    #[test]
    fn gemma_3_needs_its_pattern_and_then_splits_52_and_10() {
        let err = estimate(&shipped("gemma-3-27b"), &at_8192()).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("sliding_window_pattern"), "{text}");
        assert!(text.contains("--set sliding_window_pattern=N"), "{text}");
        assert!(text.contains("defaults it to 6"), "{text}");
        let e = estimate(
            &shipped("gemma-3-27b"),
            &at_8192().set("sliding_window_pattern", 6),
        )
        .unwrap();
        let layers: Vec<(&str, u64)> = e
            .specs
            .iter()
            .map(|s| (s.name.as_ref(), s.layout.layers()))
            .collect();
        assert_eq!(layers, [("sliding_attention", 52), ("full_attention", 10)]);
        // 16 heads x 256 x 2 bytes = 8,192 per layer per token.
        assert_eq!(per_token(&e.specs[0]), 52 * 8192);
        assert_eq!(per_token(&e.specs[1]), 10 * 8192);
        // min(1023 + 2048, 8192) = 3071 -> 192 blocks, + 1 = 3088 positions.
        assert_eq!(e.specs[0].positions().unwrap().count, 3088);
        assert_eq!(e.specs[1].positions().unwrap().count, 8192);
        assert!(e.specs.iter().all(|s| s.layer_group.is_some()));
        assert!(e.specs.iter().all(|s| s.validate("gemma").is_ok()));
    }

    #[test]
    fn jamba_is_4_attention_and_28_mamba() {
        let e = estimate(&shipped("jamba-v0.1"), &at_8192()).unwrap();
        let layers: Vec<(&str, u64)> = e
            .specs
            .iter()
            .map(|s| (s.name.as_ref(), s.layout.layers()))
            .collect();
        assert_eq!(layers, [("mamba", 28), ("full_attention", 4)]);
        // Mamba1 in vLLM: conv 3 x 8192 + ssm 8192 x 16, bf16, per layer.
        assert_eq!(
            e.specs[0].bytes_per_row(),
            Ok(28 * (3 * 8192 + 8192 * 16) * 2)
        );
        assert_eq!(per_token(&e.specs[1]), 4 * 8 * 256 * 2);
        assert!(e.specs.iter().all(|s| s.validate("jamba").is_ok()));
    }

    #[test]
    fn qwen3_next_needs_a_dtype_then_is_12_full_and_36_linear() {
        let err = estimate(&shipped("qwen3-next-80b-a3b"), &at_8192()).unwrap_err();
        assert!(err.to_string().contains("torch_dtype"), "{err}");
        let e = estimate(
            &shipped("qwen3-next-80b-a3b"),
            &at_8192().set("torch_dtype", "bfloat16"),
        )
        .unwrap();
        let layers: Vec<(&str, u64)> = e
            .specs
            .iter()
            .map(|s| (s.name.as_ref(), s.layout.layers()))
            .collect();
        assert_eq!(layers, [("linear_attention", 36), ("full_attention", 12)]);
        // conv (2 x 16 x 128 + 32 x 128) x 3 + ssm 32 x 128 x 128, bf16.
        assert_eq!(
            e.specs[0].bytes_per_row(),
            Ok(36 * (8192 * 3 + 32 * 128 * 128) * 2)
        );
        assert_eq!(per_token(&e.specs[1]), 12 * 2 * 512 * 2);
    }

    #[test]
    fn whisper_has_self_and_cross_attention_over_the_decoder() {
        let e = estimate(&shipped("whisper-large-v3"), &at_8192()).unwrap();
        let names: Vec<&str> = e.specs.iter().map(|s| s.name.as_ref()).collect();
        assert_eq!(names, ["self_attention", "cross_attention"]);
        // 32 decoder layers x 20 heads x (64 + 64) x 2 bytes (f16).
        assert_eq!(per_token(&e.specs[0]), 32 * 20 * 128 * 2);
        assert_eq!(per_token(&e.specs[0]), 163_840);
        // 1500 encoder positions in whole blocks of 16: 94 blocks.
        assert_eq!(e.specs[1].positions().unwrap().count, 1504);
        assert_eq!(e.specs[1].bytes_per_row(), Ok(163_840 * 1504));
        assert!(e.detected.starts_with("encoder-decoder"), "{}", e.detected);
        assert!(e.specs[1].cache.contains("CrossAttentionSpec"));
    }

    #[test]
    fn positions_default_to_max_position_embeddings_and_say_so() {
        let e = estimate(&shipped("ming-talker"), &EstimateSettings::new()).unwrap();
        assert_eq!(e.max_model_len, 32768);
        assert!(e
            .detected
            .contains("max_model_len 32768 (`max_position_embeddings` of the config)"));
        assert!(e.specs[0]
            .note
            .as_deref()
            .unwrap()
            .contains("max_position_embeddings"));
        let err = estimate(&shipped("llama-3-8b"), &EstimateSettings::new()).unwrap_err();
        assert!(err.to_string().contains("--positions N"), "{err}");
    }

    #[test]
    fn kv_format_and_bad_settings() {
        let q8 = at_8192().kv_format(Storage::from_name("q8_0").unwrap());
        let e = estimate(&shipped("llama-3-8b"), &q8).unwrap();
        // 128 elements = 4 blocks of 34 bytes, for K and for V.
        assert_eq!(per_token(&e.specs[0]), 32 * 8 * 2 * 4 * 34);
        let zero = estimate(&shipped("llama-3-8b"), &at_8192().block_size(0)).unwrap_err();
        assert!(zero.to_string().contains("`block_size` is 0"));
        let bad = estimate(&serde_json::json!({"num_hidden_layers": "x"}), &at_8192());
        assert!(bad.is_err());
        let not_object = estimate(&serde_json::json!([1, 2]), &at_8192());
        assert!(not_object.is_err());
    }

    #[test]
    fn hy3_fp8_says_the_scheme_has_no_format() {
        let e = estimate(&shipped("hy3-fp8"), &at_8192()).unwrap();
        assert!(e.specs[0]
            .assumes
            .as_deref()
            .unwrap()
            .contains("kv_cache_scheme"));
        assert_eq!(per_token(&e.specs[0]), 80 * 8 * 256 * 2);
    }

    fn positions(spec: &KvSpec) -> u64 {
        spec.positions().unwrap().count
    }

    fn tiny(extra: serde_json::Value) -> Value {
        let mut config = serde_json::json!({
            "model_type": "llama",
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 64,
            "torch_dtype": "bfloat16",
        });
        for (key, value) in extra.as_object().unwrap() {
            config[key] = value.clone();
        }
        config
    }

    #[test]
    fn max_num_batched_tokens_moves_vllms_sliding_window() {
        let mistral = shipped("mistral-7b-v0.1");
        // min(4095 + 2048, 8192) = 6143 -> 384 blocks + 1 = 6160 positions.
        let default = estimate(&mistral, &at_8192()).unwrap();
        assert_eq!(positions(&default.specs[0]), 6160);
        // min(4095 + 4096, 8192) = 8191 -> 512 blocks + 1 = 8208 positions.
        let wider = estimate(&mistral, &at_8192().max_num_batched_tokens(4096)).unwrap();
        assert_eq!(positions(&wider.specs[0]), 8208);
    }

    #[test]
    fn positions_come_from_the_config_with_the_key_named_and_zero_is_an_error() {
        let nested = serde_json::json!({
            "model_type": "llava",
            "text_config": tiny(serde_json::json!({"max_position_embeddings": 4096})),
        });
        let e = estimate(&nested, &EstimateSettings::new()).unwrap();
        assert_eq!(e.max_model_len, 4096);
        assert!(
            e.detected
                .contains("`text_config.max_position_embeddings` of the config"),
            "{}",
            e.detected
        );
        let top = estimate(
            &tiny(serde_json::json!({"max_position_embeddings": 2048})),
            &EstimateSettings::new(),
        )
        .unwrap();
        assert!(
            top.detected
                .contains("`max_position_embeddings` of the config"),
            "{}",
            top.detected
        );
        for bad in [serde_json::json!(0), serde_json::json!("4096")] {
            let config = tiny(serde_json::json!({"max_position_embeddings": bad}));
            let err = estimate(&config, &EstimateSettings::new())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!(
                    "`max_position_embeddings` is {bad}; expected a positive integer"
                )),
                "{err}"
            );
        }
        let missing = estimate(&tiny(serde_json::json!({})), &EstimateSettings::new())
            .unwrap_err()
            .to_string();
        assert!(
            missing
                .contains("looked at the given values, the top level, `text_config`, `llm_config`"),
            "{missing}"
        );
    }

    #[test]
    fn a_bad_sliding_window_is_an_error_not_no_window() {
        let config = tiny(serde_json::json!({"sliding_window": "wide"}));
        assert!(estimate(&config, &at_8192()).is_err());
        let none = tiny(serde_json::json!({}));
        assert_eq!(estimate(&none, &at_8192()).unwrap().specs.len(), 1);
    }

    #[test]
    fn zero_encoder_positions_and_chunks_are_errors() {
        let whisper = shipped("whisper-large-v3");
        let mut zero = whisper.clone();
        zero["max_source_positions"] = serde_json::json!(0);
        assert!(estimate(&zero, &at_8192()).is_err());
        assert!(estimate(&whisper, &at_8192()).is_ok());
        let chunked = |chunk: u64| {
            tiny(serde_json::json!({
                "layer_types": ["chunked_attention", "full_attention"],
                "attention_chunk_size": chunk,
            }))
        };
        assert!(estimate(&chunked(0), &at_8192()).is_err());
        let e = estimate(&chunked(1), &at_8192()).unwrap();
        // cdiv(min(1 + 2048, 8192), 16) = 129 blocks of 16.
        assert_eq!(positions(&e.specs[0]), 129 * 16);
    }

    #[test]
    fn an_8_bit_float_kv_scheme_stores_fp8() {
        let config = tiny(serde_json::json!({
            "quantization_config": {"kv_cache_scheme": {"num_bits": 8, "type": "float"}},
        }));
        let e = estimate(&config, &at_8192()).unwrap();
        // 2 layers x 2 heads x (64 + 64) x 1 byte.
        assert_eq!(per_token(&e.specs[0]), 2 * 2 * 128);
    }
}
