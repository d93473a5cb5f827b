//! `abfleet-bench fleet`: the coordinator at fleet scale. A real coordinator process (this
//! binary, `coordinator --plaintext` on loopback, its SQLite store in a temporary data dir)
//! and N simulated agents in this process, each with its own gRPC session over a handful of
//! HTTP/2 connections, heartbeating at the default interval. Measured:
//! - registrations per second (N registers, 64 at a time);
//! - the coordinator's resident set with N agents connected and idle;
//! - dispatch latency with N agents idle: jobs submitted one at a time, from the submit call
//!   to the offer reaching an agent (p50, p99);
//! - event ingest: M jobs at once, each pushing E cell events (real `CellResult`s, ~3.6 KB of
//!   JSON each) in batches of B: cell events stored per second, from the first push to the
//!   last cell's acknowledgement;
//! - from a job's `done` to its run's report in hand (the run finishes on `done`: its report
//!   is assembled and stored; then `GetReport`), and a finished run's report read again, over
//!   gRPC and by the real `abfleet report` process;
//! - the coordinator's CPU time over the ingest phase, per event: a figure the load of other
//!   processes on the machine changes much less than a rate does;
//! - the store's size on disk.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abfleet_core::events::{JobEventPayload, JobOutcome};
use abfleet_core::generation::Generation;
use abfleet_core::inventory::Inventory;
use abfleet_core::session::{AgentCacheUsage, AgentMessage, JobOffer, SessionMessage};
use abfleet_core::{JobId, RunId};
use abfleet_proto::agent_link::{AgentLink, EventPush, LinkError, PushedEvent, Received};
use abfleet_proto::control_link::{ControlLink, SpecToRun, Submission};
use abfleet_proto::transport::Connection;
use serde::Serialize;
use tokio::sync::Notify;

use super::summary::Summary;
use super::synthetic;
use crate::failure::{Classify, Failure};

/// The generation every simulated agent reports.
pub(super) const GENERATION: &str = "cpu/bench/simulated";
/// Agents per HTTP/2 connection.
const AGENTS_PER_CHANNEL: usize = 100;
/// The coordinator's default heartbeat interval, which the agents keep.
const HEARTBEAT: Duration = Duration::from_secs(2);

pub struct FleetArgs {
    pub smoke: bool,
    pub agents: usize,
    pub jobs: usize,
    pub events_per_job: u32,
    pub batch: u32,
    pub dispatch_jobs: usize,
    /// The binary whose coordinator is measured; `None`: the `abfleet` beside this binary.
    pub coordinator_bin: Option<std::path::PathBuf>,
}

impl FleetArgs {
    pub fn new(
        smoke: bool,
        agents: Option<usize>,
        jobs: Option<usize>,
        events_per_job: Option<u32>,
        batch: Option<u32>,
    ) -> FleetArgs {
        let agents = agents.unwrap_or(if smoke { 20 } else { 1000 }).max(1);
        let jobs = jobs.unwrap_or(if smoke { 4 } else { 50 }).max(1);
        FleetArgs {
            smoke,
            agents,
            jobs,
            events_per_job: events_per_job
                .unwrap_or(if smoke { 40 } else { 1000 })
                .max(1),
            batch: batch.unwrap_or(100).max(1),
            dispatch_jobs: if smoke { 5 } else { 200 },
            coordinator_bin: None,
        }
    }
}

#[derive(Serialize)]
struct FleetReport {
    bench: &'static str,
    smoke: bool,
    agents: usize,
    jobs: usize,
    events_per_job: u32,
    batch: u32,
    registrations_per_s: f64,
    coordinator_rss_idle_kib: Option<u64>,
    dispatch_p50_ms: f64,
    dispatch_p99_ms: f64,
    dispatch_max_ms: f64,
    events_per_s: f64,
    ingest_seconds: f64,
    done_to_report: Summary,
    /// `GetReport` of a finished ingest run again, over gRPC (5 times).
    report_again: Summary,
    /// `abfleet report RUN --format json`, the real process, end to end (3 times).
    report_cli: Summary,
    /// The report's JSON as `GetReport` sends it.
    report_bytes: usize,
    /// That report's cells the coordinator accepted: all of them, or the benchmark fails (a
    /// refused cell is not stored as measured, and costs less than one that is).
    cells_accepted: usize,
    /// The coordinator's CPU time (user + system) from the first ingest push to the last
    /// report fetched, and per cell event.
    coordinator_cpu_s: f64,
    coordinator_cpu_us_per_event: f64,
    /// This process's (the simulated agents') CPU time over the same phase.
    agents_cpu_s: f64,
    /// The 1-minute load average when the benchmark started and ended.
    load_avg_start: Option<f64>,
    load_avg_end: Option<f64>,
    coordinator_rss_peak_kib: Option<u64>,
    store_bytes: u64,
    targets: Targets,
}

#[derive(Serialize)]
struct Targets {
    rss_idle_mib_max: f64,
    events_per_s_min: f64,
    dispatch_p99_ms_max: f64,
    /// `None` when fewer than 1,000 agents ran (a smoke run is not judged).
    met: Option<bool>,
}

/// The coordinator child, killed on drop.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What the agents tell the bench.
#[derive(Default)]
struct Shared {
    /// run id → when its offer reached an agent.
    offers: Mutex<HashMap<RunId, Instant>>,
    offered: Notify,
    /// Sessions open and ready.
    ready: AtomicUsize,
    /// Ingest jobs finished: (first push started, last cell acknowledged, done
    /// acknowledged, report fetched).
    finished: Mutex<Vec<(Instant, Instant, Instant, Instant)>>,
    finished_notify: Notify,
    errors: Mutex<Vec<String>>,
}

/// A coordinator process and simulated agents with open sessions.
pub(super) struct SimFleet {
    pub(super) data: tempfile::TempDir,
    _child: Child,
    pub(super) pid: u32,
    /// The coordinator's address, for `abfleet … --coordinator`.
    pub(super) url: String,
    pub(super) control: ControlLink,
    shared: Arc<Shared>,
    pub(super) registrations_per_s: f64,
}

impl SimFleet {
    /// Starts the coordinator, registers `agents` simulated agents and opens their sessions;
    /// each answers an ingest job (a spec named `bench-ingest…`) with `events_per_job` cell
    /// events in batches of `batch`, then `done`.
    pub(super) async fn start(
        exe: &Path,
        agents: usize,
        events_per_job: u32,
        batch: u32,
    ) -> Result<SimFleet, Failure> {
        let args = FleetArgs {
            smoke: false,
            agents,
            jobs: 0,
            events_per_job,
            batch,
            dispatch_jobs: 0,
            coordinator_bin: None,
        };
        let data = tempfile::tempdir().infra()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .infra()?
            .port();
        let mut child = Child(
            std::process::Command::new(exe)
                .args([
                    "coordinator",
                    "--plaintext",
                    "--listen",
                    &format!("127.0.0.1:{port}"),
                ])
                .arg("--data-dir")
                .arg(data.path())
                .stdout(std::process::Stdio::null())
                .stderr(std::fs::File::create(data.path().join("coordinator.log")).infra()?)
                .spawn()
                .infra()?,
        );
        let pid = child.0.id();
        let url = format!("http://127.0.0.1:{port}");
        let channels = connect(
            &url,
            args.agents.div_ceil(AGENTS_PER_CHANNEL),
            exe,
            &mut child,
            data.path(),
        )
        .await?;
        let control = ControlLink::over(&channels[0]);

        // Registration.
        let agent_ids: Vec<String> = (0..args.agents)
            .map(|_| abfleet_core::AgentId::new_random().to_string())
            .collect();
        let started = Instant::now();
        let semaphore = Arc::new(tokio::sync::Semaphore::new(64));
        let mut registering = tokio::task::JoinSet::new();
        for (i, agent_id) in agent_ids.iter().enumerate() {
            let link = AgentLink::over(&channels[i / AGENTS_PER_CHANNEL]);
            let (agent_id, permit) = (agent_id.clone(), semaphore.clone());
            registering.spawn(async move {
                let _permit = permit.acquire_owned().await;
                link.register(&agent_id, &inventory(i), "bench")
                    .await
                    .map(|_| ())
            });
        }
        while let Some(done) = registering.join_next().await {
            done.infra()?
                .map_err(|err| anyhow::anyhow!("registration failed: {err}"))
                .infra()?;
        }
        let registrations_per_s = args.agents as f64 / started.elapsed().as_secs_f64();

        // Sessions.
        let shared = Arc::new(Shared::default());
        let cell_events = Arc::new(cell_events(args.events_per_job));
        for (i, agent_id) in agent_ids.iter().enumerate() {
            tokio::spawn(simulated_agent(
                agent_id.clone(),
                channels[i / AGENTS_PER_CHANNEL].clone(),
                shared.clone(),
                cell_events.clone(),
                args.batch,
            ));
        }
        wait_for(Duration::from_secs(120), "every session to open", || {
            (shared.ready.load(Ordering::SeqCst) >= args.agents).then_some(())
        })
        .await?;
        Ok(SimFleet {
            data,
            _child: child,
            pid,
            url,
            control,
            shared,
            registrations_per_s,
        })
    }

    /// Jobs of `bench-ingest` runs finished so far.
    pub(super) fn ingest_jobs_finished(&self) -> usize {
        self.shared.finished.lock().unwrap().len()
    }

    pub(super) fn first_error(&self) -> Option<String> {
        self.shared.errors.lock().unwrap().first().cloned()
    }
}

pub async fn run(args: FleetArgs) -> Result<i32, Failure> {
    let load_avg_start = load_avg();
    let exe = measured_binary(args.coordinator_bin.as_deref())?;
    let fleet = SimFleet::start(&exe, args.agents, args.events_per_job, args.batch).await?;
    let (pid, shared, registrations_per_s) =
        (fleet.pid, fleet.shared.clone(), fleet.registrations_per_s);
    let control = fleet.control.clone();
    // Two heartbeat intervals of a connected, idle fleet.
    tokio::time::sleep(HEARTBEAT * 2).await;
    let rss_idle = rss_kib(pid, "VmRSS:");

    let dispatch = dispatch_latencies(&control, &shared, args.dispatch_jobs).await?;
    let percentile = |p: f64| {
        dispatch[((dispatch.len() as f64 * p).ceil() as usize).clamp(1, dispatch.len()) - 1] * 1e3
    };

    // Ingest: every job at once.
    shared.finished.lock().unwrap().clear();
    // One spec name per job, as jobs of different specs: runs of one name that finish in
    // another order than they were submitted have their kept reports dropped and assembled
    // again (each compares with the run before it; docs/performance.md).
    let specs: Vec<_> = (0..args.jobs)
        .map(|i| {
            synthetic::spec(
                &format!("bench-ingest-{i}"),
                args.events_per_job,
                Some(GENERATION),
            )
        })
        .collect();
    let (cpu_before, agents_cpu_before) = (cpu_s(pid), super::summary::self_cpu_s());
    let mut ingest_runs = Vec::with_capacity(args.jobs);
    for spec in &specs {
        ingest_runs.push(submit(&control, spec).await?);
    }
    wait_for(
        Duration::from_secs(600),
        "every ingest job to finish",
        || (shared.finished.lock().unwrap().len() >= args.jobs).then_some(()),
    )
    .await?;
    if let Some(error) = shared.errors.lock().unwrap().first() {
        return Err(Failure::infra(anyhow::anyhow!(
            "a simulated agent failed: {error}"
        )));
    }
    let coordinator_cpu_s = cpu_s(pid).zip(cpu_before).map_or(f64::NAN, |(a, b)| a - b);
    let agents_cpu_s = super::summary::self_cpu_s() - agents_cpu_before;
    let finished = shared.finished.lock().unwrap().clone();
    let first_push = finished.iter().map(|f| f.0).min().expect("jobs >= 1");
    let last_cell = finished.iter().map(|f| f.1).max().expect("jobs >= 1");
    let ingest_seconds = last_cell.duration_since(first_push).as_secs_f64();
    let events = args.jobs as f64 * f64::from(args.events_per_job);
    // From sending `done` (the run finishes on it: its report is assembled and stored) to
    // the report in hand.
    let done_to_report: Vec<f64> = finished
        .iter()
        .map(|f| f.3.duration_since(f.1).as_secs_f64())
        .collect();
    // A finished run's report again: as `GetReport` serves it, and as a user runs it.
    let (report_again, report_json) = report_again(&control, &ingest_runs[0], 5).await?;
    let cells_accepted = all_cells_accepted(&report_json, args.events_per_job)?;
    let report_cli = report_cli(&exe, &fleet.url, &ingest_runs[0].to_string(), 3)?;
    let rss_peak = rss_kib(pid, "VmHWM:");
    let store_bytes = dir_bytes(fleet.data.path());
    drop(fleet);

    let report = FleetReport {
        bench: "fleet",
        smoke: args.smoke,
        agents: args.agents,
        jobs: args.jobs,
        events_per_job: args.events_per_job,
        batch: args.batch,
        registrations_per_s,
        coordinator_rss_idle_kib: rss_idle,
        dispatch_p50_ms: percentile(0.5),
        dispatch_p99_ms: percentile(0.99),
        dispatch_max_ms: percentile(1.0),
        events_per_s: events / ingest_seconds,
        ingest_seconds,
        done_to_report: Summary::of(&done_to_report).expect("jobs >= 1"),
        report_again,
        report_cli,
        report_bytes: report_json.len(),
        cells_accepted,
        coordinator_cpu_s,
        coordinator_cpu_us_per_event: coordinator_cpu_s / events * 1e6,
        agents_cpu_s,
        load_avg_start,
        load_avg_end: load_avg(),
        coordinator_rss_peak_kib: rss_peak,
        store_bytes,
        targets: Targets {
            rss_idle_mib_max: 200.0,
            events_per_s_min: 20_000.0,
            dispatch_p99_ms_max: 50.0,
            met: None,
        },
    };
    let met = (args.agents >= 1000).then(|| {
        rss_idle.is_some_and(|kib| (kib as f64) / 1024.0 < 200.0)
            && report.events_per_s >= 20_000.0
            && report.dispatch_p99_ms < 50.0
    });
    let report = FleetReport {
        targets: Targets {
            met,
            ..report.targets
        },
        ..report
    };
    print_table(&report);
    super::summary::print_json_line(&report)
}

/// Dispatch latency with the agents idle: `jobs` jobs submitted one at a time, each from
/// the submit call to its offer reaching an agent; in seconds, sorted.
async fn dispatch_latencies(
    control: &ControlLink,
    shared: &Shared,
    jobs: usize,
) -> Result<Vec<f64>, Failure> {
    let mut dispatch = Vec::new();
    for i in 0..jobs {
        let spec = synthetic::spec(&format!("bench-dispatch-{i}"), 1, Some(GENERATION));
        let submitted = Instant::now();
        let run_id = submit(control, &spec).await?;
        let offered = wait_for_offer(shared, &run_id).await?;
        dispatch.push(offered.saturating_duration_since(submitted).as_secs_f64());
    }
    dispatch.sort_by(f64::total_cmp);
    Ok(dispatch)
}

fn print_table(r: &FleetReport) {
    let mib =
        |kib: Option<u64>| kib.map_or("?".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
    println!("{:<52} figure", "what");
    println!(
        "{:<52} {:.0}/s",
        format!("registrations ({} agents)", r.agents),
        r.registrations_per_s
    );
    println!(
        "{:<52} {} (target < 200 MiB)",
        format!("coordinator RSS, {} agents connected and idle", r.agents),
        mib(r.coordinator_rss_idle_kib)
    );
    println!(
        "{:<52} p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (target p99 < 50 ms)",
        "dispatch, submit → offer, agents idle",
        r.dispatch_p50_ms,
        r.dispatch_p99_ms,
        r.dispatch_max_ms
    );
    println!(
        "{:<52} {:.0} events/s over {:.2} s (target ≥ 20,000/s)",
        format!(
            "ingest, {} jobs × {} cell events, batches of {}",
            r.jobs, r.events_per_job, r.batch
        ),
        r.events_per_s,
        r.ingest_seconds
    );
    println!(
        "{:<52} median {:.1} ms, max {:.1} ms",
        "done → the run's report",
        r.done_to_report.median_s * 1e3,
        r.done_to_report.max_s * 1e3
    );
    println!(
        "{:<52} gRPC median {:.1} ms, `abfleet report` median {:.1} ms ({:.1} MiB of JSON)",
        "a finished run's report again",
        r.report_again.median_s * 1e3,
        r.report_cli.median_s * 1e3,
        r.report_bytes as f64 / (1024.0 * 1024.0)
    );
    println!(
        "{:<52} {} of {} (none refused)",
        "its cells, as the coordinator's audit accepted them", r.cells_accepted, r.events_per_job
    );
    println!(
        "{:<52} {:.2} s, {:.1} µs per event (the agents: {:.2} s)",
        "coordinator CPU, first push → last report",
        r.coordinator_cpu_s,
        r.coordinator_cpu_us_per_event,
        r.agents_cpu_s
    );
    let load = |l: Option<f64>| l.map_or("?".into(), |l| format!("{l:.2}"));
    println!(
        "{:<52} {} → {}",
        "1-minute load average, start → end",
        load(r.load_avg_start),
        load(r.load_avg_end)
    );
    println!(
        "{:<52} peak RSS {}, store {:.1} MiB; targets {}",
        "coordinator at the end",
        mib(r.coordinator_rss_peak_kib),
        r.store_bytes as f64 / (1024.0 * 1024.0),
        match r.targets.met {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not judged (fewer than 1,000 agents)",
        }
    );
}

/// `count` connections to the bench's coordinator once it is up. Fails with the end of its log
/// (`coordinator.log` in `data`) when the process exits first, or is not up within 30 s.
async fn connect(
    url: &str,
    count: usize,
    exe: &Path,
    coordinator: &mut Child,
    data: &Path,
) -> Result<Vec<Connection>, Failure> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let failed = |what: String| {
        let log = data.join("coordinator.log");
        Failure::infra(anyhow::anyhow!(
            "the bench's coordinator ({}) {what}; the end of its log:\n{}\n\
             check that --coordinator-bin is an abfleet build that runs `abfleet coordinator`",
            exe.display(),
            abfleet_agent::runner::tail(&log, super::LOG_TAIL_BYTES).trim_end()
        ))
    };
    let mut connections = Vec::new();
    while connections.len() < count {
        match Connection::open(url, None).await {
            Ok(connection) => connections.push(connection),
            Err(err) => {
                if let Ok(Some(status)) = coordinator.0.try_wait() {
                    return Err(failed(format!(
                        "exited ({status}) before it took connections"
                    )));
                }
                if Instant::now() > deadline {
                    return Err(failed(format!(
                        "did not come up on {url} within 30 s: {err}"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    Ok(connections)
}

fn inventory(i: usize) -> Inventory {
    Inventory {
        hostname: format!("simulated-{i}"),
        os: "simulated".into(),
        kernel: "-".into(),
        arch: "x86_64".into(),
        cpu_model: "simulated agent (abfleet-bench fleet)".into(),
        physical_cores: 2,
        logical_cores: 2,
        memory_bytes: 8 << 30,
        generations: vec![Generation {
            emulator: None,
            key: GENERATION.into(),
            backend: "cpu".into(),
            vendor: "simulated".into(),
            silicon_id: "simulated".into(),
            hardware_id: "simulated".into(),
            description: "a simulated agent".into(),
            simulated: true,
            toolchain: Default::default(),
        }],
        hardware: None,
    }
}

/// The JSON of cell events 0..count and of `done`, made once and shared by every agent.
fn cell_events(count: u32) -> Vec<String> {
    let spec = synthetic::spec("bench-ingest", count, Some(GENERATION));
    let mut events: Vec<String> = (0..count)
        .map(|i| {
            serde_json::to_string(&synthetic::cell_event(&spec, i)).expect("a cell serializes")
        })
        .collect();
    events.push(
        serde_json::to_string(&JobEventPayload::Done {
            outcome: JobOutcome::Completed,
            error: None,
        })
        .expect("done serializes"),
    );
    events
}

pub(super) async fn submit(
    control: &ControlLink,
    spec: &abfleet_core::spec::JobSpec,
) -> Result<RunId, Failure> {
    control
        .submit(Submission::new(
            SpecToRun::Json(spec.to_json()),
            "manual",
            "abfleet-bench fleet",
        ))
        .await
        .map_err(|err| anyhow::anyhow!("submit failed: {err}"))
        .infra()
}

async fn wait_for_offer(shared: &Shared, run_id: &RunId) -> Result<Instant, Failure> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let notified = shared.offered.notified();
        if let Some(at) = shared.offers.lock().unwrap().get(run_id) {
            return Ok(*at);
        }
        if Instant::now() > deadline {
            return Err(Failure::infra(anyhow::anyhow!(
                "run {run_id} was not offered to any simulated agent within 60 s"
            )));
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), notified).await;
    }
}

pub(super) async fn wait_for(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> Option<()>,
) -> Result<(), Failure> {
    let deadline = Instant::now() + timeout;
    while check().is_none() {
        if Instant::now() > deadline {
            return Err(Failure::infra(anyhow::anyhow!(
                "timed out waiting for {what}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// One simulated agent: a session that heartbeats, takes offers and answers each with its
/// events (a dispatch job: only `done`; an ingest job: every cell event, then `done`).
async fn simulated_agent(
    agent_id: String,
    connection: Connection,
    shared: Arc<Shared>,
    cell_events: Arc<Vec<String>>,
    batch: u32,
) {
    let error = |what: &str, err: &LinkError| {
        shared.errors.lock().unwrap().push(format!("{what}: {err}"));
    };
    let link = AgentLink::over(&connection);
    let (outgoing, mut incoming) = match link
        .open_session(&agent_id, vec![AgentMessage::Ready { resume: None }])
        .await
    {
        Ok(session) => session,
        Err(err) => return error("session", &err),
    };
    let outgoing = Arc::new(outgoing);
    shared.ready.fetch_add(1, Ordering::SeqCst);
    let running: Arc<Mutex<Option<(JobId, u32)>>> = Arc::default();
    let heartbeats = {
        let (outgoing, running) = (outgoing.clone(), running.clone());
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(HEARTBEAT);
            loop {
                ticks.tick().await;
                let beat = AgentMessage::Heartbeat {
                    running: *running.lock().unwrap(),
                    cache: AgentCacheUsage::default(),
                };
                if outgoing.send(beat).await.is_err() {
                    return;
                }
            }
        })
    };
    loop {
        let offer = match incoming.next().await {
            Ok(Some(Received::Message(SessionMessage::Offer(offer)))) => offer,
            Ok(Some(Received::UnreadableOffer { error: why, .. })) => {
                shared
                    .errors
                    .lock()
                    .unwrap()
                    .push(format!("unreadable offer: {why}"));
                continue;
            }
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => break,
        };
        let now = Instant::now();
        shared.offers.lock().unwrap().insert(offer.run_id, now);
        shared.offered.notify_waiters();
        *running.lock().unwrap() = Some((offer.job_id, offer.attempt));
        let ingest = offer.spec.name.starts_with("bench-ingest");
        let events: Vec<&String> = if ingest {
            cell_events.iter().collect()
        } else {
            cell_events.last().into_iter().collect()
        };
        let first_push = Instant::now();
        let mut seq = offer.next_seq;
        let cells = events.len().saturating_sub(1);
        // The cell events in batches, then `done` alone.
        let mut failed = false;
        for chunk in events[..cells].chunks(batch as usize) {
            if let Err(err) = push_batch(&link, &agent_id, &offer, &mut seq, chunk).await {
                error("push", &err);
                failed = true;
                break;
            }
        }
        let last_cell = Instant::now();
        if !failed {
            if let Err(err) = push_batch(&link, &agent_id, &offer, &mut seq, &events[cells..]).await
            {
                error("push done", &err);
            }
        }
        let acked = Instant::now();
        *running.lock().unwrap() = None;
        if ingest {
            if let Err(err) = ControlLink::over(&connection)
                .report_json(&offer.run_id)
                .await
            {
                error("get report", &err);
            }
            shared
                .finished
                .lock()
                .unwrap()
                .push((first_push, last_cell, acked, Instant::now()));
            shared.finished_notify.notify_waiters();
        }
        if outgoing
            .send(AgentMessage::Ready { resume: None })
            .await
            .is_err()
        {
            break;
        }
    }
    heartbeats.abort();
}

/// One PushEvents call of `chunk`, numbered from `seq` on.
async fn push_batch(
    link: &AgentLink,
    agent_id: &str,
    offer: &JobOffer,
    seq: &mut u64,
    chunk: &[&String],
) -> Result<(), LinkError> {
    let events = chunk
        .iter()
        .map(|payload| {
            *seq += 1;
            PushedEvent {
                seq: *seq - 1,
                at_ms: 0,
                payload_json: (*payload).clone(),
            }
        })
        .collect();
    link.push_events(EventPush {
        agent_id,
        job_id: &offer.job_id.to_string(),
        attempt: offer.attempt,
        events,
        lost_before: 0,
    })
    .await
    .map(|_| ())
}

/// `GetReport` of `run_id`, `times` times: how long each took, and the JSON's size.
/// `GetReport` of `run_id`, `times` times: how long each took, and the report's JSON.
pub(super) async fn report_again(
    control: &ControlLink,
    run_id: &RunId,
    times: usize,
) -> Result<(Summary, String), Failure> {
    let mut seconds = Vec::with_capacity(times);
    let mut json = String::new();
    for _ in 0..times {
        let started = Instant::now();
        let report_json = control
            .report_json(run_id)
            .await
            .map_err(|err| anyhow::anyhow!("get report: {err}"))
            .infra()?;
        seconds.push(started.elapsed().as_secs_f64());
        json = report_json;
    }
    Ok((Summary::of(&seconds).expect("times >= 1"), json))
}

/// How many of an ingest run's `expected` cells its report holds, once every one of them
/// is there and was accepted by the coordinator's audit; otherwise why the figures measure
/// something else than intake.
fn all_cells_accepted(report_json: &str, expected: u32) -> Result<usize, Failure> {
    let report = abfleet_core::report::Report::from_json(report_json)
        .map_err(|err| anyhow::anyhow!("the ingest run's report does not decode: {err}"))
        .infra()?;
    let rejected: Vec<_> = report
        .cells
        .iter()
        .filter(|cell| !cell.rejected.is_empty())
        .collect();
    if let Some(first) = rejected.first() {
        return Err(anyhow::anyhow!(
            "the coordinator rejected {} of the ingest run's {} cells (cell {}: {}): the figures would time refusals, not intake; make the synthetic cells valid for the submitted spec (synthetic.rs)",
            rejected.len(),
            report.cells.len(),
            first.index,
            first.rejected.join("; ")
        ))
        .infra();
    }
    if report.cells.len() != expected as usize {
        return Err(anyhow::anyhow!(
            "the ingest run's report holds {} cells, not the {expected} its job sent: the coordinator lost acknowledged events, a bug to chase before any figure means anything (`--smoke` shows it in seconds)",
            report.cells.len()
        ))
        .infra();
    }
    Ok(report.cells.len())
}

/// `abfleet report RUN --format json` against the coordinator at `url`, `times` times, end to
/// end (process start to exit).
fn report_cli(exe: &Path, url: &str, run_id: &str, times: usize) -> Result<Summary, Failure> {
    let mut seconds = Vec::with_capacity(times);
    for _ in 0..times {
        seconds.push(cli_seconds(
            exe,
            &["report", run_id, "--format", "json", "--coordinator", url],
        )?);
    }
    Ok(Summary::of(&seconds).expect("times >= 1"))
}

/// The binary measured: `--coordinator-bin`, or the `abfleet` beside this binary.
pub(super) fn measured_binary(chosen: Option<&Path>) -> Result<std::path::PathBuf, Failure> {
    match chosen {
        Some(path) => Ok(path.to_path_buf()),
        None => crate::abfleet_beside(),
    }
}

/// `exe` run with `args`, its output discarded: its wall time, from spawn to exit.
pub(super) fn cli_seconds(exe: &Path, args: &[&str]) -> Result<f64, Failure> {
    let started = Instant::now();
    let output = std::process::Command::new(exe)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .infra()?;
    let seconds = started.elapsed().as_secs_f64();
    if !output.status.success() {
        return Err(Failure::infra(anyhow::anyhow!(
            "`abfleet {}` failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(seconds)
}

/// The CPU time (user + system) a process has used, from `/proc/PID/stat`.
fn cpu_s(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, ticks) = abfleet_agent::noise::parse_stat(&stat)?;
    Some(ticks as f64 / abfleet_agent::noise::clock_ticks_per_second())
}

/// The 1-minute load average.
pub(super) fn load_avg() -> Option<f64> {
    let load = abfleet_agent::loadavg::one_minute();
    load.is_finite().then_some(load)
}

/// `VmRSS:` or `VmHWM:` of a process, in KiB.
pub(super) fn rss_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

pub(super) fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&entry.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
