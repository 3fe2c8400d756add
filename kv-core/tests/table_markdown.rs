//! Markdown and text tables built from the seed's figures.

use kv_core::declare::DeclaredKv;
use kv_core::spec::Layout;
use kv_core::{DType, Geometry, KvSpec, ModelLocalKv, Positions, Rows, Scope, Table};

const KNOWN_AFTER_LOAD: &str = "known after load";
const OVERFLOW: &str = "overflow";

/// Qwen3-TTS codec decoder, retained cache: 8 x 16 x 64, f32, 71 positions.
#[derive(ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "sliding DynamicCache",
    layers = 8, kv_heads = 16, head_dim = 64, dtype = f32,
    positions = bounded(71, because = "sliding_window(72) - 1"),
    scope = request,
    rows = max_num_seqs,
    only_when = "async_chunk",
)]
struct Qwen3TtsDecoder {
    async_chunk: bool,
}

/// MiMo-Audio graph pool: 16 x 64 x 16, bf16, 11 positions, 261 fixed rows.
#[derive(ModelLocalKv)]
#[kv(
    name = "graph_pool",
    cache = "captured DynamicCache",
    layers = 16, kv_heads = 64, head_dim = 16, dtype = bf16,
    positions = bounded(11, because = "group_size(4) + max(delay_pattern)(7)"),
    scope = model,
    rows = fixed(261, because = "sum of captured buckets (1,2,4,6,8,16,32,64,128)"),
    note = "one DynamicCache per captured bucket",
)]
struct MimoAudio;

/// ming's talker: geometry only in the checkpoint's config, known after load.
#[derive(ModelLocalKv)]
#[kv(
    name = "talker_cache",
    cache = "StaticCache",
    geometry = self.geometry,
    positions = bounded(2048, because = "hardcoded max_cache_len"),
    scope = invocation,
    rows = fixed(1, because = "calls are serialized"),
)]
struct MingTalker {
    geometry: Geometry,
}

fn qwen3_retained() -> KvSpec {
    Qwen3TtsDecoder::KV_DECLS.static_specs[0].clone()
}

fn mimo_pool() -> KvSpec {
    MimoAudio::KV_DECLS.static_specs[0].clone()
}

fn set_positions(spec: &mut KvSpec, count: u64) {
    if let Layout::Attention { positions, .. } = &mut spec.layout {
        positions.count = count;
    }
}

/// The trimmed cells of a Markdown row without escaped pipes.
fn cells(line: &str) -> Vec<String> {
    line.trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_owned())
        .collect()
}

#[test]
fn seed_figures_render_as_exact_markdown() {
    let table = Table::new(256).types(&[MimoAudio::KV_DECLS, Qwen3TtsDecoder::KV_DECLS]);
    assert_eq!(
        table.to_markdown(),
        "\
| Model                    | Cache                                        | Bounded by                                 |    Per row | Rows                                                         | Peak @ max_num_seqs=256 |
| ------------------------ | -------------------------------------------- | ------------------------------------------ | ---------: | ------------------------------------------------------------ | ----------------------: |
| MimoAudio.graph_pool     | captured DynamicCache                        | 11 (group_size(4) + max(delay_pattern)(7)) | 704.00 KiB | fixed 261 (sum of captured buckets (1,2,4,6,8,16,32,64,128)) |              179.44 MiB |
| Qwen3TtsDecoder.retained | sliding DynamicCache (only when async_chunk) | 71 (sliding_window(72) - 1)                |   4.44 MiB | max_num_seqs                                                 |                1.11 GiB |
"
    );
}

#[test]
fn peak_column_follows_max_num_seqs_and_fixed_rows_do_not() {
    let at_one = Table::new(1).types(&[MimoAudio::KV_DECLS, Qwen3TtsDecoder::KV_DECLS]);
    let markdown = at_one.to_markdown();
    let lines: Vec<&str> = markdown.lines().collect();
    assert!(
        lines[0].ends_with("| Peak @ max_num_seqs=1 |"),
        "{}",
        lines[0]
    );
    // The pool is fixed: 179.44 MiB whatever max_num_seqs is.
    assert_eq!(cells(lines[2])[5], "179.44 MiB");
    // One sequence holds one retained row.
    assert_eq!(
        cells(lines[3])[3..],
        ["4.44 MiB", "max_num_seqs", "4.44 MiB"]
    );
    assert_eq!(at_one.max_num_seqs(), 1);
    let at_256 = Table::new(256).types(&[MimoAudio::KV_DECLS]);
    assert_eq!(at_256.max_num_seqs(), 256, "the value given, not a default");
}

#[test]
fn instance_rows_and_after_load_rows() {
    let (retained, pool) = (qwen3_retained(), mimo_pool());
    let collected = [("talker.decoder", &retained), ("", &pool)];
    let table = Table::new(8).rows(collected).types(&[MingTalker::KV_DECLS]);
    assert_eq!(
        table.to_markdown(),
        "\
| Model                   | Cache                                        | Bounded by                                 |          Per row | Rows                                                         | Peak @ max_num_seqs=8 |
| ----------------------- | -------------------------------------------- | ------------------------------------------ | ---------------: | ------------------------------------------------------------ | --------------------: |
| talker.decoder.retained | sliding DynamicCache (only when async_chunk) | 71 (sliding_window(72) - 1)                |         4.44 MiB | max_num_seqs                                                 |             35.50 MiB |
| graph_pool              | captured DynamicCache                        | 11 (group_size(4) + max(delay_pattern)(7)) |       704.00 KiB | fixed 261 (sum of captured buckets (1,2,4,6,8,16,32,64,128)) |            179.44 MiB |
| MingTalker.talker_cache | StaticCache                                  | 2048 (hardcoded max_cache_len)             | known after load | fixed 1 (calls are serialized)                               |      known after load |
"
    );
    assert_eq!(KNOWN_AFTER_LOAD, "known after load");
}

#[test]
fn conditions_and_owned_labels() {
    let encoder = KvSpec::attention(
        "encoder",
        "EncoderDecoderCache",
        Geometry::new(24, 16, 64, DType::BF16),
        Positions::bounded(1500, "embed_positions rows"),
        Scope::Session,
        Rows::fixed(1, "one duplex session"),
    )
    .only_when("duplex")
    .assumes("duplex_max_sessions=1 means duplex on");
    let label = String::from("minicpmo");
    let table = Table::new(256).rows([(label, &encoder)]);
    assert_eq!(
        table.to_markdown(),
        "\
| Model            | Cache                                                                                 | Bounded by                  |    Per row | Rows                         | Peak @ max_num_seqs=256 |
| ---------------- | ------------------------------------------------------------------------------------- | --------------------------- | ---------: | ---------------------------- | ----------------------: |
| minicpmo.encoder | EncoderDecoderCache (only when duplex; assumes duplex_max_sessions=1 means duplex on) | 1500 (embed_positions rows) | 140.62 MiB | fixed 1 (one duplex session) |              140.62 MiB |
"
    );
}

#[test]
fn pipes_and_line_breaks_never_break_a_row() {
    let mut spec = qwen3_retained();
    spec.name = "a|b".into();
    spec.cache = "two\nlines\r\nand\rmore".into();
    if let Layout::Attention { positions, .. } = &mut spec.layout {
        *positions = Positions::bounded(71, "min(window | limit)");
    }
    spec.rows = Rows::Fixed {
        count: 2,
        because: "k|v\n".into(),
    };
    let markdown = Table::new(1).rows([("m", &spec)]).to_markdown();
    let row = markdown.lines().nth(2).unwrap();
    assert_eq!(markdown.lines().count(), 3, "{markdown}");
    assert_eq!(
        row,
        "| m.a\\|b | two<br>lines<br>and<br>more (only when async_chunk) | 71 (min(window \\| limit)) | 4.44 MiB | fixed 2 (k\\|v<br>) |              8.88 MiB |"
    );
    // Every unescaped pipe is a column border: 7 for 6 columns.
    let borders = row
        .match_indices('|')
        .filter(|(i, _)| !row[..*i].ends_with('\\'))
        .count();
    assert_eq!(borders, 7);
}

#[test]
fn overflow_renders_a_marker_and_never_panics() {
    let mut huge_row = qwen3_retained();
    set_positions(&mut huge_row, u64::MAX);
    let mut huge_peak = qwen3_retained();
    huge_peak.name = "wide".into();
    set_positions(&mut huge_peak, 1 << 40);
    let table = Table::new(u64::MAX).rows([("x", &huge_row), ("y", &huge_peak)]);
    let markdown = table.to_markdown();
    let lines: Vec<&str> = markdown.lines().collect();
    assert_eq!(cells(lines[2])[3], OVERFLOW);
    assert_eq!(cells(lines[2])[5], OVERFLOW);
    // 64 KiB a position x 2^40 positions = 2^56 bytes fits in u64; times
    // u64::MAX rows does not.
    assert_eq!(cells(lines[3])[3], "67108864.00 GiB");
    assert_eq!(cells(lines[3])[5], OVERFLOW);
    assert!(table.to_text().contains(OVERFLOW));
}

#[test]
fn text_rendering_is_aligned_without_borders() {
    let mut spec = qwen3_retained();
    spec.note = Some("ignored".into());
    spec.only_when = Some("async\nchunk".into());
    let text = Table::new(256)
        .types(&[MimoAudio::KV_DECLS])
        .rows([("dec", &spec)])
        .to_text();
    let widths: Vec<usize> = text.lines().map(|l| l.chars().count()).collect();
    assert_eq!(
        widths, [widths[0]; 3],
        "right-aligned sizes end every line together"
    );
    assert_eq!(
        text,
        "\
Model                 Cache                                         Bounded by                                     Per row  Rows                                                          Peak @ max_num_seqs=256
MimoAudio.graph_pool  captured DynamicCache                         11 (group_size(4) + max(delay_pattern)(7))  704.00 KiB  fixed 261 (sum of captured buckets (1,2,4,6,8,16,32,64,128))               179.44 MiB
dec.retained          sliding DynamicCache (only when async chunk)  71 (sliding_window(72) - 1)                   4.44 MiB  max_num_seqs                                                                 1.11 GiB
"
    );
}

#[test]
fn an_empty_table_is_just_its_header() {
    assert_eq!(
        Table::new(4).types(&[]).to_markdown(),
        "\
| Model | Cache | Bounded by | Per row | Rows | Peak @ max_num_seqs=4 |
| ----- | ----- | ---------- | ------: | ---- | --------------------: |
"
    );
}

#[test]
fn after_load_rows_keep_their_condition() {
    #[derive(ModelLocalKv)]
    #[kv(
        name = "encoder",
        cache = "EncoderDecoderCache",
        geometry = self.geometry,
        positions = bounded(self.frames, because = "embed_positions rows"),
        scope = session,
        rows = max_num_seqs,
        only_when = "duplex",
        assumes = "duplex is on",
    )]
    struct Duplex {
        geometry: Geometry,
        frames: u64,
        duplex: bool,
    }
    let markdown = Table::new(2).types(&[Duplex::KV_DECLS]).to_markdown();
    let row = cells(markdown.lines().nth(2).unwrap());
    assert_eq!(
        row,
        [
            "Duplex.encoder",
            "EncoderDecoderCache (only when duplex; assumes duplex is on)",
            "known after load (embed_positions rows)",
            KNOWN_AFTER_LOAD,
            "max_num_seqs",
            KNOWN_AFTER_LOAD,
        ]
    );
}
