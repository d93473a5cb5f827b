//! Builds a [`Report`] from what the store holds about a run: the spec, the jobs, and the
//! events of each job's latest attempt.

use std::collections::BTreeMap;

use crate::cell::{CellParity, CellResult};
use crate::events::{BuildStatus, JobEventPayload, JobOutcome, Side};
use crate::exit;
use crate::spec::JobSpec;
use crate::stats;

use super::model::{Report, ScoreParity, SideInfo};
use super::time::format_utc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    Queued,
    Running,
    Done,
    Failed,
    Cancelled,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Done => "done",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<RunState> {
        Some(match text {
            "queued" => RunState::Queued,
            "running" => RunState::Running,
            "done" => RunState::Done,
            "failed" => RunState::Failed,
            "cancelled" => RunState::Cancelled,
            _ => return None,
        })
    }

    pub fn is_finished(self) -> bool {
        matches!(
            self,
            RunState::Done | RunState::Failed | RunState::Cancelled
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Queued,
    Leased,
    Done,
    Failed,
    Cancelled,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Leased => "leased",
            JobState::Done => "done",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<JobState> {
        Some(match text {
            "queued" => JobState::Queued,
            "leased" => JobState::Leased,
            "done" => JobState::Done,
            "failed" => JobState::Failed,
            "cancelled" => JobState::Cancelled,
            _ => return None,
        })
    }

    pub fn is_finished(self) -> bool {
        matches!(
            self,
            JobState::Done | JobState::Failed | JobState::Cancelled
        )
    }
}

pub struct RunRecord {
    pub run_id: String,
    pub trigger: String,
    pub created_ms: i64,
    pub state: RunState,
    pub spec: JobSpec,
}

pub struct JobRecord {
    pub job_id: String,
    pub state: JobState,
    pub attempt: u32,
    pub agent_id: Option<String>,
    /// Why the coordinator ended the job (lease expired too often, cancelled), if it did.
    pub error: Option<String>,
    /// Events of the latest attempt, in sequence order.
    pub events: Vec<JobEventPayload>,
}

/// Assembles the report of a run with one job (the A/B spine).
pub fn assemble(run: &RunRecord, jobs: &[JobRecord]) -> Report {
    let spec = &run.spec;
    let mut report = Report {
        schema_version: 1,
        run_id: run.run_id.clone(),
        name: spec.name.clone(),
        trigger: run.trigger.clone(),
        date: format_utc(run.created_ms),
        status: run.state.as_str().to_string(),
        exit_code: exit::OK,
        upstream_ref: spec.upstream.source.requested(),
        fork_ref: spec.fork.source.requested(),
        upstream: side_info(spec, Side::Upstream),
        fork: side_info(spec, Side::Fork),
        host: None,
        calibration: None,
        agent_id: None,
        warmup: spec.measure.warmup,
        runs: spec.measure.runs,
        threads: spec.measure.threads,
        max_score_delta: spec.measure.max_score_delta,
        practical_threshold: spec.measure.practical_threshold,
        max_runs: spec.measure.max_runs,
        seed: spec.measure.seed,
        allowances: spec.parity.allow.clone(),
        min_useful_seconds: spec.measure.min_useful_seconds,
        cells: Vec::new(),
        missing_cells: Vec::new(),
        geomean_speedup: None,
        geomean_cells: Vec::new(),
        score_parity: ScoreParity::NotRun,
        score_parity_report: Vec::new(),
        startup_bound: false,
        startup_note: None,
        errors: Vec::new(),
        attempts: 0,
    };
    let mut cells: BTreeMap<u32, CellResult> = BTreeMap::new();
    let mut job_finished_cleanly = true;
    for job in jobs {
        report.attempts = report.attempts.max(job.attempt);
        report.agent_id = job.agent_id.clone().or(report.agent_id.take());
        let mut saw_done = false;
        for event in &job.events {
            match event {
                JobEventPayload::Started { host, calibration } => {
                    report.host = Some(host.clone());
                    report.calibration = calibration.clone();
                }
                JobEventPayload::SourceResolved { side, resolved, .. } => {
                    side_mut(&mut report, *side).resolved = Some(resolved.clone());
                }
                JobEventPayload::Build(build) => {
                    if build.status == BuildStatus::Failed {
                        report.errors.push(format!(
                            "the {} build failed: {}",
                            build.side.name(),
                            build.error.as_deref().unwrap_or("see the build log")
                        ));
                    }
                    side_mut(&mut report, build.side).build = Some(build.clone());
                }
                JobEventPayload::Cell(cell) => {
                    cells.insert(cell.index, (**cell).clone());
                }
                JobEventPayload::Done { outcome, error } => {
                    saw_done = true;
                    if *outcome != JobOutcome::Completed {
                        job_finished_cleanly = false;
                    }
                    if let Some(error) = error {
                        report.errors.push(error.clone());
                    }
                }
                JobEventPayload::Progress { .. } | JobEventPayload::Log { .. } => {}
            }
        }
        if let Some(error) = &job.error {
            report.errors.push(error.clone());
        }
        if job.state != JobState::Done || !saw_done {
            job_finished_cleanly = false;
        }
    }
    if let Some(commit) = &report.fork.resolved {
        report.fork_ref = short_ref(commit);
    }
    report.cells = cells.into_values().collect();
    if let Some(calibration) = &report.calibration {
        for cell in &mut report.cells {
            cell.host_resolution = Some(calibration.resolution);
        }
    }
    let present: std::collections::BTreeSet<(String, String)> = report
        .cells
        .iter()
        .map(|c| (c.fixture.clone(), c.workload.clone()))
        .collect();
    for fixture in &spec.fixtures {
        for workload in &spec.workloads {
            if !present.contains(&(fixture.name.clone(), workload.name.clone())) {
                report
                    .missing_cells
                    .push(format!("{}/{}", fixture.name, workload.name));
            }
        }
    }
    summarise(&mut report);
    report.exit_code = exit_code(&report, run.state, job_finished_cleanly);
    report
}

fn side_info(spec: &JobSpec, side: Side) -> SideInfo {
    let side_spec = match side {
        Side::Upstream => &spec.upstream,
        Side::Fork => &spec.fork,
    };
    SideInfo {
        source: side_spec.source.clone(),
        requested: side_spec.source.requested(),
        resolved: None,
        build: None,
    }
}

fn side_mut(report: &mut Report, side: Side) -> &mut SideInfo {
    match side {
        Side::Upstream => &mut report.upstream,
        Side::Fork => &mut report.fork,
    }
}

/// The first 12 characters of a commit or content hash, as people quote them.
fn short_ref(resolved: &str) -> String {
    let hash = resolved.strip_prefix("sha256:").unwrap_or(resolved);
    hash.chars().take(12).collect()
}

fn summarise(report: &mut Report) {
    let mut geomean_inputs = Vec::new();
    for cell in &report.cells {
        if let (Some(speedup), CellParity::Ok) = (cell.speedup, cell.parity) {
            geomean_inputs.push(speedup);
            report
                .geomean_cells
                .push(format!("{}/{}", cell.fixture, cell.workload));
        }
        for failure in &cell.parity_failures {
            report.score_parity_report.push(format!(
                "{}/{}: {}",
                cell.fixture, cell.workload, failure.message
            ));
        }
        if cell.parity == CellParity::Unavailable {
            for (side, result) in [("upstream", &cell.upstream), ("fork", &cell.fork)] {
                if let Some(error) = &result.error {
                    report.errors.push(format!(
                        "{}/{}: {side} unavailable: {error}",
                        cell.fixture, cell.workload
                    ));
                }
            }
        }
    }
    report.geomean_speedup = stats::geomean(&geomean_inputs);
    let compared = report
        .cells
        .iter()
        .filter(|c| matches!(c.parity, CellParity::Ok | CellParity::Fail))
        .count();
    report.score_parity = if report.cells.iter().any(|c| c.parity == CellParity::Fail) {
        ScoreParity::Fail
    } else if compared == 0 {
        ScoreParity::NotRun
    } else {
        ScoreParity::Ok
    };
    let timed: Vec<f64> = report
        .cells
        .iter()
        .filter_map(|c| c.fork.median_time)
        .collect();
    report.startup_bound = !timed.is_empty()
        && report
            .cells
            .iter()
            .all(|c| c.startup_dominated || c.fork.median_time.is_none());
    if report.startup_bound {
        let slowest = timed.iter().copied().fold(0.0, f64::max);
        report.startup_note = Some(format!(
            "Every cell's fork median is under {:.1} s (the slowest is {:.3} s): process start-up, \
             file reading and output writing weigh on every number, so these speedups say little \
             about the kernels; use a larger fixture (more frames or a 4K pair) for a defensible number",
            report.min_useful_seconds, slowest
        ));
    }
}

fn exit_code(report: &Report, state: RunState, job_finished_cleanly: bool) -> i32 {
    if state == RunState::Cancelled {
        return exit::CANCELLED;
    }
    if report.score_parity == ScoreParity::Fail {
        return exit::PARITY_FAILED;
    }
    let carried_out = job_finished_cleanly
        && report.missing_cells.is_empty()
        && !report.cells.iter().any(CellResult::is_unavailable);
    if !carried_out {
        return exit::NOT_CARRIED_OUT;
    }
    exit::OK
}
