//! What can go wrong reading a spec. Every message names the file and says what to do.

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
}
