//! A cache declared per layer, as candle models keep it (each layer's cache
//! in that layer's attention): the report and the table show identical
//! declarations of sibling owners as one line (#25 item 8), figures
//! unchanged.
//!
//! Qwen2-7B, by hand: 28 layers, 4 KV heads, head_dim 128 (3584 / 28), bf16.
//! One layer's cache: 1 x 4 x (128 + 128) x 2 B = 2,048 B per position, x
//! 4,096 positions = 8,388,608 B (8 MiB) per row; at max_num_seqs=2, 16 MiB.
//! 28 of them: 224 MiB per row, 448 MiB (469,762,048 B) at peak.

use kv_core::{collect, ModelLocalKv, Table};

#[derive(ModelLocalKv)]
#[kv(
    name = "kv_cache",
    cache = "concat (Tensor, Tensor)",
    layers = 1, kv_heads = self.kv_heads, head_dim = 128, dtype = bf16,
    positions = bounded(4096, because = "max_model_len 4096"),
    scope = request,
    rows = max_num_seqs,
)]
struct Attention {
    kv_heads: u32,
}

#[derive(ModelLocalKv)]
struct DecoderLayer {
    #[kv(child)]
    self_attn: Attention,
}

#[derive(ModelLocalKv)]
struct Model {
    #[kv(child)]
    layers: Vec<DecoderLayer>,
}

#[derive(ModelLocalKv)]
struct Qwen2 {
    #[kv(child)]
    model: Model,
}

/// 28 layers, each with `kv_heads(layer)` KV heads.
fn qwen2(kv_heads: impl Fn(usize) -> u32) -> Qwen2 {
    Qwen2 {
        model: Model {
            layers: (0..28)
                .map(|layer| DecoderLayer {
                    self_attn: Attention {
                        kv_heads: kv_heads(layer),
                    },
                })
                .collect(),
        },
    }
}

#[test]
fn twenty_eight_identical_layers_are_one_report_line_with_the_same_total() {
    let collection = collect(&qwen2(|_| 4));
    assert_eq!(collection.entries().len(), 28);
    assert_eq!(collection.totals(2).unwrap().total, 469_762_048);
    assert_eq!(
        collection.report(2).to_string(),
        "Model-local KV (outside the paged manager): 448.00 MiB across 28 declaration(s) at max_num_seqs=2\n\
         \x20 resident (scope=model, already charged by profiling; not subtracted): 0 B; allocated after profiling: 448.00 MiB\n\
         \x20 model.layers.0..=27.self_attn.kv_cache: 28 x 16.00 MiB = 448.00 MiB (2 rows from max_num_seqs x 8.00 MiB/row, scope=request, 4096 positions from max_model_len 4096)"
    );
    let groups = collection.grouped();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].count, 28);
    assert_eq!(groups[0].path, "model.layers.0..=27.self_attn");
    assert_eq!(groups[0].bytes_per_row(), Ok(234_881_024));
    assert_eq!(groups[0].peak_bytes(2), Ok(469_762_048));
}

#[test]
fn a_layer_that_differs_splits_the_line_where_it_stands() {
    // Layer 5 keeps 8 heads: 2 x 8 MiB = 16 MiB per row, 32 MiB at 2 rows.
    let collection = collect(&qwen2(|layer| if layer == 5 { 8 } else { 4 }));
    let report = collection.report(2).to_string();
    let lines: Vec<&str> = report.lines().skip(2).collect();
    assert_eq!(
        lines,
        [
            "  model.layers.0..=4.self_attn.kv_cache: 5 x 16.00 MiB = 80.00 MiB (2 rows from max_num_seqs x 8.00 MiB/row, scope=request, 4096 positions from max_model_len 4096)",
            "  model.layers.5.self_attn.kv_cache: 32.00 MiB (2 rows from max_num_seqs x 16.00 MiB/row, scope=request, 4096 positions from max_model_len 4096)",
            "  model.layers.6..=27.self_attn.kv_cache: 22 x 16.00 MiB = 352.00 MiB (2 rows from max_num_seqs x 8.00 MiB/row, scope=request, 4096 positions from max_model_len 4096)",
        ]
    );
    // 27 x 16 MiB + 32 MiB = 464 MiB, as before grouping.
    assert_eq!(collection.totals(2).unwrap().total, 464 * 1_048_576);
}

#[test]
fn the_table_shows_the_group_as_one_row_live_and_exported() {
    let collection = collect(&qwen2(|_| 4));
    let live = Table::new(2).collection("Qwen2-7B", &collection);
    let markdown = live.to_markdown();
    let rows: Vec<&str> = markdown.lines().skip(2).collect();
    assert_eq!(
        rows,
        [
            "| Qwen2-7B: model.layers.0..=27.self_attn.kv_cache | concat (Tensor, Tensor) \
          | 4096 (max_model_len 4096) | 224.00 MiB (28 x 8.00 MiB) | max_num_seqs \
          | 448.00 MiB (28 x 16.00 MiB) |"
        ]
    );
    let exported = Table::new(2).report(&collection.export(2));
    assert_eq!(
        exported.to_markdown(),
        Table::new(2).collection("", &collection).to_markdown()
    );
    // Table::rows takes plain pairs and merges nothing: 28 rows.
    let plain = Table::new(2).rows(
        collection
            .entries()
            .iter()
            .map(|e| (e.path.as_str(), &e.spec)),
    );
    assert_eq!(plain.to_markdown().lines().count(), 2 + 28);
}

/// An owner of another type with an identical declaration.
#[derive(ModelLocalKv)]
#[kv(
    name = "kv_cache",
    cache = "concat (Tensor, Tensor)",
    layers = 1, kv_heads = 4, head_dim = 128, dtype = bf16,
    positions = bounded(4096, because = "max_model_len 4096"),
    scope = request,
    rows = max_num_seqs,
)]
struct OtherAttention;

/// `layers.0` and `layers.2` are `Attention`s, `layers.1` an `OtherAttention`,
/// `layers.3` an `Attention` again.
struct Mixed {
    attention: [Attention; 3],
    other: OtherAttention,
}

impl ModelLocalKv for Mixed {
    fn kv_declare(&self, _: &mut Vec<kv_core::KvSpec>) -> Result<(), kv_core::KvError> {
        Ok(())
    }
    fn kv_visit_children(&self, visitor: &mut dyn kv_core::declare::ChildVisitor) {
        visitor.index(0, &self.attention[0]);
        visitor.index(1, &self.other);
        visitor.index(2, &self.attention[1]);
        visitor.index(3, &self.attention[2]);
    }
}

#[test]
fn only_the_same_owner_type_at_consecutive_indices_is_grouped() {
    let mixed = Mixed {
        attention: [0, 1, 2].map(|_| Attention { kv_heads: 4 }),
        other: OtherAttention,
    };
    let collection = collect(&mixed);
    // The four specs are equal; the owner types are not.
    assert!(collection
        .entries()
        .iter()
        .all(|e| e.spec == collection.entries()[0].spec));
    let names: Vec<String> = collection.grouped().iter().map(|g| g.full_name()).collect();
    assert_eq!(names, ["0.kv_cache", "1.kv_cache", "2..=3.kv_cache"]);
}
