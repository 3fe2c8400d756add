//! Tensors a model keeps for itself beside its caches: rotary cos/sin
//! tables, a memo of attention masks, codebooks, position tables. They have
//! no positions per row: each part is a shape, or a memo of one tensor per
//! length whose bound says why it stops there. All byte math is checked
//! `const fn`.

use std::borrow::Cow;
use std::fmt;

use super::dtype::DType;
use super::storage::Storage;
use crate::error::Overflow;

/// The tensors of one declaration, as named parts.
///
/// candle-transformers' llama keeps, beside its caches, a cos and a sin
/// table of `max_position_embeddings x head_dim / 2` in the model's dtype,
/// and one `t x t` u8 causal mask per distinct prompt length `t` it has
/// seen, never evicted:
///
/// ```
/// use kv_core::{DType, TensorPart, Tensors};
///
/// const ROPE: &[TensorPart] = &[
///     TensorPart::new("cos", [4096, 64, 1], DType::F32),
///     TensorPart::new("sin", [4096, 64, 1], DType::F32),
/// ];
/// // 2 x 4096 x 64 x 4 B
/// assert_eq!(Tensors::new(ROPE).bytes(), Ok(2_097_152));
///
/// const MASKS: &[TensorPart] = &[TensorPart::square_per_length(
///     "mask", 2, 4, DType::U8, "one mask per distinct prompt length, never evicted",
/// )];
/// // 2 x 2 + 3 x 3 + 4 x 4 bytes
/// assert_eq!(Tensors::new(MASKS).bytes(), Ok(29));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Tensors {
    /// The tensors, each named.
    pub parts: Cow<'static, [TensorPart]>,
}

/// One named tensor, or memo of tensors, of a [`Tensors`] declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct TensorPart {
    /// `"cos"`, `"mask"`, `"codebook"`, ...
    pub name: &'static str,
    /// Its shape.
    pub shape: TensorShape,
}

/// The shape of a [`TensorPart`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorShape {
    /// One tensor of these dimensions (unused trailing ones are 1).
    Fixed {
        /// The dimensions.
        dims: [u64; 3],
        /// How its elements are stored.
        storage: Storage,
    },
    /// A memo of one `t x t` tensor per distinct length `t` in
    /// `from..=to`, at most (candle's llama keeps a causal mask per prompt
    /// length it has seen, and never evicts one): its worst case holds
    /// every length, and `because` says why the lengths stop at `to`.
    SquarePerLength {
        /// The shortest length kept.
        from: u64,
        /// The longest length kept.
        to: u64,
        /// How its elements are stored (whole bytes each).
        dtype: DType,
        /// Why the memo holds at most these lengths.
        because: &'static str,
    },
}

const BYTES: Overflow = Overflow {
    step: "bytes of the model-local tensors",
};

impl TensorPart {
    /// One tensor of `dims` (unused trailing dimensions 1) of `dtype`.
    pub const fn new(name: &'static str, dims: [u64; 3], dtype: DType) -> TensorPart {
        TensorPart {
            name,
            shape: TensorShape::Fixed {
                dims,
                storage: Storage::Dense(dtype),
            },
        }
    }

    /// A memo of one `t x t` tensor of `dtype` per length `t` in
    /// `from..=to`, with the reason it stops at `to`.
    pub const fn square_per_length(
        name: &'static str,
        from: u64,
        to: u64,
        dtype: DType,
        because: &'static str,
    ) -> TensorPart {
        TensorPart {
            name,
            shape: TensorShape::SquarePerLength {
                from,
                to,
                dtype,
                because,
            },
        }
    }

    /// The same tensor stored as `storage` (a fixed shape only; a memo keeps
    /// its dtype).
    pub const fn with_storage(mut self, storage: Storage) -> TensorPart {
        if let TensorShape::Fixed { dims, .. } = self.shape {
            self.shape = TensorShape::Fixed { dims, storage };
        }
        self
    }

    /// The bytes of the part: its tensor, or every tensor of its memo.
    pub const fn bytes(&self) -> Result<u64, Overflow> {
        match self.shape {
            TensorShape::Fixed { dims, storage } => {
                let Some(two) = dims[0].checked_mul(dims[1]) else {
                    return Err(BYTES);
                };
                let Some(elements) = two.checked_mul(dims[2]) else {
                    return Err(BYTES);
                };
                storage.bytes_for(elements)
            }
            TensorShape::SquarePerLength {
                from, to, dtype, ..
            } => {
                // The sum of t^2 for t in from..=to, as two sums from 1
                // (1^2 + .. + n^2 = n(n+1)(2n+1)/6) in checked u128, then
                // whole bytes per element.
                if from == 0 || from > to {
                    return Err(BYTES);
                }
                let (Some(up_to), Some(below)) = (squares_up_to(to), squares_up_to(from - 1))
                else {
                    return Err(BYTES);
                };
                let elements = up_to - below;
                let bits = dtype.bits() as u128;
                let Some(total_bits) = elements.checked_mul(bits) else {
                    return Err(BYTES);
                };
                // A sub-byte dtype rounds up per tensor, not per memo: no
                // closed form; such a memo is refused by `first_invalid`.
                // Past u64 when the cast loses bits (no boundary to get wrong).
                let bytes = total_bits / 8;
                if bytes as u64 as u128 != bytes {
                    return Err(BYTES);
                }
                Ok(bytes as u64)
            }
        }
    }

    /// What is wrong with the part, if anything: a zero dimension, an empty
    /// or zero-based range, a blank reason, a memo in a dtype of less than a
    /// byte (whose per-tensor rounding kv does not model).
    pub(crate) const fn first_invalid(&self) -> Option<&'static str> {
        match self.shape {
            TensorShape::Fixed { dims, storage } => {
                if dims[0] == 0 || dims[1] == 0 || dims[2] == 0 {
                    return Some("has a zero dimension");
                }
                match storage {
                    Storage::Blocks(format)
                        if format.block_elems() == 0 || format.block_bytes() == 0 =>
                    {
                        Some("has a block format of no elements or no bytes")
                    }
                    _ => None,
                }
            }
            TensorShape::SquarePerLength {
                from,
                to,
                dtype,
                because,
            } => {
                if from == 0 {
                    Some("is a memo whose lengths start at 0")
                } else if from > to {
                    Some("is a memo whose shortest length is above its longest")
                } else if dtype.bits() % 8 != 0 {
                    Some("is a memo in a dtype of less than a byte, which kv does not size")
                } else if is_blank(because) {
                    Some("is a memo with a blank reason; say why its lengths stop where they do")
                } else {
                    None
                }
            }
        }
    }
}

/// `1^2 + 2^2 + .. + n^2`, where it fits in u128.
const fn squares_up_to(n: u64) -> Option<u128> {
    let n = n as u128;
    // n(n+1)(2n+1) fits in u128 for n < 2^42; above, checked.
    let Some(a) = n.checked_mul(n + 1) else {
        return None;
    };
    let Some(b) = a.checked_mul(2 * n + 1) else {
        return None;
    };
    Some(b / 6)
}

const fn is_blank(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_whitespace() {
            return false;
        }
        i += 1;
    }
    true
}

impl Tensors {
    /// Tensors of `parts` known at compile time.
    pub const fn new(parts: &'static [TensorPart]) -> Tensors {
        Tensors {
            parts: Cow::Borrowed(parts),
        }
    }

    /// Tensors built at run time (from a config).
    pub fn from_parts(parts: Vec<TensorPart>) -> Tensors {
        Tensors {
            parts: Cow::Owned(parts),
        }
    }

    /// The parts, borrowed or owned.
    pub const fn parts(&self) -> &[TensorPart] {
        match &self.parts {
            Cow::Borrowed(parts) => parts,
            Cow::Owned(parts) => parts.as_slice(),
        }
    }

    /// Bytes of every part.
    pub const fn bytes(&self) -> Result<u64, Overflow> {
        let parts = self.parts();
        let mut total: u64 = 0;
        let mut i = 0;
        while i < parts.len() {
            let bytes = match parts[i].bytes() {
                Ok(bytes) => bytes,
                Err(overflow) => return Err(overflow),
            };
            total = match total.checked_add(bytes) {
                Some(total) => total,
                None => return Err(BYTES),
            };
            i += 1;
        }
        Ok(total)
    }

    /// The first problem of a part, as `(part name, problem)`; an empty set
    /// of parts is one too.
    pub(crate) const fn first_invalid(&self) -> Option<(&'static str, &'static str)> {
        let parts = self.parts();
        if parts.is_empty() {
            return Some(("tensors", "has no parts"));
        }
        let mut i = 0;
        while i < parts.len() {
            if let Some(problem) = parts[i].first_invalid() {
                return Some((parts[i].name, problem));
            }
            i += 1;
        }
        None
    }
}

impl fmt::Display for TensorPart {
    /// `cos [4096 x 64] f32`, `mask: one [t x t] u8 per length t in
    /// 2..=4096 (why)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.shape {
            TensorShape::Fixed { dims, storage } => {
                let used = dims
                    .iter()
                    .rposition(|d| *d != 1)
                    .map_or(1, |last| last + 1);
                let dims: Vec<String> = dims[..used].iter().map(u64::to_string).collect();
                write!(f, "{} [{}] {storage}", self.name, dims.join(" x "))
            }
            TensorShape::SquarePerLength {
                from,
                to,
                dtype,
                because,
            } => write!(
                f,
                "{}: one [t x t] {dtype} per length t in {from}..={to} ({because})",
                self.name
            ),
        }
    }
}

impl fmt::Display for Tensors {
    /// Each part, comma-separated: what the report and the table show.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, part) in self.parts().iter().enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{part}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::storage::BlockFormat;

    #[test]
    fn a_fixed_part_is_its_elements_in_its_storage() {
        assert_eq!(
            TensorPart::new("cos", [4096, 64, 1], DType::BF16).bytes(),
            Ok(524_288)
        );
        // q8_0: 64 elements are 2 blocks of 34 bytes.
        let q8 = TensorPart::new("codebook", [64, 1, 1], DType::F32)
            .with_storage(Storage::Blocks(BlockFormat::Q8_0));
        assert_eq!(q8.bytes(), Ok(68));
        assert_eq!(
            TensorPart::new("huge", [u64::MAX, 2, 1], DType::U8).bytes(),
            Err(BYTES)
        );
        assert_eq!(
            TensorPart::new("huge", [1, u64::MAX, 2], DType::U8).bytes(),
            Err(BYTES)
        );
    }

    #[test]
    fn a_memo_by_length_sums_every_square_in_its_range() {
        let memo = |from, to, dtype| {
            TensorPart::square_per_length("mask", from, to, dtype, "every prompt length").bytes()
        };
        // 1 + 4 + 9 = 14; 4 + 9 = 13; 9.
        assert_eq!(memo(1, 3, DType::U8), Ok(14));
        assert_eq!(memo(2, 3, DType::U8), Ok(13));
        assert_eq!(memo(3, 3, DType::U8), Ok(9));
        // f32 masks: 4 bytes an element.
        assert_eq!(memo(2, 3, DType::F32), Ok(52));
        // Llama's 4096 positions, every prompt length from 2: 4096 x 4097 x
        // 8193 / 6 - 1 = 22,914,881,535 bytes (21.3 GiB).
        assert_eq!(memo(2, 4096, DType::U8), Ok(22_914_881_535));
        assert_eq!(memo(0, 3, DType::U8), Err(BYTES));
        assert_eq!(memo(4, 3, DType::U8), Err(BYTES));
        // Past u64: refused, not wrapped.
        assert_eq!(memo(1, u64::MAX, DType::U8), Err(BYTES));
        // 2^21 lengths fit (about 3.1e18 elements); 2^22 do not.
        assert_eq!(memo(1, 1 << 21, DType::U8), Ok(3_074_459_544_641_863_680));
        assert_eq!(memo(1, 1 << 22, DType::U8), Err(BYTES));
    }

    #[test]
    fn a_part_says_what_is_wrong_with_it() {
        let memo = |from, to, dtype, because| {
            TensorPart::square_per_length("mask", from, to, dtype, because).first_invalid()
        };
        assert_eq!(memo(2, 8, DType::U8, "why"), None);
        assert_eq!(
            memo(0, 8, DType::U8, "why"),
            Some("is a memo whose lengths start at 0")
        );
        assert_eq!(
            memo(9, 8, DType::U8, "why"),
            Some("is a memo whose shortest length is above its longest")
        );
        assert!(memo(2, 8, DType::I4, "why").is_some_and(|p| p.contains("less than a byte")));
        assert!(memo(2, 8, DType::U8, " \t").is_some_and(|p| p.contains("blank reason")));
        assert_eq!(
            TensorPart::new("cos", [4, 0, 1], DType::F32).first_invalid(),
            Some("has a zero dimension")
        );
        assert_eq!(
            TensorPart::new("cos", [0, 4, 1], DType::F32).first_invalid(),
            Some("has a zero dimension")
        );
        assert_eq!(
            TensorPart::new("cos", [4, 4, 0], DType::F32).first_invalid(),
            Some("has a zero dimension")
        );
        // One length is a range too.
        assert_eq!(memo(8, 8, DType::U8, "why"), None);
        let blocks = |elems, bytes| {
            TensorPart::new("cos", [4, 4, 1], DType::F32)
                .with_storage(Storage::Blocks(BlockFormat::new("blocks", elems, bytes)))
                .first_invalid()
        };
        assert_eq!(blocks(32, 34), None);
        let no_blocks = Some("has a block format of no elements or no bytes");
        assert_eq!(blocks(0, 34), no_blocks);
        assert_eq!(blocks(32, 0), no_blocks);
        assert_eq!(
            Tensors::from_parts(Vec::new()).first_invalid(),
            Some(("tensors", "has no parts"))
        );
        const PARTS: &[TensorPart] = &[
            TensorPart::new("cos", [4, 4, 1], DType::F32),
            TensorPart::new("sin", [4, 0, 1], DType::F32),
        ];
        assert_eq!(
            Tensors::new(PARTS).first_invalid(),
            Some(("sin", "has a zero dimension"))
        );
    }

    #[test]
    fn tensors_add_their_parts_and_display_them() {
        let tensors = Tensors::from_parts(vec![
            TensorPart::new("cos", [8, 4, 1], DType::F32),
            TensorPart::square_per_length("mask", 2, 3, DType::U8, "prompts of 2 or 3"),
        ]);
        // 8 x 4 x 4 + 4 + 9
        assert_eq!(tensors.bytes(), Ok(141));
        assert_eq!(
            tensors.to_string(),
            "cos [8 x 4] f32, mask: one [t x t] u8 per length t in 2..=3 (prompts of 2 or 3)"
        );
        assert_eq!(
            TensorPart::new("slopes", [16, 1, 1], DType::F32).to_string(),
            "slopes [16] f32"
        );
        assert_eq!(
            TensorPart::new("t", [2, 1, 3], DType::F32).to_string(),
            "t [2 x 1 x 3] f32"
        );
        let overflow =
            Tensors::from_parts(vec![TensorPart::new("a", [u64::MAX, 1, 1], DType::F32)]);
        assert!(overflow.bytes().is_err());
        // Each part fits (u64::MAX / 8 bytes); nine of them do not.
        let eighth = TensorPart::new("a", [u64::MAX / 8, 1, 1], DType::U8);
        assert_eq!(eighth.bytes(), Ok(u64::MAX / 8));
        assert_eq!(
            Tensors::from_parts(vec![eighth; 8]).bytes(),
            Ok(u64::MAX / 8 * 8)
        );
        assert_eq!(Tensors::from_parts(vec![eighth; 9]).bytes(), Err(BYTES));
    }
}
