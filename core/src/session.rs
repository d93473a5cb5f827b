//! What the coordinator tells a connected agent on its session: a job offered under a lease,
//! a job cancelled, a lease lost. The coordinator's state machine speaks these; `proto`
//! converts them to and from the wire.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::spec::JobSpec;
use crate::{JobId, RunId};

/// A job leased to an agent for one attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct JobOffer {
    pub job_id: JobId,
    pub run_id: RunId,
    pub attempt: u32,
    /// The validated, path-resolved spec of the job's run.
    pub spec: JobSpec,
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

/// One message from the coordinator to an agent.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionMessage {
    Offer(Box<JobOffer>),
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
