//! The coordinator's state machine: runs and jobs in the store, the sessions of connected
//! agents, leases and their expiry, and progress for watchers. The gRPC services are thin
//! adapters over this type.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abfleet_core::events::JobEventPayload;
use abfleet_core::inventory::Inventory;
use abfleet_core::progress::RunProgress;
use abfleet_core::report::{self, JobState, Report, RunState};
use abfleet_core::session::{JobOffer, SessionMessage};
use abfleet_core::spec::{Fanout, JobSpec};
use abfleet_core::{AgentId, JobId, RunId};
use tokio::sync::{broadcast, mpsc};
use tracing::{info, warn};

use crate::clock::now_ms;
use crate::error::CoordinatorError;
use crate::store::{AgentRow, NewJob, RunRow, Store, StoredEvent};

/// Timing knobs of the coordinator.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// How long a job stays leased without a heartbeat from its agent.
    pub lease: Duration,
    /// How often agents are asked to heartbeat.
    pub heartbeat_interval: Duration,
    /// Attempts a job gets before it fails with "agent lost".
    pub max_attempts: u32,
    /// An agent silent for this long is listed as lost.
    pub agent_lost_after: Duration,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            lease: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(2),
            max_attempts: 3,
            agent_lost_after: Duration::from_secs(10),
        }
    }
}

/// Where a session's messages to its agent go (the agent service forwards them to the wire).
pub type SessionSender = mpsc::Sender<SessionMessage>;

struct Session {
    number: u64,
    sender: SessionSender,
    /// The agent said it is idle and has not been offered a job since.
    waiting: bool,
}

struct Inner {
    store: Store,
    config: CoordinatorConfig,
    sessions: Mutex<HashMap<AgentId, Session>>,
    next_session: std::sync::atomic::AtomicU64,
    progress: broadcast::Sender<RunProgress>,
    dispatch: tokio::sync::Mutex<()>,
}

/// A cheap handle on the coordinator's state.
#[derive(Clone)]
pub struct Fleet {
    inner: Arc<Inner>,
}

impl Fleet {
    pub fn new(store: Store, config: CoordinatorConfig) -> Fleet {
        let (progress, _) = broadcast::channel(1024);
        Fleet {
            inner: Arc::new(Inner {
                store,
                config,
                sessions: Mutex::new(HashMap::new()),
                next_session: std::sync::atomic::AtomicU64::new(1),
                progress,
                dispatch: tokio::sync::Mutex::new(()),
            }),
        }
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn config(&self) -> &CoordinatorConfig {
        &self.inner.config
    }

    fn lease_expiry(&self) -> i64 {
        now_ms() + self.inner.config.lease.as_millis() as i64
    }

    // ----- runs --------------------------------------------------------------------------

    /// Stores a run with its jobs (one, or one per matching generation or agent) and offers
    /// them to waiting agents. A spec whose targets match no known agent ends at once, saying
    /// what the fleet has.
    pub async fn submit(
        &self,
        spec: JobSpec,
        trigger: &str,
        origin: &str,
    ) -> Result<RunId, CoordinatorError> {
        let run_id = RunId::new_random();
        let (jobs, unmatched) = self.plan_jobs(&spec).await?;
        self.inner
            .store
            .insert_run(run_id, &spec, trigger, origin, jobs.clone(), now_ms())
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
                    now_ms(),
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
    async fn plan_jobs(
        &self,
        spec: &JobSpec,
    ) -> Result<(Vec<NewJob>, Option<String>), CoordinatorError> {
        let Some(targets) = &spec.targets else {
            return Ok((vec![NewJob::any()], None));
        };
        let agents = self.agents().await?;
        let mut jobs: Vec<NewJob> = Vec::new();
        for (agent, state, _) in &agents {
            if *state == "lost" {
                continue;
            }
            for generation in agent
                .inventory
                .generations
                .iter()
                .filter(|g| targets.matches(g))
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
                        pinned_agent: None,
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
        let seen: Vec<String> =
            agents
                .iter()
                .flat_map(|(agent, state, _)| {
                    agent.inventory.generations.iter().map(move |g| {
                        format!("{} on {} ({state})", g.key, agent.inventory.hostname)
                    })
                })
                .collect();
        let error = format!(
            "no agent matches the targets (backends {:?}, generations {:?}, vendors {:?}); the fleet has: {}; start an agent on such a host or widen [targets]",
            targets.backends,
            targets.generations,
            targets.vendors,
            if seen.is_empty() { "no agents with generations".to_string() } else { seen.join(", ") }
        );
        Ok((Vec::new(), Some(error)))
    }

    pub async fn cancel(&self, run_id: RunId, reason: &str) -> Result<bool, CoordinatorError> {
        let run = self.run_row(run_id).await?;
        if run.state.is_finished() {
            return Ok(false);
        }
        let leased = self
            .inner
            .store
            .cancel_run(run_id, format!("cancelled: {reason}"), now_ms())
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
        Ok(true)
    }

    async fn run_row(&self, run_id: RunId) -> Result<RunRow, CoordinatorError> {
        self.inner
            .store
            .run(run_id)
            .await?
            .ok_or_else(|| CoordinatorError::UnknownRun(run_id.to_string()))
    }

    /// The full report, with each generation compared against the previous run's toolchain.
    pub async fn report(&self, run_id: RunId) -> Result<Report, CoordinatorError> {
        let (mut report, created_ms) = self.assembled(run_id).await?;
        self.attach_previous_toolchains(&mut report, created_ms)
            .await?;
        Ok(report)
    }

    /// The report from this run's own events only (what its exit code needs), and when the
    /// run was submitted.
    async fn assembled(&self, run_id: RunId) -> Result<(Report, i64), CoordinatorError> {
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
    async fn attach_previous_toolchains(
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

    pub async fn runs(&self) -> Result<Vec<RunRow>, CoordinatorError> {
        self.inner.store.runs().await
    }

    /// The progress a new watcher sees first: where the run stands now.
    pub async fn snapshot(&self, run_id: RunId) -> Result<RunProgress, CoordinatorError> {
        let run = self.run_row(run_id).await?;
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
                None => self.assembled(run_id).await?.0.exit_code,
            });
        }
        Ok(snapshot)
    }

    pub fn subscribe(&self) -> broadcast::Receiver<RunProgress> {
        self.inner.progress.subscribe()
    }

    fn publish(&self, update: RunProgress) {
        // No watcher is fine.
        let _ = self.inner.progress.send(update);
    }

    /// Finishes a run whose jobs have all ended: stores its state and exit code.
    async fn finish_run_if_complete(&self, run_id: RunId) -> Result<(), CoordinatorError> {
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
        self.inner
            .store
            .set_run_state(run_id, state, None, now_ms())
            .await?;
        let (report, _) = self.assembled(run_id).await?;
        self.inner
            .store
            .set_run_state(run_id, state, Some(report.exit_code), now_ms())
            .await?;
        info!(run_id = %run_id, state = state.as_str(), exit_code = report.exit_code, "run finished");
        let mut finished = RunProgress::new(
            run_id,
            jobs.first().map(|j| j.job_id),
            state.as_str(),
            "finished",
        );
        finished.exit_code = Some(report.exit_code);
        finished.cells_done = report.cells.len() as u32;
        finished.cells_total = run.spec.cell_count() as u32;
        self.publish(finished);
        Ok(())
    }

    // ----- agents ------------------------------------------------------------------------

    pub async fn register(
        &self,
        agent_id: AgentId,
        inventory: &Inventory,
    ) -> Result<(), CoordinatorError> {
        self.inner
            .store
            .upsert_agent(agent_id, inventory, now_ms())
            .await?;
        info!(agent_id = %agent_id, host = %inventory.hostname, "agent registered");
        Ok(())
    }

    /// Opens a session for an agent; returns its number (to close the right one later).
    pub fn open_session(&self, agent_id: AgentId, sender: SessionSender) -> u64 {
        let number = self
            .inner
            .next_session
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut sessions = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        sessions.insert(
            agent_id,
            Session {
                number,
                sender,
                waiting: false,
            },
        );
        number
    }

    pub fn close_session(&self, agent_id: AgentId, number: u64) {
        let mut sessions = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if sessions.get(&agent_id).is_some_and(|s| s.number == number) {
            sessions.remove(&agent_id);
            info!(agent_id = %agent_id, "agent session closed");
        }
    }

    fn send(&self, agent_id: AgentId, message: SessionMessage) -> bool {
        let sessions = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match sessions.get(&agent_id) {
            Some(session) => session.sender.try_send(message).is_ok(),
            None => false,
        }
    }

    pub async fn heartbeat(
        &self,
        agent_id: AgentId,
        running: Option<(JobId, u32)>,
    ) -> Result<(), CoordinatorError> {
        self.inner.store.touch_agent(agent_id, now_ms()).await?;
        if let Some((job_id, attempt)) = running {
            let renewed = self
                .inner
                .store
                .renew_lease(job_id, agent_id, attempt, self.lease_expiry())
                .await?;
            if !renewed {
                let job = self.inner.store.job(job_id).await?;
                // A job that finished or was cancelled by this attempt is not "lost".
                let still_ours = job.as_ref().is_some_and(|j| {
                    j.attempt == attempt && j.agent_id == Some(agent_id) && j.state.is_finished()
                });
                if !still_ours {
                    warn!(agent_id = %agent_id, job_id = %job_id, attempt, "heartbeat for a lease this agent no longer holds");
                    self.send(agent_id, SessionMessage::LeaseLost { job_id, attempt });
                } else if job.is_some_and(|j| j.state == JobState::Cancelled) {
                    self.send(
                        agent_id,
                        SessionMessage::Cancel {
                            job_id,
                            reason: "the run was cancelled".into(),
                        },
                    );
                }
            }
        }
        Ok(())
    }

    /// The agent is idle. Any job still leased to it is not running anywhere (the agent
    /// restarted), so it goes back to the queue at once instead of waiting out its lease.
    pub async fn ready(&self, agent_id: AgentId) -> Result<(), CoordinatorError> {
        self.inner.store.touch_agent(agent_id, now_ms()).await?;
        for job in self.inner.store.jobs_in_state(JobState::Leased).await? {
            if job.agent_id == Some(agent_id) {
                warn!(agent_id = %agent_id, job_id = %job.job_id, "agent is idle but held a lease; requeueing");
                self.release(
                    job.job_id,
                    job.run_id,
                    format!("agent {agent_id} restarted during attempt {}", job.attempt),
                )
                .await?;
            }
        }
        {
            let mut sessions = self
                .inner
                .sessions
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if let Some(session) = sessions.get_mut(&agent_id) {
                session.waiting = true;
            }
        }
        self.dispatch().await
    }

    async fn release(
        &self,
        job_id: JobId,
        run_id: RunId,
        reason: String,
    ) -> Result<(), CoordinatorError> {
        let state = self
            .inner
            .store
            .release_job(job_id, self.inner.config.max_attempts, reason.clone())
            .await?;
        self.publish(RunProgress::new(
            run_id,
            Some(job_id),
            state.as_str(),
            &reason,
        ));
        if state.is_finished() {
            self.finish_run_if_complete(run_id).await?;
        }
        Ok(())
    }

    /// Offers queued jobs to waiting agents, oldest job first.
    async fn dispatch(&self) -> Result<(), CoordinatorError> {
        let _guard = self.inner.dispatch.lock().await;
        let queued = self.inner.store.jobs_in_state(JobState::Queued).await?;
        if queued.is_empty() {
            return Ok(());
        }
        let generations: HashMap<AgentId, Vec<String>> = self
            .inner
            .store
            .agents()
            .await?
            .into_iter()
            .map(|a| {
                (
                    a.agent_id,
                    a.inventory.generations.into_iter().map(|g| g.key).collect(),
                )
            })
            .collect();
        for job in queued {
            let waiting: Option<AgentId> = {
                let sessions = self
                    .inner
                    .sessions
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                sessions
                    .iter()
                    .filter(|(_, s)| s.waiting)
                    .map(|(id, _)| *id)
                    .filter(|id| job.pinned_agent.is_none_or(|pinned| pinned == *id))
                    .filter(|id| {
                        job.generation.as_ref().is_none_or(|key| {
                            generations.get(id).is_some_and(|keys| keys.contains(key))
                        })
                    })
                    .min()
            };
            let Some(agent_id) = waiting else {
                // Jobs wait in the queue until a matching agent is free.
                continue;
            };
            let Some(attempt) = self
                .inner
                .store
                .lease_job(job.job_id, agent_id, self.lease_expiry())
                .await?
            else {
                continue;
            };
            let run = self.run_row(job.run_id).await?;
            let next_seq = self.inner.store.event_count(job.job_id, attempt).await?;
            let offer = JobOffer {
                job_id: job.job_id,
                run_id: job.run_id,
                attempt,
                spec: run.spec,
                lease: self.inner.config.lease,
                next_seq,
                generation: job.generation.clone(),
            };
            let sent = {
                let mut sessions = self
                    .inner
                    .sessions
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                match sessions.get_mut(&agent_id) {
                    Some(session) => {
                        session.waiting = false;
                        session
                            .sender
                            .try_send(SessionMessage::Offer(Box::new(offer)))
                            .is_ok()
                    }
                    None => false,
                }
            };
            if sent {
                info!(job_id = %job.job_id, agent_id = %agent_id, attempt, "job leased");
                self.publish(RunProgress::new(
                    job.run_id,
                    Some(job.job_id),
                    "running",
                    &format!("leased to agent {agent_id}, attempt {attempt}"),
                ));
            } else {
                // The session went away between choosing and sending: the lease will
                // expire, or the agent re-sends Ready and gets it requeued.
                warn!(job_id = %job.job_id, agent_id = %agent_id, "offer could not be delivered");
            }
        }
        Ok(())
    }

    /// Stores events of a leased job; returns the acknowledged sequence numbers.
    pub async fn push_events(
        &self,
        agent_id: AgentId,
        job_id: JobId,
        attempt: u32,
        events: Vec<StoredEvent>,
    ) -> Result<Vec<u64>, CoordinatorError> {
        let job = self
            .inner
            .store
            .job(job_id)
            .await?
            .ok_or_else(|| CoordinatorError::UnknownJob(job_id.to_string()))?;
        if job.attempt != attempt || job.agent_id != Some(agent_id) || job.state == JobState::Queued
        {
            return Err(CoordinatorError::LeaseLost {
                job_id: job_id.to_string(),
                attempt,
            });
        }
        // After "done" nothing new can legitimately arrive: only re-sends are acknowledged.
        let accept_new = matches!(job.state, JobState::Leased | JobState::Cancelled);
        let outcome = self
            .inner
            .store
            .append_events(job_id, attempt, events, accept_new)
            .await?;
        let run = self.run_row(job.run_id).await?;
        let mut finished = false;
        for event in &outcome.new_events {
            match &event.payload {
                JobEventPayload::Progress {
                    phase,
                    message,
                    cells_done,
                    cells_total,
                    current_cell,
                } => {
                    let mut update = RunProgress::new(job.run_id, Some(job_id), phase, message);
                    update.cells_done = *cells_done;
                    update.cells_total = *cells_total;
                    update.current_cell = current_cell.clone().filter(|cell| !cell.is_empty());
                    self.publish(update);
                }
                JobEventPayload::Cell(cell) => {
                    let mut update = RunProgress::new(
                        job.run_id,
                        Some(job_id),
                        "timing",
                        &format!(
                            "cell {}/{} finished: {:?}",
                            cell.fixture, cell.workload, cell.parity
                        ),
                    );
                    update.cells_done = cell.index + 1;
                    update.cells_total = run.spec.cell_count() as u32;
                    self.publish(update);
                }
                JobEventPayload::Done { .. } => finished = true,
                _ => {}
            }
        }
        if finished {
            self.finish_run_if_complete(job.run_id).await?;
            self.dispatch().await?;
        }
        Ok(outcome.acked)
    }

    /// Frees every job whose lease has expired. Run by a background task.
    pub async fn reap_expired_leases(&self) -> Result<(), CoordinatorError> {
        let now = now_ms();
        let mut released = false;
        for job in self.inner.store.jobs_in_state(JobState::Leased).await? {
            if job.lease_expires_ms.is_some_and(|t| t < now) {
                let agent = job.agent_id.map(|a| a.to_string()).unwrap_or_default();
                warn!(job_id = %job.job_id, agent_id = %agent, attempt = job.attempt, "lease expired");
                self.release(
                    job.job_id,
                    job.run_id,
                    format!(
                        "agent {agent} lost: lease of attempt {} expired",
                        job.attempt
                    ),
                )
                .await?;
                released = true;
            }
        }
        if released {
            self.dispatch().await?;
        }
        Ok(())
    }

    /// Agents with their state: busy (holds a lease), lost (silent too long), idle.
    pub async fn agents(
        &self,
    ) -> Result<Vec<(AgentRow, &'static str, Option<JobId>)>, CoordinatorError> {
        let leased = self.inner.store.jobs_in_state(JobState::Leased).await?;
        let lost_before = now_ms() - self.inner.config.agent_lost_after.as_millis() as i64;
        let agents = self.inner.store.agents().await?;
        Ok(agents
            .into_iter()
            .map(|agent| {
                let running = leased
                    .iter()
                    .find(|j| j.agent_id == Some(agent.agent_id))
                    .map(|j| j.job_id);
                let state = if agent.last_heartbeat_ms < lost_before {
                    "lost"
                } else if running.is_some() {
                    "busy"
                } else {
                    "idle"
                };
                (agent, state, running)
            })
            .collect())
    }
}
