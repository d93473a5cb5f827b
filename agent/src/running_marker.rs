//! `running.json` in the work dir: the attempt this agent is running, written when it
//! accepts a job and removed when the job ends. A process killed mid-job (or stopped, its
//! job handed back) leaves it behind: the agent's next process names that attempt when it
//! asks for work, so that the coordinator offers it back at the same attempt — its events
//! delivered from the spool, its builds and fixtures in the cache — instead of charging a
//! new one (issue 38).

use std::path::{Path, PathBuf};

use abfleet_core::JobId;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Running {
    job_id: String,
    attempt: u32,
}

fn path(work_dir: &Path) -> PathBuf {
    work_dir.join("running.json")
}

/// Notes that `attempt` of `job_id` runs (written to a temporary file, then renamed).
pub fn write(work_dir: &Path, job_id: &str, attempt: u32) -> std::io::Result<()> {
    let json = serde_json::to_vec(&Running {
        job_id: job_id.to_string(),
        attempt,
    })
    .map_err(std::io::Error::other)?;
    let tmp = work_dir.join("running.json.tmp");
    std::fs::write(&tmp, json)?;
    std::fs::rename(tmp, path(work_dir))
}

/// The job ended: nothing to resume.
pub fn clear(work_dir: &Path) {
    let _ = std::fs::remove_file(path(work_dir));
}

/// The attempt an earlier process left running, read and forgotten (a marker that does not
/// parse is forgotten too).
pub fn take(work_dir: &Path) -> Option<(JobId, u32)> {
    let text = std::fs::read(path(work_dir)).ok()?;
    clear(work_dir);
    let running: Running = serde_json::from_slice(&text).ok()?;
    Some((running.job_id.parse().ok()?, running.attempt))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_is_read_once_and_a_broken_one_is_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(take(dir.path()), None);
        let job = JobId::new_random();
        write(dir.path(), &job.to_string(), 2).unwrap();
        assert_eq!(take(dir.path()), Some((job, 2)));
        assert_eq!(take(dir.path()), None, "taken once");
        std::fs::write(path(dir.path()), b"{not json").unwrap();
        assert_eq!(take(dir.path()), None);
        assert!(!path(dir.path()).exists());
        write(dir.path(), &job.to_string(), 1).unwrap();
        clear(dir.path());
        assert_eq!(take(dir.path()), None);
    }
}
