//! Who may read the web view. Under mutual TLS it is HTTPS on its own listener: operator
//! and viewer certificates of the fleet CA read it; an agent's certificate gets 403 saying
//! which role it needs; no certificate, or one from another CA, gets no page at all; and a
//! viewer certificate cannot call the coordinator's gRPC services. A plaintext coordinator
//! refuses a non-loopback `--web`, and serves no web view on a non-loopback `--http`
//! (where `/metrics` works as before). A revoked viewer certificate gets 403 saying why. Real certificates from `abfleet certs`, real TLS on
//! 127.0.0.1, real `abfleet` processes.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use abfleet_coordinator::web::tls::{serve_web_tls_with, WebTls};
use abfleet_coordinator::{serve, Coordinator, CoordinatorConfig, ServerTransport};
use abfleet_proto::pb;
use abfleet_proto::pb::control_service_client::ControlServiceClient;
use abfleet_proto::transport::{client_endpoint, TlsFiles};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls;

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

/// A fleet CA with a coordinator, an operator, a viewer and an agent; and a foreign CA
/// with an operator of its own.
fn make_certs(root: &Path) -> (PathBuf, PathBuf) {
    let ok = |output: Output| {
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        )
    };
    ok(abfleet(root, &["certs", "init"]));
    for (role, name) in [
        ("coordinator", "coord"),
        ("operator", "ops"),
        ("viewer", "dashboard"),
        ("agent", "bench-1"),
    ] {
        ok(abfleet(
            root,
            &["certs", "issue", "--role", role, "--name", name],
        ));
    }
    let foreign = root.join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    ok(abfleet(&foreign, &["certs", "init"]));
    ok(abfleet(
        &foreign,
        &["certs", "issue", "--role", "operator", "--name", "ops"],
    ));
    (root.join("abfleet-certs"), foreign.join("abfleet-certs"))
}

fn files(dir: &Path, stem: &str) -> TlsFiles {
    TlsFiles::load(
        &dir.join(format!("{stem}.pem")),
        &dir.join(format!("{stem}.key")),
        &dir.join("ca.pem"),
    )
    .unwrap()
}

/// A GET over TLS trusting `ca_dir`'s CA, presenting `client` (a stem in `client_dir`) or
/// nothing: `Some((status, body))`, or `None` when no HTTP response came back.
async fn https_get(
    addr: SocketAddr,
    ca_dir: &Path,
    client: Option<(&Path, &str)>,
    path: &str,
) -> Option<(u16, String)> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(ca_dir.join("ca.pem")).unwrap() {
        roots.add(ca.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match client {
        Some((dir, stem)) => {
            let certs: Vec<CertificateDer<'static>> =
                CertificateDer::pem_file_iter(dir.join(format!("{stem}.pem")))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
            let key = PrivateKeyDer::from_pem_file(dir.join(format!("{stem}.key"))).unwrap();
            builder.with_client_auth_cert(certs, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    tls.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), tls.read_to_end(&mut response))
        .await
        .expect("the web view answers or closes");
    if read.is_err() && response.is_empty() {
        return None;
    }
    let response = String::from_utf8_lossy(&response).to_string();
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())?;
    Some((status, body))
}

/// A coordinator under mutual TLS with its certificates in `certs`: gRPC and the TLS web
/// view (within `limits`, or the default ones) on loopback, until the test ends.
async fn serve_with_tls_web(
    dir: &Path,
    certs: &Path,
    limits: Option<abfleet_coordinator::web::limits::ConnectionLimits>,
) -> (SocketAddr, SocketAddr) {
    let coordinator = Coordinator::open(&dir.join("data"), CoordinatorConfig::default()).unwrap();
    let fleet = coordinator.fleet.clone();
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc_addr = grpc.local_addr().unwrap();
    tokio::spawn(serve(
        coordinator,
        grpc,
        ServerTransport::MutualTls(files(certs, "coordinator-coord")),
        std::future::pending(),
    ));
    let web = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let web_addr = web.local_addr().unwrap();
    let web_tls = WebTls::new(&files(certs, "coordinator-coord")).unwrap();
    tokio::spawn(serve_web_tls_with(
        fleet,
        web,
        web_tls,
        limits.unwrap_or_default(),
        std::future::pending(),
    ));
    (grpc_addr, web_addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_tls_only_operator_and_viewer_certificates_read_the_web_view() {
    let tmp = tempfile::tempdir().unwrap();
    let (certs, foreign) = make_certs(tmp.path());
    let (grpc_addr, web_addr) = serve_with_tls_web(tmp.path(), &certs, None).await;

    let (status, body) = https_get(
        web_addr,
        &certs,
        Some((&certs, "operator-ops")),
        "/api/runs",
    )
    .await
    .expect("an operator gets an answer");
    assert_eq!(status, 200, "{body}");
    let runs: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(runs["runs"], serde_json::json!([]));

    let (status, body) = https_get(
        web_addr,
        &certs,
        Some((&certs, "viewer-dashboard")),
        "/fleet",
    )
    .await
    .expect("a viewer gets an answer");
    assert_eq!(status, 200);
    assert!(body.contains("<h1>Fleet</h1>"), "{body}");

    let (status, body) = https_get(
        web_addr,
        &certs,
        Some((&certs, "agent-bench-1")),
        "/api/runs",
    )
    .await
    .expect("an agent gets told why not");
    assert_eq!(status, 403);
    assert!(
        body.contains("role agent") && body.contains("operator or viewer certificate"),
        "{body}"
    );

    for (what, client) in [
        ("no certificate", None),
        (
            "another CA's operator",
            Some((foreign.as_path(), "operator-ops")),
        ),
    ] {
        assert_eq!(
            https_get(web_addr, &certs, client, "/api/runs").await,
            None,
            "{what}: no page without a fleet certificate"
        );
    }

    // A viewer reads the web view only: the control service refuses it.
    let channel = client_endpoint(
        &format!("https://localhost:{}", grpc_addr.port()),
        Some(&files(&certs, "viewer-dashboard")),
    )
    .unwrap()
    .connect()
    .await
    .unwrap();
    let refused = ControlServiceClient::new(channel)
        .list_runs(pb::ListRunsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    assert!(
        refused.message().contains("viewer"),
        "{}",
        refused.message()
    );

    // A revoked viewer certificate (issue 23) reads nothing more, told why.
    let operator = client_endpoint(
        &format!("https://localhost:{}", grpc_addr.port()),
        Some(&files(&certs, "operator-ops")),
    )
    .unwrap()
    .connect()
    .await
    .unwrap();
    let mut operator = ControlServiceClient::new(operator);
    // A reason of 1 MB is refused, naming the limit, and nothing is revoked or stored.
    let refused = operator
        .revoke_certificate(pb::RevokeCertificateRequest {
            certificate_pem: files(&certs, "viewer-dashboard").cert_pem,
            reason: "x".repeat(1 << 20),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(
        refused.message().contains("over the limit of 1000"),
        "{}",
        refused.message()
    );
    let listed = operator
        .list_certificates(pb::ListCertificatesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(
        format!("{listed:?}").len() < 100_000,
        "a reason was stored anyway"
    );
    operator
        .revoke_certificate(pb::RevokeCertificateRequest {
            certificate_pem: files(&certs, "viewer-dashboard").cert_pem,
            reason: "the dashboard host was retired".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let (status, body) = https_get(
        web_addr,
        &certs,
        Some((&certs, "viewer-dashboard")),
        "/fleet",
    )
    .await
    .expect("a revoked viewer is told why");
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("was revoked") && body.contains("dashboard host was retired"),
        "{body}"
    );
    let (status, _) = https_get(web_addr, &certs, Some((&certs, "operator-ops")), "/fleet")
        .await
        .expect("the operator still reads it");
    assert_eq!(status, 200);
}

/// Issue 23: the mutual-TLS web listener had no cap: idle sockets and clients that finish a
/// handshake but never a request held descriptors for good. Now it holds at most its cap,
/// closes idle ones after `first_byte` and slow heads after `header_read`, and gRPC and the
/// web view work throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_clients_of_the_tls_web_view_are_closed_and_grpc_keeps_working() {
    use abfleet_coordinator::web::limits::ConnectionLimits;
    use std::time::Instant;

    let tmp = tempfile::tempdir().unwrap();
    let (certs, _) = make_certs(tmp.path());
    let limits = ConnectionLimits {
        max_connections: 16,
        first_byte: Duration::from_secs(1),
        header_read: Duration::from_secs(1),
    };
    let (grpc_addr, web_addr) = serve_with_tls_web(tmp.path(), &certs, Some(limits)).await;

    // Five clients that finish the handshake and send half a request head, then 200 sockets
    // that never send a byte.
    let connector = {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_file_iter(certs.join("ca.pem")).unwrap() {
            roots.add(ca.unwrap()).unwrap();
        }
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_file_iter(certs.join("operator-ops.pem"))
                .unwrap()
                .map(Result::unwrap)
                .collect();
        let key = PrivateKeyDer::from_pem_file(certs.join("operator-ops.key")).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .unwrap();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    };
    let mut slow = Vec::new();
    for _ in 0..5 {
        let tcp = TcpStream::connect(web_addr).await.unwrap();
        let mut tls = connector
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap();
        tls.write_all(b"GET /fleet HTTP/1.1\r\nHost: localhost\r\n")
            .await
            .unwrap();
        tls.flush().await.unwrap();
        slow.push(tls);
    }
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(web_addr).await.unwrap());
    }

    // gRPC on the same process works while they are held.
    let operator = client_endpoint(
        &format!("https://localhost:{}", grpc_addr.port()),
        Some(&files(&certs, "operator-ops")),
    )
    .unwrap()
    .connect()
    .await
    .unwrap();
    // (support's `list_runs` unwraps: gRPC answers while the web listener is full)
    list_runs(&ControlServiceClient::new(operator)).await;

    // Every held connection is closed by the coordinator: those over the cap at once, the
    // idle ones after `first_byte`, the slow heads after `header_read`.
    let started = Instant::now();
    let deadline = Duration::from_secs(10);
    for mut socket in idle {
        let mut buf = [0u8; 256];
        loop {
            match tokio::time::timeout(deadline, socket.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(_)) => continue,
                Err(_) => panic!("an idle socket is still open after {:?}", started.elapsed()),
            }
        }
    }
    for mut tls in slow {
        let mut buf = [0u8; 256];
        loop {
            match tokio::time::timeout(deadline, tls.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(_)) => continue, // a 408 before the close
                Err(_) => panic!(
                    "a slow TLS client is still connected after {:?}",
                    started.elapsed()
                ),
            }
        }
    }

    // And the web view answers again.
    let (status, body) = https_get(web_addr, &certs, Some((&certs, "operator-ops")), "/fleet")
        .await
        .expect("the operator reads the web view again");
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_plaintext_coordinator_refuses_a_web_view_off_loopback() {
    let tmp = tempfile::tempdir().unwrap();
    let output = abfleet(
        tmp.path(),
        &[
            "coordinator",
            "--plaintext",
            "--listen",
            "127.0.0.1:0",
            "--web",
            "0.0.0.0:0",
            "--data-dir",
            "data",
        ],
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--web 0.0.0.0:0 is not loopback") && stderr.contains("--tls-cert"),
        "{stderr}"
    );
}

/// `abfleet coordinator --plaintext --http HTTP` in `dir`, its stderr kept, once its HTTP
/// listener answers.
async fn coordinator_with_http(dir: &Path, http: SocketAddr) -> KillOnDrop {
    let child = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .current_dir(dir)
        .args(["coordinator", "--plaintext", "--listen", "127.0.0.1:0"])
        .args(["--http", &http.to_string(), "--data-dir", "data"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let child = KillOnDrop(child);
    let addr: SocketAddr = format!("127.0.0.1:{}", http.port()).parse().unwrap();
    wait_until(
        Duration::from_secs(60),
        "the http listener",
        || async move { tokio::net::TcpStream::connect(addr).await.ok().map(|_| ()) },
    )
    .await;
    child
}

/// What the coordinator wrote on stderr until it was killed.
fn stderr_of(mut child: KillOnDrop) -> String {
    let _ = child.0.kill();
    let output = std::mem::replace(&mut child.0, Command::new("true").spawn().unwrap())
        .wait_with_output()
        .unwrap();
    String::from_utf8_lossy(&output.stderr).into_owned()
}

async fn request(addr: SocketAddr, method: &'static str, path: &'static str) -> u16 {
    tokio::task::spawn_blocking(move || http_request(addr, method, path, &[], b"").0)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_http_listener_off_loopback_serves_metrics_but_no_web_view() {
    let tmp = tempfile::tempdir().unwrap();
    let port = support::free_port();
    let child = coordinator_with_http(tmp.path(), format!("0.0.0.0:{port}").parse().unwrap()).await;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert_eq!(request(addr, "GET", "/metrics").await, 200);
    for path in ["/", "/api/runs", "/fleet"] {
        assert_eq!(
            request(addr, "GET", path).await,
            404,
            "{path} is not served off loopback without TLS"
        );
    }
    let stderr = stderr_of(child);
    assert!(
        stderr.contains(&format!("no web view on http://0.0.0.0:{port}")),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_web_view_says_so_at_start_up_and_is_read_only() {
    let tmp = tempfile::tempdir().unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", support::free_port())
        .parse()
        .unwrap();
    let child = coordinator_with_http(tmp.path(), addr).await;
    assert_eq!(request(addr, "GET", "/").await, 200);
    assert_eq!(request(addr, "GET", "/api/runs").await, 200);
    for (method, path) in [
        ("POST", "/"),
        ("POST", "/api/runs"),
        ("PUT", "/api/agents"),
        ("DELETE", "/fleet"),
        ("POST", "/history"),
    ] {
        assert_eq!(
            request(addr, method, path).await,
            405,
            "{method} {path}: the web view is read-only"
        );
    }
    let stderr = stderr_of(child);
    assert!(
        stderr.contains("the web view with /api (loopback only, no authentication)"),
        "{stderr}"
    );
}
