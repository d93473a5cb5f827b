//! One agent per work dir: the work dir holds the agent's id, caches, spool and the list of
//! its running children, so two agents on one dir would pose as one agent and undo each
//! other's work. The agent holds an exclusive lock (`flock`) on `<work dir>/agent.lock` for
//! its lifetime; the file names the holder's pid, so a second agent can say who has it. The
//! kernel drops the lock when the holder dies, however it dies.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::AgentError;

pub const LOCK_FILE_NAME: &str = "agent.lock";

/// The held lock; dropping it (or the process ending) releases the work dir.
#[derive(Debug)]
pub struct WorkDirLock {
    _file: std::fs::File,
    pub path: PathBuf,
}

impl WorkDirLock {
    /// Takes the work dir, creating it when absent, or fails at once naming the holder.
    pub fn acquire(work_dir: &Path) -> Result<WorkDirLock, AgentError> {
        let io = |what: String| move |source| AgentError::Io { what, source };
        std::fs::create_dir_all(work_dir).map_err(io(format!(
            "create the work directory `{}`",
            work_dir.display()
        )))?;
        let path = work_dir.join(LOCK_FILE_NAME);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io(format!("open the lock file `{}`", path.display())))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&path)
                    .ok()
                    .map(|text| text.trim().to_string())
                    .filter(|pid| !pid.is_empty())
                    .unwrap_or_else(|| "unknown".to_string());
                return Err(AgentError::WorkDirLocked {
                    work_dir: work_dir.to_path_buf(),
                    pid: holder,
                });
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(AgentError::Io {
                    what: format!("lock `{}`", path.display()),
                    source,
                })
            }
        }
        file.set_len(0)
            .and_then(|()| file.write_all(format!("{}\n", std::process::id()).as_bytes()))
            .and_then(|()| file.sync_data())
            .map_err(io(format!(
                "write the agent's pid into `{}`",
                path.display()
            )))?;
        Ok(WorkDirLock { _file: file, path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_dir_is_refused_naming_the_holder_and_a_dropped_one_frees_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = WorkDirLock::acquire(dir.path()).unwrap();
        // flock locks belong to the open file: a second open in this process conflicts too.
        let err = WorkDirLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains(&dir.path().display().to_string())
                && err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(first);
        WorkDirLock::acquire(dir.path()).unwrap();
    }
}
