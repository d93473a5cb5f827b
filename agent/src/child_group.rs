//! The process group a child of the agent runs in, and what ends it, whichever way the
//! agent goes (issue 23, case 9: a killed build's grandchild outlived the agent until the
//! next start).
//!
//! A child's own `PR_SET_PDEATHSIG(SIGKILL)` reaches only the child: what it started (make's
//! compilers, git's helpers, a script's background jobs) would be orphaned. So each child
//! joins a group led by a watchman, a `/bin/sh` that waits on a pipe only the agent holds
//! (close-on-exec, so no child inherits it) and then SIGKILLs its own group. The agent closes
//! the pipe by exiting, however it exits (SIGKILL included: the kernel closes its files), and
//! the watchman then kills everything in the group. While the agent lives, dropping the
//! [`ChildGroup`] SIGKILLs the group itself (after a timeout, a cancel, or a normal exit that
//! left strays) and reaps the watchman. The group's id is the watchman's pid, which stays
//! taken while the watchman lives, so the kill cannot reach a recycled group.
//!
//! The watchman has started and is waiting before [`ChildGroup::start`] returns: its start
//! never overlaps a timed run.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The watchman: says it is ready, waits for the agent's end of the pipe to close, then
/// kills its group (`kill 0`: every process of the caller's group, itself included).
const WATCHMAN_SCRIPT: &str = "echo ready; read _; kill -KILL 0";

/// A process group for one child, led by a watchman (see the module doc). Dropping it
/// SIGKILLs the whole group.
pub struct ChildGroup {
    watchman: Child,
    pgid: i32,
}

impl ChildGroup {
    /// Starts the group's watchman; `marker` (a name and value) goes into its environment,
    /// as into the child's, so the agent's start-up sweep of leftovers recognises it too.
    pub fn start(marker: Option<(&str, &Path)>) -> std::io::Result<ChildGroup> {
        let mut command = Command::new("/bin/sh");
        command
            .args(["-c", WATCHMAN_SCRIPT])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0);
        if let Some((name, value)) = marker {
            command.env(name, value);
        }
        let watchman = command.spawn()?;
        let pgid = i32::try_from(watchman.id()).map_err(std::io::Error::other)?;
        // Made first: a watchman that does not answer is killed and reaped on the way out.
        let mut group = ChildGroup { watchman, pgid };
        let mut ready = String::new();
        let stdout = group
            .watchman
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("the watchman has no stdout"))?;
        BufReader::new(stdout).read_line(&mut ready)?;
        if ready.trim() != "ready" {
            return Err(std::io::Error::other(
                "the process group's watchman (`/bin/sh`) did not start",
            ));
        }
        Ok(group)
    }

    /// The group's id (the watchman's pid).
    pub fn pgid(&self) -> u32 {
        self.pgid as u32
    }

    /// Makes `command` start in this group, and die with the agent's thread that spawns it.
    pub fn enlist(&self, command: &mut Command) {
        command.process_group(self.pgid);
        die_with_the_agent(command);
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        // ESRCH (the group is already empty) cannot happen while the watchman lives; any
        // error leaves nothing better to do.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
        // SIGKILLed, the watchman exits at once: this wait is not a block on anything else.
        let _ = self.watchman.wait();
    }
}

/// Sets `PR_SET_PDEATHSIG(SIGKILL)` in the child, between fork and exec: when the thread
/// that spawned it ends (the agent dies, even by SIGKILL), the kernel kills the child. A
/// child whose agent died before the call took effect is not started.
fn die_with_the_agent(command: &mut Command) {
    let agent_pid = std::process::id();
    // SAFETY: the closure runs in the forked child before exec and only makes two system
    // calls (prctl, getppid); it allocates nothing and takes no lock.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)?;
            if nix::unistd::getppid().as_raw() as u32 != agent_pid {
                return Err(std::io::Error::other(
                    "the agent exited before its child started",
                ));
            }
            Ok(())
        });
    }
}

/// Whether a process is gone (or a zombie nobody reaped yet, which runs nothing): what the
/// tests of every module that starts children ask.
#[cfg(test)]
pub(crate) fn process_gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[cfg(test)]
mod tests {
    use super::process_gone as gone;
    use super::*;

    fn wait_gone(pid: &str) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !gone(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        gone(pid)
    }

    #[test]
    fn dropping_the_group_kills_the_child_and_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild.pid");
        let group = ChildGroup::start(None).unwrap();
        let watchman = group.pgid().to_string();
        let mut command = Command::new("sh");
        command.args([
            "-c",
            &format!("sleep 300 & echo $! > {}; wait", pid_file.display()),
        ]);
        group.enlist(&mut command);
        let mut child = command.spawn().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::fs::read_to_string(&pid_file).map_or(true, |t| !t.ends_with('\n')) {
            assert!(
                std::time::Instant::now() < deadline,
                "the child never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let grandchild = std::fs::read_to_string(&pid_file).unwrap();
        let grandchild = grandchild.trim();
        drop(group);
        assert!(child.wait().is_ok());
        assert!(
            wait_gone(grandchild),
            "the grandchild {grandchild} outlived its group"
        );
        assert!(gone(&watchman), "the watchman was not reaped");
    }
}
