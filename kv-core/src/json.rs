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
