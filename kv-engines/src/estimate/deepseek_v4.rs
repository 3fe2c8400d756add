//! DeepSeek-V4, as vLLM 0.33 builds it on Hopper (`models/deepseek_v4`,
//! FlashMLA's sparse kernels): every layer keeps a sliding-window latent of
//! its last tokens; a compressed layer (CSA, one state per 4 tokens, or HCA,
//! one per 128) also keeps a compressed latent and its compressor's float32
//! state, and a CSA layer an indexer's keys and its compressor's state. Each
//! cache is paged in blocks of its own, its page padded to 576 bytes
//! (`_apply_alignment_padding`), and the backend lays the cache out
//! block-outermost, so vLLM packs its groups ([`super::pool`]'s packed path).
//!
//! kv declares each cache per stored *state* (a token of a sliding cache, 4
//! or 128 tokens of a compressed one), at its padded page's bytes per state:
//! the rows and pages are then vLLM's to the byte, and the description says
//! how many tokens a state covers.

use kv_core::pattern::{LayerKind, LayerPattern};
use kv_core::{DType, Geometry, HfConfig, KvError, KvSpec, PositionPolicy, Positions, Storage};
use serde_json::Value;

use super::kda::LAID_OUT_LAYERS_MAX;
use super::model_class::would_not_start;
use super::pool::{PackedBucket, PackedKind, Packing};
use super::settings::{config_error, EstimateSettings, VLLM_VERSION};
use super::vllm::Builder;

/// What refusals here are about (`KvError::Config`'s `what`).
const WHAT: &str = "DeepSeek-V4 layers";
/// The sparse MLA kernels' only block (`sparse_mla.py:60`,
/// `get_supported_kernel_block_sizes`), which vLLM takes where none is given.
pub(super) const ENGINE_BLOCK: u64 = 256;
/// The sliding-window latent's own block (`DeepseekV4SWACache`, sparse_swa.py).
const SWA_BLOCK: u64 = 64;
/// One fp8_ds_mla latent: 448 B fp8 NoPE, 128 B bf16 RoPE, 8 B of scales
/// (attention.py:881, `state_content_bytes`).
const LATENT_BYTES: u64 = 584;
/// Every page rounds up to FlashMLA's TMA stride (`alignment=576`).
const PAGE_ALIGNMENT: u64 = 576;
/// The head the 584-byte latent is laid out for.
const HEAD_DIM: u64 = 512;
/// The indexer's fp8 keys carry a float32 scale per 128 (attention.py:1028).
const INDEXER_QUANT_BLOCK: u64 = 128;
/// The compression ratios vLLM builds (`CompressorStateCache`:
/// `assert compress_ratio in [4, 128]`, compressor.py:159).
const CSA: u64 = 4;
const HCA: u64 = 128;

/// One layer's kind, by its compression ratio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ratio {
    /// Ratio 1: the sliding-window latent alone.
    SlidingOnly,
    /// Ratio 4: compressed sparse attention, with an indexer.
    Csa,
    /// Ratio 128: heavily compressed attention.
    Hca,
}

/// A DeepSeek-V4 config, as vLLM reads it (through transformers'
/// `DeepseekV4Config`).
#[derive(Clone, Debug)]
pub(super) struct DeepseekV4 {
    ratios: Vec<Ratio>,
    window: u64,
    /// `head_dim`: the compressor's state is `2 x coff x head_dim` float32.
    head_dim: u64,
    index_head_dim: u64,
    /// Where the layer kinds came from, in words.
    pub said: String,
}

/// The count `key` of `hf`, or `default` (transformers' dataclass default)
/// where it is absent.
fn count_or(hf: &HfConfig, key: &str, default: u64) -> Result<u64, KvError> {
    match hf.value(key) {
        None | Some((_, Value::Null)) => Ok(default),
        Some((name, value)) => value.as_u64().filter(|n| *n > 0).ok_or_else(|| {
            config_error(WHAT, format!("`{name}` is {value}, not a positive count"))
        }),
    }
}

/// `compress_rates` (transformers' default CSA 4, HCA 128), with the legacy
/// `compress_rate_csa` / `compress_rate_hca` folded in.
fn compress_rates(hf: &HfConfig) -> Result<(u64, u64), KvError> {
    let mut rates = (CSA, HCA);
    if let Some((name, value)) = hf.value("compress_rates") {
        let Value::Object(map) = value else {
            return Err(config_error(
                WHAT,
                format!("`{name}` is {value}, not a map of layer types to ratios"),
            ));
        };
        // transformers replaces its default with the map: a type the map
        // omits has no ratio (0, read as 1 by vLLM).
        rates = (0, 0);
        for (kind, rate) in map {
            let rate = rate.as_u64().ok_or_else(|| {
                config_error(WHAT, format!("`{name}.{kind}` is {rate}, not a ratio"))
            })?;
            match kind.as_str() {
                "compressed_sparse_attention" => rates.0 = rate,
                "heavily_compressed_attention" => rates.1 = rate,
                _ => {}
            }
        }
    }
    for (key, slot) in [
        ("compress_rate_csa", &mut rates.0),
        ("compress_rate_hca", &mut rates.1),
    ] {
        if let Some((name, value)) = hf.value(key) {
            *slot = value
                .as_u64()
                .ok_or_else(|| config_error(WHAT, format!("`{name}` is {value}, not a ratio")))?;
        }
    }
    Ok(rates)
}

/// A layer of `ratio` as vLLM builds it: `max(1, ratio)` (attention.py:240),
/// and only 4 and 128 compress (compressor.py:159).
fn ratio_of(layer: usize, ratio: u64, said: &str) -> Result<Ratio, KvError> {
    match ratio {
        0 | 1 => Ok(Ratio::SlidingOnly),
        CSA => Ok(Ratio::Csa),
        HCA => Ok(Ratio::Hca),
        other => Err(would_not_start(format!(
            "AssertionError: assert compress_ratio in [4, 128] (layer {layer}: {said} gives \
             ratio {other}; models/deepseek_v4/compressor.py:159)"
        ))),
    }
}

/// A per-layer list of at least `layers` entries, else an error naming it.
fn long_enough(name: &str, list: &[Value], layers: u64) -> Result<(), KvError> {
    if (list.len() as u64) < layers {
        return Err(config_error(
            WHAT,
            format!(
                "`{name}` lists {} layers, fewer than the {layers} of `num_hidden_layers`",
                list.len()
            ),
        ));
    }
    Ok(())
}

/// The DeepSeek-V4 config of `hf` over its `layers`: each layer's type from
/// `layer_types` (its first `layers` entries), else the legacy
/// `compress_ratios` (0, 4 or 128 a layer), else transformers' default (two
/// HCA layers, then HCA and CSA alternating); its ratio from
/// `compress_rates`. The MTP layers are not built without speculative
/// decoding.
pub(super) fn read(hf: &HfConfig, layers: u64) -> Result<DeepseekV4, KvError> {
    if layers > LAID_OUT_LAYERS_MAX {
        return Err(config_error(
            WHAT,
            format!("{layers} layers: kv lays out at most {LAID_OUT_LAYERS_MAX} one by one"),
        ));
    }
    let n = usize::try_from(layers).unwrap_or(usize::MAX);
    let (csa, hca) = compress_rates(hf)?;
    let rate_of = |kind: &str| match kind {
        "compressed_sparse_attention" => Some(csa),
        "heavily_compressed_attention" => Some(hca),
        "sliding_attention" => Some(0),
        _ => None,
    };
    let mut ratios = Vec::with_capacity(n);
    let said = match (hf.value("layer_types"), hf.value("compress_ratios")) {
        (Some((name, Value::Array(list))), _) => {
            long_enough(&name, list, layers)?;
            for (i, kind) in list.iter().take(n).enumerate() {
                let rate = kind.as_str().and_then(rate_of).ok_or_else(|| {
                    config_error(
                        WHAT,
                        format!(
                            "`{name}[{i}]` is {kind}, not sliding_attention, \
                             compressed_sparse_attention or heavily_compressed_attention"
                        ),
                    )
                })?;
                ratios.push(ratio_of(i, rate, &format!("`{name}[{i}]`"))?);
            }
            format!("layer kinds from the first {layers} entries of `{name}`")
        }
        (Some((name, other)), _) => {
            return Err(config_error(
                WHAT,
                format!("`{name}` is {other}, not a list of layer types"),
            ))
        }
        (None, Some((name, Value::Array(list)))) => {
            long_enough(&name, list, layers)?;
            for (i, ratio) in list.iter().take(n).enumerate() {
                // transformers maps 0, 4 and 128 to layer types, and fails on
                // any other (KeyError); the type's rate is then read.
                let kind = match ratio.as_u64() {
                    Some(0) => "sliding_attention",
                    Some(CSA) => "compressed_sparse_attention",
                    Some(HCA) => "heavily_compressed_attention",
                    _ => {
                        return Err(config_error(
                            WHAT,
                            format!(
                                "`{name}[{i}]` is {ratio}: transformers maps only 0, 4 and \
                                 128 to a layer type (KeyError)"
                            ),
                        ))
                    }
                };
                let rate = rate_of(kind).unwrap_or(0);
                ratios.push(ratio_of(i, rate, &format!("`{name}[{i}]`"))?);
            }
            format!("layer kinds from the first {layers} entries of `{name}`")
        }
        (None, Some((name, other))) => {
            return Err(config_error(
                WHAT,
                format!("`{name}` is {other}, not a list of ratios"),
            ))
        }
        (None, None) => {
            for i in 0..n {
                // Two HCA layers, then HCA on even layers and CSA on odd.
                let kind = if i > 1 && i % 2 == 1 {
                    "compressed_sparse_attention"
                } else {
                    "heavily_compressed_attention"
                };
                ratios.push(ratio_of(
                    i,
                    rate_of(kind).unwrap_or(0),
                    "transformers' default",
                )?);
            }
            "no `layer_types`: transformers' default, two HCA layers then HCA and CSA \
             alternating"
                .to_owned()
        }
    };
    Ok(DeepseekV4 {
        ratios,
        window: count_or(hf, "sliding_window", 128)?,
        head_dim: count_or(hf, "head_dim", HEAD_DIM)?,
        index_head_dim: count_or(hf, "index_head_dim", 128)?,
        said,
    })
}

/// One cache as vLLM pages it: the states a page holds, the bytes of one
/// state, and the page padded to [`PAGE_ALIGNMENT`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Paged {
    states_per_page: u64,
    state_bytes: u64,
}

impl Paged {
    /// `round_up(states x bytes, 576)`, and the bytes per state it makes
    /// (every page here is a whole number of them: 576 is a multiple of
    /// each power of two up to 64 states).
    fn padded(self) -> Result<(u64, u64), KvError> {
        let real = self
            .states_per_page
            .checked_mul(self.state_bytes)
            .ok_or_else(|| config_error(WHAT, "a page overflows u64".to_owned()))?;
        let page = real
            .div_ceil(PAGE_ALIGNMENT)
            .checked_mul(PAGE_ALIGNMENT)
            .ok_or_else(|| config_error(WHAT, "a padded page overflows u64".to_owned()))?;
        if self.states_per_page == 0 || !page.is_multiple_of(self.states_per_page) {
            return Err(config_error(
                WHAT,
                format!(
                    "a page of {} states padded to {page} B is not a whole number of states; \
                     kv has not checked how vLLM {VLLM_VERSION} pages it",
                    self.states_per_page
                ),
            ));
        }
        Ok((page, page / self.states_per_page))
    }
}

impl DeepseekV4 {
    fn count(&self, ratio: Ratio) -> u64 {
        self.ratios.iter().filter(|r| **r == ratio).count() as u64
    }

    /// The layers of `ratio` as the pattern's full-attention layers.
    fn pattern(&self, ratio: Ratio) -> Result<LayerPattern, KvError> {
        let kinds = self
            .ratios
            .iter()
            .map(|r| {
                if *r == ratio {
                    LayerKind::FullAttention
                } else {
                    LayerKind::SlidingAttention
                }
            })
            .collect();
        LayerPattern::from_kinds(kinds, "layer_types")
            .map_err(|e| config_error(WHAT, format!("`layer_types`: {e}")))
    }

    /// What vLLM 0.33 refuses for DeepSeek-V4 on Hopper, and what kv has not
    /// checked.
    pub fn check(&self, settings: &EstimateSettings) -> Result<(), KvError> {
        let engine = &settings.engine;
        // `_resolve_dsv4_kv_cache_dtype` (attention.py:94): FlashMLA's
        // fp8_ds_mla layout takes `auto` and any fp8 name.
        match settings.kv_format {
            None | Some(Storage::Dense(DType::F8E4M3 | DType::F8E5M2)) => {}
            Some(Storage::Scaled { .. }) => {
                return Err(config_error(
                    "kv_format",
                    format!(
                        "DeepSeek-V4 with a per-token-head format: vLLM {VLLM_VERSION} would \
                         read it as fp8_ds_mla (its name starts with fp8), which kv has not \
                         checked; give fp8 or none"
                    ),
                ))
            }
            Some(other) => {
                return Err(would_not_start(format!(
                    "ValueError: DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got \
                     {other}. Please set `--kv-cache-dtype fp8` or select a backend that \
                     supports bfloat16 KV cache. (models/deepseek_v4/attention.py:112)"
                )))
            }
        }
        // DCP: refused with every sliding cache (`refusals::check_dcp`), and
        // every layer keeps one.
        if settings.block_size_given && settings.block_size != ENGINE_BLOCK {
            return Err(KvError::Config {
                what: "block_size",
                problem: format!(
                    "a block of {} on DeepSeek-V4: its sparse MLA kernels run blocks of \
                     {ENGINE_BLOCK} only, which vLLM {VLLM_VERSION} takes where none is given; \
                     at 8, 16 and 32 vLLM's planning failed (ZeroDivisionError: an HCA page \
                     of block // 128 = 0 states), and kv has not checked any other; give no \
                     --block-size",
                    settings.block_size
                ),
            });
        }
        if engine.speculative_tokens > 0 {
            return Err(config_error(
                "estimate settings",
                "speculative tokens on DeepSeek-V4: its MTP layers keep caches of their own, \
                 which kv has not checked; give none"
                    .to_owned(),
            ));
        }
        if self.head_dim != HEAD_DIM {
            return Err(config_error(
                WHAT,
                format!(
                    "`head_dim` {}: vLLM {VLLM_VERSION} stores {LATENT_BYTES} B a latent \
                     whatever the head (laid out for {HEAD_DIM}), which kv has not checked \
                     for another",
                    self.head_dim
                ),
            ));
        }
        Ok(())
    }

    /// The declarations and how vLLM packs them: the sliding-window latent
    /// of every layer; each compressed layer's latent and compressor state;
    /// each CSA layer's indexer keys and indexer compressor state.
    pub fn specs(&self, builder: &Builder<'_>) -> Result<(Vec<KvSpec>, Packing), KvError> {
        let mut specs = Vec::new();
        let mut kinds = Vec::new();
        let layers = self.ratios.len() as u64;
        // Every layer: `DeepseekV4SWACache`, a SlidingWindowMLASpec of the
        // window, block 64.
        let swa = Paged {
            states_per_page: SWA_BLOCK,
            state_bytes: LATENT_BYTES,
        };
        let spec = sliding(
            builder,
            "sliding_window_latent",
            format!("the last {} tokens' fp8_ds_mla latents", self.window),
            layers,
            swa,
            self.window,
        )?;
        kinds.push(PackedKind::new(
            &spec.name,
            PackedBucket::Sliding {
                window: self.window,
                block: SWA_BLOCK,
            },
            None,
        ));
        specs.push(spec);
        let full = PackedBucket::Full {
            block: ENGINE_BLOCK,
        };
        for (ratio, tokens, name, state_name) in [
            (
                Ratio::Csa,
                CSA,
                "compressed_latent_c4",
                "c4_compressor_state",
            ),
            (
                Ratio::Hca,
                HCA,
                "compressed_latent_c128",
                "c128_compressor_state",
            ),
        ] {
            let count = self.count(ratio);
            if count == 0 {
                continue;
            }
            let pattern = self.pattern(ratio)?;
            let latent = Paged {
                states_per_page: ENGINE_BLOCK / tokens,
                state_bytes: LATENT_BYTES,
            };
            let spec = compressed(
                builder,
                name,
                format!("an fp8_ds_mla latent per {tokens} tokens"),
                count,
                latent,
                tokens,
            )?;
            kinds.push(PackedKind::new(&spec.name, full, None).paged_in(latent.states_per_page));
            specs.push(spec.in_layers(pattern.clone(), LayerKind::FullAttention));
            // `CompressorStateCache` (compressor.py:139): float32 kv and
            // score states of `coff x head_dim` each, coff 2 for CSA.
            // Blocks of 4 and 8 slots (compressor.py:168), the window coff x
            // the ratio.
            let (coff, block) = if ratio == Ratio::Csa { (2, 4) } else { (1, 8) };
            let window = coff * tokens;
            let state = Paged {
                states_per_page: block,
                state_bytes: f32_state(coff, self.head_dim)?,
            };
            let spec = sliding(
                builder,
                state_name,
                format!(
                    "the compressor's float32 kv and score states, {} B a token",
                    state.state_bytes
                ),
                count,
                state,
                window,
            )?;
            kinds.push(PackedKind::new(
                &spec.name,
                PackedBucket::Sliding { window, block },
                None,
            ));
            specs.push(spec.in_layers(pattern.clone(), LayerKind::FullAttention));
            if ratio != Ratio::Csa {
                continue;
            }
            // The indexer (CSA only, attention.py:302): fp8 keys with a
            // float32 scale per 128, one per 4 tokens, and its compressor.
            let keys = Paged {
                states_per_page: ENGINE_BLOCK / tokens,
                state_bytes: self
                    .index_head_dim
                    .checked_add(self.index_head_dim / INDEXER_QUANT_BLOCK * 4)
                    .ok_or_else(|| config_error(WHAT, "`index_head_dim` overflows".to_owned()))?,
            };
            let spec = compressed(
                builder,
                "indexer_keys_c4",
                format!(
                    "the indexer's keys per {tokens} tokens: `index_head_dim` {} fp8 and a \
                     float32 scale per {INDEXER_QUANT_BLOCK}",
                    self.index_head_dim
                ),
                count,
                keys,
                tokens,
            )?;
            kinds.push(PackedKind::new(&spec.name, full, None).paged_in(keys.states_per_page));
            specs.push(spec.in_layers(pattern.clone(), LayerKind::FullAttention));
            let state = Paged {
                states_per_page: 4,
                state_bytes: f32_state(coff, self.index_head_dim)?,
            };
            let spec = sliding(
                builder,
                "indexer_compressor_state",
                format!(
                    "the indexer compressor's float32 kv and score states, {} B a token",
                    state.state_bytes
                ),
                count,
                state,
                window,
            )?;
            kinds.push(PackedKind::new(
                &spec.name,
                PackedBucket::Sliding { window, block: 4 },
                None,
            ));
            specs.push(spec.in_layers(pattern, LayerKind::FullAttention));
        }
        Ok((specs, Packing::new(kinds)))
    }
}

/// `2 x coff x dim` float32 elements.
fn f32_state(coff: u64, dim: u64) -> Result<u64, KvError> {
    (2 * coff)
        .checked_mul(dim)
        .and_then(|n| n.checked_mul(4))
        .ok_or_else(|| config_error(WHAT, "a compressor state overflows u64".to_owned()))
}

/// A SlidingWindowMLASpec of `window`, in blocks of a page's states.
fn sliding(
    builder: &Builder<'_>,
    name: &'static str,
    what: String,
    layers: u64,
    paged: Paged,
    window: u64,
) -> Result<KvSpec, KvError> {
    let (page, per_state) = paged.padded()?;
    let block = paged.states_per_page;
    let positions = builder.sliding_positions(name, window, block)?;
    builder.as_is(
        name,
        format!(
            "vLLM {VLLM_VERSION} SlidingWindowMLASpec ({what}; window {window}, block \
             {block}, a page of {} B padded to {page} B: {per_state} B a token)",
            paged.real()
        ),
        bytes_geometry(layers, per_state),
        positions,
    )
}

/// An MLAAttentionSpec of one state per `tokens` tokens: the states of
/// `max_model_len` tokens in whole pages of `paged.states_per_page`.
fn compressed(
    builder: &Builder<'_>,
    name: &'static str,
    what: String,
    layers: u64,
    paged: Paged,
    tokens: u64,
) -> Result<KvSpec, KvError> {
    let (page, per_state) = paged.padded()?;
    let positions = Positions::from_policy(PositionPolicy::PaddedTo {
        count: builder.max_model_len.div_ceil(tokens),
        multiple: paged.states_per_page,
    })
    .map_err(|o| config_error(WHAT, o.step.to_owned()))?;
    builder.as_is(
        name,
        format!(
            "vLLM {VLLM_VERSION} MLAAttentionSpec ({what}; block {ENGINE_BLOCK} tokens = {} \
             states, a page of {} B padded to {page} B: {per_state} B a state, positions \
             counted in states; the KV format does not apply beyond fp8_ds_mla)",
            paged.states_per_page,
            paged.real()
        ),
        bytes_geometry(layers, per_state),
        positions,
    )
}

impl Paged {
    fn real(self) -> u64 {
        self.states_per_page.saturating_mul(self.state_bytes)
    }
}

/// `bytes` bytes a state per layer, keys only.
fn bytes_geometry(layers: u64, bytes: u64) -> Geometry {
    Geometry::new(layers, 1, bytes, DType::U8).with_v_head_dim(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: Value) -> HfConfig {
        let mut config = serde_json::json!({"model_type": "deepseek_v4", "num_hidden_layers": 4});
        if let (Value::Object(base), Value::Object(extra)) = (&mut config, extra) {
            base.extend(extra);
        }
        HfConfig::from_value(config)
    }

    #[test]
    fn the_most_layers_are_laid_out_and_one_more_is_refused() {
        let most = read(&config(serde_json::json!({})), LAID_OUT_LAYERS_MAX).unwrap();
        assert_eq!(most.ratios.len() as u64, LAID_OUT_LAYERS_MAX);
        let text = read(&config(serde_json::json!({})), LAID_OUT_LAYERS_MAX + 1)
            .unwrap_err()
            .to_string();
        assert!(text.contains("at most 65536"), "{text}");
    }

    #[test]
    fn the_default_is_two_hca_layers_then_hca_and_csa_alternating() {
        let v4 = read(&config(serde_json::json!({"num_hidden_layers": 6})), 6).unwrap();
        use Ratio::{Csa, Hca};
        assert_eq!(v4.ratios, [Hca, Hca, Hca, Csa, Hca, Csa]);
        // The legacy list maps 0 to a sliding layer; its MTP entry is cut.
        let legacy = read(
            &config(serde_json::json!({"compress_ratios": [0, 128, 4, 0, 4]})),
            4,
        )
        .unwrap();
        assert_eq!(
            legacy.ratios,
            [Ratio::SlidingOnly, Hca, Csa, Ratio::SlidingOnly]
        );
    }

    #[test]
    fn every_page_is_padded_to_576_and_a_whole_number_of_states() {
        // 64 x 584 = 37,376 up to 37,440 = 64 x 585; 2 x 584 = 1,168 up to
        // 1,728 = 2 x 864; a page already a multiple stays.
        let page = |states, bytes| {
            Paged {
                states_per_page: states,
                state_bytes: bytes,
            }
            .padded()
        };
        assert_eq!(page(64, 584).unwrap(), (37_440, 585));
        assert_eq!(page(2, 584).unwrap(), (1728, 864));
        assert_eq!(page(1, 576).unwrap(), (576, 576));
        // 128 states pad to a page that is no whole number of them.
        let text = page(128, 1).unwrap_err().to_string();
        assert!(text.contains("not a whole number of states"), "{text}");
        assert!(page(0, 584).is_err());
        assert!(page(u64::MAX, 2).is_err());
    }
}
