//! The example's declarations reproduce the seed's figures exactly.

use kv_core::budget::Budget;
use kv_core::units::{human_bytes, GIB, MIB};
use kv_core::{collect, Collection, KvError, ModelLocalKv, Rows, Scope};
use kv_examples::*;

fn collected(name: &str) -> Collection {
    let models = loaded_models().expect("the example's configs load");
    let (_, root) = models
        .into_iter()
        .find(|(model, _)| *model == name)
        .expect("model exists");
    let collection = collect(root.as_ref());
    assert!(
        collection.skipped().is_empty(),
        "{:?}",
        collection.skipped()
    );
    collection
}

fn per_row(collection: &Collection, full_name: &str) -> u64 {
    let entry = collection
        .entries()
        .iter()
        .find(|e| e.full_name() == full_name)
        .unwrap_or_else(|| panic!("{full_name} not declared"));
    entry.spec.bytes_per_row().unwrap()
}

#[test]
fn qwen3_tts_rows_are_4_44_mib_and_the_shared_decoder_counts_once() {
    let qwen = collected("Qwen3-TTS");
    let names: Vec<String> = qwen.entries().iter().map(|e| e.full_name()).collect();
    assert_eq!(
        names,
        [
            "decoder.retained",
            "decoder.working_copy",
            "code2wav.graph_pool"
        ],
        "the decoder behind the graph wrapper is the same Arc: counted once"
    );
    assert_eq!(per_row(&qwen, "decoder.retained"), 4_653_056);
    assert_eq!(human_bytes(4_653_056), "4.44 MiB");
    let pool = &qwen.entries()[2].spec;
    assert_eq!(pool.peak_bytes(256), Ok(23_265_280), "5 captured rows");
    assert_eq!(pool.scope, Scope::Model);
}

#[test]
fn qwen3_tts_per_request_half_is_about_1_1_gib_at_256() {
    let qwen = collected("Qwen3-TTS");
    let request: u64 = qwen
        .entries()
        .iter()
        .filter(|e| e.spec.scope == Scope::Request)
        .map(|e| e.spec.peak_bytes(256).unwrap())
        .sum();
    assert_eq!(request, 1_191_182_336);
    assert_eq!(human_bytes(request), "1.11 GiB");
    let totals = qwen.totals(256).unwrap();
    assert_eq!(totals.resident, 23_265_280);
    assert_eq!(totals.after_profiling, 2 * 1_191_182_336);
}

#[test]
fn the_stateless_path_declares_nothing() {
    let decoder = std::sync::Arc::new(Qwen3TtsCodecDecoder { async_chunk: false });
    let qwen = Qwen3Tts {
        decoder: decoder.clone(),
        code2wav: Qwen3TtsGraphWrapper {
            runnable: decoder,
            captured_batch_sizes: vec![],
        },
    };
    let collection = collect(&qwen);
    assert!(collection.entries().is_empty());
    assert!(collection.skipped().is_empty());
    // No graphs captured: 0 rows read after load, said rather than silently zero.
    let empty = &collection.empty_declarations()[0];
    assert_eq!(empty.full_name(), "code2wav.graph_pool");
    assert_eq!(empty.reason(), "0 rows from `self.captured_rows()`");
    assert!(collection
        .report(256)
        .to_string()
        .contains("  code2wav.graph_pool: declares nothing: 0 rows from `self.captured_rows()`"));
}

#[test]
fn mimo_rows_are_704_kib_and_the_pool_is_179_44_mib() {
    let mimo = collected("MiMo-Audio");
    assert_eq!(per_row(&mimo, "local_transformer.local_kv"), 720_896);
    assert_eq!(human_bytes(720_896), "704.00 KiB");
    let pool = &mimo.entries()[1].spec;
    assert_eq!(
        pool.rows,
        Rows::fixed(261, "sum of captured buckets (1,2,4,6,8,16,32,64,128)")
    );
    assert_eq!(pool.peak_bytes(1), Ok(188_153_856));
    assert_eq!(pool.peak_bytes(4096), Ok(188_153_856));
    assert_eq!(human_bytes(188_153_856), "179.44 MiB");
}

#[test]
fn minicpm_encoder_row_is_140_62_mib_per_session() {
    let minicpm = collected("MiniCPM-o");
    assert_eq!(per_row(&minicpm, "apm.streaming_encoder"), 147_456_000);
    assert_eq!(human_bytes(147_456_000), "140.62 MiB");
    let two_sessions = MiniCpmOWhisperEncoder {
        streaming: true,
        duplex_max_sessions: 2,
    };
    let mut out = Vec::new();
    two_sessions.kv_declare(&mut out).unwrap();
    assert_eq!(out[0].peak_bytes(256), Ok(2 * 147_456_000));
    let offline = MiniCpmOWhisperEncoder {
        streaming: false,
        duplex_max_sessions: 1,
    };
    out.clear();
    offline.kv_declare(&mut out).unwrap();
    assert!(out.is_empty());
}

#[test]
fn ming_talker_geometry_comes_from_its_config_and_is_24_mib() {
    let ming = collected("ming_flash_omni");
    let spec = &ming.entries()[0].spec;
    assert_eq!(
        spec.geometry(),
        Some(&kv_core::Geometry::new(24, 2, 64, kv_core::DType::BF16))
    );
    assert_eq!(spec.bytes_per_row(), Ok(25_165_824));
    assert_eq!(
        spec.peak_bytes(256),
        Ok(25_165_824),
        "calls are serialized: no max_num_seqs"
    );
    assert_eq!(human_bytes(25_165_824), "24.00 MiB");
}

#[test]
fn ming_without_its_config_is_skipped_not_fatal() {
    let ming = MingFlashOmni {
        talker: MingTalker {
            llm_config: kv_core::HfConfig::from_value(
                serde_json::json!({"torch_dtype": "bfloat16"}),
            ),
            static_cache: (),
        },
    };
    let collection = collect(&ming);
    assert!(collection.entries().is_empty());
    let error = &collection.skipped()[0].error;
    // Every value the config lacks is named at once, each a config error.
    let problems = error.clone().into_problems();
    assert_eq!(problems.len(), 3, "{error}");
    assert!(
        problems.iter().all(|p| matches!(p, KvError::Config { .. })),
        "{error}"
    );
    assert!(error.to_string().contains("num_hidden_layers"), "{error}");
}

#[test]
fn budgets_are_ceilings_on_the_collected_report() {
    let qwen = collected("Qwen3-TTS");
    let under = Budget {
        ceiling_bytes: 3 * GIB,
        max_num_seqs: 256,
    };
    assert_eq!(under.check(qwen.entries()), Ok(2_405_629_952));
    let over = Budget {
        ceiling_bytes: 2 * GIB,
        max_num_seqs: 256,
    };
    let error = over.check(qwen.entries()).unwrap_err();
    assert_eq!(
        error,
        KvError::OverBudget {
            declared: 2_405_629_952,
            ceiling: 2 * GIB,
            max_num_seqs: 256
        }
    );
    // Removing the working copy never fails the budget that held with it.
    let fewer = qwen
        .entries()
        .iter()
        .filter(|e| e.spec.name != "working_copy");
    assert!(under.check(fewer).is_ok());
    assert!(Budget {
        ceiling_bytes: 200 * MIB,
        max_num_seqs: 1
    }
    .check(collected("MiMo-Audio").entries())
    .is_ok());
}

#[test]
fn the_registry_lists_every_declaring_type_by_module() {
    let names: Vec<(&str, &str)> = kv_core::registry::declaring_types()
        .map(|r| (r.module_path, r.decls.type_name))
        .collect();
    assert_eq!(
        names,
        [
            ("kv_examples::mimo_audio", "MimoGraphPool"),
            ("kv_examples::mimo_audio", "MimoLocalTransformer"),
            ("kv_examples::ming_flash_omni", "MingTalker"),
            ("kv_examples::minicpm_o", "MiniCpmOWhisperEncoder"),
            ("kv_examples::modern", "DeepSeekV2Lite"),
            ("kv_examples::modern", "Gemma3_27b"),
            ("kv_examples::modern", "JambaV0_1"),
            ("kv_examples::modern", "Llama3_8b"),
            ("kv_examples::modern", "Llama3_8bQ8_0"),
            ("kv_examples::modern", "Mistral7b"),
            ("kv_examples::modern", "Qwen3Next80bA3b"),
            ("kv_examples::modern", "WhisperLargeV3"),
            ("kv_examples::qwen3_tts", "Qwen3TtsCodecDecoder"),
            ("kv_examples::qwen3_tts", "Qwen3TtsGraphWrapper"),
        ]
    );
    let all = kv_core::registry::registered_types().count();
    assert_eq!(
        all, 18,
        "the four seed model roots register too, declaring nothing themselves"
    );
    // The seed's page lists the seed's six declaring types; the eight modern
    // models have their own page (docs/modern-models.md).
    let seed: Vec<&str> = kv_examples::declaring_types()
        .iter()
        .map(|d| d.type_name)
        .collect();
    assert_eq!(
        seed,
        [
            "MimoGraphPool",
            "MimoLocalTransformer",
            "MingTalker",
            "MiniCpmOWhisperEncoder",
            "Qwen3TtsCodecDecoder",
            "Qwen3TtsGraphWrapper",
        ]
    );
}
