//! What can go wrong in the state machine: a run or job that does not exist, a lease the
//! caller no longer holds, or the store underneath. The services map it to gRPC codes in
//! `crate::error`, the one place errors become statuses.

use abfleet_core::{JobId, RunId};

use crate::error::CoordinatorError;

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("run {0} does not exist; list runs with `abfleet runs`")]
    UnknownRun(RunId),
    #[error("job {0} does not exist")]
    UnknownJob(JobId),
    #[error("job {job_id} attempt {attempt} is no longer leased to this agent; drop it")]
    LeaseLost { job_id: JobId, attempt: u32 },
    #[error(transparent)]
    Store(#[from] CoordinatorError),
}
