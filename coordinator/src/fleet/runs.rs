//! Runs and their jobs: submitting (planning the jobs a spec fans out to), cancelling and
//! listing. A run whose jobs have all ended is finished by `finishing`.

use abfleet_core::lifecycle::AgentState;
use abfleet_core::progress::RunProgress;
use abfleet_core::session::SessionMessage;
use abfleet_core::spec::{Fanout, JobSpec};
use abfleet_core::{JobId, RunId};
use tracing::{info, warn};

use super::state::Ground;
use super::FleetError;
use super::{Reports, Scheduling};
use crate::store::{NewJob, RunCursor, RunListing, RunOrder, RunRow};

/// Runs: submitted (planned into jobs, offered through `scheduling`), cancelled, listed.
#[derive(Clone)]
pub struct Runs {
    pub(super) ground: Ground,
    pub(super) scheduling: Scheduling,
    pub(super) reports: Reports,
}

impl Runs {
    pub(super) fn new(ground: Ground, scheduling: Scheduling, reports: Reports) -> Runs {
        Runs {
            ground,
            scheduling,
            reports,
        }
    }

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

    /// [`Runs::submit`] with what the trigger said about itself (kept as `runs.trigger_note`,
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

    /// [`Runs::submit_noted`] on the generations of one hardware identity only, each job
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
        self.ground
            .store()
            .runs()
            .insert_noted(
                run_id,
                &spec,
                trigger,
                trigger_note,
                origin,
                jobs.clone(),
                self.ground.now_ms(),
            )
            .await?;
        info!(run_id = %run_id, jobs = jobs.len(), name = %spec.name, trigger, "run submitted");
        if let Some(error) = unmatched {
            warn!(run_id = %run_id, %error, "no agent matches the run's targets");
            self.ground
                .store()
                .runs()
                .fail(
                    run_id,
                    error.clone(),
                    abfleet_core::exit::NOT_CARRIED_OUT,
                    self.ground.now_ms(),
                )
                .await?;
            let mut finished = RunProgress::new(run_id, None, "failed", &error);
            finished.exit_code = Some(abfleet_core::exit::NOT_CARRIED_OUT);
            self.ground.publish(finished);
            return Ok(run_id);
        }
        for job in &jobs {
            self.ground.publish(RunProgress::new(
                run_id,
                Some(job.job_id),
                "queued",
                &format!(
                    "waiting for an agent ({})",
                    job.generation.as_deref().unwrap_or("any")
                ),
            ));
        }
        self.scheduling.dispatch().await?;
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
        let agents = self.scheduling.agents().await?;
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
        let run = self.ground.run_row(run_id).await?;
        if run.state.is_finished() {
            return Ok(false);
        }
        let leased = self
            .ground
            .store()
            .runs()
            .cancel(run_id, format!("cancelled: {reason}"), self.ground.now_ms())
            .await?;
        for job in leased {
            if let Some(agent_id) = job.agent_id {
                self.scheduling.send(
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
        self.ground.publish(finished);
        // The run is cancelled whatever happens here: unrecorded, it is recorded when a later
        // report first needs it.
        if let Err(err) = self.reports.record_results_of(run_id).await {
            warn!(run_id = %run_id, error = %err, "failed to record what the cancelled run leaves for later runs");
        }
        Ok(true)
    }

    pub async fn all(&self) -> Result<Vec<RunRow>, FleetError> {
        Ok(self.ground.store().runs().all().await?)
    }

    /// Up to `limit` runs in `order` after `cursor`: the run list, without reading specs.
    pub async fn run_listing(
        &self,
        order: RunOrder,
        cursor: Option<RunCursor>,
        limit: u32,
    ) -> Result<Vec<RunListing>, FleetError> {
        Ok(self
            .ground
            .store()
            .runs()
            .run_listing(order, cursor, limit)
            .await?)
    }

    /// The validated spec a run was submitted with, as the JSON stored with it.
    pub async fn run_spec_json(&self, run_id: RunId) -> Result<String, FleetError> {
        self.ground
            .store()
            .runs()
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
            .ground
            .store()
            .runs()
            .page_newest_first(offset, limit)
            .await?)
    }

    /// One run's row.
    pub async fn run(&self, run_id: RunId) -> Result<RunRow, FleetError> {
        self.ground.run_row(run_id).await
    }
}
