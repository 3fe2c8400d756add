//! Report JSON (`Collection::export`, what `kv merge` and `kv table` read)
//! mutated anywhere in its tree, beside the other rank it is merged with.

use kv_core::Parallel;
use kv_engines::estimate::{estimate, EstimateSettings};
use serde_json::Value;

use crate::bytes;
use crate::interesting::number;
use crate::rng::Rng;

/// A pair of rank reports of one estimate (tp 2), as JSON.
pub type RankPair = (Value, Value);

/// Rank pairs of every shipped config kv estimates at tp 2.
pub fn seeds(configs: &[Value]) -> Vec<RankPair> {
    configs
        .iter()
        .filter_map(|config| {
            let settings = EstimateSettings::new().positions(4096).tensor_parallel(2);
            let made = estimate(config, &settings).ok()?;
            let exported = made
                .export("seed.json", Parallel::new(2, 1).ok()?, 16)
                .ok()?;
            let mut ranks = exported.ranks.into_iter();
            let first = serde_json::to_value(ranks.next()?.report).ok()?;
            let second = serde_json::to_value(ranks.next()?.report).ok()?;
            Some((first, second))
        })
        .collect()
}

/// Case `rng`'s input: one rank mutated, and the other rank as written.
pub fn case(seeds: &[RankPair], rng: &mut Rng) -> (Vec<u8>, Vec<u8>) {
    let (mut mine, other) = rng.pick(seeds).clone();
    for _ in 0..=rng.below(3) {
        mutate(&mut mine, rng);
    }
    let mut data = serde_json::to_vec(&mine).unwrap_or_default();
    if rng.one_in(8) {
        bytes::mutate(&mut data, rng);
    }
    (data, serde_json::to_vec(&other).unwrap_or_default())
}

/// Every JSON pointer in `value`.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let escaped = key.replace('~', "~0").replace('/', "~1");
                pointers(inner, format!("{at}/{escaped}"), out);
            }
        }
        Value::Array(items) => {
            for (index, inner) in items.iter().enumerate() {
                pointers(inner, format!("{at}/{index}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

fn mutate(report: &mut Value, rng: &mut Rng) {
    let mut all = Vec::new();
    pointers(report, String::new(), &mut all);
    let pointer = rng.pick(&all).clone();
    let Some(target) = report.pointer_mut(&pointer) else {
        return;
    };
    let replacement = match rng.below(6) {
        0 => Value::Null,
        1 => Value::String((*rng.pick(&["", "x", "\u{1b}[2J", "tp=0 pp=0"])).to_owned()),
        2 => match &*target {
            // An array or object grown by one of its own items.
            Value::Array(items) if !items.is_empty() => {
                let copy = items[rng.index(items.len())].clone();
                let mut grown = items.clone();
                grown.push(copy);
                Value::Array(grown)
            }
            other => other.clone(),
        },
        _ => number(rng),
    };
    *target = replacement;
}
