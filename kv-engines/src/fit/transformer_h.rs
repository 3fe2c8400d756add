//! The classes whose layers are `transformer.h.N` (GPT-2, BLOOM, GPT-J)
//! or `transformer.blocks.N` (DBRX), with their sizes under keys of their
//! own: their config as the other classes' keys name it, and their
//! checkpoint as their loaders (vLLM's and SGLang's alike) name it.

use serde_json::Value;

use crate::stored_tensor::StoredTensor;

/// GPT-2: its sizes under their own keys (`n_embd`, `n_layer`, ...), its
/// `Conv1D` weights stored transposed, learned positions.
pub(crate) const GPT2: &str = "GPT2LMHeadModel";

/// BLOOM: ALiBi (no rotary table), its layers under `transformer.h`.
pub(crate) const BLOOM: &str = "BloomForCausalLM";

/// The classes whose layers are `transformer.h.N` and whose class builds
/// the embeddings, the final norm and the (tied) head on every pipeline
/// stage (gpt2.py, bloom.py); their loaders add `transformer.` to a name
/// without it.
pub(crate) const TRANSFORMER_H: &[&str] = &[GPT2, BLOOM, GPTJ, DBRX];

/// DBRX: its sizes under `d_model`, `n_layers`, `n_heads`, `max_seq_len`
/// and its `attn_config` and `ffn_config`; every expert's projections
/// stacked in one tensor each (`ffn.experts.mlp.w1`, `v1`, `w2`).
pub(crate) const DBRX: &str = "DbrxForCausalLM";

/// GPT-J: a partial rope (`rotary_dim` of each head), a head with a bias.
pub(crate) const GPTJ: &str = "GPTJForCausalLM";

/// GPT-2's, BLOOM's and GPT-J's config as the other classes' keys name it:
/// `n_layer`, `n_head`, GPT-2's and GPT-J's `n_embd` and `n_positions`
/// (their attention has as many KV heads as query heads), GPT-J's
/// `rotary_dim` as a partial factor.
pub(crate) fn transformer_h_text(class: &str, text: &Value) -> Result<Value, String> {
    let mut named = text.clone();
    let fields = named.as_object_mut().ok_or("the config is not an object")?;
    let gpt2: &[(&str, &str)] = &[
        ("n_embd", "hidden_size"),
        ("n_positions", "max_position_embeddings"),
    ];
    let both = [
        ("n_layer", "num_hidden_layers"),
        ("n_head", "num_attention_heads"),
        ("n_head", "num_key_value_heads"),
    ];
    let dbrx = [
        ("d_model", "hidden_size"),
        ("n_layers", "num_hidden_layers"),
        ("n_heads", "num_attention_heads"),
        ("attn_config.kv_n_heads", "num_key_value_heads"),
        ("max_seq_len", "max_position_embeddings"),
        ("ffn_config.ffn_hidden_size", "moe_intermediate_size"),
    ];
    let keys: Vec<(&str, &str)> = match class {
        DBRX => dbrx.to_vec(),
        BLOOM => both.to_vec(),
        _ => both.iter().chain(gpt2).copied().collect(),
    };
    for (from, to) in keys {
        let value = from
            .split('.')
            .try_fold(text, |at, key| at.get(key))
            .filter(|v| v.is_u64())
            .ok_or_else(|| format!("the config has no `{from}`"))?;
        fields.insert(to.into(), value.clone());
    }
    if class == GPTJ {
        // gpt_j.py: `partial_rotary_factor = rotary_dim / head_size`.
        let size = |key: &str| {
            text.get(key)
                .and_then(Value::as_u64)
                .filter(|v| *v > 0)
                .ok_or_else(|| format!("the config has no positive `{key}`"))
        };
        let head = size("n_embd")? / size("n_head")?;
        let factor = size("rotary_dim")? as f64 / head as f64;
        fields.insert("partial_rotary_factor".into(), Value::from(factor));
    }
    Ok(named)
}

/// The tensors of a [`TRANSFORMER_H`] class as its loader names them: the
/// original checkpoints' names gain `transformer.`; and the bytes of the
/// causal masks older GPT-2 and GPT-J checkpoints store (`attn.bias`,
/// `attn.masked_bias`), which the loaders skip, left out.
pub(crate) fn transformer_h_checkpoint(
    tensors: &[StoredTensor],
) -> Result<(Vec<StoredTensor>, u64), String> {
    let mut kept = Vec::with_capacity(tensors.len());
    let mut masks = 0u64;
    for tensor in tensors {
        if gpt2_mask(&tensor.name) {
            masks = masks
                .checked_add(tensor.bytes)
                .ok_or("the skipped tensors' bytes overflow u64")?;
            continue;
        }
        let mut t = tensor.clone();
        if !t.name.starts_with("transformer.") && !t.name.starts_with("lm_head.") {
            t.name = format!("transformer.{}", t.name);
        }
        kept.push(t);
    }
    Ok((kept, masks))
}

/// A causal mask older GPT-2 checkpoints store.
fn gpt2_mask(name: &str) -> bool {
    name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias")
}
