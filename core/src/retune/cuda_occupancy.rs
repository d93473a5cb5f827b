//! CUDA theoretical occupancy: how many blocks of a kernel fit on one SM, given its registers,
//! shared memory and block size, per compute capability, and the `cuda` `registers` and
//! `occupancy` findings.
//!
//! One table, [`limits`], holds every per-architecture figure. Sources:
//! - CUDA C++ Programming Guide, "Compute Capabilities", the "Technical Specifications per
//!   Compute Capability" table (docs.nvidia.com/cuda/cuda-c-programming-guide, appendix
//!   "Compute Capabilities"): resident warps, resident blocks and threads per SM, threads per
//!   block, 32-bit registers per SM and per block, registers per thread (255), shared memory per
//!   SM and the most one block can opt in to, and the 1 KiB per block the driver reserves from
//!   compute capability 8.0 on ("the 1 KB of shared memory not made available to a thread block
//!   is reserved for system use").
//! - The CUDA Occupancy Calculator (the `CUDA_Occupancy_Calculator.xls` spreadsheet, now the
//!   Nsight Compute occupancy calculator) and its header form `cuda_occupancy.h` (CUDA 11.8,
//!   `/usr/include/cuda_occupancy.h` with Debian's toolkit): register allocation unit 256
//!   registers per warp (`cudaOccRegAllocationGranularity`), 4 register sub-partitions per SM
//!   (2 on sm_60; `cudaOccSubPartitionsPerMultiprocessor`), shared memory allocation unit 256 B
//!   up to sm_7x and 128 B from sm_80 (`cudaOccSMemAllocationGranularity`), resident blocks per
//!   SM (`cudaOccMaxBlocksPerMultiprocessor`: 32, but 16 on sm_75, sm_86 and sm_87 and 24 on
//!   sm_89). [`occupancy`] follows `cudaOccMaxActiveBlocksPerMultiprocessor` with the default
//!   cache configuration (the whole shared memory carveout available) and partitioned global
//!   caching off.
//!
//! sm_100 and sm_120 (Blackwell) are from the CUDA 12.8+ guide's table and header (the same
//! granularities; 64 warps and 228 KiB on sm_100, 48 warps and 100 KiB on sm_120, 32 blocks on
//! both); nvcc 11.8 here cannot build for them, so no capture backs them.

use std::fmt;

use crate::finding::{Finding, Severity};
use crate::retune::KernelResources;

/// What limits resident blocks per SM on one compute capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CudaLimits {
    /// `sm_89`.
    pub arch: &'static str,
    pub max_warps_per_sm: u32,
    pub max_blocks_per_sm: u32,
    pub max_threads_per_block: u32,
    /// 32-bit registers per SM (65536 on every architecture here).
    pub registers_per_sm: u32,
    /// 32-bit registers one block may use.
    pub registers_per_block: u32,
    pub max_registers_per_thread: u32,
    /// Registers are allocated per warp in units of this many (256).
    pub register_allocation_unit: u32,
    /// The register file is split into this many sub-partitions, one per warp scheduler; a
    /// warp's registers come from one of them (the occupancy calculator's "warp allocation
    /// granularity").
    pub register_sub_partitions: u32,
    /// Shared memory per SM with the largest carveout, bytes.
    pub shared_bytes_per_sm: u32,
    /// The most shared memory one block can use (with the opt-in attribute above 48 KiB), bytes.
    pub max_shared_bytes_per_block: u32,
    /// Shared memory is allocated per block in units of this many bytes.
    pub shared_allocation_unit: u32,
    /// Shared memory the driver reserves per block on top of the kernel's own (1 KiB on sm_80+).
    pub reserved_shared_bytes_per_block: u32,
}

pub const WARP_SIZE: u32 = 32;

const KIB: u32 = 1024;

/// The per-compute-capability table (see the module doc for its sources).
const TABLE: &[CudaLimits] = &[
    row("sm_50", 64, 32, 64 * KIB, 48 * KIB, 65536, 256, 0, 4),
    row("sm_52", 64, 32, 96 * KIB, 48 * KIB, 65536, 256, 0, 4),
    row("sm_53", 64, 32, 64 * KIB, 48 * KIB, 32768, 256, 0, 4),
    row("sm_60", 64, 32, 64 * KIB, 48 * KIB, 65536, 256, 0, 2),
    row("sm_61", 64, 32, 96 * KIB, 48 * KIB, 65536, 256, 0, 4),
    row("sm_62", 64, 32, 64 * KIB, 48 * KIB, 32768, 256, 0, 4),
    row("sm_70", 64, 32, 96 * KIB, 96 * KIB, 65536, 256, 0, 4),
    row("sm_72", 64, 32, 96 * KIB, 96 * KIB, 65536, 256, 0, 4),
    row("sm_75", 32, 16, 64 * KIB, 64 * KIB, 65536, 256, 0, 4),
    row("sm_80", 64, 32, 164 * KIB, 163 * KIB, 65536, 128, KIB, 4),
    row("sm_86", 48, 16, 100 * KIB, 99 * KIB, 65536, 128, KIB, 4),
    row("sm_87", 48, 16, 164 * KIB, 163 * KIB, 65536, 128, KIB, 4),
    row("sm_89", 48, 24, 100 * KIB, 99 * KIB, 65536, 128, KIB, 4),
    row("sm_90", 64, 32, 228 * KIB, 227 * KIB, 65536, 128, KIB, 4),
    row("sm_100", 64, 32, 228 * KIB, 227 * KIB, 65536, 128, KIB, 4),
    row("sm_120", 48, 32, 100 * KIB, 99 * KIB, 65536, 128, KIB, 4),
];

#[allow(clippy::too_many_arguments)]
const fn row(
    arch: &'static str,
    max_warps_per_sm: u32,
    max_blocks_per_sm: u32,
    shared_bytes_per_sm: u32,
    max_shared_bytes_per_block: u32,
    registers_per_block: u32,
    shared_allocation_unit: u32,
    reserved_shared_bytes_per_block: u32,
    register_sub_partitions: u32,
) -> CudaLimits {
    CudaLimits {
        arch,
        max_warps_per_sm,
        max_blocks_per_sm,
        max_threads_per_block: 1024,
        registers_per_sm: 65536,
        registers_per_block,
        max_registers_per_thread: 255,
        register_allocation_unit: 256,
        register_sub_partitions,
        shared_bytes_per_sm,
        max_shared_bytes_per_block,
        shared_allocation_unit,
        reserved_shared_bytes_per_block,
    }
}

/// The limits of one architecture, in any spelling [`arch_number`](super::cuda_tools::arch_number)
/// reads (`sm_89`, `8.9`, `compute_89`, `sm_90a`); `None` for one the table lacks.
pub fn limits(arch: &str) -> Option<CudaLimits> {
    let number = super::cuda_tools::arch_number(arch)?;
    let name = format!("sm_{number}");
    TABLE.iter().find(|l| l.arch == name).copied()
}

/// One kernel launch's per-block demands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    pub block_threads: u32,
    pub registers_per_thread: u32,
    /// Static plus dynamic shared memory the kernel asks for, without the driver's reserve.
    pub shared_bytes_per_block: u32,
}

/// What bounds resident blocks per SM. On a tie the one a kernel change cannot move wins, in
/// this order: warps, blocks, shared memory, registers; so `Registers` means registers alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limiter {
    Warps,
    Blocks,
    Registers,
    SharedMemory,
}

impl Limiter {
    pub fn name(self) -> &'static str {
        match self {
            Limiter::Warps => "warps",
            Limiter::Blocks => "blocks",
            Limiter::Registers => "registers",
            Limiter::SharedMemory => "shared_memory",
        }
    }
}

/// Theoretical occupancy of one launch configuration on one SM. The four `blocks_by_*` figures
/// are the blocks each resource alone allows; one that does not limit at all (no shared
/// memory before sm_80) is given as `blocks_by_limit`.
#[derive(Debug, Clone, PartialEq)]
pub struct Occupancy {
    pub active_blocks_per_sm: u32,
    pub active_warps_per_sm: u32,
    pub max_warps_per_sm: u32,
    /// Active warps over the maximum, percent, rounded to one decimal.
    pub occupancy_pct: f64,
    pub limiter: Limiter,
    pub blocks_by_warps: u32,
    pub blocks_by_registers: u32,
    pub blocks_by_shared: u32,
    pub blocks_by_limit: u32,
}

/// Why a configuration cannot launch at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OccupancyError {
    ZeroBlock,
    BlockTooLarge { block_threads: u32, max: u32 },
    TooManyRegistersPerThread { registers: u32, max: u32 },
    TooManyRegistersPerBlock { registers: u32, max: u32 },
    TooMuchSharedMemory { bytes: u32, max: u32 },
}

impl fmt::Display for OccupancyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OccupancyError::ZeroBlock => f.write_str("a block of 0 threads does not launch"),
            OccupancyError::BlockTooLarge { block_threads, max } => write!(
                f,
                "a block of {block_threads} threads is over the {max}-thread limit; launch smaller blocks"
            ),
            OccupancyError::TooManyRegistersPerThread { registers, max } => write!(
                f,
                "{registers} registers per thread is over the {max}-register limit; check the ptxas output"
            ),
            OccupancyError::TooManyRegistersPerBlock { registers, max } => write!(
                f,
                "the block needs {registers} registers but one block may use {max}: the launch fails with too many resources requested; launch smaller blocks or cap registers with __launch_bounds__"
            ),
            OccupancyError::TooMuchSharedMemory { bytes, max } => write!(
                f,
                "{bytes} B of shared memory per block is over the {max} B a block can have; shrink the tile"
            ),
        }
    }
}

impl std::error::Error for OccupancyError {}

/// Resident blocks and warps per SM for `c` on `l`, as `cudaOccMaxActiveBlocksPerMultiprocessor`
/// computes them: warps per block rounded up; registers per warp rounded up to the allocation
/// unit and taken from one of the register sub-partitions; shared memory plus the driver's
/// reserve rounded up to the shared allocation unit, out of the whole carveout.
pub fn occupancy(l: &CudaLimits, c: &LaunchConfig) -> Result<Occupancy, OccupancyError> {
    if c.block_threads == 0 {
        return Err(OccupancyError::ZeroBlock);
    }
    if c.block_threads > l.max_threads_per_block {
        return Err(OccupancyError::BlockTooLarge {
            block_threads: c.block_threads,
            max: l.max_threads_per_block,
        });
    }
    if c.registers_per_thread > l.max_registers_per_thread {
        return Err(OccupancyError::TooManyRegistersPerThread {
            registers: c.registers_per_thread,
            max: l.max_registers_per_thread,
        });
    }
    if c.shared_bytes_per_block > l.max_shared_bytes_per_block {
        return Err(OccupancyError::TooMuchSharedMemory {
            bytes: c.shared_bytes_per_block,
            max: l.max_shared_bytes_per_block,
        });
    }
    let warps_per_block = c.block_threads.div_ceil(WARP_SIZE);
    let blocks_by_limit = l.max_blocks_per_sm;
    let blocks_by_warps = l.max_warps_per_sm / warps_per_block;

    let registers_per_warp = round_up(
        c.registers_per_thread * WARP_SIZE,
        l.register_allocation_unit,
    );
    let registers_per_block = registers_per_warp * warps_per_block;
    // The hardware check assumes every sub-partition gets the block's warps at once.
    let registers_assumed =
        registers_per_warp * round_up(warps_per_block, l.register_sub_partitions);
    if registers_per_block.max(registers_assumed) > l.registers_per_block {
        return Err(OccupancyError::TooManyRegistersPerBlock {
            registers: registers_per_block.max(registers_assumed),
            max: l.registers_per_block,
        });
    }
    // Registers come from one sub-partition per warp: warps per sub-partition × sub-partitions.
    // No registers at all (never from ptxas) does not limit.
    let per_sub_partition = l.registers_per_sm / l.register_sub_partitions;
    let blocks_by_registers = per_sub_partition
        .checked_div(registers_per_warp)
        .map_or(blocks_by_limit, |warps| {
            warps * l.register_sub_partitions / warps_per_block
        });

    let shared_per_block = round_up(
        c.shared_bytes_per_block + l.reserved_shared_bytes_per_block,
        l.shared_allocation_unit,
    );
    let blocks_by_shared = l
        .shared_bytes_per_sm
        .checked_div(shared_per_block)
        .unwrap_or(blocks_by_limit);

    let candidates = [
        (blocks_by_warps, Limiter::Warps),
        (blocks_by_limit, Limiter::Blocks),
        (blocks_by_shared, Limiter::SharedMemory),
        (blocks_by_registers, Limiter::Registers),
    ];
    let active_blocks_per_sm = candidates.iter().map(|(n, _)| *n).min().unwrap_or(0);
    let limiter = candidates
        .iter()
        .find(|(n, _)| *n == active_blocks_per_sm)
        .map(|(_, limiter)| *limiter)
        .unwrap_or(Limiter::Warps);
    let active_warps_per_sm = active_blocks_per_sm * warps_per_block;
    Ok(Occupancy {
        active_blocks_per_sm,
        active_warps_per_sm,
        max_warps_per_sm: l.max_warps_per_sm,
        occupancy_pct: round1(
            100.0 * f64::from(active_warps_per_sm) / f64::from(l.max_warps_per_sm),
        ),
        limiter,
        blocks_by_warps,
        blocks_by_registers,
        blocks_by_shared,
        blocks_by_limit,
    })
}

/// The most registers per thread at which `blocks` blocks of `block_threads` fit by registers
/// (a multiple of the per-thread allocation, at most the per-thread limit); `None` when even
/// the fewest registers cannot.
pub fn max_registers_for_blocks(l: &CudaLimits, block_threads: u32, blocks: u32) -> Option<u32> {
    let warps_per_block = block_threads.div_ceil(WARP_SIZE).max(1);
    let per_sub_partition = l.registers_per_sm / l.register_sub_partitions;
    let step = l.register_allocation_unit / WARP_SIZE;
    (1..=l.max_registers_per_thread.div_ceil(step))
        .rev()
        .map(|units| (units * step).min(l.max_registers_per_thread))
        .find(|&registers| {
            let per_warp = round_up(registers * WARP_SIZE, l.register_allocation_unit);
            let warps = (per_sub_partition / per_warp) * l.register_sub_partitions;
            warps / warps_per_block >= blocks
        })
}

/// A kernel's launch: how many blocks of how many threads, on a device of how many SMs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchGeometry {
    pub grid_blocks: u64,
    pub block_threads: u32,
    pub sm_count: u32,
}

/// Occupancy below this, with registers the limiter, is worth a warning.
pub const LOW_OCCUPANCY_PCT: f64 = 25.0;

/// The `cuda` `registers` and `occupancy` findings for one kernel of one cubin (subject
/// `name@sm_XX`).
///
/// `registers` warns when the kernel spills to local memory or sits in the last register
/// allocation step below the 255-register cap (where the next live value would spill); ok
/// otherwise. `occupancy` uses `geometry`'s block size when given, else `block_threads`; it warns
/// when occupancy is under 25 % with registers alone the limiter, unless the launch is
/// grid-bound: every block of the grid is already resident at once (fewer blocks than SMs, or
/// no more than SMs × resident blocks per SM), so more room per SM cannot be filled.
pub fn kernel_findings(
    k: &KernelResources,
    l: &CudaLimits,
    block_threads: u32,
    geometry: Option<&LaunchGeometry>,
    command: &str,
) -> Vec<Finding> {
    let subject = format!("{}@{}", k.name, k.arch);
    vec![
        registers_finding(&subject, k, l, command),
        occupancy_finding(&subject, k, l, block_threads, geometry),
    ]
}

fn registers_finding(subject: &str, k: &KernelResources, l: &CudaLimits, command: &str) -> Finding {
    let step = l.register_allocation_unit / WARP_SIZE;
    let at_cap = k.registers + step > l.max_registers_per_thread;
    let (severity, verdict) = if k.spill_bytes > 0 {
        (
            Severity::Warn,
            format!(
                "spills {} B per thread to local memory at {} registers; cut live values, or raise the register cap (__launch_bounds__ minimum blocks, -maxrregcount)",
                k.spill_bytes, k.registers
            ),
        )
    } else if at_cap {
        (
            Severity::Warn,
            format!(
                "{} registers, at the {}-register cap: one more live value spills; cut register pressure",
                k.registers, l.max_registers_per_thread
            ),
        )
    } else {
        let stack = if k.stack_bytes > 0 {
            format!(
                ", {} B stack frame per thread (local arrays)",
                k.stack_bytes
            )
        } else {
            String::new()
        };
        (
            Severity::Ok,
            format!("{} registers, no spills{stack}", k.registers),
        )
    };
    Finding::new("cuda", "registers", subject, severity, verdict, command)
        .with("registers", k.registers)
        .with("spill_bytes", k.spill_bytes)
        .with("stack_bytes", k.stack_bytes)
        .with("shared_bytes", k.shared_bytes)
}

fn occupancy_finding(
    subject: &str,
    k: &KernelResources,
    l: &CudaLimits,
    block_threads: u32,
    geometry: Option<&LaunchGeometry>,
) -> Finding {
    let block_threads = geometry.map_or(block_threads, |g| g.block_threads);
    let config = LaunchConfig {
        block_threads,
        registers_per_thread: k.registers,
        shared_bytes_per_block: k.shared_bytes,
    };
    let o = match occupancy(l, &config) {
        Ok(o) => o,
        Err(error) => {
            // A real launch that cannot happen is a failure; a configured default is a guess.
            let severity = if geometry.is_some() {
                Severity::Fail
            } else {
                Severity::Warn
            };
            return Finding::new(
                "cuda",
                "occupancy",
                subject,
                severity,
                format!("cannot launch at block {block_threads}: {error}"),
                "calculated",
            )
            .with("registers", k.registers)
            .with("shared_bytes", k.shared_bytes)
            .with("block_threads", block_threads);
        }
    };
    let base = format!(
        "{} of {} warps ({:.1}%) at {} registers, block {}: {} blocks per SM, limited by {}",
        o.active_warps_per_sm,
        o.max_warps_per_sm,
        o.occupancy_pct,
        k.registers,
        block_threads,
        o.active_blocks_per_sm,
        o.limiter.name().replace('_', " ")
    );
    let grid_bound = geometry.filter(|g| {
        g.grid_blocks < u64::from(g.sm_count)
            || g.grid_blocks <= u64::from(g.sm_count) * u64::from(o.active_blocks_per_sm)
    });
    let bound = match (geometry, grid_bound) {
        (None, _) => "unknown",
        (Some(_), Some(_)) => "grid",
        (Some(_), None) => "occupancy",
    };
    let low_by_registers = o.occupancy_pct < LOW_OCCUPANCY_PCT && o.limiter == Limiter::Registers;
    let next = o.active_blocks_per_sm + 1;
    let cut = max_registers_for_blocks(l, block_threads, next)
        .map(|r| format!("at most {r} registers would give {next} blocks"))
        .unwrap_or_else(|| "fewer registers".to_string());
    let (severity, verdict) = match (low_by_registers, grid_bound) {
        (_, Some(g)) => {
            let why = if g.grid_blocks < u64::from(g.sm_count) {
                String::new()
            } else {
                format!(
                    " (all fit at once, {} per SM)",
                    o.active_blocks_per_sm
                )
            };
            (
                Severity::Ok,
                format!(
                    "{base}; grid-bound: {} blocks for {} SMs{why}; a register cut will not help (the fork measured __launch_bounds__ as a 3.4% regression)",
                    g.grid_blocks, g.sm_count
                ),
            )
        }
        (true, None) if geometry.is_some() => (
            Severity::Warn,
            format!("{base}; {cut}: cut register pressure or cap it with __launch_bounds__"),
        ),
        (true, None) => (
            Severity::Warn,
            format!(
                "{base}; {cut}: cut register pressure, unless the grid has no more blocks than SMs (launch geometry unknown)"
            ),
        ),
        (false, None) => (Severity::Ok, base),
    };
    let mut finding = Finding::new(
        "cuda",
        "occupancy",
        subject,
        severity,
        verdict,
        "calculated",
    )
    .with("occupancy_pct", o.occupancy_pct)
    .with("active_warps", o.active_warps_per_sm)
    .with("max_warps", o.max_warps_per_sm)
    .with("blocks_per_sm", o.active_blocks_per_sm)
    .with("limiter", o.limiter.name())
    .with("block_threads", block_threads)
    .with("registers", k.registers)
    .with("shared_bytes", k.shared_bytes)
    .with("bound", bound);
    if let Some(g) = geometry {
        finding = finding
            .with("grid_blocks", g.grid_blocks)
            .with("sm_count", g.sm_count);
    }
    finding
}

fn round_up(value: u32, unit: u32) -> u32 {
    if unit == 0 {
        value
    } else {
        value.div_ceil(unit) * unit
    }
}

fn round1(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retune::cuda_tools::{merge_ptxas, parse_ptxas_log, parse_resource_usage};

    const MANY_USAGE: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-cuda-11.8-many-kernels/cuobjdump-dump-resource-usage.txt"
    ));
    const MANY_LOG: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-cuda-11.8-many-kernels/nvcc-Xptxas-v-build.log"
    ));

    fn at(arch: &str, block_threads: u32, registers: u32, shared: u32) -> Occupancy {
        let l = limits(arch).unwrap();
        occupancy(
            &l,
            &LaunchConfig {
                block_threads,
                registers_per_thread: registers,
                shared_bytes_per_block: shared,
            },
        )
        .unwrap()
    }

    fn kernel(name: &str, arch: &str, registers: u32, spill: u32, shared: u32) -> KernelResources {
        KernelResources {
            name: name.into(),
            arch: arch.into(),
            registers,
            sgprs: 0,
            stack_bytes: spill,
            spill_bytes: spill,
            shared_bytes: shared,
            max_block_threads: None,
            wavefront_size: None,
        }
    }

    #[test]
    fn the_issue_cases_on_sm_89() {
        // 255 registers → 256 per thread, 8192 per warp: 2 warps per sub-partition, 8 warps.
        let o = at("sm_89", 128, 255, 0);
        assert_eq!((o.active_blocks_per_sm, o.active_warps_per_sm), (2, 8));
        assert_eq!(o.occupancy_pct, 16.7);
        assert_eq!(o.limiter, Limiter::Registers);
        let o = at("sm_89", 128, 96, 0);
        assert_eq!((o.active_blocks_per_sm, o.active_warps_per_sm), (5, 20));
        assert_eq!(o.occupancy_pct, 41.7);
        assert_eq!(o.limiter, Limiter::Registers);
    }

    #[test]
    fn the_programming_guide_table() {
        let expect = [
            ("sm_50", 64, 32),
            ("sm_61", 64, 32),
            ("sm_70", 64, 32),
            ("sm_75", 32, 16),
            ("sm_80", 64, 32),
            ("sm_86", 48, 16),
            ("sm_87", 48, 16),
            ("sm_89", 48, 24),
            ("sm_90", 64, 32),
            ("sm_100", 64, 32),
            ("sm_120", 48, 32),
        ];
        for (arch, warps, blocks) in expect {
            let l = limits(arch).unwrap();
            assert_eq!(
                (l.max_warps_per_sm, l.max_blocks_per_sm),
                (warps, blocks),
                "{arch}"
            );
            assert_eq!(l.registers_per_sm, 65536, "{arch}");
            assert_eq!(l.max_registers_per_thread, 255, "{arch}");
        }
        assert_eq!(limits("8.9").unwrap().arch, "sm_89");
        assert_eq!(limits("compute_90").unwrap().shared_bytes_per_sm, 233472);
        assert_eq!(limits("sm_90a").unwrap().arch, "sm_90");
        assert_eq!(limits("sm_80").unwrap().max_shared_bytes_per_block, 166912);
        assert_eq!(
            limits("sm_89").unwrap().reserved_shared_bytes_per_block,
            1024
        );
        assert_eq!(limits("sm_75").unwrap().reserved_shared_bytes_per_block, 0);
        assert!(limits("sm_35").is_none());
        assert!(limits("gfx90a").is_none());
    }

    #[test]
    fn the_hardware_limits_bind_light_kernels() {
        // 32-thread blocks of a light kernel: the resident-block limit binds (16 on sm_86).
        let o = at("sm_86", 32, 16, 0);
        assert_eq!((o.active_blocks_per_sm, o.limiter), (16, Limiter::Blocks));
        assert_eq!(o.occupancy_pct, 33.3);
        // 1024-thread blocks: warps bind (2 on sm_80, 1 on sm_86 with 48 warps).
        let o = at("sm_80", 1024, 32, 0);
        assert_eq!(
            (o.active_blocks_per_sm, o.limiter, o.occupancy_pct),
            (2, Limiter::Warps, 100.0)
        );
        let o = at("sm_86", 1024, 32, 0);
        assert_eq!((o.active_blocks_per_sm, o.occupancy_pct), (1, 66.7));
        // 256 threads at 32 registers on sm_89: 6 blocks by warps, 8 by registers → warps.
        let o = at("sm_89", 256, 32, 0);
        assert_eq!(
            (o.active_blocks_per_sm, o.blocks_by_registers, o.limiter),
            (6, 8, Limiter::Warps)
        );
        assert_eq!(o.occupancy_pct, 100.0);
    }

    #[test]
    fn shared_memory_counts_the_driver_reserve_and_the_allocation_unit() {
        // 48 KiB + 1 KiB reserve on sm_89: 100 KiB / 49 KiB = 2 blocks.
        let o = at("sm_89", 128, 32, 48 * 1024);
        assert_eq!((o.blocks_by_shared, o.limiter), (2, Limiter::SharedMemory));
        // Without the reserve it would be 2 as well; at 24 KiB: 100 / 25 = 4, not 100 / 24 = 4.16.
        assert_eq!(at("sm_89", 128, 32, 24 * 1024).blocks_by_shared, 4);
        // 24577 B rounds to 24704 + 1024 = 25728… 102400 / 25728 = 3.
        assert_eq!(at("sm_89", 128, 32, 24 * 1024 + 1).blocks_by_shared, 3);
        // No shared memory on sm_75 (no reserve): shared does not limit.
        let o = at("sm_75", 64, 32, 0);
        assert_eq!(o.blocks_by_shared, o.blocks_by_limit);
        // sm_80 with no shared memory still pays the 1 KiB reserve: 164 blocks' worth, no limit.
        assert_eq!(at("sm_80", 64, 32, 0).blocks_by_shared, 164);
    }

    #[test]
    fn register_rounding_per_warp_and_sub_partition() {
        // 64 registers: 2048 per warp, 8 per sub-partition → 32 warps; 128 threads → 8 blocks.
        assert_eq!(at("sm_80", 128, 64, 0).blocks_by_registers, 8);
        // 65 → 72 per thread: 2304 per warp, 7 per sub-partition → 28 warps → 7 blocks.
        assert_eq!(at("sm_80", 128, 65, 0).blocks_by_registers, 7);
        // Cap for one more block at 128 threads on sm_89 from 2 blocks (255 regs): 3 blocks
        // need ≤ 3 warps per sub-partition → 16384 / 3 = 5461 → 5376 per warp → 168 registers.
        assert_eq!(
            max_registers_for_blocks(&limits("sm_89").unwrap(), 128, 3),
            Some(168)
        );
        assert_eq!(at("sm_89", 128, 168, 0).active_blocks_per_sm, 3);
        assert_eq!(at("sm_89", 128, 169, 0).active_blocks_per_sm, 2);
        // And from 5 blocks at 96 registers, 6 blocks need 80.
        assert_eq!(
            max_registers_for_blocks(&limits("sm_89").unwrap(), 128, 6),
            Some(80)
        );
        assert_eq!(at("sm_89", 128, 80, 0).active_blocks_per_sm, 6);
    }

    #[test]
    fn launches_that_cannot_happen_are_errors() {
        let l = limits("sm_89").unwrap();
        let config = |block_threads, registers_per_thread, shared_bytes_per_block| LaunchConfig {
            block_threads,
            registers_per_thread,
            shared_bytes_per_block,
        };
        assert_eq!(
            occupancy(&l, &config(0, 32, 0)),
            Err(OccupancyError::ZeroBlock)
        );
        assert!(matches!(
            occupancy(&l, &config(1025, 32, 0)),
            Err(OccupancyError::BlockTooLarge {
                block_threads: 1025,
                max: 1024
            })
        ));
        assert!(matches!(
            occupancy(&l, &config(128, 256, 0)),
            Err(OccupancyError::TooManyRegistersPerThread { .. })
        ));
        assert!(matches!(
            occupancy(&l, &config(128, 32, 100 * 1024)),
            Err(OccupancyError::TooMuchSharedMemory { .. })
        ));
        // 1024 threads at 255 registers: 262144 registers for one block.
        let error = occupancy(&l, &config(1024, 255, 0)).unwrap_err();
        assert_eq!(
            error,
            OccupancyError::TooManyRegistersPerBlock {
                registers: 262144,
                max: 65536
            }
        );
        assert!(
            error.to_string().contains("too many resources requested"),
            "{error}"
        );
        // 1024 threads at 64 registers fit exactly: 65536.
        assert_eq!(
            occupancy(&l, &config(1024, 64, 0))
                .unwrap()
                .active_blocks_per_sm,
            1
        );
    }

    #[test]
    fn findings_for_the_recorded_kernels_on_sm_89() {
        let kernels = merge_ptxas(
            &parse_resource_usage(MANY_USAGE),
            &parse_ptxas_log(MANY_LOG),
        );
        let l = limits("sm_89").unwrap();
        let of = |name: &str| {
            let k = kernels
                .iter()
                .find(|k| k.name == name && k.arch == "sm_89")
                .unwrap();
            kernel_findings(
                k,
                &l,
                128,
                None,
                "cuobjdump --dump-resource-usage many_kernels.o",
            )
        };

        let spilling = of("_Z17dot_acc96_boundedPKdS0_Pdi");
        assert_eq!(spilling[0].check, "registers");
        assert_eq!(spilling[0].subject, "_Z17dot_acc96_boundedPKdS0_Pdi@sm_89");
        assert_eq!(spilling[0].severity, Severity::Warn);
        assert!(
            spilling[0].verdict.contains("spills 1544 B per thread"),
            "{}",
            spilling[0].verdict
        );
        assert_eq!(spilling[0].evidence["spill_bytes"], 1544);
        assert_eq!(spilling[0].evidence["stack_bytes"], 928);
        assert_eq!(
            spilling[0].command,
            "cuobjdump --dump-resource-usage many_kernels.o"
        );
        // 64 registers at 128 threads: 8 blocks by registers, 12 by warps → 32 of 48.
        assert_eq!(spilling[1].evidence["occupancy_pct"], 66.7);
        assert_eq!(spilling[1].severity, Severity::Ok);

        let wide = of("_Z9dot_acc96PKdS0_Pdi");
        assert_eq!(
            wide[0].severity,
            Severity::Warn,
            "254 registers is in the last step"
        );
        assert!(
            wide[0].verdict.contains("at the 255-register cap"),
            "{}",
            wide[0].verdict
        );
        assert_eq!(wide[1].severity, Severity::Warn);
        assert_eq!(wide[1].evidence["occupancy_pct"], 16.7);
        assert_eq!(wide[1].evidence["limiter"], "registers");
        assert_eq!(wide[1].evidence["bound"], "unknown");
        assert_eq!(wide[1].evidence["blocks_per_sm"], 2);
        assert!(
            wide[1]
                .verdict
                .contains("at most 168 registers would give 3 blocks"),
            "{}",
            wide[1].verdict
        );
        assert_eq!(wide[1].command, "calculated");

        let local = of("_Z13indexed_localPKiPfi");
        assert_eq!(local[0].severity, Severity::Ok);
        assert!(
            local[0].verdict.contains("1024 B stack frame"),
            "{}",
            local[0].verdict
        );

        let acc32 = of("_Z9dot_acc32PKdS0_Pdi");
        assert_eq!(acc32[1].evidence["occupancy_pct"], 41.7);
        assert_eq!(acc32[1].severity, Severity::Ok, "41.7% is not low");

        let tile = kernels
            .iter()
            .find(|k| k.name == "_Z9tile_blurPKfPfi" && k.arch == "sm_89")
            .unwrap();
        let tile = kernel_findings(tile, &l, 256, None, "c");
        // 9224 + 1024 → 10368 B: 9 blocks by shared memory; 6 by warps → warps.
        assert_eq!(tile[1].evidence["limiter"], "warps");
        assert_eq!(tile[1].evidence["occupancy_pct"], 100.0);
    }

    #[test]
    fn grid_bound_launches_do_not_warn_about_registers() {
        let l = limits("sm_90").unwrap();
        let k = kernel("_Z9ssim_rowsPKfPfii", "sm_90", 255, 0, 0);
        let few = LaunchGeometry {
            grid_blocks: 66,
            block_threads: 128,
            sm_count: 132,
        };
        let f = &kernel_findings(&k, &l, 256, Some(&few), "c")[1];
        assert_eq!(f.severity, Severity::Ok);
        assert_eq!(f.evidence["bound"], "grid");
        assert_eq!(
            f.evidence["block_threads"], 128,
            "the launch's block size wins"
        );
        assert!(
            f.verdict.contains("grid-bound: 66 blocks for 132 SMs; a register cut will not help (the fork measured __launch_bounds__ as a 3.4% regression)"),
            "{}",
            f.verdict
        );
        // 200 blocks on 132 SMs at 2 per SM: all resident at once, still grid-bound.
        let fits = LaunchGeometry {
            grid_blocks: 200,
            ..few
        };
        let f = &kernel_findings(&k, &l, 128, Some(&fits), "c")[1];
        assert_eq!(
            (f.severity, &f.evidence["bound"]),
            (Severity::Ok, &serde_json::json!("grid"))
        );
        // 10000 blocks: occupancy-bound, warn.
        let many = LaunchGeometry {
            grid_blocks: 10_000,
            ..few
        };
        let f = &kernel_findings(&k, &l, 128, Some(&many), "c")[1];
        assert_eq!(f.severity, Severity::Warn);
        assert_eq!(f.evidence["bound"], "occupancy");
        assert_eq!(f.evidence["grid_blocks"], 10_000);
        assert_eq!(f.evidence["occupancy_pct"], 12.5);
    }

    #[test]
    fn an_impossible_launch_fails_only_when_it_is_the_real_one() {
        let l = limits("sm_89").unwrap();
        let k = kernel("k", "sm_89", 255, 0, 0);
        let guess = &kernel_findings(&k, &l, 1024, None, "c")[1];
        assert_eq!(guess.severity, Severity::Warn);
        let real = LaunchGeometry {
            grid_blocks: 1000,
            block_threads: 1024,
            sm_count: 128,
        };
        let real = &kernel_findings(&k, &l, 128, Some(&real), "c")[1];
        assert_eq!(real.severity, Severity::Fail);
        assert!(
            real.verdict.contains("too many resources requested"),
            "{}",
            real.verdict
        );
    }
}
