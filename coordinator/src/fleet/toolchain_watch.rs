//! The toolchain watcher: when an agent registers with a generation whose toolchain (its
//! compilers' version lines, the GPU driver or runtime) is new to that generation key — no
//! agent registered the key with it before, while the store knows another toolchain of the
//! key — the coordinator starts the retuning run for that generation: the retune spec
//! (`--retune-spec`, else the milestone spec, its upstream pin following releases) narrowed
//! to that one generation key, reason `toolchain-bump`. The store remembers every toolchain
//! each key registered with, from any agent (`generation_toolchains`), so a new host arriving
//! with a newer toolchain counts, and a host still on a known one (an older toolchain not yet
//! upgraded) does not. One run per generation and new toolchain: the trigger key `toolchain
//! KEY TOOLCHAIN` is checked against every earlier trigger, not only those of the debounce
//! window. A key the store has no toolchain for yet (its first agent, or a store from before
//! migration 11) is compared with the same agent's previous registration. Off when neither
//! spec is configured (the toolchains are remembered all the same). With a sweep spec
//! (`--sweep-spec`) the retuning sweep starts too, narrowed alike.

use std::collections::BTreeMap;

use abfleet_core::generation::Generation;
use abfleet_core::inventory::Inventory;
use abfleet_core::AgentId;
use tracing::{info, warn};

use super::triggers::spec_file;
use super::{FleetError, TriggerOutcome, TriggerRequest, Triggers};
use crate::store::toolchain_fingerprint;

/// What a generation's toolchain moved from, as the watcher found it.
struct ToolchainMove {
    changes: Vec<String>,
    /// The agent whose registration the new toolchain is compared with, when another.
    since_agent: Option<String>,
}

impl Triggers {
    /// Remembers each generation's toolchain of `inventory`, and starts a retuning run for
    /// each whose toolchain is new to its key. `earlier`: the agent's previous registration.
    /// Failures are logged, never the registration's.
    pub(super) async fn watch_toolchains(
        &self,
        agent_id: AgentId,
        inventory: &Inventory,
        earlier: Option<&Inventory>,
    ) -> Vec<TriggerOutcome> {
        let mut outcomes = Vec::new();
        for generation in &inventory.generations {
            let moved = match self.toolchain_move(agent_id, generation, earlier).await {
                Ok(Some(moved)) => moved,
                Ok(None) => continue,
                Err(err) => {
                    warn!(generation = %generation.key, %err, "the toolchain watcher could not read or record the generation's toolchains");
                    continue;
                }
            };
            info!(agent_id = %agent_id, generation = %generation.key, changes = %moved.changes.join("; "), "toolchain changed");
            match self
                .start_retuning(agent_id, inventory, generation, &moved)
                .await
            {
                Ok(Some(outcome)) => {
                    info!(run_id = %outcome.run_id(), generation = %generation.key, debounced = matches!(outcome, TriggerOutcome::Debounced(_)), "toolchain watcher");
                    outcomes.push(outcome);
                }
                Ok(None) => {}
                Err(err) => {
                    warn!(generation = %generation.key, "the toolchain watcher could not start a retuning run: {err}")
                }
            }
        }
        outcomes
    }

    /// Records `generation`'s toolchain as seen and says how it moved, if it is new to the
    /// key: against the key's most recent other toolchain, or, when the store knows none,
    /// against the agent's previous registration.
    async fn toolchain_move(
        &self,
        agent_id: AgentId,
        generation: &Generation,
        earlier: Option<&Inventory>,
    ) -> Result<Option<ToolchainMove>, FleetError> {
        if generation.toolchain.is_empty() {
            return Ok(None);
        }
        let known = self
            .ground
            .store()
            .triggers()
            .record_generation_toolchain(
                &generation.key,
                &generation.toolchain,
                agent_id,
                self.ground.now_ms(),
            )
            .await?;
        if known.known {
            return Ok(None);
        }
        let (before, since_agent): (BTreeMap<String, String>, Option<String>) =
            match known.latest_other {
                Some((toolchain, agent)) => {
                    let other = (agent != agent_id.to_string()).then_some(agent);
                    (toolchain, other)
                }
                None => {
                    let Some(own) = earlier
                        .and_then(|inventory| {
                            inventory
                                .generations
                                .iter()
                                .find(|g| g.key == generation.key)
                        })
                        .map(|g| g.toolchain.clone())
                    else {
                        return Ok(None);
                    };
                    (own, None)
                }
            };
        let before = Generation {
            toolchain: before,
            ..generation.clone()
        };
        let changes = generation.toolchain_changes(&before);
        Ok((!changes.is_empty()).then_some(ToolchainMove {
            changes,
            since_agent,
        }))
    }

    /// The retuning run of `generation` (and the sweep, narrowed alike); `None` when no
    /// retune or milestone spec is configured.
    async fn start_retuning(
        &self,
        agent_id: AgentId,
        inventory: &Inventory,
        generation: &Generation,
        moved: &ToolchainMove,
    ) -> Result<Option<TriggerOutcome>, FleetError> {
        let config = &self.ground.config();
        let (spec, origin, followed) = match (&config.retune_spec, &config.milestone_spec) {
            (Some(path), _) => {
                let (spec, origin) = spec_file(path.clone()).await?;
                (spec, origin, String::new())
            }
            (None, Some(_)) => {
                let milestone = self.milestone_run_spec().await?;
                let followed = milestone
                    .followed
                    .as_ref()
                    .map(|f| f.note())
                    .unwrap_or_default();
                (milestone.spec, milestone.origin, followed)
            }
            (None, None) => return Ok(None),
        };
        let spec = spec
            .narrowed_to(&generation.key, &generation.backend)
            .map_err(|reason| FleetError::MilestoneSpec {
                path: origin.clone(),
                reason,
            })?;
        let since = moved
            .since_agent
            .as_ref()
            .map(|agent| format!(" (since agent {agent})"))
            .unwrap_or_default();
        let request = TriggerRequest {
            reason: "toolchain-bump".into(),
            debounce_key: Some(format!(
                "toolchain {} {}",
                generation.key,
                toolchain_fingerprint(&generation.toolchain)
            )),
            note: format!(
                "toolchain on {} (agent {}, host {}): {}{since}{followed}",
                generation.key,
                agent_id,
                inventory.hostname,
                moved.changes.join("; ")
            ),
            source: "toolchain-watcher",
            spec: Some((spec, origin)),
            upstream_rev: None,
            fork_rev: None,
            once: true,
            pull_request: None,
        };
        let outcome = self.trigger(request.clone()).await?;
        if let TriggerOutcome::Started(_) = outcome {
            // The sweep spec too, narrowed alike: the tunables' winners may have moved with
            // the compiler (docs/sweeps.md).
            self.start_sweep(
                &request,
                self.ground.now_ms(),
                Some((&generation.key, &generation.backend)),
                None,
            )
            .await?;
        }
        Ok(Some(outcome))
    }
}
