//! Element types a KV cache can be stored in.

use core::fmt;

/// The element type of a KV cache's tensors.
///
/// Spelled the way candle spells them (`f32`, `bf16`, ...); [`DType::from_torch_dtype`]
/// reads the `torch_dtype` strings found in HF `config.json` files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "json", derive(serde::Serialize))]
#[cfg_attr(feature = "json", serde(rename_all = "lowercase"))]
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
}

impl DType {
    /// Every dtype, in the order error messages list them.
    pub const ALL: [DType; 8] = [
        DType::F64,
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F8E4M3,
        DType::F8E5M2,
        DType::I8,
        DType::U8,
    ];

    /// Bytes one element occupies.
    pub const fn size_in_bytes(self) -> u64 {
        match self {
            DType::F64 => 8,
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::F8E4M3 | DType::F8E5M2 | DType::I8 | DType::U8 => 1,
        }
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
        assert_eq!(DType::F64.size_in_bytes(), 8);
        assert_eq!(DType::F32.size_in_bytes(), 4);
        assert_eq!(DType::BF16.size_in_bytes(), 2);
        assert_eq!(DType::F16.size_in_bytes(), 2);
        assert_eq!(DType::F8E4M3.size_in_bytes(), 1);
        assert_eq!(DType::U8.size_in_bytes(), 1);
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
            "f64, f32, f16, bf16, f8e4m3, f8e5m2, i8, u8"
        );
    }
}
