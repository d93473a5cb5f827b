//! Ids as people type them (issue 39): lists, histories and the web view show short ids and
//! host names, so `report`, `watch`, `cancel` and `drain` take a run's id or a unique prefix
//! of it (as git takes a short hash), and an agent's id, a unique prefix of it, or its host
//! name. An ambiguous one is refused with its candidates.

use abfleet_core::{AgentId, RunId};
use abfleet_proto::control_link::{ControlLink, Page, PageRequest};
use abfleet_proto::LinkError;

use super::link_error;
use crate::failure::Failure;
use crate::terminal_text::visible_cell;

/// Items read per page when looking a prefix up.
const PAGE: u32 = 1000;
/// Candidates an ambiguous prefix names at most.
const SHOWN: usize = 5;

/// The run `text` names: a whole id, or the one run whose id starts with it.
pub async fn run_id(client: &ControlLink, text: &str) -> Result<RunId, Failure> {
    if let Ok(id) = text.parse() {
        return Ok(id);
    }
    let runs = every_page(|page| client.runs(page, false))
        .await
        .map_err(|err| link_error("failed to list the runs", err))?;
    let candidates: Vec<(String, String)> = runs
        .into_iter()
        .map(|run| {
            let id = run.run_id.to_string();
            (
                id.clone(),
                format!("{id} ({}, {})", run.name, run.state.as_str()),
            )
        })
        .collect();
    let lower = text.to_lowercase();
    let id = unique("run", text, &candidates, |id| id.starts_with(&lower))?;
    id.parse()
        .map_err(|err| Failure::infra(anyhow::anyhow!("{err}")))
}

/// The agent `text` names: a whole id, the one agent whose id starts with it, or the one
/// whose host name it is.
pub async fn agent_id(client: &ControlLink, text: &str) -> Result<AgentId, Failure> {
    if let Ok(id) = text.parse() {
        return Ok(id);
    }
    let agents = every_page(|page| client.agents(page))
        .await
        .map_err(|err| link_error("failed to list the agents", err))?;
    let candidates: Vec<(String, String)> = agents
        .iter()
        .map(|agent| {
            let id = agent.agent_id.to_string();
            (id.clone(), format!("{id} ({})", agent.inventory.hostname))
        })
        .collect();
    let named: Vec<(String, String)> = candidates
        .iter()
        .zip(&agents)
        .filter(|(_, agent)| agent.inventory.hostname == text)
        .map(|(candidate, _)| candidate.clone())
        .collect();
    let lower = text.to_lowercase();
    let id = if named.is_empty() {
        unique("agent", text, &candidates, |id| id.starts_with(&lower))?
    } else {
        unique("agent", text, &named, |_| true)?
    };
    id.parse()
        .map_err(|err| Failure::infra(anyhow::anyhow!("{err}")))
}

/// Every item of a paged list, `fetch` asked for page after page.
async fn every_page<T, Fut>(fetch: impl Fn(PageRequest) -> Fut) -> Result<Vec<T>, LinkError>
where
    Fut: std::future::Future<Output = Result<Page<T>, LinkError>>,
{
    let mut items = Vec::new();
    let mut token = None;
    loop {
        let page = fetch(PageRequest { size: PAGE, token }).await?;
        items.extend(page.items);
        match page.next_token {
            Some(next) => token = Some(next),
            None => return Ok(items),
        }
    }
}

/// The one candidate (id, label) that `matches`, or an error naming none or the several.
fn unique(
    what: &str,
    text: &str,
    candidates: &[(String, String)],
    matches: impl Fn(&str) -> bool,
) -> Result<String, Failure> {
    let found: Vec<&(String, String)> = candidates.iter().filter(|(id, _)| matches(id)).collect();
    let shown = visible_cell(text);
    match found.as_slice() {
        [(id, _)] => Ok(id.clone()),
        [] => Err(Failure::usage(anyhow::anyhow!(
            "no {what} is `{shown}`: give its id, or the start of it (`abfleet {what}s` lists them)"
        ))),
        several => {
            let listed: Vec<String> = several
                .iter()
                .take(SHOWN)
                .map(|(_, label)| visible_cell(label).into_owned())
                .collect();
            let more = several.len().saturating_sub(SHOWN);
            Err(Failure::usage(anyhow::anyhow!(
                "`{shown}` names {} {what}s: {}{}; give more of the id",
                several.len(),
                listed.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidates() -> Vec<(String, String)> {
        [
            "0a1b2c3d-0000-4000-8000-000000000001",
            "0a1b9999-0000-4000-8000-000000000002",
            "ffff0000-0000-4000-8000-000000000003",
        ]
        .iter()
        .map(|id| (id.to_string(), format!("{id} (demo, done)")))
        .collect()
    }

    #[test]
    fn a_unique_prefix_names_its_run_and_an_ambiguous_one_lists_the_candidates() {
        let all = candidates();
        let Ok(one) = unique("run", "0a1b2", &all, |id| id.starts_with("0a1b2")) else {
            panic!("a unique prefix")
        };
        assert_eq!(one, all[0].0);
        let Err(err) = unique("run", "0a1b", &all, |id| id.starts_with("0a1b")) else {
            panic!("an ambiguous prefix")
        };
        let text = format!("{:#}", err.error);
        assert!(
            text.starts_with("`0a1b` names 2 runs: 0a1b2c3d-")
                && text.ends_with("; give more of the id"),
            "{text}"
        );
        let Err(err) = unique("run", "beef", &all, |id| id.starts_with("beef")) else {
            panic!("no match")
        };
        assert!(format!("{:#}", err.error).contains("no run is `beef`"));
    }
}
