//! The fixed text of what `#[derive(ModelLocalKv)]` expands to, as
//! `macro_rules!` exported at the crate's root: the impls, the compile-time
//! checks, the unmarked-field check and the registration.

/// The fixed text of what `#[derive(ModelLocalKv)]` generates: the derive
/// passes what differs per type. `self` and the output's name come from the
/// derive, so that its tokens and these agree on hygiene; `__kv` names this
/// module for the derive's tokens.
#[doc(hidden)]
#[macro_export]
macro_rules! __kv_impl_v0_1 {
    (
        impl [$($generics:tt)*] $ty:ty where [$($bounds:tt)*];
        name $name:literal;
        static [$($static:expr),*];
        after_load [$($after_load:expr),*];
        checks [$($checks:tt)*];
        fn ($self_:ident, $out:ident) { $($declare:tt)* }
        $(children ($visitor:ident) { $($children:tt)* })?
        $(child_types ($types:ident) { $($child_types:tt)* })?
        $(items { $($items:tt)* })?
        $(check { $($check:tt)* })?
        $(register $register:ty;)?
    ) => {
        #[allow(clippy::all, clippy::pedantic, non_local_definitions)]
        const _: () = {
            #[allow(unused_imports)]
            use $crate::__private_v0_1 as __kv;

            #[automatically_derived]
            impl $($generics)* $ty $($bounds)* {
                #[doc(hidden)]
                const __KV_STATIC: &'static [$crate::KvSpec] = &[$($static),*];
                #[doc(hidden)]
                const __KV_AFTER_LOAD: &'static [$crate::declare::AfterLoadDecl] = &[$($after_load),*];
            }

            #[automatically_derived]
            impl $($generics)* $crate::declare::DeclaredKv for $ty $($bounds)* {
                const KV_DECLS: $crate::declare::KvTypeDecls = $crate::__private_v0_1::type_decls(
                    $name,
                    Self::__KV_STATIC,
                    Self::__KV_AFTER_LOAD,
                );
                #[doc(hidden)]
                const __KV_CHECKS: () = { $($checks)* };
            }

            #[automatically_derived]
            impl $($generics)* $crate::ModelLocalKv for $ty $($bounds)* {
                fn kv_declare(
                    &$self_,
                    $out: &mut $crate::__private_v0_1::Vec<$crate::KvSpec>,
                ) -> $crate::__private_v0_1::Result<(), $crate::KvError> {
                    $($declare)*
                    ::core::result::Result::Ok(())
                }
                $(
                    fn kv_visit_children(&$self_, $visitor: &mut dyn $crate::declare::ChildVisitor) {
                        $($children)*
                    }
                )?
                fn __kv_validated(&self) -> ::core::primitive::bool {
                    true
                }
                $(
                    fn __kv_owner_types(&self, types: &mut dyn $crate::declare::OwnerTypes) {
                        <Self as $crate::ModelLocalKv>::__kv_child_types(types)
                    }
                    // The user's field types are named again here: lints on
                    // their style belong to the field, where the user's own
                    // `allow`s apply, not to this copy.
                    #[allow(unused, clippy::all, clippy::pedantic, clippy::nursery)]
                    fn __kv_child_types($types: &mut dyn $crate::declare::OwnerTypes) {
                        $($child_types)*
                    }
                )?
            }

            $($($items)*)?
            $($($check)*)?
            $($crate::__kv_register!($register);)?
        };
    };
}

/// One compile-time check of a derived declaration, spanned (by the derive)
/// at the figure it checks; the owner (`Type.name`) comes with `{` and `}`
/// doubled, as the message is a format string.
#[doc(hidden)]
#[macro_export]
macro_rules! __kv_check_v0_1 {
    (count $value:expr, $owner:literal, $key:literal) => {
        ::core::assert!(
            $crate::__private_v0_1::positive(($value) as ::core::primitive::i128),
            ::core::concat!(
                "kv: `",
                $owner,
                "`: `",
                $key,
                "` must be a positive integer that fits in u64, ",
                "but this const expression is zero, negative or too large; change the const, ",
                "or write `",
                $key,
                "` as a literal or as an expression on `self`"
            )
        );
    };
    (zero $geometry:expr, $owner:literal) => {
        ::core::assert!(
            $crate::__private_v0_1::geometry_has_no_zero($geometry),
            ::core::concat!(
                "kv: `",
                $owner,
                "`: this const geometry has a zero layers, kv_heads, head_dim ",
                "or v_head_dim; every dimension of a cache must be positive"
            )
        );
    };
    (position $geometry:expr, $owner:literal) => {
        ::core::assert!(
            $crate::__private_v0_1::position_fits($geometry),
            ::core::concat!(
                "kv: `",
                $owner,
                "`: ",
                $crate::__kv_step_v0_1!(position),
                " overflows u64; ",
                "no cache is that large: check the geometry's parts"
            )
        );
    };
    (valid $ok:expr, $owner:literal) => {
        ::core::assert!(
            $ok,
            ::core::concat!(
                "kv: `",
                $owner,
                "`: this const layout has a zero dimension, a zero input to its ",
                "position policy, or a policy whose count overflows, or its tensors have an ",
                "empty range, a blank reason or a memo in a dtype under a byte; every dimension ",
                "and input must be positive: check the latent, state, tensors or policy"
            )
        );
    };
    (row $fits:expr, $owner:literal) => {
        ::core::assert!(
            $fits,
            ::core::concat!(
                "kv: `",
                $owner,
                "`: ",
                $crate::__kv_step_v0_1!(row),
                " overflows u64; ",
                "lower the `bounded(..)` position count, or check the geometry"
            )
        );
    };
    (peak $fits:expr, $owner:literal) => {
        ::core::assert!(
            $fits,
            ::core::concat!(
                "kv: `",
                $owner,
                "`: ",
                $crate::__kv_step_v0_1!(peak),
                " overflows u64; ",
                "lower the `fixed(..)` row count"
            )
        );
    };
}

pub use crate::__kv_check_v0_1 as check;

/// A field not marked `#[kv(child)]` or `#[kv(skip, because = "...")]` must
/// not hold model-local KV: its declarations would vanish from every report.
/// Spanned (by the derive) at the field; `$field` is `Type.field`, `$written`
/// the field's type as written, `$ty` the type asked about (its lifetimes
/// made `'static`), `$inner` how that type is written where it is not the
/// whole field's (`Cache` in `VecDeque<Cache>`). The check fails only where
/// none of the `$guard` types around it declares, so that an owner is
/// reported once, at the outermost type that declares.
#[doc(hidden)]
#[macro_export]
macro_rules! __kv_unmarked_v0_1 {
    (@check $ty:ty, [$($guard:ty),*], $what:expr) => {
        const _: () = {
            #[allow(unused_imports)]
            use $crate::__private_v0_1::DeclaresNoKv as _;
            ::core::assert!(
                !$crate::__private_v0_1::Unmarked::<$ty>::DECLARES_KV
                    $(|| $crate::__private_v0_1::Unmarked::<$guard>::DECLARES_KV)*,
                "{}",
                ::core::concat!(
                    $what,
                    "but the field is not marked, so those declarations would ",
                    "be missing from every report: add `#[kv(child)]` to count them, or ",
                    "`#[kv(skip, because = \"...\")]` to leave them out and say why"
                )
            );
        };
    };
    ($ty:ty, [$($guard:ty),*], $field:literal, $written:literal) => {
        $crate::__kv_unmarked_v0_1!(@check $ty, [$($guard),*], ::core::concat!(
            "kv: `", $field, "` holds `", $written, "`, which declares model-local KV, "
        ));
    };
    ($ty:ty, [$($guard:ty),*], $field:literal, $written:literal, in $inner:literal) => {
        $crate::__kv_unmarked_v0_1!(@check $ty, [$($guard),*], ::core::concat!(
            "kv: `", $field, "` holds `", $written, "`, in which `", $inner,
            "` declares model-local KV, "
        ));
    };
}

pub use crate::__kv_unmarked_v0_1 as unmarked;

/// A field marked neither `#[kv(child)]` nor `#[kv(skip, because = "...")]`
/// that holds a trait object (`$object`, whose trait is `$name`, written
/// `$last` in a trait declaration): always an error, in words that depend on
/// whether the trait has `ModelLocalKv` as a supertrait. `_` for a trait
/// object that names a parameter of the struct, which cannot be asked about.
#[doc(hidden)]
#[macro_export]
macro_rules! __kv_unmarked_trait_object_v0_1 {
    (_, $field:literal, $written:literal, $name:literal, $last:literal, $krate:literal) => {
        const _: () = ::core::panic!("{}", ::core::concat!(
            "kv: `", $field, "` holds `", $written, "`, a trait object: kv cannot tell what ",
            "it holds, so its caches would be missing from every report. Mark the field ",
            "`#[kv(child)]` (`", $name, "` must then have `ModelLocalKv` as a supertrait: ",
            "`trait ", $last, ": ", $krate, "::ModelLocalKv { ... }`), or ",
            "`#[kv(skip, because = \"...\")]` if it holds no model-local KV"
        ));
    };
    ($object:ty, $field:literal, $written:literal, $name:literal, $last:literal, $krate:literal) => {
        const _: () = {
            #[allow(unused_imports)]
            use $crate::__private_v0_1::NotAnOwner as _;
            if $crate::__private_v0_1::TraitObject::<$object>::IS_OWNER {
                ::core::panic!("{}", ::core::concat!(
                    "kv: `", $field, "` holds `", $written, "`, a trait object that declares ",
                    "model-local KV, but the field is not marked, so those declarations would be ",
                    "missing from every ",
                    "report: add `#[kv(child)]` to count them, or ",
                    "`#[kv(skip, because = \"...\")]` to leave them out and say why"
                ));
            } else {
                ::core::panic!("{}", ::core::concat!(
                    "kv: `", $field, "` holds `", $written, "`, a trait object kv cannot see ",
                    "into: whatever implements `", $name, "` may hold caches, and they would be ",
                    "missing from every report. If it may, add `ModelLocalKv` as a supertrait ",
                    "(`trait ", $last, ": ", $krate, "::ModelLocalKv { ... }`) and mark the field ",
                    "`#[kv(child)]`; if it holds none, mark it `#[kv(skip, because = \"...\")]`"
                ));
            }
        };
    };
}

pub use crate::__kv_unmarked_trait_object_v0_1 as unmarked_trait_object;

/// A `#[kv(child)]` field holding a trait object (`$object`, whose trait is
/// `$name`, written `$last` in a trait declaration) is visited through the
/// trait: the trait must have `ModelLocalKv` as a supertrait. Spanned (by
/// the derive) at the `child`.
#[doc(hidden)]
#[macro_export]
macro_rules! __kv_trait_object_child_v0_1 {
    ($object:ty, $field:literal, $written:literal, $name:literal, $last:literal, $krate:literal) => {
        const _: () = {
            #[allow(unused_imports)]
            use $crate::__private_v0_1::NotAnOwner as _;
            ::core::assert!(
                $crate::__private_v0_1::TraitObject::<$object>::IS_OWNER,
                "{}",
                ::core::concat!(
                    "kv: `",
                    $field,
                    "` holds `",
                    $written,
                    "`: the trait object `dyn ",
                    $name,
                    "` is not a `ModelLocalKv` owner, so kv cannot visit what it holds; add ",
                    "`ModelLocalKv` as a supertrait of `",
                    $name,
                    "`: `trait ",
                    $last,
                    ": ",
                    $krate,
                    "::ModelLocalKv { ... }` (each type that implements it then ",
                    "derives `ModelLocalKv`), or mark the field ",
                    "`#[kv(skip, because = \"...\")]`"
                )
            );
        };
    };
}

pub use crate::__kv_trait_object_child_v0_1 as trait_object_child;

/// A `#[kv(child)]` field of type `$ty`, holding trait objects `$objects`
/// that are owners, must be a container kv walks; asked only once every
/// trait object is an owner, so one mistake is one error.
#[doc(hidden)]
#[macro_export]
macro_rules! __kv_walkable_child_v0_1 {
    ($ty:ty, [$($object:ty),*], $field:literal, $written:literal) => {
        const _: () = {
            #[allow(unused_imports)]
            use $crate::__private_v0_1::{NoElement as _, NotAnOwner as _};
            ::core::assert!(
                !(true $(&& $crate::__private_v0_1::TraitObject::<$object>::IS_OWNER)*)
                    || $crate::__private_v0_1::Element::<$ty, $crate::__private_v0_1::TraitObjects>::VISIT
                        .is_some(),
                "{}",
                ::core::concat!(
                    "kv: `", $field, "` holds `", $written, "`, which kv does not know how to ",
                    "walk to its owners: hold them in a container kv walks (`Box`, `Arc`, `Vec`, ",
                    "`Option`, a lock, ...; with kv-core's features `smallvec`, `parking_lot`, ",
                    "`tokio`, theirs too), or write a function that returns them and name it: ",
                    "`#[kv(child(with = path::to::owners))]`"
                )
            );
        };
    };
}

pub use crate::__kv_walkable_child_v0_1 as walkable_child;

/// Registers a derived type in [`crate::registry`] when the `registry`
/// feature is on; expands to nothing otherwise.
#[cfg(feature = "registry")]
#[doc(hidden)]
#[macro_export]
macro_rules! __kv_register {
    ($ty:ty) => {
        $crate::__private_v0_1::inventory::submit! {
            $crate::registry::Registered {
                decls: <$ty as $crate::declare::DeclaredKv>::KV_DECLS,
                module_path: ::core::module_path!(),
                type_name: ::core::any::type_name::<$ty>,
                child_types: <$ty as $crate::ModelLocalKv>::__kv_child_types,
            }
        }
    };
}

/// Registers a derived type in the registry when the `registry` feature is
/// on; expands to nothing otherwise.
#[cfg(not(feature = "registry"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __kv_register {
    ($ty:ty) => {};
}
