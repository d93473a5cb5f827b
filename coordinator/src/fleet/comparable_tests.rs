//! Which earlier run a report compares with, through the store and the state machine on a
//! manual clock: the same spec name and generation key on the same hardware id (two hosts of
//! one key but other hardware are not each other's previous; a driver bump on one host is),
//! finished as `done` (a failed run is no baseline), never a bisect step; and a ratchet
//! growth fails the run's exit code when it finishes.

use std::path::Path;
use std::time::Duration;

use abfleet_core::cell::{CellInput, CellResult, SideMeasurement, SideStatus};
use abfleet_core::events::{BuildRecord, BuildStatus, JobEventPayload, JobOutcome, Side};
use abfleet_core::generation::Generation;
use abfleet_core::inventory::Inventory;
use abfleet_core::report::history::BISECT_TRIGGER;
use abfleet_core::scores::{FrameScores, MetricValues, Pooled, Scores};
use abfleet_core::session::SessionMessage;
use abfleet_core::spec::JobSpec;
use abfleet_core::{exit, AgentId, RunId};
use tokio::sync::mpsc;

use super::{CoordinatorConfig, Fleet};
use crate::clock::ManualClock;
use crate::store::{Store, StoredEvent};

const KEY: &str = "cpu/x86-64-v3/test";

/// The demo spec on the test generation.
fn spec() -> JobSpec {
    let text = format!(
        "{}\n[targets]\ngenerations = [\"cpu/*\"]\n",
        include_str!("../../../fixtures/jobs/demo.toml")
    );
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
    let mut spec = JobSpec::from_toml(&text, Path::new("demo.toml"), dir).unwrap();
    spec.measure.seed = 7;
    spec
}

fn host(name: &str, silicon: &str, hardware: &str) -> Inventory {
    Inventory {
        hostname: name.into(),
        os: "Debian 12".into(),
        kernel: "6.1".into(),
        arch: "x86_64".into(),
        cpu_model: "test cpu".into(),
        physical_cores: 2,
        logical_cores: 4,
        memory_bytes: 1 << 30,
        generations: vec![Generation {
            emulator: None,
            key: KEY.into(),
            backend: "cpu".into(),
            vendor: "test".into(),
            silicon_id: silicon.into(),
            hardware_id: hardware.into(),
            description: "test".into(),
            simulated: false,
            toolchain: [("cc".to_string(), format!("cc for {silicon}"))].into(),
        }],
        hardware: None,
    }
}

/// Scores of one frame whose pooled `psnr_y` is `value`, printed at six decimals.
fn scores(value: f64) -> Scores {
    let mut metrics = MetricValues::new();
    metrics.insert("psnr_y", value);
    Scores {
        tool_version: None,
        fps: None,
        frames: vec![FrameScores {
            frame_num: 0,
            metrics,
        }],
        pooled: [(
            "psnr_y".to_string(),
            Pooled {
                min: value,
                max: value,
                mean: value,
                harmonic_mean: value,
            },
        )]
        .into(),
        printed_decimals: Some(6),
    }
}

/// The first cell of the demo spec, upstream at 30 dB and the fork `delta` away.
fn cell(delta: f64) -> CellResult {
    let spec = spec();
    let side = |value: f64| SideMeasurement {
        status: SideStatus::Ok,
        times: vec![1.0; 3],
        cpu_times: vec![1.0; 3],
        warmup_times: vec![1.0],
        scores: Some(scores(value)),
        returncode: Some(0),
        error: None,
        stderr_tail: None,
        command: None,
    };
    CellResult::evaluate(
        CellInput {
            index: 0,
            fixture: spec.fixtures[0].name.clone(),
            workload: spec.workloads[0].name.clone(),
            upstream: side(30.0),
            fork: side(30.0 + delta),
            load_avg_1min: [0.0, 0.0],
            idle_cores: 1.0,
            host_flags: Vec::new(),
            seed: abfleet_core::paired::cell_seed(spec.measure.seed, 0),
            run_order: Vec::new(),
            stop_reason: abfleet_core::paired::StopReason::MaxPairs,
            overhead_seconds: None,
        },
        &spec,
    )
}

struct Fixture {
    fleet: Fleet,
    clock: ManualClock,
    _dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let clock = ManualClock::starting_at_ms(1_700_000_000_000);
        let fleet = Fleet::with_clock(
            store,
            CoordinatorConfig {
                lease: Duration::from_secs(30),
                ..CoordinatorConfig::default()
            },
            std::sync::Arc::new(clock.clone()),
        );
        Fixture {
            fleet,
            clock,
            _dir: dir,
        }
    }

    /// A run submitted with `trigger`, taken by an agent that registers with `inventory`,
    /// which stores one cell of pooled delta `delta` and ends as `outcome`.
    async fn run(
        &self,
        agent: AgentId,
        inventory: &Inventory,
        trigger: &str,
        delta: f64,
        outcome: JobOutcome,
    ) -> RunId {
        use crate::clock::Clock;
        self.clock.advance(Duration::from_secs(60));
        // The agent registers afresh each run (a restart after a driver bump).
        self.fleet.register(agent, inventory).await.unwrap();
        let (sender, mut session) = mpsc::unbounded_channel();
        let (number, _) = self
            .fleet
            .scheduling()
            .open_session(agent, sender, None)
            .unwrap();
        let run_id = self
            .fleet
            .runs()
            .submit_on(spec(), trigger, None, "test", None)
            .await
            .unwrap();
        self.fleet.scheduling().ready(agent, None).await.unwrap();
        let offer = match session.try_recv() {
            Ok(SessionMessage::Offer(offer)) => *offer,
            other => panic!("expected an offer, got {other:?}"),
        };
        let now = self.clock.now_ms();
        let event = |seq: u64, payload: JobEventPayload| StoredEvent {
            seq,
            at_ms: now,
            payload,
        };
        let events = vec![
            event(
                0,
                JobEventPayload::Started {
                    host: inventory.clone(),
                    calibration: None,
                },
            ),
            event(
                1,
                JobEventPayload::Build(BuildRecord {
                    side: Side::Fork,
                    status: BuildStatus::Built,
                    cache_key: "key".into(),
                    toolchain: "cc 12".into(),
                    seconds: 1.0,
                    log_path: "build.log".into(),
                    log_tail: None,
                    error: None,
                }),
            ),
            event(2, JobEventPayload::Cell(Box::new(cell(delta)))),
            event(
                3,
                JobEventPayload::Done {
                    outcome,
                    error: None,
                },
            ),
        ];
        self.fleet
            .intake()
            .push_events(agent, offer.job_id, offer.attempt, events)
            .await
            .unwrap();
        self.fleet.scheduling().close_session(agent, number);
        run_id
    }
}

#[tokio::test]
async fn runs_compare_on_the_same_hardware_across_a_driver_bump_and_skip_failed_runs_and_bisect_steps(
) {
    let f = Fixture::new();
    let (agent_a, agent_b) = (AgentId::new_random(), AgentId::new_random());
    let a = host("bench-a", "silicon-a", "hardware-a");
    let b = host("bench-b", "silicon-b", "hardware-b");
    let first = f
        .run(agent_a, &a, "manual", 0.0, JobOutcome::Completed)
        .await;
    // Another host of the same key, other hardware: not first's successor.
    let other = f
        .run(agent_b, &b, "manual", 0.0, JobOutcome::Completed)
        .await;
    let report = f.fleet.reports().report(other).await.unwrap();
    assert_eq!(report.generations[0].key, KEY);
    assert!(
        report.generations[0].since_previous.is_none(),
        "other hardware is another history: {:?}",
        report.generations[0].since_previous
    );

    // Host a after a driver bump: its silicon id moved, its hardware id did not.
    let mut bumped = a.clone();
    bumped.generations[0].silicon_id = "silicon-a2".into();
    bumped.generations[0]
        .toolchain
        .insert("cc".into(), "cc after the bump".into());
    let second = f
        .run(agent_a, &bumped, "manual", 0.0, JobOutcome::Completed)
        .await;
    let report = f.fleet.reports().report(second).await.unwrap();
    let since = report.generations[0].since_previous.as_ref().unwrap();
    assert_eq!(since.run_id, first.to_string(), "not {other}");
    assert_eq!(since.matched_cells, 1);
    assert!(
        since
            .changes
            .contains(&"host toolchain `cc`: `cc for silicon-a` → `cc after the bump`".to_string()),
        "{:?}",
        since.changes
    );
    assert!(
        since
            .changes
            .iter()
            .any(|c| c.starts_with("silicon id `silicon-a` → `silicon-a2`")),
        "{:?}",
        since.changes
    );

    // A failed run and a bisect step on the same hardware are no baselines.
    f.run(agent_a, &bumped, "manual", 0.0, JobOutcome::Failed)
        .await;
    f.run(agent_a, &bumped, BISECT_TRIGGER, 0.0, JobOutcome::Completed)
        .await;
    // The ratchet: 3e-6 under the demo's 1e-5 gate, but up from the accepted 0.
    let grown = f
        .run(agent_a, &bumped, "manual", 3e-6, JobOutcome::Completed)
        .await;
    let report = f.fleet.reports().report(grown).await.unwrap();
    let since = report.generations[0].since_previous.as_ref().unwrap();
    assert_eq!(since.run_id, second.to_string());
    assert_eq!(report.cells[0].parity_failures.len(), 1, "{report:#?}");
    assert_eq!(
        report.cells[0].parity_failures[0].rule,
        abfleet_core::parity::ParityRule::Ratchet
    );
    assert_eq!(report.exit_code, exit::PARITY_FAILED);
    let run = f.fleet.store().runs().run(grown).await.unwrap().unwrap();
    assert_eq!(
        run.exit_code,
        Some(exit::PARITY_FAILED),
        "the exit code the run finished with has the ratchet"
    );

    // The next run with the same delta is compared with the last accepted one (second), so
    // it fails too: a growth is not accepted by being repeated.
    let again = f
        .run(agent_a, &bumped, "manual", 3e-6, JobOutcome::Completed)
        .await;
    let report = f.fleet.reports().report(again).await.unwrap();
    let since = report.generations[0].since_previous.as_ref().unwrap();
    assert_eq!(since.run_id, grown.to_string());
    let growth = since
        .flags
        .iter()
        .find(|f| f.metric.as_deref() == Some("psnr_y"))
        .unwrap();
    assert_eq!(
        growth.then_run.as_deref(),
        Some(second.to_string().as_str())
    );
    assert_eq!(report.exit_code, exit::PARITY_FAILED);
}

/// A run pinned to a hardware id (a bisect step) gets a job only for that hardware's agent,
/// and is offered to no other agent of the same generation key; a hardware id no agent has
/// fails the run saying what the fleet has.
#[tokio::test]
async fn a_run_pinned_to_a_hardware_id_goes_only_to_an_agent_of_that_hardware() {
    let f = Fixture::new();
    let (agent_a, agent_b) = (AgentId::new_random(), AgentId::new_random());
    let mut sessions = Vec::new();
    for (agent, inventory) in [
        (agent_a, host("bench-a", "silicon-a", "hardware-a")),
        (agent_b, host("bench-b", "silicon-b", "hardware-b")),
    ] {
        f.fleet.register(agent, &inventory).await.unwrap();
        let (sender, session) = mpsc::unbounded_channel();
        f.fleet
            .scheduling()
            .open_session(agent, sender, None)
            .unwrap();
        sessions.push(session);
    }
    // Agent a is idle first: an unpinned job would be its.
    f.fleet.scheduling().ready(agent_a, None).await.unwrap();
    f.fleet.scheduling().ready(agent_b, None).await.unwrap();
    let run = f
        .fleet
        .runs()
        .submit_on(spec(), BISECT_TRIGGER, None, "test", Some("hardware-b"))
        .await
        .unwrap();
    let jobs = f.fleet.store().jobs().of_run(run).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].pinned_agent, Some(agent_b));
    assert!(
        sessions[0].try_recv().is_err(),
        "agent a is offered nothing"
    );
    assert!(matches!(
        sessions[1].try_recv(),
        Ok(SessionMessage::Offer(_))
    ));

    let nowhere = f
        .fleet
        .runs()
        .submit_on(spec(), BISECT_TRIGGER, None, "test", Some("hardware-z"))
        .await
        .unwrap();
    let row = f.fleet.store().runs().run(nowhere).await.unwrap().unwrap();
    assert_eq!(row.exit_code, Some(exit::NOT_CARRIED_OUT));
    let error = row.error.unwrap_or_default();
    assert!(
        error.contains("hardware `hardware-z`") && error.contains("hardware hardware-b"),
        "{error}"
    );
}
