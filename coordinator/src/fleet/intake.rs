//! Event intake: a leased job's numbered events stored exactly once, progress published
//! from them, and the run finished when its last job is done. Events of an attempt whose
//! lease lapsed are accepted when nobody else took the job (the lease is given back).

use abfleet_core::events::JobEventPayload;
use abfleet_core::progress::RunProgress;
use abfleet_core::report::JobState;
use abfleet_core::{AgentId, JobId};

use super::Fleet;
use super::FleetError;
use crate::store::StoredEvent;
use tracing::warn;

impl Fleet {
    /// Stores events of a leased job; returns the acknowledged sequence numbers.
    pub async fn push_events(
        &self,
        agent_id: AgentId,
        job_id: JobId,
        attempt: u32,
        events: Vec<StoredEvent>,
    ) -> Result<Vec<u64>, FleetError> {
        let result = self.store_events(agent_id, job_id, attempt, events).await;
        if matches!(
            result,
            Err(FleetError::InvalidEvent { .. }
                | FleetError::NotLeaseHolder { .. }
                | FleetError::LeaseLost { .. })
        ) {
            super::metrics::Counters::add(&self.inner.counters.events_refused, 1);
        }
        result
    }

    async fn store_events(
        &self,
        agent_id: AgentId,
        job_id: JobId,
        attempt: u32,
        events: Vec<StoredEvent>,
    ) -> Result<Vec<u64>, FleetError> {
        let mut job = self
            .inner
            .store
            .job(job_id)
            .await?
            .ok_or_else(|| FleetError::UnknownJob(job_id))?;
        if job.state == JobState::Queued
            && job.attempt == attempt
            && job.agent_id == Some(agent_id)
            && self.reclaim_lapsed(job_id, agent_id, attempt).await?
        {
            // Cut off longer than the lease, but nobody took the job: its events still count.
            job = self
                .inner
                .store
                .job(job_id)
                .await?
                .ok_or_else(|| FleetError::UnknownJob(job_id))?;
        }
        if job.attempt == attempt
            && job.state != JobState::Queued
            && job.agent_id.is_some_and(|holder| holder != agent_id)
        {
            // Another agent's live (or finished) lease: never results forged into it.
            return Err(FleetError::NotLeaseHolder {
                job_id,
                attempt,
                agent_id,
            });
        }
        if job.attempt != attempt || job.agent_id != Some(agent_id) || job.state == JobState::Queued
        {
            return Err(FleetError::LeaseLost { job_id, attempt });
        }
        let run = self.run_row(job.run_id).await?;
        check_events(job_id, attempt, run.spec.cell_count(), &events)?;
        let limit = self.inner.config.max_events_per_job;
        let stored = self.events_stored(job_id).await?;
        if stored + events.len() as u64 > limit {
            // Re-sends of stored events count here too; near the limit that errs by a
            // batch, which a limit this far above any real job can afford.
            let error = FleetError::TooManyEvents { job_id, limit };
            warn!(job_id = %job_id, stored, limit, "job over its event limit; failing it");
            self.forget_event_count(job_id);
            self.fail_job(job_id, job.run_id, error.to_string()).await?;
            return Err(error);
        }
        // After "done" nothing new can legitimately arrive: only re-sends are acknowledged.
        let accept_new = matches!(job.state, JobState::Leased | JobState::Cancelled);
        let outcome = self
            .inner
            .store
            .append_events(job_id, attempt, events, accept_new)
            .await?;
        super::metrics::Counters::add(
            &self.inner.counters.events_ingested,
            outcome.new_events.len() as u64,
        );
        self.count_new_events(job_id, stored, outcome.new_events.len() as u64);
        let mut finished = false;
        for event in &outcome.new_events {
            match &event.payload {
                JobEventPayload::Progress {
                    phase,
                    message,
                    cells_done,
                    cells_total,
                    current_cell,
                } => {
                    let mut update = RunProgress::new(job.run_id, Some(job_id), phase, message);
                    update.cells_done = *cells_done;
                    update.cells_total = *cells_total;
                    update.current_cell = current_cell.clone().filter(|cell| !cell.is_empty());
                    self.publish(update);
                }
                JobEventPayload::Cell(cell) => {
                    let mut update = RunProgress::new(
                        job.run_id,
                        Some(job_id),
                        "timing",
                        &format!(
                            "cell {}/{} finished: {:?}",
                            cell.fixture, cell.workload, cell.parity
                        ),
                    );
                    update.cells_done = cell.index + 1;
                    update.cells_total = run.spec.cell_count() as u32;
                    self.publish(update);
                }
                JobEventPayload::Done { .. } => finished = true,
                _ => {}
            }
        }
        if run.state.is_finished() && !outcome.new_events.is_empty() {
            // A cancelled run's agent still uploads its last events: what the run leaves for
            // later runs follows its report.
            self.record_results_of(job.run_id).await?;
        }
        if finished {
            // After "done" only re-sends arrive: the count is no longer needed.
            self.forget_event_count(job_id);
            self.finish_run_if_complete(job.run_id).await?;
            self.dispatch().await?;
        }
        Ok(outcome.acked)
    }
}

impl Fleet {
    /// Events the store holds for `job_id` (all attempts): counted in the store once per
    /// job and coordinator lifetime, then kept up to date here, so event intake does not
    /// count the job's events again on every batch.
    async fn events_stored(&self, job_id: JobId) -> Result<u64, FleetError> {
        if let Some(n) = self.event_counts().get(&job_id) {
            return Ok(*n);
        }
        let n = self.inner.store.count_events(job_id).await?;
        self.event_counts().insert(job_id, n);
        Ok(n)
    }

    fn count_new_events(&self, job_id: JobId, before: u64, new: u64) {
        self.event_counts().insert(job_id, before + new);
    }

    fn forget_event_count(&self, job_id: JobId) {
        self.event_counts().remove(&job_id);
    }

    fn event_counts(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<JobId, u64>> {
        self.inner
            .event_counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

/// The bounds of an event batch, checked before anything of it is stored: sequence numbers
/// start at 0 and fit the store's signed 64-bit column, and a cell's index is one of the
/// spec's `cell_count` cells.
pub(super) fn check_events(
    job_id: JobId,
    attempt: u32,
    cell_count: usize,
    events: &[StoredEvent],
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
        if let JobEventPayload::Cell(cell) = &event.payload {
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
