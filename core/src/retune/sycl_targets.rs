//! Intel GPU ahead-of-time targets for SYCL: one table naming each device in every spelling
//! the tools use, and the `sycl` `aot_targets` and `sub_group_size` findings.
//!
//! Spellings resolved to one device: the oneAPI DPC++ `-fsycl-targets=intel_gpu_<name>` names
//! and their `intel_gpu_<ip version>` forms, the `ocloc` / `-Xsycl-target-backend "-device X"`
//! device names (`acm_g10`, written `acm-g10` too), the older `dg2_g10` aliases, and the GPU IP
//! version that `sycl-ls` prints after a Level Zero device's name (`12.55.8`). Source: the
//! intel/llvm DPC++ driver, `clang/lib/Driver/ToolChains/SYCL.cpp` `resolveGenDevice` (the
//! `-fsycl-targets` list of the Users Manual, `sycl/doc/UsersManual.md`, and Intel's oneAPI
//! DPC++/C++ Compiler Developer Guide "fsycl-targets" page describe the same names).
//! Families (`dg2`, `bmg`, `mtl`, …) are the architecture names of the agent's Intel probe; a
//! family in the configured list is taken to cover every device of the family.

use crate::finding::{Finding, Severity};

/// One AOT device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntelGpuTarget {
    /// The `ocloc -device` name, canonical here: `acm_g10`.
    pub device: &'static str,
    /// Other `intel_gpu_*` names for the same device (without the prefix): `dg2_g10`.
    pub aliases: &'static [&'static str],
    /// The GPU IP version (`sycl-ls` Level Zero device version; `intel_gpu_12_55_8`).
    pub ip_version: Option<&'static str>,
    /// The families this device belongs to, as the agent's probe names architectures.
    pub families: &'static [&'static str],
    /// For people.
    pub description: &'static str,
}

#[rustfmt::skip]
const TARGETS: &[IntelGpuTarget] = &[
    IntelGpuTarget { device: "tgllp", aliases: &["tgl"], ip_version: Some("12.0.0"), families: &["tgllp"], description: "Xe-LP, Tiger Lake iGPU" },
    IntelGpuTarget { device: "rkl", aliases: &[], ip_version: Some("12.1.0"), families: &["rkl"], description: "Xe-LP, Rocket Lake iGPU" },
    IntelGpuTarget { device: "adl_s", aliases: &["rpl_s"], ip_version: Some("12.2.0"), families: &["adl"], description: "Xe-LP, Alder/Raptor Lake-S iGPU" },
    IntelGpuTarget { device: "adl_p", aliases: &[], ip_version: Some("12.3.0"), families: &["adl"], description: "Xe-LP, Alder Lake-P iGPU" },
    IntelGpuTarget { device: "adl_n", aliases: &[], ip_version: Some("12.4.0"), families: &["adl"], description: "Xe-LP, Alder Lake-N iGPU" },
    IntelGpuTarget { device: "dg1", aliases: &[], ip_version: Some("12.10.0"), families: &["dg1"], description: "Xe-LP, Iris Xe MAX" },
    IntelGpuTarget { device: "acm_g10", aliases: &["dg2_g10"], ip_version: Some("12.55.8"), families: &["dg2"], description: "Xe-HPG Alchemist G10 (Arc A770/A750, Flex 170)" },
    IntelGpuTarget { device: "acm_g11", aliases: &["dg2_g11"], ip_version: Some("12.56.5"), families: &["dg2"], description: "Xe-HPG Alchemist G11 (Arc A380, Flex 140)" },
    IntelGpuTarget { device: "acm_g12", aliases: &["dg2_g12"], ip_version: Some("12.57.0"), families: &["dg2"], description: "Xe-HPG Alchemist G12" },
    IntelGpuTarget { device: "pvc", aliases: &[], ip_version: Some("12.60.7"), families: &["pvc"], description: "Xe-HPC Ponte Vecchio (Data Center GPU Max)" },
    IntelGpuTarget { device: "pvc_vg", aliases: &[], ip_version: Some("12.61.7"), families: &["pvc"], description: "Xe-HPC Ponte Vecchio VG" },
    IntelGpuTarget { device: "mtl_u", aliases: &["mtl_s", "arl_u", "arl_s"], ip_version: Some("12.70.4"), families: &["mtl", "arl"], description: "Xe-LPG, Meteor Lake-U/S and Arrow Lake-U/S iGPU" },
    IntelGpuTarget { device: "mtl_h", aliases: &[], ip_version: Some("12.71.4"), families: &["mtl"], description: "Xe-LPG, Meteor Lake-H iGPU" },
    IntelGpuTarget { device: "arl_h", aliases: &[], ip_version: Some("12.74.4"), families: &["arl"], description: "Xe-LPG+, Arrow Lake-H iGPU" },
    IntelGpuTarget { device: "bmg_g21", aliases: &[], ip_version: Some("20.1.4"), families: &["bmg"], description: "Xe2-HPG Battlemage G21 (Arc B580/B570)" },
    IntelGpuTarget { device: "bmg_g31", aliases: &[], ip_version: Some("20.2.0"), families: &["bmg"], description: "Xe2-HPG Battlemage G31" },
    IntelGpuTarget { device: "lnl_m", aliases: &[], ip_version: Some("20.4.4"), families: &["lnl"], description: "Xe2-LPG, Lunar Lake iGPU" },
    IntelGpuTarget { device: "ptl_h", aliases: &[], ip_version: Some("30.0.4"), families: &["ptl"], description: "Xe3-LPG, Panther Lake-H iGPU" },
    IntelGpuTarget { device: "ptl_u", aliases: &[], ip_version: Some("30.1.1"), families: &["ptl"], description: "Xe3-LPG, Panther Lake-U iGPU" },
];

/// The whole table.
pub fn targets() -> &'static [IntelGpuTarget] {
    TARGETS
}

fn normalize(name: &str) -> String {
    let lower = name.trim().trim_matches('"').to_ascii_lowercase();
    let bare = lower.strip_prefix("intel_gpu_").unwrap_or(&lower);
    bare.replace(['-', '.'], "_")
}

/// The device a name means, in any of the spellings of the module doc.
pub fn resolve(name: &str) -> Option<&'static IntelGpuTarget> {
    let wanted = normalize(name);
    if wanted.is_empty() {
        return None;
    }
    TARGETS.iter().find(|t| {
        t.device == wanted
            || t.aliases.contains(&wanted.as_str())
            || t.ip_version.is_some_and(|v| v.replace('.', "_") == wanted)
    })
}

/// The devices of a family (`dg2` → `acm_g10`, `acm_g11`, `acm_g12`); empty for a name that is
/// not a family.
pub fn family_targets(family: &str) -> Vec<&'static IntelGpuTarget> {
    let wanted = normalize(family);
    TARGETS
        .iter()
        .filter(|t| t.families.contains(&wanted.as_str()))
        .collect()
}

/// Entries that ask for SPIR-V (JIT), not a device: `spir64`, `spir64_gen` without a device.
fn is_spirv_entry(entry: &str) -> bool {
    let e = entry.trim().to_ascii_lowercase();
    e.starts_with("spir64")
}

/// The `sycl` `aot_targets` finding: does the fork's `sycl_icpx_aot_targets` (`configured`,
/// entries in any spelling, comma-separated lists allowed) compile the device ahead of time?
/// `device_arch` is what the probe knows: the Level Zero IP version (`12.55.8`), a device name,
/// or only a family (`dg2`). Ok when covered; warn when not (the device JITs the SPIR-V at
/// first launch), when the list is empty (JIT only), or when the probe's family-only answer
/// cannot say which variant the list must hold.
pub fn aot_coverage(configured: &[String], device_arch: &str, command: &str) -> Vec<Finding> {
    let entries: Vec<String> = configured
        .iter()
        .flat_map(|e| e.split(','))
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect();
    let mut covered: Vec<&'static str> = Vec::new();
    let mut unrecognized: Vec<String> = Vec::new();
    for entry in entries.iter().filter(|e| !is_spirv_entry(e)) {
        let devices = match resolve(entry) {
            Some(t) => vec![t],
            None => family_targets(entry),
        };
        if devices.is_empty() {
            unrecognized.push(entry.clone());
        }
        for t in devices {
            if !covered.contains(&t.device) {
                covered.push(t.device);
            }
        }
    }
    let prefixed = entries.is_empty() || entries.iter().any(|e| e.starts_with("intel_gpu_"));
    let spelled = |device: &str| {
        if prefixed {
            format!("intel_gpu_{device}")
        } else {
            device.to_string()
        }
    };

    let exact = resolve(device_arch);
    let family = if exact.is_none() {
        family_targets(device_arch)
    } else {
        Vec::new()
    };
    let subject = exact
        .map(|t| t.device.to_string())
        .unwrap_or_else(|| normalize(device_arch));
    let listed = if entries.is_empty() {
        "none".to_string()
    } else {
        entries.join(", ")
    };

    let (severity, verdict) = match (exact, family.is_empty()) {
        (Some(t), _) if covered.contains(&t.device) => (
            Severity::Ok,
            format!(
                "{} ({}) is compiled ahead of time (sycl_icpx_aot_targets: {listed})",
                t.device, t.description
            ),
        ),
        (Some(t), _) if covered.is_empty() => (
            Severity::Warn,
            format!(
                "no AOT target for {}: every kernel is JIT-compiled from SPIR-V at first launch; add {} to sycl_icpx_aot_targets",
                t.device,
                spelled(t.device)
            ),
        ),
        (Some(t), _) => (
            Severity::Warn,
            format!(
                "{} is not among the AOT targets ({listed}): it falls back to SPIR-V JIT at first launch (and cannot run if the build embeds no SPIR-V); add {} to sycl_icpx_aot_targets",
                t.device,
                spelled(t.device)
            ),
        ),
        (None, false) => family_coverage(&family, &covered, &subject),
        (None, true) => (
            Severity::Warn,
            format!(
                "cannot tell whether {} is compiled ahead of time: it is not in the Intel AOT target table; name its ocloc device in the probe or extend the table",
                device_arch.trim()
            ),
        ),
    };
    vec![
        Finding::new("sycl", "aot_targets", &subject, severity, verdict, command)
            .with("configured", entries.clone())
            .with("device", device_arch.trim())
            .with(
                "device_target",
                exact.map_or(serde_json::Value::Null, |t| t.device.into()),
            )
            .with(
                "covered",
                covered.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
            )
            .with("unrecognized", unrecognized),
    ]
}

/// A device the probe knows only by its family: covered when every variant of the family
/// is, not when none is, and unsure when some are.
fn family_coverage(
    family: &[&'static IntelGpuTarget],
    covered: &[&'static str],
    subject: &str,
) -> (Severity, String) {
    let devices: Vec<&str> = family.iter().map(|t| t.device).collect();
    let have: Vec<&str> = devices
        .iter()
        .copied()
        .filter(|d| covered.contains(d))
        .collect();
    if have.len() == devices.len() {
        (
            Severity::Ok,
            format!(
                "every {subject} device ({}) is compiled ahead of time",
                devices.join(", ")
            ),
        )
    } else if have.is_empty() {
        (
            Severity::Warn,
            format!(
                "no AOT target for the {subject} family ({}): it falls back to SPIR-V JIT at first launch; add the device's variant to sycl_icpx_aot_targets",
                devices.join(", ")
            ),
        )
    } else {
        (
            Severity::Warn,
            format!(
                "the probe names only the {subject} family and sycl_icpx_aot_targets covers {} of {}: another variant JITs at first launch; probe with sycl-ls (Level Zero IP version) to tell",
                have.join(", "),
                devices.join(", ")
            ),
        )
    }
}

/// The `sycl` `sub_group_size` finding: every size the kernels require
/// (`reqd_sub_group_size`) must be one the device supports (clinfo `Sub-group sizes (Intel)`).
/// No finding when nothing is required; warn when the device's sizes are unknown.
pub fn subgroup_check(required: &[u32], supported: &[u32], command: &str) -> Vec<Finding> {
    if required.is_empty() {
        return Vec::new();
    }
    let join = |sizes: &[u32]| {
        sizes
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let unsupported: Vec<u32> = required
        .iter()
        .copied()
        .filter(|size| !supported.contains(size))
        .collect();
    let (severity, verdict) = if supported.is_empty() {
        (
            Severity::Warn,
            format!(
                "the device's sub-group sizes are unknown, so required sizes {} are unchecked; record clinfo's `Sub-group sizes (Intel)`",
                join(required)
            ),
        )
    } else if unsupported.is_empty() {
        (
            Severity::Ok,
            format!(
                "required sub-group sizes {} are supported (device: {})",
                join(required),
                join(supported)
            ),
        )
    } else {
        (
            Severity::Fail,
            format!(
                "sub-group size {} is not supported by the device ({}): kernels requiring it cannot run there; use one of {}",
                join(&unsupported),
                join(supported),
                join(supported)
            ),
        )
    };
    vec![Finding::new(
        "sycl",
        "sub_group_size",
        "reqd_sub_group_size",
        severity,
        verdict,
        command,
    )
    .with("required", required.to_vec())
    .with("supported", supported.to_vec())
    .with("unsupported", unsupported)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_spelling_resolves_to_one_device() {
        for spelling in [
            "acm_g10",
            "acm-g10",
            "ACM-G10",
            "intel_gpu_acm_g10",
            "intel_gpu_dg2_g10",
            "dg2-g10",
            "intel_gpu_12_55_8",
            "12.55.8",
        ] {
            assert_eq!(
                resolve(spelling).map(|t| t.device),
                Some("acm_g10"),
                "{spelling}"
            );
        }
        assert_eq!(resolve("intel_gpu_pvc").unwrap().device, "pvc");
        assert_eq!(resolve("bmg-g21").unwrap().ip_version, Some("20.1.4"));
        assert_eq!(resolve("intel_gpu_arl_s").unwrap().device, "mtl_u");
        assert_eq!(resolve("lnl_m").unwrap().families, ["lnl"]);
        assert!(resolve("dg2").is_none(), "a family, not a device");
        assert!(resolve("").is_none() && resolve("sm_90").is_none());
    }

    #[test]
    fn families_group_devices() {
        let dg2: Vec<&str> = family_targets("dg2").iter().map(|t| t.device).collect();
        assert_eq!(dg2, ["acm_g10", "acm_g11", "acm_g12"]);
        let arl: Vec<&str> = family_targets("arl").iter().map(|t| t.device).collect();
        assert_eq!(arl, ["mtl_u", "arl_h"]);
        assert!(family_targets("acm_g10").is_empty());
    }

    #[test]
    fn a_covered_device_is_ok() {
        // The Arc A770 of fixtures/probes/intel-arc-a770-llamacpp-doc/sycl-ls.txt reports
        // Level Zero device version 12.55.8.
        let configured = strings(&["intel_gpu_pvc", "intel_gpu_acm_g10"]);
        let f = &aot_coverage(&configured, "12.55.8", "sycl-ls")[0];
        assert_eq!(f.identity(), ("sycl", "aot_targets", "acm_g10"));
        assert_eq!(f.severity, Severity::Ok);
        assert_eq!(f.evidence["covered"], serde_json::json!(["pvc", "acm_g10"]));
        assert_eq!(f.evidence["device_target"], "acm_g10");
        assert_eq!(f.evidence["device"], "12.55.8");
    }

    #[test]
    fn an_uncovered_device_falls_back_to_jit() {
        let configured = strings(&["intel_gpu_pvc,spir64"]);
        let f = &aot_coverage(&configured, "12.55.8", "sycl-ls")[0];
        assert_eq!(f.severity, Severity::Warn);
        assert_eq!(
            f.verdict,
            "acm_g10 is not among the AOT targets (intel_gpu_pvc, spir64): it falls back to SPIR-V JIT at first launch (and cannot run if the build embeds no SPIR-V); add intel_gpu_acm_g10 to sycl_icpx_aot_targets"
        );
        // ocloc-style lists get an ocloc-style suggestion.
        let f = &aot_coverage(&strings(&["pvc"]), "bmg_g21", "cmd")[0];
        assert!(
            f.verdict.ends_with("add bmg_g21 to sycl_icpx_aot_targets"),
            "{}",
            f.verdict
        );
    }

    #[test]
    fn an_empty_list_is_jit_only() {
        let f = &aot_coverage(&[], "12.55.8", "cmd")[0];
        assert_eq!(f.severity, Severity::Warn);
        assert!(f
            .verdict
            .starts_with("no AOT target for acm_g10: every kernel is JIT-compiled"));
        assert_eq!(f.evidence["configured"], serde_json::json!([]));
        let spirv_only = &aot_coverage(&strings(&["spir64"]), "acm_g10", "cmd")[0];
        assert!(
            spirv_only.verdict.starts_with("no AOT target"),
            "{}",
            spirv_only.verdict
        );
    }

    #[test]
    fn a_family_only_device_needs_every_variant() {
        let all = &aot_coverage(&strings(&["dg2"]), "dg2", "clinfo")[0];
        assert_eq!(all.severity, Severity::Ok);
        assert_eq!(all.subject, "dg2");
        let some = &aot_coverage(&strings(&["acm-g10"]), "dg2", "clinfo")[0];
        assert_eq!(some.severity, Severity::Warn);
        assert!(
            some.verdict
                .contains("covers acm_g10 of acm_g10, acm_g11, acm_g12"),
            "{}",
            some.verdict
        );
        let none = &aot_coverage(&strings(&["pvc"]), "dg2", "clinfo")[0];
        assert_eq!(none.severity, Severity::Warn);
        assert!(none.verdict.starts_with("no AOT target for the dg2 family"));
    }

    #[test]
    fn unknown_devices_and_entries_are_said() {
        let f = &aot_coverage(&strings(&["acm_g10", "gen13"]), "unknown", "cmd")[0];
        assert_eq!(f.severity, Severity::Warn);
        assert!(f.verdict.starts_with("cannot tell whether unknown"));
        assert_eq!(f.evidence["unrecognized"], serde_json::json!(["gen13"]));
    }

    #[test]
    fn sub_group_sizes_the_device_lacks_fail() {
        // Flex 140 (DG2) of fixtures/probes/intel-flex140-dg2-ocp/clinfo.txt: 8, 16, 32.
        let supported = [8, 16, 32];
        let ok = &subgroup_check(&[16], &supported, "clinfo")[0];
        assert_eq!(
            ok.identity(),
            ("sycl", "sub_group_size", "reqd_sub_group_size")
        );
        assert_eq!(ok.severity, Severity::Ok);
        let fail = &subgroup_check(&[16, 64], &supported, "clinfo")[0];
        assert_eq!(fail.severity, Severity::Fail);
        assert_eq!(
            fail.verdict,
            "sub-group size 64 is not supported by the device (8, 16, 32): kernels requiring it cannot run there; use one of 8, 16, 32"
        );
        assert_eq!(fail.evidence["unsupported"], serde_json::json!([64]));
        assert_eq!(fail.evidence["required"], serde_json::json!([16, 64]));
        assert_eq!(
            subgroup_check(&[32], &[], "cmd")[0].severity,
            Severity::Warn
        );
        assert!(subgroup_check(&[], &supported, "cmd").is_empty());
    }
}
