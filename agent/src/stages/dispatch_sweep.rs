//! The CPU ISA dispatch sweep, run for real on every CPU generation: the fork's binary on one
//! fixture and workload, with the ISA restricted level by level through `--cpumask`, one
//! discarded warm-up per level, then rounds that visit every level in a rotating order so
//! drift hits all levels alike. The verdicts come from `core::retune::dispatch`.

use abfleet_core::retune::dispatch::{self, CpuFlags, LevelTiming};
use abfleet_core::spec::{default_levels, CpuDispatchSpec};
use tracing::info;

use crate::build::BuiltSide;
use crate::command_line::cell_command_line;
use crate::context::{
    attempt_dir, emit_checks, fork_binary_or_skip, off_runtime, progress, quiet_for_cell,
    JobContext, Stop,
};
use crate::fixtures::PreparedFixture;
use crate::fork_run::run_fork;
use crate::probe::cpu::parse_cpuinfo;
use crate::probe::outcome::Probe;

/// Times the sweep and emits its findings (and skipped checks).
pub(crate) async fn dispatch_sweep(
    ctx: &mut JobContext,
    sweep: &CpuDispatchSpec,
    prepared: &[PreparedFixture],
    fork: &BuiltSide,
) -> Result<(), Stop> {
    let Some(binary) = fork_binary_or_skip(ctx, fork, "dispatch")? else {
        return Ok(());
    };
    let spec = ctx.spec.clone();
    let index = spec
        .fixtures
        .iter()
        .position(|f| f.name == sweep.fixture)
        .expect("the spec validated the sweep's fixture");
    let (fixture, paths) = (&spec.fixtures[index], &prepared[index]);
    let workload = spec
        .workloads
        .iter()
        .find(|w| w.name == sweep.workload)
        .expect("the spec validated the sweep's workload");
    let levels = if sweep.levels.is_empty() {
        default_levels(std::env::consts::ARCH)
    } else {
        sweep.levels.clone()
    };
    let out_dir = attempt_dir(ctx, "dispatch")?;
    progress(
        ctx,
        "retune",
        format!(
            "cpu dispatch sweep: {} on {} at {} levels",
            workload.name,
            fixture.name,
            levels.len()
        ),
        spec.cell_count() as u32,
        Some(format!("dispatch/{}/{}", fixture.name, workload.name)),
    )?;
    let output = out_dir.join(format!("out.{}", spec.command.output_format.extension()));
    let log = out_dir.join("run.log");
    let base_argv = cell_command_line(&spec, &binary, fixture, paths, workload, &output);
    let Timed {
        timings,
        mut compiled,
    } = time_levels(ctx, sweep, &levels, &base_argv, fork, &output, &log).await?;
    if compiled.is_none() && !sweep.simd_info.is_empty() {
        let (template, binary, tree) = (sweep.simd_info.clone(), binary.clone(), fork.tree.clone());
        compiled = tokio::task::spawn_blocking(move || simd_info(&template, &binary, &tree))
            .await
            .ok()
            .flatten();
    }
    let flags = off_runtime(live_flags).await?;
    let supported = dispatch::supported_levels(&flags);
    let command = format!(
        "{} {} <cpumask> ({} on {}, {} timed runs per level)",
        binary.display(),
        sweep.cpumask_option,
        workload.name,
        fixture.name,
        sweep.runs
    );
    let results = dispatch::judge(
        &timings,
        compiled.as_deref(),
        &supported,
        &dispatch::Gate::of_spec(&spec),
        &command,
    );
    info!(
        findings = results.findings.len(),
        skipped = results.skipped.len(),
        "dispatch sweep finished"
    );
    emit_checks(ctx, results)?;
    Ok(())
}

/// Every level's timings, and the ISA levels the build says it has when a run said so.
struct Timed {
    timings: Vec<LevelTiming>,
    compiled: Option<Vec<String>>,
}

/// Round 0 warms every level up, rounds 1..=runs are timed, each round visiting the levels
/// in a rotated order; a level that fails is not run again.
async fn time_levels(
    ctx: &mut JobContext,
    sweep: &CpuDispatchSpec,
    levels: &[abfleet_core::spec::DispatchLevel],
    base_argv: &[String],
    fork: &BuiltSide,
    output: &std::path::Path,
    log: &std::path::Path,
) -> Result<Timed, Stop> {
    let mut timings: Vec<LevelTiming> = levels
        .iter()
        .map(|l| LevelTiming {
            name: l.name.clone(),
            cpumask: l.cpumask.clone(),
            ran: None,
            times: Vec::new(),
            scores: None,
            error: None,
        })
        .collect();
    let mut compiled: Option<Vec<String>> = None;
    // Quiet for every round: round 0 is the warm-up of every level, rounds 1..=runs are timed.
    let quiet = quiet_for_cell(ctx).await?;
    for round in 0..=sweep.runs {
        for offset in 0..levels.len() {
            let i = (offset + round as usize) % levels.len();
            if timings[i].error.is_some() {
                continue;
            }
            let mut argv = base_argv.to_vec();
            argv.push(sweep.cpumask_option.clone());
            argv.push(levels[i].cpumask.clone());
            let run = run_fork(ctx, &argv, &fork.tree, output, log).await?;
            let timing = &mut timings[i];
            if !run.usable() {
                timing.error = Some(run.failure());
                timing.times.clear();
                continue;
            }
            timing.ran = run.key("simd").or(timing.ran.take());
            if compiled.is_none() {
                compiled = simd_compiled(run.json.as_ref());
            }
            if round > 0 {
                timing.times.push(run.wall_s);
                if timing.scores.is_none() {
                    timing.scores = run.scores.ok();
                }
            }
        }
    }
    drop(quiet);
    Ok(Timed { timings, compiled })
}

fn simd_compiled(json: Option<&serde_json::Value>) -> Option<Vec<String>> {
    let list = json?
        .get("simd_compiled")
        .or_else(|| json?.get("compiled"))?;
    Some(
        list.as_array()?
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
    )
}

/// Runs the spec's `simd_info` command (`{binary}` filled in) and reads `{"compiled": [...]}`.
fn simd_info(
    template: &[String],
    binary: &std::path::Path,
    tree: &std::path::Path,
) -> Option<Vec<String>> {
    let argv: Vec<String> = template
        .iter()
        .map(|a| a.replace("{binary}", &binary.display().to_string()))
        .collect();
    let output = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(tree)
        .output()
        .ok()?;
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    simd_compiled(Some(&json))
}

/// The flags of the CPU the sweep really runs on: `/proc/cpuinfo` of this host, even when
/// the agent stands in for another host with `--probes`.
fn live_flags() -> CpuFlags {
    let Ok(text) = std::fs::read_to_string("/proc/cpuinfo") else {
        return CpuFlags::default();
    };
    match parse_cpuinfo(&text) {
        Probe::Found(cpu) => {
            let isa = &cpu.isa;
            CpuFlags {
                avx2: isa.avx2,
                fma: isa.fma,
                avx512: isa.avx512f && isa.avx512dq && isa.avx512bw && isa.avx512cd && isa.avx512vl,
                neon: isa.neon,
                sve2: isa.sve2,
            }
        }
        Probe::Absent { .. } => CpuFlags::default(),
    }
}
