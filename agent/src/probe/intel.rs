//! Parses `sycl-ls` (current `[level_zero:gpu][level_zero:0]` and older
//! `[ext_oneapi_level_zero:gpu:0]` forms) and `clinfo` into [`IntelGpu`]s, and names each
//! device's architecture with one cited table.

use serde::{Deserialize, Serialize};

use super::outcome::Probe;

/// Intel GPU architectures, named as the oneAPI AOT targets name them
/// (`-fsycl-targets=intel_gpu_<name>`, `ocloc -device <name>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntelArch {
    /// Xe-LP (Tiger Lake iGPU, Iris Xe).
    Tgllp,
    /// Xe-HPG Alchemist: Arc A-series, Data Center GPU Flex.
    Dg2,
    /// Xe2 Battlemage: Arc B-series.
    Bmg,
    /// Xe-HPC Ponte Vecchio: Data Center GPU Max.
    Pvc,
    /// Meteor Lake iGPU (Xe-LPG).
    Mtl,
    /// Lunar Lake iGPU (Xe2-LPG).
    Lnl,
    /// Arrow Lake iGPU (Xe-LPG+).
    Arl,
    Unknown,
}

impl IntelArch {
    /// The name as keys and reports spell it (its serde name): `dg2`, `bmg`, …
    pub fn name(&self) -> &'static str {
        match self {
            IntelArch::Tgllp => "tgllp",
            IntelArch::Dg2 => "dg2",
            IntelArch::Bmg => "bmg",
            IntelArch::Pvc => "pvc",
            IntelArch::Mtl => "mtl",
            IntelArch::Lnl => "lnl",
            IntelArch::Arl => "arl",
            IntelArch::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntelGpu {
    pub name: String,
    pub architecture: IntelArch,
    /// `level_zero` / `opencl` (sycl-ls), `opencl` (clinfo).
    pub backend: String,
    /// The backend's device index, when given.
    pub index: Option<u32>,
    pub platform: Option<String>,
    /// sycl-ls: the version after the name (for Level Zero the GPU IP version, e.g. `12.55.8`).
    pub device_version: Option<String>,
    pub driver_version: Option<String>,
    pub compute_units: Option<u32>,
    /// clinfo `Max clock frequency` (`2100MHz`).
    #[serde(default)]
    pub max_clock_mhz: Option<u32>,
    /// clinfo `Sub-group sizes (Intel)`; empty when not given.
    pub sub_group_sizes: Vec<u32>,
}

impl IntelGpu {
    /// A GPU known by its name only (the architecture read from it), on `backend`; each probe
    /// fills in what its tool says besides.
    fn named(name: &str, backend: &str) -> IntelGpu {
        IntelGpu {
            name: name.to_owned(),
            architecture: architecture_from_name(name),
            backend: backend.to_owned(),
            index: None,
            platform: None,
            device_version: None,
            driver_version: None,
            compute_units: None,
            max_clock_mhz: None,
            sub_group_sizes: Vec::new(),
        }
    }
}

/// Marketing-name fragments → architecture. Sources: Intel ARK product pages (Arc A-series
/// "Alchemist", Arc B-series "Battlemage", Data Center GPU Max "Ponte Vecchio", Flex "Arctic
/// Sound-M", a DG2 part) and Intel's oneAPI DPC++ AOT target list (intel/llvm
/// `sycl/doc/UsersManual.md`, `-fsycl-targets`). Checked in order.
#[rustfmt::skip]
const ARCH_BY_NAME: &[(&str, IntelArch)] = &[
    ("Data Center GPU Max", IntelArch::Pvc),
    ("Data Center GPU Flex", IntelArch::Dg2),
    ("Arc(TM) Pro A", IntelArch::Dg2),
    ("Arc(TM) Pro B", IntelArch::Bmg),
    ("Arc(TM) A", IntelArch::Dg2),
    ("Arc(TM) B", IntelArch::Bmg),
    ("Arc(TM) 140V", IntelArch::Lnl),
    ("Arc(TM) 130V", IntelArch::Lnl),
    ("Arc(TM) 140T", IntelArch::Arl),
    ("Arc(TM) 130T", IntelArch::Arl),
    ("Iris(R) Xe Graphics", IntelArch::Tgllp),
];

/// PCI device-id ranges (inclusive) → architecture, for names like `Intel(R) Graphics [0x56c1]`.
/// Source: Linux kernel `include/drm/intel/pciids.h` (INTEL_DG2_IDS, INTEL_ATS_M_IDS,
/// INTEL_BMG_IDS, INTEL_PVC_IDS, INTEL_MTL_IDS, INTEL_LNL_IDS, INTEL_ARL_IDS, INTEL_TGL_IDS).
#[rustfmt::skip]
const ARCH_BY_PCI_ID: &[(u32, u32, IntelArch)] = &[
    (0x5690, 0x56bf, IntelArch::Dg2),   // DG2 G10/G11/G12 (Arc A-series)
    (0x56c0, 0x56c2, IntelArch::Dg2),   // ATS-M (Flex 170/140), a DG2 part
    (0xe202, 0xe21f, IntelArch::Bmg),   // BMG G21 (Arc B580 0xe20b, B570 0xe20c)
    (0x0bd0, 0x0bdb, IntelArch::Pvc),   // PVC (Max 1550 0x0bd5, Max 1100 0x0bda)
    (0x7d40, 0x7d40, IntelArch::Mtl),   // MTL-U
    (0x7d45, 0x7d45, IntelArch::Mtl),
    (0x7d55, 0x7d55, IntelArch::Mtl),   // MTL-H "Arc Graphics"
    (0x7dd5, 0x7dd5, IntelArch::Mtl),
    (0x7d41, 0x7d41, IntelArch::Arl),   // ARL-U
    (0x7d51, 0x7d51, IntelArch::Arl),   // ARL-H
    (0x7d67, 0x7d67, IntelArch::Arl),   // ARL-S
    (0x7dd1, 0x7dd1, IntelArch::Arl),
    (0x6420, 0x6420, IntelArch::Lnl),
    (0x64a0, 0x64b0, IntelArch::Lnl),
    (0x9a40, 0x9a7f, IntelArch::Tgllp), // TGL GT1/GT2
];

/// The architecture of an Intel GPU from its device name (marketing name or `[0xNNNN]` id).
pub fn architecture_from_name(name: &str) -> IntelArch {
    if let Some((_, arch)) = ARCH_BY_NAME
        .iter()
        .find(|(fragment, _)| name.contains(fragment))
    {
        return arch.clone();
    }
    let pci_id = name
        .rsplit_once("[0x")
        .and_then(|(_, rest)| rest.split(']').next())
        .and_then(|hex| u32::from_str_radix(hex, 16).ok());
    pci_id
        .and_then(|id| {
            ARCH_BY_PCI_ID
                .iter()
                .find(|(lo, hi, _)| (*lo..=*hi).contains(&id))
        })
        .map(|(_, _, arch)| arch.clone())
        .unwrap_or(IntelArch::Unknown)
}

/// Parses `sycl-ls`. GPUs from Level Zero are listed when there are any, otherwise those from
/// OpenCL (the same board appears once per backend). Absent when no GPU line is found.
pub fn parse_sycl_ls(text: &str) -> Probe<Vec<IntelGpu>> {
    let entries: Vec<IntelGpu> = text.lines().filter_map(sycl_ls_line).collect();
    let level_zero: Vec<IntelGpu> = entries
        .iter()
        .filter(|gpu| gpu.backend == "level_zero")
        .cloned()
        .collect();
    let chosen = if level_zero.is_empty() {
        entries
    } else {
        level_zero
    };
    if chosen.is_empty() {
        let first = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        Probe::absent(if first.is_empty() {
            "sycl-ls printed nothing".to_owned()
        } else {
            format!("sycl-ls lists no GPU: {first}")
        })
    } else {
        Probe::Found(chosen)
    }
}

fn sycl_ls_line(line: &str) -> Option<IntelGpu> {
    let line = line.trim();
    let rest = line.strip_prefix('[')?;
    let (selector, mut rest) = rest.split_once(']')?;
    // The current form repeats a `[backend:index]` group.
    if rest.starts_with('[') {
        let (_, after) = rest[1..].split_once(']')?;
        rest = after;
    }
    let parts: Vec<&str> = selector.split(':').collect();
    let (backend, kind) = (*parts.first()?, *parts.get(1)?);
    if kind != "gpu" {
        return None;
    }
    let backend = backend.strip_prefix("ext_oneapi_").unwrap_or(backend);
    let index = parts.get(2).and_then(|i| i.parse().ok()).or_else(|| {
        let group = line.split("][").nth(1)?.split(']').next()?;
        group.split(':').nth(1)?.parse().ok()
    });
    let (platform, device) = rest.trim().split_once(", ")?;
    let (described, driver) = match device.rsplit_once(" [") {
        Some((described, driver)) => (described.trim(), Some(driver.trim_end_matches(']'))),
        None => (device.trim(), None),
    };
    let (name, version) = match described.find(" OpenCL ") {
        Some(at) => (&described[..at], Some(described[at + 1..].trim())),
        None => match described.rsplit_once(' ') {
            Some((name, version)) if version.starts_with(|c: char| c.is_ascii_digit()) => {
                (name, Some(version))
            }
            _ => (described, None),
        },
    };
    Some(IntelGpu {
        index,
        platform: Some(platform.trim().to_owned()),
        device_version: version.map(str::to_owned),
        driver_version: driver.map(str::to_owned),
        ..IntelGpu::named(name.trim(), backend)
    })
}

/// Parses `xpu-smi discovery` (its table: one block per device, `| 0 | Device Name: …`) for
/// the devices' names, indices and PCI addresses. Absent when the table names no device.
pub fn parse_xpu_smi_discovery(text: &str) -> Probe<Vec<IntelGpu>> {
    let mut gpus: Vec<IntelGpu> = Vec::new();
    let mut index: Option<u32> = None;
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, id, info, ..] = cells.as_slice() else {
            continue;
        };
        if let Ok(n) = id.parse::<u32>() {
            index = Some(n);
        }
        if let Some(name) = info.strip_prefix("Device Name:") {
            let name = name.trim();
            gpus.push(IntelGpu {
                index,
                ..IntelGpu::named(name, "level_zero")
            });
        }
    }
    if gpus.is_empty() {
        Probe::absent("xpu-smi discovery lists no device")
    } else {
        Probe::Found(gpus)
    }
}

/// Parses `clinfo` (full or `-d P:D` form, or `clinfo -l`) for Intel GPU devices.
pub fn parse_clinfo(text: &str) -> Probe<Vec<IntelGpu>> {
    let mut devices: Vec<(IntelGpu, Option<String>, Option<String>)> = Vec::new();
    let mut platform: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some((_, name)) = trimmed.split_once("-- Device #") {
            let name = name.split_once(": ").map(|(_, n)| n).unwrap_or(name).trim();
            devices.push((clinfo_device(name, platform.clone()), None, None));
            continue;
        }
        if let Some(name) = trimmed
            .strip_prefix("Platform #")
            .and_then(|p| p.split_once(": "))
        {
            platform = Some(name.1.trim().to_owned());
            continue;
        }
        let Some((key, value)) = trimmed.split_once("  ") else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "Platform Name" => platform = Some(value.to_owned()),
            "Device Name" => devices.push((clinfo_device(value, platform.clone()), None, None)),
            _ => {
                let Some((gpu, vendor, kind)) = devices.last_mut() else {
                    continue;
                };
                match key {
                    "Device Vendor" => *vendor = Some(value.to_owned()),
                    "Device Type" => *kind = Some(value.to_owned()),
                    "Driver Version" => gpu.driver_version = Some(value.to_owned()),
                    "Device Version" => gpu.device_version = Some(value.to_owned()),
                    "Max compute units" => gpu.compute_units = value.parse().ok(),
                    "Max clock frequency" => {
                        gpu.max_clock_mhz = value.trim_end_matches("MHz").trim().parse().ok()
                    }
                    "Sub-group sizes (Intel)" => {
                        gpu.sub_group_sizes = value
                            .split(',')
                            .filter_map(|size| size.trim().parse().ok())
                            .collect()
                    }
                    _ => {}
                }
            }
        }
    }
    let gpus: Vec<IntelGpu> = devices
        .into_iter()
        .filter(|(gpu, vendor, kind)| {
            let intel = vendor
                .as_deref()
                .map_or(gpu.name.contains("Intel"), |v| v.contains("Intel"));
            intel && kind.as_deref().is_none_or(|k| k.contains("GPU"))
        })
        .map(|(gpu, _, _)| gpu)
        .collect();
    if gpus.is_empty() {
        Probe::absent("clinfo lists no Intel GPU device")
    } else {
        Probe::Found(gpus)
    }
}

fn clinfo_device(name: &str, platform: Option<String>) -> IntelGpu {
    IntelGpu {
        platform,
        ..IntelGpu::named(name, "opencl")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(probe: Probe<Vec<IntelGpu>>) -> Vec<IntelGpu> {
        match probe {
            Probe::Found(gpus) => gpus,
            Probe::Absent { reason } => panic!("absent: {reason}"),
        }
    }

    #[test]
    fn xpu_smi_discovery_names_max_1550s_and_an_arc_a770() {
        let Probe::Found(max) = parse_xpu_smi_discovery(include_str!(
            "../../../fixtures/probes/intel-max1550-aurora-alcf/xpu-smi-discovery.txt"
        )) else {
            panic!("no device")
        };
        assert_eq!(max.len(), 6);
        assert!(max
            .iter()
            .all(|g| g.architecture == IntelArch::Pvc
                && g.name == "Intel(R) Data Center GPU Max 1550"));
        assert_eq!(
            max.iter().map(|g| g.index.unwrap()).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4, 5]
        );
        let Probe::Found(arc) = parse_xpu_smi_discovery(include_str!(
            "../../../fixtures/probes/intel-arc-a770-chsasank-blog/xpu-smi-discovery.txt"
        )) else {
            panic!("no device")
        };
        assert_eq!(arc.len(), 1);
        assert_eq!(arc[0].architecture, IntelArch::Dg2);
        assert!(matches!(
            parse_xpu_smi_discovery("No device discovered\n"),
            Probe::Absent { .. }
        ));
    }

    #[test]
    fn sycl_ls_arc_a770_level_zero_form() {
        let gpus = found(parse_sycl_ls(include_str!(
            "../../../fixtures/probes/intel-arc-a770-llamacpp-doc/sycl-ls.txt"
        )));
        assert_eq!(gpus.len(), 2, "level_zero GPUs only: A770 and UHD 730");
        let arc = &gpus[0];
        assert_eq!(arc.name, "Intel(R) Arc(TM) A770 Graphics");
        assert_eq!(arc.architecture, IntelArch::Dg2);
        assert_eq!(arc.backend, "level_zero");
        assert_eq!(arc.index, Some(0));
        assert_eq!(
            arc.platform.as_deref(),
            Some("Intel(R) oneAPI Unified Runtime over Level-Zero")
        );
        assert_eq!(arc.device_version.as_deref(), Some("12.55.8"));
        assert_eq!(arc.driver_version.as_deref(), Some("1.3.29735+27"));
        assert_eq!(gpus[1].name, "Intel(R) UHD Graphics 730");
        assert_eq!(gpus[1].architecture, IntelArch::Unknown);
        assert_eq!(gpus[1].index, Some(1));
    }

    #[test]
    fn sycl_ls_older_ext_oneapi_form() {
        let gpus = found(parse_sycl_ls(include_str!(
            "../../../fixtures/probes/intel-irisxe-llamacpp-doc-windows/sycl-ls.txt"
        )));
        assert_eq!(gpus.len(), 1);
        let gpu = &gpus[0];
        assert_eq!(gpu.name, "Intel(R) Iris(R) Xe Graphics");
        assert_eq!(gpu.architecture, IntelArch::Tgllp);
        assert_eq!(gpu.backend, "level_zero");
        assert_eq!(gpu.index, Some(0));
        assert_eq!(gpu.device_version.as_deref(), Some("1.3"));
        assert_eq!(gpu.driver_version.as_deref(), Some("1.3.28044"));
    }

    #[test]
    fn clinfo_arc_a770_top_section() {
        let gpus = found(parse_clinfo(include_str!(
            "../../../fixtures/probes/intel-arc-a770-cjmills/clinfo.txt"
        )));
        assert_eq!(gpus.len(), 1);
        let gpu = &gpus[0];
        assert_eq!(gpu.name, "Intel(R) Arc(TM) A770 Graphics");
        assert_eq!(gpu.architecture, IntelArch::Dg2);
        assert_eq!(gpu.platform.as_deref(), Some("Intel(R) OpenCL HD Graphics"));
        assert_eq!(gpu.driver_version.as_deref(), Some("23.05.25593.18"));
        assert_eq!(
            gpu.sub_group_sizes,
            Vec::<u32>::new(),
            "cut before that line"
        );
    }

    #[test]
    fn clinfo_flex_140_by_pci_id_with_sub_group_sizes() {
        let gpus = found(parse_clinfo(include_str!(
            "../../../fixtures/probes/intel-flex140-dg2-ocp/clinfo.txt"
        )));
        assert_eq!(gpus.len(), 1);
        let gpu = &gpus[0];
        assert_eq!(gpu.name, "Intel(R) Graphics [0x56c1]");
        assert_eq!(gpu.architecture, IntelArch::Dg2);
        assert_eq!(gpu.driver_version.as_deref(), Some("22.23.23405"));
        assert_eq!(gpu.compute_units, Some(128));
        assert_eq!(gpu.max_clock_mhz, Some(2100));
        assert_eq!(gpu.sub_group_sizes, vec![8, 16, 32]);
    }

    #[test]
    fn names_map_to_architectures() {
        assert_eq!(
            architecture_from_name("Intel(R) Arc(TM) B580 Graphics"),
            IntelArch::Bmg
        );
        assert_eq!(
            architecture_from_name("Intel(R) Data Center GPU Max 1550"),
            IntelArch::Pvc
        );
        assert_eq!(
            architecture_from_name("Intel(R) Graphics [0x7d55]"),
            IntelArch::Mtl
        );
        assert_eq!(
            architecture_from_name("Intel(R) Arc(TM) 140V GPU (16GB)"),
            IntelArch::Lnl
        );
    }

    #[test]
    fn empty_output_is_absent() {
        assert!(parse_sycl_ls("").is_absent());
        assert!(parse_clinfo("").is_absent());
    }

    #[test]
    fn sycl_ls_without_gpu_is_absent() {
        // The CPU and FPGA-emulation lines of the recorded output, without its GPU lines.
        let text: String =
            include_str!("../../../fixtures/probes/intel-irisxe-llamacpp-doc-windows/sycl-ls.txt")
                .lines()
                .filter(|line| !line.contains(":gpu"))
                .map(|line| format!("{line}\n"))
                .collect();
        assert!(parse_sycl_ls(&text)
            .absent_reason()
            .is_some_and(|r| r.starts_with("sycl-ls lists no GPU")));
    }
}
