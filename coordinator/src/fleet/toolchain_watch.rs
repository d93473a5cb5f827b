//! The toolchain watcher: when an agent registers with a generation whose toolchain (its
//! compilers' version lines, the GPU driver or runtime) differs from what the same agent
//! registered with before, the coordinator starts the retuning run for that generation — the
//! retune spec (`--retune-spec`, else the milestone spec) narrowed to that one generation
//! key, reason `toolchain-bump`. One run per generation and new toolchain: a second agent of
//! the generation moving to the same toolchain, or the agent registering again, is recorded
//! as debounced into it (trigger key `toolchain KEY TOOLCHAIN`, checked against every earlier
//! trigger, not only those of the debounce window). Off when neither spec is configured.
//! With a sweep spec (`--sweep-spec`) the retuning sweep starts too, narrowed alike.

use abfleet_core::inventory::Inventory;
use abfleet_core::spec::{Fanout, JobSpec, TargetSpec};
use abfleet_core::AgentId;
use tracing::{info, warn};

use super::triggers::spec_file;
use super::{Fleet, FleetError, TriggerOutcome, TriggerRequest};

impl Fleet {
    /// Starts a retuning run for each generation of `inventory` whose toolchain changed since
    /// `earlier`. Failures are logged, never the registration's.
    pub(super) async fn watch_toolchains(
        &self,
        agent_id: AgentId,
        inventory: &Inventory,
        earlier: &Inventory,
    ) -> Vec<TriggerOutcome> {
        let config = &self.inner.config;
        let Some(path) = config
            .retune_spec
            .clone()
            .or_else(|| config.milestone_spec.clone())
        else {
            return Vec::new();
        };
        let mut outcomes = Vec::new();
        for generation in &inventory.generations {
            let Some(old) = earlier.generations.iter().find(|g| g.key == generation.key) else {
                continue;
            };
            let changes = generation.toolchain_changes(old);
            if changes.is_empty() {
                continue;
            }
            info!(agent_id = %agent_id, generation = %generation.key, changes = %changes.join("; "), "toolchain changed");
            let started = async {
                let (spec, origin) = spec_file(path.clone()).await?;
                let spec =
                    narrowed_to(spec, &generation.key, &generation.backend).map_err(|reason| {
                        FleetError::MilestoneSpec {
                            path: origin.clone(),
                            reason,
                        }
                    })?;
                let toolchain: Vec<String> = generation
                    .toolchain
                    .iter()
                    .map(|(tool, line)| format!("{tool}={line}"))
                    .collect();
                let request = TriggerRequest {
                    reason: "toolchain-bump".into(),
                    debounce_key: Some(format!(
                        "toolchain {} {}",
                        generation.key,
                        toolchain.join("; ")
                    )),
                    note: format!(
                        "toolchain on {} (agent {}, host {}): {}",
                        generation.key,
                        agent_id,
                        inventory.hostname,
                        changes.join("; ")
                    ),
                    source: "toolchain-watcher",
                    spec: Some((spec, origin)),
                    upstream_rev: None,
                    once: true,
                };
                let outcome = self.trigger(request.clone()).await?;
                if let TriggerOutcome::Started(_) = outcome {
                    // The sweep spec too, narrowed alike: the tunables' winners may have
                    // moved with the compiler (docs/sweeps.md).
                    self.start_sweep(
                        &request,
                        self.now_ms(),
                        Some((&generation.key, &generation.backend)),
                    )
                    .await?;
                }
                Ok::<_, FleetError>(outcome)
            }
            .await;
            match started {
                Ok(outcome) => {
                    info!(run_id = %outcome.run_id(), generation = %generation.key, debounced = matches!(outcome, TriggerOutcome::Debounced(_)), "toolchain watcher");
                    outcomes.push(outcome);
                }
                Err(err) => {
                    warn!(generation = %generation.key, "the toolchain watcher could not start a retuning run: {err}")
                }
            }
        }
        outcomes
    }
}

/// `spec` run on exactly one generation key, read back through validation.
pub(super) fn narrowed_to(spec: JobSpec, key: &str, backend: &str) -> Result<JobSpec, String> {
    let mut narrowed = spec;
    let fanout = narrowed
        .targets
        .as_ref()
        .map_or(Fanout::PerGeneration, |t| t.fanout);
    narrowed.targets = Some(TargetSpec {
        backends: vec![backend.to_string()],
        generations: vec![key.to_string()],
        vendors: vec!["*".to_string()],
        fanout,
    });
    JobSpec::from_json(&narrowed.to_json()).map_err(|err| format!("narrowed to `{key}`: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_is_narrowed_to_one_generation_and_read_back_through_validation() {
        let spec = JobSpec::from_toml(
            concat!(
            "name = \"m\"\n[upstream]\npath = \"/u\"\n[fork]\npath = \"/f\"\n",
            "[build]\ncommands = [[\"make\"]]\nbinary = \"build/vmaf\"\n",
            "[command]\ntemplate = [\"{binary}\", \"-o\", \"{output}\"]\n",
            "[[fixtures]]\nname = \"t\"\nwidth = 16\nheight = 16\nbitdepth = 8\npixel_format = \"420\"\nframes = 1\n",
            "reference = { generate = \"moving-pattern\", seed = 1 }\ndistorted = { generate = \"moving-pattern-distorted\", seed = 1 }\n",
            "[[workloads]]\nname = \"psnr\"\nargs = [\"--feature\", \"psnr\"]\n",
            "[targets]\nbackends = [\"cpu\", \"cuda\"]\ngenerations = [\"*\"]\nfanout = \"per-agent\"\n",
            ),
            std::path::Path::new("m.toml"),
            std::path::Path::new("/"),
        )
        .unwrap();
        let narrowed = narrowed_to(spec, "cuda/sm_90", "cuda").unwrap();
        let targets = narrowed.targets.unwrap();
        assert_eq!(targets.generations, ["cuda/sm_90"]);
        assert_eq!(targets.backends, ["cuda"]);
        assert_eq!(
            targets.fanout,
            Fanout::PerAgent,
            "the spec's fan-out is kept"
        );
    }
}
