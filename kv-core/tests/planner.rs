//! The planner is exact: its answer equals a brute-force search over
//! `max_num_seqs`, computed here from the declarations' dimensions by hand,
//! not by kv's byte math.

use kv_core::planner::{Allowance, SeqsThatFit, Utilization};
use kv_core::{collect, DType, Geometry, KvError, KvSpec, ModelLocalKv, Positions, Rows, Scope};
use proptest::prelude::*;

struct Model(Vec<KvSpec>);

impl ModelLocalKv for Model {
    fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
        out.extend(self.0.iter().cloned());
        Ok(())
    }
}

/// One declaration as the test knows it: its dimensions, rows and scope.
#[derive(Clone, Debug)]
struct Decl {
    layers: u64,
    heads: u64,
    head_dim: u64,
    positions: u64,
    fixed_rows: Option<u64>,
    resident: bool,
    host: bool,
}

impl Decl {
    /// Bytes per row, by hand: K and V, bf16.
    fn per_row(&self) -> u64 {
        2 * self.layers * self.heads * self.head_dim * 2 * self.positions
    }

    fn spec(&self, index: usize) -> KvSpec {
        let rows = match self.fixed_rows {
            Some(count) => Rows::fixed(count, "captured graphs"),
            None => Rows::MaxNumSeqs,
        };
        let scope = if self.resident {
            Scope::Model
        } else {
            Scope::Request
        };
        let spec = KvSpec::attention(
            format!("cache{index}"),
            "test",
            Geometry::new(self.layers, self.heads, self.head_dim, DType::BF16),
            Positions::bounded(self.positions, "test"),
            scope,
            rows,
        );
        if self.host {
            spec.on_host("offloaded")
        } else {
            spec
        }
    }
}

fn decl() -> impl Strategy<Value = Decl> {
    (
        1..4u64,
        1..4u64,
        1..65u64,
        1..100u64,
        prop::option::of(1..300u64),
        any::<bool>(),
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(layers, heads, head_dim, positions, fixed_rows, resident, host)| Decl {
                layers,
                heads,
                head_dim,
                positions,
                fixed_rows,
                resident,
                host,
            },
        )
}

/// Device bytes at `n` sequences, by hand.
fn device_bytes(decls: &[Decl], n: u64) -> u64 {
    decls
        .iter()
        .filter(|d| !d.host)
        .map(|d| d.per_row() * d.fixed_rows.unwrap_or(n))
        .sum()
}

/// After-profiling device bytes at `n`, by hand.
fn after_profiling(decls: &[Decl], n: u64) -> u64 {
    decls
        .iter()
        .filter(|d| !d.host && !d.resident)
        .map(|d| d.per_row() * d.fixed_rows.unwrap_or(n))
        .sum()
}

const SEARCH_LIMIT: u64 = 20_000;

proptest! {
    #[test]
    fn the_plan_equals_a_brute_force_search(
        decls in prop::collection::vec(decl(), 0..5),
        budget in 0..200_000_000u64,
    ) {
        let model = Model(decls.iter().enumerate().map(|(i, d)| d.spec(i)).collect());
        let plan = collect(&model).plan(Allowance::Bytes(budget));
        let fits = |n: u64| device_bytes(&decls, n) <= budget;
        let depends_on_n = decls.iter().any(|d| !d.host && d.fixed_rows.is_none());
        if !fits(0) {
            // The part that does not depend on max_num_seqs is over the budget.
            let err = plan.unwrap_err().to_string();
            prop_assert!(err.contains("no max_num_seqs fits"), "{}", err);
        } else if !depends_on_n {
            // Fixed-only: every value fits.
            let plan = plan.unwrap();
            prop_assert_eq!(plan.fits, SeqsThatFit::Any);
            prop_assert_eq!(plan.reserve, after_profiling(&decls, 0));
        } else if !fits(1) {
            let err = plan.unwrap_err().to_string();
            prop_assert!(err.contains("not one sequence fits"), "{}", err);
        } else {
            let plan = plan.unwrap();
            let best = (1..=SEARCH_LIMIT).take_while(|n| fits(*n)).last().unwrap();
            if best < SEARCH_LIMIT {
                prop_assert_eq!(plan.fits, SeqsThatFit::UpTo(best));
                prop_assert_eq!(plan.reserve, after_profiling(&decls, best));
                prop_assert_eq!(
                    plan.resident + plan.reserve,
                    device_bytes(&decls, best)
                );
            } else {
                // Past the search: check the answer fits and one more does not.
                let SeqsThatFit::UpTo(n) = plan.fits else {
                    return Err(TestCaseError::fail("expected a bound"));
                };
                prop_assert!(fits(n) && !fits(n + 1));
            }
        }
    }
}

#[test]
fn a_budget_from_memory_is_exact_and_never_wraps() {
    let ninety = Utilization::fraction(0.9).unwrap();
    assert_eq!(ninety.as_ppm(), 900_000);
    // 80 GiB x 0.9 - 60 GiB of weights.
    let budget = Allowance::FromMemory {
        total: 80 << 30,
        weights: 60 << 30,
        utilization: ninety,
    };
    assert_eq!(budget.bytes(), Ok((80u64 << 30) / 10 * 9 - (60 << 30)));
    // The largest device: u64::MAX x 100% is exact.
    let huge = Allowance::FromMemory {
        total: u64::MAX,
        weights: 0,
        utilization: Utilization::ppm(1_000_000).unwrap(),
    };
    assert_eq!(huge.bytes(), Ok(u64::MAX));
    // Weights above the usable memory: an error naming both, never a wrap.
    let over = Allowance::FromMemory {
        total: 1000,
        weights: 901,
        utilization: ninety,
    };
    assert_eq!(
        over.bytes().unwrap_err().to_string(),
        "kv: cannot plan: the weights (901 B) exceed the usable memory (900 B = 1000 B x 900000 ppm)"
    );
    for bad in [0.0, -0.5, 1.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert_eq!(
            Utilization::fraction(bad).unwrap_err().to_string(),
            format!("kv: cannot plan: utilization {bad} is outside (0, 1]"),
        );
    }
    assert_eq!(
        Utilization::fraction(1.0).map(|u| u.as_ppm()),
        Ok(1_000_000)
    );
    assert_eq!(Utilization::fraction(1e-6).map(|u| u.as_ppm()), Ok(1));
    assert!(Utilization::ppm(1_000_001).is_err());
    assert!(Utilization::ppm(0).is_err());
}

#[test]
fn the_plan_logs_one_line_like_vllms_maximum_concurrency() {
    let decl = Decl {
        layers: 8,
        heads: 16,
        head_dim: 64,
        positions: 71,
        fixed_rows: None,
        resident: false,
        host: false,
    };
    let pool = Decl {
        fixed_rows: Some(5),
        resident: true,
        ..decl.clone()
    };
    let model = Model(vec![decl.spec(0), pool.spec(1)]);
    // bf16 here: 2,326,528 B a row; the pool holds 5 rows.
    let plan = collect(&model).plan(Allowance::Bytes(1 << 30)).unwrap();
    assert_eq!(
        plan.fits,
        SeqsThatFit::UpTo((1_073_741_824 - 5 * 2_326_528) / 2_326_528)
    );
    assert_eq!(
        plan.to_string(),
        "Model-local KV plan: maximum max_num_seqs 456 in 1024.00 MiB of device memory \
         (fixed 11.09 MiB + 2.22 MiB per sequence); reserve 1011.75 MiB before sizing the \
         paged KV pool (11.09 MiB resident, already charged by profiling)"
    );
}
