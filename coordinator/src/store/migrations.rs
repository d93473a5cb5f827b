//! The store's schema as numbered migrations on SQLite's `PRAGMA user_version`: version N means
//! migrations 1..=N have run. Migration 1 is the first schema abfleet shipped; every later
//! change is one more migration, each in its own transaction that also bumps the version, so a
//! coordinator killed mid-way restarts at the last version that committed. Shipped migrations
//! are never edited: a change to the schema is a new one at the end of [`MIGRATIONS`].
//!
//! Data directories made before the ladder existed have `user_version` 0 but tables; their
//! shape says which version they are at (see [`legacy_version`]), and the ladder goes on from
//! there. A store at a version newer than this binary knows is refused, never touched.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use crate::error::CoordinatorError;

/// One step of the ladder: the SQL that takes the store from `version - 1` to `version`.
pub(crate) struct Migration {
    pub(crate) version: i64,
    /// What it changes and where it came from, for the log.
    pub(crate) summary: &'static str,
    pub(crate) sql: &'static str,
}

/// Every migration, in order; `MIGRATIONS[i].version == i + 1`.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        summary: "runs, jobs, events, cells and agents, as first shipped (8d32bdf)",
        sql: r#"
CREATE TABLE runs (
    run_id      TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    trigger     TEXT NOT NULL,
    spec_json   TEXT NOT NULL,
    spec_origin TEXT NOT NULL,
    state       TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    finished_ms INTEGER,
    exit_code   INTEGER
);
CREATE TABLE jobs (
    job_id           TEXT PRIMARY KEY,
    run_id           TEXT NOT NULL REFERENCES runs(run_id),
    state            TEXT NOT NULL,
    attempt          INTEGER NOT NULL,
    agent_id         TEXT,
    lease_expires_ms INTEGER,
    error            TEXT,
    created_ms       INTEGER NOT NULL
);
CREATE INDEX jobs_by_state ON jobs(state, created_ms);
CREATE TABLE events (
    job_id       TEXT NOT NULL REFERENCES jobs(job_id),
    attempt      INTEGER NOT NULL,
    seq          INTEGER NOT NULL,
    at_ms        INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    PRIMARY KEY (job_id, attempt, seq)
);
CREATE TABLE cells (
    job_id     TEXT NOT NULL REFERENCES jobs(job_id),
    attempt    INTEGER NOT NULL,
    cell_index INTEGER NOT NULL,
    fixture    TEXT NOT NULL,
    workload   TEXT NOT NULL,
    parity     TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    PRIMARY KEY (job_id, attempt, cell_index)
);
CREATE TABLE agents (
    agent_id          TEXT PRIMARY KEY,
    inventory_json    TEXT NOT NULL,
    registered_ms     INTEGER NOT NULL,
    last_heartbeat_ms INTEGER NOT NULL
);
"#,
    },
    Migration {
        version: 2,
        summary:
            "runs.error, jobs.generation and jobs.pinned_agent for [targets] fan-out (516587f)",
        sql: r#"
ALTER TABLE runs ADD COLUMN error TEXT;
ALTER TABLE jobs ADD COLUMN generation TEXT;
ALTER TABLE jobs ADD COLUMN pinned_agent TEXT;
"#,
    },
    Migration {
        version: 3,
        summary:
            "indexes on runs by created time, name and state, and on jobs by run and generation",
        sql: r#"
CREATE INDEX runs_by_created ON runs(created_ms, run_id);
CREATE INDEX runs_by_name ON runs(name, created_ms);
CREATE INDEX runs_by_state ON runs(state, created_ms);
CREATE INDEX jobs_by_run ON jobs(run_id, created_ms, job_id);
CREATE INDEX jobs_by_generation ON jobs(generation, created_ms);
"#,
    },
    Migration {
        version: 4,
        summary: "generation_results: per (spec name, generation), what a finished run leaves for the next (toolchain, findings, backend cells); runs.results_recorded",
        sql: r#"
CREATE TABLE generation_results (
    name               TEXT NOT NULL,
    generation         TEXT NOT NULL,
    run_id             TEXT NOT NULL REFERENCES runs(run_id),
    created_ms         INTEGER NOT NULL,
    toolchain_json     TEXT NOT NULL,
    findings_json      TEXT NOT NULL,
    backend_cells_json TEXT NOT NULL,
    PRIMARY KEY (name, generation, run_id)
);
CREATE INDEX generation_results_latest ON generation_results(name, generation, created_ms, run_id);
CREATE INDEX generation_results_by_run ON generation_results(run_id);
ALTER TABLE runs ADD COLUMN results_recorded INTEGER NOT NULL DEFAULT 0;
"#,
    },
    Migration {
        version: 5,
        summary: "attempts: per (job, attempt), the agent that held it, the cells it kept from earlier attempts and how it ended (resumable jobs)",
        sql: r#"
CREATE TABLE attempts (
    job_id          TEXT NOT NULL REFERENCES jobs(job_id),
    attempt         INTEGER NOT NULL,
    agent_id        TEXT NOT NULL,
    leased_ms       INTEGER NOT NULL,
    kept_cells_json TEXT NOT NULL,
    end_reason      TEXT,
    PRIMARY KEY (job_id, attempt)
);
"#,
    },
    Migration {
        version: 6,
        summary: "agents.draining: an agent being drained finishes its job and is offered no new one",
        sql: r#"
ALTER TABLE agents ADD COLUMN draining INTEGER NOT NULL DEFAULT 0;
"#,
    },
    Migration {
        version: 7,
        summary: "agent_certificates: which certificate name each agent id is bound to under mutual TLS",
        sql: r#"
CREATE TABLE agent_certificates (
    agent_id  TEXT PRIMARY KEY,
    cert_name TEXT NOT NULL,
    bound_ms  INTEGER NOT NULL
);
"#,
    },
    Migration {
        version: 8,
        summary: "runs.trigger_note, triggers (each trigger and the run it started or was debounced into) and webhook_deliveries (replayed deliveries are ignored)",
        sql: r#"
ALTER TABLE runs ADD COLUMN trigger_note TEXT;
CREATE TABLE triggers (
    trigger_id   INTEGER PRIMARY KEY AUTOINCREMENT,
    reason       TEXT NOT NULL,
    debounce_key TEXT,
    note         TEXT NOT NULL,
    source       TEXT NOT NULL,
    received_ms  INTEGER NOT NULL,
    run_id       TEXT NOT NULL REFERENCES runs(run_id),
    debounced    INTEGER NOT NULL
);
CREATE INDEX triggers_by_key ON triggers(reason, debounce_key, received_ms);
CREATE TABLE webhook_deliveries (
    delivery_id TEXT PRIMARY KEY,
    event       TEXT NOT NULL,
    received_ms INTEGER NOT NULL
);
"#,
    },
    Migration {
        version: 9,
        summary: "upstream_tags: the tags the upstream watcher has seen per repository URL",
        sql: r#"
CREATE TABLE upstream_tags (
    url     TEXT NOT NULL,
    tag     TEXT NOT NULL,
    sha     TEXT NOT NULL,
    seen_ms INTEGER NOT NULL,
    PRIMARY KEY (url, tag)
);
"#,
    },
    Migration {
        version: 10,
        summary: "generation_results.snapshot_json and silicon_id: each finished run's cells per generation, for regression flags and `abfleet history`; earlier runs are recorded again when a later report needs them",
        sql: r#"
ALTER TABLE generation_results ADD COLUMN snapshot_json TEXT;
ALTER TABLE generation_results ADD COLUMN silicon_id TEXT;
CREATE INDEX generation_results_by_generation ON generation_results(generation, created_ms, run_id);
UPDATE runs SET results_recorded = 0;
"#,
    },
    Migration {
        version: 11,
        summary: "upstream_pins (the release tags of the milestone spec's upstream that started a run: the pin follows the newest) and generation_toolchains (every toolchain each generation key has registered with, from any agent: the toolchain watcher's memory)",
        sql: r#"
CREATE TABLE upstream_pins (
    url        TEXT NOT NULL,
    tag        TEXT NOT NULL,
    run_id     TEXT NOT NULL REFERENCES runs(run_id),
    note       TEXT NOT NULL,
    moved_ms   INTEGER NOT NULL,
    PRIMARY KEY (url, tag)
);
CREATE TABLE generation_toolchains (
    generation     TEXT NOT NULL,
    fingerprint    TEXT NOT NULL,
    toolchain_json TEXT NOT NULL,
    agent_id       TEXT NOT NULL,
    first_seen_ms  INTEGER NOT NULL,
    last_seen_ms   INTEGER NOT NULL,
    PRIMARY KEY (generation, fingerprint)
);
CREATE INDEX webhook_deliveries_by_time ON webhook_deliveries(received_ms);
"#,
    },
    Migration {
        version: 12,
        summary: "generation_results.hardware_id (the silicon id without the GPU driver and runtime: runs are compared across a driver bump; rows before it take their silicon id) and bisects (a finished `abfleet bisect RUN`, shown in that run's report)",
        sql: r#"
ALTER TABLE generation_results ADD COLUMN hardware_id TEXT;
UPDATE generation_results SET hardware_id = silicon_id;
CREATE INDEX generation_results_comparable ON generation_results(name, generation, hardware_id, created_ms, run_id);
CREATE TABLE bisects (
    run_id         TEXT NOT NULL REFERENCES runs(run_id),
    recorded_ms    INTEGER NOT NULL,
    bisection_json TEXT NOT NULL,
    PRIMARY KEY (run_id, recorded_ms)
);
"#,
    },
    Migration {
        version: 13,
        summary: "run_reports: a finished run's report as served, assembled once; results_changes: each change of what a run leaves for later runs, which a stored report may depend on; runs_unrecorded: the finished runs whose results a report may still have to record, without scanning every run of the name",
        sql: r#"
CREATE TABLE run_reports (
    run_id       TEXT PRIMARY KEY REFERENCES runs(run_id),
    report_json  TEXT NOT NULL,
    assembled_by TEXT NOT NULL,
    assembled_ms INTEGER NOT NULL
);
CREATE TABLE results_changes (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE INDEX runs_unrecorded ON runs(name, created_ms) WHERE results_recorded = 0;
"#,
    },
    Migration {
        version: 14,
        summary: "revoked_certificates: the deny list (`abfleet certs revoke`), by serial or fingerprint; agent_certificates learns the serial and fingerprint an agent id last registered with, and when",
        sql: r#"
CREATE TABLE revoked_certificates (
    key         TEXT PRIMARY KEY,
    serial      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    role        TEXT NOT NULL,
    name        TEXT NOT NULL,
    reason      TEXT NOT NULL,
    revoked_by  TEXT NOT NULL,
    revoked_ms  INTEGER NOT NULL
);
ALTER TABLE agent_certificates ADD COLUMN serial TEXT NOT NULL DEFAULT '';
ALTER TABLE agent_certificates ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';
ALTER TABLE agent_certificates ADD COLUMN registered_ms INTEGER NOT NULL DEFAULT 0;
CREATE INDEX agent_certificates_by_name ON agent_certificates(cert_name, registered_ms);
"#,
    },
    Migration {
        version: 15,
        summary: "notifications: each alert of a run ([notify]) per endpoint, queued in the transaction that finishes the run and kept with how its delivery went",
        sql: r#"
CREATE TABLE notifications (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id          TEXT NOT NULL REFERENCES runs(run_id),
    endpoint        TEXT NOT NULL,
    kind            TEXT NOT NULL,
    key             TEXT NOT NULL,
    summary         TEXT NOT NULL,
    payload_json    TEXT NOT NULL,
    state           TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_ms INTEGER NOT NULL,
    last_status     INTEGER,
    last_error      TEXT,
    created_ms      INTEGER NOT NULL,
    sent_ms         INTEGER,
    UNIQUE (run_id, endpoint, kind, key)
);
CREATE INDEX notifications_due ON notifications(next_attempt_ms) WHERE state = 'pending';
"#,
    },
    Migration {
        version: 16,
        summary: "pull_request_reports: the pull request a run answers ([github]) and what was posted on it: the status's last description, the comment, whether the final answer is out",
        sql: r#"
CREATE TABLE pull_request_reports (
    run_id          TEXT PRIMARY KEY REFERENCES runs(run_id),
    repo            TEXT NOT NULL,
    number          INTEGER NOT NULL,
    head_sha        TEXT NOT NULL,
    posted          TEXT,
    posted_ms       INTEGER,
    comment_id      INTEGER,
    comment_url     TEXT,
    answered        INTEGER NOT NULL DEFAULT 0,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_ms INTEGER NOT NULL,
    last_error      TEXT
);
CREATE INDEX pull_request_reports_open ON pull_request_reports(next_attempt_ms) WHERE answered = 0;
"#,
    },
];

/// The version a store is at once [`migrate`] returns.
pub(crate) const LATEST_VERSION: i64 = MIGRATIONS.len() as i64;

/// The tables every shipped schema has had since migration 1.
const TABLES: [&str; 5] = ["runs", "jobs", "events", "cells", "agents"];

/// The `(table, column)`s migration 2 added.
const MIGRATION_2_COLUMNS: [(&str, &str); 3] = [
    ("runs", "error"),
    ("jobs", "generation"),
    ("jobs", "pinned_agent"),
];

/// Brings the store at `path` to [`LATEST_VERSION`].
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), CoordinatorError> {
    migrate_to(conn, path, LATEST_VERSION)
}

/// The store's schema version.
pub(crate) fn schema_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// Refuses a store newer than this binary, before anything writes to it.
pub(crate) fn check_not_newer(conn: &Connection, path: &Path) -> Result<(), CoordinatorError> {
    let found = schema_version(conn).map_err(|source| open_error(path, source))?;
    if found > LATEST_VERSION {
        return Err(CoordinatorError::StoreTooNew {
            path: path.to_path_buf(),
            found,
            known: LATEST_VERSION,
        });
    }
    Ok(())
}

/// Runs migrations until the store is at `target`, one transaction each. Each transaction reads
/// the version again under the write lock, so two coordinators opening one file at once do not
/// run a migration twice.
pub(crate) fn migrate_to(
    conn: &mut Connection,
    path: &Path,
    target: i64,
) -> Result<(), CoordinatorError> {
    check_not_newer(conn, path)?;
    if schema_version(conn).map_err(|source| open_error(path, source))? >= target {
        return Ok(());
    }
    loop {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|source| open_error(path, source))?;
        check_not_newer(&tx, path)?;
        let version = schema_version(&tx).map_err(|source| open_error(path, source))?;
        if version == 0 {
            let legacy = legacy_version(&tx, path)?;
            if legacy > 0 {
                tx.pragma_update(None, "user_version", legacy)
                    .and_then(|()| tx.commit())
                    .map_err(|source| open_error(path, source))?;
                tracing::info!(
                    path = %path.display(),
                    version = legacy,
                    "the store predates schema versions; its tables are at this version"
                );
                continue;
            }
        }
        if version >= target {
            return Ok(());
        }
        let migration = &MIGRATIONS[version as usize];
        debug_assert_eq!(migration.version, version + 1);
        tx.execute_batch(migration.sql)
            .and_then(|()| tx.pragma_update(None, "user_version", migration.version))
            .and_then(|()| tx.commit())
            .map_err(|source| CoordinatorError::MigrateStore {
                path: path.to_path_buf(),
                from: version,
                to: migration.version,
                source,
            })?;
        tracing::info!(
            path = %path.display(),
            version = migration.version,
            summary = migration.summary,
            "migrated the store"
        );
    }
}

/// The version of a store with `user_version` 0, from its tables: 0 for a new, empty file; 1 for
/// one made by 8d32bdf..6cf58f4 (migration 1's tables); 2 for one made by 516587f up to the
/// ladder (migration 2's columns too). Those are the only shapes abfleet shipped without a
/// version; anything else is refused rather than guessed at.
fn legacy_version(conn: &Connection, path: &Path) -> Result<i64, CoordinatorError> {
    let unknown = |detail: String| CoordinatorError::StoreUnknownSchema {
        path: path.to_path_buf(),
        detail,
    };
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
        )
        .and_then(|mut stmt| {
            stmt.query_map([], |row| row.get(0))?
                .collect::<rusqlite::Result<_>>()
        })
        .map_err(|source| open_error(path, source))?;
    if tables.is_empty() {
        return Ok(0);
    }
    let missing_tables: Vec<&str> = TABLES
        .into_iter()
        .filter(|table| !tables.iter().any(|t| t == table))
        .collect();
    if !missing_tables.is_empty() {
        return Err(unknown(format!(
            "it has tables {} but not {}",
            tables.join(", "),
            missing_tables.join(", ")
        )));
    }
    let mut added = Vec::new();
    let mut not_added = Vec::new();
    for (table, column) in MIGRATION_2_COLUMNS {
        if has_column(conn, table, column).map_err(|source| open_error(path, source))? {
            added.push(format!("{table}.{column}"));
        } else {
            not_added.push(format!("{table}.{column}"));
        }
    }
    match (added.is_empty(), not_added.is_empty()) {
        (true, _) => Ok(1),
        (false, true) => Ok(2),
        (false, false) => Err(unknown(format!(
            "it has {} but not {}",
            added.join(", "),
            not_added.join(", ")
        ))),
    }
}

fn has_column(conn: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2)",
        [table, column],
        |row| row.get(0),
    )
}

fn open_error(path: &Path, source: rusqlite::Error) -> CoordinatorError {
    CoordinatorError::OpenStore {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests;
