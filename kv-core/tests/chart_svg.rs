//! The chart's SVG, read back as structure: axes, one band per declaration,
//! resident and after-profiling bands told apart, the stack's values at
//! max_num_seqs 1 and 512, and overflow as an error. Never pixels.

use kv_core::chart::{Chart, ChartError};
use kv_core::units::human_bytes;
use kv_core::{collect, KvError, ModelLocalKv};

#[derive(ModelLocalKv)]
#[kv(
    name = "graph_pool",
    cache = "DynamicCache captured per bucket",
    layers = 16, kv_heads = 64, head_dim = 16, dtype = bf16,
    positions = bounded(11, because = "group_size 4 + max(delay_pattern) 7"),
    scope = model,
    rows = fixed(261, because = "sum of captured buckets"),
)]
struct GraphPool;

#[derive(ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "sliding DynamicCache",
    layers = 8, kv_heads = 16, head_dim = 64, dtype = f32,
    positions = bounded(71, because = "sliding_window(72) - 1"),
    scope = request,
    rows = max_num_seqs,
)]
#[kv(
    name = "working_copy",
    cache = "deep copy of the retained DynamicCache",
    layers = 8, kv_heads = 16, head_dim = 64, dtype = f32,
    positions = bounded(71, because = "sliding_window(72) - 1"),
    scope = invocation,
    rows = max_num_seqs,
)]
struct Decoder;

/// Declared in this order: after-profiling first, so the test also sees
/// resident bands moved to the bottom of the stack.
#[derive(ModelLocalKv)]
struct Model {
    #[kv(child)]
    decoder: Decoder,
    #[kv(child)]
    pool: GraphPool,
}

const RETAINED_PER_ROW: u64 = 4_653_056;
const POOL: u64 = 188_153_856;

/// One `<polygon>`: its opacity, fill and points.
struct Band {
    opacity: String,
    fill: String,
    points: Vec<(f64, f64)>,
}

fn attribute<'a>(element: &'a str, name: &str) -> &'a str {
    let start = element.find(&format!(" {name}=\"")).expect(name) + name.len() + 3;
    let len = element[start..].find('"').unwrap();
    &element[start..start + len]
}

fn bands(svg: &str) -> Vec<Band> {
    svg.match_indices("<polygon")
        .map(|(at, _)| {
            let element = &svg[at..at + svg[at..].find("/>").unwrap()];
            let points = attribute(element, "points")
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect();
            Band {
                opacity: attribute(element, "opacity").to_owned(),
                fill: attribute(element, "fill").to_owned(),
                points,
            }
        })
        .collect()
}

/// Each `<text>` element: its opening tag (attributes) and its content.
fn text_elements(svg: &str) -> Vec<(&str, &str)> {
    svg.split("<text")
        .skip(1)
        .map(|t| {
            let open = t.find('>').unwrap();
            (&t[..open], t[open + 1..t.find("</text>").unwrap()].trim())
        })
        .collect()
}

fn texts(svg: &str) -> Vec<&str> {
    text_elements(svg)
        .into_iter()
        .map(|(_, text)| text)
        .collect()
}

fn model_svg() -> String {
    let model = Model {
        decoder: Decoder,
        pool: GraphPool,
    };
    Chart::new("Model-local KV")
        .collection(&collect(&model))
        .to_svg()
        .unwrap()
}

#[test]
fn axes_are_labelled_with_units_and_max_num_seqs_from_1_to_512() {
    let svg = model_svg();
    assert!(
        svg.starts_with("<svg width=\"900\" height=\"560\""),
        "{svg}"
    );
    let texts = texts(&svg);
    assert!(texts.contains(&"max_num_seqs"), "{texts:?}");
    assert!(texts.contains(&"model-local KV at peak (GiB)"), "{texts:?}");
    for tick in ["1", "64", "256", "512", "0.0", "1.0", "4.0"] {
        assert!(texts.contains(&tick), "tick {tick} missing: {texts:?}");
    }
    assert!(texts.contains(&"Model-local KV"), "{texts:?}");
}

#[test]
fn one_band_per_declaration_resident_solid_at_the_bottom_after_profiling_light() {
    let svg = model_svg();
    let bands = bands(&svg);
    assert_eq!(bands.len(), 3);
    // Resident first (drawn at the bottom), solid; then the others, light.
    assert_eq!(bands[0].opacity, "1");
    assert_eq!(bands[1].opacity, "0.3");
    assert_eq!(bands[2].opacity, "0.3");
    assert_ne!(bands[1].fill, bands[2].fill);
    // Each band: 9 samples along its top, then back along its bottom.
    for band in &bands {
        assert_eq!(band.points.len(), 18);
    }
    // After-profiling bands are hatched: vertical lines in their colour.
    let hatch = format!("stroke=\"{}\" stroke-width=\"1\"", bands[1].fill);
    assert!(svg.matches(&hatch).count() > 20, "{hatch}");

    // The legend: one entry per declaration, under one heading per kind.
    let texts = texts(&svg);
    for label in [
        "decoder.retained",
        "decoder.working_copy",
        "pool.graph_pool",
        "Allocated after profiling",
        "Resident (scope model)",
    ] {
        assert_eq!(texts.iter().filter(|t| **t == label).count(), 1, "{label}");
    }
}

#[test]
fn the_stack_holds_each_declarations_bytes_at_max_num_seqs_1_and_512() {
    let svg = model_svg();
    let bands = bands(&svg);
    // Expected bytes per band, bottom up, at max_num_seqs = 1 and 512.
    let expected = |n: u64| [POOL, RETAINED_PER_ROW * n, RETAINED_PER_ROW * n];
    // (index of the top point, index of the bottom point) at each end.
    for (n, top, bottom) in [(1, 0, 17), (512, 8, 9)] {
        let zero = bands[0].points[bottom].1;
        let total_px = zero - bands[2].points[top].1;
        let total: u64 = expected(n).iter().sum();
        for (band, bytes) in bands.iter().zip(expected(n)) {
            let height = band.points[bottom].1 - band.points[top].1;
            let share = bytes as f64 / total as f64;
            // Pixels are integers: allow a pixel and a half either way.
            assert!(
                (height - share * total_px).abs() <= 1.5,
                "at {n}: {height} px, expected {} px",
                share * total_px
            );
        }
        // Bands stack: each starts where the one below ends.
        for pair in bands.windows(2) {
            assert_eq!(pair[0].points[top], pair[1].points[bottom]);
        }
    }
    // x: the same samples for every band, left to right.
    assert!(bands[0].points[0].0 < bands[0].points[8].0);
    assert_eq!(bands[0].points[0].0, bands[2].points[0].0);

    let at_1 = POOL + 2 * RETAINED_PER_ROW;
    let at_512 = POOL + 2 * 512 * RETAINED_PER_ROW;
    let totals = format!(
        "Total: {} at max_num_seqs=1, {} at 512",
        human_bytes(at_1),
        human_bytes(at_512)
    );
    assert!(svg.contains(&totals), "{totals}");
    assert!(texts(&svg).contains(&human_bytes(at_512).as_str()));
}

#[test]
fn rows_with_labels_and_megabytes_below_a_gib() {
    let pool = collect(&GraphPool);
    let svg = Chart::new("Pool")
        .rows([("MiMo-Audio", &pool.entries()[0].spec)])
        .to_svg()
        .unwrap();
    let texts = texts(&svg);
    assert!(texts.contains(&"MiMo-Audio.graph_pool"), "{texts:?}");
    assert!(texts.contains(&"model-local KV at peak (MiB)"), "{texts:?}");
    assert!(!texts.contains(&"Allocated after profiling"), "{texts:?}");
    assert_eq!(bands(&svg).len(), 1);
}

#[test]
fn an_empty_chart_still_draws_its_axes() {
    let svg = Chart::new("Nothing declared").to_svg().unwrap();
    assert!(bands(&svg).is_empty());
    assert!(texts(&svg).contains(&"max_num_seqs"));
}

/// Geometry read after load, so the derive's const checks cannot catch it.
#[allow(dead_code)] // the fields only carry declarations
#[derive(ModelLocalKv)]
struct Huge {
    #[kv(
        cache = "DynamicCache",
        layers = self.layers, kv_heads = 1024, head_dim = 1024, dtype = f32,
        positions = bounded(1024, because = "a test"),
        scope = request,
        rows = max_num_seqs,
    )]
    cache: (),
    #[kv(
        cache = "StaticCache",
        layers = self.layers, kv_heads = 1024, head_dim = 1024, dtype = f32,
        positions = bounded(1024, because = "a test"),
        scope = model,
        rows = fixed(1, because = "a test"),
    )]
    other: (),
    layers: u64,
}

#[test]
fn bytes_that_overflow_are_an_error_naming_the_declaration_not_a_panic() {
    // 2^25 layers: 2^58 bytes per row, so 512 rows overflow u64.
    let huge = collect(&Huge {
        cache: (),
        other: (),
        layers: 1 << 25,
    });
    assert!(huge.skipped().is_empty(), "{:?}", huge.skipped());
    match Chart::new("Huge").collection(&huge).to_svg() {
        Err(ChartError::Kv(KvError::Overflow { declaration, .. })) => {
            assert_eq!(declaration, "cache")
        }
        other => panic!("expected an overflow, got {other:?}"),
    }
    // 2^30 layers: 2^63 bytes each at one row; their sum overflows.
    let sum = collect(&Huge {
        cache: (),
        other: (),
        layers: 1 << 30,
    });
    let error = Chart::new("Sum")
        .rows(sum.entries().iter().map(|e| ("", &e.spec)))
        .to_svg()
        .unwrap_err();
    assert_eq!(
        error,
        ChartError::Kv(KvError::Overflow {
            declaration: "cache".into(),
            step: "sum of peak bytes"
        })
    );
    assert!(error.to_string().contains("overflow"), "{error}");
    // The KvError is the source, for callers that walk the chain.
    let source = std::error::Error::source(&error).expect("a KvError source");
    assert_eq!(
        source.to_string(),
        error
            .to_string()
            .replace("cannot chart model-local KV: ", "")
    );
    assert!(std::error::Error::source(&ChartError::Draw("x".into())).is_none());
}

#[test]
fn many_declarations_and_long_labels_stay_inside_the_image() {
    let pool = collect(&GraphPool);
    let spec = &pool.entries()[0].spec;
    let labels: Vec<String> = (0..40)
        .map(|i| format!("a-model-with-a-rather-long-name-{i}: layers.{i}"))
        .collect();
    let svg = Chart::new("Many")
        .rows(labels.iter().map(|l| (l.as_str(), spec)))
        .to_svg()
        .unwrap();
    assert_eq!(bands(&svg).len(), 40);
    let texts = texts(&svg);
    // Cut to 40 characters, the last an ellipsis.
    assert!(
        texts.contains(&"a-model-with-a-rather-long-name-39: lay…"),
        "{texts:?}"
    );
    // Every legend text starts inside the image's height.
    for y in text_ys(&svg, "") {
        assert!((0.0..560.0).contains(&y), "{y}");
    }
}

/// The y of each text that starts with `prefix`, in order.
fn text_ys(svg: &str, prefix: &str) -> Vec<f64> {
    text_elements(svg)
        .into_iter()
        .filter(|(_, text)| text.starts_with(prefix))
        .map(|(tag, _)| attribute(tag, "y").parse().unwrap())
        .collect()
}

#[test]
fn legend_entries_close_up_to_fill_the_height_when_more_than_fit() {
    let pool = collect(&GraphPool);
    let spec = &pool.entries()[0].spec;
    let spacing = |n: usize| {
        let labels: Vec<String> = (0..n).map(|i| format!("entry {i}")).collect();
        let svg = Chart::new("Legend")
            .rows(labels.iter().map(|l| (l.as_str(), spec)))
            .to_svg()
            .unwrap();
        let ys = text_ys(&svg, "entry ");
        assert_eq!(ys.len(), n, "{svg}");
        let steps: Vec<f64> = ys.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(steps.iter().all(|s| *s == steps[0]), "{steps:?}");
        steps[0]
    };
    // Below the image's 64 px title: 16 px margin, then per group (one
    // here) a 20 px heading, a 22 px note and 12 px after its entries,
    // counted for both groups: 560 - 64 - 16 - 2 * 54 = 372 px of entries.
    // Few entries are 22 px apart; 20 share 372 px: 18 px each.
    assert_eq!(spacing(3), 22.0);
    assert_eq!(spacing(20), 18.0);
    // 40 would get 9 px: the floor is 10.
    assert_eq!(spacing(40), 10.0);
}
