//! Bisects kept with the run they bisected (`abfleet bisect RUN` sends its result when the
//! search ends): the run's report carries them (`Report::bisects`), so `abfleet report RUN`
//! shows a "Bisect" section.

use abfleet_core::bisect::BisectRecord;
use abfleet_core::report::format_utc;
use abfleet_core::RunId;
use tracing::warn;

use super::{FleetError, Reports};

impl Reports {
    /// Keeps a finished bisect of `run_id`, stamped with the coordinator's time.
    pub async fn record_bisect(
        &self,
        run_id: RunId,
        mut record: BisectRecord,
    ) -> Result<(), FleetError> {
        self.ground.run_row(run_id).await?;
        let now_ms = self.ground.now_ms();
        record.recorded = format_utc(now_ms);
        let json = serde_json::to_string(&record)
            .map_err(|err| crate::error::CoordinatorError::Internal(err.to_string()))?;
        self.ground
            .store()
            .reports()
            .record_bisect(run_id, now_ms, json)
            .await?;
        Ok(())
    }

    /// The run's recorded bisects, oldest first. One that no longer reads (a store written
    /// by a newer coordinator) is left out with a warning, never failing the report.
    pub(super) async fn stored_bisects(
        &self,
        run_id: RunId,
    ) -> Result<Vec<BisectRecord>, FleetError> {
        let mut bisects = Vec::new();
        for json in self.ground.store().reports().bisects_of(run_id).await? {
            match serde_json::from_str::<BisectRecord>(&json) {
                Ok(record) => bisects.push(record),
                Err(err) => warn!(run_id = %run_id, %err, "a stored bisect does not read"),
            }
        }
        Ok(bisects)
    }
}
