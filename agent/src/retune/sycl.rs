//! The SYCL checks on this host: does the fork's `sycl_icpx_aot_targets` compile this Intel GPU
//! ahead of time, does the GPU support the sub-group sizes the kernels require, and — from the
//! Intel GPU binaries (zebins) the spec's build wrote for this device — what each kernel got:
//! GRF count, SIMD width against its `reqd_sub_group_size`, spills and scratch.
//!
//! No tool runs here: the zebins' `.ze_info` is read from the files themselves
//! (`core::retune::elf_sections`, `core::retune::ze_info`) and `ocloc`'s spill warnings from its
//! output beside each zebin. The device's identity comes from the Intel probe (`sycl-ls`,
//! `clinfo`, `xpu-smi`; `crate::probe::intel`), the lists from the spec;
//! `core::retune::sycl_targets` decides.
//!
//! Zebin layout the spec's build writes (docs/retuning.md "Intel"): one directory per `ocloc`
//! device, `-large-grf` appended for `-ze-opt-large-register-file`, one `<source>.zebin` per
//! fork source file and `ocloc`'s output beside it as `<source>.log`:
//! `build-sycl/acm-g10/float_vif_sycl.zebin`, `build-sycl/acm-g10-large-grf/…`.

use std::path::{Path, PathBuf};

use abfleet_core::finding::CheckResults;
use abfleet_core::retune::elf_sections;
use abfleet_core::retune::sycl_targets::{aot_coverage, resolve, subgroup_check};
use abfleet_core::retune::ze_info::{
    parse_ocloc_spills, parse_ze_info, zebin_kernel_findings, OclocSpill, OtherMode, ZeKernel,
    ZeKernelOnDevice,
};

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
    /// Built files and directories holding zebins (see the module's layout).
    pub artifacts: &'a [PathBuf],
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
    if let Some(arch) = input.device_arch.map(str::trim).filter(|a| !a.is_empty()) {
        results.extend(zebin_checks(input.artifacts, arch));
    } else if !input.artifacts.is_empty() {
        results.skip(BACKEND, "registers", "no Intel GPU on this host");
    }
    results
}

/// One zebin of the build: its file, the fork source it was compiled from, the `ocloc` device
/// it is for, its register-file mode.
#[derive(Debug, Clone)]
struct Zebin {
    path: PathBuf,
    source: String,
    device: String,
    large_grf: bool,
}

/// Every `*.zebin` in the artifacts (directories walked two levels deep).
fn find_zebins(artifacts: &[PathBuf]) -> Vec<Zebin> {
    fn walk(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            if path.is_dir() && depth > 0 {
                walk(&path, depth - 1, out);
            } else if path.extension().is_some_and(|e| e == "zebin") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for artifact in artifacts {
        if artifact.is_dir() {
            walk(artifact, 2, &mut files);
        } else if artifact.extension().is_some_and(|e| e == "zebin") {
            files.push(artifact.clone());
        }
    }
    files
        .into_iter()
        .filter_map(|path| {
            let dir = path.parent()?.file_name()?.to_string_lossy().into_owned();
            let (device, large_grf) = match dir.strip_suffix("-large-grf") {
                Some(device) => (device.to_string(), true),
                None => (dir, false),
            };
            let source = path.file_stem()?.to_string_lossy().into_owned();
            Some(Zebin {
                path,
                source,
                device,
                large_grf,
            })
        })
        .collect()
}

/// Whether code built for the `ocloc` device `built` runs on the generation's `arch` (an exact
/// device or IP version, or a family such as `dg2`).
fn built_for(built: &str, arch: &str) -> bool {
    let Some(target) = resolve(built) else {
        return false;
    };
    match resolve(arch) {
        Some(device) => device.device == target.device,
        None => target.families.contains(&arch),
    }
}

/// The `registers` and `sub_group_size` findings of every kernel in the zebins built for the
/// device, in both register-file modes when both were built.
fn zebin_checks(artifacts: &[PathBuf], arch: &str) -> CheckResults {
    let mut results = CheckResults::default();
    let zebins = find_zebins(artifacts);
    if zebins.is_empty() {
        if !artifacts.is_empty() {
            results.skip(
                BACKEND,
                "registers",
                "the artifacts hold no zebin (`<device>/<source>.zebin`): compile the fork's SYCL kernels ahead of time with ocloc in [backends.sycl] commands",
            );
        }
        return results;
    }
    let mine: Vec<&Zebin> = zebins
        .iter()
        .filter(|z| built_for(&z.device, arch))
        .collect();
    if mine.is_empty() {
        let mut built: Vec<&str> = zebins.iter().map(|z| z.device.as_str()).collect();
        built.sort_unstable();
        built.dedup();
        results.skip(
            BACKEND,
            "registers",
            format!(
                "checks not run here: no zebin for {arch} (built: {}); this host's ocloc cannot compile for it, or the spec's build does not ask",
                built.join(", ")
            ),
        );
        return results;
    }
    let read: Vec<(&Zebin, Result<ZebinReading, String>)> =
        mine.iter().map(|z| (*z, read_zebin(z))).collect();
    for (zebin, reading) in &read {
        let reading = match reading {
            Ok(found) => found,
            Err(reason) => {
                results.skip(BACKEND, "registers", reason.clone());
                continue;
            }
        };
        // The same source for the same device in the other register-file mode.
        let twin = read
            .iter()
            .find(|(other, _)| {
                other.device == zebin.device
                    && other.large_grf != zebin.large_grf
                    && other.source == zebin.source
            })
            .and_then(|(_, r)| r.as_ref().ok());
        let command = format!(
            "ze_info of {} (ocloc -device {}{}); ocloc output {}",
            zebin.path.display(),
            zebin.device,
            if zebin.large_grf {
                " -options -ze-opt-large-register-file"
            } else {
                ""
            },
            zebin.path.with_extension("log").display()
        );
        let mut subjects: Vec<String> = Vec::new();
        for kernel in &reading.kernels {
            let other_mode = twin.and_then(|twin| {
                Some(OtherMode {
                    spill: twin.spilled(&kernel.name),
                    scratch_bytes: twin.kernel(&kernel.name)?.scratch_bytes,
                })
            });
            let on = ZeKernelOnDevice {
                kernel,
                source: &zebin.source,
                device: &zebin.device,
                large_grf: zebin.large_grf,
                spill: reading.spills.iter().find(|s| s.kernel == kernel.name),
                other_mode,
            };
            // Two lambdas of one launcher read alike: the second is `#2`, so each finding
            // keeps its identity across runs.
            let subject = on.subject();
            let repeat = subjects.iter().filter(|s| **s == subject).count();
            subjects.push(subject);
            for mut finding in zebin_kernel_findings(&on, &command) {
                if repeat > 0 {
                    finding.subject.push_str(&format!(" #{}", repeat + 1));
                }
                results.findings.push(finding);
            }
        }
    }
    results
}

/// A zebin's kernels and `ocloc`'s spill warnings for them.
struct ZebinReading {
    kernels: Vec<ZeKernel>,
    spills: Vec<OclocSpill>,
}

impl ZebinReading {
    fn kernel(&self, name: &str) -> Option<&ZeKernel> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// `ocloc`'s spill estimate for the kernel, when it printed one.
    fn spilled(&self, name: &str) -> Option<u32> {
        self.spills
            .iter()
            .find(|s| s.kernel == name)
            .map(|s| s.spilled)
    }
}

/// A zebin's kernels from its `.ze_info` and `ocloc`'s spill warnings from the log beside it.
fn read_zebin(zebin: &Zebin) -> Result<ZebinReading, String> {
    let shown = zebin.path.display();
    let bytes =
        std::fs::read(&zebin.path).map_err(|err| format!("cannot read `{shown}`: {err}"))?;
    let info = elf_sections::section(&bytes, ".ze_info")
        .map_err(|err| {
            format!("`{shown}` is not a zebin ({err}): check the ocloc step of [backends.sycl] commands")
        })?
        .ok_or_else(|| {
            format!(
                "`{shown}` has no .ze_info section: compile it with `ocloc compile … -internal_options -cl-intel-allow-zebin` (an older ocloc writes the legacy format without it)"
            )
        })?;
    let kernels = parse_ze_info(&String::from_utf8_lossy(info));
    if kernels.is_empty() {
        return Err(format!(
            "`{shown}`'s .ze_info names no kernel: was its SPIR-V empty? check the source's sycl-spirv step in the build log"
        ));
    }
    let log = std::fs::read_to_string(zebin.path.with_extension("log")).unwrap_or_default();
    Ok(ZebinReading {
        kernels,
        spills: parse_ocloc_spills(&log),
    })
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
            artifacts: &[],
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
            artifacts: &[],
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
            artifacts: &[],
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
            artifacts: &[],
        });
        assert!(results.skipped.is_empty());
        let severities: Vec<Severity> = results.findings.iter().map(|f| f.severity).collect();
        assert_eq!(severities, [Severity::Ok, Severity::Ok]);

        let results = run_sycl_checks(&SyclCheckInput {
            configured_aot: &strings(&["acm-g10"]),
            device_arch: Some(&arch),
            device_subgroups: &flex.sub_group_sizes,
            required_subgroups: &[64],
            artifacts: &[],
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
            artifacts: &[],
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

    #[test]
    fn zebins_of_the_device_give_kernel_findings_others_are_not_run_here() {
        let dir = tempfile::tempdir().unwrap();
        let aot = dir.path().join("aot");
        for sub in ["acm-g10", "acm-g10-large-grf"] {
            std::fs::create_dir_all(aot.join(sub)).unwrap();
            std::fs::copy(
                concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../fixtures/probes/toolchain-intel-sycl-2026.2-fork/integer_motion_sycl-acm-g10.zebin"
                ),
                aot.join(sub).join("integer_motion_sycl.zebin"),
            )
            .unwrap();
        }
        let artifacts = vec![aot.clone()];
        // The Arc A770's Level Zero IP version is acm_g10's.
        let arc = zebin_checks(&artifacts, "12.55.8");
        assert!(arc.skipped.is_empty(), "{:?}", arc.skipped);
        let subjects: Vec<(&str, &str)> = arc
            .findings
            .iter()
            .map(|f| (f.check.as_str(), f.subject.as_str()))
            .collect();
        assert_eq!(
            subjects,
            [
                (
                    "registers",
                    "integer_motion_sycl::launch_blur_sad_fused@acm-g10"
                ),
                (
                    "sub_group_size",
                    "integer_motion_sycl::launch_blur_sad_fused@acm-g10"
                ),
                (
                    "registers",
                    "integer_motion_sycl::launch_blur_sad_fused@acm-g10+large-grf"
                ),
                (
                    "sub_group_size",
                    "integer_motion_sycl::launch_blur_sad_fused@acm-g10+large-grf"
                ),
            ]
        );
        assert_eq!(arc.findings[0].evidence["grf_count"], 128);
        // The family key finds the same device; a PVC finds none of it.
        assert_eq!(zebin_checks(&artifacts, "dg2").findings.len(), 4);
        let max = zebin_checks(&artifacts, "12.60.7");
        assert!(max.findings.is_empty());
        assert!(
            max.skipped[0]
                .reason
                .starts_with("checks not run here: no zebin for 12.60.7 (built: acm-g10)"),
            "{}",
            max.skipped[0].reason
        );
    }
}
