//! Named GPUs and their memory as `nvidia-smi --query-gpu=memory.total`
//! reports it, in MiB: the figure SGLang 0.5.23 keys its defaults on
//! (`get_nvgpu_memory_capacity`, utils/common.py). Each figure is a reading
//! published by someone who ran the command on that card; none is a
//! datasheet's rounded "80 GB".

/// One GPU model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Gpu {
    /// The name `--gpu` takes (case-insensitive).
    pub name: &'static str,
    /// The name `nvidia-smi` prints for it.
    pub product: &'static str,
    /// `memory.total` in MiB.
    pub memory_mib: u64,
    /// Where the reading was published.
    pub source: &'static str,
}

const MODAL: &str = "nvidia-smi totals listed in modal-labs/modal-client#2797 (2025-01-23)";

/// Every GPU `--gpu` names, smallest memory first.
pub const GPUS: &[Gpu] = &[
    Gpu {
        name: "T4",
        product: "Tesla T4",
        memory_mib: 15360,
        source: MODAL,
    },
    Gpu {
        name: "A10",
        product: "NVIDIA A10",
        memory_mib: 23028,
        source: MODAL,
    },
    Gpu {
        name: "L4",
        product: "NVIDIA L4",
        memory_mib: 23034,
        source: MODAL,
    },
    Gpu {
        name: "RTX4090",
        product: "NVIDIA GeForce RTX 4090",
        memory_mib: 24564,
        source:
            "nvidia-smi tables in public RTX 4090 logs (`19MiB / 24564MiB`, drivers 525 to 550)",
    },
    Gpu {
        name: "RTX5090",
        product: "NVIDIA GeForce RTX 5090",
        memory_mib: 32607,
        source:
            "nvidia-smi tables in public RTX 5090 logs (`272MiB / 32607MiB`, drivers 575 to 616)",
    },
    Gpu {
        name: "A100-40GB",
        product: "NVIDIA A100-SXM4-40GB",
        memory_mib: 40960,
        source: MODAL,
    },
    Gpu {
        name: "L40S",
        product: "NVIDIA L40S",
        memory_mib: 46068,
        source: MODAL,
    },
    Gpu {
        name: "H100",
        product: "NVIDIA H100 80GB HBM3",
        memory_mib: 81559,
        source:
            "nvidia-smi in NVIDIA/nccl#1264 (driver 550.54.15) and modal-labs/modal-client#2797",
    },
    Gpu {
        name: "A100-80GB",
        product: "NVIDIA A100-SXM4-80GB",
        memory_mib: 81920,
        source: MODAL,
    },
    Gpu {
        name: "H200",
        product: "NVIDIA H200",
        memory_mib: 143771,
        source: "nvidia-smi tables in public H200 logs (`0MiB / 143771MiB`, drivers 550 to 580)",
    },
    Gpu {
        name: "B200",
        product: "NVIDIA B200",
        memory_mib: 183359,
        source: "nvidia-smi tables in public B200 logs (`0MiB / 183359MiB`, driver 570.172.08)",
    },
];

/// The GPU `--gpu` names, ignoring case.
pub fn gpu(name: &str) -> Option<&'static Gpu> {
    GPUS.iter().find(|g| g.name.eq_ignore_ascii_case(name))
}

/// The names `--gpu` takes, for an error that lists them.
pub fn gpu_names() -> String {
    GPUS.iter().map(|g| g.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_ignoring_case_and_found() {
        for (i, a) in GPUS.iter().enumerate() {
            assert_eq!(gpu(&a.name.to_lowercase()), Some(a));
            for b in &GPUS[i + 1..] {
                assert!(!a.name.eq_ignore_ascii_case(b.name));
                assert!(a.memory_mib <= b.memory_mib, "sorted by memory");
            }
        }
        assert_eq!(gpu("h100").map(|g| g.memory_mib), Some(81559));
        assert_eq!(gpu("rtx4090").map(|g| g.memory_mib), Some(24564));
        assert_eq!(gpu("RTX5090").map(|g| g.memory_mib), Some(32607));
        assert_eq!(gpu("H100 "), None);
        assert!(gpu_names().starts_with("T4, A10, L4, "));
    }
}
