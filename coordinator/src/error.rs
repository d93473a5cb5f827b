//! The coordinator's errors (the store's here, the state machine's in
//! [`FleetError`]), and the one place they become gRPC statuses.

use std::path::PathBuf;

use crate::fleet::FleetError;

#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    #[error("failed to create the data directory `{path}`: {source}; pick a writable --data-dir")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to open the store `{path}`: {source}; {}", open_store_hint(.source))]
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
    #[error("`{path}` holds no abfleet store: {why}; --data-dir names a coordinator's data directory (the one with abfleet.sqlite3)")]
    NoStore { path: PathBuf, why: String },
    #[error("the store `{path}` is at schema version {found}; this abfleet reads version {known} and does not migrate a store it only reads: start `abfleet coordinator --data-dir` on it (on a copy, for a backup) to migrate it, or read it with the abfleet that wrote it")]
    StoreNotCurrent {
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
    Sqlite(rusqlite::Error),
    #[error("the store holds something it cannot read: {0}; the data directory may be from a newer abfleet")]
    Corrupt(String),
    #[error("job {job_id} attempt {attempt} is no longer leased to this agent; drop it")]
    LeaseLost { job_id: String, attempt: u32 },
    /// A cell event (a new sequence number) for a cell index the attempt already stored.
    #[error("event {seq} of job {job_id} attempt {attempt} is refused: cell {index} was already reported by event {first_seq} of this attempt; an attempt measures each cell once")]
    RepeatedCell {
        job_id: String,
        attempt: u32,
        seq: u64,
        index: u32,
        first_seq: u64,
    },
    /// A batch that starts past the attempt's next expected sequence number: the store lacks
    /// events `first..=last`, which it once acknowledged (it was restored from a backup).
    #[error("job {job_id} attempt {attempt}: the store lacks events {first}..={last}, sent before this batch")]
    SequenceGap {
        job_id: String,
        attempt: u32,
        first: u64,
        last: u64,
    },
    /// The coordinator cannot start as configured (TLS files, a plaintext listener off
    /// loopback); the message says what to change.
    #[error("{0}")]
    Config(String),
    #[error("internal error: {0}")]
    Internal(String),
}

/// A value the store holds but its column type does not read back (an id that is no uuid, a
/// state no abfleet names) is corruption, said as such; every other SQLite error is one.
impl From<rusqlite::Error> for CoordinatorError {
    fn from(err: rusqlite::Error) -> Self {
        match err {
            rusqlite::Error::FromSqlConversionFailure(_, _, cause) => {
                CoordinatorError::Corrupt(cause.to_string())
            }
            err => CoordinatorError::Sqlite(err),
        }
    }
}

impl From<CoordinatorError> for tonic::Status {
    fn from(err: CoordinatorError) -> Self {
        use tonic::Status;
        let message = err.to_string();
        match err {
            CoordinatorError::LeaseLost { .. } => Status::failed_precondition(message),
            CoordinatorError::RepeatedCell { .. } => Status::invalid_argument(message),
            // Intake turns a gap into a request for the missing events; one reaching a
            // client as an error is the same precondition.
            CoordinatorError::SequenceGap { .. } => Status::failed_precondition(message),
            CoordinatorError::DataDir { .. }
            | CoordinatorError::OpenStore { .. }
            | CoordinatorError::StoreTooNew { .. }
            | CoordinatorError::NoStore { .. }
            | CoordinatorError::StoreNotCurrent { .. }
            | CoordinatorError::StoreUnknownSchema { .. }
            | CoordinatorError::MigrateStore { .. }
            | CoordinatorError::Sqlite(_)
            | CoordinatorError::Corrupt(_)
            | CoordinatorError::Config(_)
            | CoordinatorError::Internal(_) => Status::internal(message),
        }
    }
}

impl From<FleetError> for tonic::Status {
    fn from(err: FleetError) -> Self {
        use tonic::Status;
        match err {
            FleetError::UnknownRun(_) | FleetError::UnknownJob(_) | FleetError::UnknownAgent(_) => {
                Status::not_found(err.to_string())
            }
            FleetError::LeaseLost { .. }
            | FleetError::MissingEvents { .. }
            | FleetError::AttemptRedone { .. } => Status::failed_precondition(err.to_string()),
            FleetError::InvalidEvent { .. } | FleetError::InventoryTooLarge { .. } => {
                Status::invalid_argument(err.to_string())
            }
            FleetError::NotLeaseHolder { .. } | FleetError::CertificateMismatch { .. } => {
                Status::permission_denied(err.to_string())
            }
            FleetError::NotRegistered(_) | FleetError::TooManyEvents { .. } => {
                Status::failed_precondition(err.to_string())
            }
            FleetError::AgentConnected(_) => Status::already_exists(err.to_string()),
            FleetError::TooManyAgentIds { .. } => Status::resource_exhausted(err.to_string()),
            FleetError::Revoked(_) => Status::unauthenticated(err.to_string()),
            FleetError::BadRevocation(_) => Status::invalid_argument(err.to_string()),
            FleetError::NoMilestoneSpec | FleetError::MilestoneSpec { .. } => {
                Status::failed_precondition(err.to_string())
            }
            FleetError::PullRequest(_) => Status::failed_precondition(err.to_string()),
            FleetError::GitHub(_) => Status::unavailable(err.to_string()),
            FleetError::Store(inner) => inner.into(),
        }
    }
}

/// What to do when the store does not open, by what SQLite said: a lock is another
/// coordinator, an I/O error or a full database is most often a disk with no space left
/// (SQLite must grow its shared-memory and write-ahead-log files to open).
fn open_store_hint(source: &rusqlite::Error) -> &'static str {
    use rusqlite::ErrorCode;
    match source.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            "is another coordinator using this --data-dir?"
        }
        Some(ErrorCode::DiskFull | ErrorCode::SystemIoFailure) => {
            "check that the disk holding the --data-dir has free space (`df -h DIR`: the store needs room to grow its write-ahead log) and is writable, then start again"
        }
        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied) => {
            "check that this user may write the --data-dir and every file in it"
        }
        _ => "check that no other coordinator uses this --data-dir and that its disk has free space and is writable",
    }
}

#[cfg(test)]
mod tests {
    use abfleet_core::{AgentId, JobId, RunId};
    use tonic::Code;

    use super::*;

    #[test]
    fn each_error_becomes_the_grpc_code_a_client_can_act_on() {
        let job_id = JobId::new_random();
        let cases = [
            (FleetError::UnknownRun(RunId::new_random()), Code::NotFound),
            (FleetError::UnknownJob(job_id), Code::NotFound),
            (
                FleetError::UnknownAgent(AgentId::new_random()),
                Code::NotFound,
            ),
            (
                FleetError::LeaseLost { job_id, attempt: 2 },
                Code::FailedPrecondition,
            ),
            (
                FleetError::InvalidEvent {
                    job_id,
                    attempt: 1,
                    seq: u64::MAX,
                    reason: "x".into(),
                },
                Code::InvalidArgument,
            ),
            (
                FleetError::TooManyAgentIds {
                    cert_name: "bench-7".into(),
                    ids: 8,
                    most: 8,
                },
                Code::ResourceExhausted,
            ),
            (FleetError::Revoked("x".into()), Code::Unauthenticated),
            (FleetError::BadRevocation("x".into()), Code::InvalidArgument),
            (
                FleetError::InventoryTooLarge {
                    agent_id: AgentId::new_random(),
                    bytes: 2,
                    limit: 1,
                },
                Code::InvalidArgument,
            ),
            (
                FleetError::NotLeaseHolder {
                    job_id,
                    attempt: 1,
                    agent_id: AgentId::new_random(),
                },
                Code::PermissionDenied,
            ),
            (
                FleetError::AgentConnected(AgentId::new_random()),
                Code::AlreadyExists,
            ),
            (
                FleetError::CertificateMismatch {
                    agent_id: AgentId::new_random(),
                    bound: "a".into(),
                    presented: "b".into(),
                },
                Code::PermissionDenied,
            ),
            (
                FleetError::NotRegistered(AgentId::new_random()),
                Code::FailedPrecondition,
            ),
            (
                FleetError::Store(CoordinatorError::LeaseLost {
                    job_id: job_id.to_string(),
                    attempt: 2,
                }),
                Code::FailedPrecondition,
            ),
            (
                FleetError::Store(CoordinatorError::Internal("x".into())),
                Code::Internal,
            ),
        ];
        for (err, code) in cases {
            let message = err.to_string();
            let status = tonic::Status::from(err);
            assert_eq!(status.code(), code, "{message}");
            assert_eq!(status.message(), message, "the reason reaches the client");
        }
    }
}
