//! The coordinator's read-only web view and its JSON API (docs/report-format.md, "The web
//! view"): the runs, one run (live over server-sent events from the progress broadcast,
//! the report's charts when done; `/runs/{id}/report-body` is those charts alone, which the
//! live page fetches when the run ends), the fleet's agents, a workload's history on a
//! generation (`/history`), and the same data under `/api/`.
//! Pages are laid out by `abfleet-html`, the crate that writes report.html, so both show
//! the same charts. Who may read it is decided where it is served: loopback plaintext
//! (`http.rs`, only to a loopback `Host`: `loopback_host.rs`) or mutual TLS with an operator or viewer certificate (`tls.rs`).

mod api;
mod events;
pub mod limits;
mod loopback_host;
mod pages;
mod query;
pub mod tls;
mod views;

use axum::routing::get;
use axum::Router;

use crate::fleet::Fleet;

/// Serves the web view alone over plain HTTP on a loopback `listener` (refused elsewhere)
/// until `shutdown` resolves.
pub async fn serve_web_plaintext(
    fleet: Fleet,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), crate::CoordinatorError> {
    let addr = listener
        .local_addr()
        .map_err(|err| crate::CoordinatorError::Internal(err.to_string()))?;
    abfleet_proto::transport::check_plaintext_listen(addr)
        .map_err(|err| crate::CoordinatorError::Internal(format!("the web view: {err}")))?;
    tracing::info!(%addr, "web view and /api on http (loopback only, no authentication)");
    serve_with_grace(
        listener,
        plaintext_router(fleet),
        None,
        shutdown,
        "web",
        limits::ConnectionLimits::default(),
    )
    .await
}

/// How long requests in flight get once shutdown begins; a live run page's event stream
/// never ends by itself, so the wait is bounded.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Serves `app` within `limits` until `shutdown`, then up to [`SHUTDOWN_GRACE`] for requests
/// in flight; `probes` answer past the connection cap (`limits`).
pub(crate) async fn serve_with_grace(
    listener: tokio::net::TcpListener,
    app: Router,
    probes: Option<Router>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    what: &'static str,
    limits: limits::ConnectionLimits,
) -> Result<(), crate::CoordinatorError> {
    limits::serve_limited(
        listener,
        app,
        probes,
        shutdown,
        what,
        limits,
        SHUTDOWN_GRACE,
    )
    .await
}

/// The web view's routes as served in plaintext on loopback: only to requests addressed to a
/// loopback name (`loopback_host`), so a DNS-rebound page cannot read them.
pub(crate) fn plaintext_router(fleet: Fleet) -> Router {
    loopback_host::only_loopback_names(router(fleet))
}

/// The web view's routes: `/`, `/runs/{id}`, `/fleet`, `/history` and `/api/…`; every one
/// is a GET.
pub fn router(fleet: Fleet) -> Router {
    Router::new()
        .route("/", get(pages::runs))
        .route("/runs/{run_id}", get(pages::run))
        .route("/runs/{run_id}/report-body", get(pages::report_body))
        .route("/fleet", get(pages::fleet))
        .route("/history", get(pages::history))
        .route("/api/runs", get(api::runs))
        .route("/api/runs/{run_id}", get(api::run))
        .route("/api/runs/{run_id}/report", get(api::report))
        .route("/api/runs/{run_id}/events", get(events::run_events))
        .route("/api/agents", get(api::agents))
        .route("/api/history", get(api::history))
        .with_state(fleet)
}
