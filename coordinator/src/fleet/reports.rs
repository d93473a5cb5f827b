//! A run's report: every input gathered from the store first — the run's records, what the
//! earlier runs of its spec left on each of its generations, its recorded bisects — then
//! built by core's one pure function (`core::report::build`). What a run leaves for the runs
//! after it (per generation: toolchain, findings, backend timings, snapshot) is recorded in
//! the store when it finishes, so finding "the previous run" is one indexed read, not a
//! re-assembly of every earlier run of the name.

use std::collections::BTreeMap;
use std::sync::Arc;

use abfleet_core::lifecycle::RunState;
use abfleet_core::report::earlier::{results_for_later_runs, EarlierRuns};
use abfleet_core::report::{self, Report, ReportInputs};
use abfleet_core::RunId;

use super::state::Ground;
use super::FleetError;

/// Which inputs a report is built from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Inputs {
    /// The run's own records only: what its exit code on its own and what it leaves for
    /// later runs need.
    Own,
    /// Also what earlier runs left and its bisects: the report a run finishes with and is
    /// served with.
    WithEarlierRuns,
}

/// Reports: built from the store (one pure `core::report::build` per report), served,
/// snapshots of a run's progress, its bisects, one workload's history. Holds the queue of
/// reports being assembled.
#[derive(Clone)]
pub struct Reports {
    pub(super) ground: Ground,
    /// Reports assembled at once, one per core and at most four: each holds its run's
    /// decoded events, and runs finishing together queue here instead of all being in
    /// memory at once.
    assembling: Arc<tokio::sync::Semaphore>,
}

impl Reports {
    pub(super) fn new(ground: Ground) -> Reports {
        let permits = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 4));
        Reports {
            ground,
            assembling: Arc::new(tokio::sync::Semaphore::new(permits)),
        }
    }

    /// The full report built now (`served_reports` keeps it once the run finished).
    pub(super) async fn fresh_report(&self, run_id: RunId) -> Result<Report, FleetError> {
        self.report_as(run_id, None).await
    }

    /// The full report as it reads once the run is in `finishing_as` when one is given: its
    /// own events, each generation compared with the earlier comparable runs (the ratchet
    /// can fail it) and its recorded bisects. Both the report a run is finished with and the
    /// one served for it later are this one: a run being finished is built before its state
    /// is stored, so that state and exit code are written together, once.
    pub(super) async fn report_as(
        &self,
        run_id: RunId,
        finishing_as: Option<RunState>,
    ) -> Result<Report, FleetError> {
        self.built(run_id, finishing_as, Inputs::WithEarlierRuns)
            .await
    }

    /// The report from this run's own events only (what its exit code needs).
    pub(super) async fn assembled(&self, run_id: RunId) -> Result<Report, FleetError> {
        self.built_from_store(run_id, None, Inputs::Own).await
    }

    /// Records again what a finished run leaves for later runs, from its stored events (a
    /// cancelled run's last events arrived, or it finished before the store kept this).
    pub(super) async fn record_results_of(&self, run_id: RunId) -> Result<(), FleetError> {
        let report = self.assembled(run_id).await?;
        self.ground
            .store()
            .reports()
            .record_results(run_id, results_for_later_runs(&report))
            .await?;
        Ok(())
    }

    /// A report built from its inputs, gathered first.
    async fn built(
        &self,
        run_id: RunId,
        finishing_as: Option<RunState>,
        inputs: Inputs,
    ) -> Result<Report, FleetError> {
        if inputs == Inputs::WithEarlierRuns {
            self.record_unrecorded_runs_before(run_id).await?;
        }
        self.built_from_store(run_id, finishing_as, inputs).await
    }

    /// [`Reports::built`] once every earlier run is recorded; at most `assembling` reports are
    /// built at once (each holds a run's events in memory).
    async fn built_from_store(
        &self,
        run_id: RunId,
        finishing_as: Option<RunState>,
        inputs: Inputs,
    ) -> Result<Report, FleetError> {
        let _permit = self.assembling.acquire().await.map_err(|err| {
            crate::CoordinatorError::Internal(format!("report assembly queue: {err}"))
        })?;
        let (mut run, jobs) = self
            .ground
            .store()
            .reports()
            .report_inputs(run_id)
            .await?
            .ok_or_else(|| FleetError::UnknownRun(run_id))?;
        if let Some(state) = finishing_as {
            run.state = state;
        }
        let inputs = match inputs {
            Inputs::Own => ReportInputs::own(run, jobs),
            Inputs::WithEarlierRuns => {
                let earlier = self
                    .earlier_runs(
                        &run.spec.name,
                        &ReportInputs::generation_keys(&jobs),
                        run.created_ms,
                    )
                    .await?;
                ReportInputs {
                    run,
                    jobs,
                    earlier,
                    bisects: self.stored_bisects(run_id).await?,
                }
            }
        };
        // Seconds of CPU for a run of many cells: off the async runtime.
        tokio::task::spawn_blocking(move || report::build(inputs))
            .await
            .map_err(|err| {
                crate::CoordinatorError::Internal(format!("report assembly failed: {err}")).into()
            })
    }

    /// Runs of this run's spec name that finished under a coordinator without
    /// `generation_results` are recorded the first time a later report needs them, once.
    async fn record_unrecorded_runs_before(&self, run_id: RunId) -> Result<(), FleetError> {
        for earlier in self
            .ground
            .store()
            .reports()
            .unrecorded_runs_before(run_id)
            .await?
        {
            self.record_results_of(earlier).await?;
        }
        Ok(())
    }

    /// For each generation key, what the earlier runs of `name` left on it before
    /// `created_ms`: the previous run's result (a toolchain bump shows as a change, and so
    /// does what it did to registers, occupancy and timings) and the comparable runs'
    /// snapshots (what changed, the regression flags, the ratchet).
    async fn earlier_runs(
        &self,
        name: &str,
        keys: &[String],
        created_ms: i64,
    ) -> Result<BTreeMap<String, EarlierRuns>, FleetError> {
        let store = self.ground.store().reports();
        let mut earlier = BTreeMap::new();
        for key in keys {
            let runs = EarlierRuns {
                previous: store.previous_result(name, key, created_ms).await?,
                comparable: store.comparable_snapshots(name, key, created_ms).await?,
            };
            earlier.insert(key.clone(), runs);
        }
        Ok(earlier)
    }
}
