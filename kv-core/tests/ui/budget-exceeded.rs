use std::borrow::Cow;

use kv_core::{DType, DeclaredKv, Geometry, KvSpec, KvTypeDecls, Positions, Rows, Scope};

struct Qwen3Tts;

impl DeclaredKv for Qwen3Tts {
    const KV_DECLS: KvTypeDecls = KvTypeDecls {
        type_name: "Qwen3Tts",
        static_specs: &[KvSpec {
            name: Cow::Borrowed("retained"),
            cache: Cow::Borrowed("sliding DynamicCache"),
            geometry: Geometry::new(8, 16, 64, DType::F32),
            positions: Positions {
                count: 71,
                bound: Cow::Borrowed("sliding_window(72) - 1"),
            },
            scope: Scope::Request,
            rows: Rows::MaxNumSeqs,
            only_when: Some(Cow::Borrowed("async_chunk")),
            assumes: None,
            note: None,
        }],
        after_load: &[],
    };
}

// 256 rows x 4.44 MiB = 1.11 GiB, over a 1 GiB ceiling. The declaration is
// gated on async_chunk and still counts.
kv_core::assert_kv_budget!(Qwen3Tts, max_num_seqs = 256, ceiling = kv_core::units::GIB);

fn main() {}
