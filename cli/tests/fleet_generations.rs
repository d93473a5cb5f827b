//! A fleet of agents with different hardware: the real machine plus hosts whose inventories
//! come from recorded probe output of real machines (`fixtures/probes/`). A run fans out one
//! job per generation, and the merged report has one section per generation.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use abfleet_agent::inventory;
use abfleet_coordinator::store::Store;
use abfleet_coordinator::CoordinatorConfig;
use abfleet_render::render_markdown;
use support::*;

fn recorded(host: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/probes")
        .join(host)
}

/// A coordinator with one agent, the real machine, registered.
async fn this_machine_alone(
    dir: &Path,
) -> (
    TestCoordinator,
    TestAgent,
    abfleet_proto::pb::control_service_client::ControlServiceClient<tonic::transport::Channel>,
) {
    let coordinator = TestCoordinator::start(&dir.join("data"), CoordinatorConfig::default()).await;
    let agent = TestAgent::start(&coordinator.url(), &dir.join("live"));
    let client = coordinator.control().await;
    wait_for_agents(&client, 1).await;
    (coordinator, agent, client)
}

fn targeted(extra: &str) -> String {
    SpecOptions {
        workloads: &["psnr", "float_ssim"],
        ..SpecOptions::path()
    }
    .render()
        + extra
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_run_fans_out_one_job_per_generation_with_one_report_section_each() {
    let tmp = tempfile::tempdir().unwrap();
    let coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let url = coordinator.url();
    let hosts = [
        "xeon8480c-sapphirerapids-h100x8",
        "grace-neoverse-v2",
        "core-i5-12400-alderlake",
    ];
    let mut agents = Vec::new();
    let mut expected_keys = std::collections::BTreeSet::new();
    for host in hosts {
        let inventory = inventory::from_recorded_probes(&recorded(host)).unwrap();
        expected_keys.insert(
            inventory
                .generations
                .iter()
                .find(|g| g.backend == "cpu")
                .unwrap()
                .key
                .clone(),
        );
        agents.push(TestAgent::start_with_inventory(
            &url,
            &tmp.path().join(host),
            inventory,
        ));
    }
    // A second Grace host: same generation, so still one job for it.
    let twin = inventory::from_recorded_probes(&recorded("grace-neoverse-v2")).unwrap();
    agents.push(TestAgent::start_with_inventory(
        &url,
        &tmp.path().join("grace-twin"),
        twin,
    ));
    let live = inventory::probe_host();
    expected_keys.insert(
        live.generations
            .iter()
            .find(|g| g.backend == "cpu")
            .unwrap()
            .key
            .clone(),
    );
    agents.push(TestAgent::start_with_inventory(
        &url,
        &tmp.path().join("live"),
        live,
    ));
    let mut client = coordinator.control().await;
    wait_for_agents(&client, 5).await;

    let spec = tmp.path().join("fleet.toml");
    std::fs::write(
        &spec,
        targeted("\n[targets]\nbackends = [\"cpu\"]\nfanout = \"per-generation\"\n"),
    )
    .unwrap();
    let (run_id, report) = submit_and_wait(&mut client, &spec).await;

    let keys: std::collections::BTreeSet<String> =
        report.generations.iter().map(|g| g.key.clone()).collect();
    assert_eq!(keys, expected_keys, "one section per generation");
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let jobs = store.jobs().of_run(run_id.parse().unwrap()).await.unwrap();
    assert_eq!(
        jobs.len(),
        expected_keys.len(),
        "exactly one job per generation"
    );
    for section in &report.generations {
        assert_eq!(
            report.cells_of(section).count(),
            2,
            "{}: {:?}",
            section.key,
            section.errors
        );
        assert!(report
            .cells_of(section)
            .all(|c| c.generation.as_deref() == Some(section.key.as_str())));
        assert_eq!(
            section.simulated,
            !section.key.eq(&inventory::probe_host().generations[0].key),
            "{}",
            section.key
        );
        assert!(section.toolchain.contains_key("fork"));
    }
    assert!(keys.iter().any(|k| k == "cpu/arm/neoverse-v2"), "{keys:?}");
    assert_eq!(
        report.geomean_speedup, None,
        "no geomean across generations"
    );
    assert_eq!(report.exit_code, 0, "{:?}", report.errors);
    let markdown = render_markdown(&report);
    assert!(
        markdown.contains("#### Generation `cpu/arm/neoverse-v2`"),
        "{markdown}"
    );
    assert!(markdown.contains("recorded probe output"), "{markdown}");
    for agent in agents {
        agent.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_that_matches_no_agent_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let (_coordinator, _agent, mut client) = this_machine_alone(tmp.path()).await;
    let spec = tmp.path().join("riscv.toml");
    std::fs::write(
        &spec,
        targeted("\n[targets]\ngenerations = [\"cpu/riscv/*\"]\n"),
    )
    .unwrap();
    let (_, report) = submit_and_wait(&mut client, &spec).await;
    assert_eq!(report.exit_code, 3);
    assert_eq!(report.status, "failed");
    assert!(
        report.errors[0].contains("no agent matches"),
        "{:?}",
        report.errors
    );
    assert!(
        report.errors[0].contains("cpu/"),
        "it lists what the fleet has: {:?}",
        report.errors
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toolchain_change_between_two_runs_shows_in_the_report() {
    let tmp = tempfile::tempdir().unwrap();
    let (_coordinator, _agent, mut client) = this_machine_alone(tmp.path()).await;
    let spec_with = |version: &str| {
        let text = targeted("\n[targets]\nbackends = [\"cpu\"]\n").replace(
            "binary = \"build/vmaf\"",
            &format!("binary = \"build/vmaf\"\ntoolchain = [\"echo\", \"cc (bench) {version}\"]"),
        );
        let path = tmp.path().join(format!("spec-{version}.toml"));
        std::fs::write(&path, text).unwrap();
        path
    };
    let (_, first) = submit_and_wait(&mut client, &spec_with("12.2.0")).await;
    assert!(first.generations[0].toolchain_changes().is_empty());
    let (_, second) = submit_and_wait(&mut client, &spec_with("13.1.0")).await;
    let changes = second.generations[0].toolchain_changes();
    assert_eq!(
        changes.len(),
        2,
        "both sides were rebuilt with the new compiler: {changes:?}"
    );
    assert!(
        changes[0].contains("12.2.0") && changes[0].contains("13.1.0"),
        "{changes:?}"
    );
    let markdown = render_markdown(&second);
    assert!(
        markdown.contains("**Toolchain changed** since the previous run"),
        "{markdown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_registers_again_when_its_inventory_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    // A recorded Sapphire Rapids host, at first without any CUDA toolchain.
    let set = tmp.path().join("probes");
    std::fs::create_dir_all(&set).unwrap();
    std::fs::copy(
        recorded("xeon8480c-sapphirerapids-h100x8").join("cpuinfo.txt"),
        set.join("cpuinfo.txt"),
    )
    .unwrap();
    let mut config = abfleet_agent::AgentConfig::new(coordinator.url(), tmp.path().join("agent"));
    config.inventory_source = Some(abfleet_agent::config::InventorySource::Recorded(
        set.clone(),
    ));
    config.reprobe_interval = Duration::from_millis(200);
    let first = inventory::from_recorded_probes(&set).unwrap();
    let _agent = TestAgent::start_with_config(config, first);
    let client = coordinator.control().await;
    wait_for_agents(&client, 1).await;

    // The host gets an NVIDIA GPU and nvcc: the agent's next look says so, unasked.
    for (from, name) in [
        ("h100-sxm5-della-pli", "nvidia-smi-q.txt"),
        ("toolchain-cuda-11.8-debian", "nvcc-version.txt"),
    ] {
        std::fs::copy(recorded(from).join(name), set.join(name)).unwrap();
    }
    wait_until(Duration::from_secs(30), "the new inventory", || {
        let client = client.clone();
        async move {
            let agents = list_agents(&client).await;
            let inventory: abfleet_core::inventory::Inventory =
                agents[0].inventory.clone()?.try_into().ok()?;
            inventory
                .generations
                .iter()
                .any(|g| g.key == "cuda/sm_90")
                .then_some(())
        }
    })
    .await;
}
