//! Whether per-rank reports are ranks of one model in one layout, before
//! `kv merge` adds them up.
//!
//! A rank report names no model: what identifies one is its declarations.
//! Under kv-core's division (`kv_core::Parallel`), every rank of a model
//! holds the same declarations with the same fields, except what its
//! pipeline stage's share of layers moves: `layers`, the bytes
//! (`bytes_per_row`, `peak_bytes`), `share` and `roundings` (which name
//! them); and a stage that holds none of a declaration's layers leaves it
//! out. So:
//! - ranks of one pipeline stage hold the same declarations, field for field;
//! - a declaration (by `full_name`) in two stages agrees on every other
//!   field: owner type, kind, heads, head dims, formats, positions, scope, ...
//!
//! Two models alike in every such field, differing only in layer counts
//! and placed in different stages, are not told apart: their reports do not
//! say how many layers the whole model has in a form kv reads back.

use std::collections::BTreeMap;

use kv_core::export::{ExportedDeclaration, ExportedReport};
use serde_json::Value;

use crate::input::Problem;

/// The fields a rank's share of layers moves.
const RANK_FIELDS: [&str; 5] = [
    "layers",
    "bytes_per_row",
    "peak_bytes",
    "share",
    "roundings",
];

/// A declaration's fields as JSON, by name.
fn fields(declaration: &ExportedDeclaration) -> BTreeMap<String, Value> {
    match serde_json::to_value(declaration) {
        Ok(Value::Object(map)) => map.into_iter().collect(),
        _ => BTreeMap::new(),
    }
}

/// The first field where `a` and `b` differ: its name, and each side's
/// value as JSON. The model's fields come first; then, with `rank_fields`,
/// those a rank's share moves (`layers` before the bytes it makes).
fn first_difference(
    a: &BTreeMap<String, Value>,
    b: &BTreeMap<String, Value>,
    rank_fields: bool,
) -> Option<(String, String, String)> {
    let shown = |v: Option<&Value>| v.map_or_else(|| "absent".to_owned(), Value::to_string);
    let model_fields = a
        .keys()
        .chain(b.keys())
        .map(String::as_str)
        .filter(|key| !RANK_FIELDS.contains(key));
    let rank_fields = RANK_FIELDS.iter().copied().filter(|_| rank_fields);
    model_fields
        .chain(rank_fields)
        .find(|key| a.get(*key) != b.get(*key))
        .map(|key| (key.to_owned(), shown(a.get(key)), shown(b.get(key))))
}

/// `full_attention, sliding_attention`, or `none`.
fn names(report: &ExportedReport) -> String {
    let names: Vec<&str> = report
        .declarations
        .iter()
        .map(|d| d.full_name.as_str())
        .collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// One problem per report that is not a rank of the same model as the
/// reports before it, naming both files and the field that differs.
pub fn different_models(reports: &[(String, ExportedReport)]) -> Vec<Problem> {
    let mut problems = Vec::new();
    // The first report of each pipeline stage, and the first report holding
    // each declaration, with its fields.
    let mut stage_first: BTreeMap<u64, usize> = BTreeMap::new();
    let mut declared: BTreeMap<String, (usize, BTreeMap<String, Value>)> = BTreeMap::new();
    for (index, (file, report)) in reports.iter().enumerate() {
        let here = report.parallel;
        let problem = |other: usize, what: String| Problem {
            file: file.clone(),
            message: format!(
                "cannot merge: not a rank of the same model as {} (rank tp={} pp={}): {what}",
                reports[other].0,
                reports[other].1.parallel.tp_rank,
                reports[other].1.parallel.pp_rank
            ),
        };
        if let Some(&first) = stage_first.get(&here.pp_rank) {
            let theirs = &reports[first].1;
            if names(report) != names(theirs) {
                problems.push(problem(
                    first,
                    format!(
                        "pipeline stage {} holds declarations {} here, {} there",
                        here.pp_rank,
                        names(report),
                        names(theirs)
                    ),
                ));
                continue;
            }
            let differs = report
                .declarations
                .iter()
                .zip(&theirs.declarations)
                .find_map(|(mine, other)| {
                    first_difference(&fields(mine), &fields(other), true)
                        .map(|d| (mine.full_name.clone(), d))
                });
            if let Some((name, (field, mine, other))) = differs {
                problems.push(problem(
                    first,
                    format!(
                        "declaration `{name}` has {field} {mine} here, {other} there (ranks of \
                         one pipeline stage hold the same)"
                    ),
                ));
                continue;
            }
        } else {
            stage_first.insert(here.pp_rank, index);
        }
        for declaration in &report.declarations {
            let mine = fields(declaration);
            match declared.get(&declaration.full_name) {
                Some((other, theirs)) => {
                    if let Some((field, a, b)) = first_difference(&mine, theirs, false) {
                        problems.push(problem(
                            *other,
                            format!(
                                "declaration `{}` has {field} {a} here, {b} there",
                                declaration.full_name
                            ),
                        ));
                        break;
                    }
                }
                None => {
                    declared.insert(declaration.full_name.clone(), (index, mine));
                }
            }
        }
    }
    problems
}
