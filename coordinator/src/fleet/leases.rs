//! Leases: renewed by heartbeats, released when they expire, when their agent's session
//! closed and it stayed away `agent_lost_after`, or when it comes back idle, and the job
//! requeued until it has used up its attempts. A lease that lapsed while its
//! agent was cut off is given back to that agent when it returns, if no other agent took the
//! job meanwhile: the attempt goes on and what it measured while away is accepted.

use abfleet_core::lifecycle::JobState;
use abfleet_core::progress::RunProgress;
use abfleet_core::session::SessionMessage;
use abfleet_core::{AgentId, JobId, RunId};
use tracing::warn;

use super::FleetError;
use super::Scheduling;
use crate::store::LapsedLease;

impl Scheduling {
    /// The agent is alive and, with `running`, still measures that attempt: its lease is
    /// renewed (or given back, when it lapsed and nobody took the job), else the agent hears
    /// its lease is lost or its run cancelled. Another agent's lease is refused, untouched.
    pub async fn heartbeat(
        &self,
        agent_id: AgentId,
        running: Option<(JobId, u32)>,
    ) -> Result<(), FleetError> {
        self.touch_session(agent_id);
        self.touch_agent(agent_id).await?;
        let Some((job_id, attempt)) = running else {
            return Ok(());
        };
        // The common case first: one conditional write, no read (it renews only this agent's
        // own lease of this attempt, so it never disturbs another agent's).
        let renewed = self
            .ground
            .store()
            .jobs()
            .renew_lease(job_id, agent_id, attempt, self.ground.lease_expiry())
            .await?;
        if renewed {
            return Ok(());
        }
        let job = self.ground.store().jobs().job(job_id).await?;
        if job.as_ref().is_some_and(|j| {
            j.attempt == attempt
                && j.state == JobState::Leased
                && j.agent_id.is_some_and(|holder| holder != agent_id)
        }) {
            warn!(agent_id = %agent_id, job_id = %job_id, attempt, "heartbeat names another agent's lease");
            return Err(FleetError::NotLeaseHolder {
                job_id,
                attempt,
                agent_id,
            });
        }
        if self.reclaim_lapsed(job_id, agent_id, attempt).await? {
            return Ok(());
        }
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
        Ok(())
    }

    /// Gives a lapsed lease back to the agent that held it, when its job was requeued and no
    /// other agent has taken it since (`true` then): the agent was cut off longer than the
    /// lease but kept measuring, and its spooled events still belong to a live attempt.
    /// Also `true` when another call of the same agent gave the lease back a moment earlier:
    /// after a reconnect its heartbeat and its upload both find the job queued, and the one
    /// that comes second must not be told the lease is lost (that would drop the attempt the
    /// first call just kept).
    pub(super) async fn reclaim_lapsed(
        &self,
        job_id: JobId,
        agent_id: AgentId,
        attempt: u32,
    ) -> Result<bool, FleetError> {
        let found = self
            .ground
            .store()
            .jobs()
            .reclaim_lapsed_lease(job_id, agent_id, attempt, self.ground.lease_expiry())
            .await?;
        if found == LapsedLease::GivenBack {
            warn!(agent_id = %agent_id, job_id = %job_id, attempt, "the agent came back after its lease lapsed and nobody took the job: the attempt goes on");
            if let Some(job) = self.ground.store().jobs().job(job_id).await? {
                self.ground.publish(RunProgress::new(
                    job.run_id,
                    Some(job_id),
                    "running",
                    &format!("agent {agent_id} came back: attempt {attempt} goes on"),
                ));
            }
        }
        Ok(found.is_held())
    }

    /// Puts a leased job back in the queue, or fails it when it used `max_attempts`; says so
    /// to the run's watchers.
    pub(super) async fn release(
        &self,
        job_id: JobId,
        run_id: RunId,
        reason: String,
    ) -> Result<(), FleetError> {
        self.release_within(job_id, run_id, reason, self.ground.config().max_attempts)
            .await
    }

    /// [`Scheduling::release`] against `max_attempts` (`u32::MAX`: a release that never fails
    /// the job, as a planned stop's).
    pub(super) async fn release_within(
        &self,
        job_id: JobId,
        run_id: RunId,
        reason: String,
        max_attempts: u32,
    ) -> Result<(), FleetError> {
        let state = self
            .ground
            .store()
            .jobs()
            .release_job(job_id, max_attempts, reason.clone())
            .await?;
        self.ground.publish(RunProgress::new(
            run_id,
            Some(job_id),
            state.as_str(),
            &reason,
        ));
        if state.is_finished() {
            self.finishing.finish_run_if_complete(run_id).await?;
        }
        Ok(())
    }

    /// Releases a job whose agent is lost (`reason` says how): counted, alerted
    /// (`[notify]`'s `agent_lost`) and requeued or failed as its attempts allow. The lease
    /// reaper and a broken session both lose agents this one way.
    pub(super) async fn release_lost(
        &self,
        job: &crate::store::JobRow,
        reason: String,
    ) -> Result<(), FleetError> {
        super::metrics::Counters::add(&self.ground.counters().lease_expiries, 1);
        self.alerts
            .alert_agent_lost(job.run_id, job.job_id, job.attempt, &reason)
            .await;
        self.release(job.job_id, job.run_id, reason).await
    }

    /// Ends a leased job as failed, whatever attempts it has left.
    pub(super) async fn fail_job(
        &self,
        job_id: JobId,
        run_id: RunId,
        reason: String,
    ) -> Result<(), FleetError> {
        let state = self
            .ground
            .store()
            .jobs()
            .release_job(job_id, 0, reason.clone())
            .await?;
        self.ground.publish(RunProgress::new(
            run_id,
            Some(job_id),
            state.as_str(),
            &reason,
        ));
        self.finishing.finish_run_if_complete(run_id).await?;
        Ok(())
    }

    /// Frees every job whose lease has expired, or whose agent's session closed
    /// `agent_lost_after` ago without the agent coming back. Run by a background task.
    pub async fn reap_expired_leases(&self) -> Result<(), FleetError> {
        let now = self.ground.now_ms();
        let gone = self.gone_agents();
        let mut released = false;
        for job in self
            .ground
            .store()
            .jobs()
            .in_state(JobState::Leased)
            .await?
        {
            let agent = job.agent_id.map(|a| a.to_string()).unwrap_or_default();
            let reason = if job.lease_expires_ms.is_some_and(|t| t < now) {
                warn!(job_id = %job.job_id, agent_id = %agent, attempt = job.attempt, "lease expired");
                format!(
                    "agent {agent} lost: lease of attempt {} expired",
                    job.attempt
                )
            } else if let Some((away_ms, how)) = job.agent_id.and_then(|a| gone.get(&a)) {
                let away_ms = *away_ms;
                match &how.broke {
                    // The last attempt is failed by `agent_lost_after` alone.
                    Some(_)
                        if job.attempt >= self.ground.config().max_attempts
                            && away_ms
                                < self.ground.config().agent_lost_after.as_millis() as i64 =>
                    {
                        continue
                    }
                    Some(why) => {
                        warn!(job_id = %job.job_id, agent_id = %agent, attempt = job.attempt, away_ms, "the agent's session broke and it did not come back");
                        format!(
                            "agent {agent} lost: its session broke ({why}) and it did not come back within {:.0} s (attempt {})",
                            super::sessions::RESTART_GRACE.as_secs_f64(),
                            job.attempt
                        )
                    }
                    None => {
                        warn!(job_id = %job.job_id, agent_id = %agent, attempt = job.attempt, away_ms, "the agent's session closed and it did not come back");
                        format!(
                            "agent {agent} lost: its session closed {:.1} s ago and it did not reconnect (attempt {})",
                            away_ms as f64 / 1000.0,
                            job.attempt
                        )
                    }
                }
            } else {
                continue;
            };
            self.release_lost(&job, reason).await?;
            released = true;
        }
        if released {
            self.dispatch().await?;
        }
        Ok(())
    }
}
