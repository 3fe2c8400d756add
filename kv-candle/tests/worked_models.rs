//! The worked examples (`examples/worked_models`): four decoders in the
//! shapes real Rust engines keep caches in, run on the CPU with zero weights
//! to their peak. Each declaration's bytes equal the bytes its own tensors
//! hold; every figure below is worked out by hand from the models' sizes.

#[path = "../examples/worked_models/models.rs"]
mod models;

use candle_core::Result;
use kv_candle::assert_declared_each;
use kv_core::{collect, KvError, ModelLocalKv};
use models::peak;

/// `(name, bytes)` pairs as `assert_declared_each` takes them.
fn borrowed(measured: &[(String, u64)]) -> Vec<(&str, u64)> {
    measured
        .iter()
        .map(|(name, bytes)| (name.as_str(), *bytes))
        .collect()
}

/// The report's lines after its two headers.
fn report_lines(model: &dyn ModelLocalKv, max_num_seqs: u64) -> Vec<String> {
    collect(model)
        .report(max_num_seqs)
        .to_string()
        .lines()
        .skip(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_concat_cache_per_layer_is_declared_to_the_byte() -> Result<()> {
    let model = peak::concat()?;
    // Per layer: K and V, each (1, 2 KV heads, 12 positions, 16 dims) of
    // f16: 2 x 2 x 12 x 16 x 2 B = 1,536 B. Three layers: 4,608 B.
    let measured = peak::concat_measured(&model)?;
    assert_eq!(
        measured.iter().map(|(_, bytes)| *bytes).collect::<Vec<_>>(),
        [1_536, 1_536, 1_536]
    );
    assert_declared_each(&model, 1, &borrowed(&measured));
    assert_eq!(
        report_lines(&model, 1),
        [
            "  model.layers.0..=2.self_attn.kv_cache: 3 x 1.50 KiB = 4.50 KiB (1 row from \
          fixed(1; forward takes one sequence) x 1.50 KiB/row, scope=request, 12 positions \
          from max_positions: forward refuses longer)"
        ]
    );
    Ok(())
}

#[test]
fn the_concat_decoder_declares_its_peak_before_its_first_token() -> Result<()> {
    // Declared from the model's own fields, not from its tensors: the
    // start-up report already has the peak while every cache is empty.
    let fresh = models::concat::ForCausalLm::new(
        &peak::CONCAT,
        models::zero_weights(candle_core::DType::F16),
    )?;
    assert!(fresh
        .model
        .layers
        .iter()
        .all(|l| l.self_attn.kv_cache.is_none()));
    assert_eq!(collect(&fresh).totals(1).unwrap().total, 4_608);
    Ok(())
}

#[test]
fn an_enum_of_rotating_and_full_caches_is_declared_to_the_byte() -> Result<()> {
    let model = peak::sliding()?;
    // Sliding layers 0..=4 hold the 4-position window: K and V, each
    // (1, 1 KV head, 4, 32 dims) of bf16: 2 x 1 x 4 x 32 x 2 B = 512 B.
    // Global layer 5 holds all 10 positions: 2 x 1 x 10 x 32 x 2 B = 1,280 B.
    let measured = peak::sliding_measured(&model)?;
    assert_eq!(
        measured.iter().map(|(_, bytes)| *bytes).collect::<Vec<_>>(),
        [512, 512, 512, 512, 512, 1_280]
    );
    assert_declared_each(&model, 1, &borrowed(&measured));
    assert_eq!(
        report_lines(&model, 1),
        [
            "  layers.0..=4.self_attn.kv_cache.kv: 5 x 512 B = 2.50 KiB (1 row from fixed(1; \
             forward takes one sequence) x 512 B/row, scope=request, 4 positions from \
             sliding_window given to RotatingKvCache::new, only_when=LayerCache::Sliding)",
            "  layers.5.self_attn.kv_cache.kv: 1.25 KiB (1 row from fixed(1; forward takes one \
             sequence) x 1.25 KiB/row, scope=request, 10 positions from max_positions given to \
             KvCache::new; forward refuses longer, only_when=LayerCache::Global)",
        ]
    );
    // 5 x 512 + 1,280 = 3,840 B, also before the first token.
    let fresh = models::sliding::Model::new(
        &peak::SLIDING,
        peak::SLIDING_WINDOW,
        peak::GLOBAL_EVERY,
        models::zero_weights(candle_core::DType::BF16),
    )?;
    assert_eq!(collect(&fresh).totals(1).unwrap().total, 3_840);
    Ok(())
}

#[test]
fn a_cross_attention_cache_in_a_tuple_with_its_norm_is_declared_to_the_byte() -> Result<()> {
    let decoder = peak::cross()?;
    // Per block: the encoder's K and V, each (1, 2 heads, 30 frames,
    // 16 dims) of f32: 2 x 2 x 30 x 16 x 4 B = 7,680 B. Self-attention
    // caches nothing, and its declaration is off (`caches_encoder`).
    let measured = peak::cross_measured(&decoder)?;
    assert_eq!(
        measured.iter().map(|(_, bytes)| *bytes).collect::<Vec<_>>(),
        [7_680, 7_680]
    );
    assert_declared_each(&decoder, 1, &borrowed(&measured));
    let collection = collect(&decoder);
    assert_eq!(
        collection
            .entries()
            .iter()
            .map(|entry| entry.full_name())
            .collect::<Vec<_>>(),
        [
            "blocks.0.cross_attn.0.kv_cache",
            "blocks.1.cross_attn.0.kv_cache"
        ]
    );
    assert_eq!(collection.totals(1).unwrap().total, 15_360);
    Ok(())
}

#[test]
fn caches_behind_arc_mutex_are_declared_to_the_byte() -> Result<()> {
    let model = peak::shared()?;
    // 20 positions held in capacity grown 8 at a time: 24. Per layer, K and
    // V, each (2 sequences, 2 KV heads, 24, 8 dims) of f32:
    // 2 x 2 x 2 x 24 x 8 x 4 B = 6,144 B; at max_num_seqs = 2 (the batch).
    let measured = peak::shared_measured(&model)?;
    assert_eq!(
        measured.iter().map(|(_, bytes)| *bytes).collect::<Vec<_>>(),
        [6_144, 6_144]
    );
    assert_declared_each(&model, 2, &borrowed(&measured));
    assert_eq!(
        report_lines(&model, 2),
        [
            "  cache.layers.0..=1.k_v: 2 x 6.00 KiB = 12.00 KiB (2 rows from max_num_seqs x \
          3.00 KiB/row, scope=request, 24 positions from 20 held, capacity grown in steps of 8)"
        ]
    );
    Ok(())
}

#[test]
fn a_cache_locked_by_a_running_step_is_skipped_by_path_not_waited_for() -> Result<()> {
    let model = peak::shared()?;
    let step = model.cache.lock().expect("not poisoned");
    let collection = collect(&model);
    drop(step);
    assert!(collection.entries().is_empty());
    assert_eq!(collection.skipped().len(), 1);
    assert_eq!(collection.skipped()[0].path, "cache");
    assert!(matches!(
        collection.skipped()[0].error,
        KvError::Unreachable {
            container: "Mutex",
            ..
        }
    ));
    // Unlocked, everything is counted again: 2 x 6,144 B.
    assert_eq!(collect(&model).totals(2).unwrap().total, 12_288);
    Ok(())
}
