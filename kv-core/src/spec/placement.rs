//! Where a declaration's memory lives (device or host), how tensor and
//! pipeline parallelism divide it, and the group of a hybrid model it covers.

use std::borrow::Cow;

use crate::pattern::{LayerKind, LayerPattern};

/// Where a declaration's memory lives.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Device memory (the default): counted by budgets and the planner.
    Device,
    /// Host memory (an offloaded cache, a host-side buffer), with the reason.
    Host(Cow<'static, str>),
}

impl Placement {
    /// The reason for a host placement.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Placement::Device => None,
            Placement::Host(because) => Some(because),
        }
    }

    /// Whether it lives on the device.
    pub fn is_device(&self) -> bool {
        matches!(self, Placement::Device)
    }

    /// `device` or `host`.
    pub fn name(&self) -> &'static str {
        match self {
            Placement::Device => "device",
            Placement::Host(_) => "host",
        }
    }
}

/// How tensor and pipeline parallelism divide a declaration.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Sharding {
    /// By the engines' rules for its kind (see [`Parallel`](crate::Parallel)).
    ByKind,
    /// Held whole on every rank, with the reason (an encoder cache that is
    /// not sharded).
    Whole(Cow<'static, str>),
}

impl Sharding {
    /// The reason for holding it whole.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Sharding::ByKind => None,
            Sharding::Whole(because) => Some(because),
        }
    }
}

/// One group of a hybrid model: the model's layer pattern and the kind of
/// layer that holds the cache.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LayerGroup {
    /// The model's pattern over all its layers.
    pub pattern: LayerPattern,
    /// The kind of layer this declaration covers.
    pub kind: LayerKind,
}
