//! A finished run's report as `GetReport` serves it (migration 13): assembled once, when the
//! run finishes, with each generation compared against the previous runs, and kept as its
//! JSON in `run_reports`, so a report read is one row, never a re-assembly of the run's events.
//!
//! What the comparison reads — the `generation_results` of earlier runs of the name — can
//! change after a run finished (an earlier run finishing later, a cancelled run's last
//! events, a run from before that table recorded late). Every such change goes through
//! `replace_results`, which calls [`results_changed`]: the stored reports of that run and of
//! every later run of its name are dropped (they are assembled again when next read), and the
//! change is logged in `results_changes`. A report is stored only if no change of its name at
//! or before its run was logged after the one it was assembled under (its basis), so a report
//! assembled while what it compares with changed is served once, never kept. A report stored
//! by another abfleet version is not served either: the report is a function of the stored
//! events, and this version assembles it again.

use abfleet_core::RunId;
use rusqlite::{params, Connection, OptionalExtension};

use super::Store;
use crate::error::CoordinatorError;

/// The abfleet that assembled a stored report; a report stored by any other is assembled
/// again when read.
pub const ASSEMBLED_BY: &str = concat!("abfleet ", env!("CARGO_PKG_VERSION"));

/// A report about to be stored: its JSON, and the last results change logged before it was
/// assembled ([`ReportRecords::report_basis`]).
#[derive(Debug, Clone)]
pub struct ReportToStore {
    pub json: String,
    pub basis: i64,
    pub now_ms: i64,
}

/// What the store has of a run's report.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredReport {
    /// The report's JSON, as stored when the run finished (or when first read after).
    Stored(String),
    /// Nothing stored (the run is unfinished, finished before reports were stored, or its
    /// report was dropped): whether the run has finished, and the basis a report assembled
    /// now is stored under.
    Missing { finished: bool, basis: i64 },
}

/// What finished runs leave: their reports as served, their results for later runs, their bisects, and what a report is built from. A view of the [`Store`]: `store.reports()`.
#[derive(Clone, Copy)]
pub struct ReportRecords<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    pub fn reports(&self) -> ReportRecords<'_> {
        ReportRecords { store: self }
    }
}

impl ReportRecords<'_> {
    /// The stored report of a run, or what storing one needs; `None` for an unknown run.
    pub async fn stored_report(
        &self,
        run_id: RunId,
    ) -> Result<Option<StoredReport>, CoordinatorError> {
        self.store
            .read(move |conn| {
                let row = conn
                    .query_row(
                        "SELECT runs.state, run_reports.report_json, run_reports.assembled_by
                     FROM runs LEFT JOIN run_reports USING (run_id) WHERE run_id = ?1",
                        params![run_id],
                        |row| {
                            Ok((
                                row.get::<_, abfleet_core::lifecycle::RunState>(0)?,
                                row.get::<_, Option<String>>(1)?,
                                row.get::<_, Option<String>>(2)?,
                            ))
                        },
                    )
                    .optional()?;
                let Some((state, json, assembled_by)) = row else {
                    return Ok(None);
                };
                if let (Some(json), Some(ASSEMBLED_BY)) = (json, assembled_by.as_deref()) {
                    return Ok(Some(StoredReport::Stored(json)));
                }
                Ok(Some(StoredReport::Missing {
                    finished: state.is_finished(),
                    basis: last_change(conn)?,
                }))
            })
            .await
    }

    /// The basis of a report assembled from now on: read before the report reads anything
    /// it compares with.
    pub async fn report_basis(&self) -> Result<i64, CoordinatorError> {
        self.store.read(last_change).await
    }

    /// Stores a finished run's report assembled after it finished, unless what it compares
    /// with changed since its basis (then it is served once, not kept). `true` when stored.
    pub async fn store_report(
        &self,
        run_id: RunId,
        report: ReportToStore,
    ) -> Result<bool, CoordinatorError> {
        self.store
            .with(move |conn| {
                let tx = conn.transaction()?;
                let stored = is_current(&tx, run_id, report.basis)?;
                if stored {
                    put(&tx, run_id, &report)?;
                }
                tx.commit()?;
                Ok(stored)
            })
            .await
    }
}

/// The last results change logged (0 before the first).
fn last_change(conn: &Connection) -> Result<i64, CoordinatorError> {
    Ok(conn.query_row(
        "SELECT COALESCE(MAX(seq), 0) FROM results_changes",
        [],
        |row| row.get(0),
    )?)
}

/// Whether no change that a report of `run_id` may depend on (of its name, at or before its
/// run) was logged after `basis`.
pub(super) fn is_current(
    conn: &Connection,
    run_id: RunId,
    basis: i64,
) -> Result<bool, CoordinatorError> {
    Ok(conn.query_row(
        "SELECT NOT EXISTS (SELECT 1 FROM results_changes, runs
           WHERE runs.run_id = ?1 AND results_changes.seq > ?2
             AND results_changes.name = runs.name AND results_changes.created_ms <= runs.created_ms)
         AND EXISTS (SELECT 1 FROM runs WHERE run_id = ?1)",
        params![run_id, basis],
        |row| row.get(0),
    )?)
}

/// Stores (or replaces) a run's report.
pub(super) fn put(
    conn: &Connection,
    run_id: RunId,
    report: &ReportToStore,
) -> Result<(), CoordinatorError> {
    conn.execute(
        "INSERT OR REPLACE INTO run_reports (run_id, report_json, assembled_by, assembled_ms) VALUES (?1, ?2, ?3, ?4)",
        params![run_id, report.json, ASSEMBLED_BY, report.now_ms],
    )?;
    Ok(())
}

/// Something the run's own report shows changed (a bisect recorded): its stored report is
/// dropped, and the change is logged so that a report of it being assembled now is not kept.
pub(super) fn report_changed(conn: &Connection, run_id: RunId) -> Result<(), CoordinatorError> {
    conn.execute(
        "INSERT INTO results_changes (name, created_ms)
         SELECT name, created_ms FROM runs WHERE run_id = ?1",
        params![run_id],
    )?;
    conn.execute("DELETE FROM run_reports WHERE run_id = ?1", params![run_id])?;
    Ok(())
}

/// What a run leaves for later runs changed: its stored report and those of every later run
/// of its name are dropped, and the change is logged.
pub(super) fn results_changed(conn: &Connection, run_id: RunId) -> Result<(), CoordinatorError> {
    let run: Option<(String, i64)> = conn
        .query_row(
            "SELECT name, created_ms FROM runs WHERE run_id = ?1",
            params![run_id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?;
    let Some((name, created_ms)) = run else {
        return Ok(());
    };
    conn.execute("DELETE FROM run_reports WHERE run_id = ?1", params![run_id])?;
    conn.execute(
        "DELETE FROM run_reports WHERE run_id IN
         (SELECT run_id FROM runs WHERE name = ?1 AND created_ms > ?2)",
        params![name, created_ms],
    )?;
    conn.execute(
        "INSERT INTO results_changes (name, created_ms) VALUES (?1, ?2)",
        params![name, created_ms],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::NewJob;
    use abfleet_core::lifecycle::RunState;

    fn spec(name: &str) -> abfleet_core::spec::JobSpec {
        let text = include_str!("../../../fixtures/jobs/demo.toml");
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        let mut spec =
            abfleet_core::spec::JobSpec::from_toml(text, std::path::Path::new("demo.toml"), dir)
                .unwrap();
        spec.name = name.to_string();
        spec
    }

    async fn run(store: &Store, name: &str, created_ms: i64) -> RunId {
        let run_id = RunId::new_random();
        store
            .runs()
            .insert(
                run_id,
                &spec(name),
                "manual",
                "t",
                vec![NewJob::any()],
                created_ms,
            )
            .await
            .unwrap();
        run_id
    }

    async fn finish(store: &Store, run_id: RunId, report: Option<ReportToStore>) {
        store
            .reports()
            .finish_run(
                run_id,
                crate::store::RunFinish {
                    state: RunState::Done,
                    exit_code: 0,
                    now_ms: 1,
                    results: Vec::new(),
                    report,
                    alerts: Vec::new(),
                },
            )
            .await
            .unwrap();
    }

    fn report(json: &str, basis: i64) -> ReportToStore {
        ReportToStore {
            json: json.to_string(),
            basis,
            now_ms: 1,
        }
    }

    #[tokio::test]
    async fn a_finished_runs_report_is_kept_and_dropped_when_an_earlier_run_changes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let earlier = run(&store, "a", 10).await;
        let later = run(&store, "a", 20).await;
        let other_name = run(&store, "b", 30).await;
        assert_eq!(
            store.reports().stored_report(later).await.unwrap(),
            Some(StoredReport::Missing {
                finished: false,
                basis: 0
            })
        );
        assert_eq!(
            store
                .reports()
                .stored_report(RunId::new_random())
                .await
                .unwrap(),
            None
        );
        // The later run finishes first; its report is kept.
        let basis = store.reports().report_basis().await.unwrap();
        finish(&store, later, Some(report("{\"later\":1}", basis))).await;
        assert_eq!(
            store.reports().stored_report(later).await.unwrap(),
            Some(StoredReport::Stored("{\"later\":1}".into()))
        );
        // Another name finishing changes nothing of it; the earlier run of its name does.
        let basis = store.reports().report_basis().await.unwrap();
        finish(&store, other_name, Some(report("{}", basis))).await;
        assert!(matches!(
            store.reports().stored_report(later).await.unwrap(),
            Some(StoredReport::Stored(_))
        ));
        let basis = store.reports().report_basis().await.unwrap();
        finish(&store, earlier, Some(report("{\"earlier\":1}", basis))).await;
        assert!(matches!(
            store.reports().stored_report(earlier).await.unwrap(),
            Some(StoredReport::Stored(_))
        ));
        let Some(StoredReport::Missing { finished, basis }) =
            store.reports().stored_report(later).await.unwrap()
        else {
            panic!("the later run's report was dropped");
        };
        assert!(finished);
        assert!(store
            .reports()
            .store_report(later, report("{\"later\":2}", basis))
            .await
            .unwrap());
        assert_eq!(
            store.reports().stored_report(later).await.unwrap(),
            Some(StoredReport::Stored("{\"later\":2}".into()))
        );
    }

    #[tokio::test]
    async fn a_recorded_bisect_drops_its_runs_stored_report_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let bisected = run(&store, "a", 10).await;
        let later = run(&store, "a", 20).await;
        let basis = store.reports().report_basis().await.unwrap();
        finish(&store, bisected, Some(report("{\"bisected\":1}", basis))).await;
        let basis = store.reports().report_basis().await.unwrap();
        finish(&store, later, Some(report("{\"later\":1}", basis))).await;
        assert_eq!(
            store.reports().stored_report(later).await.unwrap(),
            Some(StoredReport::Stored("{\"later\":1}".into()))
        );
        // A report of the run being assembled now, before the bisect lands, is not kept.
        let before_bisect = store.reports().report_basis().await.unwrap();
        store
            .reports()
            .record_bisect(bisected, 5, "{}".to_string())
            .await
            .unwrap();
        let Some(StoredReport::Missing { finished, basis }) =
            store.reports().stored_report(bisected).await.unwrap()
        else {
            panic!("the bisected run's stored report was kept without its bisect");
        };
        assert!(finished);
        assert!(!store
            .reports()
            .store_report(bisected, report("{\"stale\":1}", before_bisect))
            .await
            .unwrap());
        assert!(store
            .reports()
            .store_report(bisected, report("{\"with bisect\":1}", basis))
            .await
            .unwrap());
        assert_eq!(
            store.reports().stored_report(bisected).await.unwrap(),
            Some(StoredReport::Stored("{\"with bisect\":1}".into()))
        );
        assert_eq!(
            store.reports().stored_report(later).await.unwrap(),
            Some(StoredReport::Stored("{\"later\":1}".into()))
        );
    }

    #[tokio::test]
    async fn a_report_assembled_while_what_it_compares_with_changed_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let earlier = run(&store, "a", 10).await;
        let later = run(&store, "a", 20).await;
        let next = run(&store, "a", 30).await;
        let stale_basis = store.reports().report_basis().await.unwrap();
        // While the later run's report is assembled, the earlier run finishes...
        finish(&store, earlier, None).await;
        // ...so the later run finishes without keeping its report,
        finish(&store, later, Some(report("{\"stale\":1}", stale_basis))).await;
        assert!(matches!(
            store.reports().stored_report(later).await.unwrap(),
            Some(StoredReport::Missing { finished: true, .. })
        ));
        // and one read later under the old basis is not kept either; under the new one it is.
        assert!(!store
            .reports()
            .store_report(later, report("{\"stale\":2}", stale_basis))
            .await
            .unwrap());
        let basis = store.reports().report_basis().await.unwrap();
        assert!(store
            .reports()
            .store_report(later, report("{\"fresh\":1}", basis))
            .await
            .unwrap());
        // A change after a run (the next one finishing) is nothing it compares with.
        finish(&store, next, None).await;
        assert!(matches!(
            store.reports().stored_report(later).await.unwrap(),
            Some(StoredReport::Stored(_))
        ));
    }
}
