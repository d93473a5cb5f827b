//! How an agent is set up.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// `http://host:port` of the coordinator.
    pub coordinator_url: String,
    /// Where the agent keeps its id, git caches, builds, fixtures, spool and job outputs.
    pub work_dir: PathBuf,
    /// Longest wait between reconnection attempts.
    pub max_backoff: Duration,
}

impl AgentConfig {
    pub fn new(coordinator_url: impl Into<String>, work_dir: impl Into<PathBuf>) -> Self {
        AgentConfig {
            coordinator_url: coordinator_url.into(),
            work_dir: work_dir.into(),
            max_backoff: Duration::from_secs(5),
        }
    }
}
