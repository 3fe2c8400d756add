//! `dtype = kv_candle::kv_dtype(..)`: a candle model's dtype, as its
//! `VarBuilder` gives it, converted by kv-candle's fallible helper with no
//! panicking wrapper (#25 item 4).

use kv_core::{collect, ModelLocalKv};

#[derive(ModelLocalKv)]
#[kv(
    name = "kv_cache",
    cache = "concat (Tensor, Tensor)",
    layers = 1, kv_heads = 2, head_dim = 8,
    dtype = kv_candle::kv_dtype(self.dtype),
    positions = bounded(16, because = "max_seq_len 16"),
    scope = request,
    rows = max_num_seqs,
)]
struct Attention {
    dtype: candle_core::DType,
}

#[test]
fn a_candle_dtype_is_read_through_kv_dtype() {
    let ok = collect(&Attention {
        dtype: candle_core::DType::BF16,
    });
    // 1 layer x 2 heads x (8 + 8) dims x 2 B x 16 positions
    assert_eq!(ok.entries()[0].spec.bytes_per_row(), Ok(1_024));
}

#[test]
fn a_candle_dtype_kv_has_not_skips_that_declaration_with_candles_message() {
    let failed = collect(&Attention {
        dtype: candle_core::DType::U32,
    });
    assert!(failed.entries().is_empty());
    let skipped = &failed.skipped()[0];
    assert_eq!(skipped.declaration.as_deref(), Some("kv_cache"));
    let message = skipped.error.to_string();
    assert!(
        message.starts_with(
            "kv: `Attention.kv_cache`: `dtype` could not be read: \
             kv-candle: candle dtype U32 has no kv dtype"
        ),
        "{message}"
    );
}
