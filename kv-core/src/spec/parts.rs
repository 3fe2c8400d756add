//! A layout's bytes by part (keys, values, latent, each state tensor), for
//! llama.cpp-style lines that show where a row's bytes go.

use std::borrow::Cow;

use super::layout::Layout;
use super::storage::Storage;
use super::tensors::TensorShape;
use crate::error::Overflow;

/// One part of a row: what it holds, how it is stored, and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LayoutPart {
    /// `"K"`, `"V"`, `"residual K"`, `"residual V"`, `"latent"`, `"rope"`, or
    /// a state or tensor part's name (`"conv"`, `"ssm"`, `"cos"`, ...).
    pub name: Cow<'static, str>,
    /// How its elements are stored.
    pub storage: Storage,
    /// Its bytes in one row, every layer (and state slot) included.
    pub bytes_per_row: Result<u64, Overflow>,
}

const PART: Overflow = Overflow {
    step: "bytes of one part of a row",
};

/// `elements` of `storage`, times each factor, checked.
fn bytes(storage: Storage, elements: u64, factors: &[u64]) -> Result<u64, Overflow> {
    let mut total = storage.bytes_for(elements)?;
    for factor in factors {
        total = total.checked_mul(*factor).ok_or(PART)?;
    }
    Ok(total)
}

fn part(name: &'static str, storage: Storage, bytes_per_row: Result<u64, Overflow>) -> LayoutPart {
    LayoutPart {
        name: Cow::Borrowed(name),
        storage,
        bytes_per_row,
    }
}

impl Layout {
    /// The row's bytes by part, honouring every storage (block formats, a
    /// separate value or rope storage) and the residual window (its
    /// positions in the residual's storage). The parts add up to
    /// [`Layout::bytes_per_row`] whenever neither overflows.
    ///
    /// ```
    /// use kv_core::{DType, Geometry, Positions, Storage};
    /// use kv_core::spec::Layout;
    ///
    /// let layout = Layout::Attention {
    ///     geometry: Geometry::new(32, 8, 128, DType::BF16)
    ///         .with_v_storage(Storage::from_name("q8_0").unwrap()),
    ///     positions: Positions::bounded(8192, "max_model_len"),
    /// };
    /// let parts = layout.parts();
    /// // K: 32 x 8 x 128 x 2 B x 8192; V: 32 x 8 x (4 blocks of 34 B) x 8192.
    /// assert_eq!(parts[0].bytes_per_row, Ok(32 * 8 * 256 * 8192));
    /// assert_eq!(parts[1].bytes_per_row, Ok(32 * 8 * 136 * 8192));
    /// # assert_eq!(layout.bytes_per_row(), Ok(32 * 8 * (256 + 136) * 8192));
    /// ```
    pub fn parts(&self) -> Vec<LayoutPart> {
        match self {
            Layout::Attention {
                geometry: g,
                positions,
            } => {
                let kept = g.residual.map_or(0, |r| r.positions.min(positions.count));
                let quantized = positions.count - kept;
                let with = |positions: u64| [g.kv_heads, g.layers, positions];
                let mut parts = vec![
                    part(
                        "K",
                        g.storage,
                        bytes(g.storage, g.head_dim, &with(quantized)),
                    ),
                    part(
                        "V",
                        g.value_storage(),
                        bytes(g.value_storage(), g.value_head_dim(), &with(quantized)),
                    ),
                ];
                if let Some(residual) = g.residual {
                    let storage = residual.storage;
                    parts.push(part(
                        "residual K",
                        storage,
                        bytes(storage, g.head_dim, &with(kept)),
                    ));
                    parts.push(part(
                        "residual V",
                        storage,
                        bytes(storage, g.value_head_dim(), &with(kept)),
                    ));
                }
                parts
            }
            Layout::Latent {
                latent: l,
                positions,
            } => {
                let factors = [l.layers, positions.count];
                match l.rope_storage {
                    None => vec![part(
                        "latent",
                        l.storage,
                        l.kv_lora_rank
                            .checked_add(l.rope_dim)
                            .ok_or(PART)
                            .and_then(|width| bytes(l.storage, width, &factors)),
                    )],
                    Some(rope) => vec![
                        part(
                            "latent",
                            l.storage,
                            bytes(l.storage, l.kv_lora_rank, &factors),
                        ),
                        part("rope", rope, bytes(rope, l.rope_dim, &factors)),
                    ],
                }
            }
            Layout::Recurrent(state) => state
                .parts
                .iter()
                .map(|p| LayoutPart {
                    name: Cow::Borrowed(p.name),
                    storage: p.storage,
                    bytes_per_row: p.elements().and_then(|elements| {
                        bytes(p.storage, elements, &[state.layers, state.slots])
                    }),
                })
                .collect(),
            Layout::Tensors(tensors) => tensors
                .parts()
                .iter()
                .map(|p| LayoutPart {
                    name: Cow::Borrowed(p.name),
                    storage: match p.shape {
                        TensorShape::Fixed { storage, .. } => storage,
                        TensorShape::SquarePerLength { dtype, .. } => Storage::Dense(dtype),
                    },
                    bytes_per_row: p.bytes(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::dtype::DType;
    use crate::spec::layout::{Geometry, Latent, Layout, RecurrentState, StatePart};
    use crate::spec::positions::Positions;
    use crate::spec::storage::Storage;

    fn sum(layout: &Layout) -> u64 {
        layout
            .parts()
            .iter()
            .map(|p| p.bytes_per_row.unwrap())
            .sum()
    }

    #[test]
    fn attention_parts_split_keys_values_and_the_residual_window() {
        let q4 = Storage::from_name("q4_0").unwrap();
        let layout = Layout::Attention {
            // 2 layers, 4 heads, 64 dims; q4_0 K/V (2 blocks of 18 B) with a
            // bf16 residual of 100 positions, over 1000 positions.
            geometry: Geometry::new(2, 4, 64, DType::BF16)
                .with_storage(q4)
                .with_residual(100, Storage::Dense(DType::BF16)),
            positions: Positions::bounded(1000, "test"),
        };
        let parts = layout.parts();
        let names: Vec<&str> = parts.iter().map(|p| p.name.as_ref()).collect();
        assert_eq!(names, ["K", "V", "residual K", "residual V"]);
        assert_eq!(parts[0].bytes_per_row, Ok(2 * 4 * 36 * 900));
        assert_eq!(parts[1].bytes_per_row, Ok(2 * 4 * 36 * 900));
        assert_eq!(parts[2].bytes_per_row, Ok(2 * 4 * 128 * 100));
        assert_eq!(parts[3].bytes_per_row, Ok(2 * 4 * 128 * 100));
        assert_eq!(sum(&layout), layout.bytes_per_row().unwrap());
    }

    #[test]
    fn latent_and_state_parts_add_up_to_the_row() {
        let latent = Layout::Latent {
            latent: Latent::new(27, 512, 64, DType::BF16),
            positions: Positions::bounded(16, "test"),
        };
        assert_eq!(latent.parts()[0].bytes_per_row, Ok(27 * 576 * 2 * 16));
        let split = Layout::Latent {
            latent: Latent::new(27, 512, 64, DType::BF16)
                .with_rope_storage(Storage::Dense(DType::F32)),
            positions: Positions::bounded(16, "test"),
        };
        let parts = split.parts();
        assert_eq!(parts[0].bytes_per_row, Ok(27 * 512 * 2 * 16));
        assert_eq!(parts[1].bytes_per_row, Ok(27 * 64 * 4 * 16));
        assert_eq!(sum(&split), split.bytes_per_row().unwrap());
        let state = Layout::Recurrent(
            RecurrentState::from_parts(
                3,
                vec![
                    StatePart::new("conv", [3, 10, 1], DType::BF16),
                    StatePart::new("ssm", [10, 16, 1], DType::F32),
                ],
            )
            .with_slots(2),
        );
        let parts = state.parts();
        assert_eq!(parts[0].bytes_per_row, Ok(3 * 2 * 30 * 2));
        assert_eq!(parts[1].bytes_per_row, Ok(3 * 2 * 160 * 4));
        assert_eq!(sum(&state), state.bytes_per_row().unwrap());
    }

    #[test]
    fn an_overflowing_part_is_an_overflow_not_zero() {
        let layout = Layout::Attention {
            geometry: Geometry::new(u64::MAX, 4, 64, DType::BF16),
            positions: Positions::bounded(1000, "test"),
        };
        assert!(layout.parts().iter().all(|p| p.bytes_per_row.is_err()));
    }
}
