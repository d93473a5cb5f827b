//! A run's report: assembled from its stored events, with each generation compared against
//! the previous finished run of the same spec on that generation. What a run leaves for the
//! runs after it (per generation: toolchain, findings, backend timings) is recorded in the
//! store when it finishes, so finding "the previous run" is one indexed read, not a
//! re-assembly of every earlier run of the name.

use abfleet_core::lifecycle::RunState;
use abfleet_core::report::history::{self, GenerationSnapshot};
use abfleet_core::report::{self, Report};
use abfleet_core::RunId;

use super::Fleet;
use super::FleetError;
use crate::store::GenerationResult;

impl Fleet {
    /// The full report assembled now, with each generation compared against the previous
    /// run's toolchain (`served_reports` keeps it once the run finished).
    pub(super) async fn fresh_report(&self, run_id: RunId) -> Result<Report, FleetError> {
        self.report_as(run_id, None).await
    }

    /// The full report as it reads once the run is in `finishing_as` when one is given
    /// ([`Fleet::assembled_in`]): its own events, each generation compared with the earlier
    /// comparable runs (the ratchet can fail it) and its recorded bisects. Both the report a
    /// run is finished with and the one served for it later are this one.
    pub(super) async fn report_as(
        &self,
        run_id: RunId,
        finishing_as: Option<RunState>,
    ) -> Result<Report, FleetError> {
        let (mut report, created_ms) = self.assembled_in(run_id, finishing_as).await?;
        self.attach_previous(&mut report, created_ms).await?;
        self.attach_bisects(&mut report, run_id).await?;
        Ok(report)
    }

    /// The report from this run's own events only (what its exit code needs), and when the
    /// run was submitted.
    pub(super) async fn assembled(&self, run_id: RunId) -> Result<(Report, i64), FleetError> {
        self.assembled_in(run_id, None).await
    }

    /// [`Fleet::assembled`], as the report reads once the run is in `finishing_as` when one
    /// is given: a run being finished is assembled before its state is stored, so that state
    /// and exit code are written together, once.
    pub(super) async fn assembled_in(
        &self,
        run_id: RunId,
        finishing_as: Option<RunState>,
    ) -> Result<(Report, i64), FleetError> {
        let _permit = self.inner.assembling.acquire().await.map_err(|err| {
            crate::CoordinatorError::Internal(format!("report assembly queue: {err}"))
        })?;
        let (mut run, jobs) = self
            .inner
            .store
            .report_inputs(run_id)
            .await?
            .ok_or_else(|| FleetError::UnknownRun(run_id))?;
        if let Some(state) = finishing_as {
            run.state = state;
        }
        let created_ms = run.created_ms;
        // Seconds of CPU for a run of many cells: off the async runtime.
        let report = tokio::task::spawn_blocking(move || report::assemble_owned(&run, jobs))
            .await
            .map_err(|err| {
                crate::CoordinatorError::Internal(format!("report assembly failed: {err}"))
            })?;
        Ok((report, created_ms))
    }

    /// Records again what a finished run leaves for later runs, from its stored events (a
    /// cancelled run's last events arrived, or it finished before the store kept this).
    pub(super) async fn record_results_of(&self, run_id: RunId) -> Result<(), FleetError> {
        let (report, _) = self.assembled(run_id).await?;
        self.inner
            .store
            .record_results(run_id, results_for_later_runs(&report))
            .await?;
        Ok(())
    }

    /// For each generation, the toolchain, findings and backend timings of the previous run
    /// of the same spec name on the same generation: a toolchain bump shows as a change in
    /// the report, and so does what it did to registers, occupancy and timings.
    pub(super) async fn attach_previous(
        &self,
        report: &mut Report,
        created_ms: i64,
    ) -> Result<(), FleetError> {
        // Runs that finished under a coordinator without `generation_results` are recorded
        // the first time a later report needs them, once.
        for earlier in self
            .inner
            .store
            .unrecorded_finished_runs(&report.name, created_ms)
            .await?
        {
            self.record_results_of(earlier).await?;
        }
        for section in &mut report.generations {
            let Some(previous) = self
                .inner
                .store
                .previous_result(&report.name, &section.key, created_ms)
                .await?
            else {
                continue;
            };
            let previous_run = previous.run_id.to_string();
            abfleet_core::finding::attach_previous(
                &mut section.findings,
                &previous.result.findings,
                &previous_run,
            );
            abfleet_core::backend_cell::attach_previous(
                &mut section.backend_cells,
                &previous.result.backend_cells,
                &previous_run,
            );
            section.previous_run = Some(previous_run.clone());
            section.previous_toolchain = previous.result.toolchain;
            // A sweep is compared with the previous sweep's winner; a winner that changed
            // after a toolchain change becomes a retuning finding.
            let toolchain_changes = section.toolchain_changes();
            if let Some(sweep) = section.sweep.as_mut() {
                abfleet_core::sweep::attach_history(
                    sweep,
                    &mut section.findings,
                    &previous.result.findings,
                    toolchain_changes,
                    &previous_run,
                );
            }
        }
        self.attach_since_previous(report, created_ms).await
    }

    /// Each generation compared with the earlier comparable runs (same name, generation and
    /// hardware; `done`; no bisect steps): what changed and the regression flags; then the
    /// ratchet's growths become parity failures (exit 1), so the exit code a run finishes
    /// with already has them.
    async fn attach_since_previous(
        &self,
        report: &mut Report,
        created_ms: i64,
    ) -> Result<(), FleetError> {
        for index in 0..report.generations.len() {
            let section = &report.generations[index];
            if section.toolchain.is_empty() {
                continue;
            }
            let now = GenerationSnapshot::of(report, section);
            let earlier = self
                .inner
                .store
                .previous_comparable(&report.name, &section.key, now.hardware(), created_ms)
                .await?;
            report.generations[index].since_previous = history::since_previous(&now, &earlier);
        }
        history::apply_ratchet(report);
        Ok(())
    }
}

/// What a finished run's report leaves for the next run of its spec: each generation that
/// built something (a section without a toolchain is never "the previous run").
pub(super) fn results_for_later_runs(report: &Report) -> Vec<GenerationResult> {
    report
        .generations
        .iter()
        .filter(|section| !section.toolchain.is_empty())
        .map(|section| GenerationResult {
            generation: section.key.clone(),
            toolchain: section.toolchain.clone(),
            findings: section.findings.clone(),
            backend_cells: section.backend_cells.clone(),
            snapshot: Some(GenerationSnapshot::of(report, section)),
        })
        .collect()
}
