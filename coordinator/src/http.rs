//! The coordinator's plain-HTTP side listener (`abfleet coordinator --http ADDR`, off by
//! default): `/metrics` in Prometheus' text format and `/healthz` (200 when the store
//! answers), read-only and free of job data: counts and states only; and, with
//! `--webhook-secret-file`, `POST /hooks/github`, GitHub webhooks as triggers (signed
//! requests only; `webhook.rs` decides what an event means); and, when the coordinator is
//! plaintext and this listener is on loopback, the web view and `/api/` (`web/`). It binds
//! where it is told; the start-up log says whether that is loopback and what it serves.

use std::future::Future;
use std::sync::Arc;

use abfleet_core::spec::SourceSpec;
use axum::body::Bytes;
use axum::extract::{FromRef, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::fleet::{Fleet, FleetError, TriggerOutcome, TriggerRequest};
use crate::webhook::{decide, verify_signature, HookContext, HookDecision, WebhookConfig};
use crate::CoordinatorError;

/// What the HTTP listener serves beyond `/metrics` and `/healthz`.
#[derive(Debug, Clone, Default)]
pub struct HttpConfig {
    /// `POST /hooks/github`; `None`: that path answers 404.
    pub webhook: Option<WebhookConfig>,
    /// Also serve the web view and `/api/` (docs/report-format.md). Only on a loopback
    /// address: the listener refuses to start otherwise, since it has no authentication.
    pub web: bool,
    /// Connections at once and the idle-client timeouts (`web::limits`).
    pub limits: crate::web::limits::ConnectionLimits,
}

#[derive(Clone)]
struct HttpState {
    fleet: Fleet,
    webhook: Option<Arc<WebhookConfig>>,
}

impl FromRef<HttpState> for Fleet {
    fn from_ref(state: &HttpState) -> Fleet {
        state.fleet.clone()
    }
}

/// Serves `/metrics` and `/healthz` on `listener` until `shutdown` resolves.
pub async fn serve_http(
    fleet: Fleet,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), CoordinatorError> {
    serve_http_with(fleet, listener, HttpConfig::default(), shutdown).await
}

/// [`serve_http`], and the webhook endpoint when `config` has one.
pub async fn serve_http_with(
    fleet: Fleet,
    listener: TcpListener,
    config: HttpConfig,
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
    if config.webhook.is_some() {
        info!(%addr, "GitHub webhooks on POST /hooks/github (signed deliveries only)");
        // Delivery ids are kept to ignore replays; GitHub redelivers only recent ones.
        let before_ms = fleet.now_ms() - crate::store::DELIVERY_MEMORY_MS;
        match fleet.store().triggers().prune_deliveries(before_ms).await {
            Ok(0) => {}
            Ok(pruned) => info!(pruned, "forgot webhook deliveries older than 30 days"),
            Err(err) => warn!(%err, "failed to prune old webhook deliveries"),
        }
    }
    if config.web {
        abfleet_proto::transport::check_plaintext_listen(addr)
            .map_err(|err| CoordinatorError::Internal(format!("the web view: {err}")))?;
        info!(%addr, "web view and /api on http (loopback only, no authentication)");
    }
    let web = config
        .web
        .then(|| crate::web::plaintext_router(fleet.clone()));
    // What a probe asks; answered past the connection cap too (`web::limits`).
    let probes = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(fleet.clone());
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/hooks/github", post(github_hook))
        .with_state(HttpState {
            fleet,
            webhook: config.webhook.map(Arc::new),
        });
    let app = match web {
        Some(web) => app.merge(web),
        None => app,
    };
    crate::web::serve_with_grace(listener, app, Some(probes), shutdown, "http", config.limits).await
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
    match fleet.store().runs().count_by_state().await {
        Ok(_) => (StatusCode::OK, "ok\n").into_response(),
        Err(err) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the store does not answer: {err}\n"),
        )
            .into_response(),
    }
}

/// `POST /hooks/github`: a signed delivery becomes a trigger of the milestone spec, once per
/// delivery id and once per body; see docs/milestone.md.
async fn github_hook(State(state): State<HttpState>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(webhook) = state.webhook else {
        return reply(
            StatusCode::NOT_FOUND,
            "webhooks are disabled; start the coordinator with --webhook-secret-file PATH",
        );
    };
    let header_text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let delivery = header_text("x-github-delivery")
        .unwrap_or_default()
        .to_string();
    let event = header_text("x-github-event")
        .unwrap_or_default()
        .to_string();
    if let Err(err) = verify_signature(&webhook.secret, &body, header_text("x-hub-signature-256")) {
        warn!(%delivery, %event, bytes = body.len(), %err, "webhook delivery refused");
        return reply(StatusCode::UNAUTHORIZED, &format!("refused: {err}"));
    }
    if delivery.is_empty() || event.is_empty() {
        return reply(
            StatusCode::BAD_REQUEST,
            "a GitHub delivery has X-GitHub-Delivery and X-GitHub-Event headers",
        );
    }
    let payload: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(payload) => payload,
        Err(err) => {
            return reply(
                StatusCode::BAD_REQUEST,
                &format!(
                "the body is not JSON: {err}; set the webhook's content type to application/json"
            ),
            )
        }
    };
    let store = state.fleet.store();
    let now_ms = state.fleet.now_ms();
    match store
        .triggers()
        .remember_delivery(&delivery, &event, now_ms)
        .await
    {
        Ok(true) => {}
        Ok(false) => {
            info!(%delivery, %event, "webhook delivery replayed; ignored");
            return reply(
                StatusCode::OK,
                &format!("ignored: delivery {delivery} was already received"),
            );
        }
        Err(err) => return reply(StatusCode::SERVICE_UNAVAILABLE, &err.to_string()),
    }
    // The delivery id is not signed: the same signed body under a new id is a replay too.
    // Kept beside the ids (and pruned with them), under a key no GitHub id can take.
    let body_key = crate::webhook::body_replay_key(&body);
    match store
        .triggers()
        .remember_delivery(&body_key, &event, now_ms)
        .await
    {
        Ok(true) => {}
        Ok(false) => {
            info!(%delivery, %event, "webhook body replayed under a new delivery id; ignored");
            return reply(
                StatusCode::OK,
                &format!(
                    "ignored: this signed body was already received (delivery {delivery} repeats an earlier one)"
                ),
            );
        }
        Err(err) => {
            let _ = store.triggers().forget_delivery(&delivery).await;
            return reply(StatusCode::SERVICE_UNAVAILABLE, &err.to_string());
        }
    }
    let response = handle(&state.fleet, &webhook, &event, &payload).await;
    if !response.status().is_success() {
        // Not handled: a redelivery (after the fix) is handled, not taken for a replay.
        for key in [&delivery, &body_key] {
            if let Err(err) = store.triggers().forget_delivery(key).await {
                warn!(%delivery, %err, "failed to forget an unhandled webhook delivery");
            }
        }
    }
    info!(%delivery, %event, status = response.status().as_u16(), "webhook delivery");
    response
}

async fn handle(
    fleet: &Fleet,
    webhook: &WebhookConfig,
    event: &str,
    payload: &serde_json::Value,
) -> Response {
    let git_url = |source: &SourceSpec| match source {
        SourceSpec::Git { url, .. } => Some(url.clone()),
        SourceSpec::Path { .. } => None,
    };
    // Events that may be triggers are matched against the milestone spec's repositories.
    let (upstream, fork) = if matches!(event, "release" | "push" | "create" | "pull_request") {
        match fleet.triggers().milestone_spec().await {
            Ok((spec, _)) => (git_url(&spec.upstream.source), git_url(&spec.fork.source)),
            Err(err) => return trigger_error(err),
        }
    } else {
        (None, None)
    };
    let toolchain_bots: Vec<&str> = webhook.toolchain_bots.iter().map(String::as_str).collect();
    let context = HookContext {
        upstream_git_url: upstream.as_deref(),
        fork_git_url: fork.as_deref(),
        perf_label: &webhook.perf_label,
        toolchain_bots: &toolchain_bots,
    };
    let hook = match decide(event, payload, &context) {
        HookDecision::Ignored(why) => {
            return reply(StatusCode::ACCEPTED, &format!("ignored: {why}"));
        }
        HookDecision::Trigger(hook) => hook,
    };
    let request = TriggerRequest {
        reason: hook.reason.to_string(),
        debounce_key: Some(hook.debounce_key),
        note: hook.note.clone(),
        source: "webhook",
        spec: None,
        upstream_rev: hook.upstream_rev,
        fork_rev: hook.fork_rev,
        once: hook.once,
        pull_request: hook.pull_request,
    };
    let reason = hook.reason;
    let note = hook.note;
    match fleet.triggers().trigger(request).await {
        Ok(TriggerOutcome::Started(run_id)) => reply(
            StatusCode::ACCEPTED,
            &format!("started run {run_id}: {reason}, {note}"),
        ),
        Ok(TriggerOutcome::Debounced(run_id)) => reply(
            StatusCode::ACCEPTED,
            &format!("debounced into run {run_id}: {reason}, {note}"),
        ),
        Err(err) => trigger_error(err),
    }
}

fn trigger_error(err: FleetError) -> Response {
    warn!(%err, "webhook trigger failed");
    let status = match err {
        FleetError::NoMilestoneSpec | FleetError::MilestoneSpec { .. } => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    reply(status, &err.to_string())
}

/// A plain-text answer. What it quotes may come from a payload (a PR's title): control
/// characters and bidirectional overrides become U+FFFD, so a terminal or log that shows
/// the answer acts on none of them.
fn reply(status: StatusCode, text: &str) -> Response {
    let shown: String = text
        .chars()
        .map(|c| {
            if abfleet_core::report::markdown_text::is_hidden_control(c) {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect();
    (status, format!("{shown}\n")).into_response()
}
