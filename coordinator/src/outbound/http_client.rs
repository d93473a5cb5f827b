//! The coordinator's one way out: HTTP/1.1 requests to endpoints it is configured to call
//! (alert webhooks, the GitHub API). `https://` verifies the server against the system's
//! trust store (plus the endpoint's own CA file, for a private CA); `http://` is allowed to
//! loopback only, where a relay or a test endpoint runs. One connection per request, a
//! bounded time for each, a bounded response: nothing a slow or hostile endpoint sends can
//! hold a run or fill memory.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::Uri;
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls;

/// The most of a response body read; the rest is an error.
const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    #[error("`{url}` is not a URL abfleet calls: {why}")]
    Url { url: String, why: String },
    #[error("no connection to {authority}: {source}")]
    Connect {
        authority: String,
        source: std::io::Error,
    },
    #[error("the TLS handshake with {authority} failed: {source}")]
    Tls {
        authority: String,
        source: std::io::Error,
    },
    #[error("{authority} did not answer within {seconds} s")]
    Timeout { authority: String, seconds: u64 },
    #[error("the HTTP exchange with {authority} failed: {why}")]
    Http { authority: String, why: String },
    #[error("the trust store could not be read: {0}; check that the endpoint's `ca_file` holds PEM certificates")]
    TrustStore(String),
}

/// A request: method, absolute URL, headers, body.
#[derive(Debug, Clone)]
pub struct OutboundRequest {
    pub method: &'static str,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
}

/// A response, its body read whole (at most 4 MiB).
#[derive(Debug, Clone)]
pub struct OutboundResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl OutboundResponse {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text, cut to `limit` characters, for a log line or an error.
    pub fn body_excerpt(&self, limit: usize) -> String {
        String::from_utf8_lossy(&self.body)
            .chars()
            .take(limit)
            .collect()
    }
}

/// Makes requests; cheap to clone.
#[derive(Clone)]
pub struct HttpClient {
    tls: tokio_rustls::TlsConnector,
    timeout: Duration,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A client trusting the system's CA certificates and those in `extra_ca_pem` (PEM, for an
    /// endpoint behind a private CA), each request bounded by `timeout`.
    pub fn new(extra_ca_pem: Option<&str>, timeout: Duration) -> Result<HttpClient, OutboundError> {
        let mut roots = rustls::RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for cert in native.certs {
            // A system store may hold a certificate rustls cannot use; the rest still serve.
            let _ = roots.add(cert);
        }
        if let Some(pem) = extra_ca_pem {
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                let cert = cert.map_err(|err| OutboundError::TrustStore(err.to_string()))?;
                roots
                    .add(cert)
                    .map_err(|err| OutboundError::TrustStore(err.to_string()))?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|err| OutboundError::TrustStore(err.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(HttpClient {
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            timeout,
        })
    }

    /// Sends `request`; any status is an answer (the caller decides), only a failure to get
    /// one is an error.
    pub async fn send(&self, request: &OutboundRequest) -> Result<OutboundResponse, OutboundError> {
        let target = Target::parse(&request.url)?;
        let authority = target.authority.clone();
        let seconds = self.timeout.as_secs();
        tokio::time::timeout(self.timeout, self.exchange(target, request))
            .await
            .map_err(|_| OutboundError::Timeout { authority, seconds })?
    }

    async fn exchange(
        &self,
        target: Target,
        request: &OutboundRequest,
    ) -> Result<OutboundResponse, OutboundError> {
        let tcp = tokio::net::TcpStream::connect((target.host.as_str(), target.port))
            .await
            .map_err(|source| OutboundError::Connect {
                authority: target.authority.clone(),
                source,
            })?;
        let _ = tcp.set_nodelay(true);
        if target.tls {
            let name =
                ServerName::try_from(target.host.clone()).map_err(|err| OutboundError::Url {
                    url: request.url.clone(),
                    why: format!("the host is not a valid server name: {err}"),
                })?;
            let stream =
                self.tls
                    .connect(name, tcp)
                    .await
                    .map_err(|source| OutboundError::Tls {
                        authority: target.authority.clone(),
                        source,
                    })?;
            exchange_over(stream, &target, request).await
        } else {
            exchange_over(tcp, &target, request).await
        }
    }
}

async fn exchange_over<S>(
    stream: S,
    target: &Target,
    request: &OutboundRequest,
) -> Result<OutboundResponse, OutboundError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let http_error = |why: String| OutboundError::Http {
        authority: target.authority.clone(),
        why,
    };
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|err| http_error(err.to_string()))?;
    let driver = tokio::spawn(connection);
    let mut builder = hyper::Request::builder()
        .method(request.method)
        .uri(&target.path_and_query)
        .header("host", &target.authority)
        .header("connection", "close");
    for (name, value) in &request.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let body = Full::new(Bytes::from(request.body.clone().unwrap_or_default()));
    let outgoing = builder
        .body(body)
        .map_err(|err| http_error(format!("the request could not be built: {err}")))?;
    let response = sender
        .send_request(outgoing)
        .await
        .map_err(|err| http_error(err.to_string()))?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_string(),
                String::from_utf8_lossy(value.as_bytes()).to_string(),
            )
        })
        .collect();
    let body = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
        .collect()
        .await
        .map_err(|err| http_error(format!("reading the response: {err}")))?
        .to_bytes()
        .to_vec();
    driver.abort();
    Ok(OutboundResponse {
        status,
        headers,
        body,
    })
}

/// Where a URL points.
struct Target {
    tls: bool,
    host: String,
    port: u16,
    /// `host[:port]` as the `Host` header says it.
    authority: String,
    path_and_query: String,
}

impl Target {
    fn parse(url: &str) -> Result<Target, OutboundError> {
        let bad = |why: &str| OutboundError::Url {
            url: url.to_string(),
            why: why.to_string(),
        };
        let uri: Uri = url.parse().map_err(|_| bad("it does not parse as a URL"))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(bad("use an https:// URL")),
        };
        let authority = uri.authority().ok_or_else(|| bad("it has no host"))?;
        if authority.as_str().contains('@') {
            return Err(bad("credentials in the URL are refused; use a token file"));
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if !tls && !is_loopback(&host) {
            return Err(bad(
                "plain http:// is allowed to loopback only (a local relay or a test endpoint); use https://",
            ));
        }
        Ok(Target {
            tls,
            port: authority.port_u16().unwrap_or(if tls { 443 } else { 80 }),
            authority: authority.as_str().to_string(),
            host,
            path_and_query: uri
                .path_and_query()
                .map_or("/".to_string(), |p| p.as_str().to_string()),
        })
    }
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether the client would call `url` (https, or http to loopback; no credentials in it),
/// for a config check before anything is sent.
pub fn check_url(url: &str) -> Result<(), String> {
    Target::parse(url)
        .map(|_| ())
        .map_err(|err| err.to_string())
}

/// A URL's scheme and authority, for a log line that must not show its path (a Slack
/// webhook's path is its secret).
pub fn url_origin(url: &str) -> String {
    match url.parse::<Uri>() {
        Ok(uri) => format!(
            "{}://{}",
            uri.scheme_str().unwrap_or("?"),
            uri.authority().map_or("?", |a| a.as_str())
        ),
        Err(_) => "(not a URL)".to_string(),
    }
}

#[cfg(test)]
mod tests;
