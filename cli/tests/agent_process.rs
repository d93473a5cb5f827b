//! Real `abfleet agent` processes: what happens between them and their work dir.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An agent process on `work_dir`, dialing a port where nothing listens (it retries forever).
fn start_agent(work_dir: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(["agent", "--coordinator", "http://127.0.0.1:9", "--work-dir"])
        .arg(work_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the work dir's lock file names `pid`.
fn wait_for_lock_holder(work_dir: &Path, pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let lock = work_dir.join("agent.lock");
    while std::fs::read_to_string(&lock)
        .ok()
        .map(|t| t.trim().to_string())
        != Some(pid.to_string())
    {
        assert!(Instant::now() < deadline, "agent {pid} never took the lock");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for a child to exit, killing it after `limit`.
fn wait_with_limit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 11: two agents on one work dir shared its id and took each other's sessions and
/// jobs. The second now stops at once, naming the dir and the holder's pid.
#[test]
fn a_second_agent_on_a_work_dir_exits_at_once_naming_the_dir_and_the_holder() {
    let tmp = tempfile::tempdir().unwrap();
    let work_dir = tmp.path().join("work");
    let mut first = start_agent(&work_dir);
    wait_for_lock_holder(&work_dir, first.id());

    let mut second = start_agent(&work_dir);
    let status = wait_with_limit(&mut second, Duration::from_secs(30))
        .expect("the second agent must exit, not run alongside the first");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&work_dir.display().to_string())
            && stderr.contains(&format!("pid {}", first.id())),
        "{stderr}"
    );
    assert!(
        first.try_wait().unwrap().is_none(),
        "the first agent keeps running"
    );

    // However the holder dies, the kernel frees the lock: the next agent gets in.
    first.kill().unwrap();
    first.wait().unwrap();
    let mut third = start_agent(&work_dir);
    wait_for_lock_holder(&work_dir, third.id());
    assert!(third.try_wait().unwrap().is_none());
    third.kill().unwrap();
    third.wait().unwrap();
}

/// `abfleet local` embeds an agent: on a work dir another agent holds, that agent would stop
/// at once and the run wait forever, so `local` refuses before submitting.
#[test]
fn local_on_a_work_dir_an_agent_holds_exits_2_before_submitting() {
    let tmp = tempfile::tempdir().unwrap();
    let work_dir = tmp.path().join("work");
    let mut agent = start_agent(&work_dir);
    wait_for_lock_holder(&work_dir, agent.id());
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/jobs/demo.toml");
    let mut local = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .current_dir(tmp.path())
        .args(["local", "--work-dir"])
        .arg(&work_dir)
        .arg(&spec)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_with_limit(&mut local, Duration::from_secs(60));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut local.stderr.take().unwrap(), &mut stderr).unwrap();
    agent.kill().unwrap();
    agent.wait().unwrap();
    let status = status.expect("`abfleet local` must not wait for an agent that cannot start");
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("in use by another agent")
            && stderr.contains(&format!("pid {}", agent.id())),
        "{stderr}"
    );
}
