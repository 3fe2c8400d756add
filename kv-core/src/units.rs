//! Byte sizes as people read them.

/// Bytes in a KiB.
pub const KIB: u64 = 1 << 10;
/// Bytes in a MiB.
pub const MIB: u64 = 1 << 20;
/// Bytes in a GiB.
pub const GIB: u64 = 1 << 30;

/// Bytes as MiB, for `{:.2}` formatting like the original report's `%.2f MiB`.
pub(crate) fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

/// Bytes in the largest binary unit that keeps the figure at least 1, with two
/// decimals: `704.00 KiB`, `4.44 MiB`, `1.11 GiB`; below 1 KiB, `512 B`.
pub fn human_bytes(bytes: u64) -> String {
    let (unit, size) = if bytes >= GIB {
        ("GiB", GIB)
    } else if bytes >= MIB {
        ("MiB", MIB)
    } else if bytes >= KIB {
        ("KiB", KIB)
    } else {
        return format!("{bytes} B");
    };
    format!("{:.2} {unit}", bytes as f64 / size as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_figures_read_as_in_the_original_design() {
        assert_eq!(human_bytes(4_653_056), "4.44 MiB");
        assert_eq!(human_bytes(720_896), "704.00 KiB");
        assert_eq!(human_bytes(147_456_000), "140.62 MiB");
        assert_eq!(human_bytes(25_165_824), "24.00 MiB");
        assert_eq!(human_bytes(188_153_856), "179.44 MiB");
        assert_eq!(human_bytes(2 * 256 * 4_653_056), "2.22 GiB");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(u64::MAX), "17179869184.00 GiB");
    }

    #[test]
    fn mib_formats_like_percent_2f() {
        assert_eq!(format!("{:.2}", mib(147_456_000)), "140.62");
        assert_eq!(format!("{:.2}", mib(4_653_056)), "4.44");
    }
}
