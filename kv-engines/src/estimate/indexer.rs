//! Sparse-attention (DSA) models: DeepSeek-V3.2, GLM-5 and their kin keep an
//! indexer's key cache beside each layer's MLA latent ([`IndexerKeys`]),
//! which vLLM 0.33 and SGLang 0.5.23 both size; HY-V4's "shared" layers
//! reuse an earlier layer's top-k and keep no keys of their own
//! ([`SharedIndexers`]). A DSA model without an MLA latent, or one whose
//! layers share an indexer by a rule kv has not checked, kv refuses by name
//! rather than size the latent alone.

use kv_core::pattern::{LayerKind, LayerPattern};
use kv_core::{HfConfig, KvError, KvSpec};
use serde_json::Value;

use super::settings::config_error;

/// What a refusal says it is about (`KvError::Config`'s `what`).
pub(crate) const WHAT: &str = "sparse-attention indexer";
/// The declaration of the indexer keys.
pub(crate) const INDEXER_KEYS: &str = "indexer_keys";
/// vLLM's `Indexer.quant_block_size` (`model_executor/models/deepseek_v2.py`):
/// one float32 scale per 128 fp8 key elements.
const QUANT_BLOCK: u64 = 128;
const SCALE_BYTES: u64 = 4;

/// The indexer keys a DSA layer keeps, as vLLM 0.33 declares them
/// (`DeepseekV32IndexerCache`, deepseek_v2.py:731): `head_dim + head_dim /
/// 128 x 4` bytes a token, `index_head_dim` fp8 keys and a float32 scale
/// per 128 of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IndexerKeys {
    /// `index_head_dim`: fp8 key elements a token a layer.
    pub head_dim: u64,
    /// Float32 scales a token a layer: `head_dim / 128`.
    pub scales: u64,
    /// Bytes a token a layer.
    pub width: u64,
    /// Where only some layers keep keys (HY-V4); `None`: every latent layer.
    pub shared: Option<SharedIndexers>,
}

/// HY-V4's indexers (vLLM 0.33 models/hy_v4/nvidia/attention.py:62,
/// `compute_skip_topk_layers`): a "shared" layer reuses the top-k of the
/// closest earlier "full" one and builds no indexer, so no key cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SharedIndexers {
    /// The layers with keys as [`LayerKind::FullAttention`], the others as
    /// [`LayerKind::KvShared`].
    pub pattern: LayerPattern,
    /// Layers with keys.
    pub full: u64,
    /// Which key or rule said so.
    pub source: String,
}

/// The `layer_types` of HY-V4's sparse layers (`_SPARSE_LAYER_TYPES`,
/// attention.py:51): a layer of any other type runs dense MLA.
const HY_V4_SPARSE_TYPES: [&str; 4] = [
    "sparse_attention",
    "sparse",
    "indexed_attention",
    "deepseek_sparse_attention",
];

/// The indexer keys of a config that writes `index_topk` (every DSA config
/// does) over its `layers` latent layers, `None` for any other;
/// `index_head_dim` missing or not a count is an error naming it (vLLM's
/// class reads it unguarded).
pub(crate) fn indexer_keys(hf: &HfConfig, layers: u64) -> Result<Option<IndexerKeys>, KvError> {
    let Some((top_k, _)) = hf.value("index_topk") else {
        return Ok(None);
    };
    let shared = if hf.model_types().contains(&"hy_v4") {
        hy_v4_indexers(hf, layers)?
    } else {
        // Layers that share another's indexer outside HY-V4's class kv has
        // not checked.
        if let Some((name, Value::Array(types))) = hf.value("indexer_types") {
            if let Some(other) = types.iter().find(|t| t.as_str() != Some("full")) {
                return Err(config_error(
                    WHAT,
                    format!(
                        "`{name}` has {other}: layers without an indexer of their own, \
                         which kv has checked only for HY-V4 (`model_type` hy_v4); it sizes \
                         the indexer keys here only where every layer's type is \"full\""
                    ),
                ));
            }
        }
        None
    };
    // Keys pooled over several positions (GLM-5-Next's `index_kpool`) kv
    // has not checked.
    if let Some((name, pool)) = hf.count_if_set(WHAT, "index_kpool")? {
        if pool > 1 {
            return Err(config_error(
                WHAT,
                format!(
                    "`{name}` {pool}: indexer keys pooled over {pool} positions, which kv \
                     has not checked"
                ),
            ));
        }
    }
    let Some((_, head_dim)) = hf.count_if_set("index_head_dim", "index_head_dim")? else {
        return Err(config_error(
            "index_head_dim",
            format!(
                "`{top_k}` makes it a sparse-attention (DSA) model, whose indexer keys are \
                 `index_head_dim` wide, and `index_head_dim` is not set; give it"
            ),
        ));
    };
    if !head_dim.is_multiple_of(QUANT_BLOCK) {
        return Err(config_error(
            "index_head_dim",
            format!(
                "`index_head_dim` {head_dim} is not a multiple of {QUANT_BLOCK}, the indexer's \
                 quantization block; kv has not checked how vLLM stores such keys"
            ),
        ));
    }
    let scales = head_dim / QUANT_BLOCK;
    let width = (scales * SCALE_BYTES)
        .checked_add(head_dim)
        .ok_or_else(|| {
            config_error(
                "index_head_dim",
                format!("`index_head_dim` {head_dim} overflows u64 with its scales"),
            )
        })?;
    Ok(Some(IndexerKeys {
        head_dim,
        scales,
        width,
        shared,
    }))
}

/// HY-V4's layers with keys, as its class finds them: every layer must be
/// sparse (`layer_types` one of [`HY_V4_SPARSE_TYPES`]; a dense MLA layer
/// beside them kv has not checked); `indexer_types` ("full" or "shared",
/// one a layer) where set, else `index_topk_pattern` ("S" shares), else a
/// layer `i` keeps keys when `max(i - index_skip_topk_offset + 1, 0)` is a
/// multiple of `index_topk_freq` (defaults 2 and 1: every layer). `None`
/// where every layer keeps keys.
fn hy_v4_indexers(hf: &HfConfig, layers: u64) -> Result<Option<SharedIndexers>, KvError> {
    let dense = match hf.value("layer_types") {
        Some((name, Value::Array(types))) => types
            .iter()
            .find(|t| !t.as_str().is_some_and(|t| HY_V4_SPARSE_TYPES.contains(&t)))
            .map(|other| format!("`{name}` has {other}")),
        Some((name, other)) => Some(format!("`{name}` is {other}")),
        None => Some("`layer_types` is not set".to_owned()),
    };
    if let Some(dense) = dense {
        return Err(config_error(
            WHAT,
            format!(
                "{dense}: HY-V4 runs dense MLA, with no indexer, on a layer not of a sparse \
                 type ({}), which kv has not checked beside sparse layers",
                HY_V4_SPARSE_TYPES.join(", ")
            ),
        ));
    }
    let count = usize::try_from(layers)
        .map_err(|_| config_error(WHAT, format!("{layers} layers do not fit in memory")))?;
    let (keeps, source): (Vec<bool>, String) = match hf.value("indexer_types") {
        Some((name, Value::Array(types))) => {
            // attention.py:83-95: one entry a layer, "full" or "shared".
            if types.len() != count {
                return Err(config_error(
                    WHAT,
                    format!(
                        "`{name}` has {} entries for {layers} layers (vLLM: \"indexer_types \
                         must contain one entry per hidden layer\")",
                        types.len()
                    ),
                ));
            }
            let keeps = types
                .iter()
                .map(|t| match t.as_str() {
                    Some("full") => Ok(true),
                    Some("shared") => Ok(false),
                    _ => Err(config_error(
                        WHAT,
                        format!(
                            "`{name}` has {t} (vLLM: \"indexer_types only supports 'full' and \
                             'shared'\")"
                        ),
                    )),
                })
                .collect::<Result<_, _>>()?;
            (keeps, format!("`{name}`"))
        }
        Some((name, other)) => {
            return Err(config_error(
                WHAT,
                format!("`{name}` is {other}, not a list"),
            ))
        }
        None => match hf.value("index_topk_pattern") {
            Some((name, Value::String(pattern))) => {
                let shares: Vec<bool> = pattern.chars().map(|c| c == 'S').collect();
                let keeps = (0..count)
                    .map(|i| !shares.get(i).copied().unwrap_or(false))
                    .collect();
                (keeps, format!("`{name}`"))
            }
            Some((name, other)) => {
                return Err(config_error(
                    WHAT,
                    format!("`{name}` is {other}, not a string of layer letters"),
                ))
            }
            None => {
                let freq = match hf.count_if_set(WHAT, "index_topk_freq")? {
                    Some((_, freq)) => freq,
                    None => 1,
                };
                let offset = match hf.value("index_skip_topk_offset") {
                    Some((name, value)) => value.as_u64().ok_or_else(|| {
                        config_error(WHAT, format!("`{name}` is {value}, not a count"))
                    })?,
                    None => 2,
                };
                let keeps = (0..layers)
                    .map(|i| (i + 1).saturating_sub(offset).is_multiple_of(freq))
                    .collect();
                (
                    keeps,
                    format!("`index_topk_freq` {freq} from `index_skip_topk_offset` {offset}"),
                )
            }
        },
    };
    let full = keeps.iter().filter(|k| **k).count() as u64;
    if full == layers {
        return Ok(None);
    }
    let kinds = keeps
        .iter()
        .map(|k| {
            if *k {
                LayerKind::FullAttention
            } else {
                LayerKind::KvShared
            }
        })
        .collect();
    let pattern = LayerPattern::from_kinds(kinds, source.clone())
        .map_err(|e| config_error(WHAT, format!("{source}: {e}")))?;
    Ok(Some(SharedIndexers {
        pattern,
        full,
        source,
    }))
}

/// Refuses a config with `index_topk` whose sparse attention kv does not
/// size (one without an MLA latent: DeepSeek-V4's compressed attention).
pub(crate) fn refuse_indexer(hf: &HfConfig) -> Result<(), KvError> {
    let Some((key, top_k)) = hf.value("index_topk") else {
        return Ok(());
    };
    Err(config_error(
        WHAT,
        format!(
            "`{key}` {top_k}{}: a sparse-attention (DSA) model without an MLA latent \
             (`kv_lora_rank`), whose layers keep an indexer key cache beside their own; kv \
             sizes the indexer only beside a latent, so it refuses rather than size the \
             layers' own caches alone",
            head_dim(hf)
        ),
    ))
}

/// The indexer keys' bytes a token over all their layers, where the
/// estimate declares them (`None` for any other model).
pub(crate) fn indexer_bytes(specs: &[KvSpec]) -> Result<Option<u64>, KvError> {
    let Some(spec) = specs.iter().find(|spec| spec.name == INDEXER_KEYS) else {
        return Ok(None);
    };
    match spec.layout.bytes_per_position() {
        Some(Ok(bytes)) => Ok(Some(bytes)),
        _ => Err(config_error(
            WHAT,
            "the indexer keys' bytes a token overflow u64".to_owned(),
        )),
    }
}

/// " and `index_head_dim` N" where the config sets it.
fn head_dim(hf: &HfConfig) -> String {
    match hf.value("index_head_dim") {
        Some((name, dim)) => format!(" and `{name}` {dim}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hf(config: serde_json::Value) -> HfConfig {
        HfConfig::from_value(config)
    }

    fn indexer_keys_of(hf: &HfConfig) -> Result<Option<IndexerKeys>, KvError> {
        indexer_keys(hf, 4)
    }

    #[test]
    fn the_keys_are_the_head_and_a_4_byte_scale_per_128() {
        // DeepSeek-V3.2: 128 + 128 / 128 x 4 = 132 B a token a layer.
        let keys = indexer_keys_of(&hf(serde_json::json!({
            "index_topk": 2048, "index_head_dim": 128,
        })))
        .unwrap()
        .unwrap();
        assert_eq!(
            keys,
            IndexerKeys {
                head_dim: 128,
                scales: 1,
                width: 132,
                shared: None,
            }
        );
        let keys = |dim: u64| {
            indexer_keys_of(&hf(
                serde_json::json!({"index_topk": 64, "index_head_dim": dim}),
            ))
        };
        // 256 + 2 x 4 = 264 B.
        assert_eq!(keys(256).unwrap().unwrap().width, 264);
        assert_eq!(keys(256).unwrap().unwrap().scales, 2);
        // Not whole quantization blocks: refused, not rounded.
        let text = keys(320).unwrap_err().to_string();
        assert!(
            text.contains("`index_head_dim` 320 is not a multiple of 128"),
            "{text}"
        );
        assert!(keys(64).is_err());
        assert_eq!(
            indexer_keys_of(&hf(serde_json::json!({"index_head_dim": 128}))).unwrap(),
            None
        );
    }

    #[test]
    fn a_missing_or_huge_head_is_an_error_naming_it() {
        let text = indexer_keys_of(&hf(
            serde_json::json!({"text_config": {"index_topk": 2048}}),
        ))
        .unwrap_err()
        .to_string();
        assert!(
            text.contains(
                "cannot read index_head_dim from the config: `text_config.index_topk` makes it \
                 a sparse-attention (DSA) model"
            ),
            "{text}"
        );
        // The largest multiple of 128: its scales push the width past u64.
        let text = indexer_keys_of(&hf(serde_json::json!({
            "index_topk": 1, "index_head_dim": u64::MAX - 127,
        })))
        .unwrap_err()
        .to_string();
        assert!(text.contains("overflows u64 with its scales"), "{text}");
    }

    #[test]
    fn index_topk_without_a_latent_is_refused_naming_both_keys() {
        let v4 = hf(serde_json::json!({
            "text_config": {"index_topk": 512, "index_head_dim": 128},
        }));
        let text = refuse_indexer(&v4).unwrap_err().to_string();
        assert!(
            text.starts_with(
                "kv: cannot read sparse-attention indexer from the config: \
                 `text_config.index_topk` 512 and `text_config.index_head_dim` 128: a \
                 sparse-attention (DSA) model without an MLA latent"
            ),
            "{text}"
        );
        let bare = refuse_indexer(&hf(serde_json::json!({"index_topk": 512})));
        assert!(bare
            .unwrap_err()
            .to_string()
            .contains("`index_topk` 512: a sparse"));
        assert!(refuse_indexer(&hf(serde_json::json!({"kv_lora_rank": 512}))).is_ok());
    }
}
