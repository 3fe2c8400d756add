//! Geometry read from a HuggingFace-style `config.json`, for caches whose shape is
//! known only after the checkpoint is loaded. The lookup rules are documented
//! on [`HfConfig`].

mod attention;
mod layers;
mod lookup;
mod models;
mod per_layer;
mod quant;
mod state;
mod text;

pub use lookup::{DTypeRule, HfConfig};
pub use models::MambaVersion;
pub use quant::{KvCacheScheme, KvQuantType};
pub use state::{LinearAttentionConfig, MambaConfig, MlaConfig, ShortConvConfig};
pub use text::parse_json;

#[cfg(test)]
mod tests;
