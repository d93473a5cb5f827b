//! SIGTERM — what systemd, Kubernetes and `docker stop` send — stops `abfleet coordinator`
//! and `abfleet agent` as cleanly as Ctrl-C (issue 25): real processes, a real run. The
//! agent stopped mid-job exits 0 having delivered what it measured and handed its job back
//! (queued again at once, not cancelled, not left to `agent_lost_after`), another agent
//! finishes it without measuring a cell twice; the coordinator exits 0 and its store opens
//! again with every stored cell.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use abfleet_coordinator::store::Store;
use abfleet_core::lifecycle::{JobState, RunState};
use support::*;

fn terminate(child: &std::process::Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits for `child` to exit; its code and stderr.
fn exited(child: KillOnDrop, within: Duration) -> (Option<i32>, String) {
    let mut child = child;
    let started = Instant::now();
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            let mut stderr = String::new();
            if let Some(mut pipe) = child.0.stderr.take() {
                use std::io::Read;
                let _ = pipe.read_to_string(&mut stderr);
            }
            return (status.code(), stderr);
        }
        assert!(
            started.elapsed() < within,
            "still running {within:?} after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_agent_and_the_coordinator_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = SpecOptions {
        workloads: &["psnr", "motion", "float_ssim", "motion_v2"],
        runs: 5,
        frames: 240,
        ..SpecOptions::path()
    }
    .write(tmp.path(), "spec.toml");
    let data_dir = tmp.path().join("data");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let coordinator = KillOnDrop(
        coordinator_command(port, &data_dir)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut client = control_at(&url).await;
    let agent = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args(["agent", "--coordinator", &url, "--work-dir"])
            .arg(tmp.path().join("agent"))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let run_id = submit(&mut client, &spec).await;
    let store = Store::open(&data_dir).unwrap();
    let job_id = store.jobs().of_run(run_id.parse().unwrap()).await.unwrap()[0].job_id;
    wait_until(Duration::from_secs(180), "a stored cell", || {
        let store = store.clone();
        async move {
            (!store
                .events()
                .stored_cells(job_id)
                .await
                .unwrap()
                .is_empty())
            .then_some(())
        }
    })
    .await;

    terminate(&agent.0);
    let (code, stderr) = exited(agent, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("abfleet agent: SIGTERM, stopping"),
        "{stderr}"
    );
    let measured_first = store.events().stored_cells(job_id).await.unwrap();
    assert!(!measured_first.is_empty());
    // Handed back, not cancelled: queued again the moment the agent left.
    let job = store.jobs().job(job_id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Queued, "{job:?}");
    assert!(
        job.error
            .as_deref()
            .is_some_and(|error| error.contains("stopped and handed back attempt 1")),
        "{job:?}"
    );
    // Another agent finishes the job, measuring only the cells the first did not store.
    let second = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args(["agent", "--coordinator", &url, "--work-dir"])
            .arg(tmp.path().join("agent-2"))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let run_id: abfleet_core::RunId = run_id.parse().unwrap();
    let run = wait_until(Duration::from_secs(300), "the run finished", || {
        let store = store.clone();
        async move {
            let run = store.runs().run(run_id).await.unwrap().unwrap();
            (run.state != RunState::Running && run.state != RunState::Queued).then_some(run)
        }
    })
    .await;
    assert_eq!(
        (run.state, run.exit_code),
        (RunState::Done, Some(0)),
        "{run:?}"
    );
    let kept = store.events().stored_cells(job_id).await.unwrap();
    let mut indexes: Vec<u32> = kept.iter().map(|(_, index)| *index).collect();
    indexes.sort();
    assert_eq!(indexes, [0, 1, 2, 3], "each cell once: {kept:?}");
    assert!(
        measured_first.iter().all(|cell| kept.contains(cell)),
        "the first agent's cells are kept: {measured_first:?} in {kept:?}"
    );
    terminate(&second.0);
    let (code, stderr) = exited(second, Duration::from_secs(60));
    assert_eq!(code, Some(0), "an idle agent stops cleanly too: {stderr}");
    drop(store);

    terminate(&coordinator.0);
    let (code, stderr) = exited(coordinator, Duration::from_secs(30));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("abfleet coordinator: SIGTERM, stopping"),
        "{stderr}"
    );
    // Everything stored before the stops is there after them.
    let store = Store::open(&data_dir).unwrap();
    assert_eq!(store.events().stored_cells(job_id).await.unwrap(), kept);
}

/// Ctrl-C on `submit --wait` stops following, not the run: exit 8 (not 130, which means
/// cancelled), and `abfleet watch RUN` follows the run again to its report and exit code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_on_submit_wait_detaches_and_watch_follows_the_run_again() {
    let tmp = tempfile::tempdir().unwrap();
    let coordinator = TestCoordinator::start(&tmp.path().join("data"), Default::default()).await;
    let url = coordinator.url();
    let _agent = TestAgent::start(&url, &tmp.path().join("agent"));
    let spec = SpecOptions {
        runs: 5,
        frames: 120,
        ..SpecOptions::path()
    }
    .write(tmp.path(), "spec.toml");
    let mut submitter = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args([
                "submit",
                spec.to_str().unwrap(),
                "--wait",
                "--coordinator",
                &url,
            ])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Its stderr as it comes: the first progress line says it is following (and handles
    // Ctrl-C) before the signal is sent.
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let mut pipe = submitter.0.stderr.take().unwrap();
        let stderr = stderr.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 1024];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                stderr
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let client = coordinator.control().await;
    let run_id = wait_until(Duration::from_secs(60), "the run to be followed", || {
        let client = client.clone();
        let following = stderr.lock().unwrap().lines().any(|l| l.starts_with('['));
        async move {
            match list_runs(&client).await.first() {
                Some(run) if following => Some(run.run_id.clone()),
                _ => None,
            }
        }
    })
    .await;
    let status = Command::new("kill")
        .args(["-INT", &submitter.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let (code, _) = exited(submitter, Duration::from_secs(30));
    reader.join().unwrap();
    let stderr = stderr.lock().unwrap().clone();
    assert_eq!(code, Some(8), "{stderr}");
    assert!(
        stderr.contains(&format!("abfleet watch {run_id}")),
        "{stderr}"
    );

    let out = tmp.path().join("watched");
    let watched = abfleet(
        tmp.path(),
        &[
            "watch",
            &run_id,
            "--coordinator",
            &url,
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(watched.status.code(), Some(0), "{}", output_text(&watched));
    let report = abfleet_core::report::Report::from_json(
        &std::fs::read_to_string(out.join("report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (report.run_id.as_str(), report.status.as_str()),
        (run_id.as_str(), "done")
    );
}

/// Regression (found by cli/tests/deb_package.rs: the package's upgrade restarted the agent
/// and a stop right after killed it by SIGINT): a stop signal that arrives while the agent
/// starts up — here while it probes the hardware, held inside a `nvidia-smi` on PATH until the
/// signal was sent — stops it cleanly once it has started: exit 0, not death by the signal.
#[test]
fn sigterm_during_the_agents_start_up_stops_it_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let (probing, go) = (tmp.path().join("probing"), tmp.path().join("go"));
    let nvidia_smi = bin.join("nvidia-smi");
    std::fs::write(
        &nvidia_smi,
        format!(
            "#!/bin/sh\ntouch '{}'\nwhile [ ! -e '{}' ]; do sleep 0.05; done\nexit 9\n",
            probing.display(),
            go.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&nvidia_smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let agent = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args(["agent", "--coordinator"])
            .arg(format!("http://127.0.0.1:{}", free_port()))
            .arg("--work-dir")
            .arg(tmp.path().join("agent"))
            .env("PATH", path)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    while !probing.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the agent never ran the nvidia-smi on PATH"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    terminate(&agent.0);
    std::fs::write(&go, "").unwrap();
    let (code, stderr) = exited(agent, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("abfleet agent: SIGTERM, stopping"),
        "{stderr}"
    );
}
