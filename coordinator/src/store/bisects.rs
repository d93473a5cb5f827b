//! Finished bisects of a run (`abfleet bisect RUN`, table `bisects`, migration 12): kept with
//! the run they bisected, so that run's report shows a "Bisect" section. The coordinator
//! stores the document as the CLI sent it (`core::bisect::BisectRecord`, checked before it is
//! stored) and never reads into it. Recording one drops the run's stored report (its next
//! read assembles it with the bisect) in the same transaction.

use abfleet_core::RunId;
use rusqlite::params;

use super::ReportRecords;
use crate::error::CoordinatorError;

impl ReportRecords<'_> {
    /// Keeps a bisect of `run_id` (a `BisectRecord` as JSON), recorded at `now_ms`.
    pub async fn record_bisect(
        &self,
        run_id: RunId,
        now_ms: i64,
        bisection_json: String,
    ) -> Result<(), CoordinatorError> {
        self.store.with(move |conn| {
            let tx = conn.transaction()?;
            tx.execute(
                "INSERT OR REPLACE INTO bisects (run_id, recorded_ms, bisection_json) VALUES (?1, ?2, ?3)",
                params![run_id, now_ms, bisection_json],
            )?;
            super::reports::report_changed(&tx, run_id)?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// The bisects of `run_id` (each a `BisectRecord` as JSON), oldest first.
    pub async fn bisects_of(&self, run_id: RunId) -> Result<Vec<String>, CoordinatorError> {
        self.store
            .read(move |conn| {
                let mut stmt = conn.prepare(
                    "SELECT bisection_json FROM bisects WHERE run_id = ?1 ORDER BY recorded_ms",
                )?;
                let rows = stmt.query_map(params![run_id], |row| row.get::<_, String>(0))?;
                Ok(rows.collect::<rusqlite::Result<_>>()?)
            })
            .await
    }
}
