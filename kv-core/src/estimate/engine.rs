//! vLLM 0.33's KV cache pool (`vllm/v1/core/kv_cache_planning.py`): how the
//! engine groups the layers of each kind, what it charges a request for
//! them, and what it logs or raises at start-up for a
//! `--kv-cache-memory-bytes`.
//!
//! The path `get_kv_cache_groups` takes for what kv estimates: the default
//! layout is LBNHC (FlashAttention declares no layouts, so
//! `_DEFAULT_LAYOUT_PREFERENCE` applies), which is not block-outermost, so
//! `_get_packed_kv_cache_groups` declines; one kind is one spec for all its
//! layers, so a one-kind model is one group (`_get_kv_cache_groups_uniform_spec`)
//! and a model of several kinds, whose pages the platform already made equal,
//! goes to `_get_kv_cache_groups_uniform_page_size`: each kind is cut into
//! groups of `group_size` layers (`layers[i::num_groups]`), the last ones
//! short, and one block of the shared pool spans the widest group. A request
//! takes `cdiv(max_memory_usage_bytes, page)` blocks from every group
//! (`_max_memory_usage_bytes_from_groups`), so a short group is charged as a
//! full one. Under pipeline parallelism the groups are formed over the whole
//! model (`get_global_kv_cache_groups`) and projected onto each stage
//! (`_project_kv_cache_groups_to_worker`), empty groups included: a stage's
//! block spans its widest projected group, and a request still takes blocks
//! from every group.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{config_error, overflow, EstimateSettings, VLLM_VERSION};
use crate::collection::collect::Collection;
use crate::error::{KvError, Overflow};
use crate::parallel::Parallel;
use crate::spec::layout::Layout;
use crate::spec::KvSpec;
use crate::units::thousands;

/// One kind of layer as vLLM's pool groups it (one estimate declaration).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Kind {
    name: String,
    /// The model's layers of this kind.
    layers: u64,
    /// Blocks one request at `max_model_len` takes in one layer's group.
    blocks: u64,
}

/// The model's kinds and vLLM's group size for them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Grouping {
    kinds: Vec<Kind>,
    group_size: u64,
    /// Why the group size is what it is.
    why: &'static str,
    /// Tokens per block, which every declaration of an estimate shares.
    block_size: u64,
}

impl Grouping {
    /// The grouping of an estimate's declarations (whole model), with
    /// `block_size` tokens per block.
    pub(super) fn of(specs: &[KvSpec], block_size: u64) -> Result<Grouping, KvError> {
        if block_size == 0 {
            return Err(config_error(
                "estimate settings",
                "`block_size` is 0; it must be positive".to_owned(),
            ));
        }
        let mut kinds = Vec::with_capacity(specs.len());
        for spec in specs {
            let layers = spec.layout.layers();
            if layers == 0 {
                return Err(config_error(
                    "figures",
                    format!("`{}` has 0 layers; vLLM groups none", spec.name),
                ));
            }
            kinds.push(Kind {
                name: spec.name.to_string(),
                layers,
                blocks: blocks(spec, block_size),
            });
        }
        let fewest = kinds.iter().map(|k| k.layers).min().unwrap_or(1);
        let most = kinds.iter().map(|k| k.layers).max().unwrap_or(1);
        // `max_num_layers < min_num_layers * 1.5`, in integers.
        let (group_size, why) = if u128::from(most) * 2 < u128::from(fewest) * 3 {
            (
                most,
                "the most layers of a kind, as that is under 1.5 x the fewest",
            )
        } else {
            (fewest, "the fewest layers of a kind")
        };
        Ok(Grouping {
            kinds,
            group_size,
            why,
            block_size,
        })
    }

    /// How many groups the kind's `layers` make.
    fn groups(&self, layers: u64) -> u64 {
        layers.div_ceil(self.group_size)
    }

    /// The pool's words for declaration `name` when vLLM charges it more
    /// layers than it has (whole model), else `None`: e.g. `vLLM's pool
    /// groups its 22 layers as 6 groups (4 x 4, 2 x 3 layers), each charged
    /// as 4: 24 layers (group size 4, the fewest layers of a kind)`.
    pub(super) fn padding(&self, name: &str) -> Option<String> {
        let kind = self.kinds.iter().find(|k| k.name == name)?;
        let groups = self.groups(kind.layers);
        let charged = groups.checked_mul(self.group_size)?;
        if charged == kind.layers {
            return None;
        }
        // layers[i::groups]: the first `layers % groups` hold one more.
        let (small, longer) = (kind.layers / groups, kind.layers % groups);
        let sizes = if longer == 0 {
            format!("{groups} x {small}")
        } else {
            format!("{longer} x {}, {} x {small}", small + 1, groups - longer)
        };
        Some(format!(
            "vLLM {VLLM_VERSION}'s pool groups its {} layers as {groups} group(s) ({sizes} \
             layers), each charged as {}: {charged} layers (group size {}, {})",
            kind.layers, self.group_size, self.group_size, self.why
        ))
    }

    /// What vLLM's pool charges the rank that holds `rank`, at
    /// `max_num_seqs` requests.
    pub(super) fn pool(&self, rank: &Collection, max_num_seqs: u64) -> Result<VllmPool, KvError> {
        let too_big = |step: &'static str| overflow("vLLM's pool".to_owned())(Overflow { step });
        let mut kinds = Vec::with_capacity(self.kinds.len());
        let mut widest = 0;
        let mut pages: Vec<u64> = Vec::new();
        let mut blocks_per_request = 0u64;
        for kind in &self.kinds {
            let held = rank.entries().iter().find(|e| e.spec.name == kind.name);
            let on_rank = held.map_or(0, |e| e.spec.layout.layers());
            // A group the rank holds none of still takes its blocks.
            let mut blocks_per_layer = kind.blocks;
            if let Some(entry) = held {
                pages.push(
                    page(&entry.spec, self.block_size)
                        .map_err(overflow(format!("one page of `{}`", kind.name)))?,
                );
                blocks_per_layer = blocks(&entry.spec, self.block_size);
            }
            let groups = self.groups(kind.layers);
            blocks_per_request = groups
                .checked_mul(blocks_per_layer)
                .and_then(|b| blocks_per_request.checked_add(b))
                .ok_or_else(|| too_big("vLLM's blocks per request"))?;
            // The stage holds a run of the kind's layers; group i takes every
            // `groups`-th of them, so the fullest holds cdiv(run, groups).
            widest = widest.max(on_rank.div_ceil(groups));
            kinds.push(VllmPoolKind {
                name: kind.name.clone(),
                layers: kind.layers,
                groups,
                layers_on_rank: on_rank,
                charged_layers: 0,
                blocks_per_layer,
            });
        }
        if widest == 0 {
            return Err(config_error(
                "figures",
                format!(
                    "rank {} holds no layer that keeps a cache, so vLLM's pool has no block \
                     size for it",
                    rank.parallel()
                ),
            ));
        }
        for kind in &mut kinds {
            kind.charged_layers = kind
                .groups
                .checked_mul(widest)
                .ok_or_else(|| too_big("vLLM's charged layers"))?;
        }
        // Pages differ only where kv's per-rank shapes leave them unequal;
        // vLLM pads every page to the largest (unify_kv_cache_spec_page_size).
        let page_bytes = pages.iter().copied().max().unwrap_or(0);
        let unequal_pages = pages.iter().any(|p| *p != page_bytes);
        let bytes_per_block = page_bytes
            .checked_mul(widest)
            .ok_or_else(|| too_big("vLLM's bytes per block"))?;
        let per_row_bytes = bytes_per_block
            .checked_mul(blocks_per_request)
            .ok_or_else(|| too_big("vLLM's bytes per request"))?;
        let peak_bytes = per_row_bytes
            .checked_mul(max_num_seqs)
            .ok_or_else(|| too_big("vLLM's bytes at max_num_seqs"))?;
        Ok(VllmPool {
            group_size: self.group_size,
            kinds,
            widest_group_layers: widest,
            page_bytes,
            unequal_pages,
            bytes_per_block,
            blocks_per_request,
            per_row_bytes,
            peak_bytes,
        })
    }
}

/// Blocks one request at `max_model_len` takes in one layer of `spec`: its
/// positions in whole blocks (`cdiv(max_memory_usage_bytes, page)`), or the
/// state pages it keeps.
fn blocks(spec: &KvSpec, block_size: u64) -> u64 {
    match &spec.layout {
        Layout::Recurrent(state) => state.slots,
        layout => layout
            .positions()
            .map_or(0, |p| p.count.div_ceil(block_size)),
    }
}

/// Bytes one layer of `spec` keeps per block of `block_size` tokens (an
/// attention page), or per state page.
fn page(spec: &KvSpec, block_size: u64) -> Result<u64, Overflow> {
    let per_token = match &spec.layout {
        Layout::Recurrent(state) => return state.bytes_per_layer(),
        Layout::Attention { geometry, .. } => geometry.with_layers(1).bytes_per_position()?,
        Layout::Latent { latent, .. } => {
            let mut one = *latent;
            one.layers = 1;
            one.bytes_per_position()?
        }
    };
    per_token.checked_mul(block_size).ok_or(Overflow {
        step: "one page (block size x bytes per token)",
    })
}

/// What vLLM's pool charges one rank: its layers grouped as the engine
/// groups them, a block as wide as the rank's widest group, and a request at
/// `max_model_len` taking blocks from every group. This is the figure vLLM's
/// memory check, its block count and its concurrency use; beside it, kv's
/// sum of layers is what the layers hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct VllmPool {
    /// Layers per group (vLLM's `group_size`, over the whole model): the
    /// fewest layers of a kind, or the most where that is under 1.5 x the
    /// fewest.
    pub group_size: u64,
    /// Each kind of layer, in the estimate's order.
    pub kinds: Vec<VllmPoolKind>,
    /// Layers of this rank in its widest group: one block spans them.
    pub widest_group_layers: u64,
    /// Bytes of one layer's page on this rank (the largest, where kinds differ).
    pub page_bytes: u64,
    /// Whether the kinds' pages on this rank differ (kv's per-rank shapes;
    /// vLLM makes them equal): each is then charged as the largest.
    pub unequal_pages: bool,
    /// Bytes of one block of the pool: `widest_group_layers x page_bytes`.
    pub bytes_per_block: u64,
    /// Blocks one request at `max_model_len` takes, every group's added.
    pub blocks_per_request: u64,
    /// `bytes_per_block x blocks_per_request`: vLLM's bytes for one request.
    pub per_row_bytes: u64,
    /// `per_row_bytes x max_num_seqs`.
    pub peak_bytes: u64,
}

/// One kind of layer in a [`VllmPool`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct VllmPoolKind {
    /// The declaration's name (`sliding_attention`, ...).
    pub name: String,
    /// The model's layers of this kind.
    pub layers: u64,
    /// vLLM's groups for them: `cdiv(layers, group_size)`.
    pub groups: u64,
    /// Of them, the layers this rank holds.
    pub layers_on_rank: u64,
    /// The layers this rank is charged for them: `groups x widest_group_layers`.
    pub charged_layers: u64,
    /// Blocks one request takes in each group of this kind.
    pub blocks_per_layer: u64,
}

/// What vLLM does at start-up with `--kv-cache-memory-bytes` per rank: the
/// line it logs, or the error it raises (`get_kv_cache_configs`,
/// `_check_enough_kv_cache_memory`, `update_kv_cache_capacity`). Assumes no
/// `num_gpu_blocks_override` and no GPU video decoding reserving memory
/// beside the cache.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct VllmStartup {
    /// `--kv-cache-memory-bytes`, per rank.
    pub kv_cache_memory_bytes: u64,
    /// The `max_model_len` vLLM checks and reports.
    pub max_model_len: u64,
    /// Whether vLLM starts, with the figures behind its words.
    #[serde(flatten)]
    pub outcome: StartupOutcome,
    /// vLLM's words: its log line when it starts, else its error.
    pub message: String,
}

/// Whether vLLM starts, with the figures behind its words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StartupOutcome {
    /// It starts: `GPU KV cache size: N tokens, Maximum concurrency ...`.
    Starts {
        /// The widest rank's bytes per block.
        bytes_per_block: u64,
        /// `kv_cache_memory_bytes // bytes_per_block`: the pool's blocks,
        /// the null block it holds back included, as vLLM's line counts them.
        num_blocks: u64,
        /// Blocks one request at `max_model_len` takes.
        blocks_per_request: u64,
        /// `int(num_blocks / blocks_per_request * max_model_len)`.
        num_tokens: u64,
    },
    /// Too little for one request at `max_model_len` once the null block is
    /// held back: vLLM raises, naming both figures.
    Refused {
        /// The first rank that does not fit (vLLM checks ranks in order).
        tp_rank: u64,
        /// Its pipeline stage.
        pp_rank: u64,
        /// vLLM's bytes for one request there.
        needed_bytes: u64,
        /// `kv_cache_memory_bytes` less one block (the null block).
        available_bytes: u64,
        /// vLLM's estimate of the longest `max_model_len` that fits (its
        /// binary search); 0 when not even one token fits.
        estimated_max_model_len: u64,
    },
    /// Not even the null block fits: `No available memory for the cache blocks`.
    NoMemory {
        /// The first rank where it does not.
        tp_rank: u64,
        /// Its pipeline stage.
        pp_rank: u64,
        /// That rank's bytes per block.
        bytes_per_block: u64,
    },
}

const CONSERVING_MEMORY: &str = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/";

/// What vLLM 0.33 logs or raises at start-up for this config with
/// `--kv-cache-memory-bytes` (`kv_cache_memory_bytes` per rank) under
/// `parallel`: see [`VllmStartup`]. The config is estimated again at each
/// length vLLM's binary search tries, when it refuses.
///
/// ```
/// use kv_core::estimate::{vllm_startup, EstimateSettings, StartupOutcome};
/// use kv_core::Parallel;
///
/// let llama = serde_json::json!({
///     "num_hidden_layers": 32, "num_key_value_heads": 8, "hidden_size": 4096,
///     "num_attention_heads": 32, "torch_dtype": "bfloat16",
/// });
/// let settings = EstimateSettings::new().positions(8192);
/// // One block: 32 layers x 16 tokens x 4,096 B = 2 MiB; a request takes
/// // 512 blocks (1 GiB). 4 GiB + 1 block: 2,049 blocks, the null one counted.
/// let b = (4u64 << 30) + (2 << 20);
/// let startup = vllm_startup(&llama, &settings, Parallel::new(1, 1)?, b)?;
/// assert_eq!(
///     startup.message,
///     "GPU KV cache size: 32,784 tokens, Maximum concurrency for 8,192 tokens per request: 4.00x"
/// );
/// assert!(matches!(startup.outcome, StartupOutcome::Starts { num_blocks: 2049, .. }));
/// # Ok::<(), kv_core::KvError>(())
/// ```
pub fn vllm_startup(
    config: &Value,
    settings: &EstimateSettings,
    parallel: Parallel,
    kv_cache_memory_bytes: u64,
) -> Result<VllmStartup, KvError> {
    let estimate = super::estimate(config, settings)?;
    let max_model_len = estimate.max_model_len;
    let pools = estimate.pools(parallel, 1)?;
    let startup = |outcome: StartupOutcome, message: String| VllmStartup {
        kv_cache_memory_bytes,
        max_model_len,
        outcome,
        message,
    };
    for (rank, pool) in &pools {
        // get_kv_cache_configs plans against the memory less the null block.
        let available = match kv_cache_memory_bytes.checked_sub(pool.bytes_per_block) {
            Some(available) if available > 0 => available,
            _ => {
                return Ok(startup(
                    StartupOutcome::NoMemory {
                        tp_rank: rank.tp_rank,
                        pp_rank: rank.pp_rank,
                        bytes_per_block: pool.bytes_per_block,
                    },
                    format!(
                        "No available memory for the cache blocks. Try increasing \
                         `gpu_memory_utilization` when initializing the engine (this flag \
                         also controls CPU memory reservation on the CPU backend, despite its \
                         name). See {CONSERVING_MEMORY} for more details."
                    ),
                ))
            }
        };
        if pool.per_row_bytes > available {
            let longest = longest_that_fits(config, settings, *rank, max_model_len, available)?;
            let estimated = if longest > 0 {
                format!(
                    "Based on the available memory, the estimated maximum model length is \
                     {longest}. "
                )
            } else {
                String::new()
            };
            return Ok(startup(
                StartupOutcome::Refused {
                    tp_rank: rank.tp_rank,
                    pp_rank: rank.pp_rank,
                    needed_bytes: pool.per_row_bytes,
                    available_bytes: available,
                    estimated_max_model_len: longest,
                },
                format!(
                    "To serve at least one request with the model's max seq len \
                     ({max_model_len}), ({} GiB KV cache is needed, which is larger than the \
                     available KV cache memory ({} GiB). {estimated}Try increasing \
                     `gpu_memory_utilization` (which also controls CPU memory on the CPU \
                     backend) or decreasing `max_model_len` when initializing the engine. See \
                     {CONSERVING_MEMORY} for more details.",
                    format_gib(pool.per_row_bytes),
                    format_gib(available)
                ),
            ));
        }
    }
    // Every rank takes the smallest rank's block count.
    let bytes_per_block = pools
        .iter()
        .map(|(_, pool)| pool.bytes_per_block)
        .max()
        .unwrap_or(1)
        .max(1);
    let num_blocks = kv_cache_memory_bytes / bytes_per_block;
    let blocks_per_request = pools
        .first()
        .map_or(1, |(_, pool)| pool.blocks_per_request)
        .max(1);
    // get_kv_cache_capacity: a float ratio, times the length, truncated.
    let concurrency = true_divide(num_blocks, blocks_per_request);
    let tokens = concurrency * max_model_len as f64;
    if tokens >= TWO_TO_64 {
        return Err(config_error(
            "figures",
            format!(
                "vLLM's token capacity ({num_blocks} blocks / {blocks_per_request} per request x \
                 {max_model_len}) overflows u64"
            ),
        ));
    }
    let num_tokens = tokens as u64;
    Ok(startup(
        StartupOutcome::Starts {
            bytes_per_block,
            num_blocks,
            blocks_per_request,
            num_tokens,
        },
        format!(
            "GPU KV cache size: {} tokens, Maximum concurrency for {} tokens per request: \
             {concurrency:.2}x",
            thousands(num_tokens),
            thousands(max_model_len)
        ),
    ))
}

const TWO_TO_64: f64 = 18_446_744_073_709_551_616.0;

/// vLLM's `_estimate_max_model_len_from_groups`: a binary search over
/// `1..=max_model_len` for the longest length whose request fits in
/// `available` bytes on `rank`; 0 when one token does not fit.
fn longest_that_fits(
    config: &Value,
    settings: &EstimateSettings,
    rank: Parallel,
    max_model_len: u64,
    available: u64,
) -> Result<u64, KvError> {
    let fits = |len: u64| -> Result<bool, KvError> {
        let estimate = super::estimate(config, &settings.clone().positions(len))?;
        Ok(estimate.pool_at(rank, 1)?.per_row_bytes <= available)
    };
    if !fits(1)? {
        return Ok(0);
    }
    let (mut left, mut right, mut result) = (1u64, max_model_len, 1u64);
    while left <= right {
        let mid = left + (right - left) / 2;
        if fits(mid)? {
            result = mid;
            match mid.checked_add(1) {
                Some(next) => left = next,
                None => break,
            }
        } else {
            // mid >= left >= 1: no wrap.
            right = mid - 1;
        }
    }
    Ok(result)
}

/// Python's `a / b` for integers: correctly rounded to the nearest double.
/// Below 2^53 both convert exactly and one division rounds once; above, the
/// quotient is taken in 128 bits with the remainder kept as a sticky bit, so
/// it too rounds once.
fn true_divide(a: u64, b: u64) -> f64 {
    const EXACT: u64 = 1 << 53;
    if a <= EXACT && b <= EXACT {
        return a as f64 / b as f64;
    }
    if a == 0 {
        return 0.0;
    }
    // a's top bit to bit 127: the quotient keeps at least 64 bits.
    let shift = 64 + a.leading_zeros();
    let scaled = u128::from(a) << shift;
    let quotient = scaled / u128::from(b);
    let sticky = u128::from(!scaled.is_multiple_of(u128::from(b)));
    // x 2^-shift is exact: shift <= 127 keeps it a normal double.
    (quotient | sticky) as f64 * f64::from_bits((1023 - u64::from(shift)) << 52)
}

/// vLLM's `format_gib`: `str(round(b / 2**30, 2))`, so `0.5`, `2.0`, `10.53`.
fn format_gib(bytes: u64) -> String {
    // Scaling by a power of two is exact, so this is Python's b / GiB.
    let gib = bytes as f64 / (1u64 << 30) as f64;
    let mut text = format!("{gib:.2}");
    while text.ends_with('0') && !text.ends_with(".0") {
        text.pop();
    }
    text
}

/// `--kv-cache-memory-bytes` (per rank) that lets vLLM hold `max_num_seqs`
/// requests at `max_model_len` at once: every rank takes the widest rank's
/// block count, and the pool holds one block back (the null block).
pub(super) fn memory_for(pools: &[&VllmPool], max_num_seqs: u64) -> Result<u64, KvError> {
    let widest = pools.iter().map(|p| p.bytes_per_block).max().unwrap_or(0);
    let blocks_per_request = pools.first().map_or(0, |p| p.blocks_per_request);
    blocks_per_request
        .checked_mul(max_num_seqs)
        .and_then(|blocks| blocks.checked_add(1))
        .and_then(|blocks| blocks.checked_mul(widest))
        .ok_or(Overflow {
            step: "vLLM's kv_cache_memory_bytes for max_num_seqs",
        })
        .map_err(overflow(format!("max_num_seqs {max_num_seqs}")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::fixtures::tiny;
    use super::super::{estimate, Estimate};
    use super::*;
    use crate::estimate::tests::shipped;

    /// google/gemma-3-1b-it's config.json (the keys kv reads, as published).
    fn gemma_3_1b() -> Value {
        json!({
            "architectures": ["Gemma3ForCausalLM"], "attention_bias": false,
            "cache_implementation": "hybrid", "head_dim": 256, "hidden_size": 1152,
            "intermediate_size": 6912, "max_position_embeddings": 32768,
            "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 26,
            "num_key_value_heads": 1, "query_pre_attn_scalar": 256, "rope_scaling": null,
            "rope_local_base_freq": 10000, "rope_theta": 1000000, "sliding_window": 512,
            "sliding_window_pattern": 6, "torch_dtype": "bfloat16", "vocab_size": 262144
        })
    }

    fn at(len: u64) -> EstimateSettings {
        EstimateSettings::new().positions(len)
    }

    fn pools(e: &Estimate, tp: u64, pp: u64) -> Vec<VllmPool> {
        e.pools(Parallel::new(tp, pp).unwrap(), 256)
            .unwrap()
            .into_iter()
            .map(|(_, pool)| pool)
            .collect()
    }

    fn charged(pool: &VllmPool) -> Vec<(&str, u64, u64)> {
        pool.kinds
            .iter()
            .map(|k| (k.name.as_str(), k.layers_on_rank, k.charged_layers))
            .collect()
    }

    fn sum_per_row(e: &Estimate) -> u64 {
        e.specs.iter().map(|s| s.bytes_per_row().unwrap()).sum()
    }

    #[test]
    fn gemma_3_1b_charges_22_sliding_layers_as_24() {
        let e = estimate(&gemma_3_1b(), &at(8192)).unwrap();
        // 1 KV head x 256 x (K + V) x 2 B = 1,024 B per token per layer; a
        // page is 16 tokens: 16,384 B. Sliding: min(511 + 2 x 2048, 8192) =
        // 4607 -> cdiv(4607, 16) = 288, + 1 = 289 blocks; full: 512 blocks.
        // 22 sliding, 4 full: group size 4 (22 >= 1.5 x 4), sliding in
        // cdiv(22, 4) = 6 groups (layers[i::6]: 4, 4, 4, 4, 3, 3).
        let pool = &pools(&e, 1, 1)[0];
        assert_eq!(pool.group_size, 4);
        assert_eq!(
            charged(pool),
            [("sliding_attention", 22, 24), ("full_attention", 4, 4)]
        );
        assert_eq!(pool.widest_group_layers, 4);
        assert_eq!(pool.page_bytes, 16_384);
        assert!(!pool.unequal_pages);
        assert_eq!(pool.bytes_per_block, 4 * 16_384);
        // 6 groups x 289 + 1 x 512 = 2,246 blocks.
        assert_eq!(pool.blocks_per_request, 2246);
        assert_eq!(pool.per_row_bytes, 65_536 * 2246);
        assert_eq!(pool.per_row_bytes, 147_193_856);
        assert_eq!(pool.peak_bytes, 147_193_856 * 256);
        // The sum of layers: (22 x 289 + 4 x 512) x 16,384 = 137,723,904,
        // 6.43% under vLLM's figure, as the issue measured.
        assert_eq!(sum_per_row(&e), 137_723_904);
        let sliding = &e.specs[0];
        assert!(
            sliding.cache.ends_with(
                "; vLLM 0.33's pool groups its 22 layers as 6 group(s) (4 x 4, 2 x 3 layers), \
                 each charged as 4: 24 layers (group size 4, the fewest layers of a kind)"
            ),
            "{}",
            sliding.cache
        );
        assert!(!e.specs[1].cache.contains("pool"), "{}", e.specs[1].cache);
    }

    #[test]
    fn gemma_3_1b_at_pp_2_charges_each_stage_its_widest_group() {
        let e = estimate(&gemma_3_1b(), &at(8192).pipeline_stages(2)).unwrap();
        // 3 batches in flight: min(511 + 3 x 2048, 8192) = 6655 -> 416 + 1
        // = 417 blocks. 26 layers split 13/13; full layers 5, 11 | 17, 23:
        // each stage 11 sliding, 2 full. Sliding groups (6, over the whole
        // model) hold cdiv(11, 6) = 2 of a stage's layers, full (1 group) 2:
        // a block spans 2 layers, and a request takes every group's blocks,
        // 6 x 417 + 512 = 3,014.
        let stages = pools(&e, 1, 2);
        for pool in &stages {
            assert_eq!(
                charged(pool),
                [("sliding_attention", 11, 12), ("full_attention", 2, 2)]
            );
            assert_eq!(pool.bytes_per_block, 2 * 16_384);
            assert_eq!(pool.blocks_per_request, 3014);
            assert_eq!(pool.per_row_bytes, 98_762_752);
        }
        // A stage's sum of layers: (11 x 417 + 2 x 512) x 16,384.
        let ranks = e.ranks(Parallel::new(1, 2).unwrap(), 256).unwrap();
        assert_eq!(ranks[0].totals.per_row, 91_930_624);
        assert_eq!(ranks[1].pool, stages[1]);
    }

    #[test]
    fn gemma_3_27b_at_pp_3_has_a_wider_middle_stage() {
        let e = estimate(
            &shipped("gemma-3-27b"),
            &at(8192).pipeline_stages(3).set("sliding_window_pattern", 6),
        )
        .unwrap();
        // 16 heads x 128 x 2 x 2 B = 8,192 B per token per layer: a page of
        // 131,072 B. 52 sliding, 10 full: group size 10, sliding 6 groups.
        // 4 batches in flight: min(1023 + 4 x 2048, 8192) = 8192 -> 512 + 1 =
        // 513 blocks; full 512: a request takes 6 x 513 + 512 = 3,590.
        // 62 layers split 21/21/20 (vLLM gives the remainder to the stages
        // before the last); full layers 5, 11, 17 | 23, 29, 35, 41 | 47, 53, 59.
        let stages = pools(&e, 1, 3);
        let widest: Vec<u64> = stages.iter().map(|p| p.widest_group_layers).collect();
        // max(cdiv(18, 6), 3) = 3; max(cdiv(17, 6), 4) = 4; max(cdiv(17, 6), 3) = 3.
        assert_eq!(widest, [3, 4, 3]);
        assert_eq!(
            charged(&stages[1]),
            [("sliding_attention", 17, 24), ("full_attention", 4, 4)]
        );
        assert_eq!(stages[0].per_row_bytes, 3 * 131_072 * 3590);
        assert_eq!(stages[1].per_row_bytes, 1_882_193_920);
        // 10 GiB per rank: every rank takes the middle stage's count,
        // 10 GiB / 524,288 B = 20,480 blocks; 20,480 / 3,590 = 5.7047...;
        // x 8192 = 46,733.19 tokens.
        let startup = vllm_startup(
            &shipped("gemma-3-27b"),
            &at(8192).pipeline_stages(3).set("sliding_window_pattern", 6),
            Parallel::new(1, 3).unwrap(),
            10 << 30,
        )
        .unwrap();
        assert_eq!(
            startup.message,
            "GPU KV cache size: 46,733 tokens, Maximum concurrency for 8,192 tokens per request: \
             5.70x"
        );
        assert_eq!(
            startup.outcome,
            StartupOutcome::Starts {
                bytes_per_block: 524_288,
                num_blocks: 20_480,
                blocks_per_request: 3590,
                num_tokens: 46_733,
            }
        );
    }

    #[test]
    fn a_stage_is_charged_for_groups_it_holds_no_layer_of() {
        let config = tiny(json!({
            "num_hidden_layers": 4, "sliding_window": 4,
            "layer_types": ["full_attention", "full_attention", "sliding_attention",
                            "sliding_attention"],
        }));
        let settings = at(64).pipeline_stages(2);
        let e = estimate(&config, &settings).unwrap();
        // 2 KV heads x 64 x 2 x 2 B = 512 B per token per layer, a page of
        // 8,192 B. Groups of 2: one full, one sliding. Stage 0 holds the two
        // full layers, stage 1 the two sliding ones; each stage's block spans
        // 2 layers, and a request takes both groups' blocks: full 64 / 16 = 4,
        // sliding (3 batches in flight) cdiv(min(3 + 6144, 64), 16) + 1 = 5.
        let stages = pools(&e, 1, 2);
        assert_eq!(
            charged(&stages[0]),
            [("full_attention", 2, 2), ("sliding_attention", 0, 2)]
        );
        assert_eq!(
            charged(&stages[1]),
            [("full_attention", 0, 2), ("sliding_attention", 2, 2)]
        );
        for pool in &stages {
            assert_eq!(pool.bytes_per_block, 2 * 8192);
            assert_eq!(pool.blocks_per_request, 4 + 5);
            assert_eq!(pool.per_row_bytes, 147_456);
        }
        assert_eq!(stages[0].kinds[1].blocks_per_layer, 5);
        assert_eq!(stages[1].kinds[0].blocks_per_layer, 4);
        // The stage's own layers hold 2 x 4 x 8,192 B.
        let ranks = e.ranks(Parallel::new(1, 2).unwrap(), 1).unwrap();
        assert_eq!(ranks[0].totals.per_row, 65_536);
        // 1 MiB: 64 blocks of 16,384 B; 64 / 9 x 64 = 455.1 tokens.
        let startup =
            vllm_startup(&config, &settings, Parallel::new(1, 2).unwrap(), 1 << 20).unwrap();
        assert_eq!(
            startup.message,
            "GPU KV cache size: 455 tokens, Maximum concurrency for 64 tokens per request: 7.11x"
        );
    }

    #[test]
    fn one_kind_and_whole_groups_charge_the_sum_of_layers() {
        // Jamba: 28 Mamba, 4 attention: group size 4, Mamba in 7 whole groups.
        let jamba = estimate(&shipped("jamba-v0.1"), &at(8192)).unwrap();
        let pool = &pools(&jamba, 1, 1)[0];
        // A block: 4 layers x 327,680 B; a request: 7 x 2 state pages + 103
        // attention blocks of 80 = 117 blocks.
        assert_eq!(pool.bytes_per_block, 4 * 327_680);
        assert_eq!(pool.blocks_per_request, 7 * 2 + 103);
        assert_eq!(pool.per_row_bytes, 153_354_240);
        assert_eq!(sum_per_row(&jamba), 153_354_240);
        assert!(jamba.specs.iter().all(|s| !s.cache.contains("pool")));
        // Llama: one group of 32 layers; at tp 2 each rank's page halves.
        let llama = estimate(&shipped("llama-3-8b"), &at(8192).tensor_parallel(2)).unwrap();
        let ranks = pools(&llama, 2, 1);
        // 4 heads x 128 x 2 x 2 B x 16 tokens = 32,768 B; 32 layers; 512 blocks.
        assert_eq!(ranks[1].bytes_per_block, 32 * 32_768);
        assert_eq!(ranks[1].per_row_bytes, 32 * 32_768 * 512);
        assert_eq!(ranks[1].group_size, 32);
    }

    #[test]
    fn the_group_size_is_the_most_layers_under_one_and_a_half_times_the_fewest() {
        let sliding = "sliding_attention";
        let full = "full_attention";
        let config = |kinds: &[&str]| {
            tiny(json!({
                "num_hidden_layers": kinds.len(), "layer_types": kinds, "sliding_window": 4
            }))
        };
        // 2 sliding, 3 full: 3 is not under 1.5 x 2, so groups of 2; full in
        // cdiv(3, 2) = 2 groups, charged as 4.
        let e = estimate(&config(&[sliding, full, sliding, full, full]), &at(64)).unwrap();
        let pool = &pools(&e, 1, 1)[0];
        assert_eq!(pool.group_size, 2);
        assert_eq!(charged(pool), [(sliding, 2, 2), (full, 3, 4)]);
        assert!(e.specs[1].cache.ends_with(
            "its 3 layers as 2 group(s) (1 x 2, 1 x 1 layers), each charged as 2: 4 layers \
             (group size 2, the fewest layers of a kind)"
        ));
        // 3 sliding, 4 full: 4 < 4.5, so groups of 4; sliding's one group of
        // 3 is charged as 4.
        let e = estimate(
            &config(&[sliding, full, sliding, full, sliding, full, full]),
            &at(64),
        )
        .unwrap();
        let pool = &pools(&e, 1, 1)[0];
        assert_eq!(pool.group_size, 4);
        assert_eq!(charged(pool), [(sliding, 3, 4), (full, 4, 4)]);
        assert!(e.specs[0].cache.ends_with(
            "its 3 layers as 1 group(s) (1 x 3 layers), each charged as 4: 4 layers (group \
             size 4, the most layers of a kind, as that is under 1.5 x the fewest)"
        ));
    }

    #[test]
    fn a_small_memory_predicts_vllms_start_up_line() {
        let e = estimate(&gemma_3_1b(), &at(8192)).unwrap();
        assert_eq!(pools(&e, 1, 1)[0].bytes_per_block, 65_536);
        // 300 MiB = 314,572,800 B: 4,800 blocks of 65,536 (the null block
        // among them, as vLLM's line counts it). 4,800 / 2,246 = 2.1371...;
        // x 8192 = 17,507.39 tokens.
        let startup = vllm_startup(
            &gemma_3_1b(),
            &at(8192),
            Parallel::new(1, 1).unwrap(),
            300 << 20,
        )
        .unwrap();
        assert_eq!(
            startup.message,
            "GPU KV cache size: 17,507 tokens, Maximum concurrency for 8,192 tokens per request: \
             2.14x"
        );
        assert_eq!(
            startup.outcome,
            StartupOutcome::Starts {
                bytes_per_block: 65_536,
                num_blocks: 4800,
                blocks_per_request: 2246,
                num_tokens: 17_507,
            }
        );
        // Exactly one request and the null block: 2,247 blocks; 2,247 / 2,246
        // x 8192 = 8,195.6 tokens.
        let exact = 65_536 * 2247;
        let startup = vllm_startup(
            &gemma_3_1b(),
            &at(8192),
            Parallel::new(1, 1).unwrap(),
            exact,
        )
        .unwrap();
        assert_eq!(
            startup.message,
            "GPU KV cache size: 8,195 tokens, Maximum concurrency for 8,192 tokens per request: \
             1.00x"
        );
    }

    #[test]
    fn too_little_memory_is_vllms_refusal_with_its_longest_length() {
        let refused = |bytes: u64| {
            vllm_startup(
                &gemma_3_1b(),
                &at(8192),
                Parallel::new(1, 1).unwrap(),
                bytes,
            )
            .unwrap()
        };
        // 100 MiB less the null block: 104,792,064 B = 1,599 blocks, under
        // the 2,246 one request takes (147,193,856 B: 0.137 GiB). Up to 4607
        // tokens a request takes 6 x (cdiv(len, 16) + 1) + cdiv(len, 16) =
        // 7 x cdiv(len, 16) + 6 blocks: <= 1,599 while cdiv(len, 16) <= 227,
        // so len <= 3632.
        let startup = refused(100 << 20);
        assert_eq!(
            startup.outcome,
            StartupOutcome::Refused {
                tp_rank: 0,
                pp_rank: 0,
                needed_bytes: 147_193_856,
                available_bytes: 104_792_064,
                estimated_max_model_len: 3632,
            }
        );
        assert_eq!(
            startup.message,
            "To serve at least one request with the model's max seq len (8192), (0.14 GiB KV \
             cache is needed, which is larger than the available KV cache memory (0.1 GiB). \
             Based on the available memory, the estimated maximum model length is 3632. Try \
             increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU \
             backend) or decreasing `max_model_len` when initializing the engine. See \
             https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
        );
        // One byte short of one request and the null block: 2,245 blocks and
        // 65,535 B. Past 4607 tokens the sliding groups take 289 blocks each;
        // full takes 511 up to 8176 tokens: 1,734 + 511 = 2,245 fits.
        let short = refused(65_536 * 2247 - 1);
        assert!(
            matches!(
                short.outcome,
                StartupOutcome::Refused {
                    estimated_max_model_len: 8176,
                    available_bytes: 147_193_855,
                    ..
                }
            ),
            "{short:?}"
        );
        // One byte over the null block: not one token fits (13 blocks), and
        // vLLM leaves its estimate out.
        let byte = refused(65_537);
        assert!(matches!(
            byte.outcome,
            StartupOutcome::Refused {
                estimated_max_model_len: 0,
                available_bytes: 1,
                ..
            }
        ));
        assert!(
            byte.message.contains("memory (0.0 GiB). Try increasing"),
            "{}",
            byte.message
        );
        // Only the null block: nothing left at all.
        let none = refused(65_536);
        assert_eq!(
            none.outcome,
            StartupOutcome::NoMemory {
                tp_rank: 0,
                pp_rank: 0,
                bytes_per_block: 65_536
            }
        );
        assert!(none
            .message
            .starts_with("No available memory for the cache blocks."));
    }

    #[test]
    fn a_refusal_names_the_first_stage_that_does_not_fit() {
        // Gemma-3-27B at pp 3: stage 1's block is 4 pages (524,288 B), its
        // request 1,882,193,920 B; stages 0 and 2 need 1,411,645,440 B. With
        // 1.5 GiB (1,610,612,736 B) stage 0 fits and stage 1 does not.
        let settings = at(8192).pipeline_stages(3).set("sliding_window_pattern", 6);
        let startup = vllm_startup(
            &shipped("gemma-3-27b"),
            &settings,
            Parallel::new(1, 3).unwrap(),
            3 << 29,
        )
        .unwrap();
        // Stage 1 has 1,610,612,736 - 524,288 = 1,610,088,448 B: 3,071 blocks
        // of 524,288. A request takes 6 x (cdiv(min(9215, len), 16) + 1) +
        // cdiv(len, 16): at len 6992, 6 x 438 + 437 = 3,065; at 6993,
        // 6 x 439 + 438 = 3,072 > 3,071.
        assert_eq!(
            startup.outcome,
            StartupOutcome::Refused {
                tp_rank: 0,
                pp_rank: 1,
                needed_bytes: 1_882_193_920,
                available_bytes: 1_610_088_448,
                estimated_max_model_len: 6992,
            }
        );
    }

    struct Declared(Vec<KvSpec>);

    impl crate::declare::ModelLocalKv for Declared {
        fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
            out.extend(self.0.iter().cloned());
            Ok(())
        }
    }

    #[test]
    fn unequal_pages_are_each_charged_as_the_largest() {
        use crate::spec::dtype::DType;
        use crate::spec::layout::Geometry;
        use crate::spec::positions::Positions;
        use crate::spec::{Rows, Scope};
        let spec = |name: &'static str, kv_heads: u64| {
            KvSpec::attention(
                name,
                "test",
                Geometry::new(2, kv_heads, 64, DType::BF16),
                Positions::bounded(32, "two blocks"),
                Scope::Request,
                Rows::MaxNumSeqs,
            )
        };
        // Pages of 16 x 2 x 64 x 2 x 2 B = 8,192 B and 16 x 1 x 64 x 2 x 2 B
        // = 4,096 B: vLLM pads the smaller to 8,192. Groups of 2, one each; a
        // block spans 2 layers; a request takes 2 + 2 blocks.
        let specs = vec![spec("wide", 2), spec("narrow", 1)];
        let grouping = Grouping::of(&specs, 16).unwrap();
        let pool = grouping.pool(&crate::collect(&Declared(specs)), 3).unwrap();
        assert!(pool.unequal_pages);
        assert_eq!(pool.page_bytes, 8192);
        assert_eq!(pool.bytes_per_block, 16_384);
        assert_eq!(pool.per_row_bytes, 16_384 * 4);
        assert_eq!(pool.peak_bytes, 16_384 * 4 * 3);
    }

    #[test]
    fn the_longest_length_is_bisected_over_a_long_range() {
        // A two-layer Llama at 2^40 positions: a block spans 2 layers of 16 x
        // 512 B, 16,384 B. 1 MiB less the null block is 1,032,192 B, 63
        // blocks: 1,008 tokens. vLLM bisects 1..=2^40 in about 40 steps.
        let startup = vllm_startup(
            &tiny(json!({})),
            &at(1 << 40),
            Parallel::new(1, 1).unwrap(),
            1 << 20,
        )
        .unwrap();
        assert!(
            matches!(
                startup.outcome,
                StartupOutcome::Refused {
                    estimated_max_model_len: 1008,
                    ..
                }
            ),
            "{startup:?}"
        );
        // 1 TiB and the null block: 2^40 B = 2^26 blocks, 2^30 tokens.
        let startup = vllm_startup(
            &tiny(json!({})),
            &at(1 << 40),
            Parallel::new(1, 1).unwrap(),
            (1 << 40) + 16_384,
        )
        .unwrap();
        assert!(
            matches!(
                startup.outcome,
                StartupOutcome::Refused {
                    estimated_max_model_len: 1_073_741_824,
                    ..
                }
            ),
            "{startup:?}"
        );
    }

    #[test]
    fn pythons_true_division_rounds_once() {
        // 1 / (2^53 + 1) = 2^-53 (1 - 2^-53 + ...): rounds to 2^-53 - 2^-106,
        // where dividing by the double 2^53 would give 2^-53.
        assert_eq!(
            true_divide(1, (1 << 53) + 1),
            (1.0 - f64::EPSILON / 2.0) / 9_007_199_254_740_992.0
        );
        // (2^53 + 1) / (2^63 - 1) = 2^-10 (1 + 2^-53 + 2^-63 + ...): half an
        // ulp (2^-62) and more above 2^-10, so 2^-10 (1 + 2^-52).
        assert_eq!(
            true_divide((1 << 53) + 1, (1 << 63) - 1),
            (1.0 + f64::EPSILON) / 1024.0
        );
        // As below, but a x 2^30 = 65 (mod b): the 128-bit quotient is a tie
        // plus one, and the remainder more: Python's a / b is
        // 8388608.33333333, not ...328.
        assert_eq!(
            true_divide(9_223_372_403_484_476_421, 1_099_511_627_791),
            8_388_608.333_333_33
        );
        // 2^53 + 1 = 9,007,199,254,740,993 is 3 x 3,002,399,751,580,331; as
        // a double it would first round to 2^53, and 2^53 / 3 rounds to
        // ...330.5.
        assert_eq!(true_divide((1 << 53) + 1, 3), 3_002_399_751_580_331.0);
        assert_eq!(true_divide(2049, 512), 4.001_953_125);
        assert_eq!(true_divide(0, (1 << 60) + 1), 0.0);
        // (2^64 - 1) / 2^63 = 2 - 2^-63, which rounds to 2.
        assert_eq!(true_divide(u64::MAX, 1 << 63), 2.0);
        // 2^63 / (2^63 + 1) is just under 1: 1 - 2^-63 + ... rounds to 1.
        assert_eq!(true_divide(1 << 63, (1 << 63) + 1), 1.0);
        // Just over a tie: (2^54 + 3) / 2 = 2^53 + 1.5 rounds up to 2^53 + 2.
        assert_eq!(true_divide((1 << 54) + 3, 2), 9_007_199_254_740_994.0);
        // Exact ties round to even: (2^54 + 2) / 2 = 2^53 + 1 -> 2^53, and
        // (2^54 + 6) / 2 = 2^53 + 3 -> 2^53 + 4.
        assert_eq!(true_divide((1 << 54) + 2, 2), 9_007_199_254_740_992.0);
        assert_eq!(true_divide((1 << 54) + 6, 2), 9_007_199_254_740_996.0);
        // A hair over a tie that only the remainder shows: b = 2^40 + 15 and
        // a = 2^-30 mod b (+ a multiple of b), so a x 2^30 / b is an odd
        // 54-bit integer plus 1/b. The 128-bit quotient ends in a one and 34
        // zeros, a tie; the remainder makes it round up, as Python's a / b
        // does (8388608.266666668, not ...666).
        assert_eq!(
            true_divide(9_223_372_330_183_705_604, 1_099_511_627_791),
            8_388_608.266_666_668
        );
    }

    #[test]
    fn vllms_number_formats() {
        for (bytes, gib) in [
            (0, "0.0"),
            (1 << 30, "1.0"),
            (3 << 29, "1.5"),
            (147_193_856, "0.14"),
            // 0.125 and 0.375 GiB are exact ties: Python rounds half to even.
            (1 << 27, "0.12"),
            (3 << 27, "0.38"),
            (11_306_783_539, "10.53"),
        ] {
            assert_eq!(format_gib(bytes), gib, "{bytes}");
        }
    }
}
