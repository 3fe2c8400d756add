//! An estimate as one model's collection, divided per rank, and its JSON
//! shape ([`ExportedEstimate`]): what `kv estimate --format json` prints.

use serde::{Deserialize, Serialize};

use super::Estimate;
use crate::collect::Totals;
use crate::json::{ExportedReport, SCHEMA_VERSION};
use crate::{collect, Collection, KvError, KvSpec, ModelLocalKv, Parallel};

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
        let ranks = self
            .ranks(parallel, max_num_seqs)?
            .into_iter()
            .map(|rank| ExportedEstimateRank {
                per_position_bytes: rank.totals.per_position,
                per_row_bytes: rank.totals.per_row,
                peak_bytes: rank.totals.total,
                report: rank.collection.export(max_num_seqs),
            })
            .collect();
        Ok(ExportedEstimate {
            schema_version: SCHEMA_VERSION,
            source: source.to_owned(),
            detected: self.detected.clone(),
            convention: self.convention.clone(),
            max_model_len: self.max_model_len,
            block_size: self.block_size,
            max_num_seqs,
            ranks,
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
    /// The `max_num_seqs` the peaks are at.
    pub max_num_seqs: u64,
    /// One per rank, in [`Parallel::ranks`] order; each report names its rank.
    pub ranks: Vec<ExportedEstimateRank>,
}

/// One rank of an [`ExportedEstimate`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExportedEstimateRank {
    /// Bytes one position adds to one row ([`Totals::per_position`]).
    #[serde(alias = "per_token_bytes")]
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
    fn an_estimate_written_before_the_rename_reads_back() {
        let llama = serde_json::json!({
            "num_hidden_layers": 2, "num_key_value_heads": 2, "hidden_size": 64,
            "num_attention_heads": 4, "torch_dtype": "float16",
        });
        let e = estimate(&llama, &EstimateSettings::new().positions(16)).unwrap();
        let exported = e.export("c.json", Parallel::SINGLE, 1).unwrap();
        // 2 layers x 2 heads x 16 dims x (K + V) x 2 bytes.
        assert_eq!(exported.ranks[0].per_position_bytes, 2 * 2 * 16 * 2 * 2);
        let text = serde_json::to_string(&exported).unwrap();
        assert!(text.contains("\"per_position_bytes\":256"), "{text}");
        let old = text.replace("per_position_bytes", "per_token_bytes");
        let back: ExportedEstimate = serde_json::from_str(&old).unwrap();
        assert_eq!(back, exported);
    }
}
