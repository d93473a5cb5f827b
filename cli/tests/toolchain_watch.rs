//! The toolchain watcher over the wire: an agent on recorded probes of an H100 host registers
//! with CUDA 11.8, then again (same agent id, same work dir) with CUDA 12.4 — recorded `nvcc
//! -V` outputs of both. The coordinator starts one `toolchain-bump` retuning run for
//! `cuda/sm_90`, its targets exactly that generation, and the retuning sweep (the demo sweep
//! spec) narrowed alike; registering again with 12.4, or a second H100 agent making the same
//! move, starts no other run. A new agent arriving with a toolchain its generation has not
//! had starts the retuning run too; one still on a known, older toolchain does not.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use abfleet_agent::inventory;
use abfleet_coordinator::CoordinatorConfig;
use abfleet_proto::pb;
use support::*;

type Client =
    abfleet_proto::pb::control_service_client::ControlServiceClient<tonic::transport::Channel>;

const PROBES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/probes");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures");

/// The demo sweep spec (fixtures/jobs/demo-sweep.toml), its fork path made absolute, on
/// every CPU and CUDA generation.
fn sweep_spec(dir: &Path) -> PathBuf {
    let demo = std::fs::read_to_string(Path::new(FIXTURES).join("jobs/demo-sweep.toml")).unwrap();
    let subject = Path::new(FIXTURES).join("subject");
    let text = demo.replacen(
        "path = \"../subject\"",
        &format!("path = {:?}", subject.display().to_string()),
        1,
    );
    assert_ne!(text, demo, "the demo sweep names its fork path");
    let path = dir.join("sweep.toml");
    std::fs::write(
        &path,
        text + "\n[targets]\nbackends = [\"cpu\", \"cuda\"]\ngenerations = [\"*\"]\n",
    )
    .unwrap();
    path
}

/// The H100's nvidia-smi and the Genoa's cpuinfo, with `nvcc -V` of `toolkit`.
fn probe_set(dir: &Path, toolkit: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    for (from, name) in [
        ("h100-sxm5-della-pli/nvidia-smi-q.txt", "nvidia-smi-q.txt"),
        ("epyc9r14-genoa-m7a/cpuinfo.txt", "cpuinfo.txt"),
        (
            &format!("{toolkit}/nvcc-version.txt") as &str,
            "nvcc-version.txt",
        ),
    ] {
        std::fs::copy(Path::new(PROBES).join(from), dir.join(name)).unwrap();
    }
    dir.to_path_buf()
}

/// The spec a run was started with, as the coordinator keeps it.
async fn spec_of(client: &mut Client, run_id: &str) -> abfleet_core::spec::JobSpec {
    let json = client
        .get_report(pb::GetReportRequest {
            run_id: run_id.to_string(),
        })
        .await
        .unwrap()
        .into_inner()
        .spec_json;
    abfleet_core::spec::JobSpec::from_json(&json).unwrap()
}

/// The spec's targets: (backends, generations).
fn targets(spec: &abfleet_core::spec::JobSpec) -> (Vec<String>, Vec<String>) {
    let targets = spec
        .targets
        .as_ref()
        .expect("the retuning run names its targets");
    (targets.backends.clone(), targets.generations.clone())
}

/// Starts an agent with the recorded inventory, waits until the coordinator has stored its
/// registration (the toolchain watcher runs in the same call, right after), and stops it.
async fn register(url: &str, client: &Client, work_dir: &Path, probes: &Path) {
    std::fs::create_dir_all(work_dir).unwrap();
    let agent_id = abfleet_agent::identity::load_or_create(work_dir)
        .unwrap()
        .to_string();
    let recorded = inventory::from_recorded_probes(probes).unwrap();
    let agent = TestAgent::start_with_inventory(url, work_dir, recorded.clone());
    wait_until(Duration::from_secs(60), "the registration", || async {
        list_agents(client)
            .await
            .into_iter()
            .find(|a| a.agent_id == agent_id)
            .and_then(|a| a.inventory)
            .and_then(|i| abfleet_core::inventory::Inventory::try_from(i).ok())
            .filter(|stored| stored.generations == recorded.generations)
            .map(|_| ())
    })
    .await;
    // The watcher's decision follows the stored inventory within the same request.
    tokio::time::sleep(Duration::from_millis(500)).await;
    agent.stop().await;
}

/// The runs, once there are `count` of them (a watcher's run is submitted as the agent
/// registers).
async fn runs_when(client: &Client, count: usize) -> Vec<pb::RunSummary> {
    wait_until(Duration::from_secs(30), "the watcher's runs", || {
        let client = client.clone();
        async move {
            let listed = list_runs(&client).await;
            (listed.len() >= count).then_some(listed)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_nvcc_on_an_agent_starts_one_retuning_run_for_its_generation() {
    let tmp = tempfile::tempdir().unwrap();
    let mut options = SpecOptions::path();
    options.extra = "\n[targets]\nbackends = [\"cpu\", \"cuda\"]\ngenerations = [\"*\"]\n";
    let retune = options.write(tmp.path(), "retune.toml");
    let coordinator = TestCoordinator::start(
        &tmp.path().join("data"),
        CoordinatorConfig {
            retune_spec: Some(retune),
            sweep_spec: Some(sweep_spec(tmp.path())),
            ..CoordinatorConfig::default()
        },
    )
    .await;
    let url = coordinator.url();
    let mut client = coordinator.control().await;
    let old = probe_set(
        &tmp.path().join("probes-11.8"),
        "toolchain-cuda-11.8-debian",
    );
    let new = probe_set(&tmp.path().join("probes-12.4"), "toolchain-cuda-12.4-conda");
    let recorded = inventory::from_recorded_probes(&new).unwrap();
    let cuda = recorded
        .generations
        .iter()
        .find(|g| g.backend == "cuda")
        .expect("the H100 probes give a cuda generation");
    assert_eq!(cuda.key, "cuda/sm_90");
    assert!(
        cuda.toolchain["nvcc"].contains("release 12.4"),
        "{:?}",
        cuda.toolchain
    );

    // First registration: nothing to compare with.
    let host_a = tmp.path().join("agent-a");
    register(&url, &client, &host_a, &old).await;
    assert!(list_runs(&client).await.is_empty());
    // The same toolchain again: nothing changed.
    register(&url, &client, &host_a, &old).await;
    assert!(list_runs(&client).await.is_empty());

    // CUDA 11.8 → 12.4 on the same agent: one retuning run and one retuning sweep.
    register(&url, &client, &host_a, &new).await;
    let started = runs_when(&client, 2).await;
    assert_eq!(started.len(), 2, "{started:?}");
    let sweep = started
        .iter()
        .find(|run| run.name == "demo-sweep")
        .unwrap_or_else(|| panic!("the sweep spec started too: {started:?}"));
    assert_eq!(sweep.trigger, "toolchain-bump");
    let run = started.iter().find(|run| run.name != "demo-sweep").unwrap();
    assert_eq!(sweep.trigger_note, run.trigger_note);
    assert_eq!(run.trigger, "toolchain-bump");
    assert!(
        run.trigger_note.contains("cuda/sm_90")
            && run.trigger_note.contains("release 11.8")
            && run.trigger_note.contains("release 12.4"),
        "{}",
        run.trigger_note
    );
    // The CPU generation's compilers did not change: no run for it.
    assert!(!run.trigger_note.contains("cpu/"), "{}", run.trigger_note);

    // Both narrowed to the generation: the specs they run target exactly cuda/sm_90 (the
    // retune spec and the sweep spec named every CPU and CUDA generation).
    for started in [run, sweep] {
        let spec = spec_of(&mut client, &started.run_id).await;
        assert_eq!(
            targets(&spec),
            (vec!["cuda".to_string()], vec!["cuda/sm_90".to_string()]),
            "{}",
            started.name
        );
        client
            .cancel_run(pb::CancelRunRequest {
                run_id: started.run_id.clone(),
                reason: "the test saw what it needed".into(),
            })
            .await
            .unwrap();
    }

    // Again on 12.4, and a second H100 host moving 11.8 → 12.4: still one run.
    register(&url, &client, &host_a, &new).await;
    let host_b = tmp.path().join("agent-b");
    register(&url, &client, &host_b, &old).await;
    register(&url, &client, &host_b, &new).await;
    let after = list_runs(&client).await;
    assert_eq!(after.len(), 2, "{after:?}");
}

/// The generation's last known toolchain is any agent's: a new agent that arrives with CUDA
/// 12.4 on `cuda/sm_90`, where another agent registered 11.8, starts the retuning run (its
/// note names the agent it is compared with); a third agent still on 11.8, a toolchain the
/// generation has had, starts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_agent_with_a_new_toolchain_starts_the_retuning_run_of_its_generation() {
    let tmp = tempfile::tempdir().unwrap();
    let mut options = SpecOptions::path();
    options.extra = "\n[targets]\nbackends = [\"cpu\", \"cuda\"]\ngenerations = [\"*\"]\n";
    let retune = options.write(tmp.path(), "retune.toml");
    let coordinator = TestCoordinator::start(
        &tmp.path().join("data"),
        CoordinatorConfig {
            retune_spec: Some(retune),
            ..CoordinatorConfig::default()
        },
    )
    .await;
    let url = coordinator.url();
    let mut client = coordinator.control().await;
    let old = probe_set(
        &tmp.path().join("probes-11.8"),
        "toolchain-cuda-11.8-debian",
    );
    let new = probe_set(&tmp.path().join("probes-12.4"), "toolchain-cuda-12.4-conda");

    register(&url, &client, &tmp.path().join("agent-a"), &old).await;
    assert!(list_runs(&client).await.is_empty());
    let agents = client
        .list_agents(pb::ListAgentsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .agents;
    assert_eq!(agents.len(), 1);
    let agent_a = agents[0].agent_id.clone();

    // Agent B's first registration, on 12.4: new to cuda/sm_90.
    register(&url, &client, &tmp.path().join("agent-b"), &new).await;
    let started = runs_when(&client, 1).await;
    assert_eq!(started.len(), 1, "{started:?}");
    let run = &started[0];
    assert_eq!(run.trigger, "toolchain-bump");
    assert!(
        run.trigger_note
            .starts_with("toolchain on cuda/sm_90 (agent ")
            && run.trigger_note.contains("release 11.8")
            && run.trigger_note.contains("release 12.4")
            && run
                .trigger_note
                .ends_with(&format!("(since agent {agent_a})")),
        "{}",
        run.trigger_note
    );
    assert_eq!(
        targets(&spec_of(&mut client, &run.run_id).await),
        (vec!["cuda".to_string()], vec!["cuda/sm_90".to_string()])
    );

    // Agent C, still on 11.8: the generation has had it; nothing starts.
    register(&url, &client, &tmp.path().join("agent-c"), &old).await;
    assert_eq!(list_runs(&client).await.len(), 1);
}
