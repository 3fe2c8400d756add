//! Inkling, as vLLM 0.33's model builds it (`models/inkling/nvidia`): a
//! layer is local (sliding) where its index is in `local_layer_ids`
//! (`model.py:282`; vLLM's own `InklingModelConfig` reads no `layer_types`,
//! and an absent or null list makes every layer global), and every layer
//! keeps two caches: its attention's, and an `InklingConvState`, the short
//! convolutions' state (K, V, attention output and MLP output streams
//! packed in one head, `sconv_swa_attn.py:121`), paged as a sliding window
//! whose window and block are both the kernel.

use kv_core::pattern::{LayerKind, LayerPattern};
use kv_core::{DType, Geometry, HfConfig, KvError, KvSpec};
use serde_json::Value;

use super::kda::LAID_OUT_LAYERS_MAX;
use super::model_class::would_not_start;
use super::settings::{config_error, EstimateSettings, VLLM_VERSION};
use super::vllm::Builder;

/// What refusals here are about (`KvError::Config`'s `what`).
const WHAT: &str = "Inkling layers";
/// `InklingModelConfig` defaults (`models/inkling/configs.py`).
const DEFAULT_WINDOW: u64 = 512;
const DEFAULT_KERNEL: u64 = 4;
/// The widest head kv has checked Inkling's FlashAttention pages on.
const WIDEST_CHECKED_HEAD: u64 = 256;
/// FlashAttention's kernel blocks are multiples of 16.
const KERNEL_BLOCK: u64 = 16;

/// One kind of Inkling layer: its attention's heads and its conv state's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct InklingLayer {
    /// Query heads (`num_attention_heads`, `swa_num_attention_heads`).
    pub heads: u64,
    /// KV heads (`num_key_value_heads`, `swa_num_key_value_heads`): the
    /// attention's and the conv state's.
    pub kv_heads: u64,
    /// `head_dim`, `swa_head_dim`.
    pub head_dim: u64,
    /// The conv state's packed head: `2 x head_dim + 2 x (hidden_size //
    /// kv_heads)`, up to a power of two (`sconv_swa_attn.py:151-157`).
    pub conv_head: u64,
}

/// An Inkling config, as vLLM reads it.
#[derive(Clone, Debug)]
pub(super) struct Inkling {
    /// Local layers as [`LayerKind::SlidingAttention`], global ones as
    /// [`LayerKind::FullAttention`].
    pub pattern: LayerPattern,
    pub global: InklingLayer,
    pub local: InklingLayer,
    /// `sliding_window_size`.
    pub window: u64,
    /// `sconv_kernel_size`, else `conv_kernel_size`, else 4.
    pub kernel: u64,
    /// Where each value came from, in words.
    pub said: String,
    /// The assertion `InklingMoE` fails on this config, where a layer is
    /// MoE (`dense_mlp_idx` and beyond) and the config is not the served
    /// checkpoint's kind (`models/inkling/nvidia/moe.py:420-422`).
    pub moe_assertion: Option<String>,
}

/// The Inkling config of `hf` over its `layers`. A key vLLM would not read
/// as a count, or a local layer id that is not one of the model's layers,
/// is an error naming it.
pub(super) fn read(hf: &HfConfig, layers: u64) -> Result<Inkling, KvError> {
    if layers > LAID_OUT_LAYERS_MAX {
        return Err(config_error(
            WHAT,
            format!("{layers} layers: kv lays out at most {LAID_OUT_LAYERS_MAX} one by one"),
        ));
    }
    let mut said = Vec::new();
    let mut count = |keys: &[&str], default: Option<u64>| -> Result<u64, KvError> {
        for key in keys {
            if let Some((name, n)) = hf.count_if_set(WHAT, key)? {
                said.push(format!("`{name}` {n}"));
                return Ok(n);
            }
        }
        default.ok_or_else(|| config_error(WHAT, format!("`{}` is not set; give it", keys[0])))
    };
    let hidden = count(&["hidden_size"], None)?;
    let heads = count(&["num_attention_heads"], None)?;
    let kv_heads = count(&["num_key_value_heads"], None)?;
    let head_dim = count(&["head_dim"], Some(hidden / heads))?;
    let swa_heads = count(&["swa_num_attention_heads"], Some(heads))?;
    let swa_kv_heads = count(&["swa_num_key_value_heads"], Some(kv_heads))?;
    let swa_head_dim = count(&["swa_head_dim"], Some(head_dim))?;
    let window = count(&["sliding_window_size"], Some(DEFAULT_WINDOW))?;
    let kernel = count(
        &["sconv_kernel_size", "conv_kernel_size"],
        Some(DEFAULT_KERNEL),
    )?;
    if head_dim == 0 {
        return Err(config_error(
            WHAT,
            format!(
                "`hidden_size` {hidden} // `num_attention_heads` {heads} is 0, and no \
                 `head_dim` is set; give `head_dim`"
            ),
        ));
    }
    let global = layer(heads, kv_heads, head_dim, hidden)?;
    let local = layer(swa_heads, swa_kv_heads, swa_head_dim, hidden)?;
    let pattern = local_layers(hf, layers)?;
    Ok(Inkling {
        pattern,
        global,
        local,
        window,
        kernel,
        said: said.join(", "),
        moe_assertion: moe_assertion(hf, layers),
    })
}

/// `InklingMoE.__init__`'s assertions ("overfit to the served checkpoint"),
/// each with `InklingModelConfig`'s default where the key is unset: the
/// first that fails, where any layer is MoE.
fn moe_assertion(hf: &HfConfig, layers: u64) -> Option<String> {
    let dense = hf
        .value("dense_mlp_idx")
        .and_then(|(_, v)| v.as_u64())
        .unwrap_or(0);
    if dense >= layers {
        return None;
    }
    let flag = |key: &str, default: bool| {
        hf.value(key)
            .map_or(default, |(_, v)| v.as_bool().unwrap_or(default))
    };
    let sigmoid = hf
        .value("gate_activation")
        .is_none_or(|(_, v)| v.as_str() == Some("sigmoid"));
    let shared = hf
        .value("n_shared_experts")
        .and_then(|(_, v)| v.as_u64())
        .unwrap_or(0);
    let failed = if !(sigmoid && flag("norm_after_topk", true)) {
        "assert config.gate_activation == \"sigmoid\" and config.norm_after_topk"
    } else if !(shared > 0 && flag("shared_expert_sink", false)) {
        "assert config.n_shared_experts > 0 and config.shared_expert_sink"
    } else if !flag("inference_moe_w13_interleaved", true) {
        "assert config.inference_moe_w13_interleaved"
    } else {
        return None;
    };
    Some(format!(
        "AssertionError at models/inkling/nvidia/moe.py:420: {failed} (InklingMoE, built for \
         layers from `dense_mlp_idx` {dense} on, takes only the served checkpoint's kind of MoE)"
    ))
}

fn layer(heads: u64, kv_heads: u64, head_dim: u64, hidden: u64) -> Result<InklingLayer, KvError> {
    let raw = head_dim
        .checked_mul(2)
        .and_then(|k_v| k_v.checked_add((hidden / kv_heads).checked_mul(2)?))
        .and_then(u64::checked_next_power_of_two)
        .ok_or_else(|| {
            config_error(
                WHAT,
                format!(
                    "the conv state's head (2 x {head_dim} + 2 x ({hidden} // {kv_heads}), up \
                     to a power of two) overflows u64"
                ),
            )
        })?;
    Ok(InklingLayer {
        heads,
        kv_heads,
        head_dim,
        conv_head: raw,
    })
}

/// The local layers: `local_layer_ids`, absent or null for none.
fn local_layers(hf: &HfConfig, layers: u64) -> Result<LayerPattern, KvError> {
    // Bounded by LAID_OUT_LAYERS_MAX above.
    let mut kinds = vec![LayerKind::FullAttention; usize::try_from(layers).unwrap_or(0)];
    if let Some((name, ids)) = hf.value("local_layer_ids") {
        let Value::Array(ids) = ids else {
            return Err(config_error(
                WHAT,
                format!("`{name}` is {ids}, not a list of layer ids"),
            ));
        };
        for (index, id) in ids.iter().enumerate() {
            let slot = id
                .as_u64()
                .and_then(|id| kinds.get_mut(usize::try_from(id).ok()?));
            let Some(slot) = slot else {
                return Err(config_error(
                    WHAT,
                    format!("`{name}[{index}]` is {id}, not a layer id below {layers}"),
                ));
            };
            *slot = LayerKind::SlidingAttention;
        }
    }
    LayerPattern::from_kinds(kinds, "local_layer_ids")
        .map_err(|e| config_error(WHAT, format!("`local_layer_ids`: {e}")))
}

impl Inkling {
    /// The kinds present, in the order of their first layer: vLLM builds
    /// (and asserts) layer 0 first.
    fn kinds(&self) -> Vec<(LayerKind, InklingLayer)> {
        let mut kinds: Vec<(LayerKind, InklingLayer)> = Vec::new();
        for kind in self.pattern.kinds() {
            if kinds.iter().all(|(k, _)| *k != kind) {
                let layer = match kind {
                    LayerKind::SlidingAttention => self.local,
                    _ => self.global,
                };
                kinds.push((kind, layer));
            }
        }
        kinds
    }

    /// What vLLM 0.33 asserts while building the layers (conv state first,
    /// then attention, `model.py:140`), and what kv has not checked.
    pub fn check(&self, settings: &EstimateSettings, model_dtype: DType) -> Result<(), KvError> {
        let engine = &settings.engine;
        if engine.decode_context_parallel > 1 {
            return Err(config_error(
                "estimate settings",
                format!(
                    "decode context parallelism {} on Inkling: kv has not checked how vLLM \
                     {VLLM_VERSION} shards its conv state; use dcp 1",
                    engine.decode_context_parallel
                ),
            ));
        }
        if engine.speculative_tokens > 0 {
            return Err(config_error(
                "estimate settings",
                format!(
                    "{} speculative tokens on Inkling: kv has not checked the caches of its \
                     MTP draft layers in vLLM {VLLM_VERSION}; give no speculative tokens",
                    engine.speculative_tokens
                ),
            ));
        }
        if settings.block_size_given && !settings.block_size.is_multiple_of(KERNEL_BLOCK) {
            return Err(KvError::Config {
                what: "block_size",
                problem: format!(
                    "a block of {} on Inkling: vLLM {VLLM_VERSION} builds it (Inkling pins its \
                     backends, so the selector that refuses such a block elsewhere does not \
                     run), but kv has not checked that FlashAttention runs the attention blocks \
                     that leaves; give a multiple of {KERNEL_BLOCK}, or no --block-size",
                    settings.block_size
                ),
            });
        }
        let widest = self.global.head_dim.max(self.local.head_dim);
        if widest > WIDEST_CHECKED_HEAD {
            return Err(config_error(
                WHAT,
                format!(
                    "a head of {widest}: kv has checked Inkling's FlashAttention pages for \
                     heads up to {WIDEST_CHECKED_HEAD} only"
                ),
            ));
        }
        if !settings.vllm_serves {
            return Ok(());
        }
        let refused = would_not_start;
        if model_dtype != DType::BF16 {
            return Err(refused(format!(
                "AssertionError: sconv SWA cache supports bfloat16 only, got {} \
                 (models/inkling/nvidia/sconv_swa_attn.py:170: the conv state is kept in \
                 the model dtype)",
                torch_name(model_dtype)
            )));
        }
        let tp = engine.tensor_parallel;
        for (kind, layer) in self.kinds() {
            if tp > layer.kv_heads {
                return Err(refused(format!(
                    "AssertionError: sconv SWA cache supports tp_size <= num_kv_heads ({}), \
                     got {tp} (models/inkling/nvidia/sconv_swa_attn.py:142, the {kind} \
                     layers' conv state: it keeps at least one whole KV head a rank)",
                    layer.kv_heads
                )));
            }
            for (what, count) in [("query", layer.heads), ("KV", layer.kv_heads)] {
                if !count.is_multiple_of(tp) {
                    return Err(refused(format!(
                        "AssertionError at models/inkling/nvidia/attention.py:97: the {kind} \
                         layers' {count} {what} heads are not divisible by tensor parallel \
                         {tp}"
                    )));
                }
            }
        }
        if let Some(assertion) = self.moe_assertion.as_deref() {
            return Err(refused(assertion.to_owned()));
        }
        Ok(())
    }

    /// The declarations: each kind's attention, and the conv state, one
    /// declaration where every layer's is the same spec (vLLM groups equal
    /// specs together), else one per kind; each placed on its layers.
    pub fn specs(
        &self,
        hf: &HfConfig,
        builder: &Builder<'_>,
        model_dtype: DType,
    ) -> Result<Vec<KvSpec>, KvError> {
        let kinds = self.kinds();
        let conv = |layer: &InklingLayer, layers: u64| {
            Geometry::new(layers, layer.kv_heads, layer.conv_head, model_dtype).with_v_head_dim(0)
        };
        let mut specs = Vec::new();
        let one_conv = kinds.iter().all(|(_, layer)| {
            (layer.kv_heads, layer.conv_head) == (kinds[0].1.kv_heads, kinds[0].1.conv_head)
        });
        if one_conv {
            let layers = self.pattern.layers();
            let every = LayerPattern::from_kinds(
                vec![LayerKind::FullAttention; usize::try_from(layers).unwrap_or(0)],
                "every layer",
            )
            .map_err(|e| config_error(WHAT, e.to_string()))?;
            let spec = builder.conv_state("conv_state", conv(&kinds[0].1, layers), self.kernel)?;
            specs.push(spec.in_layers(every, LayerKind::FullAttention));
        }
        for (kind, layer) in &kinds {
            let layers = self.pattern.count(*kind);
            let attention = Geometry::new(layers, layer.kv_heads, layer.head_dim, model_dtype);
            let (spec, conv_name) = match kind {
                LayerKind::SlidingAttention => (
                    builder.sliding(attention, self.window, hf)?,
                    "local_conv_state",
                ),
                _ => (
                    builder.full(attention, "full_attention", hf)?,
                    "global_conv_state",
                ),
            };
            if !one_conv {
                let state = builder.conv_state(conv_name, conv(layer, layers), self.kernel)?;
                specs.push(state.in_layers(self.pattern.clone(), *kind));
            }
            specs.push(spec.in_layers(self.pattern.clone(), *kind));
        }
        Ok(specs)
    }
}

/// A dtype as vLLM's assertion prints it.
fn torch_name(dtype: DType) -> String {
    match dtype {
        DType::F16 => "torch.float16".to_owned(),
        DType::F32 => "torch.float32".to_owned(),
        DType::BF16 => "torch.bfloat16".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: Value) -> HfConfig {
        let mut config = serde_json::json!({
            "model_type": "inkling_text", "hidden_size": 6144, "num_attention_heads": 64,
            "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 6,
        });
        if let (Value::Object(base), Value::Object(extra)) = (&mut config, extra) {
            base.extend(extra);
        }
        HfConfig::from_value(config)
    }

    #[test]
    fn local_layer_ids_mark_the_sliding_layers_and_null_marks_none() {
        let inkling = read(
            &config(
                serde_json::json!({"local_layer_ids": [0, 2, 3], "swa_num_key_value_heads": 16}),
            ),
            6,
        )
        .unwrap();
        let local: Vec<u64> = inkling
            .pattern
            .indices(LayerKind::SlidingAttention)
            .collect();
        assert_eq!(local, [0, 2, 3]);
        // 2 x 128 + 2 x (6,144 // 8) = 1,792, up to 2,048; with 16 heads
        // 256 + 768 = 1,024, a power of two already.
        assert_eq!(inkling.global.conv_head, 2048);
        assert_eq!(inkling.local.conv_head, 1024);
        assert_eq!((inkling.window, inkling.kernel), (512, 4));
        assert_eq!(inkling.local.heads, 64);
        // No `head_dim`: hidden // heads, 6,144 // 48 = 128.
        let derived = HfConfig::from_value(serde_json::json!({
            "model_type": "inkling_text", "hidden_size": 6144, "num_attention_heads": 48,
            "num_key_value_heads": 8,
        }));
        let derived = read(&derived, 6).unwrap();
        assert_eq!(
            (derived.global.head_dim, derived.local.head_dim),
            (128, 128)
        );
        let none = read(&config(serde_json::json!({"local_layer_ids": null})), 6).unwrap();
        assert_eq!(none.pattern.count(LayerKind::FullAttention), 6);
        let kernel = read(&config(serde_json::json!({"conv_kernel_size": 3})), 6).unwrap();
        assert_eq!(kernel.kernel, 3);
        let own = read(
            &config(serde_json::json!({"conv_kernel_size": 3, "sconv_kernel_size": 5})),
            6,
        )
        .unwrap();
        assert_eq!(own.kernel, 5);
    }

    #[test]
    fn a_bad_local_layer_id_names_the_key() {
        let error = |ids: Value| {
            read(&config(serde_json::json!({"local_layer_ids": ids})), 6)
                .unwrap_err()
                .to_string()
        };
        assert!(error(serde_json::json!([0, 6]))
            .contains("`local_layer_ids[1]` is 6, not a layer id below 6"));
        assert!(error(serde_json::json!([-1])).contains("`local_layer_ids[0]` is -1"));
        assert!(error(serde_json::json!("0,1")).contains("not a list of layer ids"));
        let wide = read(&config(serde_json::json!({})), LAID_OUT_LAYERS_MAX + 1).unwrap_err();
        assert!(wide.to_string().contains("at most 65536"));
        // The most laid out is laid out.
        let most = read(&config(serde_json::json!({})), LAID_OUT_LAYERS_MAX).unwrap();
        assert_eq!(most.pattern.layers(), LAID_OUT_LAYERS_MAX);
        let zero = read(&config(serde_json::json!({"sliding_window_size": 0})), 6).unwrap_err();
        assert!(zero.to_string().contains("sliding_window_size"), "{zero}");
    }
}
