//! docs/model-local-kv.md and its chart are generated from the declarations;
//! these fail when either is stale, and `KV_UPDATE_DOCS=1` rewrites them
//! (kv-core's feature `fresh`).

use kv_core::fresh::assert_fresh;
use kv_examples::{docs_page, DOCS_CHART_PATH, DOCS_PATH};

fn in_workspace(path: &str) -> std::path::PathBuf {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    examples
        .parent()
        .expect("examples/ is in the workspace")
        .join(path)
}

#[test]
fn generated_documentation_is_fresh() {
    let page = docs_page().expect("the example's models load");
    assert_fresh(in_workspace(DOCS_PATH), &page.to_markdown());
    assert_fresh(in_workspace(DOCS_CHART_PATH), &page.to_svg().unwrap());
}

#[test]
fn the_page_holds_every_declaration_the_seed_figures_and_the_chart() {
    let page = docs_page().unwrap().to_markdown();
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
    assert!(page.contains("](model-local-kv.svg)"), "{page}");
}

#[test]
fn the_chart_has_one_band_per_loaded_declaration_and_the_totals_at_both_ends() {
    let svg = docs_page().unwrap().to_svg().unwrap();
    // Seven declarations held after load: one filled band each, plus one
    // legend swatch each (a rectangle).
    assert_eq!(svg.matches("<polygon").count(), 7, "{svg}");
    for label in [
        "Qwen3-TTS: decoder.retained",
        "Qwen3-TTS: decoder.working_copy",
        "Qwen3-TTS: code2wav.graph_pool",
        "MiMo-Audio: local_transformer.local_kv",
        "MiMo-Audio: graph_pool.graph_pool",
        "MiniCPM-o: apm.streaming_encoder",
        "ming_flash_omni: talker.static_cache",
    ] {
        assert_eq!(
            svg.matches(&format!("\n{label}\n</text>")).count(),
            1,
            "{label}"
        );
    }
    // Totals: at max_num_seqs=1, 2 x 4.44 + 0.69 MiB per row plus the fixed
    // 22.19 + 179.44 + 140.62 + 24 MiB; at 512, 512 rows of each.
    let fixed = 5 * 4_653_056 + 261 * 720_896 + 147_456_000 + 25_165_824;
    let per_seq = 2 * 4_653_056 + 720_896;
    let (at_1, at_512) = (fixed + per_seq, fixed + 512 * per_seq);
    let totals = format!(
        "Total: {} at max_num_seqs=1, {} at 512",
        kv_core::units::human_bytes(at_1),
        kv_core::units::human_bytes(at_512)
    );
    assert_eq!(
        totals,
        "Total: 375.81 MiB at max_num_seqs=1, 5.14 GiB at 512"
    );
    assert!(svg.contains(&totals), "{totals} missing");
}
