//! What report assembly reads: the run, its jobs, each job's latest attempt's events, its
//! attempts and the cells it kept from earlier ones. Read in one snapshot on the read
//! connection (ingest is neither waited for nor held up), then decoded after the connection
//! is released.
//!
//! Intake reads only a cell event's header (`store/incoming.rs`), so a cell's body is first
//! decoded here. A body this coordinator cannot read (an agent newer than it) does not fail
//! the report: the cell is left out, the job's error says which event and why, and the event
//! stays in the store as the agent sent it, for a coordinator that can read it.

use std::collections::{BTreeMap, BTreeSet};

use abfleet_core::events::{EventKind, JobEventPayload};
use abfleet_core::lifecycle::RunState;
use abfleet_core::report::{AttemptRecord, JobRecord, RunRecord};
use abfleet_core::spec::JobSpec;
use abfleet_core::RunId;
use rusqlite::{params, Connection, OptionalExtension};

use super::{kept_cells_of, JobRow, ReportRecords};
use crate::error::CoordinatorError;

impl ReportRecords<'_> {
    /// The inputs of report assembly: the run and, per job, its latest attempt's events.
    pub async fn report_inputs(
        &self,
        run_id: RunId,
    ) -> Result<Option<(RunRecord, Vec<JobRecord>)>, CoordinatorError> {
        let Some(raw) = self.store.read(move |conn| read_run(conn, run_id)).await? else {
            return Ok(None);
        };
        tokio::task::spawn_blocking(move || decode_run(raw).map(Some))
            .await
            .map_err(|err| CoordinatorError::Internal(format!("store task failed: {err}")))?
    }
}

/// A run as stored, its JSON not yet decoded.
struct RawRun {
    run_id: RunId,
    trigger: String,
    trigger_note: Option<String>,
    created_ms: i64,
    state: RunState,
    spec_json: String,
    error: Option<String>,
    jobs: Vec<RawJob>,
}

struct RawJob {
    row: JobRow,
    /// The latest attempt's events: (seq, kind, payload JSON).
    events: Vec<(i64, String, String)>,
    attempts: Vec<AttemptRecord>,
    /// The cells the latest attempt keeps: (index, attempt that stored it, seq, payload JSON).
    kept: Vec<(u32, u32, i64, String)>,
}

fn read_run(conn: &Connection, run_id: RunId) -> Result<Option<RawRun>, CoordinatorError> {
    let row = conn
        .query_row(
            "SELECT trigger, trigger_note, created_ms, state, spec_json, error FROM runs WHERE run_id = ?1",
            params![run_id],
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, Option<String>>(1)?,
                    row.get::<_, i64>(2)?,
                    row.get::<_, RunState>(3)?,
                    row.get::<_, String>(4)?,
                    row.get::<_, Option<String>>(5)?,
                ))
            },
        )
        .optional()?;
    let Some((trigger, trigger_note, created_ms, state, spec_json, error)) = row else {
        return Ok(None);
    };
    let jobs = super::select_jobs(conn, "run_id = ?1", params![run_id])?;
    let mut raw_jobs = Vec::with_capacity(jobs.len());
    for job in jobs {
        raw_jobs.push(read_job(conn, job)?);
    }
    Ok(Some(RawRun {
        run_id,
        trigger,
        trigger_note,
        created_ms,
        state,
        spec_json,
        error,
        jobs: raw_jobs,
    }))
}

fn read_job(conn: &Connection, row: JobRow) -> Result<RawJob, CoordinatorError> {
    let (job_id, latest) = (row.job_id, row.attempt);
    let events = {
        let mut stmt = conn.prepare_cached(
            "SELECT seq, kind, payload_json FROM events WHERE job_id = ?1 AND attempt = ?2 ORDER BY seq",
        )?;
        let rows = stmt.query_map(params![job_id, latest], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?;
        rows.collect::<Result<Vec<_>, _>>()?
    };
    let mut measured: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    {
        let mut stmt = conn.prepare_cached(
            "SELECT attempt, cell_index FROM cells WHERE job_id = ?1 ORDER BY attempt, cell_index",
        )?;
        let rows = stmt.query_map(params![job_id], |row| {
            Ok((row.get::<_, u32>(0)?, row.get::<_, u32>(1)?))
        })?;
        for row in rows {
            let (attempt, index) = row?;
            measured.entry(attempt).or_default().push(index);
        }
    }
    let mut attempts = Vec::new();
    {
        let mut stmt = conn.prepare_cached(
            "SELECT attempt, agent_id, leased_ms, kept_cells_json, end_reason FROM attempts WHERE job_id = ?1 ORDER BY attempt",
        )?;
        let rows = stmt.query_map(params![job_id], |row| {
            Ok((
                row.get::<_, u32>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, i64>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, Option<String>>(4)?,
            ))
        })?;
        for row in rows {
            let (attempt, agent_id, leased_ms, kept_json, end_reason) = row?;
            attempts.push(AttemptRecord {
                attempt,
                agent_id,
                leased_ms,
                kept_cells: kept_cells_of(&job_id, attempt, Some(&kept_json))?
                    .into_iter()
                    .collect(),
                measured_cells: measured.get(&attempt).cloned().unwrap_or_default(),
                end_reason,
            });
        }
    }
    let keep: BTreeSet<u32> = attempts
        .iter()
        .find(|a| a.attempt == latest)
        .map(|a| a.kept_cells.iter().copied().collect())
        .unwrap_or_default();
    let mut kept: BTreeMap<u32, (u32, i64, String)> = BTreeMap::new();
    if !keep.is_empty() {
        let mut stmt = conn.prepare_cached(
            "SELECT cells.cell_index, cells.attempt, cells.seq, events.payload_json FROM cells
             JOIN events ON events.job_id = cells.job_id AND events.attempt = cells.attempt AND events.seq = cells.seq
             WHERE cells.job_id = ?1 AND cells.attempt < ?2 ORDER BY cells.attempt",
        )?;
        let rows = stmt.query_map(params![job_id, latest], |row| {
            Ok((
                row.get::<_, u32>(0)?,
                row.get::<_, u32>(1)?,
                row.get::<_, i64>(2)?,
                row.get::<_, String>(3)?,
            ))
        })?;
        for row in rows {
            let (index, attempt, seq, json) = row?;
            if keep.contains(&index) {
                // The latest earlier attempt that stored the cell is the one kept.
                kept.insert(index, (attempt, seq, json));
            }
        }
    }
    Ok(RawJob {
        row,
        events,
        attempts,
        kept: kept
            .into_iter()
            .map(|(index, (attempt, seq, json))| (index, attempt, seq, json))
            .collect(),
    })
}

fn decode_run(raw: RawRun) -> Result<(RunRecord, Vec<JobRecord>), CoordinatorError> {
    let run_id = raw.run_id;
    let spec = JobSpec::from_json(&raw.spec_json)
        .map_err(|err| CoordinatorError::Corrupt(format!("spec of run {run_id}: {err}")))?;
    let state = raw.state;
    let jobs = raw
        .jobs
        .into_iter()
        .map(decode_job)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((
        RunRecord {
            run_id: run_id.to_string(),
            trigger: raw.trigger,
            trigger_note: raw.trigger_note,
            created_ms: raw.created_ms,
            state,
            spec,
            error: raw.error,
        },
        jobs,
    ))
}

fn decode_job(raw: RawJob) -> Result<JobRecord, CoordinatorError> {
    let job = raw.row;
    let job_id = job.job_id;
    let mut unreadable = Vec::new();
    let mut events = Vec::with_capacity(raw.events.len());
    for (seq, kind, json) in raw.events {
        match JobEventPayload::from_json(&json) {
            Ok(mut payload) => {
                // A cell is stored as its agent sent it; its texts are bounded here.
                payload.clip_texts();
                events.push(payload)
            }
            Err(err) if kind == EventKind::Cell.as_str() => {
                unreadable.push(unreadable_cell(seq, job.attempt, &err));
            }
            Err(err) => {
                return Err(CoordinatorError::Corrupt(format!(
                    "event {seq} of job {job_id} does not parse: {err}"
                )))
            }
        }
    }
    let mut kept_cells = Vec::with_capacity(raw.kept.len());
    for (_, attempt, seq, json) in raw.kept {
        match JobEventPayload::from_json(&json) {
            Ok(JobEventPayload::Cell(mut cell)) => {
                cell.clip_texts();
                kept_cells.push((attempt, *cell))
            }
            Ok(_) => {
                return Err(CoordinatorError::Corrupt(format!(
                "event {seq} of job {job_id} attempt {attempt} is listed as a cell but is not one"
            )))
            }
            Err(err) => unreadable.push(unreadable_cell(seq, attempt, &err)),
        }
    }
    let error = match (job.error, unreadable.is_empty()) {
        (error, true) => error,
        (None, false) => Some(unreadable.join("; ")),
        (Some(error), false) => Some(format!("{error}; {}", unreadable.join("; "))),
    };
    Ok(JobRecord {
        attempts: raw.attempts,
        kept_cells,
        generation: job.generation,
        job_id: job_id.to_string(),
        state: job.state,
        attempt: job.attempt,
        agent_id: job.agent_id.map(|id| id.to_string()),
        error,
        events,
    })
}

fn unreadable_cell(seq: i64, attempt: u32, err: &serde_json::Error) -> String {
    format!(
        "cell event {seq} of attempt {attempt} could not be read by this coordinator ({err}), so its cell is missing here; the event is kept as the agent sent it: is the agent newer than the coordinator?"
    )
}
