//! Comparing each declaration with the bytes its own caches hold: the diff
//! names the declaration that is off (a window bound copied from Python,
//! one position short), and two declarations off by opposite amounts do not
//! pass as a matching total.

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::kv_cache::{KvCache, RotatingKvCache};
use kv_candle::{
    assert_declared_each, compare_declared, compare_declared_each, kv_geometry, measured_bytes,
};
use kv_core::{KvError, ModelLocalKv};

/// Full and sliding attention, 2 layers each, 2 KV heads of 8 dims, f32, batch 1.
#[derive(ModelLocalKv)]
struct Attention {
    #[kv(cache = "candle KvCache",
         geometry = kv_geometry(self.full.len(), 2, 8, DType::F32),
         positions = bounded(self.max, because = "max_seq_len given to KvCache::new"),
         scope = request,
         rows = fixed(1, because = "batch 1"))]
    full: Vec<KvCache>,
    #[kv(cache = "candle RotatingKvCache",
         geometry = kv_geometry(self.sliding.len(), 2, 8, DType::F32),
         positions = bounded(self.window_bound, because = "sliding_window - 1, copied from transformers"),
         scope = request,
         rows = fixed(1, because = "batch 1"))]
    sliding: Vec<RotatingKvCache>,
    max: usize,
    window_bound: usize,
}

#[derive(ModelLocalKv)]
struct Model {
    #[kv(child)]
    decoder: Attention,
}

/// `KvCache::new(2, 16)` and `RotatingKvCache::new(2, 8)` per layer, filled
/// by one 16-position prefill; declared with bounds `max` and `window_bound`.
fn filled(max: usize, window_bound: usize) -> Result<Model> {
    let mut decoder = Attention {
        full: vec![KvCache::new(2, 16), KvCache::new(2, 16)],
        sliding: vec![RotatingKvCache::new(2, 8), RotatingKvCache::new(2, 8)],
        max,
        window_bound,
    };
    let prefill = Tensor::zeros((1, 2, 16, 8), DType::F32, &Device::Cpu)?;
    for cache in &mut decoder.full {
        cache.append(&prefill, &prefill)?;
    }
    for cache in &mut decoder.sliding {
        cache.append(&prefill, &prefill)?;
    }
    Ok(Model { decoder })
}

/// Each declaration's measurement, by its full name.
fn measured(model: &Model) -> Result<[(&'static str, u64); 2]> {
    Ok([
        ("decoder.full", measured_bytes(&model.decoder.full)?),
        ("decoder.sliding", measured_bytes(&model.decoder.sliding)?),
    ])
}

#[test]
fn the_declaration_that_is_off_is_named_with_its_bytes() -> Result<()> {
    let model = filled(16, 7)?;
    // One position of both layers: 2 (K, V) x 2 layers x 2 heads x 8 dims x 4 B = 256.
    // full: 256 x 16 positions = 4096.
    // sliding holds its window, 8 positions: 256 x 8 = 2048; declared 7: 256 x 7 = 1792.
    assert_eq!(
        measured(&model)?,
        [("decoder.full", 4096), ("decoder.sliding", 2048)]
    );
    let diff = compare_declared_each(&model, 1, &measured(&model)?).unwrap();
    assert!(!diff.matches());
    assert_eq!((diff.declared, diff.measured), (5888, 6144));
    assert_eq!(
        diff.lines.iter().map(|l| l.measured).collect::<Vec<_>>(),
        [Some(4096), Some(2048)]
    );
    assert_eq!(
        diff.differing()
            .map(|l| l.name.as_str())
            .collect::<Vec<_>>(),
        ["decoder.sliding"]
    );
    // 6144 / 5888 = 1.04347..; per row over 2 rows: 5888 / 2 = 2944, 6144 / 2 = 3072.
    assert_eq!(
        diff.to_string(),
        "declared 5888 B != measured 6144 B at max_num_seqs=1\n\
         \x20 measured - declared: +256 B (1.0435x declared)\n\
         \x20 differs decoder.sliding: declared 1792 B, measured 2048 B (+256 B)\n\
         \x20 declared decoder.full: 1 row (fixed(1; batch 1)) x 4096 B/row = 4096 B \
         (16 positions from max_seq_len given to KvCache::new); measured 4096 B\n\
         \x20 declared decoder.sliding: 1 row (fixed(1; batch 1)) x 1792 B/row = 1792 B \
         (7 positions from sliding_window - 1, copied from transformers); measured 2048 B (+256 B)\n\
         \x20 per row over 2 rows: declared 2944 B, measured 3072 B"
    );
    // The total alone says only "+256 B".
    let total = compare_declared(&model, 1, 6144).unwrap();
    assert!(total.lines.iter().all(|l| l.measured.is_none()));
    assert_eq!(total.differing().count(), 0);
    assert!(!total.to_string().contains("differs"));
    Ok(())
}

#[test]
fn opposite_errors_do_not_pass_as_a_matching_total() -> Result<()> {
    // full declared 17 positions: 256 x 17 = 4352 (measured 4096, -256);
    // sliding declared 7: 1792 (measured 2048, +256). Totals: 6144 both.
    let model = filled(17, 7)?;
    assert!(
        compare_declared(&model, 1, 6144).unwrap().matches(),
        "the total hides both"
    );
    let diff = compare_declared_each(&model, 1, &measured(&model)?).unwrap();
    assert!(!diff.matches());
    let text = diff.to_string();
    assert!(
        text.starts_with(
            "declared 6144 B == measured 6144 B at max_num_seqs=1\n\
             \x20 differs decoder.full: declared 4352 B, measured 4096 B (-256 B)\n\
             \x20 differs decoder.sliding: declared 1792 B, measured 2048 B (+256 B)\n"
        ),
        "{text}"
    );
    assert!(text.contains("= 4352 B (17 positions from max_seq_len given to KvCache::new); measured 4096 B (-256 B)\n"), "{text}");
    Ok(())
}

#[test]
fn matching_declarations_pass() -> Result<()> {
    // Bounds as candle allocates: 16 and the whole window, 8.
    let model = filled(16, 8)?;
    let diff = compare_declared_each(&model, 1, &measured(&model)?).unwrap();
    assert!(diff.matches());
    assert_eq!((diff.declared, diff.measured), (6144, 6144));
    assert_declared_each(&model, 1, &measured(&model)?);
    Ok(())
}

#[test]
#[should_panic(expected = "differs decoder.sliding: declared 1792 B, measured 2048 B (+256 B)")]
fn the_assertion_panics_naming_the_declaration() {
    let model = filled(16, 7).unwrap();
    assert_declared_each(&model, 1, &measured(&model).unwrap());
}

fn problem(declaration: &str, problem: &str) -> KvError {
    KvError::InvalidValue {
        declaration: declaration.to_owned(),
        field: "measured",
        problem: problem.to_owned(),
    }
}

#[test]
fn every_declaration_needs_exactly_one_measurement() -> Result<()> {
    let model = filled(16, 8)?;
    let err = compare_declared_each(
        &model,
        1,
        &[
            ("decoder.full", 2048),
            ("decoder.full", 2048),
            ("decoder.ful", 1),
        ],
    )
    .unwrap_err();
    assert_eq!(
        err.into_problems(),
        [
            problem(
                "decoder.full",
                "is given twice; give each declaration one measurement"
            ),
            problem(
                "decoder.ful",
                "names no declaration; the declarations are: decoder.full, decoder.sliding"
            ),
            problem(
                "decoder.sliding",
                "has no measurement; give one for each declaration"
            ),
        ]
    );
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        assert_declared_each(&model, 1, &[])
    }))
    .unwrap_err();
    assert_eq!(
        panic.downcast_ref::<String>().map(String::as_str),
        Some(
            "kv-candle: cannot compare: kv: `decoder.full`: `measured` has no measurement; give one for each declaration\n\
             kv: `decoder.sliding`: `measured` has no measurement; give one for each declaration"
        )
    );
    Ok(())
}

#[test]
fn measured_bytes_that_overflow_are_an_error() -> Result<()> {
    let model = filled(16, 8)?;
    let err = compare_declared_each(
        &model,
        1,
        &[("decoder.full", u64::MAX), ("decoder.sliding", 1)],
    )
    .unwrap_err();
    assert_eq!(
        err,
        KvError::Overflow {
            declaration: "decoder.sliding".to_owned(),
            step: "sum of measured bytes"
        }
    );
    Ok(())
}
