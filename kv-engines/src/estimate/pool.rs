//! vLLM 0.33's KV cache pool (`vllm/v1/core/kv_cache_planning.py`): how the
//! engine groups the layers of each kind and what it charges a request for
//! them (what it logs at start-up from these is `startup.rs`).
//!
//! The path `get_kv_cache_groups` takes for what kv estimates: the default
//! layout is LBNHC (FlashAttention declares no layouts, so
//! `_DEFAULT_LAYOUT_PREFERENCE` applies), which is not block-outermost, so
//! `_get_packed_kv_cache_groups` declines; one kind is one spec for all its
//! layers, so a one-kind model is one group (`_get_kv_cache_groups_uniform_spec`)
//! and a model of several kinds, whose pages the platform already made equal,
//! goes to `_get_kv_cache_groups_uniform_page_size`: each kind is cut into
//! groups of `group_size` layers (`layers[i::num_groups]`), the last ones
//! short, and one block of the shared pool spans the widest group. A request
//! takes `cdiv(max_memory_usage_bytes, page)` blocks from every group
//! (`_max_memory_usage_bytes_from_groups`), so a short group is charged as a
//! full one. Under pipeline parallelism the groups are formed over the whole
//! model (`get_global_kv_cache_groups`) and projected onto each stage
//! (`_project_kv_cache_groups_to_worker`), empty groups included: a stage's
//! block spans its widest projected group, and a request still takes blocks
//! from every group.

use kv_core::spec::{Bound, Layout};
use kv_core::{Collection, KvError, KvSpec, Overflow, PositionPolicy, Positions};
use serde::{Deserialize, Serialize};

use super::settings::{config_error, overflow, VLLM_VERSION};
use super::vllm::{gcd, lcm};

mod packed;

pub(super) use packed::{Alignment, PackedBucket, PackedKind, Packing};

/// One kind of layer as vLLM's pool groups it (one estimate declaration).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Kind {
    name: String,
    /// The model's layers of this kind.
    layers: u64,
    /// Blocks one request at `max_model_len` takes in one layer's group.
    blocks: u64,
    /// Tokens per block of this kind: the estimate's, or a multiple of it
    /// where vLLM makes a smaller page equal the largest by holding more
    /// tokens in it ([`Grouping::with_rank_pages`]).
    block_size: u64,
}

/// The model's kinds and vLLM's group size for them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Grouping {
    kinds: Vec<Kind>,
    group_size: u64,
    /// Why the group size is what it is.
    why: &'static str,
    /// Tokens per block, which every declaration of an estimate shares.
    block_size: u64,
    /// Whether every kind is an MLA latent of the same blocks (a DSA model's
    /// latent and indexer keys): vLLM's `UniformTypeKVCacheSpecs`, one group
    /// of every layer whose block holds each layer's page side by side.
    one_group: bool,
    /// The packing, where the cache is laid out block-outermost.
    packing: Option<Packing>,
    /// Its groups per bucket and the repeats per group, once the pages of
    /// one rank are known ([`Grouping::with_rank_pages`]).
    packed: Option<(Vec<(PackedBucket, u64)>, u64)>,
}

impl Grouping {
    /// The grouping of an estimate's declarations (whole model), with
    /// `block_size` tokens per block, packed block-outermost where `packing`
    /// is given.
    pub(super) fn of(
        specs: &[KvSpec],
        block_size: u64,
        packing: Option<&Packing>,
    ) -> Result<Grouping, KvError> {
        if block_size == 0 {
            return Err(config_error(
                "estimate settings",
                "`block_size` is 0; it must be positive".to_owned(),
            ));
        }
        let mut kinds = Vec::with_capacity(specs.len());
        for spec in specs {
            let layers = spec.layout.layers();
            if layers == 0 {
                return Err(config_error(
                    "figures",
                    format!("`{}` has 0 layers; vLLM groups none", spec.name),
                ));
            }
            let own = packing
                .and_then(|p| p.kind(&spec.name))
                .and_then(|k| k.paged_in)
                .unwrap_or_else(|| own_block(spec, block_size));
            kinds.push(Kind {
                name: spec.name.to_string(),
                layers,
                blocks: blocks(spec, own)?,
                block_size: own,
            });
        }
        let latents = specs
            .iter()
            .all(|spec| matches!(spec.layout, Layout::Latent { .. }));
        let one_group =
            kinds.len() > 1 && latents && kinds.iter().all(|k| k.blocks == kinds[0].blocks);
        let fewest = kinds.iter().map(|k| k.layers).min().unwrap_or(1);
        let most = kinds.iter().map(|k| k.layers).max().unwrap_or(1);
        // `max_num_layers < min_num_layers * 1.5`, in integers.
        let (group_size, why) = if u128::from(most) * 2 < u128::from(fewest) * 3 {
            (
                most,
                "the most layers of a kind, as that is under 1.5 x the fewest",
            )
        } else {
            (fewest, "the fewest layers of a kind")
        };
        if one_group {
            let layers = kinds
                .iter()
                .try_fold(0u64, |sum, k| sum.checked_add(k.layers))
                .ok_or_else(|| config_error("figures", "the layers overflow u64".to_owned()))?;
            return Ok(Grouping {
                kinds,
                group_size: layers,
                why: "every layer: its kinds are MLA latents of the same length, one group \
                      (vLLM's UniformTypeKVCacheSpecs)",
                block_size,
                one_group,
                packing: None,
                packed: None,
            });
        }
        Ok(Grouping {
            kinds,
            group_size,
            why,
            block_size,
            one_group,
            packing: packing.cloned(),
            packed: None,
        })
    }

    /// vLLM's pages made equal (`unify_kv_cache_spec_page_size`, over every
    /// layer of the model): a kind whose page divides the largest holds that
    /// many times the tokens in one block instead (a Gemma 4's 256-wide
    /// sliding layers 32 tokens where its 512-wide full layers hold 16); a
    /// recurrent state page, or an attention page that does not divide, is
    /// padded to the largest; an MLA latent that does not divide cannot be,
    /// and vLLM refuses it. `rank` is one tensor-parallel rank holding every
    /// layer (pp 1): vLLM unifies the pages each worker holds.
    pub(super) fn with_rank_pages(mut self, rank: &Collection) -> Result<Grouping, KvError> {
        if self.one_group {
            return Ok(self);
        }
        if let Some(packing) = &self.packing {
            let mut members = Vec::with_capacity(self.kinds.len());
            for kind in &self.kinds {
                let (Some(entry), Some(packed)) = (
                    rank.entries().iter().find(|e| e.spec.name == kind.name),
                    packing.kind(&kind.name),
                ) else {
                    return Err(config_error(
                        "figures",
                        format!("`{}` is not in the packing of one rank", kind.name),
                    ));
                };
                members.push(packed::Member {
                    bucket: packed.bucket,
                    layers: kind.layers,
                    page: page(&entry.spec, kind.block_size)
                        .map_err(overflow(format!("one page of `{}`", kind.name)))?,
                });
            }
            self.packed = Some(packed::groups(&members)?);
            return Ok(self);
        }
        let mut pages = Vec::with_capacity(self.kinds.len());
        for kind in &self.kinds {
            let Some(entry) = rank.entries().iter().find(|e| e.spec.name == kind.name) else {
                continue;
            };
            let kind_page = page(&entry.spec, kind.block_size)
                .map_err(overflow(format!("one page of `{}`", kind.name)))?;
            pages.push((kind.name.clone(), kind_page, &entry.spec, kind.block_size));
        }
        let largest = pages.iter().map(|(_, p, _, _)| *p).max().unwrap_or(0);
        for (name, kind_page, spec, own) in pages {
            if kind_page == largest {
                continue;
            }
            match &spec.layout {
                Layout::Recurrent(_) => continue,
                Layout::Latent { .. } if !largest.is_multiple_of(kind_page) => {
                    return Err(config_error(
                        "figures",
                        format!(
                            "vLLM {VLLM_VERSION} would not start: `{name}`'s page of {kind_page} \
                             B does not divide the largest, {largest} B, and vLLM pads no MLA \
                             page (\"page size is not divisible by the maximum page size and \
                             cannot be padded\")"
                        ),
                    ));
                }
                _ if !largest.is_multiple_of(kind_page) => continue,
                _ => {}
            }
            let block_size = (largest / kind_page).checked_mul(own).ok_or_else(|| {
                overflow("vLLM's pool".to_owned())(Overflow {
                    step: "a block made as large as the largest page",
                })
            })?;
            if let Some(kind) = self.kinds.iter_mut().find(|k| k.name == name) {
                kind.block_size = block_size;
                kind.blocks = blocks(spec, block_size)?;
            }
        }
        Ok(self)
    }

    /// How many groups the kind's `layers` make (one group holds every kind
    /// where they share one: counted on the first).
    fn groups(&self, layers: u64) -> u64 {
        layers.div_ceil(self.group_size)
    }

    /// The pool's words for declaration `name` when vLLM charges it more
    /// layers than it has (whole model), else `None`: e.g. `vLLM's pool
    /// groups its 22 layers as 6 groups (4 x 4, 2 x 3 layers), each charged
    /// as 4: 24 layers (group size 4, the fewest layers of a kind)`.
    pub(super) fn padding(&self, name: &str) -> Option<String> {
        if self.one_group || self.packing.is_some() {
            return None;
        }
        let kind = self.kinds.iter().find(|k| k.name == name)?;
        let groups = self.groups(kind.layers);
        let charged = groups.checked_mul(self.group_size)?;
        if charged == kind.layers {
            return None;
        }
        // layers[i::groups]: the first `layers % groups` hold one more.
        let (small, longer) = (kind.layers / groups, kind.layers % groups);
        let sizes = if longer == 0 {
            format!("{groups} x {small}")
        } else {
            format!("{longer} x {}, {} x {small}", small + 1, groups - longer)
        };
        Some(format!(
            "vLLM {VLLM_VERSION}'s pool groups its {} layers as {groups} group(s) ({sizes} \
             layers), each charged as {}: {charged} layers (group size {}, {})",
            kind.layers, self.group_size, self.group_size, self.why
        ))
    }

    /// What vLLM's pool charges the rank that holds `rank`, at
    /// `max_num_seqs` requests.
    pub(super) fn pool(&self, rank: &Collection, max_num_seqs: u64) -> Result<VllmPool, KvError> {
        if self.one_group {
            return self.one_group_pool(rank, max_num_seqs);
        }
        if let (Some(packing), Some(packed)) = (&self.packing, &self.packed) {
            return self.packed_pool(packing, packed, rank, max_num_seqs);
        }
        let too_big = |step: &'static str| overflow("vLLM's pool".to_owned())(Overflow { step });
        let mut kinds = Vec::with_capacity(self.kinds.len());
        let mut widest = 0;
        let mut pages: Vec<u64> = Vec::new();
        let mut blocks_per_request = 0u64;
        for kind in &self.kinds {
            let held = rank.entries().iter().find(|e| e.spec.name == kind.name);
            let on_rank = held.map_or(0, |e| e.spec.layout.layers());
            // A group the rank holds none of still takes its blocks.
            let mut blocks_per_layer = kind.blocks;
            let mut kind_page = 0;
            if let Some(entry) = held {
                kind_page = page(&entry.spec, kind.block_size)
                    .map_err(overflow(format!("one page of `{}`", kind.name)))?;
                pages.push(kind_page);
                blocks_per_layer = blocks(&entry.spec, kind.block_size)?;
            }
            let groups = self.groups(kind.layers);
            blocks_per_request = groups
                .checked_mul(blocks_per_layer)
                .and_then(|b| blocks_per_request.checked_add(b))
                .ok_or_else(|| too_big("vLLM's blocks per request"))?;
            // The stage holds a run of the kind's layers; group i takes every
            // `groups`-th of them, so the fullest holds cdiv(run, groups).
            widest = widest.max(on_rank.div_ceil(groups));
            kinds.push(VllmPoolKind {
                name: kind.name.clone(),
                layers: kind.layers,
                groups,
                layers_on_rank: on_rank,
                charged_layers: 0,
                blocks_per_layer,
                page_bytes: kind_page,
                block_size: kind.block_size,
            });
        }
        if widest == 0 {
            return Err(no_cache_on(rank));
        }
        for kind in &mut kinds {
            kind.charged_layers = kind
                .groups
                .checked_mul(widest)
                .ok_or_else(|| too_big("vLLM's charged layers"))?;
        }
        // Pages that still differ (a state page, or one that does not divide
        // the largest) vLLM pads to the largest (unify_kv_cache_spec_page_size).
        let page_bytes = pages.iter().copied().max().unwrap_or(0);
        let unequal_pages = pages.iter().any(|p| *p != page_bytes);
        let bytes_per_block = page_bytes
            .checked_mul(widest)
            .ok_or_else(|| too_big("vLLM's bytes per block"))?;
        VllmPool {
            group_size: self.group_size,
            kinds,
            widest_group_layers: widest,
            page_bytes,
            unequal_pages,
            one_group: false,
            packed: false,
            bytes_per_block,
            blocks_per_request,
            per_row_bytes: 0,
            peak_bytes: 0,
        }
        .with_request_bytes(max_num_seqs)
    }
}

impl Grouping {
    /// One group of every layer (`UniformTypeKVCacheSpecs`): a block holds
    /// each of the rank's layers' pages side by side (`page_size_bytes` is
    /// their sum, none padded), and a request takes the kinds' common block
    /// count once. The group is counted on the first kind.
    fn one_group_pool(&self, rank: &Collection, max_num_seqs: u64) -> Result<VllmPool, KvError> {
        let too_big = |step: &'static str| overflow("vLLM's pool".to_owned())(Overflow { step });
        let mut kinds = Vec::with_capacity(self.kinds.len());
        let (mut layers_on_rank, mut bytes_per_block, mut page_bytes) = (0u64, 0u64, 0u64);
        for (i, kind) in self.kinds.iter().enumerate() {
            let held = rank.entries().iter().find(|e| e.spec.name == kind.name);
            let on_rank = held.map_or(0, |e| e.spec.layout.layers());
            let mut kind_page = 0;
            if let Some(entry) = held {
                kind_page = page(&entry.spec, self.block_size)
                    .map_err(overflow(format!("one page of `{}`", kind.name)))?;
                page_bytes = page_bytes.max(kind_page);
                bytes_per_block = kind_page
                    .checked_mul(on_rank)
                    .and_then(|b| bytes_per_block.checked_add(b))
                    .ok_or_else(|| too_big("vLLM's bytes per block"))?;
            }
            layers_on_rank = layers_on_rank
                .checked_add(on_rank)
                .ok_or_else(|| too_big("vLLM's layers in its group"))?;
            kinds.push(VllmPoolKind {
                name: kind.name.clone(),
                layers: kind.layers,
                groups: u64::from(i == 0),
                layers_on_rank: on_rank,
                charged_layers: on_rank,
                blocks_per_layer: kind.blocks,
                page_bytes: kind_page,
                block_size: kind.block_size,
            });
        }
        if layers_on_rank == 0 {
            return Err(no_cache_on(rank));
        }
        let blocks_per_request = self.kinds.first().map_or(0, |k| k.blocks);
        VllmPool {
            group_size: self.group_size,
            kinds,
            widest_group_layers: layers_on_rank,
            page_bytes,
            unequal_pages: false,
            one_group: true,
            packed: false,
            bytes_per_block,
            blocks_per_request,
            per_row_bytes: 0,
            peak_bytes: 0,
        }
        .with_request_bytes(max_num_seqs)
    }
}

impl Grouping {
    /// The pool packed block-outermost: a bucket's fullest group on this
    /// rank holds `cdiv(layers on the rank, groups)` of each of its kinds'
    /// layers (vLLM deals them out `[i::groups]`), side by side; a block is
    /// the fullest group's bytes, rounded up to the least common multiple
    /// of the rank's layers' block-stride alignments. A request takes, from
    /// each group, the most blocks any of its layers needs.
    fn packed_pool(
        &self,
        packing: &Packing,
        (buckets, repeats): &(Vec<(PackedBucket, u64)>, u64),
        rank: &Collection,
        max_num_seqs: u64,
    ) -> Result<VllmPool, KvError> {
        let too_big = |step: &'static str| overflow("vLLM's pool".to_owned())(Overflow { step });
        let mut kinds = Vec::with_capacity(self.kinds.len());
        let mut alignment = 1u64;
        let mut largest_page = 0;
        // Per bucket: (its groups, bytes of its fullest group here, layers
        // in it, the most blocks a request takes of any of its kinds).
        let mut filled: Vec<(PackedBucket, u64, u64, u64, u64)> = buckets
            .iter()
            .map(|(bucket, groups)| (*bucket, *groups, 0, 0, 0))
            .collect();
        let mut counted = Vec::new();
        for kind in &self.kinds {
            let packed = packing
                .kind(&kind.name)
                .ok_or_else(|| config_error("figures", format!("`{}` is not packed", kind.name)))?;
            let Some(slot) = filled.iter_mut().find(|f| f.0 == packed.bucket) else {
                return Err(config_error(
                    "figures",
                    format!("`{}`'s bucket has no groups", kind.name),
                ));
            };
            let groups = slot.1;
            let held = rank.entries().iter().find(|e| e.spec.name == kind.name);
            let on_rank = held.map_or(0, |e| e.spec.layout.layers());
            let fullest = on_rank.div_ceil(groups.max(1));
            let mut kind_page = 0;
            if let Some(entry) = held {
                kind_page = page(&entry.spec, kind.block_size)
                    .map_err(overflow(format!("one page of `{}`", kind.name)))?;
                largest_page = largest_page.max(kind_page);
                let own = match packed.alignment {
                    None => 1,
                    Some(Alignment::Bytes(bytes)) => bytes,
                    Some(Alignment::KernelBlock(base)) => {
                        let kernel = gcd(base, kind.block_size);
                        if kernel == kind.block_size {
                            1
                        } else {
                            page(&entry.spec, kernel)
                                .map_err(overflow(format!("a kernel page of `{}`", kind.name)))?
                        }
                    }
                };
                // Both at least 1: a page of a kernel block holds bytes.
                alignment =
                    lcm(alignment, own.max(1)).ok_or_else(|| too_big("the block alignment"))?;
            }
            slot.2 = fullest
                .checked_mul(kind_page)
                .and_then(|bytes| slot.2.checked_add(bytes))
                .ok_or_else(|| too_big("a packed group's bytes"))?;
            slot.3 = slot
                .3
                .checked_add(fullest)
                .ok_or_else(|| too_big("a packed group's layers"))?;
            slot.4 = slot.4.max(kind.blocks);
            // A bucket's groups are counted once, on its first kind.
            let first = !counted.contains(&packed.bucket);
            counted.push(packed.bucket);
            kinds.push(VllmPoolKind {
                name: kind.name.clone(),
                layers: kind.layers,
                groups: if first { groups } else { 0 },
                layers_on_rank: on_rank,
                charged_layers: fullest
                    .checked_mul(groups)
                    .ok_or_else(|| too_big("vLLM's charged layers"))?,
                blocks_per_layer: kind.blocks,
                page_bytes: kind_page,
                block_size: kind.block_size,
            });
        }
        let widest_bytes = filled.iter().map(|f| f.2).max().unwrap_or(0);
        if widest_bytes == 0 {
            return Err(no_cache_on(rank));
        }
        let bytes_per_block = widest_bytes
            .div_ceil(alignment)
            .checked_mul(alignment)
            .ok_or_else(|| too_big("vLLM's bytes per block"))?;
        let blocks_per_request = filled.iter().try_fold(0u64, |sum, f| {
            f.1.checked_mul(f.4)
                .and_then(|blocks| sum.checked_add(blocks))
                .ok_or_else(|| too_big("vLLM's blocks per request"))
        })?;
        VllmPool {
            group_size: *repeats,
            kinds,
            widest_group_layers: filled.iter().map(|f| f.3).max().unwrap_or(0),
            page_bytes: largest_page,
            unequal_pages: true,
            one_group: false,
            packed: true,
            bytes_per_block,
            blocks_per_request,
            per_row_bytes: 0,
            peak_bytes: 0,
        }
        .with_request_bytes(max_num_seqs)
    }
}

impl VllmPool {
    /// The pool with a request's bytes and the peak's from its block.
    fn with_request_bytes(mut self, max_num_seqs: u64) -> Result<VllmPool, KvError> {
        let too_big = |step: &'static str| overflow("vLLM's pool".to_owned())(Overflow { step });
        self.per_row_bytes = self
            .bytes_per_block
            .checked_mul(self.blocks_per_request)
            .ok_or_else(|| too_big("vLLM's bytes per request"))?;
        self.peak_bytes = self
            .per_row_bytes
            .checked_mul(max_num_seqs)
            .ok_or_else(|| too_big("vLLM's bytes at max_num_seqs"))?;
        Ok(self)
    }
}

/// A rank with no layer that keeps a cache: vLLM's pool has no block for it.
fn no_cache_on(rank: &Collection) -> KvError {
    config_error(
        "figures",
        format!(
            "rank {} holds no layer that keeps a cache, so vLLM's pool has no block size for it",
            rank.parallel()
        ),
    )
}

/// The block `spec` is paged in: its own where its sliding window is counted
/// in a block of its own (Inkling's conv state: block = window = kernel),
/// else the estimate's `block_size`.
fn own_block(spec: &KvSpec, block_size: u64) -> u64 {
    match spec.layout.positions().map(|p| &p.bound) {
        Some(Bound::Policy(PositionPolicy::VllmSlidingWindow {
            block_size: own, ..
        })) if *own > 0 => *own,
        _ => block_size,
    }
}

/// Blocks one request at `max_model_len` takes in one layer of `spec`: its
/// positions in whole blocks (`cdiv(max_memory_usage_bytes, page)`), or the
/// state pages it keeps.
fn blocks(spec: &KvSpec, block_size: u64) -> Result<u64, KvError> {
    match &spec.layout {
        Layout::Recurrent(state) => Ok(state.slots),
        layout => match layout.positions() {
            Some(p) => Ok(at_block(p, block_size)
                .map_err(overflow(format!(
                    "`{}` in blocks of {block_size}",
                    spec.name
                )))?
                .div_ceil(block_size)),
            None => Ok(0),
        },
    }
}

/// The positions `positions` holds in blocks of `block_size`: a sliding
/// window is worked out again at this block (it keeps one block more than
/// its tokens need, whatever the block).
fn at_block(positions: &Positions, block_size: u64) -> Result<u64, Overflow> {
    let Bound::Policy(policy) = &positions.bound else {
        return Ok(positions.count);
    };
    let again = match *policy {
        PositionPolicy::VllmSlidingWindow {
            window,
            max_num_batched_tokens,
            max_model_len,
            ..
        } => PositionPolicy::VllmSlidingWindow {
            window,
            max_num_batched_tokens,
            max_model_len,
            block_size,
        },
        // A chunked window rounds its tokens up to its block, which the
        // larger block's rounding subsumes: its count serves as it is.
        _ => return Ok(positions.count),
    };
    again.count()
}

/// Bytes one layer of `spec` keeps per block of `block_size` tokens (an
/// attention page), or per state page.
fn page(spec: &KvSpec, block_size: u64) -> Result<u64, Overflow> {
    let per_token = match &spec.layout {
        Layout::Recurrent(state) => return state.bytes_per_layer(),
        Layout::Attention { geometry, .. } => geometry.with_layers(1).bytes_per_position()?,
        Layout::Latent { latent, .. } => {
            let mut one = *latent;
            one.layers = 1;
            one.bytes_per_position()?
        }
        // A layout vLLM does not page (tensors beside the caches; an
        // estimate builds none): one page of its own, its whole row.
        other => return other.bytes_per_row(),
    };
    per_token.checked_mul(block_size).ok_or(Overflow {
        step: "one page (block size x bytes per token)",
    })
}

/// What vLLM's pool charges one rank: its layers grouped as the engine
/// groups them, a block as wide as the rank's widest group, and a request at
/// `max_model_len` taking blocks from every group. This is the figure vLLM's
/// memory check, its block count and its concurrency use; beside it, kv's
/// sum of layers is what the layers hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct VllmPool {
    /// Layers per group (vLLM's `group_size`, over the whole model): the
    /// fewest layers of a kind, or the most where that is under 1.5 x the
    /// fewest.
    pub group_size: u64,
    /// Each kind of layer, in the estimate's order.
    pub kinds: Vec<VllmPoolKind>,
    /// Layers of this rank in its widest group: one block spans them (packed,
    /// the most layers any one group holds here).
    pub widest_group_layers: u64,
    /// Bytes of one layer's page on this rank (the largest, where kinds differ).
    pub page_bytes: u64,
    /// Whether the kinds' pages on this rank differ (kv's per-rank shapes;
    /// vLLM makes them equal): each is then charged as the largest.
    pub unequal_pages: bool,
    /// Whether every kind shares one group (a DSA model's latent and indexer
    /// keys, vLLM's `UniformTypeKVCacheSpecs`): a block then holds each
    /// layer's own page side by side, none padded, and the group is counted
    /// on the first kind.
    #[serde(default)]
    pub one_group: bool,
    /// Whether vLLM packs the cache block-outermost (Step-5): a block then
    /// holds the widest group's pages side by side, rounded up to the
    /// layers' block-stride alignment, and `group_size` is the pattern
    /// repeats per group.
    #[serde(default)]
    pub packed: bool,
    /// Bytes of one block of the pool: `widest_group_layers x page_bytes`.
    pub bytes_per_block: u64,
    /// Blocks one request at `max_model_len` takes, every group's added.
    pub blocks_per_request: u64,
    /// `bytes_per_block x blocks_per_request`: vLLM's bytes for one request.
    pub per_row_bytes: u64,
    /// `per_row_bytes x max_num_seqs`.
    pub peak_bytes: u64,
}

/// One kind of layer in a [`VllmPool`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct VllmPoolKind {
    /// The declaration's name (`sliding_attention`, ...).
    pub name: String,
    /// The model's layers of this kind.
    pub layers: u64,
    /// vLLM's groups for them: `cdiv(layers, group_size)`.
    pub groups: u64,
    /// Of them, the layers this rank holds.
    pub layers_on_rank: u64,
    /// The layers this rank is charged for them: `groups x widest_group_layers`.
    pub charged_layers: u64,
    /// Blocks one request takes in each group of this kind.
    pub blocks_per_layer: u64,
    /// Bytes of one layer's page of this kind on this rank (0 where the rank
    /// holds none).
    #[serde(default)]
    pub page_bytes: u64,
    /// Tokens one block of this kind holds: the estimate's block size, or a
    /// multiple of it where vLLM made this kind's smaller page as large as
    /// the largest by holding more tokens in it (0 in reports from before
    /// kv recorded it).
    #[serde(default)]
    pub block_size: u64,
}

/// `--kv-cache-memory-bytes` (per rank) that lets vLLM hold `max_num_seqs`
/// requests at `max_model_len` at once: every rank takes the widest rank's
/// block count, and the pool holds one block back (the null block).
pub(super) fn memory_for(pools: &[&VllmPool], max_num_seqs: u64) -> Result<u64, KvError> {
    let widest = pools.iter().map(|p| p.bytes_per_block).max().unwrap_or(0);
    let blocks_per_request = pools.first().map_or(0, |p| p.blocks_per_request);
    blocks_per_request
        .checked_mul(max_num_seqs)
        .and_then(|blocks| blocks.checked_add(1))
        .and_then(|blocks| blocks.checked_mul(widest))
        .ok_or(Overflow {
            step: "vLLM's kv_cache_memory_bytes for max_num_seqs",
        })
        .map_err(overflow(format!("max_num_seqs {max_num_seqs}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kv_core::KvSpec;

    struct Declared(Vec<KvSpec>);

    impl kv_core::ModelLocalKv for Declared {
        fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
            out.extend(self.0.iter().cloned());
            Ok(())
        }
    }

    fn attention(name: &'static str, kv_heads: u64, positions: Positions) -> KvSpec {
        KvSpec::attention(
            name,
            "test",
            kv_core::Geometry::new(2, kv_heads, 64, kv_core::DType::BF16),
            positions,
            kv_core::Scope::Request,
            kv_core::Rows::MaxNumSeqs,
        )
    }

    fn pool_of(specs: Vec<KvSpec>, block_size: u64) -> Result<VllmPool, KvError> {
        let whole = kv_core::collect(&Declared(specs.clone()));
        Grouping::of(&specs, block_size, None)?
            .with_rank_pages(&whole)?
            .pool(&whole, 3)
    }

    #[test]
    fn a_page_that_divides_the_largest_holds_more_tokens_a_block() {
        // Pages of 16 x 2 x 64 x 2 x 2 B = 8,192 B and 16 x 1 x 64 x 2 x 2 B
        // = 4,096 B: vLLM doubles the narrow kind's block to 32 tokens, so
        // its page is 8,192 B too. Groups of 2, one each; a block spans 2
        // layers; a request takes cdiv(48, 16) = 3 blocks of the wide kind
        // and cdiv(48, 32) = 2 of the narrow.
        let three_blocks = || Positions::bounded(48, "three blocks of 16");
        let pool = pool_of(
            vec![
                attention("wide", 2, three_blocks()),
                attention("narrow", 1, three_blocks()),
            ],
            16,
        )
        .unwrap();
        assert!(!pool.unequal_pages);
        assert_eq!(pool.page_bytes, 8192);
        assert_eq!(pool.kinds[1].block_size, 32);
        assert_eq!(pool.kinds[1].blocks_per_layer, 2);
        assert_eq!(pool.bytes_per_block, 16_384);
        assert_eq!(pool.blocks_per_request, 3 + 2);
        assert_eq!(pool.per_row_bytes, 16_384 * 5);
        assert_eq!(pool.peak_bytes, 16_384 * 5 * 3);
    }

    #[test]
    fn a_window_paged_in_a_block_of_its_own_keeps_it_and_a_block_of_0_is_not_one() {
        // A conv-state-like window of 4 in blocks of 4, at max_model_len 64
        // with 2,048 in flight: min(3 + 2,048, 64) = 64 tokens, 16 + 1
        // blocks of 4; its page 4 x 2 x 64 x 2 x 2 = 2,048 B, the full
        // kind's 16 x 1 x 64 x 4 = 4,096: the window's block doubles to 8
        // (cdiv(64, 8) + 1 = 9 blocks).
        // Built field by field: `from_policy` refuses a block of 0, but a
        // spec's fields are public.
        let window = |block_size| Positions {
            count: 68,
            bound: Bound::Policy(PositionPolicy::VllmSlidingWindow {
                window: 4,
                max_num_batched_tokens: 2048,
                max_model_len: 64,
                block_size,
            }),
        };
        let full = || attention("full", 1, Positions::bounded(64, "max_model_len"));
        let pool = pool_of(vec![full(), attention("conv", 2, window(4))], 16).unwrap();
        assert_eq!(pool.kinds[1].block_size, 8);
        assert_eq!(pool.kinds[1].blocks_per_layer, 9);
        assert_eq!(pool.kinds[0].blocks_per_layer, 4);
        // A policy's block of 0 is no block of its own: the estimate's 16
        // (min(3 + 2,048, 64) = 64 tokens, 4 whole blocks + 1), not a
        // division by zero.
        let grouping = Grouping::of(&[full(), attention("conv", 1, window(0))], 16, None).unwrap();
        assert_eq!(grouping.kinds[1].block_size, 16);
        assert_eq!(grouping.kinds[1].blocks, 5);
    }

    #[test]
    fn a_sliding_window_at_a_larger_block_keeps_one_block_more_than_it_needs() {
        // A window of 100 with 2,048 tokens in flight at max_model_len 8,192:
        // min(99 + 2,048, 8,192) = 2,147 tokens. At 16 tokens a block, 135
        // + 1 blocks; at 32 (its page half the full kind's), 68 + 1 = 69.
        let window = Positions::from_policy(PositionPolicy::VllmSlidingWindow {
            window: 100,
            max_num_batched_tokens: 2048,
            max_model_len: 8192,
            block_size: 16,
        })
        .unwrap();
        let pool = pool_of(
            vec![
                attention("full", 2, Positions::bounded(8192, "max_model_len")),
                attention("sliding", 1, window),
            ],
            16,
        )
        .unwrap();
        assert_eq!(pool.kinds[0].blocks_per_layer, 512);
        assert_eq!(pool.kinds[1].block_size, 32);
        assert_eq!(pool.kinds[1].blocks_per_layer, 69);
        assert_eq!(pool.blocks_per_request, 512 + 69);
    }

    #[test]
    fn a_page_that_does_not_divide_the_largest_is_padded_to_it() {
        // 5 heads: 20,480 B a page; 2 heads: 8,192 B, which goes into it 2.5
        // times: vLLM pads it to 20,480 B and keeps 16 tokens a block (at
        // 32, it would take 1 block, not 2).
        let two_blocks = || Positions::bounded(32, "two blocks");
        let pool = pool_of(
            vec![
                attention("wide", 5, two_blocks()),
                attention("narrow", 2, two_blocks()),
            ],
            16,
        )
        .unwrap();
        assert!(pool.unequal_pages);
        assert_eq!(pool.page_bytes, 20_480);
        assert_eq!(pool.kinds[1].block_size, 16);
        assert_eq!(pool.kinds[1].blocks_per_layer, 2);
        assert_eq!(pool.bytes_per_block, 40_960);
        assert_eq!(pool.blocks_per_request, 2 + 2);
    }

    #[test]
    fn a_latent_page_that_divides_the_largest_holds_more_tokens_and_a_state_page_is_padded() {
        // A latent of 512 + 64 at 2 B: 18,432 B a page of 16; nine heads of
        // 64: 36,864 B. The latent's block holds 32 tokens: cdiv(64, 32) = 2
        // blocks where the heads take cdiv(64, 16) = 4.
        let latent = KvSpec::latent(
            "latent",
            "test",
            kv_core::Latent::new(2, 512, 64, kv_core::DType::BF16),
            Positions::bounded(64, "four blocks of 16"),
            kv_core::Scope::Request,
            kv_core::Rows::MaxNumSeqs,
        );
        let wide = attention("wide", 9, Positions::bounded(64, "four blocks"));
        let pool = pool_of(vec![wide.clone(), latent], 16).unwrap();
        assert!(!pool.unequal_pages);
        assert_eq!(pool.kinds[1].block_size, 32);
        assert_eq!(pool.blocks_per_request, 4 + 2);
        // A state page (1 x 1 x 1,024 f32 = 4,096 B) that divides 36,864 is
        // padded, never given more tokens: its block stays the estimate's.
        static PARTS: [kv_core::StatePart; 1] = [kv_core::StatePart::new(
            "ssm",
            [1, 1, 1024],
            kv_core::DType::F32,
        )];
        let state = KvSpec::recurrent(
            "state",
            "test",
            kv_core::RecurrentState::new(2, &PARTS),
            kv_core::Scope::Request,
            kv_core::Rows::MaxNumSeqs,
        );
        let pool = pool_of(vec![wide, state], 16).unwrap();
        assert!(pool.unequal_pages);
        assert_eq!(pool.kinds[1].block_size, 16);
    }

    #[test]
    fn a_latent_page_that_does_not_divide_the_largest_is_refused() {
        // A latent of 512 + 64 at 2 B is 1,152 B a token, 18,432 B a page of
        // 16. Ten heads of 64 hold 40,960 B a page, which 18,432 does not
        // divide, and vLLM pads no MLA page.
        let latent = KvSpec::latent(
            "latent",
            "test",
            kv_core::Latent::new(2, 512, 64, kv_core::DType::BF16),
            Positions::bounded(32, "two blocks"),
            kv_core::Scope::Request,
            kv_core::Rows::MaxNumSeqs,
        );
        let wide = attention("wide", 10, Positions::bounded(32, "two blocks"));
        let refused = pool_of(vec![wide, latent], 16).unwrap_err().to_string();
        assert!(refused.contains("would not start"), "{refused}");
        assert!(refused.contains("`latent`'s page of 18432 B"), "{refused}");
    }
}
