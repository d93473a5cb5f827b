//! Faults provoked for real (docs/reliability.md): agents and coordinators as real `abfleet`
//! processes killed with SIGKILL, connections cut by a TCP proxy on loopback, real SQLite
//! files read back to check that every cell is stored exactly once.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use abfleet_coordinator::store::Store;
use abfleet_coordinator::CoordinatorConfig;
use abfleet_core::JobId;
use abfleet_proto::pb::control_service_client::ControlServiceClient;
use abfleet_render::render_markdown;
use support::*;
use tonic::transport::Channel;

/// Four cells (one fork-only) of 240 frames and 5 pairs each: slow enough (a few seconds a
/// cell here) that an agent can be killed between the first stored cell and the last.
fn slow_spec(dir: &Path) -> PathBuf {
    SpecOptions {
        workloads: &["psnr", "motion", "float_ssim", "motion_v2"],
        runs: 5,
        frames: 240,
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
    Process(coordinator_command(port, data_dir).spawn().unwrap())
}

/// The events of one attempt have sequence numbers 0..n: no gap, no duplicate.
async fn assert_events_contiguous(store: &Store, job_id: JobId, attempt: u32) {
    let events = store.events().of_attempt(job_id, attempt).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..events.len() as u64).collect::<Vec<_>>());
}

/// Whether the agent's spool holds a cell the coordinator has not acknowledged: the agent
/// measured it while cut off.
fn spool_holds_a_cell(work_dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(work_dir.join("spool")) else {
        return false;
    };
    entries.flatten().any(|entry| {
        std::fs::read_to_string(entry.path())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter_map(|event| event["payload_json"].as_str().map(str::to_string))
            .filter_map(|payload| serde_json::from_str::<serde_json::Value>(&payload).ok())
            .any(|payload| payload["kind"] == "cell")
    })
}

/// The only job of a run.
async fn only_job(store: &Store, run_id: &str) -> JobId {
    let jobs = store.jobs().of_run(run_id.parse().unwrap()).await.unwrap();
    assert_eq!(jobs.len(), 1);
    jobs[0].job_id
}

/// Waits until the coordinator has stored at least one cell of the job.
async fn wait_for_a_stored_cell(store: &Store, job_id: JobId) {
    wait_until(Duration::from_secs(180), "the first stored cell", || {
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
}

/// Every cell index of the job stored exactly once, across all its attempts.
async fn assert_each_cell_stored_once(store: &Store, job_id: JobId, cells: u32) {
    let stored = store.events().stored_cells(job_id).await.unwrap();
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
    // A lease and a grace far longer than the test may wait: the requeue must come from the
    // broken session alone (issue 23, 9c), not from either of them.
    let config = CoordinatorConfig {
        lease: Duration::from_secs(300),
        agent_lost_after: Duration::from_secs(300),
        ..CoordinatorConfig::default()
    };
    let coordinator = TestCoordinator::start(&data_dir, config).await;
    let mut doomed = spawn_agent(&coordinator.url(), &tmp.path().join("doomed"));
    let mut client = coordinator.control().await;
    let run_id = submit(&mut client, &spec).await;
    let store = Store::open(&data_dir).unwrap();
    let job_id = only_job(&store, &run_id).await;

    wait_for_a_stored_cell(&store, job_id).await;
    // The rescuer waits idle before the kill, so the time measured is the requeue's alone.
    let _rescuer = TestAgent::start(&coordinator.url(), &tmp.path().join("rescuer"));
    wait_until(Duration::from_secs(60), "the rescuer to register", || {
        let store = store.clone();
        async move { (store.agents().all().await.unwrap().len() == 2).then_some(()) }
    })
    .await;
    doomed.kill();
    let killed_at = Instant::now();
    let at_kill: Vec<u32> = store
        .events()
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

    let requeued_after = wait_until(Duration::from_secs(90), "attempt 2 to be leased", || {
        let store = store.clone();
        async move {
            let job = store.jobs().job(job_id).await.unwrap().unwrap();
            (job.attempt >= 2).then(|| killed_at.elapsed())
        }
    })
    .await;
    eprintln!(
        "requeue after SIGKILL (lease and agent_lost_after 300 s): {:.2} s",
        requeued_after.as_secs_f64()
    );
    // The kernel closes the killed agent's connection, the coordinator sees its session
    // break and requeues the job at once; the waiting agent is offered it then. Far under
    // the 300 s either the lease or the grace would have taken.
    assert!(
        requeued_after <= Duration::from_secs(30),
        "requeued after {requeued_after:?}"
    );

    let report = wait_for_report(&mut client, &run_id, Duration::from_secs(240)).await;
    assert_eq!(report.status, "done", "{:?}", report.errors);
    assert_eq!(report.exit_code, 0, "{:?}", report.errors);
    assert_eq!(report.attempts, 2);
    assert!(
        report.errors.is_empty(),
        "the lost attempt is history, not a problem of the finished run: {:?}",
        report.errors
    );
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
            .is_some_and(|e| e.contains("session broke") && e.contains("attempt 1")),
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
    let port = support::free_port();
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
    let at_kill = store.events().stored_cells(job_id).await.unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_outage_shorter_than_the_lease_loses_nothing_and_repeats_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = slow_spec(tmp.path());
    let data_dir = tmp.path().join("data");
    let config = CoordinatorConfig::default();
    let lease = config.lease;
    let coordinator = TestCoordinator::start(&data_dir, config).await;
    let proxy = Proxy::start(coordinator.addr).await;
    let agent = TestAgent::start(&proxy.url(), &tmp.path().join("agent"));
    let mut client = coordinator.control().await;
    let run_id = submit(&mut client, &spec).await;
    let store = Store::open(&data_dir).unwrap();
    let job_id = only_job(&store, &run_id).await;

    wait_for_a_stored_cell(&store, job_id).await;
    let cut_at = Instant::now();
    proxy.outage();
    // At least 5 s, and until the agent has measured a cell it could not deliver.
    tokio::time::sleep(Duration::from_secs(5)).await;
    wait_until(
        Duration::from_secs(20),
        "a cell spooled while cut off",
        || {
            let work_dir = agent.work_dir.clone();
            async move { spool_holds_a_cell(&work_dir).then_some(()) }
        },
    )
    .await;
    let outage = cut_at.elapsed();
    assert!(
        outage < lease,
        "the outage must stay shorter than the lease"
    );
    proxy.restore();
    let report = wait_for_report(&mut client, &run_id, Duration::from_secs(240)).await;
    eprintln!(
        "network outage of {:.1} s: run finished {:.1} s after the cut",
        outage.as_secs_f64(),
        cut_at.elapsed().as_secs_f64()
    );

    assert_eq!(report.status, "done", "{:?}", report.errors);
    assert_eq!(report.exit_code, 0, "{:?}", report.errors);
    assert_eq!(report.cells.len(), 4);
    assert_eq!(
        report.attempts, 1,
        "an outage inside the lease requeues nothing"
    );
    assert_each_cell_stored_once(&store, job_id, 4).await;
    assert_events_contiguous(&store, job_id, 1).await;
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_longer_than_the_lease_gives_the_lease_back_when_nobody_took_the_job() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = slow_spec(tmp.path());
    let data_dir = tmp.path().join("data");
    let config = CoordinatorConfig {
        lease: Duration::from_secs(3),
        heartbeat_interval: Duration::from_millis(500),
        max_attempts: 3,
        agent_lost_after: Duration::from_secs(2),
        ..CoordinatorConfig::default()
    };
    let coordinator = TestCoordinator::start(&data_dir, config).await;
    let proxy = Proxy::start(coordinator.addr).await;
    let agent = TestAgent::start(&proxy.url(), &tmp.path().join("agent"));
    let mut client = coordinator.control().await;
    let run_id = submit(&mut client, &spec).await;
    let store = Store::open(&data_dir).unwrap();
    let job_id = only_job(&store, &run_id).await;

    wait_for_a_stored_cell(&store, job_id).await;
    proxy.outage();
    // The lease runs out and the reaper requeues the job; no other agent is there to take it.
    wait_until(Duration::from_secs(30), "the lease to lapse", || {
        let store = store.clone();
        async move {
            let job = store.jobs().job(job_id).await.unwrap().unwrap();
            (job.state == abfleet_core::lifecycle::JobState::Queued).then_some(())
        }
    })
    .await;
    wait_until(
        Duration::from_secs(30),
        "a cell spooled while cut off",
        || {
            let work_dir = agent.work_dir.clone();
            async move { spool_holds_a_cell(&work_dir).then_some(()) }
        },
    )
    .await;
    proxy.restore();
    let report = wait_for_report(&mut client, &run_id, Duration::from_secs(240)).await;

    assert_eq!(report.status, "done", "{:?}", report.errors);
    assert_eq!(report.exit_code, 0, "{:?}", report.errors);
    assert_eq!(report.cells.len(), 4);
    assert_eq!(
        report.attempts, 1,
        "the same attempt went on: nothing was measured twice"
    );
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_each_cell_stored_once(&store, job_id, 4).await;
    assert_events_contiguous(&store, job_id, 1).await;
    assert_eq!(report.attempt_history.len(), 1);
    assert_eq!(report.attempt_history[0].ended.as_deref(), Some("done"));
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_longer_than_the_lease_while_another_agent_takes_the_job_repeats_only_the_cut_off_work(
) {
    let tmp = tempfile::tempdir().unwrap();
    let spec = slow_spec(tmp.path());
    let data_dir = tmp.path().join("data");
    let config = CoordinatorConfig {
        lease: Duration::from_secs(3),
        heartbeat_interval: Duration::from_millis(500),
        max_attempts: 3,
        agent_lost_after: Duration::from_secs(2),
        ..CoordinatorConfig::default()
    };
    let coordinator = TestCoordinator::start(&data_dir, config).await;
    let proxy = Proxy::start(coordinator.addr).await;
    let cut_off = TestAgent::start(&proxy.url(), &tmp.path().join("cut-off"));
    let mut client = coordinator.control().await;
    let run_id = submit(&mut client, &spec).await;
    let store = Store::open(&data_dir).unwrap();
    let job_id = only_job(&store, &run_id).await;

    wait_for_a_stored_cell(&store, job_id).await;
    proxy.outage();
    let before_outage: Vec<u32> = store
        .events()
        .stored_cells(job_id)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, index)| index)
        .collect();
    // Another agent is there when the lease lapses, and takes the job as attempt 2.
    let _other = TestAgent::start(&coordinator.url(), &tmp.path().join("other"));
    wait_until(Duration::from_secs(30), "attempt 2 to be leased", || {
        let store = store.clone();
        async move { (store.jobs().job(job_id).await.unwrap().unwrap().attempt == 2).then_some(()) }
    })
    .await;
    // Still cut off, it goes on measuring attempt 1 into its spool.
    wait_until(
        Duration::from_secs(30),
        "a cell spooled while cut off",
        || {
            let work_dir = cut_off.work_dir.clone();
            async move { spool_holds_a_cell(&work_dir).then_some(()) }
        },
    )
    .await;
    proxy.restore();
    let report = wait_for_report(&mut client, &run_id, Duration::from_secs(240)).await;

    assert_eq!(report.status, "done", "{:?}", report.errors);
    assert_eq!(report.attempts, 2);
    assert_eq!(report.cells.len(), 4);
    // What the cut-off agent measured after the cut is refused and measured again by
    // attempt 2; what was stored before the cut is kept.
    assert_each_cell_stored_once(&store, job_id, 4).await;
    let history = &report.attempt_history;
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(history[1].kept_cells, history[0].measured_cells);
    assert!(history[0].measured_cells.len() >= before_outage.len());
    assert_eq!(history[1].ended.as_deref(), Some("done"));
    // The cut-off agent learns it lost the lease and drops its spool.
    wait_until(
        Duration::from_secs(30),
        "the cut-off agent's spool to go",
        || {
            let work_dir = cut_off.work_dir.clone();
            async move { (!spool_holds_a_cell(&work_dir)).then_some(()) }
        },
    )
    .await;
}

/// `abfleet ARGS…` as an operator types it; its stdout, after asserting it succeeded.
async fn abfleet(args: &[&str]) -> String {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(args)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "abfleet {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).to_string()
}

/// The line of `abfleet agents` for one agent.
async fn agents_line(url: &str, agent_id: &str) -> String {
    abfleet(&["agents", "--coordinator", url])
        .await
        .lines()
        .find(|line| line.starts_with(agent_id))
        .unwrap_or_default()
        .to_string()
}

fn process_is_gone(pid: u32) -> bool {
    // A zombie still has its /proc entry: gone means reaped too.
    !Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_job_and_kills_its_hanging_benchmark() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("benchmark.pid");
    // The fork's "binary" says its pid and hangs: only the cancel can end it before the
    // spec's 60 s timeout.
    let fork_build = format!(
        r#"commands = [["sh", "-c", "mkdir -p build && printf '#!/bin/sh\\necho $$ > {}\\nexec sleep 600\\n' > build/vmaf && chmod +x build/vmaf"]]"#,
        pid_file.display()
    );
    let spec = SpecOptions {
        fork_build: &fork_build,
        workloads: &["psnr"],
        ..SpecOptions::path()
    }
    .write(tmp.path(), "spec.toml");
    let data_dir = tmp.path().join("data");
    let coordinator = TestCoordinator::start(&data_dir, CoordinatorConfig::default()).await;
    let agent = TestAgent::start(&coordinator.url(), &tmp.path().join("agent"));
    let mut client = coordinator.control().await;
    let run_id = submit(&mut client, &spec).await;
    let pid: u32 = wait_until(
        Duration::from_secs(120),
        "the hanging benchmark to start",
        || {
            let pid_file = pid_file.clone();
            async move {
                let pid = std::fs::read_to_string(&pid_file)
                    .ok()?
                    .trim()
                    .parse()
                    .ok()?;
                (!process_is_gone(pid)).then_some(pid)
            }
        },
    )
    .await;

    // A unique prefix names the run, as `abfleet runs` shows it (issue 39).
    let said = abfleet(&["cancel", &run_id[..8], "--coordinator", &coordinator.url()]).await;
    assert!(said.contains(&format!("run {run_id} cancelled")), "{said}");
    let cancelled_at = Instant::now();
    wait_until(
        Duration::from_secs(15),
        "the benchmark to be killed",
        || async move { process_is_gone(pid).then_some(()) },
    )
    .await;
    eprintln!(
        "cancel: the hanging benchmark was gone {:.2} s after `abfleet cancel` returned",
        cancelled_at.elapsed().as_secs_f64()
    );
    let report = wait_for_report(&mut client, &run_id, Duration::from_secs(30)).await;
    assert_eq!(report.status, "cancelled");
    assert_eq!(report.exit_code, abfleet_core::exit::CANCELLED);
    // The agent is free again: it reports idle, holding nothing.
    let agents = list_agents(&client).await;
    wait_until(Duration::from_secs(15), "the agent to be idle", || {
        let client = client.clone();
        async move {
            list_agents(&client)
                .await
                .iter()
                .all(|a| a.state == "idle")
                .then_some(())
        }
    })
    .await;
    assert_eq!(agents.len(), 1);
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_agent_finishes_its_job_and_takes_no_new_one_until_resumed() {
    let tmp = tempfile::tempdir().unwrap();
    let long = slow_spec(tmp.path());
    let short = SpecOptions {
        workloads: &["psnr"],
        ..SpecOptions::path()
    }
    .write(tmp.path(), "short.toml");
    let data_dir = tmp.path().join("data");
    let coordinator = TestCoordinator::start(&data_dir, CoordinatorConfig::default()).await;
    let url = coordinator.url();
    let _agent = spawn_agent(&url, &tmp.path().join("agent"));
    let mut client = coordinator.control().await;
    wait_for_agents(&client, 1).await;
    let agent_id = list_agents(&client).await[0].agent_id.clone();
    let first = submit(&mut client, &long).await;
    wait_until(Duration::from_secs(60), "the agent to be busy", || {
        let client = client.clone();
        async move { (list_agents(&client).await[0].state == "busy").then_some(()) }
    })
    .await;

    let said = abfleet(&["drain", &agent_id[..6], "--coordinator", &url]).await;
    assert!(
        said.contains(&format!("agent {agent_id} is draining")),
        "{said}"
    );
    let line = agents_line(&url, &agent_id).await;
    assert!(line.contains(" draining "), "{line}");
    let second = submit(&mut client, &short).await;

    // The job it runs finishes; the next one waits.
    let report = wait_for_report(&mut client, &first, Duration::from_secs(240)).await;
    assert_eq!(report.status, "done", "{:?}", report.errors);
    wait_until(Duration::from_secs(30), "the agent to be drained", || {
        let client = client.clone();
        async move { (list_agents(&client).await[0].state == "drained").then_some(()) }
    })
    .await;
    // Long enough for its "ready" to have been answered with an offer, were it not drained.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(report_state(&mut client, &second).await, "queued");
    let line = agents_line(&url, &agent_id).await;
    assert!(line.contains(" drained "), "{line}");

    let said = abfleet(&["drain", &agent_id, "--resume", "--coordinator", &url]).await;
    assert!(said.contains("takes jobs again"), "{said}");
    let report = wait_for_report(&mut client, &second, Duration::from_secs(120)).await;
    assert_eq!(report.status, "done", "{:?}", report.errors);
}

async fn report_state(client: &mut ControlServiceClient<Channel>, run_id: &str) -> String {
    report(client, run_id).await.status
}

/// A small deterministic generator (xorshift64*), so a failing soak replays with its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_three_agents_twelve_runs_random_sigkills_lose_and_repeat_no_cell() {
    const AGENTS: usize = 3;
    const RUNS: usize = 12;
    const KILLS: usize = 20;
    const MAX_ATTEMPTS: u32 = 6;
    let seed = std::env::var("ABFLEET_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x05ee_dabf_1ee7_u64);
    let mut rng = Rng(seed | 1);
    let tmp = tempfile::tempdir().unwrap();
    let spec = SpecOptions {
        workloads: &["psnr", "float_ssim", "motion"],
        runs: 3,
        frames: 120,
        ..SpecOptions::path()
    }
    .write(tmp.path(), "spec.toml");
    let cells_per_job = 3u32;
    let data_dir = tmp.path().join("data");
    let config = CoordinatorConfig {
        max_attempts: MAX_ATTEMPTS,
        ..CoordinatorConfig::default()
    };
    let coordinator = TestCoordinator::start(&data_dir, config).await;
    let url = coordinator.url();
    let work_dirs: Vec<PathBuf> = (0..AGENTS)
        .map(|i| tmp.path().join(format!("agent-{i}")))
        .collect();
    let mut agents: Vec<Process> = work_dirs.iter().map(|w| spawn_agent(&url, w)).collect();
    let mut client = coordinator.control().await;
    wait_for_agents(&client, AGENTS).await;
    let started = Instant::now();
    let mut run_ids = Vec::new();
    for _ in 0..RUNS {
        run_ids.push(submit(&mut client, &spec).await);
    }
    let store = Store::open(&data_dir).unwrap();

    // Kill a random agent now and then, restarting it at once on its work dir (the same
    // agent id), until the kills are spent; then let the fleet finish.
    let mut kills = 0;
    let all_finished = |client: ControlServiceClient<Channel>, run_ids: Vec<String>| async move {
        for run_id in &run_ids {
            let mut client = client.clone();
            let status = report(&mut client, run_id).await.status;
            if !matches!(status.as_str(), "done" | "failed" | "cancelled") {
                return false;
            }
        }
        true
    };
    while kills < KILLS && !all_finished(client.clone(), run_ids.clone()).await {
        tokio::time::sleep(Duration::from_millis(700 + rng.below(1500))).await;
        let victim = rng.below(AGENTS as u64) as usize;
        agents[victim].kill();
        agents[victim] = spawn_agent(&url, &work_dirs[victim]);
        kills += 1;
    }
    let deadline = Duration::from_secs(110);
    wait_until(deadline, "every run to finish", || {
        let finished = all_finished(client.clone(), run_ids.clone());
        async move { finished.await.then_some(()) }
    })
    .await;
    let elapsed = started.elapsed();

    let (mut done, mut failed, mut attempts, mut resumed, mut cells) = (0, 0, 0, 0, 0);
    for run_id in &run_ids {
        let report = report(&mut client, run_id).await;
        let job_id = only_job(&store, run_id).await;
        let stored = store.events().stored_cells(job_id).await.unwrap();
        let mut indexes: Vec<u32> = stored.iter().map(|(_, i)| *i).collect();
        indexes.sort_unstable();
        let distinct = {
            let mut d = indexes.clone();
            d.dedup();
            d
        };
        assert_eq!(
            indexes, distinct,
            "run {run_id}: a cell stored twice: {stored:?}"
        );
        attempts += report.attempts;
        resumed += report
            .attempt_history
            .iter()
            .filter(|a| !a.kept_cells.is_empty())
            .count();
        cells += stored.len();
        match report.status.as_str() {
            "done" => {
                done += 1;
                assert_eq!(
                    indexes,
                    (0..cells_per_job).collect::<Vec<_>>(),
                    "run {run_id}: every cell stored once"
                );
                assert_eq!(report.cells.len() as u32, cells_per_job);
            }
            "failed" => {
                // Explicitly failed: the kills hit its agent on every attempt it had.
                failed += 1;
                let history: Vec<String> =
                    report.attempt_history.iter().map(|a| a.line()).collect();
                eprintln!("run {run_id} failed: {:?}; {history:#?}", report.errors);
                assert_eq!(report.attempts, MAX_ATTEMPTS, "{history:#?}");
                assert!(
                    report
                        .errors
                        .iter()
                        .any(|e| e.contains(&format!("gave up after {MAX_ATTEMPTS} attempt(s)"))),
                    "a failed run says why: {:?}",
                    report.errors
                );
            }
            other => panic!("run {run_id} ended {other}"),
        }
    }
    eprintln!(
        "soak (seed {seed:#x}): {RUNS} runs on {AGENTS} agents, {kills} SIGKILLs each restarted at once, \
         {:.1} s; {done} done, {failed} failed; {attempts} attempts, {resumed} resumed with kept cells; \
         {cells} cells stored, 0 duplicated, 0 missing in done runs",
        elapsed.as_secs_f64()
    );
    // Issue 38: each victim comes back at once with its spool, so its attempt goes on; on a
    // loaded host 5 of 30 soaks had failed a run "gave up after 6 attempt(s)".
    assert_eq!(failed, 0, "a quick restart costs no attempt");
    assert!(kills > 0);
}

/// Issue 38: an agent SIGKILLed mid-job and back at once on its work dir (its spool intact,
/// its builds cached) used to lose its attempt all the same. Now it resumes it: the run
/// finishes on attempt 1, the cells stored before the kill are kept, none is measured twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_and_back_at_once_resumes_its_attempt() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = slow_spec(tmp.path());
    let data_dir = tmp.path().join("data");
    let coordinator = TestCoordinator::start(&data_dir, CoordinatorConfig::default()).await;
    let work_dir = tmp.path().join("agent");
    let mut agent = spawn_agent(&coordinator.url(), &work_dir);
    let mut client = coordinator.control().await;
    let run_id = submit(&mut client, &spec).await;
    let store = Store::open(&data_dir).unwrap();
    let job_id = only_job(&store, &run_id).await;

    wait_for_a_stored_cell(&store, job_id).await;
    agent.kill();
    let at_kill = store.events().stored_cells(job_id).await.unwrap();
    assert!(at_kill.len() < 4, "part-way when killed: {at_kill:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _back = spawn_agent(&coordinator.url(), &work_dir);

    let report = wait_for_report(&mut client, &run_id, Duration::from_secs(240)).await;
    assert_eq!(report.status, "done", "{:?}", report.errors);
    assert_eq!(report.exit_code, 0, "{:?}", report.errors);
    assert_eq!(report.attempts, 1, "{:#?}", report.attempt_history);
    assert_eq!(report.cells.len(), 4);
    assert!(report.cells.iter().all(|cell| cell.attempt == Some(1)));
    assert_each_cell_stored_once(&store, job_id, 4).await;
    assert_events_contiguous(&store, job_id, 1).await;
    // The cells stored before the kill were not measured again.
    let stored = store.events().stored_cells(job_id).await.unwrap();
    for cell in &at_kill {
        assert!(stored.contains(cell), "{cell:?} kept: {stored:?}");
    }
}

/// A backup of the data dir `from`'s store into `to`, taken while its coordinator runs.
fn copy_store(from: &Path, to: &Path) {
    let db = rusqlite::Connection::open(from.join("abfleet.sqlite3")).unwrap();
    // What `sqlite3 DB .backup` does (docs/operations.md): a consistent copy taken while
    // the coordinator writes.
    db.execute(
        "VACUUM INTO ?1",
        [to.join("abfleet.sqlite3").to_str().unwrap()],
    )
    .unwrap();
}

/// Issue 23, case 8: docs/operations.md's restore (stop, copy the backup in, start) while
/// the agent works. Events the old store acknowledged after the backup are gone from the
/// restored one: the coordinator must not accept the agent's next events after that gap.
/// It asks for the missing ones (the agent resends them from its spool) or, when the agent
/// no longer has them, redoes the attempt keeping what the store has: every cell once, the
/// events of each attempt contiguous.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_while_the_agent_works_stores_every_cell_once() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = slow_spec(tmp.path());
    let data_dir = tmp.path().join("data");
    let backup_dir = tmp.path().join("backup");
    std::fs::create_dir_all(&backup_dir).unwrap();
    let port = support::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut coordinator = spawn_coordinator(port, &data_dir);
    let mut client = control_at(&url).await;
    let _agent = spawn_agent(&url, &tmp.path().join("agent"));
    let run_id = submit(&mut client, &spec).await;
    let store = Store::open(&data_dir).unwrap();
    let job_id = only_job(&store, &run_id).await;

    wait_for_a_stored_cell(&store, job_id).await;
    copy_store(&data_dir, &backup_dir);
    let at_backup = store.events().stored_cells(job_id).await.unwrap().len();
    let events_at_backup = store.events().of_attempt(job_id, 1).await.unwrap().len();
    // More is acknowledged after the backup: what the restore will lose.
    wait_until(
        Duration::from_secs(180),
        "a cell stored after the backup",
        || {
            let store = store.clone();
            async move {
                (store.events().stored_cells(job_id).await.unwrap().len() > at_backup).then_some(())
            }
        },
    )
    .await;
    let events_at_kill = store.events().of_attempt(job_id, 1).await.unwrap().len();
    drop(store);
    coordinator.kill();
    assert!(
        events_at_kill > events_at_backup,
        "the restore must lose acknowledged events: {events_at_backup} then {events_at_kill}"
    );

    // The restore, as docs/operations.md says it.
    std::fs::copy(
        backup_dir.join("abfleet.sqlite3"),
        data_dir.join("abfleet.sqlite3"),
    )
    .unwrap();
    for stale in ["abfleet.sqlite3-wal", "abfleet.sqlite3-shm"] {
        let _ = std::fs::remove_file(data_dir.join(stale));
    }
    let _coordinator = spawn_coordinator(port, &data_dir);
    let mut client = control_at(&url).await;
    let report = wait_for_report(&mut client, &run_id, Duration::from_secs(300)).await;
    let store = Store::open(&data_dir).unwrap();

    assert_eq!(report.status, "done", "{:?}", report.errors);
    assert_eq!(report.exit_code, 0, "{:?}", report.errors);
    assert_eq!(report.cells.len(), 4, "every cell in the report");
    assert_each_cell_stored_once(&store, job_id, 4).await;
    for attempt in 1..=report.attempts {
        assert_events_contiguous(&store, job_id, attempt).await;
    }
    let history = &report.attempt_history;
    eprintln!(
        "restore under load: {events_at_backup} events in the backup, {events_at_kill} at the kill; {} attempt(s): {history:?}",
        report.attempts
    );
    if report.attempts > 1 {
        // The agent no longer had the lost events: the report says the attempt was redone
        // and why.
        assert!(
            history[0]
                .ended
                .as_deref()
                .is_some_and(|e| e.contains("were lost")),
            "{history:?}"
        );
    }
}

/// `abfleet coordinator` on `port` in a mount namespace of its own, its `data_dir` a 16 MiB
/// tmpfs holding a copy of `prepared` and a file that takes all the space but `free_kib`;
/// its stderr to `log`. The tmpfs is the process's own: the test reaches it through
/// `/proc/PID/root`.
fn coordinator_on_a_full_disk(
    data_dir: &Path,
    prepared: &Path,
    free_kib: u32,
    port: u16,
    log: &Path,
) -> Process {
    let script = r#"set -e
mount -t tmpfs -o size=16m abfleet-full "$1"
cp -a "$2"/. "$1"/
dd if=/dev/zero of="$1/filler" bs=4k 2>/dev/null || true
[ "$3" = 0 ] || truncate -s -"$3"k "$1/filler"
shift 3
exec "$@""#;
    Process(
        Command::new("unshare")
            .args([
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
                "sh",
            ])
            .arg(data_dir)
            .arg(prepared)
            .arg(free_kib.to_string())
            .arg(env!("CARGO_BIN_EXE_abfleet"))
            .args(["coordinator", "--plaintext", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--data-dir")
            .arg(data_dir)
            .env("RUST_LOG", "info")
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("unshare (util-linux) runs the coordinator in a mount namespace"),
    )
}

/// Issue 23, case 6: a run whose jobs had all ended stayed `running` for good when the
/// coordinator died between the last job's end and the run's finish, or when the finish
/// failed on a full disk. The finish is one transaction, so such a kill leaves the store as
/// this test makes it (a finished run with its finish undone); the restarted coordinator
/// finds its data dir on a tmpfs with no space left (a mount namespace of its own: needs
/// root, fails without it). It must say loudly that the finish failed, keep serving, and
/// finish the run once the space is back, with the report it had.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_stranded_before_its_finish_on_a_full_disk_is_finished_once_space_returns() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = SpecOptions::path().write(tmp.path(), "spec.toml");
    let prepared = tmp.path().join("prepared");
    let port = support::free_port();
    let url = format!("http://127.0.0.1:{port}");

    // A run measured and finished for real, then its finish undone.
    let mut coordinator = spawn_coordinator(port, &prepared);
    let mut client = control_at(&url).await;
    let agent = spawn_agent(&url, &tmp.path().join("agent"));
    let run_id = submit(&mut client, &spec).await;
    let finished = wait_for_report(&mut client, &run_id, Duration::from_secs(240)).await;
    assert_eq!(finished.status, "done", "{:?}", finished.errors);
    drop(agent);
    coordinator.kill();
    {
        let db = rusqlite::Connection::open(prepared.join("abfleet.sqlite3")).unwrap();
        db.execute(
            "UPDATE runs SET state = 'running', exit_code = NULL, finished_ms = NULL WHERE run_id = ?1",
            [&run_id],
        )
        .unwrap();
        db.execute("DELETE FROM run_reports WHERE run_id = ?1", [&run_id])
            .unwrap();
        db.execute(
            "DELETE FROM generation_results WHERE run_id = ?1",
            [&run_id],
        )
        .unwrap();
        db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    }

    // Restarted on a disk with no space left at all, the coordinator cannot open its store
    // (SQLite grows its shared-memory file to open): it says so and what to do.
    let data_dir = tmp.path().join("data");
    std::fs::create_dir_all(&data_dir).unwrap();
    let log_path = tmp.path().join("coordinator.log");
    let mut none_left = coordinator_on_a_full_disk(&data_dir, &prepared, 0, port, &log_path);
    let status = none_left.0.wait().unwrap();
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(!status.success(), "{log}");
    assert!(
        log.contains("failed to open the store") && log.contains("free space"),
        "the error names the full disk:\n{log}"
    );
    assert!(!log.contains("another coordinator"), "{log}");

    // With 40 KiB left it opens the store, but the run's finish does not fit.
    let mut full = coordinator_on_a_full_disk(&data_dir, &prepared, 40, port, &log_path);
    let mut client = wait_until(
        Duration::from_secs(60),
        "the coordinator on a full disk to listen",
        || {
            let url = url.clone();
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let exited = full.0.try_wait().unwrap();
            async move {
                assert!(
                    exited.is_none(),
                    "the coordinator on a full disk exited ({exited:?}):\n{log}"
                );
                ControlServiceClient::connect(url).await.ok()
            }
        },
    )
    .await;
    // Through the coordinator's own mount namespace: where the filler is.
    let filler = PathBuf::from(format!("/proc/{}/root", full.0.id()))
        .join(data_dir.strip_prefix("/").unwrap())
        .join("filler");
    assert!(
        filler.exists(),
        "the tmpfs with the filler is not where the coordinator runs: {}",
        std::fs::read_to_string(&log_path).unwrap_or_default()
    );
    wait_until(
        Duration::from_secs(60),
        "the failed finish in the log",
        || {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            async move {
                (log.contains("ERROR") && log.contains("finishing the run failed")).then_some(log)
            }
        },
    )
    .await;
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        log.to_lowercase().contains("full"),
        "the log says why: the disk is full:\n{log}"
    );
    let stuck = report(&mut client, &run_id).await;
    assert_eq!(stuck.status, "running", "nothing can be stored yet");

    // The space comes back: the reaper's next pass finishes the run, with the report it had.
    std::fs::remove_file(&filler).unwrap();
    let space_back = Instant::now();
    let done = wait_for_report(&mut client, &run_id, Duration::from_secs(60)).await;
    eprintln!(
        "a run stranded on a full disk finished {:.1} s after the space came back",
        space_back.elapsed().as_secs_f64()
    );
    assert_eq!(done.status, "done", "{:?}", done.errors);
    assert_eq!(done.exit_code, finished.exit_code);
    assert_eq!(done.cells.len(), finished.cells.len());
    full.kill();
}
