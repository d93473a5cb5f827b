//! AMD GPU occupancy: how many waves of a kernel fit on one SIMD, given its VGPRs, SGPRs, LDS
//! and workgroup size, per architecture, and the `hip` `registers` and `occupancy` findings.
//!
//! One table, [`limits`], holds every per-architecture figure. Sources:
//! - LLVM's AMDGPU back end, `llvm/lib/Target/AMDGPU/Utils/AMDGPUBaseInfo.cpp`
//!   (`getTotalNumVGPRs`, `getVGPRAllocGranule`, `getAddressableNumVGPRs`, `getMaxWavesPerEU`,
//!   `getEUsPerCU`, `getLocalMemorySize`, `getMaxWorkGroupsPerCU`, `getOccupancyWithNumSGPRs`,
//!   `getNumWavesPerEUWithNumVGPRs`): the model the compiler itself uses for the
//!   "Occupancy [waves/SIMD]" it reports, and the register-file figures used here. gfx1100 and
//!   gfx1101 have 1.5× the VGPRs of other RDNA parts (`Feature1_5xVGPRs`, reviews.llvm.org/D134522).
//! - AMD GPUOpen lab notes, "Register pressure in AMD CDNA2 GPUs"
//!   (gpuopen.com/learn/amd-lab-notes/amd-lab-notes-register-pressure-readme/): on MI200 each of
//!   the four SIMDs of a CU holds at most 8 waves; its Table 1 (VGPRs → waves: ≤64 → 8, ≤72 → 7,
//!   ≤80 → 6, ≤96 → 5, ≤128 → 4, ≤168 → 3, ≤256 → 2, ≤512 → 1) is an image, so the tests pin
//!   the worked examples of its text instead (102 and 100 VGPRs → 4 waves, 96 and 94 → 5) and the
//!   table's boundaries as the formula below gives them.
//! - ROCm Compute Profiler docs, "Occupancy limiters example" (MI250, ROCm 5.6): 122 VGPRs plus
//!   4 AGPRs reach ~50% occupancy; 64 KiB of LDS per 256-thread workgroup ~12.5%; SGPRs are
//!   allocated in blocks of 16 (76 → 80).
//! - AMD's ISA reference guides (CDNA2 "MI200", CDNA3 "MI300", RDNA2, RDNA3) describe the same
//!   register files: on CDNA2/CDNA3 one 512-entry-per-lane file shared by VGPRs and AGPRs; on
//!   gfx908 (CDNA1) 256 VGPRs and a separate 256 AGPRs; on RDNA2 128 KiB of VGPRs per SIMD32
//!   (1024 per lane in wave32); on Navi31/32 (gfx1100/gfx1101) 192 KiB (1536 per lane).
//!
//! Counting on gfx90a/gfx94x: VGPRs and AGPRs share one file, and the code object's
//! `.vgpr_count` is already the unified total (architectural VGPRs rounded up to 4, plus AGPRs),
//! so `vgprs` here is that total, compared against the 512-register budget.

use std::fmt;

use crate::finding::{Finding, Severity};
use crate::retune::KernelResources;

/// Architecture families, for people.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmdFamily {
    Cdna1,
    Cdna2,
    Cdna3,
    Rdna2,
    Rdna3,
}

impl AmdFamily {
    pub fn name(self) -> &'static str {
        match self {
            AmdFamily::Cdna1 => "CDNA1",
            AmdFamily::Cdna2 => "CDNA2",
            AmdFamily::Cdna3 => "CDNA3",
            AmdFamily::Rdna2 => "RDNA2",
            AmdFamily::Rdna3 => "RDNA3",
        }
    }
}

/// What limits waves per SIMD on one architecture, at one wave size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmdLimits {
    pub gfx: &'static str,
    pub family: AmdFamily,
    /// The wave size these figures are for (the architecture's HIP default: 64 on CDNA, 32 on
    /// RDNA); see [`AmdLimits::for_wave_size`].
    pub wave_size: u32,
    /// SIMDs sharing one workgroup's LDS and barriers: the 4 of a CU (CDNA), the 4 of a WGP
    /// (RDNA in its default WGP mode).
    pub simds_per_cu: u32,
    /// Hardware wave slots per SIMD.
    pub max_waves_per_simd: u32,
    /// The VGPR file per SIMD, in registers per lane at `wave_size`.
    pub vgprs_per_simd_lane: u32,
    /// VGPRs are allocated in blocks of this many.
    pub vgpr_granule: u32,
    /// The most VGPRs one wave can address (512 on gfx90a/gfx94x: VGPRs + AGPRs).
    pub max_vgprs_per_wave: u32,
    /// Whether SGPRs limit occupancy (GCN/CDNA: an 800-entry file per SIMD; RDNA: no, every
    /// wave gets a fixed 106).
    pub sgprs_limit_occupancy: bool,
    /// LDS per CU (CDNA) or per WGP (RDNA, WGP mode), bytes.
    pub lds_bytes_per_cu: u32,
    /// The most LDS one workgroup can allocate, bytes.
    pub max_lds_bytes_per_workgroup: u32,
    /// LDS is allocated in blocks of this many bytes (128 dwords).
    pub lds_granule_bytes: u32,
    /// Workgroups of more than one wave per CU/WGP (barrier slots).
    pub max_workgroups_per_cu: u32,
}

impl AmdLimits {
    /// The same architecture at another wave size: RDNA runs wave64 with half the VGPRs per
    /// lane and half the granule (LLVM `getTotalNumVGPRs`, `getVGPRAllocGranule`). `None` for a
    /// wave size the architecture does not run (wave32 on CDNA).
    pub fn for_wave_size(&self, wave_size: u32) -> Option<AmdLimits> {
        if wave_size == self.wave_size {
            return Some(*self);
        }
        match (self.family, wave_size) {
            (AmdFamily::Rdna2 | AmdFamily::Rdna3, 64) => Some(AmdLimits {
                wave_size: 64,
                vgprs_per_simd_lane: self.vgprs_per_simd_lane / 2,
                vgpr_granule: self.vgpr_granule / 2,
                ..*self
            }),
            _ => None,
        }
    }
}

const CDNA2_LIKE: AmdLimits = AmdLimits {
    gfx: "gfx90a",
    family: AmdFamily::Cdna2,
    wave_size: 64,
    simds_per_cu: 4,
    max_waves_per_simd: 8,
    vgprs_per_simd_lane: 512,
    vgpr_granule: 8,
    max_vgprs_per_wave: 512,
    sgprs_limit_occupancy: true,
    lds_bytes_per_cu: 65536,
    max_lds_bytes_per_workgroup: 65536,
    lds_granule_bytes: 512,
    max_workgroups_per_cu: 16,
};

const RDNA2_LIKE: AmdLimits = AmdLimits {
    gfx: "gfx1030",
    family: AmdFamily::Rdna2,
    wave_size: 32,
    simds_per_cu: 4,
    max_waves_per_simd: 16,
    vgprs_per_simd_lane: 1024,
    vgpr_granule: 16,
    max_vgprs_per_wave: 256,
    sgprs_limit_occupancy: false,
    lds_bytes_per_cu: 131072,
    max_lds_bytes_per_workgroup: 65536,
    lds_granule_bytes: 512,
    max_workgroups_per_cu: 32,
};

/// The per-architecture table (see the module doc for sources). Accepts a bare processor or a
/// target ID with features (`gfx942:sramecc+:xnack-`).
pub fn limits(gfx: &str) -> Option<AmdLimits> {
    let processor = gfx.split(':').next().unwrap_or(gfx).trim();
    let limits = match processor {
        // CDNA1 (MI100): separate 256 VGPRs and 256 AGPRs, 10 wave slots, GCN granule 4.
        "gfx908" => AmdLimits {
            gfx: "gfx908",
            family: AmdFamily::Cdna1,
            max_waves_per_simd: 10,
            vgprs_per_simd_lane: 256,
            vgpr_granule: 4,
            max_vgprs_per_wave: 256,
            ..CDNA2_LIKE
        },
        // CDNA2 (MI200).
        "gfx90a" => CDNA2_LIKE,
        // CDNA3 (MI300): the gfx90a register model (LLVM: FeatureGFX90AInsts), 64 KiB LDS.
        "gfx940" => AmdLimits {
            gfx: "gfx940",
            family: AmdFamily::Cdna3,
            ..CDNA2_LIKE
        },
        "gfx941" => AmdLimits {
            gfx: "gfx941",
            family: AmdFamily::Cdna3,
            ..CDNA2_LIKE
        },
        "gfx942" => AmdLimits {
            gfx: "gfx942",
            family: AmdFamily::Cdna3,
            ..CDNA2_LIKE
        },
        // RDNA2: Navi21 (gfx1030), Rembrandt/Raphael iGPU (gfx1036).
        "gfx1030" => RDNA2_LIKE,
        "gfx1036" => AmdLimits {
            gfx: "gfx1036",
            ..RDNA2_LIKE
        },
        // RDNA3: Navi31 (gfx1100) and Navi32 (gfx1101) have 1.5× VGPRs, granule 24;
        // Navi33 (gfx1102) has the RDNA2-sized file.
        "gfx1100" | "gfx1101" => AmdLimits {
            gfx: if processor == "gfx1100" {
                "gfx1100"
            } else {
                "gfx1101"
            },
            family: AmdFamily::Rdna3,
            vgprs_per_simd_lane: 1536,
            vgpr_granule: 24,
            ..RDNA2_LIKE
        },
        "gfx1102" => AmdLimits {
            gfx: "gfx1102",
            family: AmdFamily::Rdna3,
            ..RDNA2_LIKE
        },
        _ => return None,
    };
    Some(limits)
}

/// What bounds a kernel's waves per SIMD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmdLimiter {
    Vgprs,
    Sgprs,
    Lds,
    /// Hardware wave slots, or workgroup (barrier) slots per CU.
    Waves,
}

impl AmdLimiter {
    pub fn name(self) -> &'static str {
        match self {
            AmdLimiter::Vgprs => "vgprs",
            AmdLimiter::Sgprs => "sgprs",
            AmdLimiter::Lds => "lds",
            AmdLimiter::Waves => "waves",
        }
    }
}

/// The result of [`waves_per_simd`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AmdOccupancy {
    pub waves_per_simd: u32,
    pub max_waves_per_simd: u32,
    /// `waves_per_simd / max_waves_per_simd`, percent, one decimal.
    pub occupancy_pct: f64,
    pub limiter: AmdLimiter,
    /// Waves per SIMD each resource alone allows.
    pub by_vgprs: u32,
    pub by_sgprs: u32,
    pub by_lds: u32,
    pub by_slots: u32,
}

/// Why occupancy cannot be computed: the figures describe a kernel that cannot launch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmdOccupancyError {
    #[error("workgroup size {size} is outside 1..=1024; pass the launch's block size")]
    WorkgroupSize { size: u32 },
    #[error("{vgprs} VGPRs exceed the {max} one wave of {gfx} can address; check the code object's .vgpr_count")]
    TooManyVgprs {
        vgprs: u32,
        max: u32,
        gfx: &'static str,
    },
    #[error("{bytes} bytes of LDS exceed the {max} one workgroup on {gfx} can allocate; check .group_segment_fixed_size")]
    TooMuchLds {
        bytes: u32,
        max: u32,
        gfx: &'static str,
    },
}

/// Waves per SIMD for one kernel, as LLVM's AMDGPU back end models it: the VGPR limit is
/// `total / round_up(vgprs, granule)`; the SGPR limit (CDNA only) LLVM's table
/// (≤80 → 10, ≤88 → 9, ≤100 → 8, else 7); the LDS limit is the workgroups whose LDS (rounded up
/// to 512 bytes) fits in the CU's, times their waves, spread over the SIMDs (rounded up, as
/// LLVM does); the slot limit is the hardware's wave slots and the CU's workgroup slots. Each
/// is capped at the hardware maximum; the smallest wins.
pub fn waves_per_simd(
    l: &AmdLimits,
    vgprs: u32,
    sgprs: u32,
    lds_bytes_per_workgroup: u32,
    workgroup_size: u32,
) -> Result<AmdOccupancy, AmdOccupancyError> {
    if workgroup_size == 0 || workgroup_size > 1024 {
        return Err(AmdOccupancyError::WorkgroupSize {
            size: workgroup_size,
        });
    }
    if vgprs > l.max_vgprs_per_wave {
        return Err(AmdOccupancyError::TooManyVgprs {
            vgprs,
            max: l.max_vgprs_per_wave,
            gfx: l.gfx,
        });
    }
    if lds_bytes_per_workgroup > l.max_lds_bytes_per_workgroup {
        return Err(AmdOccupancyError::TooMuchLds {
            bytes: lds_bytes_per_workgroup,
            max: l.max_lds_bytes_per_workgroup,
            gfx: l.gfx,
        });
    }
    let max = l.max_waves_per_simd;
    let by_vgprs = if vgprs < l.vgpr_granule {
        max
    } else {
        (l.vgprs_per_simd_lane / round_up(vgprs, l.vgpr_granule)).clamp(1, max)
    };
    let by_sgprs = if l.sgprs_limit_occupancy {
        let waves = match sgprs {
            0..=80 => 10,
            81..=88 => 9,
            89..=100 => 8,
            _ => 7,
        };
        waves.min(max)
    } else {
        max
    };
    let waves_per_group = workgroup_size.div_ceil(l.wave_size);
    let group_slots = if waves_per_group == 1 {
        max * l.simds_per_cu
    } else {
        (max * l.simds_per_cu / waves_per_group).min(l.max_workgroups_per_cu)
    };
    let spread = |groups: u32| (groups * waves_per_group).div_ceil(l.simds_per_cu).min(max);
    let by_slots = spread(group_slots);
    let by_lds = if lds_bytes_per_workgroup == 0 {
        max
    } else {
        let groups = l.lds_bytes_per_cu / round_up(lds_bytes_per_workgroup, l.lds_granule_bytes);
        spread(groups.min(group_slots))
    };
    let waves = by_vgprs.min(by_sgprs).min(by_lds).min(by_slots);
    let limiter = if waves == max {
        AmdLimiter::Waves
    } else if by_vgprs == waves {
        AmdLimiter::Vgprs
    } else if by_sgprs == waves {
        AmdLimiter::Sgprs
    } else if by_lds == waves {
        AmdLimiter::Lds
    } else {
        AmdLimiter::Waves
    };
    Ok(AmdOccupancy {
        waves_per_simd: waves,
        max_waves_per_simd: max,
        occupancy_pct: (1000.0 * f64::from(waves) / f64::from(max)).round() / 10.0,
        limiter,
        by_vgprs,
        by_sgprs,
        by_lds,
        by_slots,
    })
}

/// The most VGPRs a kernel may use and still reach `waves` per SIMD (LLVM `getMaxNumVGPRs`).
pub fn max_vgprs_for_waves(l: &AmdLimits, waves: u32) -> u32 {
    let per_wave = l.vgprs_per_simd_lane / waves.max(1);
    (per_wave / l.vgpr_granule * l.vgpr_granule).min(l.max_vgprs_per_wave)
}

/// The most VGPRs a kernel may use so that a workgroup of `threads` fits one CU (WGP on RDNA):
/// its waves spread over the SIMDs (LLVM `getMaxNumVGPRs` for a flat workgroup size).
pub fn vgpr_budget(l: &AmdLimits, threads: u32, wave_size: u32) -> Option<u32> {
    let at_wave = l.for_wave_size(wave_size)?;
    let waves = threads.max(1).div_ceil(wave_size);
    let per_simd = waves.div_ceil(at_wave.simds_per_cu).max(1);
    Some(max_vgprs_for_waves(&at_wave, per_simd))
}

/// The HIP default block size bound when a kernel has no `__launch_bounds__`.
const DEFAULT_FLAT_WORKGROUP_SIZE: u32 = 1024;

/// The `hip` `registers` and `occupancy` findings for one kernel of one code object
/// (subject `name@gfx`). `registers` warns when VGPRs spill to scratch. `occupancy` uses the
/// code object's `.max_flat_workgroup_size` as the workgroup size (the compiler's bound, 1024
/// without `__launch_bounds__`) and warns at ≤ 2 waves per SIMD when VGPRs are the limiter.
pub fn kernel_findings(k: &KernelResources, l: &AmdLimits, command: &str) -> Vec<Finding> {
    let subject = format!("{}@{}", k.name, k.arch);
    let registers = if k.spill_bytes > 0 {
        Finding::new(
            "hip",
            "registers",
            &subject,
            Severity::Warn,
            format!(
                "spills {} B per work-item to scratch at {} VGPRs; cut live values or allow more VGPRs with a smaller __launch_bounds__",
                k.spill_bytes, k.registers
            ),
            command,
        )
    } else {
        let scratch = if k.stack_bytes > 0 {
            format!(", {} B of scratch per work-item for private arrays", k.stack_bytes)
        } else {
            String::new()
        };
        Finding::new(
            "hip",
            "registers",
            &subject,
            Severity::Ok,
            format!("{} VGPRs, {} SGPRs, no spills{scratch}", k.registers, k.sgprs),
            command,
        )
    }
    .with("vgprs", k.registers)
    .with("sgprs", k.sgprs)
    .with("spill_bytes", k.spill_bytes)
    .with("stack_bytes", k.stack_bytes);

    let workgroup_size = k.max_block_threads.unwrap_or(DEFAULT_FLAT_WORKGROUP_SIZE);
    let wave_size = k.wavefront_size.unwrap_or(l.wave_size);
    let occupancy = match l.for_wave_size(wave_size) {
        None => Finding::new(
            "hip",
            "occupancy",
            &subject,
            Severity::Warn,
            format!(
                "cannot compute occupancy: {} does not run wave{wave_size}; check the code object's .wavefront_size",
                l.gfx
            ),
            "calculated",
        ),
        Some(at_wave) => {
            match waves_per_simd(&at_wave, k.registers, k.sgprs, k.shared_bytes, workgroup_size) {
                Err(error) => Finding::new(
                    "hip",
                    "occupancy",
                    &subject,
                    Severity::Warn,
                    format!("cannot compute occupancy: {error}"),
                    "calculated",
                ),
                Ok(o) => occupancy_finding(&subject, &at_wave, k, workgroup_size, &o),
            }
        }
    }
    .with("vgprs", k.registers)
    .with("sgprs", k.sgprs)
    .with("lds_bytes", k.shared_bytes)
    .with("workgroup_size", workgroup_size)
    .with("wave_size", wave_size);
    vec![registers, occupancy]
}

fn occupancy_finding(
    subject: &str,
    l: &AmdLimits,
    k: &KernelResources,
    workgroup_size: u32,
    o: &AmdOccupancy,
) -> Finding {
    let base = format!(
        "{} of {} waves per SIMD ({:.1}%) at {} VGPRs, workgroup {}, limited by {}",
        o.waves_per_simd,
        o.max_waves_per_simd,
        o.occupancy_pct,
        k.registers,
        workgroup_size,
        o.limiter
    );
    let low_by_vgprs = o.waves_per_simd <= 2 && o.limiter == AmdLimiter::Vgprs;
    let (severity, verdict) = if low_by_vgprs {
        let next = o.waves_per_simd + 1;
        (
            Severity::Warn,
            format!(
                "{base}; at most {} VGPRs would give {next}: reduce register pressure",
                max_vgprs_for_waves(l, next)
            ),
        )
    } else {
        (Severity::Ok, base)
    };
    Finding::new("hip", "occupancy", subject, severity, verdict, "calculated")
        .with("waves_per_simd", o.waves_per_simd)
        .with("max_waves_per_simd", o.max_waves_per_simd)
        .with("occupancy_pct", o.occupancy_pct)
        .with("limiter", o.limiter.name())
}

impl fmt::Display for AmdLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AmdLimiter::Vgprs => "VGPRs",
            AmdLimiter::Sgprs => "SGPRs",
            AmdLimiter::Lds => "LDS",
            AmdLimiter::Waves => "wave slots",
        })
    }
}

fn round_up(value: u32, granule: u32) -> u32 {
    value.div_ceil(granule) * granule
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retune::hip_tools::parse_code_object_notes;

    const MANY_NOTES_GFX90A: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-hip-5.2-many-kernels/llvm-readelf-notes-gfx90a.txt"
    ));
    const MANY_NOTES_GFX1030: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-hip-5.2-many-kernels/llvm-readelf-notes-gfx1030.txt"
    ));

    fn gfx90a() -> AmdLimits {
        limits("gfx90a").unwrap()
    }

    fn waves(l: &AmdLimits, vgprs: u32) -> u32 {
        waves_per_simd(l, vgprs, 32, 0, 256).unwrap().waves_per_simd
    }

    #[test]
    fn cdna2_vgpr_table_of_the_gpuopen_register_pressure_notes() {
        let l = gfx90a();
        for (vgprs, expected) in [
            (64, 8),
            (72, 7),
            (80, 6),
            (96, 5),
            (128, 4),
            (168, 3),
            (256, 2),
            (512, 1),
        ] {
            assert_eq!(waves(&l, vgprs), expected, "{vgprs} VGPRs");
            if vgprs < 512 {
                assert_eq!(waves(&l, vgprs + 1), expected - 1, "{} VGPRs", vgprs + 1);
            }
        }
    }

    #[test]
    fn worked_examples_of_the_gpuopen_register_pressure_notes() {
        // hipcc --offload-arch=gfx90a -Rpass-analysis=kernel-resource-usage, ROCm 5.4, default
        // 1024-thread bound: (SGPRs, VGPRs) → Occupancy [waves/SIMD].
        let l = gfx90a();
        for (sgprs, vgprs, expected) in [
            (98, 102, 4),
            (98, 100, 4),
            (94, 96, 5),
            (86, 94, 5),
            (78, 96, 5),
        ] {
            let o = waves_per_simd(&l, vgprs, sgprs, 0, 1024).unwrap();
            assert_eq!(o.waves_per_simd, expected, "{vgprs} VGPRs");
            assert_eq!(o.limiter, AmdLimiter::Vgprs);
        }
    }

    #[test]
    fn rocm_compute_profiler_occupancy_limiter_examples_on_mi250() {
        let l = gfx90a();
        // vgprbound: 122 VGPRs + 4 AGPRs (AccumOffset 124) = 128 unified, 256 threads: ~50%.
        let o = waves_per_simd(&l, 124 + 4, 68, 0, 256).unwrap();
        assert_eq!((o.waves_per_simd, o.occupancy_pct), (4, 50.0));
        assert_eq!(o.limiter, AmdLimiter::Vgprs);
        // ldsbound: 96 VGPRs, 64 KiB LDS, 256 threads: one workgroup per CU, ~12.5%.
        let o = waves_per_simd(&l, 96, 80, 65536, 256).unwrap();
        assert_eq!((o.waves_per_simd, o.occupancy_pct), (1, 12.5));
        assert_eq!(o.limiter, AmdLimiter::Lds);
        // sgprbound: 64 VGPRs, 76 SGPRs, 1024 threads: full occupancy (~99% measured).
        let o = waves_per_simd(&l, 64, 76, 0, 1024).unwrap();
        assert_eq!((o.waves_per_simd, o.occupancy_pct), (8, 100.0));
        assert_eq!(o.limiter, AmdLimiter::Waves);
    }

    #[test]
    fn sgprs_limit_cdna_but_not_rdna() {
        let l = gfx90a();
        let o = waves_per_simd(&l, 32, 104, 0, 64).unwrap();
        assert_eq!((o.waves_per_simd, o.limiter), (7, AmdLimiter::Sgprs));
        let gfx908 = limits("gfx908").unwrap();
        assert_eq!(
            waves_per_simd(&gfx908, 24, 88, 0, 64)
                .unwrap()
                .waves_per_simd,
            9
        );
        let rdna = limits("gfx1030").unwrap();
        assert_eq!(
            waves_per_simd(&rdna, 32, 106, 0, 64)
                .unwrap()
                .waves_per_simd,
            16
        );
    }

    #[test]
    fn gfx908_has_256_vgprs_and_ten_slots() {
        let l = limits("gfx908").unwrap();
        assert_eq!(waves(&l, 24), 10);
        assert_eq!(waves(&l, 128), 2);
        assert_eq!(waves(&l, 256), 1);
        assert!(waves_per_simd(&l, 257, 0, 0, 64).is_err());
    }

    #[test]
    fn rdna_wave32_wave64_and_the_larger_navi31_file() {
        let gfx1030 = limits("gfx1030").unwrap();
        assert_eq!(waves(&gfx1030, 4), 16);
        assert_eq!(waves(&gfx1030, 116), 8); // 116 → 128: 1024 / 128
        assert_eq!(waves(&gfx1030, 256), 4);
        let wave64 = gfx1030.for_wave_size(64).unwrap();
        assert_eq!((wave64.vgprs_per_simd_lane, wave64.vgpr_granule), (512, 8));
        assert_eq!(
            waves_per_simd(&wave64, 128, 0, 0, 256)
                .unwrap()
                .waves_per_simd,
            4
        );
        assert!(gfx90a().for_wave_size(32).is_none());
        let gfx1100 = limits("gfx1100").unwrap();
        assert_eq!(waves(&gfx1100, 96), 16);
        assert_eq!(waves(&gfx1100, 128), 10); // 128 → 144: 1536 / 144
        assert_eq!(waves(&gfx1100, 256), 5); // 256 → 264
        assert_eq!(waves(&limits("gfx1102").unwrap(), 128), 8);
        assert_eq!(limits("gfx1036").unwrap().family, AmdFamily::Rdna2);
    }

    #[test]
    fn cdna3_uses_the_gfx90a_model_and_target_ids_resolve() {
        let l = limits("gfx942:sramecc+:xnack-").unwrap();
        assert_eq!(l.gfx, "gfx942");
        assert_eq!(l.family, AmdFamily::Cdna3);
        assert_eq!((l.vgprs_per_simd_lane, l.max_waves_per_simd), (512, 8));
        assert_eq!(waves(&l, 168), 3);
        assert!(limits("gfx940").is_some() && limits("gfx941").is_some());
        assert!(limits("gfx803").is_none());
    }

    #[test]
    fn impossible_kernels_are_errors() {
        let l = gfx90a();
        assert_eq!(
            waves_per_simd(&l, 32, 0, 0, 0),
            Err(AmdOccupancyError::WorkgroupSize { size: 0 })
        );
        assert!(waves_per_simd(&l, 32, 0, 0, 2048).is_err());
        assert!(waves_per_simd(&l, 513, 0, 0, 64).is_err());
        let err = waves_per_simd(&l, 32, 0, 65537, 64).unwrap_err();
        assert!(err.to_string().contains("65537 bytes of LDS"), "{err}");
    }

    #[test]
    fn max_vgprs_for_waves_inverts_the_table() {
        let l = gfx90a();
        assert_eq!(max_vgprs_for_waves(&l, 3), 168);
        assert_eq!(max_vgprs_for_waves(&l, 5), 96);
        assert_eq!(max_vgprs_for_waves(&l, 1), 512);
        assert_eq!(max_vgprs_for_waves(&limits("gfx1030").unwrap(), 1), 256);
    }

    /// The recorded capture, against hipcc 5.2's own "Occupancy [waves/SIMD]" remarks
    /// (fixtures/probes/toolchain-hip-5.2-many-kernels/hipcc-kernel-resource-usage-remarks.txt).
    #[test]
    fn recorded_kernels_match_the_compilers_occupancy_remarks() {
        let expected_gfx90a = [8, 3, 4, 4, 8];
        let expected_gfx1030 = [16, 12, 8, 8, 16];
        for (notes, gfx, expected) in [
            (MANY_NOTES_GFX90A, "gfx90a", expected_gfx90a),
            (MANY_NOTES_GFX1030, "gfx1030", expected_gfx1030),
        ] {
            let l = limits(gfx).unwrap();
            let got: Vec<u32> = parse_code_object_notes(notes)
                .iter()
                .map(|k| {
                    let l = l.for_wave_size(k.wavefront_size.unwrap()).unwrap();
                    waves_per_simd(
                        &l,
                        k.registers,
                        k.sgprs,
                        k.shared_bytes,
                        k.max_block_threads.unwrap(),
                    )
                    .unwrap()
                    .waves_per_simd
                })
                .collect();
            // Index 1 is the LDS kernel (20736 B, 256 threads), where LLVM 15 printed 8 / 16:
            // it did not yet spread LDS-limited waves over the SIMDs (fixed in D139468).
            // 64 KiB / 20992 B = 3 workgroups of 4 waves on 4 SIMDs (gfx90a); 128 KiB / 20992
            // = 6 workgroups of 8 wave32s on 4 SIMDs (gfx1030 WGP mode).
            assert_eq!(got, expected, "{gfx}");
        }
    }

    #[test]
    fn findings_for_recorded_kernels() {
        let kernels = parse_code_object_notes(MANY_NOTES_GFX90A);
        let l = gfx90a();
        let command = "llvm-readelf-15 --notes gfx90a.co";

        let copy = kernel_findings(&kernels[0], &l, command);
        assert_eq!(copy.len(), 2);
        assert_eq!(
            copy[0].identity(),
            ("hip", "registers", "_Z10scale_copyPKfPffi@gfx90a")
        );
        assert_eq!(copy[0].severity, Severity::Ok);
        assert_eq!(copy[0].command, command);
        assert_eq!(
            copy[1].identity(),
            ("hip", "occupancy", "_Z10scale_copyPKfPffi@gfx90a")
        );
        assert_eq!(copy[1].severity, Severity::Ok);
        assert_eq!(copy[1].evidence["limiter"], "waves");
        assert_eq!(copy[1].evidence["occupancy_pct"], 100.0);

        let lds = kernel_findings(&kernels[1], &l, command);
        assert_eq!(lds[1].evidence["limiter"], "lds");
        assert_eq!(lds[1].evidence["waves_per_simd"], 3);
        assert_eq!(lds[1].evidence["workgroup_size"], 256);

        let spilling = kernel_findings(&kernels[2], &l, command);
        assert_eq!(spilling[0].severity, Severity::Warn);
        assert_eq!(
            spilling[0].verdict,
            "spills 60 B per work-item to scratch at 128 VGPRs; cut live values or allow more VGPRs with a smaller __launch_bounds__"
        );
        assert_eq!(spilling[0].evidence["spill_bytes"], 60);
        assert_eq!(spilling[1].severity, Severity::Ok, "4 waves is not low");

        let scratch = kernel_findings(&kernels[3], &l, command);
        assert_eq!(scratch[0].severity, Severity::Ok);
        assert!(scratch[0]
            .verdict
            .ends_with("400 B of scratch per work-item for private arrays"));
    }

    #[test]
    fn low_vgpr_limited_occupancy_warns_with_the_next_threshold() {
        let kernel = KernelResources {
            name: "_Z4heavyPf".into(),
            arch: "gfx942".into(),
            registers: 200,
            sgprs: 40,
            stack_bytes: 0,
            spill_bytes: 0,
            shared_bytes: 0,
            max_block_threads: Some(256),
            wavefront_size: Some(64),
        };
        let l = limits("gfx942").unwrap();
        let findings = kernel_findings(&kernel, &l, "cmd");
        let occupancy = &findings[1];
        assert_eq!(occupancy.severity, Severity::Warn);
        assert_eq!(
            occupancy.verdict,
            "2 of 8 waves per SIMD (25.0%) at 200 VGPRs, workgroup 256, limited by VGPRs; at most 168 VGPRs would give 3: reduce register pressure"
        );
        assert_eq!(occupancy.evidence["occupancy_pct"], 25.0);
        assert_eq!(occupancy.evidence["vgprs"], 200);
        // One wave because of LDS, not VGPRs: no warning.
        let lds_bound = KernelResources {
            registers: 32,
            shared_bytes: 32768,
            max_block_threads: Some(64),
            ..kernel
        };
        let findings = kernel_findings(&lds_bound, &l, "cmd");
        assert_eq!(findings[1].evidence["limiter"], "lds");
        assert_eq!(findings[1].severity, Severity::Ok);
    }
}
