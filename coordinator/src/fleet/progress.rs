//! Progress for watchers: where a run stands now (the snapshot a new watcher sees first),
//! and the broadcast of every change after it.

use abfleet_core::progress::RunProgress;
use abfleet_core::RunId;
use tokio::sync::broadcast;

use super::Fleet;
use super::FleetError;
use crate::store::RunRow;

impl Fleet {
    /// The progress a new watcher sees first: where the run stands now.
    pub async fn snapshot(&self, run_id: RunId) -> Result<RunProgress, FleetError> {
        let run = self.run_row(run_id).await?;
        self.snapshot_of(&run).await
    }

    /// [`Fleet::snapshot`] of a run row already read.
    pub async fn snapshot_of(&self, run: &RunRow) -> Result<RunProgress, FleetError> {
        let run_id = run.run_id;
        let jobs = self.inner.store.jobs_of_run(run_id).await?;
        let mut snapshot = RunProgress::new(
            run_id,
            jobs.first().map(|j| j.job_id),
            run.state.as_str(),
            "",
        );
        snapshot.cells_total = run.spec.cell_count() as u32;
        for job in &jobs {
            snapshot.cells_done += self.inner.store.cell_count(job.job_id).await? as u32;
        }
        if run.state.is_finished() {
            snapshot.exit_code = Some(match run.exit_code {
                Some(code) => code,
                None => self.assembled(run_id).await?.exit_code,
            });
        }
        Ok(snapshot)
    }

    pub fn subscribe(&self) -> broadcast::Receiver<RunProgress> {
        self.inner.progress.subscribe()
    }

    pub(super) fn publish(&self, update: RunProgress) {
        // No watcher is fine.
        let _ = self.inner.progress.send(update);
    }
}
