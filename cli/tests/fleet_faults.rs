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
use support::*;

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

/// An `abfleet agent` process, so that it can die the way hosts die: SIGKILL, no goodbye.
fn spawn_agent(url: &str, work_dir: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(["agent", "--coordinator", url, "--work-dir"])
        .arg(work_dir)
        .spawn()
        .unwrap()
}

fn kill(child: &mut Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The only job of a run.
async fn only_job(store: &Store, run_id: &str) -> JobId {
    let jobs = store.jobs_of_run(run_id.parse().unwrap()).await.unwrap();
    assert_eq!(jobs.len(), 1);
    jobs[0].job_id
}

/// Waits until the coordinator has stored at least one cell of the job.
async fn wait_for_a_stored_cell(store: &Store, job_id: JobId) {
    wait_until(Duration::from_secs(180), "the first stored cell", || {
        let store = store.clone();
        async move { (!store.stored_cells(job_id).await.unwrap().is_empty()).then_some(()) }
    })
    .await;
}

/// Every cell index of the job stored exactly once, across all its attempts.
async fn assert_each_cell_stored_once(store: &Store, job_id: JobId, cells: u32) {
    let stored = store.stored_cells(job_id).await.unwrap();
    let mut indexes: Vec<u32> = stored.iter().map(|(_, index)| *index).collect();
    indexes.sort_unstable();
    assert_eq!(
        indexes,
        (0..cells).collect::<Vec<_>>(),
        "each cell stored exactly once across attempts: {stored:?}"
    );
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
    kill(&mut doomed);
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
