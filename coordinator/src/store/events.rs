//! Each attempt's numbered events and the cells among them.

use abfleet_core::events::JobEventPayload;
use abfleet_core::lifecycle::JobState;
use abfleet_core::{AgentId, JobId};
use rusqlite::params;

use super::{
    done_stored, insert_batch, lease_view, previous, BatchOutcome, IncomingEvent, Store,
    StoredEvent,
};
use crate::error::CoordinatorError;

/// Each attempt's numbered events and the cells among them. A view of the [`Store`]: `store.events()`.
#[derive(Clone, Copy)]
pub struct EventRecords<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    pub fn events(&self) -> EventRecords<'_> {
        EventRecords { store: self }
    }
}

impl EventRecords<'_> {
    /// Events stored for a job, all attempts.
    pub async fn count_events(&self, job_id: JobId) -> Result<u64, CoordinatorError> {
        self.store
            .with(move |conn| {
                let n: i64 = conn.query_row(
                    "SELECT COUNT(*) FROM events WHERE job_id = ?1",
                    params![job_id],
                    |row| row.get(0),
                )?;
                Ok(n as u64)
            })
            .await
    }

    /// The next sequence number the store expects for an attempt: one past the largest
    /// stored (events are stored contiguously from 0).
    pub async fn next_event_seq(
        &self,
        job_id: JobId,
        attempt: u32,
    ) -> Result<u64, CoordinatorError> {
        self.store
            .with(move |conn| {
                let next: i64 = conn.query_row(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE job_id = ?1 AND attempt = ?2",
                params![job_id, attempt],
                |row| row.get(0),
            )?;
                Ok(next as u64)
            })
            .await
    }

    /// Intake's one trip to the store per batch: in one transaction, the job as it is now
    /// (its lease, its run's state), and — when `agent_id` holds the lease at `attempt` and
    /// the batch keeps the job within `limit` events (`stored` so far) — the batch stored,
    /// ignoring sequence numbers already stored: new events while the job is leased, or
    /// cancelled and the attempt has not sent its `done` yet (its agent's last events), only
    /// re-sends after that; a `Done` event finishes the job in the same transaction. `None`
    /// for an unknown job.
    pub async fn append_batch(
        &self,
        job_id: JobId,
        attempt: u32,
        agent_id: AgentId,
        events: Vec<IncomingEvent>,
        (stored, limit): (u64, u64),
    ) -> Result<Option<BatchOutcome>, CoordinatorError> {
        self.store
            .with(move |conn| {
                let tx = conn.transaction()?;
                let Some(job) = lease_view(&tx, job_id)? else {
                    return Ok(None);
                };
                let holder = job.attempt == attempt
                    && job.agent_id == Some(agent_id)
                    && job.state != JobState::Queued;
                if !holder {
                    return Ok(Some(BatchOutcome::NotHolder { job, events }));
                }
                if stored + events.len() as u64 > limit {
                    return Ok(Some(BatchOutcome::OverLimit(job)));
                }
                let accept_new = match job.state {
                    JobState::Leased => true,
                    JobState::Cancelled => !done_stored(&tx, job_id, attempt)?,
                    _ => false,
                };
                let outcome = insert_batch(&tx, job_id, attempt, events, accept_new)?;
                if job.run_state.is_finished() && !outcome.new_events.is_empty() {
                    // A cancelled run's agent still uploads its last events: what the run leaves
                    // for later runs is recorded again when a report or a history next needs it
                    // (once, however many batches arrive), and the reports kept so far are stale.
                    previous::record_results_again(&tx, job.run_id)?;
                }
                tx.commit()?;
                Ok(Some(BatchOutcome::Stored { outcome, job }))
            })
            .await
    }

    /// How many events of this attempt are stored (the next expected sequence number when
    /// they are contiguous from 0).
    pub async fn event_count(&self, job_id: JobId, attempt: u32) -> Result<u64, CoordinatorError> {
        self.store
            .with(move |conn| {
                let count: i64 = conn.query_row(
                    "SELECT COUNT(*) FROM events WHERE job_id = ?1 AND attempt = ?2",
                    params![job_id, attempt],
                    |row| row.get(0),
                )?;
                Ok(count as u64)
            })
            .await
    }

    /// Events of one attempt in sequence order.
    pub async fn of_attempt(
        &self,
        job_id: JobId,
        attempt: u32,
    ) -> Result<Vec<StoredEvent>, CoordinatorError> {
        self.store.with(move |conn| {
            let mut stmt = conn.prepare(
                "SELECT seq, at_ms, payload_json FROM events WHERE job_id = ?1 AND attempt = ?2 ORDER BY seq",
            )?;
            let rows = stmt.query_map(params![job_id, attempt], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?, row.get::<_, String>(2)?))
            })?;
            let mut events = Vec::new();
            for row in rows {
                let (seq, at_ms, payload_json) = row?;
                let payload = JobEventPayload::from_json(&payload_json).map_err(|err| {
                    CoordinatorError::Corrupt(format!(
                        "event {seq} of job {job_id} does not parse: {err}"
                    ))
                })?;
                events.push(StoredEvent {
                    seq: seq as u64,
                    at_ms,
                    payload,
                });
            }
            Ok(events)
        })
        .await
    }

    /// Number of stored cells of a job across attempts, and of its latest attempt.
    pub async fn cell_count(&self, job_id: JobId) -> Result<u64, CoordinatorError> {
        self.store.with(move |conn| {
            let count: i64 = conn.query_row(
                "SELECT COUNT(*) FROM cells WHERE job_id = ?1 AND attempt = (SELECT attempt FROM jobs WHERE job_id = ?1)",
                params![job_id],
                |row| row.get(0),
            )?;
            Ok(count as u64)
        })
        .await
    }

    /// Every stored cell of a job across its attempts, as `(attempt, cell index)` in that
    /// order: what "each cell stored exactly once" is checked against.
    pub async fn stored_cells(&self, job_id: JobId) -> Result<Vec<(u32, u32)>, CoordinatorError> {
        self.store.with(move |conn| {
            let mut stmt = conn.prepare(
                "SELECT attempt, cell_index FROM cells WHERE job_id = ?1 ORDER BY attempt, cell_index",
            )?;
            let rows = stmt.query_map(params![job_id], |row| {
                Ok((row.get::<_, u32>(0)?, row.get::<_, u32>(1)?))
            })?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .await
    }
}
