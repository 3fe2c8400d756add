//! Per-rank reports merged into one cluster view (feature `json`): per-rank
//! lines, the sum, and the largest device figure, the one that decides
//! whether a layout fits.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::json::{ExportedReport, SCHEMA_VERSION};
use crate::error::{KvError, Overflow};
use crate::units::mib;

/// Reports of every rank of one parallel layout, checked to belong together.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterReport {
    /// The reports, ordered by pipeline stage, then TP rank.
    pub ranks: Vec<ExportedReport>,
    /// Their figures added up, and the largest device figure.
    pub totals: ClusterTotals,
}

/// Every rank's report together: its figures added up, and the largest
/// device figure, the one that decides whether a layout fits its devices.
/// `kv merge` and `kv estimate --format json` both write it, from the
/// per-rank reports, under these names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ClusterTotals {
    /// The number of ranks, `tp x pp`.
    pub rank_count: u64,
    /// Peak bytes over every rank.
    pub total_bytes: u64,
    /// Device bytes over every rank.
    pub device_bytes: u64,
    /// Host bytes over every rank.
    pub host_bytes: u64,
    /// The largest device figure of any rank (the first such rank in the
    /// order given, when several tie).
    pub largest_device_bytes: u64,
    /// That rank's TP rank.
    pub largest_device_tp_rank: u64,
    /// That rank's pipeline stage.
    pub largest_device_pp_rank: u64,
}

impl ClusterTotals {
    /// The figures of `reports`, one per rank, added up. A sum past `u64` is
    /// an [`Overflow`] naming it; so is a rank whose figures are `null` in
    /// its report (they overflowed there, so the sum cannot fit either).
    pub fn of<'a>(
        reports: impl IntoIterator<Item = &'a ExportedReport>,
    ) -> Result<ClusterTotals, Overflow> {
        const PEAK: &str = "the cluster's peak bytes";
        let add = |sum: u64, figure: u64, step: &'static str| {
            sum.checked_add(figure).ok_or(Overflow { step })
        };
        let mut totals = ClusterTotals {
            rank_count: 0,
            total_bytes: 0,
            device_bytes: 0,
            host_bytes: 0,
            largest_device_bytes: 0,
            largest_device_tp_rank: 0,
            largest_device_pp_rank: 0,
        };
        for report in reports {
            let (Some(total), Some(device), Some(host)) =
                (report.total_bytes, report.device_bytes, report.host_bytes)
            else {
                return Err(Overflow { step: PEAK });
            };
            totals.total_bytes = add(totals.total_bytes, total, PEAK)?;
            totals.device_bytes = add(totals.device_bytes, device, "the cluster's device bytes")?;
            totals.host_bytes = add(totals.host_bytes, host, "the cluster's host bytes")?;
            if totals.rank_count == 0 || device > totals.largest_device_bytes {
                totals.largest_device_bytes = device;
                totals.largest_device_tp_rank = report.parallel.tp_rank;
                totals.largest_device_pp_rank = report.parallel.pp_rank;
            }
            totals.rank_count += 1;
        }
        Ok(totals)
    }
}

impl ClusterReport {
    /// Merges per-rank reports. Every rank of the layout must be there once,
    /// with the same schema version, layout and `max_num_seqs`, and figures
    /// that add up; every mismatch is reported at once
    /// ([`KvError::Several`] when there are more than one), naming what
    /// differs. [`ClusterReport::merge_labelled`] also names each report.
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
    /// assert_eq!(cluster.totals.total_bytes, 0);
    /// # Ok::<(), kv_core::KvError>(())
    /// ```
    pub fn merge(
        reports: impl IntoIterator<Item = ExportedReport>,
    ) -> Result<ClusterReport, KvError> {
        merge_named(reports.into_iter().map(|report| (None, report)).collect())
    }

    /// [`ClusterReport::merge`] of reports with a label each (the file it
    /// was read from): each problem is a [`KvError::Merge`] whose `report`
    /// is the label of the report at fault, and whose text names the other
    /// report by its label, so a tool can print one line per file.
    ///
    /// ```
    /// use kv_core::{Collection, KvError, Parallel};
    /// use kv_core::export::ClusterReport;
    ///
    /// let rank0 = Collection::default().for_rank(Parallel::new(2, 1)?.at(0, 0)?)?;
    /// let error = ClusterReport::merge_labelled([("a.json", rank0.export(8)), ("b.json", rank0.export(8))])
    ///     .unwrap_err();
    /// let KvError::Merge { report, problem } = error else { unreachable!() };
    /// assert_eq!(report.as_deref(), Some("b.json"));
    /// assert_eq!(problem, "rank tp=0 pp=0 appears twice (also a.json)");
    /// # Ok::<(), kv_core::KvError>(())
    /// ```
    pub fn merge_labelled<L: fmt::Display>(
        reports: impl IntoIterator<Item = (L, ExportedReport)>,
    ) -> Result<ClusterReport, KvError> {
        merge_named(
            reports
                .into_iter()
                .map(|(label, report)| (Some(label.to_string()), report))
                .collect(),
        )
    }
}

/// The merge, with each report's label where it has one.
fn merge_named(reports: Vec<(Option<String>, ExportedReport)>) -> Result<ClusterReport, KvError> {
    let error = |report: Option<&String>, problem: String| KvError::Merge {
        report: report.cloned(),
        problem,
    };
    let rank_of = |report: &ExportedReport| {
        let p = report.parallel;
        format!("rank tp={} pp={}", p.tp_rank, p.pp_rank)
    };
    // How a problem names another report: by its label, else by its rank.
    let other = |(label, report): &(Option<String>, ExportedReport)| {
        label.clone().unwrap_or_else(|| rank_of(report))
    };
    let mut problems = Vec::new();
    let mut first: Option<usize> = None;
    // (pp_rank, tp_rank) -> index of each report that passed every check.
    let mut by_rank: BTreeMap<(u64, u64), usize> = BTreeMap::new();
    for (index, (label, report)) in reports.iter().enumerate() {
        let p = report.parallel;
        let named = rank_of(report);
        let mut problem = |text: String| problems.push(error(label.as_ref(), text));
        if report.schema_version != SCHEMA_VERSION {
            problem(format!(
                "{named} has schema version {}, this kv reads {SCHEMA_VERSION}",
                report.schema_version
            ));
            continue;
        }
        match first {
            None => first = Some(index),
            Some(first) => {
                let reference = &reports[first].1;
                let q = reference.parallel;
                if (p.tp, p.pp) != (q.tp, q.pp) {
                    problem(format!(
                        "{named} is for tp={} pp={}, the first report ({}) for tp={} pp={}",
                        p.tp,
                        p.pp,
                        other(&reports[first]),
                        q.tp,
                        q.pp
                    ));
                    continue;
                }
                if report.max_num_seqs != reference.max_num_seqs {
                    problem(format!(
                        "{named} is at max_num_seqs={}, the first report ({}) at max_num_seqs={}",
                        report.max_num_seqs,
                        other(&reports[first]),
                        reference.max_num_seqs
                    ));
                    continue;
                }
            }
        }
        if p.tp_rank >= p.tp || p.pp_rank >= p.pp {
            problem(format!(
                "{named} is outside its own layout tp={} pp={}",
                p.tp, p.pp
            ));
            continue;
        }
        let (Some(total), Some(device), Some(host)) =
            (report.total_bytes, report.device_bytes, report.host_bytes)
        else {
            problem(format!(
                "{named}'s total overflows u64 (null in its report)"
            ));
            continue;
        };
        if device.checked_add(host) != Some(total) {
            problem(format!(
                "{named}'s figures disagree: device {device} B + host {host} B is not its \
                 total {total} B"
            ));
            continue;
        }
        if let Some(&seen) = by_rank.get(&(p.pp_rank, p.tp_rank)) {
            let also = match &reports[seen].0 {
                Some(label) => format!(" (also {label})"),
                None => String::new(),
            };
            problem(format!("{named} appears twice{also}"));
            continue;
        }
        by_rank.insert((p.pp_rank, p.tp_rank), index);
    }
    if let Some(problem) = KvError::from_all(problems) {
        return Err(problem);
    }
    let Some(first) = first else {
        return Err(error(None, "no reports to merge".into()));
    };
    let (tp, pp) = (reports[first].1.parallel.tp, reports[first].1.parallel.pp);
    // Every report kept is a distinct rank inside the layout, so the ranks
    // missing are the layout's size less the reports; a report may state a
    // huge layout, so at most a few are named (found lazily, in order).
    let given = by_rank.len() as u128;
    let missing = u128::from(tp) * u128::from(pp) - given;
    if missing > 0 {
        const NAMED: usize = 8;
        let named: Vec<String> = (0..pp)
            .flat_map(|pp_rank| (0..tp).map(move |tp_rank| (pp_rank, tp_rank)))
            .filter(|rank| !by_rank.contains_key(rank))
            .take(NAMED)
            .map(|(pp_rank, tp_rank)| format!("tp={tp_rank} pp={pp_rank}"))
            .collect();
        let more = match missing - named.len() as u128 {
            0 => String::new(),
            more => format!(" and {more} more"),
        };
        return Err(error(
            None,
            format!(
                "missing rank(s) {}{more} of the tp={tp} pp={pp} layout",
                named.join(", ")
            ),
        ));
    }
    let ranks: Vec<ExportedReport> = by_rank
        .values()
        .map(|&index| reports[index].1.clone())
        .collect();
    let totals = ClusterTotals::of(&ranks)
        .map_err(|o| error(None, format!("{o} for {} ranks added", ranks.len())))?;
    Ok(ClusterReport { ranks, totals })
}

/// A cluster view as exported (`kv merge --format json`): the same family
/// as [`ExportedReport`], with every rank's report, and it reads back into
/// the same [`ClusterReport`] ([`ExportedCluster::merge_again`]).
///
/// ```
/// use kv_core::{Collection, Parallel};
/// use kv_core::export::{ClusterReport, ExportedCluster};
///
/// let layout = Parallel::new(2, 1)?;
/// let reports = layout
///     .ranks()
///     .map(|rank| Collection::default().for_rank(rank).map(|c| c.export(8)))
///     .collect::<Result<Vec<_>, _>>()?;
/// let cluster = ClusterReport::merge(reports)?;
/// let text = serde_json::to_string(&cluster.export()).unwrap();
/// let back: ExportedCluster = serde_json::from_str(&text).unwrap();
/// assert_eq!(back.merge_again()?, cluster);
/// # Ok::<(), kv_core::KvError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExportedCluster {
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// The reports' figures added up (written flat, beside `schema_version`).
    #[serde(flatten)]
    pub totals: ClusterTotals,
    /// Every rank's report, by stage then TP rank.
    pub reports: Vec<ExportedReport>,
}

impl ClusterReport {
    /// The exported shape.
    pub fn export(&self) -> ExportedCluster {
        ExportedCluster {
            schema_version: SCHEMA_VERSION,
            totals: self.totals,
            reports: self.ranks.clone(),
        }
    }
}

impl ExportedCluster {
    /// The cluster view again, merged from the reports it carries (so every
    /// check of [`ClusterReport::merge`] holds); an error when the figures
    /// it states disagree with them.
    pub fn merge_again(self) -> Result<ClusterReport, KvError> {
        if self.schema_version != SCHEMA_VERSION {
            return Err(KvError::Merge {
                report: None,
                problem: format!(
                    "the cluster has schema version {}, this kv reads {SCHEMA_VERSION}",
                    self.schema_version
                ),
            });
        }
        let figures = |t: &ClusterTotals| {
            (
                t.total_bytes,
                t.device_bytes,
                t.host_bytes,
                t.largest_device_bytes,
            )
        };
        let stated = figures(&self.totals);
        let merged = ClusterReport::merge(self.reports)?;
        let found = figures(&merged.totals);
        if stated != found {
            return Err(KvError::Merge {
                report: None,
                problem: format!(
                    "the cluster states (total, device, host, largest) = {stated:?} B but its \
                     reports add up to {found:?} B"
                ),
            });
        }
        Ok(merged)
    }
}

/// Serialized as its [`ExportedCluster`], the shape that reads back.
impl Serialize for ClusterReport {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.export().serialize(serializer)
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
        let t = &self.totals;
        writeln!(
            f,
            "| sum | | {:.2} MiB | {:.2} MiB | {:.2} MiB |",
            mib(t.device_bytes),
            mib(t.host_bytes),
            mib(t.total_bytes)
        )?;
        write!(
            f,
            "Largest device figure: {:.2} MiB on rank tp={} pp={}",
            mib(t.largest_device_bytes),
            t.largest_device_tp_rank,
            t.largest_device_pp_rank
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collection::collect::Collection;

    #[test]
    fn no_reports_add_up_to_nothing_and_a_null_figure_overflows_the_sum() {
        let none: [ExportedReport; 0] = [];
        let empty = ClusterTotals::of(&none).unwrap();
        assert_eq!((empty.rank_count, empty.total_bytes), (0, 0));
        // A figure is null in a report where it overflowed u64 there.
        let mut overflowed = Collection::default().export(1);
        overflowed.host_bytes = None;
        assert_eq!(
            ClusterTotals::of([&Collection::default().export(1), &overflowed]),
            Err(Overflow {
                step: "the cluster's peak bytes"
            })
        );
    }
}
