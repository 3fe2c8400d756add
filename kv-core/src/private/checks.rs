//! The predicates behind generated code's compile-time checks, and the
//! question whether a field's type declares model-local KV.

use crate::declare::KvChild;
use crate::spec::dtype::DType;
use crate::spec::layout::{Geometry, Layout};
use crate::spec::positions::{Bound, Positions};
use crate::spec::KvSpec;

/// Whether no dimension of a const geometry is zero, for compile-time checks.
pub const fn geometry_has_no_zero(geometry: Geometry) -> bool {
    geometry.first_zero().is_none()
}

/// The attention geometry of a derived (attention) spec, for the const checks.
pub const fn spec_geometry(spec: &KvSpec) -> Geometry {
    match &spec.layout {
        Layout::Attention { geometry, .. } => *geometry,
        // The derive declares attention only; a zero geometry fails the checks.
        _ => Geometry::new(0, 0, 0, DType::U8),
    }
}

/// Whether a policy's inputs are positive and its count fits.
const fn policy_ok(positions: Option<&Positions>) -> bool {
    match positions {
        Some(Positions {
            bound: Bound::Policy(policy),
            ..
        }) => policy.zero_input().is_none() && policy.count().is_ok(),
        _ => true,
    }
}

/// Whether every dimension and count of a static declaration is positive and
/// its position policy's inputs are too, for compile-time checks of any
/// layout: the walk `KvSpec::validate` makes (`Layout::first_zero`).
pub const fn spec_has_no_zero(spec: &KvSpec) -> bool {
    spec.layout.first_zero().is_none() && policy_ok(spec.layout.positions())
}

/// Whether a const count (cast to `i128`) is positive and fits in `u64`.
pub const fn positive(count: i128) -> bool {
    count > 0 && count <= u64::MAX as i128
}

/// Whether a const geometry's bytes per position fit in `u64`.
pub const fn position_fits(geometry: Geometry) -> bool {
    geometry.bytes_per_position().is_ok()
}

/// Whether a const geometry's bytes per row fit in `u64`.
pub const fn row_fits(geometry: Geometry, positions: u64) -> bool {
    geometry.bytes_per_row(positions).is_ok()
}

/// Whether a static declaration's bytes per row fit in `u64`.
pub const fn spec_row_fits(spec: &KvSpec) -> bool {
    spec.bytes_per_row().is_ok()
}

/// Whether a static declaration's peak at one sequence fits in `u64`.
pub const fn spec_peak_fits(spec: &KvSpec) -> bool {
    spec.peak_bytes(1).is_ok()
}

/// Asks, for a concrete field type, whether it declares model-local KV (it
/// implements [`KvChild`]): the inherent `DECLARES_KV` exists only where that
/// bound holds, and a path prefers it to [`DeclaresNoKv`]'s, which every type
/// has (autoref-style specialisation on stable Rust). In generic code the bound
/// cannot be proven, so a field whose type names a type parameter always reads
/// `false`: the derive checks only fields of concrete types.
pub struct Unmarked<T: ?Sized>(core::marker::PhantomData<T>);

impl<T: KvChild + ?Sized> Unmarked<T> {
    /// The field's type declares model-local KV.
    pub const DECLARES_KV: bool = true;
}

/// The fallback of [`Unmarked`]: a type that is no `KvChild` declares nothing.
pub trait DeclaresNoKv {
    /// The field's type declares no model-local KV.
    const DECLARES_KV: bool = false;
}

impl<T: ?Sized> DeclaresNoKv for Unmarked<T> {}

/// Asks, for a trait object type (`dyn Stage + Send`), whether it is a
/// `ModelLocalKv` owner (its trait has `ModelLocalKv` as a supertrait), the
/// way [`Unmarked`] asks whether a type declares.
pub struct TraitObject<T: ?Sized>(core::marker::PhantomData<T>);

impl<T: crate::declare::ModelLocalKv + ?Sized> TraitObject<T> {
    /// The trait object is an owner: kv visits what it holds.
    pub const IS_OWNER: bool = true;
}

/// The fallback of [`TraitObject`]: a trait without the supertrait.
pub trait NotAnOwner {
    /// The trait object is no owner: kv cannot see what it holds.
    const IS_OWNER: bool = false;
}

impl<T: ?Sized> NotAnOwner for TraitObject<T> {}

/// The predicates behind the const checks, case by case: the compile-fail
/// suite shows that a broken rule stops the build, these show which values
/// break which rule (each a mutant the survey found).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::layout::{Latent, RecurrentState, StatePart};
    use crate::spec::positions::PositionPolicy;
    use crate::spec::storage::{BlockFormat, Storage};
    use crate::spec::{Rows, Scope};

    const G: Geometry = Geometry::new(2, 4, 8, DType::F16);
    const ZERO_ELEMS: Storage = Storage::Blocks(BlockFormat::new("zero elems", 0, 34));
    const ZERO_BYTES: Storage = Storage::Blocks(BlockFormat::new("zero bytes", 32, 0));

    fn attention(geometry: Geometry, positions: Positions) -> KvSpec {
        KvSpec::attention(
            "n",
            "c",
            geometry,
            positions,
            Scope::Request,
            Rows::MaxNumSeqs,
        )
    }

    fn four() -> Positions {
        Positions::bounded(4, "four")
    }

    #[test]
    fn a_zero_in_any_dimension_fails_the_geometry_check() {
        assert!(geometry_has_no_zero(G));
        assert!(geometry_has_no_zero(G.with_v_head_dim(1)));
        for zero in [
            G.with_layers(0),
            Geometry::new(2, 0, 8, DType::F16),
            Geometry::new(2, 4, 0, DType::F16).with_v_head_dim(8),
        ] {
            assert!(!geometry_has_no_zero(zero), "{zero:?}");
            assert!(!spec_has_no_zero(&attention(zero, four())), "{zero:?}");
        }
        // A `v_head_dim` of 0 is a cache of keys alone (vLLM's `head_size_v`
        // 0), not an empty one.
        let keys_only = G.with_v_head_dim(0);
        assert!(geometry_has_no_zero(keys_only));
        assert!(spec_has_no_zero(&attention(keys_only, four())));
        // 2 layers x 4 heads x 8 keys x 2 B, no values.
        assert_eq!(keys_only.bytes_per_position(), Ok(128));
        assert_eq!(G.bytes_per_position(), Ok(256));
    }

    #[test]
    fn the_const_checks_see_an_attention_spec_geometry() {
        assert_eq!(spec_geometry(&attention(G, four())), G);
        let latent = KvSpec::latent(
            "n",
            "c",
            Latent::new(2, 512, 64, DType::BF16),
            four(),
            Scope::Request,
            Rows::MaxNumSeqs,
        );
        assert!(!geometry_has_no_zero(spec_geometry(&latent)));
    }

    #[test]
    fn a_block_format_of_zero_elements_or_bytes_fails_for_keys_or_values() {
        assert!(spec_has_no_zero(&attention(G, four())));
        let q8 = Storage::Blocks(BlockFormat::new("q8_0", 32, 34));
        assert!(spec_has_no_zero(&attention(G.with_storage(q8), four())));
        for bad in [ZERO_ELEMS, ZERO_BYTES] {
            assert!(!spec_has_no_zero(&attention(
                G.with_storage(bad).with_v_storage(q8),
                four()
            )));
            assert!(!spec_has_no_zero(&attention(G.with_v_storage(bad), four())));
        }
    }

    #[test]
    fn zero_positions_or_a_policy_with_a_zero_input_fail() {
        assert!(!spec_has_no_zero(&attention(
            G,
            Positions::bounded(0, "none")
        )));
        let chunk = |chunk| {
            Positions::from_policy(PositionPolicy::WindowPlusChunk { window: 4, chunk })
                .expect("fits")
        };
        assert!(spec_has_no_zero(&attention(G, chunk(512))));
        // Four positions, but a zero chunk means the policy was misread.
        assert_eq!(chunk(0).count, 4);
        assert!(!spec_has_no_zero(&attention(G, chunk(0))));
    }

    #[test]
    fn a_zero_in_a_latent_fails() {
        let latent = |layers, rank, rope, storage| {
            let latent = Latent::new(layers, rank, rope, DType::BF16).with_storage(storage);
            KvSpec::latent("n", "c", latent, four(), Scope::Request, Rows::MaxNumSeqs)
        };
        let dense = Storage::Dense(DType::BF16);
        assert!(spec_has_no_zero(&latent(2, 512, 64, dense)));
        for zero in [
            latent(0, 512, 64, dense),
            latent(2, 0, 64, dense),
            latent(2, 512, 0, dense),
            latent(2, 512, 64, ZERO_BYTES),
        ] {
            assert!(!spec_has_no_zero(&zero), "{zero:?}");
        }
        let no_positions = KvSpec::latent(
            "n",
            "c",
            Latent::new(2, 512, 64, DType::BF16),
            Positions::bounded(0, "none"),
            Scope::Request,
            Rows::MaxNumSeqs,
        );
        assert!(!spec_has_no_zero(&no_positions));
    }

    #[test]
    fn a_zero_in_a_recurrent_state_fails() {
        const PARTS: &[StatePart] = &[
            StatePart::new("conv", [1, 4, 3], DType::F32),
            StatePart::new("ssm", [2, 8, 16], DType::F32),
        ];
        const EMPTY: &[StatePart] = &[];
        let state = |state: RecurrentState| {
            KvSpec::recurrent("n", "c", state, Scope::Request, Rows::MaxNumSeqs)
        };
        assert!(spec_has_no_zero(&state(RecurrentState::new(2, PARTS))));
        assert!(!spec_has_no_zero(&state(RecurrentState::new(0, PARTS))));
        assert!(!spec_has_no_zero(&state(
            RecurrentState::new(2, PARTS).with_slots(0)
        )));
        assert!(!spec_has_no_zero(&state(RecurrentState::new(2, EMPTY))));
        for dim in 0..3 {
            let mut shape = [2, 8, 16];
            shape[dim] = 0;
            let parts = vec![PARTS[0], StatePart::new("ssm", shape, DType::F32)];
            let zero = RecurrentState::from_parts(2, parts);
            assert!(!spec_has_no_zero(&state(zero)), "dimension {dim}");
        }
    }

    #[test]
    fn const_counts_are_positive_and_fit_in_u64() {
        assert!(positive(1));
        assert!(positive(i128::from(u64::MAX)));
        assert!(!positive(0));
        assert!(!positive(-1));
        assert!(!positive(i128::from(u64::MAX) + 1));
    }

    #[test]
    fn the_fit_checks_fail_exactly_where_the_bytes_overflow() {
        assert!(position_fits(G));
        assert!(!position_fits(G.with_layers(u64::MAX)));
        assert!(row_fits(G, 4));
        assert!(!row_fits(G, u64::MAX));
        assert!(spec_row_fits(&attention(G, four())));
        assert!(!spec_row_fits(&attention(
            G,
            Positions::bounded(u64::MAX, "all")
        )));
        let rows =
            |count| KvSpec::attention("n", "c", G, four(), Scope::Model, Rows::fixed(count, "r"));
        assert!(spec_peak_fits(&rows(2)));
        // 1 KiB per row fits; u64::MAX rows of it do not.
        assert!(spec_row_fits(&rows(u64::MAX)));
        assert!(!spec_peak_fits(&rows(u64::MAX)));
    }
}
