//! Builds a [`Report`] from what the store holds about a run: the spec, the jobs, the
//! events of each job's latest attempt, the cells it kept from earlier attempts (a resumed
//! attempt measures only the others) and every attempt's record (the attempt history).

use std::collections::BTreeMap;

use crate::cell::{CellParity, CellResult};
use crate::events::{BuildStatus, JobEventPayload, JobOutcome, Side};
use crate::exit;
use crate::finding::Severity;
use crate::spec::JobSpec;
use crate::stats;

use super::model::{AttemptSummary, GenerationSection, Report, ScoreParity, SideInfo};
use super::time::format_utc;
use crate::lifecycle::{JobState, RunState};

#[derive(Clone)]
pub struct RunRecord {
    pub run_id: String,
    pub trigger: String,
    pub trigger_note: Option<String>,
    pub created_ms: i64,
    pub state: RunState,
    pub spec: JobSpec,
    /// Why the run could not start (no agent matched its targets).
    pub error: Option<String>,
}

/// One attempt of a job as the store recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRecord {
    pub attempt: u32,
    pub agent_id: String,
    /// Unix milliseconds when it was leased.
    pub leased_ms: i64,
    /// Cells earlier attempts stored, which this one was told to keep.
    pub kept_cells: Vec<u32>,
    /// Cells this attempt stored.
    pub measured_cells: Vec<u32>,
    /// How it ended, once it has.
    pub end_reason: Option<String>,
}

#[derive(Clone)]
pub struct JobRecord {
    pub job_id: String,
    /// The generation key the job measures; `None` when the spec names no targets.
    pub generation: Option<String>,
    pub state: JobState,
    pub attempt: u32,
    pub agent_id: Option<String>,
    /// Why the coordinator ended the job (lease expired too often, cancelled), if it did.
    pub error: Option<String>,
    /// Events of the latest attempt, in sequence order.
    pub events: Vec<JobEventPayload>,
    /// Every recorded attempt, oldest first (none for jobs leased before the store kept
    /// attempts).
    pub attempts: Vec<AttemptRecord>,
    /// The cells the latest attempt kept, each with the earlier attempt that stored it.
    pub kept_cells: Vec<(u32, CellResult)>,
}

/// Assembles the report of a run — one section per hardware generation, and the top level
/// over all of them (the fork's document shape; a single-generation run is just that
/// generation); cells of different generations never share a summary — from records it may
/// take apart: each cell moves from its event into the report instead of being copied (the
/// coordinator's reports of 10,000-cell runs). Only `build` calls it: a report is built.
pub(crate) fn assemble_owned(run: &RunRecord, jobs: Vec<JobRecord>) -> (Report, RunOutcome) {
    let mut groups: Vec<(Option<String>, Vec<JobRecord>)> = Vec::new();
    for job in jobs {
        match groups.iter_mut().find(|(key, _)| *key == job.generation) {
            Some((_, group)) => group.push(job),
            None => groups.push((job.generation.clone(), vec![job])),
        }
    }
    let mut outcome = RunOutcome {
        sections: Vec::with_capacity(groups.len()),
        run_error: run.error.is_some(),
    };
    let sections: Vec<(Option<String>, Report)> = groups
        .into_iter()
        .map(|(key, group)| {
            let (report, section) = assemble_jobs(run, group);
            outcome.sections.push(section);
            (key, report)
        })
        .collect();
    let generations = sections
        .iter()
        .map(|(key, sub)| {
            GenerationSection::from_report(
                key.as_deref().unwrap_or(super::model::ANY_GENERATION),
                sub,
            )
        })
        .collect();
    let mut report = if sections.len() == 1 {
        sections.into_iter().next().expect("one section").1
    } else {
        merge(run, sections)
    };
    report.generations = generations;
    add_cuda_fleet_floor(&mut report.generations);
    report.sweep_table = report
        .generations
        .iter()
        .filter_map(|g| g.sweep.as_ref().map(|s| s.row(&g.key)))
        .collect();
    if let Some(error) = &run.error {
        report.errors.insert(0, error.clone());
    }
    (report, outcome)
}

/// The top level of a multi-generation run: every cell (tagged with its generation) and no
/// cross-generation geomean (its exit code is decided with the sections', [`RunOutcome`]).
fn merge(run: &RunRecord, sections: Vec<(Option<String>, Report)>) -> Report {
    let (mut report, _) = assemble_jobs(run, Vec::new());
    report.missing_cells.clear();
    let subs = || sections.iter().map(|(_, r)| r);
    report.score_parity = if subs().any(|r| r.score_parity == ScoreParity::Fail) {
        ScoreParity::Fail
    } else if subs().any(|r| r.score_parity == ScoreParity::Ok) {
        ScoreParity::Ok
    } else {
        ScoreParity::NotRun
    };
    report.startup_bound = !sections.is_empty() && subs().all(|r| r.startup_bound);
    for (key, sub) in sections {
        let key = key.as_deref().unwrap_or(super::model::ANY_GENERATION);
        report.cells.extend(sub.cells);
        report
            .missing_cells
            .extend(sub.missing_cells.iter().map(|m| format!("{key}: {m}")));
        report
            .errors
            .extend(sub.errors.iter().map(|e| format!("{key}: {e}")));
        report.score_parity_report.extend(
            sub.score_parity_report
                .iter()
                .map(|l| format!("{key}: {l}")),
        );
        report.attempts = report.attempts.max(sub.attempts);
        report.attempt_history.extend(sub.attempt_history);
        // Each side as the generations saw it: the first resolution and build any had (a
        // failed build over a good one), so a side built on some generation is not "not
        // resolved, not built" in the header (issue 39: a retuning run's fork).
        if report.fork.resolved.is_none() && sub.fork.resolved.is_some() {
            report.fork_ref = sub.fork_ref.clone();
        }
        for (side, seen) in [
            (&mut report.upstream, &sub.upstream),
            (&mut report.fork, &sub.fork),
        ] {
            if side.resolved.is_none() {
                side.resolved.clone_from(&seen.resolved);
            }
            let failed = |b: &Option<crate::events::BuildRecord>| {
                b.as_ref().is_some_and(|b| b.status == BuildStatus::Failed)
            };
            if side.build.is_none() || (failed(&seen.build) && !failed(&side.build)) {
                side.build.clone_from(&seen.build);
            }
        }
    }
    report.startup_note = None;
    report.geomean_speedup = None;
    report.geomean_cells = Vec::new();
    report
}

/// The most telling of several exit codes: cancelled, then parity failure, then not
/// carried out, then ok.
fn combined_exit_code(codes: impl Iterator<Item = i32>) -> i32 {
    let codes: Vec<i32> = codes.collect();
    [
        exit::CANCELLED,
        exit::PARITY_FAILED,
        exit::NOT_CARRIED_OUT,
        exit::TUNING_FAILED,
    ]
    .into_iter()
    .find(|c| codes.contains(c))
    .unwrap_or(exit::OK)
}

/// The SHA-256 of the spec's JSON form: two runs of one spec name with different hashes
/// measured different things (another fixture, gate or build).
fn spec_sha256(spec: &crate::spec::JobSpec) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(spec.to_json().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The SHA-256 of the spec's JSON form without the sources' revs, `[targets]`, the
/// description and `[measure] seed` (a spec without one gets a fresh seed per submission): what
/// the runs measured and how, whatever commits and hosts they ran on.
fn comparable_spec_sha256(spec: &crate::spec::JobSpec) -> String {
    use crate::spec::SourceSpec;
    let mut normalised = spec.clone();
    for side in [&mut normalised.upstream, &mut normalised.fork] {
        if let SourceSpec::Git { rev, .. } = &mut side.source {
            rev.clear();
        }
    }
    normalised.targets = None;
    normalised.description.clear();
    normalised.measure.seed = 0;
    spec_sha256(&normalised)
}

/// The report of the jobs of one generation, and what its exit code will be decided on.
fn assemble_jobs(run: &RunRecord, jobs: Vec<JobRecord>) -> (Report, SectionOutcome) {
    let spec = &run.spec;
    let mut report = report_of_spec(run);
    let generation = jobs.first().and_then(|j| j.generation.clone());
    let any_job_done = jobs.iter().any(|j| j.state == JobState::Done);
    let has_jobs = !jobs.is_empty();
    let read = read_jobs(&mut report, jobs);
    if let Some(commit) = &report.fork.resolved {
        report.fork_ref = short_ref(commit);
    }
    report.cells = read.cells.into_values().collect();
    for cell in &mut report.cells {
        cell.generation = generation.clone();
    }
    if let Some(calibration) = &report.calibration {
        for cell in &mut report.cells {
            cell.host_resolution = Some(calibration.resolution);
        }
    }
    // An emulated generation's times are the emulator's: decided from the key alone, so no
    // agent can make its cells count as timed.
    if generation
        .as_deref()
        .is_some_and(crate::generation::is_emulated)
    {
        for cell in &mut report.cells {
            cell.withhold_timing(crate::generation::EMULATED_NOT_TIMED);
        }
    }
    let backend = generation
        .as_deref()
        .map_or("cpu", super::model::backend_of);
    // A GPU generation times the fork alone (backend cells); only CPU ones run the A/B cells.
    // A sweep runs no A/B cells anywhere: it leaves one `sweep` event per generation.
    let expected_ab = backend == "cpu" && !spec.is_sweep();
    judge_sweep(
        &mut report,
        spec,
        read.sweep_outcome.as_ref(),
        generation.as_deref(),
        any_job_done,
    );
    report.missing_cells = missing_cells(&report, spec, backend, expected_ab);
    summarise(&mut report);
    let outcome = SectionOutcome {
        cancelled: run.state == RunState::Cancelled,
        carried_out: carried_out(&report, read.job_finished_cleanly),
        tuning_failed: report.findings.iter().any(|f| f.severity == Severity::Fail),
        sweep_missing: spec.is_sweep() && report.sweep.is_none() && has_jobs,
    };
    (report, outcome)
}

/// A run's report before any event is read: what the spec and the run record say.
fn report_of_spec(run: &RunRecord) -> Report {
    let spec = &run.spec;
    Report {
        schema_version: 1,
        run_id: run.run_id.clone(),
        spec_sha256: spec_sha256(spec),
        comparable_spec_sha256: comparable_spec_sha256(spec),
        name: spec.name.clone(),
        trigger: run.trigger.clone(),
        trigger_note: run.trigger_note.clone(),
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
        max_frame_delta: spec.measure.max_frame_delta,
        allow_missing: spec.parity.allow_missing.clone(),
        practical_threshold: spec.measure.practical_threshold,
        max_runs: spec.measure.max_runs,
        seed: spec.measure.seed,
        allowances: spec.parity.allow.clone(),
        min_useful_seconds: spec.measure.min_useful_seconds,
        cells: Vec::new(),
        generations: Vec::new(),
        cross_parity: Vec::new(),
        missing_cells: Vec::new(),
        geomean_speedup: None,
        geomean_cells: Vec::new(),
        score_parity: ScoreParity::NotRun,
        score_parity_report: Vec::new(),
        startup_bound: false,
        startup_note: None,
        errors: Vec::new(),
        attempts: 0,
        attempt_history: Vec::new(),
        findings: Vec::new(),
        skipped_checks: Vec::new(),
        backend_cells: Vec::new(),
        sweep: None,
        is_sweep: spec.is_sweep(),
        sweep_table: Vec::new(),
        bisects: Vec::new(),
        notifications: Vec::new(),
    }
}

/// What a generation's jobs' events add up to beyond what they write into the report.
struct EventsRead {
    /// The cells by index: kept from earlier attempts, then measured by the latest.
    cells: BTreeMap<u32, CellResult>,
    sweep_outcome: Option<crate::sweep::SweepOutcome>,
    /// Every job done, with a `done` event whose outcome is `completed`.
    job_finished_cleanly: bool,
}

/// Reads the jobs' records and events into `report` (host, sources, builds, findings,
/// backend cells, errors, attempts) and returns the rest.
fn read_jobs(report: &mut Report, jobs: Vec<JobRecord>) -> EventsRead {
    let mut sweep_outcome: Option<crate::sweep::SweepOutcome> = None;
    let mut cells: BTreeMap<u32, CellResult> = BTreeMap::new();
    let mut job_finished_cleanly = true;
    for job in jobs {
        report.attempts = report.attempts.max(job.attempt);
        report.agent_id = job.agent_id.clone().or(report.agent_id.take());
        report.attempt_history.extend(attempt_history(&job));
        for (attempt, mut cell) in job.kept_cells {
            cell.attempt = Some(attempt);
            cells.insert(cell.index, cell);
        }
        let mut saw_done = false;
        for event in job.events {
            match event {
                JobEventPayload::Started { host, calibration } => {
                    report.host = Some(host);
                    report.calibration = calibration.map(|c| *c);
                }
                JobEventPayload::SourceResolved { side, resolved, .. } => {
                    side_mut(report, side).resolved = Some(resolved);
                }
                JobEventPayload::Build(build) => {
                    if build.status == BuildStatus::Failed {
                        let log = if build.log_path.is_empty() {
                            String::new()
                        } else {
                            format!(" (log: {})", build.log_path)
                        };
                        report.errors.push(format!(
                            "the {} build failed: {}{log}",
                            build.side.name(),
                            build.error.as_deref().unwrap_or("see the build log")
                        ));
                    }
                    let side = build.side;
                    side_mut(report, side).build = Some(build);
                }
                JobEventPayload::Cell(cell) => {
                    let mut cell = *cell;
                    cell.attempt = Some(job.attempt);
                    cells.insert(cell.index, cell);
                }
                JobEventPayload::Done { outcome, error } => {
                    saw_done = true;
                    if outcome != JobOutcome::Completed {
                        job_finished_cleanly = false;
                    }
                    if let Some(error) = error {
                        report.errors.push(error);
                    }
                }
                JobEventPayload::Finding(finding) => report.findings.push(*finding),
                JobEventPayload::CheckSkipped(skipped) => report.skipped_checks.push(skipped),
                JobEventPayload::BackendCell(cell) => {
                    // A retried attempt measures the cell again; the last measurement stands.
                    report
                        .backend_cells
                        .retain(|c| (&c.backend, c.label()) != (&cell.backend, cell.label()));
                    report.backend_cells.push(*cell);
                }
                JobEventPayload::Sweep(outcome) => sweep_outcome = Some(*outcome),
                JobEventPayload::Progress { .. } | JobEventPayload::Log { .. } => {}
            }
        }
        if let Some(error) = job.error {
            report.errors.push(error);
        }
        if job.state != JobState::Done || !saw_done {
            job_finished_cleanly = false;
        }
    }
    EventsRead {
        cells,
        sweep_outcome,
        job_finished_cleanly,
    }
}

/// A sweep's outcome judged into `report.sweep`, with its finding; an error when a default
/// could not be timed, the sweep decided nothing, or a done job left no sweep result.
fn judge_sweep(
    report: &mut Report,
    spec: &JobSpec,
    outcome: Option<&crate::sweep::SweepOutcome>,
    generation: Option<&str>,
    any_job_done: bool,
) {
    let Some(sweep_spec) = &spec.sweep else {
        return;
    };
    match outcome {
        Some(outcome) => {
            let section = crate::sweep::judge(
                outcome,
                sweep_spec,
                spec.measure.practical_threshold,
                report.calibration.as_ref().map(|c| c.resolution),
            );
            if section.default_verdict.is_none() {
                report
                    .errors
                    .push(format!("sweep: {}", section.verdict_line));
            }
            for run in outcome.configurations.iter().filter(|r| r.is_default) {
                if let Some(error) = &run.error {
                    report.errors.push(format!(
                        "sweep: the shipped default could not be timed: {error}"
                    ));
                }
            }
            let finding_backend =
                generation.map_or(super::model::ANY_GENERATION, super::model::backend_of);
            report
                .findings
                .push(crate::sweep::sweep_finding(&section, finding_backend));
            report.sweep = Some(section);
        }
        None if any_job_done => report
            .errors
            .push("sweep: the job finished without a sweep result".into()),
        None => {}
    }
}

/// The spec's cells this generation should have measured and has no result for.
fn missing_cells(report: &Report, spec: &JobSpec, backend: &str, expected_ab: bool) -> Vec<String> {
    let present: std::collections::BTreeSet<(String, String)> = report
        .cells
        .iter()
        .map(|c| (c.fixture.clone(), c.workload.clone()))
        .collect();
    let expected_backend = spec.backends.gpu(backend).is_some_and(|b| b.timed);
    let present_backend: std::collections::BTreeSet<(String, String)> = report
        .backend_cells
        .iter()
        .map(|c| (c.fixture.clone(), c.workload.clone()))
        .collect();
    let mut missing_cells = Vec::new();
    for fixture in &spec.fixtures {
        for workload in &spec.workloads {
            let key = (fixture.name.clone(), workload.name.clone());
            let missing = (expected_ab && !present.contains(&key))
                || (expected_backend && !present_backend.contains(&key));
            if missing {
                missing_cells.push(format!("{}/{}", fixture.name, workload.name));
            }
        }
    }
    missing_cells
}

/// A job's attempts as the report lists them: for each, the earlier attempts its kept
/// cells came from (the latest earlier attempt that stored each).
fn attempt_history(job: &JobRecord) -> Vec<AttemptSummary> {
    let attempts = &job.attempts;
    attempts
        .iter()
        .map(|record| {
            let mut kept_from: Vec<u32> = record
                .kept_cells
                .iter()
                .filter_map(|index| {
                    attempts
                        .iter()
                        .filter(|a| a.attempt < record.attempt && a.measured_cells.contains(index))
                        .map(|a| a.attempt)
                        .max()
                })
                .collect();
            kept_from.sort_unstable();
            kept_from.dedup();
            AttemptSummary {
                job_id: job.job_id.clone(),
                generation: job.generation.clone(),
                attempt: record.attempt,
                agent_id: record.agent_id.clone(),
                leased: format_utc(record.leased_ms),
                kept_cells: record.kept_cells.clone(),
                kept_from,
                measured_cells: record.measured_cells.clone(),
                ended: record.end_reason.clone(),
            }
        })
        .collect()
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

/// One line per distinct reason cells were not measured, naming the cells it stopped: a
/// failed build stops every cell with the same words, and says so once, not once per side
/// and cell. A one-sided cell (a workload only one tree has) whose running side failed is
/// listed too, marked as outside the A/B comparison (it does not set exit 3).
fn not_measured(cells: &[CellResult]) -> Vec<String> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for cell in cells.iter().filter(|c| c.parity == CellParity::Unavailable) {
        let mut reasons: Vec<String> = cell
            .not_measured_reasons()
            .into_iter()
            .map(|(side, reason)| match side {
                Some(side) => format!("{side}: {reason}"),
                None => reason.to_string(),
            })
            .collect();
        if !cell.is_unavailable() {
            reasons.push(
                "the other tree does not have this workload, so it is outside the A/B comparison \
                 and does not fail the run"
                    .into(),
            );
        }
        let reason = reasons.join("; ");
        let name = format!("{}/{}", cell.fixture, cell.workload);
        match groups.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, names)) => names.push(name),
            None => groups.push((reason, vec![name])),
        }
    }
    groups
        .into_iter()
        .map(|(reason, names)| {
            let shown = names.iter().take(6).cloned().collect::<Vec<_>>().join(", ");
            let more = names.len().saturating_sub(6);
            let which = match (names.len(), more) {
                (n, _) if n == cells.len() && n > 1 => format!("all {n} cells"),
                (1, _) => shown,
                (_, 0) => format!("{} cells ({shown})", names.len()),
                (n, more) => format!("{n} cells ({shown} and {more} more)"),
            };
            format!("not measured: {which}: {reason}")
        })
        .collect()
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
    }
    report.errors.extend(not_measured(&report.cells));
    for cell in &report.backend_cells {
        if cell.status == crate::backend_cell::BackendCellStatus::Failed {
            report.errors.push(format!(
                "{} on {}: {}",
                cell.label(),
                cell.backend,
                cell.reason.as_deref().unwrap_or("failed")
            ));
        }
    }
    report.geomean_speedup = stats::geomean(&geomean_inputs);
    // A backend gated against the fork's CPU path (`gate_against_cpu`) counts like a cell.
    let backend_parity: Vec<(
        &crate::backend_cell::BackendCell,
        &crate::backend_cell::BackendParity,
    )> = report
        .backend_cells
        .iter()
        .filter_map(|cell| cell.cpu_parity.as_ref().map(|p| (cell, p)))
        .collect();
    let backend_failed = backend_parity.iter().any(|(_, p)| !p.passed);
    for (cell, parity) in backend_parity.iter().filter(|(_, p)| !p.passed) {
        report.score_parity_report.push(format!(
            "{} on {}: {}",
            cell.label(),
            cell.backend,
            parity.words()
        ));
    }
    let compared = report
        .cells
        .iter()
        .filter(|c| matches!(c.parity, CellParity::Ok | CellParity::Fail))
        .count()
        + backend_parity.len();
    report.score_parity =
        if backend_failed || report.cells.iter().any(|c| c.parity == CellParity::Fail) {
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

/// Whether the section did all it was asked: every job finished cleanly, the sweep's default
/// measured, no cell missing or unavailable, no backend cell failed.
fn carried_out(report: &Report, job_finished_cleanly: bool) -> bool {
    let sweep_measured = report.sweep.as_ref().is_none_or(|s| {
        s.default_verdict.is_some()
            && !s
                .configurations
                .iter()
                .any(|c| c.is_default && c.error.is_some())
    });
    job_finished_cleanly
        && sweep_measured
        && report.missing_cells.is_empty()
        && !report.cells.iter().any(CellResult::is_unavailable)
        && !report
            .backend_cells
            .iter()
            .any(|c| c.status == crate::backend_cell::BackendCellStatus::Failed)
}

/// What a run's exit codes are decided on, besides score parity, which the comparison with
/// earlier runs can still fail (the ratchet): per section (in `generations` order) what its
/// jobs did, and whether the run itself failed. [`RunOutcome::decide`] is the one place a
/// report's exit codes are set, once everything else in it is final.
pub(crate) struct RunOutcome {
    sections: Vec<SectionOutcome>,
    run_error: bool,
}

struct SectionOutcome {
    cancelled: bool,
    carried_out: bool,
    tuning_failed: bool,
    /// A sweep spec's job finished without its `sweep` event.
    sweep_missing: bool,
}

impl SectionOutcome {
    /// Cancelled, then parity failure, then not carried out, then tuning failure, then a
    /// missing sweep (not carried out), then ok.
    fn exit_code(&self, parity_failed: bool) -> i32 {
        if self.cancelled {
            exit::CANCELLED
        } else if parity_failed {
            exit::PARITY_FAILED
        } else if !self.carried_out {
            exit::NOT_CARRIED_OUT
        } else if self.tuning_failed {
            exit::TUNING_FAILED
        } else if self.sweep_missing {
            exit::NOT_CARRIED_OUT
        } else {
            exit::OK
        }
    }
}

impl RunOutcome {
    /// Sets each section's exit code and the run's, the most telling of its sections' and
    /// of its own failure.
    pub(crate) fn decide(&self, report: &mut Report) {
        for (section, outcome) in report.generations.iter_mut().zip(&self.sections) {
            section.exit_code = outcome.exit_code(section.score_parity == ScoreParity::Fail);
        }
        let run_failed = self.run_error.then_some(exit::NOT_CARRIED_OUT);
        report.exit_code = combined_exit_code(
            report
                .generations
                .iter()
                .map(|g| g.exit_code)
                .chain(run_failed),
        );
    }
}

/// `80` of `sm_80`, `compute_80`, `8.0` or `80`.
fn sm_number(text: &str) -> Option<u32> {
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Across the CUDA generations of a run: a build whose lowest target is older than every
/// CUDA device in the fleet carries code no device needs, and its floor can rise. Only the
/// report sees the whole fleet, so this finding is added here, to each CUDA section.
fn add_cuda_fleet_floor(sections: &mut [GenerationSection]) {
    let devices: Vec<u32> = sections
        .iter()
        .filter(|s| s.backend == "cuda")
        .filter_map(|s| sm_number(s.key.split('/').nth(1)?))
        .collect();
    let Some(&oldest_device) = devices.iter().min() else {
        return;
    };
    for section in sections.iter_mut().filter(|s| s.backend == "cuda") {
        let floor = section
            .findings
            .iter()
            .filter(|f| f.check == "arch_coverage")
            .find_map(|f| match f.evidence.get("floor")? {
                serde_json::Value::Number(n) => n.as_u64().map(|n| n as u32),
                serde_json::Value::String(s) => sm_number(s),
                _ => None,
            });
        let Some(floor) = floor else { continue };
        let devices_text = format!("sm_{oldest_device}");
        let finding = if floor < oldest_device {
            crate::finding::Finding::new(
                "cuda",
                "fleet_floor",
                "build",
                Severity::Warn,
                format!("the build's lowest target sm_{floor} is older than every CUDA device in this fleet (oldest {devices_text}): raise the floor to shrink the binary and build time, unless other users need it"),
                "calculated",
            )
        } else {
            crate::finding::Finding::new(
                "cuda",
                "fleet_floor",
                "build",
                Severity::Ok,
                format!("the build's lowest target sm_{floor} is needed by the fleet (oldest device {devices_text})"),
                "calculated",
            )
        };
        section.findings.push(
            finding
                .with("floor", floor)
                .with("oldest_device", oldest_device),
        );
    }
}

#[cfg(test)]
mod spec_hash_tests {
    use super::*;
    use crate::spec::{SourceSpec, TargetSpec};

    fn demo() -> JobSpec {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        let text = include_str!("../../../fixtures/jobs/demo.toml").replace(
            "[fork]\npath = \"../subject\"",
            "[fork]\ngit = \"https://example.invalid/fork.git\"\nrev = \"main\"",
        );
        JobSpec::from_toml(&text, std::path::Path::new("demo.toml"), dir).unwrap()
    }

    #[test]
    fn the_comparable_hash_ignores_revs_targets_seed_and_description_not_what_is_measured() {
        let spec = demo();
        assert!(matches!(spec.fork.source, SourceSpec::Git { .. }));
        let mut moved = spec.clone();
        if let SourceSpec::Git { rev, .. } = &mut moved.fork.source {
            *rev = "0123456789abcdef0123456789abcdef01234567".into();
        }
        moved.targets = Some(TargetSpec {
            backends: vec!["cpu".into()],
            generations: vec!["cpu/x86-64-v3/*".into()],
            vendors: vec!["*".into()],
            fanout: crate::spec::Fanout::PerGeneration,
        });
        moved.measure.seed = spec.measure.seed.wrapping_add(1);
        moved.description = "narrowed".into();
        assert_ne!(
            spec_sha256(&spec),
            spec_sha256(&moved),
            "the full hash sees it all"
        );
        assert_eq!(
            comparable_spec_sha256(&spec),
            comparable_spec_sha256(&moved)
        );
        let mut gate = spec.clone();
        gate.measure.max_score_delta *= 2.0;
        assert_ne!(comparable_spec_sha256(&spec), comparable_spec_sha256(&gate));
        let mut fewer = spec.clone();
        fewer.workloads.pop();
        assert_ne!(
            comparable_spec_sha256(&spec),
            comparable_spec_sha256(&fewer)
        );
    }
}

#[cfg(test)]
mod merged_sides_tests {
    use crate::events::{BuildRecord, BuildStatus, JobEventPayload, JobOutcome, Side};
    use crate::report::samples::{assembled, done_job, done_run};
    use crate::spec::JobSpec;

    /// Issue 39: a run over several generations (a retuning run) said both sides were "not
    /// resolved, not built" although a generation had built the fork.
    #[test]
    fn a_side_built_on_any_generation_is_resolved_and_built_in_the_header() {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        let spec = JobSpec::load(&dir.join("demo.toml")).unwrap();
        let source = spec.fork.source.clone();
        let run = done_run("00000000-0000-0000-0000-000000000009", "manual", 1, spec);
        let done = || JobEventPayload::Done {
            outcome: JobOutcome::Completed,
            error: None,
        };
        let jobs = vec![
            done_job("j1", Some("cpu/x86-64-v3/a"), vec![done()]),
            done_job(
                "j2",
                Some("cpu/x86-64-v4/b"),
                vec![
                    JobEventPayload::SourceResolved {
                        side: Side::Fork,
                        source,
                        resolved: "0123abcd".into(),
                    },
                    JobEventPayload::Build(BuildRecord {
                        side: Side::Fork,
                        status: BuildStatus::Built,
                        cache_key: "k".into(),
                        toolchain: "cc 12".into(),
                        seconds: 1.5,
                        log_path: "/w/build.log".into(),
                        log_tail: None,
                        error: None,
                    }),
                    done(),
                ],
            ),
        ];
        let report = assembled(&run, &jobs);
        assert_eq!(report.generations.len(), 2, "{:?}", report.generations);
        assert_eq!(report.fork.resolved.as_deref(), Some("0123abcd"));
        assert_eq!(
            report.fork.build.as_ref().map(|b| b.status),
            Some(BuildStatus::Built)
        );
        assert!(report.upstream.resolved.is_none() && report.upstream.build.is_none());
    }
}
