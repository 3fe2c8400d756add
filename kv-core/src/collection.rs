//! What [`collect`](crate::collect()) found: each declaration with its path
//! in the model tree, each declarer (or declaration) skipped with its error,
//! each declaration that yields nothing (a count read after load is zero)
//! with why, identical declarations of sibling owners grouped as the report
//! shows them, the totals, and the start-up report.

pub(crate) mod collect;
pub(crate) mod group;
pub(crate) mod report;
pub(crate) mod table;

pub use collect::{Collected, Collection, EmptyDeclaration, Skipped, Totals};
pub use group::Grouped;
pub use report::Report;
