//! One job, start to finish: fixtures, sources, builds, then every cell timed with the fork's
//! discipline (discarded warm-ups per side, timed runs interleaved upstream/fork so drift
//! hits both alike, load average around the cell), scores parsed, parity evaluated, and
//! each finished cell streamed as an event. "Done" goes out only after every earlier event
//! was acknowledged.

use std::path::{Path, PathBuf};
use std::time::Duration;

use abfleet_core::cell::{
    CellInput, CellParity, CellResult, RunCommand, SideMeasurement, SideStatus,
};
use abfleet_core::events::{BuildRecord, BuildStatus, JobEventPayload, JobOutcome, LogLevel, Side};
use abfleet_core::inventory::Inventory;
use abfleet_core::paired::{self, AdaptiveBounds, AnalysisConfig, Order, Pair, StopReason};
use abfleet_core::scores::Scores;
use abfleet_core::spec::{FixtureSpec, JobSpec, WorkloadSpec};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::build::{build_side, BuiltSide};
use crate::fixtures::{self, PreparedFixture};
use crate::runner::{self, CommandSpec, ExitKind};
use crate::sink::EventSink;
use crate::{loadavg, noise, source};

/// How much of a failing run's output goes into the report.
const STDERR_TAIL_BYTES: u64 = 1500;

pub struct JobContext {
    pub job_id: String,
    pub attempt: u32,
    pub spec: JobSpec,
    pub work_dir: PathBuf,
    pub host: Inventory,
    /// The generation key the coordinator matched this job to (`cuda/sm_90`); empty when
    /// the spec names no targets. Its backend decides what the job does.
    pub generation: String,
    pub sink: EventSink,
    pub cancel: watch::Receiver<bool>,
}

/// Why a job stopped early.
pub(crate) enum Stop {
    Cancelled,
    Failed(String),
    LeaseLost,
}

/// Runs a job and reports its outcome (already sent as the "done" event when possible).
pub async fn run_job(mut ctx: JobContext) -> JobOutcome {
    info!(job_id = %ctx.job_id, attempt = ctx.attempt, name = %ctx.spec.name, "job started");
    let (outcome, error) = match run_stages(&mut ctx).await {
        Ok(()) => (JobOutcome::Completed, None),
        Err(Stop::Cancelled) => (
            JobOutcome::Cancelled,
            Some("the job was cancelled".to_string()),
        ),
        Err(Stop::Failed(error)) => (JobOutcome::Failed, Some(error)),
        Err(Stop::LeaseLost) => {
            warn!(job_id = %ctx.job_id, "lease lost; abandoning the job");
            ctx.sink.close();
            return JobOutcome::Failed;
        }
    };
    if let Some(error) = &error {
        let _ = ctx.sink.emit(&JobEventPayload::Log {
            level: LogLevel::Error,
            line: error.clone(),
        });
    }
    // The barrier: every earlier event is stored before "done" is sent.
    let flushed = match outcome {
        // A cancelled job does not wait long for a coordinator that may be gone.
        JobOutcome::Cancelled => tokio::time::timeout(Duration::from_secs(5), ctx.sink.flush())
            .await
            .unwrap_or(Ok(())),
        _ => ctx.sink.flush().await,
    };
    if flushed.is_ok() {
        let _ = ctx.sink.emit(&JobEventPayload::Done { outcome, error });
        let _ = tokio::time::timeout(Duration::from_secs(30), ctx.sink.flush()).await;
    }
    ctx.sink.close();
    info!(job_id = %ctx.job_id, ?outcome, "job finished");
    outcome
}

pub(crate) fn emit(ctx: &JobContext, payload: JobEventPayload) -> Result<(), Stop> {
    ctx.sink
        .emit(&payload)
        .map(|_| ())
        .map_err(|_| Stop::LeaseLost)
}

pub(crate) fn progress(
    ctx: &JobContext,
    phase: &str,
    message: String,
    cells_done: u32,
    current_cell: Option<String>,
) -> Result<(), Stop> {
    emit(
        ctx,
        JobEventPayload::Progress {
            phase: phase.to_string(),
            message,
            cells_done,
            cells_total: ctx.spec.cell_count() as u32,
            current_cell,
        },
    )
}

pub(crate) fn check_cancel(ctx: &JobContext) -> Result<(), Stop> {
    if *ctx.cancel.borrow() {
        return Err(Stop::Cancelled);
    }
    if ctx.sink.lease_lost().is_some() {
        return Err(Stop::LeaseLost);
    }
    Ok(())
}

async fn run_stages(ctx: &mut JobContext) -> Result<(), Stop> {
    let calibration =
        std::fs::read_to_string(ctx.work_dir.join(abfleet_core::calibration::FILE_NAME))
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok());
    emit(
        ctx,
        JobEventPayload::Started {
            host: ctx.host.clone(),
            calibration,
        },
    )?;
    progress(
        ctx,
        "fixtures",
        "preparing and verifying fixtures".into(),
        0,
        None,
    )?;
    let prepared = prepare_fixtures(ctx).await?;
    let backend = abfleet_core::report::backend_of(&ctx.generation);
    if !matches!(backend, "" | "cpu" | "any") {
        return crate::backend_job::run_backend(ctx, backend.to_string(), &prepared).await;
    }
    let mut built = Vec::new();
    for side in Side::BOTH {
        check_cancel(ctx)?;
        let recipe = match side {
            Side::Upstream => ctx.spec.upstream.build.clone(),
            Side::Fork => ctx.spec.fork.build.clone(),
        };
        built.push(fetch_and_build(ctx, side, &recipe).await?);
    }
    let (upstream, fork) = (&built[0], &built[1]);
    let spec = ctx.spec.clone();
    let mut index = 0u32;
    let mut not_measured = 0u32;
    for (fixture, paths) in spec.fixtures.iter().zip(&prepared) {
        for workload in &spec.workloads {
            check_cancel(ctx)?;
            settle_uploads(ctx).await?;
            let label = format!("{}/{}", fixture.name, workload.name);
            progress(
                ctx,
                "timing",
                format!("timing {label}"),
                index,
                Some(label.clone()),
            )?;
            let input = measure_cell(ctx, index, fixture, paths, workload, upstream, fork).await?;
            let cell = CellResult::evaluate(input, &spec);
            info!(cell = %label, parity = ?cell.parity, speedup = ?cell.speedup, "cell finished");
            if cell.parity == CellParity::Unavailable {
                not_measured += 1;
            }
            emit(ctx, JobEventPayload::Cell(Box::new(cell)))?;
            index += 1;
        }
    }
    if let Some(sweep) = spec.backends.cpu.clone() {
        check_cancel(ctx)?;
        crate::retune::cpu::dispatch_sweep(ctx, &sweep, &prepared, fork).await?;
    }
    let summary = if not_measured == 0 {
        format!("all {index} cells measured")
    } else {
        format!(
            "{} of {index} cells measured, {not_measured} not (the report says why)",
            index - not_measured
        )
    };
    progress(ctx, "done", summary, index, None)?;
    Ok(())
}

/// Between cells, the uploader gets its turn (timed runs keep it quiet): a short wait for the
/// spool to drain, so progress is live. A coordinator that is away does not hold up timing;
/// the events wait in the spool.
pub(crate) async fn settle_uploads(ctx: &JobContext) -> Result<(), Stop> {
    match tokio::time::timeout(Duration::from_secs(2), ctx.sink.flush()).await {
        Ok(Err(_)) => Err(Stop::LeaseLost),
        _ => Ok(()),
    }
}

pub(crate) async fn prepare_fixtures(ctx: &JobContext) -> Result<Vec<PreparedFixture>, Stop> {
    let fixtures = ctx.spec.fixtures.clone();
    let cache = ctx.work_dir.join("fixtures");
    let host = ctx.host.hostname.clone();
    tokio::task::spawn_blocking(move || {
        fixtures
            .iter()
            .map(|f| fixtures::prepare(f, &cache, &host))
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|err| Stop::Failed(format!("fixture task failed: {err}")))?
    .map_err(|err| Stop::Failed(err.to_string()))
}

/// Fetches a side's source and builds it with `recipe` (the side's own, or a backend's
/// variant of the fork's, which lands in its own build directory: the recipe is in the key).
pub(crate) async fn fetch_and_build(
    ctx: &mut JobContext,
    side: Side,
    recipe: &abfleet_core::spec::BuildRecipe,
) -> Result<BuiltSide, Stop> {
    let side_spec = match side {
        Side::Upstream => ctx.spec.upstream.clone(),
        Side::Fork => ctx.spec.fork.clone(),
    };
    progress(
        ctx,
        "fetch",
        format!(
            "fetching {} ({})",
            side.name(),
            side_spec.source.requested()
        ),
        0,
        None,
    )?;
    let resolved = {
        let source_spec = side_spec.source.clone();
        let cache = ctx.work_dir.join("git");
        let host = ctx.host.hostname.clone();
        tokio::task::spawn_blocking(move || source::resolve(&source_spec, &cache, &host))
            .await
            .map_err(|err| Stop::Failed(format!("fetch task failed: {err}")))?
    };
    let resolved = match resolved {
        Ok(resolved) => resolved,
        Err(err) => {
            let record = BuildRecord {
                side,
                status: BuildStatus::Failed,
                cache_key: String::new(),
                toolchain: String::new(),
                seconds: 0.0,
                log_path: String::new(),
                log_tail: None,
                error: Some(format!("cannot fetch the source: {err}")),
            };
            emit(ctx, JobEventPayload::Build(record.clone()))?;
            return Ok(BuiltSide {
                record,
                binary: None,
                tree: PathBuf::new(),
            });
        }
    };
    emit(
        ctx,
        JobEventPayload::SourceResolved {
            side,
            source: side_spec.source.clone(),
            resolved: resolved.resolved.clone(),
        },
    )?;
    progress(
        ctx,
        "build",
        format!("building {} at {}", side.name(), resolved.resolved),
        0,
        None,
    )?;
    let timeout = Duration::from_secs(3600);
    let built = build_side(
        side,
        &resolved,
        recipe,
        &ctx.work_dir.join("builds"),
        timeout,
        &mut ctx.cancel,
    )
    .await;
    check_cancel(ctx)?;
    info!(side = side.name(), status = ?built.record.status, "build finished");
    emit(ctx, JobEventPayload::Build(built.record.clone()))?;
    Ok(built)
}

/// One side's state while a cell is measured.
struct SideRun<'a> {
    side: Side,
    built: &'a BuiltSide,
    measurement: SideMeasurement,
    active: bool,
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
    let out_dir = ctx
        .work_dir
        .join("jobs")
        .join(&ctx.job_id)
        .join(ctx.attempt.to_string())
        .join(format!("cell-{index:03}"));
    std::fs::create_dir_all(&out_dir)
        .map_err(|err| Stop::Failed(format!("cannot create `{}`: {err}", out_dir.display())))?;
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
        }
    });
    // A cell with one side unbuildable is not timed at all: it would compare nothing.
    if sides.iter().any(|s| !s.active) {
        for side in sides.iter_mut().filter(|s| s.active) {
            side.measurement =
                SideMeasurement::unavailable("not measured: the other side could not be built");
            side.active = false;
        }
    }
    let load_before = loadavg::one_minute();
    let host_sample = noise::HostSample::take();
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
    let load_after = loadavg::one_minute();
    let host_flags = host_sample.flags_since();
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
    })
}

/// How the timed pairs of a cell went.
struct TimedPairs {
    seed: u64,
    order: Vec<Order>,
    stop_reason: StopReason,
}

/// The cell's own seed: the spec's seed mixed with the cell index (splitmix64's finaliser),
/// so cells get independent orders and one recorded seed replays them all.
fn cell_seed(spec_seed: u64, index: u32) -> u64 {
    let mut z = spec_seed ^ (u64::from(index) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
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
    let seed = cell_seed(measure.seed, index);
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
            let sequence = match order[done] {
                Order::UpstreamFirst => [0, 1],
                Order::ForkFirst => [1, 0],
            };
            for side_index in sequence {
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
    let RunOutcome { command, result } = run;
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
    let argv = command_line(&ctx.spec, binary, run, &output);
    ctx.sink.set_quiet(true);
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
    ctx.sink.set_quiet(false);
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
        _ => match read_scores(format, &output) {
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
    Ok(RunOutcome { command, result })
}

pub(crate) fn read_scores(
    format: abfleet_core::spec::OutputFormat,
    path: &Path,
) -> Result<Scores, String> {
    let text = std::fs::read_to_string(path).map_err(|err| {
        format!(
            "cannot read `{}` ({err}); does the command template pass {{output}}?",
            path.display()
        )
    })?;
    abfleet_core::output::parse(format, &text).map_err(|err| err.to_string())
}

/// The command template with its placeholders filled, then the workload's arguments.
fn command_line(spec: &JobSpec, binary: &Path, run: &RunContext<'_>, output: &Path) -> Vec<String> {
    cell_command_line(spec, binary, run.fixture, run.paths, run.workload, output)
}

/// The command line of one cell for `binary`: the template with its placeholders filled,
/// then the workload's arguments.
pub(crate) fn cell_command_line(
    spec: &JobSpec,
    binary: &Path,
    fixture: &FixtureSpec,
    paths: &PreparedFixture,
    workload: &WorkloadSpec,
    output: &Path,
) -> Vec<String> {
    let values = [
        ("binary", binary.display().to_string()),
        ("reference", paths.reference.display().to_string()),
        ("distorted", paths.distorted.display().to_string()),
        ("width", fixture.width.to_string()),
        ("height", fixture.height.to_string()),
        ("bitdepth", fixture.bitdepth.to_string()),
        ("pixel_format", fixture.pixel_format.as_str().to_string()),
        ("threads", spec.measure.threads.to_string()),
        ("output", output.display().to_string()),
    ];
    let mut argv: Vec<String> = spec
        .command
        .template
        .iter()
        .map(|arg| {
            values.iter().fold(arg.clone(), |text, (name, value)| {
                text.replace(&format!("{{{name}}}"), value)
            })
        })
        .collect();
    argv.extend(workload.args.iter().cloned());
    argv
}
