//! The durable store: runs, jobs, attempts, events, cells and agents in one SQLite file
//! under the data directory. Every state change is one transaction, so a coordinator killed
//! at any point restarts into a consistent store. The store knows rows, not scheduling policy. Its schema
//! is versioned: [`migrations`] brings any data directory abfleet ever made up to date on open.
//!
//! [`Store`] opens the file and runs closures on its connections; the queries are typed
//! repositories, one per concern and file, each a view borrowed from the store
//! (`store.runs()`, `store.jobs()`, `store.events()`, `store.agents()`,
//! `store.certificates()`, `store.reports()`, `store.triggers()`, `store.notifications()`,
//! `store.pull_requests()`). The row types and the statements and row readers the repositories
//! call (`select_jobs`, `run_row`, `insert_batch`, `lease_view`, `end_attempt`, …) stay here,
//! beside the connections they run on.

mod agents;
mod bisects;
mod certificates;
mod events;
mod incoming;
mod jobs;
mod listing;
mod migrations;
mod notifications;
mod previous;
mod pull_request_reports;
mod report_inputs;
mod reports;
mod runs;
mod triggers;
pub use agents::AgentRecords;
pub use certificates::{AgentCertificate, Binding, CertificateRecords, Revocation};
pub use events::EventRecords;
pub use incoming::{EventHeader, IncomingEvent};
pub use jobs::JobRecords;
pub use listing::{RunCursor, RunListing, RunOrder};
pub use notifications::{Attempt, DueNotification, NewNotification, NotificationRecords};
pub use pull_request_reports::{Posted, PullRequestRecords, PullRequestReport};
pub use reports::{ReportRecords, ReportToStore, StoredReport};
pub use runs::RunRecords;
pub use triggers::{
    toolchain_fingerprint, KnownToolchains, TriggerRecords, TriggerRow, UpstreamPin,
    DELIVERY_MEMORY_MS,
};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use abfleet_core::events::{EventKind, JobEventPayload};
use abfleet_core::inventory::Inventory;
use abfleet_core::lifecycle::{JobState, RunState};
use abfleet_core::spec::JobSpec;
use abfleet_core::{AgentId, JobId, RunId};
use rusqlite::{params, Connection, OptionalExtension};

use crate::error::CoordinatorError;

pub use previous::{GenerationResult, PreviousResult, RunFinish};

/// A handle on the store; cheap to clone. Calls run on the blocking pool. Writes (and the
/// reads a write decides on) go through one connection; reads that decide nothing (reports,
/// listings) have their own, so under WAL they neither wait for ingest nor hold it up.
#[derive(Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
    reader: Arc<Mutex<Connection>>,
    path: PathBuf,
}

/// One event as the agent numbered it.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    pub seq: u64,
    pub at_ms: i64,
    pub payload: JobEventPayload,
}

#[derive(Debug, Clone)]
pub struct JobRow {
    pub job_id: JobId,
    pub run_id: RunId,
    pub state: JobState,
    pub attempt: u32,
    pub agent_id: Option<AgentId>,
    pub lease_expires_ms: Option<i64>,
    pub error: Option<String>,
    /// The generation key this job measures, when the spec names targets.
    pub generation: Option<String>,
    /// The one agent that may take it (fan-out per agent).
    pub pinned_agent: Option<AgentId>,
}

/// A job to create with its run.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub job_id: JobId,
    pub generation: Option<String>,
    pub pinned_agent: Option<AgentId>,
}

impl NewJob {
    /// A job any agent may take (a spec without targets).
    pub fn any() -> NewJob {
        NewJob {
            job_id: JobId::new_random(),
            generation: None,
            pinned_agent: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct RunRow {
    pub run_id: RunId,
    pub name: String,
    pub trigger: String,
    /// What the trigger said about itself (the tag, the PR, the release), when it said anything.
    pub trigger_note: Option<String>,
    pub spec: JobSpec,
    pub state: RunState,
    pub created_ms: i64,
    pub exit_code: Option<i32>,
    /// Why the run could not start (no agent matched its targets).
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
pub struct AgentRow {
    pub agent_id: AgentId,
    pub inventory: Inventory,
    pub last_heartbeat_ms: i64,
    /// `abfleet drain` asked that it finish its job and be offered no new one.
    pub draining: bool,
    /// Under mutual TLS: the certificate name the id is bound to, and the certificate it
    /// last registered with. `None` for agents that came over plaintext loopback.
    pub certificate: Option<(String, abfleet_core::certs::CertificateId)>,
}

/// What storing a batch of events did.
#[derive(Debug, Default)]
pub struct AppendOutcome {
    pub acked: Vec<u64>,
    /// Events in the batch that were new (not duplicates), in order.
    pub new_events: Vec<NewEvent>,
}

/// An event a batch stored for the first time: what intake acts on (progress, `done`).
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub seq: u64,
    pub header: EventHeader,
}

/// A job's lease and its run's state, read in the transaction that stores a batch.
#[derive(Debug, Clone)]
pub struct LeaseView {
    pub run_id: RunId,
    pub state: JobState,
    pub attempt: u32,
    pub agent_id: Option<AgentId>,
    pub run_state: RunState,
}

/// What [`JobRecords::reclaim_lapsed_lease`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LapsedLease {
    /// The job was queued with the agent as its last holder at that attempt: the lease is
    /// the agent's again.
    GivenBack,
    /// The agent already holds the lease at that attempt: another of its calls (its
    /// heartbeat and an upload arrive together after a reconnect) gave it back a moment
    /// earlier.
    AlreadyHeld,
    /// Neither: another agent took the job, or it failed, was cancelled or redone.
    Refused,
}

impl LapsedLease {
    /// The agent holds the lease now, whichever call gave it back.
    pub fn is_held(self) -> bool {
        self != LapsedLease::Refused
    }
}

/// What [`EventRecords::append_batch`] did with a batch.
#[derive(Debug)]
pub enum BatchOutcome {
    /// Stored (or acknowledged as re-sends of stored events).
    Stored {
        outcome: AppendOutcome,
        job: LeaseView,
    },
    /// The agent does not hold the job's lease at that attempt: nothing stored (the batch
    /// is handed back).
    NotHolder {
        job: LeaseView,
        events: Vec<IncomingEvent>,
    },
    /// The batch would take the job past its event limit: nothing stored.
    OverLimit(LeaseView),
}

impl Store {
    /// Opens (creating when absent) `abfleet.sqlite3` in `data_dir` and migrates it to the
    /// schema this binary knows. A store from a newer abfleet is refused untouched.
    pub fn open(data_dir: &Path) -> Result<Store, CoordinatorError> {
        std::fs::create_dir_all(data_dir).map_err(|source| CoordinatorError::DataDir {
            path: data_dir.to_path_buf(),
            source,
        })?;
        let path = data_dir.join("abfleet.sqlite3");
        let mut conn = Connection::open(&path).map_err(|source| CoordinatorError::OpenStore {
            path: path.clone(),
            source,
        })?;
        conn.execute_batch("PRAGMA busy_timeout = 5000;")
            .map_err(|source| CoordinatorError::OpenStore {
                path: path.clone(),
                source,
            })?;
        migrations::check_not_newer(&conn, &path)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;",
        )
        .map_err(|source| CoordinatorError::OpenStore {
            path: path.clone(),
            source,
        })?;
        migrations::migrate(&mut conn, &path)?;
        let reader = open_reader(&path)?;
        Ok(Store {
            conn: Arc::new(Mutex::new(conn)),
            reader: Arc::new(Mutex::new(reader)),
            path,
        })
    }

    /// Opens the store a coordinator made in `data_dir`, for a command that reads it
    /// (`report`, `runs`, `history` with `--data-dir`): never creates a directory or a file,
    /// never migrates (a backup being checked stays as it is). A missing directory or file,
    /// a file that is no abfleet store, or one at another schema version is an error that
    /// says what to do.
    pub fn open_existing(data_dir: &Path) -> Result<Store, CoordinatorError> {
        let path = data_dir.join("abfleet.sqlite3");
        let missing = |why: &str| CoordinatorError::NoStore {
            path: data_dir.to_path_buf(),
            why: why.to_string(),
        };
        if !data_dir.is_dir() {
            return Err(missing("there is no such directory"));
        }
        if !path.is_file() {
            return Err(missing("it has no abfleet.sqlite3"));
        }
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
            | rusqlite::OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(&path, flags).map_err(|source| {
            CoordinatorError::OpenStore {
                path: path.clone(),
                source,
            }
        })?;
        conn.execute_batch("PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;")
            .map_err(|source| CoordinatorError::OpenStore {
                path: path.clone(),
                source,
            })?;
        migrations::check_not_newer(&conn, &path)?;
        let found =
            migrations::schema_version(&conn).map_err(|source| CoordinatorError::OpenStore {
                path: path.clone(),
                source,
            })?;
        if found != migrations::LATEST_VERSION {
            return Err(CoordinatorError::StoreNotCurrent {
                path: path.clone(),
                found,
                known: migrations::LATEST_VERSION,
            });
        }
        let reader = open_reader(&path)?;
        Ok(Store {
            conn: Arc::new(Mutex::new(conn)),
            reader: Arc::new(Mutex::new(reader)),
            path,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` with the connection on the blocking pool.
    async fn with<T, F>(&self, f: F) -> Result<T, CoordinatorError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, CoordinatorError> + Send + 'static,
    {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            f(&mut guard)
        })
        .await
        .map_err(|err| CoordinatorError::Internal(format!("store task failed: {err}")))?
    }

    /// Runs `f` with the read-only connection on the blocking pool, inside one read
    /// transaction (one consistent snapshot of the store, however many statements `f` runs).
    async fn read<T, F>(&self, f: F) -> Result<T, CoordinatorError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, CoordinatorError> + Send + 'static,
    {
        let conn = self.reader.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let tx = guard.transaction()?;
            let value = f(&tx)?;
            tx.finish()?;
            Ok(value)
        })
        .await
        .map_err(|err| CoordinatorError::Internal(format!("store task failed: {err}")))?
    }

    async fn count_by_state(
        &self,
        table: &'static str,
    ) -> Result<Vec<(String, u64)>, CoordinatorError> {
        self.with(move |conn| {
            let mut stmt = conn.prepare(&format!(
                "SELECT state, COUNT(*) FROM {table} GROUP BY state ORDER BY state"
            ))?;
            let rows = stmt.query_map([], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)? as u64))
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }
}

/// Whether the holder of a released attempt may take its lease back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reclaim {
    Allowed,
    Refused,
}

/// The read-only connection beside the writer: `query_only`, so nothing can write through it
/// by mistake, and the same busy timeout.
fn open_reader(path: &Path) -> Result<Connection, CoordinatorError> {
    let open_error = |source| CoordinatorError::OpenStore {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open(path).map_err(open_error)?;
    conn.execute_batch("PRAGMA busy_timeout = 5000; PRAGMA query_only = ON;")
        .map_err(open_error)?;
    Ok(conn)
}

/// Stores `events` of one attempt in `tx` (see [`EventRecords::append_batch`]).
fn insert_batch(
    tx: &rusqlite::Transaction<'_>,
    job_id: JobId,
    attempt: u32,
    events: Vec<IncomingEvent>,
    accept_new: bool,
) -> Result<AppendOutcome, CoordinatorError> {
    let mut outcome = AppendOutcome::default();
    let mut events = events;
    events.sort_by_key(|event| event.seq);
    // An attempt's events are stored contiguously from 0: the agent sends its unacknowledged
    // events oldest first, so a batch that starts past the next expected number means the
    // store lost events it once acknowledged (it was restored from a backup). Nothing of
    // such a batch is stored; the caller asks the agent for the missing ones.
    let mut next: u64 =
        tx.prepare_cached(
            "SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE job_id = ?1 AND attempt = ?2",
        )?
        .query_row(params![job_id, attempt], |row| row.get::<_, i64>(0))? as u64;
    for event in events {
        if accept_new && event.seq > next {
            return Err(CoordinatorError::SequenceGap {
                job_id: job_id.to_string(),
                attempt,
                first: next,
                last: event.seq - 1,
            });
        }
        next = next.max(event.seq + 1);
        if !accept_new {
            let stored: bool = tx
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM events WHERE job_id = ?1 AND attempt = ?2 AND seq = ?3)",
                )?
                .query_row(params![job_id, attempt, event.seq as i64], |row| row.get(0))?;
            if !stored {
                return Err(CoordinatorError::LeaseLost {
                    job_id: job_id.to_string(),
                    attempt,
                });
            }
            outcome.acked.push(event.seq);
            continue;
        }
        let kind = event.kind();
        let inserted = tx
            .prepare_cached(
                "INSERT OR IGNORE INTO events (job_id, attempt, seq, at_ms, kind, payload_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![job_id, attempt, event.seq as i64, event.at_ms, kind, event.payload_json])?;
        outcome.acked.push(event.seq);
        if inserted == 0 {
            continue;
        }
        apply_header(tx, job_id, attempt, event.seq, &event.header)?;
        // The stored JSON is no longer needed: what intake reads next is the header.
        outcome.new_events.push(NewEvent {
            seq: event.seq,
            header: event.header,
        });
    }
    Ok(outcome)
}

/// What a newly stored event changes beyond the events table: a cell is indexed (a second
/// cell of one index in an attempt refuses the batch), a `done` ends the attempt and the job.
fn apply_header(
    tx: &rusqlite::Transaction<'_>,
    job_id: JobId,
    attempt: u32,
    seq: u64,
    header: &EventHeader,
) -> Result<(), CoordinatorError> {
    match header {
        EventHeader::Cell(cell) => {
            let stored = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO cells (job_id, attempt, cell_index, fixture, workload, parity, seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )?
                .execute(params![
                    job_id,
                    attempt,
                    cell.index,
                    cell.fixture,
                    cell.workload,
                    cell.parity,
                    seq as i64
                ])?;
            if stored == 0 {
                // A new event for a cell this attempt has: the batch is refused whole
                // (the transaction is not committed), so the store and the report never
                // disagree on which of the two counts.
                let first_seq: i64 = tx
                    .prepare_cached(
                        "SELECT seq FROM cells WHERE job_id = ?1 AND attempt = ?2 AND cell_index = ?3",
                    )?
                    .query_row(params![job_id, attempt, cell.index], |row| row.get(0))?;
                return Err(CoordinatorError::RepeatedCell {
                    job_id: job_id.to_string(),
                    attempt,
                    seq,
                    index: cell.index,
                    first_seq: first_seq as u64,
                });
            }
        }
        EventHeader::Other(JobEventPayload::Done {
            outcome: job_outcome,
            error,
        }) => {
            let state = match job_outcome {
                abfleet_core::events::JobOutcome::Completed => JobState::Done,
                abfleet_core::events::JobOutcome::Failed => JobState::Failed,
                abfleet_core::events::JobOutcome::Cancelled => JobState::Cancelled,
            };
            let reason = match error {
                Some(error) => format!("{}: {error}", state.as_str()),
                None => state.as_str().to_string(),
            };
            end_attempt(tx, job_id, attempt, &reason)?;
            // A leased job that completes clears the reason an earlier attempt ended (its
            // agent was lost): the attempt history keeps it, and it is no problem of the
            // finished job.
            tx.execute(
                "UPDATE jobs SET state = ?3, lease_expires_ms = NULL, error = CASE WHEN state = ?5 AND ?3 = ?7 THEN ?4 ELSE COALESCE(error, ?4) END WHERE job_id = ?1 AND attempt = ?2 AND state IN (?5, ?6)",
                params![
                    job_id,
                    attempt,
                    state,
                    error,
                    JobState::Leased,
                    JobState::Cancelled,
                    JobState::Done
                ],
            )?;
        }
        EventHeader::Other(_) => {}
    }
    Ok(())
}

/// A job's lease and its run's state, as intake decides on them.
fn lease_view(conn: &Connection, job_id: JobId) -> Result<Option<LeaseView>, CoordinatorError> {
    let row = conn
        .prepare_cached(
            "SELECT jobs.run_id, jobs.state, jobs.attempt, jobs.agent_id, runs.state
             FROM jobs JOIN runs USING (run_id) WHERE jobs.job_id = ?1",
        )?
        .query_row(params![job_id], |row| {
            Ok(LeaseView {
                run_id: row.get(0)?,
                state: row.get(1)?,
                attempt: row.get(2)?,
                agent_id: row.get(3)?,
                run_state: row.get(4)?,
            })
        })
        .optional()?;
    Ok(row)
}

/// Whether the attempt's `done` event is stored.
fn done_stored(conn: &Connection, job_id: JobId, attempt: u32) -> Result<bool, CoordinatorError> {
    Ok(conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM events WHERE job_id = ?1 AND attempt = ?2 AND kind = ?3)",
        )?
        .query_row(params![job_id, attempt, EventKind::Done], |row| row.get(0))?)
}

/// Records how an attempt ended, unless it already has an end.
fn end_attempt(
    conn: &Connection,
    job_id: JobId,
    attempt: u32,
    reason: &str,
) -> Result<(), CoordinatorError> {
    conn.execute(
        "UPDATE attempts SET end_reason = ?3 WHERE job_id = ?1 AND attempt = ?2 AND end_reason IS NULL",
        params![job_id, attempt, reason],
    )?;
    Ok(())
}

fn kept_cells_of(
    job_id: &JobId,
    attempt: u32,
    json: Option<&str>,
) -> Result<BTreeSet<u32>, CoordinatorError> {
    match json {
        None => Ok(BTreeSet::new()),
        Some(json) => serde_json::from_str(json).map_err(|err| {
            CoordinatorError::Corrupt(format!(
                "kept cells of job {job_id} attempt {attempt} do not parse: {err}"
            ))
        }),
    }
}

/// The columns [`run_row`] reads, before a `WHERE` or `ORDER BY`.
const SELECT_RUNS: &str =
    "SELECT run_id, name, trigger, spec_json, state, created_ms, exit_code, error, trigger_note FROM runs";

/// Jobs matching a filter (a `WHERE` clause over `params`), oldest first.
fn select_jobs(
    conn: &Connection,
    filter: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<JobRow>, CoordinatorError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT job_id, run_id, state, attempt, agent_id, lease_expires_ms, error, generation, pinned_agent FROM jobs WHERE {filter} ORDER BY created_ms, job_id"
    ))?;
    let rows = stmt.query_map(params, job_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

type RowResult<T> = rusqlite::Result<Result<T, CoordinatorError>>;

fn run_row(row: &rusqlite::Row<'_>) -> RowResult<RunRow> {
    let run_id: RunId = row.get(0)?;
    let spec_json: String = row.get(3)?;
    let (name, trigger, state, created_ms) = (row.get(1)?, row.get(2)?, row.get(4)?, row.get(5)?);
    let (exit_code, error, trigger_note) = (row.get(6)?, row.get(7)?, row.get(8)?);
    Ok(match JobSpec::from_json(&spec_json) {
        Ok(spec) => Ok(RunRow {
            run_id,
            name,
            trigger,
            trigger_note,
            spec,
            state,
            created_ms,
            exit_code,
            error,
        }),
        Err(err) => Err(CoordinatorError::Corrupt(format!(
            "spec of run {run_id}: {err}"
        ))),
    })
}

fn job_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<JobRow> {
    Ok(JobRow {
        job_id: row.get(0)?,
        run_id: row.get(1)?,
        state: row.get(2)?,
        attempt: row.get(3)?,
        agent_id: row.get(4)?,
        lease_expires_ms: row.get(5)?,
        error: row.get(6)?,
        generation: row.get(7)?,
        pinned_agent: row.get(8)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use abfleet_core::events::{JobOutcome, LogLevel};

    fn spec() -> JobSpec {
        let text = include_str!("../../fixtures/jobs/demo.toml");
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        JobSpec::from_toml(text, Path::new("demo.toml"), dir).unwrap()
    }

    fn log(seq: u64) -> StoredEvent {
        StoredEvent {
            seq,
            at_ms: 0,
            payload: JobEventPayload::Log {
                level: LogLevel::Info,
                line: format!("line {seq}"),
            },
        }
    }

    /// Stores `events` as intake does, for the lease holder; panics when they are not stored.
    async fn append(
        store: &Store,
        job_id: JobId,
        attempt: u32,
        agent_id: AgentId,
        events: Vec<StoredEvent>,
    ) -> AppendOutcome {
        let events = events.into_iter().map(Into::into).collect();
        match store
            .events()
            .append_batch(job_id, attempt, agent_id, events, (0, u64::MAX))
            .await
            .unwrap()
        {
            Some(BatchOutcome::Stored { outcome, .. }) => outcome,
            Some(BatchOutcome::NotHolder { .. }) => panic!("not the lease holder"),
            Some(BatchOutcome::OverLimit(_)) => panic!("over the limit"),
            None => panic!("no such job"),
        }
    }

    /// A run with one queued job, and an agent id to lease it to.
    async fn queued_run(store: &Store, spec: &JobSpec, trigger: &str) -> (RunId, JobId, AgentId) {
        let (run_id, job) = (RunId::new_random(), NewJob::any());
        let job_id = job.job_id;
        store
            .runs()
            .insert(run_id, spec, trigger, "test", vec![job], 1)
            .await
            .unwrap();
        (run_id, job_id, AgentId::new_random())
    }

    #[tokio::test]
    async fn a_stored_state_or_id_no_abfleet_wrote_reads_as_corruption_naming_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (run_id, job_id, _) = queued_run(&store, &spec(), "manual").await;
        store
            .with(move |conn| {
                conn.execute(
                    "UPDATE runs SET state = 'paused' WHERE run_id = ?1",
                    [run_id],
                )?;
                conn.execute(
                    "UPDATE jobs SET agent_id = 'nobody' WHERE job_id = ?1",
                    [job_id],
                )?;
                Ok(())
            })
            .await
            .unwrap();
        let err = store.runs().run(run_id).await.unwrap_err();
        assert!(matches!(err, CoordinatorError::Corrupt(_)), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("`paused` is not a run state") && text.contains("queued"),
            "{text}"
        );
        let err = store.jobs().job(job_id).await.unwrap_err().to_string();
        assert!(err.contains("`nobody` is not a valid agent id"), "{err}");
    }

    #[tokio::test]
    async fn duplicate_sequence_numbers_are_acknowledged_but_stored_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (_, job_id, agent_id) = queued_run(&store, &spec(), "manual").await;
        let attempt = store
            .jobs()
            .lease_job(job_id, agent_id, 10_000, 1)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(attempt, 1);
        let first = append(&store, job_id, attempt, agent_id, vec![log(0), log(1)]).await;
        assert_eq!(first.acked, vec![0, 1]);
        assert_eq!(first.new_events.len(), 2);
        let again = append(&store, job_id, attempt, agent_id, vec![log(1), log(2)]).await;
        assert_eq!(again.acked, vec![1, 2]);
        assert_eq!(again.new_events.len(), 1);
        assert_eq!(
            store.events().event_count(job_id, attempt).await.unwrap(),
            3
        );
    }

    #[tokio::test]
    async fn the_store_survives_a_reopen_and_done_finishes_the_job() {
        let dir = tempfile::tempdir().unwrap();
        let spec = spec();
        let (run_id, job_id) = {
            let store = Store::open(dir.path()).unwrap();
            let (run_id, job_id, agent_id) = queued_run(&store, &spec, "release").await;
            let attempt = store
                .jobs()
                .lease_job(job_id, agent_id, 10_000, 1)
                .await
                .unwrap()
                .unwrap();
            let done = StoredEvent {
                seq: 0,
                at_ms: 5,
                payload: JobEventPayload::Done {
                    outcome: JobOutcome::Completed,
                    error: None,
                },
            };
            append(&store, job_id, attempt, agent_id, vec![done]).await;
            (run_id, job_id)
        };
        let store = Store::open(dir.path()).unwrap();
        let job = store.jobs().job(job_id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Done);
        let run = store.runs().run(run_id).await.unwrap().unwrap();
        assert_eq!(run.trigger, "release");
        assert_eq!(run.spec, spec);
    }

    #[tokio::test]
    async fn events_of_an_attempt_replaced_since_the_caller_looked_are_refused_in_the_transaction()
    {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (_, job_id, agent_id) = queued_run(&store, &spec(), "manual").await;
        store
            .jobs()
            .lease_job(job_id, agent_id, 10, 1)
            .await
            .unwrap();
        store
            .jobs()
            .release_job(job_id, 3, "agent restarted".into())
            .await
            .unwrap();
        // Between the intake's read (attempt 1, leased) and its write, attempt 2 was leased.
        store
            .jobs()
            .lease_job(job_id, agent_id, 10, 2)
            .await
            .unwrap();
        let late = store
            .events()
            .append_batch(job_id, 1, agent_id, vec![log(0).into()], (0, u64::MAX))
            .await;
        assert!(
            matches!(
                late,
                Ok(Some(BatchOutcome::NotHolder { ref job, .. })) if job.attempt == 2
            ),
            "{late:?}"
        );
        assert_eq!(store.events().event_count(job_id, 1).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn an_expired_lease_requeues_until_the_attempts_are_used_up() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (_, job_id, agent_id) = queued_run(&store, &spec(), "manual").await;
        store
            .jobs()
            .lease_job(job_id, agent_id, 10, 1)
            .await
            .unwrap();
        assert_eq!(
            store
                .jobs()
                .release_job(job_id, 2, "lease expired".into())
                .await
                .unwrap(),
            JobState::Queued
        );
        assert_eq!(
            store
                .jobs()
                .lease_job(job_id, agent_id, 10, 1)
                .await
                .unwrap(),
            Some(2)
        );
        assert!(
            !store
                .jobs()
                .renew_lease(job_id, agent_id, 1, 20)
                .await
                .unwrap(),
            "a stale attempt cannot renew"
        );
        assert_eq!(
            store
                .jobs()
                .release_job(job_id, 2, "lease expired".into())
                .await
                .unwrap(),
            JobState::Failed
        );
        let job = store.jobs().job(job_id).await.unwrap().unwrap();
        assert!(job.error.unwrap().contains("gave up after 2 attempt(s)"));
    }
}
