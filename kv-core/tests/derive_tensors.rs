//! Tensors a model keeps beside its caches (#34 item 5): candle llama's
//! rotary cos/sin tables and its memo of causal masks, one per distinct
//! prompt length and never evicted. A layout of their own: no positions,
//! their shapes in the report and the table, a memo bounded with a reason,
//! whole on every rank.
//!
//! Figures by hand. Rotary tables: 2 tables x 64 positions x 8 (head_dim 16
//! / 2) x 4 B (f32) = 4,096 B. Masks for prompt lengths 2..=6, u8: 4 + 9 +
//! 16 + 25 + 36 = 90 B.

use kv_core::{collect, DType, KvError, ModelLocalKv, Parallel, Table, TensorPart, Tensors};

const ROPE: &[TensorPart] = &[
    TensorPart::new("cos", [64, 8, 1], DType::F32),
    TensorPart::new("sin", [64, 8, 1], DType::F32),
];

/// candle-transformers' llama `Cache`, as declared by its author.
#[derive(ModelLocalKv)]
#[kv(
    name = "rope",
    cache = "cos/sin tables",
    tensors = Tensors::new(ROPE),
    scope = model,
    rows = fixed(1, because = "one table for every layer and sequence"),
)]
#[kv(
    name = "masks",
    cache = "HashMap<usize, Tensor> memo",
    tensors = self.masks(),
    scope = model,
    rows = fixed(1, because = "one memo for the model"),
)]
struct Cache {
    max_prompt: u64,
}

impl Cache {
    fn masks(&self) -> Result<Tensors, String> {
        if self.max_prompt < 2 {
            return Err(format!("max_prompt {} leaves no mask", self.max_prompt));
        }
        Ok(Tensors::from_parts(vec![TensorPart::square_per_length(
            "mask",
            2,
            self.max_prompt,
            DType::U8,
            "one mask per distinct prompt length above 1, never evicted",
        )]))
    }
}

#[test]
fn tables_and_a_memo_are_declared_with_their_shapes() {
    // Known at compile time: the rotary tables.
    let rope = &<Cache as kv_core::declare::DeclaredKv>::KV_DECLS.static_specs[0];
    assert_eq!(rope.bytes_per_row(), Ok(4_096));
    assert_eq!(rope.layout.kind(), "tensors");
    assert_eq!(rope.positions(), None);

    let collection = collect(&Cache { max_prompt: 6 });
    assert!(
        collection.skipped().is_empty(),
        "{:?}",
        collection.skipped()
    );
    let rows: Vec<u64> = collection
        .entries()
        .iter()
        .map(|e| e.spec.bytes_per_row().unwrap())
        .collect();
    assert_eq!(rows, [4_096, 90]);
    // Fixed rows: max_num_seqs does not multiply them.
    assert_eq!(collection.totals(256).unwrap().total, 4_186);
    assert_eq!(
        collection.report(256).to_string(),
        "Model-local KV (outside the paged manager): 4.09 KiB across 2 declaration(s) at max_num_seqs=256\n\
         \x20 resident (scope=model, already charged by profiling; not subtracted): 4.09 KiB; allocated after profiling: 0 B\n\
         \x20 rope: 4.00 KiB (1 row from fixed(1; one table for every layer and sequence) x 4.00 KiB/row, scope=model, tensors: cos [64 x 8] f32, sin [64 x 8] f32)\n\
         \x20 masks: 90 B (1 row from fixed(1; one memo for the model) x 90 B/row, scope=model, tensors: mask: one [t x t] u8 per length t in 2..=6 (one mask per distinct prompt length above 1, never evicted))"
    );
}

#[test]
fn the_table_bounds_tensors_by_their_shapes_before_and_after_load() {
    let collection = collect(&Cache { max_prompt: 6 });
    let markdown = Table::new(1).collection("Llama", &collection).to_markdown();
    let cells =
        |row: &str| -> Vec<String> { row.split('|').map(|cell| cell.trim().to_owned()).collect() };
    let rows: Vec<Vec<String>> = markdown.lines().skip(2).map(cells).collect();
    assert_eq!(
        rows[0][1..4],
        [
            "Llama.rope",
            "cos/sin tables",
            "cos [64 x 8] f32, sin [64 x 8] f32"
        ]
    );
    assert_eq!(
        rows[1][3],
        "mask: one [t x t] u8 per length t in 2..=6 (one mask per distinct prompt length above \
         1, never evicted)"
    );
    // Per type, without an instance: the memo's shapes come after load.
    let types = Table::new(1)
        .types(&[<Cache as kv_core::declare::DeclaredKv>::KV_DECLS])
        .to_markdown();
    assert!(
        types.contains("tensors, no positions (shapes known after load)"),
        "{types}"
    );
    // The report exported and read back makes the same table.
    let exported = collection.export(1);
    let masks = &exported.declarations[1];
    assert_eq!(masks.kind, "tensors");
    let parts = masks.tensor_parts.as_ref().unwrap();
    assert_eq!(parts[0].lengths, Some([2, 6]));
    assert_eq!(parts[0].bytes, Some(90));
    assert_eq!(parts[0].shape, None);
    assert_eq!(
        exported.declarations[0].tensor_parts.as_ref().unwrap()[1].shape,
        Some(vec![64, 8, 1])
    );
    let json = serde_json::to_string(&exported).unwrap();
    let read: kv_core::export::ExportedReport = serde_json::from_str(&json).unwrap();
    assert_eq!(read, exported);
    assert_eq!(
        Table::new(1).report(&read).to_markdown(),
        Table::new(1).collection("", &collection).to_markdown()
    );
}

#[test]
fn a_helper_that_fails_or_a_memo_without_a_reason_skips_that_declaration_alone() {
    let collection = collect(&Cache { max_prompt: 1 });
    assert_eq!(collection.entries().len(), 1);
    assert_eq!(
        collection.skipped()[0].error.to_string(),
        "kv: `Cache.masks`: `tensors` could not be read: max_prompt 1 leaves no mask"
    );

    /// A memo whose reason is blank, and one whose range is empty.
    #[derive(ModelLocalKv)]
    #[kv(name = "blank", cache = "memo", tensors = self.memo(" "), scope = model,
         rows = fixed(1, because = "one memo"))]
    #[kv(name = "empty", cache = "memo", tensors = self.memo_from(9), scope = model,
         rows = fixed(1, because = "one memo"))]
    struct Memos;
    impl Memos {
        fn memo(&self, because: &'static str) -> Tensors {
            Tensors::from_parts(vec![TensorPart::square_per_length(
                "m",
                2,
                8,
                DType::U8,
                because,
            )])
        }
        fn memo_from(&self, from: u64) -> Tensors {
            Tensors::from_parts(vec![TensorPart::square_per_length(
                "m",
                from,
                8,
                DType::U8,
                "why",
            )])
        }
    }
    let errors: Vec<KvError> = collect(&Memos)
        .skipped()
        .iter()
        .map(|s| s.error.clone())
        .collect();
    assert_eq!(
        errors,
        [
            KvError::InvalidValue {
                declaration: "Memos.blank".into(),
                field: "tensors",
                problem: "part `m` is a memo with a blank reason; say why its lengths stop where \
                          they do"
                    .into(),
            },
            KvError::InvalidValue {
                declaration: "Memos.empty".into(),
                field: "tensors",
                problem: "part `m` is a memo whose shortest length is above its longest".into(),
            },
        ]
    );
}

#[test]
fn every_rank_keeps_its_own_tensors() {
    let collection = collect(&Cache { max_prompt: 6 });
    for rank in Parallel::new(2, 2).unwrap().ranks() {
        let ranked = collection.for_rank(rank).unwrap();
        let rows: Vec<u64> = ranked
            .entries()
            .iter()
            .map(|e| e.spec.bytes_per_row().unwrap())
            .collect();
        assert_eq!(rows, [4_096, 90], "{rank:?}");
        assert_eq!(
            ranked.entries()[0].share.as_deref(),
            Some("model-local tensors: every rank keeps its own")
        );
    }
}
