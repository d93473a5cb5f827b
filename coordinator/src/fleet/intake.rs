//! Event intake: a leased job's numbered events stored exactly once, progress published
//! from them, and the run finished when its last job is done. Events of an attempt whose
//! lease lapsed are accepted when nobody else took the job (the lease is given back).
//!
//! A batch is one trip to the store (`EventRecords::append_batch`: the lease checked and the events
//! stored in one transaction); what intake needs besides — the job's run and its spec's cell
//! count, the events stored so far — is kept per job while it takes events (`intake_memory`).

use abfleet_core::events::JobEventPayload;
use abfleet_core::lifecycle::JobState;
use abfleet_core::progress::RunProgress;
use abfleet_core::{AgentId, JobId};

use super::intake_memory::JobFacts;
use std::sync::Arc;

use super::state::Ground;
use super::FleetError;
use super::{Finishing, Scheduling};
use crate::store::{BatchOutcome, EventHeader, IncomingEvent, LeaseView, NewEvent};
use crate::CoordinatorError;
use tracing::warn;

/// Intake: events from agents, audited and stored once. Owns what it keeps per job
/// (`intake_memory`); reclaims leases and dispatches through `scheduling`, finishes runs
/// through `finishing`.
#[derive(Clone)]
pub struct Intake {
    pub(super) ground: Ground,
    pub(super) scheduling: Scheduling,
    pub(super) finishing: Finishing,
    memory: Arc<super::intake_memory::IntakeMemory>,
}

impl Intake {
    pub(super) fn new(ground: Ground, scheduling: Scheduling, finishing: Finishing) -> Intake {
        Intake {
            ground,
            scheduling,
            finishing,
            memory: Default::default(),
        }
    }

    /// Stores events of a leased job; returns the acknowledged sequence numbers.
    pub async fn push_events(
        &self,
        agent_id: AgentId,
        job_id: JobId,
        attempt: u32,
        events: Vec<impl Into<IncomingEvent>>,
    ) -> Result<Vec<u64>, FleetError> {
        let events = events.into_iter().map(Into::into).collect();
        let result = self.store_events(agent_id, job_id, attempt, events).await;
        if matches!(
            result,
            Err(FleetError::InvalidEvent { .. }
                | FleetError::NotLeaseHolder { .. }
                | FleetError::LeaseLost { .. })
        ) {
            super::metrics::Counters::add(&self.ground.counters().events_refused, 1);
        }
        result
    }

    async fn store_events(
        &self,
        agent_id: AgentId,
        job_id: JobId,
        attempt: u32,
        events: Vec<IncomingEvent>,
    ) -> Result<Vec<u64>, FleetError> {
        let facts = self.job_facts(job_id).await?;
        check_events(job_id, attempt, facts.cell_count, &events)?;
        let events = self
            .audit_cells(agent_id, job_id, attempt, &facts, events)
            .await?;
        let limit = self.ground.config().max_events_per_job;
        let stored = self.events_stored(job_id).await?;
        let mut reclaimed = false;
        let mut events = events;
        let (outcome, job) = loop {
            let batch = match self.ground.store()
                .events().append_batch(job_id, attempt, agent_id, events, (stored, limit))
                .await
            {
                Err(CoordinatorError::RepeatedCell { seq, index, first_seq, .. }) => {
                    warn!(agent_id = %agent_id, job_id = %job_id, attempt, index, seq, first_seq, "refused a second report of a cell");
                    return Err(FleetError::InvalidEvent {
                        job_id,
                        attempt,
                        seq,
                        reason: format!("cell {index} was already reported by event {first_seq} of this attempt; an attempt measures each cell once"),
                    });
                }
                Err(CoordinatorError::SequenceGap { first, last, .. }) => {
                    warn!(agent_id = %agent_id, job_id = %job_id, attempt, first, last, "a batch starts after a gap in the attempt's events (was the store restored from an older copy?); asking the agent for the missing ones");
                    return Err(FleetError::MissingEvents {
                        job_id,
                        attempt,
                        first,
                        last,
                    });
                }
                other => other?,
            }
            .ok_or(FleetError::UnknownJob(job_id))?;
            match batch {
                BatchOutcome::Stored { outcome, job } => break (outcome, job),
                BatchOutcome::NotHolder {
                    job,
                    events: refused,
                } if !reclaimed
                    && job.state == JobState::Queued
                    && job.attempt == attempt
                    && job.agent_id == Some(agent_id)
                    && self
                        .scheduling
                        .reclaim_lapsed(job_id, agent_id, attempt)
                        .await? =>
                {
                    // Cut off longer than the lease, but nobody took the job: its events
                    // still count.
                    reclaimed = true;
                    events = refused;
                }
                BatchOutcome::NotHolder { job, .. } => {
                    return Err(not_holder_error(job_id, attempt, agent_id, &job))
                }
                BatchOutcome::OverLimit(job) => {
                    // Re-sends of stored events count here too; near the limit that errs by a
                    // batch, which a limit this far above any real job can afford.
                    let error = FleetError::TooManyEvents { job_id, limit };
                    warn!(job_id = %job_id, stored, limit, "job over its event limit; failing it");
                    self.forget_job(job_id);
                    self.scheduling
                        .fail_job(job_id, job.run_id, error.to_string())
                        .await?;
                    return Err(error);
                }
            }
        };
        super::metrics::Counters::add(
            &self.ground.counters().events_ingested,
            outcome.new_events.len() as u64,
        );
        self.count_new_events(job_id, stored, outcome.new_events.len() as u64);
        let finished = self.publish_progress(job_id, &job, &facts, &outcome.new_events);
        if finished {
            // After "done" only re-sends arrive: what intake kept of the job is not needed.
            self.forget_job(job_id);
            self.finishing.finish_run_if_complete(job.run_id).await?;
            self.scheduling.dispatch().await?;
        }
        Ok(outcome.acked)
    }

    /// Progress from a batch's new events, for watchers (none: nothing is formatted); the
    /// cells of a batch are one update, its last. `true` when the batch held `done`.
    fn publish_progress(
        &self,
        job_id: JobId,
        job: &LeaseView,
        facts: &JobFacts,
        events: &[NewEvent],
    ) -> bool {
        let finished = events.iter().any(|event| {
            matches!(
                event.header,
                EventHeader::Other(JobEventPayload::Done { .. })
            )
        });
        if !self.ground.has_watchers() {
            return finished;
        }
        let last_cell = events.iter().rev().find_map(|event| match &event.header {
            EventHeader::Cell(cell) => Some(cell),
            EventHeader::Other(_) => None,
        });
        for event in events {
            match &event.header {
                EventHeader::Other(JobEventPayload::Progress {
                    phase,
                    message,
                    cells_done,
                    cells_total,
                    current_cell,
                }) => {
                    let mut update = RunProgress::new(job.run_id, Some(job_id), phase, message);
                    update.cells_done = *cells_done;
                    update.cells_total = *cells_total;
                    update.current_cell = current_cell.clone().filter(|cell| !cell.is_empty());
                    self.ground.publish(update);
                }
                EventHeader::Cell(cell)
                    if last_cell.is_some_and(|last| std::ptr::eq(last, cell)) =>
                {
                    let mut update = RunProgress::new(
                        job.run_id,
                        Some(job_id),
                        "timing",
                        &format!(
                            "cell {}/{} finished: {}",
                            cell.fixture,
                            cell.workload,
                            parity_words(cell.parity)
                        ),
                    );
                    update.cells_done = cell.index + 1;
                    update.cells_total = facts.cell_count as u32;
                    self.ground.publish(update);
                }
                _ => {}
            }
        }
        finished
    }

    /// The job's spec's cell count: read (the spec parsed) once per job while it takes events.
    async fn job_facts(&self, job_id: JobId) -> Result<JobFacts, FleetError> {
        if let Some(facts) = self.memory.facts(job_id) {
            return Ok(facts);
        }
        let job = self.ground.job_row(job_id).await?;
        let spec = self.ground.run_row(job.run_id).await?.spec;
        let facts = JobFacts {
            cell_count: spec.cell_count(),
            spec: std::sync::Arc::new(spec),
        };
        self.memory.keep_facts(job_id, facts.clone());
        Ok(facts)
    }

    /// Forgets what intake kept of a job (it finished, failed over its limit, or its attempt
    /// was redone).
    pub(super) fn forget_job(&self, job_id: JobId) {
        self.memory.forget(job_id);
    }
}

/// Why a batch from an agent that does not hold the job's lease at `attempt` is refused:
/// another agent's live (or finished) lease is never written into; anything else is a lease
/// this agent lost.
fn not_holder_error(job_id: JobId, attempt: u32, agent_id: AgentId, job: &LeaseView) -> FleetError {
    if job.attempt == attempt
        && job.state != JobState::Queued
        && job.agent_id.is_some_and(|holder| holder != agent_id)
    {
        FleetError::NotLeaseHolder {
            job_id,
            attempt,
            agent_id,
        }
    } else {
        FleetError::LeaseLost { job_id, attempt }
    }
}

impl Intake {
    /// Events the store holds for `job_id` (all attempts): counted in the store once per
    /// job and coordinator lifetime, then kept up to date here, so event intake does not
    /// count the job's events again on every batch.
    async fn events_stored(&self, job_id: JobId) -> Result<u64, FleetError> {
        if let Some(n) = self.memory.events_stored(job_id) {
            return Ok(n);
        }
        let n = self.ground.store().events().count_events(job_id).await?;
        self.memory.keep_events_stored(job_id, n);
        Ok(n)
    }

    fn count_new_events(&self, job_id: JobId, before: u64, new: u64) {
        self.memory.keep_events_stored(job_id, before + new);
    }
}

/// The bounds of an event batch, checked before anything of it is stored: sequence numbers
/// start at 0 and fit the store's signed 64-bit column, and a cell's index is one of the
/// spec's `cell_count` cells.
pub(super) fn check_events(
    job_id: JobId,
    attempt: u32,
    cell_count: usize,
    events: &[IncomingEvent],
) -> Result<(), FleetError> {
    for event in events {
        let refuse = |reason: String| FleetError::InvalidEvent {
            job_id,
            attempt,
            seq: event.seq,
            reason,
        };
        if event.seq > i64::MAX as u64 {
            return Err(refuse(format!(
                "sequence number {} is above the largest the coordinator stores ({})",
                event.seq,
                i64::MAX
            )));
        }
        if let EventHeader::Cell(cell) = &event.header {
            if cell.index as usize >= cell_count {
                return Err(refuse(format!(
                    "cell index {} is outside the spec's {cell_count} cell(s) (indices 0..{cell_count})",
                    cell.index
                )));
            }
        }
    }
    Ok(())
}

/// A cell's parity in the report's words, for a progress line.
fn parity_words(parity: abfleet_core::cell::CellParity) -> &'static str {
    use abfleet_core::cell::CellParity;
    match parity {
        CellParity::Ok => "parity ok",
        CellParity::Fail => "parity FAIL",
        CellParity::AbsentUpstream => "absent upstream",
        CellParity::AbsentFork => "absent in fork",
        CellParity::Unavailable => "not measured",
    }
}
