//! The modern models side by side with the peers: each model's start-up
//! report, its declarations, and a table of kv's bytes per position and per row
//! next to vLLM's, llama.cpp's, transformers' and a naive calculator's, with
//! one line per difference.
//!
//! ```sh
//! cargo run -p kv-examples --example modern_models                 # print it
//! cargo run -p kv-examples --example modern_models -- --write-docs  # regenerate docs/modern-models.md
//! ```

use std::process::ExitCode;

use kv_examples::modern::{
    declarations_markdown, modern_docs_markdown, modern_models, side_by_side_markdown, DEPLOYMENT,
    MODERN_DOCS_PATH,
};

fn main() -> ExitCode {
    let mut write_docs = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--write-docs" => write_docs = true,
            other => {
                eprintln!("unknown argument `{other}`\nusage: modern_models [--write-docs]");
                return ExitCode::from(2);
            }
        }
    }
    if write_docs {
        return write_documentation();
    }

    kv_examples::log_to_stdout();

    println!("Deployment: {}\n", DEPLOYMENT.describe());
    let models = match modern_models() {
        Ok(models) => models,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    for model in &models {
        println!("# {}: start-up report", model.name);
        kv_core::log_model_local_kv(model.root.as_ref(), DEPLOYMENT.max_num_seqs);
        println!();
    }
    let tables = declarations_markdown().and_then(|declarations| {
        side_by_side_markdown().map(|side_by_side| (declarations, side_by_side))
    });
    match tables {
        Ok((declarations, side_by_side)) => {
            println!(
                "# Declarations (max_num_seqs={})\n\n{declarations}",
                DEPLOYMENT.max_num_seqs
            );
            println!("# Side by side\n\n{side_by_side}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

fn write_documentation() -> ExitCode {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(MODERN_DOCS_PATH);
    let page = match modern_docs_markdown() {
        Ok(page) => page,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    match std::fs::write(&path, page) {
        Ok(()) => {
            println!("wrote {MODERN_DOCS_PATH}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("cannot write {}: {error}", path.display());
            ExitCode::FAILURE
        }
    }
}
