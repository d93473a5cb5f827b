//! What intake keeps of each job still taking events, so a batch is one trip to the store:
//! the facts read once (its spec and cell count) and the events stored so far. One lock,
//! taken only here; a job is forgotten whole when it finishes, fails over its event limit or
//! has its attempt redone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use abfleet_core::spec::JobSpec;
use abfleet_core::JobId;

/// What intake keeps of a job while it takes events: facts that never change.
#[derive(Debug, Clone)]
pub(super) struct JobFacts {
    /// The cell count of the job's run's spec (cell indexes are below it).
    pub(super) cell_count: usize,
    /// The run's spec, which each cell is checked against (`core::cell_audit`).
    pub(super) spec: Arc<JobSpec>,
}

#[derive(Default)]
struct Kept {
    facts: Option<JobFacts>,
    /// Events the store holds for the job, all attempts together.
    events_stored: Option<u64>,
}

#[derive(Default)]
pub(super) struct IntakeMemory {
    jobs: Mutex<HashMap<JobId, Kept>>,
}

impl IntakeMemory {
    fn jobs(&self) -> MutexGuard<'_, HashMap<JobId, Kept>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn facts(&self, job_id: JobId) -> Option<JobFacts> {
        self.jobs().get(&job_id)?.facts.clone()
    }

    pub(super) fn keep_facts(&self, job_id: JobId, facts: JobFacts) {
        self.jobs().entry(job_id).or_default().facts = Some(facts);
    }

    pub(super) fn events_stored(&self, job_id: JobId) -> Option<u64> {
        self.jobs().get(&job_id)?.events_stored
    }

    pub(super) fn keep_events_stored(&self, job_id: JobId, count: u64) {
        self.jobs().entry(job_id).or_default().events_stored = Some(count);
    }

    pub(super) fn forget(&self, job_id: JobId) {
        self.jobs().remove(&job_id);
    }
}
