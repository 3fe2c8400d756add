//! Reports across processes (feature `json`): the exported shape of a
//! report, which reads back equal, and the merge of per-rank reports.

pub(crate) mod cluster;
pub(crate) mod json;

pub use cluster::{ClusterReport, ClusterTotals, ExportedCluster};
pub use json::{
    ExportedDeclaration, ExportedParallel, ExportedReport, ExportedSkip, ExportedStatePart,
    SCHEMA_VERSION,
};
