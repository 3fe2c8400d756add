//! Per-rank reports written as JSON, read back equal, and merged into one
//! cluster view; every mismatch is an error naming what differs.
#![cfg(feature = "json")]

use kv_core::export::{ClusterReport, ExportedReport};
use kv_core::{
    collect, DType, Geometry, KvError, KvSpec, ModelLocalKv, Parallel, Positions, Rows, Scope,
};

struct Llama;

impl ModelLocalKv for Llama {
    fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
        // Llama-3-8B at 8192 positions: 131,072 B x 8192 = 1 GiB per sequence.
        out.push(KvSpec::attention(
            "kv",
            "StaticCache",
            Geometry::new(32, 8, 128, DType::BF16),
            Positions::bounded(8192, "max_cache_len"),
            Scope::Request,
            Rows::MaxNumSeqs,
        ));
        Ok(())
    }
}

/// The report each rank of `tp x pp` writes, through JSON text and back.
fn rank_reports(tp: u64, pp: u64, max_num_seqs: u64) -> Vec<ExportedReport> {
    let whole = collect(&Llama);
    Parallel::new(tp, pp)
        .unwrap()
        .ranks()
        .map(|rank| {
            let written =
                serde_json::to_string(&whole.for_rank(rank).unwrap().export(max_num_seqs)).unwrap();
            serde_json::from_str(&written).unwrap()
        })
        .collect()
}

#[test]
fn a_report_round_trips_through_json_equal() {
    let whole = collect(&Llama)
        .for_rank(Parallel::new(2, 2).unwrap().at(1, 1).unwrap())
        .unwrap();
    let exported = whole.export(4);
    let text = serde_json::to_string_pretty(&exported).unwrap();
    let read: ExportedReport = serde_json::from_str(&text).unwrap();
    assert_eq!(read, exported);
    assert_eq!(read.schema_version, kv_core::export::SCHEMA_VERSION);
    assert_eq!(
        (
            read.parallel.tp,
            read.parallel.pp,
            read.parallel.tp_rank,
            read.parallel.pp_rank
        ),
        (2, 2, 1, 1)
    );
}

#[test]
fn ranks_merge_into_the_sum_and_the_largest_device_figure() {
    let cluster = ClusterReport::merge(rank_reports(2, 2, 4)).unwrap();
    // Each rank: 16 layers x 4 heads x 256 x 2 B x 8192 positions x 4 seqs = 1 GiB.
    let per_rank = 16 * 4 * 256 * 2 * 8192 * 4;
    assert_eq!(per_rank, 1 << 30);
    assert_eq!(cluster.ranks.len(), 4);
    let t = cluster.totals;
    assert_eq!(t.rank_count, 4);
    assert_eq!(t.total_bytes, 4 * per_rank);
    assert_eq!(t.device_bytes, 4 * per_rank);
    assert_eq!(t.host_bytes, 0);
    // The ranks tie: the first, by stage then TP rank, is named.
    assert_eq!(
        (
            t.largest_device_bytes,
            t.largest_device_tp_rank,
            t.largest_device_pp_rank
        ),
        (per_rank, 0, 0)
    );
    assert_eq!(
        cluster.to_string(),
        "\
Model-local KV across tp=2 pp=2 at max_num_seqs=4
| rank | declarations | device | host | total |
| ---- | -----------: | -----: | ---: | ----: |
| tp=0 pp=0 | 1 | 1024.00 MiB | 0.00 MiB | 1024.00 MiB |
| tp=1 pp=0 | 1 | 1024.00 MiB | 0.00 MiB | 1024.00 MiB |
| tp=0 pp=1 | 1 | 1024.00 MiB | 0.00 MiB | 1024.00 MiB |
| tp=1 pp=1 | 1 | 1024.00 MiB | 0.00 MiB | 1024.00 MiB |
| sum | | 4096.00 MiB | 0.00 MiB | 4096.00 MiB |
Largest device figure: 1024.00 MiB on rank tp=0 pp=0"
    );
    // In any order.
    let mut reversed = rank_reports(2, 2, 4);
    reversed.reverse();
    assert_eq!(ClusterReport::merge(reversed).unwrap(), cluster);
}

#[test]
fn the_largest_device_figure_is_the_stage_with_most_layers() {
    struct Latent28;
    impl ModelLocalKv for Latent28 {
        fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
            out.push(KvSpec::latent(
                "latent",
                "MLA",
                kv_core::Latent::new(28, 512, 64, DType::BF16),
                Positions::bounded(1, "one position"),
                Scope::Request,
                Rows::MaxNumSeqs,
            ));
            Ok(())
        }
    }
    // pp 3 over 28 layers: 9 each, the remainder to the stage before the last: 9/10/9.
    let whole = collect(&Latent28);
    let reports = Parallel::new(1, 3)
        .unwrap()
        .ranks()
        .map(|rank| whole.for_rank(rank).unwrap().export(1))
        .collect::<Vec<_>>();
    let cluster = ClusterReport::merge(reports).unwrap();
    let t = cluster.totals;
    assert_eq!(
        (
            t.largest_device_bytes,
            t.largest_device_tp_rank,
            t.largest_device_pp_rank
        ),
        (10 * 576 * 2, 0, 1)
    );
    assert_eq!(t.device_bytes, 28 * 576 * 2);
}

#[test]
fn the_largest_is_the_device_figure_and_host_bytes_are_added_apart() {
    // Each rank: 32 layers x 4 heads x 256 x 2 B x 8192 positions x 1 seq =
    // 1/2 GiB, edited: rank 0 to 1/4 GiB on the device and 3/4 on the host,
    // rank 1 left at 1/2 GiB, all on the device.
    let gib = 1u64 << 30;
    let mut reports = rank_reports(2, 1, 1);
    assert_eq!(reports[1].total_bytes, Some(gib / 2));
    let set = |report: &mut ExportedReport, device: u64, host: u64| {
        report.device_bytes = Some(device);
        report.host_bytes = Some(host);
        report.total_bytes = Some(device + host);
    };
    set(&mut reports[0], gib / 4, 3 * gib / 4);
    let t = ClusterReport::merge(reports).unwrap().totals;
    assert_eq!(
        (t.total_bytes, t.device_bytes, t.host_bytes),
        (gib + gib / 2, gib / 4 + gib / 2, 3 * gib / 4)
    );
    // Rank 0 holds more in all, rank 1 more on its device.
    assert_eq!(
        (
            t.largest_device_bytes,
            t.largest_device_tp_rank,
            t.largest_device_pp_rank
        ),
        (gib / 2, 1, 0)
    );
}

#[test]
fn a_cluster_sum_past_u64_is_an_error_naming_it() {
    let mut reports = rank_reports(2, 1, 4);
    for (report, bytes) in reports.iter_mut().zip([u64::MAX, 1]) {
        report.total_bytes = Some(bytes);
        report.device_bytes = Some(bytes);
    }
    assert_eq!(
        ClusterReport::merge(reports).unwrap_err().to_string(),
        "kv: cannot merge reports: the cluster's peak bytes overflows u64 for 2 ranks added"
    );
}

#[test]
fn mismatches_are_errors_naming_what_differs() {
    let message =
        |reports: Vec<ExportedReport>| ClusterReport::merge(reports).unwrap_err().to_string();
    let mut duplicate = rank_reports(2, 1, 4);
    duplicate.push(duplicate[1].clone());
    assert_eq!(
        message(duplicate),
        "kv: cannot merge reports: rank tp=1 pp=0 appears twice"
    );
    let mut missing = rank_reports(2, 2, 4);
    missing.remove(2);
    assert_eq!(
        message(missing),
        "kv: cannot merge reports: missing rank(s) tp=0 pp=1 of the tp=2 pp=2 layout"
    );
    let mut layouts = rank_reports(2, 1, 4);
    layouts.push(rank_reports(1, 2, 4).remove(1));
    assert_eq!(
        message(layouts),
        "kv: cannot merge reports: rank tp=0 pp=1 is for tp=1 pp=2, the first report \
         (rank tp=0 pp=0) for tp=2 pp=1"
    );
    let mut seqs = rank_reports(2, 1, 4);
    seqs[1] = rank_reports(2, 1, 8).remove(1);
    assert_eq!(
        message(seqs),
        "kv: cannot merge reports: rank tp=1 pp=0 is at max_num_seqs=8, the first report \
         (rank tp=0 pp=0) at max_num_seqs=4"
    );
    let mut versions = rank_reports(2, 1, 4);
    versions[0].schema_version = 99;
    assert_eq!(
        message(versions),
        format!(
            "kv: cannot merge reports: rank tp=0 pp=0 has schema version 99, this kv reads {}",
            kv_core::export::SCHEMA_VERSION
        )
    );
    assert_eq!(
        message(Vec::new()),
        "kv: cannot merge reports: no reports to merge"
    );
    // A report may state any layout: the ranks missing are counted, a few named.
    let mut huge = rank_reports(1, 1, 4);
    huge[0].parallel.tp = u64::MAX;
    huge[0].parallel.pp = u64::MAX;
    assert_eq!(
        message(huge),
        format!(
            "kv: cannot merge reports: missing rank(s) tp=1 pp=0, tp=2 pp=0, tp=3 pp=0, \
             tp=4 pp=0, tp=5 pp=0, tp=6 pp=0, tp=7 pp=0, tp=8 pp=0 and {} more of the \
             tp={} pp={} layout",
            u128::from(u64::MAX) * u128::from(u64::MAX) - 9,
            u64::MAX,
            u64::MAX
        )
    );
    let mut nine = rank_reports(1, 9, 4);
    nine.remove(8);
    nine.remove(0);
    assert_eq!(
        message(nine),
        "kv: cannot merge reports: missing rank(s) tp=0 pp=0, tp=0 pp=8 of the tp=1 pp=9 layout"
    );
    let mut outside = rank_reports(2, 1, 4);
    outside[1].parallel.tp_rank = 2;
    assert_eq!(
        message(outside),
        "kv: cannot merge reports: rank tp=2 pp=0 is outside its own layout tp=2 pp=1"
    );
    let mut inconsistent = rank_reports(2, 1, 4);
    inconsistent[1].total_bytes = Some(1);
    assert_eq!(
        message(inconsistent),
        "kv: cannot merge reports: rank tp=1 pp=0's figures disagree: device 2147483648 B + \
         host 0 B is not its total 1 B"
    );
    let mut overflowed = rank_reports(2, 1, 4);
    overflowed[0].host_bytes = None;
    assert_eq!(
        message(overflowed),
        "kv: cannot merge reports: rank tp=0 pp=0's total overflows u64 (null in its report)"
    );
}

#[test]
fn an_exported_cluster_reads_back_and_its_stated_figures_are_checked() {
    let cluster = ClusterReport::merge(rank_reports(2, 2, 256)).unwrap();
    let exported = cluster.export();
    // Llama-3-8B, 1 GiB per sequence over 4 ranks, at 256 sequences.
    assert_eq!(exported.totals.total_bytes, 256 << 30);
    assert_eq!(exported.totals.rank_count, 4);
    assert_eq!(exported.totals.largest_device_bytes, 64 << 30);
    let text = serde_json::to_string(&exported).unwrap();
    // The figures are written flat, beside the version: the names `kv
    // estimate --format json` writes under `cluster`.
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["total_bytes"], 256u64 << 30);
    assert_eq!(json["largest_device_pp_rank"], 0);
    // The cluster view serializes as its exported shape.
    assert_eq!(serde_json::to_string(&cluster).unwrap(), text);
    let back: kv_core::export::ExportedCluster = serde_json::from_str(&text).unwrap();
    assert_eq!(back.clone().merge_again().unwrap(), cluster);
    let mut tampered: serde_json::Value = serde_json::from_str(&text).unwrap();
    tampered["total_bytes"] = 1.into();
    let tampered: kv_core::export::ExportedCluster = serde_json::from_value(tampered).unwrap();
    let err = tampered.merge_again().unwrap_err().to_string();
    assert!(err.contains("but its reports add up to"), "{err}");
    let mut future: serde_json::Value = serde_json::from_str(&text).unwrap();
    future["schema_version"] = 99.into();
    let future: kv_core::export::ExportedCluster = serde_json::from_value(future).unwrap();
    let err = future.merge_again().unwrap_err().to_string();
    assert!(err.contains("schema version 99"), "{err}");
}

#[test]
fn labelled_reports_name_the_report_at_fault_and_every_problem_at_once() {
    let problems = |reports: Vec<(&str, ExportedReport)>| {
        ClusterReport::merge_labelled(reports)
            .unwrap_err()
            .into_problems()
            .into_iter()
            .map(|problem| match problem {
                KvError::Merge { report, problem } => (report, problem),
                other => panic!("not a merge problem: {other}"),
            })
            .collect::<Vec<_>>()
    };
    let good = rank_reports(2, 1, 4);
    let mut future = good[1].clone();
    future.schema_version = 99;
    let other_seqs = rank_reports(2, 1, 8).remove(1);
    let mut inconsistent = good[1].clone();
    inconsistent.host_bytes = Some(1);
    // Four bad reports after a good one: each named, all in one error.
    let found = problems(vec![
        ("a.json", good[0].clone()),
        ("b.json", future),
        ("c.json", other_seqs),
        ("d.json", inconsistent),
        ("e.json", good[0].clone()),
    ]);
    let label = |text: &str| Some(text.to_string());
    assert_eq!(
        found,
        vec![
            (
                label("b.json"),
                format!(
                    "rank tp=1 pp=0 has schema version 99, this kv reads {}",
                    kv_core::export::SCHEMA_VERSION
                )
            ),
            (
                label("c.json"),
                "rank tp=1 pp=0 is at max_num_seqs=8, the first report (a.json) at \
                 max_num_seqs=4"
                    .to_string()
            ),
            (
                label("d.json"),
                "rank tp=1 pp=0's figures disagree: device 2147483648 B + host 1 B is not its \
                 total 2147483648 B"
                    .to_string()
            ),
            (
                label("e.json"),
                "rank tp=0 pp=0 appears twice (also a.json)".to_string()
            ),
        ]
    );
    // The message of a labelled problem names the report.
    let error = ClusterReport::merge_labelled([("a.json", good[0].clone())]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "kv: cannot merge reports: missing rank(s) tp=1 pp=0 of the tp=2 pp=1 layout"
    );
    let error =
        ClusterReport::merge_labelled([("a.json", good[0].clone()), ("a.json", good[0].clone())])
            .unwrap_err();
    assert_eq!(
        error.to_string(),
        "kv: cannot merge reports: a.json: rank tp=0 pp=0 appears twice (also a.json)"
    );
    // A report of another schema is not the one the others are held to.
    let mut first_future = good[0].clone();
    first_future.schema_version = 99;
    let found = problems(vec![
        ("old.json", first_future),
        ("b.json", good[1].clone()),
        ("c.json", rank_reports(2, 1, 8).remove(0)),
    ]);
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(found[1].0, label("c.json"));
    assert!(
        found[1].1.contains("the first report (b.json)"),
        "{found:?}"
    );
    // Labelled and unlabelled merges of good reports agree.
    let labelled = ClusterReport::merge_labelled(good.iter().map(|r| ("x", r.clone()))).unwrap();
    assert_eq!(labelled, ClusterReport::merge(good).unwrap());
}
