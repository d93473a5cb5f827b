//! What an operator's tools see of a running coordinator: `/metrics` and `/healthz` on the
//! `--http` listener (read by a raw HTTP/1.1 request on loopback), the standard gRPC health
//! service and server reflection (as `grpcurl` and load balancers use them), and JSON log
//! lines with the ids as fields.

mod support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};

use abfleet_coordinator::{serve, Coordinator, CoordinatorConfig, ServerTransport};
use support::*;
use tokio::net::TcpListener;
use tokio_stream::StreamExt;

/// GET `path` on `addr`; the status code and the body.
fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    http_request(addr, "GET", path, &[], b"")
}

/// The value of an unlabelled or labelled sample line `name{labels} value`.
fn sample(metrics: &str, series: &str) -> Option<u64> {
    metrics.lines().find_map(|line| {
        line.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|value| value.trim().parse().ok())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_health_and_reflection_show_a_run_as_it_happened() {
    let tmp = tempfile::tempdir().unwrap();
    let coordinator =
        Coordinator::open(&tmp.path().join("data"), CoordinatorConfig::default()).unwrap();
    let fleet = coordinator.fleet.clone();
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc_addr = grpc.local_addr().unwrap();
    let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http_addr = http.local_addr().unwrap();
    tokio::spawn(serve(
        coordinator,
        grpc,
        ServerTransport::LoopbackPlaintext,
        std::future::pending(),
    ));
    tokio::spawn(abfleet_coordinator::http::serve_http(
        fleet,
        http,
        std::future::pending(),
    ));
    let url = format!("http://{grpc_addr}");

    let (status, body) = tokio::task::spawn_blocking(move || http_get(http_addr, "/healthz"))
        .await
        .unwrap();
    assert_eq!((status, body.trim()), (200, "ok"));
    let metrics = || async move {
        tokio::task::spawn_blocking(move || http_get(http_addr, "/metrics"))
            .await
            .unwrap()
    };
    let (status, before) = metrics().await;
    assert_eq!(status, 200);
    assert_eq!(sample(&before, "abfleet_agents_connected"), Some(0));
    assert!(before.contains("# TYPE abfleet_lease_expiries_total counter"));
    assert!(before.contains("abfleet_build_info{version="), "{before}");

    let tmp_agent = tmp.path().join("agent");
    let agent = TestAgent::start(&url, &tmp_agent);
    let mut client =
        abfleet_proto::pb::control_service_client::ControlServiceClient::connect(url.clone())
            .await
            .unwrap();
    wait_for_agents(&client, 1).await;
    let spec = SpecOptions {
        workloads: &["psnr"],
        ..SpecOptions::path()
    }
    .write(tmp.path(), "spec.toml");
    let (_, report) = submit_and_wait(&mut client, &spec).await;
    assert_eq!(report.exit_code, 0, "{:?}", report.errors);

    let (_, after) = metrics().await;
    assert_eq!(
        sample(&after, "abfleet_agents_connected"),
        Some(1),
        "{after}"
    );
    assert_eq!(sample(&after, "abfleet_agents{state=\"idle\"}"), Some(1));
    assert_eq!(sample(&after, "abfleet_jobs{state=\"done\"}"), Some(1));
    assert_eq!(sample(&after, "abfleet_runs{state=\"done\"}"), Some(1));
    assert_eq!(sample(&after, "abfleet_registrations_total"), Some(1));
    assert_eq!(sample(&after, "abfleet_offers_total"), Some(1));
    assert_eq!(sample(&after, "abfleet_lease_expiries_total"), Some(0));
    let events = sample(&after, "abfleet_events_ingested_total").unwrap();
    assert!(
        events >= 3,
        "build, cell and done events at least: {events}"
    );

    // The standard health service, for the whole server and per service.
    let channel = tonic::transport::Endpoint::from_shared(url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    for service in ["", "abfleet.v1.ControlService", "abfleet.v1.AgentService"] {
        let status = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .status;
        assert_eq!(
            status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32,
            "`{service}`"
        );
    }

    // Reflection lists abfleet's services, as `grpcurl list` asks.
    use tonic_reflection::pb::v1::{
        server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        ServerReflectionRequest,
    };
    let mut reflection = ServerReflectionClient::new(channel);
    let mut answers = reflection
        .server_reflection_info(tokio_stream::iter(vec![ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        }]))
        .await
        .unwrap()
        .into_inner();
    let answer = answers.next().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
        panic!("not a service list: {answer:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for name in [
        "abfleet.v1.AgentService",
        "abfleet.v1.ControlService",
        "grpc.health.v1.Health",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} not in {names:?}");
    }
    agent.stop().await;
}

/// A `coordinator --log-format json -v` process on loopback ports and its data dir; the
/// gRPC and HTTP addresses its JSON log lines name (checked on the way). Its standard error is
/// no longer read once both are known: the reader is dropped, as a closed terminal would be.
fn coordinator_logging_json(data_dir: &std::path::Path) -> (KillOnDrop, SocketAddr, SocketAddr) {
    // Port 0 for both: the log lines say where the coordinator listens.
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args(["coordinator", "--plaintext", "--log-format", "json", "-v"])
            .args(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"])
            .arg("--data-dir")
            .arg(data_dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stderr = BufReader::new(child.0.stderr.take().unwrap());
    let (mut grpc, mut http) = (None, None);
    for line in stderr.lines() {
        let line = line.unwrap();
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let message = json["fields"]["message"].as_str().unwrap_or_default();
        if message.starts_with("coordinator listening") {
            assert_eq!(json["level"], "INFO");
            assert!(json["target"]
                .as_str()
                .unwrap()
                .starts_with("abfleet_coordinator"));
            grpc = json["fields"]["addr"].as_str().map(str::to_string);
        } else if message.starts_with("metrics and health on http") {
            http = json["fields"]["addr"].as_str().map(str::to_string);
        }
        if grpc.is_some() && http.is_some() {
            break;
        }
    }
    let grpc: SocketAddr = grpc
        .expect("a JSON `coordinator listening` line with addr")
        .parse()
        .unwrap();
    assert_ne!(grpc.port(), 0);
    let http: SocketAddr = http
        .expect("a JSON `metrics and health` line with addr")
        .parse()
        .unwrap();
    (child, grpc, http)
}

#[test]
fn json_logs_carry_fields_and_the_http_listener_comes_up_with_the_coordinator() {
    let tmp = tempfile::tempdir().unwrap();
    let (_child, _grpc, http) = coordinator_logging_json(&tmp.path().join("data"));
    let (status, body) = http_get(http, "/healthz");
    assert_eq!((status, body.trim()), (200, "ok"));
}

/// `tracing-subscriber` reports a log line it could not write with `eprintln!`, which panics
/// when standard error is what failed: a coordinator whose log reader went away (a closed
/// terminal, a restarted collector) died at its next log line. Its lines are now dropped.
#[test]
fn a_coordinator_whose_log_reader_went_away_keeps_serving() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, grpc, http) = coordinator_logging_json(&tmp.path().join("data"));
    // The reader is gone; each submit logs `run submitted` at info into the closed pipe.
    for _ in 0..3 {
        let submitted = Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args(["submit", "--coordinator", &format!("http://{grpc}")])
            .arg(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/jobs/demo.toml"),
            )
            .output()
            .unwrap();
        assert!(
            submitted.status.success(),
            "submit: {}",
            String::from_utf8_lossy(&submitted.stderr)
        );
    }
    let (status, body) = http_get(http, "/healthz");
    assert_eq!((status, body.trim()), (200, "ok"));
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "the coordinator exited once nobody read its log"
    );
}
