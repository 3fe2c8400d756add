//! Identical declarations of sibling owners, shown as one line: a model that
//! keeps each layer's cache in that layer declares it once per layer, and
//! the report and the table show `layers.0..=27.attn.cache: 28 x ...`.
//!
//! Identical means the same declaration (every figure and text) on the same
//! owner type, at paths that differ only in one index segment, with
//! consecutive indices. The figures are never changed, only shown together.

use std::collections::HashMap;

use super::collect::{Collected, Collection};
use crate::error::Overflow;

/// Identical declarations of sibling owners, shown as one line; a
/// declaration with no identical sibling is a group of one.
///
/// ```
/// use kv_core::{collect, ModelLocalKv};
///
/// #[derive(ModelLocalKv)]
/// #[kv(name = "cache", cache = "KvCache",
///      layers = 1, kv_heads = 2, head_dim = 8, dtype = bf16,
///      positions = bounded(64, because = "max_seq_len"),
///      scope = request, rows = max_num_seqs)]
/// struct Attention;
///
/// #[derive(ModelLocalKv)]
/// struct Layer {
///     #[kv(child)]
///     attn: Attention,
/// }
///
/// #[derive(ModelLocalKv)]
/// struct Model {
///     #[kv(child)]
///     layers: Vec<Layer>,
/// }
///
/// let model = Model { layers: (0..28).map(|_| Layer { attn: Attention }).collect() };
/// let collection = collect(&model);
/// let groups = collection.grouped();
/// assert_eq!(groups.len(), 1);
/// assert_eq!(groups[0].count, 28);
/// assert_eq!(groups[0].full_name(), "layers.0..=27.attn.cache");
/// // 28 x (1 layer x 2 heads x (8 + 8) dims x 2 B x 64 positions)
/// assert_eq!(groups[0].bytes_per_row(), Ok(28 * 4_096));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Grouped<'c> {
    /// The first declaration; the others differ from it only in their path.
    pub first: &'c Collected,
    /// How many declarations: 1 for one alone.
    pub count: usize,
    /// The owners' path, the index that varies written as an inclusive
    /// range (`layers.0..=27.attn`); the owner's path for one alone.
    pub path: String,
}

impl Grouped<'_> {
    /// `path.name`: `layers.0..=27.attn.cache`.
    pub fn full_name(&self) -> String {
        crate::collection::collect::join(&self.path, &self.first.spec.name)
    }

    /// Bytes per row of every declaration in the group together.
    pub fn bytes_per_row(&self) -> Result<u64, Overflow> {
        times(self.count, self.first.spec.bytes_per_row()?)
    }

    /// Bytes at peak of every declaration in the group together.
    pub fn peak_bytes(&self, max_num_seqs: u64) -> Result<u64, Overflow> {
        times(self.count, self.first.spec.peak_bytes(max_num_seqs)?)
    }
}

/// `count x bytes`, checked.
pub(crate) fn times(count: usize, bytes: u64) -> Result<u64, Overflow> {
    u64::try_from(count)
        .ok()
        .and_then(|count| count.checked_mul(bytes))
        .ok_or(Overflow {
            step: "bytes of identical declarations (count x bytes of one)",
        })
}

impl Collection {
    /// The declarations as the report and the table show them: identical
    /// declarations of sibling owners (same declaration, same owner type,
    /// paths differing only in one index segment, indices consecutive) as
    /// one [`Grouped`], in visiting order of their first.
    pub fn grouped(&self) -> Vec<Grouped<'_>> {
        let entries = self.entries();
        runs(
            entries,
            |e| &e.path,
            |e| (e.owner_type, e.spec.name.as_ref()),
            |a, b| a.owner_type == b.owner_type && a.spec == b.spec && a.share == b.share,
        )
        .into_iter()
        .map(|run| Grouped {
            first: &entries[run.first],
            count: run.count,
            path: run.path,
        })
        .collect()
    }
}

/// Consecutive items of one group.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Run {
    /// The first item's index.
    pub first: usize,
    /// How many items.
    pub count: usize,
    /// The path with the varying index as `A..=B`; the first's path for one.
    pub path: String,
}

/// A group being built.
struct Open {
    first: usize,
    count: usize,
    /// The varying segment, once a second item joined.
    axis: Option<usize>,
    /// The first item's index segments, by position.
    indices: Vec<(usize, u64)>,
    /// The varying segment's last index, once a second item joined.
    last: u64,
}

/// The items' runs: an item joins the run of an earlier one when `same`
/// holds of the run's first, their paths differ only in one index segment,
/// and its index there is the run's last plus one. `name` keeps apart the
/// several declarations of one owner.
pub(crate) fn runs<'a, T, N: Eq + std::hash::Hash>(
    items: &'a [T],
    path: impl Fn(&'a T) -> &'a str,
    name: impl Fn(&'a T) -> N,
    same: impl Fn(&T, &T) -> bool,
) -> Vec<Run> {
    let mut groups: Vec<Open> = Vec::new();
    // (path with one index segment masked, its position, name) -> group.
    let mut open: HashMap<(String, usize, N), usize> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let segments = segments(path(item));
        let indices: Vec<(usize, u64)> = segments
            .iter()
            .enumerate()
            .filter_map(|(at, s)| index(s).map(|index| (at, index)))
            .collect();
        let mut joined = false;
        for &(at, index) in &indices {
            let key = (masked(&segments, at), at, name(item));
            let Some(&g) = open.get(&key) else {
                continue;
            };
            let group = &mut groups[g];
            let last = match group.axis {
                Some(axis) if axis == at => group.last,
                Some(_) => continue,
                None => match group.indices.iter().find(|(a, _)| *a == at) {
                    Some(&(_, first)) => first,
                    None => continue,
                },
            };
            if last.checked_add(1) == Some(index) && same(&items[group.first], item) {
                group.axis = Some(at);
                group.last = index;
                group.count += 1;
                joined = true;
                break;
            }
        }
        if !joined {
            let g = groups.len();
            for &(at, _) in &indices {
                open.insert((masked(&segments, at), at, name(item)), g);
            }
            groups.push(Open {
                first: i,
                count: 1,
                axis: None,
                indices,
                last: 0,
            });
        }
    }
    groups
        .into_iter()
        .map(|group| {
            let first_path = path(&items[group.first]);
            let path = match group.axis {
                Some(axis) => {
                    let mut segments = segments(first_path);
                    let from = group
                        .indices
                        .iter()
                        .find(|(a, _)| *a == axis)
                        .map_or(0, |(_, index)| *index);
                    let range = format!("{from}..={}", group.last);
                    segments[axis] = &range;
                    segments.join(".")
                }
                None => first_path.to_owned(),
            };
            Run {
                first: group.first,
                count: group.count,
                path,
            }
        })
        .collect()
}

fn segments(path: &str) -> Vec<&str> {
    if path.is_empty() {
        Vec::new()
    } else {
        path.split('.').collect()
    }
}

/// An index segment as the collector writes one: decimal, no leading zero.
fn index(segment: &str) -> Option<u64> {
    let canonical = !segment.is_empty()
        && segment.bytes().all(|b| b.is_ascii_digit())
        && (segment == "0" || !segment.starts_with('0'));
    if canonical {
        segment.parse().ok()
    } else {
        None
    }
}

/// The path with the segment at `at` replaced by `*`.
fn masked(segments: &[&str], at: usize) -> String {
    let mut out = String::new();
    for (i, segment) in segments.iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        out.push_str(if i == at { "*" } else { segment });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (path, name, value): items are the same when name and value are.
    fn run(items: &[(&str, &str, u8)]) -> Vec<(usize, usize, String)> {
        runs(items, |i| i.0, |i| i.1, |a, b| a.1 == b.1 && a.2 == b.2)
            .into_iter()
            .map(|r| (r.first, r.count, r.path))
            .collect()
    }

    #[test]
    fn consecutive_identical_layers_are_one_run() {
        let items = [
            ("m.layers.0.attn", "kv", 1),
            ("m.layers.1.attn", "kv", 1),
            ("m.layers.2.attn", "kv", 1),
        ];
        assert_eq!(run(&items), [(0, 3, "m.layers.0..=2.attn".to_owned())]);
    }

    #[test]
    fn two_declarations_per_layer_are_two_runs_in_order_of_their_first() {
        let items = [
            ("layers.0", "k", 1),
            ("layers.0", "v", 1),
            ("layers.1", "k", 1),
            ("layers.1", "v", 1),
        ];
        assert_eq!(
            run(&items),
            [
                (0, 2, "layers.0..=1".to_owned()),
                (1, 2, "layers.0..=1".to_owned())
            ]
        );
    }

    #[test]
    fn a_different_value_a_gap_or_a_second_varying_index_breaks_a_run() {
        let differs = [("l.0", "kv", 1), ("l.1", "kv", 2), ("l.2", "kv", 2)];
        assert_eq!(
            run(&differs),
            [(0, 1, "l.0".to_owned()), (1, 2, "l.1..=2".to_owned())]
        );
        let gap = [("l.0", "kv", 1), ("l.2", "kv", 1)];
        assert_eq!(
            run(&gap),
            [(0, 1, "l.0".to_owned()), (1, 1, "l.2".to_owned())]
        );
        let backwards = [("l.1", "kv", 1), ("l.0", "kv", 1)];
        assert_eq!(run(&backwards).len(), 2);
        // Once a run varies its first index, it cannot vary the second.
        let two_axes = [
            ("e.0.x.0", "kv", 1),
            ("e.1.x.0", "kv", 1),
            ("e.1.x.1", "kv", 1),
        ];
        assert_eq!(
            run(&two_axes),
            [
                (0, 2, "e.0..=1.x.0".to_owned()),
                (2, 1, "e.1.x.1".to_owned())
            ]
        );
        // The second index may vary where the first does not.
        let inner = [("e.3.x.0", "kv", 1), ("e.3.x.1", "kv", 1)];
        assert_eq!(run(&inner), [(0, 2, "e.3.x.0..=1".to_owned())]);
    }

    #[test]
    fn a_run_varying_one_index_does_not_join_an_item_varying_another() {
        // `e.0.x.2` is one past the run's last index (1) but along the other
        // index: it starts a run of its own.
        let items = [
            ("e.0.x.0", "kv", 1),
            ("e.1.x.0", "kv", 1),
            ("e.0.x.2", "kv", 1),
        ];
        assert_eq!(
            run(&items),
            [
                (0, 2, "e.0..=1.x.0".to_owned()),
                (2, 1, "e.0.x.2".to_owned())
            ]
        );
    }

    #[test]
    fn paths_that_join_to_the_same_letters_stay_apart() {
        // Without the dots both would read `abc*`.
        let items = [("ab.c.1", "kv", 1), ("a.bc.2", "kv", 1)];
        assert_eq!(run(&items).len(), 2);
        assert_eq!(masked(&["ab", "c", "1"], 2), "ab.c.*");
    }

    #[test]
    fn only_canonical_decimal_segments_are_indices() {
        assert_eq!(index("0"), Some(0));
        assert_eq!(index("27"), Some(27));
        assert_eq!(index("07"), None);
        assert_eq!(index(""), None);
        assert_eq!(index("layers"), None);
        assert_eq!(index("-1"), None);
        assert_eq!(index("99999999999999999999"), None);
        let names = [("a", "kv", 1), ("b", "kv", 1)];
        assert_eq!(run(&names).len(), 2);
        let root = [("", "kv", 1), ("", "kv", 1)];
        assert_eq!(run(&root).len(), 2);
    }

    #[test]
    fn an_index_past_u64_max_never_joins() {
        let items = [("l.18446744073709551615", "kv", 1), ("l.0", "kv", 1)];
        assert_eq!(run(&items).len(), 2);
    }

    #[test]
    fn a_count_times_bytes_past_u64_overflows() {
        assert_eq!(times(28, 4_096), Ok(114_688));
        assert!(times(2, u64::MAX).is_err());
    }
}
