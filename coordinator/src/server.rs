//! Serving the coordinator: both services on one listener, the lease reaper beside them,
//! until the caller's shutdown future resolves.

use std::future::Future;
use std::path::Path;

use abfleet_proto::pb;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tracing::{error, info};

use crate::agent_service::AgentService;
use crate::control_service::ControlService;
use crate::error::CoordinatorError;
use crate::fleet::{CoordinatorConfig, Fleet};
use crate::store::Store;

/// How long requests in flight get to finish when the coordinator stops.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// A coordinator over a data directory, ready to serve.
pub struct Coordinator {
    pub fleet: Fleet,
}

impl Coordinator {
    pub fn open(
        data_dir: &Path,
        config: CoordinatorConfig,
    ) -> Result<Coordinator, CoordinatorError> {
        let store = Store::open(data_dir)?;
        Ok(Coordinator {
            fleet: Fleet::new(store, config),
        })
    }
}

/// Serves on `listener` until `shutdown` resolves.
pub async fn serve(
    coordinator: Coordinator,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), CoordinatorError> {
    let fleet = coordinator.fleet;
    let addr = listener
        .local_addr()
        .map_err(|err| CoordinatorError::Internal(err.to_string()))?;
    info!(%addr, store = %fleet.store().path().display(), "coordinator listening");
    let reaper = {
        let fleet = fleet.clone();
        let period = (fleet.config().lease / 4).max(std::time::Duration::from_millis(50));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                if let Err(err) = fleet.reap_expired_leases().await {
                    error!(error = %err, "lease reaper failed");
                }
            }
        })
    };
    let (graceful, graceful_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(std::time::Duration::from_secs(10)))
        .add_service(pb::agent_service_server::AgentServiceServer::new(
            AgentService {
                fleet: fleet.clone(),
            },
        ))
        .add_service(pb::control_service_server::ControlServiceServer::new(
            ControlService { fleet },
        ))
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
            let _ = graceful_rx.await;
        });
    tokio::pin!(server);
    let result = tokio::select! {
        result = &mut server => result,
        () = shutdown => {
            let _ = graceful.send(());
            // Agent sessions are endless streams: give requests in flight a moment, then
            // drop the server, which closes every connection.
            match tokio::time::timeout(SHUTDOWN_GRACE, &mut server).await {
                Ok(result) => result,
                Err(_) => Ok(()),
            }
        }
    };
    reaper.abort();
    result.map_err(|err| CoordinatorError::Internal(format!("gRPC server failed: {err}")))
}
