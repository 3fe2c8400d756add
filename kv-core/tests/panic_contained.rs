//! A derived declarer that panics while declaring is contained: logged,
//! skipped, and the report of everything else is still produced.

use std::sync::Mutex;

use kv_core::{log_model_local_kv, Geometry, KvError, ModelLocalKv};
use log::{Level, Log, Metadata, Record};

static LINES: Mutex<Vec<(Level, String)>> = Mutex::new(Vec::new());

struct Capture;
impl Log for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &Record<'_>) {
        LINES
            .lock()
            .unwrap()
            .push((record.level(), record.args().to_string()));
    }
    fn flush(&self) {}
}

#[derive(ModelLocalKv)]
struct Broken {
    #[kv(
        name = "static_cache",
        cache = "StaticCache",
        geometry = self.geometry_from_a_config_that_was_never_loaded(),
        positions = bounded(2048, because = "hardcoded max_cache_len"),
        scope = invocation,
        rows = fixed(1, because = "calls are serialized"),
    )]
    _cache: (),
}

impl Broken {
    fn geometry_from_a_config_that_was_never_loaded(&self) -> Geometry {
        panic!("config not loaded")
    }
}

#[derive(ModelLocalKv)]
#[kv(
    name = "local_kv",
    cache = "DynamicCache",
    layers = 16, kv_heads = 64, head_dim = 16, dtype = bf16,
    positions = bounded(11, because = "group_size 4 + max(delay_pattern) 7"),
    scope = invocation,
    rows = max_num_seqs,
)]
struct Healthy;

#[derive(ModelLocalKv)]
struct Model {
    #[kv(child)]
    talker: Broken,
    #[kv(child)]
    local: Healthy,
}

#[test]
fn a_panicking_declarer_is_logged_and_skipped_and_the_report_still_produced() {
    log::set_logger(&Capture).unwrap();
    log::set_max_level(log::LevelFilter::Info);
    let model = Model {
        talker: Broken { _cache: () },
        local: Healthy,
    };
    let collection = log_model_local_kv(&model, 4);

    assert_eq!(collection.entries().len(), 1);
    assert_eq!(collection.entries()[0].full_name(), "local.local_kv");
    let skipped = &collection.skipped()[0];
    assert_eq!(skipped.path, "talker");
    assert!(
        matches!(&skipped.error, KvError::DeclarerPanicked { path, message }
            if path == "talker" && message.contains("config not loaded")),
        "{:?}",
        skipped.error
    );

    let lines = LINES.lock().unwrap();
    let text: Vec<&str> = lines.iter().map(|(_, line)| line.as_str()).collect();
    assert!(
        text.iter().any(|l| l.starts_with(
            "Model-local KV (outside the paged manager): 2.75 MiB across 1 declaration(s) at max_num_seqs=4"
        )),
        "{text:#?}"
    );
    assert!(
        text.iter().any(|l| l.contains("local.local_kv: 2.75 MiB")),
        "{text:#?}"
    );
    assert!(
        lines.iter().any(|(level, l)| *level == Level::Warn
            && l.contains("talker")
            && l.contains("panicked")),
        "{text:#?}"
    );
}
