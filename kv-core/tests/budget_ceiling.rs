//! Budgets are ceilings: under passes, over fails with the figures, and
//! removing a cache never fails a budget.

use kv_core::budget::Budget;
use kv_core::budget::{static_peak_bytes, within_budget};
use kv_core::collection::Collected;
use kv_core::declare::DeclaredKv;
use kv_core::spec::Layout;
use kv_core::units::{GIB, MIB};
use kv_core::{DType, Geometry, KvError, KvSpec, ModelLocalKv, Positions, Rows, Scope};

const RETAINED_BYTES: u64 = 4_653_056;
const POOL_BYTES: u64 = 188_153_856;

/// Qwen3-TTS's retained cache and working copy (4,653,056 B a row, one row per
/// sequence), MiMo-Audio's graph pool (188,153,856 B whatever max_num_seqs
/// is), and one declaration read after load.
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
    name = "working",
    cache = "sliding DynamicCache",
    layers = 8, kv_heads = 16, head_dim = 64, dtype = f32,
    positions = bounded(71, because = "sliding_window(72) - 1"),
    scope = invocation,
    rows = max_num_seqs,
    only_when = "async_chunk",
)]
#[kv(
    name = "graph_pool",
    cache = "captured DynamicCache",
    layers = 16, kv_heads = 64, head_dim = 16, dtype = bf16,
    positions = bounded(11, because = "group_size + max(delay_pattern)"),
    scope = model,
    rows = fixed(261, because = "sum of captured buckets (1,2,4,6,8,16,32,64,128)"),
)]
#[kv(
    name = "later",
    cache = "StaticCache",
    geometry = self.talker,
    positions = bounded(2048, because = "max_cache_len"),
    scope = invocation,
    rows = fixed(1, because = "calls are serialized"),
)]
struct Qwen3Tts {
    async_chunk: bool,
    talker: Geometry,
}

const ALL: &[KvSpec] = Qwen3Tts::KV_DECLS.static_specs;

/// `specs` as collected entries of `Qwen3Tts`.
fn entries(specs: &[KvSpec]) -> Vec<Collected> {
    specs
        .iter()
        .map(|spec| Collected::new("", "budget_ceiling::Qwen3Tts", spec.clone()))
        .collect()
}

/// A cache whose bytes per position overflow u64.
fn huge() -> KvSpec {
    KvSpec::attention(
        "huge",
        "StaticCache",
        Geometry::new(u64::MAX, 2, 2, DType::F32),
        Positions::bounded(1, "test"),
        Scope::Model,
        Rows::fixed(1, "test"),
    )
}

fn set_positions(spec: &mut KvSpec, change: impl FnOnce(&mut u64)) {
    if let Layout::Attention { positions, .. } = &mut spec.layout {
        change(&mut positions.count);
    }
}

// Compiles only while under the ceiling: 2 x 256 x 4.44 MiB + 179.44 MiB = 2.40 GiB.
kv_core::assert_kv_budget!(Qwen3Tts, max_num_seqs = 256, ceiling = 3 * GIB);
kv_core::assert_kv_budget!(Qwen3Tts, max_num_seqs = 1, ceiling = 200 * MIB,);

#[test]
fn static_peak_sums_every_declaration_gated_ones_included() {
    const PEAK: Result<u64, kv_core::Overflow> =
        static_peak_bytes(Qwen3Tts::KV_DECLS.static_specs, 256);
    assert_eq!(PEAK, Ok(2 * 256 * RETAINED_BYTES + POOL_BYTES));
    assert_eq!(static_peak_bytes(&[], 256), Ok(0));
    assert_eq!(static_peak_bytes(ALL, 0), Ok(POOL_BYTES));
}

#[test]
fn static_budget_is_a_ceiling() {
    let peak = 2 * 256 * RETAINED_BYTES + POOL_BYTES;
    assert!(
        within_budget(ALL, 256, peak),
        "a peak equal to the ceiling is within"
    );
    assert!(within_budget(ALL, 256, u64::MAX));
    assert!(!within_budget(ALL, 256, peak - 1));
    // Usable in const items: the same answers at compile time.
    const AT_3_GIB_AND_2_GIB: [bool; 2] = [
        within_budget(ALL, 256, 3 * GIB),
        within_budget(ALL, 256, 2 * GIB),
    ];
    assert_eq!(AT_3_GIB_AND_2_GIB, [true, false]);
}

#[test]
fn overflow_is_never_within_a_budget() {
    let with_huge = [ALL[0].clone(), huge()];
    assert!(static_peak_bytes(&with_huge, 1).is_err());
    assert!(!within_budget(&with_huge, 1, u64::MAX));
    // Each peak fits, their sum does not.
    let mut half = ALL[2].clone();
    half.rows = Rows::fixed(u64::MAX / ALL[2].bytes_per_row().unwrap(), "test");
    let pair = [half.clone(), half];
    assert_eq!(
        static_peak_bytes(&pair, 1).unwrap_err().step,
        "total peak bytes (sum over declarations)"
    );
    assert!(!within_budget(&pair, 1, u64::MAX));
}

#[test]
fn run_time_budget_under_its_ceiling_returns_the_peak() {
    let budget = Budget {
        ceiling_bytes: 3 * GIB,
        max_num_seqs: 256,
    };
    assert_eq!(
        budget.check(&entries(ALL)),
        Ok(2 * 256 * RETAINED_BYTES + POOL_BYTES)
    );
    let exact = Budget {
        ceiling_bytes: 2 * 256 * RETAINED_BYTES + POOL_BYTES,
        ..budget
    };
    assert!(
        exact.check(&entries(ALL)).is_ok(),
        "a peak equal to the ceiling is within"
    );
}

#[test]
fn run_time_budget_over_its_ceiling_names_the_figures() {
    let budget = Budget {
        ceiling_bytes: 2 * GIB,
        max_num_seqs: 256,
    };
    let declared = 2 * 256 * RETAINED_BYTES + POOL_BYTES;
    let err = budget.check(&entries(ALL)).unwrap_err();
    assert_eq!(
        err,
        KvError::OverBudget {
            declared,
            ceiling: 2 * GIB,
            max_num_seqs: 256,
        }
    );
    assert_eq!(
        err.to_string(),
        "kv: model-local KV over budget: 2570518528 device bytes declared at \
         max_num_seqs=256, ceiling 2147483648 bytes"
    );
}

#[test]
fn run_time_overflow_names_the_declaration() {
    let budget = Budget {
        ceiling_bytes: u64::MAX,
        max_num_seqs: 1,
    };
    match budget.check(&entries(&[ALL[0].clone(), huge()])) {
        Err(KvError::Overflow { declaration, step }) => {
            assert_eq!(declaration, "Qwen3Tts.huge");
            assert!(step.starts_with("bytes per position"), "{step}");
        }
        other => panic!("expected an overflow, got {other:?}"),
    }
    let wide = Budget {
        ceiling_bytes: u64::MAX,
        max_num_seqs: u64::MAX,
    };
    match wide.check(&entries(&[ALL[2].clone(), ALL[0].clone()])) {
        Err(KvError::Overflow { declaration, step }) => {
            assert_eq!(declaration, "Qwen3Tts.retained");
            assert_eq!(step, "peak bytes (rows x bytes per row)");
        }
        other => panic!("expected an overflow, got {other:?}"),
    }
}

/// Every subset of the declarations, in order.
fn subsets(specs: &[KvSpec]) -> Vec<Vec<KvSpec>> {
    (0..1u32 << specs.len())
        .map(|mask| {
            (0..specs.len())
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| specs[i].clone())
                .collect()
        })
        .collect()
}

#[test]
fn removing_a_cache_never_fails_a_budget() {
    for max_num_seqs in [0, 1, 256, 4096] {
        let peak = static_peak_bytes(ALL, max_num_seqs).unwrap();
        // The tightest ceiling the full set passes.
        let budget = Budget {
            ceiling_bytes: peak,
            max_num_seqs,
        };
        assert_eq!(budget.check(&entries(ALL)), Ok(peak));
        for subset in subsets(ALL) {
            let declared = budget.check(&entries(&subset));
            assert!(
                declared.is_ok(),
                "{subset:?} at {max_num_seqs}: {declared:?}"
            );
            assert!(within_budget(&subset, max_num_seqs, peak));
        }
    }
}

#[test]
fn shrinking_a_cache_never_fails_a_budget() {
    let budget = Budget {
        ceiling_bytes: static_peak_bytes(ALL, 256).unwrap(),
        max_num_seqs: 256,
    };
    let mut shrunk = ALL.to_vec();
    set_positions(&mut shrunk[0], |count| *count -= 1);
    shrunk[2].rows = Rows::fixed(5, "fewer buckets captured");
    assert!(budget.check(&entries(&shrunk)).is_ok());
    // Growing one does.
    let mut grown = ALL.to_vec();
    set_positions(&mut grown[0], |count| *count += 1);
    assert!(matches!(
        budget.check(&entries(&grown)),
        Err(KvError::OverBudget { .. })
    ));
}
