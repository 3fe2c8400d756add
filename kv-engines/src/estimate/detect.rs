//! [`estimate`]: the detection order, from a config to one declaration per
//! kind of cache, with vLLM's refusals checked on the way.

use kv_core::config::{DTypeRule, MlaConfig};
use kv_core::pattern::{LayerKind, LayerPattern};
use kv_core::{HfConfig, KvError, KvSpec};
use serde_json::{Map, Value};

use super::families::{self, Holds};
use super::pool::{Grouping, Packing};
use super::settings::{config_error, EstimateSettings};
use super::vllm::{self, Builder, Paging};
use super::{deepseek_v4, indexer, inkling, kda, max_len, model_class, refusals, step5};

/// What [`estimate`] found in a config and the declarations it makes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Estimate {
    /// What was detected, in words: MLA, a hybrid pattern (with its rule and
    /// counts), sliding or plain attention, how values were read (loader
    /// defaults, the dtype and KV-head rules), and where `max_model_len` came
    /// from.
    pub detected: String,
    /// The engine convention the figures follow: vLLM's version, the block
    /// size used (and why, where a hybrid raised it), batches in flight,
    /// the Mamba cache mode.
    pub convention: String,
    /// The `max_model_len` the figures are for.
    pub max_model_len: u64,
    /// The attention block size used, in tokens.
    pub block_size: u64,
    /// The tensor-parallel size the figures are for
    /// ([`VllmEngine::tensor_parallel`](super::settings::VllmEngine::tensor_parallel)).
    pub tensor_parallel: u64,
    /// One declaration per group of layers, rows `max_num_seqs`; under
    /// decode context parallelism, full attention and MLA hold one DCP
    /// rank's share of each row.
    pub specs: Vec<KvSpec>,
    /// vLLM's `decode_context_parallel_size` the figures are for.
    pub decode_context_parallel: u64,
    /// Where kv fell back to its generic rules, why: a `model_type` that is
    /// not one of the families kv has been checked on, or none. Its figures
    /// are unverified (`kv estimate --strict` refuses them); `None` for a
    /// known family.
    pub unverified_family: Option<String>,
    /// How vLLM packs the cache, where its backend lays it out
    /// block-outermost (Step-5).
    pub(super) packing: Option<Packing>,
}

/// Estimates what vLLM holds for a model from its HF `config.json`.
///
/// Detection, in this order, stated in [`Estimate::detected`] and in each
/// declaration's note:
///
/// 1. **A family with no attention** kv sizes (RWKV) is an error that says so.
/// 2. **MLA** when `kv_lora_rank` is set in a family vLLM serves with MLA
///    (DeepSeek-V2/V3, Kimi-K2) or one kv does not know: one latent per
///    layer ([`HfConfig::mla`]). MiniCPM3 writes the key but vLLM caches
///    plain heads, read as attention. A sparse-attention (DSA) model
///    (`index_topk`: DeepSeek-V3.2, GLM-5) also keeps its indexer's keys
///    per layer, both in one pool group on 64-token blocks; `index_topk`
///    without a latent is refused by name.
/// 3. **A layer pattern** when [`HfConfig::layer_pattern`] finds one (from
///    the config, or the family's loader default), or the family holds
///    attention and Mamba2 in every layer (Falcon-H1): one declaration per
///    kind of cache, each placed in the pattern with [`KvSpec::in_layers`] so
///    pipeline stages split it by layer; full, sliding and chunked attention,
///    Mamba, Gated DeltaNet and short conv (LFM2). A `hybrid` layer (Zamba2)
///    holds both attention and Mamba2, and counts in each. Layers that share
///    another layer's K/V (`num_kv_shared_layers`) and MLP-only layers
///    (Nemotron-H's `-`, `E`) hold none.
/// 4. **An encoder-decoder** (Whisper) when `max_source_positions` is set:
///    the decoder's self-attention over `max_model_len`, and its
///    cross-attention over `max_num_encoder_input_tokens` (vLLM 0.33's
///    `CrossAttentionSpec`; the scheduler sets it to `max_num_batched_tokens`).
/// 5. **Mamba only** for `model_type` `mamba`, `falcon_mamba`, `mamba2`.
/// 6. **Attention in every layer** otherwise ([`HfConfig::geometry`]):
///    sliding over `sliding_window` where the config sets one (vLLM slides
///    every layer of a model with a window and no pattern, whatever its
///    type), else full. A `model_type` kv does not know is said in `detected`.
///
/// Values are read as vLLM reads them: the dtype by
/// [`DTypeRule::VllmAuto`] (a float32
/// checkpoint is served in bf16), KV heads by vLLM's keys, loader defaults
/// by the family ([`HfConfig`]), `max_model_len` as vLLM derives it (and a
/// longer one given is refused unless allowed). Every value that cannot be
/// read is reported at once ([`KvError::Several`]), and a given value that
/// nothing reads is an error. Recurrent state takes the model dtype (vLLM's
/// `mamba_cache_dtype auto`), never `kv_format`; so does Falcon's attention,
/// which vLLM builds without the cache config (said where a format was asked).
/// A per-token-head format on MLA is refused: no vLLM 0.33 MLA backend takes one.
///
/// The declarations are what the layers hold. vLLM's pool charges more where
/// it cuts a kind's layers into groups of one size and a group comes out
/// short ([`VllmPool`](super::pool::VllmPool), per rank from [`Estimate::ranks`]); such a
/// declaration's `cache` says how many layers it is charged as.
///
/// A layout vLLM 0.33 would not start with is refused with vLLM's reason:
/// TP not dividing the query heads, pipeline stages on a family without
/// pipeline support, decode context parallelism against vLLM's TP and KV-head
/// rules, its interleave, or over sliding or chunked layers
/// ([`KvError::Parallel`]); an MLA latent in a format no MLA backend takes
/// ([`KvError::Config`] on `kv_format`). Under decode context parallelism
/// full attention and MLA hold one DCP rank's share of each row,
/// `cdiv(max_model_len, dcp)` tokens in whole blocks.
///
/// ```
/// use kv_engines::estimate::{estimate, EstimateSettings};
///
/// let llama = serde_json::json!({
///     "num_hidden_layers": 32, "num_key_value_heads": 8, "hidden_size": 4096,
///     "num_attention_heads": 32, "torch_dtype": "bfloat16",
/// });
/// let estimate = estimate(&llama, &EstimateSettings::new().positions(8192))?;
/// assert_eq!(estimate.specs[0].layout.bytes_per_position(), Some(Ok(131_072)));
/// assert_eq!(estimate.specs[0].bytes_per_row(), Ok(131_072 * 8192));
/// # Ok::<(), kv_core::KvError>(())
/// ```
pub fn estimate(config: &Value, settings: &EstimateSettings) -> Result<Estimate, KvError> {
    for (name, value) in [
        ("block_size", settings.block_size),
        ("max_num_batched_tokens", settings.max_num_batched_tokens),
        ("pipeline_stages", settings.engine.pipeline_stages),
        ("tensor_parallel", settings.engine.tensor_parallel),
        (
            "decode_context_parallel",
            settings.engine.decode_context_parallel,
        ),
        ("dcp_interleave", settings.engine.dcp_interleave),
    ] {
        if value == 0 {
            return Err(config_error(
                "estimate settings",
                format!("`{name}` is 0; it must be positive"),
            ));
        }
    }
    if settings.positions == Some(0) {
        return Err(config_error(
            "estimate settings",
            "`positions` is 0; it must be positive".to_owned(),
        ));
    }
    let hf = given_values(config, &settings.values)?.with_dtype_rule(DTypeRule::VllmAuto);
    let rules = families::rules(&hf);
    if let Some(words) = rules.and_then(|row| row.unsized_when?(&hf)) {
        return Err(config_error("model", words));
    }
    if let Some(Holds::Unsized(words)) = rules.map(|row| row.holds) {
        let model_type = hf
            .model_types()
            .first()
            .copied()
            .unwrap_or_default()
            .to_owned();
        return Err(config_error(
            "model",
            format!("`model_type` {model_type}: {words}"),
        ));
    }
    if settings.vllm_serves {
        refusals::check_served(&hf)?;
        model_class::check(config, &settings.values)?;
    }
    let (max_model_len, source) = max_len::max_model_len(&hf, settings)?;
    refusals::check_layout(&hf, settings)?;
    let (detected, paging, mut specs, packing) =
        match detect_packed(&hf, settings, max_model_len, &source)? {
            Some((detected, paging, specs, packing)) => (detected, paging, specs, Some(packing)),
            None => {
                let (detected, paging, specs) = detect(&hf, settings, max_model_len, &source)?;
                (detected, paging, specs, None)
            }
        };
    refusals::check_dcp(&hf, settings, paging.block_size, &specs)?;
    refusals::check_format(&hf, &specs)?;
    refusals::check_block_size(settings, &specs)?;
    // Where vLLM's pool charges a kind more layers than it has, its cache says so.
    let grouping = Grouping::of(&specs, paging.block_size, packing.as_ref())?;
    for spec in &mut specs {
        if let Some(padding) = grouping.padding(&spec.name) {
            spec.cache = format!("{}; {padding}", spec.cache).into();
        }
    }
    let unread: Vec<String> = hf
        .unread_values()
        .into_iter()
        .chain(
            settings
                .values
                .keys()
                .filter(|k| k.contains('.'))
                .filter_map(|key| {
                    let (_, inner) = key.split_once('.')?;
                    hf.was_asked(inner)
                        .then_some(())
                        .map_or(Some(key.clone()), |()| None)
                }),
        )
        .collect();
    if !unread.is_empty() {
        return Err(config_error(
            "given values",
            format!(
                "{} given, but nothing kv reads for this config looks at {}; \
                 check the spelling (a key is read as the config writes it)",
                unread
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if unread.len() == 1 { "it" } else { "them" }
            ),
        ));
    }
    let mut said = vec![detected];
    let unverified_family = match hf.model_types().first() {
        Some(model_type) if hf.family().is_none() => Some(format!(
            "`model_type` {model_type} is not in kv's table of model families"
        )),
        None => Some("no `model_type`".to_owned()),
        _ => None,
    };
    if let Some(why) = &unverified_family {
        said.push(format!(
            "{why}: read by the generic keys, no loader defaults applied; the family is \
             unverified (--strict refuses it)"
        ));
    }
    said.extend(hf.notes());
    said.push(source);
    Ok(Estimate {
        detected: said.join("; "),
        convention: paging.convention(settings),
        max_model_len,
        block_size: paging.block_size,
        tensor_parallel: settings.engine.tensor_parallel,
        specs,
        decode_context_parallel: settings.engine.decode_context_parallel,
        unverified_family,
        packing,
    })
}

/// The config with the given values: a plain key over every section, a
/// dotted key (`text_config.layer_types`) set in its section.
fn given_values(config: &Value, values: &Map<String, Value>) -> Result<HfConfig, KvError> {
    let mut config = config.clone();
    let mut plain = Vec::new();
    for (key, value) in values {
        match key.split_once('.') {
            Some((section, inner)) => {
                let Some(map) = config.as_object_mut() else {
                    return Err(config_error(
                        "given values",
                        format!("`{key}`: the config is not a JSON object"),
                    ));
                };
                let entry = map
                    .entry(section.to_owned())
                    .or_insert_with(|| Value::Object(Map::new()));
                match entry.as_object_mut() {
                    Some(section_map) => {
                        section_map.insert(inner.to_owned(), value.clone());
                    }
                    None => {
                        return Err(config_error(
                            "given values",
                            format!("`{key}`: `{section}` in the config is not an object"),
                        ))
                    }
                }
            }
            None => plain.push((key, value)),
        }
    }
    let mut hf = HfConfig::from_value(config);
    for (key, value) in plain {
        hf = hf.with_value(key, value.clone());
    }
    Ok(hf)
}

/// What a packed family's detection finds: its words, paging, declarations
/// and packing.
type PackedDetection = (String, Paging, Vec<KvSpec>, Packing);

/// The declarations and packing of a family vLLM packs block-outermost
/// (Step-5, [`step5`]; DeepSeek-V4, [`deepseek_v4`]); `None` for any other.
fn detect_packed(
    hf: &HfConfig,
    settings: &EstimateSettings,
    max_model_len: u64,
    source: &str,
) -> Result<Option<PackedDetection>, KvError> {
    let builder = |paging: Paging, detected: &str| Builder {
        settings,
        max_model_len,
        paging,
        note: format!("estimated from config.json: {detected}; {source}"),
    };
    match families::rules(hf).map(|row| row.holds) {
        Some(Holds::Step5) => {
            let plain = Paging::plain(settings.block_size);
            let step5 = step5::read(hf, hf.geometry()?.layers)?;
            let detected = format!(
                "Step-5: {} sliding and {} sparse (DSA) layers, each DSA layer with a summary \
                 cache (256 B per 8 tokens) and a one-page tail ring beside its K/V, packed \
                 block-outermost as vLLM's DSA backend lays them out; {}",
                step5.pattern.count(LayerKind::SlidingAttention),
                step5.pattern.count(LayerKind::FullAttention),
                step5.said
            );
            let (specs, packing) = step5.specs(hf, &builder(plain, &detected))?;
            if settings.vllm_serves {
                step5.check(hf, settings, &specs)?;
            }
            Ok(Some((detected, plain, specs, packing)))
        }
        Some(Holds::DeepseekV4) => {
            let Some((_, layers)) = hf.count_if_set("layers", "num_hidden_layers")? else {
                return Err(config_error(
                    "DeepSeek-V4 layers",
                    "`num_hidden_layers` is not set".to_owned(),
                ));
            };
            let v4 = deepseek_v4::read(hf, layers)?;
            if settings.vllm_serves {
                v4.check(settings)?;
            }
            let paging = Paging::backend(
                deepseek_v4::ENGINE_BLOCK,
                "DeepSeek-V4's sparse MLA kernels run blocks of 256 only (sparse_mla.py:60)",
            );
            let detected = format!(
                "DeepSeek-V4: {}; each cache in blocks of its own, packed block-outermost as \
                 vLLM's sparse MLA backend lays them out",
                v4.said
            );
            let (specs, packing) = v4.specs(&builder(paging, &detected))?;
            Ok(Some((detected, paging, specs, packing)))
        }
        _ => Ok(None),
    }
}

fn detect(
    hf: &HfConfig,
    settings: &EstimateSettings,
    max_model_len: u64,
    source: &str,
) -> Result<(String, Paging, Vec<KvSpec>), KvError> {
    let plain = Paging::plain(settings.block_size);
    let builder = |paging: Paging, detected: &str| Builder {
        settings,
        max_model_len,
        paging,
        note: format!("estimated from config.json: {detected}; {source}"),
    };
    // MLA is a family's: vLLM reads `kv_lora_rank` as MLA only for the
    // families of its `is_deepseek_mla` list (MiniCPM3 has the key and
    // caches plain heads); a family kv does not know is read by its keys.
    let holds = families::rules(hf).map(|row| row.holds);
    let mla_family = matches!(holds, Some(Holds::Mla | Holds::KdaBesideMla) | None);
    if holds == Some(Holds::KdaBesideMla) {
        let mla = hf.mla()?;
        if let Some(kda) = kda::read(hf, mla.layers, hf.dtype()?)? {
            return kda_beside_mla(hf, settings, mla, kda, builder);
        }
    }
    if holds == Some(Holds::Inkling) {
        let inkling = inkling::read(hf, hf.geometry()?.layers)?;
        let dtype = hf.dtype()?;
        inkling.check(settings, dtype)?;
        let local = inkling.pattern.count(LayerKind::SlidingAttention);
        let detected = format!(
            "Inkling: {local} local (sliding, `local_layer_ids`) and {} global layers, each \
             with a short-convolution state paged beside its attention (window and block \
             {}); {}",
            inkling.pattern.layers() - local,
            inkling.kernel,
            inkling.said
        );
        let paging = Paging::plain(settings.block_size);
        let specs = inkling.specs(hf, &builder(paging, &detected), dtype)?;
        return Ok((detected, paging, specs));
    }
    if mla_family && hf.value("kv_lora_rank").is_some() {
        let mla = hf.mla()?;
        let detected = format!(
            "MLA: `kv_lora_rank` {} + `qk_rope_head_dim` {} per token per layer, {} layers",
            mla.kv_lora_rank, mla.qk_rope_head_dim, mla.layers
        );
        if let Some(keys) = indexer::indexer_keys(hf, mla.layers)? {
            let layers = match &keys.shared {
                Some(shared) => format!(
                    "on the {} layers {} gives an indexer of their own (the other {} reuse an \
                     earlier layer's top-k and keep none)",
                    shared.full,
                    shared.source,
                    mla.layers - shared.full
                ),
                None => "per layer".to_owned(),
            };
            let detected = format!(
                "{detected}, and a sparse-attention indexer's keys beside it (`index_head_dim` \
                 {} fp8 + a float32 scale per 128: {} B per token {layers})",
                keys.head_dim, keys.width
            );
            let paging = Paging::sparse_mla(settings, hf, &mla)?;
            let builder = builder(paging, &detected);
            let layers = mla.layers;
            let latent = builder.latent(mla, hf)?;
            let keys = builder.indexer_keys(layers, keys)?;
            return Ok((detected, paging, vec![latent, keys]));
        }
        let paging = Paging::mla(settings, hf, &mla)?;
        let spec = builder(paging, &detected).latent(mla, hf)?;
        return Ok((detected, paging, vec![spec]));
    }
    indexer::refuse_indexer(hf)?;
    let every_layer_hybrid = matches!(
        families::rules(hf).map(|row| row.holds),
        Some(Holds::MambaAndAttentionInEveryLayer)
    );
    if every_layer_hybrid || hf.has_layer_pattern() {
        let (pattern, detected) = if every_layer_hybrid {
            let layers = hf.mamba()?.layers;
            let pattern = LayerPattern::every_nth(
                layers,
                1,
                LayerKind::Hybrid,
                LayerKind::Hybrid,
                EVERY_LAYER_HYBRID,
            )?;
            let model_type = hf.model_types().first().copied().unwrap_or_default();
            let detected = format!(
                "attention and Mamba2 side by side in every layer (`model_type` \
                 {model_type}: vLLM's FalconH1ParallelHybrid keeps a cache of each): {layers} \
                 full_attention and {layers} mamba layers"
            );
            (pattern, detected)
        } else {
            let pattern = hf.layer_pattern()?;
            let detected = format!("layer pattern: {}", pattern.reason());
            (pattern, detected)
        };
        let groups = cache_groups(&pattern)?;
        let counts: Vec<(LayerKind, u64)> = groups
            .iter()
            .map(|(kind, layers)| (*kind, layers.count(*kind)))
            .collect();
        let paging = Paging::for_groups(hf, settings, &counts)?;
        let builder = builder(paging, &detected);
        let mut specs = Vec::new();
        let mut errors = Vec::new();
        for ((kind, layers), (_, count)) in groups.into_iter().zip(counts) {
            match builder.group(hf, kind, count) {
                Ok(spec) => specs.push(spec.in_layers(layers, kind)),
                Err(error) => errors.push(error),
            }
        }
        if let Some(error) = KvError::from_all(errors) {
            return Err(error);
        }
        return Ok((detected, paging, specs));
    }
    if let Some((key, encoder)) = hf.value("max_source_positions") {
        let (detected, specs) = vllm::encoder_decoder(hf, &key, encoder, |d| builder(plain, d))?;
        return Ok((detected, plain, specs));
    }
    if let Some(Holds::MambaOnly) = families::rules(hf).map(|row| row.holds) {
        let model_type = hf
            .model_types()
            .first()
            .copied()
            .unwrap_or_default()
            .to_owned();
        let detected = format!("Mamba in every layer (`model_type` {model_type})");
        let layers = hf.mamba()?.layers;
        let paging = Paging::for_groups(hf, settings, &[(LayerKind::Mamba, layers)])?;
        let spec = builder(paging, &detected).mamba(hf, layers)?;
        return Ok((detected, paging, vec![spec]));
    }
    let geometry = hf.geometry()?;
    match hf.sliding_window_if_set()? {
        None => {
            let detected = "attention in every layer: no layer pattern, no sliding window, no MLA";
            let paging = Paging::attention(hf, settings, &[LayerKind::FullAttention])?;
            let spec = builder(paging, detected).full(geometry, "full_attention", hf)?;
            Ok((detected.to_owned(), paging, vec![spec]))
        }
        Some(window) => {
            let detected = format!(
                "sliding attention in every layer: `sliding_window` {window} and no layer \
                 pattern (vLLM slides every layer of such a model)"
            );
            let paging = Paging::attention(hf, settings, &[LayerKind::SlidingAttention])?;
            let spec = builder(paging, &detected).sliding(geometry, window, hf)?;
            Ok((detected, paging, vec![spec]))
        }
    }
}

/// Kimi K3 and BailingMoeV3: KDA state in the layers `kda` marks, an MLA
/// latent in the others, each declaration placed on the model's layers.
fn kda_beside_mla<'a>(
    hf: &HfConfig,
    settings: &'a EstimateSettings,
    mut mla: MlaConfig,
    kda: kda::Kda,
    builder: impl Fn(Paging, &str) -> Builder<'a>,
) -> Result<(String, Paging, Vec<KvSpec>), KvError> {
    let kda_layers = kda.pattern.count(LayerKind::LinearAttention);
    let mla_layers = kda.pattern.count(LayerKind::FullAttention);
    let detected = format!(
        "Kimi Delta Attention (KDA) in the {kda_layers} layers `{}` marks ({} heads of {}, \
         conv kernel {}; FlashKDA {} the prefill), an MLA latent (`kv_lora_rank` {} + \
         `qk_rope_head_dim` {}) in the other {mla_layers}",
        kda.pattern.source(),
        kda.heads,
        kda.head_dim,
        kda.conv_kernel,
        if kda.flashkda { "runs" } else { "does not run" },
        mla.kv_lora_rank,
        mla.qk_rope_head_dim
    );
    let paging = Paging::kda_beside_mla(hf, settings, &mla, &kda)?;
    let builder = builder(paging, &detected);
    let mut specs = Vec::new();
    if mla_layers > 0 {
        mla.layers = mla_layers;
        let latent = builder.latent(mla, hf)?;
        specs.push(latent.in_layers(kda.pattern.clone(), LayerKind::FullAttention));
    }
    if kda_layers > 0 {
        let state = builder.kda(hf, &kda, kda_layers)?;
        specs.push(state.in_layers(kda.pattern.clone(), LayerKind::LinearAttention));
    }
    Ok((detected, paging, specs))
}

/// The key of the pattern of a model whose every layer is hybrid.
const EVERY_LAYER_HYBRID: &str = "the family's rule";

/// The caches of a pattern's layers, in order of first appearance: each kind
/// that holds one, with the pattern it is placed in. A `hybrid` layer holds
/// attention and Mamba state both (vLLM registers an attention layer and a
/// Mamba layer for it), so it counts in each, and each of those kinds gets
/// the pattern with its hybrid layers read as that kind, which pipeline
/// stages split by layer. Layers sharing another's K/V hold none.
fn cache_groups(pattern: &LayerPattern) -> Result<Vec<(LayerKind, LayerPattern)>, KvError> {
    let mut kinds: Vec<LayerKind> = Vec::new();
    for (kind, _) in pattern.groups() {
        let holds: &[LayerKind] = match kind {
            LayerKind::KvShared | LayerKind::Mlp => &[],
            LayerKind::Hybrid => &[LayerKind::FullAttention, LayerKind::Mamba],
            _ => std::slice::from_ref(&kind),
        };
        for held in holds {
            if !kinds.contains(held) {
                kinds.push(*held);
            }
        }
    }
    kinds
        .into_iter()
        .map(|kind| Ok((kind, hybrid_as(pattern, kind)?)))
        .collect()
}

/// `pattern` with its hybrid layers read as `kind`.
fn hybrid_as(pattern: &LayerPattern, kind: LayerKind) -> Result<LayerPattern, KvError> {
    let hybrids = pattern.count(LayerKind::Hybrid);
    if hybrids == 0 {
        return Ok(pattern.clone());
    }
    if hybrids == pattern.layers() {
        // By rule, not by list: the layer count is the config's.
        return Ok(LayerPattern::every_nth(
            pattern.layers(),
            1,
            kind,
            kind,
            EVERY_LAYER_HYBRID,
        )?);
    }
    let kinds = pattern
        .kinds()
        .map(|layer| {
            if layer == LayerKind::Hybrid {
                kind
            } else {
                layer
            }
        })
        .collect();
    Ok(LayerPattern::from_kinds(
        kinds,
        format!("{}, its hybrid layers as {kind}", pattern.source()),
    )?)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{shipped, tiny};
    use super::*;
    use kv_core::Storage;

    fn at_8192() -> EstimateSettings {
        EstimateSettings::new().positions(8192)
    }

    fn per_position(spec: &KvSpec) -> u64 {
        spec.layout.bytes_per_position().unwrap().unwrap()
    }

    #[test]
    fn llama_3_8b_is_131_072_bytes_per_position() {
        let e = estimate(&shipped("llama-3-8b"), &at_8192()).unwrap();
        assert_eq!(e.specs.len(), 1);
        // 32 layers x 8 heads x (128 + 128) x 2 bytes.
        assert_eq!(per_position(&e.specs[0]), 32 * 8 * 256 * 2);
        assert_eq!(per_position(&e.specs[0]), 131_072);
        // 8192 positions are 512 whole blocks of 16.
        assert_eq!(e.specs[0].bytes_per_row(), Ok(131_072 * 8192));
        assert!(
            e.detected.starts_with("attention in every layer"),
            "{}",
            e.detected
        );
        assert!(e.detected.contains("max_model_len 8192 (given)"));
        assert!(e.specs[0].cache.contains("FullAttentionSpec"));
    }

    #[test]
    fn deepseek_v2_lite_is_31_104_bytes_per_position() {
        let e = estimate(&shipped("deepseek-v2-lite"), &at_8192()).unwrap();
        // 27 layers x (512 + 64) x 2 bytes, no K/V doubling.
        assert_eq!(per_position(&e.specs[0]), 27 * 576 * 2);
        assert_eq!(per_position(&e.specs[0]), 31_104);
        assert!(e.detected.starts_with("MLA"));
    }

    #[test]
    fn mistral_slides_every_layer_by_vllm_rules() {
        let e = estimate(&shipped("mistral-7b-v0.1"), &at_8192()).unwrap();
        assert_eq!(e.specs.len(), 1);
        // Two batches in flight (async scheduling): min(4095 + 2 x 2048, 8192)
        // = 8191 -> 512 blocks of 16, + 1 block = 513 blocks = 8208 positions.
        assert_eq!(e.specs[0].positions().unwrap().count, 8208);
        assert_eq!(e.specs[0].bytes_per_row(), Ok(131_072 * 8208));
        assert!(e.detected.contains("sliding attention in every layer"));
    }

    #[test]
    fn gemma_3_takes_its_loaders_pattern_and_splits_52_and_10() {
        // The published config leaves sliding_window_pattern to transformers'
        // Gemma3TextConfig, whose default is 6: applied and said.
        let e = estimate(&shipped("gemma-3-27b"), &at_8192()).unwrap();
        assert!(
            e.detected
                .contains("`sliding_window_pattern` 6 (transformers Gemma3TextConfig default)"),
            "{}",
            e.detected
        );
        let given = estimate(
            &shipped("gemma-3-27b"),
            &at_8192().set("sliding_window_pattern", 6),
        )
        .unwrap();
        assert_eq!(given.specs, e.specs);
        assert!(!given
            .detected
            .contains("`sliding_window_pattern` 6 (transformers"));
        let layers: Vec<(&str, u64)> = e
            .specs
            .iter()
            .map(|s| (s.name.as_ref(), s.layout.layers()))
            .collect();
        assert_eq!(layers, [("sliding_attention", 52), ("full_attention", 10)]);
        // 16 heads x 128 x (K + V) x 2 bytes = 8,192 per layer per token.
        assert_eq!(per_position(&e.specs[0]), 52 * 8192);
        assert_eq!(per_position(&e.specs[1]), 10 * 8192);
        // min(1023 + 2 x 2048, 8192) = 5119 -> 320 blocks, + 1 = 321 blocks.
        assert_eq!(e.specs[0].positions().unwrap().count, 321 * 16);
        assert_eq!(e.specs[1].positions().unwrap().count, 8192);
        // vLLM 0.33: 52 x 5136 x 8192 + 10 x 8192 x 8192.
        let per_row: u64 = e.specs.iter().map(|s| s.bytes_per_row().unwrap()).sum();
        assert_eq!(per_row, 2_858_942_464);
        assert!(e.specs.iter().all(|s| s.layer_group.is_some()));
        assert!(e.specs.iter().all(|s| s.validate("gemma").is_ok()));
    }

    #[test]
    fn jamba_is_4_attention_and_28_mamba_in_vllms_hybrid_pages() {
        let e = estimate(&shipped("jamba-v0.1"), &at_8192()).unwrap();
        let layers: Vec<(&str, u64)> = e
            .specs
            .iter()
            .map(|s| (s.name.as_ref(), s.layout.layers()))
            .collect();
        assert_eq!(layers, [("mamba", 28), ("full_attention", 4)]);
        // State page: Mamba1 conv 3 x 8192 + ssm 8192 x 16, bf16 = 311,296 B.
        // Attention: 8 heads x 128 x 2 x 2 B = 4,096 B per token per layer, so
        // the block is 16 x cdiv(311,296, 16 x 4,096) = 80 and the state page
        // is padded to 80 x 4,096 = 327,680 B; prefix caching (align) keeps 2.
        assert_eq!(e.block_size, 80);
        assert_eq!(e.specs[0].bytes_per_row(), Ok(28 * 2 * 327_680));
        // 8192 positions are 103 blocks of 80 (8,240 positions).
        assert_eq!(e.specs[1].positions().unwrap().count, 103 * 80);
        assert_eq!(e.specs[1].bytes_per_row(), Ok(4 * 33_751_040));
        let per_row: u64 = e.specs.iter().map(|s| s.bytes_per_row().unwrap()).sum();
        assert_eq!(per_row, 153_354_240);
        assert!(
            e.convention.contains("block_size 80 (raised from 16"),
            "{}",
            e.convention
        );
        assert!(e.specs[0]
            .cache
            .contains("mamba cache mode align: 2 page(s) of 327680 B"));
        assert!(e.specs[1].cache.contains("block 80"));
        assert!(e.specs.iter().all(|s| s.validate("jamba").is_ok()));
    }

    #[test]
    fn jambas_block_follows_the_kv_format_and_speculative_tokens_add_pages() {
        let fp8 = at_8192().kv_format(Storage::from_name("f8e4m3").unwrap());
        // 2,048 B per token per layer: 16 x cdiv(311,296, 32,768) = 160.
        assert_eq!(
            estimate(&shipped("jamba-v0.1"), &fp8).unwrap().block_size,
            160
        );
        let nvfp4 = at_8192().kv_format(Storage::from_name("nvfp4").unwrap());
        // nvfp4: 128 elements = 8 blocks of 9 B, x 8 heads x 2 = 1,152 B per
        // token per layer: 16 x cdiv(311,296, 18,432) = 16 x 17 = 272.
        assert_eq!(
            estimate(&shipped("jamba-v0.1"), &nvfp4).unwrap().block_size,
            272
        );
        let spec = estimate(&shipped("jamba-v0.1"), &at_8192().speculative_tokens(2)).unwrap();
        assert_eq!(spec.specs[0].bytes_per_row(), Ok(28 * 4 * 327_680));
        // Without prefix caching, mode none keeps one page.
        let none = estimate(&shipped("jamba-v0.1"), &at_8192().prefix_caching(false)).unwrap();
        assert_eq!(none.specs[0].bytes_per_row(), Ok(28 * 327_680));
    }

    #[test]
    fn a_config_without_a_length_takes_its_class_default_as_vllm_loads_it() {
        // The shipped configs carry no length key; vLLM's loader fills the
        // transformers class default, and vLLM derives max_model_len from it.
        for (name, len, class) in [
            ("jamba-v0.1", 262_144, "JambaConfig"),
            ("mistral-7b-v0.1", 131_072, "MistralConfig"),
            ("qwen3-next-80b-a3b", 32_768, "Qwen3NextConfig"),
        ] {
            let e = estimate(&shipped(name), &EstimateSettings::new()).unwrap();
            assert_eq!(e.max_model_len, len, "{name}");
            assert!(
                e.detected.contains(&format!(
                    "`max_position_embeddings` {len} (transformers {class} default)"
                )),
                "{name}: {}",
                e.detected
            );
        }
        // Mamba's config classes have no length at all: vLLM assumes 2048.
        let mamba = serde_json::json!({
            "architectures": ["FalconMambaForCausalLM"], "model_type": "falcon_mamba",
            "hidden_size": 4096, "num_hidden_layers": 64, "expand": 2, "state_size": 16,
            "conv_kernel": 4, "intermediate_size": 8192, "torch_dtype": "bfloat16",
        });
        let e = estimate(&mamba, &EstimateSettings::new()).unwrap();
        assert_eq!(e.max_model_len, 2048);
        assert!(
            e.detected
                .contains("\"Assuming the model's maximum length is 2048.\""),
            "{}",
            e.detected
        );
        // A length given is kept, longer or not: vLLM checks it against none.
        let given = estimate(&mamba, &EstimateSettings::new().positions(100_000)).unwrap();
        assert_eq!(given.max_model_len, 100_000);
        // A family whose class default kv does not know stays an error.
        let llama = tiny(serde_json::json!({}));
        assert!(estimate(&llama, &EstimateSettings::new()).is_err());
    }

    #[test]
    fn an_fp8_mla_latent_takes_flashmlas_block_of_64() {
        let fp8 = EstimateSettings::new()
            .positions(3000)
            .kv_format(Storage::from_name("fp8").unwrap());
        // DeepSeek-V2-Lite: 27 layers of a 576-wide latent, 1 B each. vLLM on
        // Hopper: FLASHMLA, block 64: cdiv(3000, 64) = 47 blocks = 3,008
        // positions; a block of all layers 27 x 64 x 576 = 995,328 B.
        let e = estimate(&shipped("deepseek-v2-lite"), &fp8).unwrap();
        assert_eq!(e.block_size, 64);
        assert_eq!(e.specs[0].positions().unwrap().count, 3008);
        assert_eq!(e.specs[0].bytes_per_row(), Ok(47 * 995_328));
        assert!(
            e.convention
                .contains("block_size 64 (FLASHMLA, vLLM's MLA backend for an fp8"),
            "{}",
            e.convention
        );
        // In bf16 FLASH_ATTN_MLA keeps 16: cdiv(3000, 16) = 188 blocks.
        let bf16 = estimate(
            &shipped("deepseek-v2-lite"),
            &EstimateSettings::new().positions(3000),
        )
        .unwrap();
        assert_eq!(
            (bf16.block_size, bf16.specs[0].positions().unwrap().count),
            (16, 3008)
        );
        assert!(!bf16.convention.contains("FLASHMLA"));
        // A block the user gives is kept: 128 is a multiple of FLASHMLA's 64.
        let given = estimate(&shipped("deepseek-v2-lite"), &fp8.clone().block_size(128)).unwrap();
        assert_eq!(given.block_size, 128);
        assert!(
            !given.convention.contains("TRITON_MLA"),
            "{}",
            given.convention
        );
    }

    #[test]
    fn a_block_of_16_given_is_not_the_default_for_an_fp8_latent() {
        let v2_lite = shipped("deepseek-v2-lite");
        let fp8 = EstimateSettings::new()
            .positions(3000)
            .kv_format(Storage::from_name("fp8").unwrap());
        // `--block-size 16` given: vLLM's selector skips FLASHMLA (blocks of
        // 64) and runs TRITON_MLA at 16: cdiv(3000, 16) = 188 blocks = 3,008
        // positions; a row 188 x 27 layers x 16 x 576 B = 188 x 248,832 B.
        let sixteen = estimate(&v2_lite, &fp8.clone().block_size(16)).unwrap();
        assert_eq!(sixteen.block_size, 16);
        assert_eq!(sixteen.specs[0].positions().unwrap().count, 3008);
        assert_eq!(sixteen.specs[0].bytes_per_row(), Ok(46_780_416));
        assert!(
            sixteen
                .convention
                .contains("block_size 16 (TRITON_MLA: the block given"),
            "{}",
            sixteen.convention
        );
        // 32 given: TRITON_MLA too, cdiv(3000, 32) = 94 blocks = 3,008.
        let thirty_two = estimate(&v2_lite, &fp8.clone().block_size(32)).unwrap();
        assert_eq!(
            (thirty_two.block_size, thirty_two.specs[0].bytes_per_row()),
            (32, Ok(94 * 27 * 32 * 576))
        );
        // A bf16 latent given 16 runs FLASH_ATTN_MLA at 16, as by default.
        let bf16 = estimate(
            &v2_lite,
            &EstimateSettings::new().positions(3000).block_size(16),
        )
        .unwrap();
        assert_eq!(bf16.block_size, 16);
        assert!(
            !bf16.convention.contains("TRITON_MLA"),
            "{}",
            bf16.convention
        );
        // A block no MLA backend runs (not a multiple of 16) is refused, in
        // either storage.
        for settings in [
            fp8.block_size(8),
            EstimateSettings::new().positions(3000).block_size(24),
        ] {
            let refused = estimate(&v2_lite, &settings).unwrap_err().to_string();
            assert!(
                refused.contains("no MLA backend on Hopper runs a block of")
                    && refused.contains("for `mla_latent`")
                    && refused.contains("No valid attention backend found"),
                "{refused}"
            );
        }
    }

    #[test]
    fn speculative_tokens_lengthen_mamba2_and_gated_deltanet_conv_states() {
        // Mamba-Codestral-7B: conv over d_inner 8,192 + 2 x 8 groups x 128
        // = 10,240 channels; ssm 128 heads x 64 x 128; bf16.
        let codestral = serde_json::json!({
            "architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2",
            "hidden_size": 4096, "num_hidden_layers": 64, "num_heads": 128, "head_dim": 64,
            "n_groups": 8, "state_size": 128, "conv_kernel": 4, "expand": 2,
            "torch_dtype": "bfloat16",
        });
        // No speculation: conv 10,240 x 3 x 2 B = 61,440, ssm 2,097,152:
        // 2,158,592 B, one page (no attention, so mode none).
        let plain = estimate(&codestral, &at_8192()).unwrap();
        assert_eq!(plain.specs[0].bytes_per_row(), Ok(64 * 2_158_592));
        // 2 speculative tokens (vLLM's `num_spec`): conv 10,240 x (3 + 2) x
        // 2 B = 102,400, so 2,199,552 B a page, and 2 pages more.
        let spec = estimate(&codestral, &at_8192().speculative_tokens(2)).unwrap();
        assert_eq!(spec.specs[0].bytes_per_row(), Ok(64 * 3 * 2_199_552));
        assert!(
            spec.specs[0]
                .cache
                .contains("conv over d_conv - 1 + 2 speculative = 5 positions"),
            "{}",
            spec.specs[0].cache
        );
        // Qwen3-Next at tp 8, 1 speculative token: a rank's conv is
        // (2 x 16 x 128 + 32 x 128) / 8 = 1,024 channels x (3 + 1) x 2 B =
        // 8,192 B, ssm 4 x 128 x 128 x 2 B = 131,072 B: 139,264 B. One KV
        // head per rank: 256 x 2 x 2 B = 1,024 B per token, so the block is
        // 64 x cdiv(139,264, 65,536) = 192, as without speculation.
        let next = estimate(
            &shipped("qwen3-next-80b-a3b"),
            &at_8192().tensor_parallel(8).speculative_tokens(1),
        )
        .unwrap();
        assert_eq!(next.block_size, 192);
        assert!(
            next.specs[0]
                .cache
                .contains("conv over conv_kernel - 1 + 1 speculative = 4 positions"),
            "{}",
            next.specs[0].cache
        );
        assert!(
            next.specs[0].cache.contains("state 139264 B padded"),
            "{}",
            next.specs[0].cache
        );
    }

    #[test]
    fn qwen3_next_without_a_dtype_is_bf16_then_is_12_full_and_36_linear() {
        // No dtype key: float32 to vLLM, served in bf16, and said.
        let resolved = estimate(&shipped("qwen3-next-80b-a3b"), &at_8192()).unwrap();
        assert!(
            resolved
                .detected
                .contains("dtype bf16: none of `torch_dtype`"),
            "{}",
            resolved.detected
        );
        let e = estimate(
            &shipped("qwen3-next-80b-a3b"),
            &at_8192().set("torch_dtype", "bfloat16"),
        )
        .unwrap();
        assert_eq!(resolved.specs, e.specs);
        let layers: Vec<(&str, u64)> = e
            .specs
            .iter()
            .map(|s| (s.name.as_ref(), s.layout.layers()))
            .collect();
        assert_eq!(layers, [("linear_attention", 36), ("full_attention", 12)]);
        // conv (2 x 16 x 128 + 32 x 128) x 3 + ssm 32 x 128 x 128, bf16:
        // 1,097,728 B. Attention 2 heads x 256 x 2 x 2 B = 2,048 B per token
        // per layer. Gated DeltaNet checkpoints on a 64-token grid, so the
        // block is 64 x cdiv(1,097,728, 64 x 2,048) = 576, the page
        // 576 x 2,048 = 1,179,648 B, and align mode keeps 3 pages.
        assert_eq!(e.block_size, 576);
        assert_eq!(e.specs[0].bytes_per_row(), Ok(36 * 3 * 1_179_648));
        assert_eq!(per_position(&e.specs[1]), 12 * 2 * 512 * 2);
        // cdiv(8192, 576) = 15 blocks = 8,640 positions.
        assert_eq!(e.specs[1].bytes_per_row(), Ok(12 * 2048 * 8640));
    }

    #[test]
    fn whisper_has_self_and_cross_attention_over_the_decoder() {
        // No length key: WhisperConfig's max_target_positions 448, as vLLM's
        // loader fills it.
        let e = estimate(&shipped("whisper-large-v3"), &EstimateSettings::new()).unwrap();
        assert_eq!(e.max_model_len, 448);
        assert!(
            e.detected
                .contains("`max_target_positions` 448 (transformers WhisperConfig default)"),
            "{}",
            e.detected
        );
        // 448 tokens = 28 blocks of 16.
        assert_eq!(e.specs[0].positions().unwrap().count, 448);
        let names: Vec<&str> = e.specs.iter().map(|s| s.name.as_ref()).collect();
        assert_eq!(names, ["self_attention", "cross_attention"]);
        // 32 decoder layers x 20 heads x (64 + 64) x 2 bytes (f16).
        assert_eq!(per_position(&e.specs[0]), 32 * 20 * 128 * 2);
        assert_eq!(per_position(&e.specs[0]), 163_840);
        // vLLM 0.33 holds max_num_encoder_input_tokens (= max_num_batched_tokens
        // 2048) of cross-attention, not the encoder's 1500: 128 blocks of 16.
        assert_eq!(e.specs[1].positions().unwrap().count, 2048);
        assert_eq!(e.specs[1].bytes_per_row(), Ok(163_840 * 2048));
        assert!(e.detected.starts_with("encoder-decoder"), "{}", e.detected);
        assert!(e.specs[1].cache.contains("CrossAttentionSpec"));
    }

    #[test]
    fn positions_default_to_max_position_embeddings_and_say_so() {
        let e = estimate(&shipped("ming-talker"), &EstimateSettings::new()).unwrap();
        assert_eq!(e.max_model_len, 32768);
        assert!(e
            .detected
            .contains("max_model_len 32768 (`max_position_embeddings` of the config)"));
        assert!(e.specs[0]
            .note
            .as_deref()
            .unwrap()
            .contains("max_position_embeddings"));
        let err = estimate(&shipped("llama-3-8b"), &EstimateSettings::new()).unwrap_err();
        assert!(err.to_string().contains("give the length"), "{err}");
    }

    #[test]
    fn kv_format_and_bad_settings() {
        let q8 = at_8192().kv_format(Storage::from_name("q8_0").unwrap());
        let e = estimate(&shipped("llama-3-8b"), &q8).unwrap();
        // 128 elements = 4 blocks of 34 bytes, for K and for V.
        assert_eq!(per_position(&e.specs[0]), 32 * 8 * 2 * 4 * 34);
        let zero = estimate(&shipped("llama-3-8b"), &at_8192().block_size(0)).unwrap_err();
        assert!(zero.to_string().contains("`block_size` is 0"));
        let no_ranks = estimate(&shipped("jamba-v0.1"), &at_8192().tensor_parallel(0));
        assert!(no_ranks
            .unwrap_err()
            .to_string()
            .contains("`tensor_parallel` is 0"));
        let bad = estimate(&serde_json::json!({"num_hidden_layers": "x"}), &at_8192());
        assert!(bad.is_err());
        let not_object = estimate(&serde_json::json!([1, 2]), &at_8192());
        assert!(not_object.is_err());
    }

    #[test]
    fn hy3_fp8_says_the_scheme_has_no_format() {
        let e = estimate(&shipped("hy3-fp8"), &at_8192()).unwrap();
        assert!(e.specs[0]
            .assumes
            .as_deref()
            .unwrap()
            .contains("kv_cache_scheme"));
        assert_eq!(per_position(&e.specs[0]), 80 * 8 * 256 * 2);
    }

    fn positions(spec: &KvSpec) -> u64 {
        spec.positions().unwrap().count
    }

    #[test]
    fn max_num_batched_tokens_moves_vllms_sliding_window() {
        let mistral = shipped("mistral-7b-v0.1");
        // One batch in flight: min(4095 + 1024, 8192) = 5119 -> 320 blocks + 1.
        let one = at_8192()
            .async_scheduling(false)
            .max_num_batched_tokens(1024);
        assert_eq!(
            positions(&estimate(&mistral, &one).unwrap().specs[0]),
            321 * 16
        );
        // Two (async scheduling): min(4095 + 2 x 1024, 8192) = 6143 -> 384 + 1.
        let two = at_8192().max_num_batched_tokens(1024);
        assert_eq!(
            positions(&estimate(&mistral, &two).unwrap().specs[0]),
            385 * 16
        );
        // Three (async, 2 pipeline stages): min(4095 + 3 x 1024, 8192) = 7167 -> 448 + 1.
        let three = two.pipeline_stages(2);
        assert_eq!(
            positions(&estimate(&mistral, &three).unwrap().specs[0]),
            449 * 16
        );
    }

    #[test]
    fn positions_come_from_the_config_with_the_key_named_and_zero_is_an_error() {
        let nested = serde_json::json!({
            "model_type": "llava",
            "text_config": tiny(serde_json::json!({"max_position_embeddings": 4096})),
        });
        let e = estimate(&nested, &EstimateSettings::new()).unwrap();
        assert_eq!(e.max_model_len, 4096);
        assert!(
            e.detected
                .contains("`text_config.max_position_embeddings` of the config"),
            "{}",
            e.detected
        );
        let top = estimate(
            &tiny(serde_json::json!({"max_position_embeddings": 2048})),
            &EstimateSettings::new(),
        )
        .unwrap();
        assert!(
            top.detected
                .contains("`max_position_embeddings` of the config"),
            "{}",
            top.detected
        );
        for (bad, why) in [
            (serde_json::json!(0), "a count must be positive"),
            (serde_json::json!("4096"), "expected a positive integer"),
        ] {
            let config = tiny(serde_json::json!({"max_position_embeddings": bad}));
            let err = estimate(&config, &EstimateSettings::new())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("`max_position_embeddings` is {bad}; {why}")),
                "{err}"
            );
        }
        let missing = estimate(&tiny(serde_json::json!({})), &EstimateSettings::new())
            .unwrap_err()
            .to_string();
        assert!(
            missing
                .contains("looked at the given values, the top level, `text_config`, `llm_config`"),
            "{missing}"
        );
    }

    #[test]
    fn a_bad_sliding_window_is_an_error_not_no_window() {
        let config = tiny(serde_json::json!({"sliding_window": "wide"}));
        assert!(estimate(&config, &at_8192()).is_err());
        let none = tiny(serde_json::json!({}));
        assert_eq!(estimate(&none, &at_8192()).unwrap().specs.len(), 1);
    }

    #[test]
    fn zero_encoder_positions_and_chunks_are_errors() {
        let whisper = shipped("whisper-large-v3");
        let mut zero = whisper.clone();
        zero["max_source_positions"] = serde_json::json!(0);
        let at_448 = EstimateSettings::new().positions(448);
        assert!(estimate(&zero, &at_448).is_err());
        assert!(estimate(&whisper, &at_448).is_ok());
        let chunked = |chunk: u64| {
            tiny(serde_json::json!({
                "layer_types": ["chunked_attention", "full_attention"],
                "attention_chunk_size": chunk,
            }))
        };
        assert!(estimate(&chunked(0), &at_8192()).is_err());
        let e = estimate(&chunked(1), &at_8192()).unwrap();
        // cdiv(min(1 + 2 x 2048, 8192), 16) = 257 blocks of 16.
        assert_eq!(positions(&e.specs[0]), 257 * 16);
    }

    #[test]
    fn an_8_bit_float_kv_scheme_stores_fp8() {
        let config = tiny(serde_json::json!({
            "quantization_config": {"kv_cache_scheme": {"num_bits": 8, "type": "float"}},
        }));
        let e = estimate(&config, &at_8192()).unwrap();
        // 2 layers x 2 heads x (64 + 64) x 1 byte.
        assert_eq!(per_position(&e.specs[0]), 2 * 2 * 128);
    }
}
