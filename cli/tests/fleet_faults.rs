//! Faults provoked for real (docs/reliability.md): agents and coordinators as real `abfleet`
//! processes killed with SIGKILL, connections cut by a TCP proxy on loopback, real SQLite
//! files read back to check that every cell is stored exactly once.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use abfleet_coordinator::store::Store;
use abfleet_coordinator::CoordinatorConfig;
use abfleet_core::report::render_markdown;
use abfleet_core::JobId;
use abfleet_proto::pb::control_service_client::ControlServiceClient;
use support::*;
use tonic::transport::Channel;

/// Four cells (one fork-only) of 120 frames and 5 pairs each: slow enough that an agent can
/// be killed between the first stored cell and the last.
fn slow_spec(dir: &Path) -> PathBuf {
    SpecOptions {
        workloads: &["psnr", "motion", "float_ssim", "motion_v2"],
        runs: 5,
        frames: 120,
        ..SpecOptions::path()
    }
    .write(dir, "spec.toml")
}

/// A real `abfleet` process, SIGKILLed (no goodbye, the way hosts die) by [`Process::kill`]
/// or when dropped, so a failing test leaves none behind.
struct Process(Child);

impl Process {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

fn spawn_agent(url: &str, work_dir: &Path) -> Process {
    Process(
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args(["agent", "--coordinator", url, "--work-dir"])
            .arg(work_dir)
            .spawn()
            .unwrap(),
    )
}

/// `abfleet coordinator` with its default lease and heartbeat, on a fixed port.
fn spawn_coordinator(port: u16, data_dir: &Path) -> Process {
    Process(
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args(["coordinator", "--listen", &format!("127.0.0.1:{port}")])
            .arg("--data-dir")
            .arg(data_dir)
            .spawn()
            .unwrap(),
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn control_at(url: &str) -> ControlServiceClient<Channel> {
    wait_until(Duration::from_secs(30), "the coordinator to listen", || {
        let url = url.to_string();
        async move { ControlServiceClient::connect(url).await.ok() }
    })
    .await
}

/// The events of one attempt have sequence numbers 0..n: no gap, no duplicate.
async fn assert_events_contiguous(store: &Store, job_id: JobId, attempt: u32) {
    let events = store.events(job_id, attempt).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..events.len() as u64).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_agents_job_resumes_elsewhere_keeping_the_cells_already_stored() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = slow_spec(tmp.path());
    let data_dir = tmp.path().join("data");
    // Default settings: the requeue time measured here is the one operators get.
    let config = CoordinatorConfig::default();
    let lease = config.lease;
    let coordinator = TestCoordinator::start(&data_dir, config).await;
    let mut doomed = spawn_agent(&coordinator.url(), &tmp.path().join("doomed"));
    let mut client = coordinator.control().await;
    let run_id = submit(&mut client, &spec).await;
    let store = Store::open(&data_dir).unwrap();
    let job_id = only_job(&store, &run_id).await;

    wait_for_a_stored_cell(&store, job_id).await;
    doomed.kill();
    let killed_at = Instant::now();
    let at_kill: Vec<u32> = store
        .stored_cells(job_id)
        .await
        .unwrap()
        .into_iter()
        .map(|(attempt, index)| {
            assert_eq!(attempt, 1);
            index
        })
        .collect();
    assert!(
        !at_kill.is_empty() && at_kill.len() < 4,
        "the job must be part-way when its agent dies: {at_kill:?}"
    );

    let _rescuer = TestAgent::start(&coordinator.url(), &tmp.path().join("rescuer"));
    let requeued_after = wait_until(Duration::from_secs(90), "attempt 2 to be leased", || {
        let store = store.clone();
        async move {
            let job = store.job(job_id).await.unwrap().unwrap();
            (job.attempt >= 2).then(|| killed_at.elapsed())
        }
    })
    .await;
    eprintln!(
        "requeue after SIGKILL with default settings (lease {lease:?}): {:.1} s",
        requeued_after.as_secs_f64()
    );
    // The lease runs out (at most `lease` after the last heartbeat), then the reaper, which
    // looks every lease/4, requeues it and the waiting agent is offered it at once.
    assert!(
        requeued_after <= lease + lease / 4 + Duration::from_secs(3),
        "requeued after {requeued_after:?}"
    );

    let report = wait_for_report(&mut client, &run_id, Duration::from_secs(240)).await;
    assert_eq!(report.status, "done", "{:?}", report.errors);
    assert_eq!(report.exit_code, 0, "{:?}", report.errors);
    assert_eq!(report.attempts, 2);
    assert_eq!(report.cells.len(), 4);
    assert_each_cell_stored_once(&store, job_id, 4).await;
    // The kept cells are attempt 1's measurements; attempt 2 measured only the others.
    for cell in &report.cells {
        let expected = if at_kill.contains(&cell.index) { 1 } else { 2 };
        assert_eq!(cell.attempt, Some(expected), "cell {}", cell.index);
    }
    let rest: Vec<u32> = (0..4).filter(|i| !at_kill.contains(i)).collect();
    let history = &report.attempt_history;
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(history[0].measured_cells, at_kill);
    assert!(history[0].kept_cells.is_empty());
    assert!(
        history[0]
            .ended
            .as_deref()
            .is_some_and(|e| e.contains("lease of attempt 1 expired")),
        "{history:?}"
    );
    assert_eq!(history[1].kept_cells, at_kill);
    assert_eq!(history[1].kept_from, vec![1]);
    assert_eq!(history[1].measured_cells, rest);
    assert_eq!(history[1].ended.as_deref(), Some("done"));
    assert_ne!(history[0].agent_id, history[1].agent_id);
    let markdown = render_markdown(&report);
    let line = format!(
        "resumed: {} kept from attempt 1, {} measured; done",
        if at_kill.len() == 1 {
            "1 cell".to_string()
        } else {
            format!("{} cells", at_kill.len())
        },
        rest.len()
    );
    assert!(markdown.contains(&line), "{line} not in:\n{markdown}");
    // The resumed attempt still built both sides: the builds are needed for its cells.
    assert!(report.upstream.build.is_some() && report.fork.build.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_killed_mid_run_restarts_on_its_data_dir_and_the_run_completes() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = slow_spec(tmp.path());
    let data_dir = tmp.path().join("data");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut coordinator = spawn_coordinator(port, &data_dir);
    let mut client = control_at(&url).await;
    // In this process, so the test can look at its spool; it redials by itself.
    let agent = TestAgent::start(&url, &tmp.path().join("agent"));
    let run_id = submit(&mut client, &spec).await;
    let store = Store::open(&data_dir).unwrap();
    let job_id = only_job(&store, &run_id).await;

    wait_for_a_stored_cell(&store, job_id).await;
    coordinator.kill();
    let at_kill = store.stored_cells(job_id).await.unwrap();
    assert!(at_kill.len() < 4, "the run must be part-way: {at_kill:?}");
    // The agent keeps timing; what it measures waits in its spool.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let restarted_at = Instant::now();
    let _coordinator = spawn_coordinator(port, &data_dir);
    let mut client = control_at(&url).await;
    let report = wait_for_report(&mut client, &run_id, Duration::from_secs(240)).await;
    eprintln!(
        "coordinator restart: run finished {:.1} s after the new process started",
        restarted_at.elapsed().as_secs_f64()
    );

    assert_eq!(report.status, "done", "{:?}", report.errors);
    assert_eq!(report.exit_code, 0, "{:?}", report.errors);
    assert_eq!(report.cells.len(), 4);
    assert_eq!(
        report.attempts, 1,
        "the lease survived the restart in the store: the job was not requeued"
    );
    assert_each_cell_stored_once(&store, job_id, 4).await;
    assert_events_contiguous(&store, job_id, 1).await;
    agent.stop().await;
}
