//! The ladder on real SQLite files: data directories in the shapes abfleet shipped before it had
//! versions (the schemas copied verbatim from git into `fixtures/store/`), one from the future,
//! and ones it must refuse.

use std::path::{Path, PathBuf};

use abfleet_core::events::{JobEventPayload, JobOutcome, LogLevel};
use abfleet_core::lifecycle::{JobState, RunState};
use abfleet_core::spec::JobSpec;
use abfleet_core::{exit, AgentId, JobId, RunId};
use rusqlite::{params, Connection};

use super::{migrate_to, schema_version, LATEST_VERSION, MIGRATIONS};
use crate::error::CoordinatorError;
use crate::store::{NewJob, Store};

/// The first schema abfleet shipped (8d32bdf..6cf58f4), as its `SCHEMA` constant had it.
const SCHEMA_V1_8D32BDF: &str = include_str!("../../../../fixtures/store/schema-v1-8d32bdf.sql");
/// The schema abfleet shipped from 516587f until the ladder, as its `SCHEMA` constant had it.
const SCHEMA_V2_516587F: &str = include_str!("../../../../fixtures/store/schema-v2-516587f.sql");

const INDEXES_OF_MIGRATION_3: [&str; 5] = [
    "runs_by_created",
    "runs_by_name",
    "runs_by_state",
    "jobs_by_run",
    "jobs_by_generation",
];

fn spec() -> JobSpec {
    let text = include_str!("../../../../fixtures/jobs/demo.toml");
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
    JobSpec::from_toml(text, Path::new("demo.toml"), dir).unwrap()
}

fn store_file(data_dir: &Path) -> PathBuf {
    data_dir.join("abfleet.sqlite3")
}

/// A store file as an abfleet without versions left it: `schema` run the way its `Store::open`
/// ran it, after the same pragmas.
fn legacy_store(data_dir: &Path, schema: &str) -> Connection {
    let conn = Connection::open(store_file(data_dir)).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000;",
    )
    .unwrap();
    conn.execute_batch(schema).unwrap();
    assert_eq!(schema_version(&conn).unwrap(), 0);
    conn
}

fn json(payload: &JobEventPayload) -> String {
    serde_json::to_string(payload).unwrap()
}

fn log_event(line: &str) -> JobEventPayload {
    JobEventPayload::Log {
        level: LogLevel::Info,
        line: line.to_string(),
    }
}

fn done_event() -> JobEventPayload {
    JobEventPayload::Done {
        outcome: JobOutcome::Completed,
        error: None,
    }
}

/// Everything that makes two schemas the same to the store's queries: tables with their columns
/// (name, type, not-null, default, key), foreign keys, and indexes with their columns.
fn schema_shape(conn: &Connection) -> Vec<String> {
    let mut shape = Vec::new();
    let queries = [
        r#"SELECT 'column ' || m.name || '.' || p.cid || ' ' || p.name || ' ' || p.type || ' notnull=' || p."notnull" || ' default=' || IFNULL(p.dflt_value, 'none') || ' pk=' || p.pk
           FROM sqlite_master m JOIN pragma_table_info(m.name) p
           WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' ORDER BY m.name, p.cid"#,
        r#"SELECT 'foreign key ' || m.name || '.' || f."from" || ' -> ' || f."table" || '.' || f."to"
           FROM sqlite_master m JOIN pragma_foreign_key_list(m.name) f
           WHERE m.type = 'table' ORDER BY m.name, f.id, f.seq"#,
        r#"SELECT 'index ' || m.name || ' on ' || m.tbl_name || ' #' || i.seqno || ' ' || i.name
           FROM sqlite_master m JOIN pragma_index_info(m.name) i
           WHERE m.type = 'index' ORDER BY m.name, i.seqno"#,
    ];
    for sql in queries {
        let mut stmt = conn.prepare(sql).unwrap();
        let rows = stmt.query_map([], |row| row.get::<_, String>(0)).unwrap();
        shape.extend(rows.map(Result::unwrap));
    }
    assert!(!shape.is_empty());
    shape
}

fn fresh_shape_at(version: i64) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = store_file(dir.path());
    let mut conn = Connection::open(&path).unwrap();
    migrate_to(&mut conn, &path, version).unwrap();
    assert_eq!(schema_version(&conn).unwrap(), version);
    schema_shape(&conn)
}

fn latest_shape() -> Vec<String> {
    fresh_shape_at(LATEST_VERSION)
}

fn version_of(data_dir: &Path) -> i64 {
    schema_version(&Connection::open(store_file(data_dir)).unwrap()).unwrap()
}

#[test]
fn migrations_are_numbered_from_one_without_gaps() {
    for (index, migration) in MIGRATIONS.iter().enumerate() {
        assert_eq!(migration.version, index as i64 + 1, "{}", migration.summary);
    }
    assert_eq!(LATEST_VERSION, MIGRATIONS.len() as i64);
}

#[test]
fn migrations_1_and_2_build_the_schemas_abfleet_shipped() {
    let shipped_v1 = {
        let dir = tempfile::tempdir().unwrap();
        schema_shape(&legacy_store(dir.path(), SCHEMA_V1_8D32BDF))
    };
    let shipped_v2 = {
        let dir = tempfile::tempdir().unwrap();
        schema_shape(&legacy_store(dir.path(), SCHEMA_V2_516587F))
    };
    assert_ne!(shipped_v1, shipped_v2);
    assert_eq!(fresh_shape_at(1), shipped_v1);
    assert_eq!(fresh_shape_at(2), shipped_v2);
}

#[test]
fn every_version_on_the_ladder_migrates_to_the_latest_schema() {
    let latest = latest_shape();
    for start in 0..=LATEST_VERSION {
        let dir = tempfile::tempdir().unwrap();
        let path = store_file(dir.path());
        let mut conn = Connection::open(&path).unwrap();
        migrate_to(&mut conn, &path, start).unwrap();
        migrate_to(&mut conn, &path, LATEST_VERSION).unwrap();
        assert_eq!(schema_version(&conn).unwrap(), LATEST_VERSION);
        assert_eq!(schema_shape(&conn), latest, "from version {start}");
    }
}

/// Long on purpose: it writes the first schema's rows by hand, as that version did, and
/// reads every one back through today's store, step by step.
#[tokio::test]
async fn a_data_dir_made_by_the_first_schema_migrates_and_its_rows_stay_readable() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec();
    let (run_id, job_id, agent_id) = (
        RunId::new_random(),
        JobId::new_random(),
        AgentId::new_random(),
    );
    {
        // The rows the first coordinator wrote: a finished run, its one job and two events of
        // attempt 1, and a cell.
        let conn = legacy_store(dir.path(), SCHEMA_V1_8D32BDF);
        conn.execute(
            "INSERT INTO runs (run_id, name, trigger, spec_json, spec_origin, state, created_ms, finished_ms, exit_code) VALUES (?1, ?2, 'release', ?3, 'demo.toml', 'done', 1000, 2000, ?4)",
            params![run_id.to_string(), spec.name, spec.to_json(), exit::OK],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO jobs (job_id, run_id, state, attempt, agent_id, lease_expires_ms, error, created_ms) VALUES (?1, ?2, 'done', 1, ?3, NULL, NULL, 1000)",
            params![job_id.to_string(), run_id.to_string(), agent_id.to_string()],
        )
        .unwrap();
        for (seq, kind, payload) in [
            (0, "log", log_event("first light")),
            (1, "done", done_event()),
        ] {
            conn.execute(
                "INSERT INTO events (job_id, attempt, seq, at_ms, kind, payload_json) VALUES (?1, 1, ?2, ?3, ?4, ?5)",
                params![job_id.to_string(), seq, 1500 + seq, kind, json(&payload)],
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO cells (job_id, attempt, cell_index, fixture, workload, parity, seq) VALUES (?1, 1, 0, 'tiny', 'psnr', 'ok', 0)",
            params![job_id.to_string()],
        )
        .unwrap();
    }

    let store = Store::open(dir.path()).unwrap();
    assert_eq!(version_of(dir.path()), LATEST_VERSION);
    assert_eq!(
        schema_shape(&Connection::open(store_file(dir.path())).unwrap()),
        latest_shape(),
        "today's columns and indexes"
    );

    let runs = store.runs().all().await.unwrap();
    assert_eq!(runs.len(), 1);
    let run = store.runs().run(run_id).await.unwrap().unwrap();
    assert_eq!(run.name, spec.name);
    assert_eq!(run.trigger, "release");
    assert_eq!(run.spec, spec);
    assert_eq!(run.state, RunState::Done);
    assert_eq!(run.created_ms, 1000);
    assert_eq!(run.exit_code, Some(exit::OK));
    // It finished before migration 4: what it leaves for later runs is not recorded yet
    // (the first report that needs it records it), and nothing was made up for it.
    assert_eq!(
        store
            .reports()
            .unrecorded_runs_of(Some(&spec.name))
            .await
            .unwrap(),
        vec![run_id]
    );
    assert_eq!(
        store
            .reports()
            .previous_result(&spec.name, "any", i64::MAX)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        run.error, None,
        "runs.error came later and is empty for old runs"
    );

    let jobs = store.jobs().of_run(run_id).await.unwrap();
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    assert_eq!(job.job_id, job_id);
    assert_eq!(job.state, JobState::Done);
    assert_eq!(job.attempt, 1);
    assert_eq!(job.agent_id, Some(agent_id));
    assert_eq!(job.generation, None);
    assert_eq!(job.pinned_agent, None);

    let events = store.events().of_attempt(job_id, 1).await.unwrap();
    assert_eq!(events.len(), 2);
    assert!(
        matches!(&events[0].payload, JobEventPayload::Log { line, .. } if line == "first light")
    );
    assert!(matches!(events[1].payload, JobEventPayload::Done { .. }));
    assert_eq!(store.events().cell_count(job_id).await.unwrap(), 1);
    let (_, job_records) = store
        .reports()
        .report_inputs(run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job_records[0].events.len(), 2);

    // And the migrated store takes today's rows.
    let (new_run, pinned) = (RunId::new_random(), AgentId::new_random());
    let new_job = NewJob {
        job_id: JobId::new_random(),
        generation: Some("x86-64-v3".into()),
        pinned_agent: Some(pinned),
    };
    store
        .runs()
        .insert(
            new_run,
            &spec,
            "manual",
            "test",
            vec![new_job.clone()],
            3000,
        )
        .await
        .unwrap();
    let job = store.jobs().job(new_job.job_id).await.unwrap().unwrap();
    assert_eq!(job.generation.as_deref(), Some("x86-64-v3"));
    assert_eq!(job.pinned_agent, Some(pinned));
    let listed: Vec<RunId> = store
        .runs()
        .all()
        .await
        .unwrap()
        .iter()
        .map(|r| r.run_id)
        .collect();
    assert_eq!(listed, vec![run_id, new_run]);
}

#[tokio::test]
async fn a_data_dir_with_todays_tables_but_no_version_is_adopted_without_losing_rows() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec();
    let (failed_run, run_id, job_id, agent_id) = (
        RunId::new_random(),
        RunId::new_random(),
        JobId::new_random(),
        AgentId::new_random(),
    );
    {
        let conn = legacy_store(dir.path(), SCHEMA_V2_516587F);
        conn.execute(
            "INSERT INTO runs (run_id, name, trigger, spec_json, spec_origin, state, created_ms, finished_ms, exit_code, error) VALUES (?1, ?2, 'manual', ?3, 'demo.toml', 'failed', 10, 11, ?4, 'no agent matches target x86-64-v4')",
            params![failed_run.to_string(), spec.name, spec.to_json(), exit::NOT_CARRIED_OUT],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO runs (run_id, name, trigger, spec_json, spec_origin, state, created_ms) VALUES (?1, ?2, 'manual', ?3, 'demo.toml', 'running', 20)",
            params![run_id.to_string(), spec.name, spec.to_json()],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO jobs (job_id, run_id, state, attempt, agent_id, lease_expires_ms, created_ms, generation, pinned_agent) VALUES (?1, ?2, 'leased', 1, ?3, 99999, 20, 'x86-64-v3', ?3)",
            params![job_id.to_string(), run_id.to_string(), agent_id.to_string()],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO events (job_id, attempt, seq, at_ms, kind, payload_json) VALUES (?1, 1, 0, 21, 'log', ?2)",
            params![job_id.to_string(), json(&log_event("building"))],
        )
        .unwrap();
    }

    let store = Store::open(dir.path()).unwrap();
    assert_eq!(version_of(dir.path()), LATEST_VERSION);
    assert_eq!(
        schema_shape(&Connection::open(store_file(dir.path())).unwrap()),
        latest_shape()
    );

    let failed = store.runs().run(failed_run).await.unwrap().unwrap();
    assert_eq!(failed.state, RunState::Failed);
    assert_eq!(failed.exit_code, Some(exit::NOT_CARRIED_OUT));
    assert_eq!(
        failed.error.as_deref(),
        Some("no agent matches target x86-64-v4")
    );
    let job = store.jobs().job(job_id).await.unwrap().unwrap();
    assert_eq!(job.run_id, run_id);
    assert_eq!(job.state, JobState::Leased);
    assert_eq!(job.generation.as_deref(), Some("x86-64-v3"));
    assert_eq!(job.pinned_agent, Some(agent_id));
    assert_eq!(job.lease_expires_ms, Some(99999));
    assert_eq!(
        store.jobs().in_state(JobState::Leased).await.unwrap().len(),
        1
    );
    assert_eq!(store.events().event_count(job_id, 1).await.unwrap(), 1);
    assert!(store
        .jobs()
        .renew_lease(job_id, agent_id, 1, 100_000)
        .await
        .unwrap());
    drop(store);

    // Opening again finds it at the latest version and changes nothing.
    let before = schema_shape(&Connection::open(store_file(dir.path())).unwrap());
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(version_of(dir.path()), LATEST_VERSION);
    assert_eq!(
        schema_shape(&Connection::open(store_file(dir.path())).unwrap()),
        before
    );
    assert_eq!(store.runs().all().await.unwrap().len(), 2);
}

#[test]
fn a_store_newer_than_this_abfleet_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path()).unwrap());
    let future = LATEST_VERSION + 4;
    {
        let conn = Connection::open(store_file(dir.path())).unwrap();
        conn.pragma_update(None, "user_version", future).unwrap();
        conn.execute_batch("CREATE TABLE added_later (x INTEGER);")
            .unwrap();
    }
    let before = schema_shape(&Connection::open(store_file(dir.path())).unwrap());

    let err = Store::open(dir.path())
        .err()
        .expect("a newer store is refused");
    match &err {
        CoordinatorError::StoreTooNew { path, found, known } => {
            assert_eq!(path, &store_file(dir.path()));
            assert_eq!((*found, *known), (future, LATEST_VERSION));
        }
        other => panic!("expected StoreTooNew, got {other:?}"),
    }
    let message = err.to_string();
    for needle in [
        store_file(dir.path()).display().to_string(),
        format!("schema version {future}"),
        format!("versions up to {LATEST_VERSION}"),
        "upgrade abfleet".to_string(),
    ] {
        assert!(message.contains(&needle), "`{message}` lacks `{needle}`");
    }
    assert!(!message.contains("newer abfleet"), "{message}");

    assert_eq!(version_of(dir.path()), future);
    assert_eq!(
        schema_shape(&Connection::open(store_file(dir.path())).unwrap()),
        before
    );
}

#[test]
fn a_store_without_a_version_in_no_shipped_shape_is_refused() {
    let part_of_migration_2 =
        format!("{SCHEMA_V1_8D32BDF}\nALTER TABLE runs ADD COLUMN error TEXT;");
    let cases = [
        (
            part_of_migration_2.as_str(),
            "it has runs.error but not jobs.generation, jobs.pinned_agent",
        ),
        (
            "CREATE TABLE runs (run_id TEXT PRIMARY KEY); CREATE TABLE notes (body TEXT);",
            "it has tables notes, runs but not jobs, events, cells, agents",
        ),
    ];
    for (schema, detail) in cases {
        let dir = tempfile::tempdir().unwrap();
        drop(legacy_store(dir.path(), schema));
        let err = Store::open(dir.path()).err().expect("refused");
        assert!(
            matches!(&err, CoordinatorError::StoreUnknownSchema { detail: d, .. } if d == detail),
            "{err:?}"
        );
        assert!(err
            .to_string()
            .contains(&store_file(dir.path()).display().to_string()));
        assert_eq!(version_of(dir.path()), 0, "left as it was");
    }
}

#[test]
fn a_failed_migration_leaves_the_store_at_the_last_version_that_committed() {
    let dir = tempfile::tempdir().unwrap();
    {
        let conn = legacy_store(dir.path(), SCHEMA_V1_8D32BDF);
        // Someone added an index by hand under a name migration 3 uses.
        conn.execute_batch("CREATE INDEX runs_by_name ON runs(name);")
            .unwrap();
    }
    let err = Store::open(dir.path()).err().expect("migration 3 fails");
    assert!(
        matches!(err, CoordinatorError::MigrateStore { from: 2, to: 3, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("left at version 2"), "{err}");
    assert_eq!(version_of(dir.path()), 2, "migrations 1 and 2 committed");
    let conn = Connection::open(store_file(dir.path())).unwrap();
    let shape = schema_shape(&conn);
    assert!(shape
        .iter()
        .any(|line| line.starts_with("column runs.") && line.contains(" error TEXT")));
    assert!(
        !shape.iter().any(|line| line.contains("runs_by_created")),
        "migration 3 rolled back whole"
    );

    conn.execute_batch("DROP INDEX runs_by_name;").unwrap();
    drop(conn);
    drop(Store::open(dir.path()).unwrap());
    assert_eq!(version_of(dir.path()), LATEST_VERSION);
    let shape = schema_shape(&Connection::open(store_file(dir.path())).unwrap());
    for index in INDEXES_OF_MIGRATION_3 {
        assert!(
            shape
                .iter()
                .any(|line| line.contains(&format!("index {index} "))),
            "{index}"
        );
    }
}

/// Migration 12: a result recorded before hardware ids keeps its history: its hardware id is
/// its silicon id, so the next run of that host (reporting both) finds it.
#[test]
fn results_recorded_before_hardware_ids_take_their_silicon_id() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_file(dir.path());
    let mut conn = Connection::open(&path).unwrap();
    migrate_to(&mut conn, &path, 10).unwrap();
    conn.execute(
        "INSERT INTO runs (run_id, name, trigger, spec_json, spec_origin, state, created_ms) VALUES ('r1', 'demo', 'manual', '{}', 'demo.toml', 'done', 1000)",
        [],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO generation_results (name, generation, run_id, created_ms, toolchain_json, findings_json, backend_cells_json, snapshot_json, silicon_id) VALUES ('demo', 'cuda/sm_90', 'r1', 1000, '{}', '[]', '[]', NULL, 'abc123')",
        [],
    )
    .unwrap();
    migrate_to(&mut conn, &path, 12).unwrap();
    let hardware: Option<String> = conn
        .query_row(
            "SELECT hardware_id FROM generation_results WHERE run_id = 'r1'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(hardware.as_deref(), Some("abc123"));
    let bisects: i64 = conn
        .query_row("SELECT COUNT(*) FROM bisects", [], |row| row.get(0))
        .unwrap();
    assert_eq!(bisects, 0);
}
