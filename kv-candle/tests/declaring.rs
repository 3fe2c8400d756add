//! The declaring helpers: geometry from a model's candle arguments
//! (`kv_geometry`) or from the tensors caches hold (`held_geometry`), and
//! positions from caches whose allocation is fixed (`fixed_positions`),
//! each checked against what real CPU caches allocate, and each bad input
//! an error that names it.

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::kv_cache::{ConcatKvCache, KvCache, RotatingKvCache, ScatteredCacheBuilder};
use kv_candle::{
    assert_declared_bytes, compare_declared, fixed_positions, held_geometry, kv_geometry,
    measured_bytes, FixedPositions, StaticKvCache,
};
use kv_core::declare::after_load::IntoCount;
use kv_core::{Geometry, KvError, ModelLocalKv};

fn zeros(shape: (usize, usize, usize, usize), dtype: DType) -> Result<Tensor> {
    Tensor::zeros(shape, dtype, &Device::Cpu)
}

/// The `(field, problem)` of an `InvalidValue`.
fn invalid(err: KvError) -> (&'static str, String) {
    match err {
        KvError::InvalidValue { field, problem, .. } => (field, problem),
        other => panic!("not an InvalidValue: {other:?}"),
    }
}

#[test]
fn kv_geometry_converts_candle_arguments_and_refuses_bad_ones() {
    assert_eq!(
        kv_geometry(4, 2, 64, DType::BF16).unwrap(),
        Geometry::new(4, 2, 64, kv_core::DType::BF16)
    );
    assert_eq!(
        kv_geometry(1, 1, 1, DType::F8E4M3).unwrap(),
        Geometry::new(1, 1, 1, kv_core::DType::F8E4M3)
    );
    let zero = "is 0; a cache with no extent declares nothing".to_owned();
    assert_eq!(
        invalid(kv_geometry(0, 2, 64, DType::F32).unwrap_err()),
        ("layers", zero.clone())
    );
    assert_eq!(
        invalid(kv_geometry(4, 0, 64, DType::F32).unwrap_err()),
        ("kv_heads", zero.clone())
    );
    assert_eq!(
        invalid(kv_geometry(4, 2, 0, DType::F32).unwrap_err()),
        ("head_dim", zero)
    );
    assert_eq!(
        invalid(kv_geometry(4, 2, 64, DType::U32).unwrap_err()),
        ("dtype", "is candle's U32, which has no kv dtype".to_owned())
    );
}

/// candle-transformers' shape: one `Option<(Tensor, Tensor)>` per layer.
#[derive(ModelLocalKv)]
struct Concat {
    #[kv(cache = "candle-transformers concat cache",
         geometry = kv_geometry(self.kvs.len(), 2, 8, DType::F16),
         positions = bounded(4, because = "longest sequence served"),
         scope = request,
         rows = fixed(1, because = "batch 1"))]
    kvs: Vec<Option<(Tensor, Tensor)>>,
}

#[test]
fn a_declaration_with_kv_geometry_matches_its_filled_caches_and_names_its_errors() -> Result<()> {
    let mut model = Concat { kvs: vec![None; 2] };
    for kv in &mut model.kvs {
        *kv = Some((
            zeros((1, 2, 4, 8), DType::F16)?,
            zeros((1, 2, 4, 8), DType::F16)?,
        ));
    }
    // 2 layers x 2 (K, V) x 2 heads x 4 positions x 8 dims x 2 B = 512
    assert_eq!(measured_bytes(&model.kvs)?, 512);
    assert_declared_bytes(&model, 1, 512);

    let empty = Concat { kvs: Vec::new() };
    assert_eq!(
        compare_declared(&empty, 1, 0).unwrap_err().to_string(),
        "kv: `Concat.kvs`: `layers` is 0; a cache with no extent declares nothing"
    );
    Ok(())
}

#[test]
fn held_geometry_reads_heads_dims_and_dtypes_of_what_caches_allocated() -> Result<()> {
    // KvCache: nothing before the first append, then (batch, heads, max, dim).
    let mut caches = vec![KvCache::new(2, 16), KvCache::new(2, 16)];
    let (field, problem) = invalid(held_geometry(&caches).unwrap_err());
    assert_eq!(field, "geometry");
    assert!(
        problem.starts_with("cannot be read: layer 0's cache holds no tensors yet"),
        "{problem}"
    );
    let prefill = zeros((1, 4, 3, 32), DType::F16)?;
    caches[0].append(&prefill, &prefill)?;
    assert!(invalid(held_geometry(&caches).unwrap_err())
        .1
        .starts_with("cannot be read: layer 1's cache"));
    caches[1].append(&prefill, &prefill)?;
    assert_eq!(
        held_geometry(&caches).unwrap(),
        Geometry::new(2, 4, 32, kv_core::DType::F16)
    );

    // A third layer with fewer heads cannot share the declaration.
    let mut fewer = KvCache::new(2, 16);
    let two_heads = zeros((1, 2, 3, 32), DType::F16)?;
    fewer.append(&two_heads, &two_heads)?;
    caches.push(fewer);
    assert_eq!(
        invalid(held_geometry(&caches).unwrap_err()),
        (
            "geometry",
            "differs across layers: layer 2 holds 2 heads x 32 dims of f16 where layer 0 holds \
             4 heads x 32 dims of f16; declare each kind of layer separately"
                .to_owned()
        )
    );

    // RotatingKvCache and StaticKvCache, one layer each.
    let mut rotating = RotatingKvCache::new(2, 6);
    let token = zeros((2, 1, 1, 16), DType::BF16)?;
    rotating.append(&token, &token)?;
    assert_eq!(
        held_geometry([&rotating]).unwrap(),
        Geometry::new(1, 1, 16, kv_core::DType::BF16)
    );
    let statics = [
        StaticKvCache::new(1, 2, 8, 4, DType::F32, &Device::Cpu)?,
        StaticKvCache::new(1, 2, 8, 4, DType::F32, &Device::Cpu)?,
        StaticKvCache::new(1, 2, 8, 4, DType::F32, &Device::Cpu)?,
    ];
    assert_eq!(
        held_geometry(&statics).unwrap(),
        Geometry::new(3, 2, 4, kv_core::DType::F32),
        "allocated when built: readable before any append"
    );
    // ScatteredKvCache: allocated when made, batch 2, context 6, 3 heads of 4 dims.
    let builder = ScatteredCacheBuilder::new(2, 6, DType::F16, &Device::Cpu)?;
    let scattered = [builder.make_cache(3, 4)?, builder.make_cache(3, 4)?];
    assert_eq!(
        held_geometry(&scattered).unwrap(),
        Geometry::new(2, 3, 4, kv_core::DType::F16)
    );
    let none: [&KvCache; 0] = [];
    assert_eq!(
        invalid(held_geometry(none).unwrap_err()),
        ("layers", "is 0; no caches were given".to_owned())
    );
    Ok(())
}

/// One `ConcatKvCache` along `dim` after one append of `k` and `v`.
fn concat(dim: usize, k: &Tensor, v: &Tensor) -> Result<ConcatKvCache> {
    let mut cache = ConcatKvCache::new(dim);
    cache.append(k, v)?;
    Ok(cache)
}

#[test]
fn held_geometry_reads_either_layout_and_v_parts_that_differ() -> Result<()> {
    // Positions along dim 1: (batch, seq, heads, dim).
    let k = zeros((1, 3, 4, 8), DType::F32)?;
    assert_eq!(
        held_geometry([&concat(1, &k, &k)?]).unwrap(),
        Geometry::new(1, 4, 8, kv_core::DType::F32)
    );
    // V with its own head dim (16) and dtype (bf16).
    let k = zeros((1, 4, 3, 8), DType::F16)?;
    let v16 = zeros((1, 4, 3, 16), DType::F16)?;
    assert_eq!(
        held_geometry([&concat(2, &k, &v16)?]).unwrap(),
        Geometry::new(1, 4, 8, kv_core::DType::F16).with_v_head_dim(16)
    );
    let v_bf16 = zeros((1, 4, 3, 8), DType::BF16)?;
    assert_eq!(
        held_geometry([&concat(2, &k, &v_bf16)?]).unwrap(),
        Geometry::new(1, 4, 8, kv_core::DType::F16).with_v_storage(kv_core::DType::BF16.into())
    );
    // Layers that differ only in V are named as such.
    let layers = [
        concat(2, &k, &k)?,
        concat(2, &k, &v16)?,
        concat(2, &k, &v_bf16)?,
    ];
    assert_eq!(
        invalid(held_geometry(&layers[..2]).unwrap_err()).1,
        "differs across layers: layer 1 holds 4 heads x 8 dims of f16, V 16 dims where layer 0 \
         holds 4 heads x 8 dims of f16; declare each kind of layer separately"
    );
    assert_eq!(
        invalid(held_geometry([&layers[0], &layers[2]]).unwrap_err()).1,
        "differs across layers: layer 1 holds 4 heads x 8 dims of f16, V of bf16 where layer 0 \
         holds 4 heads x 8 dims of f16; declare each kind of layer separately"
    );
    Ok(())
}

#[test]
fn held_geometry_refuses_what_kv_cannot_declare_naming_the_layer() -> Result<()> {
    let k = zeros((1, 4, 3, 8), DType::F32)?;
    let cases: [(ConcatKvCache, &str, &str); 7] = [
        (
            concat(2, &k, &zeros((1, 2, 3, 8), DType::F32)?)?,
            "kv_heads",
            "differs between K (4) and V (2) in layer 0; kv declares one head count",
        ),
        (
            concat(2, &Tensor::zeros((1, 3, 8), DType::F32, &Device::Cpu)?, &k)?,
            "geometry",
            "cannot be read: layer 0's K has shape [1, 3, 8] with positions along dim 2; expected \
             (batch, heads, seq, head_dim) along dim 2 or (batch, seq, heads, head_dim) along dim 1",
        ),
        (
            concat(0, &k, &k)?,
            "geometry",
            "cannot be read: layer 0's K has shape [1, 4, 3, 8] with positions along dim 0; expected \
             (batch, heads, seq, head_dim) along dim 2 or (batch, seq, heads, head_dim) along dim 1",
        ),
        (
            concat(3, &k, &k)?,
            "geometry",
            "cannot be read: layer 0's K has shape [1, 4, 3, 8] with positions along dim 3; expected \
             (batch, heads, seq, head_dim) along dim 2 or (batch, seq, heads, head_dim) along dim 1",
        ),
        (
            concat(2, &zeros((1, 0, 3, 8), DType::F32)?, &zeros((1, 0, 3, 8), DType::F32)?)?,
            "kv_heads",
            "is 0 in layer 0's K's shape [1, 0, 3, 8]",
        ),
        (
            concat(2, &k, &zeros((1, 4, 3, 0), DType::F32)?)?,
            "head_dim",
            "is 0 in layer 0's V's shape [1, 4, 3, 0]",
        ),
        (
            concat(2, &k, &zeros((1, 4, 3, 8), DType::U32)?)?,
            "v_format",
            "is candle's U32 in layer 0's V, which has no kv dtype",
        ),
    ];
    for (cache, field, problem) in cases {
        assert_eq!(
            invalid(held_geometry([&cache]).unwrap_err()),
            (field, problem.to_owned())
        );
    }
    let u32_k = concat(2, &zeros((1, 4, 3, 8), DType::U32)?, &k)?;
    assert_eq!(
        invalid(held_geometry([&concat(2, &k, &k)?, &u32_k]).unwrap_err()),
        (
            "dtype",
            "is candle's U32 in layer 1's K, which has no kv dtype".to_owned()
        )
    );
    Ok(())
}

/// Sliding layers declared from the caches themselves.
#[derive(ModelLocalKv)]
struct Sliding {
    #[kv(cache = "candle RotatingKvCache",
         geometry = held_geometry(&self.caches),
         positions = bounded(fixed_positions(&self.caches), because = "window given to RotatingKvCache::new"),
         scope = request,
         rows = fixed(1, because = "batch 1"))]
    caches: Vec<RotatingKvCache>,
}

#[test]
fn a_declaration_read_from_rotating_caches_matches_them_at_peak() -> Result<()> {
    let mut sliding = Sliding {
        caches: vec![RotatingKvCache::new(2, 6), RotatingKvCache::new(2, 6)],
    };
    let err = compare_declared(&sliding, 1, 0).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "kv: `Sliding.caches`: `geometry` cannot be read: layer 0's cache holds no tensors yet"
        ),
        "{err}"
    );
    for _ in 0..10 {
        for cache in &mut sliding.caches {
            let token = zeros((1, 2, 1, 8), DType::BF16)?;
            cache.append(&token, &token)?;
        }
    }
    // 2 (K, V) x 2 layers x 2 heads x 8 dims x 2 B x 6 positions = 768
    assert_eq!(measured_bytes(&sliding.caches)?, 768);
    assert_declared_bytes(&sliding, 1, 768);

    // A layer with another window cannot share the bound.
    sliding.caches.push(RotatingKvCache::new(2, 4));
    let token = zeros((1, 2, 1, 8), DType::BF16)?;
    sliding.caches[2].append(&token, &token)?;
    assert_eq!(
        compare_declared(&sliding, 1, 0).unwrap_err().to_string(),
        "kv: `Sliding.caches`: `positions` differ across layers: layer 2 holds 4 where layer 0 \
         holds 6; declare each kind of layer separately"
    );
    Ok(())
}

/// A user's own cache type, whose positions are known once it is built.
struct Mine(Option<u64>);

impl FixedPositions for Mine {
    fn fixed_positions(&self) -> std::result::Result<u64, String> {
        self.0.ok_or_else(|| "not built yet".to_owned())
    }
}

#[test]
fn fixed_positions_reads_windows_contexts_and_static_lengths() -> Result<()> {
    let rotating: Vec<RotatingKvCache> = (0..3).map(|_| RotatingKvCache::new(2, 72)).collect();
    assert_eq!(fixed_positions(&rotating).get(), Ok(72));
    assert_eq!(fixed_positions([rotating[0].k_cache()]).get(), Ok(72));
    let statics = [StaticKvCache::new(1, 1, 12, 4, DType::F32, &Device::Cpu)?];
    assert_eq!(fixed_positions(&statics).get(), Ok(12));
    let builder = ScatteredCacheBuilder::new(2, 6, DType::F16, &Device::Cpu)?;
    assert_eq!(fixed_positions([&builder.make_cache(3, 4)?]).get(), Ok(6));

    let none: [&RotatingKvCache; 0] = [];
    assert_eq!(
        fixed_positions(none).get(),
        Err("cannot be read: no caches were given")
    );
    let mixed = [
        RotatingKvCache::new(2, 72),
        RotatingKvCache::new(2, 72),
        RotatingKvCache::new(2, 64),
    ];
    let positions = fixed_positions(&mixed);
    assert_eq!(
        positions.get(),
        Err(
            "differ across layers: layer 2 holds 64 where layer 0 holds 72; \
             declare each kind of layer separately"
        )
    );
    // As a count for the derive, by value and by reference.
    assert_eq!(
        (&positions).count_problem(),
        Err(positions.get().unwrap_err().to_owned())
    );
    assert_eq!(fixed_positions(&rotating).count_problem(), Ok(72));
    assert_eq!((&fixed_positions(&rotating)).count_problem(), Ok(72));
    assert_eq!(
        fixed_positions(&[Mine(Some(5)), Mine(None)]).get(),
        Err("cannot be read from layer 1: not built yet")
    );
    Ok(())
}
