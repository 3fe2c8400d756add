//! The derive's keys for modern caches: formats, MLA latents, recurrent
//! state, position policies, placement and sharding, to the byte.

use kv_core::declare::DeclaredKv;
use kv_core::spec::{Bound, Layout};
use kv_core::{
    collect, BlockFormat, DType, KvSpec, Latent, ModelLocalKv, Placement, PositionPolicy,
    RecurrentState, Sharding, StatePart, Storage,
};

/// Jamba-v0.1's Mamba layer state: conv 8192 x 4 and ssm 8192 x 16, f16.
static JAMBA_PARTS: [StatePart; 2] = [
    StatePart::mamba_conv_transformers(8192, 4, DType::F16),
    StatePart::mamba_ssm(8192, 16, DType::F16),
];
const JAMBA_STATE: RecurrentState = RecurrentState::new(28, &JAMBA_PARTS);

#[derive(ModelLocalKv)]
#[kv(
    name = "q8_0",
    cache = "llama.cpp KV cache",
    layers = 32, kv_heads = 8, head_dim = 128, dtype = f16, kv_format = q8_0,
    positions = padded(8000, multiple = 256),
    scope = request,
    rows = max_num_seqs,
)]
#[kv(
    name = "fp8_keys",
    cache = "split formats",
    layers = 2, kv_heads = 2, head_dim = 64, dtype = bf16, kv_format = f8e4m3, v_format = i4,
    positions = window_minus_one(72),
    scope = request,
    rows = max_num_seqs,
    on_host = "offloaded between steps",
)]
#[kv(
    name = "latent",
    cache = "MLA latent",
    latent = Latent::new(27, 512, 64, DType::BF16),
    positions = vllm_sliding_window(4096, max_num_batched_tokens = 2048, max_model_len = 8192, block_size = 16),
    scope = request,
    rows = max_num_seqs,
)]
#[kv(
    name = "mamba",
    cache = "MambaCache",
    state = JAMBA_STATE,
    scope = request,
    rows = max_num_seqs,
    whole_on_every_rank = "test: not sharded",
)]
struct Modern;

/// Read after load: the state and the latent come from the model.
#[derive(ModelLocalKv)]
#[kv(
    name = "state",
    cache = "Gated DeltaNet",
    state = self.state.clone(),
    scope = request,
    rows = max_num_seqs,
)]
#[kv(
    name = "latent",
    cache = "MLA latent",
    latent = self.latent,
    positions = grows_by(self.tokens, step = 512),
    scope = invocation,
    rows = fixed(1, because = "one call at a time"),
)]
#[kv(
    name = "quantized",
    cache = "fp8 per-token-head",
    layers = 4, kv_heads = 2, head_dim = 128, dtype = bf16,
    kv_format = self.format,
    positions = window_capped(self.window, max_cache_len = 4096),
    scope = request,
    rows = max_num_seqs,
)]
struct Loaded {
    state: RecurrentState,
    latent: Latent,
    tokens: u64,
    format: Storage,
    window: u32,
}

fn spec<'a>(specs: &'a [KvSpec], name: &str) -> &'a KvSpec {
    specs.iter().find(|s| s.name == name).unwrap()
}

#[test]
fn static_modern_declarations_are_exact() {
    let specs = Modern::KV_DECLS.static_specs;
    // q8_0: 34 B per 32 elements: 128-wide heads are 4 blocks = 136 B, K and V;
    // 8000 positions padded to 8192 (llama.cpp pads n_ctx to 256).
    let q8 = spec(specs, "q8_0");
    assert_eq!(q8.positions().map(|p| p.count), Some(8192));
    assert_eq!(q8.bytes_per_row(), Ok(32 * 8 * (136 + 136) * 8192));
    assert_eq!(
        q8.geometry().map(|g| g.storage),
        Some(Storage::Blocks(BlockFormat::Q8_0))
    );
    // fp8 keys (64 B per head) and i4 values (32 B), 71 positions.
    let split = spec(specs, "fp8_keys");
    assert_eq!(split.bytes_per_row(), Ok(2 * 2 * (64 + 32) * 71));
    assert_eq!(
        split.positions().map(|p| p.reason()).as_deref(),
        Some("sliding_window(72) - 1")
    );
    assert_eq!(
        split.placement,
        Placement::Host("offloaded between steps".into())
    );
    // DeepSeek-V2-Lite's latent: 31,104 B per token, vLLM's sliding count:
    // min(4095 + 2048, 8192) = 6143 -> 384 blocks + 1 = 385 blocks of 16.
    let latent = spec(specs, "latent");
    assert_eq!(latent.positions().map(|p| p.count), Some(385 * 16));
    assert_eq!(latent.bytes_per_row(), Ok(31_104 * 385 * 16));
    assert!(matches!(latent.layout, Layout::Latent { .. }));
    // Jamba's Mamba state: 28 x (8192 x 4 + 8192 x 16) x 2 B per sequence.
    let mamba = spec(specs, "mamba");
    assert_eq!(mamba.positions(), None);
    assert_eq!(mamba.bytes_per_row(), Ok(28 * (8192 * 4 + 8192 * 16) * 2));
    assert_eq!(mamba.sharding, Sharding::Whole("test: not sharded".into()));
}

#[test]
fn after_load_modern_declarations_are_exact_and_validated() {
    let loaded = Loaded {
        state: RecurrentState::from_parts(36, vec![StatePart::gated_delta_ssm(32, 128, 128)]),
        latent: Latent::new(61, 512, 64, DType::BF16),
        tokens: 1000,
        format: Storage::Scaled {
            dtype: DType::F8E4M3,
            scale_bytes: 4,
        },
        window: 1024,
    };
    let collection = collect(&loaded);
    assert!(
        collection.skipped().is_empty(),
        "{:?}",
        collection.skipped()
    );
    let specs: Vec<KvSpec> = collection
        .entries()
        .iter()
        .map(|e| e.spec.clone())
        .collect();
    assert_eq!(
        spec(&specs, "state").bytes_per_row(),
        Ok(36 * 32 * 128 * 128 * 4)
    );
    // 1000 positions grown in steps of 512: a capacity of 1024.
    let latent = spec(&specs, "latent");
    assert_eq!(latent.bytes_per_row(), Ok(61 * 576 * 2 * 1024));
    assert!(matches!(
        latent.positions().map(|p| &p.bound),
        Some(Bound::Policy(PositionPolicy::GrowsBy {
            count: 1000,
            step: 512
        }))
    ));
    // fp8 with one f32 scale per head: 128 + 4 B per head, K and V; min(1024, 4096).
    assert_eq!(
        spec(&specs, "quantized").bytes_per_row(),
        Ok(4 * 2 * (132 + 132) * 1024)
    );
    // What is known before load: the policy as written, no positions for a state.
    let before = Loaded::KV_DECLS.after_load;
    assert_eq!(before[0].positions, None);
    assert_eq!(before[0].positions_bound, "no positions (recurrent state)");
    assert_eq!(
        before[1].positions_bound,
        "grows_by(self.tokens, step = 512)"
    );
}

#[test]
fn a_state_read_after_load_with_a_zero_dimension_declares_nothing_alone() {
    let loaded = Loaded {
        state: RecurrentState::from_parts(36, vec![StatePart::gated_delta_ssm(0, 128, 128)]),
        latent: Latent::new(61, 512, 64, DType::BF16),
        tokens: 1000,
        format: Storage::Dense(DType::BF16),
        window: 1024,
    };
    let collection = collect(&loaded);
    assert!(
        collection.skipped().is_empty(),
        "{:?}",
        collection.skipped()
    );
    let held: Vec<&str> = collection
        .entries()
        .iter()
        .map(|e| e.spec.name.as_ref())
        .collect();
    assert!(!held.contains(&"state"), "{held:?}");
    assert_eq!(held.len(), 2, "its siblings are kept: {held:?}");
    let empty = &collection.empty_declarations()[0];
    assert_eq!(empty.declaration(), "Loaded.state");
    assert_eq!(
        empty.reason(),
        "a state part with a zero dimension (or no parts) from `self.state.clone()`"
    );
}

#[test]
fn a_block_format_of_no_elements_read_after_load_is_an_error_not_empty() {
    let loaded = Loaded {
        state: RecurrentState::from_parts(36, vec![StatePart::gated_delta_ssm(32, 128, 128)]),
        latent: Latent::new(61, 512, 64, DType::BF16),
        tokens: 1000,
        format: Storage::Blocks(BlockFormat::new("broken", 0, 34)),
        window: 1024,
    };
    let collection = collect(&loaded);
    assert!(collection.empty_declarations().is_empty());
    assert_eq!(collection.skipped().len(), 1);
    assert_eq!(
        collection.skipped()[0].error.to_string(),
        "kv: `Loaded.quantized`: `kv_format` is 0; a cache with no extent declares nothing"
    );
}

/// `kv_format` gives the storage whole: no `dtype` needed.
#[derive(ModelLocalKv)]
#[kv(
    name = "kv",
    cache = "llama.cpp q4_0 cache",
    layers = 2, kv_heads = 4, head_dim = 64, kv_format = q4_0,
    positions = bounded(10, because = "n_ctx"),
    scope = request,
    rows = fixed(1, because = "one sequence"),
)]
struct NoDtype;

#[test]
fn a_format_without_a_dtype_and_a_state_in_the_table() {
    // q4_0: 18 B per 32 elements, 64-wide heads are 2 blocks = 36 B, K and V.
    let spec = &NoDtype::KV_DECLS.static_specs[0];
    assert_eq!(spec.bytes_per_row(), Ok(2 * 4 * (36 + 36) * 10));
    let table = kv_core::Table::new(1)
        .types(&[Loaded::KV_DECLS])
        .to_markdown();
    let state_row = table.lines().nth(2).unwrap();
    assert!(
        state_row.contains("| no positions (recurrent state) "),
        "{state_row}"
    );
}

/// Placement and sharding on a plain attention declaration, and a format read
/// after load beside literal positions.
#[derive(ModelLocalKv)]
#[kv(
    name = "offloaded",
    cache = "CPU-offloaded cache",
    layers = 2, kv_heads = 2, head_dim = 64, dtype = bf16,
    positions = bounded(16, because = "test"),
    scope = request,
    rows = max_num_seqs,
    on_host = "offloaded to CPU",
)]
#[kv(
    name = "encoder",
    cache = "encoder cache",
    layers = 2, kv_heads = 2, head_dim = 64, dtype = bf16,
    positions = bounded(16, because = "test"),
    scope = request,
    rows = max_num_seqs,
    whole_on_every_rank = "the encoder is not sharded",
)]
#[kv(
    name = "read_format",
    cache = "format read after load",
    layers = 2, kv_heads = 2, head_dim = 64, dtype = bf16, kv_format = self.format,
    positions = bounded(16, because = "test"),
    scope = request,
    rows = max_num_seqs,
)]
struct Placed {
    format: Storage,
}

#[test]
fn placement_sharding_and_a_format_read_after_load() {
    let specs = Placed::KV_DECLS.static_specs;
    assert_eq!(specs.len(), 2, "the third is read after load");
    assert_eq!(
        specs[0].placement,
        Placement::Host("offloaded to CPU".into())
    );
    assert_eq!(specs[0].sharding, Sharding::ByKind);
    assert_eq!(specs[1].placement, Placement::Device);
    assert_eq!(
        specs[1].sharding,
        Sharding::Whole("the encoder is not sharded".into())
    );
    let placed = Placed {
        format: Storage::Blocks(BlockFormat::Q8_0),
    };
    let collection = collect(&placed);
    let read = &collection.entries()[2].spec;
    assert_eq!(read.name, "read_format");
    assert_eq!(read.bytes_per_row(), Ok(2 * 2 * (68 + 68) * 16));
}

/// Counts read after load through a reference convert like the value.
#[derive(ModelLocalKv)]
#[kv(
    name = "by_reference",
    cache = "test",
    layers = &self.layers, kv_heads = 2, head_dim = 64, dtype = bf16,
    positions = bounded(&self.tokens, because = "test"),
    scope = request,
    rows = max_num_seqs,
)]
struct ByReference {
    layers: i32,
    tokens: u64,
}

#[test]
fn counts_read_through_a_reference() {
    let ok = collect(&ByReference {
        layers: 3,
        tokens: 5,
    });
    assert_eq!(
        ok.entries()[0].spec.bytes_per_row(),
        Ok(3 * 2 * 128 * 2 * 5)
    );
    let negative = collect(&ByReference {
        layers: -3,
        tokens: 5,
    });
    assert_eq!(
        negative.skipped()[0].error.to_string(),
        "kv: `ByReference.by_reference`: `layers` is -3; a count cannot be negative"
    );
}

/// vLLM's `--kv-cache-dtype` names, as `kv_format` takes them.
#[derive(ModelLocalKv)]
#[kv(
    name = "int8_heads",
    cache = "vLLM int8_per_token_head",
    layers = 32, kv_heads = 8, head_dim = 128, kv_format = int8_per_token_head,
    positions = bounded(16, because = "one block"),
    scope = request,
    rows = max_num_seqs,
)]
#[kv(
    name = "int4_heads",
    cache = "vLLM int4_per_token_head",
    layers = 32, kv_heads = 8, head_dim = 128, kv_format = int4_per_token_head,
    positions = bounded(16, because = "one block"),
    scope = request,
    rows = max_num_seqs,
)]
#[kv(
    name = "fp8",
    cache = "vLLM fp8",
    layers = 32, kv_heads = 8, head_dim = 128, dtype = bf16, kv_format = fp8, v_format = fp8_per_token_head,
    positions = bounded(16, because = "one block"),
    scope = request,
    rows = max_num_seqs,
)]
struct VllmFormats;

#[test]
fn vllm_format_names_are_storage_formats() {
    let specs = &VllmFormats::KV_DECLS.static_specs;
    let per_position = |i: usize| specs[i].layout.bytes_per_position().unwrap().unwrap();
    // Llama-3-8B's heads: 32 layers x 8 heads x (K + V), each head 128 B of
    // int8 + a 4 B float32 scale = 132 B: 32 x 8 x 2 x 132.
    assert_eq!(per_position(0), 67_584);
    // int4: 64 B + 4 B scale = 68 B a head: 32 x 8 x 2 x 68.
    assert_eq!(per_position(1), 34_816);
    // fp8 (e4m3) keys 128 B, fp8_per_token_head values 132 B: 32 x 8 x 260.
    assert_eq!(per_position(2), 66_560);
    assert_eq!(
        specs[0].layout.parts()[0].storage,
        Storage::INT8_PER_TOKEN_HEAD
    );
}
