//! The main job: the start-up report and the table for the seed's models.
//!
//! ```sh
//! cargo run --example omni_models                       # report + table at max_num_seqs=256
//! cargo run --example omni_models -- --max-num-seqs 64
//! cargo run --example omni_models -- --write-docs       # regenerate docs/model-local-kv.{md,svg}
//! KV_UPDATE_DOCS=1 cargo test -p kv-examples --test docs_fresh   # the same, from the freshness test
//! ```

use std::process::ExitCode;

use kv_examples::{docs_page, loaded_models, DOCS_CHART_PATH, DOCS_MAX_NUM_SEQS, DOCS_PATH};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut max_num_seqs = DOCS_MAX_NUM_SEQS;
    let mut write_docs = false;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--write-docs" => write_docs = true,
            "--max-num-seqs" => match iter.next().map(|v| v.parse::<u64>()) {
                Some(Ok(value)) => max_num_seqs = value,
                _ => return usage("--max-num-seqs takes a non-negative integer"),
            },
            other => return usage(&format!("unknown argument `{other}`")),
        }
    }
    if write_docs {
        return write_documentation();
    }

    kv_examples::log_to_stdout();

    let models = match loaded_models() {
        Ok(models) => models,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    let mut table = kv_core::Table::new(max_num_seqs);
    for (model, root) in &models {
        println!("# {model}: start-up report");
        let collection = kv_core::log_model_local_kv(root.as_ref(), max_num_seqs);
        println!();
        table = table.collection(model, &collection);
    }
    println!("# Table (max_num_seqs={max_num_seqs})\n");
    print!("{}", table.to_markdown());
    ExitCode::SUCCESS
}

fn write_documentation() -> ExitCode {
    let files = match generated_docs() {
        Ok(files) => files,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (relative, contents) in files {
        let path = root.join(relative);
        if let Some(dir) = path.parent() {
            if let Err(error) = std::fs::create_dir_all(dir) {
                eprintln!("cannot create {}: {error}", dir.display());
                return ExitCode::FAILURE;
            }
        }
        if let Err(error) = std::fs::write(&path, contents) {
            eprintln!("cannot write {}: {error}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {relative}");
    }
    ExitCode::SUCCESS
}

/// The page and its chart, with where each goes.
fn generated_docs() -> Result<[(&'static str, String); 2], Box<dyn std::error::Error>> {
    let page = docs_page()?;
    Ok([
        (DOCS_PATH, page.to_markdown()),
        (DOCS_CHART_PATH, page.to_svg()?),
    ])
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("{problem}\nusage: omni_models [--max-num-seqs N] [--write-docs]");
    ExitCode::from(2)
}
