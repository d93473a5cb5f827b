use std::sync::Arc;

use abfleet_core::certs::{self, Role};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// A loopback server answering each connection with `response` after reading a request
/// head and its `content-length` body; sends each request it read to the returned channel.
async fn plain_server(
    response: &'static str,
) -> (String, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (seen, requests) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let request = read_request(&mut socket).await;
            let _ = seen.send(request);
            socket.write_all(response.as_bytes()).await.unwrap();
        }
    });
    (format!("http://{addr}"), requests)
}

async fn read_request<S: tokio::io::AsyncRead + Unpin>(socket: &mut S) -> String {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = socket.read(&mut buf).await.unwrap();
        data.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&data).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            if body.len() >= length {
                return text;
            }
        }
        if n == 0 {
            return text;
        }
    }
}

fn client() -> HttpClient {
    HttpClient::new(None, Duration::from_secs(5)).unwrap()
}

#[tokio::test]
async fn a_post_carries_its_headers_and_body_and_any_status_is_an_answer() {
    let (url, mut requests) = plain_server(
        "HTTP/1.1 422 Unprocessable Entity\r\ncontent-length: 9\r\nx-thing: 1\r\n\r\n{\"e\":\"x\"}",
    )
    .await;
    let response = client()
        .send(&OutboundRequest {
            method: "POST",
            url: format!("{url}/hooks/abc?x=1"),
            headers: vec![("content-type".into(), "application/json".into())],
            body: Some(b"{\"text\":\"hi\"}".to_vec()),
        })
        .await
        .unwrap();
    assert_eq!(response.status, 422);
    assert!(!response.is_success());
    assert_eq!(response.header("X-Thing"), Some("1"));
    assert_eq!(response.body, b"{\"e\":\"x\"}");
    let request = requests.recv().await.unwrap();
    assert!(
        request.starts_with("POST /hooks/abc?x=1 HTTP/1.1\r\n"),
        "{request}"
    );
    assert!(
        request
            .to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{request}"
    );
    assert!(request.ends_with("{\"text\":\"hi\"}"), "{request}");
}

#[tokio::test]
async fn a_silent_endpoint_times_out_and_a_closed_port_fails_to_connect() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            held.push(socket);
        }
    });
    let quick = HttpClient::new(None, Duration::from_millis(300)).unwrap();
    let request = OutboundRequest {
        method: "GET",
        url: format!("http://{addr}/"),
        headers: vec![],
        body: None,
    };
    let err = quick.send(&request).await.unwrap_err();
    assert!(matches!(err, OutboundError::Timeout { .. }), "{err}");

    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed_addr = closed.local_addr().unwrap();
    drop(closed);
    let err = quick
        .send(&OutboundRequest {
            url: format!("http://{closed_addr}/"),
            ..request
        })
        .await
        .unwrap_err();
    assert!(matches!(err, OutboundError::Connect { .. }), "{err}");
}

#[tokio::test]
async fn plain_http_off_loopback_and_credentials_in_the_url_are_refused_before_dialing() {
    for (url, why) in [
        ("http://hooks.example.com/x", "loopback only"),
        (
            "https://user:secret@hooks.example.com/x",
            "credentials in the URL",
        ),
        ("ftp://hooks.example.com/x", "https://"),
        ("not a url", "does not parse"),
    ] {
        let err = client()
            .send(&OutboundRequest {
                method: "GET",
                url: url.into(),
                headers: vec![],
                body: None,
            })
            .await
            .unwrap_err();
        assert!(err.to_string().contains(why), "{url}: {err}");
    }
    assert_eq!(
        url_origin("https://hooks.slack.com/services/T0/B0/SECRET"),
        "https://hooks.slack.com"
    );
}

/// HTTPS to a server whose certificate a private CA signed: refused with the system's
/// trust store alone, accepted with that CA added.
#[tokio::test]
async fn https_verifies_the_server_against_the_trust_store_and_an_added_ca() {
    let ca = certs::new_ca("test endpoint CA").unwrap();
    let leaf = certs::issue(&ca, Role::Coordinator, "endpoint", &["localhost".into()]).unwrap();
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes())
            .map(Result::unwrap)
            .collect();
    let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(mut tls) = acceptor.accept(socket).await {
                    read_request(&mut tls).await;
                    let _ = tls
                        .write_all(b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\nok")
                        .await;
                    let _ = tls.shutdown().await;
                }
            });
        }
    });
    let request = OutboundRequest {
        method: "POST",
        url: format!("https://localhost:{port}/alert"),
        headers: vec![],
        body: Some(b"{}".to_vec()),
    };
    let err = client().send(&request).await.unwrap_err();
    assert!(matches!(err, OutboundError::Tls { .. }), "{err}");
    let trusting = HttpClient::new(Some(&ca.cert_pem), Duration::from_secs(5)).unwrap();
    let response = trusting.send(&request).await.unwrap();
    assert_eq!(
        (response.status, response.body.as_slice()),
        (201, b"ok".as_slice())
    );
}
