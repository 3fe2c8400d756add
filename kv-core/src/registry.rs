//! Every type in the binary that derives `ModelLocalKv` (feature `registry`),
//! so documentation and start-up checks can list them all without a
//! hand-kept list that goes stale. Generic types are not registered: they
//! have no single set of declarations.
//!
//! ```
//! use kv_core::ModelLocalKv;
//!
//! #[derive(ModelLocalKv)]
//! #[kv(
//!     name = "graph_pool",
//!     cache = "DynamicCache captured per bucket",
//!     layers = 16, kv_heads = 64, head_dim = 16, dtype = bf16,
//!     positions = bounded(11, because = "group_size 4 + max(delay_pattern) 7"),
//!     scope = model,
//!     rows = fixed(261, because = "sum of captured buckets"),
//! )]
//! struct MimoGraphPool;
//!
//! let pool = kv_core::registry::registered_types()
//!     .find(|r| r.decls.type_name == "MimoGraphPool")
//!     .unwrap();
//! assert_eq!(pool.decls.static_specs[0].peak_bytes(1), Ok(188_153_856));
//! ```

use crate::KvTypeDecls;

/// One derived type, as registered by the derive.
#[derive(Clone, Copy, Debug)]
pub struct Registered {
    /// What the type declares.
    pub decls: KvTypeDecls,
    /// The module the type is defined in.
    pub module_path: &'static str,
}

inventory::collect!(Registered);

/// Every registered type, ordered by module path, then type name, so that
/// generated documentation is stable across builds.
pub fn registered_types() -> impl Iterator<Item = &'static Registered> {
    let mut types: Vec<&'static Registered> = inventory::iter::<Registered>.into_iter().collect();
    types.sort_by_key(|r| (r.module_path, r.decls.type_name));
    types.into_iter()
}

/// The registered types that declare something, statically or after load.
pub fn declaring_types() -> impl Iterator<Item = &'static Registered> {
    registered_types()
        .filter(|r| !r.decls.static_specs.is_empty() || !r.decls.after_load.is_empty())
}
