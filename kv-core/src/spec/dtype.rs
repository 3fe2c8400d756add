//! Element types a KV cache can be stored in.

use core::fmt;

use crate::error::Overflow;

/// The element type of a KV cache's tensors.
///
/// Spelled the way candle spells them (`f32`, `bf16`, ...); [`DType::from_torch_dtype`]
/// reads the `torch_dtype` strings found in HF `config.json` files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// 64-bit float.
    F64,
    /// 32-bit float.
    F32,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// 8-bit float, 4 exponent bits and 3 mantissa bits.
    F8E4M3,
    /// 8-bit float, 5 exponent bits and 2 mantissa bits.
    F8E5M2,
    /// 8-bit signed integer (quantized caches).
    I8,
    /// 8-bit unsigned integer (quantized caches).
    U8,
    /// 4-bit signed integer, two to a byte (packed quantized caches).
    I4,
    /// 2-bit signed integer, four to a byte (packed quantized caches).
    I2,
    /// 4-bit float, 2 exponent bits and 1 mantissa bit (FP4 without block scales;
    /// NVFP4 with its scales is [`crate::BlockFormat::NVFP4`]).
    F4E2M1,
}

impl DType {
    /// Every dtype, in the order error messages list them.
    pub const ALL: [DType; 11] = [
        DType::F64,
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F8E4M3,
        DType::F8E5M2,
        DType::I8,
        DType::U8,
        DType::I4,
        DType::I2,
        DType::F4E2M1,
    ];

    /// Bits one element occupies. Elements below 8 bits are packed; see
    /// [`DType::bytes_for`].
    pub const fn bits(self) -> u64 {
        match self {
            DType::F64 => 64,
            DType::F32 => 32,
            DType::F16 | DType::BF16 => 16,
            DType::F8E4M3 | DType::F8E5M2 | DType::I8 | DType::U8 => 8,
            DType::I4 | DType::F4E2M1 => 4,
            DType::I2 => 2,
        }
    }

    /// Bytes `elements` packed elements take: `ceil(elements x bits / 8)`. A
    /// partial byte rounds up (it is allocated); [`DType::rounds_up`] says
    /// when that happens.
    pub const fn bytes_for(self, elements: u64) -> Result<u64, Overflow> {
        match elements.checked_mul(self.bits()) {
            Some(bits) => Ok(bits.div_ceil(8)),
            None => Err(Overflow {
                step: "bytes of a vector (elements x bits)",
            }),
        }
    }

    /// Whether `elements` packed elements end in a partial byte that
    /// [`DType::bytes_for`] rounds up.
    pub const fn rounds_up(self, elements: u64) -> bool {
        // (elements x bits) mod 8, without the product overflowing.
        !((elements % 8) * self.bits()).is_multiple_of(8)
    }

    /// The candle-style name: `f32`, `bf16`, `f8e4m3`, ...
    pub const fn name(self) -> &'static str {
        match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F8E4M3 => "f8e4m3",
            DType::F8E5M2 => "f8e5m2",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I4 => "i4",
            DType::I2 => "i2",
            DType::F4E2M1 => "f4e2m1",
        }
    }

    /// Parses a candle-style name (`"bf16"`); `None` for anything else.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Parses a `torch_dtype` string as HF configs write it (`"bfloat16"`, also
    /// `"torch.bfloat16"`); candle-style names are accepted too.
    pub fn from_torch_dtype(text: &str) -> Option<DType> {
        let text = text.strip_prefix("torch.").unwrap_or(text);
        let dtype = match text {
            "float64" | "double" => DType::F64,
            "float32" | "float" => DType::F32,
            "float16" | "half" => DType::F16,
            "bfloat16" => DType::BF16,
            "float8_e4m3fn" | "float8_e4m3" => DType::F8E4M3,
            "float8_e5m2" => DType::F8E5M2,
            "int8" => DType::I8,
            "uint8" => DType::U8,
            "int4" => DType::I4,
            "int2" => DType::I2,
            "float4_e2m1fn_x2" | "fp4" => DType::F4E2M1,
            other => return DType::from_name(other),
        };
        Some(dtype)
    }

    /// The valid names, comma separated, for error messages.
    pub fn names_list() -> String {
        let names: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
        names.join(", ")
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_the_element_widths() {
        let bytes = |d: DType| d.bytes_for(1).unwrap();
        assert_eq!(bytes(DType::F64), 8);
        assert_eq!(bytes(DType::F32), 4);
        assert_eq!(bytes(DType::BF16), 2);
        assert_eq!(bytes(DType::F16), 2);
        assert_eq!(bytes(DType::F8E4M3), 1);
        assert_eq!(bytes(DType::U8), 1);
    }

    #[test]
    fn sub_byte_types_pack_and_a_partial_byte_rounds_up() {
        assert_eq!(DType::I4.bytes_for(128), Ok(64));
        assert_eq!(DType::I2.bytes_for(128), Ok(32));
        assert_eq!(DType::F4E2M1.bytes_for(64), Ok(32));
        assert!(!DType::I4.rounds_up(128));
        // 3 x 4 bits = 12 bits: two bytes, one of them half used.
        assert_eq!(DType::I4.bytes_for(3), Ok(2));
        assert!(DType::I4.rounds_up(3));
        assert_eq!(DType::I2.bytes_for(5), Ok(2));
        assert!(DType::I2.rounds_up(5));
        assert!(!DType::I2.rounds_up(4));
        assert!(!DType::BF16.rounds_up(7));
        // Without overflow at the largest count: u64::MAX x 4 bits ends in half a byte.
        assert!(DType::I4.rounds_up(u64::MAX));
        assert!(!DType::I4.rounds_up(u64::MAX - 1));
        assert!(DType::F64.bytes_for(u64::MAX / 8).is_err());
        assert_eq!(DType::U8.bytes_for(u64::MAX / 8), Ok(u64::MAX / 8));
    }

    #[test]
    fn names_round_trip() {
        for dtype in DType::ALL {
            assert_eq!(DType::from_name(dtype.name()), Some(dtype));
            assert_eq!(DType::from_torch_dtype(dtype.name()), Some(dtype));
        }
        assert_eq!(DType::from_name("bfloat16"), None);
    }

    #[test]
    fn torch_spellings_map_to_candle_ones() {
        assert_eq!(DType::from_torch_dtype("float32"), Some(DType::F32));
        assert_eq!(DType::from_torch_dtype("float16"), Some(DType::F16));
        assert_eq!(DType::from_torch_dtype("bfloat16"), Some(DType::BF16));
        assert_eq!(DType::from_torch_dtype("torch.bfloat16"), Some(DType::BF16));
        assert_eq!(
            DType::from_torch_dtype("float8_e4m3fn"),
            Some(DType::F8E4M3)
        );
        assert_eq!(DType::from_torch_dtype("complex64"), None);
    }

    #[test]
    fn names_list_names_every_dtype() {
        assert_eq!(
            DType::names_list(),
            "f64, f32, f16, bf16, f8e4m3, f8e5m2, i8, u8, i4, i2, f4e2m1"
        );
    }
}
