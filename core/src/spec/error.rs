//! What can go wrong reading a spec, in either form. Every message names the file (or, for
//! the JSON form, the key) and says what to do.

use std::path::PathBuf;

/// What can go wrong reading a spec. Every message names the file and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("failed to read job spec `{path}`: {source}; check the path")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("job spec `{path}` is not valid: {message}\nhint: the keys are documented in docs/job-spec.md")]
    Syntax { path: PathBuf, message: String },
    #[error("job spec `{path}`: {message}")]
    Invalid { path: PathBuf, message: String },
    /// A spec's JSON form (a submission, a stored run, an agent's offer) breaks an invariant
    /// of a validated spec. It has no file; the message names the key, and the reader's
    /// caller (serde's error, then the coordinator or agent) says where it came from.
    #[error("{message}")]
    Json { message: String },
}
