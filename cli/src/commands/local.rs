//! `abfleet local`: a coordinator and one agent in this process, talking real gRPC over
//! loopback, running one spec and reporting it.

use std::path::{Path, PathBuf};

use abfleet_agent::config::InventorySource;
use abfleet_agent::{run_agent, AgentConfig};
use abfleet_coordinator::{serve, Coordinator, CoordinatorConfig, ServerTransport};
use abfleet_core::spec::{FixtureLocation, JobSpec, SourceSpec};
use abfleet_proto::control_link::{SpecToRun, Submission};

use super::follow::{follow, OnInterrupt};
use super::{control_client, link_error};
use crate::cli::{FailOnArg, LocalCommand, Trigger, TriggerArg};
use crate::failure::{Classify, Failure};
use abfleet_core::fail_on::FailOn;

/// `abfleet local SPEC`: the spec run here, its report written, its exit code returned.
pub async fn run(args: LocalCommand) -> Result<i32, Failure> {
    let LocalCommand {
        spec: spec_path,
        out,
        data_dir,
        work_dir,
        gpu_probes,
        trigger: TriggerArg { trigger },
        fail_on: FailOnArg { fail_on },
    } = args;
    let (spec_path, data_dir, work_dir) = (&spec_path, &data_dir, &work_dir);
    let (gpu_probes, fail_on) = (&gpu_probes[..], &fail_on[..]);
    let spec = JobSpec::load(spec_path).usage()?;
    if let Some(warning) = spec.measure.verdict_limit_warning() {
        eprintln!("warning: {warning}");
    }
    run_spec(
        spec,
        &spec_path.display().to_string(),
        out,
        data_dir,
        work_dir,
        gpu_probes,
        RunIntent { trigger, fail_on },
    )
    .await
}

/// Why a local run happens and what its exit code gates on.
pub struct RunIntent<'a> {
    pub trigger: Trigger,
    /// `--fail-on` (exit codes 5-7).
    pub fail_on: &'a [FailOn],
}

/// Waits (up to a minute: the probes run first) until the embedded agent has registered
/// with the embedded coordinator, asked in process (no gRPC round trip). A work dir used
/// before holds the earlier runs' agents, lost since: only one heard from after `since_ms`
/// (Unix milliseconds) is this run's.
async fn wait_for_the_agent(
    fleet: &abfleet_coordinator::Fleet,
    since_ms: i64,
) -> Result<(), Failure> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let agents = fleet.store().agents().all().await.infra()?;
        if agents.iter().any(|a| a.last_heartbeat_ms >= since_ms) {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(Failure::infra(anyhow::anyhow!(
                "the embedded agent did not register within a minute; see its warnings above, or rerun with RUST_LOG=debug"
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Runs an already loaded spec on the embedded coordinator and agent.
pub async fn run_spec(
    spec: JobSpec,
    origin: &str,
    out: Option<PathBuf>,
    data_dir: &Path,
    work_dir: &Path,
    gpu_probes: &[PathBuf],
    intent: RunIntent<'_>,
) -> Result<i32, Failure> {
    let RunIntent { trigger, fail_on } = intent;
    check_local_paths(&spec).usage()?;
    // The embedded agent takes the work dir's lock itself; if another agent holds it, that
    // agent would stop at once and the run would wait for it forever: say so before
    // submitting anything.
    drop(abfleet_agent::work_dir_lock::WorkDirLock::acquire(work_dir).usage()?);
    let coordinator = Coordinator::open(data_dir, CoordinatorConfig::default()).infra()?;
    let fleet = coordinator.fleet.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|err| anyhow::anyhow!("failed to listen on loopback: {err}"))
        .infra()?;
    let addr = listener.local_addr().infra()?;
    let url = format!("http://{addr}");
    let (stop_coordinator, coordinator_stopped) = tokio::sync::oneshot::channel::<()>();
    let coordinator_task = tokio::spawn(serve(
        coordinator,
        listener,
        ServerTransport::LoopbackPlaintext,
        async {
            let _ = coordinator_stopped.await;
        },
    ));
    let (stop_agent, agent_stopped) = tokio::sync::oneshot::channel::<()>();
    // The probes run external tools (nvidia-smi, rocminfo, …): off the async runtime.
    let source = if gpu_probes.is_empty() {
        InventorySource::Live
    } else {
        InventorySource::LiveWithRecordedGpus(gpu_probes.to_vec())
    };
    let host = {
        let source = source.clone();
        tokio::task::spawn_blocking(move || source.read())
            .await
            .map_err(|err| anyhow::anyhow!("the host probe task failed: {err}"))
            .infra()?
            .usage()?
    };
    let mut agent_config = AgentConfig::new(url.clone(), work_dir);
    agent_config.inventory_source = Some(source);
    let agent_started_ms = abfleet_coordinator::Clock::now_ms(&abfleet_coordinator::SystemClock);
    let agent_task = tokio::spawn(run_agent(agent_config, host, async {
        let _ = agent_stopped.await;
    }));

    let result = async {
        let client = control_client(&url, &crate::cli::TlsArgs::default()).await?;
        if spec.targets.is_some() {
            // A run with targets is matched against the registered agents when it is
            // submitted: the embedded agent must have registered first.
            wait_for_the_agent(&fleet, agent_started_ms).await?;
        }
        let run_id = client
            .submit(Submission::new(
                SpecToRun::Json(spec.to_json()),
                trigger.as_str(),
                origin,
            ))
            .await
            .map_err(|err| link_error("failed to submit the run", err))?;
        follow(&client, &run_id, out, OnInterrupt::CancelRun, fail_on).await
    }
    .await;

    // The agent first (it stops any child and flushes), then the coordinator.
    let _ = stop_agent.send(());
    if let Ok(Err(err)) = agent_task.await {
        eprintln!("warning: the embedded agent stopped with an error: {err}");
    }
    let _ = stop_coordinator.send(());
    if let Ok(Err(err)) = coordinator_task.await {
        eprintln!("warning: the embedded coordinator stopped with an error: {err}");
    }
    result
}

/// Local paths a spec names must exist here; on a fleet the agent checks them on its host.
fn check_local_paths(spec: &JobSpec) -> anyhow::Result<()> {
    for (side, side_spec) in [("upstream", &spec.upstream), ("fork", &spec.fork)] {
        if let SourceSpec::Path { path } = &side_spec.source {
            if !path.is_dir() {
                anyhow::bail!(
                    "the {side} source directory `{}` does not exist; fix [{side}] path (it resolves against the spec's directory)",
                    path.display()
                );
            }
        }
    }
    for fixture in &spec.fixtures {
        for (role, file) in [
            ("reference", &fixture.reference),
            ("distorted", &fixture.distorted),
        ] {
            if let FixtureLocation::Path(path) = &file.location {
                if !path.is_file() {
                    anyhow::bail!(
                        "fixture `{}` {role} `{}` does not exist; create or copy it there, or fix its path in the spec",
                        fixture.name,
                        path.display()
                    );
                }
            }
        }
    }
    Ok(())
}
