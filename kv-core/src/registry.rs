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

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::declare::type_decls::KvTypeDecls;
use crate::declare::{ChildVisitor, ModelLocalKv, OwnerTypes};

/// One derived type, as registered by the derive.
#[derive(Clone, Copy, Debug)]
pub struct Registered {
    /// What the type declares.
    pub decls: KvTypeDecls,
    /// The module the type is defined in.
    pub module_path: &'static str,
    /// `std::any::type_name` of the type.
    pub type_name: fn() -> &'static str,
    /// Names the owner types its `#[kv(child)]` fields may hold.
    #[doc(hidden)]
    pub child_types: fn(&mut dyn OwnerTypes),
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

/// An annotated type that nothing reaches from a model's root: its
/// declarations are in no report. See [`unreached`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unreached {
    /// `std::any::type_name` of the annotated type.
    pub type_name: &'static str,
    /// The module it is defined in.
    pub module_path: &'static str,
    /// `std::any::type_name` of the root it was checked from.
    pub root: &'static str,
}

impl fmt::Display for Unreached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kv: `{}` derives ModelLocalKv, but no field path from `{}` can hold it, so its \
             declarations are in no report: a struct between them is missing \
             `#[derive(ModelLocalKv)]` (derive it, with `#[kv(child)]` on the field that holds \
             the next), or the field holding it is `#[kv(skip, ...)]`",
            self.type_name, self.root
        )
    }
}

/// The start-up check for what the compiler cannot see: an annotated type,
/// defined in `root`'s module or below it, that no chain of `#[kv(child)]`
/// fields reaches from `root`'s type, and that the model tree does not hold
/// now. Such a type sits under a struct without the derive (the compiler
/// checks each derived struct's fields, but not those of a struct that does
/// not derive), and its caches would vanish from every report.
///
/// A type counts as reached when a path of child fields from the root's
/// type can hold it (whatever the fields hold now: a `None` or an enum's
/// other variant still reaches its type), or when the collector finds it
/// in `root` now (behind a hand-written owner). Only types in `root`'s module
/// and below it are checked, so the annotated types of other models linked
/// into the same binary are never reported. Nothing is found for a generic
/// root (generic types are not registered).
///
/// ```
/// use kv_core::ModelLocalKv;
///
/// mod model {
///     use kv_core::ModelLocalKv;
///
///     #[derive(ModelLocalKv)]
///     #[kv(
///         name = "kv", cache = "concat", layers = 1, kv_heads = 8, head_dim = 128,
///         dtype = bf16, positions = bounded(4096, because = "max_position_embeddings"),
///         scope = request, rows = max_num_seqs,
///     )]
///     pub struct Attention;
///
///     /// Forgot `#[derive(ModelLocalKv)]`: its attention is in no report.
///     pub struct Block {
///         pub attn: Attention,
///     }
///
///     #[derive(ModelLocalKv)]
///     pub struct Model {
///         pub blocks: Vec<Block>,
///     }
/// }
///
/// let model = model::Model { blocks: vec![model::Block { attn: model::Attention }] };
/// let missing = kv_core::registry::unreached(&model);
/// assert_eq!(missing.len(), 1);
/// assert!(missing[0].type_name.ends_with("model::Attention"));
/// // At start-up, beside the report:
/// for problem in &missing {
///     log::warn!("{problem}");
/// }
/// ```
pub fn unreached(root: &dyn ModelLocalKv) -> Vec<Unreached> {
    let root_type = root.kv_identity().type_name();
    let by_name: HashMap<&'static str, &'static Registered> = inventory::iter::<Registered>
        .into_iter()
        .map(|registered| ((registered.type_name)(), registered))
        .collect();
    // Types a chain of child fields can hold, from the root's type.
    let mut reached = TypeWalk {
        seen: HashSet::new(),
        queue: vec![root_type],
    };
    while let Some(name) = reached.queue.pop() {
        if let Some(registered) = by_name.get(target_of(name)) {
            (registered.child_types)(&mut reached);
        }
    }
    // And what the tree holds now, behind hand-written owners too.
    let mut found = Found(HashSet::new());
    found.owner(root);
    let module = module_of(root_type);
    let mut missing: Vec<Unreached> = by_name
        .iter()
        .filter(|(name, _)| {
            // Both modules from `type_name`: `module_path!` leaves out the
            // functions a type may be defined in, and `type_name` does not.
            in_module(module_of(name), module)
                && **name != root_type
                && !reached.seen.contains(**name)
                && !found.0.contains(**name)
        })
        .map(|(name, registered)| Unreached {
            type_name: name,
            module_path: registered.module_path,
            root: root_type,
        })
        .collect();
    missing.sort_by_key(|unreached| unreached.type_name);
    missing
}

struct TypeWalk {
    seen: HashSet<&'static str>,
    queue: Vec<&'static str>,
}

impl OwnerTypes for TypeWalk {
    fn owner(&mut self, type_name: &'static str) {
        let target = target_of(type_name);
        if self.seen.insert(target) {
            self.queue.push(target);
        }
    }
}

/// The owner types the collector meets in a tree now.
struct Found(HashSet<&'static str>);

impl ChildVisitor for Found {
    fn enter(&mut self, _: crate::declare::Segment<'_>) {}
    fn leave(&mut self) {}
    fn owner(&mut self, owner: &dyn ModelLocalKv) {
        // A cycle of shared owners ends at the second visit of a type.
        if self.0.insert(owner.kv_identity().type_name()) {
            owner.kv_visit_children(self);
        }
    }
}

/// `Box<T>`, `Rc<T>`, `Arc<T>` and `&T` forward to `T`, whose registered
/// entry holds the children: the pointer's type name is peeled to its target's.
fn target_of(type_name: &'static str) -> &'static str {
    const POINTERS: [&str; 3] = ["alloc::boxed::Box<", "alloc::rc::Rc<", "alloc::sync::Arc<"];
    let mut name = type_name;
    loop {
        if let Some(inner) = name.strip_prefix('&') {
            name = inner.strip_prefix("mut ").unwrap_or(inner);
            continue;
        }
        match POINTERS
            .iter()
            .find_map(|pointer| name.strip_prefix(pointer)?.strip_suffix('>'))
        {
            Some(inner) => name = inner,
            None => return name,
        }
    }
}

/// The module a type is defined in: its `type_name` up to the last `::`
/// before any generic arguments.
fn module_of(type_name: &str) -> &str {
    let path = type_name.split('<').next().unwrap_or(type_name);
    path.rsplit_once("::").map_or("", |(module, _)| module)
}

/// Whether `module` is `root` or below it.
fn in_module(module: &str, root: &str) -> bool {
    module
        .strip_prefix(root)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_are_peeled_to_their_target() {
        assert_eq!(target_of("alloc::boxed::Box<my::A>"), "my::A");
        assert_eq!(
            target_of("alloc::sync::Arc<alloc::rc::Rc<my::A<u8>>>"),
            "my::A<u8>"
        );
        assert_eq!(target_of("&mut my::A"), "my::A");
        assert_eq!(target_of("&my::A"), "my::A");
        assert_eq!(target_of("my::Boxes<u8>"), "my::Boxes<u8>");
    }

    #[test]
    fn modules_are_the_path_before_the_name() {
        assert_eq!(module_of("a::b::Model"), "a::b");
        assert_eq!(module_of("a::b::Model<c::D>"), "a::b");
        assert_eq!(module_of("Model"), "");
        assert!(in_module("a::b", "a::b"));
        assert!(in_module("a::b::c", "a::b"));
        assert!(!in_module("a::bc", "a::b"));
        assert!(!in_module("a", "a::b"));
    }
}
