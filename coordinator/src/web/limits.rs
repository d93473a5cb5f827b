//! The HTTP listeners' guard against idle and slow clients (issue 23: 1,100 idle sockets on
//! `--http` used up the coordinator's file limit, and gRPC, `/healthz` and the web view
//! failed with it). Each listener, plain or mutual-TLS, holds at most
//! [`ConnectionLimits::max_connections`] connections ([`ConnectionCap`]: more are closed as
//! they are accepted, so the rest of the process keeps its descriptors); a connection that
//! sends nothing (or finishes no TLS handshake) within `first_byte`, or no complete request
//! head within `header_read`, is closed. Shutdown stops accepting, then gives the requests in
//! flight a bounded grace.
//!
//! A listener at its cap still answers its probes (issue 38: a liveness probe restarted a
//! coordinator that was only busy): [`RESERVED_PROBE_CONNECTIONS`] more connections are
//! admitted past the cap, served only `/healthz` and `/metrics` (anything else: 503), one
//! request each and on a short clock ([`PROBE_DEADLINE`]), so idle clients cannot keep them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::{debug, warn};

/// How much of the process one plain-HTTP listener may hold, and for how long an idle client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once on the listener. The units set `LimitNOFILE=65536`; the
    /// default leaves most of even a 1024-descriptor limit to gRPC and the store.
    pub max_connections: usize,
    /// A connection that sends no byte in this time is closed.
    pub first_byte: Duration,
    /// A request whose head (request line and headers) is not complete in this time is
    /// answered with a closed connection; also bounds the idle time between keep-alive requests.
    pub header_read: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 256,
            first_byte: Duration::from_secs(10),
            header_read: Duration::from_secs(10),
        }
    }
}

/// The next connection; a failed accept (out of descriptors, most likely) is logged and
/// retried after a pause rather than in a spin. Shared with the mutual-TLS listener.
pub(crate) async fn accept(
    listener: &tokio::net::TcpListener,
    what: &str,
) -> (tokio::net::TcpStream, std::net::SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(err) => {
                debug!(%err, listener = what, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Connections admitted past the cap for the listener's probes alone.
pub const RESERVED_PROBE_CONNECTIONS: usize = 16;
/// A probe's connection past the cap sends its whole request head within this, or is closed.
pub const PROBE_DEADLINE: Duration = Duration::from_millis(500);

/// How often a listener at its cap says so in the log.
const CAP_WARNING_EVERY: Duration = Duration::from_secs(10);

/// The connections a listener may hold at once: one permit each, held by the connection's
/// task until it ends.
pub(crate) struct ConnectionCap {
    permits: Arc<Semaphore>,
    /// Past the cap, for probes only.
    probe_permits: Arc<Semaphore>,
    max: usize,
    listener: &'static str,
    last_warning: Option<Instant>,
}

impl ConnectionCap {
    pub(crate) fn new(max: usize, listener: &'static str) -> ConnectionCap {
        ConnectionCap {
            permits: Arc::new(Semaphore::new(max.max(1))),
            probe_permits: Arc::new(Semaphore::new(RESERVED_PROBE_CONNECTIONS)),
            max,
            listener,
            last_warning: None,
        }
    }

    /// A permit for the connection just accepted from `peer`, or `None` at the cap (said in
    /// the log at most every ten seconds): the caller closes the connection then.
    pub(crate) fn admit(&mut self, peer: std::net::SocketAddr) -> Option<OwnedSemaphorePermit> {
        let permit = self.permits.clone().try_acquire_owned().ok();
        if permit.is_none()
            && self
                .last_warning
                .is_none_or(|at| at.elapsed() > CAP_WARNING_EVERY)
        {
            warn!(
                listener = self.listener,
                max = self.max,
                %peer,
                "connection limit reached; closing new connections until idle ones time out"
            );
            self.last_warning = Some(Instant::now());
        }
        permit
    }

    /// At the cap: a permit for one probe's connection past it, or `None` when those are
    /// taken too.
    pub(crate) fn admit_probe(&self) -> Option<OwnedSemaphorePermit> {
        self.probe_permits.clone().try_acquire_owned().ok()
    }
}

/// What a connection past the cap is served: `probes` (the listener's `/healthz` and
/// `/metrics`), and 503 for every other path.
fn probes_only(probes: Router) -> Router {
    probes.fallback(|| async {
        (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            [("retry-after", "1")],
            "the listener is at its connection limit; only /healthz and /metrics answer now\n",
        )
    })
}

/// Serves `app` on `listener` within `limits` until `shutdown`, then up to `grace` for the
/// requests in flight. `probes` (a router of the listener's probe paths) still answer past
/// the cap.
pub(crate) async fn serve_limited(
    listener: tokio::net::TcpListener,
    app: Router,
    probes: Option<Router>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    what: &'static str,
    limits: ConnectionLimits,
    grace: Duration,
) -> Result<(), crate::CoordinatorError> {
    let mut cap = ConnectionCap::new(limits.max_connections, what);
    let probes = probes.map(probes_only);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = accept(&listener, what) => accepted,
        };
        let (permit, app, clock, past_the_cap) = match cap.admit(peer) {
            Some(permit) => (permit, app.clone(), limits, false),
            None => match probes
                .as_ref()
                .and_then(|probes| Some((cap.admit_probe()?, probes)))
            {
                Some((permit, probes)) => (
                    permit,
                    probes.clone(),
                    ConnectionLimits {
                        max_connections: RESERVED_PROBE_CONNECTIONS,
                        first_byte: PROBE_DEADLINE.min(limits.first_byte),
                        header_read: PROBE_DEADLINE.min(limits.header_read),
                    },
                    true,
                ),
                None => {
                    drop(tcp);
                    continue;
                }
            },
        };
        connections.spawn(async move {
            let _permit = permit;
            let mut first = [0u8; 1];
            match tokio::time::timeout(clock.first_byte, tcp.peek(&mut first)).await {
                Ok(Ok(read)) if read > 0 => {}
                Ok(_) => return,
                Err(_) => {
                    debug!(%peer, "closed a connection that sent nothing");
                    return;
                }
            }
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(clock.header_read)
                // A probe's connection past the cap serves one request, then frees its slot.
                .keep_alive(!past_the_cap)
                .serve_connection(TokioIo::new(tcp), TowerToHyperService::new(app))
                .await;
            if let Err(err) = served {
                debug!(%peer, %err, "connection ended");
            }
        });
        while connections.try_join_next().is_some() {}
    }
    // A live run page's event stream never ends by itself: the wait is bounded.
    let _ = tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    connections.abort_all();
    Ok(())
}
