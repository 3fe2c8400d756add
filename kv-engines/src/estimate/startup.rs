//! What vLLM 0.33 logs or raises at start-up for a `--kv-cache-memory-bytes`
//! (`get_kv_cache_configs`, `_check_enough_kv_cache_memory`,
//! `update_kv_cache_capacity`), from the pools of [`super::pool`].

use kv_core::units::thousands;
use kv_core::{KvError, Parallel};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::detect::estimate;
use super::settings::{config_error, EstimateSettings};

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
/// use kv_engines::estimate::{vllm_startup, EstimateSettings, StartupOutcome};
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
    let stages = usize::try_from(parallel.pp).map_err(|_| {
        config_error(
            "estimate settings",
            format!("pp {} does not fit in memory", parallel.pp),
        )
    })?;
    vllm_startup_by_stage(
        config,
        settings,
        parallel,
        &vec![kv_cache_memory_bytes; stages],
    )
}

/// [`vllm_startup`] where each pipeline stage has its own memory for the
/// cache (`kv_cache_memory_bytes[pp_rank]`, the same on each TP rank of a
/// stage): stages that hold other weights have other budgets. vLLM checks
/// each rank against its own memory less its null block, and every rank
/// takes the smallest rank's block count (`get_kv_cache_configs`, step 5).
/// [`VllmStartup::kv_cache_memory_bytes`] is then the smallest stage's.
///
/// ```
/// use kv_engines::estimate::{vllm_startup_by_stage, EstimateSettings, StartupOutcome};
/// use kv_core::Parallel;
///
/// let llama = serde_json::json!({
///     "num_hidden_layers": 32, "num_key_value_heads": 8, "hidden_size": 4096,
///     "num_attention_heads": 32, "torch_dtype": "bfloat16",
/// });
/// let settings = EstimateSettings::new().positions(8192).pipeline_stages(2);
/// // 16 layers a stage: 1 MiB a block. The second stage's 3 GiB hold
/// // 3,072 blocks, fewer than the first's 4,096: every rank takes 3,072.
/// let memory = [4u64 << 30, 3 << 30];
/// let startup = vllm_startup_by_stage(&llama, &settings, Parallel::new(1, 2)?, &memory)?;
/// assert!(matches!(startup.outcome, StartupOutcome::Starts { num_blocks: 3072, .. }));
/// assert_eq!(startup.kv_cache_memory_bytes, 3 << 30);
/// # Ok::<(), kv_core::KvError>(())
/// ```
pub fn vllm_startup_by_stage(
    config: &Value,
    settings: &EstimateSettings,
    parallel: Parallel,
    kv_cache_memory_bytes: &[u64],
) -> Result<VllmStartup, KvError> {
    if u64::try_from(kv_cache_memory_bytes.len()) != Ok(parallel.pp) {
        return Err(config_error(
            "estimate settings",
            format!(
                "{} memory figure(s) for {} pipeline stage(s); give one a stage",
                kv_cache_memory_bytes.len(),
                parallel.pp
            ),
        ));
    }
    let memory_of = |rank: &Parallel| {
        usize::try_from(rank.pp_rank)
            .ok()
            .and_then(|stage| kv_cache_memory_bytes.get(stage).copied())
            .unwrap_or(0)
    };
    let smallest = kv_cache_memory_bytes.iter().copied().min().unwrap_or(0);
    let estimate = estimate(config, settings)?;
    let max_model_len = estimate.max_model_len;
    let pools = estimate.pools(parallel, 1)?;
    let startup = |outcome: StartupOutcome, message: String| VllmStartup {
        kv_cache_memory_bytes: smallest,
        max_model_len,
        outcome,
        message,
    };
    for (rank, pool) in &pools {
        // get_kv_cache_configs plans against the memory less the null block.
        let available = match memory_of(rank).checked_sub(pool.bytes_per_block) {
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
    let num_blocks = pools
        .iter()
        .map(|(rank, pool)| memory_of(rank) / pool.bytes_per_block.max(1))
        .min()
        .unwrap_or(0);
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
        let estimate = estimate(config, &settings.clone().positions(len))?;
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
pub(crate) fn format_gib(bytes: u64) -> String {
    // Scaling by a power of two is exact, so this is Python's b / GiB.
    let gib = bytes as f64 / (1u64 << 30) as f64;
    let mut text = format!("{gib:.2}");
    while text.ends_with('0') && !text.ends_with(".0") {
        text.pop();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

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
