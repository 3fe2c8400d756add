//! The engine-layout examples (`examples/engine_layouts`, #34 item 9): a
//! mistral.rs-shaped pipeline over sibling modules, candle llama's `Cache`
//! beside its model, Mimi's streaming stages as trait objects. Each is run
//! on the CPU to its peak with zero weights; every declaration equals the
//! bytes its own tensors hold, every annotated type is reached from the
//! roots, and the report is the same before the first token as at the peak.
//!
//! Figures by hand:
//! - mistral.rs: the rotary table, cos and sin of 32 positions x 8 (16 / 2)
//!   x 4 B = 2,048 B, shared by the 3 layers through one `Arc`; the sliding
//!   layer's K and V, each 2 sequences x 2 KV heads x 8 positions x 16 dims
//!   x 4 B = 2,048 B: 4,096 B; each full layer's K and V at 32 positions
//!   (grown 16, then 32): 2 x 2 x 32 x 16 x 4 x 2 = 16,384 B. In all
//!   2,048 + 4,096 + 2 x 16,384 = 38,912 B.
//! - llama: K and V of 2 layers x 2 KV heads x 48 positions x 16 dims x 4 B
//!   x 2 = 24,576 B; cos and sin of 48 x 8 x 4 B = 3,072 B; one u8 mask of
//!   t x t per prompt length t of 16..=40: 40 x 41 x 81 / 6 - 15 x 16 x 31
//!   / 6 = 22,140 - 1,240 = 20,900 B.
//! - Mimi: each convolution keeps its concatenation of 3 + 8 frames of 32
//!   channels in f32 for 2 streams: 2 x 32 x 11 x 4 = 2,816 B; each
//!   attention's rotating K and V of 2 streams x 4 heads x 16 frames x 8
//!   dims x 4 B x 2 = 8,192 B. In all 2 x 2,816 + 2 x 8,192 = 22,016 B.

#[path = "../examples/engine_layouts/engine/mod.rs"]
mod engine;

use candle_core::Result;
use engine::peak;
use kv_candle::{assert_declared_bytes, assert_declared_each};
use kv_core::registry::unreached_within;
use kv_core::{collect, ModelLocalKv};

fn borrowed(measured: &[(String, u64)]) -> Vec<(&str, u64)> {
    measured
        .iter()
        .map(|(name, bytes)| (name.as_str(), *bytes))
        .collect()
}

fn report(root: &dyn ModelLocalKv, max_num_seqs: u64) -> Vec<String> {
    collect(root)
        .report(max_num_seqs)
        .to_string()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Every annotated type of the examples' `modules` that `roots` cannot reach.
fn unreached(roots: &[&dyn ModelLocalKv], modules: &[&str]) -> Vec<&'static str> {
    let modules: Vec<String> = modules
        .iter()
        .map(|module| format!("engine_layouts::engine::{module}"))
        .collect();
    let modules: Vec<&str> = modules.iter().map(String::as_str).collect();
    unreached_within(roots, &modules)
        .iter()
        .map(|u| u.type_name)
        .collect()
}

#[test]
fn the_mistral_pipeline_is_declared_to_the_byte_through_its_trait_objects() -> Result<()> {
    let engine = peak::mistral_engine()?;
    let before = report(&engine, 2);
    peak::drive_mistral(&engine)?;
    assert_eq!(
        report(&engine, 2),
        before,
        "declared before the first token"
    );
    assert_eq!(peak::mistral_measured(&engine)?, 38_912);
    assert_declared_bytes(&engine, 2, 38_912);
    assert_eq!(
        before[2..],
        [
            "  pipeline.model.layers.0.rotary.cos_sin: 2.00 KiB (1 row from fixed(1; one table \
             shared by every layer and sequence) x 2.00 KiB/row, scope=model, tensors: cos [32 x \
             8] f32, sin [32 x 8] f32)",
            "  pipeline.model.cache.Normal.0.0.k_v: 4.00 KiB (2 rows from max_num_seqs x 2.00 \
             KiB/row, scope=request, 8 positions from sliding_window: the last window positions, \
             only_when=KvCache::Rotating)",
            "  pipeline.model.cache.Normal.0.1..=2.k_v: 2 x 16.00 KiB = 32.00 KiB (2 rows from \
             max_num_seqs x 8.00 KiB/row, scope=request, 32 positions from 32 held, capacity \
             grown in steps of 16, only_when=KvCache::Normal)",
        ]
    );
    // The pipeline, the models and the layers are sibling modules: every
    // annotated type of theirs is reached, the llama's and Mimi's apart
    // (other models of the crate, which this pipeline does not hold).
    let mistral = ["pipeline", "models::mistral", "layers"];
    assert_eq!(unreached(&[&engine], &mistral), Vec::<&str>::new());
    let everything = unreached(&[&engine], &["models"]);
    assert!(everything.contains(&"engine_layouts::engine::models::mimi::Mimi"));
    Ok(())
}

#[test]
fn the_llama_cache_beside_the_model_is_declared_to_the_byte() -> Result<()> {
    let (llama, mut cache) = peak::llama()?;
    let before = report(&cache, 1);
    peak::drive_llama(&llama, &mut cache)?;
    assert_eq!(report(&cache, 1), before);
    let measured = peak::llama_measured(&cache)?;
    assert_eq!(
        measured.each_ref().map(|(_, bytes)| *bytes),
        [24_576, 3_072, 20_900]
    );
    assert_declared_each(&cache, 1, &borrowed(&measured));
    // Two roots: the model (weights only) and the cache beside it. Given
    // the model alone, the cache and its rotary tables are reached by
    // nothing.
    let modules = ["models::llama", "layers::rotary"];
    assert_eq!(unreached(&[&llama, &cache], &modules), Vec::<&str>::new());
    let alone = unreached(&[&llama], &modules);
    assert_eq!(
        alone,
        [
            "engine_layouts::engine::layers::rotary::RotaryEmbedding",
            "engine_layouts::engine::models::llama::Cache",
        ]
    );
    Ok(())
}

#[test]
fn mimis_stages_are_declared_to_the_byte_through_the_stage_trait() -> Result<()> {
    let mut mimi = peak::mimi()?;
    let before = report(&mimi, 2);
    peak::drive_mimi(&mut mimi)?;
    assert_eq!(report(&mimi, 2), before);
    let measured = peak::mimi_measured(&mimi)?;
    assert_eq!(
        measured.iter().map(|(_, bytes)| *bytes).collect::<Vec<_>>(),
        [2_816, 8_192, 8_192, 2_816]
    );
    assert_declared_each(&mimi, 2, &borrowed(&measured));
    assert_eq!(collect(&mimi).totals(2).unwrap().total, 22_016);
    assert_eq!(unreached(&[&mimi], &["models::mimi"]), Vec::<&str>::new());
    Ok(())
}

/// The census (`kv_candle::census`, through `peak::*_census`): each model
/// built from weights loaded apart, driven to its peak, its own structure
/// (its `Vec`s of layers, its boxed stages) set apart. What it holds then
/// equals what it declares, but for the llama memo's hash table, worked out
/// below.
mod census {
    use super::*;
    use kv_candle::census::{CountingAlloc, Tolerance};

    #[global_allocator]
    static ALLOC: CountingAlloc = CountingAlloc::new();

    #[test]
    fn the_mistral_pipeline_holds_what_it_declares() -> Result<()> {
        let counted = peak::mistral_census()?;
        let accounting = counted.report.compare(&counted.model, 2).expect("compare");
        assert_eq!((accounting.declared, accounting.held), (38_912, 38_912));
        counted
            .report
            .assert_accounted(&counted.model, 2, Tolerance::EXACT);
        Ok(())
    }

    #[test]
    fn the_llama_cache_holds_what_it_declares_and_its_memos_hash_table() -> Result<()> {
        let counted = peak::llama_census()?;
        let cache = &counted.model.1;
        let accounting = counted.report.compare(cache, 1).expect("compare");
        // The memo is a `HashMap<(usize, usize), Tensor>` of 25 masks: its
        // table (hashbrown) has 32 buckets (25 x 8 / 7, rounded up to a power
        // of two) of 24-byte entries, and a control byte per bucket plus 16:
        // 32 x 24 + 32 + 16 = 816 B, held beside the masks, and no tensor.
        let entry = std::mem::size_of::<((usize, usize), candle_core::Tensor)>() as u64;
        let table = 32 * entry + 32 + 16;
        assert_eq!(table, 816);
        assert_eq!(
            (accounting.declared, accounting.held),
            (48_548, 48_548 + table)
        );
        counted
            .report
            .assert_accounted(cache, 1, Tolerance::bytes(table));
        Ok(())
    }

    #[test]
    fn mimi_holds_what_it_declares() -> Result<()> {
        let counted = peak::mimi_census()?;
        let accounting = counted.report.compare(&counted.model, 2).expect("compare");
        assert_eq!((accounting.declared, accounting.held), (22_016, 22_016));
        counted
            .report
            .assert_accounted(&counted.model, 2, Tolerance::EXACT);
        Ok(())
    }
}
