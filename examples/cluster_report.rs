//! Reports across processes: each rank of a TP=2 x PP=2 layout writes its
//! own JSON report, as each engine process would at start-up; they are read
//! back, merged, and printed as one cluster table, with each rank's plan.
//!
//! ```sh
//! cargo run --example cluster_report                 # reports in a temporary folder, removed after
//! cargo run --example cluster_report -- DIR          # reports written to DIR/rank-tpT-ppP.json
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use kv_core::export::{ClusterReport, ExportedReport};
use kv_core::planner::Allowance;
use kv_core::units::GIB;
use kv_core::{collect, KvError, Parallel};
use kv_examples::loaded_models;

/// The `max_num_seqs` every rank reports at.
const MAX_NUM_SEQS: u64 = 256;

fn main() -> ExitCode {
    // A folder named on the command line is kept; a temporary one is removed.
    let (dir, temporary) = match std::env::args().nth(1) {
        Some(dir) => (PathBuf::from(dir), false),
        None => (
            std::env::temp_dir().join(format!("kv-cluster-report-{}", std::process::id())),
            true,
        ),
    };
    let result = run(&dir);
    if temporary {
        if let Err(error) = std::fs::remove_dir_all(&dir) {
            eprintln!("could not remove {}: {error}", dir.display());
        }
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

fn run(dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let models = loaded_models()?;
    let (name, qwen3_tts) = &models[0];
    let whole = collect(qwen3_tts.as_ref());
    let layout = Parallel::new(2, 2)?;
    std::fs::create_dir_all(dir)?;

    // Each rank writes its own report, as its engine process would.
    let mut paths = Vec::new();
    for rank in layout.ranks() {
        let held = whole.for_rank(rank)?;
        let path = dir.join(format!("rank-tp{}-pp{}.json", rank.tp_rank, rank.pp_rank));
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&held.export(MAX_NUM_SEQS))?,
        )?;
        println!("{}", held.plan(Allowance::Bytes(GIB))?);
        paths.push(path);
    }

    // Later, elsewhere: read every rank's report back and merge them.
    let reports = paths
        .iter()
        .map(
            |path| -> Result<ExportedReport, Box<dyn std::error::Error>> {
                let text = std::fs::read_to_string(path)?;
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()).into())
            },
        )
        .collect::<Result<Vec<_>, _>>()?;
    let cluster = ClusterReport::merge(reports).map_err(|e: KvError| e.to_string())?;
    println!();
    println!("{name}, {} rank reports merged:", paths.len());
    println!("{cluster}");
    Ok(())
}
