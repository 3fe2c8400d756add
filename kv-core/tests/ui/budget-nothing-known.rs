use kv_core::{Geometry, ModelLocalKv};

/// Every value is read after load: nothing is known at compile time.
#[derive(ModelLocalKv)]
#[kv(
    name = "cache",
    cache = "KvCache",
    geometry = self.geometry,
    positions = bounded(self.max_seq_len, because = "max_seq_len given to KvCache::new"),
    scope = request,
    rows = max_num_seqs,
)]
struct Attention {
    geometry: Geometry,
    max_seq_len: usize,
}

// Would compile with any ceiling, even 1 byte, and bound nothing.
kv_core::assert_kv_budget!(Attention, max_num_seqs = 256, ceiling = 1);

/// Declares nothing of its own; its child's declarations are not counted here.
#[derive(ModelLocalKv)]
struct Model {
    #[kv(child)]
    attention: Attention,
}

kv_core::assert_kv_budget!(Model, max_num_seqs = 256, ceiling = kv_core::units::GIB);

fn main() {
    let model = Model {
        attention: Attention {
            geometry: Geometry::new(1, 1, 1, kv_core::DType::U8),
            max_seq_len: 1,
        },
    };
    let _ = (model.attention.geometry, model.attention.max_seq_len);
}
