//! `/api/runs/{id}/events`: a run's progress as server-sent events, one `progress` event per
//! change (the first is where the run stands now), from the coordinator's progress
//! broadcast; the stream ends after the update that carries the run's exit code. Each
//! event's counts are the store's, so a run of several jobs counts all of them.

use std::convert::Infallible;

use abfleet_core::progress::RunProgress;
use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::broadcast::error::RecvError;

use super::api::{fleet_status, json_error, parse_run_id};
use super::views::progress_json;
use crate::fleet::Fleet;

pub(super) async fn run_events(State(fleet): State<Fleet>, Path(run_id): Path<String>) -> Response {
    let run_id = match parse_run_id(&run_id) {
        Ok(id) => id,
        Err((status, message)) => return json_error(status, &message),
    };
    // Subscribe before the snapshot, so nothing between the two is missed.
    let mut updates = fleet.subscribe();
    let snapshot = match fleet.reports().snapshot(run_id).await {
        Ok(snapshot) => snapshot,
        Err(err) => return json_error(fleet_status(&err), &err.to_string()),
    };
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(64);
    tokio::spawn(async move {
        let send = |progress: &RunProgress| {
            Event::default()
                .event("progress")
                .data(progress_json(progress).to_string())
        };
        if sender.send(Ok(send(&snapshot))).await.is_err() || snapshot.is_finished() {
            return;
        }
        loop {
            let update = match updates.recv().await {
                Ok(update) if update.run_id == run_id => update,
                Ok(_) => continue,
                Err(RecvError::Lagged(_)) => RunProgress::new(run_id, None, "", ""),
                Err(RecvError::Closed) => return,
            };
            // The update says what happened; the store says how far the whole run is.
            let Ok(now) = fleet.reports().snapshot(run_id).await else {
                return;
            };
            let mut event = update;
            event.cells_done = now.cells_done;
            event.cells_total = now.cells_total;
            if event.state.is_empty() {
                event.state = now.state.clone();
            }
            event.exit_code = event.exit_code.or(now.exit_code);
            let finished = event.is_finished();
            if sender.send(Ok(send(&event))).await.is_err() || finished {
                return;
            }
        }
    });
    Sse::new(tokio_stream::wrappers::ReceiverStream::new(receiver))
        .keep_alive(KeepAlive::default())
        .into_response()
}
