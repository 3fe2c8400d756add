//! The registry lists every derived concrete type in the binary, sorted, and
//! `declaring_types` keeps those that declare something.

use kv_core::registry::{declaring_types, registered_types};
use kv_core::ModelLocalKv;

mod b_module {
    /// Declares statically.
    #[derive(kv_core::ModelLocalKv)]
    #[kv(
        name = "pool",
        cache = "c",
        layers = 1, kv_heads = 1, head_dim = 8, dtype = u8,
        positions = bounded(4, because = "four"),
        scope = model,
        rows = fixed(2, because = "two"),
    )]
    pub struct Zeta;

    /// Declares only after load.
    #[derive(kv_core::ModelLocalKv)]
    #[kv(
        name = "cache",
        cache = "c",
        layers = self.layers, kv_heads = 1, head_dim = 8, dtype = u8,
        positions = bounded(4, because = "four"),
        scope = request,
        rows = max_num_seqs,
    )]
    pub struct Alpha {
        pub layers: u64,
    }
}

mod a_module {
    /// Declares nothing itself: only holds children.
    #[derive(kv_core::ModelLocalKv)]
    pub struct Holder {
        #[kv(child)]
        pub pool: super::b_module::Zeta,
    }
}

/// Generic: no single set of declarations, so not registered.
#[derive(ModelLocalKv)]
struct Wrapper<M> {
    #[kv(child)]
    inner: M,
}

fn names(types: impl Iterator<Item = &'static kv_core::registry::Registered>) -> Vec<String> {
    types
        .map(|r| format!("{}::{}", r.module_path, r.decls.type_name))
        .collect()
}

#[test]
fn every_concrete_derived_type_is_listed_by_module_then_name() {
    let _ = Wrapper {
        inner: a_module::Holder {
            pool: b_module::Zeta,
        },
    };
    assert_eq!(
        names(registered_types()),
        [
            "registry_list::a_module::Holder",
            "registry_list::b_module::Alpha",
            "registry_list::b_module::Zeta",
        ]
    );
}

#[test]
fn declaring_types_keep_static_and_after_load_declarers() {
    let declaring: Vec<_> = declaring_types().collect();
    assert_eq!(
        names(declaring.iter().copied()),
        [
            "registry_list::b_module::Alpha",
            "registry_list::b_module::Zeta"
        ]
    );
    assert_eq!(declaring[0].decls.after_load.len(), 1);
    assert_eq!(
        declaring[1].decls.static_specs[0].peak_bytes(1),
        Ok(2 * 16 * 4)
    );
}
