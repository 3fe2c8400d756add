//! docs/model-local-kv.md is generated from the declarations; this fails when
//! it is stale and says how to regenerate it.

use kv_examples::{check_docs_fresh, docs_markdown, DOCS_COMMAND, DOCS_PATH};

#[test]
fn generated_documentation_is_fresh() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(DOCS_PATH);
    let on_disk = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("cannot read {DOCS_PATH} ({e}); generate it with `{DOCS_COMMAND}`")
    });
    let generated = docs_markdown().expect("the example's models load");
    if let Err(message) = check_docs_fresh(&on_disk, &generated) {
        panic!("{message}");
    }
}

#[test]
fn a_stale_page_fails_with_the_command_that_regenerates_it() {
    let generated = docs_markdown().unwrap();
    let stale = generated.replace("4.44 MiB", "4.40 MiB");
    let message = check_docs_fresh(&stale, &generated).unwrap_err();
    assert!(message.contains(DOCS_COMMAND), "{message}");
    assert!(message.contains("stale"), "{message}");
    let shorter: String = generated.lines().take(3).collect::<Vec<_>>().join("\n");
    assert!(check_docs_fresh(&shorter, &generated).is_err());
    assert_eq!(check_docs_fresh(&generated, &generated), Ok(()));
}

#[test]
fn the_page_holds_every_declaration_and_the_seed_figures() {
    let page = docs_markdown().unwrap();
    for figure in [
        "4.44 MiB",
        "704.00 KiB",
        "140.62 MiB",
        "24.00 MiB",
        "179.44 MiB",
        "known after load",
    ] {
        assert!(
            page.contains(figure),
            "{figure} missing from the generated page"
        );
    }
    for name in [
        "retained",
        "working_copy",
        "graph_pool",
        "local_kv",
        "streaming_encoder",
        "static_cache",
    ] {
        assert!(page.contains(name), "{name} missing");
    }
}
