//! What the coordinator and a connected agent tell each other on its session: a job offered
//! under a lease, a job cancelled, a lease lost; a heartbeat, ready, leaving. The
//! coordinator's state machine and the agent speak these; `proto` converts them to and from
//! the wire.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::spec::{JobSpec, SpecJson};
use crate::{JobId, RunId};

/// A job leased to an agent for one attempt. The agent reads it with the spec decoded
/// (`JobOffer`); the coordinator sends it with the spec as its store kept it
/// (`JobOffer<SpecJson>`), so an offer parses and serialises no spec.
#[derive(Debug, Clone, PartialEq)]
pub struct JobOffer<Spec = JobSpec> {
    pub job_id: JobId,
    pub run_id: RunId,
    pub attempt: u32,
    /// The validated, path-resolved spec of the job's run.
    pub spec: Spec,
    /// How long the lease lasts without a heartbeat.
    pub lease: Duration,
    /// Events of this attempt the coordinator already holds (the agent resumes after them).
    pub next_seq: u64,
    /// The generation key the job measures; `None` when the spec names no targets.
    pub generation: Option<String>,
    /// Indexes of the job's A/B cells that earlier attempts stored: kept, not measured
    /// again. Empty on a first attempt.
    pub kept_cells: BTreeSet<u32>,
}

/// One message from the coordinator to an agent (the spec of an offer as [`JobOffer`]'s).
#[derive(Debug, Clone, PartialEq)]
pub enum SessionMessage<Spec = JobSpec> {
    Offer(Box<JobOffer<Spec>>),
    /// Stop this job: its run was cancelled.
    Cancel {
        job_id: JobId,
        reason: String,
    },
    /// This agent no longer holds the job at this attempt; drop it.
    LeaseLost {
        job_id: JobId,
        attempt: u32,
    },
}

/// One message from an agent to the coordinator on its session.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentMessage {
    /// Every heartbeat interval: the job it runs at which attempt (renewing that lease), and
    /// its cache as its last eviction pass measured it.
    Heartbeat {
        running: Option<(JobId, u32)>,
        cache: AgentCacheUsage,
    },
    /// It is idle and would take a job; `resume`: it restarted holding the work of this
    /// attempt of this job, and would go on with it.
    Ready { resume: Option<(JobId, u32)> },
    /// It is stopping and hands back this attempt of this job, stopped, its events uploaded.
    Leaving { job_id: JobId, attempt: u32 },
}

/// An agent's cache (builds, git mirrors, fixtures) as it reported it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentCacheUsage {
    /// Bytes, as the agent measured at its last eviction pass; `None`: not measured.
    pub bytes: Option<u64>,
    /// Its `max_cache_bytes`; `None`: no budget.
    pub max_bytes: Option<u64>,
}

/// What the coordinator sends: offers with the spec as its store kept it.
pub type OutgoingMessage = SessionMessage<SpecJson>;
