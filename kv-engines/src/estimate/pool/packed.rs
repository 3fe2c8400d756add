//! vLLM 0.33's block-outermost packing (`_get_packed_kv_cache_groups`,
//! `v1/core/kv_cache_planning.py:914`), taken where a backend lays the cache
//! out block-outermost and the pages differ (Step-5's DSA layers): layers
//! are bucketed by spec type; a bucket is balanced when each of its page
//! sizes has as many layers; balanced buckets are cut into groups of the
//! same number of pattern repeats (`_approximate_gcd`, at least the largest
//! mixed bucket's); a state bucket (a circular buffer) is cut only as far
//! as the block the others need cannot hold it. A group's page is its
//! layers' pages side by side; a block is the widest group's, rounded up to
//! every layer's block-stride alignment (`_get_kv_cache_bytes_per_block`,
//! block-outermost branch).

use kv_core::{KvError, Overflow};

use crate::estimate::settings::overflow;

/// The kind of spec a bucket holds (`UniformTypeKVCacheSpecs.is_uniform_type`:
/// one spec type, one block, one window): layers of equal buckets are
/// bucketed together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PackedBucket {
    /// FullAttentionSpec and its kin, in blocks of `block` tokens.
    Full { block: u64 },
    /// SlidingWindowSpec of one window, in blocks of `block` tokens.
    Sliding { window: u64, block: u64 },
    /// A state per request (CircularBufferSpec).
    State,
}

impl PackedBucket {
    fn is_sliding(self) -> bool {
        matches!(self, PackedBucket::Sliding { .. })
    }
}

/// A layer's block-stride alignment (`get_block_stride_alignment`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Alignment {
    /// `MultipleOf(n)`: whole kernel blocks of `gcd(n, block)` tokens, one
    /// page of them (1 where that is the block).
    KernelBlock(u64),
    /// A number of bytes.
    Bytes(u64),
}

/// One declaration as vLLM's packing sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PackedKind {
    pub name: String,
    pub bucket: PackedBucket,
    pub alignment: Option<Alignment>,
    /// The block the declaration is paged in, in its own positions, where
    /// that is neither the estimate's nor its window's: a compressed cache
    /// counts states, 64 of them in a block of 256 tokens (DeepSeek-V4).
    pub paged_in: Option<u64>,
}

impl PackedKind {
    pub fn new(name: &str, bucket: PackedBucket, alignment: Option<Alignment>) -> PackedKind {
        PackedKind {
            name: name.to_owned(),
            bucket,
            alignment,
            paged_in: None,
        }
    }

    /// The same kind, paged in blocks of `positions` of its own.
    pub fn paged_in(mut self, positions: u64) -> PackedKind {
        self.paged_in = Some(positions);
        self
    }
}

/// An estimate packed block-outermost: its declarations' buckets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Packing {
    pub kinds: Vec<PackedKind>,
}

impl Packing {
    pub fn new(kinds: Vec<PackedKind>) -> Packing {
        Packing { kinds }
    }

    pub fn kind(&self, name: &str) -> Option<&PackedKind> {
        self.kinds.iter().find(|k| k.name == name)
    }
}

/// One declaration's share in the packing: its bucket, the model's layers
/// of it and one rank's page.
#[derive(Clone, Copy, Debug)]
pub(super) struct Member {
    pub bucket: PackedBucket,
    pub layers: u64,
    pub page: u64,
}

/// The groups each bucket is cut into, by bucket in order of first
/// appearance, and the repeats per group (0 where none is picked).
pub(super) fn groups(members: &[Member]) -> Result<(Vec<(PackedBucket, u64)>, u64), KvError> {
    let mut buckets: Vec<(PackedBucket, Vec<(u64, u64)>)> = Vec::new();
    for member in members {
        let index = match buckets.iter().position(|(b, _)| *b == member.bucket) {
            Some(index) => index,
            None => {
                buckets.push((member.bucket, Vec::new()));
                buckets.len() - 1
            }
        };
        let pages = &mut buckets[index].1;
        match pages.iter_mut().find(|(page, _)| *page == member.page) {
            Some((_, count)) => *count = add(*count, member.layers)?,
            None => pages.push((member.page, member.layers)),
        }
    }
    let balanced = |pages: &[(u64, u64)]| pages.iter().all(|(_, c)| *c == pages[0].1);
    let most = |pages: &[(u64, u64)]| pages.iter().map(|(_, c)| *c).max().unwrap_or(0);
    let min_repeats = buckets
        .iter()
        .filter(|(_, pages)| balanced(pages) && pages.len() > 1)
        .map(|(_, pages)| most(pages))
        .max()
        .unwrap_or(0);
    let repeats = if min_repeats > 0 {
        let counts: Vec<u64> = buckets
            .iter()
            .filter(|(_, pages)| balanced(pages))
            .map(|(_, pages)| most(pages))
            .collect();
        Some(approximate_gcd(&counts, min_repeats))
    } else {
        None
    };
    let total = |pages: &[(u64, u64)]| pages.iter().try_fold(0u64, |sum, (_, c)| add(sum, *c));
    let is_state = |bucket: PackedBucket| {
        bucket == PackedBucket::State || (repeats.is_none() && bucket.is_sliding())
    };
    let mut groups = Vec::with_capacity(buckets.len());
    let mut anchor = 0u64;
    for (bucket, pages) in &buckets {
        let n = match repeats {
            Some(r) if balanced(pages) => most(pages).div_ceil(r),
            _ => 1,
        };
        let split = if is_state(*bucket) { total(pages)? } else { n };
        anchor = anchor.max(widest(pages, split)?);
        groups.push((*bucket, n));
    }
    // A bucket of several page sizes is never cut: the repeats are at least
    // the largest such bucket's count, and an unbalanced one stays whole.
    for ((bucket, n), (_, pages)) in groups.iter_mut().zip(&buckets) {
        if anchor > 0 && is_state(*bucket) {
            let per_block = anchor.checked_div(pages[0].0).unwrap_or(0).max(1);
            *n = (*n).max(total(pages)?.div_ceil(per_block));
        }
    }
    Ok((groups, repeats.unwrap_or(0)))
}

/// The bytes of the fullest of `n` groups cut from a bucket of `pages`.
fn widest(pages: &[(u64, u64)], n: u64) -> Result<u64, KvError> {
    pages.iter().try_fold(0u64, |sum, (page, count)| {
        count
            .div_ceil(n.max(1))
            .checked_mul(*page)
            .and_then(|bytes| sum.checked_add(bytes))
            .ok_or_else(|| too_big("a packed group's bytes"))
    })
}

/// `_approximate_gcd`: the d in `[lower_bound, max(values)]` that pads the
/// values least up to multiples of it, the larger on a tie.
pub(super) fn approximate_gcd(values: &[u64], lower_bound: u64) -> u64 {
    let low = lower_bound.max(1);
    let high = values.iter().copied().max().unwrap_or(0);
    let mut best = (low, u128::MAX);
    for d in low..=high {
        let pad: u128 = values.iter().map(|x| u128::from((d - x % d) % d)).sum();
        if pad <= best.1 {
            best = (d, pad);
        }
    }
    best.0
}

fn add(a: u64, b: u64) -> Result<u64, KvError> {
    a.checked_add(b).ok_or_else(|| too_big("layers"))
}

fn too_big(step: &'static str) -> KvError {
    overflow("vLLM's packed pool".to_owned())(Overflow { step })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: PackedBucket = PackedBucket::Full { block: 16 };
    const SLIDING: PackedBucket = PackedBucket::Sliding {
        window: 64,
        block: 16,
    };
    const STATE: PackedBucket = PackedBucket::State;

    fn member(bucket: PackedBucket, layers: u64, page: u64) -> Member {
        Member {
            bucket,
            layers,
            page,
        }
    }

    #[test]
    fn the_gcd_pads_least_and_prefers_the_larger_on_a_tie() {
        // DeepSeek-V4's published counts (43, 21, 20) from 21: d = 22 pads
        // 1 + 1 + 2 = 4; 21 pads 20 + 0 + 1 = 21; 43 pads 0 + 22 + 23.
        assert_eq!(approximate_gcd(&[43, 21, 20], 21), 22);
        // 23, 69, 23: 23 pads nothing.
        assert_eq!(approximate_gcd(&[69, 23, 23], 23), 23);
        // A lower bound past every value is kept.
        assert_eq!(approximate_gcd(&[3], 5), 5);
        // Ties go to the larger: 4 and 8 from 1 pad 0 at 1, 2, 4 only.
        assert_eq!(approximate_gcd(&[4, 8], 1), 4);
    }

    #[test]
    fn step_5s_buckets_cut_the_sliding_layers_and_keep_the_ring_whole() {
        // 69 sliding layers (49,152 B), 23 DSA layers with K/V (49,152 B) and
        // summary (512 B) pages, 23 rings (49,152 B). Repeats 23: sliding
        // cut in 3; the DSA bucket one group of 23 x 49,664 = 1,142,272 B,
        // which holds 23 ring pages: one ring group.
        let (groups, repeats) = groups(&[
            member(SLIDING, 69, 49_152),
            member(FULL, 23, 49_152),
            member(FULL, 23, 512),
            member(STATE, 23, 49_152),
        ])
        .unwrap();
        assert_eq!(repeats, 23);
        assert_eq!(groups, [(SLIDING, 3), (FULL, 1), (STATE, 1)]);
        // Rings a block cannot hold are cut: repeats 10 (the mixed bucket's,
        // the only d in [10, 10]) leave 7 rings of 600 B one group, but the
        // block is the DSA group's 10 x (100 + 50) = 1,500 B, which holds 2:
        // cdiv(7, 2) = 4 ring groups.
        let (groups, repeats) = groups_of(&[
            member(FULL, 10, 100),
            member(FULL, 10, 50),
            member(STATE, 7, 600),
        ]);
        assert_eq!(repeats, 10);
        assert_eq!(groups, [(FULL, 1), (STATE, 4)]);
    }

    #[test]
    fn without_a_mixed_bucket_a_sliding_bucket_is_cut_like_a_state_and_the_unbalanced_stay_whole() {
        // No bucket of several page sizes: no repeats, and the sliding
        // bucket is cut only to fit the block: the DSA bucket's 2 x 100 B
        // hold 2 of its 100 B pages, cdiv(6, 2) = 3 groups.
        let (groups, repeats) = groups_of(&[member(FULL, 2, 100), member(SLIDING, 6, 100)]);
        assert_eq!(repeats, 0);
        assert_eq!(groups, [(FULL, 1), (SLIDING, 3)]);
        // A balanced mixed sliding bucket sets repeats 2; the unbalanced DSA
        // bucket (4 and 3 layers of two pages) stays one group.
        let (groups, repeats) = groups_of(&[
            member(SLIDING, 2, 100),
            member(SLIDING, 2, 60),
            member(FULL, 4, 100),
            member(FULL, 3, 50),
        ]);
        assert_eq!(repeats, 2);
        assert_eq!(groups, [(SLIDING, 1), (FULL, 1)]);
        // Pages of 0 B make no block to fit: a state bucket stays whole, and
        // nothing divides by zero.
        let (groups, _) = groups_of(&[member(FULL, 1, 0), member(STATE, 3, 0)]);
        assert_eq!(groups, [(FULL, 1), (STATE, 1)]);
    }

    #[test]
    fn buckets_of_other_blocks_or_windows_stay_apart() {
        // DeepSeek-V4's published layout: the sliding latents (window 128,
        // block 64), the MLA bucket (unbalanced: 21, 20, 21), the CSA
        // states (window 8, block 4: 21 and 21, the mixed bucket), the HCA
        // states (window 128, block 8). Repeats from 21 over [43, 21, 20]:
        // 22; the sliding latents cut in 2, every other bucket one group.
        let swa = PackedBucket::Sliding {
            window: 128,
            block: 64,
        };
        let mla = PackedBucket::Full { block: 256 };
        let c4 = PackedBucket::Sliding {
            window: 8,
            block: 4,
        };
        let c128 = PackedBucket::Sliding {
            window: 128,
            block: 8,
        };
        let (groups, repeats) = groups_of(&[
            member(swa, 43, 37_440),
            member(mla, 21, 37_440),
            member(c4, 21, 32_832),
            member(mla, 21, 8640),
            member(c4, 21, 8640),
            member(mla, 20, 1728),
            member(c128, 20, 32_832),
        ]);
        assert_eq!(repeats, 22);
        assert_eq!(groups, [(swa, 2), (mla, 1), (c4, 1), (c128, 1)]);
    }

    fn groups_of(members: &[Member]) -> (Vec<(PackedBucket, u64)>, u64) {
        groups(members).unwrap()
    }
}
