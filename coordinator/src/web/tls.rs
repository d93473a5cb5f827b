//! The web view under mutual TLS (`abfleet coordinator --web ADDR` with `--tls-*`): HTTPS
//! with the coordinator's certificate, and a client certificate the fleet CA signed required
//! in the handshake. After it, the certificate's role decides: `operator` and `viewer` read
//! the web view; any other role gets 403 saying which role it needs. The pages and `/api/`
//! are never readable without such a certificate. A revoked certificate (`abfleet certs
//! revoke`) gets 403 on every request, also on a connection opened before the revocation,
//! and a live page's event stream ends within a second of it. Idle and slow clients are held
//! to the same [`ConnectionLimits`] as on the plain listeners (a handshake counts as the first
//! byte).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use abfleet_core::certs::{self, CertificateId, Role};
use abfleet_proto::transport::TlsFiles;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info};

use super::limits::{ConnectionCap, ConnectionLimits};
use crate::fleet::{refusal, DenyList, Fleet};
use crate::CoordinatorError;

/// The roles that may read the web view.
pub const WEB_ROLES: [Role; 2] = [Role::Operator, Role::Viewer];

/// The web listener's TLS: the coordinator's certificate, client certificates required.
#[derive(Clone)]
pub struct WebTls {
    acceptor: TlsAcceptor,
    ca_der: Arc<Vec<u8>>,
}

fn tls_error(what: &str, err: impl std::fmt::Display) -> CoordinatorError {
    CoordinatorError::Internal(format!(
        "the web view's TLS setup failed ({what}: {err}); check that --tls-cert and --tls-key are one pair from `abfleet certs issue --role coordinator` and --tls-ca is the fleet's ca.pem"
    ))
}

impl WebTls {
    pub fn new(files: &TlsFiles) -> Result<WebTls, CoordinatorError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(files.cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|err| tls_error("certificate", err))?;
        let key = PrivateKeyDer::from_pem_slice(files.key_pem.as_bytes())
            .map_err(|err| tls_error("private key", err))?;
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(files.ca_pem.as_bytes()) {
            roots
                .add(ca.map_err(|err| tls_error("fleet CA", err))?)
                .map_err(|err| tls_error("fleet CA", err))?;
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .map_err(|err| tls_error("client verifier", err))?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|err| tls_error("protocol versions", err))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)
            .map_err(|err| tls_error("certificate and key", err))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let ca_der = files.ca_der().map_err(|err| tls_error("fleet CA", err))?;
        Ok(WebTls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            ca_der: Arc::new(ca_der),
        })
    }
}

/// Serves the web view over mutual TLS on `listener` until `shutdown` resolves, within the
/// default [`ConnectionLimits`]; open connections (a live run page's event stream) are
/// dropped then.
pub async fn serve_web_tls(
    fleet: Fleet,
    listener: TcpListener,
    tls: WebTls,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), CoordinatorError> {
    serve_web_tls_with(fleet, listener, tls, ConnectionLimits::default(), shutdown).await
}

/// [`serve_web_tls`] within `limits`: at most `max_connections` at once, a TLS handshake
/// finished within `first_byte` and each request head within `header_read`.
pub async fn serve_web_tls_with(
    fleet: Fleet,
    listener: TcpListener,
    tls: WebTls,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), CoordinatorError> {
    let addr = listener
        .local_addr()
        .map_err(|err| CoordinatorError::Internal(err.to_string()))?;
    info!(%addr, "web view on https (mutual TLS: operator or viewer certificates)");
    fleet
        .trust()
        .load_deny_list()
        .await
        .map_err(|err| CoordinatorError::Internal(format!("reading the deny list: {err}")))?;
    let deny_list = fleet.trust().deny_list();
    let app = super::router(fleet);
    let mut connections = tokio::task::JoinSet::new();
    let mut cap = ConnectionCap::new(limits.max_connections, "web view");
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = super::limits::accept(&listener, "web view") => accepted,
        };
        let Some(permit) = cap.admit(peer) else {
            drop(tcp);
            continue;
        };
        let tls = tls.clone();
        let app = app.clone();
        let deny_list = deny_list.clone();
        connections.spawn(async move {
            let _permit = permit;
            let stream = match tokio::time::timeout(limits.first_byte, tls.acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(err)) => {
                    debug!(%peer, %err, "web view: TLS handshake refused");
                    return;
                }
                Err(_) => {
                    debug!(%peer, "web view: TLS handshake timed out");
                    return;
                }
            };
            let allowed = match stream.get_ref().1.peer_certificates() {
                Some([leaf, ..]) => match certs::peer_identity(&tls.ca_der, leaf) {
                    Ok(identity) if WEB_ROLES.contains(&identity.role) => {
                        match deny_list.revoked(&identity.certificate) {
                            Some(revocation) => Err(refusal(&revocation)),
                            None => Ok(identity.certificate),
                        }
                    }
                    Ok(identity) => Err(format!(
                        "certificate `{}` has role {}; the web view needs an operator or viewer certificate (`abfleet certs issue --role viewer --name NAME`)",
                        identity.name, identity.role
                    )),
                    Err(err) => Err(format!("the client certificate was refused: {err}")),
                },
                _ => Err("no client certificate; the web view needs an operator or viewer certificate".to_string()),
            };
            let service = match allowed {
                Ok(certificate) => refused_once_revoked(app, deny_list, certificate),
                Err(message) => {
                    info!(%peer, %message, "web view: refused");
                    forbidden(message)
                }
            };
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read)
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                .await;
            if let Err(err) = served {
                debug!(%peer, %err, "web view: connection ended");
            }
        });
        // Reap finished connections as we go.
        while connections.try_join_next().is_some() {}
    }
    Ok(())
}

/// `app`, answering 403 to each request once `certificate` is revoked, and ending a
/// response still streaming (a live page's events) within a second of it.
fn refused_once_revoked(app: Router, deny_list: DenyList, certificate: CertificateId) -> Router {
    app.layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let deny_list = deny_list.clone();
            let certificate = certificate.clone();
            async move {
                if let Some(revocation) = deny_list.revoked(&certificate) {
                    return (StatusCode::FORBIDDEN, format!("{}\n", refusal(&revocation)))
                        .into_response();
                }
                let response = next.run(request).await;
                // A body of known length is sent as it is; only a stream is watched.
                if axum::body::HttpBody::size_hint(response.body())
                    .exact()
                    .is_some()
                {
                    return response;
                }
                let (parts, body) = response.into_parts();
                let mut body = body.into_data_stream();
                let (chunks, watched) = tokio::sync::mpsc::channel(8);
                tokio::spawn(async move {
                    while deny_list.revoked(&certificate).is_none() && !chunks.is_closed() {
                        tokio::select! {
                            chunk = tokio_stream::StreamExt::next(&mut body) => {
                                let Some(chunk) = chunk else { break };
                                if chunks.send(chunk).await.is_err() {
                                    break;
                                }
                            }
                            () = tokio::time::sleep(Duration::from_secs(1)) => {}
                        }
                    }
                });
                let watched = tokio_stream::wrappers::ReceiverStream::new(watched);
                axum::response::Response::from_parts(parts, axum::body::Body::from_stream(watched))
            }
        },
    ))
}

/// A router that answers every request 403 with `message`.
fn forbidden(message: String) -> Router {
    Router::new().fallback(move || {
        let message = message.clone();
        async move { (StatusCode::FORBIDDEN, format!("{message}\n")) }
    })
}
