use std::borrow::Cow;

use kv_core::{DType, DeclaredKv, Geometry, KvSpec, KvTypeDecls, Positions, Rows, Scope};

struct Wide;

impl DeclaredKv for Wide {
    const KV_DECLS: KvTypeDecls = KvTypeDecls {
        type_name: "Wide",
        static_specs: &[KvSpec {
            name: Cow::Borrowed("cache"),
            cache: Cow::Borrowed("StaticCache"),
            geometry: Geometry::new(24, 2, 64, DType::BF16),
            positions: Positions {
                count: 2048,
                bound: Cow::Borrowed("max_cache_len"),
            },
            scope: Scope::Request,
            rows: Rows::MaxNumSeqs,
            only_when: None,
            assumes: None,
            note: None,
        }],
        after_load: &[],
    };
}

// 24 MiB a row times u64::MAX rows overflows u64: never within a budget.
kv_core::assert_kv_budget!(Wide, max_num_seqs = u64::MAX, ceiling = u64::MAX);

fn main() {}
