//! Kimi Delta Attention (KDA) beside MLA, as vLLM 0.33's Kimi K3 model
//! builds it (models/kimi_k3/nvidia): a layer `i` runs KDA where `i + 1` is
//! in `linear_attn_config.kda_layers` (transformers_utils/configs/
//! kimi_linear.py:157, `is_kda_layer`), MLA elsewhere. A KDA layer's state
//! is a Gated DeltaNet's with as many key heads as value heads
//! (`kda_state_shape`, mamba_utils.py:296): conv `(K - 1 + spec, 3 x H x D)`
//! in the model dtype, recurrent `(H, D, D)` in float32 (`kda_state_dtype`
//! with vLLM's `--mamba-ssm-cache-dtype auto`; no config key moves it).

use kv_core::pattern::{LayerKind, LayerPattern};
use kv_core::{DType, HfConfig, KvError};
use serde_json::Value;

use super::settings::config_error;

/// What refusals here are about (`KvError::Config`'s `what`).
const WHAT: &str = "KDA layers";

/// The most layers laid out one by one from a list of layer numbers: the
/// pattern holds one entry a layer, so a layer count past any model's is
/// refused rather than allocated.
pub(crate) const LAID_OUT_LAYERS_MAX: u64 = 1 << 16;

/// A Kimi model's KDA layers and their state's dimensions.
#[derive(Clone, Debug)]
pub(super) struct Kda {
    /// KDA layers as [`LayerKind::LinearAttention`], MLA layers as
    /// [`LayerKind::FullAttention`].
    pub pattern: LayerPattern,
    /// `linear_attn_config.num_heads`.
    pub heads: u64,
    /// `linear_attn_config.head_dim`.
    pub head_dim: u64,
    /// `linear_attn_config.short_conv_kernel_size`.
    pub conv_kernel: u64,
    /// The recurrent state's dtype: float32.
    pub recurrent_dtype: DType,
    /// Whether FlashKDA runs the prefill on Hopper, and so exports a prefill
    /// checkpoint page (kda.py:363 `is_flashkda_supported`, :901).
    pub flashkda: bool,
}

/// The KDA layers of a Kimi or BailingMoeV3 config over its `layers`,
/// `None` where a Kimi config's `linear_attn_config` is absent or null
/// (every layer MLA). The model dtype decides FlashKDA. What vLLM refuses,
/// or kv has not checked, is an error naming the key.
pub(super) fn read(hf: &HfConfig, layers: u64, model_dtype: DType) -> Result<Option<Kda>, KvError> {
    if layers > LAID_OUT_LAYERS_MAX {
        return Err(config_error(
            WHAT,
            format!("{layers} layers: kv lays out at most {LAID_OUT_LAYERS_MAX} one by one"),
        ));
    }
    if hf.model_types().contains(&"bailing_hybrid") {
        return bailing(hf, layers).map(Some);
    }
    kimi(hf, layers, model_dtype)
}

/// BailingMoeV3 (vLLM 0.33 model_executor/models/bailing_moe_v3.py:131,
/// `_is_kda_layer`): MLA in every `layer_group_size`-th layer and in the
/// tail past the last whole group, KDA elsewhere, with the attention's own
/// heads (`num_attention_heads` of `head_dim`) and `short_conv_kernel_size`;
/// its KDA never runs FlashKDA, so exports no checkpoint.
fn bailing(hf: &HfConfig, layers: u64) -> Result<Kda, KvError> {
    let count = |key: &str| -> Result<u64, KvError> {
        hf.count_if_set(WHAT, key)?
            .map(|(_, n)| n)
            .ok_or_else(|| config_error(WHAT, format!("`{key}` is not set; give it")))
    };
    let group = count("layer_group_size")?;
    let whole = layers / group * group;
    let kinds = (0..layers)
        .map(|i| {
            if (i + 1).is_multiple_of(group) || i >= whole {
                LayerKind::FullAttention
            } else {
                LayerKind::LinearAttention
            }
        })
        .collect();
    let pattern = LayerPattern::from_kinds(kinds, "layer_group_size")
        .map_err(|e| config_error(WHAT, format!("`layer_group_size`: {e}")))?;
    Ok(Kda {
        pattern,
        heads: count("num_attention_heads")?,
        head_dim: count("head_dim")?,
        conv_kernel: count("short_conv_kernel_size")?,
        recurrent_dtype: DType::F32,
        flashkda: false,
    })
}

/// Kimi K3 (and the Kimi-Linear configs its class serves): the layers
/// `linear_attn_config.kda_layers` lists, 1-based.
fn kimi(hf: &HfConfig, layers: u64, model_dtype: DType) -> Result<Option<Kda>, KvError> {
    let Some((section, config)) = hf.value("linear_attn_config") else {
        return Ok(None);
    };
    let Value::Object(config) = config else {
        return Err(config_error(
            WHAT,
            format!("`{section}` is {config}, not an object"),
        ));
    };
    let key = |name: &str| format!("{section}.{name}");
    let count = |name: &str| -> Result<u64, KvError> {
        match config.get(name) {
            Some(value) => value.as_u64().filter(|n| *n > 0).ok_or_else(|| {
                config_error(
                    WHAT,
                    format!("`{}` is {value}, not a positive count", key(name)),
                )
            }),
            None => Err(config_error(
                WHAT,
                format!("`{}` is not set; give it", key(name)),
            )),
        }
    };
    // Standalone Kimi-Linear's KDA (without the full-rank gate) is another
    // class, whose pages kv has not checked.
    if config.get("use_full_rank_gate").and_then(Value::as_bool) != Some(true) {
        return Err(config_error(
            WHAT,
            format!(
                "`{}` is not true: vLLM runs these layers with Kimi-Linear's \
                 KimiGatedDeltaNetAttention, whose pages kv has not checked (it has checked \
                 Kimi K3's full-rank-gate KDA)",
                key("use_full_rank_gate")
            ),
        ));
    }
    let Some(Value::Array(numbers)) = config.get("kda_layers") else {
        return Err(config_error(
            WHAT,
            format!("`{}` is not a list of layer numbers", key("kda_layers")),
        ));
    };
    let mut kinds = vec![LayerKind::FullAttention; layers as usize];
    for (index, number) in numbers.iter().enumerate() {
        let number = number.as_u64().ok_or_else(|| {
            config_error(
                WHAT,
                format!(
                    "`{}[{index}]` is {number}, not a layer number",
                    key("kda_layers")
                ),
            )
        })?;
        // 1-based; vLLM asks `i + 1 in kda_layers`, so a number past the
        // layers marks none, as here.
        if let Some(kind) = number
            .checked_sub(1)
            .and_then(|i| kinds.get_mut(usize::try_from(i).ok()?))
        {
            *kind = LayerKind::LinearAttention;
        }
    }
    let pattern = LayerPattern::from_kinds(kinds, "linear_attn_config.kda_layers")
        .map_err(|e| config_error(WHAT, format!("`{}`: {e}", key("kda_layers"))))?;
    let head_dim = count("head_dim")?;
    let gate_bounded = config
        .get("gate_lower_bound")
        .is_some_and(|bound| !bound.is_null());
    Ok(Some(Kda {
        pattern,
        heads: count("num_heads")?,
        head_dim,
        conv_kernel: count("short_conv_kernel_size")?,
        recurrent_dtype: DType::F32,
        flashkda: head_dim == 128 && model_dtype == DType::BF16 && gate_bounded,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kimi(linear: Value) -> HfConfig {
        HfConfig::from_value(serde_json::json!({
            "model_type": "kimi_linear", "linear_attn_config": linear,
        }))
    }

    fn linear() -> Value {
        serde_json::json!({
            "kda_layers": [1, 2, 3, 5, 9], "num_heads": 8, "head_dim": 128,
            "short_conv_kernel_size": 4, "use_full_rank_gate": true, "gate_lower_bound": -5.0,
        })
    }

    #[test]
    fn kda_layers_are_one_based_and_numbers_past_the_model_mark_none() {
        let kda = read(&kimi(linear()), 4, DType::BF16).unwrap().unwrap();
        assert_eq!(kda.pattern.count(LayerKind::LinearAttention), 3);
        assert_eq!(kda.pattern.count(LayerKind::FullAttention), 1);
        assert_eq!(kda.pattern.kind_of(3), Some(LayerKind::FullAttention));
        assert_eq!((kda.heads, kda.head_dim, kda.conv_kernel), (8, 128, 4));
        assert_eq!(kda.recurrent_dtype, DType::F32);
        assert!(kda.flashkda);
        // FlashKDA needs bf16 activations, a 128-wide head and a bounded gate.
        assert!(
            !read(&kimi(linear()), 4, DType::F16)
                .unwrap()
                .unwrap()
                .flashkda
        );
        let mut unbounded = linear();
        unbounded["gate_lower_bound"] = Value::Null;
        assert!(
            !read(&kimi(unbounded), 4, DType::BF16)
                .unwrap()
                .unwrap()
                .flashkda
        );
        let mut narrow = linear();
        narrow["head_dim"] = serde_json::json!(64);
        assert!(
            !read(&kimi(narrow), 4, DType::BF16)
                .unwrap()
                .unwrap()
                .flashkda
        );
        assert!(
            read(&HfConfig::from_value(serde_json::json!({})), 4, DType::BF16)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn bailing_keeps_mla_every_group_and_in_the_tail() {
        // 12 layers in groups of 5: MLA at 4 and 9 (each group's last) and
        // at 10 and 11 (past the last whole group); KDA in the other 8.
        let config = HfConfig::from_value(serde_json::json!({
            "model_type": "bailing_hybrid", "layer_group_size": 5, "num_attention_heads": 16,
            "head_dim": 128, "short_conv_kernel_size": 4,
        }));
        let kda = read(&config, 12, DType::BF16).unwrap().unwrap();
        let mla: Vec<u64> = kda.pattern.indices(LayerKind::FullAttention).collect();
        assert_eq!(mla, [4, 9, 10, 11]);
        assert_eq!((kda.heads, kda.head_dim, kda.conv_kernel), (16, 128, 4));
        assert!(!kda.flashkda);
        let zero = HfConfig::from_value(serde_json::json!({
            "model_type": "bailing_hybrid", "layer_group_size": 0,
        }));
        let text = read(&zero, 12, DType::BF16).unwrap_err().to_string();
        assert!(text.contains("layer_group_size"), "{text}");
    }

    #[test]
    fn what_vllm_refuses_or_kv_has_not_checked_names_the_key() {
        let error = |linear: Value, layers: u64| {
            read(&kimi(linear), layers, DType::BF16)
                .unwrap_err()
                .to_string()
        };
        let mut gate = linear();
        gate["use_full_rank_gate"] = serde_json::json!(false);
        assert!(error(gate, 4).contains("`linear_attn_config.use_full_rank_gate` is not true"));
        assert!(error(linear(), LAID_OUT_LAYERS_MAX + 1).contains("at most 65536"));
        // The most laid out is laid out.
        let most = read(&kimi(linear()), LAID_OUT_LAYERS_MAX, DType::BF16).unwrap();
        assert_eq!(most.unwrap().pattern.layers(), LAID_OUT_LAYERS_MAX);
        let mut bad = linear();
        bad["kda_layers"] = serde_json::json!([1, "two"]);
        assert!(error(bad, 4).contains("`linear_attn_config.kda_layers[1]` is \"two\""));
        let mut heads = linear();
        heads["num_heads"] = serde_json::json!(0);
        assert!(error(heads, 4).contains("`linear_attn_config.num_heads` is 0"));
        assert!(error(serde_json::json!(3), 4).contains("`linear_attn_config` is 3"));
    }
}
