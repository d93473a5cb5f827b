//! Progress for watchers: where a run stands now (the snapshot a new watcher sees first;
//! every change after it comes on the fleet's broadcast, `Ground::publish`).

use abfleet_core::progress::RunProgress;
use abfleet_core::RunId;

use super::FleetError;
use super::Reports;
use crate::store::RunRow;

impl Reports {
    /// The progress a new watcher sees first: where the run stands now.
    pub async fn snapshot(&self, run_id: RunId) -> Result<RunProgress, FleetError> {
        let run = self.ground.run_row(run_id).await?;
        self.snapshot_of(&run).await
    }

    /// [`Reports::snapshot`] of a run row already read.
    pub async fn snapshot_of(&self, run: &RunRow) -> Result<RunProgress, FleetError> {
        let run_id = run.run_id;
        let jobs = self.ground.store().jobs().of_run(run_id).await?;
        let mut snapshot = RunProgress::new(
            run_id,
            jobs.first().map(|j| j.job_id),
            run.state.as_str(),
            "",
        );
        snapshot.cells_total = run.spec.cell_count() as u32;
        for job in &jobs {
            snapshot.cells_done +=
                self.ground.store().events().cell_count(job.job_id).await? as u32;
        }
        if run.state.is_finished() {
            snapshot.exit_code = Some(match run.exit_code {
                Some(code) => code,
                None => self.assembled(run_id).await?.exit_code,
            });
        }
        Ok(snapshot)
    }
}
