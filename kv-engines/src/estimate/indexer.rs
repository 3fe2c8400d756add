//! Sparse-attention (DSA) models: DeepSeek-V3.2, GLM-5 and their kin keep
//! an indexer's key cache beside each layer's cache, which kv does not size
//! yet; refused by name rather than sized as the latent alone.

use kv_core::{HfConfig, KvError};

use super::settings::config_error;

/// What the refusal says it is about (`KvError::Config`'s `what`).
pub(crate) const WHAT: &str = "sparse-attention indexer";

/// Refuses a config with `index_topk` (the indexer's top-k, which every DSA
/// config writes). vLLM 0.33 (`deepseek_v32/nvidia/model.py`, checked on the
/// meta device on 2026-12-06) keeps, per layer, an indexer key cache of
/// `index_head_dim` fp8 bytes and one float32 scale per 128 of them (132 B a
/// token for 128) in the latent's group, on sparse FlashMLA's 64-token
/// blocks: DeepSeek-V3.2 holds 1,284 B a token a layer where the latent
/// alone is 1,152.
pub(crate) fn refuse_indexer(hf: &HfConfig) -> Result<(), KvError> {
    let Some((key, top_k)) = hf.value("index_topk") else {
        return Ok(());
    };
    let head = match hf.value("index_head_dim") {
        Some((name, dim)) => format!(" and `{name}` {dim}"),
        None => String::new(),
    };
    Err(config_error(
        WHAT,
        format!(
            "`{key}` {top_k}{head}: a sparse-attention (DSA) model, whose every layer keeps \
             an indexer key cache beside its own (vLLM 0.33: the indexer's fp8 keys and \
             their scales, paged with the latent on 64-token blocks); kv does not size that \
             cache yet, so it refuses rather than size the layers' own caches alone"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_with_index_topk_is_refused_naming_both_keys() {
        let v32 = HfConfig::from_value(serde_json::json!({
            "text_config": {"index_topk": 2048, "index_head_dim": 128},
        }));
        let text = refuse_indexer(&v32).unwrap_err().to_string();
        assert!(
            text.starts_with(
                "kv: cannot read sparse-attention indexer from the config: \
                 `text_config.index_topk` 2048 and `text_config.index_head_dim` 128: a \
                 sparse-attention (DSA) model"
            ),
            "{text}"
        );
        let bare = HfConfig::from_value(serde_json::json!({"index_topk": 512}));
        let text = refuse_indexer(&bare).unwrap_err().to_string();
        assert!(text.contains("`index_topk` 512: a sparse"), "{text}");
        let v3 = HfConfig::from_value(serde_json::json!({"kv_lora_rank": 512}));
        assert!(refuse_indexer(&v3).is_ok());
    }
}
