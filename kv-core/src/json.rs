//! JSON export of a [`Collection`] (feature `json`).

use serde_json::{json, Value};

use crate::{Collection, Rows};

impl Collection {
    /// The collection at `max_num_seqs` as JSON. Field names are stable and
    /// snake_case; a byte figure that overflows `u64` is `null`.
    ///
    /// Top level:
    /// - `max_num_seqs`: the value given.
    /// - `total_bytes`, `resident_bytes`, `after_profiling_bytes`: peak bytes,
    ///   all scopes / scope `model` / the other scopes (see [`crate::Totals`]).
    /// - `declarations`: one object per declaration, in visiting order.
    /// - `skipped`: one object per skipped owner: `path`, `owner_type`, `error`
    ///   (the error's message).
    ///
    /// Each declaration:
    /// - `path` (owner path, `""` at the root), `name`, `full_name`
    ///   (`path.name`), `owner_type`, `cache`;
    /// - `layers`, `kv_heads`, `head_dim`, `v_head_dim` (equals `head_dim`
    ///   unless declared apart), `dtype` (`"bf16"`, ...);
    /// - `positions`, `positions_bound`;
    /// - `scope` (`"invocation"`, `"request"`, `"session"`, `"model"`),
    ///   `resident` (scope is `model`);
    /// - `rows_driver` (`"max_num_seqs"` or `"fixed"`), `rows_reason` (the
    ///   fixed count's reason, else `null`), `rows` (rows at `max_num_seqs`);
    /// - `only_when`, `assumes`, `note` (`null` when absent);
    /// - `bytes_per_row`, `peak_bytes`.
    ///
    /// ```
    /// let empty = kv_core::Collection::default().to_json(8);
    /// assert_eq!(empty["total_bytes"], 0);
    /// assert_eq!(empty["declarations"], serde_json::json!([]));
    /// ```
    pub fn to_json(&self, max_num_seqs: u64) -> Value {
        let totals = self.totals(max_num_seqs).ok();
        let declarations: Vec<Value> = self
            .entries()
            .iter()
            .map(|entry| {
                let spec = &entry.spec;
                let geometry = &spec.geometry;
                let (rows_driver, rows_reason) = match &spec.rows {
                    Rows::MaxNumSeqs => ("max_num_seqs", None),
                    Rows::Fixed { because, .. } => ("fixed", Some(because.as_ref())),
                };
                json!({
                    "path": entry.path,
                    "name": spec.name.as_ref(),
                    "full_name": entry.full_name(),
                    "owner_type": entry.owner_type,
                    "cache": spec.cache.as_ref(),
                    "layers": geometry.layers,
                    "kv_heads": geometry.kv_heads,
                    "head_dim": geometry.head_dim,
                    "v_head_dim": geometry.value_head_dim(),
                    "dtype": geometry.dtype.name(),
                    "positions": spec.positions.count,
                    "positions_bound": spec.positions.bound.as_ref(),
                    "scope": spec.scope.name(),
                    "resident": spec.scope.is_resident(),
                    "rows_driver": rows_driver,
                    "rows_reason": rows_reason,
                    "rows": spec.row_count(max_num_seqs),
                    "only_when": spec.only_when.as_deref(),
                    "assumes": spec.assumes.as_deref(),
                    "note": spec.note.as_deref(),
                    "bytes_per_row": spec.bytes_per_row().ok(),
                    "peak_bytes": spec.peak_bytes(max_num_seqs).ok(),
                })
            })
            .collect();
        let skipped: Vec<Value> = self
            .skipped()
            .iter()
            .map(|skipped| {
                json!({
                    "path": skipped.path,
                    "owner_type": skipped.owner_type,
                    "error": skipped.error.to_string(),
                })
            })
            .collect();
        json!({
            "max_num_seqs": max_num_seqs,
            "total_bytes": totals.map(|t| t.total),
            "resident_bytes": totals.map(|t| t.resident),
            "after_profiling_bytes": totals.map(|t| t.after_profiling),
            "declarations": declarations,
            "skipped": skipped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{collect, DType, Geometry, KvError, KvSpec, ModelLocalKv, Positions, Scope};

    struct Talker;

    impl ModelLocalKv for Talker {
        fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
            out.push(KvSpec {
                name: "cache".into(),
                cache: "StaticCache".into(),
                geometry: Geometry::new(24, 2, 64, DType::BF16),
                positions: Positions {
                    count: 2048,
                    bound: "max_cache_len".into(),
                },
                scope: Scope::Invocation,
                rows: Rows::fixed(1, "calls are serialized"),
                only_when: None,
                assumes: Some("one talker call at a time".into()),
                note: None,
            });
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
        fn kv_visit_children(&self, visitor: &mut dyn crate::ChildVisitor) {
            crate::__private_v0_1::visit_field(&Talker, "talker", visitor);
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
                "max_num_seqs": 256,
                "total_bytes": 25_165_824,
                "resident_bytes": 0,
                "after_profiling_bytes": 25_165_824,
                "declarations": [{
                    "path": "talker",
                    "name": "cache",
                    "full_name": "talker.cache",
                    "owner_type": talker,
                    "cache": "StaticCache",
                    "layers": 24,
                    "kv_heads": 2,
                    "head_dim": 64,
                    "v_head_dim": 64,
                    "dtype": "bf16",
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
                    "bytes_per_row": 25_165_824,
                    "peak_bytes": 25_165_824,
                }],
                "skipped": [{
                    "path": "",
                    "owner_type": broken,
                    "error": "kv: cannot read layers from the config: missing",
                }],
            })
        );
    }

    #[test]
    fn overflowing_figures_are_null() {
        struct Huge;
        impl ModelLocalKv for Huge {
            fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
                out.push(KvSpec {
                    name: "huge".into(),
                    cache: "test".into(),
                    geometry: Geometry::new(1, 1, 1, DType::U8),
                    positions: Positions {
                        count: 1 << 62,
                        bound: "test".into(),
                    },
                    scope: Scope::Model,
                    rows: Rows::MaxNumSeqs,
                    only_when: None,
                    assumes: None,
                    note: None,
                });
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
