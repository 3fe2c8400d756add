//! What both engines build beside the weights for rotary positions, read
//! from a config's text section.

use serde_json::Value;

/// The elements of the one `[max_position_embeddings, head_dim]`
/// `cos_sin_cache` both engines build (layers/rotary_embedding/base.py in
/// each; shared by every layer, as `get_rope` caches it), for the rotary
/// kinds kv has checked: `default` and `llama3`, the full head rotated.
pub(crate) fn rotary_table_elements(text: &Value) -> Result<u64, String> {
    let (positions, dim) = rotary_table_shape(text)?;
    positions
        .checked_mul(dim)
        .ok_or_else(|| "the rotary table's elements overflow u64".to_owned())
}

/// `[max_position_embeddings, head_dim]`, for the rotary kinds kv has
/// checked.
pub(crate) fn rotary_table_shape(text: &Value) -> Result<(u64, u64), String> {
    let scaling = text
        .get("rope_scaling")
        .filter(|v| !v.is_null())
        .or_else(|| text.get("rope_parameters").filter(|v| !v.is_null()));
    let rope_type = scaling
        .and_then(|s| s.get("rope_type").or_else(|| s.get("type")))
        .and_then(Value::as_str)
        .unwrap_or("default");
    if !matches!(rope_type, "default" | "llama3") {
        return Err(format!(
            "kv has not checked the rotary table the engine builds for rope_type `{rope_type}`"
        ));
    }
    let factor = text
        .get("partial_rotary_factor")
        .or_else(|| scaling.and_then(|s| s.get("partial_rotary_factor")))
        .and_then(Value::as_f64)
        .unwrap_or(1.0);
    if factor != 1.0 {
        return Err(format!(
            "kv has not checked the rotary table the engine builds for a partial_rotary_factor \
             of {factor}"
        ));
    }
    let count = |key: &str| {
        text.get(key).and_then(Value::as_u64).ok_or_else(|| {
            format!(
                "the config has no `{key}` (kv does not supply the config class's defaults for \
                 the rotary table)"
            )
        })
    };
    let positions = count("max_position_embeddings")?;
    let head_dim = match text.get("head_dim").and_then(Value::as_u64) {
        Some(d) => d,
        None => {
            let heads = count("num_attention_heads")?;
            count("hidden_size")?
                .checked_div(heads)
                .ok_or("`num_attention_heads` is 0")?
        }
    };
    Ok((positions, head_dim))
}

/// `[positions, qk_rope_head_dim]`: the one table vLLM's multi-head latent
/// attention builds (DeepSeek-V2/V3, `DeepseekV2MLAAttention`): only the
/// rope part of each head is rotated. With `rope_type` `default` it holds
/// `max_position_embeddings` rows; with `yarn` (which the model renames
/// `deepseek_yarn`) `DeepseekScalingRotaryEmbedding` holds
/// `original_max_position_embeddings x factor` rows
/// (`torch.arange(float)`: rounded up).
pub(crate) fn mla_rotary_table_shape(text: &Value) -> Result<(u64, u64), String> {
    let scaling = text
        .get("rope_scaling")
        .filter(|v| !v.is_null())
        .or_else(|| text.get("rope_parameters").filter(|v| !v.is_null()));
    let rope_type = scaling
        .and_then(|s| s.get("rope_type").or_else(|| s.get("type")))
        .and_then(Value::as_str)
        .unwrap_or("default");
    let count = |from: &Value, key: &str| {
        from.get(key)
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("the config has no `{key}` for the rotary table"))
    };
    let dim = count(text, "qk_rope_head_dim")?;
    let positions = match (rope_type, scaling) {
        ("default", _) => count(text, "max_position_embeddings")?,
        ("yarn" | "deepseek_yarn", Some(scaling))
            // `deepseek_llama_scaling` instead: a table kv has not checked.
            if scaling.get("attention_factor").and_then(Value::as_f64) != Some(1.0) =>
        {
            let original = count(scaling, "original_max_position_embeddings")?;
            let factor = scaling
                .get("factor")
                .and_then(Value::as_f64)
                .filter(|f| f.is_finite() && *f > 0.0)
                .ok_or("the rope scaling has no positive `factor`")?;
            scaled_positions(original, factor)?
        }
        _ => {
            return Err(format!(
                "kv has not checked the rotary table vLLM's latent attention builds for \
                 rope_type `{rope_type}`"
            ))
        }
    };
    Ok((positions, dim))
}

/// `len(torch.arange(original * factor))`: the product in doubles, rounded
/// up; refused past what a double holds exactly.
fn scaled_positions(original: u64, factor: f64) -> Result<u64, String> {
    let product = original as f64 * factor;
    if original >= 1 << 53 || product >= (1u64 << 53) as f64 {
        return Err(format!(
            "the rotary table's {original} x {factor} positions are beyond what a double holds \
             exactly"
        ));
    }
    Ok(product.ceil() as u64)
}
