//! Per-rank reports merged into one cluster view (feature `json`): per-rank
//! lines, the sum, and the largest device figure, the one that decides
//! whether a layout fits.

use std::collections::BTreeMap;
use std::fmt;

use crate::json::{ExportedReport, SCHEMA_VERSION};
use crate::units::mib;
use crate::KvError;

/// Reports of every rank of one parallel layout, checked to belong together.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterReport {
    /// The reports, ordered by pipeline stage, then TP rank.
    pub ranks: Vec<ExportedReport>,
    /// Peak bytes over every rank.
    pub total_bytes: u64,
    /// Device bytes over every rank.
    pub device_bytes: u64,
    /// Host bytes over every rank.
    pub host_bytes: u64,
    /// The largest device figure of any rank, and that rank's (tp_rank, pp_rank).
    pub largest_device: (u64, (u64, u64)),
}

impl ClusterReport {
    /// Merges per-rank reports. Every rank of the layout must be there once,
    /// with the same schema version, layout and `max_num_seqs`; each mismatch
    /// is an error naming what differs.
    ///
    /// ```
    /// use kv_core::{Collection, Parallel};
    /// use kv_core::export::ClusterReport;
    ///
    /// let layout = Parallel::new(2, 1)?;
    /// let reports = layout
    ///     .ranks()
    ///     .map(|rank| Collection::default().for_rank(rank).map(|c| c.export(8)))
    ///     .collect::<Result<Vec<_>, _>>()?;
    /// let cluster = ClusterReport::merge(reports)?;
    /// assert_eq!(cluster.ranks.len(), 2);
    /// assert_eq!(cluster.total_bytes, 0);
    /// # Ok::<(), kv_core::KvError>(())
    /// ```
    pub fn merge(
        reports: impl IntoIterator<Item = ExportedReport>,
    ) -> Result<ClusterReport, KvError> {
        let error = |problem: String| KvError::Merge { problem };
        let mut by_rank: BTreeMap<(u64, u64), ExportedReport> = BTreeMap::new();
        let mut first: Option<(u32, u64, u64, u64)> = None;
        for report in reports {
            let p = report.parallel;
            let rank = (p.pp_rank, p.tp_rank);
            let named = format!("rank tp={} pp={}", p.tp_rank, p.pp_rank);
            if report.schema_version != SCHEMA_VERSION {
                return Err(error(format!(
                    "{named} has schema version {}, this kv reads {SCHEMA_VERSION}",
                    report.schema_version
                )));
            }
            let key = (report.schema_version, report.max_num_seqs, p.tp, p.pp);
            match first {
                None => first = Some(key),
                Some((_, max_num_seqs, tp, pp)) => {
                    if (p.tp, p.pp) != (tp, pp) {
                        return Err(error(format!(
                            "{named} is for tp={} pp={}, the first report for tp={tp} pp={pp}",
                            p.tp, p.pp
                        )));
                    }
                    if report.max_num_seqs != max_num_seqs {
                        return Err(error(format!(
                            "{named} is at max_num_seqs={}, the first report at max_num_seqs={max_num_seqs}",
                            report.max_num_seqs
                        )));
                    }
                }
            }
            if p.tp_rank >= p.tp || p.pp_rank >= p.pp {
                return Err(error(format!(
                    "{named} is outside its own layout tp={} pp={}",
                    p.tp, p.pp
                )));
            }
            if by_rank.insert(rank, report).is_some() {
                return Err(error(format!("{named} appears twice")));
            }
        }
        let Some((_, _, tp, pp)) = first else {
            return Err(error("no reports to merge".into()));
        };
        let missing: Vec<String> = (0..pp)
            .flat_map(|pp_rank| (0..tp).map(move |tp_rank| (pp_rank, tp_rank)))
            .filter(|rank| !by_rank.contains_key(rank))
            .map(|(pp_rank, tp_rank)| format!("tp={tp_rank} pp={pp_rank}"))
            .collect();
        if !missing.is_empty() {
            return Err(error(format!(
                "missing rank(s) {} of the tp={tp} pp={pp} layout",
                missing.join(", ")
            )));
        }
        let (mut total_bytes, mut device_bytes, mut host_bytes) = (0u64, 0u64, 0u64);
        let mut largest: Option<(u64, (u64, u64))> = None;
        for report in by_rank.values() {
            let p = report.parallel;
            let named = format!("rank tp={} pp={}", p.tp_rank, p.pp_rank);
            let (Some(total), Some(device), Some(host)) =
                (report.total_bytes, report.device_bytes, report.host_bytes)
            else {
                return Err(error(format!(
                    "{named}'s total overflows u64 (null in its report)"
                )));
            };
            if device.checked_add(host) != Some(total) {
                return Err(error(format!(
                    "{named}'s figures disagree: device {device} B + host {host} B is not its \
                     total {total} B"
                )));
            }
            let sum = |a: u64, b: u64| {
                a.checked_add(b)
                    .ok_or_else(|| error("the cluster sum overflows u64".into()))
            };
            total_bytes = sum(total_bytes, total)?;
            device_bytes = sum(device_bytes, device)?;
            host_bytes = sum(host_bytes, host)?;
            if largest.is_none_or(|(most, _)| device > most) {
                largest = Some((device, (p.tp_rank, p.pp_rank)));
            }
        }
        let largest_device = largest.ok_or_else(|| error("no reports to merge".into()))?;
        Ok(ClusterReport {
            ranks: by_rank.into_values().collect(),
            total_bytes,
            device_bytes,
            host_bytes,
            largest_device,
        })
    }
}

impl fmt::Display for ClusterReport {
    /// The cluster table: one line per rank, the sum, the largest device figure.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = &self.ranks[0];
        writeln!(
            f,
            "Model-local KV across tp={} pp={} at max_num_seqs={}",
            first.parallel.tp, first.parallel.pp, first.max_num_seqs
        )?;
        writeln!(f, "| rank | declarations | device | host | total |")?;
        writeln!(f, "| ---- | -----------: | -----: | ---: | ----: |")?;
        for report in &self.ranks {
            let p = report.parallel;
            let cell = |bytes: Option<u64>| {
                bytes.map_or("overflow".into(), |b| format!("{:.2} MiB", mib(b)))
            };
            writeln!(
                f,
                "| tp={} pp={} | {} | {} | {} | {} |",
                p.tp_rank,
                p.pp_rank,
                report.declarations.len(),
                cell(report.device_bytes),
                cell(report.host_bytes),
                cell(report.total_bytes)
            )?;
        }
        writeln!(
            f,
            "| sum | | {:.2} MiB | {:.2} MiB | {:.2} MiB |",
            mib(self.device_bytes),
            mib(self.host_bytes),
            mib(self.total_bytes)
        )?;
        let (bytes, (tp_rank, pp_rank)) = self.largest_device;
        write!(
            f,
            "Largest device figure: {:.2} MiB on rank tp={tp_rank} pp={pp_rank}",
            mib(bytes)
        )
    }
}
