//! `abfleet runs`, `abfleet agents`, `abfleet cancel`, `abfleet drain`; the lists are
//! `TextTable`s, so what agents and triggers wrote reaches the terminal only made visible.

use abfleet_coordinator::store::{RunCursor, RunOrder};
use abfleet_core::report::format_utc;
use abfleet_core::{AgentId, RunId};
use abfleet_proto::control_link::{PageRequest, RunSummary};

use super::{control_client, link_error};
use crate::cli::TlsArgs;
use crate::cli::{ListFormat, StoreSource};
use crate::failure::{Classify, Failure};
use crate::text_table::TextTable;

/// Runs read per page with `--all`.
const ALL_PAGE: u32 = 1000;

/// `abfleet runs`: the newest `limit` runs (`None`: every run), newest first.
pub async fn runs(
    limit: Option<u32>,
    format: ListFormat,
    source: &StoreSource,
) -> Result<i32, Failure> {
    let (runs, more) = match &source.data_dir {
        Some(dir) => {
            let coordinator = abfleet_coordinator::Coordinator::open_existing(dir).usage()?;
            let fleet = &coordinator.fleet;
            let mut runs = Vec::new();
            let mut cursor = None;
            loop {
                let want = limit.unwrap_or(ALL_PAGE);
                let mut page = fleet
                    .runs()
                    .run_listing(RunOrder::NewestFirst, cursor.take(), want.saturating_add(1))
                    .await
                    .infra()?;
                let full = page.len() > want as usize;
                page.truncate(want as usize);
                cursor = page.last().map(RunCursor::after);
                runs.extend(page.into_iter().map(RunSummary::from));
                if !full || limit.is_some() {
                    break (runs, full);
                }
            }
        }
        None => {
            let client = control_client(&source.to.coordinator, &source.to.tls).await?;
            let mut runs = Vec::new();
            let mut token = None;
            loop {
                let size = limit.map_or(ALL_PAGE, |n| n - runs.len() as u32);
                let page = client
                    .runs(PageRequest { size, token }, false)
                    .await
                    .map_err(|err| link_error("failed to list runs", err))?;
                runs.extend(page.items);
                let done = limit.is_some_and(|n| runs.len() as u32 >= n);
                if page.next_token.is_none() || done {
                    break (runs, page.next_token.is_some());
                }
                token = page.next_token;
            }
        }
    };
    if format == ListFormat::Json {
        let runs: Vec<serde_json::Value> = runs
            .iter()
            .map(|run| {
                serde_json::json!({
                    "run_id": run.run_id.to_string(),
                    "name": run.name,
                    "state": run.state.as_str(),
                    "trigger": run.trigger,
                    "trigger_note": run.trigger_note,
                    "submitted": format_utc(run.created_ms),
                    "submitted_ms": run.created_ms,
                    "exit_code": run.exit_code,
                })
            })
            .collect();
        println!("{}", serde_json::json!({ "runs": runs, "more": more }));
        return Ok(0);
    }
    let mut table = TextTable::new([
        "run",
        "submitted",
        "state",
        "trigger",
        "exit",
        "name",
        "note",
    ]);
    let runs_shown = runs.len();
    for run in runs {
        table.row([
            run.run_id.to_string(),
            format_utc(run.created_ms),
            run.state.as_str().to_string(),
            run.trigger,
            run.exit_code
                .map_or("-".to_string(), |code| code.to_string()),
            run.name,
            run.trigger_note.unwrap_or_default(),
        ]);
    }
    print!("{}", table.render());
    if more {
        eprintln!(
            "(the newest {} runs; --limit N for more, --all for every run)",
            runs_shown
        );
    }
    Ok(0)
}

pub async fn agents(coordinator: &str, tls: &TlsArgs, format: ListFormat) -> Result<i32, Failure> {
    let client = control_client(coordinator, tls).await?;
    let mut agents = Vec::new();
    let mut token = None;
    loop {
        let page = client
            .agents(PageRequest { size: 0, token })
            .await
            .map_err(|err| link_error("failed to list agents", err))?;
        agents.extend(page.items);
        token = page.next_token;
        if token.is_none() {
            break;
        }
    }
    if format == ListFormat::Json {
        let agents: Vec<serde_json::Value> = agents
            .into_iter()
            .map(|agent| {
                let inventory = agent.inventory;
                let generations: Vec<serde_json::Value> = inventory
                    .generations
                    .iter()
                    .map(|g| serde_json::json!({ "key": g.key, "simulated": g.simulated }))
                    .collect();
                serde_json::json!({
                    "agent_id": agent.agent_id.to_string(),
                    "state": agent.state.as_str(),
                    "last_heartbeat": format_utc(agent.last_heartbeat_ms),
                    "last_heartbeat_ms": agent.last_heartbeat_ms,
                    "hostname": inventory.hostname,
                    "certificate": agent.certificate.map(|certificate| serde_json::json!({
                        "name": certificate.name,
                        "serial": certificate.serial,
                        "revoked": certificate.revoked,
                    })),
                    "generations": generations,
                    "cache_bytes": agent.cache_bytes,
                    "max_cache_bytes": agent.max_cache_bytes,
                })
            })
            .collect();
        println!("{}", serde_json::json!({ "agents": agents }));
        return Ok(0);
    }
    let mut table = TextTable::new([
        "agent",
        "state",
        "last heartbeat",
        "host",
        "certificate (serial)",
        "generations",
        "cache / budget",
    ]);
    for agent in agents {
        let inventory = agent.inventory;
        let generations: Vec<String> = inventory
            .generations
            .iter()
            .map(|g| {
                if g.simulated {
                    format!("{} (recorded)", g.key)
                } else {
                    g.key.clone()
                }
            })
            .collect();
        let certificate = match agent.certificate {
            None => "-".to_string(),
            Some(certificate) => {
                // Enough of the serial to tell a re-issue apart; `certs list` has all of it.
                let serial: String = certificate.serial.chars().take(8).collect();
                let revoked = if certificate.revoked { " REVOKED" } else { "" };
                format!("{} ({serial}){revoked}", certificate.name)
            }
        };
        table.row([
            agent.agent_id.to_string(),
            agent.state.as_str().to_string(),
            format_utc(agent.last_heartbeat_ms),
            inventory.hostname,
            certificate,
            if generations.is_empty() {
                "-".to_string()
            } else {
                generations.join(", ")
            },
            cache_cell(agent.cache_bytes, agent.max_cache_bytes),
        ]);
    }
    print!("{}", table.render());
    Ok(0)
}

/// An agent's cache as `abfleet agents` shows it: `1.2 GiB / 20.0 GiB`, `1.2 GiB / none`
/// without a budget, `-` before it reported one.
fn cache_cell(bytes: Option<u64>, max_bytes: Option<u64>) -> String {
    let Some(bytes) = bytes else {
        return "-".to_string();
    };
    let budget = max_bytes.map_or("none".to_string(), abfleet_agent::cache::show_bytes);
    format!("{} / {budget}", abfleet_agent::cache::show_bytes(bytes))
}

pub async fn cancel(run_id: &str, coordinator: &str, tls: &TlsArgs) -> Result<i32, Failure> {
    let client = control_client(coordinator, tls).await?;
    let parsed: RunId = super::ids::run_id(&client, run_id).await?;
    let run_id = parsed.to_string();
    let cancelled = client
        .cancel(&parsed, "cancelled with `abfleet cancel`")
        .await
        .map_err(|err| link_error("failed to cancel the run", err))?;
    if cancelled {
        println!("run {run_id} cancelled");
    } else {
        println!("run {run_id} had already finished; nothing to cancel");
    }
    Ok(0)
}

pub async fn drain(
    agent_id: &str,
    resume: bool,
    coordinator: &str,
    tls: &TlsArgs,
) -> Result<i32, Failure> {
    let client = control_client(coordinator, tls).await?;
    let parsed: AgentId = super::ids::agent_id(&client, agent_id).await?;
    let agent_id = parsed.to_string();
    let state = client
        .drain(&parsed, resume)
        .await
        .map_err(|err| link_error("failed to drain the agent", err))?;
    let state = state.as_str();
    if resume {
        println!("agent {agent_id} takes jobs again ({state})");
    } else {
        println!("agent {agent_id} is {state}: it finishes its job and takes no new one");
    }
    Ok(0)
}
