//! The spine through the real coordinator and agents over gRPC on 127.0.0.1:0, with sources
//! as real git repositories made in a temp dir, real builds with the system compiler and
//! real child processes.

mod support;

use std::time::Duration;

use abfleet_coordinator::store::{Store, StoredEvent};
use abfleet_coordinator::CoordinatorConfig;
use abfleet_core::cell::{CellParity, SideStatus};
use abfleet_core::events::{BuildStatus, JobEventPayload, LogLevel};
use abfleet_core::report::ScoreParity;
use abfleet_proto::pb;
use abfleet_render::render_markdown;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_runs_to_a_report_over_grpc_with_git_sources() {
    let tmp = tempfile::tempdir().unwrap();
    let repos = make_repos(tmp.path());
    let spec = SpecOptions::git(&repos).write(tmp.path(), "spec.toml");
    let mut coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let agent = TestAgent::start(&coordinator.url(), &tmp.path().join("agent"));
    let mut client = coordinator.control().await;

    let (run_id, report) = submit_and_wait(&mut client, &spec).await;

    assert_eq!(report.status, "done", "{:?}", report.errors);
    assert_eq!(report.exit_code, 0, "{:?}", report.errors);
    assert_eq!(report.score_parity, ScoreParity::Ok);
    assert_eq!(report.upstream_ref, "v1.0.0");
    assert_eq!(
        report.upstream.resolved.as_deref(),
        Some(repos.upstream_tag_commit.as_str())
    );
    assert_eq!(
        report.fork.resolved.as_deref(),
        Some(repos.fork_commit.as_str())
    );
    assert_eq!(report.fork_ref, repos.fork_commit[..12]);
    assert_eq!(report.cells.len(), 4);
    let cell = |name: &str| report.cells.iter().find(|c| c.workload == name).unwrap();
    for name in ["psnr", "float_ssim", "motion"] {
        let c = cell(name);
        assert_eq!(c.parity, CellParity::Ok, "{name}: {:?}", c.parity_failures);
        assert_eq!(c.upstream.times.len(), 3);
        assert_eq!(c.fork.times.len(), 3);
        assert_eq!(c.upstream.warmup_times.len(), 1);
        assert_eq!(c.fork.nframes, Some(6));
        assert!(c.speedup.unwrap() > 0.0);
        assert!(c.startup_dominated, "tiny fixtures are start-up-dominated");
    }
    assert!(cell("psnr").upstream.pooled.contains_key("psnr_y"));
    assert_eq!(
        cell("motion")
            .renamed_metrics
            .get("VMAF_integer_feature_motion_sad_score")
            .map(String::as_str),
        Some("integer_motion")
    );
    let fork_only = cell("motion_v2");
    assert_eq!(fork_only.parity, CellParity::AbsentUpstream);
    assert_eq!(fork_only.upstream.status, SideStatus::Absent);
    assert_eq!(fork_only.upstream.returncode, Some(255));
    assert_eq!(fork_only.fork.status, SideStatus::Ok);
    assert!(report.startup_bound);
    assert_eq!(
        report.geomean_cells.len(),
        3,
        "the geomean covers only compared cells"
    );
    let markdown = render_markdown(&report);
    assert!(
        markdown.contains("| motion_v2 † | absent upstream |"),
        "{markdown}"
    );
    assert!(markdown.contains("vs upstream `v1.0.0`"), "{markdown}");

    // The report survives a coordinator restart: it is rebuilt from the SQLite store.
    coordinator.stop().await;
    agent.stop().await;
    let restarted =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let mut client = restarted.control().await;
    let again = report_of(&mut client, &run_id).await;
    assert_eq!(again.cells, report.cells);
}

async fn report_of(
    client: &mut pb::control_service_client::ControlServiceClient<tonic::transport::Channel>,
    run_id: &str,
) -> abfleet_core::report::Report {
    support::report(client, run_id).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_identical_run_does_not_rebuild() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = SpecOptions {
        workloads: &["psnr"],
        ..SpecOptions::path()
    }
    .write(tmp.path(), "spec.toml");
    let coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let _agent = TestAgent::start(&coordinator.url(), &tmp.path().join("agent"));
    let mut client = coordinator.control().await;

    let (_, first) = submit_and_wait(&mut client, &spec).await;
    let (_, second) = submit_and_wait(&mut client, &spec).await;

    for (side, a, b) in [
        ("upstream", &first.upstream, &second.upstream),
        ("fork", &first.fork, &second.fork),
    ] {
        let (a, b) = (a.build.as_ref().unwrap(), b.build.as_ref().unwrap());
        assert_eq!(a.status, BuildStatus::Built, "{side}: {a:?}");
        assert_eq!(b.status, BuildStatus::Cached, "{side}: {b:?}");
        assert_eq!(a.cache_key, b.cache_key);
    }
    // Upstream and fork build from the same tree with different recipes: separate builds.
    assert_ne!(
        first.upstream.build.as_ref().unwrap().cache_key,
        first.fork.build.as_ref().unwrap().cache_key
    );
    assert_eq!(second.exit_code, 0, "{:?}", second.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_loses_its_coordinator_mid_job_resends_and_each_cell_is_stored_once() {
    // The coordinators and the agent run in this process: should this fail, its output says
    // which of them ended the attempt (CI once saw a second attempt here; see
    // coordinator/src/fleet/tests.rs, a lease given back twice).
    let _ = tracing_subscriber::fmt()
        .with_env_filter("info")
        .with_test_writer()
        .try_init();
    let tmp = tempfile::tempdir().unwrap();
    let spec = SpecOptions {
        workloads: &["psnr", "motion", "float_ssim", "motion_v2"],
        runs: 5,
        frames: 120,
        ..SpecOptions::path()
    }
    .write(tmp.path(), "spec.toml");
    let data_dir = tmp.path().join("data");
    let mut first = TestCoordinator::start(&data_dir, CoordinatorConfig::default()).await;
    let proxy = Proxy::start(first.addr).await;
    let agent = TestAgent::start(&proxy.url(), &tmp.path().join("agent"));
    let mut client = first.control().await;
    let run_id = submit(&mut client, &spec).await;

    // Once a cell is stored, the coordinator goes away mid-job and comes back on a new port.
    wait_until(Duration::from_secs(120), "the first stored cell", || {
        let mut client = client.clone();
        let run_id = run_id.clone();
        async move { (!report(&mut client, &run_id).await.cells.is_empty()).then_some(()) }
    })
    .await;
    let at_cut = report(&mut client, &run_id).await;
    assert!(
        at_cut.cells.len() < 4,
        "the job must still be running when the coordinator goes"
    );
    proxy.cut();
    first.stop().await;
    proxy.cut();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let second = TestCoordinator::start(&data_dir, CoordinatorConfig::default()).await;
    proxy.retarget(second.addr);
    let mut client = second.control().await;
    let report = wait_for_report(&mut client, &run_id, Duration::from_secs(180)).await;

    assert_eq!(report.status, "done", "{:?}", report.errors);
    assert_eq!(report.cells.len(), 4);
    assert_eq!(report.exit_code, 0, "{:?}", report.errors);
    let store = Store::open(&data_dir).unwrap();
    let job_id = store.jobs().of_run(run_id.parse().unwrap()).await.unwrap()[0].job_id;
    assert_eq!(
        store.events().cell_count(job_id).await.unwrap(),
        4,
        "every cell stored exactly once"
    );
    let events = store.events().of_attempt(job_id, 1).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (0..events.len() as u64).collect::<Vec<_>>(),
        "no gap, no duplicate"
    );
    assert!(matches!(
        events.last().unwrap().payload,
        JobEventPayload::Done { .. }
    ));
    assert!(
        !agent
            .work_dir
            .join("spool")
            .read_dir()
            .map(|mut d| d.next().is_some())
            .unwrap_or(false),
        "the spool is drained"
    );
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_sequence_number_is_acknowledged_and_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = SpecOptions::path().write(tmp.path(), "spec.toml");
    let coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let mut client = coordinator.control().await;
    let run_id = submit(&mut client, &spec).await;
    // A hand-driven agent: register, ask for work, take the offer, push events twice.
    let mut agent = pb::agent_service_client::AgentServiceClient::connect(coordinator.url())
        .await
        .unwrap();
    let agent_id = abfleet_core::AgentId::new_random().to_string();
    agent
        .register(pb::RegisterRequest {
            agent_id: agent_id.clone(),
            inventory: Some(abfleet_agent::inventory::probe_host().into()),
            agent_version: "test".into(),
        })
        .await
        .unwrap();
    let (outgoing, receiver) = tokio::sync::mpsc::channel(4);
    let ready = |kind| pb::AgentMessage {
        agent_id: agent_id.clone(),
        kind: Some(kind),
    };
    outgoing
        .send(ready(pb::agent_message::Kind::Ready(pb::Ready::default())))
        .await
        .unwrap();
    let mut incoming = agent
        .session(tokio_stream::wrappers::ReceiverStream::new(receiver))
        .await
        .unwrap()
        .into_inner();
    let offer = match incoming.message().await.unwrap().unwrap().kind {
        Some(pb::coordinator_message::Kind::Offer(offer)) => offer,
        other => panic!("expected an offer, got {other:?}"),
    };
    assert_eq!(offer.run_id, run_id);
    let event = |seq: u64| pb::JobEvent {
        seq,
        at_ms: 0,
        payload_json: serde_json::to_string(&JobEventPayload::Log {
            level: LogLevel::Info,
            line: format!("event {seq}"),
        })
        .unwrap(),
    };
    let push = |events: Vec<pb::JobEvent>| pb::PushEventsRequest {
        agent_id: agent_id.clone(),
        job_id: offer.job_id.clone(),
        attempt: offer.attempt,
        events,
        lost_before: 0,
    };
    let first = agent
        .push_events(push(vec![event(0), event(1)]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.acked, vec![0, 1]);
    let again = agent
        .push_events(push(vec![event(1), event(2)]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.acked, vec![1, 2]);
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let events: Vec<StoredEvent> = store
        .events()
        .of_attempt(offer.job_id.parse().unwrap(), offer.attempt)
        .await
        .unwrap();
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    // A stale attempt is refused with a reason the agent acts on.
    let mut stale = push(vec![event(3)]);
    stale.attempt += 1;
    let refused = agent.push_events(stale).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().contains("no longer leased"),
        "{}",
        refused.message()
    );
}

/// Issue 11: a heartbeat from an agent the coordinator does not know updated nothing and said
/// nothing (the error was only logged), so the agent talked into the void.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_from_an_unregistered_agent_ends_with_register_first() {
    let tmp = tempfile::tempdir().unwrap();
    let coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let mut agent = pb::agent_service_client::AgentServiceClient::connect(coordinator.url())
        .await
        .unwrap();
    let agent_id = abfleet_core::AgentId::new_random().to_string();
    let heartbeat = || pb::AgentMessage {
        agent_id: agent_id.clone(),
        kind: Some(pb::agent_message::Kind::Heartbeat(pb::Heartbeat::default())),
    };
    // No register: the session's first message is a heartbeat.
    let (outgoing, receiver) = tokio::sync::mpsc::channel(4);
    outgoing.send(heartbeat()).await.unwrap();
    let mut incoming = agent
        .session(tokio_stream::wrappers::ReceiverStream::new(receiver))
        .await
        .unwrap()
        .into_inner();
    let ended = tokio::time::timeout(Duration::from_secs(10), incoming.message())
        .await
        .expect("the coordinator must answer, not stay silent")
        .unwrap_err();
    assert_eq!(ended.code(), tonic::Code::FailedPrecondition, "{ended}");
    assert!(
        ended.message().contains(&agent_id) && ended.message().contains("register first"),
        "{}",
        ended.message()
    );
    // Registering, as the agent does when it reconnects, is the cure.
    agent
        .register(pb::RegisterRequest {
            agent_id: agent_id.clone(),
            inventory: Some(abfleet_agent::inventory::probe_host().into()),
            agent_version: "test".into(),
        })
        .await
        .unwrap();
    let (outgoing, receiver) = tokio::sync::mpsc::channel(4);
    outgoing.send(heartbeat()).await.unwrap();
    let mut incoming = agent
        .session(tokio_stream::wrappers::ReceiverStream::new(receiver))
        .await
        .unwrap()
        .into_inner();
    let quiet = tokio::time::timeout(Duration::from_millis(500), incoming.message()).await;
    assert!(
        quiet.is_err(),
        "a registered agent's session stays open: {quiet:?}"
    );
    drop(outgoing);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_agent_loses_its_lease_and_another_agent_finishes_the_job() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = SpecOptions {
        workloads: &["psnr", "motion", "float_ssim"],
        runs: 5,
        frames: 120,
        ..SpecOptions::path()
    }
    .write(tmp.path(), "spec.toml");
    let config = CoordinatorConfig {
        lease: Duration::from_millis(1500),
        heartbeat_interval: Duration::from_millis(200),
        max_attempts: 3,
        agent_lost_after: Duration::from_secs(1),
        ..CoordinatorConfig::default()
    };
    let coordinator = TestCoordinator::start(&tmp.path().join("data"), config).await;
    // A real agent process, so that it can die the way hosts die: SIGKILL, no goodbye.
    let mut doomed = std::process::Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(["agent", "--coordinator", &coordinator.url(), "--work-dir"])
        .arg(tmp.path().join("doomed"))
        .spawn()
        .unwrap();
    let mut client = coordinator.control().await;
    let run_id = submit(&mut client, &spec).await;
    wait_until(
        Duration::from_secs(120),
        "the doomed agent to start timing",
        || {
            let mut client = client.clone();
            let run_id = run_id.clone();
            async move { (!report(&mut client, &run_id).await.cells.is_empty()).then_some(()) }
        },
    )
    .await;
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    let at_kill = report(&mut client, &run_id).await;
    assert!(
        at_kill.cells.len() < 3,
        "the job must still be running when its agent dies"
    );
    let _rescuer = TestAgent::start(&coordinator.url(), &tmp.path().join("rescuer"));
    let report = wait_for_report(&mut client, &run_id, Duration::from_secs(180)).await;
    assert_eq!(report.status, "done", "{:?}", report.errors);
    assert_eq!(
        report.attempts, 2,
        "the job ran again after the lease expired"
    );
    assert_eq!(report.cells.len(), 3);
    assert_eq!(report.exit_code, 0);
}
