//! Four decoders in the shapes real Rust engines keep their caches in, run
//! on the CPU with zero weights to their peak: the start-up report each
//! prints (without a logger), and each declaration set against the bytes
//! its own tensors hold.
//!
//! ```text
//! cargo run -p kv-candle --example worked_models
//! ```

mod models;

use kv_core::{collect, ModelLocalKv};
use models::peak;

/// Prints the report at `max_num_seqs` and the per-declaration comparison.
fn show(title: &str, model: &dyn ModelLocalKv, max_num_seqs: u64, measured: &[(String, u64)]) {
    println!("== {title}");
    print!("{}", collect(model).report(max_num_seqs));
    println!();
    let measured: Vec<(&str, u64)> = measured
        .iter()
        .map(|(name, bytes)| (name.as_str(), *bytes))
        .collect();
    match kv_candle::compare_declared_each(model, max_num_seqs, &measured) {
        Ok(diff) => println!("{diff}\n"),
        Err(err) => println!("cannot compare: {err}\n"),
    }
}

fn main() -> candle_core::Result<()> {
    let concat = peak::concat()?;
    show(
        "Qwen2-style concat cache per layer",
        &concat,
        1,
        &peak::concat_measured(&concat)?,
    );
    let sliding = peak::sliding()?;
    show(
        "Gemma-3-style enum of rotating and full caches",
        &sliding,
        1,
        &peak::sliding_measured(&sliding)?,
    );
    let cross = peak::cross()?;
    show(
        "Whisper-style cross-attention in a tuple with its norm",
        &cross,
        1,
        &peak::cross_measured(&cross)?,
    );
    let shared = peak::shared()?;
    let batch = peak::SHARED_BATCH as u64;
    show(
        "mistral.rs-style caches behind Arc<Mutex<..>>",
        &shared,
        batch,
        &peak::shared_measured(&shared)?,
    );
    Ok(())
}
