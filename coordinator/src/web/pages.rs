//! The HTML pages: `/` (runs, newest first, paged), `/runs/{id}`, `/fleet` and `/history`.

use abfleet_html::{HistoryPage, RunsPage};
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::api::{fleet_status, parse_run_id};
use super::query::{history_query, page_query};
use super::views::{agent_view, run_view, run_view_of};
use crate::fleet::Fleet;

fn html_response(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

fn text_error(status: StatusCode, message: &str) -> Response {
    (status, format!("{message}\n")).into_response()
}

pub(super) async fn runs(State(fleet): State<Fleet>, RawQuery(raw): RawQuery) -> Response {
    let page = match page_query(raw.as_deref()) {
        Ok(page) => page,
        Err((status, message)) => return text_error(status, &message),
    };
    let rows = match fleet
        .runs()
        .runs_page_newest_first(page.offset, page.limit + 1)
        .await
    {
        Ok(rows) => rows,
        Err(err) => return text_error(fleet_status(&err), &err.to_string()),
    };
    let more = rows.len() > page.limit as usize;
    let mut runs = Vec::new();
    for row in rows.into_iter().take(page.limit as usize) {
        match run_view(&fleet, row).await {
            Ok(view) => runs.push(view),
            Err(err) => return text_error(fleet_status(&err), &err.to_string()),
        }
    }
    html_response(
        StatusCode::OK,
        abfleet_html::render_runs_page(&RunsPage {
            runs,
            offset: page.offset,
            limit: page.limit,
            more,
        }),
    )
}

pub(super) async fn run(State(fleet): State<Fleet>, Path(run_id): Path<String>) -> Response {
    let run_id = match parse_run_id(&run_id) {
        Ok(id) => id,
        Err((status, message)) => return text_error(status, &message),
    };
    let view = match run_view_of(&fleet, run_id).await {
        Ok(view) => view,
        Err(err) => return text_error(fleet_status(&err), &err.to_string()),
    };
    let report = if view.exit_code.is_some() {
        match fleet.reports().report(run_id).await {
            Ok(report) => Some(report),
            Err(err) => return text_error(fleet_status(&err), &err.to_string()),
        }
    } else {
        None
    };
    html_response(
        StatusCode::OK,
        abfleet_html::render_run_page(&view, report.as_ref()),
    )
}

/// The report part of a run page, for the live page to put in place when the run ends.
pub(super) async fn report_body(
    State(fleet): State<Fleet>,
    Path(run_id): Path<String>,
) -> Response {
    let run_id = match parse_run_id(&run_id) {
        Ok(id) => id,
        Err((status, message)) => return text_error(status, &message),
    };
    match fleet.reports().report(run_id).await {
        Ok(report) => html_response(
            StatusCode::OK,
            abfleet_html::render_report_fragment(&run_id.to_string(), &report),
        ),
        Err(err) => text_error(fleet_status(&err), &err.to_string()),
    }
}

pub(super) async fn fleet(State(fleet): State<Fleet>) -> Response {
    match fleet.scheduling().agents().await {
        Ok(rows) => {
            let agents: Vec<_> = rows.into_iter().map(agent_view).collect();
            html_response(StatusCode::OK, abfleet_html::render_agents_page(&agents))
        }
        Err(err) => text_error(fleet_status(&err), &err.to_string()),
    }
}

/// `/history?generation=KEY&workload=W`: the charts and table of a workload's history; the
/// form alone until both are named.
pub(super) async fn history(State(fleet): State<Fleet>, RawQuery(raw): RawQuery) -> Response {
    let query = match history_query(raw.as_deref()) {
        Ok(query) => query,
        Err((status, message)) => return text_error(status, &message),
    };
    let mut page = HistoryPage {
        generation: query.generation.clone(),
        workload: query.workload.clone(),
        fixture: query.fixture.clone(),
        name: query.name.clone(),
        points: Vec::new(),
    };
    if !page.generation.is_empty() && !page.workload.is_empty() {
        match fleet.reports().history(query).await {
            Ok(points) => page.points = points,
            Err(err) => return text_error(fleet_status(&err), &err.to_string()),
        }
    }
    html_response(StatusCode::OK, abfleet_html::render_history_page(&page))
}
