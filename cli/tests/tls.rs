//! Mutual TLS and roles, tried the way an attacker would: real certificates from `abfleet
//! certs`, a real coordinator serving TLS on 127.0.0.1, real agents and clients. A run
//! completes over TLS; every call with the wrong role, no certificate, a foreign CA's
//! certificate, plaintext, or another agent's id is refused, and the refusal says why.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use abfleet_coordinator::{CoordinatorConfig, ServerTransport};
use abfleet_core::AgentId;
use abfleet_proto::pb;
use abfleet_proto::pb::agent_service_client::AgentServiceClient;
use abfleet_proto::pb::control_service_client::ControlServiceClient;
use abfleet_proto::transport::{client_endpoint, TlsFiles};
use support::*;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
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

fn ok(output: &Output) {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A fleet CA in `root/abfleet-certs` with a coordinator, agents `a` and `b` and operator
/// `ops`; and a foreign CA in `root/foreign/abfleet-certs` with an agent `a` of its own.
fn make_certs(root: &Path) -> PathBuf {
    ok(&abfleet(root, &["certs", "init"]));
    for (role, name) in [
        ("coordinator", "coord"),
        ("agent", "a"),
        ("agent", "b"),
        ("operator", "ops"),
    ] {
        ok(&abfleet(
            root,
            &["certs", "issue", "--role", role, "--name", name],
        ));
    }
    let foreign = root.join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    ok(&abfleet(&foreign, &["certs", "init"]));
    ok(&abfleet(
        &foreign,
        &["certs", "issue", "--role", "agent", "--name", "a"],
    ));
    root.join("abfleet-certs")
}

fn files(dir: &Path, stem: &str) -> TlsFiles {
    TlsFiles::load(
        &dir.join(format!("{stem}.pem")),
        &dir.join(format!("{stem}.key")),
        &dir.join("ca.pem"),
    )
    .unwrap()
}

/// A channel as abfleet's own clients make it (client_endpoint), connected.
async fn channel(url: &str, tls: &TlsFiles) -> Channel {
    client_endpoint(url, Some(tls))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

async fn start_tls_coordinator(data_dir: &Path, certs: &Path) -> TestCoordinator {
    TestCoordinator::start_with_transport(
        data_dir,
        CoordinatorConfig::default(),
        ServerTransport::MutualTls(files(certs, "coordinator-coord")),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
}

fn inventory() -> pb::Inventory {
    abfleet_agent::inventory::probe_host().into()
}

fn register_request(agent_id: AgentId) -> pb::RegisterRequest {
    pb::RegisterRequest {
        agent_id: agent_id.to_string(),
        inventory: Some(inventory()),
        agent_version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

fn assert_refused<T: std::fmt::Debug>(
    result: Result<T, tonic::Status>,
    code: Code,
    needle: &str,
    what: &str,
) {
    let status = result.expect_err(what);
    assert_eq!(status.code(), code, "{what}: {}", status.message());
    assert!(
        status.message().contains(needle),
        "{what}: `{}` does not say `{needle}`",
        status.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_completes_over_mutual_tls_and_each_role_does_only_its_part() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = make_certs(tmp.path());
    let mut coordinator = start_tls_coordinator(&tmp.path().join("data"), &certs).await;
    let url = coordinator.url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    let mut config = abfleet_agent::AgentConfig::new(&url, tmp.path().join("agent"));
    config.tls = Some(files(&certs, "agent-a"));
    let agent = TestAgent::start_with_config(config, abfleet_agent::inventory::probe_host());
    let mut operator =
        ControlServiceClient::new(channel(&url, &files(&certs, "operator-ops")).await);
    wait_for_agents(&operator, 1).await;
    let spec = SpecOptions {
        workloads: &["psnr"],
        ..SpecOptions::path()
    }
    .write(tmp.path(), "spec.toml");
    let (run_id, report) = submit_and_wait(&mut operator, &spec).await;
    assert_eq!(report.status, "done", "{:?}", report.errors);
    assert_eq!(report.exit_code, 0, "{:?}", report.errors);
    assert_eq!(report.cells.len(), 1);

    // An agent's certificate cannot submit, read or cancel.
    let mut as_agent = ControlServiceClient::new(channel(&url, &files(&certs, "agent-b")).await);
    let spec_json = abfleet_core::spec::JobSpec::load(&spec).unwrap().to_json();
    assert_refused(
        as_agent
            .submit_run(pb::SubmitRunRequest {
                spec_json,
                trigger: "manual".into(),
                spec_origin: "attack".into(),
                ..Default::default()
            })
            .await,
        Code::PermissionDenied,
        "needs a certificate of role `operator`",
        "an agent submitting a job",
    );
    assert_refused(
        as_agent.list_runs(pb::ListRunsRequest::default()).await,
        Code::PermissionDenied,
        "agents may only register and report on their own jobs",
        "an agent listing runs",
    );
    assert_refused(
        as_agent
            .cancel_run(pb::CancelRunRequest {
                run_id: run_id.clone(),
                reason: "attack".into(),
            })
            .await,
        Code::PermissionDenied,
        "role `operator`",
        "an agent cancelling a run",
    );

    // An operator's certificate cannot act as an agent.
    let mut as_operator =
        AgentServiceClient::new(channel(&url, &files(&certs, "operator-ops")).await);
    assert_refused(
        as_operator
            .register(register_request(AgentId::new_random()))
            .await,
        Code::PermissionDenied,
        "needs a certificate of role `agent`",
        "an operator registering as an agent",
    );
    // Neither can the coordinator's own certificate (it has no client-auth usage: the
    // handshake itself fails) — nor a certificate from another CA, nor none at all.
    let refused_connection = |what: &'static str, endpoint: Endpoint| async move {
        let result = match endpoint.connect().await {
            Err(_) => return,
            Ok(channel) => {
                ControlServiceClient::new(channel)
                    .list_runs(pb::ListRunsRequest::default())
                    .await
            }
        };
        // Refused at the transport (handshake alert, reset, protocol error): never served.
        let status = result.expect_err(what);
        assert_ne!(status.code(), Code::Ok, "{what}");
    };
    let foreign = files(&tmp.path().join("foreign/abfleet-certs"), "agent-a");
    let foreign_client = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(files(&certs, "agent-a").ca_pem))
        .identity(tonic::transport::Identity::from_pem(
            &foreign.cert_pem,
            &foreign.key_pem,
        ))
        .domain_name("127.0.0.1");
    refused_connection(
        "a certificate from a foreign CA",
        Endpoint::from_shared(url.clone())
            .unwrap()
            .tls_config(foreign_client)
            .unwrap(),
    )
    .await;
    let no_identity = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(files(&certs, "agent-a").ca_pem))
        .domain_name("127.0.0.1");
    refused_connection(
        "no client certificate",
        Endpoint::from_shared(url.clone())
            .unwrap()
            .tls_config(no_identity)
            .unwrap(),
    )
    .await;
    refused_connection(
        "plaintext to the TLS port",
        Endpoint::from_shared(format!("http://{}", coordinator.addr)).unwrap(),
    )
    .await;
    // A client that trusts only a foreign CA does not trust this coordinator either.
    refused_connection(
        "a coordinator certificate the client's CA did not sign",
        client_endpoint(&url, Some(&foreign)).unwrap(),
    )
    .await;

    agent.stop().await;
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_certificate_speaks_only_for_its_own_agent_id_across_restarts() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = make_certs(tmp.path());
    let data_dir = tmp.path().join("data");
    let mut coordinator = start_tls_coordinator(&data_dir, &certs).await;
    let url = coordinator.url();
    let victim = AgentId::new_random();
    let mut a = AgentServiceClient::new(channel(&url, &files(&certs, "agent-a")).await);
    let mut b = AgentServiceClient::new(channel(&url, &files(&certs, "agent-b")).await);
    a.register(register_request(victim)).await.unwrap();

    assert_refused(
        b.register(register_request(victim)).await,
        Code::PermissionDenied,
        "belongs to the certificate `a`, not to `b`",
        "registering under another agent's id",
    );
    assert_refused(
        b.push_events(pb::PushEventsRequest {
            agent_id: victim.to_string(),
            job_id: abfleet_core::JobId::new_random().to_string(),
            attempt: 1,
            events: vec![],
            lost_before: 0,
        })
        .await,
        Code::PermissionDenied,
        "belongs to the certificate `a`",
        "pushing events under another agent's id",
    );
    let first = pb::AgentMessage {
        agent_id: victim.to_string(),
        kind: Some(pb::agent_message::Kind::Ready(pb::Ready::default())),
    };
    assert_refused(
        b.session(tokio_stream::iter(vec![first])).await,
        Code::PermissionDenied,
        "belongs to the certificate `a`",
        "opening a session under another agent's id",
    );
    // An id nobody registered cannot open a session or report.
    let stranger = AgentId::new_random();
    assert_refused(
        b.push_events(pb::PushEventsRequest {
            agent_id: stranger.to_string(),
            job_id: abfleet_core::JobId::new_random().to_string(),
            attempt: 1,
            events: vec![],
            lost_before: 0,
        })
        .await,
        Code::FailedPrecondition,
        "has not registered",
        "pushing events under an unregistered id",
    );

    // The binding is in the store: a restarted coordinator keeps it.
    coordinator.stop().await;
    let mut coordinator = TestCoordinator::start_with_transport(
        &data_dir,
        CoordinatorConfig::default(),
        ServerTransport::MutualTls(files(&certs, "coordinator-coord")),
        coordinator.addr,
    )
    .await;
    let url = coordinator.url();
    let mut b = AgentServiceClient::new(channel(&url, &files(&certs, "agent-b")).await);
    assert_refused(
        b.register(register_request(victim)).await,
        Code::PermissionDenied,
        "belongs to the certificate `a`",
        "registering under another agent's id after a restart",
    );
    let mut a = AgentServiceClient::new(channel(&url, &files(&certs, "agent-a")).await);
    a.register(register_request(victim)).await.unwrap();
    coordinator.stop().await;
}

/// The CLI's side: the coordinator needs TLS files or an explicit `--plaintext` on loopback;
/// clients dial https:// with certificates and the role decides; plaintext off loopback is a
/// usage error before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_serves_and_dials_mutual_tls_and_refuses_plaintext_off_loopback() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = make_certs(tmp.path());
    let cert_args = |stem: &str| -> Vec<String> {
        vec![
            "--tls-cert".into(),
            certs.join(format!("{stem}.pem")).display().to_string(),
            "--tls-key".into(),
            certs.join(format!("{stem}.key")).display().to_string(),
            "--tls-ca".into(),
            certs.join("ca.pem").display().to_string(),
        ]
    };
    let run = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        abfleet(tmp.path(), &args)
    };
    let usage_error = |output: &Output, needle: &str, what: &str| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{what}: {stderr}");
        assert!(stderr.contains(needle), "{what}: {stderr}");
    };
    let data = tmp.path().join("data").display().to_string();

    usage_error(
        &run(vec![
            "coordinator".into(),
            "--data-dir".into(),
            data.clone(),
        ]),
        "or --plaintext on a loopback --listen",
        "a coordinator with neither TLS nor --plaintext",
    );
    usage_error(
        &run(vec![
            "coordinator".into(),
            "--listen".into(),
            "0.0.0.0:0".into(),
            "--plaintext".into(),
            "--data-dir".into(),
            data.clone(),
        ]),
        "plaintext is allowed on loopback only",
        "a plaintext coordinator on 0.0.0.0",
    );
    usage_error(
        &run(vec![
            "agents".into(),
            "--coordinator".into(),
            "http://192.0.2.1:7700".into(),
        ]),
        "plaintext to a host that is not loopback",
        "a plaintext client to a remote coordinator",
    );
    usage_error(
        &run(vec![
            "agents".into(),
            "--coordinator".into(),
            "https://127.0.0.1:7700".into(),
        ]),
        "no certificate was given",
        "https without certificates",
    );
    let key = certs.join("operator-ops.key");
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let mut args = vec![
        "agents".into(),
        "--coordinator".into(),
        "https://127.0.0.1:7700".into(),
    ];
    args.extend(cert_args("operator-ops"));
    usage_error(&run(args), "chmod 600", "a private key others can read");
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();

    // A real coordinator process with TLS; the operator lists agents, an agent may not.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut args = vec![
        "coordinator".into(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--data-dir".into(),
        data,
    ];
    args.extend(cert_args("coordinator-coord"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(&args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let url = format!("https://127.0.0.1:{port}");
    let list = |stem: &str| {
        let mut args = vec!["agents".into(), "--coordinator".into(), url.clone()];
        args.extend(cert_args(stem));
        run(args)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let listed = loop {
        let output = list("operator-ops");
        if output.status.success() || std::time::Instant::now() > deadline {
            break output;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    ok(&listed);
    let refused = list("agent-a");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "an agent listed agents: {stderr}"
    );
    assert!(
        stderr.contains("needs a certificate of role `operator`"),
        "{stderr}"
    );
    // Issue 39: a client holding another CA's files read "check that the URL points at a
    // running coordinator"; it is told the TLS handshake failed, and why.
    let foreign = tmp.path().join("foreign/abfleet-certs");
    let refused = run(vec![
        "agents".into(),
        "--coordinator".into(),
        url.clone(),
        "--tls-cert".into(),
        foreign.join("agent-a.pem").display().to_string(),
        "--tls-key".into(),
        foreign.join("agent-a.key").display().to_string(),
        "--tls-ca".into(),
        foreign.join("ca.pem").display().to_string(),
    ]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("the TLS handshake with the coordinator failed")
            && stderr.contains("not signed by the CA in --tls-ca")
            && !stderr.contains("start one with `abfleet coordinator`"),
        "{stderr}"
    );
    child.kill().unwrap();
    let _ = child.wait();
}

/// A leaf the fleet CA in `certs` signs for `role`/`name` with no extended key usage at all,
/// as `openssl x509 -req` makes one without `-extfile`: its key and certificate, PEM.
fn issue_without_key_usage(certs: &Path, role: &str, name: &str) -> (String, String) {
    let ca_key =
        rcgen::KeyPair::from_pem(&std::fs::read_to_string(certs.join("ca.key")).unwrap()).unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_pem(
        &std::fs::read_to_string(certs.join("ca.pem")).unwrap(),
        ca_key,
    )
    .unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.subject_alt_names = vec![rcgen::SanType::URI(
        format!("abfleet://role/{role}/{name}").try_into().unwrap(),
    )];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// Issue 23: a certificate the fleet CA signed with no extended key usage passed for any
/// client role (webpki's `client_auth()` only checks a usage that is present).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_certificate_without_extended_key_usage_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = make_certs(tmp.path());
    let mut coordinator = start_tls_coordinator(&tmp.path().join("data"), &certs).await;
    let url = coordinator.url();
    let ca_pem = std::fs::read_to_string(certs.join("ca.pem")).unwrap();
    let dial = |(cert_pem, key_pem): (String, String)| {
        let config = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&ca_pem))
            .identity(tonic::transport::Identity::from_pem(cert_pem, key_pem))
            .domain_name("127.0.0.1");
        Endpoint::from_shared(url.clone())
            .unwrap()
            .tls_config(config)
            .unwrap()
    };
    // The handshake may take it (rustls checks a usage only when one is present); the
    // coordinator's role check must not.
    let no_usage = |role: &str| dial(issue_without_key_usage(&certs, role, "no-eku"));
    match no_usage("operator").connect().await {
        Err(_) => {}
        Ok(channel) => assert_refused(
            ControlServiceClient::new(channel)
                .list_runs(pb::ListRunsRequest::default())
                .await,
            Code::Unauthenticated,
            "lacks the extended key usage clientAuth",
            "an operator certificate without extended key usage listing runs",
        ),
    }
    match no_usage("agent").connect().await {
        Err(_) => {}
        Ok(channel) => assert_refused(
            AgentServiceClient::new(channel)
                .register(register_request(AgentId::new_random()))
                .await,
            Code::Unauthenticated,
            "lacks the extended key usage clientAuth",
            "an agent certificate without extended key usage registering",
        ),
    }
    // Dialled the same way, the same CA's certificate from `abfleet certs issue` works.
    let issued = files(&certs, "operator-ops");
    ControlServiceClient::new(
        dial((issued.cert_pem, issued.key_pem))
            .connect()
            .await
            .unwrap(),
    )
    .list_runs(pb::ListRunsRequest::default())
    .await
    .unwrap();
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_certificate_has_its_own_rate_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = make_certs(tmp.path());
    let mut coordinator =
        abfleet_coordinator::Coordinator::open(&tmp.path().join("data"), Default::default())
            .unwrap();
    coordinator.rate_limit = abfleet_coordinator::RateLimit {
        per_second: 0.2,
        burst: 5,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    tokio::spawn(abfleet_coordinator::serve(
        coordinator,
        listener,
        ServerTransport::MutualTls(files(&certs, "coordinator-coord")),
        std::future::pending(),
    ));
    let mut ops = ControlServiceClient::new(channel(&url, &files(&certs, "operator-ops")).await);
    for call in 0..5 {
        ops.list_runs(pb::ListRunsRequest::default())
            .await
            .unwrap_or_else(|status| panic!("call {call} of the burst: {status:?}"));
    }
    assert_refused(
        ops.list_runs(pb::ListRunsRequest::default()).await,
        Code::ResourceExhausted,
        "rate limit: `ops` made more than 5 calls at once",
        "the call after the burst",
    );
    // Another certificate is not slowed down by it.
    let mut agent = AgentServiceClient::new(channel(&url, &files(&certs, "agent-a")).await);
    agent
        .register(register_request(AgentId::new_random()))
        .await
        .unwrap();
}
