//! How many sequences fit, and what an engine should reserve, per rank.
//!
//! Model-local KV on a device is `fixed + per_seq x max_num_seqs` bytes: the
//! declarations with fixed rows give `fixed`, those with `max_num_seqs` rows
//! give `per_seq`. Only device-placed declarations count. The planner finds
//! the largest `max_num_seqs` whose device bytes fit the budget, and the
//! part an engine's memory profile did not see (everything but scope
//! `model`), which it must reserve before sizing its paged KV pool.

use std::fmt;

use crate::collection::collect::Collection;
use crate::error::KvError;
use crate::parallel::Parallel;
use crate::spec::Rows;
use crate::units::mib;

/// The device bytes model-local KV may take on one rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Allowance {
    /// This many bytes, as given.
    Bytes(u64),
    /// `floor(total x utilization) - weights`, as vLLM sizes the memory it
    /// may use (`gpu_memory_utilization`), less the weights.
    FromMemory {
        /// The device's memory.
        total: u64,
        /// What the weights (and anything else already resident) take.
        weights: u64,
        /// The fraction of `total` the engine may use.
        utilization: Utilization,
    },
}

/// A fraction in parts per million, so budgets are computed exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Utilization {
    ppm: u64,
}

impl Utilization {
    /// `ppm` parts per million; more than 1,000,000 or 0 is an error.
    pub fn ppm(ppm: u64) -> Result<Utilization, KvError> {
        if ppm == 0 || ppm > 1_000_000 {
            return Err(KvError::Plan {
                problem: format!(
                    "utilization {ppm} ppm is outside (0, 1,000,000]: a fraction of the memory"
                ),
            });
        }
        Ok(Utilization { ppm })
    }

    /// A fraction such as vLLM's `gpu_memory_utilization` 0.9, rounded to the
    /// nearest part per million (0.9 is exactly 900,000 ppm).
    pub fn fraction(fraction: f64) -> Result<Utilization, KvError> {
        if !(fraction.is_finite() && fraction > 0.0 && fraction <= 1.0) {
            return Err(KvError::Plan {
                problem: format!("utilization {fraction} is outside (0, 1]"),
            });
        }
        // In (0, 1e6] after the check above, so the cast neither wraps nor saturates.
        Utilization::ppm((fraction * 1e6).round() as u64)
    }

    /// Parts per million.
    pub fn as_ppm(&self) -> u64 {
        self.ppm
    }
}

impl Allowance {
    /// The bytes this budget allows; weights above the usable memory are an
    /// error, never a wrap.
    pub fn bytes(&self) -> Result<u64, KvError> {
        match *self {
            Allowance::Bytes(bytes) => Ok(bytes),
            Allowance::FromMemory {
                total,
                weights,
                utilization,
            } => {
                // total x ppm fits in u128; the floor of the division is the
                // whole bytes the fraction allows (a part of a byte is not memory).
                let usable = u128::from(total) * u128::from(utilization.ppm) / 1_000_000;
                let usable = u64::try_from(usable).map_err(|_| KvError::Plan {
                    problem: "usable memory overflows u64".into(),
                })?;
                usable.checked_sub(weights).ok_or_else(|| KvError::Plan {
                    problem: format!(
                        "the weights ({weights} B) exceed the usable memory ({usable} B = \
                         {total} B x {} ppm)",
                        utilization.ppm
                    ),
                })
            }
        }
    }
}

/// The largest `max_num_seqs` that fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqsThatFit {
    /// Up to this many sequences fit.
    UpTo(u64),
    /// Nothing depends on `max_num_seqs` and the fixed part fits: every value fits.
    Any,
}

/// What fits on one rank, and what to reserve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Plan {
    /// The rank planned for.
    pub parallel: Parallel,
    /// The device bytes model-local KV may take.
    pub budget: u64,
    /// Device bytes that do not depend on `max_num_seqs`.
    pub fixed: u64,
    /// Device bytes each sequence adds.
    pub per_seq: u64,
    /// The largest `max_num_seqs` that fits.
    pub fits: SeqsThatFit,
    /// Device bytes allocated after profiling at that `max_num_seqs` (for
    /// [`SeqsThatFit::Any`], the fixed after-profiling part): what an engine
    /// reserves before sizing its paged KV pool.
    pub reserve: u64,
    /// Device bytes of scope `model`, already charged by profiling, at that
    /// `max_num_seqs`.
    pub resident: u64,
}

impl Collection {
    /// The largest `max_num_seqs` whose device model-local KV fits `budget`
    /// on this collection's rank (see [`Collection::for_rank`]), and the
    /// bytes to reserve. Errors: a budget below the part that does not depend
    /// on `max_num_seqs`, a budget too small for one sequence, and byte math
    /// that overflows; never zero or a wrap.
    ///
    /// ```
    /// use kv_core::planner::{Allowance, SeqsThatFit};
    /// use kv_core::{DType, Geometry, KvError, KvSpec, ModelLocalKv, Positions, Rows, Scope};
    ///
    /// struct Decoder;
    /// impl ModelLocalKv for Decoder {
    ///     fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
    ///         out.push(KvSpec::attention(
    ///             "retained", "sliding DynamicCache", Geometry::new(8, 16, 64, DType::F32),
    ///             Positions::bounded(71, "sliding_window(72) - 1"), Scope::Request, Rows::MaxNumSeqs,
    ///         ));
    ///         Ok(())
    ///     }
    /// }
    /// let plan = kv_core::collect(&Decoder).plan(Allowance::Bytes(1 << 30))?;
    /// // 4,653,056 B a sequence: 230 fit in 1 GiB.
    /// assert_eq!(plan.fits, SeqsThatFit::UpTo(230));
    /// assert_eq!(plan.reserve, 230 * 4_653_056);
    /// # Ok::<(), KvError>(())
    /// ```
    pub fn plan(&self, budget: Allowance) -> Result<Plan, KvError> {
        let budget = budget.bytes()?;
        let mut fixed: u64 = 0;
        let mut per_seq: u64 = 0;
        // The same split for the after-profiling part alone.
        let (mut after_fixed, mut after_per_seq) = (0u64, 0u64);
        for entry in self.entries() {
            let spec = &entry.spec;
            if !spec.placement.is_device() {
                continue;
            }
            let overflow = |step: &'static str| KvError::Overflow {
                declaration: entry.declaration(),
                step,
            };
            let per_row = spec.bytes_per_row().map_err(|o| overflow(o.step))?;
            let after = !spec.scope.is_resident();
            match spec.rows {
                Rows::MaxNumSeqs => {
                    per_seq = add(per_seq, per_row, &overflow)?;
                    if after {
                        after_per_seq = add(after_per_seq, per_row, &overflow)?;
                    }
                }
                Rows::Fixed { count, .. } => {
                    let peak = per_row
                        .checked_mul(count)
                        .ok_or_else(|| overflow("peak bytes (rows x bytes per row)"))?;
                    fixed = add(fixed, peak, &overflow)?;
                    if after {
                        after_fixed = add(after_fixed, peak, &overflow)?;
                    }
                }
            }
        }
        let room = budget.checked_sub(fixed).ok_or_else(|| KvError::Plan {
            problem: format!(
                "the budget of {budget} B is below the {fixed} B of model-local KV that does \
                 not depend on max_num_seqs; no max_num_seqs fits"
            ),
        })?;
        let fits = match room.checked_div(per_seq) {
            None => SeqsThatFit::Any,
            Some(0) => {
                return Err(KvError::Plan {
                    problem: format!(
                        "not one sequence fits: {per_seq} B per sequence, {room} B left of the \
                         {budget} B budget after the {fixed} B that does not depend on max_num_seqs"
                    ),
                })
            }
            Some(n) => SeqsThatFit::UpTo(n),
        };
        let seqs = match fits {
            SeqsThatFit::UpTo(n) => n,
            SeqsThatFit::Any => 0,
        };
        // Each product is at most per_seq x n <= room: none overflows.
        let reserve = after_fixed + after_per_seq * seqs;
        let resident = (fixed - after_fixed) + (per_seq - after_per_seq) * seqs;
        Ok(Plan {
            parallel: self.parallel(),
            budget,
            fixed,
            per_seq,
            fits,
            reserve,
            resident,
        })
    }

    /// [`Collection::plan`], logged as one line at `info` (or the error at
    /// `warn`); never panics.
    pub fn log_plan(&self, budget: Allowance) -> Result<Plan, KvError> {
        let plan = self.plan(budget);
        match &plan {
            Ok(plan) => log::info!("{plan}"),
            Err(error) => log::warn!("{error}"),
        }
        plan
    }
}

fn add(sum: u64, bytes: u64, overflow: &dyn Fn(&'static str) -> KvError) -> Result<u64, KvError> {
    sum.checked_add(bytes)
        .ok_or_else(|| overflow("sum of device bytes"))
}

impl fmt::Display for Plan {
    /// One line, modeled on vLLM's `Maximum concurrency for N tokens per
    /// request: X.XXx`:
    ///
    /// `Model-local KV plan: maximum max_num_seqs 230 in 1024.00 MiB of device memory
    /// (fixed 0.00 MiB + 4.44 MiB per sequence); reserve 1020.51 MiB before sizing the paged KV pool`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Model-local KV plan")?;
        if !self.parallel.is_single() {
            write!(f, " ({})", self.parallel)?;
        }
        match self.fits {
            SeqsThatFit::UpTo(n) => write!(f, ": maximum max_num_seqs {n}")?,
            SeqsThatFit::Any => f.write_str(": any max_num_seqs fits")?,
        }
        write!(
            f,
            " in {:.2} MiB of device memory (fixed {:.2} MiB + {:.2} MiB per sequence); \
             reserve {:.2} MiB before sizing the paged KV pool ({:.2} MiB resident, already \
             charged by profiling)",
            mib(self.budget),
            mib(self.fixed),
            mib(self.per_seq),
            mib(self.reserve),
            mib(self.resident)
        )
    }
}
