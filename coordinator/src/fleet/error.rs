//! What can go wrong in the state machine: a run or job that does not exist, a lease the
//! caller no longer holds, an agent that did not register, or the store underneath. The services map it to gRPC codes in
//! `crate::error`, the one place errors become statuses.

use abfleet_core::{AgentId, JobId, RunId};

use crate::error::CoordinatorError;

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// A run for a pull request that cannot be answered: no `[github]`, a malformed
    /// reference, or GitHub could not tell its head commit.
    #[error("{0}")]
    PullRequest(String),
    /// GitHub refused or did not answer a post (retried by the poster).
    #[error("GitHub: {0}")]
    GitHub(String),
    #[error("run {0} does not exist; list runs with `abfleet runs`")]
    UnknownRun(RunId),
    #[error("job {0} does not exist")]
    UnknownJob(JobId),
    #[error("agent {0} has never registered; list agents with `abfleet agents`")]
    UnknownAgent(AgentId),
    #[error("job {job_id} attempt {attempt} is no longer leased to this agent; drop it")]
    LeaseLost { job_id: JobId, attempt: u32 },
    /// An event the coordinator will not store: its sequence number or cell index is out of
    /// range. Nothing of its batch is stored or acknowledged.
    #[error("event {seq} of job {job_id} attempt {attempt} is refused: {reason}")]
    InvalidEvent {
        job_id: JobId,
        attempt: u32,
        seq: u64,
        reason: String,
    },
    /// A batch that starts after a gap in the attempt's sequence numbers: the store lacks
    /// events `first..=last` (it was restored from a backup taken before they were
    /// acknowledged). Nothing of the batch is stored; the agent service asks the agent for
    /// them (`PushEventsResponse.missing`).
    #[error("job {job_id} attempt {attempt}: the coordinator lacks events {first}..={last} of this attempt (its store was restored from an older copy?); send them first")]
    MissingEvents {
        job_id: JobId,
        attempt: u32,
        first: u64,
        last: u64,
    },
    /// The agent no longer holds events the coordinator lacks: the attempt ended and the job
    /// was queued again (or failed, out of attempts), keeping the cells stored.
    #[error("job {job_id} attempt {attempt}: events {first}..={last} are lost (acknowledged by this coordinator before its store was restored from an older copy, and no longer held by the agent); the attempt ended and the job is {state}, keeping the cells it stored: drop the attempt")]
    AttemptRedone {
        job_id: JobId,
        attempt: u32,
        first: u64,
        last: u64,
        state: &'static str,
    },
    /// Events or a heartbeat for a lease that another agent holds.
    #[error("job {job_id} attempt {attempt} is leased to another agent, not to {agent_id}; an agent reports only on its own lease")]
    NotLeaseHolder {
        job_id: JobId,
        attempt: u32,
        agent_id: AgentId,
    },
    /// A registration or session under an agent id whose session is open and alive.
    #[error("agent {0} is already connected with a live session; each agent needs its own work dir, where its id is kept (`agent-id`): a copied work dir shares the id (a restarted agent is let in once its old session closes or falls silent)")]
    AgentConnected(AgentId),
    /// A registration whose inventory is larger than the coordinator keeps.
    #[error("the inventory of agent {agent_id} is {bytes} bytes as JSON, over the limit of {limit} bytes; trim its generations or hardware description")]
    InventoryTooLarge {
        agent_id: AgentId,
        bytes: usize,
        limit: usize,
    },
    /// A job that sent more events than the coordinator keeps for one job; it has failed.
    #[error("job {job_id} sent more than {limit} events, the most the coordinator keeps for one job; the job has failed (split a spec with that many cells into several runs)")]
    TooManyEvents { job_id: JobId, limit: u64 },
    /// A call under an agent id that belongs to another certificate.
    #[error("agent id {agent_id} belongs to the certificate `{bound}`, not to `{presented}`; each agent has its own certificate and work dir")]
    CertificateMismatch {
        agent_id: AgentId,
        bound: String,
        presented: String,
    },
    /// A registration under a new agent id from a certificate that brought too many lately.
    #[error("certificate `{cert_name}` already registered {ids} agent ids within the last hour, the most one certificate may (`max_agent_ids_per_certificate` = {most}); an agent keeps its id in its work dir (`agent-id`): give each host its own certificate and keep its work dir")]
    TooManyAgentIds {
        cert_name: String,
        ids: usize,
        most: u32,
    },
    /// A call made with a certificate on the deny list (`abfleet certs revoke`).
    #[error("{0}")]
    Revoked(String),
    /// `abfleet certs revoke` named nothing it can revoke.
    #[error("{0}")]
    BadRevocation(String),
    /// A session, heartbeat, "ready" or event batch from an agent id the store does not know
    /// (it never registered, or the coordinator's data dir was replaced under it).
    #[error("agent {0} has not registered with this coordinator: register first (an agent registers before it opens a session or reports; the abfleet agent registers again when it reconnects)")]
    NotRegistered(AgentId),
    /// A trigger without a spec on a coordinator started without `--milestone-spec`.
    #[error("this coordinator has no milestone spec; start it with `--milestone-spec PATH` (or `milestone_spec` in its config file), or name the spec: `abfleet trigger --reason R SPEC.toml`")]
    NoMilestoneSpec,
    /// The milestone spec file could not be read or is not a valid spec.
    #[error("the milestone spec `{path}` cannot be used: {reason}; fix the file (check it with `abfleet local {path}`)")]
    MilestoneSpec { path: String, reason: String },
    #[error(transparent)]
    Store(#[from] CoordinatorError),
}
