//! `abfleet occupancy`: the theoretical occupancy of one kernel launch and what limits it,
//! from the same calculators the retuning checks use (core::retune).

use abfleet_core::retune::{amd_occupancy, cuda_occupancy};

use crate::cli::ListFormat;
pub use crate::cli::OccupancyArgs;
use crate::failure::Failure;

/// One launch's occupancy, for people and for scripts.
struct Reading {
    text: String,
    json: serde_json::Value,
}

pub fn run(args: &OccupancyArgs) -> Result<i32, Failure> {
    let reading = if args.arch.starts_with("gfx") {
        amd(args)?
    } else {
        cuda(args)?
    };
    match args.format {
        ListFormat::Text => println!("{}", reading.text),
        ListFormat::Json => println!("{}", reading.json),
    }
    Ok(abfleet_core::exit::OK)
}

fn cuda(args: &OccupancyArgs) -> Result<Reading, Failure> {
    let limits = cuda_occupancy::limits(&args.arch).ok_or_else(|| {
        Failure::usage(anyhow::anyhow!(
            "unknown CUDA architecture `{}`; use sm_XY (sm_50 … sm_120) or gfxNNN for AMD",
            args.arch
        ))
    })?;
    let regs = args.regs.ok_or_else(|| {
        Failure::usage(anyhow::anyhow!(
            "--regs is required for a CUDA architecture (registers per thread, from `cuobjdump --dump-resource-usage` or `-Xptxas -v`)"
        ))
    })?;
    let occupancy = cuda_occupancy::occupancy(
        &limits,
        &cuda_occupancy::LaunchConfig {
            block_threads: args.block,
            registers_per_thread: regs,
            shared_bytes_per_block: args.smem,
        },
    )
    .map_err(|err| Failure::usage(anyhow::anyhow!("{err}")))?;
    let json = serde_json::json!({
        "vendor": "nvidia",
        "arch": args.arch,
        "block_threads": args.block,
        "registers_per_thread": regs,
        "shared_bytes_per_block": args.smem,
        "active_blocks_per_sm": occupancy.active_blocks_per_sm,
        "active_warps_per_sm": occupancy.active_warps_per_sm,
        "max_warps_per_sm": occupancy.max_warps_per_sm,
        "occupancy_pct": occupancy.occupancy_pct,
        "limiter": occupancy.limiter.name(),
        "blocks_per_sm_by": {
            "warps": occupancy.blocks_by_warps,
            "registers": occupancy.blocks_by_registers,
            "shared_memory": occupancy.blocks_by_shared,
            "block_limit": occupancy.blocks_by_limit,
        },
    });
    let text = format!(
        "{}: {} threads/block, {regs} registers/thread, {} B shared/block\n\
         {} blocks/SM = {} of {} warps = {:.1}% theoretical occupancy\n\
         limited by {} (blocks/SM by warps {}, by registers {}, by shared memory {}, by the block limit {})",
        args.arch,
        args.block,
        args.smem,
        occupancy.active_blocks_per_sm,
        occupancy.active_warps_per_sm,
        occupancy.max_warps_per_sm,
        occupancy.occupancy_pct,
        occupancy.limiter.name(),
        occupancy.blocks_by_warps,
        occupancy.blocks_by_registers,
        occupancy.blocks_by_shared,
        occupancy.blocks_by_limit,
    );
    Ok(Reading { text, json })
}

fn amd(args: &OccupancyArgs) -> Result<Reading, Failure> {
    let limits = amd_occupancy::limits(&args.arch).ok_or_else(|| {
        Failure::usage(anyhow::anyhow!(
            "unknown AMD architecture `{}`; known: gfx908, gfx90a, gfx940, gfx941, gfx942, gfx1030, gfx1036, gfx1100, gfx1101, gfx1102",
            args.arch
        ))
    })?;
    let vgprs = args.vgprs.ok_or_else(|| {
        Failure::usage(anyhow::anyhow!(
            "--vgprs is required for an AMD architecture (from the code object's .vgpr_count: llvm-readelf --notes)"
        ))
    })?;
    let occupancy =
        amd_occupancy::waves_per_simd(&limits, vgprs, args.sgprs, args.smem, args.block)
            .map_err(|err| Failure::usage(anyhow::anyhow!("{err}")))?;
    let json = serde_json::json!({
        "vendor": "amd",
        "arch": args.arch,
        "wave_size": limits.wave_size,
        "block_threads": args.block,
        "vgprs": vgprs,
        "sgprs": args.sgprs,
        "lds_bytes_per_block": args.smem,
        "waves_per_simd": occupancy.waves_per_simd,
        "max_waves_per_simd": occupancy.max_waves_per_simd,
        "occupancy_pct": occupancy.occupancy_pct,
        "limiter": occupancy.limiter.name(),
        "waves_per_simd_by": {
            "vgprs": occupancy.by_vgprs,
            "sgprs": occupancy.by_sgprs,
            "lds": occupancy.by_lds,
            "slots": occupancy.by_slots,
        },
    });
    let text = format!(
        "{} (wave{}): {} work-items/workgroup, {vgprs} VGPRs, {} SGPRs, {} B LDS/workgroup\n\
         {} of {} waves per SIMD = {:.1}% occupancy\n\
         limited by {} (waves/SIMD by VGPRs {}, by SGPRs {}, by LDS {}, by slots {})",
        args.arch,
        limits.wave_size,
        args.block,
        args.sgprs,
        args.smem,
        occupancy.waves_per_simd,
        occupancy.max_waves_per_simd,
        occupancy.occupancy_pct,
        occupancy.limiter.name(),
        occupancy.by_vgprs,
        occupancy.by_sgprs,
        occupancy.by_lds,
        occupancy.by_slots,
    );
    Ok(Reading { text, json })
}
