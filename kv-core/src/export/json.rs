//! JSON export of a [`Collection`] (feature `json`): one flat shape, written
//! and read back through serde.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::collection::collect::{Collected, Collection, EmptyDeclaration, Skipped};
use crate::parallel::Parallel;
use crate::spec::layout::Layout;
use crate::spec::tensors::TensorShape;
use crate::spec::Rows;

/// The version of the JSON family (this report, the cluster view, the
/// estimate); bumped whenever a field changes meaning or is removed.
/// 2: an estimate's cluster is [`ClusterTotals`](crate::export::ClusterTotals)
/// (as `kv merge` writes it) and its ranks lost `peak_bytes` (their report's
/// `total_bytes`).
pub const SCHEMA_VERSION: u32 = 2;

/// A collection at one `max_num_seqs`, as exported. Field names are stable
/// and snake_case; a byte figure that overflows `u64` is `null`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExportedReport {
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// The `max_num_seqs` the figures are computed at.
    pub max_num_seqs: u64,
    /// The parallel layout and the rank these figures are for.
    pub parallel: ExportedParallel,
    /// Peak bytes over every declaration.
    pub total_bytes: Option<u64>,
    /// Peak bytes placed on the device.
    pub device_bytes: Option<u64>,
    /// Peak bytes placed on the host.
    pub host_bytes: Option<u64>,
    /// Peak bytes of scope `model` (see [`crate::collection::Totals`]).
    pub resident_bytes: Option<u64>,
    /// Peak bytes of the other scopes.
    pub after_profiling_bytes: Option<u64>,
    /// One per declaration, in visiting order.
    pub declarations: Vec<ExportedDeclaration>,
    /// One per skipped owner, or declaration skipped alone.
    pub skipped: Vec<ExportedSkip>,
    /// One per declaration that yields nothing, a count read after load
    /// being zero ([`Collection::empty_declarations`]). Absent in reports
    /// written before it was added; read as none.
    #[serde(default)]
    pub empty_declarations: Vec<ExportedEmpty>,
    /// The paths read through a poisoned lock ([`Collection::poisoned`]):
    /// counted, but a thread panicked while holding them. Absent in reports
    /// written before it was added; read as none.
    #[serde(default)]
    pub poisoned: Vec<String>,
}

/// A parallel layout and a rank in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExportedParallel {
    /// Tensor-parallel size.
    pub tp: u64,
    /// Pipeline-parallel size.
    pub pp: u64,
    /// This rank among the TP ranks.
    pub tp_rank: u64,
    /// This rank's pipeline stage.
    pub pp_rank: u64,
}

impl From<Parallel> for ExportedParallel {
    fn from(p: Parallel) -> ExportedParallel {
        ExportedParallel {
            tp: p.tp,
            pp: p.pp,
            tp_rank: p.tp_rank,
            pp_rank: p.pp_rank,
        }
    }
}

/// One declaration, flat. Fields a layout does not have are `null`
/// (`kv_heads` of an MLA latent, `positions` of recurrent state).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExportedDeclaration {
    /// The owner's path, `""` at the root.
    pub path: String,
    /// The declaration's name.
    pub name: String,
    /// `path.name`.
    pub full_name: String,
    /// `std::any::type_name` of the owner.
    pub owner_type: String,
    /// What kind of cache holds it.
    pub cache: String,
    /// `attention`, `mla latent`, `recurrent` or `tensors`.
    pub kind: String,
    /// Layers that hold it.
    pub layers: u64,
    /// Attention: KV heads per layer.
    pub kv_heads: Option<u64>,
    /// Attention: key head dim.
    pub head_dim: Option<u64>,
    /// Attention: value head dim (equals `head_dim` unless declared apart).
    pub v_head_dim: Option<u64>,
    /// MLA: `kv_lora_rank`.
    pub kv_lora_rank: Option<u64>,
    /// MLA: the RoPE width.
    pub rope_dim: Option<u64>,
    /// Recurrent: the parts of one layer's state.
    pub state_parts: Option<Vec<ExportedStatePart>>,
    /// Recurrent: states kept per sequence.
    pub slots: Option<u64>,
    /// Tensors beside the caches: each part (absent in a report written
    /// before they could be declared).
    #[serde(default)]
    pub tensor_parts: Option<Vec<ExportedTensorPart>>,
    /// Storage of keys, the latent or the state (`"bf16"`, `"q8_0"`).
    pub format: String,
    /// Storage of values, where attention stores them apart.
    pub v_format: Option<String>,
    /// Positions held; `null` for recurrent state.
    pub positions: Option<u64>,
    /// What bounds them.
    pub positions_bound: Option<String>,
    /// `invocation`, `request`, `session` or `model`.
    pub scope: String,
    /// Whether the scope is `model`.
    pub resident: bool,
    /// `max_num_seqs` or `fixed`.
    pub rows_driver: String,
    /// The fixed count's reason.
    pub rows_reason: Option<String>,
    /// Rows at `max_num_seqs`.
    pub rows: u64,
    /// The observable condition.
    pub only_when: Option<String>,
    /// The condition the model cannot observe.
    pub assumes: Option<String>,
    /// Prose about the object layout.
    pub note: Option<String>,
    /// `device` or `host`.
    pub placement: String,
    /// Why it is on the host.
    pub placement_reason: Option<String>,
    /// Why it is held whole on every rank, where it is.
    pub whole_on_every_rank: Option<String>,
    /// How the parallel layout divided it, in words.
    pub share: Option<String>,
    /// Partial bytes or blocks rounded up, in words.
    pub roundings: Vec<String>,
    /// Bytes per row.
    pub bytes_per_row: Option<u64>,
    /// Bytes at peak.
    pub peak_bytes: Option<u64>,
}

/// One tensor of a recurrent state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExportedStatePart {
    /// `conv`, `ssm`, ...
    pub name: String,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its storage.
    pub format: String,
}

/// One part of a declaration of tensors beside the caches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExportedTensorPart {
    /// `cos`, `mask`, ...
    pub name: String,
    /// A fixed part's shape; `null` for a memo by length.
    pub shape: Option<Vec<u64>>,
    /// A memo's shortest and longest lengths (one `t x t` tensor per length).
    pub lengths: Option<[u64; 2]>,
    /// Why a memo's lengths stop where they do.
    pub lengths_bound: Option<String>,
    /// Its storage.
    pub format: String,
    /// Its bytes; `null` where they overflow.
    pub bytes: Option<u64>,
    /// The part as the report writes it (`cos [4096 x 64] f32`).
    pub text: String,
}

/// An owner whose declarations were dropped, or one declaration skipped alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExportedSkip {
    /// The owner's path.
    pub path: String,
    /// `std::any::type_name` of the owner.
    pub owner_type: String,
    /// The declaration's name, where only it was skipped; `null` when the
    /// whole owner was (and in reports written before it was added).
    #[serde(default)]
    pub declaration: Option<String>,
    /// The error's message.
    pub error: String,
}

impl ExportedSkip {
    /// What was skipped: the declaration's full name, or the owner's path;
    /// `<root>` for the root owner (as [`Skipped::what`]).
    pub fn what(&self) -> String {
        match &self.declaration {
            Some(name) => crate::collection::collect::join(&self.path, name),
            None if self.path.is_empty() => "<root>".to_owned(),
            None => self.path.clone(),
        }
    }
}

/// A declaration that yields nothing (see
/// [`EmptyDeclaration`](crate::collection::EmptyDeclaration)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExportedEmpty {
    /// The declaration as read, its zero included (so its byte figures are 0).
    pub declaration: ExportedDeclaration,
    /// The count that is zero, e.g. `layers`.
    pub field: String,
    /// The expression it was read from, as written, where known.
    pub from: Option<String>,
    /// What was zero and where it came from: ``0 layers from `self.sliding_layers` ``.
    pub reason: String,
}

impl Collection {
    /// The collection at `max_num_seqs`, in the exported shape.
    pub fn export(&self, max_num_seqs: u64) -> ExportedReport {
        let totals = self.totals(max_num_seqs).ok();
        ExportedReport {
            schema_version: SCHEMA_VERSION,
            max_num_seqs,
            parallel: self.parallel().into(),
            total_bytes: totals.map(|t| t.total),
            device_bytes: totals.map(|t| t.device),
            host_bytes: totals.map(|t| t.host),
            resident_bytes: totals.map(|t| t.resident),
            after_profiling_bytes: totals.map(|t| t.after_profiling),
            declarations: self
                .entries()
                .iter()
                .map(|entry| declaration(entry, max_num_seqs))
                .collect(),
            skipped: self.skipped().iter().map(skip).collect(),
            empty_declarations: self
                .empty_declarations()
                .iter()
                .map(|empty| exported_empty(empty, max_num_seqs))
                .collect(),
            poisoned: self.poisoned().to_vec(),
        }
    }

    /// The collection at `max_num_seqs` as JSON: [`Collection::export`]
    /// serialized, the one shape kv writes.
    ///
    /// ```
    /// let empty = kv_core::Collection::default().to_json(8);
    /// assert_eq!(empty["total_bytes"], 0);
    /// assert_eq!(empty["schema_version"], 2);
    /// assert_eq!(empty["declarations"], serde_json::json!([]));
    /// ```
    pub fn to_json(&self, max_num_seqs: u64) -> Value {
        // Serializing plain strings, integers and options cannot fail.
        serde_json::to_value(self.export(max_num_seqs)).unwrap_or(Value::Null)
    }
}

fn declaration(entry: &Collected, max_num_seqs: u64) -> ExportedDeclaration {
    let spec = &entry.spec;
    let (rows_driver, rows_reason) = match &spec.rows {
        Rows::MaxNumSeqs => ("max_num_seqs", None),
        Rows::Fixed { because, .. } => ("fixed", Some(because.to_string())),
    };
    let mut out = ExportedDeclaration {
        path: entry.path.clone(),
        name: spec.name.to_string(),
        full_name: entry.full_name(),
        owner_type: entry.owner_type.to_owned(),
        cache: spec.cache.to_string(),
        kind: spec.layout.kind().to_owned(),
        layers: spec.layout.layers(),
        kv_heads: None,
        head_dim: None,
        v_head_dim: None,
        kv_lora_rank: None,
        rope_dim: None,
        state_parts: None,
        slots: None,
        tensor_parts: None,
        format: String::new(),
        v_format: None,
        positions: spec.positions().map(|p| p.count),
        positions_bound: spec.positions().map(|p| p.reason()),
        scope: spec.scope.name().to_owned(),
        resident: spec.scope.is_resident(),
        rows_driver: rows_driver.to_owned(),
        rows_reason,
        rows: spec.row_count(max_num_seqs),
        only_when: spec.only_when.as_deref().map(str::to_owned),
        assumes: spec.assumes.as_deref().map(str::to_owned),
        note: spec.note.as_deref().map(str::to_owned),
        placement: spec.placement.name().to_owned(),
        placement_reason: spec.placement.reason().map(str::to_owned),
        whole_on_every_rank: spec.sharding.reason().map(str::to_owned),
        share: entry.share.clone(),
        roundings: spec.layout.roundings(),
        bytes_per_row: spec.bytes_per_row().ok(),
        peak_bytes: spec.peak_bytes(max_num_seqs).ok(),
    };
    match &spec.layout {
        Layout::Attention { geometry: g, .. } => {
            out.kv_heads = Some(g.kv_heads);
            out.head_dim = Some(g.head_dim);
            out.v_head_dim = Some(g.value_head_dim());
            out.format = g.storage.to_string();
            out.v_format = g.v_storage.map(|v| v.to_string());
        }
        Layout::Latent { latent, .. } => {
            out.kv_lora_rank = Some(latent.kv_lora_rank);
            out.rope_dim = Some(latent.rope_dim);
            out.format = latent.storage.to_string();
            out.v_format = latent.rope_storage.map(|v| v.to_string());
        }
        Layout::Recurrent(state) => {
            out.slots = Some(state.slots);
            let parts: Vec<ExportedStatePart> = state
                .parts
                .iter()
                .map(|part| ExportedStatePart {
                    name: part.name.to_owned(),
                    shape: part.shape.to_vec(),
                    format: part.storage.to_string(),
                })
                .collect();
            out.format = joined(parts.iter().map(|p| p.format.as_str()));
            out.state_parts = Some(parts);
        }
        Layout::Tensors(tensors) => {
            let parts: Vec<ExportedTensorPart> = tensors
                .parts()
                .iter()
                .map(|part| {
                    let (shape, lengths, lengths_bound, format) = match part.shape {
                        TensorShape::Fixed { dims, storage } => {
                            (Some(dims.to_vec()), None, None, storage.to_string())
                        }
                        TensorShape::SquarePerLength {
                            from,
                            to,
                            dtype,
                            because,
                        } => (
                            None,
                            Some([from, to]),
                            Some(because.to_owned()),
                            dtype.to_string(),
                        ),
                    };
                    ExportedTensorPart {
                        name: part.name.to_owned(),
                        shape,
                        lengths,
                        lengths_bound,
                        format,
                        bytes: part.bytes().ok(),
                        text: part.to_string(),
                    }
                })
                .collect();
            out.format = joined(parts.iter().map(|p| p.format.as_str()));
            out.tensor_parts = Some(parts);
        }
    }
    out
}

/// The formats of a layout's parts, as one: `bf16+f32`.
fn joined<'a>(formats: impl Iterator<Item = &'a str>) -> String {
    formats.collect::<Vec<_>>().join("+")
}

fn skip(skipped: &Skipped) -> ExportedSkip {
    ExportedSkip {
        path: skipped.path.clone(),
        owner_type: skipped.owner_type.to_owned(),
        declaration: skipped.declaration.as_deref().map(str::to_owned),
        error: skipped.error.to_string(),
    }
}

fn exported_empty(empty: &EmptyDeclaration, max_num_seqs: u64) -> ExportedEmpty {
    let as_collected = Collected::new(empty.path.clone(), empty.owner_type, empty.spec.clone());
    ExportedEmpty {
        declaration: declaration(&as_collected, max_num_seqs),
        field: empty.field.to_owned(),
        from: empty.from.map(str::to_owned),
        reason: empty.reason(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collection::collect::collect;
    use crate::declare::{ChildVisitor, ModelLocalKv};
    use crate::error::KvError;
    use crate::spec::dtype::DType;
    use crate::spec::layout::Geometry;
    use crate::spec::positions::Positions;
    use crate::spec::{KvSpec, Scope};
    use serde_json::json;

    struct Talker;

    impl ModelLocalKv for Talker {
        fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
            out.push(
                KvSpec::attention(
                    "cache",
                    "StaticCache",
                    Geometry::new(24, 2, 64, DType::BF16),
                    Positions::bounded(2048, "max_cache_len"),
                    Scope::Invocation,
                    Rows::fixed(1, "calls are serialized"),
                )
                .assumes("one talker call at a time"),
            );
            Ok(())
        }
    }

    struct Broken;

    impl ModelLocalKv for Broken {
        fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
            Err(KvError::Config {
                what: "layers",
                problem: "missing".into(),
            })
        }
        fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
            visitor.field("talker", &Talker);
        }
    }

    #[test]
    fn field_names_of_one_entry_are_pinned() {
        let exported = collect(&Broken).to_json(256);
        let talker = format!("{}::Talker", module_path!());
        let broken = format!("{}::Broken", module_path!());
        assert_eq!(
            exported,
            json!({
                "schema_version": 2,
                "max_num_seqs": 256,
                "parallel": {"tp": 1, "pp": 1, "tp_rank": 0, "pp_rank": 0},
                "total_bytes": 25_165_824,
                "device_bytes": 25_165_824,
                "host_bytes": 0,
                "resident_bytes": 0,
                "after_profiling_bytes": 25_165_824,
                "declarations": [{
                    "path": "talker",
                    "name": "cache",
                    "full_name": "talker.cache",
                    "owner_type": talker,
                    "cache": "StaticCache",
                    "kind": "attention",
                    "layers": 24,
                    "kv_heads": 2,
                    "head_dim": 64,
                    "v_head_dim": 64,
                    "kv_lora_rank": null,
                    "rope_dim": null,
                    "state_parts": null,
                    "slots": null,
                    "tensor_parts": null,
                    "format": "bf16",
                    "v_format": null,
                    "positions": 2048,
                    "positions_bound": "max_cache_len",
                    "scope": "invocation",
                    "resident": false,
                    "rows_driver": "fixed",
                    "rows_reason": "calls are serialized",
                    "rows": 1,
                    "only_when": null,
                    "assumes": "one talker call at a time",
                    "note": null,
                    "placement": "device",
                    "placement_reason": null,
                    "whole_on_every_rank": null,
                    "share": null,
                    "roundings": [],
                    "bytes_per_row": 25_165_824,
                    "peak_bytes": 25_165_824,
                }],
                "skipped": [{
                    "path": "",
                    "owner_type": broken,
                    "declaration": null,
                    "error": "kv: cannot read layers from the config: missing",
                }],
                "empty_declarations": [],
                "poisoned": [],
            })
        );
    }

    #[test]
    fn overflowing_figures_are_null() {
        struct Huge;
        impl ModelLocalKv for Huge {
            fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
                out.push(KvSpec::attention(
                    "huge",
                    "test",
                    Geometry::new(1, 1, 1, DType::U8),
                    Positions::bounded(1 << 62, "test"),
                    Scope::Model,
                    Rows::MaxNumSeqs,
                ));
                Ok(())
            }
        }
        let exported = collect(&Huge).to_json(2);
        assert_eq!(exported["total_bytes"], Value::Null);
        assert_eq!(exported["resident_bytes"], Value::Null);
        let entry = &exported["declarations"][0];
        assert_eq!(entry["bytes_per_row"], 1_u64 << 63);
        assert_eq!(entry["peak_bytes"], Value::Null);
        assert_eq!(entry["rows_driver"], "max_num_seqs");
        assert_eq!(entry["rows_reason"], Value::Null);
        assert_eq!(entry["rows"], 2);
        assert_eq!(entry["resident"], true);
    }
}

#[cfg(test)]
mod round_trip {
    use super::*;
    use crate::collection::collect::collect;
    use crate::declare::ModelLocalKv;
    use crate::error::KvError;
    use crate::spec::dtype::DType;
    use crate::spec::layout::{Latent, RecurrentState, StatePart};
    use crate::spec::positions::Positions;
    use crate::spec::{KvSpec, Scope};

    struct Hybrid;

    impl ModelLocalKv for Hybrid {
        fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
            out.push(KvSpec::latent(
                "latent",
                "MLA",
                Latent::new(27, 512, 64, DType::BF16),
                Positions::bounded(4096, "max_model_len of this deployment"),
                Scope::Request,
                Rows::MaxNumSeqs,
            ));
            out.push(KvSpec::recurrent(
                "state",
                "MambaCache",
                RecurrentState::from_parts(
                    28,
                    vec![
                        StatePart::mamba_conv_transformers(8192, 4, DType::F16),
                        StatePart::mamba_ssm(8192, 16, DType::F16),
                    ],
                ),
                Scope::Request,
                Rows::MaxNumSeqs,
            ));
            Ok(())
        }
    }

    #[test]
    fn a_report_reads_back_equal() {
        let exported = collect(&Hybrid).export(8);
        let text = serde_json::to_string(&exported).unwrap();
        let read: ExportedReport = serde_json::from_str(&text).unwrap();
        assert_eq!(read, exported);
        assert_eq!(read.declarations[0].kind, "mla latent");
        assert_eq!(read.declarations[0].kv_heads, None);
        assert_eq!(read.declarations[0].bytes_per_row, Some(31_104 * 4096));
        let state = &read.declarations[1];
        assert_eq!(state.positions, None);
        assert_eq!(state.format, "f16+f16");
        assert_eq!(state.state_parts.as_ref().map(Vec::len), Some(2));
        assert_eq!(
            state.bytes_per_row,
            Some(28 * (8192 * 4 * 2 + 8192 * 16 * 2))
        );
    }
}
