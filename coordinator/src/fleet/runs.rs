//! Runs and their jobs from submission to their end: planning the jobs a spec fans out to,
//! cancelling, and finishing a run once every job has ended.

use abfleet_core::lifecycle::{AgentState, JobState, RunState};
use abfleet_core::progress::RunProgress;
use abfleet_core::session::SessionMessage;
use abfleet_core::spec::{Fanout, JobSpec};
use abfleet_core::{JobId, RunId};
use tracing::{error, info, warn};

use super::served_reports::report_to_json;
use super::Fleet;
use super::FleetError;
use crate::store::{NewJob, ReportToStore, RunCursor, RunListing, RunOrder, RunRow};
use abfleet_core::report::earlier::results_for_later_runs;

impl Fleet {
    /// Stores a run with its jobs (one, or one per matching generation or agent) and offers
    /// them to waiting agents. A spec whose targets match no known agent ends at once, saying
    /// what the fleet has.
    pub async fn submit(
        &self,
        spec: JobSpec,
        trigger: &str,
        origin: &str,
    ) -> Result<RunId, FleetError> {
        self.submit_noted(spec, trigger, None, origin).await
    }

    /// [`Fleet::submit`] with what the trigger said about itself (kept as `runs.trigger_note`,
    /// shown in the report's header and `abfleet runs`).
    pub async fn submit_noted(
        &self,
        spec: JobSpec,
        trigger: &str,
        trigger_note: Option<&str>,
        origin: &str,
    ) -> Result<RunId, FleetError> {
        self.submit_on(spec, trigger, trigger_note, origin, None)
            .await
    }

    /// [`Fleet::submit_noted`] on the generations of one hardware identity only, each job
    /// pinned to an agent that has it (a bisect step runs on the flagged run's hardware).
    pub async fn submit_on(
        &self,
        spec: JobSpec,
        trigger: &str,
        trigger_note: Option<&str>,
        origin: &str,
        hardware_id: Option<&str>,
    ) -> Result<RunId, FleetError> {
        let run_id = RunId::new_random();
        let (jobs, unmatched) = self.plan_jobs(&spec, hardware_id).await?;
        self.inner
            .store
            .insert_noted_run(
                run_id,
                &spec,
                trigger,
                trigger_note,
                origin,
                jobs.clone(),
                self.now_ms(),
            )
            .await?;
        info!(run_id = %run_id, jobs = jobs.len(), name = %spec.name, trigger, "run submitted");
        if let Some(error) = unmatched {
            warn!(run_id = %run_id, %error, "no agent matches the run's targets");
            self.inner
                .store
                .fail_run(
                    run_id,
                    error.clone(),
                    abfleet_core::exit::NOT_CARRIED_OUT,
                    self.now_ms(),
                )
                .await?;
            let mut finished = RunProgress::new(run_id, None, "failed", &error);
            finished.exit_code = Some(abfleet_core::exit::NOT_CARRIED_OUT);
            self.publish(finished);
            return Ok(run_id);
        }
        for job in &jobs {
            self.publish(RunProgress::new(
                run_id,
                Some(job.job_id),
                "queued",
                &format!(
                    "waiting for an agent ({})",
                    job.generation.as_deref().unwrap_or("any")
                ),
            ));
        }
        self.dispatch().await?;
        Ok(run_id)
    }

    /// The jobs a spec fans out to, or why it matches nothing.
    pub(super) async fn plan_jobs(
        &self,
        spec: &JobSpec,
        hardware_id: Option<&str>,
    ) -> Result<(Vec<NewJob>, Option<String>), FleetError> {
        let Some(targets) = &spec.targets else {
            if let Some(hardware) = hardware_id {
                return Ok((
                    Vec::new(),
                    Some(format!("the run is pinned to hardware `{hardware}` but its spec names no [targets]; narrow it to a generation")),
                ));
            }
            return Ok((vec![NewJob::any()], None));
        };
        let agents = self.agents().await?;
        let mut jobs: Vec<NewJob> = Vec::new();
        for (agent, state, _) in &agents {
            if *state == AgentState::Lost {
                continue;
            }
            for generation in agent
                .inventory
                .generations
                .iter()
                .filter(|g| targets.matches(g))
                .filter(|g| hardware_id.is_none_or(|h| g.hardware_or_silicon() == h))
            {
                let job = match targets.fanout {
                    Fanout::PerGeneration
                        if jobs
                            .iter()
                            .any(|j| j.generation.as_ref() == Some(&generation.key)) =>
                    {
                        continue
                    }
                    Fanout::PerGeneration => NewJob {
                        job_id: JobId::new_random(),
                        generation: Some(generation.key.clone()),
                        // Dispatch matches generation keys only: a job for one hardware id
                        // stays with an agent that has it.
                        pinned_agent: hardware_id.map(|_| agent.agent_id),
                    },
                    Fanout::PerAgent => NewJob {
                        job_id: JobId::new_random(),
                        generation: Some(generation.key.clone()),
                        pinned_agent: Some(agent.agent_id),
                    },
                };
                jobs.push(job);
            }
        }
        if !jobs.is_empty() {
            return Ok((jobs, None));
        }
        let seen: Vec<String> = agents
            .iter()
            .flat_map(|(agent, state, _)| {
                agent
                    .inventory
                    .generations
                    .iter()
                    .map(move |g| match hardware_id {
                        Some(_) => format!(
                            "{} on {} ({state}, hardware {})",
                            g.key,
                            agent.inventory.hostname,
                            g.hardware_or_silicon()
                        ),
                        None => format!("{} on {} ({state})", g.key, agent.inventory.hostname),
                    })
            })
            .collect();
        let error = format!(
            "no agent matches the targets (backends {:?}, generations {:?}, vendors {:?}{}); the fleet has: {}; start an agent on such a host or widen [targets]",
            targets.backends,
            targets.generations,
            targets.vendors,
            hardware_id.map_or(String::new(), |h| format!(", hardware `{h}`")),
            if seen.is_empty() { "no agents with generations".to_string() } else { seen.join(", ") }
        );
        Ok((Vec::new(), Some(error)))
    }

    pub async fn cancel(&self, run_id: RunId, reason: &str) -> Result<bool, FleetError> {
        let run = self.run_row(run_id).await?;
        if run.state.is_finished() {
            return Ok(false);
        }
        let leased = self
            .inner
            .store
            .cancel_run(run_id, format!("cancelled: {reason}"), self.now_ms())
            .await?;
        for job in leased {
            if let Some(agent_id) = job.agent_id {
                self.send(
                    agent_id,
                    SessionMessage::Cancel {
                        job_id: job.job_id,
                        reason: reason.to_string(),
                    },
                );
            }
        }
        info!(run_id = %run_id, reason, "run cancelled");
        let mut finished = RunProgress::new(run_id, None, "cancelled", reason);
        finished.exit_code = Some(abfleet_core::exit::CANCELLED);
        self.publish(finished);
        // The run is cancelled whatever happens here: unrecorded, it is recorded when a later
        // report first needs it.
        if let Err(err) = self.record_results_of(run_id).await {
            warn!(run_id = %run_id, error = %err, "failed to record what the cancelled run leaves for later runs");
        }
        Ok(true)
    }

    pub(super) async fn run_row(&self, run_id: RunId) -> Result<RunRow, FleetError> {
        self.inner
            .store
            .run(run_id)
            .await?
            .ok_or_else(|| FleetError::UnknownRun(run_id))
    }

    pub async fn runs(&self) -> Result<Vec<RunRow>, FleetError> {
        Ok(self.inner.store.runs().await?)
    }

    /// Up to `limit` runs in `order` after `cursor`: the run list, without reading specs.
    pub async fn run_listing(
        &self,
        order: RunOrder,
        cursor: Option<RunCursor>,
        limit: u32,
    ) -> Result<Vec<RunListing>, FleetError> {
        Ok(self.inner.store.run_listing(order, cursor, limit).await?)
    }

    /// The validated spec a run was submitted with, as the JSON stored with it.
    pub async fn run_spec_json(&self, run_id: RunId) -> Result<String, FleetError> {
        self.inner
            .store
            .spec_json(run_id)
            .await?
            .ok_or(FleetError::UnknownRun(run_id))
    }

    /// Up to `limit` runs from position `offset`, newest first.
    pub async fn runs_page_newest_first(
        &self,
        offset: u64,
        limit: u32,
    ) -> Result<Vec<RunRow>, FleetError> {
        Ok(self
            .inner
            .store
            .runs_page_newest_first(offset, limit)
            .await?)
    }

    /// One run's row.
    pub async fn run(&self, run_id: RunId) -> Result<RunRow, FleetError> {
        self.run_row(run_id).await
    }

    /// Finishes every run whose jobs have all ended but which is not finished: its finish
    /// failed (a full disk, a report that could not be made) or the coordinator died between
    /// the last job's end and the run's. The reaper calls it on every tick, so a run is
    /// finished once the cause is gone, also after a restart. Returns how many it finished;
    /// a failure is logged and left for the next tick.
    pub async fn finish_stranded_runs(&self) -> Result<usize, FleetError> {
        let stranded = self.inner.store.runs_with_every_job_finished().await?;
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
    /// logged as an error (the reaper retries it: [`Fleet::finish_stranded_runs`]).
    pub(super) async fn finish_run_if_complete(&self, run_id: RunId) -> Result<(), FleetError> {
        let Some(_claim) = FinishClaim::take(&self.inner.finishing, run_id) else {
            return Ok(());
        };
        let finished = self.finish_run_now(run_id).await;
        if let Err(err) = &finished {
            error!(run_id = %run_id, error = %err, "finishing the run failed; the reaper retries it");
        }
        finished
    }

    async fn finish_run_now(&self, run_id: RunId) -> Result<(), FleetError> {
        let run = self.run_row(run_id).await?;
        if run.state.is_finished() {
            return Ok(());
        }
        let jobs = self.inner.store.jobs_of_run(run_id).await?;
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
        let basis = self.inner.store.report_basis().await?;
        let report = self.report_as(run_id, Some(state)).await?;
        let results = results_for_later_runs(&report);
        let alerts = self.finished_run_alerts(&report);
        let (exit_code, cells_done) = (report.exit_code, report.cells.len() as u32);
        let json = tokio::task::spawn_blocking(move || report_to_json(&report))
            .await
            .map_err(|err| crate::CoordinatorError::Internal(format!("report to JSON: {err}")))?;
        let served = Some(ReportToStore {
            json,
            basis,
            now_ms: self.now_ms(),
        });
        self.inner
            .store
            .finish_run(
                run_id,
                crate::store::RunFinish {
                    state,
                    exit_code,
                    now_ms: self.now_ms(),
                    results,
                    report: served,
                    alerts,
                },
            )
            .await?;
        self.inner.alert_delivery.alert_queued();
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
        self.publish(finished);
        Ok(())
    }
}

/// The runs a task is finishing now (`finish_run_if_complete`), taken only here.
#[derive(Default)]
pub(super) struct FinishingRuns {
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
