//! Issue 23, case 1: a stolen agent key kept working until the CA was replaced. Now, as an
//! operator does it (docs/security.md, "A key is lost"): a real `abfleet coordinator` over
//! mutual TLS, a real `abfleet agent` with its session open, and `abfleet certs revoke`
//! from the command line. The live session is ended within seconds, every later call with
//! the certificate is refused (also after a restart), `abfleet agents` and `certs list` show
//! it, a re-issued certificate of the same name takes the agent's id back, a certificate
//! named by its serial as `certs show` prints it is refused too, and one certificate cannot
//! register agent ids without end.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use abfleet_core::AgentId;
use abfleet_proto::pb;
use abfleet_proto::pb::agent_service_client::AgentServiceClient;
use abfleet_proto::transport::{client_endpoint, TlsFiles};
use support::{free_port, output_text, KillOnDrop};
use tonic::Code;

fn abfleet(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .current_dir(dir)
        .args(args)
        .env_remove("ABFLEET_TLS_CERT")
        .env_remove("ABFLEET_TLS_KEY")
        .env_remove("ABFLEET_TLS_CA")
        .output()
        .unwrap()
}

fn ok(output: Output) -> String {
    assert!(output.status.success(), "{}", output_text(&output));
    String::from_utf8_lossy(&output.stdout).to_string()
}

/// `--tls-cert/--tls-key/--tls-ca` for the certificate `stem` in `certs`.
fn tls_args(certs: &Path, stem: &str) -> Vec<String> {
    vec![
        "--tls-cert".into(),
        certs.join(format!("{stem}.pem")).display().to_string(),
        "--tls-key".into(),
        certs.join(format!("{stem}.key")).display().to_string(),
        "--tls-ca".into(),
        certs.join("ca.pem").display().to_string(),
    ]
}

/// `abfleet ARGS` as the operator `ops`, against the coordinator at `url`.
fn as_operator(root: &Path, certs: &Path, url: &str, args: &[&str]) -> Output {
    let mut all: Vec<String> = args.iter().map(ToString::to_string).collect();
    all.extend(["--coordinator".to_string(), url.to_string()]);
    all.extend(tls_args(certs, "operator-ops"));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    abfleet(root, &all)
}

fn start_coordinator(root: &Path, certs: &Path, port: u16) -> KillOnDrop {
    let log = std::fs::File::create(root.join(format!("coordinator-{port}.log"))).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_abfleet"));
    command
        .current_dir(root)
        .args(["coordinator", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--data-dir", "data"])
        .args(tls_args(certs, "coordinator-coord"))
        .stdout(Stdio::null())
        .stderr(log);
    KillOnDrop(command.spawn().unwrap())
}

/// An `abfleet agent` with the certificate `stem`, its log in `ROOT/agent-N.log`.
fn start_agent(root: &Path, certs: &Path, url: &str, stem: &str, log: &Path) -> KillOnDrop {
    let log = std::fs::File::create(log).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_abfleet"));
    command
        .current_dir(root)
        .args(["agent", "--coordinator", url, "--work-dir", "agent-work"])
        .args(tls_args(certs, stem))
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log);
    KillOnDrop(command.spawn().unwrap())
}

fn files(certs: &Path, stem: &str) -> TlsFiles {
    TlsFiles::load(
        &certs.join(format!("{stem}.pem")),
        &certs.join(format!("{stem}.key")),
        &certs.join("ca.pem"),
    )
    .unwrap()
}

async fn agent_client(
    url: &str,
    certs: &Path,
    stem: &str,
) -> AgentServiceClient<tonic::transport::Channel> {
    AgentServiceClient::new(
        client_endpoint(url, Some(&files(certs, stem)))
            .unwrap()
            .connect()
            .await
            .unwrap(),
    )
}

fn register(agent_id: AgentId) -> pb::RegisterRequest {
    pb::RegisterRequest {
        agent_id: agent_id.to_string(),
        inventory: Some(abfleet_agent::inventory::probe_host().into()),
        agent_version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

/// Polls `check` every 100 ms for up to `seconds`; how long it took.
fn wait_for(seconds: u64, what: &str, mut check: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < Duration::from_secs(seconds),
            "timed out after {seconds} s waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}

fn agents_table(root: &Path, certs: &Path, url: &str) -> String {
    ok(as_operator(root, certs, url, &["agents"]))
}

/// The `abfleet agents` row of the agent whose certificate is `name`.
fn agent_row(table: &str, name: &str) -> Option<String> {
    table
        .lines()
        .find(|line| line.contains(&format!(" {name} (")))
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_agent_certificate_is_cut_off_within_seconds_and_stays_revoked() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    ok(abfleet(root, &["certs", "init"]));
    for (role, name) in [
        ("coordinator", "coord"),
        ("agent", "bench-1"),
        ("agent", "bench-2"),
        ("agent", "bench-3"),
        ("operator", "ops"),
    ] {
        ok(abfleet(
            root,
            &["certs", "issue", "--role", role, "--name", name],
        ));
    }
    let certs: PathBuf = root.join("abfleet-certs");
    let port = free_port();
    let url = format!("https://127.0.0.1:{port}");
    let mut coordinator = start_coordinator(root, &certs, port);
    let agent_log = root.join("agent-1.log");
    let agent = start_agent(root, &certs, &url, "agent-bench-1", &agent_log);
    wait_for(60, "the agent to register and go idle", || {
        let out = as_operator(root, &certs, &url, &["agents"]);
        out.status.success()
            && agent_row(&String::from_utf8_lossy(&out.stdout), "bench-1")
                .is_some_and(|row| row.contains("idle"))
    });
    let row = agent_row(&agents_table(root, &certs, &url), "bench-1").unwrap();
    let agent_id = row.split_whitespace().next().unwrap().to_string();
    assert!(!row.contains("REVOKED"), "{row}");

    // The key of bench-1 is lost: revoke the certificate, by file, with the session open.
    let revoked = ok(as_operator(
        root,
        &certs,
        &url,
        &[
            "certs",
            "revoke",
            "--cert",
            certs.join("agent-bench-1.pem").to_str().unwrap(),
            "--reason",
            // A reason carries what the operator typed: an escape reaches no terminal.
            "bench-1's key was copied off the host\u{1b}[2J",
        ],
    ));
    assert!(
        revoked.contains("revoked `bench-1` (agent)")
            && revoked.contains(&format!("ended the session of agent {agent_id}")),
        "{revoked}"
    );
    // The agent hears it on its session at once and says what to do.
    let took = wait_for(
        10,
        "the agent to be told its certificate is refused",
        || {
            std::fs::read_to_string(&agent_log)
                .unwrap()
                .contains("the coordinator refuses this agent's certificate")
        },
    );
    let log = std::fs::read_to_string(&agent_log).unwrap();
    assert!(log.contains("copied off the host"), "{log}");
    eprintln!("the revoked agent was told in {took:?}");
    let row = agent_row(&agents_table(root, &certs, &url), "bench-1").unwrap();
    assert!(row.contains("REVOKED"), "{row}");
    // Every later call with the certificate is refused, saying why.
    let mut stolen = agent_client(&url, &certs, "agent-bench-1").await;
    let refused = stolen
        .register(register(agent_id.parse().unwrap()))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert!(
        refused.message().contains("was revoked") && refused.message().contains("copied off"),
        "{}",
        refused.message()
    );
    let listed = ok(as_operator(root, &certs, &url, &["certs", "list"]));
    assert!(
        listed.contains("revoked certificates: 1") && listed.contains("copied off the host"),
        "{listed}"
    );
    assert!(
        !listed.contains('\u{1b}') && listed.contains("host\\u{1b}[2J"),
        "the reason is printed made visible: {listed:?}"
    );
    assert!(
        listed
            .lines()
            .any(|line| line.contains(&agent_id) && line.ends_with("revoked")),
        "{listed}"
    );
    let listed: serde_json::Value = serde_json::from_str(&ok(as_operator(
        root,
        &certs,
        &url,
        &["certs", "list", "--format", "json"],
    )))
    .unwrap();
    assert_eq!(
        listed["revoked"][0]["reason"]
            .as_str()
            .map(|r| r.contains("copied off the host")),
        Some(true),
        "{listed}"
    );
    let listed_agent = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|agent| agent["agent_id"] == agent_id.as_str())
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(
        (&listed_agent["certificate"], &listed_agent["revoked"]),
        (&serde_json::json!("bench-1"), &serde_json::json!(true)),
        "{listed}"
    );

    // The deny list is in the store: a restarted coordinator still refuses the old key.
    drop(agent);
    coordinator.0.kill().unwrap();
    coordinator.0.wait().unwrap();
    coordinator = start_coordinator(root, &certs, port);
    let mut stolen = {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match client_endpoint(&url, Some(&files(&certs, "agent-bench-1")))
                .unwrap()
                .connect()
                .await
            {
                Ok(channel) => break AgentServiceClient::new(channel),
                Err(err) => {
                    assert!(
                        Instant::now() < deadline,
                        "the coordinator did not come back: {err}"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    };
    let refused = stolen
        .register(register(agent_id.parse().unwrap()))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");

    // A new certificate of the same name takes the agent's id back (same work dir).
    ok(abfleet(
        root,
        &[
            "certs", "issue", "--role", "agent", "--name", "bench-1", "--force",
        ],
    ));
    let _agent = start_agent(
        root,
        &certs,
        &url,
        "agent-bench-1",
        &root.join("agent-2.log"),
    );
    wait_for(
        60,
        "the agent to come back with its new certificate",
        || {
            agent_row(&agents_table(root, &certs, &url), "bench-1").is_some_and(|row| {
                row.starts_with(&agent_id) && row.contains("idle") && !row.contains("REVOKED")
            })
        },
    );

    // Named by its serial, as `certs show` prints it (upper case here): refused too.
    let shown = ok(abfleet(
        root,
        &[
            "certs",
            "show",
            certs.join("agent-bench-2.pem").to_str().unwrap(),
        ],
    ));
    let serial = shown
        .lines()
        .find_map(|line| line.strip_prefix("serial "))
        .unwrap()
        .to_uppercase();
    ok(as_operator(
        root,
        &certs,
        &url,
        &["certs", "revoke", &serial, "--reason", "bench-2 retired"],
    ));
    let refused = agent_client(&url, &certs, "agent-bench-2")
        .await
        .register(register(AgentId::new_random()))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    // A revocation needs a reason and something that names a certificate.
    let nonsense = as_operator(
        root,
        &certs,
        &url,
        &["certs", "revoke", "bench-3", "--reason", "x"],
    );
    assert!(!nonsense.status.success());
    assert!(
        output_text(&nonsense).contains("neither a certificate serial nor"),
        "{}",
        output_text(&nonsense)
    );

    // One certificate cannot register agent ids without end (an agent keeps its id).
    let mut flood = agent_client(&url, &certs, "agent-bench-3").await;
    let mut registered = 0;
    let refusal = loop {
        match flood.register(register(AgentId::new_random())).await {
            Ok(_) => registered += 1,
            Err(status) => break status,
        }
        assert!(
            registered <= 100,
            "100 ids registered under one certificate"
        );
    };
    assert_eq!(refusal.code(), Code::ResourceExhausted, "{refusal:?}");
    assert!(
        refusal
            .message()
            .contains("give each host its own certificate"),
        "{}",
        refusal.message()
    );
    assert_eq!(
        registered,
        abfleet_coordinator::CoordinatorConfig::default().max_agent_ids_per_certificate
    );
    drop(coordinator);
}
