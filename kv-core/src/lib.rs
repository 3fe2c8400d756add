#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod declare;
mod dtype;
mod error;
mod spec;
pub mod units;

// Collection, reports, config reading and JSON export.
mod collect;
#[cfg(feature = "json")]
mod config;
#[cfg(feature = "json")]
mod json;
mod report;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use declare::{
    AfterLoadDecl, ChildVisitor, DeclaredKv, KvChild, KvTypeDecls, ModelLocalKv, OwnerId, Segment,
};
pub use dtype::DType;
pub use error::{KvError, Overflow};
pub use spec::{Geometry, KvSpec, Positions, Rows, Scope, Text};

pub use collect::{collect, Collected, Collection, Skipped, Totals};
#[cfg(feature = "json")]
pub use config::HfConfig;
pub use report::{log_model_local_kv, Report};

/// Derives [`ModelLocalKv`] and [`DeclaredKv`] from `#[kv(...)]` attributes.
#[cfg(feature = "derive")]
pub use kv_derive::ModelLocalKv;
