//! The lines `kv estimate` prints per group and per rank: llama.cpp's
//! `llama_kv_cache: size = ...` layout, with kv's exact figures beside it.

use std::fmt::Write as _;

use kv_core::collection::Totals;
use kv_core::spec::Layout;
use kv_core::units::{human_bytes, thousands, MIB};
use kv_core::KvSpec;

use super::pool::VllmPool;

fn mib(bytes: u128) -> f64 {
    bytes as f64 / MIB as f64
}

/// One group as llama.cpp logs its cache, `NAME: size = %7.2f MiB (%6u
/// cells, %3d layers, %2u/%u seqs), K (%s): %7.2f MiB, V (%s): %7.2f MiB`
/// (one entry per part), then kv's exact bytes per position, per row and at
/// peak. A figure past `u64` reads `overflow`.
///
/// ```
/// use kv_engines::estimate::{estimate, group_line, EstimateSettings};
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
/// A kind whose smaller page vLLM filled with more tokens says so:
/// `(5 group(s), 32 tokens a block to fill the largest page)`; packed, each
/// kind's page and block: `(2 group(s), pages of 37,440 B, 64 positions a
/// block)`.
pub fn charged_kinds(pool: &VllmPool) -> String {
    let smallest_block = pool
        .kinds
        .iter()
        .map(|k| k.block_size)
        .filter(|b| *b > 0)
        .min()
        .unwrap_or(0);
    pool.kinds
        .iter()
        .map(|k| {
            let held = if k.layers_on_rank == k.layers {
                format!("{} layers", k.layers)
            } else {
                format!("{} of {} layers", k.layers_on_rank, k.layers)
            };
            // Packed, each kind keeps its own block and page (DeepSeek-V4's
            // states, 64 a block of 256 tokens): none is filled to another's.
            let block = if pool.packed {
                format!(
                    ", pages of {} B, {} positions a block",
                    thousands(k.page_bytes),
                    k.block_size
                )
            } else if k.block_size > smallest_block {
                format!(", {} tokens a block to fill the largest page", k.block_size)
            } else {
                String::new()
            };
            format!(
                "{} {held} charged as {} ({} group(s){block})",
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
    let (groups, block) = if pool.one_group {
        let pages: Vec<String> = pool
            .kinds
            .iter()
            .map(|k| format!("{} x {} B", k.layers_on_rank, thousands(k.page_bytes)))
            .collect();
        (
            format!(
                "one group of all {} layers: {})",
                pool.group_size,
                pool.kinds
                    .iter()
                    .map(|k| k.name.as_str())
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
            format!(
                "a block holds each layer's page side by side: {}",
                pages.join(" + ")
            ),
        )
    } else if pool.packed {
        (
            format!(
                "packed block-outermost, {} pattern repeats a group): {}",
                pool.group_size,
                charged_kinds(pool)
            ),
            "a block holds its widest group's pages side by side, rounded up to the layers' \
             block-stride alignment"
                .to_owned(),
        )
    } else {
        (
            format!(
                "groups of {} layers): {}",
                pool.group_size,
                charged_kinds(pool)
            ),
            format!(
                "a block spans {} layer(s) x {} B",
                pool.widest_group_layers,
                thousands(pool.page_bytes)
            ),
        )
    };
    format!(
        "vLLM's pool ({groups}; {block} = {} B{}, a request takes {} blocks: {} B per row \
         ({}), {} B at peak ({}) at max_num_seqs {max_num_seqs}; {against}",
        thousands(pool.bytes_per_block),
        if pool.unequal_pages && !pool.packed {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::estimate::detect::estimate;
    use crate::estimate::pool::VllmPoolKind;
    use crate::estimate::settings::EstimateSettings;

    #[test]
    fn a_state_group_counts_its_slots_as_cells_and_each_part_at_peak() {
        // Jamba-v0.1 at 8192: 28 Mamba layers, 2 pages (align) a row; at 4
        // rows, 8 cells. A page is 327,680 B (conv 3 x 8,192 x 2 B = 49,152,
        // ssm 8,192 x 16 x 2 B = 262,144, padding 16,384): per row 28 x 2 x
        // 327,680 = 18,350,080 B; at 4 rows 73,400,320 B = 70.00 MiB, of
        // which conv 28 x 2 x 49,152 x 4 B = 10.50 MiB, ssm 56.00 MiB,
        // padding 3.50 MiB.
        let jamba = json!({
            "model_type": "jamba", "num_hidden_layers": 32, "hidden_size": 4096,
            "num_attention_heads": 32, "num_key_value_heads": 8, "attn_layer_period": 8,
            "attn_layer_offset": 4, "mamba_d_state": 16, "mamba_d_conv": 4,
            "mamba_expand": 2, "torch_dtype": "bfloat16",
        });
        let e = estimate(&jamba, &EstimateSettings::new().positions(8192)).unwrap();
        assert_eq!(
            group_line(&e.specs[0], 4),
            "mamba: size =   70.00 MiB (     8 cells,  28 layers,  4/4 seqs), conv (bf16):   \
             10.50 MiB, ssm (bf16):   56.00 MiB, page_padding (u8):    3.50 MiB; per position \
             none (state), per row 18,350,080 B, at peak 73,400,320 B"
        );
        // Attention: 4 layers x 8 heads x 128 x 2 (K, V) x 2 B = 16,384 B a
        // position, over cdiv(8192, 80) = 103 blocks of 80 = 8,240 positions:
        // 135,004,160 B; with the state 153,354,240 B a row (146.25 MiB), and
        // 613,416,960 B (585.00 MiB) at 4 rows.
        let totals = e.collection().unwrap().totals(4).unwrap();
        assert_eq!(
            totals_line(&totals, 4),
            "total: 16,384 B per position, 153,354,240 B per row (146.25 MiB), 613,416,960 B \
             at peak (585.00 MiB) at max_num_seqs 4"
        );
    }

    #[test]
    fn only_a_kind_whose_block_was_made_larger_says_so() {
        let kind = |name: &str, block_size: u64| VllmPoolKind {
            name: name.to_owned(),
            layers: 2,
            groups: 1,
            layers_on_rank: 2,
            charged_layers: 2,
            blocks_per_layer: 4,
            page_bytes: 8_192,
            block_size,
        };
        let pool = |kinds: Vec<VllmPoolKind>| VllmPool {
            group_size: 2,
            kinds,
            widest_group_layers: 2,
            page_bytes: 8_192,
            unequal_pages: false,
            one_group: false,
            packed: false,
            bytes_per_block: 16_384,
            blocks_per_request: 8,
            per_row_bytes: 131_072,
            peak_bytes: 131_072,
        };
        assert_eq!(
            charged_kinds(&pool(vec![kind("sliding", 32), kind("full", 16)])),
            "sliding 2 layers charged as 2 (1 group(s), 32 tokens a block to fill the largest \
             page), full 2 layers charged as 2 (1 group(s))"
        );
        // A report from before kv recorded blocks (0) says nothing of them.
        assert_eq!(
            charged_kinds(&pool(vec![kind("sliding", 0), kind("full", 16)])),
            "sliding 2 layers charged as 2 (1 group(s)), full 2 layers charged as 2 (1 group(s))"
        );
    }

    #[test]
    fn the_pool_line_says_the_padding_and_how_far_the_sum_falls_short() {
        // Gemma-3-1B at 8192: a page is 16 x 1 head x 256 x 2 x 2 B = 16,384
        // B; groups of 4 layers, so a block is 65,536 B. The 22 sliding
        // layers are 6 groups (charged as 24) of cdiv(4,624, 16) = 289
        // blocks, the 4 full ones a group of 512: 2,246 blocks =
        // 147,193,856 B a request. The layers sum to 104,169,472 +
        // 33,554,432 = 137,723,904 B: 6.43% less.
        let gemma = json!({
            "model_type": "gemma3_text", "num_hidden_layers": 26, "num_attention_heads": 4,
            "num_key_value_heads": 1, "head_dim": 256, "hidden_size": 1152,
            "sliding_window": 512, "sliding_window_pattern": 6, "torch_dtype": "bfloat16",
        });
        let e = estimate(&gemma, &EstimateSettings::new().positions(8192)).unwrap();
        let rank = e.ranks(kv_core::Parallel::new(1, 1).unwrap(), 2).unwrap();
        assert_eq!(
            pool_line(&rank[0].pool, &rank[0].totals, 2),
            "vLLM's pool (groups of 4 layers): sliding_attention 22 layers charged as 24 (6 \
             group(s)), full_attention 4 layers charged as 4 (1 group(s)); a block spans 4 \
             layer(s) x 16,384 B = 65,536 B, a request takes 2,246 blocks: 147,193,856 B per \
             row (140.38 MiB), 294,387,712 B at peak (280.75 MiB) at max_num_seqs 2; the sum \
             of layers is 6.43% less"
        );
    }
}
