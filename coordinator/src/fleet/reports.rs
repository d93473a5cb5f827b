//! A run's report: assembled from its stored events, with each generation compared against
//! the previous run of the same spec.

use abfleet_core::report::{self, Report};
use abfleet_core::RunId;

use super::Fleet;
use crate::error::CoordinatorError;
use crate::store::RunRow;

impl Fleet {
    /// The full report, with each generation compared against the previous run's toolchain.
    pub async fn report(&self, run_id: RunId) -> Result<Report, CoordinatorError> {
        let (mut report, created_ms) = self.assembled(run_id).await?;
        self.attach_previous_toolchains(&mut report, created_ms)
            .await?;
        Ok(report)
    }

    /// The report from this run's own events only (what its exit code needs), and when the
    /// run was submitted.
    pub(super) async fn assembled(&self, run_id: RunId) -> Result<(Report, i64), CoordinatorError> {
        let (run, jobs) = self
            .inner
            .store
            .report_inputs(run_id)
            .await?
            .ok_or_else(|| CoordinatorError::UnknownRun(run_id.to_string()))?;
        Ok((report::assemble(&run, &jobs), run.created_ms))
    }

    /// For each generation, the toolchain, findings and backend timings of the previous run
    /// of the same spec name on the same generation: a toolchain bump shows as a change in
    /// the report, and so does what it did to registers, occupancy and timings.
    pub(super) async fn attach_previous_toolchains(
        &self,
        report: &mut Report,
        created_ms: i64,
    ) -> Result<(), CoordinatorError> {
        let earlier: Vec<RunRow> = self
            .inner
            .store
            .runs()
            .await?
            .into_iter()
            .filter(|r| r.name == report.name && r.created_ms < created_ms && r.state.is_finished())
            .collect();
        for section in &mut report.generations {
            for previous in earlier.iter().rev() {
                let Some((run, jobs)) = self.inner.store.report_inputs(previous.run_id).await?
                else {
                    continue;
                };
                let old = report::assemble(&run, &jobs);
                if let Some(old_section) = old
                    .generations
                    .iter()
                    .find(|g| g.key == section.key && !g.toolchain.is_empty())
                {
                    let previous_run = previous.run_id.to_string();
                    abfleet_core::finding::attach_previous(
                        &mut section.findings,
                        &old_section.findings,
                        &previous_run,
                    );
                    abfleet_core::backend_cell::attach_previous(
                        &mut section.backend_cells,
                        &old_section.backend_cells,
                        &previous_run,
                    );
                    section.previous_run = Some(previous_run);
                    section.previous_toolchain = old_section.toolchain.clone();
                    break;
                }
            }
        }
        Ok(())
    }
}
