//! What both engines build beside the weights for rotary positions, read
//! from a config's text section.

use serde_json::Value;

/// `[max_position_embeddings, rotary_dim]`: the one `cos_sin_cache` both
/// engines build (layers/rotary_embedding/base.py in each; shared by every
/// layer, as `get_rope` caches it), for the rotary kinds kv has checked:
/// `default` and `llama3` ([`rotary_dim`]).
pub(crate) fn rotary_table_shape(text: &Value) -> Result<(u64, u64), String> {
    rotary_table_shape_or(text, 1.0)
}

/// [`rotary_table_shape`], rotating `default_factor` of each head where the
/// config names no partial factor (GLM-4.5's attention `setdefault`s 0.5).
pub(crate) fn rotary_table_shape_or(
    text: &Value,
    default_factor: f64,
) -> Result<(u64, u64), String> {
    let scaling = rope_section(text);
    let rope_type = rope_type(scaling);
    if !matches!(rope_type, "default" | "llama3") {
        return Err(format!(
            "kv has not checked the rotary table the engine builds for rope_type `{rope_type}`"
        ));
    }
    Ok((max_positions(text)?, rotary_dim_or(text, default_factor)?))
}

/// `max_position_embeddings`: the rows of an unscaled table.
pub(crate) fn max_positions(text: &Value) -> Result<u64, String> {
    text.get("max_position_embeddings")
        .and_then(Value::as_u64)
        .ok_or_else(|| {
            "the config has no `max_position_embeddings` (kv does not supply the config \
             class's defaults for the rotary table)"
                .to_owned()
        })
}

/// The one table of [`rotary_table_shape`]'s kinds, of `yarn`, which both
/// engines build alike (`YaRNScalingRotaryEmbedding`:
/// `original_max_position_embeddings x factor` rows, the original count
/// read from the rope section, else `max_position_embeddings` as
/// transformers reads it), and of `longrope`
/// (`Phi3LongRoPEScaledRotaryEmbedding`: its short and long caches end to
/// end, [`longrope_positions`] rows).
pub(crate) fn scaled_rotary_table_shape(text: &Value) -> Result<(u64, u64), String> {
    let scaling = rope_section(text);
    match rope_type(scaling) {
        "yarn" => {}
        "longrope" => return Ok((longrope_positions(text)?, rotary_dim(text)?)),
        _ => return rotary_table_shape(text),
    }
    let scaling = scaling.ok_or("a yarn rope with no rope section")?;
    if scaling.get("mrope_section").is_some() {
        // MRotaryEmbedding's table instead.
        return Err(
            "kv has not checked the rotary table the engine builds for a yarn rope with an \
                    `mrope_section`"
                .into(),
        );
    }
    let original = scaling
        .get("original_max_position_embeddings")
        .or_else(|| text.get("max_position_embeddings"))
        .and_then(Value::as_u64)
        .ok_or("the config has no `original_max_position_embeddings` for the yarn table")?;
    let rows = scaled_positions(original, positive_factor(scaling)?)?;
    Ok((rows, rotary_dim(text)?))
}

/// The rows of LongRoPE's short and long caches together:
/// `original_max_position_embeddings` (read from the rope section, else
/// the top level, where published configs put it) plus
/// `max_position_embeddings`.
pub(crate) fn longrope_positions(text: &Value) -> Result<u64, String> {
    let original = rope_section(text)
        .and_then(|s| s.get("original_max_position_embeddings"))
        .or_else(|| text.get("original_max_position_embeddings"))
        .and_then(Value::as_u64)
        .ok_or("the config has no `original_max_position_embeddings` for the longrope caches")?;
    original
        .checked_add(max_positions(text)?)
        .ok_or_else(|| "the longrope caches' rows overflow u64".to_owned())
}

/// MiniCPM3's one table (minicpm3.py in both engines): it rotates only the
/// rope part of each latent head, `[rows, qk_rope_head_dim]`, the rows as
/// [`scaled_rotary_table_shape`] counts them. The published config names
/// no `head_dim`, so `hidden_size / num_attention_heads` would be twice
/// too wide.
pub(crate) fn minicpm3_table_shape(text: &Value) -> Result<(u64, u64), String> {
    let (rows, _) = scaled_rotary_table_shape(text)?;
    let dim = text
        .get("qk_rope_head_dim")
        .and_then(Value::as_u64)
        .ok_or("the config has no `qk_rope_head_dim` for the rotary table")?;
    Ok((rows, dim))
}

/// The elements of each `inv_freq` buffer transformers' rotary module
/// keeps (vLLM's Transformers backend holds the Hugging Face model):
/// `arange(0, dim, 2)` for every rope type transformers computes that way
/// (`modeling_rope_utils.py`: default, linear, dynamic, yarn, longrope,
/// llama3), half the rotary dim rounded up.
pub(crate) fn inv_freq_elements(text: &Value) -> Result<u64, String> {
    let rope_type = rope_type(rope_section(text));
    if !matches!(
        rope_type,
        "default" | "linear" | "dynamic" | "yarn" | "longrope" | "llama3"
    ) {
        return Err(format!(
            "kv has not checked the rotary buffers transformers builds for rope_type \
             `{rope_type}`"
        ));
    }
    Ok(rotary_dim(text)?.div_ceil(2))
}

/// Whether the config names no partial rotary factor anywhere
/// [`rotary_dim`] looks.
pub(crate) fn rotary_dim_unset(text: &Value) -> bool {
    partial_factor(text).is_none()
}

/// The partial factor vLLM's `get_rope` reads: the rope section's first
/// (transformers 5 keeps a top-level one there unless the section names
/// its own: checked on vLLM's Llama and GLM-4 with both given), then the
/// top level's, then GPT-NeoX's `rotary_pct`.
fn partial_factor(text: &Value) -> Option<&Value> {
    rope_first_partial_factor(text).or_else(|| text.get("rotary_pct").filter(|v| !v.is_null()))
}

/// `partial_rotary_factor` at the top level only, where SGLang's Llama,
/// Phi and StableLM attentions read it (`getattr(config, ...)`): a factor
/// only the rope section names is not read there.
pub(crate) fn top_level_partial_factor(text: &Value) -> Option<&Value> {
    text.get("partial_rotary_factor").filter(|v| !v.is_null())
}

/// `partial_rotary_factor` in the rope section first, then at the top
/// level, as SGLang's GLM-4 and GLM-4.5 read it.
pub(crate) fn rope_first_partial_factor(text: &Value) -> Option<&Value> {
    rope_section(text)
        .and_then(|s| s.get("partial_rotary_factor"))
        .filter(|v| !v.is_null())
        .or_else(|| top_level_partial_factor(text))
}

/// Whether the rope is vLLM's `MRotaryEmbedding`: a `default` rope with an
/// `mrope_section` (`get_rope`, layers/rotary_embedding/__init__.py), whose
/// table has `max_position_embeddings x positions_factor` rows.
pub(crate) fn is_mrope(text: &Value) -> bool {
    let scaling = rope_section(text);
    rope_type(scaling) == "default" && scaling.is_some_and(|s| s.get("mrope_section").is_some())
}

/// `rope_scaling`, else transformers 5's `rope_parameters`.
fn rope_section(text: &Value) -> Option<&Value> {
    text.get("rope_scaling")
        .filter(|v| !v.is_null())
        .or_else(|| text.get("rope_parameters").filter(|v| !v.is_null()))
}

fn rope_type(scaling: Option<&Value>) -> &str {
    scaling
        .and_then(|s| s.get("rope_type").or_else(|| s.get("type")))
        .and_then(Value::as_str)
        .unwrap_or("default")
}

/// A rope section's scaling `factor`: finite and positive, else refused.
fn positive_factor(scaling: &Value) -> Result<f64, String> {
    scaling
        .get("factor")
        .and_then(Value::as_f64)
        .filter(|f| f.is_finite() && *f > 0.0)
        .ok_or_else(|| "the rope scaling has no positive `factor`".to_owned())
}

/// The rotated part of a head: `int(head_dim x partial_rotary_factor)`, the
/// factor read where configs put it (the top level, the rope section, or
/// GPT-NeoX's `rotary_pct`); [`head_dim`].
pub(crate) fn rotary_dim(text: &Value) -> Result<u64, String> {
    rotary_dim_or(text, 1.0)
}

fn rotary_dim_or(text: &Value, default_factor: f64) -> Result<u64, String> {
    rotary_dim_of(text, partial_factor(text), default_factor)
}

/// `int(head_dim x factor)`, the factor given (`default_factor` when none).
pub(crate) fn rotary_dim_of(
    text: &Value,
    factor: Option<&Value>,
    default_factor: f64,
) -> Result<u64, String> {
    let factor = fraction(factor, default_factor)?;
    part_of(head_dim(text)?, factor)
}

/// A `partial_rotary_factor`: in (0, 1], `default_factor` when none.
fn fraction(factor: Option<&Value>, default_factor: f64) -> Result<f64, String> {
    match factor {
        None => Ok(default_factor),
        Some(v) => v
            .as_f64()
            .filter(|f| *f > 0.0 && *f <= 1.0)
            .ok_or_else(|| "`partial_rotary_factor` is not a fraction in (0, 1]".to_owned()),
    }
}

/// `int(head_dim x factor)`, as Python rounds it (toward zero).
fn part_of(head_dim: u64, factor: f64) -> Result<u64, String> {
    if head_dim >= 1 << 53 {
        return Err("`head_dim` is beyond what a double holds exactly".into());
    }
    Ok((head_dim as f64 * factor) as u64)
}

/// A head's width: `head_dim`, else `hidden_size / num_attention_heads`.
pub(crate) fn head_dim(text: &Value) -> Result<u64, String> {
    let count = |key: &str| {
        text.get(key).and_then(Value::as_u64).ok_or_else(|| {
            format!(
                "the config has no `{key}` (kv does not supply the config class's defaults for \
                 the rotary table)"
            )
        })
    };
    match text.get("head_dim").and_then(Value::as_u64) {
        Some(d) => Ok(d),
        None => {
            let heads = count("num_attention_heads")?;
            count("hidden_size")?
                .checked_div(heads)
                .ok_or_else(|| "`num_attention_heads` is 0".to_owned())
        }
    }
}

/// `[positions, qk_rope_head_dim]`: the one table vLLM's multi-head latent
/// attention builds (DeepSeek-V2/V3, `DeepseekV2MLAAttention`): only the
/// rope part of each head is rotated. With `rope_type` `default` it holds
/// `max_position_embeddings` rows; with `yarn` (which the model renames
/// `deepseek_yarn`) `DeepseekScalingRotaryEmbedding` holds
/// `original_max_position_embeddings x factor` rows
/// (`torch.arange(float)`: rounded up).
pub(crate) fn mla_rotary_table_shape(text: &Value) -> Result<(u64, u64), String> {
    let scaling = rope_section(text);
    let rope_type = rope_type(scaling);
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
            scaled_positions(original, positive_factor(scaling)?)?
        }
        _ => {
            return Err(format!(
                "kv has not checked the rotary table latent attention builds for \
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

/// One rotary embedding a layer type asks `get_rope` for: equal ones are
/// one cached table.
#[derive(Clone, Debug, PartialEq)]
struct LayerRope {
    rope_type: String,
    factor: f64,
    theta: f64,
}

/// Gemma 3's tables (`Gemma3Attention`): each layer type (`full_attention`,
/// `sliding_attention`) among `layers` has its own rope parameters, and
/// `get_rope` builds one `[rows, head_dim]` table for each distinct one:
/// `max_position_embeddings` rows for `default`, `max_position_embeddings
/// x factor` for `linear` (`LinearScalingRotaryEmbedding`: the published
/// 4B, 12B and 27B's global layers, 8 x 131,072 rows). The parameters are
/// transformers' per-type `rope_parameters`, or, in a config as published,
/// `rope_scaling` and `rope_theta` (default 1,000,000) for the full layers
/// and `rope_local_base_freq` (default 10,000) for the sliding ones, as
/// transformers' `Gemma3TextConfig` reads them.
pub(crate) fn gemma3_rotary_tables(
    text: &Value,
    layers: std::ops::Range<u64>,
) -> Result<Vec<(u64, u64)>, String> {
    let count = |key: &str| {
        text.get(key)
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("the config has no `{key}` for the rotary tables"))
    };
    let positions = count("max_position_embeddings")?;
    let head_dim = count("head_dim")?;
    let mut tables: Vec<LayerRope> = Vec::new();
    for layer in layers {
        let kind = gemma3_layer_type(text, layer)?;
        let rope = gemma3_rope(text, kind)?;
        if !tables.contains(&rope) {
            tables.push(rope);
        }
    }
    tables
        .iter()
        // `default` has a factor of 1: its rows are the positions.
        .map(|rope| Ok((scaled_positions(positions, rope.factor)?, head_dim)))
        .collect()
}

/// The distinct rope thetas among Gemma 3's layer types in `layers`
/// ([`gemma3_rotary_tables`] reads them): SGLang's `Gemma3Attention` asks
/// `get_rope` for a `default` table of each, whatever the config's scaling.
pub(crate) fn gemma3_thetas(
    text: &Value,
    layers: std::ops::Range<u64>,
) -> Result<Vec<f64>, String> {
    let mut thetas: Vec<f64> = Vec::new();
    for layer in layers {
        let theta = gemma3_rope(text, gemma3_layer_type(text, layer)?)?.theta;
        if !thetas.contains(&theta) {
            thetas.push(theta);
        }
    }
    Ok(thetas)
}

/// The distinct entries of `layer_types`, in order: transformers' OLMo 3
/// rotary module keeps a pair of buffers for each, SGLang's a table.
pub(crate) fn layer_types(text: &Value) -> Result<Vec<&str>, String> {
    let types = text
        .get("layer_types")
        .and_then(Value::as_array)
        .ok_or("the config has no `layer_types` list (the rotary buffers are one a type)")?;
    let mut seen: Vec<&str> = Vec::new();
    for kind in types {
        let kind = kind
            .as_str()
            .ok_or("`layer_types` holds a value that is not a name")?;
        if !seen.contains(&kind) {
            seen.push(kind);
        }
    }
    Ok(seen)
}

/// `config.layer_types[layer]`, or transformers' default: every
/// `sliding_window_pattern`-th layer (6) full, the others sliding.
fn gemma3_layer_type(text: &Value, layer: u64) -> Result<&'static str, String> {
    if let Some(types) = text.get("layer_types").filter(|v| !v.is_null()) {
        let kind = usize::try_from(layer)
            .ok()
            .and_then(|i| types.as_array()?.get(i))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("`layer_types` has no entry for layer {layer}"))?;
        return match kind {
            "full_attention" => Ok("full_attention"),
            "sliding_attention" => Ok("sliding_attention"),
            other => Err(format!(
                "`layer_types[{layer}]` is `{other}`: kv knows Gemma 3's `full_attention` and \
                 `sliding_attention`"
            )),
        };
    }
    let pattern = match text.get("sliding_window_pattern") {
        None | Some(Value::Null) => 6,
        Some(v) => v
            .as_u64()
            .filter(|&p| p > 0)
            .ok_or("`sliding_window_pattern` is not a positive count")?,
    };
    Ok(if (layer + 1).is_multiple_of(pattern) {
        "full_attention"
    } else {
        "sliding_attention"
    })
}

fn gemma3_rope(text: &Value, kind: &str) -> Result<LayerRope, String> {
    let nested = text
        .get("rope_parameters")
        .and_then(|p| p.get(kind))
        .filter(|v| !v.is_null());
    let (scaling, theta) = match nested {
        Some(params) => (Some(params), params.get("rope_theta")),
        None if kind == "full_attention" => (
            text.get("rope_scaling").filter(|v| !v.is_null()),
            text.get("rope_theta"),
        ),
        None => (None, text.get("rope_local_base_freq")),
    };
    let theta = match theta {
        None | Some(Value::Null) if kind == "full_attention" => 1_000_000.0,
        None | Some(Value::Null) => 10_000.0,
        Some(v) => v
            .as_f64()
            .ok_or_else(|| format!("the {kind} layers' rope theta is not a number"))?,
    };
    let rope_type = rope_type(scaling);
    let factor = match rope_type {
        "default" => 1.0,
        "linear" => scaling
            .and_then(|s| s.get("factor"))
            .and_then(Value::as_f64)
            .filter(|f| f.is_finite() && *f > 0.0)
            .ok_or_else(|| format!("the {kind} layers' linear rope has no positive `factor`"))?,
        other => {
            return Err(format!(
                "kv has not checked the rotary tables Gemma 3 builds for rope_type `{other}` \
                 ({kind} layers)"
            ))
        }
    };
    Ok(LayerRope {
        rope_type: rope_type.to_owned(),
        factor,
        theta,
    })
}

/// Gemma 4's tables (gemma4.py, `Gemma4Attention`): each layer asks
/// `get_rope` with its kind's rope parameters (`rope_parameters[kind]`) and
/// its kind's head (`kind_head_dim`: transformers' `per_layer_config`, a
/// full layer's `global_head_dim`), one table per distinct pair. `default`
/// rotates `int(head_dim x partial_rotary_factor)` of it; `proportional`
/// (`Gemma4RotaryEmbedding`) keeps the whole head in its table. Each is
/// `[max_position_embeddings, dim]`.
pub(crate) fn gemma4_rotary_tables(
    text: &Value,
    kinds: &[(&'static str, u64)],
) -> Result<Vec<(u64, u64)>, String> {
    let positions = max_positions(text)?;
    let mut seen: Vec<(u64, String)> = Vec::new();
    let mut tables = Vec::new();
    for &(kind, head_dim) in kinds {
        let params = text
            .get("rope_parameters")
            .and_then(|p| p.get(kind))
            .filter(|v| !v.is_null())
            .ok_or_else(|| {
                format!("the config has no `rope_parameters.{kind}` (Gemma 4 reads one per kind)")
            })?;
        let key = (head_dim, params.to_string());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let dim = match rope_type(Some(params)) {
            "proportional" => head_dim,
            "default" => {
                let factor = params.get("partial_rotary_factor").filter(|v| !v.is_null());
                part_of(head_dim, fraction(factor, 1.0)?)?
            }
            other => {
                return Err(format!(
                    "kv has not checked the rotary table Gemma 4 builds for rope_type `{other}` \
                     ({kind} layers)"
                ))
            }
        };
        tables.push((positions, dim));
    }
    Ok(tables)
}

/// The rotary tables of a stage whose rope is chosen per layer type
/// (Laguna, laguna.py): each layer's `rope_parameters[layer_types[i]]`
/// where the section is nested by type (else the flat section), with a
/// top-level `partial_rotary_factor` folded in where the layer's own names
/// none; one table for each distinct rope among `layers`, as `get_rope`'s
/// cache shares them.
pub(crate) fn per_layer_type_rotary_tables(
    text: &Value,
    layers: std::ops::Range<u64>,
) -> Result<Vec<(u64, u64)>, String> {
    let section = text.get("rope_parameters").filter(|v| !v.is_null());
    let nested = section
        .and_then(Value::as_object)
        .is_some_and(|s| s.values().any(Value::is_object));
    let top_partial = text.get("partial_rotary_factor").filter(|v| !v.is_null());
    let mut ropes: Vec<Value> = Vec::new();
    for layer in layers {
        let kind = text
            .get("layer_types")
            .and_then(Value::as_array)
            .and_then(|types| types.get(usize::try_from(layer).ok()?))
            .and_then(Value::as_str)
            .unwrap_or("full_attention");
        let mut rope = match (nested, section) {
            (true, Some(s)) => s
                .get(kind)
                .or_else(|| s.get("full_attention"))
                .cloned()
                .unwrap_or_else(|| Value::Object(Default::default())),
            (_, Some(s)) => s.clone(),
            (_, None) => Value::Object(Default::default()),
        };
        if let (Some(partial), Some(fields)) = (top_partial, rope.as_object_mut()) {
            fields
                .entry("partial_rotary_factor")
                .or_insert_with(|| partial.clone());
        }
        if !ropes.contains(&rope) {
            ropes.push(rope);
        }
    }
    ropes
        .into_iter()
        .map(|rope| {
            let mut one = text.clone();
            let fields = one.as_object_mut().ok_or("the config is not an object")?;
            fields.remove("rope_scaling");
            fields.remove("partial_rotary_factor");
            fields.insert("rope_parameters".into(), rope);
            scaled_rotary_table_shape(&one)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_rope_per_layer_type_folds_in_the_top_level_partial_factor() {
        // A flat section: every layer one table, rotating half of 16.
        let flat = json!({"head_dim": 16, "max_position_embeddings": 100,
                          "partial_rotary_factor": 0.5,
                          "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}});
        assert_eq!(
            per_layer_type_rotary_tables(&flat, 0..3).unwrap(),
            vec![(100, 8)]
        );
        // Nested by type: a table each, the layer's own factor first.
        let nested = json!({"head_dim": 16, "max_position_embeddings": 100,
                            "partial_rotary_factor": 0.5,
                            "layer_types": ["full_attention", "sliding_attention"],
                            "rope_parameters": {
                                "full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                "sliding_attention": {"rope_type": "default", "rope_theta": 1e4,
                                                      "partial_rotary_factor": 1.0}}});
        assert_eq!(
            per_layer_type_rotary_tables(&nested, 0..2).unwrap(),
            vec![(100, 8), (100, 16)]
        );
        assert_eq!(
            per_layer_type_rotary_tables(&nested, 1..2).unwrap(),
            vec![(100, 16)]
        );
    }
}
