//! The web view's JSON API over real HTTP on loopback (docs/report-format.md, "JSON API"):
//! runs newest first a page at a time, one run, its report, its event stream, the agents,
//! and the errors a bad request gets; every page valid HTML after a real run, and a lost agent
//! on the fleet page.

#[path = "../../html/tests/support/html_check.rs"]
mod html_check;
mod support;

use std::net::SocketAddr;
use std::time::Duration;

use abfleet_coordinator::CoordinatorConfig;
use abfleet_proto::pb;
use abfleet_proto::pb::control_service_client::ControlServiceClient;
use serde_json::Value;
use support::*;

async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let path = path.to_string();
    tokio::task::spawn_blocking(move || http_request(addr, "GET", &path, &[], b""))
        .await
        .unwrap()
}

async fn get_json(addr: SocketAddr, path: &str) -> (u16, Value) {
    let (status, body) = get(addr, path).await;
    let value = serde_json::from_str(&body).unwrap_or_else(|err| panic!("{path}: {err}: {body}"));
    (status, value)
}

fn ids(page: &Value) -> Vec<String> {
    page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["run_id"].as_str().unwrap().to_string())
        .collect()
}

/// A GET with its own `Host` header.
async fn get_as(addr: SocketAddr, host: &str, path: &str) -> (u16, String) {
    let (host, path) = (host.to_string(), path.to_string());
    tokio::task::spawn_blocking(move || {
        http_request(addr, "GET", &path, &[("Host".to_string(), host)], b"")
    })
    .await
    .unwrap()
}

/// Issue 23: the plaintext web view answered any `Host`, so a page whose name was rebound to
/// 127.0.0.1 (DNS rebinding) could read it from the operator's browser. On both plaintext
/// listeners (`--http` with the web view, and `--web` on loopback) only loopback names are
/// answered; `/healthz` on `--http` is not the web view and answers anyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plaintext_web_view_answers_only_loopback_host_names() {
    let tmp = tempfile::tempdir().unwrap();
    let coordinator =
        TestCoordinator::start_with_web(&tmp.path().join("data"), CoordinatorConfig::default())
            .await;
    let http = coordinator.web.unwrap();
    let fleet =
        abfleet_coordinator::Coordinator::open(&tmp.path().join("web-only"), Default::default())
            .unwrap()
            .fleet;
    let web_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let web_only = web_listener.local_addr().unwrap();
    tokio::spawn(abfleet_coordinator::web::serve_web_plaintext(
        fleet,
        web_listener,
        std::future::pending(),
    ));
    for addr in [http, web_only] {
        for path in ["/", "/api/runs", "/fleet"] {
            for host in [
                "evil.example",
                "evil.example:80",
                &format!("evil.example:{}", addr.port()),
            ] {
                let (status, body) = get_as(addr, host, path).await;
                assert_eq!(status, 421, "{addr}{path} as {host}: {body}");
                assert!(body.contains("loopback name"), "{body}");
            }
            for host in [
                addr.to_string(),
                "127.0.0.1".to_string(),
                format!("localhost:{}", addr.port()),
                format!("[::1]:{}", addr.port()),
            ] {
                let (status, body) = get_as(addr, &host, path).await;
                assert_eq!(status, 200, "{addr}{path} as {host}: {body}");
            }
        }
    }
    assert_eq!(get_as(http, "evil.example", "/healthz").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_pages_runs_newest_first_and_says_what_is_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let coordinator =
        TestCoordinator::start_with_web(&tmp.path().join("data"), CoordinatorConfig::default())
            .await;
    let (url, web) = (coordinator.url(), coordinator.web.unwrap());
    let spec = SpecOptions::path().write(tmp.path(), "spec.toml");
    let mut control = ControlServiceClient::connect(url).await.unwrap();
    // No agent: the runs stay queued.
    let mut submitted = Vec::new();
    for _ in 0..3 {
        submitted.push(submit(&mut control, &spec).await);
        // Runs are ordered by submission time in milliseconds: one apart.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let newest_first: Vec<String> = submitted.iter().rev().cloned().collect();

    let (status, first) = get_json(web, "/api/runs?limit=2").await;
    assert_eq!(status, 200);
    assert_eq!(ids(&first), newest_first[..2]);
    assert_eq!(first["next_offset"], 2);
    let (_, second) = get_json(web, "/api/runs?offset=2&limit=2").await;
    assert_eq!(ids(&second), newest_first[2..]);
    assert_eq!(second["next_offset"], Value::Null);

    let (status, run) = get_json(web, &format!("/api/runs/{}", submitted[0])).await;
    assert_eq!(status, 200);
    assert_eq!(run["state"], "queued");
    assert_eq!(
        (run["cells_done"].clone(), run["cells_total"].clone()),
        (0.into(), 2.into())
    );
    assert_eq!(run["exit_code"], Value::Null);

    // A cancelled run's event stream is its snapshot, which ends it.
    control
        .cancel_run(pb::CancelRunRequest {
            run_id: submitted[0].clone(),
            reason: "test".into(),
        })
        .await
        .unwrap();
    let (status, events) = get(web, &format!("/api/runs/{}/events", submitted[0])).await;
    assert_eq!(status, 200);
    let data: Vec<Value> = events
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    assert!(events.contains("event: progress"), "{events}");
    assert_eq!(data.len(), 1, "{events}");
    assert_eq!(data[0]["exit_code"], 130);
    assert_eq!(data[0]["state"], "cancelled");
    let (status, report) = get_json(web, &format!("/api/runs/{}/report", submitted[0])).await;
    assert_eq!(status, 200);
    assert_eq!(report["run_id"], submitted[0].as_str());
    assert_eq!(report["exit_code"], 130);

    let (status, agents) = get_json(web, "/api/agents").await;
    assert_eq!(status, 200);
    assert_eq!(agents["agents"], serde_json::json!([]));

    let unknown = uuid::Uuid::new_v4();
    let (status, error) = get_json(web, &format!("/api/runs/{unknown}")).await;
    assert_eq!(status, 404);
    assert!(
        error["error"].as_str().unwrap().contains("does not exist"),
        "{error}"
    );
    let (status, error) = get_json(web, "/api/runs/not-a-run").await;
    assert_eq!(status, 400);
    assert!(
        error["error"].as_str().unwrap().contains("not a run id"),
        "{error}"
    );
    let (status, error) = get_json(web, "/api/runs?limit=1000").await;
    assert_eq!(status, 400);
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("limit=N (1 to 200)"),
        "{error}"
    );
    let (status, page) = get(web, &format!("/runs/{unknown}")).await;
    assert_eq!(status, 404, "{page}");
}

/// Every page of the web view, after a real run, parses without a single HTML error; an
/// agent that stopped heartbeating is listed as lost, on `/fleet` and in `/api/agents`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_are_valid_html_and_the_fleet_page_names_a_lost_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let config = CoordinatorConfig {
        heartbeat_interval: Duration::from_millis(300),
        agent_lost_after: Duration::from_secs(2),
        ..CoordinatorConfig::default()
    };
    let coordinator = TestCoordinator::start_with_web(&tmp.path().join("data"), config).await;
    let web = coordinator.web.unwrap();
    let agent = TestAgent::start(&coordinator.url(), &tmp.path().join("agent"));
    let mut control = coordinator.control().await;
    let spec = SpecOptions::path().write(tmp.path(), "spec.toml");
    let (run_id, report) = submit_and_wait(&mut control, &spec).await;
    let generation = report.generations[0].key.clone();
    let (_, agents) = get_json(web, "/api/agents").await;
    let agent_id = agents["agents"][0]["agent_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(agents["agents"][0]["lost"], false, "{agents}");
    agent.stop().await;
    wait_until(
        Duration::from_secs(30),
        "the agent to be lost",
        || async move {
            let (_, agents) = get_json(web, "/api/agents").await;
            (agents["agents"][0]["lost"] == true).then_some(())
        },
    )
    .await;

    let (status, fleet) = get(web, "/fleet").await;
    assert_eq!(status, 200);
    assert!(
        fleet.contains(&format!(r#"data-agent-id="{agent_id}" data-state="lost""#)),
        "{fleet}"
    );
    assert!(fleet.contains("1 agent(s), 1 lost."), "{fleet}");
    let history = format!(
        "/history?generation={}&workload=float_ssim",
        generation.replace('/', "%2F")
    );
    for path in [
        "/".to_string(),
        format!("/runs/{run_id}"),
        format!("/runs/{run_id}/report-body"),
        "/fleet".to_string(),
        "/history".to_string(),
        history,
    ] {
        let (status, page) = get(web, &path).await;
        assert_eq!(status, 200, "{path}: {page}");
        let page = if path.ends_with("report-body") {
            // A fragment: checked in the document the live page puts it into.
            format!("<!DOCTYPE html><html lang=en><title>t</title><body><section>{page}</section></body></html>")
        } else {
            page
        };
        let (_, errors) = html_check::parse(&page);
        assert_eq!(errors, Vec::<String>::new(), "{path}: HTML parse errors");
    }
}
