//! The A/B cells of a CPU generation: every fixture × workload, each timed with the fork's
//! discipline (a discarded warm-up per side, then pairs of one run of each side in a seeded
//! balanced order, more pairs while the verdict is unsure), the load average and host noise
//! sampled around the cell, the scores parsed, parity evaluated, and each finished cell
//! emitted as an event. A resumed attempt skips the cells the coordinator kept from earlier
//! attempts (`JobContext::kept_cells`) and measures the rest.

use std::path::Path;
use std::time::Duration;

use abfleet_core::cell::{
    CellInput, CellParity, CellResult, RunCommand, SideMeasurement, SideStatus,
};
use abfleet_core::events::{JobEventPayload, Side};
use abfleet_core::paired::{self, AdaptiveBounds, AnalysisConfig, Order, Pair, StopReason};
use abfleet_core::scores::Scores;
use abfleet_core::spec::{FixtureSpec, JobSpec, WorkloadSpec};
use tracing::info;

use crate::build::BuiltSide;
use crate::command_line::cell_command_line;
use crate::context::{
    attempt_dir, check_cancel, emit, off_runtime, progress, quiet_for_cell, read_scores,
    JobContext, OutputLimit, Stop,
};
use crate::fixtures::PreparedFixture;
use crate::runner::{self, CommandSpec, ExitKind};
use crate::{loadavg, noise};

/// How much of a failing run's output goes into the report.
const STDERR_TAIL_BYTES: u64 = 1500;

/// What the cells came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CellsSummary {
    pub cells: u32,
    pub not_measured: u32,
    /// Cells earlier attempts stored, not measured again.
    pub kept: u32,
}

impl CellsSummary {
    /// The progress line a finished job ends with: never "all measured" when some were not.
    pub fn summary(&self) -> String {
        let CellsSummary {
            cells,
            not_measured,
            kept,
        } = *self;
        if kept > 0 {
            format!(
                "{kept} of {cells} cells kept from earlier attempts, {} measured, {not_measured} not",
                cells - kept - not_measured
            )
        } else if not_measured == 0 {
            format!("all {cells} cells measured")
        } else {
            format!(
                "{} of {cells} cells measured, {not_measured} not (the report says why)",
                cells - not_measured
            )
        }
    }
}

/// Times every cell with the two built sides, in spec order.
pub(crate) async fn run_cells(
    ctx: &mut JobContext,
    prepared: &[PreparedFixture],
    built: &[BuiltSide; 2],
) -> Result<CellsSummary, Stop> {
    let spec = ctx.spec.clone();
    let (upstream, fork) = (&built[0], &built[1]);
    let mut index = 0u32;
    let mut not_measured = 0u32;
    let mut kept = 0u32;
    if !ctx.kept_cells.is_empty() {
        let line = format!(
            "resuming attempt {}: {} cell(s) kept from earlier attempts ({:?}), measuring the other {}",
            ctx.attempt,
            ctx.kept_cells.len(),
            ctx.kept_cells,
            spec.cell_count().saturating_sub(ctx.kept_cells.len())
        );
        info!(job_id = %ctx.job_id, attempt = ctx.attempt, kept = ctx.kept_cells.len(), "resuming");
        emit(
            ctx,
            JobEventPayload::Log {
                level: abfleet_core::events::LogLevel::Info,
                line,
            },
        )?;
    }
    for (fixture, paths) in spec.fixtures.iter().zip(prepared) {
        for workload in &spec.workloads {
            if ctx.kept_cells.contains(&index) {
                kept += 1;
                index += 1;
                continue;
            }
            check_cancel(ctx)?;
            let label = format!("{}/{}", fixture.name, workload.name);
            progress(
                ctx,
                "timing",
                format!("timing {label}"),
                index,
                Some(label.clone()),
            )?;
            // Quiet from the host sample before the warm-ups to the one after the last run.
            let quiet = quiet_for_cell(ctx).await?;
            let input = measure_cell(ctx, index, fixture, paths, workload, upstream, fork).await?;
            drop(quiet);
            let cell = CellResult::evaluate(input, &spec);
            info!(cell = %label, parity = ?cell.parity, speedup = ?cell.speedup, "cell finished");
            if cell.parity == CellParity::Unavailable {
                not_measured += 1;
            }
            emit(ctx, JobEventPayload::Cell(Box::new(cell)))?;
            index += 1;
        }
    }
    Ok(CellsSummary {
        cells: index,
        not_measured,
        kept,
    })
}

/// One side's state while a cell is measured.
struct SideRun<'a> {
    side: Side,
    built: &'a BuiltSide,
    measurement: SideMeasurement,
    active: bool,
    /// Wall seconds of every run of this side in the cell, warm-ups and failed runs included.
    runs_wall_s: f64,
}

async fn measure_cell(
    ctx: &mut JobContext,
    index: u32,
    fixture: &FixtureSpec,
    paths: &PreparedFixture,
    workload: &WorkloadSpec,
    upstream: &BuiltSide,
    fork: &BuiltSide,
) -> Result<CellInput, Stop> {
    let out_dir = attempt_dir(ctx, &format!("cell-{index:03}"))?;
    let mut sides = [upstream, fork].map(|built| {
        let side = built.record.side;
        let (measurement, active) = match (&built.binary, built.record.status) {
            (Some(_), _) => (empty_measurement(), true),
            (None, _) => (
                SideMeasurement::unavailable(format!(
                    "not measured: the {} build failed ({})",
                    side.name(),
                    built.record.error.as_deref().unwrap_or("see the build log")
                )),
                false,
            ),
        };
        SideRun {
            side,
            built,
            measurement,
            active,
            runs_wall_s: 0.0,
        }
    });
    // A cell with one side unbuildable is not timed at all: it would compare nothing. Both
    // sides then carry the same reason, the failed build, so the report can say it once.
    if let Some(reason) = sides
        .iter()
        .find(|s| !s.active)
        .and_then(|s| s.measurement.error.clone())
    {
        for side in sides.iter_mut().filter(|s| s.active) {
            side.measurement = SideMeasurement::unavailable(reason.clone());
            side.active = false;
        }
    }
    // The cell's overhead is timed from here to after the last host sample.
    let cell_started = std::time::Instant::now();
    // /proc is read off the async runtime, before the warm-ups and after the last run.
    let (load_before, host_sample) =
        off_runtime(|| (loadavg::one_minute(), noise::HostSample::take())).await?;
    let runner_ctx = RunContext {
        fixture,
        paths,
        workload,
        out_dir: &out_dir,
    };
    for side in sides.iter_mut() {
        for warmup in 0..ctx.spec.measure.warmup {
            if !side.active {
                break;
            }
            let label = format!("warmup{warmup}");
            let result = run_once(ctx, &runner_ctx, side.side, side.built, &label).await?;
            record(side, result, true);
        }
    }
    let timed = time_pairs(ctx, index, &runner_ctx, &mut sides).await?;
    let (load_after, host_flags) =
        off_runtime(move || (loadavg::one_minute(), host_sample.flags_since())).await?;
    let overhead_seconds =
        cell_started.elapsed().as_secs_f64() - sides.iter().map(|s| s.runs_wall_s).sum::<f64>();
    let [upstream_run, fork_run] = sides;
    Ok(CellInput {
        index,
        fixture: fixture.name.clone(),
        workload: workload.name.clone(),
        upstream: upstream_run.measurement,
        fork: fork_run.measurement,
        load_avg_1min: [load_before, load_after],
        idle_cores: f64::from(
            ctx.host
                .logical_cores
                .saturating_sub(ctx.spec.measure.threads),
        ),
        host_flags,
        seed: timed.seed,
        run_order: timed.order,
        stop_reason: timed.stop_reason,
        overhead_seconds: Some(overhead_seconds),
    })
}

/// Which side runs first in a pair: indexes into `[upstream, fork]`.
fn pair_sequence(order: Order) -> [usize; 2] {
    match order {
        Order::UpstreamFirst => [0, 1],
        Order::ForkFirst => [1, 0],
    }
}

/// How the timed pairs of a cell went.
struct TimedPairs {
    seed: u64,
    order: Vec<Order>,
    stop_reason: StopReason,
}

/// Timed pairs in a seeded, balanced random order (upstream first or fork first per pair),
/// and, when the spec allows more pairs than `runs`, more pairs while the verdict is unsure.
async fn time_pairs(
    ctx: &mut JobContext,
    index: u32,
    runner_ctx: &RunContext<'_>,
    sides: &mut [SideRun<'_>; 2],
) -> Result<TimedPairs, Stop> {
    let measure = ctx.spec.measure.clone();
    let seed = abfleet_core::paired::cell_seed(measure.seed, index);
    let mut order = paired::run_order(seed, measure.runs as usize);
    let adaptive = measure.max_runs > measure.runs;
    let bounds = AdaptiveBounds {
        min_pairs: measure.runs,
        max_pairs: measure.max_runs,
        max_seconds: measure.max_cell_seconds,
    };
    let config = analysis_config(&ctx.spec, seed);
    if sides.iter().any(|s| !s.active) {
        return time_one_side(ctx, runner_ctx, sides, seed).await;
    }
    let started = std::time::Instant::now();
    let mut done = 0usize;
    loop {
        while done < order.len() {
            for side_index in pair_sequence(order[done]) {
                let side = &mut sides[side_index];
                if !side.active {
                    continue;
                }
                let label = format!("run{done}");
                let result = run_once(ctx, runner_ctx, side.side, side.built, &label).await?;
                record(side, result, false);
            }
            done += 1;
        }
        if sides.iter().any(|s| !s.active) {
            // A side failed during the timed runs: what is left is not a pair.
            return Ok(TimedPairs {
                seed,
                order: Vec::new(),
                stop_reason: StopReason::OneSided,
            });
        }
        if !adaptive {
            return Ok(TimedPairs {
                seed,
                order,
                stop_reason: StopReason::NotAdaptive,
            });
        }
        let pairs = paired_times(sides);
        let analysis = paired::analyse(&pairs, &config);
        let elapsed_s = started.elapsed().as_secs_f64();
        let stop = paired::next_step(analysis.as_ref(), done as u32, elapsed_s, &bounds);
        if let Some(stop_reason) = stop {
            return Ok(TimedPairs {
                seed,
                order,
                stop_reason,
            });
        }
        // Two more pairs, one of each order, so every even count stays balanced.
        let extra_seed = seed.wrapping_add(done as u64);
        let room = (measure.max_runs as usize).saturating_sub(order.len());
        if room == 0 {
            return Ok(TimedPairs {
                seed,
                order,
                stop_reason: StopReason::MaxPairs,
            });
        }
        order.extend(paired::run_order(extra_seed, 2).into_iter().take(room));
    }
}

/// A cell whose other side is absent or unavailable: the side that runs takes `runs` timed
/// runs alone (its own median and spread), with no run order and no pairs.
async fn time_one_side(
    ctx: &mut JobContext,
    runner_ctx: &RunContext<'_>,
    sides: &mut [SideRun<'_>; 2],
    seed: u64,
) -> Result<TimedPairs, Stop> {
    for run in 0..ctx.spec.measure.runs {
        for side in sides.iter_mut().filter(|s| s.active) {
            let label = format!("run{run}");
            let result = run_once(ctx, runner_ctx, side.side, side.built, &label).await?;
            record(side, result, false);
        }
    }
    Ok(TimedPairs {
        seed,
        order: Vec::new(),
        stop_reason: StopReason::OneSided,
    })
}

fn paired_times(sides: &[SideRun<'_>; 2]) -> Vec<Pair> {
    sides[0]
        .measurement
        .times
        .iter()
        .zip(&sides[1].measurement.times)
        .map(|(&upstream_s, &fork_s)| Pair { upstream_s, fork_s })
        .collect()
}

fn analysis_config(spec: &JobSpec, seed: u64) -> AnalysisConfig {
    AnalysisConfig {
        practical_threshold: spec.measure.practical_threshold,
        seed,
        ..AnalysisConfig::default()
    }
}

fn empty_measurement() -> SideMeasurement {
    SideMeasurement {
        status: SideStatus::Ok,
        times: Vec::new(),
        cpu_times: Vec::new(),
        warmup_times: Vec::new(),
        scores: None,
        returncode: Some(0),
        error: None,
        stderr_tail: None,
        command: None,
    }
}

struct RunContext<'a> {
    fixture: &'a FixtureSpec,
    paths: &'a PreparedFixture,
    workload: &'a WorkloadSpec,
    out_dir: &'a Path,
}

/// What one run of one side showed, and the command that showed it.
struct RunOutcome {
    command: RunCommand,
    result: RunResult,
    /// The run's wall seconds as the runner timed it, whatever its result.
    wall_s: f64,
}

enum RunResult {
    Scored {
        wall_s: f64,
        cpu_s: f64,
        scores: Scores,
    },
    Absent {
        code: i32,
        stderr_tail: String,
    },
    Failed {
        returncode: Option<i32>,
        error: String,
        stderr_tail: String,
    },
}

fn record(side: &mut SideRun<'_>, run: RunOutcome, warmup: bool) {
    let RunOutcome {
        command,
        result,
        wall_s: run_wall_s,
    } = run;
    side.runs_wall_s += run_wall_s;
    let keep_command = !warmup || !matches!(result, RunResult::Scored { .. });
    let m = &mut side.measurement;
    match result {
        RunResult::Scored {
            wall_s,
            cpu_s,
            scores,
        } => {
            if warmup {
                m.warmup_times.push(wall_s);
            } else {
                m.times.push(wall_s);
                m.cpu_times.push(cpu_s);
                if m.scores.is_none() {
                    m.scores = Some(scores);
                }
            }
        }
        RunResult::Absent { code, stderr_tail } => {
            *m = SideMeasurement {
                status: SideStatus::Absent,
                returncode: Some(code),
                stderr_tail: Some(stderr_tail),
                ..SideMeasurement::unavailable(format!("absent: rejected the workload (exit code {code}), the feature does not exist on this side"))
            };
            side.active = false;
        }
        RunResult::Failed {
            returncode,
            error,
            stderr_tail,
        } => {
            *m = SideMeasurement {
                returncode,
                stderr_tail: Some(stderr_tail),
                ..SideMeasurement::unavailable(error)
            };
            side.active = false;
        }
    }
    if keep_command && m.command.is_none() {
        m.command = Some(command);
    }
}

async fn run_once(
    ctx: &mut JobContext,
    run: &RunContext<'_>,
    side: Side,
    built: &BuiltSide,
    label: &str,
) -> Result<RunOutcome, Stop> {
    let binary = built.binary.as_ref().expect("only built sides run");
    let format = ctx.spec.command.output_format;
    let output = run
        .out_dir
        .join(format!("{}-{label}.{}", side.name(), format.extension()));
    let log = run.out_dir.join(format!("{}-{label}.log", side.name()));
    let _ = std::fs::remove_file(&output);
    let _ = std::fs::remove_file(&log);
    let argv = ctx.run_line(command_line(&ctx.spec, binary, run, &output));
    let outcome = runner::run(
        CommandSpec {
            argv: &argv,
            cwd: Some(&built.tree),
            env: &Default::default(),
            log_path: &log,
            timeout: Duration::from_secs_f64(ctx.spec.measure.timeout_seconds),
        },
        &mut ctx.cancel,
    )
    .await;
    let stderr_tail = || runner::tail(&log, STDERR_TAIL_BYTES);
    let command = RunCommand {
        argv: argv.clone(),
        cwd: built.tree.display().to_string(),
    };
    let result = match &outcome.exit {
        ExitKind::Cancelled => return Err(Stop::Cancelled),
        ExitKind::Code(code) if *code == ctx.spec.command.unknown_feature_exit_code => {
            RunResult::Absent { code: *code, stderr_tail: stderr_tail() }
        }
        exit if !exit.success() => RunResult::Failed {
            returncode: exit.code(),
            error: format!("the {} binary {}", side.name(), exit.describe()),
            stderr_tail: stderr_tail(),
        },
        _ => match read_scores(
            format,
            &output,
            &OutputLimit::for_fixture(ctx.spec.measure.max_output_bytes, run.fixture),
        )
        .await
        {
            Ok(scores) if scores.frames.is_empty() => RunResult::Failed {
                returncode: Some(0),
                error: format!(
                    "the {} binary exited 0 but scored no frames (a feature that cannot load its model does this); see its stderr",
                    side.name()
                ),
                stderr_tail: stderr_tail(),
            },
            Ok(scores) => match run.workload.missing_expected(&scores) {
                Some(missing) => RunResult::Failed {
                    returncode: Some(0),
                    error: format!("the {} binary exited 0 but {missing}", side.name()),
                    stderr_tail: stderr_tail(),
                },
                None => RunResult::Scored { wall_s: outcome.wall_s, cpu_s: outcome.cpu_s, scores },
            },
            Err(error) => RunResult::Failed {
                returncode: Some(0),
                error: format!("the {} binary exited 0 but its output is unusable: {error}", side.name()),
                stderr_tail: stderr_tail(),
            },
        },
    };
    Ok(RunOutcome {
        command,
        result,
        wall_s: outcome.wall_s,
    })
}

/// The command template with its placeholders filled, then the workload's arguments.
fn command_line(spec: &JobSpec, binary: &Path, run: &RunContext<'_>, output: &Path) -> Vec<String> {
    cell_command_line(spec, binary, run.fixture, run.paths, run.workload, output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_runs_the_side_its_order_names_first() {
        assert_eq!(pair_sequence(Order::UpstreamFirst), [0, 1]);
        assert_eq!(pair_sequence(Order::ForkFirst), [1, 0]);
    }

    #[test]
    fn cell_seeds_are_replayable_and_differ_per_cell() {
        assert_eq!(
            abfleet_core::paired::cell_seed(42, 3),
            abfleet_core::paired::cell_seed(42, 3)
        );
        let seeds: std::collections::BTreeSet<u64> = (0..64)
            .map(|i| abfleet_core::paired::cell_seed(42, i))
            .collect();
        assert_eq!(seeds.len(), 64);
        assert_ne!(
            abfleet_core::paired::cell_seed(42, 0),
            abfleet_core::paired::cell_seed(43, 0)
        );
    }

    #[test]
    fn the_summary_never_says_all_measured_when_some_were_not() {
        let all = CellsSummary {
            cells: 24,
            not_measured: 0,
            kept: 0,
        };
        assert_eq!(all.summary(), "all 24 cells measured");
        let some = CellsSummary {
            cells: 24,
            not_measured: 24,
            kept: 0,
        };
        assert_eq!(
            some.summary(),
            "0 of 24 cells measured, 24 not (the report says why)"
        );
        let resumed = CellsSummary {
            cells: 4,
            not_measured: 0,
            kept: 2,
        };
        assert_eq!(
            resumed.summary(),
            "2 of 4 cells kept from earlier attempts, 2 measured, 0 not"
        );
    }
}
