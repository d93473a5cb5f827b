//! Events an attempt lost between the agent and the store (issue 23: a restore while agents
//! work lost cells silently). The agent deletes an event once the coordinator acknowledged
//! it; a store restored from a backup taken before that acknowledgement lacks it for good.
//! Intake never stores past such a gap (`EventRecords::append_batch` refuses the batch and the
//! agent service asks the agent for the missing events); when the agent answers that it no
//! longer holds them, [`Intake::events_lost`] ends the attempt for good and queues the job
//! again: the next attempt keeps every cell the store has and measures the others, and the
//! report's attempt history says why.

use abfleet_core::lifecycle::JobState;
use abfleet_core::{AgentId, JobId};
use tracing::error;

use super::{FleetError, Intake};

impl Intake {
    /// `agent_id` no longer holds the events of `attempt` below `lost_before` that the store
    /// lacks. `Ok` when the store lacks none of them (the batch is stored as usual);
    /// otherwise the attempt ends, the job is queued again (or fails, out of attempts) and
    /// the error tells the agent to drop the attempt.
    pub async fn events_lost(
        &self,
        agent_id: AgentId,
        job_id: JobId,
        attempt: u32,
        lost_before: u64,
    ) -> Result<(), FleetError> {
        let job = self.ground.job_row(job_id).await?;
        if job.attempt != attempt || job.agent_id != Some(agent_id) {
            return Err(FleetError::LeaseLost { job_id, attempt });
        }
        let first = self
            .ground
            .store()
            .events()
            .next_event_seq(job_id, attempt)
            .await?;
        if first >= lost_before || job.state.is_finished() {
            return Ok(());
        }
        let last = lost_before - 1;
        let reason = format!(
            "events {first}..={last} of attempt {attempt} were lost: the coordinator acknowledged them before its store was restored from an older copy, and agent {agent_id} no longer held them; the attempt was ended and the job queued again, keeping the cells stored"
        );
        error!(agent_id = %agent_id, job_id = %job_id, attempt, first, last, "{reason}");
        self.forget_job(job_id);
        let state = self
            .ground
            .store()
            .jobs()
            .end_attempt_for_good(job_id, self.ground.config().max_attempts, reason.clone())
            .await?;
        self.ground
            .publish(abfleet_core::progress::RunProgress::new(
                job.run_id,
                Some(job_id),
                state.as_str(),
                &reason,
            ));
        if state.is_finished() {
            self.finishing.finish_run_if_complete(job.run_id).await?;
        } else {
            self.scheduling.dispatch().await?;
        }
        Err(FleetError::AttemptRedone {
            job_id,
            attempt,
            first,
            last,
            state: if state == JobState::Queued {
                "queued again"
            } else {
                "failed (out of attempts)"
            },
        })
    }
}
