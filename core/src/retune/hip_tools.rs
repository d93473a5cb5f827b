//! Reads what the HIP toolchain's inspectors print about a fat binary: the bundle entries of
//! `clang-offload-bundler --list`, the AMDGPU code-object metadata of `llvm-readelf --notes`,
//! and turns them, with the device's gfx target, into the `hip` `arch_coverage` finding.
//!
//! Target IDs keep their feature suffixes (`gfx90a:xnack-`): a code object built for
//! `gfx90a:xnack+` does not load on a device running with XNACK off, so coverage compares
//! processors *and* features. [`processor`] gives the bare processor (`gfx90a`).

use crate::finding::{Finding, Severity};
use crate::retune::KernelResources;

/// One entry of `clang-offload-bundler --list`: `hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleEntry {
    /// The whole entry id, as `--targets=` of `--unbundle` wants it back.
    pub entry: String,
    /// The offload kind: `hipv4`, `hip`, `openmp`.
    pub kind: String,
    /// The target ID after the triple: `gfx90a`, `gfx90a:xnack-`, `gfx942:sramecc+:xnack-`.
    pub target_id: String,
}

/// The AMDGPU device entries of `clang-offload-bundler --list` output, in order, without the
/// host entry (`host-x86_64-unknown-linux`) and without entries for other devices.
/// Handles both the current `--` separator (`hipv4-amdgcn-amd-amdhsa--gfx90a`, an empty
/// environment field) and the older single dash (`hip-amdgcn-amd-amdhsa-gfx906`).
pub fn parse_bundler_entries(text: &str) -> Vec<BundleEntry> {
    const TRIPLE: &str = "-amdgcn-amd-amdhsa-";
    text.lines()
        .map(str::trim)
        .filter_map(|line| {
            let at = line.find(TRIPLE)?;
            let kind = &line[..at];
            let target_id = line[at + TRIPLE.len()..].trim_start_matches('-');
            if kind == "host" || !target_id.starts_with("gfx") {
                return None;
            }
            Some(BundleEntry {
                entry: line.to_string(),
                kind: kind.to_string(),
                target_id: target_id.to_string(),
            })
        })
        .collect()
}

/// The gfx target IDs in `clang-offload-bundler --list` output, in order and deduplicated,
/// *with* their feature suffixes (`gfx90a`, `gfx90a:xnack-`); see [`processor`] to strip them.
pub fn parse_bundler_list(text: &str) -> Vec<String> {
    let mut targets: Vec<String> = Vec::new();
    for entry in parse_bundler_entries(text) {
        if !targets.contains(&entry.target_id) {
            targets.push(entry.target_id);
        }
    }
    targets
}

/// The processor of a target ID: `gfx942:sramecc+:xnack-` → `gfx942`.
pub fn processor(target_id: &str) -> &str {
    target_id.split(':').next().unwrap_or(target_id).trim()
}

/// Whether a code object built for `built` loads on a device whose target ID is `device`:
/// the same processor, and no feature that both state with opposite settings (a feature the
/// build leaves unstated, `gfx90a` alone, is "any").
pub fn target_id_loads_on(built: &str, device: &str) -> bool {
    if processor(built) != processor(device) {
        return false;
    }
    let features = |id: &str| -> Vec<(String, char)> {
        id.split(':')
            .skip(1)
            .filter_map(|f| {
                let f = f.trim();
                let sign = f.chars().last().filter(|c| *c == '+' || *c == '-')?;
                Some((f[..f.len() - 1].to_string(), sign))
            })
            .collect()
    };
    let device_features = features(device);
    features(built).iter().all(|(name, sign)| {
        device_features
            .iter()
            .all(|(dev_name, dev_sign)| dev_name != name || dev_sign == sign)
    })
}

/// Every field of one kernel's entry in the AMDGPU metadata (`amdhsa.kernels`) that the checks
/// read. Counts are as LLVM writes them (AMDGPUUsage, "Code Object V3+ Metadata").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmdKernelMetadata {
    pub name: String,
    /// The processor of `amdhsa.target` (`gfx90a`), features stripped.
    pub gfx: String,
    /// `amdhsa.target` after the triple, with features (`gfx90a:xnack-`), when stated.
    pub target_id: String,
    /// `.vgpr_count`. On gfx90a/gfx94x LLVM writes the *unified* count here: the architectural
    /// VGPRs rounded up to 4 plus the AGPRs (the capture's `agpr_user` kernel: 2 VGPRs + 32
    /// AGPRs → `.vgpr_count: 36`); on gfx908 the larger of the two separate files.
    pub vgpr_count: u32,
    /// `.agpr_count` (gfx908/gfx90a/gfx94x only; 0 when absent).
    pub agpr_count: u32,
    pub sgpr_count: u32,
    pub vgpr_spill_count: u32,
    pub sgpr_spill_count: u32,
    /// `.group_segment_fixed_size`: static LDS bytes per workgroup.
    pub group_segment_fixed_size: u32,
    /// `.private_segment_fixed_size`: scratch bytes per work-item.
    pub private_segment_fixed_size: u32,
    pub wavefront_size: Option<u32>,
    pub max_flat_workgroup_size: Option<u32>,
}

impl AmdKernelMetadata {
    /// The registers that count against the VGPR file: `.vgpr_count`, which already holds the
    /// AGPRs on gfx90a/gfx94x (see the field); `max` guards code objects that state only
    /// `.agpr_count` large.
    pub fn total_vgprs(&self) -> u32 {
        self.vgpr_count.max(self.agpr_count)
    }

    pub fn to_resources(&self) -> KernelResources {
        KernelResources {
            name: self.name.clone(),
            arch: self.gfx.clone(),
            registers: self.total_vgprs(),
            sgprs: self.sgpr_count,
            stack_bytes: self.private_segment_fixed_size,
            spill_bytes: self.vgpr_spill_count.saturating_mul(4),
            shared_bytes: self.group_segment_fixed_size,
            max_block_threads: self.max_flat_workgroup_size,
            wavefront_size: self.wavefront_size,
        }
    }
}

/// Parses the `AMDGPU Metadata` YAML that `llvm-readelf --notes` prints for a code object.
/// Text holding several code objects' notes (one YAML document each, `---` … `...`) gives the
/// kernels of all of them, each tagged with its own document's `amdhsa.target`.
pub fn parse_code_object_metadata(text: &str) -> Vec<AmdKernelMetadata> {
    let mut all = Vec::new();
    let mut document: Vec<AmdKernelMetadata> = Vec::new();
    let mut in_kernels = false;
    let mut item_indent: Option<usize> = None;
    let finish = |document: &mut Vec<AmdKernelMetadata>, all: &mut Vec<AmdKernelMetadata>| {
        all.append(document);
    };
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed == "..." || trimmed == "---" {
            in_kernels = false;
            item_indent = None;
            finish(&mut document, &mut all);
            continue;
        }
        if let Some(target) = trimmed.strip_prefix("amdhsa.target:") {
            in_kernels = false;
            let target = target.trim().trim_matches(|c| c == '\'' || c == '"');
            let target_id = target
                .split_once("amdhsa-")
                .map(|(_, id)| id.trim_start_matches('-'))
                .unwrap_or(target);
            for kernel in document.iter_mut() {
                kernel.gfx = processor(target_id).to_string();
                kernel.target_id = target_id.to_string();
            }
            continue;
        }
        if trimmed.starts_with("amdhsa.kernels:") {
            in_kernels = true;
            item_indent = None;
            continue;
        }
        if !in_kernels {
            continue;
        }
        if !trimmed.starts_with('-') && !trimmed.starts_with('.') && indent == 0 {
            // Another top-level key (`amdhsa.version:`).
            in_kernels = false;
            continue;
        }
        // A kernel item starts with `- ` at the shallowest list indent; its first field
        // follows the dash on the same line.
        let (field_line, field_indent) = match trimmed.strip_prefix("- ") {
            Some(rest) if item_indent.is_none_or(|i| i == indent) => {
                item_indent = Some(indent);
                document.push(empty_kernel());
                (rest, indent + 2)
            }
            _ => (trimmed, indent),
        };
        let Some(item) = item_indent else { continue };
        if field_indent != item + 2 {
            continue; // inside `.args` and other nested lists
        }
        let Some((key, value)) = field_line.split_once(':') else {
            continue;
        };
        let Some(kernel) = document.last_mut() else {
            continue;
        };
        let value = value.trim().trim_matches(|c| c == '\'' || c == '"');
        let number = || value.parse::<u32>().ok();
        match key.trim() {
            ".name" => kernel.name = value.to_string(),
            ".vgpr_count" => kernel.vgpr_count = number().unwrap_or(0),
            ".agpr_count" => kernel.agpr_count = number().unwrap_or(0),
            ".sgpr_count" => kernel.sgpr_count = number().unwrap_or(0),
            ".vgpr_spill_count" => kernel.vgpr_spill_count = number().unwrap_or(0),
            ".sgpr_spill_count" => kernel.sgpr_spill_count = number().unwrap_or(0),
            ".group_segment_fixed_size" => kernel.group_segment_fixed_size = number().unwrap_or(0),
            ".private_segment_fixed_size" => {
                kernel.private_segment_fixed_size = number().unwrap_or(0)
            }
            ".wavefront_size" => kernel.wavefront_size = number(),
            ".max_flat_workgroup_size" => kernel.max_flat_workgroup_size = number(),
            _ => {}
        }
    }
    finish(&mut document, &mut all);
    all.retain(|kernel| !kernel.name.is_empty());
    all
}

fn empty_kernel() -> AmdKernelMetadata {
    AmdKernelMetadata {
        name: String::new(),
        gfx: String::new(),
        target_id: String::new(),
        vgpr_count: 0,
        agpr_count: 0,
        sgpr_count: 0,
        vgpr_spill_count: 0,
        sgpr_spill_count: 0,
        group_segment_fixed_size: 0,
        private_segment_fixed_size: 0,
        wavefront_size: None,
        max_flat_workgroup_size: None,
    }
}

/// The kernels of `llvm-readelf --notes` output as [`KernelResources`]: `registers` is the
/// unified VGPR count (AGPRs included on gfx90a/gfx94x, see [`AmdKernelMetadata::vgpr_count`]),
/// `spill_bytes` is `.vgpr_spill_count` × 4, `stack_bytes` `.private_segment_fixed_size`.
pub fn parse_code_object_notes(text: &str) -> Vec<KernelResources> {
    parse_code_object_metadata(text)
        .iter()
        .map(AmdKernelMetadata::to_resources)
        .collect()
}

/// The `hip` `arch_coverage` finding for one fat binary. `built`: the target IDs it holds
/// ([`parse_bundler_list`]); `device_gfx`: the device's target (`gfx942` or rocminfo's full
/// `gfx942:sramecc+:xnack-`); `configured`: the fork's `hip_gfx_targets` as the spec states it
/// (`Some(&[])`: autodetect; `None`: the spec does not say).
///
/// Fail when no built code object loads on the device; otherwise warn when a non-empty
/// `configured` list names other processors than were built; otherwise ok.
pub fn offload_coverage(
    built: &[String],
    device_gfx: &str,
    configured: Option<&[String]>,
    command: &str,
) -> Vec<Finding> {
    let device = device_gfx.trim();
    let device_processor = processor(device);
    let loads = built.iter().any(|t| target_id_loads_on(t, device));
    let built_list = built.join(", ");
    let mut built_processors: Vec<&str> = built.iter().map(|t| processor(t)).collect();
    built_processors.sort_unstable();
    built_processors.dedup();
    let configured_mismatch = configured.filter(|c| !c.is_empty()).and_then(|c| {
        let mut wanted: Vec<&str> = c.iter().map(|t| processor(t)).collect();
        wanted.sort_unstable();
        wanted.dedup();
        (wanted != built_processors).then(|| c.join(", "))
    });

    let (severity, verdict) = if !loads {
        let same_processor: Vec<&String> = built
            .iter()
            .filter(|t| processor(t) == device_processor)
            .collect();
        if same_processor.is_empty() {
            (
                Severity::Fail,
                format!(
                    "no code object for {device_processor}: the kernels cannot load; add it to hip_gfx_targets"
                ),
            )
        } else {
            let ids: Vec<&str> = same_processor.iter().map(|s| s.as_str()).collect();
            (
                Severity::Fail,
                format!(
                    "the code object for {} does not load on {device}: its features differ; build {device_processor} without a feature suffix or with the device's",
                    ids.join(", ")
                ),
            )
        }
    } else if let Some(wanted) = configured_mismatch {
        (
            Severity::Warn,
            format!(
                "the fat binary holds {built_list} but hip_gfx_targets lists {wanted}: the option did not reach the build; check that it is passed to hipcc as --offload-arch"
            ),
        )
    } else if configured.is_some_and(|c| c.is_empty()) {
        (
            Severity::Ok,
            format!(
                "{device_processor} is in the fat binary ({built_list}), chosen by autodetection (hip_gfx_targets is empty)"
            ),
        )
    } else {
        (
            Severity::Ok,
            format!("{device_processor} is in the fat binary ({built_list})"),
        )
    };
    let configured_value = match configured {
        Some(list) => serde_json::Value::from(list.to_vec()),
        None => serde_json::Value::Null,
    };
    vec![Finding::new(
        "hip",
        "arch_coverage",
        device_processor,
        severity,
        verdict,
        command,
    )
    .with("targets", built.to_vec())
    .with("device", device)
    .with("configured", configured_value)]
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHARED_LIST: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-hip-5.2-debian/clang-offload-bundler-list.txt"
    ));
    const SHARED_NOTES_GFX90A: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-hip-5.2-debian/llvm-readelf-notes-gfx90a.txt"
    ));
    const SHARED_NOTES_GFX1030: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-hip-5.2-debian/llvm-readelf-notes-gfx1030.txt"
    ));
    const MANY_LIST: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-hip-5.2-many-kernels/clang-offload-bundler-list.txt"
    ));
    const MANY_NOTES_GFX90A: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-hip-5.2-many-kernels/llvm-readelf-notes-gfx90a.txt"
    ));
    const MANY_NOTES_GFX1030: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-hip-5.2-many-kernels/llvm-readelf-notes-gfx1030.txt"
    ));

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn bundler_list_gives_device_targets_without_host() {
        assert_eq!(
            parse_bundler_list(SHARED_LIST),
            ["gfx90a", "gfx908", "gfx1030"]
        );
        assert_eq!(parse_bundler_list(MANY_LIST), ["gfx90a", "gfx1030"]);
        let entries = parse_bundler_entries(MANY_LIST);
        assert_eq!(entries[0].entry, "hipv4-amdgcn-amd-amdhsa--gfx90a");
        assert_eq!(entries[0].kind, "hipv4");
    }

    #[test]
    fn bundler_list_keeps_feature_suffixes_and_old_single_dash_form() {
        let text = "host-x86_64-unknown-linux\nhipv4-amdgcn-amd-amdhsa--gfx90a:xnack-\n\
                    hip-amdgcn-amd-amdhsa-gfx906\nhipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-\n";
        assert_eq!(
            parse_bundler_list(text),
            ["gfx90a:xnack-", "gfx906", "gfx942:sramecc+:xnack-"]
        );
        assert_eq!(processor("gfx942:sramecc+:xnack-"), "gfx942");
        assert!(parse_bundler_list("host-x86_64-unknown-linux\n").is_empty());
        assert!(parse_bundler_list("").is_empty());
    }

    #[test]
    fn feature_settings_decide_whether_a_code_object_loads() {
        assert!(target_id_loads_on("gfx942", "gfx942:sramecc+:xnack-"));
        assert!(target_id_loads_on(
            "gfx942:xnack-",
            "gfx942:sramecc+:xnack-"
        ));
        assert!(!target_id_loads_on(
            "gfx942:xnack+",
            "gfx942:sramecc+:xnack-"
        ));
        assert!(target_id_loads_on("gfx90a:xnack+", "gfx90a"));
        assert!(!target_id_loads_on("gfx90a", "gfx942"));
    }

    #[test]
    fn shared_notes_one_kernel_per_arch() {
        let gfx90a = parse_code_object_notes(SHARED_NOTES_GFX90A);
        assert_eq!(
            gfx90a,
            vec![KernelResources {
                name: "_Z9blur_rowsPKfPfii".into(),
                arch: "gfx90a".into(),
                registers: 14,
                sgprs: 14,
                stack_bytes: 0,
                spill_bytes: 0,
                shared_bytes: 1664,
                max_block_threads: Some(1024),
                wavefront_size: Some(64),
            }]
        );
        let gfx1030 = parse_code_object_notes(SHARED_NOTES_GFX1030);
        assert_eq!(gfx1030.len(), 1);
        assert_eq!(gfx1030[0].arch, "gfx1030");
        assert_eq!(gfx1030[0].registers, 12);
        assert_eq!(gfx1030[0].sgprs, 10);
        assert_eq!(gfx1030[0].wavefront_size, Some(32));
    }

    #[test]
    fn many_kernels_gfx90a_metadata_with_spills_scratch_lds_and_agprs() {
        let kernels = parse_code_object_metadata(MANY_NOTES_GFX90A);
        let names: Vec<&str> = kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "_Z10scale_copyPKfPffi",
                "_Z13lds_tile_blurPKfPfii",
                "_Z17many_accumulatorsPKdS0_Pdi",
                "_Z19private_array_spillPKiPfi",
                "_Z9agpr_userPf"
            ]
        );
        assert!(kernels
            .iter()
            .all(|k| k.gfx == "gfx90a" && k.wavefront_size == Some(64)));
        let vgprs: Vec<u32> = kernels.iter().map(|k| k.vgpr_count).collect();
        assert_eq!(vgprs, [4, 17, 128, 99, 36]);
        let lds = &kernels[1];
        assert_eq!(lds.group_segment_fixed_size, 20736);
        assert_eq!(lds.max_flat_workgroup_size, Some(256));
        let spilling = &kernels[2];
        assert_eq!(
            (
                spilling.vgpr_spill_count,
                spilling.private_segment_fixed_size
            ),
            (15, 40)
        );
        assert_eq!(spilling.to_resources().spill_bytes, 60);
        assert_eq!(kernels[3].private_segment_fixed_size, 400);
        // hipcc's own remark for this kernel: "VGPRs: 2", "AGPRs: 32"; the metadata's
        // .vgpr_count is the unified total align4(2) + 32.
        let agpr = &kernels[4];
        assert_eq!((agpr.agpr_count, agpr.vgpr_count), (32, 36));
        assert_eq!(agpr.to_resources().registers, 36);
    }

    #[test]
    fn many_kernels_gfx1030_metadata_is_wave32_without_agprs() {
        let kernels = parse_code_object_metadata(MANY_NOTES_GFX1030);
        assert_eq!(kernels.len(), 5);
        assert!(kernels
            .iter()
            .all(|k| k.gfx == "gfx1030" && k.wavefront_size == Some(32) && k.agpr_count == 0));
        let vgprs: Vec<u32> = kernels.iter().map(|k| k.vgpr_count).collect();
        assert_eq!(vgprs, [4, 16, 128, 116, 2]);
        assert_eq!(kernels[2].vgpr_spill_count, 18);
        assert_eq!(kernels[1].sgpr_count, 12);
    }

    #[test]
    fn concatenated_notes_keep_each_documents_target() {
        let both = format!("{MANY_NOTES_GFX90A}{MANY_NOTES_GFX1030}");
        let kernels = parse_code_object_notes(&both);
        assert_eq!(kernels.len(), 10);
        assert_eq!(kernels[0].arch, "gfx90a");
        assert_eq!(kernels[9].arch, "gfx1030");
        assert!(parse_code_object_notes("Displaying notes found in: .note\n").is_empty());
    }

    #[test]
    fn coverage_ok_when_the_device_is_built() {
        let built = parse_bundler_list(SHARED_LIST);
        let findings = offload_coverage(&built, "gfx90a", None, "clang-offload-bundler-15 --list");
        assert_eq!(findings.len(), 1);
        let f = &findings[0];
        assert_eq!(f.identity(), ("hip", "arch_coverage", "gfx90a"));
        assert_eq!(f.severity, Severity::Ok);
        assert_eq!(
            f.evidence["targets"],
            serde_json::json!(["gfx90a", "gfx908", "gfx1030"])
        );
        assert_eq!(f.evidence["configured"], serde_json::Value::Null);
    }

    #[test]
    fn coverage_fails_for_a_device_the_build_left_out() {
        let built = parse_bundler_list(SHARED_LIST);
        let findings = offload_coverage(&built, "gfx942:sramecc+:xnack-", Some(&[]), "cmd");
        let f = &findings[0];
        assert_eq!(f.severity, Severity::Fail);
        assert_eq!(f.subject, "gfx942");
        assert_eq!(
            f.verdict,
            "no code object for gfx942: the kernels cannot load; add it to hip_gfx_targets"
        );
        assert_eq!(f.evidence["device"], "gfx942:sramecc+:xnack-");
        assert_eq!(f.evidence["configured"], serde_json::json!([]));
    }

    #[test]
    fn coverage_fails_when_only_an_incompatible_feature_variant_is_built() {
        let built = strings(&["gfx942:xnack+"]);
        let f = &offload_coverage(&built, "gfx942:sramecc+:xnack-", None, "cmd")[0];
        assert_eq!(f.severity, Severity::Fail);
        assert!(f.verdict.contains("features differ"), "{}", f.verdict);
    }

    #[test]
    fn coverage_warns_when_the_configured_targets_were_not_built() {
        let built = parse_bundler_list(MANY_LIST);
        let configured = strings(&["gfx90a", "gfx942"]);
        let f = &offload_coverage(&built, "gfx90a", Some(&configured), "cmd")[0];
        assert_eq!(f.severity, Severity::Warn);
        assert!(
            f.verdict.starts_with(
                "the fat binary holds gfx90a, gfx1030 but hip_gfx_targets lists gfx90a, gfx942"
            ),
            "{}",
            f.verdict
        );
        assert_eq!(
            f.evidence["configured"],
            serde_json::json!(["gfx90a", "gfx942"])
        );
        // The same list in another order, or with feature suffixes, is no mismatch.
        let same = strings(&["gfx1030", "gfx90a:xnack-"]);
        let f = &offload_coverage(&built, "gfx90a", Some(&same), "cmd")[0];
        assert_eq!(f.severity, Severity::Ok);
        let auto = &offload_coverage(&built, "gfx1030", Some(&[]), "cmd")[0];
        assert_eq!(auto.severity, Severity::Ok);
        assert!(auto.verdict.contains("autodetection"));
    }
}
