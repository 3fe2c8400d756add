//! The derive on the shapes model code has: struct- and field-level
//! declarations, gates, after-load values, generics, children.

use kv_core::declare::DeclaredKv;
use kv_core::{DType, KvError, KvSpec, ModelLocalKv, Rows, Scope};

fn declared(model: &dyn ModelLocalKv) -> Result<Vec<KvSpec>, KvError> {
    let mut out = Vec::new();
    model.kv_declare(&mut out)?;
    Ok(out)
}

const SLIDING_WINDOW: u64 = 72;

#[derive(kv_core::ModelLocalKv)]
#[kv(
    name = "retained",
    cache = "sliding DynamicCache",
    layers = 8, kv_heads = 16, head_dim = 1024 / 16, dtype = f32,
    positions = bounded(SLIDING_WINDOW - 1, because = "sliding_window(72) - 1"),
    scope = request,
    rows = max_num_seqs,
    only_when = "async_chunk",
)]
#[kv(
    name = "working_copy",
    cache = "deep copy of the retained DynamicCache",
    layers = 8, kv_heads = 16, head_dim = 64, dtype = f32,
    positions = bounded(71, because = "sliding_window(72) - 1"),
    scope = invocation,
    rows = max_num_seqs,
    only_when = "async_chunk",
    note = "live alongside the retained cache during a decode step",
)]
struct CodecDecoder {
    async_chunk: bool,
}

#[test]
fn gated_declarations_hold_only_when_their_gate_is_open() {
    let on = declared(&CodecDecoder { async_chunk: true }).unwrap();
    assert_eq!(on.len(), 2);
    assert_eq!(on[0].name, "retained");
    assert_eq!(on[0].bytes_per_row(), Ok(4_653_056));
    assert_eq!(on[1].name, "working_copy");
    assert_eq!(on[1].scope, Scope::Invocation);
    assert_eq!(on[0].only_when.as_deref(), Some("async_chunk"));
    let off = declared(&CodecDecoder { async_chunk: false }).unwrap();
    assert!(off.is_empty(), "the stateless path declares nothing");
}

#[test]
fn static_declarations_are_listed_without_an_instance() {
    const DECLS: kv_core::declare::KvTypeDecls = <CodecDecoder as DeclaredKv>::KV_DECLS;
    const PER_ROW: u64 = match DECLS.static_specs[0].bytes_per_row() {
        Ok(bytes) => bytes,
        Err(_) => panic!(),
    };
    assert_eq!(PER_ROW, 4_653_056);
    assert_eq!(DECLS.type_name, "CodecDecoder");
    assert_eq!(DECLS.static_specs.len(), 2);
    assert!(DECLS.after_load.is_empty());
}

/// Stands in for a checkpoint's config, known after load.
struct LlmConfig {
    num_hidden_layers: usize,
    num_key_value_heads: i64,
    head_dim: u32,
}

#[derive(kv_core::ModelLocalKv)]
struct Talker {
    llm_config: LlmConfig,
    #[kv(
        cache = "StaticCache",
        layers = self.llm_config.num_hidden_layers,
        kv_heads = self.llm_config.num_key_value_heads,
        head_dim = self.llm_config.head_dim,
        dtype = self.dtype,
        positions = bounded(2048, because = "hardcoded max_cache_len"),
        scope = invocation,
        rows = fixed(1, because = "calls are serialized"),
    )]
    cache: Option<()>,
    dtype: DType,
}

fn ming_talker(layers: usize, kv_heads: i64) -> Talker {
    Talker {
        llm_config: LlmConfig {
            num_hidden_layers: layers,
            num_key_value_heads: kv_heads,
            head_dim: 896 / 14,
        },
        cache: None,
        dtype: DType::BF16,
    }
}

#[test]
fn after_load_values_are_read_from_self() {
    let specs = declared(&ming_talker(24, 2)).unwrap();
    assert_eq!(specs.len(), 1);
    assert_eq!(
        specs[0].name, "cache",
        "a field declaration is named after its field"
    );
    assert!(ming_talker(24, 2).cache.is_none());
    assert_eq!(specs[0].peak_bytes(256), Ok(25_165_824));
    assert_eq!(specs[0].rows, Rows::fixed(1, "calls are serialized"));
    let decls = <Talker as DeclaredKv>::KV_DECLS;
    assert!(decls.static_specs.is_empty());
    assert_eq!(decls.after_load[0].name, "cache");
    assert_eq!(decls.after_load[0].cache, "StaticCache");
}

#[test]
fn after_load_values_are_validated_with_clear_errors() {
    // A zero read after load declares nothing, and the collector says why.
    assert_eq!(declared(&ming_talker(0, 2)), Ok(Vec::new()));
    let collection = kv_core::collect(&ming_talker(0, 2));
    assert!(collection.skipped().is_empty());
    assert_eq!(
        collection.empty_declarations()[0].reason(),
        "0 layers from `self.llm_config.num_hidden_layers`"
    );
    let err = declared(&ming_talker(24, -2)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "kv: `Talker.cache`: `kv_heads` is -2; a count cannot be negative"
    );
}

#[derive(kv_core::ModelLocalKv)]
struct Generic<'a, T: Clone, const N: usize>
where
    T: Default,
{
    #[kv(
        cache = "ring buffer",
        layers = N, kv_heads = 2, head_dim = 8, dtype = bf16,
        positions = bounded(self.window.len(), because = "window slice length"),
        scope = request,
        rows = max_num_seqs,
    )]
    window: &'a [T],
}

#[test]
fn generic_structs_with_lifetimes_and_where_clauses_derive() {
    let window = [0u8; 5];
    let model = Generic::<'_, u8, 3> { window: &window };
    let specs = declared(&model).unwrap();
    assert_eq!(specs[0].geometry().map(|g| g.layers), Some(3));
    assert_eq!(specs[0].bytes_per_row(), Ok(3 * 2 * (8 + 8) * 2 * 5));
}

fn is_duplex(_: &Encoder) -> bool {
    true
}

#[derive(kv_core::ModelLocalKv)]
#[kv(
    name = "encoder",
    cache = "EncoderDecoderCache",
    layers = 24, kv_heads = 16, head_dim = 64, dtype = bf16,
    positions = bounded(1500, because = "embed_positions rows"),
    scope = session,
    rows = fixed(self.duplex_max_sessions, because = "one cache per duplex session"),
    only_when = "streaming()",
    assumes = "duplex mode is on: omni_config cannot tell duplex off from one session",
)]
struct Encoder {
    duplex_max_sessions: u32,
}

impl Encoder {
    fn streaming(&self) -> bool {
        is_duplex(self)
    }
}

#[test]
fn a_gate_can_be_a_method_and_assumes_is_carried() {
    let specs = declared(&Encoder {
        duplex_max_sessions: 2,
    })
    .unwrap();
    assert_eq!(specs[0].bytes_per_row(), Ok(147_456_000));
    assert_eq!(specs[0].peak_bytes(1000), Ok(2 * 147_456_000));
    assert!(specs[0]
        .assumes
        .as_deref()
        .unwrap()
        .starts_with("duplex mode is on"));
}

#[test]
fn after_load_declarations_carry_what_is_known_before_load() {
    use kv_core::declare::AfterLoadRows;
    let encoder = <Encoder as DeclaredKv>::KV_DECLS.after_load[0];
    assert_eq!(
        (encoder.name, encoder.cache, encoder.scope),
        ("encoder", "EncoderDecoderCache", Scope::Session)
    );
    assert_eq!(
        (
            encoder.positions,
            encoder.positions_bound,
            encoder.bytes_per_row
        ),
        (Some(1500), "embed_positions rows", Some(147_456_000))
    );
    assert_eq!(
        encoder.rows,
        AfterLoadRows::Fixed {
            count: None,
            because: "one cache per duplex session",
        }
    );
    assert_eq!(
        (encoder.only_when, encoder.assumes),
        (
            Some("streaming"),
            Some("duplex mode is on: omni_config cannot tell duplex off from one session")
        )
    );
    let talker = <Talker as DeclaredKv>::KV_DECLS.after_load[0];
    assert_eq!(
        talker.bytes_per_row, None,
        "its geometry is read after load"
    );
    assert_eq!(talker.positions, Some(2048));
    assert_eq!(
        talker.rows,
        AfterLoadRows::Fixed {
            count: Some(1),
            because: "calls are serialized"
        }
    );
}

/// A generic CUDA-graph wrapper: the `KvChild` bound on its child is inferred.
#[derive(kv_core::ModelLocalKv)]
#[kv(transparent)]
struct GraphWrapper<M> {
    #[kv(child)]
    runnable: std::sync::Arc<M>,
}

#[test]
fn a_generic_wrapper_needs_no_bound_written_for_its_child() {
    let wrapper = GraphWrapper {
        runnable: std::sync::Arc::new(CodecDecoder { async_chunk: true }),
    };
    let collection = kv_core::collect(&wrapper);
    let names: Vec<String> = collection.entries().iter().map(|e| e.full_name()).collect();
    assert_eq!(
        names,
        ["retained", "working_copy"],
        "transparent: no segment"
    );
}

#[derive(ModelLocalKv)]
#[allow(non_camel_case_types, dead_code)]
struct r#Block {
    #[kv(
        cache = "StaticCache",
        layers = 1, kv_heads = 2, head_dim = 4, dtype = u8,
        positions = bounded(8, because = "eight"),
        scope = request,
        rows = max_num_seqs,
        only_when = "r#async",
    )]
    r#type: (),
    r#async: bool,
    #[kv(child)]
    r#ref: CodecDecoder,
}

#[test]
fn raw_identifiers_lose_their_r_hash_in_names_and_paths() {
    let block = r#Block {
        r#type: (),
        r#async: true,
        r#ref: CodecDecoder { async_chunk: true },
    };
    assert_eq!(<r#Block as DeclaredKv>::KV_DECLS.type_name, "Block");
    let own = declared(&block).unwrap();
    assert_eq!(own[0].name, "type");
    assert_eq!(own[0].only_when.as_deref(), Some("async"));
    let collection = kv_core::collect(&block);
    let names: Vec<String> = collection.entries().iter().map(|e| e.full_name()).collect();
    assert_eq!(names, ["type", "ref.retained", "ref.working_copy"]);
}

#[test]
fn derived_owners_say_they_are_validated_as_declared() {
    assert!(CodecDecoder { async_chunk: true }.__kv_validated());
    assert!(ming_talker(24, 2).__kv_validated());
}

/// The inferred bound reaches a parameter inside brackets.
#[derive(kv_core::ModelLocalKv)]
struct Stages<M> {
    #[kv(child)]
    stages: [M; 2],
}

#[test]
fn a_bound_is_inferred_for_a_parameter_inside_brackets() {
    let stages = Stages {
        stages: [
            CodecDecoder { async_chunk: true },
            CodecDecoder { async_chunk: false },
        ],
    };
    let collection = kv_core::collect(&stages);
    let names: Vec<String> = collection.entries().iter().map(|e| e.full_name()).collect();
    assert_eq!(
        names,
        ["stages.0.retained", "stages.0.working_copy"],
        "stage 1 is gated off"
    );
}

const LAYERS: u64 = 2;

/// A name with braces (kept whole through the const checks' messages), a
/// count read through `self` inside parentheses, and a reason forwarded by
/// `macro_rules!`.
macro_rules! braced_cache {
    ($reason:literal) => {
        #[derive(kv_core::ModelLocalKv)]
        #[kv(
                                                    name = "window{0}",
                                                    cache = "c",
                                                    layers = LAYERS,
                                                    kv_heads = u64::from(self.kv_heads),
                                                    head_dim = 8,
                                                    dtype = u8,
                                                    positions = bounded(4, because = $reason),
                                                    scope = request,
                                                    rows = max_num_seqs,
                                                )]
        struct Braced {
            kv_heads: u32,
        }
    };
}
braced_cache!("a reason forwarded by a macro");

#[test]
fn names_with_braces_self_in_parentheses_and_forwarded_reasons() {
    let specs = declared(&Braced { kv_heads: 3 }).expect("declares");
    assert_eq!(specs.len(), 1);
    assert_eq!(specs[0].name, "window{0}");
    // 2 layers x 3 heads x (8 + 8) x 1 byte x 4 positions
    assert_eq!(specs[0].bytes_per_row(), Ok(2 * 3 * 16 * 4));
    let positions = specs[0].positions().expect("attention has positions");
    assert_eq!(positions.reason(), "a reason forwarded by a macro");
}
