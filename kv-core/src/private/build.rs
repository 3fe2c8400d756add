//! What generated code builds a declaration's parts with: `const fn`
//! constructors of layouts, positions and rows, and the run-time path of a
//! declaration read after load. The declaration itself is `decl.rs`'s.

use super::decl::known_figure;
use crate::collection::collect;
use crate::declare::type_decls::{self, AfterLoadDecl, AfterLoadRows, KvTypeDecls};
use crate::error::KvError;
use crate::spec::dtype::DType;
use crate::spec::layout::{Geometry, Latent, Layout, RecurrentState};
use crate::spec::positions::{Bound, PositionPolicy, Positions};
use crate::spec::storage::Storage;
use crate::spec::tensors::Tensors;
use crate::spec::{KvSpec, Rows};

/// Every position policy by the name `positions = NAME(..)` takes, with its
/// inputs 1, 2, 3, ... in the order the derive reads them (the first, then the
/// named ones): kv-derive's table of policies is tested against this one.
pub const POLICIES: [(&str, PositionPolicy); 8] = [
    ("window", PositionPolicy::Window { window: 1 }),
    (
        "window_minus_one",
        PositionPolicy::WindowMinusOne { window: 1 },
    ),
    (
        "window_capped",
        PositionPolicy::WindowCapped {
            window: 1,
            max_cache_len: 2,
        },
    ),
    (
        "window_plus_chunk",
        PositionPolicy::WindowPlusChunk {
            window: 1,
            chunk: 2,
        },
    ),
    (
        "vllm_sliding_window",
        PositionPolicy::VllmSlidingWindow {
            window: 1,
            max_num_batched_tokens: 2,
            max_model_len: 3,
            block_size: 4,
        },
    ),
    (
        "vllm_chunked_local",
        PositionPolicy::VllmChunkedLocal {
            chunk: 1,
            max_num_batched_tokens: 2,
            max_model_len: 3,
            block_size: 4,
        },
    ),
    (
        "padded",
        PositionPolicy::PaddedTo {
            count: 1,
            multiple: 2,
        },
    ),
    ("grows_by", PositionPolicy::GrowsBy { count: 1, step: 2 }),
];

/// `AfterLoadRows::MaxNumSeqs`, for generated code.
pub const MAX_NUM_SEQS: AfterLoadRows = AfterLoadRows::MaxNumSeqs;

/// `Geometry::new`, for generated code.
pub const fn geometry(layers: u64, kv_heads: u64, head_dim: u64, dtype: DType) -> Geometry {
    Geometry::new(layers, kv_heads, head_dim, dtype)
}

/// `Rows::fixed`, for generated code.
pub const fn fixed(count: u64, because: &'static str) -> Rows {
    Rows::fixed(count, because)
}

/// Builds, names and validates one declaration read after load, then
/// appends it. A count read as zero makes it yield nothing (see
/// [`EmptyDeclaration`](crate::collection::EmptyDeclaration)); a value that
/// fails or is invalid skips it alone under a collector, and is the error
/// otherwise.
pub fn declare(
    out: &mut Vec<KvSpec>,
    owner: &'static str,
    name: &'static str,
    build: impl FnOnce() -> Result<KvSpec, KvError>,
) -> Result<(), KvError> {
    collect::begin_declaration();
    let spec = match build() {
        Ok(spec) => spec,
        Err(error) => {
            let error = error.in_declaration(&format!("{owner}.{name}"));
            return collect::declaration_failed(name, error);
        }
    };
    if let Some(field) = zero_count(&spec) {
        collect::declared_empty(owner, spec, field);
        return Ok(());
    }
    match spec.validate(owner) {
        Ok(()) => {
            out.push(spec);
            Ok(())
        }
        Err(error) => collect::declaration_failed(name, error),
    }
}

/// The count of a declaration read after load that is zero, by its key:
/// the first zero [`KvSpec::validate`] would refuse, or fixed rows of 0. A
/// block format of no elements or bytes is no count: it stays an error.
fn zero_count(spec: &KvSpec) -> Option<&'static str> {
    let degenerate = |storage: &Storage| matches!(storage, Storage::Blocks(f) if f.block_elems() == 0 || f.block_bytes() == 0);
    let formats_ok = match &spec.layout {
        Layout::Attention { geometry, .. } => {
            !degenerate(&geometry.storage) && !degenerate(&geometry.value_storage())
        }
        Layout::Latent { latent, .. } => {
            !degenerate(&latent.storage) && !latent.rope_storage.as_ref().is_some_and(degenerate)
        }
        Layout::Recurrent(state) => !state.parts.iter().any(|part| degenerate(&part.storage)),
        // A table of no extent is a mistake, not an empty group: an error.
        Layout::Tensors(_) => false,
    };
    if !formats_ok {
        return None;
    }
    match (spec.layout.first_zero(), &spec.rows) {
        (Some(field), _) => Some(field),
        (None, Rows::Fixed { count: 0, .. }) => Some("rows"),
        (None, _) => None,
    }
}

/// A count read after load, with its key and its expression as written: a
/// zero is remembered, so that the report says where it came from.
pub fn read_count(
    count: Result<u64, KvError>,
    key: &'static str,
    from: &'static str,
) -> Result<u64, KvError> {
    if count == Ok(0) {
        collect::zero_read(key, from);
    }
    count
}

/// A whole geometry, latent or state read after load, with its expression
/// as written, for the report of a zero inside it.
pub fn read_whole<T>(value: Result<T, KvError>, from: &'static str) -> Result<T, KvError> {
    collect::whole_read(from);
    value
}

/// An attention layout, for generated code.
pub const fn attention(geometry: Geometry, positions: Positions) -> Layout {
    Layout::Attention {
        geometry,
        positions,
    }
}

/// An MLA latent layout, for generated code.
pub const fn latent(latent: Latent, positions: Positions) -> Layout {
    Layout::Latent { latent, positions }
}

/// A recurrent-state layout, for generated code.
pub const fn state(state: RecurrentState) -> Layout {
    Layout::Recurrent(state)
}

/// Tensors kept beside the caches, for generated code.
pub const fn tensors(tensors: Tensors) -> Layout {
    Layout::Tensors(tensors)
}

/// The bound a recurrent state shows before load (no positions), for
/// generated code; the tables recognise it.
pub const NO_POSITIONS: &str = type_decls::NO_POSITIONS;

/// The bound tensors read after load show before load, for generated code;
/// the tables recognise it.
pub const TENSORS_AFTER_LOAD: &str = type_decls::TENSORS_AFTER_LOAD;

/// A bare count and its reason, for generated code.
pub const fn bounded(count: u64, because: &'static str) -> Positions {
    Positions::bounded(count, because)
}

/// The positions a policy computes; a count that overflows becomes 0, which
/// the const checks (or validation, after load) report.
pub const fn policy(policy: PositionPolicy) -> Positions {
    Positions {
        count: policy_count(policy),
        bound: Bound::Policy(policy),
    }
}

/// A policy's count, 0 where it overflows, for what is known before load.
pub const fn policy_count(policy: PositionPolicy) -> u64 {
    match policy.count() {
        Ok(count) => count,
        Err(_) => 0,
    }
}

/// An `only_when` condition; typed so that a non-`bool` gate is an error at its name.
#[inline(always)]
pub fn gate(open: bool) -> bool {
    open
}

/// Bytes per row of const parts, `0` on overflow (which the const checks
/// report as an error of its own).
pub const fn const_bytes_per_row(geometry: Geometry, positions: u64) -> u64 {
    match geometry.bytes_per_row(positions) {
        Ok(bytes) => bytes,
        Err(_) => 0,
    }
}

/// A type's declarations, for generated code.
pub const fn type_decls(
    type_name: &'static str,
    static_specs: &'static [KvSpec],
    after_load: &'static [AfterLoadDecl],
) -> KvTypeDecls {
    KvTypeDecls {
        type_name,
        static_specs,
        after_load,
    }
}

/// Fixed rows of an after-load declaration; `0` for a count read after load.
pub const fn after_load_fixed(count: u64, because: &'static str) -> AfterLoadRows {
    AfterLoadRows::Fixed {
        count: known_figure(count),
        because,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::storage::BlockFormat;
    use crate::spec::Scope;

    const G: Geometry = Geometry::new(2, 4, 8, DType::F16);

    fn attention(geometry: Geometry) -> KvSpec {
        let four = Positions::bounded(4, "four");
        KvSpec::attention("n", "c", geometry, four, Scope::Request, Rows::MaxNumSeqs)
    }

    #[test]
    fn a_zero_count_is_no_count_when_either_block_format_is_broken() {
        // Zero layers with sound formats: a count read as zero, by its key.
        assert_eq!(zero_count(&attention(G.with_layers(0))), Some("layers"));
        assert_eq!(zero_count(&attention(G)), None);
        // A broken format for keys only, or for values only, stays an error.
        let q8 = Storage::Blocks(BlockFormat::new("q8_0", 32, 34));
        for bad in [
            Storage::Blocks(BlockFormat::new("zero elems", 0, 34)),
            Storage::Blocks(BlockFormat::new("zero bytes", 32, 0)),
        ] {
            let keys_broken = G.with_layers(0).with_storage(bad).with_v_storage(q8);
            assert_eq!(zero_count(&attention(keys_broken)), None);
            let values_broken = G.with_layers(0).with_v_storage(bad);
            assert_eq!(zero_count(&attention(values_broken)), None);
        }
    }

    #[test]
    fn every_position_policy_is_listed_once() {
        let mut seen = [false; POLICIES.len()];
        for (_, policy) in POLICIES {
            // A new variant fails this match until it is listed.
            let index = match policy {
                PositionPolicy::Window { .. } => 0,
                PositionPolicy::WindowMinusOne { .. } => 1,
                PositionPolicy::WindowCapped { .. } => 2,
                PositionPolicy::WindowPlusChunk { .. } => 3,
                PositionPolicy::VllmSlidingWindow { .. } => 4,
                PositionPolicy::VllmChunkedLocal { .. } => 5,
                PositionPolicy::PaddedTo { .. } => 6,
                PositionPolicy::GrowsBy { .. } => 7,
            };
            assert!(!seen[index], "{policy:?} twice");
            seen[index] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
