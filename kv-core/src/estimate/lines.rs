//! The lines `kv estimate` prints per group and per rank: llama.cpp's
//! `llama_kv_cache: size = ...` layout, with kv's exact figures beside it.

use std::fmt::Write as _;

use super::VllmPool;
use crate::collection::Totals;
use crate::units::{human_bytes, thousands, MIB};
use crate::{KvSpec, Layout};

fn mib(bytes: u128) -> f64 {
    bytes as f64 / MIB as f64
}

/// One group as llama.cpp logs its cache, `NAME: size = %7.2f MiB (%6u
/// cells, %3d layers, %2u/%u seqs), K (%s): %7.2f MiB, V (%s): %7.2f MiB`
/// (one entry per part), then kv's exact bytes per position, per row and at
/// peak. A figure past `u64` reads `overflow`.
///
/// ```
/// use kv_core::estimate::{estimate, group_line, EstimateSettings};
///
/// let llama = serde_json::json!({
///     "num_hidden_layers": 32, "num_key_value_heads": 8, "hidden_size": 4096,
///     "num_attention_heads": 32, "torch_dtype": "bfloat16",
/// });
/// let e = estimate(&llama, &EstimateSettings::new().positions(8192))?;
/// // 32 layers x 8 heads x 128 x 2 B = 65,536 B of K per token; x 8192 = 512 MiB.
/// assert_eq!(
///     group_line(&e.specs[0], 1),
///     "full_attention: size = 1024.00 MiB (  8192 cells,  32 layers,  1/1 seqs), \
///      K (bf16):  512.00 MiB, V (bf16):  512.00 MiB; per position 131,072 B, per row \
///      1,073,741,824 B, at peak 1,073,741,824 B"
/// );
/// # Ok::<(), kv_core::KvError>(())
/// ```
pub fn group_line(spec: &KvSpec, max_num_seqs: u64) -> String {
    let rows = u128::from(spec.row_count(max_num_seqs));
    let layers = spec.layout.layers();
    let peak = spec.peak_bytes(max_num_seqs);
    let size = peak.map_or_else(
        |_| "overflow".to_owned(),
        |b| format!("{:7.2}", mib(b.into())),
    );
    // Cells: positions per row, or the states a row keeps.
    let cells = match &spec.layout {
        Layout::Recurrent(state) => state.slots.saturating_mul(spec.row_count(max_num_seqs)),
        layout => layout.positions().map_or(0, |p| p.count),
    };
    let parts: Vec<(String, Option<u128>)> = spec
        .layout
        .parts()
        .into_iter()
        .map(|part| {
            let label = format!("{} ({})", part.name, part.storage);
            (label, part.bytes_per_row.ok().map(|b| u128::from(b) * rows))
        })
        .collect();
    let mut line = format!(
        "{}: size = {size} MiB ({cells:6} cells, {layers:3} layers, {:2}/{max_num_seqs} seqs)",
        spec.name,
        spec.row_count(max_num_seqs)
    );
    for (label, bytes) in parts {
        match bytes {
            Some(bytes) => {
                let _ = write!(line, ", {label}: {:7.2} MiB", mib(bytes));
            }
            None => {
                let _ = write!(line, ", {label}: overflow");
            }
        }
    }
    let per_position = match spec.layout.bytes_per_position() {
        Some(Ok(bytes)) => format!("{} B", thousands(bytes)),
        Some(Err(_)) => "overflow".to_owned(),
        None => "none (state)".to_owned(),
    };
    let per_row = spec
        .bytes_per_row()
        .map_or_else(|_| "overflow".to_owned(), |b| format!("{} B", thousands(b)));
    let peak = peak.map_or_else(|_| "overflow".to_owned(), |b| format!("{} B", thousands(b)));
    let _ = write!(
        line,
        "; per position {per_position}, per row {per_row}, at peak {peak}"
    );
    line
}

/// A rank's totals: exact bytes per position, per row and at peak, with
/// the last two in binary units.
pub fn totals_line(totals: &Totals, max_num_seqs: u64) -> String {
    format!(
        "total: {} B per position, {} B per row ({}), {} B at peak ({}) at max_num_seqs {max_num_seqs}",
        thousands(totals.per_position),
        thousands(totals.per_row),
        human_bytes(totals.per_row),
        thousands(totals.total),
        human_bytes(totals.total)
    )
}

/// Each kind as vLLM's pool charges it on a rank:
/// `sliding_attention 22 layers charged as 24 (6 groups)`.
pub fn charged_kinds(pool: &VllmPool) -> String {
    pool.kinds
        .iter()
        .map(|k| {
            let held = if k.layers_on_rank == k.layers {
                format!("{} layers", k.layers)
            } else {
                format!("{} of {} layers", k.layers_on_rank, k.layers)
            };
            format!(
                "{} {held} charged as {} ({} group(s))",
                k.name, k.charged_layers, k.groups
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What vLLM's pool charges a rank, beside the sum of its layers.
pub fn pool_line(pool: &VllmPool, totals: &Totals, max_num_seqs: u64) -> String {
    let against = if pool.per_row_bytes == totals.per_row {
        "equal to the sum of layers".to_owned()
    } else {
        format!(
            "the sum of layers is {:.2}% {}",
            (1.0 - totals.per_row as f64 / pool.per_row_bytes as f64).abs() * 100.0,
            if totals.per_row < pool.per_row_bytes {
                "less"
            } else {
                "more"
            }
        )
    };
    format!(
        "vLLM's pool (groups of {} layers): {}; a block spans {} layer(s) x {} B = {} B{}, a \
         request takes {} blocks: {} B per row ({}), {} B at peak ({}) at max_num_seqs \
         {max_num_seqs}; {against}",
        pool.group_size,
        charged_kinds(pool),
        pool.widest_group_layers,
        thousands(pool.page_bytes),
        thousands(pool.bytes_per_block),
        if pool.unequal_pages {
            " (the kinds' pages differ here; each is charged as the largest, as vLLM pads them)"
        } else {
            ""
        },
        thousands(pool.blocks_per_request),
        thousands(pool.per_row_bytes),
        human_bytes(pool.per_row_bytes),
        thousands(pool.peak_bytes),
        human_bytes(pool.peak_bytes)
    )
}
