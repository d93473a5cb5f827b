//! Jobs and their leases: queued, leased, renewed, lapsed and given back, released, ended for good.

use std::collections::BTreeSet;

use abfleet_core::lifecycle::{JobState, RunState};
use abfleet_core::{AgentId, JobId, RunId};
use rusqlite::{params, OptionalExtension};

use super::{end_attempt, kept_cells_of, select_jobs, JobRow, LapsedLease, Reclaim, Store};
use crate::error::CoordinatorError;

/// Jobs and their leases: queued, leased, renewed, lapsed and given back, released, ended for good. A view of the [`Store`]: `store.jobs()`.
#[derive(Clone, Copy)]
pub struct JobRecords<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    pub fn jobs(&self) -> JobRecords<'_> {
        JobRecords { store: self }
    }
}

impl JobRecords<'_> {
    /// How many jobs are in each state.
    pub async fn count_by_state(&self) -> Result<Vec<(String, u64)>, CoordinatorError> {
        self.store.count_by_state("jobs").await
    }

    pub async fn of_run(&self, run_id: RunId) -> Result<Vec<JobRow>, CoordinatorError> {
        self.store
            .with(move |conn| select_jobs(conn, "run_id = ?1", params![run_id]))
            .await
    }

    pub async fn job(&self, job_id: JobId) -> Result<Option<JobRow>, CoordinatorError> {
        self.store
            .with(move |conn| Ok(select_jobs(conn, "job_id = ?1", params![job_id])?.pop()))
            .await
    }

    /// Jobs in a state, oldest first.
    pub async fn in_state(&self, state: JobState) -> Result<Vec<JobRow>, CoordinatorError> {
        self.store
            .with(move |conn| select_jobs(conn, "state = ?1", params![state]))
            .await
    }

    /// The jobs leased to `agent_id`, oldest first (an agent holds one at a time; a damaged
    /// store may say more). One query, where reading every leased job and keeping one
    /// agent's cost a row per busy agent each time an agent became idle.
    pub async fn leased_to(&self, agent_id: AgentId) -> Result<Vec<JobRow>, CoordinatorError> {
        self.store
            .with(move |conn| {
                select_jobs(
                    conn,
                    "state = ?1 AND agent_id = ?2",
                    params![JobState::Leased, agent_id],
                )
            })
            .await
    }

    /// Leases a queued job to an agent: a new attempt begins, recorded in `attempts` with
    /// the cells earlier attempts stored (which it keeps; [`JobRecords::kept_cells`]). `None` when
    /// the job is no longer queued (someone else took it).
    pub async fn lease_job(
        &self,
        job_id: JobId,
        agent_id: AgentId,
        lease_expires_ms: i64,
        now_ms: i64,
    ) -> Result<Option<u32>, CoordinatorError> {
        self.store.with(move |conn| {
            let tx = conn.transaction()?;
            let changed = tx.execute(
                "UPDATE jobs SET state = ?4, attempt = attempt + 1, agent_id = ?2, lease_expires_ms = ?3 WHERE job_id = ?1 AND state = ?5",
                params![
                    job_id,
                    agent_id,
                    lease_expires_ms,
                    JobState::Leased,
                    JobState::Queued
                ],
            )?;
            if changed == 0 {
                return Ok(None);
            }
            let attempt: u32 = tx.query_row(
                "SELECT attempt FROM jobs WHERE job_id = ?1",
                params![job_id],
                |row| row.get(0),
            )?;
            let kept: Vec<u32> = {
                let mut stmt = tx.prepare(
                    "SELECT DISTINCT cell_index FROM cells WHERE job_id = ?1 AND attempt < ?2 ORDER BY cell_index",
                )?;
                let rows = stmt.query_map(params![job_id, attempt], |row| row.get(0))?;
                rows.collect::<Result<_, _>>()?
            };
            let kept_json = serde_json::to_string(&kept)
                .map_err(|err| CoordinatorError::Internal(err.to_string()))?;
            tx.execute(
                "INSERT OR REPLACE INTO attempts (job_id, attempt, agent_id, leased_ms, kept_cells_json) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![job_id, attempt, agent_id, now_ms, kept_json],
            )?;
            tx.execute(
                "UPDATE runs SET state = ?2 WHERE run_id = (SELECT run_id FROM jobs WHERE job_id = ?1) AND state = ?3",
                params![job_id, RunState::Running, RunState::Queued],
            )?;
            tx.commit()?;
            Ok(Some(attempt))
        })
        .await
    }

    /// Extends the lease of a job that this agent holds at this attempt. `false` when it
    /// does not hold it (expired, reassigned, finished).
    pub async fn renew_lease(
        &self,
        job_id: JobId,
        agent_id: AgentId,
        attempt: u32,
        lease_expires_ms: i64,
    ) -> Result<bool, CoordinatorError> {
        self.store.with(move |conn| {
            let changed = conn.execute(
                "UPDATE jobs SET lease_expires_ms = ?4 WHERE job_id = ?1 AND agent_id = ?2 AND attempt = ?3 AND state = ?5",
                params![
                    job_id,
                    agent_id,
                    attempt,
                    lease_expires_ms,
                    JobState::Leased
                ],
            )?;
            Ok(changed == 1)
        })
        .await
    }

    /// The cells an attempt keeps from earlier attempts (stored before it was leased), in
    /// index order; empty for an attempt leased before the store kept attempts.
    pub async fn kept_cells(
        &self,
        job_id: JobId,
        attempt: u32,
    ) -> Result<BTreeSet<u32>, CoordinatorError> {
        self.store
            .with(move |conn| {
                let json: Option<String> = conn
                    .query_row(
                        "SELECT kept_cells_json FROM attempts WHERE job_id = ?1 AND attempt = ?2",
                        params![job_id, attempt],
                        |row| row.get(0),
                    )
                    .optional()?;
                kept_cells_of(&job_id, attempt, json.as_deref())
            })
            .await
    }

    /// Gives a lapsed lease back to the agent that held it: the job was requeued when the
    /// lease expired, but no other agent has taken it, so the same attempt goes on and its
    /// events are still accepted. Asked twice at once (an agent's heartbeat and its upload
    /// after a reconnect), the second finds the lease already the agent's
    /// ([`LapsedLease::AlreadyHeld`]), which is no refusal.
    pub async fn reclaim_lapsed_lease(
        &self,
        job_id: JobId,
        agent_id: AgentId,
        attempt: u32,
        lease_expires_ms: i64,
    ) -> Result<LapsedLease, CoordinatorError> {
        self.store.with(move |conn| {
            let tx = conn.transaction()?;
            let changed = tx.execute(
                "UPDATE jobs SET state = ?5, lease_expires_ms = ?4, error = NULL WHERE job_id = ?1 AND agent_id = ?2 AND attempt = ?3 AND state = ?6",
                params![
                    job_id,
                    agent_id,
                    attempt,
                    lease_expires_ms,
                    JobState::Leased,
                    JobState::Queued
                ],
            )?;
            let found = if changed == 1 {
                tx.execute(
                    "UPDATE attempts SET end_reason = NULL WHERE job_id = ?1 AND attempt = ?2",
                    params![job_id, attempt],
                )?;
                LapsedLease::GivenBack
            } else {
                let held: Option<i64> = tx
                    .query_row(
                        "SELECT 1 FROM jobs WHERE job_id = ?1 AND agent_id = ?2 AND attempt = ?3 AND state = ?4",
                        params![
                            job_id,
                            agent_id,
                            attempt,
                            JobState::Leased
                        ],
                        |row| row.get(0),
                    )
                    .optional()?;
                if held.is_some() {
                    LapsedLease::AlreadyHeld
                } else {
                    LapsedLease::Refused
                }
            };
            tx.commit()?;
            Ok(found)
        })
        .await
    }

    /// Puts a leased job back in the queue (its lease expired or its agent came back idle),
    /// or fails it when it has used up its attempts.
    pub async fn release_job(
        &self,
        job_id: JobId,
        max_attempts: u32,
        reason: String,
    ) -> Result<JobState, CoordinatorError> {
        self.release(job_id, max_attempts, reason, Reclaim::Allowed)
            .await
    }

    /// [`JobRecords::release_job`] for an attempt that must not go on: its holder cannot take the
    /// lease back ([`JobRecords::reclaim_lapsed_lease`]), so the next lease is a new attempt.
    pub async fn end_attempt_for_good(
        &self,
        job_id: JobId,
        max_attempts: u32,
        reason: String,
    ) -> Result<JobState, CoordinatorError> {
        self.release(job_id, max_attempts, reason, Reclaim::Refused)
            .await
    }

    async fn release(
        &self,
        job_id: JobId,
        max_attempts: u32,
        reason: String,
        reclaim: Reclaim,
    ) -> Result<JobState, CoordinatorError> {
        self.store.with(move |conn| {
            let tx = conn.transaction()?;
            let attempt: u32 = tx.query_row(
                "SELECT attempt FROM jobs WHERE job_id = ?1",
                params![job_id],
                |row| row.get(0),
            )?;
            let state = if attempt >= max_attempts {
                JobState::Failed
            } else {
                JobState::Queued
            };
            let error = if state == JobState::Failed {
                format!("{reason}; gave up after {attempt} attempt(s)")
            } else {
                reason
            };
            tx.execute(
                "UPDATE jobs SET state = ?2, lease_expires_ms = NULL, error = ?3 WHERE job_id = ?1 AND state = ?4",
                params![job_id, state, error, JobState::Leased],
            )?;
            end_attempt(&tx, job_id, attempt, &error)?;
            if reclaim == Reclaim::Refused {
                // The attempts table keeps who held it; the job row names no holder to give
                // the lease back to.
                tx.execute(
                    "UPDATE jobs SET agent_id = NULL WHERE job_id = ?1 AND state = ?2",
                    params![job_id, JobState::Queued],
                )?;
            }
            tx.commit()?;
            Ok(state)
        })
        .await
    }
}
