//! The HTTP listeners' guard against idle and slow clients (issue 23: 1,100 idle sockets on
//! `--http` used up the coordinator's file limit, and gRPC, `/healthz` and the web view
//! failed with it). Each listener, plain or mutual-TLS, holds at most
//! [`ConnectionLimits::max_connections`] connections ([`ConnectionCap`]: more are closed as
//! they are accepted, so the rest of the process keeps its descriptors); a connection that
//! sends nothing (or finishes no TLS handshake) within `first_byte`, or no complete request
//! head within `header_read`, is closed. Shutdown stops accepting, then gives the requests in
//! flight a bounded grace.

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

/// How often a listener at its cap says so in the log.
const CAP_WARNING_EVERY: Duration = Duration::from_secs(10);

/// The connections a listener may hold at once: one permit each, held by the connection's
/// task until it ends.
pub(crate) struct ConnectionCap {
    permits: Arc<Semaphore>,
    max: usize,
    listener: &'static str,
    last_warning: Option<Instant>,
}

impl ConnectionCap {
    pub(crate) fn new(max: usize, listener: &'static str) -> ConnectionCap {
        ConnectionCap {
            permits: Arc::new(Semaphore::new(max.max(1))),
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
}

/// Serves `app` on `listener` within `limits` until `shutdown`, then up to `grace` for the
/// requests in flight.
pub(crate) async fn serve_limited(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    what: &'static str,
    limits: ConnectionLimits,
    grace: Duration,
) -> Result<(), crate::CoordinatorError> {
    let mut cap = ConnectionCap::new(limits.max_connections, what);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = accept(&listener, what) => accepted,
        };
        let Some(permit) = cap.admit(peer) else {
            drop(tcp);
            continue;
        };
        let app = app.clone();
        connections.spawn(async move {
            let _permit = permit;
            let mut first = [0u8; 1];
            match tokio::time::timeout(limits.first_byte, tcp.peek(&mut first)).await {
                Ok(Ok(read)) if read > 0 => {}
                Ok(_) => return,
                Err(_) => {
                    debug!(%peer, "closed a connection that sent nothing");
                    return;
                }
            }
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read)
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
