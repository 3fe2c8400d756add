#![doc = include_str!("../README.md")]
// `deny`, not `forbid`: the census's counting allocator (`census::alloc`,
// a `GlobalAlloc` impl, which cannot be written without `unsafe`) is the one
// module that allows it.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod caches;
pub mod census;
mod check;
mod config;
mod declare;
mod measure;
mod quantized;
mod recurrent;

pub use caches::{
    candle_dtype, kv_dtype, FullAttentionCaches, SlidingWindowCaches, StaticCaches, StaticKvCache,
    SEQ_DIM,
};
pub use check::{
    assert_declared_bytes, assert_declared_each, assert_spec_bytes, compare_declared,
    compare_declared_each, compare_spec, Comparison, DeclaredLine,
};
pub use declare::{
    fixed_positions, held_geometry, kv_geometry, FixedPositions, HeldKv, LayerPositions,
};
pub use measure::{measured_bytes, Measure, Meter};
pub use quantized::kv_storage;
pub use recurrent::{
    candle_mamba2_state, candle_mamba_state, CANDLE_MAMBA_D_CONV, CANDLE_MAMBA_D_STATE,
    CANDLE_MAMBA_EXPAND,
};
