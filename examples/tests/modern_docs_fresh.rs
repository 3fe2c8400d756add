//! docs/modern-models.md is generated from the modern models and the peers'
//! figures; this fails when it is stale and names the command that
//! regenerates it.

use kv_examples::modern::{
    check_modern_docs_fresh, modern_docs_markdown, MODERN_DOCS_COMMAND, MODERN_DOCS_PATH,
};

#[test]
fn the_modern_models_page_is_fresh() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(MODERN_DOCS_PATH);
    let on_disk = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("cannot read {MODERN_DOCS_PATH} ({e}); generate it with `{MODERN_DOCS_COMMAND}`")
    });
    let generated = modern_docs_markdown().expect("the modern models load");
    if let Err(message) = check_modern_docs_fresh(&on_disk, &generated) {
        panic!("{message}");
    }
}

#[test]
fn a_stale_page_fails_with_the_command_that_regenerates_it() {
    let generated = modern_docs_markdown().unwrap();
    let stale = generated.replace("31,104 B", "31,000 B");
    assert_ne!(stale, generated);
    let message = check_modern_docs_fresh(&stale, &generated).unwrap_err();
    assert!(message.contains(MODERN_DOCS_COMMAND), "{message}");
    assert!(message.contains("stale"), "{message}");
    let shorter: String = generated.lines().take(3).collect::<Vec<_>>().join("\n");
    assert!(check_modern_docs_fresh(&shorter, &generated).is_err());
    assert_eq!(check_modern_docs_fresh(&generated, &generated), Ok(()));
}

#[test]
fn the_page_holds_the_report_the_table_and_every_explanation() {
    let page = modern_docs_markdown().unwrap();
    for needle in [
        "Model-local KV (outside the paged manager)",
        "| Model | kv per position | kv per row | vLLM per position",
        "131,072 B",
        "31,104 B",
        "234.38 MiB",
        "GGML_PAD(n_swa 1024 + n_ubatch 512, 256) = 1536 cells",
        "max_model_len 8192, max_num_batched_tokens 2048, block_size 16, max_num_seqs 256",
    ] {
        assert!(page.contains(needle), "{needle} missing from the page");
    }
    for row in kv_examples::modern::peers::PEERS {
        for (_, figure) in row.named() {
            assert!(page.contains(figure.why), "{} missing", figure.why);
        }
    }
}
