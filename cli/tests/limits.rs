//! Size limits that used to wedge or hide work, provoked for real over gRPC on loopback:
//! a fleet whose inventories add up past gRPC's default 4 MiB message still lists (paging),
//! list pages are consistent and their tokens checked, and an oversize spec is refused with
//! a status that names the limit.

mod support;

use std::process::Command;

use abfleet_coordinator::{CoordinatorConfig, MAX_CONTROL_MESSAGE_BYTES, MAX_SPEC_JSON_BYTES};
use abfleet_core::AgentId;
use abfleet_proto::pb;
use abfleet_proto::pb::agent_service_client::AgentServiceClient;
use support::*;
use tonic::Code;

/// An inventory of about `bytes` as JSON (under the 256 KiB a registration may carry).
fn big_inventory(bytes: usize) -> pb::Inventory {
    let mut inventory = abfleet_agent::inventory::probe_host();
    inventory.hardware = Some(serde_json::json!({ "padding": "x".repeat(bytes) }));
    inventory.into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_larger_than_one_message_lists_by_pages() {
    let tmp = tempfile::tempdir().unwrap();
    let mut coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let mut agents = AgentServiceClient::connect(coordinator.url())
        .await
        .unwrap();
    // 24 agents × 240 KB ≈ 5.8 MB of inventories: one ListAgents reply of all of them is
    // over gRPC's default 4 MiB decoding limit.
    let mut ids = Vec::new();
    for _ in 0..24 {
        let id = AgentId::new_random();
        agents
            .register(pb::RegisterRequest {
                agent_id: id.to_string(),
                inventory: Some(big_inventory(240_000)),
                agent_version: env!("CARGO_PKG_VERSION").to_string(),
            })
            .await
            .unwrap();
        ids.push(id.to_string());
    }

    let mut control = coordinator.control().await;
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = control
            .list_agents(pb::ListAgentsRequest {
                page_size: 7,
                page_token: token,
            })
            .await
            .unwrap()
            .into_inner();
        pages += 1;
        assert!(page.agents.len() <= 7);
        seen.extend(page.agents.into_iter().map(|a| a.agent_id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(pages, 4, "24 agents in pages of 7");
    assert_eq!(seen, ids, "each agent once, in registration order");

    let bad = control
        .list_agents(pb::ListAgentsRequest {
            page_size: 7,
            page_token: "not-a-token".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("page_token"), "{}", bad.message());

    // The CLI pages through all of them.
    let output = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(["agents", "--coordinator", &coordinator.url()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for id in &ids {
        assert!(stdout.contains(id.as_str()), "{id} missing from:\n{stdout}");
    }
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_page_newest_first_or_oldest_first_and_an_oversize_spec_is_refused_naming_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let mut coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let mut control = coordinator.control().await;
    let spec = SpecOptions::path().write(tmp.path(), "spec.toml");
    // No agent: the runs stay queued, which is all a list needs.
    let mut submitted = Vec::new();
    for _ in 0..5 {
        submitted.push(submit(&mut control, &spec).await);
        // Each its own millisecond, so submission order is the list's order.
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    for oldest_first in [false, true] {
        let mut listed = Vec::new();
        let mut token = String::new();
        loop {
            let page = control
                .list_runs(pb::ListRunsRequest {
                    page_size: 2,
                    page_token: token,
                    oldest_first,
                })
                .await
                .unwrap()
                .into_inner();
            assert!(page.runs.len() <= 2);
            listed.extend(page.runs.into_iter().map(|r| r.run_id));
            if page.next_page_token.is_empty() {
                break;
            }
            token = page.next_page_token;
        }
        let mut expected = submitted.clone();
        if !oldest_first {
            expected.reverse();
        }
        assert_eq!(listed, expected, "oldest_first: {oldest_first}");
    }
    // A token this coordinator never gave out (an offset, as older ones did) is refused.
    let status = control
        .list_runs(pb::ListRunsRequest {
            page_size: 2,
            page_token: "200".into(),
            oldest_first: false,
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains("start again"),
        "{}",
        status.message()
    );

    // `abfleet runs` lists the newest first: --limit 3 shows three and says there are more,
    // --all shows every run and says nothing more.
    let listed_by_cli = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args(["runs", "--coordinator", &coordinator.url()])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        assert!(output.status.success(), "{stderr}");
        let ids: Vec<String> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .skip(1)
            .filter_map(|line| line.split_whitespace().next().map(str::to_string))
            .collect();
        (ids, stderr)
    };
    let newest_first: Vec<String> = submitted.iter().rev().cloned().collect();
    let (ids, stderr) = listed_by_cli(&["--limit", "3"]);
    assert_eq!(ids, newest_first[..3], "{stderr}");
    assert!(stderr.contains("--all"), "{stderr}");
    let (ids, stderr) = listed_by_cli(&["--all"]);
    assert_eq!(ids, newest_first, "{stderr}");
    assert!(!stderr.contains("--all"), "{stderr}");

    // A spec over 1 MiB as JSON: refused by the coordinator, naming its limit.
    let mut json: serde_json::Value =
        serde_json::from_str(&abfleet_core::spec::JobSpec::load(&spec).unwrap().to_json()).unwrap();
    json["name"] = serde_json::Value::String("n".repeat(MAX_SPEC_JSON_BYTES + 10));
    let status = control
        .submit_run(pb::SubmitRunRequest {
            spec_json: json.to_string(),
            trigger: "manual".into(),
            spec_origin: "big".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains(&MAX_SPEC_JSON_BYTES.to_string()),
        "{}",
        status.message()
    );
    // Over the control message limit: refused before decoding (OUT_OF_RANGE).
    json["name"] = serde_json::Value::String("n".repeat(MAX_CONTROL_MESSAGE_BYTES + 10));
    let status = control
        .submit_run(pb::SubmitRunRequest {
            spec_json: json.to_string(),
            trigger: "manual".into(),
            spec_origin: "bigger".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::OutOfRange, "{}", status.message());
    assert_eq!(
        coordinator
            .control()
            .await
            .list_runs(pb::ListRunsRequest::default())
            .await
            .unwrap()
            .into_inner()
            .runs
            .len(),
        5,
        "nothing of the refused specs was stored"
    );
    coordinator.stop().await;
}

/// Issue 23: idle and slow clients on the plain-HTTP listener (no bytes at all, or a request
/// head that never ends) held descriptors until gRPC, `/healthz` and the web view failed. Now
/// the listener holds at most its cap, closes the idle ones, and gRPC works throughout.
/// Issue 38: while the cap holds them back, `/healthz` and `/metrics` still answer (on the
/// slots reserved for probes), so a liveness probe does not restart a busy coordinator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_http_clients_are_closed_and_grpc_keeps_working() {
    use abfleet_coordinator::http::{serve_http_with, HttpConfig};
    use abfleet_coordinator::web::limits::ConnectionLimits;
    use std::time::{Duration, Instant};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    let tmp = tempfile::tempdir().unwrap();
    let coordinator = abfleet_coordinator::Coordinator::open(
        &tmp.path().join("data"),
        CoordinatorConfig::default(),
    )
    .unwrap();
    let fleet = coordinator.fleet.clone();
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc_url = format!("http://{}", grpc.local_addr().unwrap());
    tokio::spawn(abfleet_coordinator::serve(
        coordinator,
        grpc,
        abfleet_coordinator::ServerTransport::LoopbackPlaintext,
        std::future::pending(),
    ));
    let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http_addr = http.local_addr().unwrap();
    let limits = ConnectionLimits {
        max_connections: 32,
        first_byte: Duration::from_secs(4),
        header_read: Duration::from_secs(1),
    };
    tokio::spawn(serve_http_with(
        fleet,
        http,
        HttpConfig {
            webhook: None,
            web: false,
            limits,
        },
        std::future::pending(),
    ));

    // 300 sockets that never send a byte, and 20 that send half a request head.
    let mut held = Vec::new();
    for _ in 0..300 {
        held.push(TcpStream::connect(http_addr).await.unwrap());
    }
    for _ in 0..20 {
        let mut slow = TcpStream::connect(http_addr).await.unwrap();
        slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        held.push(slow);
    }

    // gRPC on the same process works while they are held.
    let spec = SpecOptions::path().write(tmp.path(), "spec.toml");
    let mut control =
        abfleet_proto::pb::control_service_client::ControlServiceClient::connect(grpc_url)
            .await
            .unwrap();
    let run_id = submit(&mut control, &spec).await;
    assert!(!run_id.is_empty());

    // The cap is full (the idle sockets hold it for `first_byte`); the probe slots the held
    // sockets past the cap took are free again after `PROBE_DEADLINE`.
    tokio::time::sleep(abfleet_coordinator::web::limits::PROBE_DEADLINE * 2).await;
    let ask = |path: &'static str| async move {
        let mut probe = TcpStream::connect(http_addr).await.unwrap();
        probe
            .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut answer = String::new();
        tokio::time::timeout(Duration::from_secs(5), probe.read_to_string(&mut answer))
            .await
            .expect("the probe's connection is answered and closed")
            .unwrap();
        answer
    };
    let health = ask("/healthz").await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health:?}");
    let metrics = ask("/metrics").await;
    assert!(
        metrics.starts_with("HTTP/1.1 200") && metrics.contains("abfleet_"),
        "{metrics:?}"
    );
    let other = ask("/hooks/github").await;
    assert!(other.starts_with("HTTP/1.1 503"), "{other:?}");

    // Every held socket is closed by the coordinator: the ones over the cap at once, the idle
    // ones after `first_byte`, the slow ones after `header_read`.
    let started = Instant::now();
    for mut socket in held {
        let mut buf = [0u8; 256];
        loop {
            match tokio::time::timeout(Duration::from_secs(10), socket.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(_)) => continue, // a 408 before the close
                Err(_) => panic!("a held socket is still open after {:?}", started.elapsed()),
            }
        }
    }
    assert!(started.elapsed() < Duration::from_secs(10));

    // And the listener answers again.
    let mut fresh = TcpStream::connect(http_addr).await.unwrap();
    fresh
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    fresh.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}
