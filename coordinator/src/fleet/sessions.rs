//! Agents and their sessions: registration, the open session of each connected agent,
//! messages to it, an agent's "ready", and dispatch, which offers queued jobs to waiting
//! agents.

use std::collections::HashMap;

use abfleet_core::inventory::Inventory;
use abfleet_core::lifecycle::{AgentState, JobState};
use abfleet_core::progress::RunProgress;
use abfleet_core::session::{JobOffer, OutgoingMessage};
use abfleet_core::spec::SpecJson;
use abfleet_core::{AgentId, JobId};
use tracing::{info, warn};

use super::session_table::SessionSender;
use std::sync::Arc;

use super::session_table::SessionTable;
use super::state::Ground;
use super::FleetError;
use super::{Alerts, Finishing};
use crate::store::AgentRow;

/// How long the job of an agent whose session broke waits for that agent to come back (a
/// restarted agent process resumes its attempt) before it is requeued.
pub const RESTART_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// How often one attempt may be resumed by its restarted agent before a restart costs it.
pub const MAX_RESUMES_PER_ATTEMPT: u32 = 3;

/// The largest inventory (as JSON) an agent may register: listings carry every agent's, and
/// a client decodes at most 4 MiB per message.
pub const MAX_INVENTORY_BYTES: usize = 256 * 1024;

/// Scheduling: agents and their sessions, leases, dispatch, when agents last spoke. Owns
/// the session table and the heartbeats not yet written; ends a job through `finishing`
/// and tells `alerts` when an agent is lost.
#[derive(Clone)]
pub struct Scheduling {
    pub(super) ground: Ground,
    pub(super) finishing: Finishing,
    pub(super) alerts: Alerts,
    /// Open sessions and who waits for a job (`session_table`).
    sessions: Arc<SessionTable>,
    /// Heartbeats not yet written to the store (`heartbeats`).
    pub(super) heard: Arc<std::sync::Mutex<super::heartbeats::Heard>>,
}

impl Scheduling {
    pub(super) fn new(ground: Ground, finishing: Finishing, alerts: Alerts) -> Scheduling {
        Scheduling {
            ground,
            finishing,
            alerts,
            sessions: Default::default(),
            heard: Default::default(),
        }
    }

    /// Registers (or re-registers) an agent with its inventory; returns the inventory it
    /// registered with before, if it did (the toolchain watch compares the two:
    /// [`Fleet::register`](super::Fleet::register) does both).
    pub(super) async fn register(
        &self,
        agent_id: AgentId,
        inventory: &Inventory,
    ) -> Result<Option<Inventory>, FleetError> {
        let bytes = serde_json::to_vec(inventory).map_or(0, |json| json.len());
        if bytes > MAX_INVENTORY_BYTES {
            return Err(FleetError::InventoryTooLarge {
                agent_id,
                bytes,
                limit: MAX_INVENTORY_BYTES,
            });
        }
        let earlier = self
            .ground
            .store()
            .agents()
            .upsert(agent_id, inventory, self.ground.now_ms())
            .await?;
        self.registered(agent_id);
        info!(agent_id = %agent_id, host = %inventory.hostname, "agent registered");
        super::metrics::Counters::add(&self.ground.counters().registrations, 1);
        Ok(earlier)
    }

    /// Opens a session for an agent; returns its number (to close the right one later).
    /// Refused while another session of that id is open and has spoken within
    /// `agent_lost_after`: a second agent under a live agent's id would otherwise replace
    /// its session and, with "ready", requeue its job as if it had restarted.
    /// `certificate` is the one the session was opened with; when it is revoked the session
    /// ends and the returned receiver gets the reason.
    pub fn open_session(
        &self,
        agent_id: AgentId,
        sender: SessionSender,
        certificate: Option<abfleet_core::certs::CertificateId>,
    ) -> Result<(u64, tokio::sync::oneshot::Receiver<String>), FleetError> {
        let lost_after = self.ground.config().agent_lost_after.as_millis() as i64;
        let opened = self.sessions.open(
            agent_id,
            sender,
            certificate,
            self.ground.now_ms(),
            lost_after,
        );
        if opened.is_err() {
            warn!(agent_id = %agent_id, "refused a second session under a live agent's id");
        }
        opened
    }

    /// The agent spoke on its session.
    pub(super) fn touch_session(&self, agent_id: AgentId) {
        self.sessions.touch(agent_id, self.ground.now_ms());
    }

    /// The agent closed its session (its stream ended cleanly). Unless the agent opens another
    /// within `agent_lost_after`, the job it holds is requeued then, without waiting for its
    /// lease. (A broken session is [`Scheduling::session_broke`]; a silent network partition
    /// closes nothing, and there the lease decides.)
    pub fn close_session(&self, agent_id: AgentId, number: u64) {
        if self.remove_session(agent_id, number, None) {
            info!(agent_id = %agent_id, "agent session closed");
        }
    }

    /// The agent's session broke with an error the coordinator saw (the connection reset or
    /// ended mid-stream: what a killed agent or a rebooted host leaves). Its jobs are requeued
    /// once it stayed away [`RESTART_GRACE`] (the lease reaper), not after
    /// `agent_lost_after`: an agent restarted at once with its work intact resumes its
    /// attempt (`ready` with `resume`) instead of losing it to the first idle agent. Should
    /// it come back later, before another agent took a job, its lease is given back
    /// (`reclaim_lapsed`) and nothing is repeated. A job on its last attempt gets
    /// `agent_lost_after`: failing it for good on one broken connection would be too quick.
    pub async fn session_broke(
        &self,
        agent_id: AgentId,
        number: u64,
        why: &str,
    ) -> Result<(), FleetError> {
        if self.remove_session(agent_id, number, Some(why)) {
            warn!(agent_id = %agent_id, why, grace_s = RESTART_GRACE.as_secs_f64(), "agent session broke; its jobs are requeued unless it comes back within the grace");
        }
        Ok(())
    }

    /// The agent is stopping and hands back `attempt` of `job_id`, which it stopped with its
    /// events uploaded: the job is requeued at once, and — a planned stop being no failure —
    /// never failed for it, whatever attempts it has used. Should the same agent come back
    /// before another took the job, it reclaims the lease and the attempt goes on. A job the
    /// agent no longer holds at that attempt is left alone.
    pub async fn agent_leaving(
        &self,
        agent_id: AgentId,
        job_id: JobId,
        attempt: u32,
    ) -> Result<(), FleetError> {
        let Some(job) = self.ground.store().jobs().job(job_id).await? else {
            return Ok(());
        };
        if job.state != JobState::Leased || job.agent_id != Some(agent_id) || job.attempt != attempt
        {
            return Ok(());
        }
        info!(agent_id = %agent_id, job_id = %job_id, attempt, "the agent stopped and handed its job back; requeueing it");
        let reason = format!("agent {agent_id} stopped and handed back attempt {attempt}");
        self.release_within(job_id, job.run_id, reason, u32::MAX)
            .await?;
        self.dispatch().await?;
        Ok(())
    }

    /// Forgets the agent's session `number` if it is still the open one, and notes when it
    /// went (the reaper's `agent_lost_after` counts from then). False when a newer session
    /// replaced it.
    fn remove_session(&self, agent_id: AgentId, number: u64, broke: Option<&str>) -> bool {
        self.sessions
            .remove(agent_id, number, self.ground.now_ms(), broke)
    }

    /// Agents whose session closed at least `agent_lost_after` ago, or broke at least
    /// [`RESTART_GRACE`] ago, and who have not opened another: how long ago, and how.
    pub(super) fn gone_agents(&self) -> HashMap<AgentId, (i64, super::session_table::Gone)> {
        let closed = self.ground.config().agent_lost_after;
        self.sessions.gone(
            self.ground.now_ms(),
            closed.as_millis() as i64,
            RESTART_GRACE.min(closed).as_millis() as i64,
        )
    }

    /// Queues a message on the agent's session (never dropped for want of room). False, and
    /// logged, when the agent has no open session: it learns on its next heartbeat or ready.
    pub(super) fn send(&self, agent_id: AgentId, message: OutgoingMessage) -> bool {
        self.sessions.send(agent_id, message)
    }

    /// The agent is idle. Any job still leased to it is not running anywhere (the agent
    /// restarted), so it goes back to the queue at once instead of waiting out its lease —
    /// unless the agent names it in `resume` (it restarted with that attempt's work intact):
    /// then, while the agent still holds it or nobody else took it, the same attempt is
    /// offered back to it, with the cells already stored kept (at most
    /// [`MAX_RESUMES_PER_ATTEMPT`] times: an agent that dies on a job every time costs its
    /// attempts all the same).
    pub async fn ready(
        &self,
        agent_id: AgentId,
        resume: Option<(JobId, u32)>,
    ) -> Result<(), FleetError> {
        self.touch_session(agent_id);
        self.touch_agent(agent_id).await?;
        let resume = resume.filter(|key| self.sessions.count_resume(*key, MAX_RESUMES_PER_ATTEMPT));
        for job in self.ground.store().jobs().leased_to(agent_id).await? {
            if resume == Some((job.job_id, job.attempt)) {
                continue;
            }
            warn!(agent_id = %agent_id, job_id = %job.job_id, "agent is idle but held a lease; requeueing");
            self.release(
                job.job_id,
                job.run_id,
                format!("agent {agent_id} restarted during attempt {}", job.attempt),
            )
            .await?;
        }
        if let Some((job_id, attempt)) = resume {
            if self.resume_attempt(agent_id, job_id, attempt).await? {
                return Ok(());
            }
        }
        self.sessions.wait_for_job(agent_id);
        self.dispatch().await
    }

    /// Offers `attempt` of `job_id` back to the restarted agent that holds its work, when the
    /// agent still holds its lease or the job waits in the queue at that attempt; whether
    /// it was offered.
    async fn resume_attempt(
        &self,
        agent_id: AgentId,
        job_id: JobId,
        attempt: u32,
    ) -> Result<bool, FleetError> {
        let jobs = self.ground.store().jobs();
        let found = jobs
            .reclaim_lapsed_lease(job_id, agent_id, attempt, self.ground.lease_expiry())
            .await?;
        if !found.is_held() {
            info!(agent_id = %agent_id, job_id = %job_id, attempt, "the restarted agent's attempt is no longer its own: it takes what is queued");
            return Ok(false);
        }
        jobs.renew_lease(job_id, agent_id, attempt, self.ground.lease_expiry())
            .await?;
        let Some(job) = jobs.job(job_id).await? else {
            return Ok(false);
        };
        let offer = self.offer_for(&job, attempt, true).await?;
        if !self.sessions.offer(agent_id, offer) {
            return Ok(false);
        }
        warn!(agent_id = %agent_id, job_id = %job_id, attempt, "the agent restarted with its work intact: attempt goes on");
        self.ground.publish(RunProgress::new(
            job.run_id,
            Some(job_id),
            "running",
            &format!("agent {agent_id} restarted with its work intact: attempt {attempt} goes on"),
        ));
        Ok(true)
    }

    /// Offers queued jobs to waiting agents, oldest job first.
    pub(super) async fn dispatch(&self) -> Result<(), FleetError> {
        let _guard = self.sessions.dispatching().await;
        let queued = self
            .ground
            .store()
            .jobs()
            .in_state(JobState::Queued)
            .await?;
        if queued.is_empty() {
            return Ok(());
        }
        let agents = self.ground.store().agents().all().await?;
        // A draining agent finishes what it runs and is offered nothing new.
        let draining: Vec<AgentId> = agents
            .iter()
            .filter(|a| a.draining)
            .map(|a| a.agent_id)
            .collect();
        let generations: HashMap<AgentId, Vec<String>> = agents
            .into_iter()
            .map(|a| {
                (
                    a.agent_id,
                    a.inventory.generations.into_iter().map(|g| g.key).collect(),
                )
            })
            .collect();
        for job in queued {
            let waiting = self.sessions.longest_waiting(|id| {
                job.pinned_agent.is_none_or(|pinned| pinned == id)
                    && !draining.contains(&id)
                    && job.generation.as_ref().is_none_or(|key| {
                        generations.get(&id).is_some_and(|keys| keys.contains(key))
                    })
            });
            let Some(agent_id) = waiting else {
                // Jobs wait in the queue until a matching agent is free.
                continue;
            };
            let Some(attempt) = self
                .ground
                .store()
                .jobs()
                .lease_job(
                    job.job_id,
                    agent_id,
                    self.ground.lease_expiry(),
                    self.ground.now_ms(),
                )
                .await?
            else {
                continue;
            };
            let offer = self.offer_for(&job, attempt, false).await?;
            let sent = self.sessions.offer(agent_id, offer);
            if sent {
                super::metrics::Counters::add(&self.ground.counters().offers, 1);
            }
            if sent {
                info!(job_id = %job.job_id, agent_id = %agent_id, attempt, "job leased");
                self.ground.publish(RunProgress::new(
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

    /// The offer of `attempt` of `job`: its spec as stored, the events the attempt has
    /// stored already (the agent numbers on from there), and the cells it keeps — stored
    /// by earlier attempts, and with `resumed` by this one too.
    async fn offer_for(
        &self,
        job: &crate::store::JobRow,
        attempt: u32,
        resumed: bool,
    ) -> Result<JobOffer<SpecJson>, FleetError> {
        let store = self.ground.store();
        let spec_json = store.runs().spec_json(job.run_id).await?;
        let spec = SpecJson::stored(spec_json.ok_or_else(|| {
            crate::CoordinatorError::Corrupt(format!(
                "queued job {} names run {}, which the store does not hold (restore the data directory from a backup)",
                job.job_id, job.run_id
            ))
        })?);
        let next_seq = store.events().event_count(job.job_id, attempt).await?;
        let mut kept_cells = store.jobs().kept_cells(job.job_id, attempt).await?;
        if resumed {
            kept_cells.extend(
                store
                    .events()
                    .stored_cells(job.job_id)
                    .await?
                    .into_iter()
                    .filter(|(stored_by, _)| *stored_by == attempt)
                    .map(|(_, index)| index),
            );
        }
        Ok(JobOffer {
            job_id: job.job_id,
            run_id: job.run_id,
            attempt,
            spec,
            lease: self.ground.config().lease,
            next_seq,
            generation: job.generation.clone(),
            kept_cells,
        })
    }

    /// Drains an agent (`resume`: undoes it): a draining agent finishes the job it runs and
    /// is offered no new one. Kept in the store, so a restarted coordinator or agent stays
    /// drained. Returns the agent's state afterwards.
    pub async fn drain(&self, agent_id: AgentId, resume: bool) -> Result<AgentState, FleetError> {
        if !self
            .ground
            .store()
            .agents()
            .set_draining(agent_id, !resume)
            .await?
        {
            return Err(FleetError::UnknownAgent(agent_id));
        }
        info!(agent_id = %agent_id, resume, "agent drain changed");
        if resume {
            self.dispatch().await?;
        }
        Ok(self
            .agents()
            .await?
            .into_iter()
            .find(|(agent, _, _)| agent.agent_id == agent_id)
            .map_or(AgentState::Lost, |(_, state, _)| state))
    }

    /// Ends every open session whose certificate `why_end` gives a reason for (a
    /// revocation), sending the agent that reason; the agents whose sessions ended.
    pub(super) fn end_sessions_where(
        &self,
        why_end: impl Fn(&abfleet_core::certs::CertificateId) -> Option<String>,
    ) -> Vec<AgentId> {
        self.sessions.end_where(why_end)
    }

    /// Agents with an open session now.
    pub(super) fn connected_sessions(&self) -> usize {
        self.sessions.connected()
    }

    /// Agents with their state: busy (holds a lease), lost (silent too long), draining (busy,
    /// offered nothing once done), drained (idle, offered nothing), idle.
    pub async fn agents(&self) -> Result<Vec<(AgentRow, AgentState, Option<JobId>)>, FleetError> {
        self.agents_page(0, u32::MAX).await
    }

    /// A page of [`Scheduling::agents`]: up to `limit` from position `offset`.
    pub async fn agents_page(
        &self,
        offset: u64,
        limit: u32,
    ) -> Result<Vec<(AgentRow, AgentState, Option<JobId>)>, FleetError> {
        let leased = self
            .ground
            .store()
            .jobs()
            .in_state(JobState::Leased)
            .await?;
        let lost_before =
            self.ground.now_ms() - self.ground.config().agent_lost_after.as_millis() as i64;
        let agents = self.ground.store().agents().page(offset, limit).await?;
        Ok(agents
            .into_iter()
            .map(|mut agent| {
                if let Some(heard) = self.heard_since_written(agent.agent_id) {
                    agent.last_heartbeat_ms = agent.last_heartbeat_ms.max(heard);
                }
                let running = leased
                    .iter()
                    .find(|j| j.agent_id == Some(agent.agent_id))
                    .map(|j| j.job_id);
                let state = AgentState::of(
                    agent.last_heartbeat_ms < lost_before,
                    agent.draining,
                    running.is_some(),
                );
                (agent, state, running)
            })
            .collect())
    }
}
