//! The SYCL checks on this host: does the fork's `sycl_icpx_aot_targets` compile this Intel GPU
//! ahead of time, and does the GPU support the sub-group sizes the kernels require.
//!
//! No tool runs here: `icpx`/`ocloc` cannot be installed on the development machines, and the
//! checks need none. The device's identity comes from the Intel probe (`sycl-ls`, `clinfo`;
//! `crate::probe::intel`), the lists from the spec; `core::retune::sycl_targets` decides.

use abfleet_core::finding::CheckResults;
use abfleet_core::retune::sycl_targets::{aot_coverage, resolve, subgroup_check};

use crate::probe::intel::{IntelArch, IntelGpu};

/// What the SYCL checks look at.
#[derive(Debug, Clone, Copy)]
pub struct SyclCheckInput<'a> {
    /// The fork's `sycl_icpx_aot_targets` (empty: SPIR-V JIT only).
    pub configured_aot: &'a [String],
    /// The device's architecture as [`device_arch_of`] gives it; `None` without an Intel GPU.
    pub device_arch: Option<&'a str>,
    /// clinfo's `Sub-group sizes (Intel)`; empty when the probe did not list them.
    pub device_subgroups: &'a [u32],
    /// The sizes the kernels require (`reqd_sub_group_size`), from the spec.
    pub required_subgroups: &'a [u32],
}

const BACKEND: &str = "sycl";

/// Runs both SYCL checks; a check without its inputs is skipped, never an error.
pub fn run_sycl_checks(input: &SyclCheckInput) -> CheckResults {
    let mut results = CheckResults::default();
    match input.device_arch.map(str::trim).filter(|a| !a.is_empty()) {
        None => results.skip(
            BACKEND,
            "aot_targets",
            "no Intel GPU of a known architecture on this host (sycl-ls and clinfo name none)",
        ),
        Some(arch) => results.findings.extend(aot_coverage(
            input.configured_aot,
            arch,
            "sycl-ls / clinfo device; spec [backends.sycl] aot_targets",
        )),
    }
    if input.required_subgroups.is_empty() {
        results.skip(
            BACKEND,
            "sub_group_size",
            "the spec names no required sub-group sizes ([backends.sycl] subgroup_sizes)",
        );
    } else if input.device_arch.is_none() {
        results.skip(BACKEND, "sub_group_size", "no Intel GPU on this host");
    } else if input.device_subgroups.is_empty() {
        results.skip(
            BACKEND,
            "sub_group_size",
            "the device's sub-group sizes are unknown: sycl-ls does not print them; record `clinfo` on this host",
        );
    } else {
        results.findings.extend(subgroup_check(
            input.required_subgroups,
            input.device_subgroups,
            "clinfo: Sub-group sizes (Intel)",
        ));
    }
    results
}

/// The most precise architecture the probe gives for one GPU: the Level Zero GPU IP version
/// `sycl-ls` prints after the name (`12.55.8`, one exact AOT device) when it names a known
/// device, else the family from the name (`dg2`); `None` for an unrecognised GPU.
pub fn device_arch_of(gpu: &IntelGpu) -> Option<String> {
    let ip_version = gpu
        .device_version
        .as_deref()
        .filter(|_| gpu.backend == "level_zero")
        .filter(|v| resolve(v).is_some());
    if let Some(version) = ip_version {
        return Some(version.to_string());
    }
    (gpu.architecture != IntelArch::Unknown).then(|| gpu.architecture.name().to_string())
}

#[cfg(test)]
mod tests {
    use abfleet_core::finding::Severity;

    use super::*;
    use crate::probe::intel::{parse_clinfo, parse_sycl_ls};
    use crate::probe::outcome::Probe;

    fn gpus(probe: Probe<Vec<IntelGpu>>) -> Vec<IntelGpu> {
        match probe {
            Probe::Found(gpus) => gpus,
            Probe::Absent { reason } => panic!("absent: {reason}"),
        }
    }

    fn arc_a770_sycl_ls() -> IntelGpu {
        gpus(parse_sycl_ls(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/probes/intel-arc-a770-llamacpp-doc/sycl-ls.txt"
        ))))
        .remove(0)
    }

    fn flex140_clinfo() -> IntelGpu {
        gpus(parse_clinfo(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/probes/intel-flex140-dg2-ocp/clinfo.txt"
        ))))
        .remove(0)
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arc_a770_from_sycl_ls_is_acm_g10() {
        let arc = arc_a770_sycl_ls();
        let arch = device_arch_of(&arc).unwrap();
        assert_eq!(arch, "12.55.8");

        let covered = strings(&["intel_gpu_acm_g10", "intel_gpu_pvc"]);
        let results = run_sycl_checks(&SyclCheckInput {
            configured_aot: &covered,
            device_arch: Some(&arch),
            device_subgroups: &arc.sub_group_sizes,
            required_subgroups: &[16],
        });
        assert_eq!(results.findings.len(), 1);
        let f = &results.findings[0];
        assert_eq!(f.identity(), ("sycl", "aot_targets", "acm_g10"));
        assert_eq!(f.severity, Severity::Ok);
        // sycl-ls lists no sub-group sizes: that check is skipped, not guessed.
        assert_eq!(results.skipped.len(), 1);
        assert_eq!(results.skipped[0].check, "sub_group_size");

        let pvc_only = strings(&["intel_gpu_pvc"]);
        let results = run_sycl_checks(&SyclCheckInput {
            configured_aot: &pvc_only,
            device_arch: Some(&arch),
            device_subgroups: &[],
            required_subgroups: &[],
        });
        let f = &results.findings[0];
        assert_eq!(f.severity, Severity::Warn);
        assert!(
            f.verdict
                .contains("falls back to SPIR-V JIT at first launch"),
            "{}",
            f.verdict
        );
        assert!(f
            .verdict
            .ends_with("add intel_gpu_acm_g10 to sycl_icpx_aot_targets"));

        let jit_only = run_sycl_checks(&SyclCheckInput {
            configured_aot: &[],
            device_arch: Some(&arch),
            device_subgroups: &[],
            required_subgroups: &[],
        });
        assert_eq!(jit_only.findings[0].severity, Severity::Warn);
        assert!(jit_only.findings[0]
            .verdict
            .contains("JIT-compiled from SPIR-V"));
    }

    #[test]
    fn flex140_from_clinfo_is_dg2_with_sub_group_sizes() {
        let flex = flex140_clinfo();
        let arch = device_arch_of(&flex).unwrap();
        assert_eq!(arch, "dg2", "clinfo gives no IP version");
        assert_eq!(flex.sub_group_sizes, [8, 16, 32]);

        let results = run_sycl_checks(&SyclCheckInput {
            configured_aot: &strings(&["acm-g10", "acm-g11", "acm-g12"]),
            device_arch: Some(&arch),
            device_subgroups: &flex.sub_group_sizes,
            required_subgroups: &[16, 32],
        });
        assert!(results.skipped.is_empty());
        let severities: Vec<Severity> = results.findings.iter().map(|f| f.severity).collect();
        assert_eq!(severities, [Severity::Ok, Severity::Ok]);

        let results = run_sycl_checks(&SyclCheckInput {
            configured_aot: &strings(&["acm-g10"]),
            device_arch: Some(&arch),
            device_subgroups: &flex.sub_group_sizes,
            required_subgroups: &[64],
        });
        assert_eq!(
            results.findings[0].severity,
            Severity::Warn,
            "one DG2 variant of three"
        );
        let subgroups = &results.findings[1];
        assert_eq!(
            subgroups.identity(),
            ("sycl", "sub_group_size", "reqd_sub_group_size")
        );
        assert_eq!(subgroups.severity, Severity::Fail);
        assert_eq!(subgroups.evidence["unsupported"], serde_json::json!([64]));
    }

    #[test]
    fn no_intel_gpu_skips_both_checks() {
        let results = run_sycl_checks(&SyclCheckInput {
            configured_aot: &strings(&["intel_gpu_acm_g10"]),
            device_arch: None,
            device_subgroups: &[],
            required_subgroups: &[16],
        });
        assert!(results.findings.is_empty());
        let checks: Vec<&str> = results.skipped.iter().map(|s| s.check.as_str()).collect();
        assert_eq!(checks, ["aot_targets", "sub_group_size"]);
        // The UHD 730 of the same sycl-ls capture has a name the probe cannot place, but its
        // Level Zero IP version 12.2.0 is the Raptor Lake-S iGPU (AOT device adl_s).
        let mut uhd = gpus(parse_sycl_ls(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/probes/intel-arc-a770-llamacpp-doc/sycl-ls.txt"
        ))))
        .remove(1);
        assert_eq!(uhd.architecture, IntelArch::Unknown);
        assert_eq!(device_arch_of(&uhd).as_deref(), Some("12.2.0"));
        assert_eq!(resolve("12.2.0").unwrap().device, "adl_s");
        // Without the version nothing is known.
        uhd.device_version = None;
        assert_eq!(device_arch_of(&uhd), None);
    }
}
