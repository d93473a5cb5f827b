//! Running child processes: the timed runs of a cell (monotonic wall clock around the child,
//! its user+sys CPU time from `getrusage(RUSAGE_CHILDREN)`, a timeout, cancellation) and the
//! logged commands of fetches and builds. No shell is involved anywhere: argv lists only.
//!
//! Children do not outlive the agent, nor what they start. Each runs in a process group of
//! its own led by a watchman ([`ChildGroup`]), SIGKILLed whole when the run ends, and by the
//! watchman when the agent dies, even by SIGKILL; the child itself also gets
//! `PR_SET_PDEATHSIG(SIGKILL)`. The blocking commands of fetches and checkouts (`git`,
//! `curl`, a toolchain's banner) go through [`output`], in a group the same way. As a last
//! resort, should a watchman itself be killed: a child started for a job (in a task scoped
//! with [`CHILD_OWNER`]) carries `ABFLEET_WORK_DIR=<work dir>` and its group is listed in
//! `<work dir>/running.pgids` while it runs; [`kill_leftovers`] SIGKILLs the processes of
//! those groups that still carry that marker, before the agent times anything, and
//! [`blocking_with_children`] does the same when a job is cancelled while blocking work
//! (a fetch) runs its children.

use std::collections::{BTreeMap, HashSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::process::Command;
use tokio::sync::watch;

use crate::child_group::ChildGroup;

tokio::task_local! {
    /// The work dir of the agent whose job runs in this task: children started within it are
    /// marked with it and listed in its `running.pgids`.
    pub static CHILD_OWNER: PathBuf;
}

/// The environment variable that marks a child as started for a job of this work dir.
pub const WORK_DIR_ENV: &str = "ABFLEET_WORK_DIR";

/// The file in the work dir that lists the process groups of running children.
pub const RUNNING_PGIDS_FILE: &str = "running.pgids";

/// How a child ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ExitKind {
    Code(i32),
    Signal(i32),
    TimedOut,
    Cancelled,
    SpawnFailed(String),
}

impl ExitKind {
    pub fn success(&self) -> bool {
        *self == ExitKind::Code(0)
    }

    pub fn code(&self) -> Option<i32> {
        match self {
            ExitKind::Code(code) => Some(*code),
            _ => None,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            ExitKind::Code(code) => format!("exited with code {code}"),
            ExitKind::Signal(signal) => {
                format!("was killed by signal {signal} ({})", signal_name(*signal))
            }
            ExitKind::TimedOut => "ran past its timeout and was killed".into(),
            ExitKind::Cancelled => "was stopped because the job was cancelled".into(),
            ExitKind::SpawnFailed(err) => format!("could not be started: {err}"),
        }
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "signal",
    }
}

#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub exit: ExitKind,
    pub wall_s: f64,
    pub cpu_s: f64,
}

/// One command to run with its stdout and stderr going to files.
pub struct CommandSpec<'a> {
    pub argv: &'a [String],
    pub cwd: Option<&'a Path>,
    pub env: &'a BTreeMap<String, String>,
    /// stdout and stderr are appended here (one file for both).
    pub log_path: &'a Path,
    pub timeout: Duration,
}

/// Runs a command to completion, timing it. While it runs, the agent does nothing else.
pub async fn run(spec: CommandSpec<'_>, cancel: &mut watch::Receiver<bool>) -> RunOutcome {
    let Some((program, args)) = spec.argv.split_first() else {
        return spawn_failed("empty command");
    };
    let log = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(spec.log_path)
    {
        Ok(file) => file,
        Err(err) => {
            return spawn_failed(&format!(
                "cannot open log `{}`: {err}",
                spec.log_path.display()
            ))
        }
    };
    let log_err = match log.try_clone() {
        Ok(file) => file,
        Err(err) => return spawn_failed(&err.to_string()),
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(spec.env)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .kill_on_drop(true);
    if let Some(cwd) = spec.cwd {
        command.current_dir(cwd);
    }
    let owner = CHILD_OWNER.try_with(|dir| dir.clone()).ok();
    if let Some(owner) = &owner {
        command.env(WORK_DIR_ENV, owner);
    }
    if *cancel.borrow() {
        return RunOutcome {
            exit: ExitKind::Cancelled,
            wall_s: 0.0,
            cpu_s: 0.0,
        };
    }
    // Its own process group, so a timeout, a cancel or the agent's death ends everything it
    // started (make's compilers, ninja's jobs, a script's background children), not only the
    // child. Started, and waiting, before the clock starts.
    let group = {
        let owner = owner.clone();
        tokio::task::spawn_blocking(move || {
            ChildGroup::start(owner.as_deref().map(|dir| (WORK_DIR_ENV, dir)))
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|started| started)
    };
    let group = match group {
        Ok(group) => group,
        Err(err) => {
            return spawn_failed(&format!(
                "cannot start a process group for `{program}`: {err}"
            ))
        }
    };
    group.enlist(command.as_std_mut());
    // Opened before the clock starts: inside the timed window, listing the child's group is
    // one `write`, with no open and no fsync.
    let group_list = owner.as_deref().and_then(GroupList::open);
    let cpu_before = children_cpu_s();
    crate::timeline::mark_path("run.start", spec.log_path);
    let started = Instant::now();
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            return spawn_failed(&format!("`{program}`: {err}"));
        }
    };
    // Dropped after `group`: the group is killed, then unlisted.
    let _listed = group_list.map(|list| list.add(group.pgid()));
    let exit = tokio::select! {
        status = child.wait() => match status {
            Ok(status) => match (status.code(), status.signal()) {
                (Some(code), _) => ExitKind::Code(code),
                (None, Some(signal)) => ExitKind::Signal(signal),
                (None, None) => ExitKind::SpawnFailed("no exit status".into()),
            },
            Err(err) => ExitKind::SpawnFailed(err.to_string()),
        },
        _ = tokio::time::sleep(spec.timeout) => {
            let _ = child.kill().await;
            ExitKind::TimedOut
        }
        _ = wait_cancelled(cancel) => {
            let _ = child.kill().await;
            ExitKind::Cancelled
        }
    };
    let wall_s = started.elapsed().as_secs_f64();
    crate::timeline::mark_path("run.end", spec.log_path);
    let cpu_s = (children_cpu_s() - cpu_before).max(0.0);
    // After a timeout or cancel, everything the child started; after a normal exit, strays
    // it left running in the background. (Also when this future is dropped.)
    drop(group);
    RunOutcome {
        exit,
        wall_s,
        cpu_s,
    }
}

/// Runs a command to completion off the async runtime (`git`, `curl`, a toolchain's
/// banner), capturing its output, in a [`ChildGroup`]: what it started dies with it, and
/// with the agent. Within a job ([`CHILD_OWNER`], see [`blocking_with_children`]) it is
/// marked and listed like a timed run's child.
pub fn output(command: &mut std::process::Command) -> std::io::Result<std::process::Output> {
    let owner = CHILD_OWNER.try_with(|dir| dir.clone()).ok();
    let group = ChildGroup::start(owner.as_deref().map(|dir| (WORK_DIR_ENV, dir)))?;
    if let Some(owner) = &owner {
        command.env(WORK_DIR_ENV, owner);
    }
    group.enlist(command);
    let _listed = owner
        .as_deref()
        .and_then(GroupList::open)
        .map(|list| list.add(group.pgid()));
    let output = command.output();
    drop(group);
    output
}

/// Blocking work that starts children ([`output`]) run off the runtime as part of the job in
/// this task: its children are marked and listed with the task's [`CHILD_OWNER`]. A cancel
/// kills them (with what they started) and returns `None` once the work has given up.
pub async fn blocking_with_children<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
    cancel: &mut watch::Receiver<bool>,
) -> Result<Option<T>, tokio::task::JoinError> {
    let owner = CHILD_OWNER.try_with(|dir| dir.clone()).ok();
    let scoped_owner = owner.clone();
    let mut task = tokio::task::spawn_blocking(move || match scoped_owner {
        Some(dir) => CHILD_OWNER.sync_scope(dir, work),
        None => work(),
    });
    tokio::select! {
        done = &mut task => done.map(Some),
        _ = wait_cancelled(cancel) => {
            if let Some(owner) = &owner {
                if let Err(err) = kill_leftovers(owner) {
                    tracing::warn!(error = %err, "failed to stop the cancelled job's children");
                }
            }
            task.await.map(|_| None)
        }
    }
}

/// Serialises updates of `running.pgids` within this process.
static RUNNING_PGIDS_LOCK: Mutex<()> = Mutex::new(());

/// `<work dir>/running.pgids`, opened for appending before a child is spawned.
///
/// Entries are written without fsync: they only matter while the host stays up (a crash of
/// the host takes every child with it), and what a killed agent wrote is in the page cache,
/// where the next agent on the work dir reads it. So the timed window holds one `write`.
struct GroupList {
    path: PathBuf,
    file: std::fs::File,
}

impl GroupList {
    fn open(work_dir: &Path) -> Option<GroupList> {
        let path = work_dir.join(RUNNING_PGIDS_FILE);
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
        {
            Ok(file) => Some(GroupList { path, file }),
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %err, "failed to open the list of running children; a crash now could leave this one running");
                None
            }
        }
    }

    /// Lists a running child's group (one append) until the returned guard is dropped.
    fn add(mut self, pgid: u32) -> ListedGroup {
        use std::io::Write;
        let mut line = [0u8; 12];
        let len = {
            let mut cursor = std::io::Cursor::new(&mut line[..]);
            let _ = writeln!(cursor, "{pgid}");
            cursor.position() as usize
        };
        let written = {
            let _guard = RUNNING_PGIDS_LOCK.lock().unwrap_or_else(|p| p.into_inner());
            self.file.write_all(&line[..len])
        };
        if let Err(err) = written {
            tracing::warn!(path = %self.path.display(), error = %err, "failed to list a running child; a crash now could leave it running");
        }
        ListedGroup {
            path: self.path,
            pgid,
            _file: self.file,
        }
    }
}

/// A running child's group, listed in `<work dir>/running.pgids` until dropped.
struct ListedGroup {
    path: PathBuf,
    pgid: u32,
    /// Closed when the group is unlisted, after the timed window, not in it.
    _file: std::fs::File,
}

impl Drop for ListedGroup {
    fn drop(&mut self) {
        let _guard = RUNNING_PGIDS_LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return;
        };
        let pgid = self.pgid.to_string();
        let rest: String = text
            .lines()
            .filter(|line| line.trim() != pgid)
            .map(|line| format!("{line}\n"))
            .collect();
        let _ = if rest.is_empty() {
            std::fs::remove_file(&self.path)
        } else {
            std::fs::write(&self.path, rest)
        };
    }
}

/// Kills what children of an earlier agent on `work_dir` left running: every process in a
/// group listed in `<work_dir>/running.pgids` whose environment carries
/// `ABFLEET_WORK_DIR=<work_dir>` (a recycled group id of someone else's process is left
/// alone). Returns the pids killed; the list is removed.
pub fn kill_leftovers(work_dir: &Path) -> std::io::Result<Vec<u32>> {
    let path = work_dir.join(RUNNING_PGIDS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    let groups: HashSet<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    let marker = {
        use std::os::unix::ffi::OsStrExt;
        let mut marker = format!("{WORK_DIR_ENV}=").into_bytes();
        marker.extend_from_slice(work_dir.as_os_str().as_bytes());
        marker
    };
    let me = std::process::id();
    let mut killed = Vec::new();
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp …`; comm may hold anything but a `)` ends it last.
        let pgrp = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2))
            .and_then(|field| field.parse::<u32>().ok());
        if !pgrp.is_some_and(|pgrp| groups.contains(&pgrp)) {
            continue;
        }
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if environ
            .split(|b| *b == 0)
            .any(|var| var == marker.as_slice())
        {
            let Ok(raw) = i32::try_from(pid) else {
                continue;
            };
            if nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(raw),
                nix::sys::signal::Signal::SIGKILL,
            )
            .is_ok()
            {
                killed.push(pid);
            }
        }
    }
    match std::fs::remove_file(&path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
        _ => Ok(killed),
    }
}

fn spawn_failed(message: &str) -> RunOutcome {
    RunOutcome {
        exit: ExitKind::SpawnFailed(message.to_string()),
        wall_s: 0.0,
        cpu_s: 0.0,
    }
}

/// Resolves once the cancel flag is set (never, if the sender is gone without setting it).
pub async fn wait_cancelled(cancel: &mut watch::Receiver<bool>) {
    loop {
        if *cancel.borrow_and_update() {
            return;
        }
        if cancel.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// User + system seconds of all waited-for children of this process so far.
fn children_cpu_s() -> f64 {
    match nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN) {
        Ok(usage) => {
            let tv = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            tv(usage.user_time()) + tv(usage.system_time())
        }
        Err(_) => f64::NAN,
    }
}

/// The last `max_bytes` of a file, cut at a line start, as text.
pub fn tail(path: &Path, max_bytes: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(max_bytes);
    if file.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if start > 0 {
        match text.find('\n') {
            Some(newline) => text[newline + 1..].to_string(),
            None => text,
        }
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;

    use super::*;
    use crate::child_group::process_gone as gone;

    fn argv(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    async fn run_argv(items: &[&str], timeout: Duration) -> (RunOutcome, String) {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let (_tx, mut rx) = watch::channel(false);
        let argv = argv(items);
        let outcome = run(
            CommandSpec {
                argv: &argv,
                cwd: None,
                env: &BTreeMap::new(),
                log_path: &log,
                timeout,
            },
            &mut rx,
        )
        .await;
        (outcome, tail(&log, 4096))
    }

    #[tokio::test]
    async fn a_busy_child_is_timed_and_its_cpu_time_counted() {
        let (outcome, _) = run_argv(
            &[
                "sh",
                "-c",
                "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done",
            ],
            Duration::from_secs(60),
        )
        .await;
        assert!(outcome.exit.success(), "{outcome:?}");
        assert!(outcome.wall_s > 0.0);
        assert!(outcome.cpu_s > 0.0, "{outcome:?}");
    }

    #[tokio::test]
    async fn exit_codes_signals_timeouts_and_missing_programs_are_told_apart() {
        let (outcome, log) = run_argv(
            &["sh", "-c", "echo oops >&2; exit 255"],
            Duration::from_secs(10),
        )
        .await;
        assert_eq!(outcome.exit, ExitKind::Code(255));
        assert!(log.contains("oops"));
        let (outcome, _) = run_argv(&["sh", "-c", "kill -ABRT $$"], Duration::from_secs(10)).await;
        assert_eq!(outcome.exit, ExitKind::Signal(6));
        assert!(outcome.exit.describe().contains("SIGABRT"));
        let (outcome, _) = run_argv(&["sleep", "10"], Duration::from_millis(200)).await;
        assert_eq!(outcome.exit, ExitKind::TimedOut);
        let (outcome, _) = run_argv(
            &["/nonexistent/abfleet-no-such-binary"],
            Duration::from_secs(1),
        )
        .await;
        assert!(
            matches!(outcome.exit, ExitKind::SpawnFailed(_)),
            "{outcome:?}"
        );
    }

    #[tokio::test]
    async fn a_timeout_kills_what_the_child_started_too() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild.pid");
        let script = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
        let (outcome, _) = run_argv(&["sh", "-c", &script], Duration::from_millis(500)).await;
        assert_eq!(outcome.exit, ExitKind::TimedOut);
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let pid = pid.trim();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !gone(pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            gone(pid),
            "the grandchild `sleep 300` (pid {pid}) outlived the timeout"
        );
    }

    #[tokio::test]
    async fn cancelling_kills_the_child() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let (tx, mut rx) = watch::channel(false);
        let argv = argv(&["sleep", "30"]);
        let started = Instant::now();
        let canceller = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            tx.send(true).unwrap();
            tx
        });
        let outcome = run(
            CommandSpec {
                argv: &argv,
                cwd: None,
                env: &BTreeMap::new(),
                log_path: &log,
                timeout: Duration::from_secs(60),
            },
            &mut rx,
        )
        .await;
        let _tx = canceller.await.unwrap();
        assert_eq!(outcome.exit, ExitKind::Cancelled);
        assert!(started.elapsed() < Duration::from_secs(20));
    }

    /// Not a test on its own: the process the next test SIGKILLs. Run by re-executing this
    /// test binary with `ABFLEET_TEST_DYING_AGENT=<work dir>`; a job's child there starts a
    /// grandchild and both sleep.
    #[tokio::test]
    async fn dying_agent_helper() {
        let Ok(work_dir) = std::env::var("ABFLEET_TEST_DYING_AGENT") else {
            return;
        };
        let work_dir = PathBuf::from(work_dir);
        let script = format!(
            "sleep 300 & echo $! > {dir}/grandchild.pid; echo $$ > {dir}/child.pid; wait",
            dir = work_dir.display()
        );
        let argv = argv(&["sh", "-c", &script]);
        let (_tx, mut rx) = watch::channel(false);
        let log = work_dir.join("log");
        CHILD_OWNER
            .scope(work_dir.clone(), async {
                run(
                    CommandSpec {
                        argv: &argv,
                        cwd: None,
                        env: &BTreeMap::new(),
                        log_path: &log,
                        timeout: Duration::from_secs(300),
                    },
                    &mut rx,
                )
                .await
            })
            .await;
    }

    async fn wait_for_file(path: &Path) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(text) = std::fs::read_to_string(path) {
                if text.ends_with('\n') {
                    return text.trim().to_string();
                }
            }
            assert!(Instant::now() < deadline, "no {}", path.display());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_gone(pid: &str) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !gone(pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        gone(pid)
    }

    /// The process group `pid` is in.
    fn group_of(pid: &str) -> String {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let (_, rest) = stat.rsplit_once(')').unwrap();
        rest.split_whitespace().nth(2).unwrap().to_string()
    }

    /// Issue 11: after `kill -9` of the agent, a running benchmark kept running as an orphan
    /// and competed with the next agent's timed runs. Issue 23, case 9: what the child had
    /// started itself outlived the agent until the next start.
    #[tokio::test]
    async fn children_of_a_killed_agent_and_what_they_started_die_with_it() {
        let work = tempfile::tempdir().unwrap();
        let work_dir = std::path::absolute(work.path()).unwrap();
        let mut agent = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "runner::tests::dying_agent_helper",
                "--nocapture",
            ])
            .env("ABFLEET_TEST_DYING_AGENT", &work_dir)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let child = wait_for_file(&work_dir.join("child.pid")).await;
        let grandchild = wait_for_file(&work_dir.join("grandchild.pid")).await;
        let listed = std::fs::read_to_string(work_dir.join(RUNNING_PGIDS_FILE)).unwrap();
        assert_eq!(
            listed.trim(),
            group_of(&child),
            "the child's group is listed while it runs"
        );
        let environ = std::fs::read(format!("/proc/{grandchild}/environ")).unwrap();
        let marker = format!("{WORK_DIR_ENV}={}", work_dir.display());
        assert!(
            environ.split(|b| *b == 0).any(|v| v == marker.as_bytes()),
            "the grandchild carries the marker"
        );

        agent.kill().unwrap(); // SIGKILL: no destructor, no group kill runs in the agent.
        agent.wait().unwrap();
        assert!(
            wait_gone(&child).await,
            "the direct child (pid {child}) outlived the SIGKILLed agent"
        );
        assert!(
            wait_gone(&grandchild).await,
            "the grandchild (pid {grandchild}) outlived the SIGKILLed agent"
        );
    }

    /// The last resort, should a group's watchman be gone too: the next start kills what is
    /// left of a listed group that carries the work dir's marker.
    #[tokio::test]
    async fn the_next_start_kills_what_is_left_of_a_listed_marked_group() {
        let work = tempfile::tempdir().unwrap();
        let work_dir = std::path::absolute(work.path()).unwrap();
        let script = format!(
            "sleep 300 & echo $! > {}/grandchild.pid; wait",
            work_dir.display()
        );
        let mut orphan = std::process::Command::new("sh")
            .args(["-c", &script])
            .env(WORK_DIR_ENV, &work_dir)
            .process_group(0)
            .spawn()
            .unwrap();
        let grandchild = wait_for_file(&work_dir.join("grandchild.pid")).await;
        std::fs::write(
            work_dir.join(RUNNING_PGIDS_FILE),
            format!("{}\n", orphan.id()),
        )
        .unwrap();
        let mut killed = kill_leftovers(&work_dir).unwrap();
        killed.sort();
        let mut expected = vec![orphan.id(), grandchild.parse::<u32>().unwrap()];
        expected.sort();
        assert_eq!(killed, expected);
        orphan.wait().unwrap();
        assert!(
            wait_gone(&grandchild).await,
            "the grandchild (pid {grandchild}) outlived the next start"
        );
        assert!(!work_dir.join(RUNNING_PGIDS_FILE).exists());
    }

    /// Issue 23, case 9: a cancel during blocking work (a fetch's `git`) waited for it, and
    /// what it started. Now both are killed, and the work gives up.
    #[tokio::test]
    async fn a_cancel_kills_the_children_of_blocking_work() {
        let work = tempfile::tempdir().unwrap();
        let work_dir = std::path::absolute(work.path()).unwrap();
        let pid_file = work_dir.join("grandchild.pid");
        let script = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
        let (tx, mut rx) = watch::channel(false);
        let blocking = tokio::spawn(CHILD_OWNER.scope(work_dir.clone(), async move {
            blocking_with_children(
                move || output(std::process::Command::new("sh").args(["-c", &script])),
                &mut rx,
            )
            .await
        }));
        let grandchild = wait_for_file(&pid_file).await;
        tx.send(true).unwrap();
        assert!(
            wait_gone(&grandchild).await,
            "the grandchild (pid {grandchild}) outlived the cancel"
        );
        assert!(
            blocking.await.unwrap().unwrap().is_none(),
            "the work was not cancelled"
        );
    }

    #[tokio::test]
    async fn a_listed_group_without_the_marker_is_left_alone() {
        let work = tempfile::tempdir().unwrap();
        let mut stranger = std::process::Command::new("sleep")
            .arg("300")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = stranger.id().to_string();
        // Its group id as a recycled entry of an earlier agent's list.
        std::fs::write(work.path().join(RUNNING_PGIDS_FILE), format!("{pid}\n")).unwrap();
        assert_eq!(kill_leftovers(work.path()).unwrap(), Vec::<u32>::new());
        assert!(!gone(&pid), "a process without the marker was killed");
        stranger.kill().unwrap();
        stranger.wait().unwrap();
    }

    #[test]
    fn tail_cuts_at_a_line_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "first line\nsecond line\nthird\n").unwrap();
        assert_eq!(tail(&path, 12), "third\n");
        assert_eq!(tail(&path, 1000), "first line\nsecond line\nthird\n");
    }
}
