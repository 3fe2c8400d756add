//! The start-up report and totals: format, drivers, resident split, overflow,
//! logging, and a geometry read from a config after load.

mod collect_support;

use std::cell::RefCell;
use std::sync::Once;

use collect_support::*;
use kv_core::{
    collect, log_model_local_kv, DType, Geometry, KvError, KvSpec, ModelLocalKv, Rows, Scope,
};
use log::{Level, Log, Metadata, Record};

thread_local! {
    static CAPTURED: RefCell<Vec<(Level, String)>> = const { RefCell::new(Vec::new()) };
}

/// Records this thread's log lines, so parallel tests do not see each other's.
struct Capture;

impl Log for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &Record<'_>) {
        CAPTURED.with(|lines| {
            lines
                .borrow_mut()
                .push((record.level(), record.args().to_string()))
        });
    }
    fn flush(&self) {}
}

/// Runs `f` and returns what it logged on this thread.
fn logged(f: impl FnOnce()) -> Vec<(Level, String)> {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        log::set_logger(&Capture).expect("no other logger in this test binary");
        log::set_max_level(log::LevelFilter::Trace);
    });
    CAPTURED.with(|lines| lines.borrow_mut().clear());
    f();
    CAPTURED.with(|lines| lines.take())
}

const QWEN3_TTS_REPORT_256: &str = "\
Model-local KV (outside the paged manager): 2294.19 MiB across 3 declaration(s) at max_num_seqs=256
  resident (scope=model, already charged by profiling; not subtracted): 22.19 MiB; allocated after profiling: 2272.00 MiB
  decoder.retained: 1136.00 MiB (256 rows from max_num_seqs x 4.44 MiB/row, scope=request, 71 positions from sliding_window(72) - 1, only_when=async_chunk)
  decoder.working: 1136.00 MiB (256 rows from max_num_seqs x 4.44 MiB/row, scope=invocation, 71 positions from sliding_window(72) - 1, only_when=async_chunk)
  graph.captured: 22.19 MiB (5 rows from fixed(5; rows summed over captured caches) x 4.44 MiB/row, scope=model, 71 positions from sliding_window(72) - 1)";

#[test]
fn report_keeps_the_original_consumer_format() {
    let collection = collect(&qwen3_tts(true));
    assert_eq!(collection.report(256).to_string(), QWEN3_TTS_REPORT_256);
}

#[test]
fn max_num_seqs_scales_max_num_seqs_rows_only() {
    let collection = collect(&qwen3_tts(true));
    let pool = 5 * QWEN3_TTS_ROW;
    assert_eq!(pool, 23_265_280);
    for max_num_seqs in [1, 7, 256] {
        let per_seq = 2 * max_num_seqs * QWEN3_TTS_ROW;
        let totals = collection.totals(max_num_seqs).unwrap();
        assert_eq!(
            (totals.total, totals.resident, totals.after_profiling),
            (per_seq + pool, pool, per_seq)
        );
        assert_eq!((totals.device, totals.host), (per_seq + pool, 0));
    }
    let entries = collection.entries();
    assert_eq!(entries[0].spec.row_count(7), 7);
    assert_eq!(entries[2].spec.row_count(7), 5);
}

/// The MiMo-Audio graph pool: 261 fixed rows, whatever max_num_seqs is.
struct MimoPool;

impl ModelLocalKv for MimoPool {
    fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
        out.push(spec(
            "captured",
            Geometry::new(16, 64, 16, DType::BF16),
            11,
            "group_size(4) + max(delay_pattern)(7)",
            Scope::Model,
            Rows::fixed(261, "sum of captured buckets"),
        ));
        Ok(())
    }
}

#[test]
fn a_fixed_driver_ignores_max_num_seqs() {
    let collection = collect(&MimoPool);
    for max_num_seqs in [1, 256, 4096] {
        assert_eq!(collection.totals(max_num_seqs).unwrap().total, 188_153_856);
        assert_eq!(
            collection.totals(max_num_seqs).unwrap().resident,
            188_153_856
        );
    }
    let report = collection.report(4096).to_string();
    assert!(
        report.contains(
            "  captured: 179.44 MiB (261 rows from fixed(261; sum of captured buckets) x 704.00 KiB/row, scope=model, 11 positions from group_size(4) + max(delay_pattern)(7))"
        ),
        "{report}"
    );
    assert!(report.contains("resident (scope=model, already charged by profiling; not subtracted): 179.44 MiB; allocated after profiling: 0 B"), "{report}");
}

#[test]
fn an_undeclared_model_reports_zero_declarations() {
    let lines = logged(|| {
        let collection = log_model_local_kv(&Decoder { async_chunk: false }, 256);
        assert!(collection.entries().is_empty());
        assert!(collection.skipped().is_empty());
    });
    assert_eq!(
        lines,
        [(
            Level::Info,
            "Model-local KV (outside the paged manager): 0 B across 0 declaration(s) at max_num_seqs=256".to_owned()
        )]
    );
}

#[test]
fn log_report_emits_every_line_at_info() {
    let collection = collect(&qwen3_tts(true));
    let lines = logged(|| collection.log_report(256));
    let expected: Vec<(Level, String)> = QWEN3_TTS_REPORT_256
        .lines()
        .map(|line| (Level::Info, line.to_owned()))
        .collect();
    assert_eq!(lines, expected);
}

/// Declares optional text, or fails.
enum Quirky {
    Annotated,
    Fails,
    Huge,
}

impl ModelLocalKv for Quirky {
    fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
        let geometry = Geometry::new(1, 1, 1, DType::U8);
        match self {
            Quirky::Annotated => {
                let mut spec = spec(
                    "encoder",
                    geometry,
                    1,
                    "embed_positions rows",
                    Scope::Session,
                    Rows::fixed(1, "one duplex session"),
                );
                spec.only_when = Some("duplex".into());
                spec.assumes = Some("duplex_max_sessions=1".into());
                spec.note = Some("notes are not in the report line".into());
                out.push(spec);
                Ok(())
            }
            Quirky::Fails => Err(KvError::Config {
                what: "dtype",
                problem: "none of `torch_dtype`, `dtype` is set".into(),
            }),
            // 2 bytes x 2^62 positions: 2^63 bytes per row; two rows overflow.
            Quirky::Huge => {
                out.push(spec(
                    "huge",
                    geometry,
                    1 << 62,
                    "test",
                    Scope::Request,
                    Rows::MaxNumSeqs,
                ));
                Ok(())
            }
        }
    }
}

struct Trio([Quirky; 3]);

impl ModelLocalKv for Trio {
    fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
        Ok(())
    }
    fn kv_visit_children(&self, visitor: &mut dyn kv_core::declare::ChildVisitor) {
        visitor.field("parts", &self.0);
    }
}

#[test]
fn optional_text_and_skipped_owners_get_their_lines() {
    let model = Trio([Quirky::Annotated, Quirky::Fails, Quirky::Annotated]);
    let collection = collect(&model);
    let quirky = std::any::type_name::<Quirky>();
    let lines = logged(|| collection.log_report(8));
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert_eq!(
        lines[2],
        (
            Level::Info,
            "  parts.0.encoder: 2 B (1 row from fixed(1; one duplex session) x 2 B/row, scope=session, 1 position from embed_positions rows, only_when=duplex, assumes=duplex_max_sessions=1)".to_owned()
        )
    );
    assert_eq!(
        lines[4],
        (
            Level::Warn,
            format!("  skipped `parts.1` ({quirky}): kv: cannot read dtype from the config: none of `torch_dtype`, `dtype` is set")
        )
    );
}

#[test]
fn skipping_an_owner_warns_while_collecting() {
    let lines = logged(|| {
        collect(&Trio([Quirky::Fails, Quirky::Annotated, Quirky::Annotated]));
    });
    let quirky = std::any::type_name::<Quirky>();
    assert_eq!(
        lines,
        [(
            Level::Warn,
            format!("kv: skipping the declarations of `parts.0` ({quirky}): kv: cannot read dtype from the config: none of `torch_dtype`, `dtype` is set")
        )]
    );
}

#[test]
fn an_overflowing_total_is_an_error_line_not_a_panic() {
    let collection = collect(&Trio([Quirky::Annotated, Quirky::Huge, Quirky::Annotated]));
    // One row of 2^63 bytes plus two encoders of 2 bytes fits.
    assert_eq!(collection.totals(1).unwrap().after_profiling, (1 << 63) + 4);
    let err = collection.totals(4).unwrap_err();
    assert_eq!(
        err,
        KvError::Overflow {
            declaration: "Quirky.huge".into(),
            step: "peak bytes (rows x bytes per row)",
        }
    );
    let lines = logged(|| collection.log_report(4));
    assert_eq!(
        lines[..3],
        [
            (Level::Error, "Model-local KV (outside the paged manager): total overflows u64 across 3 declaration(s) at max_num_seqs=4".to_owned()),
            (Level::Error, "  kv: `Quirky.huge`: peak bytes (rows x bytes per row) overflows u64; check the geometry".to_owned()),
            (Level::Info, "  parts.0.encoder: 2 B (1 row from fixed(1; one duplex session) x 2 B/row, scope=session, 1 position from embed_positions rows, only_when=duplex, assumes=duplex_max_sessions=1)".to_owned()),
        ]
    );
    assert_eq!(
        lines[3],
        (Level::Error, "  parts.1.huge: <peak bytes (rows x bytes per row) overflows u64> (4 rows from max_num_seqs x 8796093022208.00 MiB/row, scope=request, 4611686018427387904 positions from test)".to_owned())
    );
}

#[test]
fn a_sum_that_overflows_names_the_declaration_it_overflowed_at() {
    // Each fits alone at max_num_seqs=1; the second makes the sum overflow.
    let collection = collect(&Trio([Quirky::Huge, Quirky::Huge, Quirky::Annotated]));
    assert_eq!(
        collection.totals(1),
        Err(KvError::Overflow {
            declaration: "Quirky.huge".into(),
            step: "sum of peak bytes",
        })
    );
}

/// ming's talker: geometry known only after load, from its config.json.
#[cfg(feature = "json")]
struct MingTalker {
    config: kv_core::HfConfig,
}

#[cfg(feature = "json")]
impl ModelLocalKv for MingTalker {
    fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
        let mut spec = spec(
            "cache",
            self.config.geometry()?,
            2048,
            "max_cache_len (hardcoded)",
            Scope::Invocation,
            Rows::fixed(1, "calls are serialized"),
        );
        spec.cache = "StaticCache".into();
        out.push(spec);
        Ok(())
    }
}

#[cfg(feature = "json")]
#[test]
fn ming_talker_from_its_config_file_is_25_165_824_bytes() {
    let dir = std::env::temp_dir().join(format!("kv-collect-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.json");
    std::fs::write(
        &path,
        r#"{"num_hidden_layers": 24, "num_key_value_heads": 2, "hidden_size": 896,
            "num_attention_heads": 14, "torch_dtype": "bfloat16"}"#,
    )
    .unwrap();
    let talker = MingTalker {
        config: kv_core::HfConfig::from_path(&path).unwrap(),
    };
    std::fs::remove_dir_all(&dir).unwrap();
    let collection = collect(&talker);
    for max_num_seqs in [1, 256] {
        assert_eq!(collection.totals(max_num_seqs).unwrap().total, 25_165_824);
    }
    assert_eq!(
        collection.report(256).to_string().lines().last(),
        Some("  cache: 24.00 MiB (1 row from fixed(1; calls are serialized) x 24.00 MiB/row, scope=invocation, 2048 positions from max_cache_len (hardcoded))")
    );
    // A config missing a key skips the talker; model load goes on.
    let broken = MingTalker {
        config: kv_core::HfConfig::from_value(Default::default()),
    };
    let collection = log_model_local_kv(&broken, 256);
    assert!(collection.entries().is_empty());
    // Every missing value is named at once, layers first.
    let problems = collection.skipped()[0].error.clone().into_problems();
    assert_eq!(problems.len(), 4);
    assert!(matches!(
        problems[0],
        KvError::Config { what: "layers", .. }
    ));
}

#[test]
fn totals_give_bytes_per_position_and_per_row_over_every_declaration() {
    struct Hybrid;
    impl kv_core::ModelLocalKv for Hybrid {
        fn kv_declare(&self, out: &mut Vec<kv_core::KvSpec>) -> Result<(), KvError> {
            out.push(kv_core::KvSpec::attention(
                "cache",
                "StaticCache",
                kv_core::Geometry::new(24, 2, 64, kv_core::DType::BF16),
                kv_core::Positions::bounded(2048, "max_cache_len"),
                kv_core::Scope::Invocation,
                kv_core::Rows::fixed(1, "calls are serialized"),
            ));
            out.push(kv_core::KvSpec::recurrent(
                "state",
                "MambaCache",
                kv_core::RecurrentState::from_parts(
                    4,
                    vec![kv_core::StatePart::new(
                        "ssm",
                        [16, 8, 1],
                        kv_core::DType::F32,
                    )],
                ),
                kv_core::Scope::Request,
                kv_core::Rows::MaxNumSeqs,
            ));
            Ok(())
        }
    }
    let totals = collect(&Hybrid).totals(10).unwrap();
    // Attention: 24 layers x 2 heads x 64 x (K + V) x 2 B = 12,288 B per
    // position; the state keeps none.
    assert_eq!(totals.per_position, 12_288);
    // Rows: 12,288 x 2048 + 4 layers x 16 x 8 x 4 B.
    assert_eq!(totals.per_row, 25_165_824 + 2_048);
    // Peak: one attention row, ten state rows.
    assert_eq!(totals.total, 25_165_824 + 10 * 2_048);
}
