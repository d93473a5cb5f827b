//! What every stage of a job shares: the job's context (spec, work dir, host, events,
//! cancel), the calls that emit events and progress and check for cancel, and the steps
//! every stage needs before timing: fixtures prepared and verified, a side fetched and
//! built, an output read. Below the stages; knows none of them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use abfleet_core::events::{BuildRecord, BuildStatus, JobEventPayload, Side};
use abfleet_core::inventory::Inventory;
use abfleet_core::scores::Scores;
use abfleet_core::spec::{FixtureSpec, JobSpec};
use tokio::sync::watch;
use tracing::info;

use crate::build::{build_side, BuiltSide};
use crate::fixtures::{self, JobFixtures};
use crate::sink::EventSink;
use crate::source;
use crate::upload_gate::Hushed;

/// How often a build in progress reports its step and elapsed time.
const BUILD_HEARTBEAT: Duration = Duration::from_secs(10);

pub struct JobContext {
    pub job_id: String,
    pub attempt: u32,
    pub spec: JobSpec,
    pub work_dir: PathBuf,
    pub host: Inventory,
    /// The generation key the coordinator matched this job to (`cuda/sm_90`); empty when
    /// the spec names no targets. Its backend decides what the job does.
    pub generation: String,
    /// Indexes of A/B cells earlier attempts of this job stored: the coordinator keeps them,
    /// so this attempt does not measure them again.
    pub kept_cells: std::collections::BTreeSet<u32>,
    pub sink: EventSink,
    pub cancel: watch::Receiver<bool>,
    /// Set before `cancel` when the agent itself is stopping (SIGTERM, Ctrl-C): the job is
    /// handed back, not cancelled — no `done` event, so the coordinator requeues it.
    pub handing_back: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The cache entries this job uses, stamped and pinned until the job ends.
    pub cache: crate::cache::JobCache,
    /// The architecture this host serves under an emulator, when it does
    /// (`crate::emulation`): builds cross-compile, runs go through the emulator.
    pub emulation: Option<std::sync::Arc<crate::emulation::Emulation>>,
}

impl JobContext {
    /// `argv` as this host runs a built binary: through the emulator when it has one.
    pub(crate) fn run_line(&self, argv: Vec<String>) -> Vec<String> {
        match &self.emulation {
            Some(emulation) => crate::emulation::wrapped(&emulation.wrapper, &argv),
            None => argv,
        }
    }
}

/// Why a job stopped early.
pub(crate) enum Stop {
    Cancelled,
    Failed(String),
    LeaseLost,
}

/// `name` in this attempt's directory of the work dir (`jobs/JOB/ATTEMPT/NAME`), made.
pub(crate) fn attempt_dir(ctx: &JobContext, name: &str) -> Result<PathBuf, Stop> {
    let dir = ctx
        .work_dir
        .join("jobs")
        .join(&ctx.job_id)
        .join(ctx.attempt.to_string())
        .join(name);
    std::fs::create_dir_all(&dir)
        .map_err(|err| Stop::Failed(format!("cannot create `{}`: {err}", dir.display())))?;
    Ok(dir)
}

/// Emits an event. A spool that could not be written fails the job (the event itself is
/// still sent): timing on without a durable record could lose cells on a restart.
pub(crate) fn emit(ctx: &JobContext, payload: JobEventPayload) -> Result<(), Stop> {
    ctx.sink.emit(&payload).map_err(|_| Stop::LeaseLost)?;
    match ctx.sink.spool_failure() {
        Some(failure) => Err(Stop::Failed(failure)),
        None => Ok(()),
    }
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
    if let Some(failure) = ctx.sink.spool_failure() {
        return Err(Stop::Failed(failure));
    }
    Ok(())
}

/// Between cells, the uploader gets its turn (timed cells keep it quiet): a short wait for
/// the spool to drain, so progress is live. A coordinator that is away does not hold up
/// timing; the events wait in the spool.
async fn settle_uploads(ctx: &JobContext) -> Result<(), Stop> {
    match tokio::time::timeout(Duration::from_secs(2), ctx.sink.flush()).await {
        Ok(Err(_)) => Err(Stop::LeaseLost),
        _ => Ok(()),
    }
}

/// What a stage does right before it times a cell, after emitting the cell's progress: the
/// uploads settle (that progress goes out), then the agent is hushed — no upload,
/// acknowledgement or spool upkeep until the returned guard is dropped, after the cell's
/// last run.
pub(crate) async fn quiet_for_cell(ctx: &JobContext) -> Result<Hushed, Stop> {
    settle_uploads(ctx).await?;
    Ok(ctx.sink.hush().await)
}

/// Prepares and verifies the job's fixtures; path fixtures are copied into
/// `<work dir>/job-fixtures/`, removed when the returned [`JobFixtures`] is dropped.
pub(crate) async fn prepare_fixtures(ctx: &JobContext) -> Result<JobFixtures, Stop> {
    let fixtures = ctx.spec.fixtures.clone();
    let cache = ctx.work_dir.join("fixtures");
    let private_dir = ctx.work_dir.join("job-fixtures");
    let host = ctx.host.hostname.clone();
    let mut cancel = ctx.cancel.clone();
    let retries_cancel = Some(ctx.cancel.clone());
    // A cancel kills a download's `curl` rather than waiting for it, and stops its retries.
    crate::runner::blocking_with_children(
        move || {
            fixtures::prepare_for_job_until(&fixtures, &cache, &private_dir, &host, retries_cancel)
        },
        &mut cancel,
    )
    .await
    .map_err(|err| Stop::Failed(format!("fixture task failed: {err}")))?
    .ok_or(Stop::Cancelled)?
    .map_err(|err| Stop::Failed(err.to_string()))
    .inspect(|prepared| {
        // The cached files the cells read (a path fixture's copy is the job's own).
        let cache = ctx.work_dir.join("fixtures");
        for fixture in prepared.iter() {
            for file in [&fixture.reference, &fixture.distorted] {
                if file.starts_with(&cache) {
                    ctx.cache.use_entry(file);
                }
            }
        }
    })
}

/// Fetches a side's source and builds it with `recipe` (the side's own, or a backend's
/// variant of the fork's, which lands in its own build directory: the recipe is in the key).
pub(crate) async fn fetch_and_build(
    ctx: &mut JobContext,
    side: Side,
    recipe: &abfleet_core::spec::BuildRecipe,
) -> Result<BuiltSide, Stop> {
    match fetch(ctx, side).await? {
        Ok(resolved) => build_fetched(ctx, side, &resolved, recipe).await,
        Err(failed) => Ok(failed),
    }
}

/// Fetches a side's source and emits `SourceResolved`; a source that cannot be fetched is a
/// failed build (already emitted), returned as `Err`.
pub(crate) async fn fetch(
    ctx: &mut JobContext,
    side: Side,
) -> Result<Result<crate::source::ResolvedSource, BuiltSide>, Stop> {
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
        let mut cancel = ctx.cancel.clone();
        // A cancel kills the fetch's git (and its helpers) rather than waiting for it.
        crate::runner::blocking_with_children(
            move || source::resolve(&source_spec, &cache, &host),
            &mut cancel,
        )
        .await
        .map_err(|err| Stop::Failed(format!("fetch task failed: {err}")))?
        .ok_or(Stop::Cancelled)?
    };
    let resolved = match resolved {
        Ok(resolved) => {
            if let Some(mirror) = resolved.mirror() {
                ctx.cache.use_entry(mirror);
            }
            resolved
        }
        Err(err) => {
            let failed = failed_build(ctx, side, format!("cannot fetch the source: {err}"))?;
            return Ok(Err(failed));
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
    Ok(Ok(resolved))
}

/// Builds a fetched source with `recipe` (cached by source, recipe and toolchain): what a
/// sweep does once per distinct build configuration, all from the one fetched revision.
pub(crate) async fn build_fetched(
    ctx: &mut JobContext,
    side: Side,
    resolved: &crate::source::ResolvedSource,
    recipe: &abfleet_core::spec::BuildRecipe,
) -> Result<BuiltSide, Stop> {
    progress(
        ctx,
        "build",
        format!("building {} at {}", side.name(), resolved.resolved),
        0,
        None,
    )?;
    if ctx.emulation.is_some() && !crate::emulation::uses_cross(recipe) {
        let arch = ctx.emulation.as_ref().map_or("", |e| e.arch.as_str());
        return failed_build(
            ctx,
            side,
            format!(
                "this host emulates {arch} and the recipe has no \"{}\" in its commands, so it would build for this machine: put \"{}\" where the cross arguments go (after `meson setup build libvmaf`; docs/retuning.md, \"ARM\")",
                crate::emulation::CROSS_PLACEHOLDER,
                crate::emulation::CROSS_PLACEHOLDER
            ),
        );
    }
    let recipe = &crate::emulation::cross_recipe(ctx.emulation.as_deref(), recipe);
    let timeout = Duration::from_secs(3600);
    let builds_dir = ctx.work_dir.join("builds");
    let mut cancel = ctx.cancel.clone();
    let (step, current_step) = watch::channel(String::new());
    let started = Instant::now();
    let build = build_side(
        side,
        resolved,
        recipe,
        &builds_dir,
        timeout,
        &mut cancel,
        &step,
    );
    tokio::pin!(build);
    // A long build says every BUILD_HEARTBEAT which step it is on and for how long.
    let mut heartbeat = tokio::time::interval_at(
        tokio::time::Instant::now() + BUILD_HEARTBEAT,
        BUILD_HEARTBEAT,
    );
    let built = loop {
        tokio::select! {
            built = &mut build => break built,
            _ = heartbeat.tick() => {
                let step = current_step.borrow().clone();
                progress(
                    ctx,
                    "build",
                    format!(
                        "building {}: {step}, {} s elapsed",
                        side.name(),
                        started.elapsed().as_secs()
                    ),
                    0,
                    None,
                )?;
            }
        }
    };
    // The build directory (a failed build's holds its log) is the job's until it ends.
    if let Some(dir) = built.tree.parent().filter(|dir| dir.is_dir()) {
        ctx.cache.use_entry(dir);
    }
    check_cancel(ctx)?;
    let mut built = built;
    if let (Some(emulation), Some(binary)) = (&ctx.emulation, &built.binary) {
        if let Err(reason) = crate::emulation::check_binary(emulation, binary) {
            built.record.status = BuildStatus::Failed;
            built.record.error = Some(reason);
            built.binary = None;
        }
    }
    info!(side = side.name(), status = ?built.record.status, "build finished");
    emit(ctx, JobEventPayload::Build(built.record.clone()))?;
    Ok(built)
}

/// The fork's built binary, or `None` after emitting that `check` is skipped because the
/// fork's build failed (what each check stage says first).
pub(crate) fn fork_binary_or_skip(
    ctx: &JobContext,
    fork: &BuiltSide,
    check: &str,
) -> Result<Option<PathBuf>, Stop> {
    if fork.binary.is_none() {
        emit(
            ctx,
            JobEventPayload::CheckSkipped(abfleet_core::finding::SkippedCheck::new(
                "cpu",
                check,
                "the fork's build failed; nothing to run",
            )),
        )?;
    }
    Ok(fork.binary.clone())
}

/// A check's findings and skipped checks, emitted in that order.
pub(crate) fn emit_checks(
    ctx: &JobContext,
    results: abfleet_core::finding::CheckResults,
) -> Result<(), Stop> {
    for finding in results.findings {
        emit(ctx, JobEventPayload::Finding(Box::new(finding)))?;
    }
    for skipped in results.skipped {
        emit(ctx, JobEventPayload::CheckSkipped(skipped))?;
    }
    Ok(())
}

/// A build that did not start (a source that cannot be fetched, a recipe this host cannot
/// build), with why: emitted like a failed build.
fn failed_build(ctx: &JobContext, side: Side, error: String) -> Result<BuiltSide, Stop> {
    let record = BuildRecord {
        side,
        status: BuildStatus::Failed,
        cache_key: String::new(),
        toolchain: String::new(),
        seconds: 0.0,
        log_path: String::new(),
        log_tail: None,
        error: Some(error),
    };
    emit(ctx, JobEventPayload::Build(record.clone()))?;
    Ok(BuiltSide {
        record,
        binary: None,
        tree: PathBuf::new(),
        unlinked: None,
    })
}

/// How large a run's output may be before it is refused unread: `[measure]
/// max_output_bytes`, or less, what the run's input can give (`FixtureSpec::max_output_bytes`):
/// so what a binary writes never sets the agent's memory, only the input does (issue 38).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OutputLimit {
    bytes: u64,
    /// The fixture (name, frames) when its frames set the limit.
    fixture: Option<(String, u32)>,
}

impl OutputLimit {
    /// `[measure] max_output_bytes` alone.
    pub fn bytes(bytes: u64) -> OutputLimit {
        OutputLimit {
            bytes,
            fixture: None,
        }
    }

    /// The limit of a run over `fixture`.
    pub fn for_fixture(max_output_bytes: u64, fixture: &FixtureSpec) -> OutputLimit {
        let by_frames = fixture.max_output_bytes();
        if by_frames < max_output_bytes {
            OutputLimit {
                bytes: by_frames,
                fixture: Some((fixture.name.clone(), fixture.frames)),
            }
        } else {
            OutputLimit::bytes(max_output_bytes)
        }
    }

    /// The limit of a run over any one of the spec's fixtures (its largest).
    pub fn for_spec(spec: &abfleet_core::spec::JobSpec) -> OutputLimit {
        spec.fixtures
            .iter()
            .map(|fixture| OutputLimit::for_fixture(spec.measure.max_output_bytes, fixture))
            .max_by_key(|limit| limit.bytes)
            .unwrap_or_else(|| OutputLimit::bytes(spec.measure.max_output_bytes))
    }

    fn refusal(&self, bytes: u64, path: &Path) -> String {
        match &self.fixture {
            None => format!(
                "output too large: {bytes} bytes > limit of {} (`{}`; set [measure] max_output_bytes)",
                self.bytes,
                path.display()
            ),
            Some((name, frames)) => format!(
                "output too large for its input: {bytes} bytes, where `{name}`'s {frames} frame(s) allow {} ({} KiB a frame; `{}`): the binary wrote more than scores of this input, and it was not read: check that the command template passes this fixture's {{reference}} and {{distorted}} and the workload's arguments",
                self.bytes,
                abfleet_core::spec::MAX_OUTPUT_BYTES_PER_FRAME / 1024,
                path.display()
            ),
        }
    }
}

/// Reads a run's output file off the async runtime (a large one takes a while). A file over
/// `limit` is refused unread; JSON is streamed, so the text is never held (only its frames
/// are).
pub(crate) async fn read_scores(
    format: abfleet_core::spec::OutputFormat,
    path: &Path,
    limit: &OutputLimit,
) -> Result<Scores, String> {
    let path = path.to_path_buf();
    let limit = limit.clone();
    tokio::task::spawn_blocking(move || read_scores_blocking(format, &path, &limit))
        .await
        .unwrap_or_else(|err| Err(format!("the output reading task failed: {err}")))
}

pub(crate) fn read_scores_blocking(
    format: abfleet_core::spec::OutputFormat,
    path: &Path,
    limit: &OutputLimit,
) -> Result<Scores, String> {
    let cannot_read = |err: std::io::Error| {
        format!(
            "cannot read `{}` ({err}); does the command template pass {{output}}?",
            path.display()
        )
    };
    let file = std::fs::File::open(path).map_err(cannot_read)?;
    let bytes = file.metadata().map_err(cannot_read)?.len();
    if bytes > limit.bytes {
        return Err(limit.refusal(bytes, path));
    }
    match abfleet_core::output::parse_reader(format, std::io::BufReader::new(file)) {
        Ok(scores) => Ok(scores),
        Err(streamed) => {
            // The streamed error is terse (no printf `nan` named): the text, within the limit,
            // tells the whole story.
            let text = std::fs::read_to_string(path).map_err(cannot_read)?;
            Err(match abfleet_core::output::parse(format, &text) {
                Err(err) => err.to_string(),
                Ok(_) => streamed.to_string(),
            })
        }
    }
}

/// Runs a blocking read of the host (/proc: load, cpuinfo) on the blocking pool, so the
/// runtime that carries the session's heartbeats never waits on it between timed runs.
pub(crate) async fn off_runtime<T: Send + 'static>(
    read: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Stop> {
    tokio::task::spawn_blocking(read)
        .await
        .map_err(|err| Stop::Failed(format!("host sampling task failed: {err}")))
}
