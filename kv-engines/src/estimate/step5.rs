//! Step-5, as vLLM 0.33's model builds it (`models/step5/nvidia`): its
//! sliding layers are plain sliding-window attention; every other layer is
//! a sparse (DSA) layer that keeps, beside its K/V (a FullAttentionSpec whose
//! block stride is whole 8-token kernel blocks), a summary cache of 256
//! bytes per 8-token region (`sparse_summary_cache.py:143`) and a tail ring
//! of one K/V page per request (`csa_tail_ring.py:166`). The DSA backend
//! lays the cache out block-outermost, so vLLM packs its groups
//! ([`super::pool`]'s packed path). A config with a `sparse_config` section
//! always has these caches ("section presence determines the shared KV
//! layout"); one without is refused by [`super::model_class`].

use kv_core::pattern::{LayerKind, LayerPattern};
use kv_core::{DType, Geometry, HfConfig, KvError, KvSpec, PositionPolicy, Positions};
use serde_json::Value;

use super::kda::LAID_OUT_LAYERS_MAX;
use super::model_class::would_not_start;
use super::pool::{Alignment, PackedBucket, PackedKind, Packing};
use super::settings::{config_error, EstimateSettings, VLLM_VERSION};
use super::vllm::Builder;

/// What refusals here are about (`KvError::Config`'s `what`).
const WHAT: &str = "Step-5 layers";
/// The summary cache: 256 bytes per 8-token region.
const SUMMARY_REGION: u64 = 8;
const SUMMARY_BYTES: u64 = 256;
/// The tail ring's rows: 1,024 bytes each, 7 plus one per speculative token.
const RING_ROW_BYTES: u64 = 1024;
const RING_ROWS: u64 = 7;
/// FlashAttention's kernel blocks are multiples of 16.
const KERNEL_BLOCK: u64 = 16;
/// The DSA layers' K/V declaration.
const MAIN: &str = "full_attention";

/// A Step-5 config, as vLLM reads it.
#[derive(Clone, Debug)]
pub(super) struct Step5 {
    /// Sliding layers as [`LayerKind::SlidingAttention`], DSA layers as
    /// [`LayerKind::FullAttention`].
    pub pattern: LayerPattern,
    /// `sliding_window`, where set.
    pub window: Option<u64>,
    /// Where the pattern came from, in words.
    pub said: String,
}

/// The Step-5 config of `hf` over its `layers`: `layer_types` (or
/// `layer_types_with_mtp`) must list the dense stack and every MTP layer
/// (`configs/step5.py:173`), of which the first `layers` are read; without
/// a list, even layers slide. Without a `sliding_window` no layer slides:
/// every layer is DSA (`model.py:908`, `use_dsa_backend`).
pub(super) fn read(hf: &HfConfig, layers: u64) -> Result<Step5, KvError> {
    if layers > LAID_OUT_LAYERS_MAX {
        return Err(config_error(
            WHAT,
            format!("{layers} layers: kv lays out at most {LAID_OUT_LAYERS_MAX} one by one"),
        ));
    }
    let window = hf.sliding_window_if_set()?;
    let nextn = match hf.value("num_nextn_predict_layers") {
        None => 0,
        Some((name, value)) => value.as_u64().ok_or_else(|| {
            config_error(WHAT, format!("`{name}` is {value}, not a count of layers"))
        })?,
    };
    let listed = hf
        .value("layer_types_with_mtp")
        .or_else(|| hf.value("layer_types"));
    let mut said = Vec::new();
    let kinds: Vec<LayerKind> = match listed {
        Some((name, Value::Array(list))) => {
            let total = layers.saturating_add(nextn);
            if (list.len() as u64) < total {
                return Err(would_not_start(format!(
                    "ValueError: Step5 layer_types \
                         must include the dense stack and every MTP layer: expected at least \
                         {total} entries, got {} (`{name}`)",
                    list.len()
                )));
            }
            said.push(format!("the first {layers} entries of `{name}`"));
            list.iter()
                .take(usize::try_from(layers).unwrap_or(0))
                .enumerate()
                .map(|(i, kind)| match kind.as_str() {
                    Some("sliding_attention") if window.is_some() => {
                        Ok(LayerKind::SlidingAttention)
                    }
                    Some("sliding_attention" | "full_attention") => Ok(LayerKind::FullAttention),
                    _ => Err(config_error(
                        WHAT,
                        format!("`{name}[{i}]` is {kind}, not sliding_attention or full_attention"),
                    )),
                })
                .collect::<Result<_, _>>()?
        }
        Some((name, other)) => {
            return Err(config_error(
                WHAT,
                format!("`{name}` is {other}, not a list of layer kinds"),
            ))
        }
        None => {
            said.push("no `layer_types`: even layers slide (model.py:897)".to_owned());
            (0..layers)
                .map(|i| match (i % 2, window) {
                    (0, Some(_)) => LayerKind::SlidingAttention,
                    _ => LayerKind::FullAttention,
                })
                .collect()
        }
    };
    if window.is_none() {
        said.push("no `sliding_window`: every layer is DSA (model.py:908)".to_owned());
    }
    let pattern = LayerPattern::from_kinds(kinds, "layer_types")
        .map_err(|e| config_error(WHAT, format!("`layer_types`: {e}")))?;
    Ok(Step5 {
        pattern,
        window,
        said: said.join("; "),
    })
}

/// One DSA layer's K/V page on one rank, which the tail ring must hold:
/// `max(1, kv_heads / tp)` heads (vLLM's `get_num_kv_heads`), a block of
/// the estimate's tokens.
fn rank_page(mut main: Geometry, tp: u64, settings: &EstimateSettings) -> Result<u64, KvError> {
    main.kv_heads = (main.kv_heads / tp).max(1);
    main.with_layers(1)
        .bytes_per_position()
        .ok()
        .and_then(|bytes| bytes.checked_mul(settings.block_size))
        .ok_or_else(|| config_error(WHAT, "one K/V page overflows u64".to_owned()))
}

/// Step5MoE's router (model.py:1717), where a dense layer is MoE: layers
/// `moe_layers_enum` ("3,4,...") or `moe_layer_list` names, else every layer
/// but the first; `use_moe_router_bias` is false unless set.
fn check_moe(hf: &HfConfig, layers: u64) -> Result<(), KvError> {
    let listed: Option<Vec<u64>> = match hf
        .value("moe_layers_enum")
        .or_else(|| hf.value("moe_layer_list"))
    {
        Some((_, Value::String(text))) => Some(
            text.split(',')
                .filter_map(|n| n.trim().parse::<u64>().ok())
                .collect(),
        ),
        Some((_, Value::Array(list))) => Some(list.iter().filter_map(Value::as_u64).collect()),
        _ => None,
    };
    let moe = match listed {
        Some(list) => list.iter().any(|layer| *layer < layers),
        None => layers > 1,
    };
    let bias = hf
        .value("use_moe_router_bias")
        .is_some_and(|(_, v)| v.as_bool() == Some(true));
    if moe && !bias {
        return Err(would_not_start(
            "ValueError: Step5 MoE currently requires use_moe_router_bias=true. \
             (models/step5/nvidia/model.py:1717)",
        ));
    }
    Ok(())
}

impl Step5 {
    /// What vLLM 0.33 refuses while building the DSA layers, and what kv has
    /// not checked. `storage` is the K/V's, `page` one DSA layer's K/V page on
    /// one rank.
    pub fn check(
        &self,
        hf: &HfConfig,
        settings: &EstimateSettings,
        specs: &[KvSpec],
    ) -> Result<(), KvError> {
        let engine = &settings.engine;
        let Some(storage) = specs.first().and_then(KvSpec::geometry).map(|g| g.storage) else {
            return Err(config_error(WHAT, "no layer keeps a cache".to_owned()));
        };
        let refused = would_not_start;
        if settings.block_size_given && !settings.block_size.is_multiple_of(KERNEL_BLOCK) {
            if !settings.block_size.is_multiple_of(SUMMARY_REGION) {
                return Err(refused(
                    "ValueError: Step5 KV blocks must align to eight-token regions \
                     (models/step5/nvidia/sparse_summary_cache.py:146)"
                        .to_owned(),
                ));
            }
            return Err(KvError::Config {
                what: "block_size",
                problem: format!(
                    "a block of {} on Step-5: vLLM {VLLM_VERSION} builds it (Step-5 pins its \
                     backends, so the selector that refuses such a block elsewhere does not \
                     run), but kv has not checked that FlashAttention runs it; give a multiple \
                     of {KERNEL_BLOCK}, or no --block-size",
                    settings.block_size
                ),
            });
        }
        if engine.decode_context_parallel > 1 {
            return Err(refused(
                "NotImplementedError: Step5 does not support decode context parallelism \
                 (models/step5/nvidia/sparse_attention.py:305)"
                    .to_owned(),
            ));
        }
        if storage.dtype() == Some(DType::F8E5M2) {
            let first_slides = self.pattern.kind_of(0) == Some(LayerKind::SlidingAttention);
            return Err(refused(if first_slides {
                "NotImplementedError: FlashAttention does not support fp8_e5m2 kv-cache on this \
                 device \
                 (v1/attention/backends/flash_attn.py:1142; Step-5 pins FlashAttention)"
                    .to_owned()
            } else {
                "NotImplementedError: Step5 DSA supports E4M3 FP8 KV cache only \
                 (models/step5/nvidia/sparse_attention.py:318)"
                    .to_owned()
            }));
        }
        let rows = RING_ROWS.saturating_add(engine.speculative_tokens);
        let main = specs
            .iter()
            .find(|s| s.name == MAIN)
            .and_then(KvSpec::geometry);
        if let Some(page) = main
            .map(|g| rank_page(*g, engine.tensor_parallel, settings))
            .transpose()?
            .filter(|page| !page.is_multiple_of(RING_ROW_BYTES) || page / RING_ROW_BYTES < rows)
        {
            return Err(refused(format!(
                "ValueError: Step5 CSA tail ring needs {rows} rows of {RING_ROW_BYTES} bytes \
                 in one {page}-byte KV page; increase --block-size. \
                 (models/step5/nvidia/csa_tail_ring.py:170)"
            )));
        }
        self.check_geometry(hf, engine.tensor_parallel)?;
        check_moe(hf, self.pattern.layers())?;
        self.check_stages(engine.pipeline_stages)
    }

    /// Every pipeline stage must hold a DSA layer: on one that holds none,
    /// vLLM 0.33 did not pack the cache block-outermost on its own objects
    /// (PP 3 of a 6-layer model, checked 2026-12-07), a path kv has not
    /// checked.
    fn check_stages(&self, stages: u64) -> Result<(), KvError> {
        if stages <= 1 || self.pattern.count(LayerKind::FullAttention) == 0 {
            return Ok(());
        }
        let sizes = kv_core::Parallel::new(1, stages)?.stage_layers(self.pattern.layers())?;
        let mut start = 0u64;
        for (stage, size) in sizes.iter().enumerate() {
            let end = start.saturating_add(*size);
            if self.pattern.count_in(LayerKind::FullAttention, start, end) == 0 {
                return Err(config_error(
                    "estimate settings",
                    format!(
                        "pipeline stage {stage} (layers {start}..{end}) holds no sparse (DSA) \
                         layer: vLLM {VLLM_VERSION} then does not pack Step-5's cache \
                         block-outermost, which kv has not checked; give a pipeline size whose \
                         every stage holds a DSA layer"
                    ),
                ));
            }
            start = end;
        }
        Ok(())
    }

    /// `_validate_step5_dsa_parallel_geometry` (model.py:372): the sparse
    /// indexer's provider groups must be the KV groups, and each rank's
    /// query heads per KV group 4, 8 or 16.
    fn check_geometry(&self, hf: &HfConfig, tp: u64) -> Result<(), KvError> {
        if self.pattern.count(LayerKind::FullAttention) == 0 {
            return Ok(());
        }
        let geometry = hf.geometry()?;
        if geometry.head_dim != 128 && geometry.head_dim != 192 {
            return Err(would_not_start(format!(
                "ValueError: Step5 DSA supports \
                     attention head dimensions 128 or 192, got {}. \
                     (models/step5/nvidia/model.py:1033)",
                geometry.head_dim
            )));
        }
        // The DSA kernels run only 192-wide heads (sparse_attention.py:160).
        if geometry.head_dim != 192 {
            return Err(would_not_start(format!(
                "NotImplementedError: Step5 DSA \
                     kernels require head_size 192, got {}. \
                     (models/step5/nvidia/sparse_attention.py:160)",
                geometry.head_dim
            )));
        }
        let heads = hf
            .attention_heads()?
            .map(|(_, heads)| heads)
            .ok_or_else(|| config_error(WHAT, "`num_attention_heads` is not set".to_owned()))?;
        let kv = geometry.kv_heads;
        let section = hf.value("sparse_config").map(|(_, v)| v.clone());
        let providers = section
            .as_ref()
            .and_then(|s| {
                s.get("index_tp_size")
                    .or_else(|| s.get("num_provider_groups"))
            })
            .and_then(Value::as_u64)
            .unwrap_or(4);
        let refused = |problem: String| {
            would_not_start(format!(
                "ValueError: {problem} \
                 (models/step5/nvidia/model.py:372, _validate_step5_dsa_parallel_geometry)"
            ))
        };
        let count = |key: &str, default: u64| {
            section
                .as_ref()
                .and_then(|s| s.get(key))
                .and_then(Value::as_u64)
                .unwrap_or(default)
        };
        // `Step5SparseConfig`'s checks that move the DSA layers' geometry
        // (models/step5/nvidia/config.py:151-176).
        let config_refused = |problem: String| {
            would_not_start(format!(
                "ValueError: {problem} \
                 (models/step5/nvidia/config.py)"
            ))
        };
        let k_heads = count("sparse_indexer_num_k_heads", 1);
        if k_heads != 1 {
            return Err(config_refused(format!(
                "Step5 sparse indexer currently requires exactly one KV head, got \
                 sparse_indexer_num_k_heads={k_heads}."
            )));
        }
        let indexer_heads = count("sparse_indexer_num_heads", 16);
        // `is_multiple_of(0)` holds for 0 alone: 0 providers are refused too.
        if indexer_heads == 0 || !indexer_heads.is_multiple_of(providers) {
            return Err(config_refused(format!(
                "Step5 sparse_indexer_num_heads must be positive and divisible by \
                 index_tp_size, got sparse_indexer_num_heads={indexer_heads}, \
                 index_tp_size={providers}."
            )));
        }
        let per_provider = indexer_heads / providers;
        if ![2, 4].contains(&per_provider) {
            return Err(config_refused(format!(
                "Step5 DSA indexer requires sparse_indexer_num_heads / index_tp_size in (2, \
                 4), got {per_provider} ({indexer_heads} / {providers})."
            )));
        }
        if providers != kv {
            return Err(refused(format!(
                "Step5 DSA provider groups must align with attention KV groups: {providers} != \
                 {kv}"
            )));
        }
        // `_step5_groups_per_rank` (model.py:334): shared where one divides
        // the other, one group a rank where the groups are replicated.
        let local_groups = if kv.is_multiple_of(tp) {
            kv / tp
        } else if tp.is_multiple_of(kv) {
            1
        } else {
            return Err(refused(format!(
                "Step5 tensor parallel size {tp} is incompatible with group count {kv}: one \
                 must divide the other."
            )));
        };
        if !heads.is_multiple_of(tp) {
            return Err(refused(format!(
                "Step5 attention heads must be divisible by tensor parallel size: \
                 num_heads={heads}, tp_size={tp}."
            )));
        }
        let local_heads = heads / tp;
        if !local_heads.is_multiple_of(local_groups) {
            return Err(refused(format!(
                "{local_heads} local Q heads do not divide into {local_groups} local KV groups."
            )));
        }
        let per_group = local_heads / local_groups;
        if ![4, 8, 16].contains(&per_group) {
            return Err(refused(format!(
                "Step5 DSA kernels require 4, 8, or 16 local query heads per KV group, got \
                 {per_group} (num_heads={heads}, tp_size={tp})."
            )));
        }
        let gated = hf
            .value("use_head_wise_attn_gate")
            .is_some_and(|(_, v)| v.as_bool() == Some(true));
        if !gated {
            return Err(would_not_start(
                "NotImplementedError: Step5 DSA layers require use_head_wise_attn_gate=true. \
                 (models/step5/nvidia/model.py:1052)",
            ));
        }
        Ok(())
    }

    /// The declarations, each placed on its layers, and how vLLM packs
    /// them: the sliding layers' K/V, the DSA layers' K/V (its block stride
    /// whole 8-token kernel blocks), summary cache and tail ring.
    pub fn specs(
        &self,
        hf: &HfConfig,
        builder: &Builder<'_>,
    ) -> Result<(Vec<KvSpec>, Packing), KvError> {
        let geometry = hf.geometry()?;
        let mut specs = Vec::new();
        let mut kinds = Vec::new();
        let sliding = self.pattern.count(LayerKind::SlidingAttention);
        if let (Some(window), true) = (self.window, sliding > 0) {
            let spec = builder.sliding(geometry.with_layers(sliding), window, hf)?;
            let bucket = PackedBucket::Sliding {
                window,
                block: builder.paging.block_size,
            };
            kinds.push(PackedKind::new(&spec.name, bucket, None));
            specs.push(spec.in_layers(self.pattern.clone(), LayerKind::SlidingAttention));
        }
        let dsa = self.pattern.count(LayerKind::FullAttention);
        if dsa > 0 {
            let block = builder.paging.block_size;
            let main = builder.full(geometry.with_layers(dsa), MAIN, hf)?;
            let summary_geometry =
                Geometry::new(dsa, 1, SUMMARY_BYTES / SUMMARY_REGION, DType::U8).with_v_head_dim(0);
            let summary = builder.as_is(
                "summary_cache",
                format!(
                    "vLLM {VLLM_VERSION} FullAttentionSpec (Step-5's sparse summary cache: \
                     {SUMMARY_BYTES} B per {SUMMARY_REGION}-token region, u8, block {block}; \
                     the KV format does not apply)"
                ),
                summary_geometry,
                main.layout
                    .positions()
                    .cloned()
                    .unwrap_or(Positions::bounded(1, "one")),
            )?;
            let ring_positions = Positions::from_policy(PositionPolicy::PaddedTo {
                count: block,
                multiple: block,
            })
            .map_err(|o| config_error(WHAT, o.step.to_owned()))?;
            let main_geometry = match main.geometry() {
                Some(g) => *g,
                None => return Err(config_error(WHAT, "no K/V geometry".to_owned())),
            };
            let ring = builder.as_is(
                "tail_ring",
                format!(
                    "vLLM {VLLM_VERSION} CircularBufferSpec (Step-5's CSA tail ring: one K/V \
                     page per request, whatever its length)"
                ),
                main_geometry,
                ring_positions,
            )?;
            kinds.push(PackedKind::new(
                &main.name,
                PackedBucket::Full { block },
                Some(Alignment::KernelBlock(SUMMARY_REGION)),
            ));
            kinds.push(PackedKind::new(
                &summary.name,
                PackedBucket::Full { block },
                None,
            ));
            kinds.push(PackedKind::new(
                &ring.name,
                PackedBucket::State,
                Some(Alignment::Bytes(RING_ROW_BYTES)),
            ));
            for spec in [main, summary, ring] {
                specs.push(spec.in_layers(self.pattern.clone(), LayerKind::FullAttention));
            }
        }
        Ok((specs, Packing::new(kinds)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: Value) -> HfConfig {
        let mut config = serde_json::json!({
            "model_type": "step5", "num_hidden_layers": 4, "sliding_window": 64,
        });
        if let (Value::Object(base), Value::Object(extra)) = (&mut config, extra) {
            base.extend(extra);
        }
        HfConfig::from_value(config)
    }

    #[test]
    fn without_a_list_even_layers_slide_and_without_a_window_none() {
        let step5 = read(&config(serde_json::json!({})), 4).unwrap();
        let sliding: Vec<u64> = step5.pattern.indices(LayerKind::SlidingAttention).collect();
        assert_eq!(sliding, [0, 2]);
        let dense = read(&config(serde_json::json!({"sliding_window": null})), 4).unwrap();
        assert_eq!(dense.pattern.count(LayerKind::FullAttention), 4);
        // The most laid out is laid out; one more is refused.
        let most = read(&config(serde_json::json!({})), LAID_OUT_LAYERS_MAX).unwrap();
        assert_eq!(most.pattern.layers(), LAID_OUT_LAYERS_MAX);
        let text = read(&config(serde_json::json!({})), LAID_OUT_LAYERS_MAX + 1)
            .unwrap_err()
            .to_string();
        assert!(text.contains("at most 65536"), "{text}");
    }

    #[test]
    fn the_router_bias_is_required_where_a_dense_layer_is_moe() {
        let moe = |extra: Value, layers| check_moe(&config(extra), layers).is_err();
        // No list: every layer but the first is MoE, so one layer has none.
        assert!(moe(serde_json::json!({}), 2));
        assert!(!moe(serde_json::json!({}), 1));
        // A list, as a string or as numbers; an MTP layer's index is not a
        // dense one.
        assert!(moe(serde_json::json!({"moe_layer_list": [1, 3]}), 4));
        assert!(!moe(serde_json::json!({"moe_layer_list": [4]}), 4));
        assert!(!moe(serde_json::json!({"moe_layers_enum": "4,5"}), 4));
        assert!(moe(serde_json::json!({"moe_layers_enum": "3,4"}), 4));
        assert!(!moe(serde_json::json!({"use_moe_router_bias": true}), 4));
    }

    #[test]
    fn a_bad_list_or_mtp_count_names_the_key() {
        let error = |extra: Value| read(&config(extra), 4).unwrap_err().to_string();
        let text = error(serde_json::json!({"num_nextn_predict_layers": "one"}));
        assert!(
            text.contains("`num_nextn_predict_layers` is \"one\""),
            "{text}"
        );
        let text = error(
            serde_json::json!({"layer_types": ["sliding_attention", "mamba",
            "full_attention", "full_attention"]}),
        );
        assert!(text.contains("`layer_types[1]` is \"mamba\""), "{text}");
        let text = error(serde_json::json!({"layer_types": "SSFF"}));
        assert!(text.contains("not a list of layer kinds"), "{text}");
        // `layer_types_with_mtp` is read before `layer_types`.
        let with_mtp = read(
            &config(serde_json::json!({
                "num_nextn_predict_layers": 1,
                "layer_types_with_mtp": ["full_attention", "sliding_attention",
                    "full_attention", "full_attention", "full_attention"],
            })),
            4,
        )
        .unwrap();
        assert_eq!(
            with_mtp.pattern.kind_of(1),
            Some(LayerKind::SlidingAttention)
        );
    }
}
