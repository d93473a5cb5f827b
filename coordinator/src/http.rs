//! The coordinator's plain-HTTP side listener (`abfleet coordinator --http ADDR`, off by
//! default): `/metrics` in Prometheus' text format and `/healthz` (200 when the store
//! answers). Read-only and free of job data: counts and states only. It binds where it is
//! told; the start-up log says whether that is loopback.

use std::future::Future;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::fleet::Fleet;
use crate::CoordinatorError;

/// Serves `/metrics` and `/healthz` on `listener` until `shutdown` resolves.
pub async fn serve_http(
    fleet: Fleet,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), CoordinatorError> {
    let addr = listener
        .local_addr()
        .map_err(|err| CoordinatorError::Internal(err.to_string()))?;
    if addr.ip().is_loopback() {
        info!(%addr, "metrics and health on http (loopback only)");
    } else {
        warn!(%addr, "metrics and health on http, reachable from the network (counts and states only, no job data)");
    }
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(fleet);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|err| CoordinatorError::Internal(format!("http listener failed: {err}")))
}

async fn metrics(State(fleet): State<Fleet>) -> Response {
    match fleet.render_metrics().await {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(err) => (StatusCode::SERVICE_UNAVAILABLE, err.to_string()).into_response(),
    }
}

async fn healthz(State(fleet): State<Fleet>) -> Response {
    match fleet.store().count_runs_by_state().await {
        Ok(_) => (StatusCode::OK, "ok\n").into_response(),
        Err(err) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the store does not answer: {err}\n"),
        )
            .into_response(),
    }
}
