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

/// `1 row`, `2 rows`: a count and its noun, plural unless one.
pub(crate) fn counted(count: u64, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

/// Bytes as the start-up report writes them: from 1 MiB up, `{:.2} MiB`
/// (the original report's `%.2f MiB`, never GiB: `2272.00 MiB`); below,
/// [`human_bytes`] (`704.00 KiB`, `512 B`, `0 B`), so that a small figure
/// never reads `0.00 MiB`.
pub(crate) fn report_bytes(bytes: u64) -> String {
    if bytes >= MIB {
        format!("{:.2} MiB", mib(bytes))
    } else {
        human_bytes(bytes)
    }
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

/// A count with its digits grouped by three, as Python's `f"{n:,}"` writes
/// it: `131,072`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
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
    fn the_report_keeps_mib_from_one_mib_and_small_figures_in_kib_or_bytes() {
        assert_eq!(report_bytes(2_382_364_672), "2272.00 MiB");
        assert_eq!(report_bytes(MIB), "1.00 MiB");
        // 1 MiB - 1 B = 1023.999 KiB
        assert_eq!(report_bytes(MIB - 1), "1024.00 KiB");
        assert_eq!(report_bytes(720_896), "704.00 KiB");
        assert_eq!(report_bytes(1_024), "1.00 KiB");
        assert_eq!(report_bytes(1_023), "1023 B");
        assert_eq!(report_bytes(0), "0 B");
    }

    #[test]
    fn mib_formats_like_percent_2f() {
        assert_eq!(format!("{:.2}", mib(147_456_000)), "140.62");
        assert_eq!(format!("{:.2}", mib(4_653_056)), "4.44");
    }

    #[test]
    fn thousands_groups_digits_by_three_from_the_right() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(131_072), "131,072");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }
}
