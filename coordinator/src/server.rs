//! Serving the coordinator: both services on one listener — mutual TLS, or plaintext on
//! loopback only — each behind the role check of `crate::auth`, the lease reaper beside
//! them, until the caller's shutdown future resolves.

use std::future::Future;
use std::path::Path;

use abfleet_core::certs::Role;
use abfleet_proto::pb;
use abfleet_proto::transport::{check_plaintext_listen, TlsFiles};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tracing::{error, info, warn};

use crate::agent_service::AgentService;
use crate::auth::{Access, Buckets, RateLimit};
use crate::control_service::ControlService;
use crate::error::CoordinatorError;
use crate::fleet::{CoordinatorConfig, Fleet};
use crate::store::Store;

/// How long requests in flight get to finish when the coordinator stops.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
/// How long a stopping coordinator waits for the alerts, statuses and comments in flight.
pub const OUTBOUND_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// A coordinator over a data directory, ready to serve.
pub struct Coordinator {
    pub fleet: Fleet,
    /// Calls per certificate under mutual TLS (plaintext loopback callers are not limited).
    pub rate_limit: RateLimit,
}

impl Coordinator {
    pub fn open(
        data_dir: &Path,
        config: CoordinatorConfig,
    ) -> Result<Coordinator, CoordinatorError> {
        let store = Store::open(data_dir)?;
        Ok(Coordinator {
            fleet: Fleet::new(store, config),
            rate_limit: RateLimit::default(),
        })
    }

    /// A coordinator's state on the store already in `data_dir`, for commands that read it
    /// (`Store::open_existing`: nothing created, nothing migrated).
    pub fn open_existing(data_dir: &Path) -> Result<Coordinator, CoordinatorError> {
        let store = Store::open_existing(data_dir)?;
        Ok(Coordinator {
            fleet: Fleet::new(store, CoordinatorConfig::default()),
            rate_limit: RateLimit::default(),
        })
    }
}

/// How the coordinator talks to its callers.
#[derive(Debug, Clone)]
pub enum ServerTransport {
    /// Plaintext, on a loopback listener only: every local caller may act in any role.
    LoopbackPlaintext,
    /// Mutual TLS: the coordinator presents its certificate, every caller must present one
    /// the fleet CA signed, and its role decides what it may call.
    MutualTls(TlsFiles),
}

/// The largest message an agent may send (an event batch) or the CLI (a spec, in
/// `SubmitRun`); larger ones are refused with OUT_OF_RANGE before they are decoded.
pub const MAX_AGENT_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
pub const MAX_CONTROL_MESSAGE_BYTES: usize = 2 * 1024 * 1024;
pub use abfleet_proto::transport::MAX_REPLY_BYTES;

/// The connections `listener` accepts, with Nagle's algorithm off. tonic sets TCP_NODELAY
/// only on listeners it binds itself; on an accepted socket with Nagle on, a small gRPC
/// message (an offer, an acknowledgement) waited for the peer's delayed ACK: ~40 ms per
/// dispatch (`abfleet-bench fleet`, docs/performance.md).
fn incoming_without_nagle(
    listener: TcpListener,
) -> impl tokio_stream::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    use tokio_stream::StreamExt;
    TcpListenerStream::new(listener).map(|accepted| {
        if let Ok(stream) = &accepted {
            if let Err(err) = stream.set_nodelay(true) {
                tracing::warn!(error = %err, "could not turn off Nagle's algorithm on a connection");
            }
        }
        accepted
    })
}

/// The lease reaper: every heartbeat interval (or a quarter lease, if shorter), so a lost
/// agent's job is requeued within lease + one heartbeat interval; each tick also finishes
/// runs left stranded (the first tick is at once: those of before a restart at start).
fn spawn_lease_reaper(fleet: Fleet) -> tokio::task::JoinHandle<()> {
    let config = fleet.config();
    let period = (config.lease / 4)
        .min(config.heartbeat_interval)
        .max(std::time::Duration::from_millis(50));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tick.tick().await;
            if let Err(err) = fleet.scheduling().reap_expired_leases().await {
                error!(error = %err, "lease reaper failed");
            }
            if let Err(err) = fleet.scheduling().write_heard().await {
                error!(error = %err, "writing when agents were last heard failed");
            }
            // The first tick is at once: a run stranded before a restart is finished
            // at start.
            if let Err(err) = fleet.finishing().finish_stranded_runs().await {
                error!(error = %err, "finding runs to finish failed");
            }
        }
    })
}

/// Serves on `listener` until `shutdown` resolves.
pub async fn serve(
    coordinator: Coordinator,
    listener: TcpListener,
    transport: ServerTransport,
    shutdown: impl Future<Output = ()>,
) -> Result<(), CoordinatorError> {
    let fleet = coordinator.fleet;
    let addr = listener
        .local_addr()
        .map_err(|err| CoordinatorError::Internal(err.to_string()))?;
    fleet
        .trust()
        .load_deny_list()
        .await
        .map_err(|err| CoordinatorError::Internal(format!("reading the deny list: {err}")))?;
    let mut builder = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(std::time::Duration::from_secs(10)));
    let access = match &transport {
        ServerTransport::LoopbackPlaintext => {
            check_plaintext_listen(addr)
                .map_err(|err| CoordinatorError::Config(err.to_string()))?;
            info!(%addr, store = %fleet.store().path().display(), "coordinator listening in plaintext on loopback: every local process may submit jobs and act as an agent");
            Access::LoopbackPlaintext
        }
        ServerTransport::MutualTls(files) => {
            let ca_der = files
                .ca_der()
                .map_err(|err| CoordinatorError::Config(err.to_string()))?;
            builder = builder.tls_config(files.server_config()).map_err(|err| {
                CoordinatorError::Config(format!(
                    "the coordinator's TLS files do not make a TLS setup ({}): {err}",
                    files.cert_path.display()
                ))
            })?;
            info!(%addr, store = %fleet.store().path().display(), cert = %files.cert_path.display(), "coordinator listening with mutual TLS");
            Access::MutualTls {
                ca_der: std::sync::Arc::new(ca_der),
                buckets: std::sync::Arc::new(Buckets::new(coordinator.rate_limit)),
                deny_list: fleet.trust().deny_list(),
            }
        }
    };
    let reaper = spawn_lease_reaper(fleet.clone());
    let (stop_outbound, stopping) = crate::fleet::StopOutbound::new();
    // Alerts queued by runs that finished, here or before a restart.
    let alert_delivery = {
        let (fleet, stopping) = (fleet.clone(), stopping.clone());
        tokio::spawn(async move { fleet.alerts().run_alert_delivery(stopping).await })
    };
    // The answers to pull requests (`[github]`), also those left by a restart.
    let pull_request_reports = {
        let fleet = fleet.clone();
        tokio::spawn(async move {
            fleet
                .pull_requests()
                .run_pull_request_reports(stopping)
                .await
        })
    };
    let (graceful, graceful_rx) = tokio::sync::oneshot::channel::<()>();
    let agent_service = pb::agent_service_server::AgentServiceServer::new(AgentService {
        fleet: fleet.clone(),
    })
    .max_decoding_message_size(MAX_AGENT_MESSAGE_BYTES)
    .max_encoding_message_size(MAX_REPLY_BYTES);
    let control_service =
        pb::control_service_server::ControlServiceServer::new(ControlService { fleet })
            .max_decoding_message_size(MAX_CONTROL_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_REPLY_BYTES);
    // grpc.health.v1 and server reflection, so load balancers and `grpcurl` work. Under
    // mutual TLS they too are reached only with a fleet certificate; no role is needed.
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<pb::agent_service_server::AgentServiceServer<AgentService>>()
        .await;
    health
        .set_serving::<pb::control_service_server::ControlServiceServer<ControlService>>()
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(abfleet_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|err| CoordinatorError::Internal(format!("reflection service: {err}")))?;
    let server = builder
        .add_service(health_service)
        .add_service(reflection)
        .add_service(tonic::service::interceptor::InterceptedService::new(
            agent_service,
            access.interceptor(Role::Agent),
        ))
        .add_service(tonic::service::interceptor::InterceptedService::new(
            control_service,
            access.interceptor(Role::Operator),
        ))
        .serve_with_incoming_shutdown(incoming_without_nagle(listener), async {
            let _ = graceful_rx.await;
        });
    tokio::pin!(server);
    let result = tokio::select! {
        result = &mut server => result,
        () = shutdown => {
            let _ = graceful.send(());
            stop_outbound.stop();
            // Agent sessions are endless streams: give requests in flight a moment, then
            // drop the server, which closes every connection.
            match tokio::time::timeout(SHUTDOWN_GRACE, &mut server).await {
                Ok(result) => result,
                Err(_) => Ok(()),
            }
        }
    };
    reaper.abort();
    // An alert, status or comment in flight is finished and recorded (its repeat after a
    // restart would arrive twice), within a bound.
    stop_outbound.stop();
    let outbound = async {
        let _ = alert_delivery.await;
        let _ = pull_request_reports.await;
    };
    if tokio::time::timeout(OUTBOUND_GRACE, outbound)
        .await
        .is_err()
    {
        warn!(grace_s = OUTBOUND_GRACE.as_secs(), "outbound sends still in flight at the end of the grace; stopping without them (each is retried after the restart under the same delivery id)");
    }
    result.map_err(|err| CoordinatorError::Internal(format!("gRPC server failed: {err}")))
}
