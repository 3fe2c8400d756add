//! Values read after load, through the derive: a `dtype` that is a `Result`
//! (#25 item 4), and a count read as zero (#25 item 6). Each failing or
//! empty declaration is judged alone: its siblings are collected.
//!
//! Figures by hand. `full`: 4 layers x 2 heads x (8 + 8) dims x 2 B (bf16)
//! = 256 B per position, x 64 positions = 16,384 B per row. `sliding`: 6
//! layers x 2 x 16 x 2 B = 384 B per position, x 16 positions = 6,144 B per
//! row.

use kv_core::collection::EmptyDeclaration;
use kv_core::{collect, log_model_local_kv, DType, Geometry, KvError, ModelLocalKv};

struct Config {
    sliding_layers: u32,
    full_layers: u32,
}

/// A hybrid decoder: a sliding group and a full group, each read from the
/// config; the full group's dtype is the loader's, converted by a fallible
/// helper (as `kv_candle::kv_dtype` converts candle's).
#[derive(ModelLocalKv)]
#[kv(
    name = "sliding",
    cache = "sliding DynamicCache",
    layers = self.config.sliding_layers, kv_heads = 2, head_dim = 8, dtype = bf16,
    positions = bounded(16, because = "sliding_window(16)"),
    scope = request,
    rows = max_num_seqs,
)]
#[kv(
    name = "full",
    cache = "DynamicCache",
    layers = self.config.full_layers, kv_heads = 2, head_dim = 8,
    dtype = kv_dtype(self.loaded),
    positions = bounded(64, because = "max_model_len 64"),
    scope = request,
    rows = max_num_seqs,
)]
struct Hybrid {
    config: Config,
    loaded: &'static str,
}

/// A loader's dtype name to kv's, failing with an error that is no `KvError`.
fn kv_dtype(name: &str) -> Result<DType, String> {
    match name {
        "bf16" => Ok(DType::BF16),
        other => Err(format!("loader dtype {other} has no kv dtype")),
    }
}

fn hybrid(sliding_layers: u32, full_layers: u32, loaded: &'static str) -> Hybrid {
    Hybrid {
        config: Config {
            sliding_layers,
            full_layers,
        },
        loaded,
    }
}

#[test]
fn a_dtype_result_that_is_ok_is_the_dtype() {
    let collection = collect(&hybrid(6, 4, "bf16"));
    assert!(
        collection.skipped().is_empty(),
        "{:?}",
        collection.skipped()
    );
    let full = &collection.entries()[1];
    assert_eq!(full.spec.name, "full");
    assert_eq!(
        full.spec.geometry().map(|g| g.storage),
        Some(kv_core::Storage::Dense(DType::BF16))
    );
    assert_eq!(full.spec.bytes_per_row(), Ok(16_384));
    // 3 rows x (6,144 + 16,384) B
    assert_eq!(collection.totals(3).unwrap().total, 3 * 22_528);
}

#[test]
fn a_dtype_result_that_fails_skips_that_declaration_alone_with_its_error() {
    let collection = collect(&hybrid(6, 4, "u32"));
    let names: Vec<&str> = collection
        .entries()
        .iter()
        .map(|e| e.spec.name.as_ref())
        .collect();
    assert_eq!(names, ["sliding"]);
    let skipped = collection.skipped();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].declaration.as_deref(), Some("full"));
    assert_eq!(skipped[0].what(), "full");
    assert_eq!(
        skipped[0].error,
        KvError::InvalidValue {
            declaration: "Hybrid.full".into(),
            field: "dtype",
            problem: "could not be read: loader dtype u32 has no kv dtype".into(),
        }
    );
    assert_eq!(
        collection.report(1).to_string(),
        "Model-local KV (outside the paged manager): 6.00 KiB across 1 declaration(s) at max_num_seqs=1\n\
         \x20 resident (scope=model, already charged by profiling; not subtracted): 0 B; allocated after profiling: 6.00 KiB\n\
         \x20 sliding: 6.00 KiB (1 row from max_num_seqs x 6.00 KiB/row, scope=request, 16 positions from sliding_window(16))\n\
         \x20 skipped `full` (after_load_values::Hybrid): kv: `Hybrid.full`: `dtype` could not be read: loader dtype u32 has no kv dtype"
    );
}

#[test]
fn called_directly_a_failing_dtype_is_the_error_of_kv_declare() {
    let mut declared = Vec::new();
    let err = hybrid(6, 4, "u32").kv_declare(&mut declared).unwrap_err();
    assert_eq!(
        err.to_string(),
        "kv: `Hybrid.full`: `dtype` could not be read: loader dtype u32 has no kv dtype"
    );
}

/// A `KvError` from a dtype helper is kept as it is, not wrapped.
#[derive(ModelLocalKv)]
#[kv(
    name = "cache",
    cache = "KvCache",
    layers = 2, kv_heads = 2, head_dim = 8,
    dtype = self.dtype.clone(),
    positions = bounded(4, because = "test"),
    scope = request,
    rows = max_num_seqs,
)]
struct FromConfig {
    dtype: Result<DType, KvError>,
}

#[test]
fn a_dtype_kv_error_is_kept_whole() {
    let missing = KvError::Config {
        what: "dtype",
        problem: "none of `torch_dtype`, `dtype` is set".into(),
    };
    let collection = collect(&FromConfig {
        dtype: Err(missing.clone()),
    });
    assert_eq!(collection.skipped()[0].error, missing);
    let ok = collect(&FromConfig {
        dtype: Ok(DType::F32),
    });
    // 2 layers x 2 heads x 16 dims x 4 B x 4 positions
    assert_eq!(ok.entries()[0].spec.bytes_per_row(), Ok(1_024));
}

#[test]
fn a_group_with_zero_layers_yields_nothing_and_its_sibling_is_kept() {
    let collection = log_model_local_kv(&hybrid(0, 4, "bf16"), 3);
    assert!(
        collection.skipped().is_empty(),
        "{:?}",
        collection.skipped()
    );
    assert_eq!(collection.entries().len(), 1);
    assert_eq!(collection.entries()[0].spec.name, "full");
    // 3 rows x 16,384 B: the full group alone, not 0.
    assert_eq!(collection.totals(3).unwrap().total, 49_152);
    let empty = collection.empty_declarations();
    assert_eq!(empty.len(), 1);
    assert_eq!(empty[0].full_name(), "sliding");
    assert_eq!(empty[0].declaration(), "Hybrid.sliding");
    assert_eq!(empty[0].field, "layers");
    assert_eq!(empty[0].from, Some("self.config.sliding_layers"));
    assert_eq!(
        empty[0].reason(),
        "0 layers from `self.config.sliding_layers`"
    );
    assert_eq!(
        collection.report(3).to_string(),
        "Model-local KV (outside the paged manager): 48.00 KiB across 1 declaration(s) at max_num_seqs=3\n\
         \x20 resident (scope=model, already charged by profiling; not subtracted): 0 B; allocated after profiling: 48.00 KiB\n\
         \x20 full: 48.00 KiB (3 rows from max_num_seqs x 16.00 KiB/row, scope=request, 64 positions from max_model_len 64)\n\
         \x20 sliding: declares nothing: 0 layers from `self.config.sliding_layers` (Hybrid.sliding)"
    );
}

#[test]
fn called_directly_a_zero_declaration_is_left_out_and_the_rest_declared() {
    let mut declared = Vec::new();
    hybrid(0, 4, "bf16").kv_declare(&mut declared).unwrap();
    assert_eq!(declared.len(), 1);
    assert_eq!(declared[0].name, "full");
}

#[test]
fn both_groups_empty_is_two_lines_and_no_bytes() {
    let collection = collect(&hybrid(0, 0, "bf16"));
    assert!(collection.entries().is_empty());
    let reasons: Vec<String> = collection
        .empty_declarations()
        .iter()
        .map(|e| format!("{}: {}", e.full_name(), e.reason()))
        .collect();
    assert_eq!(
        reasons,
        [
            "sliding: 0 layers from `self.config.sliding_layers`",
            "full: 0 layers from `self.config.full_layers`",
        ]
    );
    assert_eq!(collection.totals(256).unwrap().total, 0);
}

/// A zero inside a whole geometry, in fixed rows, and in positions.
#[derive(ModelLocalKv)]
#[kv(
    name = "whole",
    cache = "StaticCache",
    geometry = self.geometry(),
    positions = bounded(8, because = "test"),
    scope = invocation,
    rows = fixed(1, because = "one call at a time"),
)]
#[kv(
    name = "batch",
    cache = "KvCache",
    layers = 1, kv_heads = 1, head_dim = 4, dtype = u8,
    positions = bounded(8, because = "test"),
    scope = request,
    rows = fixed(self.batch, because = "batch of the cache tensors"),
)]
#[kv(
    name = "window",
    cache = "RotatingKvCache",
    layers = 1, kv_heads = 1, head_dim = 4, dtype = u8,
    positions = window(self.window),
    scope = request,
    rows = max_num_seqs,
)]
struct Zeros {
    layers: u64,
    batch: usize,
    window: u64,
}

impl Zeros {
    fn geometry(&self) -> Result<Geometry, KvError> {
        Ok(Geometry::new(self.layers, 1, 4, DType::U8))
    }
}

#[test]
fn each_zero_names_its_count_and_the_expression_it_came_from() {
    let collection = collect(&Zeros {
        layers: 0,
        batch: 0,
        window: 0,
    });
    assert!(collection.entries().is_empty());
    assert!(
        collection.skipped().is_empty(),
        "{:?}",
        collection.skipped()
    );
    let reasons: Vec<String> = collection
        .empty_declarations()
        .iter()
        .map(|e| format!("{}: {}", e.declaration(), e.reason()))
        .collect();
    assert_eq!(
        reasons,
        [
            "Zeros.whole: 0 layers from `self.geometry()`",
            "Zeros.batch: 0 rows from `self.batch`",
            "Zeros.window: 0 positions from `self.window`",
        ]
    );
    // Non-zero, all three are held: 1 layer x 1 head x (4 + 4) x 1 B = 8 B per
    // position. whole: 8 positions x 1 row = 64 B; batch: 64 B x 2 rows = 128 B;
    // window: 8 positions (window(8) keeps 8) x 64 B per row x 2 rows = 128 B.
    let held = collect(&Zeros {
        layers: 1,
        batch: 2,
        window: 8,
    });
    assert!(held.empty_declarations().is_empty());
    assert_eq!(held.totals(2).unwrap().total, 64 + 128 + 128);
}

/// Per layer, under a path: the empty one keeps its path.
#[derive(ModelLocalKv)]
struct Model {
    #[kv(child)]
    layers: Vec<Hybrid>,
}

#[test]
fn an_empty_declaration_keeps_its_path_and_a_negative_count_skips_one_declaration() {
    let collection = collect(&Model {
        layers: vec![hybrid(0, 4, "bf16"), hybrid(6, 4, "u32")],
    });
    let held: Vec<String> = collection.entries().iter().map(|e| e.full_name()).collect();
    assert_eq!(held, ["layers.0.full", "layers.1.sliding"]);
    assert_eq!(
        collection.empty_declarations()[0].full_name(),
        "layers.0.sliding"
    );
    assert_eq!(collection.skipped()[0].what(), "layers.1.full");
    assert_eq!(collection.skipped()[0].path, "layers.1");
}

#[derive(ModelLocalKv)]
#[kv(
    name = "signed",
    cache = "KvCache",
    layers = self.layers, kv_heads = 1, head_dim = 4, dtype = u8,
    positions = bounded(8, because = "test"),
    scope = request,
    rows = max_num_seqs,
)]
#[kv(
    name = "kept",
    cache = "KvCache",
    layers = 1, kv_heads = 1, head_dim = 4, dtype = u8,
    positions = bounded(8, because = "test"),
    scope = request,
    rows = max_num_seqs,
)]
struct Signed {
    layers: i64,
}

#[test]
fn a_negative_count_skips_its_declaration_and_keeps_the_static_sibling() {
    let collection = collect(&Signed { layers: -2 });
    assert_eq!(collection.entries().len(), 1);
    assert_eq!(collection.entries()[0].spec.name, "kept");
    assert_eq!(
        collection.skipped()[0].error.to_string(),
        "kv: `Signed.signed`: `layers` is -2; a count cannot be negative"
    );
}

/// Counts read by a fallible config lookup, as `Result`s.
#[derive(ModelLocalKv)]
#[kv(
    name = "looked_up",
    cache = "KvCache",
    layers = self.lookup("num_hidden_layers"), kv_heads = 1, head_dim = 4, dtype = u8,
    positions = bounded(self.lookup("max_position_embeddings"), because = "max_position_embeddings"),
    scope = request,
    rows = max_num_seqs,
)]
struct LookedUp {
    config: Vec<(&'static str, i64)>,
}

impl LookedUp {
    fn lookup(&self, key: &str) -> Result<i64, String> {
        self.config
            .iter()
            .find(|(name, _)| *name == key)
            .map(|(_, value)| *value)
            .ok_or_else(|| format!("config.json has no `{key}`"))
    }
}

#[test]
fn a_count_result_is_its_count_or_its_error() {
    let both = LookedUp {
        config: vec![("num_hidden_layers", 3), ("max_position_embeddings", 8)],
    };
    // 3 layers x 1 head x (4 + 4) x 1 B x 8 positions = 192 B per row.
    assert_eq!(collect(&both).totals(2).unwrap().total, 2 * 192);
    let missing = collect(&LookedUp {
        config: vec![("num_hidden_layers", 3)],
    });
    assert!(missing.entries().is_empty());
    assert_eq!(
        missing.skipped()[0].error.to_string(),
        "kv: `LookedUp.looked_up`: `positions` could not be read: config.json has no \
         `max_position_embeddings`"
    );
    // An Ok count is judged as the count: negative skips, zero is empty.
    let negative = collect(&LookedUp {
        config: vec![("num_hidden_layers", -1), ("max_position_embeddings", 8)],
    });
    assert_eq!(
        negative.skipped()[0].error.to_string(),
        "kv: `LookedUp.looked_up`: `layers` is -1; a count cannot be negative"
    );
    let zero = collect(&LookedUp {
        config: vec![("num_hidden_layers", 0), ("max_position_embeddings", 8)],
    });
    assert!(zero.skipped().is_empty());
    assert_eq!(zero.empty_declarations().len(), 1);
}

/// Layer 0 reads no sliding layers; layer 1's dtype fails.
fn two_layers() -> Model {
    Model {
        layers: vec![hybrid(0, 4, "bf16"), hybrid(6, 4, "u32")],
    }
}

#[cfg(feature = "json")]
#[test]
fn empty_and_skipped_declarations_are_exported_and_read_back() {
    let collection = collect(&two_layers());
    let exported = collection.export(1);
    let json = serde_json::to_value(&exported).unwrap();
    let empty = &json["empty_declarations"][0];
    assert_eq!(empty["field"], "layers");
    assert_eq!(empty["from"], "self.config.sliding_layers");
    assert_eq!(
        empty["reason"],
        "0 layers from `self.config.sliding_layers`"
    );
    assert_eq!(empty["declaration"]["full_name"], "layers.0.sliding");
    assert_eq!(empty["declaration"]["layers"], 0);
    assert_eq!(empty["declaration"]["peak_bytes"], 0);
    let skipped = &json["skipped"][0];
    assert_eq!(skipped["path"], "layers.1");
    assert_eq!(skipped["declaration"], "full");
    assert_eq!(exported.skipped[0].what(), "layers.1.full");
    // layers.0.full (16,384 B) + layers.1.sliding (6,144 B) at 1 row.
    assert_eq!(json["total_bytes"], 22_528);

    let read: kv_core::export::ExportedReport =
        serde_json::from_str(&serde_json::to_string(&exported).unwrap()).unwrap();
    assert_eq!(read, exported);
}

#[cfg(feature = "json")]
#[test]
fn a_report_written_before_empty_declarations_reads_as_having_none() {
    let mut json = collect(&two_layers()).to_json(1);
    let object = json.as_object_mut().unwrap();
    object.remove("empty_declarations");
    object.remove("poisoned");
    object["skipped"][0]
        .as_object_mut()
        .unwrap()
        .remove("declaration");
    let read: kv_core::export::ExportedReport = serde_json::from_value(json).unwrap();
    assert!(read.empty_declarations.is_empty());
    assert!(read.poisoned.is_empty());
    assert_eq!(read.skipped[0].declaration, None);
    assert_eq!(read.skipped[0].what(), "layers.1");
}

#[test]
fn the_table_lists_an_empty_declaration_with_why() {
    let collection = collect(&two_layers());
    let table = kv_core::Table::new(1).collection("Hybrid", &collection);
    let markdown = table.to_markdown();
    let rows: Vec<&str> = markdown.lines().skip(2).collect();
    assert_eq!(rows.len(), 3, "{markdown}");
    assert!(
        rows[2].starts_with(
            "| Hybrid: layers.0.sliding | sliding DynamicCache \
             | declares nothing: 0 layers from `self.config.sliding_layers` |       0 B | max_num_seqs |"
        ),
        "{markdown}"
    );
    #[cfg(feature = "json")]
    assert_eq!(
        kv_core::Table::new(1)
            .report(&collection.export(1))
            .to_markdown(),
        kv_core::Table::new(1)
            .collection("", &collection)
            .to_markdown()
    );
}

/// An owner that fails as a whole, at the root and under a path.
struct Failing;

impl ModelLocalKv for Failing {
    fn kv_declare(&self, _: &mut Vec<kv_core::KvSpec>) -> Result<(), KvError> {
        Err(KvError::Config {
            what: "layers",
            problem: "missing".into(),
        })
    }
}

struct Holder(Failing);

impl ModelLocalKv for Holder {
    fn kv_declare(&self, _: &mut Vec<kv_core::KvSpec>) -> Result<(), KvError> {
        Ok(())
    }
    fn kv_visit_children(&self, visitor: &mut dyn kv_core::declare::ChildVisitor) {
        visitor.field("inner", &self.0);
    }
}

#[test]
fn a_whole_owner_skipped_is_named_by_its_path_or_root() {
    let root = collect(&Failing);
    assert_eq!(root.skipped()[0].declaration, None);
    assert_eq!(root.skipped()[0].what(), "<root>");
    let held = collect(&Holder(Failing));
    assert_eq!(held.skipped()[0].what(), "inner");
    #[cfg(feature = "json")]
    {
        assert_eq!(root.export(1).skipped[0].what(), "<root>");
        assert_eq!(held.export(1).skipped[0].what(), "inner");
    }
}

#[test]
fn a_rank_of_a_parallel_layout_keeps_the_empty_declarations() {
    let collection = collect(&hybrid(0, 4, "bf16"));
    let rank = collection
        .for_rank(kv_core::Parallel::new(2, 1).unwrap().at(1, 0).unwrap())
        .unwrap();
    assert_eq!(rank.empty_declarations(), collection.empty_declarations());
    // 2 of the full group's 2 KV heads per rank: 1 head, half the bytes.
    assert_eq!(rank.totals(1).unwrap().total, 16_384 / 2);
}

/// An MLA latent and a recurrent state, read after load whole.
#[derive(ModelLocalKv)]
#[kv(
    name = "latent",
    cache = "MLA latent",
    latent = self.latent,
    positions = bounded(8, because = "test"),
    scope = request,
    rows = max_num_seqs,
)]
#[kv(
    name = "state",
    cache = "MambaCache",
    state = self.state.clone(),
    scope = request,
    rows = max_num_seqs,
)]
struct Mixed {
    latent: kv_core::Latent,
    state: kv_core::RecurrentState,
}

fn mixed(latent: kv_core::Latent, state: kv_core::RecurrentState) -> Mixed {
    Mixed { latent, state }
}

fn mamba(layers: u64, storage: kv_core::Storage) -> kv_core::RecurrentState {
    let mut ssm = kv_core::StatePart::mamba_ssm(16, 4, DType::F32);
    ssm.storage = storage;
    kv_core::RecurrentState::from_parts(layers, vec![ssm])
}

const BROKEN: kv_core::Storage =
    kv_core::Storage::Blocks(kv_core::BlockFormat::new("broken", 0, 34));

#[test]
fn a_latent_or_state_with_zero_layers_declares_nothing() {
    let dense = kv_core::Storage::Dense(DType::F32);
    let collection = collect(&mixed(
        kv_core::Latent::new(0, 512, 64, DType::BF16),
        mamba(0, dense),
    ));
    assert!(
        collection.skipped().is_empty(),
        "{:?}",
        collection.skipped()
    );
    let reasons: Vec<String> = collection
        .empty_declarations()
        .iter()
        .map(EmptyDeclaration::reason)
        .collect();
    assert_eq!(
        reasons,
        [
            "0 layers from `self.latent`",
            "0 layers from `self.state.clone()`"
        ]
    );
    // Held: 2 layers x (512 + 64) x 2 B x 8 positions = 18,432 B; the state:
    // 2 layers x 16 x 4 x 4 B = 512 B.
    let held = collect(&mixed(
        kv_core::Latent::new(2, 512, 64, DType::BF16),
        mamba(2, dense),
    ));
    assert_eq!(held.totals(1).unwrap().total, 18_432 + 512);
}

#[test]
fn a_broken_block_format_in_a_latent_or_state_is_an_error_even_beside_a_zero() {
    let latent = kv_core::Latent::new(0, 512, 64, DType::BF16).with_storage(BROKEN);
    let with_rope = kv_core::Latent::new(0, 512, 64, DType::BF16).with_rope_storage(BROKEN);
    for (latent, state) in [(latent, mamba(0, BROKEN)), (with_rope, mamba(0, BROKEN))] {
        let collection = collect(&mixed(latent, state));
        assert!(collection.empty_declarations().is_empty());
        let skipped: Vec<String> = collection.skipped().iter().map(|s| s.what()).collect();
        assert_eq!(skipped, ["latent", "state"]);
    }
}

/// `geometry`, `latent` and `state` read after load take a `Result` whose
/// error is any type that displays itself, as `dtype` does (#34 item 8): a
/// candle `Result` or a `String` error works in each.
#[derive(ModelLocalKv)]
#[kv(
    name = "attention",
    cache = "KvCache",
    geometry = self.geometry(),
    positions = bounded(4, because = "test"),
    scope = request,
    rows = max_num_seqs,
)]
#[kv(
    name = "mla",
    cache = "MLA latent",
    latent = self.latent(),
    positions = bounded(4, because = "test"),
    scope = request,
    rows = max_num_seqs,
)]
#[kv(
    name = "ssm",
    cache = "Mamba state",
    state = self.state(),
    scope = request,
    rows = max_num_seqs,
)]
struct ReadByHelpers {
    /// What each helper returns: `Ok`, a `String` error, a custom error, a
    /// `KvError` or an `Overflow`.
    outcome: Outcome,
}

#[derive(Clone, Copy)]
enum Outcome {
    Ok,
    Text,
    Custom,
    Kv,
    Overflow,
}

/// An error of the model's own crate: it displays itself, and is no `KvError`.
#[derive(Debug)]
struct LoaderError(&'static str);

impl std::fmt::Display for LoaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "loader says {}", self.0)
    }
}

const SSM_PARTS: &[kv_core::StatePart] = &[kv_core::StatePart::new("ssm", [2, 4, 8], DType::F32)];

impl ReadByHelpers {
    fn geometry(&self) -> Result<Geometry, String> {
        match self.outcome {
            Outcome::Text => Err("no num_key_value_heads".into()),
            _ => Ok(Geometry::new(2, 2, 8, DType::BF16)),
        }
    }

    fn latent(&self) -> Result<kv_core::Latent, LoaderError> {
        match self.outcome {
            Outcome::Custom => Err(LoaderError("no kv_lora_rank")),
            _ => Ok(kv_core::Latent::new(2, 16, 8, DType::BF16)),
        }
    }

    fn state(&self) -> Result<kv_core::RecurrentState, KvError> {
        match self.outcome {
            Outcome::Kv => Err(KvError::InvalidValue {
                declaration: "Config.mamba".into(),
                field: "d_state",
                problem: "is 0".into(),
            }),
            Outcome::Overflow => Err(kv_core::Overflow {
                step: "state bytes",
            }
            .into()),
            _ => Ok(kv_core::RecurrentState::new(2, SSM_PARTS)),
        }
    }
}

/// The error each declaration was skipped with, by name.
fn skipped_errors(outcome: Outcome) -> Vec<(String, String)> {
    collect(&ReadByHelpers { outcome })
        .skipped()
        .iter()
        .map(|s| (s.what().to_string(), s.error.to_string()))
        .collect()
}

#[test]
fn geometry_latent_and_state_results_take_any_error_that_displays_itself() {
    let collection = collect(&ReadByHelpers {
        outcome: Outcome::Ok,
    });
    assert!(collection.skipped().is_empty());
    let rows: Vec<u64> = collection
        .entries()
        .iter()
        .map(|e| e.spec.bytes_per_row().unwrap())
        .collect();
    // attention: 2 layers x 2 heads x (8 + 8) x 2 B x 4 positions = 512 B;
    // latent: 2 layers x (16 + 8) x 2 B x 4 positions = 384 B;
    // state: 2 layers x 2 x 4 x 8 x 4 B = 512 B.
    assert_eq!(rows, [512, 384, 512]);

    assert_eq!(
        skipped_errors(Outcome::Text),
        [(
            "attention".to_string(),
            "kv: `ReadByHelpers.attention`: `geometry` could not be read: no num_key_value_heads"
                .to_string()
        )]
    );
    assert_eq!(
        skipped_errors(Outcome::Custom),
        [(
            "mla".to_string(),
            "kv: `ReadByHelpers.mla`: `latent` could not be read: loader says no kv_lora_rank"
                .to_string()
        )]
    );
}

#[test]
fn a_kv_error_or_an_overflow_from_a_helper_is_kept_as_it_is() {
    let mut declared = Vec::new();
    let err = ReadByHelpers {
        outcome: Outcome::Kv,
    }
    .kv_declare(&mut declared)
    .unwrap_err();
    assert_eq!(
        err,
        KvError::InvalidValue {
            declaration: "Config.mamba".into(),
            field: "d_state",
            problem: "is 0".into(),
        }
    );
    let err = ReadByHelpers {
        outcome: Outcome::Overflow,
    }
    .kv_declare(&mut Vec::new())
    .unwrap_err();
    assert_eq!(
        err,
        KvError::Overflow {
            declaration: "ReadByHelpers.ssm".into(),
            step: "state bytes",
        }
    );
}
