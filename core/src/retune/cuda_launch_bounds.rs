//! A kernel's `__launch_bounds__(maxThreads, minBlocks)` as the compiler kept it (the PTX
//! directives `.maxntid` and `.minnctapersm`, read from `cuobjdump --dump-ptx`), and the `cuda`
//! `launch_bounds` finding: whether ptxas honoured the minimum on an architecture. A minimum
//! that does not fit the architecture's SM (more threads or blocks than it holds) is ignored
//! there, with a warning in the build log: the register cap it was written to set is not
//! applied, so the tuning it encodes is dead on that architecture.

use crate::finding::{Finding, Severity};
use crate::retune::cuda_occupancy::{max_registers_for_blocks, CudaLimits, WARP_SIZE};
use crate::retune::KernelResources;

/// One kernel's launch bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchBounds {
    pub kernel: String,
    /// `.maxntid x, y, z` multiplied out: the most threads a block may have.
    pub max_threads: u32,
    /// `.minnctapersm`: the blocks per SM the kernel asks room for, when it asks.
    pub min_blocks: Option<u32>,
}

/// The launch bounds of every `.entry` in PTX text (several PTX sections repeat the same
/// kernels; the first occurrence is kept). Entries without `.maxntid` are left out.
pub fn parse_ptx_launch_bounds(ptx: &str) -> Vec<LaunchBounds> {
    let mut found: Vec<LaunchBounds> = Vec::new();
    let mut entry: Option<String> = None;
    let mut current: Option<LaunchBounds> = None;
    for raw in ptx.lines() {
        let line = raw.trim();
        if let Some(rest) = line
            .strip_prefix(".visible .entry ")
            .or_else(|| line.strip_prefix(".entry "))
            .or_else(|| line.strip_prefix(".weak .entry "))
        {
            keep(&mut found, current.take());
            let name = rest.split(['(', ' ']).next().unwrap_or(rest);
            entry = Some(name.to_string());
        } else if let Some(dims) = line.strip_prefix(".maxntid") {
            if let Some(kernel) = &entry {
                let max_threads = dims
                    .split(',')
                    .map(|d| d.trim().parse::<u32>().unwrap_or(1))
                    .product();
                current = Some(LaunchBounds {
                    kernel: kernel.clone(),
                    max_threads,
                    min_blocks: None,
                });
            }
        } else if let Some(blocks) = line.strip_prefix(".minnctapersm") {
            if let Some(bounds) = current.as_mut() {
                bounds.min_blocks = blocks.trim().parse().ok();
            }
        } else if line.starts_with('{') {
            keep(&mut found, current.take());
            entry = None;
        }
    }
    keep(&mut found, current);
    found
}

fn keep(found: &mut Vec<LaunchBounds>, bounds: Option<LaunchBounds>) {
    if let Some(bounds) = bounds {
        if !found.iter().any(|b| b.kernel == bounds.kernel) {
            found.push(bounds);
        }
    }
}

/// What ptxas said about a kernel's minimum on one architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PtxasVerdict {
    /// The build log has ptxas's verbose lines for this kernel here and no warning.
    Honoured,
    /// ptxas warned that the minimum is out of range and ignored.
    Ignored,
    /// The log does not say (no `-Xptxas -v` lines for this kernel on this architecture).
    Unknown,
}

/// The `cuda` `launch_bounds` finding for kernel `k` (of one architecture, `l`'s) with
/// `bounds` whose `min_blocks` is set; `None` otherwise. `ignored_on`: every architecture on
/// which ptxas ignored this kernel's minimum (for the verdict's "also on"). `block_threads`:
/// the block size the kernel is launched with, when the spec knows it: a block above
/// `.maxntid` cannot launch at all (fail).
pub fn launch_bounds_finding(
    k: &KernelResources,
    bounds: &LaunchBounds,
    l: &CudaLimits,
    ptxas: PtxasVerdict,
    ignored_on: &[String],
    block_threads: Option<u32>,
    command: &str,
) -> Option<Finding> {
    let subject = format!("{}@{}", k.name, k.arch);
    if let Some(block) = block_threads.filter(|b| *b > bounds.max_threads) {
        return Some(
            Finding::new(
                "cuda",
                "launch_bounds",
                &subject,
                Severity::Fail,
                format!(
                    "launched with blocks of {block} threads but __launch_bounds__ allows at most {}: the launch fails (too many resources requested); raise the bound or launch smaller blocks",
                    bounds.max_threads
                ),
                command,
            )
            .with("max_threads", bounds.max_threads)
            .with("block_threads", block),
        );
    }
    let min_blocks = bounds.min_blocks?;
    let threads_per_sm = l.max_warps_per_sm * WARP_SIZE;
    let wanted_threads = min_blocks * bounds.max_threads;
    let fits = wanted_threads <= threads_per_sm && min_blocks <= l.max_blocks_per_sm;
    let most_that_fit = (threads_per_sm / bounds.max_threads.max(1)).min(l.max_blocks_per_sm);
    let cap = max_registers_for_blocks(l, bounds.max_threads, min_blocks);
    let ignored = match ptxas {
        PtxasVerdict::Ignored => true,
        PtxasVerdict::Honoured => false,
        PtxasVerdict::Unknown => !fits,
    };
    let bound = format!("__launch_bounds__({}, {min_blocks})", bounds.max_threads);
    let others: Vec<&str> = ignored_on
        .iter()
        .map(String::as_str)
        .filter(|a| *a != k.arch)
        .collect();
    let also = if others.is_empty() {
        String::new()
    } else {
        format!(" (ptxas ignores it on {} too)", others.join(", "))
    };
    let why = if wanted_threads > threads_per_sm {
        format!(
            "{min_blocks} blocks of {} threads = {wanted_threads} threads, an SM of {} holds {threads_per_sm}",
            bounds.max_threads, k.arch
        )
    } else {
        format!(
            "{min_blocks} blocks, an SM of {} holds at most {}",
            k.arch, l.max_blocks_per_sm
        )
    };
    let (severity, verdict) = if ignored {
        let source = match ptxas {
            PtxasVerdict::Ignored => "ptxas ignores",
            _ => "by the architecture's limits ptxas ignores (the build log does not say: build with -Xptxas=-v)",
        };
        (
            Severity::Warn,
            format!(
                "{source} the minimum of {bound} on {}: {why}, so the register cap it is meant to set is not applied ({} registers here); the tuning it encodes is dead on {}: lower the minimum to {most_that_fit} (the most that fit), or set it per architecture with __CUDA_ARCH__{also}",
                k.arch, k.registers, k.arch
            ),
        )
    } else {
        let disagreement = if fits {
            String::new()
        } else {
            format!(
                "; ptxas honoured it although {why}: check core::retune::cuda_occupancy's {} row",
                k.arch
            )
        };
        let cap_text = cap.map_or_else(
            || "no register count fits that many".to_string(),
            |c| format!("at most {c} registers"),
        );
        (
            if fits {
                Severity::Ok
            } else {
                Severity::Warn
            },
            format!(
                "{bound} honoured on {}: {min_blocks} blocks per SM need {cap_text}, the kernel uses {}{disagreement}{also}",
                k.arch, k.registers
            ),
        )
    };
    let mut finding = Finding::new(
        "cuda",
        "launch_bounds",
        &subject,
        severity,
        verdict,
        command,
    )
    .with("max_threads", bounds.max_threads)
    .with("min_blocks", min_blocks)
    .with("honoured", !ignored)
    .with("threads_per_sm", threads_per_sm)
    .with("max_blocks_per_sm", l.max_blocks_per_sm)
    .with("most_blocks_that_fit", most_that_fit)
    .with("registers", k.registers)
    .with("ignored_on", ignored_on.to_vec());
    finding = match cap {
        Some(cap) => finding.with("register_cap", cap),
        None => finding.with("register_cap", serde_json::Value::Null),
    };
    Some(finding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retune::cuda_occupancy::limits;

    const PTX_MOTION: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-cuda-13.5-pypi-fork/cuobjdump-dump-ptx-motion_score-head50.txt"
    ));
    const PTX_BLUR: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-cuda-13.5-pypi-fork/cuobjdump-dump-ptx-ssimulacra2_blur-head50.txt"
    ));

    fn kernel(name: &str, arch: &str, registers: u32) -> KernelResources {
        KernelResources {
            name: name.into(),
            arch: arch.into(),
            registers,
            sgprs: 0,
            stack_bytes: 0,
            spill_bytes: 0,
            shared_bytes: 1680,
            max_block_threads: None,
            wavefront_size: None,
        }
    }

    #[test]
    fn the_real_fork_kernels_keep_their_bounds_in_the_ptx() {
        assert_eq!(
            parse_ptx_launch_bounds(PTX_MOTION),
            [LaunchBounds {
                kernel: "calculate_motion_score_kernel_8bpc".into(),
                max_threads: 256,
                min_blocks: Some(8),
            }]
        );
        assert_eq!(
            parse_ptx_launch_bounds(PTX_BLUR),
            [LaunchBounds {
                kernel: "ssimulacra2_blur_h".into(),
                max_threads: 64,
                min_blocks: Some(32),
            }]
        );
    }

    #[test]
    fn entries_without_bounds_and_repeated_sections() {
        let ptx = ".visible .entry a(\n.param .u32 a_0\n)\n{\nret;\n}\n\
                   .visible .entry b(\n)\n.maxntid 128, 2, 1\n{\n}\n\
                   .visible .entry b(\n)\n.maxntid 64, 1, 1\n.minnctapersm 3\n{\n}\n";
        assert_eq!(
            parse_ptx_launch_bounds(ptx),
            [LaunchBounds {
                kernel: "b".into(),
                max_threads: 256,
                min_blocks: None,
            }]
        );
    }

    fn motion() -> LaunchBounds {
        LaunchBounds {
            kernel: "calculate_motion_score_kernel_8bpc".into(),
            max_threads: 256,
            min_blocks: Some(8),
        }
    }

    #[test]
    fn ignored_on_sm_89_says_what_fits_and_where_else() {
        let ignored_on: Vec<String> = ["sm_75", "sm_86", "sm_89", "sm_120"]
            .map(String::from)
            .to_vec();
        let f = launch_bounds_finding(
            &kernel("calculate_motion_score_kernel_8bpc", "sm_89", 40),
            &motion(),
            &limits("sm_89").unwrap(),
            PtxasVerdict::Ignored,
            &ignored_on,
            Some(256),
            "log",
        )
        .unwrap();
        assert_eq!(f.severity, Severity::Warn);
        assert_eq!(f.subject, "calculate_motion_score_kernel_8bpc@sm_89");
        assert!(
            f.verdict
                .contains("2048 threads, an SM of sm_89 holds 1536"),
            "{}",
            f.verdict
        );
        assert!(
            f.verdict.contains("lower the minimum to 6"),
            "{}",
            f.verdict
        );
        assert!(
            f.verdict.contains("on sm_75, sm_86, sm_120 too"),
            "{}",
            f.verdict
        );
        assert_eq!(f.evidence["honoured"], false);
        assert_eq!(f.evidence["most_blocks_that_fit"], 6);
        // 8 blocks of 8 warps on 65536 registers: 32 registers each.
        assert_eq!(f.evidence["register_cap"], 32);
    }

    #[test]
    fn honoured_on_sm_90_with_its_register_cap() {
        let f = launch_bounds_finding(
            &kernel("calculate_motion_score_kernel_8bpc", "sm_90", 32),
            &motion(),
            &limits("sm_90").unwrap(),
            PtxasVerdict::Honoured,
            &[],
            None,
            "log",
        )
        .unwrap();
        assert_eq!(f.severity, Severity::Ok);
        assert!(
            f.verdict
                .contains("need at most 32 registers, the kernel uses 32"),
            "{}",
            f.verdict
        );
    }

    #[test]
    fn a_block_count_over_the_limit_and_an_unknown_log() {
        let blur = LaunchBounds {
            kernel: "ssimulacra2_blur_h".into(),
            max_threads: 64,
            min_blocks: Some(32),
        };
        let f = launch_bounds_finding(
            &kernel("ssimulacra2_blur_h", "sm_86", 30),
            &blur,
            &limits("sm_86").unwrap(),
            PtxasVerdict::Unknown,
            &[],
            None,
            "calculated",
        )
        .unwrap();
        assert_eq!(f.severity, Severity::Warn);
        assert!(f.verdict.contains("build with -Xptxas=-v"), "{}", f.verdict);
        assert!(
            f.verdict.contains("32 blocks of 64 threads = 2048 threads"),
            "{}",
            f.verdict
        );
        assert_eq!(f.evidence["most_blocks_that_fit"], 16);
    }

    #[test]
    fn a_launch_above_max_threads_fails_and_no_minimum_is_no_finding() {
        let bounds = LaunchBounds {
            kernel: "k".into(),
            max_threads: 128,
            min_blocks: None,
        };
        let l = limits("sm_80").unwrap();
        let k = kernel("k", "sm_80", 30);
        let f = launch_bounds_finding(&k, &bounds, &l, PtxasVerdict::Unknown, &[], Some(256), "c")
            .unwrap();
        assert_eq!(f.severity, Severity::Fail);
        assert!(
            launch_bounds_finding(&k, &bounds, &l, PtxasVerdict::Unknown, &[], Some(128), "c")
                .is_none()
        );
    }
}
