//! A run: cases `start..start + cases` of one target and seed, each under
//! the memory bound (when the binary counts), a watchdog for hangs, and
//! `catch_unwind` for panics; the findings tallied.

use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::interesting::U64S;
use crate::rng::Rng;
use crate::targets::{Flags, Outcome, Target};
use crate::{alloc, config, gguf, report};

/// A case running longer than this is a hang: the run stops and names it.
pub const HANG_AFTER: Duration = Duration::from_secs(10);

/// What a run asks for.
#[derive(Clone, Debug)]
pub struct Plan {
    pub target: Target,
    pub seed: u64,
    pub start: u64,
    pub cases: u64,
    /// Where the inputs of findings are written (`TARGET-SEED-CASE.bin`).
    pub out: Option<PathBuf>,
}

/// One case that broke a property.
#[derive(Clone, Debug)]
pub struct Finding {
    pub case: u64,
    pub what: String,
}

/// A run's tallies.
#[derive(Debug, Default)]
pub struct Summary {
    pub cases: u64,
    /// Outcomes with a figure, and refusals.
    pub sized: u64,
    pub refused: u64,
    /// Outcomes read and rendered with no figure (reports).
    pub read: u64,
    pub panics: Vec<Finding>,
    /// A 0-byte figure for a model with layers.
    pub zero_figures: Vec<Finding>,
    /// The most one case held above what was live before it (0 when the
    /// binary does not count).
    pub most_bytes_held: usize,
    pub slowest: Duration,
    pub counting: bool,
    pub elapsed: Duration,
}

impl Summary {
    /// True when no property broke.
    pub fn clean(&self) -> bool {
        self.panics.is_empty() && self.zero_figures.is_empty()
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} cases in {:.1} s: {} figures, {} read, {} refusals; {} panics, 0 hangs (each case under {} s; slowest {:.1} ms), {} zero figures; most held by one case {}",
            self.cases,
            self.elapsed.as_secs_f64(),
            self.sized,
            self.read,
            self.refused,
            self.panics.len(),
            HANG_AFTER.as_secs(),
            self.slowest.as_secs_f64() * 1e3,
            self.zero_figures.len(),
            if self.counting {
                format!("{} B (bound {} B)", self.most_bytes_held, alloc::LIMIT_BYTES)
            } else {
                "not measured (no counting allocator)".to_owned()
            },
        )?;
        for finding in self.panics.iter().chain(&self.zero_figures).take(20) {
            writeln!(f, "  case {}: {}", finding.case, finding.what)?;
        }
        Ok(())
    }
}

/// The inputs of case `index`: the bytes, and for a report the other rank.
pub struct Inputs {
    gguf: Vec<gguf::Header>,
    configs: Vec<serde_json::Value>,
    reports: Vec<report::RankPair>,
}

impl Inputs {
    pub fn new() -> Inputs {
        let configs = config::seeds();
        Inputs {
            gguf: gguf::seeds(),
            reports: report::seeds(&configs),
            configs,
        }
    }

    /// Case `index`'s input, the other rank of a report, and the flags.
    pub fn case(&self, target: Target, seed: u64, index: u64) -> Case {
        let mut rng = Rng::for_case(seed, index);
        let (data, other) = match target {
            Target::Gguf => (gguf::case(&self.gguf, &mut rng), None),
            Target::Config => (config::case(&self.configs, &mut rng), None),
            Target::Report => {
                let (mine, other) = report::case(&self.reports, &mut rng);
                (mine, Some(other))
            }
        };
        Case {
            data,
            other,
            flags: flags(&mut rng),
        }
    }
}

/// One case: what `kv` is given.
pub struct Case {
    pub data: Vec<u8>,
    pub other: Option<Vec<u8>>,
    pub flags: Flags,
}

/// Flags as a user gives them: mostly usual values, one in four on a
/// boundary.
fn flags(rng: &mut Rng) -> Flags {
    let mut pick = |usual: u64| {
        if rng.one_in(4) {
            *rng.pick(U64S)
        } else {
            usual
        }
    };
    // Within the ranges `kv estimate`'s flags accept (clap refuses the
    // rest before any file is read).
    Flags {
        block_size: pick(16).max(1),
        positions: pick(4096).max(1),
        tensor_parallel: pick(2).clamp(1, 4096),
        max_num_seqs: pick(16).max(1),
        kv_cache_memory_bytes: pick(8 << 30),
        n_ctx: pick(4096) as u32,
        n_seq: pick(3) as u32,
        n_ubatch: pick(512) as u32,
    }
}

impl Default for Inputs {
    fn default() -> Inputs {
        Inputs::new()
    }
}

/// Runs `plan`. A hang ends the process (exit 3) naming the case: a
/// thread cannot be stopped from outside.
pub fn run(plan: &Plan) -> Summary {
    let inputs = Inputs::new();
    let counting = alloc::counting();
    let begun = Instant::now();
    // Milliseconds since `begun` at which the running case started, and
    // its index; u64::MAX when none runs.
    let started = Arc::new(AtomicU64::new(u64::MAX));
    let current = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let watchdog = {
        let (started, current, done) = (started.clone(), current.clone(), done.clone());
        let name = format!("{} seed {}", plan.target.name(), plan.seed);
        std::thread::spawn(move || watch(&name, begun, &started, &current, &done))
    };
    let last_panic: Arc<Mutex<String>> = Arc::default();
    let previous_hook = panic::take_hook();
    {
        let last_panic = last_panic.clone();
        panic::set_hook(Box::new(move |info| {
            if let Ok(mut slot) = last_panic.lock() {
                *slot = info.to_string();
            }
        }));
    }
    let mut summary = Summary {
        counting,
        ..Summary::default()
    };
    for index in plan.start..plan.start.saturating_add(plan.cases) {
        let Case { data, other, flags } = inputs.case(plan.target, plan.seed, index);
        current.store(index, Ordering::Relaxed);
        let case_begun = Instant::now();
        started.store(begun.elapsed().as_millis() as u64, Ordering::Relaxed);
        let before = alloc::begin_case(index);
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            plan.target.run(&data, other.as_deref(), &flags)
        }));
        let held = alloc::end_case(before);
        started.store(u64::MAX, Ordering::Relaxed);
        summary.slowest = summary.slowest.max(case_begun.elapsed());
        summary.most_bytes_held = summary.most_bytes_held.max(held);
        summary.cases += 1;
        match result {
            Ok(outcomes) => {
                let mut zero_seen = false;
                for outcome in outcomes {
                    match outcome {
                        Outcome::Sized {
                            what,
                            bytes: 0,
                            layers,
                        } if layers > 0 => {
                            // One finding per case, the first figure.
                            if std::mem::replace(&mut zero_seen, true) {
                                continue;
                            }
                            keep(plan, index, &data);
                            summary.zero_figures.push(Finding {
                                case: index,
                                what: format!("{what}: 0 bytes for a model of {layers} layers"),
                            });
                        }
                        Outcome::Sized { .. } => summary.sized += 1,
                        Outcome::Refused(_) => summary.refused += 1,
                        Outcome::Read => summary.read += 1,
                    }
                }
            }
            Err(_) => {
                keep(plan, index, &data);
                let what = last_panic.lock().map(|m| m.clone()).unwrap_or_default();
                summary.panics.push(Finding {
                    case: index,
                    what: format!("panic: {what}"),
                });
            }
        }
    }
    panic::set_hook(previous_hook);
    done.store(1, Ordering::Relaxed);
    let _ = watchdog.join();
    summary.elapsed = begun.elapsed();
    summary
}

fn watch(name: &str, begun: Instant, started: &AtomicU64, current: &AtomicU64, done: &AtomicU64) {
    while done.load(Ordering::Relaxed) == 0 {
        std::thread::sleep(Duration::from_millis(200));
        let at = started.load(Ordering::Relaxed);
        let now = begun.elapsed().as_millis() as u64;
        if at != u64::MAX && now.saturating_sub(at) > HANG_AFTER.as_millis() as u64 {
            eprintln!(
                "kv-fuzz: {name}: case {} ran past {} s (a hang); rerun it alone with --start {} --cases 1 --out DIR",
                current.load(Ordering::Relaxed),
                HANG_AFTER.as_secs(),
                current.load(Ordering::Relaxed)
            );
            std::process::exit(3);
        }
    }
}

/// Writes a finding's input under `plan.out`, where given.
fn keep(plan: &Plan, index: u64, data: &[u8]) {
    if let Some(dir) = &plan.out {
        let name = format!("{}-{}-{index}.bin", plan.target.name(), plan.seed);
        let _ = std::fs::create_dir_all(dir);
        let _ = std::fs::write(Path::new(dir).join(name), data);
    }
}
