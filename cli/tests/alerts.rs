//! Alerts (`[notify]`, docs/operations.md): an `abfleet coordinator` process configured with
//! three endpoints on loopback — a generic JSON receiver with a secret that fails its first
//! two deliveries, a Slack-style receiver, and a dead port — runs a spec whose fork fails
//! parity. Each live endpoint gets the alert once (the failing one after its retries, with a
//! valid signature), the dead one is given up after its attempts, the run is not held up by
//! any of them, and the report lists what was sent. Every try of one alert carries the same
//! delivery id (`X-Abfleet-Delivery`, and `delivery_id` in the JSON). A coordinator stopped
//! (SIGTERM) while an alert is in flight waits for it, so the restart does not send it again.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request a receiver took: its head (request line and headers) and body.
#[derive(Debug, Clone)]
struct Received {
    head: String,
    body: String,
}

impl Received {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// An HTTP endpoint on loopback that records every request and answers the statuses of
/// `script` in turn (the last one from then on).
async fn receiver(script: Vec<u16>) -> (String, Arc<Mutex<Vec<Received>>>) {
    slow_receiver(script, Duration::ZERO).await
}

/// [`receiver`], answering each request `delay` after it arrived.
async fn slow_receiver(script: Vec<u16>, delay: Duration) -> (String, Arc<Mutex<Vec<Received>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hooks/abfleet", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut data = Vec::new();
            let mut buf = [0u8; 8192];
            let received = loop {
                let n = socket.read(&mut buf).await.unwrap_or(0);
                data.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&data).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let received = Received {
                        head: head.to_string(),
                        body: body.to_string(),
                    };
                    let length: usize = received
                        .header("content-length")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    if body.len() >= length {
                        break received;
                    }
                }
                if n == 0 {
                    break Received {
                        head: text,
                        body: String::new(),
                    };
                }
            };
            let status = {
                let mut seen = record.lock().unwrap();
                seen.push(received);
                *script.get(seen.len() - 1).or(script.last()).unwrap()
            };
            tokio::time::sleep(delay).await;
            let body = if status < 300 { "ok" } else { "try later" };
            let _ = socket
                .write_all(
                    format!(
                        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
                .await;
        }
    });
    (url, seen)
}

/// `coordinator.toml` in `dir`: a plaintext coordinator on 127.0.0.1:`port` with its data
/// in `dir/data`, and `rest` (its `[notify]` table).
fn coordinator_config(dir: &Path, port: u16, rest: &str) -> std::path::PathBuf {
    let config = dir.join("coordinator.toml");
    std::fs::write(
        &config,
        format!(
            "[coordinator]\nlisten = \"127.0.0.1:{port}\"\nplaintext = true\ndata_dir = \"data\"\n\n{rest}"
        ),
    )
    .unwrap();
    config
}

/// A spec whose fork fails parity on `float_ssim` (a planted bug): a `parity_failure` alert.
fn drift_spec(dir: &Path) -> std::path::PathBuf {
    SpecOptions {
        fork_build:
            "commands = [[\"make\", \"-s\", \"VARIANT=fork\", \"EXTRA_CFLAGS=-DABFLEET_DRIFT\"]]",
        workloads: &["float_ssim"],
        ..SpecOptions::path()
    }
    .write(dir, "drift.toml")
}

fn private_file(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parity_failure_reaches_each_endpoint_once_through_retries_and_the_report_lists_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (json_url, json_seen) = receiver(vec![500, 503, 200]).await;
    let (slack_url, slack_seen) = receiver(vec![200]).await;
    let dead = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_url = format!("http://{}/x", dead.local_addr().unwrap());
    drop(dead);
    private_file(tmp.path(), "alert-secret", "alert secret\n");
    private_file(tmp.path(), "slack-url", &slack_url);
    let port = free_port();
    let config = coordinator_config(
        tmp.path(),
        port,
        &format!(
            r#"[notify]
report_url = "https://abfleet.example:8443"
retry_after_seconds = 0.2
max_attempts = 3

[[notify.endpoint]]
name = "dashboard"
format = "json"
url = "{json_url}"
secret_file = "alert-secret"

[[notify.endpoint]]
name = "ops-slack"
format = "slack"
url_file = "slack-url"
events = ["parity_failure", "not_carried_out"]

[[notify.endpoint]]
name = "gone"
format = "json"
url = "{dead_url}"
"#
        ),
    );
    let checked = abfleet(tmp.path(), &["config", "check", config.to_str().unwrap()]);
    let text = output_text(&checked);
    assert!(checked.status.success(), "{text}");
    assert!(
        text.contains("# endpoint `ops-slack`: Slack to http://127.0.0.1")
            && !text.contains("/hooks/abfleet"),
        "config check shows where each endpoint points, never its path: {text}"
    );

    let _coordinator = KillOnDrop(
        std::process::Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args(["coordinator", "--config", config.to_str().unwrap()])
            .spawn()
            .unwrap(),
    );
    let url = format!("http://127.0.0.1:{port}");
    let _agent = TestAgent::start(&url, &tmp.path().join("agent"));
    let spec = drift_spec(tmp.path());
    let mut client = control_at(&url).await;
    let run_id = submit(&mut client, &spec).await;
    let report = wait_for_report(&mut client, &run_id, Duration::from_secs(240)).await;
    let finished_at = Instant::now();
    assert_eq!(
        report.exit_code, 1,
        "the fork fails parity: {:?}",
        report.errors
    );

    // The failing endpoint gets it on its third try; the dead one is given up after three.
    let report = wait_until(
        Duration::from_secs(30),
        "every alert delivered or given up",
        || {
            let mut client = client.clone();
            let run_id = run_id.clone();
            async move {
                let report = support::report(&mut client, &run_id).await;
                (report.notifications.len() == 3
                    && report.notifications.iter().all(|n| n.state != "pending"))
                .then_some(report)
            }
        },
    )
    .await;
    eprintln!(
        "alerts settled {:.1} s after the run finished",
        finished_at.elapsed().as_secs_f64()
    );
    let json = json_seen.lock().unwrap().clone();
    assert_eq!(json.len(), 3, "two failures, then delivered: {json:#?}");
    assert!(
        json.iter().all(|r| r.body == json[0].body),
        "the same alert each time"
    );
    let alert: serde_json::Value = serde_json::from_str(&json[2].body).unwrap();
    // One delivery id on every try, in the header and the body, for receivers to dedupe by.
    let delivery = alert["delivery_id"].as_str().unwrap().to_string();
    assert!(
        delivery.starts_with(&format!("{run_id}/parity_failure/")),
        "{delivery}"
    );
    assert!(
        json.iter()
            .all(|r| r.header("x-abfleet-delivery").as_deref() == Some(delivery.as_str())),
        "{json:#?}"
    );
    assert_eq!(alert["event"], "parity_failure");
    assert_eq!(alert["run"]["id"], run_id.as_str());
    assert_eq!(
        alert["report_url"],
        format!("https://abfleet.example:8443/runs/{run_id}").as_str()
    );
    assert!(
        alert["details"][0]
            .as_str()
            .unwrap()
            .starts_with("tiny/float_ssim: "),
        "{alert}"
    );
    let signature = json[2].header("x-abfleet-signature-256").unwrap();
    abfleet_coordinator::webhook::verify_signature(
        b"alert secret",
        json[2].body.as_bytes(),
        Some(&signature),
    )
    .expect("signed with the endpoint's secret");

    let slack = slack_seen.lock().unwrap().clone();
    assert_eq!(slack.len(), 1, "{slack:#?}");
    assert_eq!(
        slack[0].header("x-abfleet-delivery").as_deref(),
        Some(delivery.as_str())
    );
    let message: serde_json::Value = serde_json::from_str(&slack[0].body).unwrap();
    assert!(
        message["text"]
            .as_str()
            .unwrap()
            .contains("test: parity failed"),
        "{message}"
    );

    let by_endpoint = |name: &str| {
        report
            .notifications
            .iter()
            .find(|n| n.endpoint == name)
            .unwrap_or_else(|| panic!("no alert to {name}: {:?}", report.notifications))
            .clone()
    };
    let dashboard = by_endpoint("dashboard");
    assert_eq!(
        (
            dashboard.state.as_str(),
            dashboard.attempts,
            dashboard.last_status
        ),
        ("sent", 3, Some(200))
    );
    let gone = by_endpoint("gone");
    assert_eq!((gone.state.as_str(), gone.attempts), ("given_up", 3));
    assert!(
        gone.last_error
            .as_deref()
            .unwrap()
            .contains("no connection"),
        "{gone:?}"
    );
    let markdown = abfleet_render::render_markdown(&report);
    assert!(
        markdown.contains("- parity_failure to dashboard: sent (HTTP 200)")
            && markdown.contains("- parity_failure to ops-slack: sent (HTTP 200)")
            && markdown.contains("- parity_failure to gone: given up after 3 attempts"),
        "{markdown}"
    );
}

/// Issue 38: a coordinator stopped with SIGTERM while an alert's POST is in flight exited
/// without waiting, and after the restart the alert went out again (two POSTs where one was
/// due). Now it waits for the send (within `OUTBOUND_GRACE`), records it, and the restarted
/// coordinator has nothing left to send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_stopped_with_an_alert_in_flight_waits_for_it_and_never_sends_it_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let (url, seen) = slow_receiver(vec![200], Duration::from_secs(3)).await;
    let port = free_port();
    let config = coordinator_config(
        tmp.path(),
        port,
        &format!(
            r#"[notify]
retry_after_seconds = 0.2

[[notify.endpoint]]
name = "dashboard"
format = "json"
url = "{url}"
"#
        ),
    );
    let start = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args(["coordinator", "--config", config.to_str().unwrap()])
            .spawn()
            .unwrap()
    };
    let mut coordinator = KillOnDrop(start());
    let grpc = format!("http://127.0.0.1:{port}");
    let _agent = TestAgent::start(&grpc, &tmp.path().join("agent"));
    let spec = drift_spec(tmp.path());
    let mut client = control_at(&grpc).await;
    let run_id = submit(&mut client, &spec).await;
    wait_for_report(&mut client, &run_id, Duration::from_secs(240)).await;

    // The alert's POST has arrived and is not answered yet: stop the coordinator.
    wait_until(Duration::from_secs(30), "the alert in flight", || {
        let arrived = seen.lock().unwrap().len();
        async move { (arrived == 1).then_some(()) }
    })
    .await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(coordinator.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::task::spawn_blocking(move || coordinator.0.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");

    // Restarted: the alert is on record as sent, once, and nothing is sent again.
    let _restarted = KillOnDrop(start());
    let mut client = control_at(&grpc).await;
    let report = support::report(&mut client, &run_id).await;
    assert_eq!(report.notifications.len(), 1, "{:?}", report.notifications);
    let alert = &report.notifications[0];
    assert_eq!(
        (alert.state.as_str(), alert.attempts, alert.last_status),
        ("sent", 1, Some(200)),
        "{alert:?}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(seen.lock().unwrap().len(), 1, "the alert arrived twice");
}
