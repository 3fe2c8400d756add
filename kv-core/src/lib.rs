#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "json")]
mod config;
mod declare;
mod dtype;
mod error;
mod spec;
pub mod units;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

#[cfg(feature = "json")]
pub use config::HfConfig;
pub use declare::{
    AfterLoadDecl, ChildVisitor, DeclaredKv, KvChild, KvTypeDecls, ModelLocalKv, OwnerId, Segment,
};
pub use dtype::DType;
pub use error::{KvError, Overflow};
pub use spec::{Geometry, KvSpec, Positions, Rows, Scope, Text};

/// Derives [`ModelLocalKv`] and [`DeclaredKv`] from `#[kv(...)]` attributes.
#[cfg(feature = "derive")]
pub use kv_derive::ModelLocalKv;
