//! Running child processes: the timed runs of a cell (monotonic wall clock around the child,
//! its user+sys CPU time from `getrusage(RUSAGE_CHILDREN)`, a timeout, cancellation) and the
//! logged commands of fetches and builds. No shell is involved anywhere: argv lists only.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::Command;
use tokio::sync::watch;

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
        // Its own process group, so a timeout or cancel ends everything it started (make's
        // compilers, ninja's jobs, a script's background children), not only the child.
        .process_group(0)
        .kill_on_drop(true);
    if let Some(cwd) = spec.cwd {
        command.current_dir(cwd);
    }
    if *cancel.borrow() {
        return RunOutcome {
            exit: ExitKind::Cancelled,
            wall_s: 0.0,
            cpu_s: 0.0,
        };
    }
    let cpu_before = children_cpu_s();
    let started = Instant::now();
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            return spawn_failed(&format!("`{program}`: {err}"));
        }
    };
    let _group = child.id().map(ProcessGroup);
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
    let cpu_s = (children_cpu_s() - cpu_before).max(0.0);
    RunOutcome {
        exit,
        wall_s,
        cpu_s,
    }
}

/// A child's process group (its pid is the group id: `process_group(0)`). Dropping it
/// SIGKILLs whatever is left in the group: after a timeout or cancel, everything the child
/// started; after a normal exit, strays it left running in the background. Also runs when
/// the future running the command is dropped.
struct ProcessGroup(u32);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        let Ok(pgid) = i32::try_from(self.0) else {
            return;
        };
        // ESRCH (the group is already empty) is the usual, harmless answer.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
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
    use super::*;

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

    /// Whether a process is gone (or a zombie nobody reaped yet, which runs nothing).
    fn gone(pid: &str) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        }
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

    #[test]
    fn tail_cuts_at_a_line_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "first line\nsecond line\nthird\n").unwrap();
        assert_eq!(tail(&path, 12), "third\n");
        assert_eq!(tail(&path, 1000), "first line\nsecond line\nthird\n");
    }
}
