//! Finishing a run once every job of it has ended: its state, its exit code (from its report
//! compared with the earlier comparable runs), what it leaves for later runs, its report as
//! served from then on and its alerts — stored in one transaction. One task finishes a run
//! at a time; the lease reaper finishes runs whose finish failed or was cut off.

use std::sync::Arc;

use abfleet_core::lifecycle::{JobState, RunState};
use abfleet_core::progress::RunProgress;
use abfleet_core::report::earlier::results_for_later_runs;
use abfleet_core::RunId;
use tracing::{error, info};

use super::served_reports::report_to_json;
use super::state::Ground;
use super::{Alerts, FleetError, Reports};
use crate::store::ReportToStore;

/// Finishing runs: reads their reports through `reports`, queues their alerts through
/// `alerts`. Owns the set of runs being finished now.
#[derive(Clone)]
pub struct Finishing {
    pub(super) ground: Ground,
    pub(super) reports: Reports,
    pub(super) alerts: Alerts,
    finishing_runs: Arc<FinishingRuns>,
}

impl Finishing {
    pub(super) fn new(ground: Ground, reports: Reports, alerts: Alerts) -> Finishing {
        Finishing {
            ground,
            reports,
            alerts,
            finishing_runs: Default::default(),
        }
    }

    /// Finishes every run whose jobs have all ended but which is not finished: its finish
    /// failed (a full disk, a report that could not be made) or the coordinator died between
    /// the last job's end and the run's. The reaper calls it on every tick, so a run is
    /// finished once the cause is gone, also after a restart. Returns how many it finished;
    /// a failure is logged and left for the next tick.
    pub async fn finish_stranded_runs(&self) -> Result<usize, FleetError> {
        let stranded = self
            .ground
            .store()
            .runs()
            .runs_with_every_job_finished()
            .await?;
        let mut finished = 0;
        for run_id in stranded {
            info!(run_id = %run_id, "every job of the run has ended but the run has not: finishing it");
            if self.finish_run_if_complete(run_id).await.is_ok() {
                finished += 1;
            }
        }
        Ok(finished)
    }

    /// Finishes a run whose jobs have all ended: stores its state and exit code. One task
    /// finishes a run at a time (another asking meanwhile returns at once); a failure is
    /// logged as an error (the reaper retries it: [`Finishing::finish_stranded_runs`]).
    pub(super) async fn finish_run_if_complete(&self, run_id: RunId) -> Result<(), FleetError> {
        let Some(_claim) = FinishClaim::take(&self.finishing_runs, run_id) else {
            return Ok(());
        };
        let finished = self.finish_run_now(run_id).await;
        if let Err(err) = &finished {
            error!(run_id = %run_id, error = %err, "finishing the run failed; the reaper retries it");
        }
        finished
    }

    async fn finish_run_now(&self, run_id: RunId) -> Result<(), FleetError> {
        let run = self.ground.run_row(run_id).await?;
        if run.state.is_finished() {
            return Ok(());
        }
        let jobs = self.ground.store().jobs().of_run(run_id).await?;
        if !jobs.iter().all(|j| j.state.is_finished()) {
            return Ok(());
        }
        let state = if jobs.iter().all(|j| j.state == JobState::Done) {
            RunState::Done
        } else if jobs.iter().any(|j| j.state == JobState::Cancelled) {
            RunState::Cancelled
        } else {
            RunState::Failed
        };
        // One pass: the exit code is derived once, from the report as it reads in the final
        // state (compared with the earlier comparable runs: the parity ratchet can fail it),
        // and stored with that state, what the run leaves for later runs and the report as
        // it is served from now on (`served_reports`). A comparison that fails fails the
        // finish: an exit code without the ratchet would be wrong.
        let basis = self.ground.store().reports().report_basis().await?;
        let report = self.reports.report_as(run_id, Some(state)).await?;
        let results = results_for_later_runs(&report);
        let alerts = self.alerts.finished_run_alerts(&report);
        let (exit_code, cells_done) = (report.exit_code, report.cells.len() as u32);
        let json = tokio::task::spawn_blocking(move || report_to_json(&report))
            .await
            .map_err(|err| crate::CoordinatorError::Internal(format!("report to JSON: {err}")))?;
        let served = Some(ReportToStore {
            json,
            basis,
            now_ms: self.ground.now_ms(),
        });
        self.ground
            .store()
            .reports()
            .finish_run(
                run_id,
                crate::store::RunFinish {
                    state,
                    exit_code,
                    now_ms: self.ground.now_ms(),
                    results,
                    report: served,
                    alerts,
                },
            )
            .await?;
        self.alerts.wake_delivery();
        info!(run_id = %run_id, state = state.as_str(), exit_code, "run finished");
        let mut finished = RunProgress::new(
            run_id,
            jobs.first().map(|j| j.job_id),
            state.as_str(),
            "finished",
        );
        finished.exit_code = Some(exit_code);
        finished.cells_done = cells_done;
        finished.cells_total = run.spec.cell_count() as u32;
        self.ground.publish(finished);
        Ok(())
    }
}

/// The runs a task is finishing now (`finish_run_if_complete`), taken only here.
#[derive(Default)]
struct FinishingRuns {
    runs: std::sync::Mutex<std::collections::HashSet<RunId>>,
}

impl FinishingRuns {
    fn runs(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<RunId>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A run being finished by one task; dropped when that task is done with it.
struct FinishClaim<'f> {
    finishing: &'f FinishingRuns,
    run_id: RunId,
}

impl<'f> FinishClaim<'f> {
    fn take(finishing: &'f FinishingRuns, run_id: RunId) -> Option<FinishClaim<'f>> {
        finishing
            .runs()
            .insert(run_id)
            // `then`, not `then_some`: a claim made and dropped when the run is taken would
            // free the other task's claim.
            .then(|| FinishClaim { finishing, run_id })
    }
}

impl Drop for FinishClaim<'_> {
    fn drop(&mut self) {
        self.finishing.runs().remove(&self.run_id);
    }
}
