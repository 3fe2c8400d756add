//! An estimate as one model's collection, divided per rank, and its JSON
//! shape ([`ExportedEstimate`]): what `kv estimate --format json` prints.

use kv_core::collection::Totals;
use kv_core::export::{ClusterTotals, ExportedReport, SCHEMA_VERSION};
use kv_core::{collect, Collection, KvError, KvSpec, ModelLocalKv, Overflow, Parallel};
use serde::{Deserialize, Serialize};

use super::detect::Estimate;
use super::pool::{memory_for, Grouping, VllmPool};
use super::settings::overflow;
use super::startup::VllmStartup;

/// The declarations of an estimate, as an owner the collector visits
/// (reports name them `FromConfig.NAME`).
struct FromConfig(Vec<KvSpec>);

impl ModelLocalKv for FromConfig {
    fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
        out.extend(self.0.iter().cloned());
        Ok(())
    }
}

/// One rank's share of an estimate.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EstimateRank {
    /// What the rank holds, divided as engines divide it.
    pub collection: Collection,
    /// Its totals at the `max_num_seqs` asked for: the sum of its layers.
    pub totals: Totals,
    /// What vLLM's pool charges it ([`VllmPool`]): its layers as the engine
    /// groups them, at the same `max_num_seqs`.
    pub pool: VllmPool,
}

/// The most ranks one estimate sizes: each rank is held whole (its
/// declarations, totals and pool), so `tp x pp` is bounded before any is
/// built. A rank holds a few kilobytes (more for a hybrid), so 65,536 ranks
/// held about 110 MB in kv-fuzz's config runs; 4,096 (the most `--tp` takes)
/// hold under 20 MB and are far above any layout vLLM runs one model on.
pub const MAX_RANKS: u64 = 4_096;

/// Refuses a layout of more than [`MAX_RANKS`] ranks, naming the sizes
/// (`--tp` and `--pp`) that make the count.
fn check_rank_count(parallel: Parallel) -> Result<(), KvError> {
    match parallel.tp.checked_mul(parallel.pp) {
        Some(ranks) if ranks <= MAX_RANKS => Ok(()),
        ranks => Err(KvError::Parallel {
            declaration: String::new(),
            problem: format!(
                "tp {} x pp {} (--tp, --pp) makes {} ranks; kv sizes at most {MAX_RANKS} ranks \
                 per estimate",
                parallel.tp,
                parallel.pp,
                ranks.map_or_else(|| "more than 2^64".to_owned(), |r| r.to_string())
            ),
        }),
    }
}

impl Estimate {
    /// The declarations collected as one model's (validated: a declaration
    /// the collector refuses is an error here, not a skipped line).
    pub fn collection(&self) -> Result<Collection, KvError> {
        let whole = collect(&FromConfig(self.specs.clone()));
        match whole.skipped().first() {
            Some(skipped) => Err(skipped.error.clone()),
            None => Ok(whole),
        }
    }

    /// What each rank of `parallel` holds, with its totals at `max_num_seqs`,
    /// in [`Parallel::ranks`] order. `parallel.tp` must be the size the
    /// estimate was made for ([`EstimateSettings::tensor_parallel`](super::settings::EstimateSettings::tensor_parallel)):
    /// a hybrid's block and state pages are set per rank.
    ///
    /// ```
    /// use kv_engines::estimate::{estimate, EstimateSettings};
    /// use kv_core::Parallel;
    ///
    /// let llama = serde_json::json!({
    ///     "num_hidden_layers": 32, "num_key_value_heads": 8, "hidden_size": 4096,
    ///     "num_attention_heads": 32, "torch_dtype": "bfloat16",
    /// });
    /// let settings = EstimateSettings::new().positions(8192).tensor_parallel(2);
    /// let e = estimate(&llama, &settings)?;
    /// let ranks = e.ranks(Parallel::new(2, 1)?, 256)?;
    /// // Each of 2 TP ranks holds 4 of the 8 KV heads.
    /// assert_eq!(ranks[0].totals.per_position, 131_072 / 2);
    /// assert!(e.ranks(Parallel::new(4, 1)?, 256).is_err());
    /// # Ok::<(), kv_core::KvError>(())
    /// ```
    pub fn ranks(
        &self,
        parallel: Parallel,
        max_num_seqs: u64,
    ) -> Result<Vec<EstimateRank>, KvError> {
        check_rank_count(parallel)?;
        if parallel.tp != self.tensor_parallel {
            return Err(KvError::Parallel {
                declaration: String::new(),
                problem: format!(
                    "the estimate was made for tp {}, not tp {}: a hybrid's block and \
                     state pages are set per rank; estimate again with tensor_parallel({})",
                    self.tensor_parallel, parallel.tp, parallel.tp
                ),
            });
        }
        let whole = self.collection()?;
        let grouping = self.grouping(&whole)?;
        parallel
            .ranks()
            .map(|rank| {
                let collection = whole.for_rank(rank)?;
                let totals = collection.totals(max_num_seqs)?;
                let pool = grouping.pool(&collection, max_num_seqs)?;
                Ok(EstimateRank {
                    collection,
                    totals,
                    pool,
                })
            })
            .collect()
    }

    /// What vLLM's pool charges each rank of `parallel`, in
    /// [`Parallel::ranks`] order.
    pub(super) fn pools(
        &self,
        parallel: Parallel,
        max_num_seqs: u64,
    ) -> Result<Vec<(Parallel, VllmPool)>, KvError> {
        Ok(self
            .ranks(parallel, max_num_seqs)?
            .into_iter()
            .map(|rank| (rank.collection.parallel(), rank.pool))
            .collect())
    }

    /// What vLLM's pool charges the one rank `rank`.
    pub(super) fn pool_at(&self, rank: Parallel, max_num_seqs: u64) -> Result<VllmPool, KvError> {
        let whole = self.collection()?;
        let collection = whole.for_rank(rank)?;
        self.grouping(&whole)?.pool(&collection, max_num_seqs)
    }

    /// vLLM's groups for this estimate, with the pages one tensor-parallel
    /// rank of every layer holds made equal as vLLM makes them.
    fn grouping(&self, whole: &Collection) -> Result<Grouping, KvError> {
        let one_rank = whole.for_rank(Parallel::new(self.tensor_parallel, 1)?.at(0, 0)?)?;
        Grouping::of(&self.specs, self.block_size, self.packing.as_ref())?
            .with_rank_pages(&one_rank)
    }

    /// The estimate of the config at `source`, per rank, as JSON reads back.
    pub fn export(
        &self,
        source: &str,
        parallel: Parallel,
        max_num_seqs: u64,
    ) -> Result<ExportedEstimate, KvError> {
        let ranks: Vec<ExportedEstimateRank> = self
            .ranks(parallel, max_num_seqs)?
            .into_iter()
            .map(|rank| ExportedEstimateRank {
                per_position_bytes: rank.totals.per_position,
                per_row_bytes: rank.totals.per_row,
                vllm_pool: rank.pool,
                report: rank.collection.export(max_num_seqs),
            })
            .collect();
        let cluster = ExportedEstimateCluster::of(&ranks, max_num_seqs)?;
        Ok(ExportedEstimate {
            schema_version: SCHEMA_VERSION,
            source: source.to_owned(),
            detected: self.detected.clone(),
            convention: self.convention.clone(),
            max_model_len: self.max_model_len,
            block_size: self.block_size,
            decode_context_parallel: self.decode_context_parallel,
            max_num_seqs,
            ranks,
            cluster,
            vllm_startup: None,
        })
    }
}

/// One config's estimate, as exported: the same family as
/// [`ExportedReport`] (one [`SCHEMA_VERSION`]), and it reads back equal.
///
/// ```
/// use kv_engines::estimate::{estimate, EstimateSettings};
/// use kv_engines::estimate::ExportedEstimate;
/// use kv_core::Parallel;
///
/// let llama = serde_json::json!({
///     "num_hidden_layers": 32, "num_key_value_heads": 8, "hidden_size": 4096,
///     "num_attention_heads": 32, "torch_dtype": "bfloat16",
/// });
/// let e = estimate(&llama, &EstimateSettings::new().positions(8192))?;
/// let exported = e.export("llama/config.json", Parallel::new(1, 1)?, 256)?;
/// let text = serde_json::to_string(&exported).unwrap();
/// let back: ExportedEstimate = serde_json::from_str(&text).unwrap();
/// assert_eq!(back, exported);
/// assert_eq!(back.ranks[0].per_row_bytes, 131_072 * 8192);
/// # Ok::<(), kv_core::KvError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExportedEstimate {
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// Where the config came from, as given.
    pub source: String,
    /// [`Estimate::detected`].
    pub detected: String,
    /// [`Estimate::convention`].
    pub convention: String,
    /// The `max_model_len` the figures are for.
    pub max_model_len: u64,
    /// The attention block size used, in tokens.
    pub block_size: u64,
    /// vLLM's `decode_context_parallel_size`: each rank's full-attention
    /// and MLA rows hold `cdiv(max_model_len, dcp)` tokens (1 when absent).
    #[serde(default = "one")]
    pub decode_context_parallel: u64,
    /// The `max_num_seqs` the peaks are at.
    pub max_num_seqs: u64,
    /// One per rank, in [`Parallel::ranks`] order; each report names its rank.
    pub ranks: Vec<ExportedEstimateRank>,
    /// Every rank together.
    pub cluster: ExportedEstimateCluster,
    /// vLLM's start-up for a `--kv-cache-memory-bytes`, where one was given
    /// ([`ExportedEstimate::with_vllm_startup`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vllm_startup: Option<VllmStartup>,
}

impl ExportedEstimate {
    /// The same, with vLLM's start-up ([`crate::estimate::vllm_startup`]).
    pub fn with_vllm_startup(mut self, startup: VllmStartup) -> ExportedEstimate {
        self.vllm_startup = Some(startup);
        self
    }
}

fn one() -> u64 {
    1
}

/// Every rank of an [`ExportedEstimate`] together (`kv estimate`'s
/// `cluster:` line): the ranks' reports added up as `kv merge` adds them,
/// beside the figures only an estimate has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExportedEstimateCluster {
    /// The ranks' reports added up, with the largest device figure (written
    /// flat, under the names `kv merge` writes).
    #[serde(flatten)]
    pub totals: ClusterTotals,
    /// Bytes of one row on every rank, added.
    pub per_row_bytes: u64,
    /// vLLM's `--kv-cache-memory-bytes` (per rank) that holds `max_num_seqs`
    /// requests at `max_model_len` at once: the widest rank's bytes per
    /// block x (`max_num_seqs` x blocks per request + the null block).
    pub kv_cache_memory_bytes_needed: u64,
}

impl ExportedEstimateCluster {
    /// The ranks added up; a sum over `u64` is an error naming it.
    fn of(
        ranks: &[ExportedEstimateRank],
        max_num_seqs: u64,
    ) -> Result<ExportedEstimateCluster, KvError> {
        let added = overflow(format!("{} ranks added", ranks.len()));
        let per_row_bytes = ranks
            .iter()
            .try_fold(0u64, |total, rank| total.checked_add(rank.per_row_bytes))
            .ok_or(Overflow {
                step: "the cluster's bytes per row",
            })
            .map_err(&added)?;
        Ok(ExportedEstimateCluster {
            totals: ClusterTotals::of(ranks.iter().map(|rank| &rank.report)).map_err(&added)?,
            per_row_bytes,
            kv_cache_memory_bytes_needed: memory_for(
                &ranks.iter().map(|rank| &rank.vllm_pool).collect::<Vec<_>>(),
                max_num_seqs,
            )?,
        })
    }
}

/// One rank of an [`ExportedEstimate`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExportedEstimateRank {
    /// Bytes one position adds to one row ([`Totals::per_position`]).
    pub per_position_bytes: u64,
    /// Bytes of one row ([`Totals::per_row`]).
    pub per_row_bytes: u64,
    /// What vLLM's pool charges the rank ([`VllmPool`]), beside the sum of
    /// its layers.
    pub vllm_pool: VllmPool,
    /// The rank's report: the sum of its layers at `max_num_seqs` is its
    /// `total_bytes`.
    pub report: ExportedReport,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::detect::estimate;
    use crate::estimate::settings::EstimateSettings;

    #[test]
    fn the_cluster_adds_the_ranks_and_names_the_largest() {
        // 2 layers, 2 KV heads of 64 / 4 = 16 dims, f16: 2 x 2 x 16 x (K + V)
        // x 2 B = 256 B per position; at tp 2 each rank holds one head, 128 B.
        let llama = serde_json::json!({
            "num_hidden_layers": 2, "num_key_value_heads": 2, "hidden_size": 64,
            "num_attention_heads": 4, "torch_dtype": "float16",
        });
        let settings = EstimateSettings::new().positions(16).tensor_parallel(2);
        let e = estimate(&llama, &settings).unwrap();
        let exported = e.export("c.json", Parallel::new(2, 1).unwrap(), 3).unwrap();
        assert_eq!(exported.ranks[0].per_position_bytes, 128);
        // 16 positions (one block of 16) per row, 3 rows.
        assert_eq!(exported.ranks[1].per_row_bytes, 128 * 16);
        assert_eq!(exported.ranks[1].report.total_bytes, Some(128 * 16 * 3));
        // kv-core's `ClusterTotals` is non-exhaustive: compared field by field.
        let totals = &exported.cluster.totals;
        assert_eq!(
            (
                totals.rank_count,
                totals.total_bytes,
                totals.device_bytes,
                totals.host_bytes
            ),
            (2, 2 * 128 * 16 * 3, 2 * 128 * 16 * 3, 0)
        );
        // The ranks tie: the first is named.
        assert_eq!(
            (
                totals.largest_device_bytes,
                totals.largest_device_tp_rank,
                totals.largest_device_pp_rank
            ),
            (128 * 16 * 3, 0, 0)
        );
        assert_eq!(exported.cluster.per_row_bytes, 2 * 128 * 16);
        // A block is 2 layers x 16 tokens x 64 B = 2,048 B; a request takes
        // 1; 3 requests and the null block: 4 x 2,048.
        assert_eq!(exported.cluster.kv_cache_memory_bytes_needed, 8192);
        assert_eq!(exported.ranks[0].vllm_pool.bytes_per_block, 2048);
        assert_eq!(exported.ranks[1].vllm_pool.peak_bytes, 3 * 2048);
        let text = serde_json::to_string(&exported).unwrap();
        assert!(text.contains("\"per_position_bytes\":128"), "{text}");
        // The cluster is written flat, under the names `kv merge` writes.
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["cluster"]["total_bytes"], 2 * 128 * 16 * 3);
        assert_eq!(json["cluster"]["largest_device_bytes"], 128 * 16 * 3);
        assert_eq!(json["cluster"]["rank_count"], 2);
        assert!(json["cluster"].get("peak_bytes").is_none(), "{text}");
        assert!(json["ranks"][0].get("peak_bytes").is_none(), "{text}");
        let back: ExportedEstimate = serde_json::from_str(&text).unwrap();
        assert_eq!(back, exported);
        // JSON written before decode context parallelism reads as dcp 1.
        assert!(text.contains("\"decode_context_parallel\":1,"), "{text}");
        let older = text.replace("\"decode_context_parallel\":1,", "");
        let back: ExportedEstimate = serde_json::from_str(&older).unwrap();
        assert_eq!(back.decode_context_parallel, 1);
    }

    /// A rank of `per_row_bytes` whose report holds `peak_bytes`, all on
    /// the device (the rest unread).
    fn rank(per_row_bytes: u64, peak_bytes: u64) -> ExportedEstimateRank {
        let mut report = kv_core::Collection::default().export(1);
        report.total_bytes = Some(peak_bytes);
        report.device_bytes = Some(peak_bytes);
        ExportedEstimateRank {
            per_position_bytes: 1,
            per_row_bytes,
            vllm_pool: pool(1, 1),
            report,
        }
    }

    #[test]
    fn a_cluster_sum_past_u64_is_an_error() {
        let error = ExportedEstimateCluster::of(&[rank(1, u64::MAX), rank(1, 1)], 1).unwrap_err();
        assert_eq!(
            error.to_string(),
            "kv: cannot read figures from the config: the cluster's peak bytes overflows u64 \
             for 2 ranks added"
        );
        let error = ExportedEstimateCluster::of(&[rank(u64::MAX, 1), rank(1, 1)], 1).unwrap_err();
        assert_eq!(
            error.to_string(),
            "kv: cannot read figures from the config: the cluster's bytes per row overflows \
             u64 for 2 ranks added"
        );
        let fits = ExportedEstimateCluster::of(&[rank(1, u64::MAX - 1), rank(1, 1)], 1).unwrap();
        assert_eq!(fits.totals.total_bytes, u64::MAX);
        assert_eq!(fits.totals.largest_device_bytes, u64::MAX - 1);
        assert_eq!(fits.per_row_bytes, 2);
    }

    /// A pool of `bytes_per_block` and `blocks_per_request` (the rest unread).
    fn pool(bytes_per_block: u64, blocks_per_request: u64) -> VllmPool {
        VllmPool {
            group_size: 1,
            kinds: Vec::new(),
            widest_group_layers: 1,
            page_bytes: bytes_per_block,
            unequal_pages: false,
            one_group: false,
            packed: false,
            bytes_per_block,
            blocks_per_request,
            per_row_bytes: bytes_per_block * blocks_per_request,
            peak_bytes: bytes_per_block * blocks_per_request,
        }
    }

    #[test]
    fn the_memory_needed_takes_the_widest_rank_and_the_null_block() {
        let rank = |bytes_per_block| ExportedEstimateRank {
            vllm_pool: pool(bytes_per_block, 7),
            ..rank(1, 1)
        };
        // Widest block 300 B; 5 requests x 7 blocks + the null block = 36.
        let cluster = ExportedEstimateCluster::of(&[rank(200), rank(300), rank(100)], 5).unwrap();
        assert_eq!(cluster.kv_cache_memory_bytes_needed, 300 * 36);
        // (u64::MAX / 7) x 7 blocks + 1 overflows no u64 before x 300 does.
        let error = ExportedEstimateCluster::of(&[rank(300)], u64::MAX / 7).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("vLLM's kv_cache_memory_bytes for max_num_seqs"),
            "{error}"
        );
    }
}
