//! What a run leaves for the next run of the same spec: per generation, its toolchain, its
//! retuning findings and its backend timings, in `generation_results` keyed by (spec name,
//! generation). Written when a run finishes, so a report finds "the previous run" with one
//! indexed read instead of re-assembling every earlier run of its name. Each row also keeps
//! the generation's `GenerationSnapshot` (migration 10: commits, silicon, a summary of each
//! cell) and its hardware id (migration 12), which the regression flags and `abfleet
//! history` read: comparable runs are `done` runs of the same name, generation and hardware,
//! never bisect steps.

use abfleet_core::lifecycle::RunState;
use abfleet_core::report::earlier::COMPARABLE_DEPTH;
use abfleet_core::report::history::{GenerationSnapshot, BISECT_TRIGGER};
use abfleet_core::RunId;
use rusqlite::{params, OptionalExtension, Transaction};

use super::ReportRecords;
use crate::error::CoordinatorError;

pub use abfleet_core::report::earlier::{GenerationResult, PreviousResult};

/// What a run ends with ([`ReportRecords::finish_run`]).
pub struct RunFinish {
    pub state: RunState,
    pub exit_code: i32,
    pub now_ms: i64,
    /// What it leaves for later runs.
    pub results: Vec<GenerationResult>,
    /// Its report as served from now on.
    pub report: Option<super::ReportToStore>,
    /// Its alerts, to send.
    pub alerts: Vec<super::NewNotification>,
}

impl ReportRecords<'_> {
    /// Ends a run: its state, exit code and finished time, what it leaves for later runs, its
    /// report (`store/reports.rs`; kept only if what it compares with did not change while it
    /// was assembled) and its alerts to send (`store/notifications.rs`), in one transaction.
    pub async fn finish_run(
        &self,
        run_id: RunId,
        finish: RunFinish,
    ) -> Result<(), CoordinatorError> {
        let RunFinish {
            state,
            exit_code,
            now_ms,
            results,
            report,
            alerts,
        } = finish;
        self.store
            .with(move |conn| {
                let tx = conn.transaction()?;
                super::notifications::queue(&tx, &alerts, now_ms)?;
                tx.execute(
                "UPDATE runs SET state = ?2, exit_code = ?3, finished_ms = ?4 WHERE run_id = ?1",
                params![run_id, state, exit_code, now_ms],
            )?;
                let report = match report {
                    Some(report) if super::reports::is_current(&tx, run_id, report.basis)? => {
                        Some(report)
                    }
                    _ => None,
                };
                replace_results(&tx, run_id, results)?;
                if let Some(report) = report {
                    super::reports::put(&tx, run_id, &report)?;
                }
                tx.commit()?;
                Ok(())
            })
            .await
    }

    /// Replaces what a finished run leaves for later runs (its report changed after it
    /// finished: a cancelled job's last events, or a run that finished before this table).
    pub async fn record_results(
        &self,
        run_id: RunId,
        results: Vec<GenerationResult>,
    ) -> Result<(), CoordinatorError> {
        self.store
            .with(move |conn| {
                let tx = conn.transaction()?;
                replace_results(&tx, run_id, results)?;
                tx.commit()?;
                Ok(())
            })
            .await
    }

    /// Finished runs of `run_id`'s name created before it whose results were never recorded
    /// (they finished under a coordinator older than this table, or changed since),
    /// oldest first; none for a run the store does not have. One read.
    pub async fn unrecorded_runs_before(
        &self,
        run_id: RunId,
    ) -> Result<Vec<RunId>, CoordinatorError> {
        self.store
            .read(move |conn| {
                let run = conn
                    .query_row(
                        "SELECT name, created_ms FROM runs WHERE run_id = ?1",
                        params![run_id],
                        |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?)),
                    )
                    .optional()?;
                match run {
                    Some((name, created_ms)) => unrecorded(conn, Some(&name), created_ms),
                    None => Ok(Vec::new()),
                }
            })
            .await
    }

    /// The result of the latest run of `name` on `generation` created before `before_ms`.
    pub async fn previous_result(
        &self,
        name: &str,
        generation: &str,
        before_ms: i64,
    ) -> Result<Option<PreviousResult>, CoordinatorError> {
        let (name, generation) = (name.to_string(), generation.to_string());
        self.store.read(move |conn| {
            let row = conn
                .query_row(
                    "SELECT run_id, toolchain_json, findings_json, backend_cells_json, snapshot_json FROM generation_results
                     WHERE name = ?1 AND generation = ?2 AND created_ms < ?3
                     ORDER BY created_ms DESC, run_id DESC LIMIT 1",
                    params![name, generation, before_ms],
                    |row| {
                        Ok((
                            row.get::<_, RunId>(0)?,
                            row.get::<_, String>(1)?,
                            row.get::<_, String>(2)?,
                            row.get::<_, String>(3)?,
                            row.get::<_, Option<String>>(4)?,
                        ))
                    },
                )
                .optional()?;
            let Some((run_id, toolchain, findings, backend_cells, snapshot)) = row else {
                return Ok(None);
            };
            let corrupt = |what: &str, err: serde_json::Error| {
                CoordinatorError::Corrupt(format!("{what} of run {run_id} on {generation}: {err}"))
            };
            Ok(Some(PreviousResult {
                run_id,
                result: GenerationResult {
                    generation: generation.clone(),
                    toolchain: serde_json::from_str(&toolchain)
                        .map_err(|err| corrupt("toolchain", err))?,
                    findings: serde_json::from_str(&findings)
                        .map_err(|err| corrupt("findings", err))?,
                    backend_cells: serde_json::from_str(&backend_cells)
                        .map_err(|err| corrupt("backend cells", err))?,
                    snapshot: snapshot
                        .map(|s| serde_json::from_str(&s))
                        .transpose()
                        .map_err(|err| corrupt("snapshot", err))?,
                },
            }))
        })
        .await
    }
}

impl ReportRecords<'_> {
    /// The snapshots of the earlier comparable runs of a generation, newest first, each with
    /// its hardware identity: runs of `name` on `generation` created before `before_ms`,
    /// finished as `done` (a cancelled or failed run is not a baseline), never a bisect step;
    /// the newest [`COMPARABLE_DEPTH`] of each identity. A report compares each section with
    /// those of its own hardware (`core::report::build`), each cell with the latest of them
    /// that has it (`core::report::history::since_previous`).
    pub async fn comparable_snapshots(
        &self,
        name: &str,
        generation: &str,
        before_ms: i64,
    ) -> Result<Vec<(Option<String>, GenerationSnapshot)>, CoordinatorError> {
        let (name, generation) = (name.to_string(), generation.to_string());
        self.store.read(move |conn| {
            let mut stmt = conn.prepare(
                "SELECT run_id, snapshot_json, hardware_id FROM (
                   SELECT g.run_id, g.snapshot_json, g.hardware_id, g.created_ms,
                          ROW_NUMBER() OVER (PARTITION BY g.hardware_id ORDER BY g.created_ms DESC, g.run_id DESC) AS newest
                   FROM generation_results g JOIN runs r ON r.run_id = g.run_id
                   WHERE g.name = ?1 AND g.generation = ?2 AND g.created_ms < ?3
                     AND g.snapshot_json IS NOT NULL
                     AND r.state = ?4 AND r.trigger != ?5)
                 WHERE newest <= ?6
                 ORDER BY created_ms DESC, run_id DESC",
            )?;
            let rows = stmt.query_map(
                params![
                    name,
                    generation,
                    before_ms,
                    RunState::Done,
                    BISECT_TRIGGER,
                    COMPARABLE_DEPTH as i64
                ],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, Option<String>>(2)?,
                    ))
                },
            )?;
            let mut out = Vec::new();
            for row in rows {
                let (run_id, snapshot, hardware) = row?;
                out.push((hardware, parse_snapshot(&run_id, &generation, &snapshot)?));
            }
            Ok(out)
        })
        .await
    }

    /// The snapshots of `generation` (of one spec name, or every name), oldest first: the
    /// newest `limit` of them, of runs finished as `done`, never bisect steps.
    pub async fn generation_history(
        &self,
        generation: &str,
        name: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, GenerationSnapshot)>, CoordinatorError> {
        let generation = generation.to_string();
        let name = name.map(str::to_string);
        self.store.read(move |conn| {
            let mut stmt = conn.prepare(
                "SELECT g.name, g.run_id, g.snapshot_json FROM generation_results g JOIN runs r ON r.run_id = g.run_id
                 WHERE g.generation = ?1 AND (?2 IS NULL OR g.name = ?2) AND g.snapshot_json IS NOT NULL
                   AND r.state = ?4 AND r.trigger != ?5
                 ORDER BY g.created_ms DESC, g.run_id DESC LIMIT ?3",
            )?;
            let rows = stmt.query_map(
                params![generation, name, limit, RunState::Done, BISECT_TRIGGER],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                    ))
                },
            )?;
            let mut out = Vec::new();
            for row in rows {
                let (name, run_id, snapshot) = row?;
                out.push((name, parse_snapshot(&run_id, &generation, &snapshot)?));
            }
            out.reverse();
            Ok(out)
        })
        .await
    }

    /// Finished runs (of one name, or all) whose results were never recorded, oldest first.
    pub async fn unrecorded_runs_of(
        &self,
        name: Option<&str>,
    ) -> Result<Vec<RunId>, CoordinatorError> {
        let name = name.map(str::to_string);
        self.store
            .read(move |conn| unrecorded(conn, name.as_deref(), i64::MAX))
            .await
    }
}

fn parse_snapshot(
    run_id: &str,
    generation: &str,
    json: &str,
) -> Result<GenerationSnapshot, CoordinatorError> {
    serde_json::from_str(json).map_err(|err| {
        CoordinatorError::Corrupt(format!("snapshot of run {run_id} on {generation}: {err}"))
    })
}

/// What a finished run leaves for later runs changed after it was recorded (a cancelled
/// run's late events): the kept reports that read it go, and the run is recorded again by
/// the next report or history that needs it ([`ReportRecords::unrecorded_runs_before`]).
pub(super) fn record_results_again(
    tx: &Transaction<'_>,
    run_id: RunId,
) -> Result<(), CoordinatorError> {
    super::reports::results_changed(tx, run_id)?;
    tx.execute(
        "UPDATE runs SET results_recorded = 0 WHERE run_id = ?1",
        params![run_id],
    )?;
    Ok(())
}

/// Finished runs created before `before_ms` with no recorded results, oldest first: of
/// `name`, else of every name. The two cases are two statements: the one by name is what a
/// report asks each time, and it must search the `runs_unrecorded` index by name (an
/// `?1 IS NULL OR name = ?1` would make SQLite scan every finished run instead).
fn unrecorded(
    conn: &rusqlite::Connection,
    name: Option<&str>,
    before_ms: i64,
) -> Result<Vec<RunId>, CoordinatorError> {
    let by_name = match name {
        Some(_) => "name = ?1",
        None => "?1 IS NULL",
    };
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT run_id FROM runs WHERE {by_name} AND created_ms < ?2 AND results_recorded = 0 AND state IN (?3, ?4, ?5) ORDER BY created_ms, run_id"
    ))?;
    let rows = stmt.query_map(
        params![
            name,
            before_ms,
            RunState::Done,
            RunState::Failed,
            RunState::Cancelled
        ],
        |row| row.get::<_, RunId>(0),
    )?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

fn replace_results(
    tx: &Transaction<'_>,
    run_id: RunId,
    results: Vec<GenerationResult>,
) -> Result<(), CoordinatorError> {
    let json = |value: serde_json::Result<String>| {
        value.map_err(|err| CoordinatorError::Internal(err.to_string()))
    };
    super::reports::results_changed(tx, run_id)?;
    tx.execute(
        "DELETE FROM generation_results WHERE run_id = ?1",
        params![run_id],
    )?;
    for result in results {
        tx.execute(
            "INSERT INTO generation_results (name, generation, run_id, created_ms, toolchain_json, findings_json, backend_cells_json, snapshot_json, silicon_id, hardware_id)
             SELECT name, ?2, run_id, created_ms, ?3, ?4, ?5, ?6, ?7, ?8 FROM runs WHERE run_id = ?1",
            params![
                run_id,
                result.generation,
                json(serde_json::to_string(&result.toolchain))?,
                json(serde_json::to_string(&result.findings))?,
                json(serde_json::to_string(&result.backend_cells))?,
                result
                    .snapshot
                    .as_ref()
                    .map(|s| json(serde_json::to_string(s)))
                    .transpose()?,
                result.snapshot.as_ref().and_then(|s| s.silicon_id.clone()),
                result
                    .snapshot
                    .as_ref()
                    .and_then(|s| s.hardware().map(str::to_string))
            ],
        )?;
    }
    tx.execute(
        "UPDATE runs SET results_recorded = 1 WHERE run_id = ?1",
        params![run_id],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::store::NewJob;

    fn snapshot(run_id: RunId, hardware: Option<&str>) -> GenerationSnapshot {
        GenerationSnapshot {
            run_id: run_id.to_string(),
            date: String::new(),
            trigger: "manual".into(),
            trigger_note: None,
            generation: "cpu/x86-64-v4/zen4".into(),
            spec_sha256: String::new(),
            comparable_spec_sha256: String::new(),
            silicon_id: hardware.map(str::to_string),
            hardware_id: hardware.map(str::to_string),
            fork_requested: "main".into(),
            fork_commit: None,
            upstream_requested: "v3.2.0".into(),
            upstream_commit: None,
            toolchain: [("fork".to_string(), "gcc 12".to_string())].into(),
            host_toolchain: BTreeMap::new(),
            practical_threshold: 0.02,
            cells: Vec::new(),
        }
    }

    #[tokio::test]
    async fn comparable_snapshots_are_the_newest_done_runs_of_each_hardware_tagged_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path()).unwrap();
        let fixtures =
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        let spec = abfleet_core::spec::JobSpec::from_toml(
            include_str!("../../../fixtures/jobs/demo.toml"),
            std::path::Path::new("demo.toml"),
            fixtures,
        )
        .unwrap();
        let generation = "cpu/x86-64-v4/zen4";
        // (created_ms, hardware, trigger, state): 70 done runs on `a`, two on `b`, one
        // without an identity; a bisect step and a failed run on `a`; one run too late.
        let mut runs: Vec<(i64, Option<&str>, &str, RunState)> = (0..70)
            .map(|i| (1_000 + i * 10, Some("a"), "manual", RunState::Done))
            .collect();
        runs.extend([
            (1_005, Some("b"), "manual", RunState::Done),
            (1_015, Some("b"), "release", RunState::Done),
            (1_025, None, "manual", RunState::Done),
            (1_695, Some("a"), BISECT_TRIGGER, RunState::Done),
            (1_696, Some("a"), "manual", RunState::Failed),
            (5_000, Some("a"), "manual", RunState::Done),
        ]);
        let mut ids = BTreeMap::new();
        for (created_ms, hardware, trigger, state) in runs {
            let run_id = RunId::new_random();
            store
                .runs()
                .insert(
                    run_id,
                    &spec,
                    trigger,
                    "test",
                    vec![NewJob::any()],
                    created_ms,
                )
                .await
                .unwrap();
            let result = GenerationResult {
                generation: generation.into(),
                toolchain: [("fork".to_string(), "gcc 12".to_string())].into(),
                findings: Vec::new(),
                backend_cells: Vec::new(),
                snapshot: Some(snapshot(run_id, hardware)),
            };
            let finish = RunFinish {
                state,
                exit_code: 0,
                now_ms: created_ms + 1,
                results: vec![result],
                report: None,
                alerts: Vec::new(),
            };
            store.reports().finish_run(run_id, finish).await.unwrap();
            ids.insert(run_id.to_string(), created_ms);
        }

        let found = store
            .reports()
            .comparable_snapshots(&spec.name, generation, 5_000)
            .await
            .unwrap();
        let on = |hardware: Option<&str>| -> Vec<i64> {
            found
                .iter()
                .filter(|(h, _)| h.as_deref() == hardware)
                .map(|(_, s)| ids[&s.run_id])
                .collect()
        };
        // The newest 64 of `a`, newest first: the bisect step, the failed run and the run
        // created after the report's run are none of them.
        let expected_a: Vec<i64> = (6..70).rev().map(|i| 1_000 + i * 10).collect();
        assert_eq!(on(Some("a")), expected_a);
        assert_eq!(on(Some("b")), [1_015, 1_005]);
        assert_eq!(on(None), [1_025]);
        assert_eq!(found.len(), 64 + 2 + 1);
        // Newest first across identities too, and each tag is the snapshot's own hardware.
        let times: Vec<i64> = found.iter().map(|(_, s)| ids[&s.run_id]).collect();
        assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
        assert!(found.iter().all(|(h, s)| h.as_deref() == s.hardware()));
    }
}
