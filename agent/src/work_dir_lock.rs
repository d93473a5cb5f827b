//! One agent per work dir: the work dir holds the agent's id, caches, spool and the list of
//! its running children, so two agents on one dir would pose as one agent and undo each
//! other's work. The agent holds an exclusive lock (`flock`) on `<work dir>/agent.lock` for
//! its lifetime; the file names the holder's pid, so a second agent can say who has it. The
//! kernel drops the lock when the holder dies, however it dies (and, for a lock this process
//! drops, once no child of it forked meanwhile still shares the file: [`OWN_FORK_GRACE`]).

use std::fs::{File, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
        lock_or_name_holder(&file, &path, work_dir)?;
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

/// How long a lock that names this very process is retried: see [`lock_or_name_holder`].
const OWN_FORK_GRACE: Duration = Duration::from_secs(1);

/// Locks `file` or names who holds it. A lock naming this process may be one this process
/// just dropped: a child that any thread spawns shares the open file from fork until exec
/// closes it, and the kernel releases the lock only then. So such a lock is retried for
/// [`OWN_FORK_GRACE`]; a lock named by another pid is refused at once.
fn lock_or_name_holder(file: &File, path: &Path, work_dir: &Path) -> Result<(), AgentError> {
    let started = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(path)
                    .ok()
                    .map(|text| text.trim().to_string())
                    .filter(|pid| !pid.is_empty())
                    .unwrap_or_else(|| "unknown".to_string());
                let ours = holder == std::process::id().to_string();
                if !ours || started.elapsed() >= OWN_FORK_GRACE {
                    return Err(AgentError::WorkDirLocked {
                        work_dir: work_dir.to_path_buf(),
                        pid: holder,
                    });
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(TryLockError::Error(source)) => {
                return Err(AgentError::Io {
                    what: format!("lock `{}`", path.display()),
                    source,
                })
            }
        }
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

    /// A child spawned by any thread of this process shares the lock file's open file
    /// description from fork to exec, so a dropped lock can look held for that instant.
    #[test]
    fn a_dropped_lock_is_free_again_while_other_threads_spawn_children() {
        let dir = tempfile::tempdir().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spawner = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::process::Command::new("true").status().unwrap();
                }
            })
        };
        let outcome = (0..300).try_for_each(|_| WorkDirLock::acquire(dir.path()).map(drop));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spawner.join().unwrap();
        outcome.unwrap();
    }
}
