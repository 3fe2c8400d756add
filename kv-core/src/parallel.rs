//! What each rank holds under tensor and pipeline parallelism, and where a
//! declaration lives (device or host).
//!
//! The engines' rules, as vLLM applies them:
//! - attention KV heads are split across TP ranks; when `kv_heads < tp`
//!   every rank holds one head (replicated `tp / kv_heads` times);
//! - MLA latents are replicated on every TP rank;
//! - recurrent-state heads (the dimension a state part names as split) are
//!   split like attention heads;
//! - layers are split across PP stages by vLLM's `get_pp_indices`: equal
//!   parts, the remainder going one layer each to the stages before the last,
//!   from the second-to-last backwards;
//! - data-parallel replicas are independent engines: report each on its own.

use std::borrow::Cow;
use std::fmt;

use crate::error::KvError;
use crate::spec::layout::Layout;
use crate::spec::placement::Sharding;
use crate::spec::KvSpec;

/// The parallel layout a collection is evaluated for, and this rank's place
/// in it. [`Parallel::SINGLE`] (tp = pp = 1) leaves every figure as declared.
///
/// The engines' rules, as vLLM applies them:
/// - attention KV heads are split across TP ranks; when `kv_heads < tp`
///   every rank holds one head (replicated `tp / kv_heads` times);
/// - MLA latents are replicated on every TP rank;
/// - recurrent-state heads (the dimension a state part names as split) are
///   split like attention heads;
/// - layers are split across PP stages by vLLM's `get_pp_indices`
///   ([`Parallel::stage_layers`]); a hybrid group ([`LayerGroup`](crate::spec::LayerGroup)) holds the layers of
///   its kind in its stage's range of the model's layers;
/// - data-parallel replicas are independent engines: report each on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Parallel {
    /// Tensor-parallel size.
    pub tp: u64,
    /// Pipeline-parallel size.
    pub pp: u64,
    /// This rank's position among the TP ranks, `0..tp`.
    pub tp_rank: u64,
    /// This rank's pipeline stage, `0..pp`.
    pub pp_rank: u64,
}

impl Default for Parallel {
    fn default() -> Parallel {
        Parallel::SINGLE
    }
}

impl Parallel {
    /// One rank holding everything.
    pub const SINGLE: Parallel = Parallel {
        tp: 1,
        pp: 1,
        tp_rank: 0,
        pp_rank: 0,
    };

    /// A layout of `tp x pp` ranks, at rank (0, 0). Zero sizes are errors.
    ///
    /// ```
    /// let layout = kv_core::Parallel::new(2, 2)?.at(1, 0)?;
    /// assert_eq!(layout.to_string(), "tp=2 pp=2, rank tp=1 pp=0");
    /// assert!(kv_core::Parallel::new(0, 1).is_err());
    /// # Ok::<(), kv_core::KvError>(())
    /// ```
    pub fn new(tp: u64, pp: u64) -> Result<Parallel, KvError> {
        for (name, size) in [("tp", tp), ("pp", pp)] {
            if size == 0 {
                return Err(KvError::Parallel {
                    declaration: String::new(),
                    problem: format!("{name} is 0; a parallel size is at least 1"),
                });
            }
        }
        Ok(Parallel {
            tp,
            pp,
            tp_rank: 0,
            pp_rank: 0,
        })
    }

    /// The same layout at another rank; a rank outside the layout is an error.
    pub fn at(self, tp_rank: u64, pp_rank: u64) -> Result<Parallel, KvError> {
        for (name, rank, size) in [("tp", tp_rank, self.tp), ("pp", pp_rank, self.pp)] {
            if rank >= size {
                return Err(KvError::Parallel {
                    declaration: String::new(),
                    problem: format!(
                        "{name} rank {rank} is outside the layout: {name} ranks are 0..{size}"
                    ),
                });
            }
        }
        Ok(Parallel {
            tp_rank,
            pp_rank,
            ..self
        })
    }

    /// Whether one rank holds everything.
    pub const fn is_single(&self) -> bool {
        self.tp == 1 && self.pp == 1
    }

    /// Every rank of the layout, stage by stage.
    pub fn ranks(&self) -> impl Iterator<Item = Parallel> + '_ {
        (0..self.pp).flat_map(move |pp_rank| {
            (0..self.tp).map(move |tp_rank| Parallel {
                tp_rank,
                pp_rank,
                ..*self
            })
        })
    }
}

impl fmt::Display for Parallel {
    /// `tp=2 pp=2, rank tp=1 pp=0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tp={} pp={}, rank tp={} pp={}",
            self.tp, self.pp, self.tp_rank, self.pp_rank
        )
    }
}

impl Parallel {
    /// Layers per pipeline stage of this layout's `pp`, as vLLM's
    /// `get_pp_indices` cuts them: equal parts, the remainder one layer each
    /// to the stages before the last, from the second-to-last backwards (the
    /// last stage also runs the LM head).
    ///
    /// ```
    /// use kv_core::Parallel;
    ///
    /// assert_eq!(Parallel::new(1, 4)?.stage_layers(61)?, [15, 15, 16, 15]);
    /// assert_eq!(Parallel::new(2, 4)?.stage_layers(32)?, [8, 8, 8, 8]);
    /// assert!(Parallel::new(1, 4)?.stage_layers(3).is_err());
    /// # Ok::<(), kv_core::KvError>(())
    /// ```
    pub fn stage_layers(&self, layers: u64) -> Result<Vec<u64>, KvError> {
        pp_partition(layers, self.pp)
    }
}

/// [`Parallel::stage_layers`] for `pp` stages.
pub(crate) fn pp_partition(layers: u64, pp: u64) -> Result<Vec<u64>, KvError> {
    if pp == 0 {
        return Err(KvError::Parallel {
            declaration: String::new(),
            problem: "pp is 0; a parallel size is at least 1".into(),
        });
    }
    if pp > layers {
        return Err(KvError::Parallel {
            declaration: String::new(),
            problem: format!("pp {pp} is larger than the {layers} layers to split"),
        });
    }
    let stages = usize::try_from(pp).map_err(|_| KvError::Parallel {
        declaration: String::new(),
        problem: format!("pp {pp} does not fit in memory as a list of stages"),
    })?;
    let mut parts = vec![layers / pp; stages];
    let remaining = (layers % pp) as usize; // < pp, which fits in usize
    for i in 2..remaining + 2 {
        parts[stages - i] += 1;
    }
    Ok(parts)
}

/// What one rank holds of a declaration: the spec as the rank holds it, and
/// how it was divided, in words.
pub(crate) struct RankShare {
    pub(crate) spec: KvSpec,
    pub(crate) share: String,
}

/// `spec` as `parallel`'s rank holds it; `None` when its pipeline stage holds
/// none of its layers. `declaration` names it in errors (`Type.name`).
pub(crate) fn for_rank(
    spec: &KvSpec,
    parallel: Parallel,
    declaration: &str,
) -> Result<Option<RankShare>, KvError> {
    let error = |problem: String| KvError::Parallel {
        declaration: declaration.to_owned(),
        problem,
    };
    if parallel.is_single() {
        return Ok(Some(RankShare {
            spec: spec.clone(),
            share: String::new(),
        }));
    }
    // Tables beside the caches are not cut by layer or head: each rank
    // keeps its own copy.
    if let Layout::Tensors(_) = &spec.layout {
        return Ok(Some(RankShare {
            spec: spec.clone(),
            share: "model-local tensors: every rank keeps its own".to_owned(),
        }));
    }
    if let Sharding::Whole(because) = &spec.sharding {
        return Ok(Some(RankShare {
            spec: spec.clone(),
            share: format!("whole on every rank ({because})"),
        }));
    }
    let layers = spec.layout.layers();
    // Pipeline: the stage's layers of this declaration.
    let (held, stage_text) = match &spec.layer_group {
        Some(group) => {
            let model_layers = group.pattern.layers();
            let parts = pp_partition(model_layers, parallel.pp).map_err(|e| error(e.problem()))?;
            let start: u64 = parts[..parallel.pp_rank as usize].iter().sum();
            let end = start + parts[parallel.pp_rank as usize];
            let held = group.pattern.count_in(group.kind, start, end);
            let text = format!(
                "pp stage {} holds model layers {start}..{end} of {model_layers} (split {}), \
                 {held} of this group's {layers} {} layers",
                parallel.pp_rank,
                join(&parts),
                group.kind.name()
            );
            (held, text)
        }
        None => {
            let parts = pp_partition(layers, parallel.pp).map_err(|e| error(e.problem()))?;
            let held = parts[parallel.pp_rank as usize];
            let even = parts.iter().all(|p| *p == parts[0]);
            let text = format!(
                "pp stage {} holds {held} of {layers} layers ({} split {})",
                parallel.pp_rank,
                if even { "even" } else { "uneven" },
                join(&parts)
            );
            (held, text)
        }
    };
    if held == 0 {
        return Ok(None);
    }
    let mut out = spec.clone();
    let tp = parallel.tp;
    let tp_text = match &mut out.layout {
        Layout::Attention { geometry, .. } => {
            let heads = geometry.kv_heads;
            geometry.layers = held;
            if heads >= tp {
                if heads % tp != 0 {
                    return Err(error(format!(
                        "{heads} kv_heads do not split evenly over tp {tp}; engines require \
                         kv_heads % tp == 0 (or tp % kv_heads == 0 when kv_heads < tp)"
                    )));
                }
                geometry.kv_heads = heads / tp;
                format!("tp splits {heads} kv_heads into {} per rank", heads / tp)
            } else {
                if !tp.is_multiple_of(heads) {
                    return Err(error(format!(
                        "{heads} kv_heads cannot be replicated over tp {tp}; engines require \
                         tp % kv_heads == 0 when kv_heads < tp"
                    )));
                }
                geometry.kv_heads = 1;
                format!(
                    "{heads} kv_heads < tp {tp}: one head per rank, each replicated {} times",
                    tp / heads
                )
            }
        }
        Layout::Latent { latent, .. } => {
            latent.layers = held;
            format!("MLA latent replicated on all {tp} tp ranks")
        }
        // Returned whole above; as text, the same words.
        Layout::Tensors(_) => "model-local tensors: every rank keeps its own".to_owned(),
        Layout::Recurrent(state) => {
            state.layers = held;
            let mut parts = state.parts.to_vec();
            let mut split = Vec::new();
            for part in &mut parts {
                let Some(dim) = part.split else { continue };
                let name = part.name;
                let Some(size) = part.shape.get_mut(dim) else {
                    return Err(error(format!(
                        "state part `{name}` splits dimension {dim}, but its shape has 3"
                    )));
                };
                let size_before = *size;
                if size_before % tp != 0 {
                    return Err(error(format!(
                        "state part `{name}` has {size_before} heads/channels, which tp {tp} does \
                         not split evenly; engines require them divisible by tp"
                    )));
                }
                *size = size_before / tp;
                split.push(format!("{name} {size_before} -> {}", size_before / tp));
            }
            state.parts = Cow::Owned(parts);
            if split.is_empty() {
                format!("recurrent state replicated on all {tp} tp ranks")
            } else {
                format!("tp splits state heads: {}", split.join(", "))
            }
        }
    };
    Ok(Some(RankShare {
        spec: out,
        share: format!("{stage_text}; {tp_text}"),
    }))
}

fn join(parts: &[u64]) -> String {
    parts
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join("/")
}
