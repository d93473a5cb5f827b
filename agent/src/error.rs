//! The agent's errors. Messages say what failed and what to do.

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("failed to {what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("failed to reach the coordinator at {url}: {message}; check --coordinator and that the coordinator runs")]
    Connect { url: String, message: String },
    #[error("the coordinator refused the agent: {0}")]
    Refused(String),
    #[error("the coordinator sent an offer the agent cannot take: {0}")]
    BadOffer(String),
    /// Another agent holds the work dir (`agent.lock`).
    #[error("the work dir `{work_dir}` is in use by another agent (pid {pid}); give each agent its own --work-dir, or stop that agent first")]
    WorkDirLocked {
        work_dir: std::path::PathBuf,
        pid: String,
    },
}
