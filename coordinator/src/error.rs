//! The coordinator's errors, and the one place they become gRPC statuses.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    #[error("failed to create the data directory `{path}`: {source}; pick a writable --data-dir")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to open the store `{path}`: {source}; is another coordinator using this --data-dir?")]
    OpenStore {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("the store `{path}` is at schema version {found}, but this abfleet knows versions up to {known}; upgrade abfleet to open this --data-dir")]
    StoreTooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("the store `{path}` has no schema version and its tables match no schema abfleet shipped: {detail}; point --data-dir at an abfleet data directory or an empty one")]
    StoreUnknownSchema { path: PathBuf, detail: String },
    #[error("failed to migrate the store `{path}` from schema version {from} to {to}: {source}; it was left at version {from}; check that no other coordinator uses this --data-dir and that the disk is writable, then start again")]
    MigrateStore {
        path: PathBuf,
        from: i64,
        to: i64,
        source: rusqlite::Error,
    },
    #[error("store error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the store holds something it cannot read: {0}; the data directory may be from a newer abfleet")]
    Corrupt(String),
    #[error("run {0} does not exist; list runs with `abfleet runs`")]
    UnknownRun(String),
    #[error("job {0} does not exist")]
    UnknownJob(String),
    #[error("agent {0} has not registered; call Register first")]
    UnknownAgent(String),
    #[error("the job spec is not valid: {0}")]
    BadSpec(String),
    #[error("job {job_id} attempt {attempt} is no longer leased to this agent; drop it")]
    LeaseLost { job_id: String, attempt: u32 },
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<CoordinatorError> for tonic::Status {
    fn from(err: CoordinatorError) -> Self {
        use tonic::Status;
        let message = err.to_string();
        match err {
            CoordinatorError::UnknownRun(_) | CoordinatorError::UnknownJob(_) => {
                Status::not_found(message)
            }
            CoordinatorError::UnknownAgent(_) | CoordinatorError::LeaseLost { .. } => {
                Status::failed_precondition(message)
            }
            CoordinatorError::BadSpec(_) => Status::invalid_argument(message),
            CoordinatorError::DataDir { .. }
            | CoordinatorError::OpenStore { .. }
            | CoordinatorError::StoreTooNew { .. }
            | CoordinatorError::StoreUnknownSchema { .. }
            | CoordinatorError::MigrateStore { .. }
            | CoordinatorError::Sqlite(_)
            | CoordinatorError::Corrupt(_)
            | CoordinatorError::Internal(_) => Status::internal(message),
        }
    }
}
