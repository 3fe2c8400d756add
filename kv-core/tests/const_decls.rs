//! Static declarations are compile-time data: `DeclaredKv::KV_DECLS` and the
//! byte math on it are usable in `const` and `static` items, array lengths and
//! const assertions, so tables and budgets built from them cost nothing at run
//! time (issue #6).

use kv_core::declare::{DeclaredKv, KvTypeDecls};
use kv_core::{DType, KvSpec, ModelLocalKv, Rows, Scope};

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
#[kv(
    name = "graph_pool",
    cache = "captured CUDA graph buffers",
    layers = 16, kv_heads = 64, head_dim = 16, dtype = bf16,
    positions = bounded(11, because = "decode steps per capture"),
    scope = model,
    rows = fixed(261, because = "sum of captured buckets"),
)]
struct Decoder {
    async_chunk: bool,
    #[kv(child)]
    talker: Talker,
}

const MAX_LEN: u64 = 2048;

#[derive(ModelLocalKv)]
struct Talker {
    layers: usize,
    #[kv(
        cache = "StaticCache",
        layers = self.layers, kv_heads = 2, head_dim = 64, dtype = bf16,
        positions = bounded(MAX_LEN, because = "hardcoded max_cache_len"),
        scope = invocation,
        rows = fixed(1, because = "calls are serialized"),
    )]
    cache: Option<()>,
}

/// Everything `Decoder` declares statically, as a `const` item.
const DECODER: KvTypeDecls = <Decoder as DeclaredKv>::KV_DECLS;

/// Also usable in a `static`: the table lives in read-only data.
static DECODER_SPECS: &[KvSpec] = <Decoder as DeclaredKv>::KV_DECLS.static_specs;

/// Peak bytes of every static declaration of a type at `max_num_seqs`,
/// computed by the compiler.
const fn static_peak(decls: &KvTypeDecls, max_num_seqs: u64) -> u64 {
    let mut total = 0u64;
    let mut i = 0;
    while i < decls.static_specs.len() {
        total += match decls.static_specs[i].peak_bytes(max_num_seqs) {
            Ok(bytes) => bytes,
            Err(_) => panic!("static declaration overflows u64"),
        };
        i += 1;
    }
    total
}

const PEAK_AT_256: u64 = static_peak(&DECODER, 256);
const RETAINED_PER_ROW: u64 = match DECODER.static_specs[0].bytes_per_row() {
    Ok(bytes) => bytes,
    Err(_) => panic!("overflow"),
};

// Evaluated by the compiler: a wrong figure fails `cargo check`, not a test run.
const _: () = assert!(RETAINED_PER_ROW == 4_653_056);
const _: () = assert!(PEAK_AT_256 == 4_653_056 * 256 + 188_153_856);
const _: () = assert!(DECODER.static_specs.len() == 2);
const _: () = assert!(DECODER.after_load.is_empty());
const _: () = assert!(<Talker as DeclaredKv>::KV_DECLS.static_specs.is_empty());
const _: () = assert!(<Talker as DeclaredKv>::KV_DECLS.after_load.len() == 1);
static_assertions::const_assert_eq!(static_peak(&DECODER, 1), 4_653_056 + 188_153_856);

/// A const-computed figure sizes an array: only possible at compile time.
const DECLARED: usize =
    DECODER.static_specs.len() + <Talker as DeclaredKv>::KV_DECLS.after_load.len();
static NAMES: [&str; DECLARED] = ["retained", "graph_pool", "cache"];

#[test]
fn const_tables_match_what_instances_declare() {
    assert_eq!(DECODER.type_name, "Decoder");
    assert_eq!(
        DECODER_SPECS[1].rows,
        Rows::fixed(261, "sum of captured buckets")
    );
    assert_eq!(DECODER_SPECS[1].scope, Scope::Model);
    assert_eq!(
        DECODER_SPECS[0].geometry().map(|g| g.storage),
        Some(kv_core::Storage::Dense(DType::F32))
    );
    assert_eq!(<Talker as DeclaredKv>::KV_DECLS.after_load[0].name, "cache");

    let decoder = Decoder {
        async_chunk: true,
        talker: Talker {
            layers: 4,
            cache: None,
        },
    };
    let mut specs = Vec::new();
    decoder.kv_declare(&mut specs).unwrap();
    assert_eq!(
        specs, DECODER_SPECS,
        "an instance with its gate open declares the const table"
    );
    decoder.talker.kv_declare(&mut specs).unwrap();
    let names: Vec<&str> = specs.iter().map(|s| &*s.name).collect();
    assert_eq!(names, NAMES);
    assert!(decoder.talker.cache.is_none());
}

#[test]
fn static_specs_borrow_their_text() {
    // The static table carries borrowed text (nothing to allocate or free), and
    // a spec pushed by `kv_declare` borrows the same literals.
    let decoder = Decoder {
        async_chunk: false,
        talker: Talker {
            layers: 1,
            cache: None,
        },
    };
    let mut specs = Vec::new();
    decoder.kv_declare(&mut specs).unwrap();
    assert_eq!(specs.len(), 1, "the gated declaration is closed");
    for spec in DECODER_SPECS.iter().chain(&specs) {
        assert!(matches!(spec.name, std::borrow::Cow::Borrowed(_)));
        assert!(matches!(spec.cache, std::borrow::Cow::Borrowed(_)));
        assert!(matches!(
            spec.positions().map(|p| &p.bound),
            Some(kv_core::spec::Bound::Stated(std::borrow::Cow::Borrowed(_)))
        ));
    }
}
