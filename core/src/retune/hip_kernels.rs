//! The `hip` `registers` and `occupancy` findings of one kernel of one code object, from its
//! full AMDGPU metadata (VGPRs, AGPRs, SGPRs, VGPR and SGPR spills, LDS, scratch, wavefront
//! size) and, where the spec states it, the fork's own launch of that kernel: occupancy is
//! judged at the workgroup size the fork launches with, not the compiler's bound.

use crate::finding::{Finding, Severity};
use crate::retune::amd_occupancy::{kernel_findings, vgpr_budget, AmdLimits};
use crate::retune::cuda_tools::kernel_matches;
use crate::retune::hip_tools::AmdKernelMetadata;
use crate::spec::KernelLaunch;

/// The launch of `symbol` among `launches` (by symbol or plain name).
pub fn launch_of<'l>(symbol: &str, launches: &'l [KernelLaunch]) -> Option<&'l KernelLaunch> {
    launches.iter().find(|l| kernel_matches(symbol, &l.kernel))
}

/// What the spec says of how the fork runs its HIP kernels.
#[derive(Debug, Clone, Copy, Default)]
pub struct ForkLaunches<'s> {
    /// `[backends.hip] launch`.
    pub launches: &'s [KernelLaunch],
    /// `[backends.hip] wave_size`: the wavefront size the kernels' reductions are written for.
    pub wave_size: Option<u32>,
}

/// `registers` and `occupancy` for one kernel, and `wave_size` when the spec states the size
/// the kernels are written for. `registers` warns on any VGPR or SGPR spill; its evidence
/// holds every figure the code object states, so the report's diff against the previous run
/// (a compiler bump) names each that moved.
pub fn code_object_findings(
    m: &AmdKernelMetadata,
    limits: &AmdLimits,
    fork: ForkLaunches,
    command: &str,
) -> Vec<Finding> {
    let launches = fork.launches;
    let mut resources = m.to_resources();
    let launch = launch_of(&m.name, launches);
    if let Some(launch) = launch {
        resources.max_block_threads = Some(launch.block_threads);
    }
    let mut findings = kernel_findings(&resources, limits, command);
    for finding in &mut findings {
        match finding.check.as_str() {
            "registers" => {
                amend_registers(finding, m);
                if let Some(launch) = launch {
                    advise_launch_bounds(finding, m, limits, launch.block_threads);
                }
            }
            "occupancy" => {
                let source = match (launch, m.max_flat_workgroup_size) {
                    (Some(_), _) => "the fork's launch (spec [backends.hip] launch)",
                    (None, Some(_)) => "the code object's .max_flat_workgroup_size",
                    (None, None) => "HIP's default bound (1024)",
                };
                finding
                    .evidence
                    .insert("workgroup_from".into(), source.into());
                if let Some(launch) = launch {
                    finding
                        .evidence
                        .insert("grid_blocks".into(), launch.grid_blocks.into());
                }
            }
            _ => {}
        }
    }
    if let Some(expected) = fork.wave_size {
        findings.push(wave_size_finding(m, limits, expected, command));
    }
    findings
}

/// Whether the code object runs the wavefront size the kernels are written for.
fn wave_size_finding(
    m: &AmdKernelMetadata,
    l: &AmdLimits,
    expected: u32,
    command: &str,
) -> Finding {
    let subject = format!("{}@{}", m.name, m.gfx);
    let actual = m.wavefront_size.unwrap_or(l.wave_size);
    let finding = if actual == expected {
        Finding::new(
            "hip",
            "wave_size",
            &subject,
            Severity::Ok,
            format!("runs wave{actual}, the size its reductions are written for"),
            command,
        )
    } else {
        Finding::new(
            "hip",
            "wave_size",
            &subject,
            Severity::Fail,
            format!(
                "compiled for wave{actual} on {}, but its reductions are written for {expected} lanes: the results are wrong there; build {} with -mwavefrontsize{expected} or make the reductions use warpSize",
                m.gfx, m.gfx
            ),
            command,
        )
    };
    finding
        .with("wave_size", actual)
        .with("written_for", expected)
}

/// A spilling kernel compiled for workgroups larger than the fork launches: the compiler's
/// VGPR budget is the larger workgroup's. When the kernel sits at that budget, the verdict says
/// which `__launch_bounds__` would lift it.
fn advise_launch_bounds(
    finding: &mut Finding,
    m: &AmdKernelMetadata,
    l: &AmdLimits,
    launched: u32,
) {
    if m.vgpr_spill_count == 0 {
        return;
    }
    let bound = m.max_flat_workgroup_size.unwrap_or(1024);
    let wave = m.wavefront_size.unwrap_or(l.wave_size);
    let (Some(cap), Some(at_launch)) =
        (vgpr_budget(l, bound, wave), vgpr_budget(l, launched, wave))
    else {
        return;
    };
    if launched >= bound || at_launch <= cap || m.total_vgprs() < cap {
        return;
    }
    finding.verdict = format!(
        "{}; it is compiled for workgroups of up to {bound} threads, which caps it at {cap} VGPRs, but the fork launches {launched}: __launch_bounds__({launched}) lets it use up to {at_launch}",
        finding.verdict
    );
    finding.evidence.insert("vgpr_cap".into(), cap.into());
    finding
        .evidence
        .insert("vgpr_cap_at_launch".into(), at_launch.into());
}

fn amend_registers(finding: &mut Finding, m: &AmdKernelMetadata) {
    let figures: [(&str, serde_json::Value); 8] = [
        ("vgprs", m.total_vgprs().into()),
        ("agprs", m.agpr_count.into()),
        ("sgprs", m.sgpr_count.into()),
        ("vgpr_spills", m.vgpr_spill_count.into()),
        ("sgpr_spills", m.sgpr_spill_count.into()),
        ("lds_bytes", m.group_segment_fixed_size.into()),
        ("scratch_bytes", m.private_segment_fixed_size.into()),
        (
            "wave_size",
            m.wavefront_size
                .map_or(serde_json::Value::Null, |w| w.into()),
        ),
    ];
    for (name, value) in figures {
        finding.evidence.insert(name.to_string(), value);
    }
    if m.sgpr_spill_count > 0 && m.vgpr_spill_count == 0 {
        finding.severity = Severity::Warn;
        finding.verdict = format!(
            "spills {} SGPRs (to VGPR lanes or scratch) at {} SGPRs; cut uniform live values or split the kernel",
            m.sgpr_spill_count, m.sgpr_count
        );
    } else if m.vgpr_spill_count > 0 {
        finding.verdict = format!(
            "spills {} VGPRs ({} B per work-item) and {} SGPRs to scratch at {} VGPRs ({} AGPRs), {} B scratch in all; cap the registers it may use with __launch_bounds__ only if occupancy matters more, else cut live values or split the kernel",
            m.vgpr_spill_count,
            m.vgpr_spill_count.saturating_mul(4),
            m.sgpr_spill_count,
            m.total_vgprs(),
            m.agpr_count,
            m.private_segment_fixed_size
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retune::amd_occupancy::limits;
    use crate::retune::hip_tools::parse_code_object_metadata;

    const NOTES: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-hip-5.2-many-kernels/llvm-readelf-notes-gfx90a.txt"
    ));

    #[test]
    fn every_figure_of_the_code_object_is_evidence_and_the_launch_sets_the_workgroup() {
        let kernels = parse_code_object_metadata(NOTES);
        let spilling = kernels
            .iter()
            .find(|k| k.vgpr_spill_count > 0)
            .expect("the many-kernels capture has a spilling kernel");
        let l = limits("gfx90a").unwrap();
        let launch = KernelLaunch {
            kernel: spilling.name.clone(),
            grid_blocks: 8160,
            block_threads: 64,
        };
        let fork = ForkLaunches {
            launches: std::slice::from_ref(&launch),
            wave_size: Some(64),
        };
        let findings = code_object_findings(spilling, &l, fork, "readelf");
        let registers = &findings[0];
        assert_eq!(registers.check, "registers");
        assert_eq!(registers.severity, Severity::Warn);
        assert_eq!(registers.evidence["vgpr_spills"], spilling.vgpr_spill_count);
        assert_eq!(
            registers.evidence["scratch_bytes"],
            spilling.private_segment_fixed_size
        );
        assert!(
            registers.verdict.contains("spills"),
            "{}",
            registers.verdict
        );
        let occupancy = &findings[1];
        assert_eq!(occupancy.evidence["workgroup_size"], 64);
        assert_eq!(occupancy.evidence["grid_blocks"], 8160);
        assert_eq!(
            occupancy.evidence["workgroup_from"],
            "the fork's launch (spec [backends.hip] launch)"
        );

        let other = kernels.iter().find(|k| k.name != spilling.name).unwrap();
        let unlaunched = code_object_findings(other, &l, fork, "readelf");
        assert_ne!(
            unlaunched[1].evidence["workgroup_from"],
            "the fork's launch (spec [backends.hip] launch)"
        );
        // gfx90a runs wave64: as written.
        assert_eq!(findings[2].check, "wave_size");
        assert_eq!(findings[2].severity, Severity::Ok);
    }

    #[test]
    fn vgpr_budgets_match_llvm_for_flat_workgroup_sizes() {
        // 1024 threads: CDNA 16 waves on 4 SIMDs, RDNA wave32 32 waves on a WGP's 4 SIMDs.
        assert_eq!(vgpr_budget(&limits("gfx942").unwrap(), 1024, 64), Some(128));
        assert_eq!(vgpr_budget(&limits("gfx942").unwrap(), 64, 64), Some(512));
        assert_eq!(
            vgpr_budget(&limits("gfx1030").unwrap(), 1024, 32),
            Some(128)
        );
        assert_eq!(
            vgpr_budget(&limits("gfx1100").unwrap(), 1024, 32),
            Some(192)
        );
        assert_eq!(vgpr_budget(&limits("gfx1100").unwrap(), 64, 32), Some(256));
        assert_eq!(
            vgpr_budget(&limits("gfx942").unwrap(), 64, 32),
            None,
            "CDNA has no wave32"
        );
    }

    #[test]
    fn a_wave32_code_object_of_wave64_kernels_fails() {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/probes/toolchain-hip-5.2-many-kernels/llvm-readelf-notes-gfx1030.txt"
        ));
        let kernel = &parse_code_object_metadata(text)[0];
        assert_eq!(kernel.wavefront_size, Some(32));
        let l = limits("gfx1030").unwrap();
        let fork = ForkLaunches {
            launches: &[],
            wave_size: Some(64),
        };
        let findings = code_object_findings(kernel, &l, fork, "readelf");
        let wave = findings.iter().find(|f| f.check == "wave_size").unwrap();
        assert_eq!(wave.severity, Severity::Fail);
        assert!(
            wave.verdict.contains("-mwavefrontsize64"),
            "{}",
            wave.verdict
        );
        let unstated = code_object_findings(kernel, &l, ForkLaunches::default(), "readelf");
        assert!(unstated.iter().all(|f| f.check != "wave_size"));
    }

    #[test]
    fn the_forks_psnr_hvs_spills_on_gfx942_with_both_compilers() {
        for (dir, spills) in [
            ("toolchain-hip-6-llvm-19-fork", 179),
            ("toolchain-hip-6-rocm-7.2-fork", 135),
        ] {
            let text = std::fs::read_to_string(format!(
                "{}/../fixtures/probes/{dir}/llvm-readelf-notes-gfx942.txt",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap();
            let kernels = parse_code_object_metadata(&text);
            let psnr_hvs = kernels.iter().find(|k| k.name == "psnr_hvs_hip").unwrap();
            assert_eq!(psnr_hvs.gfx, "gfx942");
            assert_eq!(psnr_hvs.vgpr_spill_count, spills, "{dir}");
            let findings = code_object_findings(
                psnr_hvs,
                &limits("gfx942").unwrap(),
                ForkLaunches::default(),
                "readelf",
            );
            assert_eq!(findings[0].severity, Severity::Warn, "{dir}");
            assert_eq!(findings[0].evidence["vgpr_spills"], spills);
            // At the 1024-thread budget (128 VGPRs on CDNA3); the fork launches 64 threads.
            let launch = KernelLaunch {
                kernel: "psnr_hvs_hip".into(),
                grid_blocks: 42196,
                block_threads: 64,
            };
            let fork = ForkLaunches {
                launches: std::slice::from_ref(&launch),
                wave_size: Some(64),
            };
            let advised =
                code_object_findings(psnr_hvs, &limits("gfx942").unwrap(), fork, "readelf");
            assert_eq!(advised[0].evidence["vgpr_cap"], 128);
            assert_eq!(advised[0].evidence["vgpr_cap_at_launch"], 512);
            assert!(
                advised[0]
                    .verdict
                    .contains("__launch_bounds__(64) lets it use up to 512"),
                "{}",
                advised[0].verdict
            );
        }
    }
}
