//! How many positions a cache holds and why: a count with a stated reason, or
//! a policy that computes the count from its inputs and writes its own reason,
//! so the two cannot disagree.

use std::borrow::Cow;
use std::fmt;

use crate::error::Overflow;

/// How many positions (tokens) a cache holds at most, and why.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Positions {
    /// Positions held at peak.
    pub count: u64,
    /// What bounds them. Never `max_model_len` by default: each cache names
    /// its own mechanism.
    pub bound: Bound,
}

/// Why a position count is what it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Bound {
    /// A reason written by hand beside a bare count, e.g. `"hardcoded max_cache_len"`.
    Stated(Cow<'static, str>),
    /// A policy that computed the count; its reason is generated from it.
    Policy(PositionPolicy),
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::Stated(reason) => f.write_str(reason),
            Bound::Policy(policy) => policy.fmt(f),
        }
    }
}

impl Positions {
    /// A bare count and the reason for it.
    ///
    /// ```
    /// let p = kv_core::Positions::bounded(2048, "hardcoded max_cache_len");
    /// assert_eq!(p.to_string(), "2048 (hardcoded max_cache_len)");
    /// ```
    pub const fn bounded(count: u64, because: &'static str) -> Positions {
        Positions {
            count,
            bound: Bound::Stated(Cow::Borrowed(because)),
        }
    }

    /// A bare count and a reason built at run time.
    pub fn bounded_owned(count: u64, because: impl Into<Cow<'static, str>>) -> Positions {
        Positions {
            count,
            bound: Bound::Stated(because.into()),
        }
    }

    /// The count a policy computes, with the policy as its reason.
    ///
    /// ```
    /// use kv_core::{PositionPolicy, Positions};
    ///
    /// let p = Positions::from_policy(PositionPolicy::WindowMinusOne { window: 72 })?;
    /// assert_eq!(p.count, 71);
    /// assert_eq!(p.bound.to_string(), "sliding_window(72) - 1");
    /// # Ok::<(), kv_core::Overflow>(())
    /// ```
    pub const fn from_policy(policy: PositionPolicy) -> Result<Positions, Overflow> {
        match policy.count() {
            Ok(count) => Ok(Positions {
                count,
                bound: Bound::Policy(policy),
            }),
            Err(overflow) => Err(overflow),
        }
    }

    /// The reason as text.
    pub fn reason(&self) -> String {
        self.bound.to_string()
    }
}

impl fmt::Display for Positions {
    /// `71 (sliding_window(72) - 1)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.count, self.bound)
    }
}

/// The rules real caches follow for their position count. Each computes its
/// count with checked `const fn` arithmetic; an input of zero gives a count of
/// zero (or, for a zero block or step, is named by [`PositionPolicy::zero_input`]),
/// which validation rejects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PositionPolicy {
    /// `W - 1`: transformers' `DynamicSlidingWindowLayer`.
    WindowMinusOne {
        /// The sliding window.
        window: u64,
    },
    /// `W`: candle's `RotatingKvCache`.
    Window {
        /// The sliding window.
        window: u64,
    },
    /// `min(W, max_cache_len)`: transformers' `StaticSlidingWindowLayer`.
    WindowCapped {
        /// The sliding window.
        window: u64,
        /// The static cache's length.
        max_cache_len: u64,
    },
    /// `W + chunk`: mistral.rs' rotating cache holds up to a chunk (512) past
    /// the window.
    WindowPlusChunk {
        /// The sliding window.
        window: u64,
        /// The growth chunk.
        chunk: u64,
    },
    /// vLLM's `SlidingWindowSpec`:
    /// `(cdiv(min(W - 1 + in_flight, max_model_len), B) + 1)` blocks of `B`,
    /// where `in_flight` (this field) is vLLM 0.33's `max_in_flight_tokens`:
    /// `max_num_batched_tokens` times the batches in flight (2 with async
    /// scheduling; 1 before vLLM counted them).
    VllmSlidingWindow {
        /// The sliding window.
        window: u64,
        /// Tokens scheduled and not yet settled: `max_num_batched_tokens`
        /// x batches in flight.
        max_num_batched_tokens: u64,
        /// The engine's longest sequence.
        max_model_len: u64,
        /// Tokens per block.
        block_size: u64,
    },
    /// vLLM's `ChunkedLocalAttentionSpec`:
    /// `cdiv(min(chunk + in_flight, max_model_len), B)` blocks of `B`, with
    /// `in_flight` as for [`PositionPolicy::VllmSlidingWindow`].
    VllmChunkedLocal {
        /// The attention chunk.
        chunk: u64,
        /// The scheduler's token budget per step.
        max_num_batched_tokens: u64,
        /// The engine's longest sequence.
        max_model_len: u64,
        /// Tokens per block.
        block_size: u64,
    },
    /// `count` rounded up to a multiple: a block size, or llama.cpp's `n_ctx`
    /// padded to 256.
    PaddedTo {
        /// The positions needed.
        count: u64,
        /// The multiple allocated.
        multiple: u64,
    },
    /// A cache that grows in steps of `step` and holds `count` positions:
    /// its capacity is `count` rounded up to a step (mistral.rs grows by 512;
    /// candle's `KvCache` grows by its `max`).
    GrowsBy {
        /// The positions held.
        count: u64,
        /// The growth step.
        step: u64,
    },
}

const POLICY: Overflow = Overflow {
    step: "positions (the position policy's arithmetic)",
};

/// `ceil(a / b) x b`, `None` on overflow or `b == 0`.
const fn round_up(a: u64, b: u64) -> Option<u64> {
    if b == 0 {
        return None;
    }
    let blocks = a.div_ceil(b);
    blocks.checked_mul(b)
}

/// `min(a + b, cap)` with the sum checked.
const fn min_sum(a: u64, b: u64, cap: u64) -> Option<u64> {
    match a.checked_add(b) {
        Some(sum) if sum < cap => Some(sum),
        Some(_) => Some(cap),
        None => None,
    }
}

impl PositionPolicy {
    /// The positions the policy holds at peak.
    pub const fn count(&self) -> Result<u64, Overflow> {
        let count = match *self {
            PositionPolicy::WindowMinusOne { window } => Some(window.saturating_sub(1)),
            PositionPolicy::Window { window } => Some(window),
            PositionPolicy::WindowCapped {
                window,
                max_cache_len,
            } => Some(if window < max_cache_len {
                window
            } else {
                max_cache_len
            }),
            PositionPolicy::WindowPlusChunk { window, chunk } => window.checked_add(chunk),
            PositionPolicy::VllmSlidingWindow {
                window,
                max_num_batched_tokens,
                max_model_len,
                block_size,
            } => match min_sum(
                window.saturating_sub(1),
                max_num_batched_tokens,
                max_model_len,
            ) {
                // One block more than the tokens need: the window straddles a block edge.
                Some(tokens) if block_size > 0 => match round_up(tokens, block_size) {
                    Some(rounded) => rounded.checked_add(block_size),
                    None => None,
                },
                Some(_) => Some(0),
                None => None,
            },
            PositionPolicy::VllmChunkedLocal {
                chunk,
                max_num_batched_tokens,
                max_model_len,
                block_size,
            } => match min_sum(chunk, max_num_batched_tokens, max_model_len) {
                Some(tokens) if block_size > 0 => round_up(tokens, block_size),
                Some(_) => Some(0),
                None => None,
            },
            PositionPolicy::PaddedTo { count, multiple } => {
                if multiple == 0 {
                    Some(0)
                } else {
                    round_up(count, multiple)
                }
            }
            PositionPolicy::GrowsBy { count, step } => {
                if step == 0 {
                    Some(0)
                } else {
                    round_up(count, step)
                }
            }
        };
        match count {
            Some(count) => Ok(count),
            None => Err(POLICY),
        }
    }

    /// The name of an input that is zero, which makes the policy meaningless.
    pub const fn zero_input(&self) -> Option<&'static str> {
        let inputs: [(&str, u64); 4] = match *self {
            PositionPolicy::WindowMinusOne { window } | PositionPolicy::Window { window } => {
                [("window", window), ("", 1), ("", 1), ("", 1)]
            }
            PositionPolicy::WindowCapped {
                window,
                max_cache_len,
            } => [
                ("window", window),
                ("max_cache_len", max_cache_len),
                ("", 1),
                ("", 1),
            ],
            PositionPolicy::WindowPlusChunk { window, chunk } => {
                [("window", window), ("chunk", chunk), ("", 1), ("", 1)]
            }
            PositionPolicy::VllmSlidingWindow {
                window,
                max_num_batched_tokens,
                max_model_len,
                block_size,
            } => [
                ("window", window),
                ("max_num_batched_tokens", max_num_batched_tokens),
                ("max_model_len", max_model_len),
                ("block_size", block_size),
            ],
            PositionPolicy::VllmChunkedLocal {
                chunk,
                max_num_batched_tokens,
                max_model_len,
                block_size,
            } => [
                ("chunk", chunk),
                ("max_num_batched_tokens", max_num_batched_tokens),
                ("max_model_len", max_model_len),
                ("block_size", block_size),
            ],
            PositionPolicy::PaddedTo { count, multiple } => {
                [("count", count), ("multiple", multiple), ("", 1), ("", 1)]
            }
            PositionPolicy::GrowsBy { count, step } => {
                [("count", count), ("step", step), ("", 1), ("", 1)]
            }
        };
        let mut i = 0;
        while i < inputs.len() {
            if inputs[i].1 == 0 {
                return Some(inputs[i].0);
            }
            i += 1;
        }
        None
    }
}

impl fmt::Display for PositionPolicy {
    /// The policy and its inputs, e.g. `sliding_window(72) - 1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PositionPolicy::WindowMinusOne { window } => {
                write!(f, "sliding_window({window}) - 1")
            }
            PositionPolicy::Window { window } => write!(f, "sliding_window({window})"),
            PositionPolicy::WindowCapped {
                window,
                max_cache_len,
            } => write!(
                f,
                "min(sliding_window({window}), max_cache_len({max_cache_len}))"
            ),
            PositionPolicy::WindowPlusChunk { window, chunk } => {
                write!(f, "sliding_window({window}) + chunk({chunk})")
            }
            PositionPolicy::VllmSlidingWindow {
                window,
                max_num_batched_tokens,
                max_model_len,
                block_size,
            } => write!(
                f,
                "(cdiv(min(sliding_window({window}) - 1 + in_flight_tokens({max_num_batched_tokens}), \
                 max_model_len({max_model_len})), block({block_size})) + 1) blocks of {block_size}"
            ),
            PositionPolicy::VllmChunkedLocal {
                chunk,
                max_num_batched_tokens,
                max_model_len,
                block_size,
            } => write!(
                f,
                "cdiv(min(attention_chunk({chunk}) + in_flight_tokens({max_num_batched_tokens}), \
                 max_model_len({max_model_len})), block({block_size})) blocks of {block_size}"
            ),
            PositionPolicy::PaddedTo { count, multiple } => {
                write!(f, "{count} padded to a multiple of {multiple}")
            }
            PositionPolicy::GrowsBy { count, step } => {
                write!(f, "{count} held, capacity grown in steps of {step}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(policy: PositionPolicy) -> u64 {
        policy.count().unwrap()
    }

    #[test]
    fn windows_follow_each_cache() {
        assert_eq!(count(PositionPolicy::WindowMinusOne { window: 72 }), 71);
        assert_eq!(count(PositionPolicy::Window { window: 4096 }), 4096);
        let capped = |window, max_cache_len| {
            count(PositionPolicy::WindowCapped {
                window,
                max_cache_len,
            })
        };
        assert_eq!(capped(4096, 1024), 1024);
        assert_eq!(capped(1024, 4096), 1024);
        assert_eq!(
            count(PositionPolicy::WindowPlusChunk {
                window: 4096,
                chunk: 512
            }),
            4608
        );
    }

    #[test]
    fn vllm_sliding_window_adds_one_block() {
        // Mistral-7B, W 4096, 8192 batched tokens, 32768 max_model_len, block 16:
        // min(4095 + 8192, 32768) = 12287 -> cdiv 768 blocks, + 1 = 769 blocks.
        let policy = PositionPolicy::VllmSlidingWindow {
            window: 4096,
            max_num_batched_tokens: 8192,
            max_model_len: 32768,
            block_size: 16,
        };
        assert_eq!(count(policy), 769 * 16);
        // Capped by max_model_len: min(4095 + 8192, 2048) = 2048 -> 128 + 1 blocks.
        let short = PositionPolicy::VllmSlidingWindow {
            window: 4096,
            max_num_batched_tokens: 8192,
            max_model_len: 2048,
            block_size: 16,
        };
        assert_eq!(count(short), 129 * 16);
        assert_eq!(
            policy.to_string(),
            "(cdiv(min(sliding_window(4096) - 1 + in_flight_tokens(8192), \
             max_model_len(32768)), block(16)) + 1) blocks of 16"
        );
    }

    #[test]
    fn vllm_chunked_local_has_no_extra_block() {
        // chunk 8192 + 2048 batched = 10240, under 131072 -> 640 blocks of 16.
        let policy = PositionPolicy::VllmChunkedLocal {
            chunk: 8192,
            max_num_batched_tokens: 2048,
            max_model_len: 131_072,
            block_size: 16,
        };
        assert_eq!(count(policy), 640 * 16);
        // 8192 + 2049 = 10241 -> 641 blocks.
        let odd = PositionPolicy::VllmChunkedLocal {
            chunk: 8192,
            max_num_batched_tokens: 2049,
            max_model_len: 131_072,
            block_size: 16,
        };
        assert_eq!(count(odd), 641 * 16);
    }

    #[test]
    fn padding_and_growth_round_up() {
        let pad = |count, multiple| count_of(PositionPolicy::PaddedTo { count, multiple });
        assert_eq!(pad(4000, 256), 4096);
        assert_eq!(pad(4096, 256), 4096);
        let grow = |count, step| count_of(PositionPolicy::GrowsBy { count, step });
        assert_eq!(grow(1000, 512), 1024);
        assert_eq!(grow(1025, 512), 1536);
        assert_eq!(grow(1, 4096), 4096);
    }

    fn count_of(policy: PositionPolicy) -> u64 {
        count(policy)
    }

    #[test]
    fn zero_inputs_are_named_and_never_panic() {
        let zero_block = PositionPolicy::VllmSlidingWindow {
            window: 4096,
            max_num_batched_tokens: 8192,
            max_model_len: 32768,
            block_size: 0,
        };
        assert_eq!(zero_block.count(), Ok(0));
        assert_eq!(zero_block.zero_input(), Some("block_size"));
        let zero_window = PositionPolicy::WindowMinusOne { window: 0 };
        assert_eq!(zero_window.count(), Ok(0));
        assert_eq!(zero_window.zero_input(), Some("window"));
        assert_eq!(
            PositionPolicy::GrowsBy { count: 5, step: 0 }.zero_input(),
            Some("step")
        );
        assert_eq!(PositionPolicy::Window { window: 3 }.zero_input(), None);
    }

    #[test]
    fn overflow_is_an_error() {
        let huge = PositionPolicy::WindowPlusChunk {
            window: u64::MAX,
            chunk: 512,
        };
        assert!(huge.count().is_err());
        let pad = PositionPolicy::PaddedTo {
            count: u64::MAX - 1,
            multiple: 256,
        };
        assert!(pad.count().is_err());
        assert!(Positions::from_policy(pad).is_err());
    }

    #[test]
    fn reasons_are_generated_from_inputs() {
        let p = Positions::from_policy(PositionPolicy::WindowCapped {
            window: 1024,
            max_cache_len: 4096,
        })
        .unwrap();
        assert_eq!(
            p.to_string(),
            "1024 (min(sliding_window(1024), max_cache_len(4096)))"
        );
        assert_eq!(
            Positions::bounded_owned(3, String::from("three")).reason(),
            "three"
        );
    }
}
