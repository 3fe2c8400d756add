//! What models share, as mistral.rs keeps it under `layers`: attention's
//! projections, the rotary tables, the caches.

#[path = "../../../common/attention.rs"]
pub mod attention;
pub mod cache;
pub mod rotary;
