//! Other crates' containers and locks engines keep caches in, behind
//! kv-core's features `smallvec`, `parking_lot` and `tokio` (#34 item 2):
//! walked as `Vec` and `Mutex` are, a lock held elsewhere skipped by path,
//! never waited for (a tokio lock is never awaited).
//!
//! Figures by hand: `Cache` is 1 layer x 1 head x (4 + 4) dims x 2 B (f16) =
//! 16 B per position, x 8 positions = 128 B per row, one row.

use std::sync::Arc;

use kv_core::{collect, KvError, ModelLocalKv};
use smallvec::SmallVec;

#[derive(ModelLocalKv)]
#[kv(
    name = "kv", cache = "KvCache", layers = 1, kv_heads = 1, head_dim = 4, dtype = f16,
    positions = bounded(8, because = "max_seq_len"), scope = request,
    rows = fixed(1, because = "one sequence per cache"),
)]
struct Cache {
    _id: u8,
}

fn cache() -> Cache {
    Cache { _id: 0 }
}

fn paths(model: &dyn ModelLocalKv) -> Vec<String> {
    collect(model)
        .entries()
        .iter()
        .map(|entry| entry.full_name())
        .collect()
}

trait Pipeline: ModelLocalKv + Send + Sync {}
impl Pipeline for Cache {}

#[derive(ModelLocalKv)]
struct Engine {
    #[kv(child)]
    inline: SmallVec<[Cache; 2]>,
    #[kv(child)]
    spilled: Box<SmallVec<[Cache; 1]>>,
    #[kv(child)]
    parking: Arc<parking_lot::Mutex<Cache>>,
    #[kv(child)]
    parking_rw: parking_lot::RwLock<Vec<Cache>>,
    #[kv(child)]
    reentrant: parking_lot::ReentrantMutex<Cache>,
    /// mistral.rs's engine: its pipeline behind a tokio lock, as a trait object.
    #[kv(child)]
    pipeline: Arc<tokio::sync::Mutex<dyn Pipeline>>,
    #[kv(child)]
    tokio_rw: tokio::sync::RwLock<Option<Cache>>,
    #[kv(child)]
    once: tokio::sync::OnceCell<Cache>,
    #[kv(child)]
    unset: tokio::sync::OnceCell<Cache>,
}

fn engine() -> Engine {
    Engine {
        inline: SmallVec::from_iter([cache(), cache()]),
        spilled: Box::new(SmallVec::from_iter([cache(), cache(), cache()])),
        parking: Arc::new(parking_lot::Mutex::new(cache())),
        parking_rw: parking_lot::RwLock::new(vec![cache()]),
        reentrant: parking_lot::ReentrantMutex::new(cache()),
        pipeline: Arc::new(tokio::sync::Mutex::new(cache())),
        tokio_rw: tokio::sync::RwLock::new(Some(cache())),
        once: tokio::sync::OnceCell::new_with(Some(cache())),
        unset: tokio::sync::OnceCell::new(),
    }
}

#[test]
fn each_foreign_container_is_walked() {
    let engine = engine();
    assert!(engine.spilled.spilled());
    assert_eq!(
        paths(&engine),
        [
            "inline.0.kv",
            "inline.1.kv",
            "spilled.0.kv",
            "spilled.1.kv",
            "spilled.2.kv",
            "parking.kv",
            "parking_rw.0.kv",
            "reentrant.kv",
            "pipeline.kv",
            "tokio_rw.kv",
            "once.kv",
        ]
    );
    // 11 caches x 128 B
    assert_eq!(collect(&engine).totals(1).unwrap().total, 1_408);
}

#[test]
fn a_foreign_lock_held_elsewhere_is_skipped_by_path_and_named() {
    let engine = engine();
    let parking = engine.parking.lock();
    let parking_rw = engine.parking_rw.write();
    let pipeline = engine.pipeline.try_lock().expect("free");
    let tokio_rw = engine.tokio_rw.try_write().expect("free");
    // A reentrant mutex held by another thread: this thread could enter it.
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let reentrant = &engine.reentrant;
        scope.spawn(move || {
            let _guard = reentrant.lock();
            held_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        });
        held_rx.recv().unwrap();
        let collection = collect(&engine);
        release_tx.send(()).unwrap();
        let skipped: Vec<(String, String)> = collection
            .skipped()
            .iter()
            .map(|s| (s.path.clone(), s.error.to_string()))
            .collect();
        let names: Vec<&str> = skipped.iter().map(|(path, _)| path.as_str()).collect();
        assert_eq!(
            names,
            ["parking", "parking_rw", "reentrant", "pipeline", "tokio_rw"]
        );
        for (path, error) in &skipped {
            assert!(
                matches!(
                    collection
                        .skipped()
                        .iter()
                        .find(|s| &s.path == path)
                        .unwrap()
                        .error,
                    KvError::Unreachable { .. }
                ),
                "{error}"
            );
        }
        assert!(
            skipped[0]
                .1
                .contains("parking_lot::Mutex is locked elsewhere"),
            "{}",
            skipped[0].1
        );
        assert!(
            skipped[2]
                .1
                .contains("parking_lot::ReentrantMutex is locked by another thread"),
            "{}",
            skipped[2].1
        );
        assert!(
            skipped[3]
                .1
                .contains("tokio::sync::Mutex is locked elsewhere"),
            "{}",
            skipped[3].1
        );
        // The rest is still collected: 2 + 3 + 1 (the set `once`).
        assert_eq!(collection.entries().len(), 6);
    });
    drop((parking, parking_rw, pipeline, tokio_rw));
}

/// Types held in other crates' containers but absent now (an empty
/// `SmallVec`, an unset `OnceCell`, a lock holding `None`) are named from
/// their types, as `Vec`'s and `Mutex`'s are: no false alarm at start-up.
mod absent {
    use kv_core::ModelLocalKv;
    use smallvec::SmallVec;

    #[derive(ModelLocalKv)]
    pub struct InSmallVec;

    #[derive(ModelLocalKv)]
    pub struct InOnceCell;

    #[derive(ModelLocalKv)]
    pub struct InParkingLot;

    #[derive(ModelLocalKv)]
    pub struct Root {
        #[kv(child)]
        pub small: SmallVec<[InSmallVec; 2]>,
        #[kv(child)]
        pub once: tokio::sync::OnceCell<InOnceCell>,
        #[kv(child)]
        pub parked: parking_lot::Mutex<Option<InParkingLot>>,
    }
}

#[test]
fn types_absent_now_in_other_crates_containers_are_no_false_alarm() {
    let root = absent::Root {
        small: SmallVec::new(),
        once: tokio::sync::OnceCell::new(),
        parked: parking_lot::Mutex::new(None),
    };
    let reported = kv_core::registry::unreached_within(&[&root], &["foreign_containers::absent"]);
    assert!(reported.is_empty(), "{reported:?}");
}
