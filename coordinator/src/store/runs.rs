//! Runs and their state: submitted, listed, failed, cancelled.

use abfleet_core::lifecycle::{JobState, RunState};
use abfleet_core::spec::JobSpec;
use abfleet_core::RunId;
use rusqlite::params;

use super::{end_attempt, run_row, select_jobs, JobRow, NewJob, RunRow, Store, SELECT_RUNS};
use crate::error::CoordinatorError;

/// Runs and their state: submitted, listed, failed, cancelled. A view of the [`Store`]: `store.runs()`.
#[derive(Clone, Copy)]
pub struct RunRecords<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    pub fn runs(&self) -> RunRecords<'_> {
        RunRecords { store: self }
    }
}

impl RunRecords<'_> {
    pub async fn insert(
        &self,
        run_id: RunId,
        spec: &JobSpec,
        trigger: &str,
        spec_origin: &str,
        jobs: Vec<NewJob>,
        now_ms: i64,
    ) -> Result<(), CoordinatorError> {
        self.insert_noted(run_id, spec, trigger, None, spec_origin, jobs, now_ms)
            .await
    }

    /// [`RunRecords::insert`] with the trigger's note (`runs.trigger_note`).
    #[allow(clippy::too_many_arguments)]
    pub async fn insert_noted(
        &self,
        run_id: RunId,
        spec: &JobSpec,
        trigger: &str,
        trigger_note: Option<&str>,
        spec_origin: &str,
        jobs: Vec<NewJob>,
        now_ms: i64,
    ) -> Result<(), CoordinatorError> {
        let spec_json = spec.to_json();
        let name = spec.name.clone();
        let trigger = trigger.to_string();
        let trigger_note = trigger_note.map(str::to_string);
        let spec_origin = spec_origin.to_string();
        self.store.with(move |conn| {
            let tx = conn.transaction()?;
            tx.execute(
                "INSERT INTO runs (run_id, name, trigger, trigger_note, spec_json, spec_origin, state, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![run_id, name, trigger, trigger_note, spec_json, spec_origin, RunState::Queued, now_ms],
            )?;
            for job in jobs {
                tx.execute(
                    "INSERT INTO jobs (job_id, run_id, state, attempt, created_ms, generation, pinned_agent) VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6)",
                    params![
                        job.job_id,
                        run_id,
                        JobState::Queued,
                        now_ms,
                        job.generation,
                        job.pinned_agent
                    ],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    pub async fn run(&self, run_id: RunId) -> Result<Option<RunRow>, CoordinatorError> {
        self.store
            .with(move |conn| {
                let mut stmt = conn.prepare(&format!("{SELECT_RUNS} WHERE run_id = ?1"))?;
                let rows = stmt.query_map(params![run_id], run_row)?;
                Ok(rows.map(|row| row?).collect::<Result<Vec<_>, _>>()?.pop())
            })
            .await
    }

    /// Every run, oldest first.
    pub async fn all(&self) -> Result<Vec<RunRow>, CoordinatorError> {
        self.store
            .with(move |conn| {
                let mut stmt =
                    conn.prepare(&format!("{SELECT_RUNS} ORDER BY created_ms, run_id"))?;
                let rows = stmt.query_map([], run_row)?;
                rows.map(|row| row?).collect()
            })
            .await
    }

    /// Up to `limit` runs from position `offset`, newest first (the web view's order).
    pub async fn page_newest_first(
        &self,
        offset: u64,
        limit: u32,
    ) -> Result<Vec<RunRow>, CoordinatorError> {
        self.store
            .read(move |conn| {
                let mut stmt = conn.prepare(&format!(
                    "{SELECT_RUNS} ORDER BY created_ms DESC, run_id DESC LIMIT ?1 OFFSET ?2"
                ))?;
                let rows = stmt.query_map(params![i64::from(limit), offset as i64], run_row)?;
                rows.map(|row| row?).collect()
            })
            .await
    }

    /// How many runs are in each state.
    pub async fn count_by_state(&self) -> Result<Vec<(String, u64)>, CoordinatorError> {
        self.store.count_by_state("runs").await
    }

    /// Runs not finished although every job of theirs has (and they have one): the finish
    /// failed (a full disk, a failed report) or the coordinator died before it. The reaper
    /// finishes them (`Finishing::finish_stranded_runs`).
    pub async fn runs_with_every_job_finished(&self) -> Result<Vec<RunId>, CoordinatorError> {
        self.store
            .with(|conn| {
                let mut statement = conn.prepare(
                    "SELECT r.run_id FROM runs r
                 WHERE r.state NOT IN (?1, ?2, ?3)
                   AND EXISTS (SELECT 1 FROM jobs j WHERE j.run_id = r.run_id)
                   AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.run_id = r.run_id
                                   AND j.state NOT IN (?4, ?5, ?6))
                 ORDER BY r.created_ms",
                )?;
                let finished = params![
                    RunState::Done,
                    RunState::Failed,
                    RunState::Cancelled,
                    JobState::Done,
                    JobState::Failed,
                    JobState::Cancelled
                ];
                let ids = statement
                    .query_map(finished, |row| row.get::<_, RunId>(0))?
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(ids)
            })
            .await
    }

    /// Ends a run before any job ran (nothing matched its targets); it leaves nothing for
    /// later runs.
    pub async fn fail(
        &self,
        run_id: RunId,
        error: String,
        exit_code: i32,
        now_ms: i64,
    ) -> Result<(), CoordinatorError> {
        self.store.with(move |conn| {
            conn.execute(
                "UPDATE runs SET state = ?5, error = ?2, exit_code = ?3, finished_ms = ?4, results_recorded = 1 WHERE run_id = ?1",
                params![run_id, error, exit_code, now_ms, RunState::Failed],
            )?;
            Ok(())
        })
        .await
    }

    /// Marks a run cancelled and every unfinished job of it too, in one transaction.
    /// Returns the jobs that were leased (their agents must be told).
    pub async fn cancel(
        &self,
        run_id: RunId,
        reason: String,
        now_ms: i64,
    ) -> Result<Vec<JobRow>, CoordinatorError> {
        self.store.with(move |conn| {
            let tx = conn.transaction()?;
            let leased = select_jobs(
                &tx,
                "run_id = ?1 AND state = ?2",
                params![run_id, JobState::Leased],
            )?;
            for job in &leased {
                end_attempt(&tx, job.job_id, job.attempt, &reason)?;
            }
            tx.execute(
                "UPDATE jobs SET state = ?3, lease_expires_ms = NULL, error = ?2 WHERE run_id = ?1 AND state IN (?4, ?5)",
                params![
                    run_id,
                    reason,
                    JobState::Cancelled,
                    JobState::Queued,
                    JobState::Leased
                ],
            )?;
            tx.execute(
                "UPDATE runs SET state = ?3, exit_code = ?4, finished_ms = ?2 WHERE run_id = ?1 AND state IN (?5, ?6)",
                params![
                    run_id,
                    now_ms,
                    RunState::Cancelled,
                    abfleet_core::exit::CANCELLED,
                    RunState::Queued,
                    RunState::Running
                ],
            )?;
            tx.commit()?;
            Ok(leased)
        })
        .await
    }
}
