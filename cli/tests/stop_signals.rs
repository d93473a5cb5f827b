//! SIGTERM — what systemd, Kubernetes and `docker stop` send — stops `abfleet coordinator`
//! and `abfleet agent` as cleanly as Ctrl-C (issue 25): real processes, a real run. The
//! agent stopped mid-job exits 0 having delivered what it measured; the coordinator exits 0
//! and its store opens again with every stored cell.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use abfleet_coordinator::store::Store;
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
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args([
                "coordinator",
                "--plaintext",
                "--listen",
                &format!("127.0.0.1:{port}"),
            ])
            .arg("--data-dir")
            .arg(&data_dir)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut client = wait_until(Duration::from_secs(60), "the coordinator to listen", || {
        let url = url.clone();
        async move {
            abfleet_proto::pb::control_service_client::ControlServiceClient::connect(url)
                .await
                .ok()
        }
    })
    .await;
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
    let job_id = store.jobs_of_run(run_id.parse().unwrap()).await.unwrap()[0].job_id;
    wait_until(Duration::from_secs(180), "a stored cell", || {
        let store = store.clone();
        async move { (!store.stored_cells(job_id).await.unwrap().is_empty()).then_some(()) }
    })
    .await;

    terminate(&agent.0);
    let (code, stderr) = exited(agent, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("abfleet agent: SIGTERM, stopping"),
        "{stderr}"
    );
    let kept = store.stored_cells(job_id).await.unwrap();
    assert!(!kept.is_empty());
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
    assert_eq!(store.stored_cells(job_id).await.unwrap(), kept);
}
