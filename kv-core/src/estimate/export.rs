//! An estimate as one model's collection, divided per rank, and its JSON
//! shape ([`ExportedEstimate`]): what `kv estimate --format json` prints.

use serde::{Deserialize, Serialize};

use super::{overflow, Estimate};
use crate::collect::Totals;
use crate::json::{ExportedReport, SCHEMA_VERSION};
use crate::{collect, Collection, KvError, KvSpec, ModelLocalKv, Overflow, Parallel};

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
    /// Its totals at the `max_num_seqs` asked for.
    pub totals: Totals,
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
    /// in [`Parallel::ranks`] order.
    ///
    /// ```
    /// use kv_core::estimate::{estimate, EstimateSettings};
    /// use kv_core::Parallel;
    ///
    /// let llama = serde_json::json!({
    ///     "num_hidden_layers": 32, "num_key_value_heads": 8, "hidden_size": 4096,
    ///     "num_attention_heads": 32, "torch_dtype": "bfloat16",
    /// });
    /// let e = estimate(&llama, &EstimateSettings::new().positions(8192))?;
    /// let ranks = e.ranks(Parallel::new(2, 1)?, 256)?;
    /// // Each of 2 TP ranks holds 4 of the 8 KV heads.
    /// assert_eq!(ranks[0].totals.per_position, 131_072 / 2);
    /// # Ok::<(), kv_core::KvError>(())
    /// ```
    pub fn ranks(
        &self,
        parallel: Parallel,
        max_num_seqs: u64,
    ) -> Result<Vec<EstimateRank>, KvError> {
        let whole = self.collection()?;
        parallel
            .ranks()
            .map(|rank| {
                let collection = whole.for_rank(rank)?;
                let totals = collection.totals(max_num_seqs)?;
                Ok(EstimateRank { collection, totals })
            })
            .collect()
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
                peak_bytes: rank.totals.total,
                report: rank.collection.export(max_num_seqs),
            })
            .collect();
        let cluster = ExportedEstimateCluster::of(&ranks)?;
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
        })
    }
}

/// One config's estimate, as exported: the same family as
/// [`ExportedReport`] (one [`SCHEMA_VERSION`]), and it reads back equal.
///
/// ```
/// use kv_core::estimate::{estimate, EstimateSettings};
/// use kv_core::export::ExportedEstimate;
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
}

fn one() -> u64 {
    1
}

/// Every rank of an [`ExportedEstimate`] together (`kv estimate`'s
/// `cluster:` line): bytes added over the ranks, and the largest rank's
/// peak, the figure that decides whether the layout fits its devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExportedEstimateCluster {
    /// The number of ranks, `tp x pp`.
    pub rank_count: u64,
    /// Bytes of one row on every rank, added.
    pub per_row_bytes: u64,
    /// Peak bytes at `max_num_seqs` on every rank, added.
    pub peak_bytes: u64,
    /// The largest peak of any one rank.
    pub largest_peak_bytes: u64,
}

impl ExportedEstimateCluster {
    /// The ranks added up; a sum over `u64` is an error naming it.
    fn of(ranks: &[ExportedEstimateRank]) -> Result<ExportedEstimateCluster, KvError> {
        let sum = |step: &'static str, of: fn(&ExportedEstimateRank) -> u64| {
            ranks
                .iter()
                .try_fold(0u64, |total, rank| total.checked_add(of(rank)))
                .ok_or(Overflow { step })
                .map_err(overflow(format!("{} ranks added", ranks.len())))
        };
        Ok(ExportedEstimateCluster {
            rank_count: ranks.len() as u64,
            per_row_bytes: sum("the cluster's bytes per row", |rank| rank.per_row_bytes)?,
            peak_bytes: sum("the cluster's peak bytes", |rank| rank.peak_bytes)?,
            largest_peak_bytes: ranks.iter().map(|rank| rank.peak_bytes).max().unwrap_or(0),
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
    /// Peak bytes at `max_num_seqs` ([`Totals::total`]).
    pub peak_bytes: u64,
    /// The rank's report.
    pub report: ExportedReport,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::{estimate, EstimateSettings};

    #[test]
    fn the_cluster_adds_the_ranks_and_names_the_largest() {
        // 2 layers, 2 KV heads of 64 / 4 = 16 dims, f16: 2 x 2 x 16 x (K + V)
        // x 2 B = 256 B per position; at tp 2 each rank holds one head, 128 B.
        let llama = serde_json::json!({
            "num_hidden_layers": 2, "num_key_value_heads": 2, "hidden_size": 64,
            "num_attention_heads": 4, "torch_dtype": "float16",
        });
        let e = estimate(&llama, &EstimateSettings::new().positions(16)).unwrap();
        let exported = e.export("c.json", Parallel::new(2, 1).unwrap(), 3).unwrap();
        assert_eq!(exported.ranks[0].per_position_bytes, 128);
        // 16 positions (one block of 16) per row, 3 rows.
        assert_eq!(exported.ranks[1].per_row_bytes, 128 * 16);
        assert_eq!(
            exported.cluster,
            ExportedEstimateCluster {
                rank_count: 2,
                per_row_bytes: 2 * 128 * 16,
                peak_bytes: 2 * 128 * 16 * 3,
                largest_peak_bytes: 128 * 16 * 3,
            }
        );
        let text = serde_json::to_string(&exported).unwrap();
        assert!(text.contains("\"per_position_bytes\":128"), "{text}");
        let back: ExportedEstimate = serde_json::from_str(&text).unwrap();
        assert_eq!(back, exported);
        // JSON written before decode context parallelism reads as dcp 1.
        assert!(text.contains("\"decode_context_parallel\":1,"), "{text}");
        let older = text.replace("\"decode_context_parallel\":1,", "");
        let back: ExportedEstimate = serde_json::from_str(&older).unwrap();
        assert_eq!(back.decode_context_parallel, 1);
    }

    #[test]
    fn a_cluster_sum_past_u64_is_an_error() {
        let rank = |peak_bytes| ExportedEstimateRank {
            per_position_bytes: 1,
            per_row_bytes: 1,
            peak_bytes,
            report: crate::Collection::default().export(1),
        };
        let error = ExportedEstimateCluster::of(&[rank(u64::MAX), rank(1)]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "kv: cannot read figures from the config: the cluster's peak bytes overflows u64 \
             for 2 ranks added"
        );
        let fits = ExportedEstimateCluster::of(&[rank(u64::MAX - 1), rank(1)]).unwrap();
        assert_eq!(fits.peak_bytes, u64::MAX);
        assert_eq!(fits.largest_peak_bytes, u64::MAX - 1);
        assert_eq!(fits.per_row_bytes, 2);
    }
}
