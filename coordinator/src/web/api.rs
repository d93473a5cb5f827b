//! `/api/runs`, `/api/runs/{id}`, `/api/runs/{id}/report`, `/api/agents` and
//! `/api/history`: the web view's
//! data as JSON, for tools that read results without gRPC. The report is report.json's
//! document, byte for byte what `abfleet report` writes.

use abfleet_core::RunId;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::query::{history_query, page_query};
use super::views::{agent_json, agent_view, run_json, run_view, run_view_of};
use crate::fleet::{Fleet, FleetError};

pub(super) fn json_response(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{value:#}\n"),
    )
        .into_response()
}

/// `{"error": "…"}` with the status the error deserves.
pub(super) fn json_error(status: StatusCode, message: &str) -> Response {
    json_response(status, &json!({ "error": message }))
}

pub(super) fn fleet_status(err: &FleetError) -> StatusCode {
    match err {
        FleetError::UnknownRun(_) | FleetError::UnknownJob(_) | FleetError::UnknownAgent(_) => {
            StatusCode::NOT_FOUND
        }
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

pub(super) fn parse_run_id(text: &str) -> Result<RunId, (StatusCode, String)> {
    text.parse().map_err(|_| {
        (
            StatusCode::BAD_REQUEST,
            format!("`{text}` is not a run id; run ids are UUIDs, as /api/runs lists them"),
        )
    })
}

pub(super) async fn runs(State(fleet): State<Fleet>, RawQuery(raw): RawQuery) -> Response {
    let page = match page_query(raw.as_deref()) {
        Ok(page) => page,
        Err((status, message)) => return json_error(status, &message),
    };
    // One more than asked for says whether another page follows.
    let rows = match fleet
        .runs()
        .runs_page_newest_first(page.offset, page.limit + 1)
        .await
    {
        Ok(rows) => rows,
        Err(err) => return json_error(fleet_status(&err), &err.to_string()),
    };
    let more = rows.len() > page.limit as usize;
    let mut runs = Vec::new();
    for row in rows.into_iter().take(page.limit as usize) {
        match run_view(&fleet, row).await {
            Ok(view) => runs.push(run_json(&view)),
            Err(err) => return json_error(fleet_status(&err), &err.to_string()),
        }
    }
    let next_offset = more.then(|| page.offset + u64::from(page.limit));
    json_response(
        StatusCode::OK,
        &json!({
            "runs": runs,
            "offset": page.offset,
            "limit": page.limit,
            "next_offset": next_offset,
        }),
    )
}

pub(super) async fn run(State(fleet): State<Fleet>, Path(run_id): Path<String>) -> Response {
    let run_id = match parse_run_id(&run_id) {
        Ok(id) => id,
        Err((status, message)) => return json_error(status, &message),
    };
    match run_view_of(&fleet, run_id).await {
        Ok(view) => json_response(StatusCode::OK, &run_json(&view)),
        Err(err) => json_error(fleet_status(&err), &err.to_string()),
    }
}

pub(super) async fn report(State(fleet): State<Fleet>, Path(run_id): Path<String>) -> Response {
    let run_id = match parse_run_id(&run_id) {
        Ok(id) => id,
        Err((status, message)) => return json_error(status, &message),
    };
    match fleet.reports().report(run_id).await {
        Ok(report) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            report.to_json_pretty(),
        )
            .into_response(),
        Err(err) => json_error(fleet_status(&err), &err.to_string()),
    }
}

pub(super) async fn agents(State(fleet): State<Fleet>, RawQuery(raw): RawQuery) -> Response {
    let page = match page_query(raw.as_deref()) {
        Ok(page) => page,
        Err((status, message)) => return json_error(status, &message),
    };
    let rows = match fleet
        .scheduling()
        .agents_page(page.offset, page.limit + 1)
        .await
    {
        Ok(rows) => rows,
        Err(err) => return json_error(fleet_status(&err), &err.to_string()),
    };
    let more = rows.len() > page.limit as usize;
    let agents: Vec<Value> = rows
        .into_iter()
        .take(page.limit as usize)
        .map(|row| agent_json(&agent_view(row)))
        .collect();
    let next_offset = more.then(|| page.offset + u64::from(page.limit));
    json_response(
        StatusCode::OK,
        &json!({
            "agents": agents,
            "offset": page.offset,
            "limit": page.limit,
            "next_offset": next_offset,
        }),
    )
}

/// `/api/history?generation=KEY&workload=W`: `abfleet history --format json`'s points.
pub(super) async fn history(State(fleet): State<Fleet>, RawQuery(raw): RawQuery) -> Response {
    let query = match history_query(raw.as_deref()) {
        Ok(query) => query,
        Err((status, message)) => return json_error(status, &message),
    };
    if query.generation.is_empty() || query.workload.is_empty() {
        return json_error(
            StatusCode::BAD_REQUEST,
            "a history needs generation=KEY and workload=NAME (fixture, name and limit are optional)",
        );
    }
    let (generation, workload) = (query.generation.clone(), query.workload.clone());
    match fleet.reports().history(query).await {
        Ok(points) => json_response(
            StatusCode::OK,
            &json!({ "generation": generation, "workload": workload, "points": points }),
        ),
        Err(err) => json_error(fleet_status(&err), &err.to_string()),
    }
}
