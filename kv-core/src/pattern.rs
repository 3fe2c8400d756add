//! Hybrid layer patterns: for a model of `L` layers, which layers are of which
//! kind (sliding or full attention, linear attention, Mamba), and how many of
//! each, so that no one counts them by hand. See [`LayerPattern`].

use core::fmt;
use std::borrow::Cow;

use crate::error::KvError;

/// What a layer holds, as HF configs name it in `layer_types` /
/// `layers_block_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LayerKind {
    /// `"full_attention"`; Jamba's `layers_block_type` spells it `"attention"`
    /// (transformers' `JambaConfig.layer_types` maps `"attention"` to
    /// `"full_attention"`).
    FullAttention,
    /// `"sliding_attention"`: attention over a window (`sliding_window`).
    SlidingAttention,
    /// `"chunked_attention"`: attention within fixed chunks (Llama 4).
    ChunkedAttention,
    /// `"linear_attention"`: a recurrent linear-attention layer (Qwen3-Next's
    /// Gated DeltaNet).
    LinearAttention,
    /// `"mamba"`: a Mamba (state-space) layer.
    Mamba,
    /// `"conv"`: a gated short-convolution layer (LFM2's `ShortConv`), whose
    /// state is the last `conv_L_cache - 1` inputs.
    ShortConv,
    /// `"hybrid"`: a Mamba layer that also runs attention, with a cache of
    /// each (Zamba2's `hybrid` layers, beside a shared attention block;
    /// Falcon-H1's every layer).
    Hybrid,
    /// `"mlp"` (also `"moe"`): an MLP or mixture-of-experts block alone, no
    /// attention and no state, so it holds no cache (Nemotron-H's `-` and
    /// `E` layers).
    Mlp,
    /// `"kv_shared"`: a layer that reads an earlier layer's K/V and holds none
    /// of its own (Gemma-3n's last `num_kv_shared_layers`). Not a
    /// `layer_types` name: [`LayerKind::from_name`] does not accept it.
    KvShared,
}

impl LayerKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [LayerKind; 9] = [
        LayerKind::FullAttention,
        LayerKind::SlidingAttention,
        LayerKind::ChunkedAttention,
        LayerKind::LinearAttention,
        LayerKind::Mamba,
        LayerKind::ShortConv,
        LayerKind::Hybrid,
        LayerKind::Mlp,
        LayerKind::KvShared,
    ];

    /// The name as `layer_types` writes it: `"full_attention"`, `"mamba"`, ...
    pub const fn name(self) -> &'static str {
        match self {
            LayerKind::FullAttention => "full_attention",
            LayerKind::SlidingAttention => "sliding_attention",
            LayerKind::ChunkedAttention => "chunked_attention",
            LayerKind::LinearAttention => "linear_attention",
            LayerKind::Mamba => "mamba",
            LayerKind::ShortConv => "conv",
            LayerKind::Hybrid => "hybrid",
            LayerKind::Mlp => "mlp",
            LayerKind::KvShared => "kv_shared",
        }
    }

    /// Parses a `layer_types` / `layers_block_type` entry; `"attention"` is
    /// full attention, `"moe"` an MLP layer. `None` for any other name:
    /// nothing is guessed.
    pub fn from_name(name: &str) -> Option<LayerKind> {
        match name {
            "attention" => return Some(LayerKind::FullAttention),
            "moe" => return Some(LayerKind::Mlp),
            _ => {}
        }
        LayerKind::ALL
            .into_iter()
            .filter(|kind| *kind != LayerKind::KvShared)
            .find(|kind| kind.name() == name)
    }

    /// The accepted names, comma separated, for error messages.
    pub fn names_list() -> String {
        let mut names: Vec<&str> = LayerKind::ALL
            .iter()
            .filter(|kind| **kind != LayerKind::KvShared)
            .map(|k| k.name())
            .collect();
        names.extend(["attention", "moe"]);
        names.join(", ")
    }
}

impl fmt::Display for LayerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A layer pattern that cannot be: no layers, a zero interval or period, an
/// offset the period never reaches. Carries only numbers, so the `const fn`
/// constructors can return it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PatternError {
    /// The model has no layers (`layers` is 0, or the list is empty).
    NoLayers,
    /// `every` is 0: "one layer in every 0th" has no meaning.
    ZeroInterval,
    /// `period` is 0.
    ZeroPeriod,
    /// `offset >= period`: `i % period` never equals `offset`. Jamba's config
    /// rejects it too.
    OffsetNotBelowPeriod {
        /// The offset given.
        offset: u64,
        /// The period given.
        period: u64,
    },
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternError::NoLayers => f.write_str("a layer pattern needs at least one layer"),
            PatternError::ZeroInterval => {
                f.write_str("the interval is 0; one layer in every N needs N >= 1")
            }
            PatternError::ZeroPeriod => f.write_str("the period is 0; it must be at least 1"),
            PatternError::OffsetNotBelowPeriod { offset, period } => write!(
                f,
                "the offset {offset} is not below the period {period}; `i % {period}` \
                 is never {offset}"
            ),
        }
    }
}

impl std::error::Error for PatternError {}

impl From<PatternError> for KvError {
    fn from(error: PatternError) -> KvError {
        KvError::Config {
            what: "layer pattern",
            problem: error.to_string(),
        }
    }
}

/// Which layers of a model are of which [`LayerKind`], and how many of each.
///
/// Built by a rule ([`every_nth`](LayerPattern::every_nth),
/// [`period_offset`](LayerPattern::period_offset)) or from an explicit list
/// ([`from_kinds`](LayerPattern::from_kinds)). With feature `json`,
/// `HfConfig::layer_pattern` builds one from a config.
///
/// The rules follow the configs that define them, in HuggingFace transformers'
/// `src/transformers/models/{gemma3,qwen3_next,jamba}/configuration_*.py`:
///
/// | rule | constructor | source |
/// |---|---|---|
/// | layer `i` is of the `nth` kind when `(i + 1) % every == 0` | [`LayerPattern::every_nth`] | `Gemma3TextConfig`: `"sliding_attention" if bool((i + 1) % self._sliding_window_pattern) else "full_attention"`; `Qwen3NextConfig`: `"linear_attention" if bool((i + 1) % interval_pattern) else "full_attention"` with `interval_pattern = full_attention_interval` |
/// | layer `i` is of the `at` kind when `i % period == offset` | [`LayerPattern::period_offset`] | `JambaConfig.layers_block_type`: `"attention" if i % self.attn_layer_period == self.attn_layer_offset else "mamba"`; `_check_supported_offset` rejects `offset >= period` |
/// | one kind per layer, listed | [`LayerPattern::from_kinds`] | `layer_types` (`Gemma3TextConfig`, `Qwen3NextConfig`, ...), `layers_block_type` (transformers' `JambaConfig.layers_block_type`; vLLM's Jamba and Nemotron-H models pick each layer's class from it). Names kv does not know (Nemotron-H's `"mlp"` / `"moe"`, `"multihead_latent_attention"`) are left to the caller: `from_name` returns `None` |
///
/// Every count is computed from the rule, not by walking the layers, and the
/// prose of [`LayerPattern::reason`] is generated from the same inputs, so the
/// two cannot disagree.
///
/// ```
/// use kv_core::LayerPattern;
/// use kv_core::pattern::LayerKind;
///
/// // Gemma-3-27B: 62 layers, `sliding_window_pattern` 6.
/// let gemma = LayerPattern::every_nth(
///     62, 6, LayerKind::FullAttention, LayerKind::SlidingAttention, "sliding_window_pattern",
/// )?;
/// assert_eq!(gemma.count(LayerKind::SlidingAttention), 52);
/// assert_eq!(gemma.count(LayerKind::FullAttention), 10);
/// assert_eq!(
///     gemma.reason(),
///     "every 6th layer is full_attention ((i + 1) % 6 == 0), the rest sliding_attention \
///      (sliding_window_pattern 6): 52 sliding_attention, 10 full_attention of 62 layers"
/// );
///
/// // Jamba-v0.1: attention where i % 8 == 4, Mamba elsewhere.
/// let jamba = LayerPattern::period_offset(
///     32, 8, 4, LayerKind::FullAttention, LayerKind::Mamba,
///     ("attn_layer_period", "attn_layer_offset"),
/// )?;
/// assert_eq!(jamba.groups(), vec![(LayerKind::Mamba, 28), (LayerKind::FullAttention, 4)]);
/// # Ok::<(), kv_core::pattern::PatternError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LayerPattern {
    layers: u64,
    rule: Rule,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Rule {
    EveryNth {
        every: u64,
        nth: LayerKind,
        rest: LayerKind,
        key: &'static str,
    },
    PeriodOffset {
        period: u64,
        offset: u64,
        at: LayerKind,
        rest: LayerKind,
        keys: (&'static str, &'static str),
    },
    List {
        kinds: Vec<LayerKind>,
        key: Cow<'static, str>,
    },
}

impl LayerPattern {
    /// Layer `i` (0-based) is `nth` when `(i + 1) % every == 0`, else `rest`:
    /// the last layer of each run of `every` is `nth`. Gemma-3's
    /// `sliding_window_pattern` (`nth` full, `rest` sliding) and Qwen3-Next's
    /// `full_attention_interval` (`nth` full, `rest` linear) both read this
    /// way. `key` names where `every` came from, for [`reason`](Self::reason).
    ///
    /// `every` 1 makes every layer `nth`; `every > layers` makes none.
    /// Errors: `layers` 0, `every` 0.
    pub const fn every_nth(
        layers: u64,
        every: u64,
        nth: LayerKind,
        rest: LayerKind,
        key: &'static str,
    ) -> Result<LayerPattern, PatternError> {
        if layers == 0 {
            return Err(PatternError::NoLayers);
        }
        if every == 0 {
            return Err(PatternError::ZeroInterval);
        }
        Ok(LayerPattern {
            layers,
            rule: Rule::EveryNth {
                every,
                nth,
                rest,
                key,
            },
        })
    }

    /// Layer `i` (0-based) is `at` when `i % period == offset`, else `rest`
    /// (Jamba's `attn_layer_period` / `attn_layer_offset`, `at` attention,
    /// `rest` Mamba). `keys` names where period and offset came from.
    ///
    /// Errors: `layers` 0, `period` 0, `offset >= period`.
    pub const fn period_offset(
        layers: u64,
        period: u64,
        offset: u64,
        at: LayerKind,
        rest: LayerKind,
        keys: (&'static str, &'static str),
    ) -> Result<LayerPattern, PatternError> {
        if layers == 0 {
            return Err(PatternError::NoLayers);
        }
        if period == 0 {
            return Err(PatternError::ZeroPeriod);
        }
        if offset >= period {
            return Err(PatternError::OffsetNotBelowPeriod { offset, period });
        }
        Ok(LayerPattern {
            layers,
            rule: Rule::PeriodOffset {
                period,
                offset,
                at,
                rest,
                keys,
            },
        })
    }

    /// One kind per layer, in layer order (`layer_types`,
    /// `layers_block_type`). `key` names the list (or says how it was
    /// built). Error: an empty list.
    pub fn from_kinds(
        kinds: Vec<LayerKind>,
        key: impl Into<Cow<'static, str>>,
    ) -> Result<LayerPattern, PatternError> {
        if kinds.is_empty() {
            return Err(PatternError::NoLayers);
        }
        Ok(LayerPattern {
            layers: kinds.len() as u64,
            rule: Rule::List {
                kinds,
                key: key.into(),
            },
        })
    }

    /// The number of layers.
    pub const fn layers(&self) -> u64 {
        self.layers
    }

    /// The key (or keys, `"a/b"` for period and offset) the pattern was
    /// built from.
    pub fn source(&self) -> String {
        match &self.rule {
            Rule::EveryNth { key, .. } => (*key).to_owned(),
            Rule::List { key, .. } => key.to_string(),
            Rule::PeriodOffset { keys, .. } => format!("{}/{}", keys.0, keys.1),
        }
    }

    /// The kind of layer `layer` (0-based); `None` past the last layer.
    pub fn kind_of(&self, layer: u64) -> Option<LayerKind> {
        if layer >= self.layers {
            return None;
        }
        Some(match &self.rule {
            Rule::EveryNth {
                every, nth, rest, ..
            } => {
                // layer < layers <= u64::MAX, so layer + 1 cannot overflow.
                if (layer + 1).is_multiple_of(*every) {
                    *nth
                } else {
                    *rest
                }
            }
            Rule::PeriodOffset {
                period,
                offset,
                at,
                rest,
                ..
            } => {
                if layer % period == *offset {
                    *at
                } else {
                    *rest
                }
            }
            Rule::List { kinds, .. } => *kinds.get(usize::try_from(layer).ok()?)?,
        })
    }

    /// Every layer's kind, in order. Lazy: a rule over many layers costs
    /// nothing until iterated.
    pub fn kinds(&self) -> impl Iterator<Item = LayerKind> + '_ {
        (0..self.layers).filter_map(move |layer| self.kind_of(layer))
    }

    /// The 0-based indices of the layers of `kind`, in order. Lazy.
    pub fn indices(&self, kind: LayerKind) -> impl Iterator<Item = u64> + '_ {
        (0..self.layers).filter(move |layer| self.kind_of(*layer) == Some(kind))
    }

    /// How many layers of `kind` lie in `start..end` (0-based, end
    /// exclusive, clamped to the pattern). Rules are counted by formula.
    pub fn count_in(&self, kind: LayerKind, start: u64, end: u64) -> u64 {
        let end = end.min(self.layers);
        if start >= end {
            return 0;
        }
        // Layers below `x` that a rule marks, by formula.
        let marked_below = |x: u64| -> u64 {
            match &self.rule {
                // (i + 1) % every == 0 for i < x: the multiples of `every` in 1..=x.
                Rule::EveryNth { every, .. } => x / every,
                Rule::PeriodOffset { period, offset, .. } => {
                    x / period + u64::from(x % period > *offset)
                }
                Rule::List { .. } => 0,
            }
        };
        match &self.rule {
            Rule::EveryNth { nth, rest, .. } | Rule::PeriodOffset { at: nth, rest, .. } => {
                let marked = marked_below(end) - marked_below(start);
                let mut count = 0;
                if kind == *nth {
                    count += marked;
                }
                if kind == *rest {
                    count += (end - start) - marked;
                }
                count
            }
            Rule::List { kinds, .. } => {
                let (Ok(start), Ok(end)) = (usize::try_from(start), usize::try_from(end)) else {
                    return 0;
                };
                kinds.get(start..end).map_or(0, |slice| {
                    slice.iter().filter(|k| **k == kind).count() as u64
                })
            }
        }
    }

    /// How many layers are of `kind` (0 if none).
    pub fn count(&self, kind: LayerKind) -> u64 {
        self.groups()
            .into_iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, n)| n)
            .sum()
    }

    /// Each kind present with its count, in order of first appearance; the
    /// counts sum to [`layers`](Self::layers). Rules are counted by formula.
    pub fn groups(&self) -> Vec<(LayerKind, u64)> {
        let mut groups: Vec<(LayerKind, u64)> = Vec::new();
        let mut add = |kind: LayerKind, count: u64| {
            if count == 0 {
                return;
            }
            match groups.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, n)) => *n += count,
                None => groups.push((kind, count)),
            }
        };
        match &self.rule {
            Rule::EveryNth {
                every, nth, rest, ..
            } => {
                // Layer 0 is `rest` unless every == 1, and then there is no `rest`.
                let nths = self.layers / every;
                let rests = self.layers - nths;
                add(*rest, rests);
                add(*nth, nths);
            }
            Rule::PeriodOffset {
                period,
                offset,
                at,
                rest,
                ..
            } => {
                // i in 0..layers with i % period == offset: offset, offset + period, ...
                let ats = if self.layers > *offset {
                    (self.layers - 1 - offset) / period + 1
                } else {
                    0
                };
                let rests = self.layers - ats;
                if *offset == 0 {
                    add(*at, ats);
                    add(*rest, rests);
                } else {
                    add(*rest, rests);
                    add(*at, ats);
                }
            }
            Rule::List { kinds, .. } => {
                for kind in kinds {
                    add(*kind, 1);
                }
            }
        }
        groups
    }

    /// The rule in words with its counts, generated from the same inputs as
    /// the counts: e.g. `"every 6th layer is full_attention ((i + 1) % 6 == 0),
    /// the rest sliding_attention (sliding_window_pattern 6): 52
    /// sliding_attention, 10 full_attention of 62 layers"`.
    pub fn reason(&self) -> String {
        let rule = match &self.rule {
            Rule::EveryNth {
                every,
                nth,
                rest,
                key,
            } => format!(
                "every {} layer is {nth} ((i + 1) % {every} == 0), the rest {rest} ({key} {every})",
                ordinal(*every)
            ),
            Rule::PeriodOffset {
                period,
                offset,
                at,
                rest,
                keys,
            } => format!(
                "layer i is {at} where i % {period} == {offset}, the rest {rest} \
                 ({} {period}, {} {offset})",
                keys.0, keys.1
            ),
            Rule::List { key, .. } => format!("one kind per layer ({key})"),
        };
        let counts: Vec<String> = self
            .groups()
            .iter()
            .map(|(kind, count)| format!("{count} {kind}"))
            .collect();
        format!("{rule}: {} of {} layers", counts.join(", "), self.layers)
    }
}

impl fmt::Display for LayerPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason())
    }
}

/// `1st`, `2nd`, `3rd`, `4th`, `11th`, `12th`, `13th`, `21st`, ...
fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use LayerKind::{
        FullAttention as Full, LinearAttention as Linear, Mamba, SlidingAttention as Sliding,
    };

    /// The rule constructors are `const fn`: the pattern can be a constant
    /// (its `Result`, as a list-backed pattern cannot be dropped in a `const`).
    const GEMMA_3_27B: Result<LayerPattern, PatternError> =
        LayerPattern::every_nth(62, 6, Full, Sliding, "sliding_window_pattern");

    fn walk_count(pattern: &LayerPattern, kind: LayerKind) -> u64 {
        pattern.kinds().filter(|k| *k == kind).count() as u64
    }

    #[test]
    fn gemma_3_27b_has_52_sliding_and_10_global_layers() {
        let gemma = GEMMA_3_27B.unwrap();
        assert_eq!(gemma.layers(), 62);
        assert_eq!(gemma.count(Sliding), 52);
        assert_eq!(gemma.count(Full), 10);
        assert_eq!(gemma.groups(), vec![(Sliding, 52), (Full, 10)]);
        let globals: Vec<u64> = gemma.indices(Full).collect();
        assert_eq!(globals, vec![5, 11, 17, 23, 29, 35, 41, 47, 53, 59]);
        assert_eq!(gemma.kind_of(5), Some(Full));
        assert_eq!(gemma.kind_of(61), Some(Sliding));
        assert_eq!(gemma.kind_of(62), None);
        assert_eq!(
            gemma.reason(),
            "every 6th layer is full_attention ((i + 1) % 6 == 0), the rest sliding_attention \
             (sliding_window_pattern 6): 52 sliding_attention, 10 full_attention of 62 layers"
        );
        assert_eq!(gemma.to_string(), gemma.reason());
        assert_eq!(gemma.source(), "sliding_window_pattern");
    }

    #[test]
    fn qwen3_next_has_12_full_and_36_linear_layers() {
        let qwen = LayerPattern::every_nth(48, 4, Full, Linear, "full_attention_interval").unwrap();
        assert_eq!(qwen.count(Full), 12);
        assert_eq!(qwen.count(Linear), 36);
        assert_eq!(qwen.indices(Full).next(), Some(3));
        assert!(qwen
            .reason()
            .starts_with("every 4th layer is full_attention"));
        assert!(qwen
            .reason()
            .ends_with(": 36 linear_attention, 12 full_attention of 48 layers"));
    }

    #[test]
    fn jamba_has_4_attention_and_28_mamba_layers() {
        let jamba = LayerPattern::period_offset(
            32,
            8,
            4,
            Full,
            Mamba,
            ("attn_layer_period", "attn_layer_offset"),
        )
        .unwrap();
        assert_eq!(jamba.count(Full), 4);
        assert_eq!(jamba.count(Mamba), 28);
        assert_eq!(jamba.indices(Full).collect::<Vec<_>>(), vec![4, 12, 20, 28]);
        assert_eq!(
            jamba.reason(),
            "layer i is full_attention where i % 8 == 4, the rest mamba (attn_layer_period 8, \
             attn_layer_offset 4): 28 mamba, 4 full_attention of 32 layers"
        );
        assert_eq!(jamba.source(), "attn_layer_period/attn_layer_offset");
    }

    #[test]
    fn formulas_match_walking_the_layers() {
        for layers in 1..40u64 {
            for every in 1..10u64 {
                let p = LayerPattern::every_nth(layers, every, Full, Sliding, "k").unwrap();
                for kind in [Full, Sliding, Mamba] {
                    assert_eq!(p.count(kind), walk_count(&p, kind), "{layers} {every}");
                }
                let first = p.kinds().next().unwrap();
                assert_eq!(p.groups()[0].0, first);
                for offset in 0..every {
                    let p =
                        LayerPattern::period_offset(layers, every, offset, Full, Mamba, ("p", "o"))
                            .unwrap();
                    for kind in [Full, Mamba, Linear] {
                        assert_eq!(p.count(kind), walk_count(&p, kind));
                    }
                    assert_eq!(p.groups()[0].0, p.kinds().next().unwrap());
                    let total: u64 = p.groups().iter().map(|(_, n)| n).sum();
                    assert_eq!(total, layers);
                }
            }
        }
    }

    #[test]
    fn edge_intervals_count_without_overflow() {
        let all = LayerPattern::every_nth(5, 1, Full, Sliding, "k").unwrap();
        assert_eq!(all.groups(), vec![(Full, 5)]);
        let none = LayerPattern::every_nth(5, 9, Full, Sliding, "k").unwrap();
        assert_eq!(none.groups(), vec![(Sliding, 5)]);
        let huge = LayerPattern::every_nth(u64::MAX, 2, Full, Sliding, "k").unwrap();
        assert_eq!(huge.count(Full), u64::MAX / 2);
        assert_eq!(huge.count(Sliding), u64::MAX - u64::MAX / 2);
        assert_eq!(huge.kind_of(u64::MAX - 1), Some(Sliding));
        let po =
            LayerPattern::period_offset(u64::MAX, u64::MAX, u64::MAX - 1, Full, Mamba, ("p", "o"))
                .unwrap();
        assert_eq!(po.count(Full), 1);
        let short = LayerPattern::period_offset(3, 8, 4, Full, Mamba, ("p", "o")).unwrap();
        assert_eq!(short.groups(), vec![(Mamba, 3)]);
    }

    #[test]
    fn impossible_patterns_are_errors() {
        assert_eq!(
            LayerPattern::every_nth(0, 6, Full, Sliding, "k"),
            Err(PatternError::NoLayers)
        );
        assert_eq!(
            LayerPattern::every_nth(62, 0, Full, Sliding, "k"),
            Err(PatternError::ZeroInterval)
        );
        assert_eq!(
            LayerPattern::period_offset(32, 0, 0, Full, Mamba, ("p", "o")),
            Err(PatternError::ZeroPeriod)
        );
        let err = LayerPattern::period_offset(32, 8, 8, Full, Mamba, ("p", "o")).unwrap_err();
        assert_eq!(
            err,
            PatternError::OffsetNotBelowPeriod {
                offset: 8,
                period: 8
            }
        );
        assert_eq!(
            err.to_string(),
            "the offset 8 is not below the period 8; `i % 8` is never 8"
        );
        assert_eq!(
            LayerPattern::from_kinds(Vec::new(), "layer_types"),
            Err(PatternError::NoLayers)
        );
        let kv: KvError = PatternError::ZeroPeriod.into();
        assert!(matches!(
            kv,
            KvError::Config {
                what: "layer pattern",
                ..
            }
        ));
    }

    #[test]
    fn lists_count_and_describe_every_kind() {
        let kinds = [Sliding, Sliding, Full, LayerKind::ChunkedAttention, Sliding];
        let p = LayerPattern::from_kinds(kinds.to_vec(), "layer_types").unwrap();
        assert_eq!(p.layers(), 5);
        assert_eq!(
            p.groups(),
            vec![(Sliding, 3), (Full, 1), (LayerKind::ChunkedAttention, 1)]
        );
        assert_eq!(p.kinds().collect::<Vec<_>>(), kinds.to_vec());
        assert_eq!(
            p.reason(),
            "one kind per layer (layer_types): 3 sliding_attention, 1 full_attention, \
             1 chunked_attention of 5 layers"
        );
    }

    #[test]
    fn names_parse_as_hf_writes_them() {
        for kind in LayerKind::ALL {
            let parsed = LayerKind::from_name(kind.name());
            // A shared layer is kv's word, never a layer_types entry.
            let expected = (kind != LayerKind::KvShared).then_some(kind);
            assert_eq!(parsed, expected);
        }
        assert!(!LayerKind::names_list().contains("kv_shared"));
        assert_eq!(LayerKind::from_name("attention"), Some(Full));
        // Zamba2's `layers_block_type` and LFM2's `layer_types` spell these.
        assert_eq!(LayerKind::from_name("hybrid"), Some(LayerKind::Hybrid));
        assert_eq!(LayerKind::from_name("conv"), Some(LayerKind::ShortConv));
        assert_eq!(LayerKind::from_name("Mamba"), None);
        assert_eq!(LayerKind::from_name("mlp"), Some(LayerKind::Mlp));
        assert_eq!(LayerKind::from_name("moe"), Some(LayerKind::Mlp));
        assert!(LayerKind::names_list().ends_with("mamba, conv, hybrid, mlp, attention, moe"));
    }

    #[test]
    fn ordinals_read_as_english() {
        let words: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            words,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st",
                "111th"
            ]
        );
    }

    #[test]
    fn count_in_a_range_matches_a_walk_of_the_layers() {
        let rules = [
            LayerPattern::every_nth(
                62,
                6,
                LayerKind::FullAttention,
                LayerKind::SlidingAttention,
                "sliding_window_pattern",
            )
            .unwrap(),
            LayerPattern::period_offset(
                32,
                8,
                4,
                LayerKind::FullAttention,
                LayerKind::Mamba,
                ("attn_layer_period", "attn_layer_offset"),
            )
            .unwrap(),
            LayerPattern::from_kinds(
                vec![
                    LayerKind::Mamba,
                    LayerKind::FullAttention,
                    LayerKind::Mamba,
                    LayerKind::Mamba,
                ],
                "layers_block_type",
            )
            .unwrap(),
        ];
        for pattern in &rules {
            for kind in LayerKind::ALL {
                for start in 0..=pattern.layers() + 1 {
                    for end in start..=pattern.layers() + 2 {
                        let walked = (start..end.min(pattern.layers()))
                            .filter(|i| pattern.kind_of(*i) == Some(kind))
                            .count() as u64;
                        assert_eq!(pattern.count_in(kind, start, end), walked);
                    }
                }
            }
        }
        // Gemma-3-27B over two pipeline stages of 31: 5 global layers each.
        assert_eq!(rules[0].count_in(LayerKind::FullAttention, 0, 31), 5);
        assert_eq!(rules[0].count_in(LayerKind::FullAttention, 31, 62), 5);
    }
}
