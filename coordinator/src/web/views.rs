//! The fleet's rows as the web view shows them: the page views of `abfleet-html` and the
//! JSON of `/api/`, built from the same reads so the two never disagree.

use abfleet_core::lifecycle::AgentState;
use abfleet_core::progress::RunProgress;
use abfleet_core::report::format_utc;
use abfleet_core::{JobId, RunId};
use abfleet_html::{AgentView, RunView};
use serde_json::{json, Value};

use crate::fleet::{Fleet, FleetError};
use crate::store::{AgentRow, RunRow};

/// A run's row and where it stands now.
pub(super) async fn run_view(fleet: &Fleet, run: RunRow) -> Result<RunView, FleetError> {
    let progress = fleet.reports().snapshot_of(&run).await?;
    Ok(RunView {
        run_id: run.run_id.to_string(),
        name: run.name,
        state: run.state.as_str().to_string(),
        trigger: run.trigger,
        trigger_note: run.trigger_note,
        submitted: format_utc(run.created_ms),
        cells_done: progress.cells_done,
        cells_total: progress.cells_total,
        current_cell: progress.current_cell,
        exit_code: progress.exit_code,
        error: run.error,
    })
}

pub(super) async fn run_view_of(fleet: &Fleet, run_id: RunId) -> Result<RunView, FleetError> {
    let run = fleet.runs().run(run_id).await?;
    run_view(fleet, run).await
}

pub(super) fn run_json(run: &RunView) -> Value {
    json!({
        "run_id": run.run_id,
        "name": run.name,
        "state": run.state,
        "trigger": run.trigger,
        "trigger_note": run.trigger_note,
        "submitted": run.submitted,
        "cells_done": run.cells_done,
        "cells_total": run.cells_total,
        "current_cell": run.current_cell,
        "exit_code": run.exit_code,
        "error": run.error,
        "report": format!("/api/runs/{}/report", run.run_id),
    })
}

pub(super) fn agent_view((agent, state, job): (AgentRow, AgentState, Option<JobId>)) -> AgentView {
    AgentView {
        agent_id: agent.agent_id.to_string(),
        hostname: agent.inventory.hostname.clone(),
        generations: agent
            .inventory
            .generations
            .iter()
            .map(|g| g.key.clone())
            .collect(),
        state: state.to_string(),
        current_job: job.map(|j| j.to_string()),
        last_heartbeat: format_utc(agent.last_heartbeat_ms),
        lost: state == AgentState::Lost,
    }
}

pub(super) fn agent_json(agent: &AgentView) -> Value {
    json!({
        "agent_id": agent.agent_id,
        "hostname": agent.hostname,
        "generations": agent.generations,
        "state": agent.state,
        "current_job": agent.current_job,
        "last_heartbeat": agent.last_heartbeat,
        "lost": agent.lost,
    })
}

/// One progress event of `/api/runs/{id}/events`.
pub(super) fn progress_json(progress: &RunProgress) -> Value {
    json!({
        "run_id": progress.run_id.to_string(),
        "job_id": progress.job_id.map(|j| j.to_string()),
        "state": progress.state,
        "message": progress.message,
        "cells_done": progress.cells_done,
        "cells_total": progress.cells_total,
        "current_cell": progress.current_cell,
        "exit_code": progress.exit_code,
    })
}
