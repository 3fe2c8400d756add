//! What a type declares without an instance, as `#[derive(ModelLocalKv)]`
//! states it in `const` items: the declarations known at compile time, and
//! what is known before load of those read after it.

use crate::spec::{KvSpec, Scope};

/// What a type declares, known without an instance: the declarations whose
/// every value is a literal or const, and the names of those read after load.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct KvTypeDecls {
    /// The type's name as written (without generic arguments).
    pub type_name: &'static str,
    /// Declarations fully known at compile time, gated ones included
    /// (their `only_when` says when they hold).
    pub static_specs: &'static [KvSpec],
    /// Declarations with a value read after load (from `self`).
    pub after_load: &'static [AfterLoadDecl],
}

/// A declaration with a value read after load, and what of it is known
/// before: its texts always, its figures where they are literal or const.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AfterLoadDecl {
    /// The declaration's name.
    pub name: &'static str,
    /// What kind of cache holds it.
    pub cache: &'static str,
    /// When the memory lives.
    pub scope: Scope,
    /// Positions, where the count is literal or const.
    pub positions: Option<u64>,
    /// What bounds the positions.
    pub positions_bound: &'static str,
    /// Bytes per row, where the geometry and positions are literal or const.
    pub bytes_per_row: Option<u64>,
    /// The row driver, with the count where it is literal or const.
    pub rows: AfterLoadRows,
    /// The observable condition, if any.
    pub only_when: Option<&'static str>,
    /// A condition the model cannot observe, if stated.
    pub assumes: Option<&'static str>,
}

/// The bound of a recurrent state, which has no positions: what the derive
/// writes as its `positions_bound` before load, and what "Bounded by" reads
/// in a table.
pub(crate) const NO_POSITIONS: &str = "no positions (recurrent state)";

/// The bound of tensors beside the caches read after load: what the derive
/// writes as their `positions_bound` before load; the shapes follow after.
pub(crate) const TENSORS_AFTER_LOAD: &str = "tensors, no positions (shapes known after load)";

/// The rows of an [`AfterLoadDecl`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterLoadRows {
    /// One row per in-flight sequence.
    MaxNumSeqs,
    /// A count the model controls.
    Fixed {
        /// The count, where it is literal or const.
        count: Option<u64>,
        /// Why it is that count.
        because: &'static str,
    },
}

/// Implemented by `#[derive(ModelLocalKv)]`: the type-level declarations, usable
/// in `const` items (tables and budgets need no instance).
pub trait DeclaredKv {
    /// What this type declares.
    const KV_DECLS: KvTypeDecls;

    /// Compile-time checks of const values; evaluated where the type is used.
    #[doc(hidden)]
    const __KV_CHECKS: () = ();
}
