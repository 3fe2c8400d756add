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
use crate::declare::{ChildTypes, ChildVisitor, ModelLocalKv, OwnerTypes};

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

/// An annotated type that nothing reaches from a model's roots: its
/// declarations are in no report. See [`unreached`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unreached {
    /// `std::any::type_name` of the annotated type.
    pub type_name: &'static str,
    /// The module it is defined in.
    pub module_path: &'static str,
    /// `std::any::type_name` of each root it was checked from.
    pub roots: Vec<&'static str>,
}

impl fmt::Display for Unreached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let roots = self
            .roots
            .iter()
            .map(|root| format!("`{root}`"))
            .collect::<Vec<_>>()
            .join(", ");
        write!(
            f,
            "kv: `{}` derives ModelLocalKv, but no field path from {roots} can hold it, so its \
             declarations are in no report: a struct between them is missing \
             `#[derive(ModelLocalKv)]` (derive it, with `#[kv(child)]` on the field that holds \
             the next), a hand-written `ModelLocalKv` does not visit it, or the field holding it \
             is `#[kv(skip, ...)]`; if it belongs to another model, leave its module out with \
             `registry::unreached_within`",
            self.type_name
        )
    }
}

/// The start-up check for what the compiler cannot see: every annotated
/// type of the roots' crates that no chain of `#[kv(child)]` fields reaches
/// from the `roots` (a pipeline and the cache kept beside it, say), and that
/// the model tree does not hold now. Such a type sits under a struct without
/// the derive, in any module (engines keep pipeline, models and shared
/// layers in sibling modules), or under a hand-written owner that does not
/// visit it; its caches would vanish from every report.
///
/// A type counts as reached when a path of child fields from a root can hold
/// it, whatever the fields hold now (an empty `Option`, an empty `Vec`, an
/// enum's other variants still reach their types), or when the collector
/// finds it in a root now. The walk starts from the values, so a generic
/// root, generic layers and what a trait object holds now are walked like
/// any other; from each value reached, its type's fields are walked too.
///
/// What it cannot see, and so never reports (the census in `kv-candle`
/// measures what really is held):
/// - a generic annotated type: it has no single set of declarations, and is
///   not registered;
/// - behind a trait object, a type the object does not hold now;
/// - a type reached by one field while another field of the same type, in a
///   struct without the derive, is left out: the derive makes an unmarked
///   field holding an owner a compile error wherever it can see one.
///
/// Only types of the roots' crates are checked, so other crates' models
/// linked into the binary are never reported; in a crate with several
/// models, [`unreached_within`] names the modules to check. Nothing is
/// reported about the roots themselves.
///
/// ```
/// mod layers {
///     use kv_core::ModelLocalKv;
///
///     #[derive(ModelLocalKv)]
///     #[kv(
///         name = "kv", cache = "concat", layers = 1, kv_heads = 8, head_dim = 128,
///         dtype = bf16, positions = bounded(4096, because = "max_position_embeddings"),
///         scope = request, rows = max_num_seqs,
///     )]
///     pub struct Attention;
/// }
///
/// mod models {
///     use kv_core::ModelLocalKv;
///
///     /// Forgot `#[derive(ModelLocalKv)]`: its attention is in no report.
///     pub struct Block {
///         pub attn: super::layers::Attention,
///     }
///
///     #[derive(ModelLocalKv)]
///     pub struct Model {
///         pub blocks: Vec<Block>,
///     }
/// }
///
/// fn main() {
///     let model = models::Model { blocks: vec![models::Block { attn: layers::Attention }] };
///     let missing = kv_core::registry::unreached(&[&model]);
///     assert_eq!(missing.len(), 1);
///     assert!(missing[0].type_name.ends_with("layers::Attention"));
///     // At start-up, beside the report:
///     for problem in &missing {
///         log::warn!("{problem}");
///     }
/// }
/// ```
pub fn unreached(roots: &[&dyn ModelLocalKv]) -> Vec<Unreached> {
    let crates: Vec<&str> = roots
        .iter()
        .map(|root| crate_of(root.kv_identity().type_name()))
        .collect();
    unreached_within(roots, &crates)
}

/// [`unreached`], checking the annotated types defined in `modules` (each a
/// module path, `my_engine::models::llama`, and below it) instead of the
/// roots' whole crates: for a crate that holds several models, of which
/// the binary serves one.
pub fn unreached_within(roots: &[&dyn ModelLocalKv], modules: &[&str]) -> Vec<Unreached> {
    let by_name: HashMap<&'static str, &'static Registered> = inventory::iter::<Registered>
        .into_iter()
        .map(|registered| ((registered.type_name)(), registered))
        .collect();
    let mut walk = Walk {
        by_name: &by_name,
        types: TypeWalk {
            seen: HashSet::new(),
            queue: Vec::new(),
        },
        owners: HashSet::new(),
    };
    let root_types: Vec<&'static str> = roots
        .iter()
        .map(|root| root.kv_identity().type_name())
        .collect();
    for root in roots {
        walk.owner(*root);
    }
    walk.drain();
    let reached = walk.types.seen;
    let mut missing: Vec<Unreached> = by_name
        .iter()
        .filter(|(name, _)| {
            // The module from `type_name`: `module_path!` leaves out the
            // functions a type may be defined in, and `type_name` does not.
            let module = module_of(name);
            modules.iter().any(|root| in_module(module, root))
                && !root_types.contains(name)
                && !reached.contains(**name)
        })
        .map(|(name, registered)| Unreached {
            type_name: name,
            module_path: registered.module_path,
            roots: root_types.clone(),
        })
        .collect();
    missing.sort_by_key(|unreached| unreached.type_name);
    missing
}

/// The owner types met, by their names: what values the tree holds now,
/// and what their types' child fields can hold, each with how to name its
/// own children's types where its type is known.
struct TypeWalk {
    seen: HashSet<&'static str>,
    queue: Vec<(&'static str, Option<ChildTypes>)>,
}

impl OwnerTypes for TypeWalk {
    fn owner(&mut self, type_name: &'static str, children: Option<ChildTypes>) {
        let target = target_of(type_name);
        if self.seen.insert(target) {
            self.queue.push((target, children));
        }
    }
}

/// Walks the tree's values (as the collector would), naming each owner's
/// type and the types its fields can hold, then the registered types those
/// can hold, by name, until nothing new is named.
struct Walk<'r> {
    by_name: &'r HashMap<&'static str, &'static Registered>,
    types: TypeWalk,
    /// Owners already walked (a shared `Arc` or a cycle is walked once).
    owners: HashSet<crate::declare::OwnerId>,
}

impl Walk<'_> {
    /// Follows the types queued through their fields: by the function that
    /// names them, or for a pointer to an owner (which forwards to its
    /// target, whose type it cannot name without a value), by the
    /// target's registered entry.
    fn drain(&mut self) {
        while let Some((name, children)) = self.types.queue.pop() {
            let children = children.or_else(|| self.by_name.get(name).map(|r| r.child_types));
            if let Some(children) = children {
                children(&mut self.types);
            }
        }
    }
}

impl ChildVisitor for Walk<'_> {
    fn enter(&mut self, _: crate::declare::Segment<'_>) {}
    fn leave(&mut self) {}
    fn owner(&mut self, owner: &dyn ModelLocalKv) {
        let identity = owner.kv_identity();
        // A zero-sized owner has no address of its own: it is walked each
        // time it is met (it holds nothing that could make a cycle).
        if identity.is_addressable() && !self.owners.insert(identity) {
            return;
        }
        self.types.owner(identity.type_name(), None);
        owner.__kv_owner_types(&mut self.types);
        owner.kv_visit_children(self);
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

/// The crate a type is defined in: the first segment of its `type_name`.
fn crate_of(type_name: &str) -> &str {
    let path = type_name.split('<').next().unwrap_or(type_name);
    path.split("::").next().unwrap_or(path)
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
    fn crates_are_the_first_segment() {
        assert_eq!(crate_of("a::b::Model"), "a");
        assert_eq!(crate_of("a::b::Model<c::D>"), "a");
        assert_eq!(crate_of("Model"), "Model");
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
