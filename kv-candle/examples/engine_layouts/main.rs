//! Three models laid out as Rust engines lay theirs out (mistral.rs's
//! pipeline over sibling modules, candle-transformers' llama with its
//! `Cache` beside the model, Mimi's streaming stages as trait objects),
//! each run on the CPU to its peak: its start-up report, its declarations
//! against the bytes its own tensors hold, and the census of what the
//! process holds for it.
//!
//! ```text
//! cargo run -p kv-candle --example engine_layouts
//! ```

mod engine;

use engine::peak;
use kv_candle::census::CountingAlloc;
use kv_core::{collect, ModelLocalKv};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

/// The census's accounting of `root` at `max_num_seqs`.
fn census(report: &kv_candle::census::CensusReport, root: &dyn ModelLocalKv, max_num_seqs: u64) {
    match report.compare(root, max_num_seqs) {
        Ok(accounting) => println!("{accounting}\n"),
        Err(err) => println!("cannot compare: {err}\n"),
    }
}

fn show(title: &str, root: &dyn ModelLocalKv, max_num_seqs: u64, measured: &[(String, u64)]) {
    println!("== {title}");
    println!("{}\n", collect(root).report(max_num_seqs));
    let measured: Vec<(&str, u64)> = measured
        .iter()
        .map(|(name, bytes)| (name.as_str(), *bytes))
        .collect();
    match kv_candle::compare_declared_each(root, max_num_seqs, &measured) {
        Ok(diff) => println!("{diff}\n"),
        Err(err) => println!("cannot compare: {err}\n"),
    }
}

fn main() -> candle_core::Result<()> {
    let engine = peak::mistral_engine()?;
    peak::drive_mistral(&engine)?;
    let batch = peak::MISTRAL_BATCH as u64;
    println!("== mistral.rs-style pipeline");
    println!("{}\n", collect(&engine).report(batch));
    match kv_candle::compare_declared(&engine, batch, peak::mistral_measured(&engine)?) {
        Ok(diff) => println!("{diff}\n"),
        Err(err) => println!("cannot compare: {err}\n"),
    }

    let (llama, mut cache) = peak::llama()?;
    peak::drive_llama(&llama, &mut cache)?;
    println!("(the model, a root of its own, holds weights only)");
    println!("{}\n", collect(&llama).report(1));
    show(
        "candle llama's Cache beside the model",
        &cache,
        1,
        &peak::llama_measured(&cache)?,
    );

    let mut mimi = peak::mimi()?;
    peak::drive_mimi(&mut mimi)?;
    show(
        "Mimi-style streaming stages",
        &mimi,
        peak::MIMI.batch as u64,
        &peak::mimi_measured(&mimi)?,
    );

    println!("== the census: what the process holds beyond the weights");
    let mistral = peak::mistral_census()?;
    census(&mistral.report, &mistral.model, batch);
    let llama = peak::llama_census()?;
    census(&llama.report, &llama.model.1, 1);
    println!("(the llama Cache's 816 B more: its mask memo's hash table)\n");
    let mimi = peak::mimi_census()?;
    census(&mimi.report, &mimi.model, peak::MIMI.batch as u64);
    Ok(())
}
