//! How fleet nodes reach each other: the TLS files a node presents, the server and client
//! configs built from them, and the plaintext rule — plaintext only when both ends are on
//! loopback and the operator asked for it (`http://` on the client, `--plaintext` on the
//! coordinator). Every connection off loopback is mutual TLS under the fleet CA.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tonic::transport::{
    Certificate, Channel, ClientTlsConfig, Endpoint, Identity, ServerTlsConfig, Uri,
};

/// The PEM files one node presents: its certificate and key, and the fleet CA it trusts.
#[derive(Clone)]
pub struct TlsFiles {
    pub cert_pem: String,
    pub key_pem: String,
    pub ca_pem: String,
    /// Where the certificate came from, for messages.
    pub cert_path: PathBuf,
}

impl std::fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key never reaches a log.
        f.debug_struct("TlsFiles")
            .field("cert_path", &self.cert_path)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("cannot read {what} `{path}`: {source}; make it with `abfleet certs`")]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "`{path}` is not a PEM {what} (no `-----BEGIN` line); pass the file `abfleet certs` wrote"
    )]
    NotPem { what: &'static str, path: PathBuf },
    #[error("the private key `{path}` can be read by other users (mode {mode:04o}); run `chmod 600 {path}`")]
    KeyNotPrivate { path: PathBuf, mode: u32 },
    #[error("TLS needs all three of --tls-cert, --tls-key and --tls-ca; {missing} is missing")]
    Incomplete { missing: &'static str },
    #[error("`{url}` is not a coordinator URL: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("`{url}` is plaintext to a host that is not loopback; use https:// with --tls-cert, --tls-key and --tls-ca (plaintext is allowed only to 127.0.0.1, ::1 or localhost)")]
    PlaintextOffLoopback { url: String },
    #[error("`{url}` is https:// but no certificate was given; pass --tls-cert, --tls-key and --tls-ca (or ABFLEET_TLS_CERT, ABFLEET_TLS_KEY, ABFLEET_TLS_CA)")]
    HttpsWithoutCertificate { url: String },
    #[error("certificates were given but `{url}` is http://; use https://{rest}")]
    CertificateWithoutHttps { url: String, rest: String },
    #[error("the coordinator would listen on {addr} in plaintext; plaintext is allowed on loopback only (127.0.0.1 or ::1): give it --tls-cert, --tls-key and --tls-ca")]
    PlaintextListenOffLoopback { addr: SocketAddr },
    #[error("TLS setup failed: {0}; check that --tls-cert and --tls-key are one pair from `abfleet certs issue` and --tls-ca is the fleet's ca.pem (`abfleet certs show CERT` reads a certificate back)")]
    Tls(String),
}

impl TlsFiles {
    /// Reads the three files; any missing path is an error naming it. `None` when none is
    /// given (plaintext).
    pub fn from_paths(
        cert: Option<&Path>,
        key: Option<&Path>,
        ca: Option<&Path>,
    ) -> Result<Option<TlsFiles>, TransportError> {
        match (cert, key, ca) {
            (None, None, None) => Ok(None),
            (Some(cert), Some(key), Some(ca)) => TlsFiles::load(cert, key, ca).map(Some),
            (None, _, _) => Err(TransportError::Incomplete {
                missing: "--tls-cert",
            }),
            (_, None, _) => Err(TransportError::Incomplete {
                missing: "--tls-key",
            }),
            (_, _, None) => Err(TransportError::Incomplete {
                missing: "--tls-ca",
            }),
        }
    }

    pub fn load(cert: &Path, key: &Path, ca: &Path) -> Result<TlsFiles, TransportError> {
        check_key_private(key)?;
        Ok(TlsFiles {
            cert_pem: read_pem("certificate", cert)?,
            key_pem: read_pem("private key", key)?,
            ca_pem: read_pem("fleet CA certificate", ca)?,
            cert_path: cert.to_path_buf(),
        })
    }

    /// The coordinator's side: present the certificate, require every client to present
    /// one the fleet CA signed.
    pub fn server_config(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(Identity::from_pem(&self.cert_pem, &self.key_pem))
            .client_ca_root(Certificate::from_pem(&self.ca_pem))
            .client_auth_optional(false)
            .timeout(HANDSHAKE_TIMEOUT)
    }

    /// A client's side: trust only the fleet CA, present this certificate.
    pub fn client_config(&self, domain: &str) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca_pem))
            .identity(Identity::from_pem(&self.cert_pem, &self.key_pem))
            .domain_name(domain)
            .timeout(HANDSHAKE_TIMEOUT)
    }

    /// The fleet CA as DER, for verifying peers' certificates.
    pub fn ca_der(&self) -> Result<Vec<u8>, TransportError> {
        abfleet_core::certs::der_from_pem("fleet CA certificate", &self.ca_pem)
            .map_err(|err| TransportError::Tls(err.to_string()))
    }
}

/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

fn read_pem(what: &'static str, path: &Path) -> Result<String, TransportError> {
    let text = std::fs::read_to_string(path).map_err(|source| TransportError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })?;
    if !text.contains("-----BEGIN") {
        return Err(TransportError::NotPem {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok(text)
}

#[cfg(unix)]
fn check_key_private(path: &Path) -> Result<(), TransportError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|source| TransportError::Read {
        what: "private key",
        path: path.to_path_buf(),
        source,
    })?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(TransportError::KeyNotPrivate {
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_key_private(_path: &Path) -> Result<(), TransportError> {
    Ok(())
}

/// Whether a host string (from a URL) names this machine's loopback.
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.eq_ignore_ascii_case("localhost") {
        return true;
    }
    bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The coordinator may listen in plaintext only on loopback.
pub fn check_plaintext_listen(addr: SocketAddr) -> Result<(), TransportError> {
    if addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(TransportError::PlaintextListenOffLoopback { addr })
    }
}

/// How a client dials the coordinator: `http://` (loopback only, no certificates) or
/// `https://` (mutual TLS with `tls`). Keep-alive pings make a peer that accepts TCP but
/// never answers fail every call on the connection instead of hanging it.
pub fn client_endpoint(url: &str, tls: Option<&TlsFiles>) -> Result<Endpoint, TransportError> {
    let bad = |reason: String| TransportError::BadUrl {
        url: url.to_string(),
        reason,
    };
    let uri: Uri = url.parse().map_err(|err| bad(format!("{err}")))?;
    let host = uri
        .host()
        .ok_or_else(|| bad("it names no host".into()))?
        .to_string();
    let endpoint = Endpoint::from_shared(url.to_string())
        .map_err(|err| bad(err.to_string()))?
        .connect_timeout(CONNECT_TIMEOUT)
        .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
        .keep_alive_while_idle(true);
    match (uri.scheme_str(), tls) {
        (Some("http"), None) if is_loopback_host(&host) => Ok(endpoint),
        (Some("http"), None) => Err(TransportError::PlaintextOffLoopback {
            url: url.to_string(),
        }),
        (Some("http"), Some(_)) => Err(TransportError::CertificateWithoutHttps {
            url: url.to_string(),
            rest: url.trim_start_matches("http://").to_string(),
        }),
        (Some("https"), None) => Err(TransportError::HttpsWithoutCertificate {
            url: url.to_string(),
        }),
        (Some("https"), Some(tls)) => {
            let domain = host.trim_start_matches('[').trim_end_matches(']');
            endpoint
                .tls_config(tls.client_config(domain))
                .map_err(|err| TransportError::Tls(err.to_string()))
        }
        (scheme, _) => Err(bad(format!(
            "the scheme is {}; use http:// (loopback) or https://",
            scheme.unwrap_or("missing")
        ))),
    }
}

/// One HTTP/2 connection to a coordinator. Links made `over` it share it (the simulated
/// agents of `abfleet-bench fleet`: a hundred sessions on each); cheap to clone.
#[derive(Clone)]
pub struct Connection {
    channel: Channel,
}

/// Why a client could not connect.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The URL or the TLS files are wrong: nothing was dialled.
    #[error(transparent)]
    Endpoint(#[from] TransportError),
    #[error("no connection within {} s", .0.as_secs())]
    TimedOut(Duration),
    /// The dial failed: the error with its sources, so a TLS failure says why
    /// (`invalid peer certificate: …`).
    #[error("{0}")]
    Failed(String),
}

impl Connection {
    /// Connects to `url` as [`client_endpoint`] says, within [`CONNECT_TIMEOUT`].
    pub async fn open(url: &str, tls: Option<&TlsFiles>) -> Result<Connection, ConnectError> {
        let endpoint = client_endpoint(url, tls)?;
        let channel = tokio::time::timeout(CONNECT_TIMEOUT, endpoint.connect())
            .await
            .map_err(|_| ConnectError::TimedOut(CONNECT_TIMEOUT))?
            .map_err(|err| ConnectError::Failed(error_chain(&err)))?;
        Ok(Connection { channel })
    }

    pub(crate) fn channel(&self) -> Channel {
        self.channel.clone()
    }
}

/// An error with its sources, each said once.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        let part = inner.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = inner.source();
    }
    text
}

/// The largest reply the coordinator sends (a report); its clients accept as much.
pub const MAX_REPLY_BYTES: usize = 256 * 1024 * 1024;

/// How long a client waits to connect to a coordinator.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How often an open connection is pinged, and how long a ping may go unanswered before the
/// connection (and every call on it) fails.
pub const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(10);
pub const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for host in [
            "127.0.0.1",
            "127.1.2.3",
            "localhost",
            "LOCALHOST",
            "[::1]",
            "::1",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "10.0.0.1",
            "0.0.0.0",
            "example.test",
            "[::]",
            "localhost.evil.test",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn plaintext_only_to_loopback() {
        assert!(client_endpoint("http://127.0.0.1:7700", None).is_ok());
        assert!(client_endpoint("http://[::1]:7700", None).is_ok());
        assert!(matches!(
            client_endpoint("http://10.1.2.3:7700", None),
            Err(TransportError::PlaintextOffLoopback { .. })
        ));
        assert!(matches!(
            client_endpoint("https://10.1.2.3:7700", None),
            Err(TransportError::HttpsWithoutCertificate { .. })
        ));
        assert!(matches!(
            client_endpoint("ftp://127.0.0.1:7700", None),
            Err(TransportError::BadUrl { .. })
        ));
    }

    #[test]
    fn plaintext_listen_only_on_loopback() {
        assert!(check_plaintext_listen("127.0.0.1:7700".parse().unwrap()).is_ok());
        assert!(check_plaintext_listen("[::1]:7700".parse().unwrap()).is_ok());
        assert!(check_plaintext_listen("0.0.0.0:7700".parse().unwrap()).is_err());
        assert!(check_plaintext_listen("192.168.1.5:7700".parse().unwrap()).is_err());
    }

    #[test]
    fn incomplete_tls_names_the_missing_flag() {
        let p = Path::new("/nonexistent");
        let err = TlsFiles::from_paths(Some(p), None, Some(p)).unwrap_err();
        assert!(err.to_string().contains("--tls-key"), "{err}");
        assert!(TlsFiles::from_paths(None, None, None).unwrap().is_none());
    }

    #[cfg(unix)]
    #[test]
    fn a_readable_key_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("abfleet-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("k.key");
        std::fs::write(&key, "-----BEGIN PRIVATE KEY-----\n").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = TlsFiles::load(&key, &key, &key).unwrap_err();
        assert!(err.to_string().contains("chmod 600"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
