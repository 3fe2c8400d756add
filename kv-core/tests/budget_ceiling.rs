//! Budgets are ceilings: under passes, over fails with the figures, and
//! removing a cache never fails a budget.

use std::borrow::Cow;

use kv_core::budget::{static_peak_bytes, within_budget};
use kv_core::units::{GIB, MIB};
use kv_core::{
    AfterLoadDecl, AfterLoadRows, Budget, DType, DeclaredKv, Geometry, KvError, KvSpec,
    KvTypeDecls, Positions, Rows, Scope,
};

const RETAINED_BYTES: u64 = 4_653_056;
const POOL_BYTES: u64 = 188_153_856;

/// Qwen3-TTS retained cache: 4,653,056 B a row, one row per sequence.
const RETAINED: KvSpec = KvSpec {
    name: Cow::Borrowed("retained"),
    cache: Cow::Borrowed("sliding DynamicCache"),
    geometry: Geometry::new(8, 16, 64, DType::F32),
    positions: Positions {
        count: 71,
        bound: Cow::Borrowed("sliding_window(72) - 1"),
    },
    scope: Scope::Request,
    rows: Rows::MaxNumSeqs,
    only_when: Some(Cow::Borrowed("async_chunk")),
    assumes: None,
    note: None,
};

/// The eager path's working copy, live alongside the retained one.
const WORKING: KvSpec = KvSpec {
    name: Cow::Borrowed("working"),
    scope: Scope::Invocation,
    ..RETAINED
};

/// MiMo-Audio graph pool: 188,153,856 B whatever max_num_seqs is.
const POOL: KvSpec = KvSpec {
    name: Cow::Borrowed("graph_pool"),
    cache: Cow::Borrowed("captured DynamicCache"),
    geometry: Geometry::new(16, 64, 16, DType::BF16),
    positions: Positions {
        count: 11,
        bound: Cow::Borrowed("group_size + max(delay_pattern)"),
    },
    scope: Scope::Model,
    rows: Rows::fixed(261, "sum of captured buckets (1,2,4,6,8,16,32,64,128)"),
    only_when: None,
    assumes: None,
    note: None,
};

/// A cache whose bytes per position overflow u64.
const HUGE: KvSpec = KvSpec {
    name: Cow::Borrowed("huge"),
    cache: Cow::Borrowed("StaticCache"),
    geometry: Geometry::new(u64::MAX, 2, 2, DType::F32),
    positions: Positions {
        count: 1,
        bound: Cow::Borrowed("test"),
    },
    scope: Scope::Model,
    rows: Rows::fixed(1, "test"),
    only_when: None,
    assumes: None,
    note: None,
};

struct Qwen3Tts;
impl DeclaredKv for Qwen3Tts {
    const KV_DECLS: KvTypeDecls = KvTypeDecls {
        type_name: "Qwen3Tts",
        static_specs: &[RETAINED, WORKING, POOL],
        after_load: &[AfterLoadDecl {
            name: "later",
            cache: "StaticCache",
            scope: Scope::Invocation,
            positions: Some(2048),
            positions_bound: "max_cache_len",
            bytes_per_row: None,
            rows: AfterLoadRows::Fixed {
                count: Some(1),
                because: "calls are serialized",
            },
            only_when: None,
            assumes: None,
        }],
    };
}

// Compiles only while under the ceiling: 2 x 256 x 4.44 MiB + 179.44 MiB = 2.40 GiB.
kv_core::assert_kv_budget!(Qwen3Tts, max_num_seqs = 256, ceiling = 3 * GIB);
kv_core::assert_kv_budget!(Qwen3Tts, max_num_seqs = 1, ceiling = 200 * MIB,);

const ALL: &[KvSpec] = &[RETAINED, WORKING, POOL];

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
    let with_huge = [RETAINED, HUGE];
    assert!(static_peak_bytes(&with_huge, 1).is_err());
    assert!(!within_budget(&with_huge, 1, u64::MAX));
    // Each peak fits, their sum does not.
    let mut half = POOL.clone();
    half.rows = Rows::fixed(u64::MAX / POOL.bytes_per_row().unwrap(), "test");
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
    assert_eq!(budget.check(ALL), Ok(2 * 256 * RETAINED_BYTES + POOL_BYTES));
    let exact = Budget {
        ceiling_bytes: 2 * 256 * RETAINED_BYTES + POOL_BYTES,
        ..budget
    };
    assert!(
        exact.check(ALL).is_ok(),
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
    let err = budget.check(ALL).unwrap_err();
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
        "kv: model-local KV over budget: 2570518528 bytes declared at \
         max_num_seqs=256, ceiling 2147483648 bytes"
    );
}

#[test]
fn run_time_overflow_names_the_declaration() {
    let budget = Budget {
        ceiling_bytes: u64::MAX,
        max_num_seqs: 1,
    };
    match budget.check([&RETAINED, &HUGE]) {
        Err(KvError::Overflow { declaration, step }) => {
            assert_eq!(declaration, "huge");
            assert!(step.starts_with("bytes per position"), "{step}");
        }
        other => panic!("expected an overflow, got {other:?}"),
    }
    let wide = Budget {
        ceiling_bytes: u64::MAX,
        max_num_seqs: u64::MAX,
    };
    match wide.check([&POOL, &RETAINED]) {
        Err(KvError::Overflow { declaration, step }) => {
            assert_eq!(declaration, "retained");
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
        assert_eq!(budget.check(ALL), Ok(peak));
        for subset in subsets(ALL) {
            let declared = budget.check(&subset);
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
    shrunk[0].positions.count -= 1;
    shrunk[2].rows = Rows::fixed(5, "fewer buckets captured");
    assert!(budget.check(&shrunk).is_ok());
    // Growing one does.
    let mut grown = ALL.to_vec();
    grown[0].positions.count += 1;
    assert!(matches!(
        budget.check(&grown),
        Err(KvError::OverBudget { .. })
    ));
}
