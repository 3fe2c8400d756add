//! Values that sit on a boundary: where arithmetic wraps, a signed value
//! turns negative, a count is zero, or a length runs past the bytes left.

/// 64-bit values, as a mutation writes them over a field.
pub const U64S: &[u64] = &[
    0,
    1,
    2,
    3,
    7,
    8,
    255,
    256,
    4096,
    65_535,
    65_536,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x1_0000_0001,
    (1 << 53) + 1,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX - 1,
    u64::MAX,
    (-8i64) as u64,
];

/// JSON numbers a mutated config may carry.
pub const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "-8",
    "2",
    "3",
    "64",
    "4096",
    "4294967295",
    "4294967296",
    "9007199254740993",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "0.5",
    "1e308",
    "-0",
    "1e-9",
];

/// One of [`NUMBERS`] as serde_json reads it: a u64, an i64, or an f64
/// (past u64 it becomes a float, as in any config read with serde_json).
pub fn number(rng: &mut crate::rng::Rng) -> serde_json::Value {
    let text = rng.pick::<&str>(NUMBERS);
    serde_json::from_str(text).unwrap_or(serde_json::Value::Null)
}
