//! The rotary buffers SGLang 0.5.23's classes build beside the weights:
//! `get_rope`'s float32 `cos_sin_cache` tables (float32 on CUDA,
//! layers/rotary_embedding/base.py; one per distinct `get_rope` key, shared
//! by every layer that asks for it), or, for the classes it serves through
//! its Transformers backend, the Hugging Face rotary module's buffers. Each
//! rule was read off SGLang's model and confirmed on the class built on the
//! meta device (scripts/sglang/compare_weights_hf.py).

use serde_json::Value;

use crate::fit::rotary::{
    gemma3_thetas, head_dim, inv_freq_elements, layer_types, max_positions, minicpm3_table_shape,
    mla_rotary_table_shape, per_layer_type_rotary_tables, rope_first_partial_factor, rotary_dim,
    rotary_dim_of, rotary_dim_unset, rotary_table_shape, scaled_rotary_table_shape,
    top_level_partial_factor,
};

/// The classes SGLang 0.5.23 has no model of its own for and serves
/// through its Transformers backend (`TransformersForCausalLM`, which holds
/// the Hugging Face model): its rotary module keeps `inv_freq` and
/// `original_inv_freq`, float32, [`inv_freq_elements`] each, and no table.
pub(super) const TRANSFORMERS_BACKEND: &[&str] = &[
    "Ernie4_5ForCausalLM",
    "GPTNeoXForCausalLM",
    "SeedOssForCausalLM",
    "SmolLM3ForCausalLM",
];

/// A float32 `cos_sin_cache` of `[rows, dim]`, as `get_rope` keeps it on
/// CUDA. LongRoPE's `Phi3LongRoPEScaledRotaryEmbedding` (rope_variant.py)
/// keeps its short and long caches and both end to end again in the served
/// dtype instead; SGLang serves only 16-bit floats here, so those two
/// copies of `[original + max_position_embeddings, dim]` in 2 bytes hold
/// what one such table in float32 would.
type Table = (u64, u64);

fn table_bytes(&(rows, dim): &Table) -> Option<u64> {
    rows.checked_mul(dim)?.checked_mul(4)
}

/// The bytes of the rotary buffers `class` builds for a config's text
/// section, or why kv cannot say.
pub(super) fn rotary_buffer_bytes(text: &Value, class: &str) -> Result<u64, String> {
    let overflow = || "the rotary buffers' bytes overflow u64".to_owned();
    if TRANSFORMERS_BACKEND.contains(&class) {
        return inv_freq_elements(text)?
            .checked_mul(2 * 4)
            .ok_or_else(overflow);
    }
    let tables = match class {
        "Gemma3ForCausalLM" => return gemma3_bytes(text),
        // nemotron_h.py's attention has no positions; granitemoehybrid.py's
        // builds a table only for `position_embedding_type: rope`.
        "NemotronHForCausalLM" => return Ok(0),
        // opt.py and gpt2.py: learned positions, no rotary layer.
        "OPTForCausalLM" | "GPT2LMHeadModel" => return Ok(0),
        // gpt_j.py: `rotary_dim` of each head (positive: its config was
        // read before), `max_position_embeddings` (GPT-J's `n_positions`)
        // rows.
        "GPTJForCausalLM" => {
            let dim = text
                .get("rotary_dim")
                .and_then(Value::as_u64)
                .ok_or("the config has no `rotary_dim`")?;
            vec![(max_positions(text)?, dim)]
        }
        "GraniteMoeHybridForCausalLM"
            if text.get("position_embedding_type").and_then(Value::as_str) != Some("rope") =>
        {
            return Ok(0)
        }
        // deepseek_v2.py: the rope part of each latent head, float32.
        "DeepseekV2ForCausalLM" | "DeepseekV3ForCausalLM" => {
            vec![(mla_rotary_table_shape(text)?)]
        }
        // DeepSeek-V3.2's indexer builds a table of its own, the same shape
        // (dsa_indexer.py, `get_rope_wrapper`).
        "DeepseekV32ForCausalLM" => vec![mla_rotary_table_shape(text)?; 2],
        "Olmo3ForCausalLM" => olmo3_tables(text)?,
        // laguna.py: a rope per layer type (its partial factor folded in),
        // one table per distinct rope.
        "LagunaForCausalLM" => {
            let layers = text
                .get("num_hidden_layers")
                .and_then(Value::as_u64)
                .ok_or("the config has no `num_hidden_layers`")?;
            per_layer_type_rotary_tables(text, 0..layers)?
        }
        // Their attention rotates half of each head unless the config says
        // otherwise (glm4.py, glm4_moe.py: `getattr(config,
        // "partial_rotary_factor", 0.5)`).
        "Glm4ForCausalLM" | "Glm4MoeForCausalLM" => {
            let (rows, _) = rotary_table_shape(text)?;
            let factor = rope_first_partial_factor(text);
            vec![(rows, rotary_dim_of(text, factor, 0.5)?)]
        }
        // phi.py: `int(config.partial_rotary_factor x head_size)`, the
        // attribute transformers' PhiConfig sets from the top level only,
        // else its default of 0.5 (a factor in the rope section alone is
        // not read: transformers 5.19, as SGLang 0.5.23 installs it).
        "PhiForCausalLM" => {
            let (rows, _) = rotary_table_shape(text)?;
            let factor = top_level_partial_factor(text);
            vec![(rows, rotary_dim_of(text, factor, 0.5)?)]
        }
        // qwen3_next.py: `config.partial_rotary_factor`, which
        // Qwen3NextConfig sets from the top level, else 0.25.
        "Qwen3NextForCausalLM" => {
            let (rows, _) = rotary_table_shape(text)?;
            let factor = top_level_partial_factor(text);
            vec![(rows, rotary_dim_of(text, factor, 0.25)?)]
        }
        // stablelm.py reads `rope_pct` before `partial_rotary_factor`,
        // which StableLmConfig sets as PhiConfig does, its default 0.25.
        "StableLmForCausalLM" => {
            let (rows, _) = rotary_table_shape(text)?;
            let factor = text
                .get("rope_pct")
                .filter(|v| !v.is_null())
                .or_else(|| top_level_partial_factor(text));
            vec![(rows, rotary_dim_of(text, factor, 0.25)?)]
        }
        "MiniCPM3ForCausalLM" => vec![minicpm3_table_shape(text)?],
        _ => {
            let (rows, mut dim) = scaled_rotary_table_shape(text)?;
            if matches!(class, "LlamaForCausalLM" | "Phi3ForCausalLM") {
                // Llama's attention (llama.py, which Phi-3 is) reads
                // `partial_rotary_factor` at the top level only.
                dim = rotary_dim_of(text, top_level_partial_factor(text), 1.0)?;
            } else if dim != head_dim(text)? {
                // The other classes read no partial factor.
                return Err(format!(
                    "kv has not checked the rotary table SGLang's `{class}` builds for a partial \
                     rotary dim ({dim})"
                ));
            }
            vec![(rows, dim)]
        }
    };
    tables
        .iter()
        .try_fold(0u64, |sum, table| sum.checked_add(table_bytes(table)?))
        .ok_or_else(overflow)
}

/// Gemma 3 (gemma3_causal.py): each attention asks `get_rope` for a
/// `default` table of `[max_position_embeddings, head_dim]` with its layer
/// type's theta, whatever the config's scaling, so one table per distinct
/// theta; and the model keeps two Hugging Face rotary modules (global and
/// local), one `inv_freq` of `head_dim / 2` each.
fn gemma3_bytes(text: &Value) -> Result<u64, String> {
    if !rotary_dim_unset(text) {
        return Err("kv has not checked SGLang's Gemma 3 with a partial rotary factor".into());
    }
    let layers = text
        .get("num_hidden_layers")
        .and_then(Value::as_u64)
        .ok_or("the config has no `num_hidden_layers`")?;
    let thetas = gemma3_thetas(text, 0..layers)?.len() as u64;
    let dim = head_dim(text)?;
    let table = max_positions(text)?
        .checked_mul(dim)
        .and_then(|elements| elements.checked_mul(4));
    let inv_freqs = dim.div_ceil(2).checked_mul(2 * 4);
    table
        .and_then(|table| table.checked_mul(thetas))
        .and_then(|tables| tables.checked_add(inv_freqs?))
        .ok_or_else(|| "the rotary buffers' bytes overflow u64".to_owned())
}

/// OLMo 3 (served by olmo2.py's class): its sliding layers ask for a
/// `default` table, its full layers for the config's rope, so one table per
/// layer type present.
fn olmo3_tables(text: &Value) -> Result<Vec<Table>, String> {
    if !rotary_dim_unset(text) {
        return Err("kv has not checked SGLang's OLMo 3 with a partial rotary factor".into());
    }
    layer_types(text)?
        .into_iter()
        .map(|kind| match kind {
            "sliding_attention" => Ok((max_positions(text)?, rotary_dim(text)?)),
            "full_attention" => scaled_rotary_table_shape(text),
            other => Err(format!(
                "`layer_types` names `{other}`: kv knows OLMo 3's `sliding_attention` and \
                 `full_attention`"
            )),
        })
        .collect()
}
