//! Where a declaration and candle's real allocation part ways, with the
//! actual (mismatching) numbers asserted rather than hidden.

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::kv_cache::{ConcatKvCache, RotatingKvCache};
use kv_candle::{compare_declared, compare_spec, measured_bytes, FullAttentionCaches};
use kv_core::{Geometry, KvSpec, Positions, Rows, Scope};

const QWEN3: &str = include_str!("fixtures/qwen3-tiny.json");

fn token(batch: usize, heads: usize, seq: usize, dim: usize) -> Result<Tensor> {
    Tensor::ones((batch, heads, seq, dim), DType::F32, &Device::Cpu)
}

/// One layer, f32, bounded by `positions`, one row per batch entry.
fn one_layer(cache: &'static str, heads: u64, dim: u64, positions: u64, batch: u64) -> KvSpec {
    KvSpec::attention(
        "cache",
        cache,
        Geometry::new(1, heads, dim, kv_core::DType::F32),
        Positions::bounded(positions, "test bound"),
        Scope::Request,
        Rows::fixed(batch, "batch of the cache tensors"),
    )
}

/// candle's `Cache::append` grows `all_data` by the original `max_seq_len`
/// whenever an append does not fit: the declaration (bounded by max) holds
/// until the first overflow append, which doubles the allocation; each later
/// overflow adds one more max (2x, 3x, ...: linear, not doubling again).
#[test]
fn kv_cache_grows_by_its_max_when_an_append_overflows() -> Result<()> {
    const MAX: usize = 16;
    let (batch, heads, dim) = (2, 1, 24); // qwen3-tiny: 1 kv head, head_dim 24
    let mut full = FullAttentionCaches::from_config(QWEN3, batch, MAX, Some(DType::F32))?;
    let declared = compare_declared(&full, 1, 0).unwrap().declared;
    assert_eq!(declared, 2 * 3 * 24 * 16 * 4 * 2); // K+V x 3 layers x 24 dims x 16 pos x f32 x batch 2

    let append_all = |full: &mut FullAttentionCaches, seq: usize| -> Result<()> {
        for cache in &mut full.caches {
            let t = token(batch, heads, seq, dim)?;
            cache.append(&t, &t)?;
        }
        Ok(())
    };
    append_all(&mut full, MAX)?;
    assert!(compare_declared(&full, 1, measured_bytes(&full.caches)?)
        .unwrap()
        .matches());

    // One position past max: every tensor grows by another MAX positions.
    append_all(&mut full, 1)?;
    let measured = measured_bytes(&full.caches)?;
    assert_eq!(measured, 2 * declared);
    assert_eq!(full.caches[0].k_cache().max_seq_len(), 2 * MAX);
    assert_eq!(full.caches[0].current_seq_len(), MAX + 1);
    let diff = compare_declared(&full, 1, measured).unwrap();
    assert!(!diff.matches());
    assert!(
        diff.to_string().contains(&format!(
            "measured - declared: +{declared} B (2.0000x declared)"
        )),
        "{diff}"
    );

    // Up to 2 x MAX nothing more is allocated; one past it adds MAX again.
    append_all(&mut full, MAX - 1)?;
    assert_eq!(measured_bytes(&full.caches)?, 2 * declared);
    append_all(&mut full, 1)?;
    assert_eq!(measured_bytes(&full.caches)?, 3 * declared);
    assert_eq!(full.caches[2].v_cache().max_seq_len(), 3 * MAX);

    // One append longer than several maxes grows several times in one call.
    full.caches[0].reset();
    let t = token(batch, heads, 3 * MAX + 1, dim)?;
    full.caches[0].append(&t, &t)?;
    assert_eq!(
        measured_bytes(&full.caches[0])?,
        4 * declared / 3,
        "4 x MAX positions in layer 0"
    );
    Ok(())
}

/// `ConcatKvCache` holds exactly what was appended: a declaration bounded by
/// the longest sequence matches only when the cache is full, overstates
/// before, and is exceeded by every append after.
#[test]
fn concat_cache_matches_only_when_full_and_grows_with_each_append() -> Result<()> {
    const MAX: u64 = 16;
    let (batch, heads, dim) = (3, 2, 8);
    let spec = one_layer("candle ConcatKvCache", 2, 8, MAX, 3);
    let declared = spec.peak_bytes(1).unwrap();
    let per_position = declared / MAX;
    let mut cache = ConcatKvCache::new(2);
    for held in 1..=(MAX + 4) {
        let (k, v) = (token(batch, heads, 1, dim)?, token(batch, heads, 1, dim)?);
        cache.append(&k, &v)?;
        let measured = measured_bytes(&cache)?;
        assert_eq!(
            measured,
            held * per_position,
            "grows by one position per append"
        );
        let matches = compare_spec(&spec, 1, measured).unwrap().matches();
        assert_eq!(matches, held == MAX, "matches only when full (held {held})");
    }
    assert_eq!(measured_bytes(&cache)?, declared + 4 * per_position);

    // The first append keeps the caller's tensors rather than copying them:
    // one tensor given as both K and V is one allocation.
    let mut shared = ConcatKvCache::new(2);
    let t = token(batch, heads, MAX as usize, dim)?;
    shared.append(&t, &t)?;
    assert_eq!(measured_bytes(&shared)?, declared / 2);
    Ok(())
}

/// transformers' dynamic sliding layer keeps `window - 1` positions; candle's
/// `RotatingKvCache::new(dim, window)` keeps `window`. A bound copied from the
/// Python model understates the candle port by one position per row.
#[test]
fn a_window_minus_one_bound_understates_a_rotating_cache_by_one_position() -> Result<()> {
    let window = 72;
    let (batch, heads, dim) = (1, 16, 64); // Qwen3-TTS codec decoder, one layer
    let python_bound = one_layer("sliding DynamicCache", 16, 64, window - 1, 1);
    let mut cache = RotatingKvCache::new(2, window as usize);
    for _ in 0..100 {
        let t = token(batch, heads, 1, dim)?;
        cache.append(&t, &t)?;
    }
    let measured = measured_bytes(&cache)?;
    assert_eq!(measured, 2 * 16 * 64 * 72 * 4);
    let diff = compare_spec(&python_bound, 1, measured).unwrap();
    assert_eq!(diff.declared, 2 * 16 * 64 * 71 * 4);
    assert_eq!(
        diff.measured - diff.declared,
        2 * 16 * 64 * 4,
        "one position of K and V"
    );
    Ok(())
}
