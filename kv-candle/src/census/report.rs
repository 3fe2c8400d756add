//! What a census saw, and what it says against the declarations.

use std::fmt;

use kv_core::{KvError, ModelLocalKv};

use super::tracker::{Finished, Phase};
use crate::check::{collection_lines, counted, signed_difference, DeclaredLine};
use crate::{Measure, Meter};

/// Bytes, and how many allocations hold them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Held {
    /// Bytes.
    pub bytes: u64,
    /// Allocations.
    pub allocations: u64,
}

impl Held {
    /// `bytes` in `allocations` allocations.
    pub const fn new(bytes: u64, allocations: u64) -> Held {
        Held { bytes, allocations }
    }

    /// Both summed; `None` on overflow.
    fn plus(self, other: Held) -> Option<Held> {
        Some(Held {
            bytes: self.bytes.checked_add(other.bytes)?,
            allocations: self.allocations.checked_add(other.allocations)?,
        })
    }
}

impl fmt::Display for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} B in {}",
            self.bytes,
            counted(self.allocations, "allocation")
        )
    }
}

/// One phase's figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PhaseFigures {
    /// The phase.
    pub phase: Phase,
    /// Live bytes at its end less live bytes at its start, over every
    /// allocation the census tracks (those of earlier phases freed during
    /// it included): negative when it freed more than it kept.
    pub growth: i128,
    /// The most live bytes above its start at any moment during it: what
    /// it held plus its transient copies.
    pub peak: u64,
    /// Allocations it made (a reallocation counts as one).
    pub allocations: u64,
    /// Bytes of those allocations.
    pub allocated: u64,
    /// Its allocations of at least the census's `min_allocation_bytes`
    /// still live when the census ended.
    pub held: Held,
    /// Its allocations below `min_allocation_bytes` still live then.
    pub small: Held,
    /// Its allocations set apart by [`CensusReport::set_apart`], any size.
    pub set_apart: Held,
}

/// One allocation live when the census ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Allocation {
    /// Its size, as requested from the allocator.
    pub bytes: u64,
    /// The phase that made it (for a reallocated block, the phase of its
    /// last reallocation).
    pub phase: Phase,
    /// What it was named as by [`CensusReport::name`] (the storage of a
    /// tensor reached through that value) or [`CensusReport::set_apart`].
    pub name: Option<String>,
    /// Set apart by [`CensusReport::set_apart`]: the model's own
    /// structure, not compared.
    pub set_apart: bool,
    address: usize,
}

impl Allocation {
    /// Which of a phase's sums it counts in.
    fn kind(&self, min: u64) -> Kind {
        if self.set_apart {
            Kind::SetApart
        } else if self.bytes >= min {
            Kind::Held
        } else {
            Kind::Small
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Held,
    Small,
    SetApart,
}

/// What a census saw: each phase's growth, and every allocation made by
/// the enlisted threads and live when the drive ended, largest first.
///
/// Allocations of at least [`min_allocation_bytes`](Self::min_allocation_bytes)
/// made in the build and drive phases are what [`held`](Self::held) sums and
/// what [`compare`](Self::compare) sets against the declarations; those
/// below it are bookkeeping (candle's per-tensor `Arc`s, shapes and strides,
/// the model's own `Vec`s and maps), summed apart by
/// [`bookkeeping`](Self::bookkeeping) and shown, never dropped. The weights
/// phase is summed apart by [`weights`](Self::weights).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CensusReport {
    /// The threshold between compared allocations and bookkeeping.
    pub min_allocation_bytes: u64,
    phases: [PhaseFigures; 3],
    allocations: Vec<Allocation>,
    held: Held,
    bookkeeping: Held,
    apart: Held,
    weights: Held,
}

/// `(held, small, set apart)` of the allocations that `phase` made.
fn sums(allocations: &[Allocation], phase: Phase, min: u64) -> Option<[Held; 3]> {
    let mut sums = [Held::default(); 3];
    for allocation in allocations.iter().filter(|a| a.phase == phase) {
        let slot = match allocation.kind(min) {
            Kind::Held => 0,
            Kind::Small => 1,
            Kind::SetApart => 2,
        };
        sums[slot] = sums[slot].plus(Held::new(allocation.bytes, 1))?;
    }
    Some(sums)
}

const OVERFLOW: &str = "kv-candle: the census's byte counts overflow u64";

impl CensusReport {
    /// The report of a finished census; an error if a count overflowed.
    pub(crate) fn new(finished: Finished, min_allocation_bytes: u64) -> candle_core::Result<Self> {
        if finished.overflow {
            candle_core::bail!("{OVERFLOW}");
        }
        let mut allocations: Vec<Allocation> = finished
            .live
            .into_iter()
            .map(|(address, live)| Allocation {
                bytes: live.bytes as u64,
                phase: live.phase,
                name: None,
                set_apart: false,
                address,
            })
            .collect();
        allocations
            .sort_by(|a, b| (b.bytes, a.phase, a.address).cmp(&(a.bytes, b.phase, b.address)));
        let mut phases = Phase::ALL.map(|phase| PhaseFigures {
            phase,
            growth: 0,
            peak: 0,
            allocations: 0,
            allocated: 0,
            held: Held::default(),
            small: Held::default(),
            set_apart: Held::default(),
        });
        for (figures, counters) in phases.iter_mut().zip(finished.phases) {
            figures.growth = i128::from(counters.end) - i128::from(counters.start);
            figures.peak = counters.peak.saturating_sub(counters.start);
            figures.allocations = counters.allocations;
            figures.allocated = counters.allocated;
        }
        let mut report = CensusReport {
            min_allocation_bytes,
            phases,
            allocations,
            held: Held::default(),
            bookkeeping: Held::default(),
            apart: Held::default(),
            weights: Held::default(),
        };
        report.sum()?;
        Ok(report)
    }

    /// Sums the allocations into each phase's figures and the totals.
    fn sum(&mut self) -> candle_core::Result<()> {
        let overflow = || candle_core::Error::Msg(OVERFLOW.to_owned());
        for figures in &mut self.phases {
            let [held, small, set_apart] =
                sums(&self.allocations, figures.phase, self.min_allocation_bytes)
                    .ok_or_else(overflow)?;
            (figures.held, figures.small, figures.set_apart) = (held, small, set_apart);
        }
        let [weights, build, drive] = &self.phases;
        self.held = build.held.plus(drive.held).ok_or_else(overflow)?;
        self.bookkeeping = build.small.plus(drive.small).ok_or_else(overflow)?;
        self.apart = build.set_apart.plus(drive.set_apart).ok_or_else(overflow)?;
        self.weights = weights
            .held
            .plus(weights.small)
            .and_then(|sum| sum.plus(weights.set_apart))
            .ok_or_else(overflow)?;
        Ok(())
    }

    /// Every allocation the enlisted threads made (weights included) and
    /// still live when the drive ended, largest first.
    pub fn allocations(&self) -> &[Allocation] {
        &self.allocations
    }

    /// One phase's figures.
    pub fn phase(&self, phase: Phase) -> &PhaseFigures {
        &self.phases[phase.index()]
    }

    /// Every phase's figures, in the order they ran.
    pub fn phases(&self) -> &[PhaseFigures] {
        &self.phases
    }

    /// Allocations of at least `min_allocation_bytes` made in the build and
    /// drive phases and live after the drive: the model-local state the
    /// declarations are compared with.
    pub fn held(&self) -> Held {
        self.held
    }

    /// Allocations below `min_allocation_bytes` made in the build and drive
    /// phases and live after the drive: reported, not compared.
    pub fn bookkeeping(&self) -> Held {
        self.bookkeeping
    }

    /// What the weights phase allocated and was still live after the drive,
    /// all sizes: measured apart, never compared.
    pub fn weights(&self) -> Held {
        self.weights
    }

    /// Names the live allocations behind the CPU tensors `value` holds
    /// (reached through [`Measure`]) as `name`, for the report's listing;
    /// returns what was newly named. An allocation named already keeps its
    /// first name; tensors whose storage the census did not see allocated
    /// (made before it, or by a thread it did not enlist) name nothing.
    /// Call it before the model changes: a freed address may be reused.
    /// `QTensor`s are not named (their buffer is not reachable).
    pub fn name<M: Measure + ?Sized>(
        &mut self,
        name: &str,
        value: &M,
    ) -> candle_core::Result<Held> {
        let mut meter = Meter::new();
        meter.add(value)?;
        self.mark(name, meter.buffers(), false)
    }

    /// Sets apart the allocation behind `buffer` (a `Vec`'s or a boxed
    /// slice's, by its address) as the model's own structure, named `name`:
    /// a `Vec` of layers, say, which the census cannot tell from a tensor's
    /// storage by its size. It is then reported apart, never compared, at
    /// any size; returns what was set apart (nothing if the census did not
    /// see the buffer allocated, or it is named already).
    pub fn set_apart<T>(&mut self, name: &str, buffer: &[T]) -> candle_core::Result<Held> {
        self.mark(name, &[buffer.as_ptr() as usize], true)
    }

    /// Sets apart the allocation `boxed` lives in (what a `Box`, `Rc` or
    /// `Arc` points at: `&*stage` for a `Box<dyn Stage>`), as
    /// [`set_apart`](Self::set_apart) does a buffer's: a stage or layer
    /// boxed as a trait object is the model's structure, not its state.
    pub fn set_apart_boxed<T: ?Sized>(
        &mut self,
        name: &str,
        boxed: &T,
    ) -> candle_core::Result<Held> {
        self.mark(name, &[boxed as *const T as *const () as usize], true)
    }

    fn mark(
        &mut self,
        name: &str,
        addresses: &[usize],
        set_apart: bool,
    ) -> candle_core::Result<Held> {
        let mut marked = Held::default();
        for &address in addresses {
            let found = self
                .allocations
                .iter_mut()
                .find(|a| a.address == address && a.name.is_none());
            if let Some(allocation) = found {
                allocation.name = Some(name.to_owned());
                allocation.set_apart = set_apart;
                let Some(sum) = marked.plus(Held::new(allocation.bytes, 1)) else {
                    candle_core::bail!("{OVERFLOW}");
                };
                marked = sum;
            }
        }
        self.sum()?;
        Ok(marked)
    }

    /// Allocations set apart by [`set_apart`](Self::set_apart) in the build
    /// and drive phases.
    pub fn set_apart_total(&self) -> Held {
        self.apart
    }

    /// Sets what `owner` and its children declare at `max_num_seqs` (summed
    /// by `kv_core::collect(owner).totals(max_num_seqs)`) against
    /// [`held`](Self::held). An owner or declaration the collector skipped
    /// is an error, not a smaller sum.
    pub fn compare(
        &self,
        owner: &dyn ModelLocalKv,
        max_num_seqs: u64,
    ) -> Result<Accounting, KvError> {
        let collection = kv_core::collect(owner);
        let lines = collection_lines(&collection, max_num_seqs)?;
        let declared = collection.totals(max_num_seqs)?.total;
        let held = self.held().bytes;
        Ok(Accounting {
            max_num_seqs,
            declared,
            held,
            unaccounted: i128::from(held) - i128::from(declared),
            lines,
            report: self.clone(),
        })
    }

    /// Panics with the diff unless what `owner` declares at `max_num_seqs`
    /// accounts for [`held`](Self::held) within `tolerance`; also panics
    /// when the declarations cannot be read (see [`compare`](Self::compare)).
    #[track_caller]
    pub fn assert_accounted(
        &self,
        owner: &dyn ModelLocalKv,
        max_num_seqs: u64,
        tolerance: Tolerance,
    ) {
        match self.compare(owner, max_num_seqs) {
            Ok(accounting) if accounting.within(tolerance) => {}
            Ok(accounting) => panic!(
                "kv-candle: the census does not account for what the model holds \
                 (tolerance: {tolerance}): {accounting}"
            ),
            Err(error) => panic!("kv-candle: cannot compare the census: {error}"),
        }
    }
}

/// Allocations grouped by size, phase and name.
fn groups<'a>(allocations: &[&'a Allocation]) -> Vec<(&'a Allocation, u64)> {
    let mut groups: Vec<(&Allocation, u64)> = Vec::new();
    for &allocation in allocations {
        match groups.iter_mut().find(|(first, _)| {
            first.bytes == allocation.bytes
                && first.phase == allocation.phase
                && first.name == allocation.name
        }) {
            Some((_, count)) => *count = count.saturating_add(1),
            None => groups.push((allocation, 1)),
        }
    }
    // Largest first; within a size, by phase, named before unnamed.
    groups.sort_by(|(a, _), (b, _)| {
        (b.bytes, a.phase, a.name.is_none(), &a.name).cmp(&(
            a.bytes,
            b.phase,
            b.name.is_none(),
            &b.name,
        ))
    });
    groups
}

/// Bookkeeping sizes shown before the rest are summed in one line.
const SMALL_GROUPS_SHOWN: usize = 6;

impl fmt::Display for CensusReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let min = self.min_allocation_bytes;
        let of_kind = |kind: Kind| -> Vec<&Allocation> {
            self.allocations
                .iter()
                .filter(|a| a.phase != Phase::Weights && a.kind(min) == kind)
                .collect()
        };
        writeln!(
            f,
            "held: {} of {min} B or more, made in build and drive, live after the drive",
            self.held()
        )?;
        for (allocation, count) in groups(&of_kind(Kind::Held)) {
            writeln!(
                f,
                "    {count} x {} B = {} B ({}; {})",
                allocation.bytes,
                allocation.bytes.saturating_mul(count),
                allocation.phase,
                allocation.name.as_deref().unwrap_or("unnamed"),
            )?;
        }
        let set_apart = of_kind(Kind::SetApart);
        if !set_apart.is_empty() {
            writeln!(
                f,
                "set apart: {} (the model's own structure, not compared)",
                self.set_apart_total()
            )?;
            for (allocation, count) in groups(&set_apart) {
                writeln!(
                    f,
                    "    {count} x {} B ({}; {})",
                    allocation.bytes,
                    allocation.phase,
                    allocation.name.as_deref().unwrap_or("unnamed"),
                )?;
            }
        }
        writeln!(
            f,
            "bookkeeping: {} under {min} B, made in build and drive, live after the drive (not compared)",
            self.bookkeeping()
        )?;
        let small = of_kind(Kind::Small);
        let small_groups = groups(&small);
        for (allocation, count) in small_groups.iter().take(SMALL_GROUPS_SHOWN) {
            writeln!(
                f,
                "    {count} x {} B ({})",
                allocation.bytes, allocation.phase
            )?;
        }
        let rest = small_groups.iter().skip(SMALL_GROUPS_SHOWN).fold(
            Held::default(),
            |sum, (a, count)| {
                Held::new(
                    sum.bytes.saturating_add(a.bytes.saturating_mul(*count)),
                    sum.allocations.saturating_add(*count),
                )
            },
        );
        if rest.allocations > 0 {
            writeln!(f, "    and {rest} of other sizes")?;
        }
        writeln!(
            f,
            "weights: {} live after the drive (measured apart, not compared)",
            self.weights()
        )?;
        for (index, phase) in self.phases.iter().enumerate() {
            let growth = if phase.growth < 0 {
                format!("{} B", phase.growth)
            } else {
                format!("+{} B", phase.growth)
            };
            write!(
                f,
                "phase {}: grew {growth} (peak +{} B; {} made, {} B)",
                phase.phase,
                phase.peak,
                counted(phase.allocations, "allocation"),
                phase.allocated,
            )?;
            if index + 1 < self.phases.len() {
                writeln!(f)?;
            }
        }
        Ok(())
    }
}

/// How far held bytes may be from declared bytes and still be accounted
/// for: within a number of bytes, or within a fraction of what is declared,
/// whichever allows more. [`Tolerance::EXACT`] allows nothing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    bytes: u64,
    fraction: f64,
}

impl Tolerance {
    /// Held must equal declared.
    pub const EXACT: Tolerance = Tolerance {
        bytes: 0,
        fraction: 0.0,
    };

    /// Within `bytes` either way.
    pub const fn bytes(bytes: u64) -> Tolerance {
        Tolerance {
            bytes,
            fraction: 0.0,
        }
    }

    /// Within `fraction` of the declared bytes either way (0.01 is 1%); an
    /// error unless `fraction` is finite and not negative.
    pub fn fraction(fraction: f64) -> Result<Tolerance, KvError> {
        Tolerance::EXACT.or_fraction(fraction)
    }

    /// This tolerance, or `fraction` of the declared bytes where that
    /// allows more; an error unless `fraction` is finite and not negative.
    pub fn or_fraction(self, fraction: f64) -> Result<Tolerance, KvError> {
        if !fraction.is_finite() || fraction < 0.0 {
            return Err(KvError::InvalidValue {
                declaration: String::from("census tolerance"),
                field: "fraction",
                problem: format!("is {fraction}; a tolerance is a finite fraction, 0 or more"),
            });
        }
        Ok(Tolerance { fraction, ..self })
    }

    /// Whether `unaccounted` bytes (held - declared) are within this
    /// tolerance of `declared`.
    pub fn allows(&self, declared: u64, unaccounted: i128) -> bool {
        let off = unaccounted.unsigned_abs();
        off <= u128::from(self.bytes) || off as f64 <= self.fraction * declared as f64
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let percent = self.fraction * 100.0;
        match (self.bytes, self.fraction > 0.0) {
            (0, false) => f.write_str("exact"),
            (bytes, false) => write!(f, "{bytes} B"),
            (0, true) => write!(f, "{percent}% of declared"),
            (bytes, true) => write!(f, "{bytes} B or {percent}% of declared"),
        }
    }
}

/// A census set against the declarations: [`CensusReport::compare`].
/// [`fmt::Display`] writes the diff.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Accounting {
    /// The `max_num_seqs` the declarations were evaluated at.
    pub max_num_seqs: u64,
    /// What the declarations sum to (`Collection::totals(..).total`).
    pub declared: u64,
    /// What the census held: [`CensusReport::held`].
    pub held: u64,
    /// `held - declared`: positive where the model holds bytes nothing
    /// declares, negative where it declares more than it holds.
    pub unaccounted: i128,
    /// Each declaration's figures.
    pub lines: Vec<DeclaredLine>,
    /// The census.
    pub report: CensusReport,
}

impl Accounting {
    /// Whether the unaccounted bytes are within `tolerance`.
    pub fn within(&self, tolerance: Tolerance) -> bool {
        tolerance.allows(self.declared, self.unaccounted)
    }
}

impl fmt::Display for Accounting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.unaccounted == 0 { "==" } else { "!=" };
        write!(
            f,
            "census held {} B {verdict} declared {} B at max_num_seqs={}",
            self.held, self.declared, self.max_num_seqs
        )?;
        if self.unaccounted != 0 {
            write!(
                f,
                "; unaccounted {}",
                signed_difference(self.declared, self.held)
            )?;
        }
        writeln!(f)?;
        for line in &self.lines {
            writeln!(f, "  {line}")?;
        }
        for line in self.report.to_string().lines() {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}
