//! Each cache struct, filled to its peak at several batch sizes and dtypes,
//! holds exactly the bytes it declares, measured on the backing tensors.

use candle_core::{DType, Device, Result, Tensor};
use kv_candle::{
    assert_declared_bytes, compare_declared, measured_bytes, FullAttentionCaches, Meter,
    SlidingWindowCaches, StaticCaches,
};
use kv_core::ModelLocalKv;

const QWEN2: &str = include_str!("fixtures/qwen2-tiny.json");
const QWEN3: &str = include_str!("fixtures/qwen3-tiny.json");
const MING_TALKER: &str = include_str!("fixtures/qwen2-ming-talker.json");

const BATCHES: [usize; 3] = [1, 2, 3];
const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// (kv_heads, head_dim) of each fixture.
fn heads_and_dim(config: &str) -> (usize, usize) {
    if config == QWEN2 {
        (2, 64 / 4)
    } else {
        (1, 24) // Qwen3: `head_dim` 24, not hidden 32 / 4 heads
    }
}

/// `seq` positions of random-ish keys or values for one layer.
fn step(batch: usize, config: &str, seq: usize, dtype: DType) -> Result<Tensor> {
    let (heads, dim) = heads_and_dim(config);
    Tensor::randn(0f32, 1.0, (batch, heads, seq, dim), &Device::Cpu)?.to_dtype(dtype)
}

/// The declared peak, written out: 2 (K, V) x layers x heads x dim x positions x bytes x batch.
fn expected(config: &str, positions: usize, dtype: DType, batch: usize) -> u64 {
    let layers = if config == QWEN2 { 2 } else { 3 };
    let (heads, dim) = heads_and_dim(config);
    (2 * layers * heads * dim * positions * dtype.size_in_bytes() * batch) as u64
}

fn declared(owner: &dyn ModelLocalKv) -> u64 {
    compare_declared(owner, 1, 0).unwrap().declared
}

#[test]
fn kv_cache_holds_its_declaration_from_the_first_append_to_max() -> Result<()> {
    const MAX: usize = 24;
    for config in [QWEN2, QWEN3] {
        for batch in BATCHES {
            for dtype in DTYPES {
                let mut full = FullAttentionCaches::from_config(config, batch, MAX, Some(dtype))?;
                let want = expected(config, MAX, dtype, batch);
                assert_eq!(declared(&full), want);
                // Lazy: nothing is allocated before the first append.
                assert_eq!(measured_bytes(&full.caches)?, 0);
                // Prefill 20, then decode one at a time up to MAX.
                for cache in &mut full.caches {
                    let (k, v) = (
                        step(batch, config, 20, dtype)?,
                        step(batch, config, 20, dtype)?,
                    );
                    cache.append(&k, &v)?;
                }
                // The first append allocated all MAX positions.
                assert_declared_bytes(&full, 1, measured_bytes(&full.caches)?);
                for _ in 20..MAX {
                    for cache in &mut full.caches {
                        let token = step(batch, config, 1, dtype)?;
                        cache.append(&token, &token)?;
                    }
                }
                assert_eq!(full.caches[0].current_seq_len(), MAX);
                assert_eq!(full.caches[0].k_cache().max_seq_len(), MAX, "no growth yet");
                assert_declared_bytes(&full, 1, measured_bytes(&full.caches)?);
                assert_eq!(measured_bytes(&full.caches)?, want);
            }
        }
    }
    Ok(())
}

#[test]
fn rotating_cache_holds_exactly_its_window_however_long_the_sequence() -> Result<()> {
    let window = 8; // qwen2-tiny.json's sliding_window
    for batch in BATCHES {
        for dtype in DTYPES {
            let mut sliding = SlidingWindowCaches::from_config(QWEN2, batch, Some(dtype))?;
            assert_eq!(sliding.window(), window);
            let want = expected(QWEN2, window, dtype, batch);
            assert_eq!(declared(&sliding), want);
            assert_eq!(measured_bytes(&sliding.caches)?, 0);
            // Prefill 5 (< window): the whole window is allocated already.
            for cache in &mut sliding.caches {
                let k = step(batch, QWEN2, 5, dtype)?;
                cache.append(&k, &k)?;
            }
            assert_declared_bytes(&sliding, 1, measured_bytes(&sliding.caches)?);
            // Decode far past the window: the buffer rotates, never grows.
            for _ in 5..(window * 4 + 3) {
                for cache in &mut sliding.caches {
                    let token = step(batch, QWEN2, 1, dtype)?;
                    cache.append(&token, &token)?;
                }
            }
            assert_eq!(sliding.caches[1].current_seq_len(), window * 4 + 3);
            assert_declared_bytes(&sliding, 1, measured_bytes(&sliding.caches)?);
            // A prefill longer than the window keeps only the last `window`.
            let long = step(batch, QWEN2, window * 3, dtype)?;
            let (returned, _) = sliding.caches[0].append(&long, &long)?;
            assert_eq!(
                returned.dims()[2],
                window * 3,
                "the caller gets the whole prefill back"
            );
            assert_eq!(measured_bytes(&sliding.caches)?, want);
        }
    }
    Ok(())
}

#[test]
fn static_cache_holds_its_declaration_from_construction() -> Result<()> {
    const MAX: usize = 12;
    for config in [QWEN2, QWEN3] {
        for batch in BATCHES {
            for dtype in DTYPES {
                let mut fixed =
                    StaticCaches::from_config(config, batch, MAX, Some(dtype), &Device::Cpu)?;
                let want = expected(config, MAX, dtype, batch);
                assert_eq!(declared(&fixed), want);
                assert_declared_bytes(&fixed, 1, measured_bytes(&fixed.caches)?);
                for cache in &mut fixed.caches {
                    let k = step(batch, config, MAX - 1, dtype)?;
                    cache.append(&k, &k)?;
                    let token = step(batch, config, 1, dtype)?;
                    let (k_all, _) = cache.append(&token, &token)?;
                    assert_eq!(k_all.dims()[2], MAX);
                    // Full: one more is refused, and nothing grows.
                    assert!(cache.append(&token, &token).is_err());
                }
                assert_declared_bytes(&fixed, 1, measured_bytes(&fixed.caches)?);
                assert_eq!(measured_bytes(&fixed.caches)?, want);
            }
        }
    }
    Ok(())
}

#[test]
fn ming_talker_static_cache_is_24_mib_declared_and_measured() -> Result<()> {
    // FACTS: ming_flash_omni talker, 24 layers x 2 kv heads x 64 dims, bf16,
    // max_cache_len 2048, one row: 25,165,824 B.
    let mut talker = StaticCaches::from_config(MING_TALKER, 1, 2048, None, &Device::Cpu)?;
    assert_eq!(
        talker.geometry(),
        kv_core::Geometry::new(24, 2, 64, kv_core::DType::BF16)
    );
    let mut specs = Vec::new();
    talker.kv_declare(&mut specs).unwrap();
    assert_eq!(specs[0].bytes_per_row(), Ok(25_165_824));
    let prefill = Tensor::zeros((1, 2, 2048, 64), DType::BF16, &Device::Cpu)?;
    for cache in &mut talker.caches {
        cache.append(&prefill, &prefill)?;
    }
    let measured = measured_bytes(&talker.caches)?;
    assert_eq!(measured, 25_165_824);
    assert_eq!(kv_core::units::human_bytes(measured), "24.00 MiB");
    assert_declared_bytes(&talker, 1, measured);
    Ok(())
}

#[test]
fn views_understate_the_backing_tensor_and_the_meter_does_not() -> Result<()> {
    let mut full = FullAttentionCaches::from_config(QWEN3, 1, 24, Some(DType::F32))?;
    let k = step(1, QWEN3, 5, DType::F32)?;
    full.caches[0].append(&k, &k)?;
    let view = full.caches[0].k()?.expect("appended");
    let view_bytes = view.elem_count() * 4;
    assert_eq!(view_bytes, 5 * 24 * 4, "k() is a 5-position view");
    let mut meter = Meter::new();
    meter.add(&view)?;
    assert_eq!(
        meter.bytes(),
        24 * 24 * 4,
        "its storage is all 24 positions"
    );
    meter.add(full.caches[0].k_cache())?;
    assert_eq!(
        (meter.storages(), meter.bytes()),
        (1, 24 * 24 * 4),
        "one allocation, once"
    );
    Ok(())
}

/// A model that owns two kinds of caches as children.
#[derive(ModelLocalKv)]
struct Model {
    #[kv(child)]
    full: FullAttentionCaches,
    #[kv(child)]
    sliding: SlidingWindowCaches,
}

#[test]
fn a_model_tree_is_summed_and_a_mismatch_names_each_declaration() -> Result<()> {
    let mut model = Model {
        full: FullAttentionCaches::from_config(QWEN2, 2, 16, Some(DType::F16))?,
        sliding: SlidingWindowCaches::from_config(QWEN2, 2, Some(DType::F16))?,
    };
    for layer in 0..2 {
        let k = step(2, QWEN2, 16, DType::F16)?;
        model.full.caches[layer].append(&k, &k)?;
        model.sliding.caches[layer].append(&k, &k)?;
    }
    let mut meter = Meter::new();
    meter.add(&model.full.caches)?.add(&model.sliding.caches)?;
    assert_eq!(meter.storages(), 8, "2 layers x (K, V) x 2 caches");
    assert_declared_bytes(&model, 1, meter.bytes());

    let short = compare_declared(&model, 1, meter.bytes() - 1).unwrap();
    assert!(!short.matches());
    assert_eq!(
        short.to_string(),
        "declared 12288 B != measured 12287 B at max_num_seqs=1\n\
         \x20 measured - declared: -1 B (0.9999x declared)\n\
         \x20 declared full.caches: 2 rows (fixed(2; batch of the cache tensors)) x 4096 B/row = 8192 B \
         (16 positions from max_seq_len given to KvCache::new)\n\
         \x20 declared sliding.caches: 2 rows (fixed(2; batch of the cache tensors)) x 2048 B/row = 4096 B \
         (8 positions from sliding_window)\n\
         \x20 per row over 4 rows: declared 3072 B, measured 3071 B (+3 B not divisible by rows)"
    );
    Ok(())
}

#[test]
#[should_panic(
    expected = "declarations do not match measurement: declared 12288 B != measured 0 B"
)]
fn the_assertion_panics_with_the_diff() {
    let model = Model {
        full: FullAttentionCaches::from_config(QWEN2, 2, 16, Some(DType::F16)).unwrap(),
        sliding: SlidingWindowCaches::from_config(QWEN2, 2, Some(DType::F16)).unwrap(),
    };
    assert_declared_bytes(&model, 1, measured_bytes(&model.full.caches).unwrap());
}

#[test]
fn construction_errors_name_the_problem() {
    let err = SlidingWindowCaches::from_config(QWEN3, 1, None).unwrap_err();
    assert!(
        err.to_string().contains("no `sliding_window` in use"),
        "{err}"
    );
    let err = FullAttentionCaches::from_config(QWEN2, 0, 16, None).unwrap_err();
    assert!(err.to_string().contains("batch is 0"), "{err}");
    let err = FullAttentionCaches::from_config("{}", 1, 16, None).unwrap_err();
    assert!(
        err.to_string().contains(
            "none of `num_hidden_layers`, `encoder_layers`, `num_layers`, `n_layer`, `n_layers` is set"
        ),
        "{err}"
    );
    let err = StaticCaches::from_config(QWEN2, 1, 4, Some(DType::I64), &Device::Cpu).unwrap_err();
    assert!(err.to_string().contains("has no kv dtype"), "{err}");
}

#[test]
fn derived_declarations_say_what_the_attributes_say() -> Result<()> {
    use kv_core::declare::DeclaredKv;
    use kv_core::{Rows, Scope};
    let full = FullAttentionCaches::from_config(QWEN2, 2, 32, None)?;
    let sliding = SlidingWindowCaches::from_config(QWEN2, 2, None)?;
    let fixed = StaticCaches::from_config(QWEN3, 1, 4, None, &Device::Cpu)?;
    let owners: [(&dyn ModelLocalKv, &str, u64, &str); 3] = [
        (
            &full,
            "candle KvCache",
            32,
            "max_seq_len given to KvCache::new",
        ),
        (&sliding, "candle RotatingKvCache", 8, "sliding_window"),
        (
            &fixed,
            "StaticKvCache",
            4,
            "max_cache_len given at construction",
        ),
    ];
    for (owner, cache, positions, bound) in owners {
        let mut specs = Vec::new();
        owner.kv_declare(&mut specs).unwrap();
        assert_eq!(specs.len(), 1);
        let spec = &specs[0];
        assert_eq!((spec.name.as_ref(), spec.cache.as_ref()), ("caches", cache));
        assert_eq!(
            spec.positions().map(|p| (p.count, p.reason())),
            Some((positions, bound.to_owned()))
        );
        assert_eq!(spec.scope, Scope::Request);
        assert!(
            matches!(spec.rows, Rows::Fixed { because: ref b, .. } if b == "batch of the cache tensors")
        );
        assert!(spec.note.as_deref().is_some_and(|n| n.starts_with("one ")));
    }
    // Config dtype where none is given: bf16 for qwen2-tiny, f32 for qwen3-tiny.
    assert_eq!(full.geometry().storage.dtype(), Some(kv_core::DType::BF16));
    assert_eq!(fixed.geometry().storage.dtype(), Some(kv_core::DType::F32));
    // Everything is read after load: no type-level (static) declarations.
    let decls = <SlidingWindowCaches as DeclaredKv>::KV_DECLS;
    assert!(decls.static_specs.is_empty());
    assert_eq!(decls.after_load[0].name, "caches");
    Ok(())
}

/// Two layers that share one set of caches through an `Arc`.
#[derive(ModelLocalKv)]
struct Shared {
    #[kv(child)]
    first: std::sync::Arc<FullAttentionCaches>,
    #[kv(child)]
    second: std::sync::Arc<FullAttentionCaches>,
}

#[test]
fn an_owner_reached_twice_is_declared_once() -> Result<()> {
    let caches = std::sync::Arc::new(FullAttentionCaches::from_config(QWEN3, 1, 4, None)?);
    let shared = Shared {
        first: caches.clone(),
        second: caches.clone(),
    };
    let comparison = compare_declared(&shared, 1, 0).unwrap();
    assert_eq!(comparison.lines.len(), 1);
    assert_eq!(comparison.lines[0].name, "first.caches");
    assert_eq!(comparison.declared, declared(&*caches));
    Ok(())
}

/// Declares a cache bounded by `max`, whatever `max` is.
#[derive(ModelLocalKv)]
struct Unbounded {
    #[kv(cache = "candle KvCache",
         layers = 1, kv_heads = 1, head_dim = 8, dtype = f32,
         positions = bounded(self.max, because = "max_seq_len given to KvCache::new"),
         scope = request,
         rows = fixed(1, because = "one sequence"))]
    cache: candle_nn::kv_cache::KvCache,
    max: i64,
}

#[test]
fn an_owner_the_collector_skips_is_an_error_not_a_smaller_sum() {
    let broken = Unbounded {
        cache: candle_nn::kv_cache::KvCache::new(2, 1),
        max: -1,
    };
    assert_eq!(measured_bytes(&broken.cache).unwrap(), 0);
    let err = compare_declared(&broken, 1, 0).unwrap_err();
    assert!(
        err.to_string()
            .contains("`positions` is -1; a count cannot be negative"),
        "{err}"
    );
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        assert_declared_bytes(&broken, 1, 0)
    }))
    .unwrap_err();
    let message = panic.downcast_ref::<String>().unwrap();
    assert!(
        message.starts_with("kv-candle: cannot compare: kv: `Unbounded.cache`"),
        "{message}"
    );
}

#[test]
fn a_zero_read_after_load_declares_nothing_and_compares_with_nothing() {
    // Zero positions read after load: the declaration yields nothing (the
    // report says so), which equals an empty cache's 0 B.
    let empty = Unbounded {
        cache: candle_nn::kv_cache::KvCache::new(2, 1),
        max: 0,
    };
    let comparison = compare_declared(&empty, 1, 0).unwrap();
    assert!(comparison.lines.is_empty());
    assert_eq!((comparison.declared, comparison.measured), (0, 0));
}

#[test]
fn caches_report_what_they_were_built_with() -> Result<()> {
    let full = FullAttentionCaches::from_config(QWEN2, 3, 16, Some(DType::F16))?;
    assert_eq!((full.batch(), full.max_seq_len()), (3, 16));
    let sliding = SlidingWindowCaches::from_config(QWEN2, 2, Some(DType::F16))?;
    assert_eq!(sliding.batch(), 2);
    let mut fixed = StaticCaches::from_config(QWEN2, 2, 12, Some(DType::F32), &Device::Cpu)?;
    assert_eq!((fixed.batch(), fixed.max_seq_len()), (2, 12));
    let cache = &mut fixed.caches[0];
    assert_eq!((cache.current_seq_len(), cache.max_seq_len()), (0, 12));
    let k = step(2, QWEN2, 5, DType::F32)?;
    cache.append(&k, &k)?;
    assert_eq!(cache.current_seq_len(), 5);
    cache.reset();
    assert_eq!(cache.current_seq_len(), 0, "reset forgets what is held");
    assert_eq!(cache.k_all().dims()[2], 12, "and keeps the allocation");
    Ok(())
}
