//! The retuning checks across a fleet: hosts with recorded NVIDIA, AMD and Intel GPU
//! inventories plus the real machine. The fork is built for real per backend (nvcc, hipcc),
//! its real artifacts are inspected against the recorded devices, the CPU dispatch sweep runs
//! for real, and a second run shows what changed since the first.

mod support;

use std::path::{Path, PathBuf};

use abfleet_agent::inventory;
use abfleet_coordinator::CoordinatorConfig;
use abfleet_core::finding::{Finding, Severity};
use abfleet_core::report::{GenerationSection, Report};
use abfleet_render::render_markdown;
use support::*;

fn recorded(host: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/probes")
        .join(host)
}

/// The GPU toolchains this test builds with; CI installs them (.ci/run). Missing ones fail
/// the test rather than let it pass without checking anything.
fn require_toolchains() {
    for tool in ["nvcc", "cuobjdump", "hipcc"] {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            found,
            "`{tool}` is not installed: this test builds the subject for real with it; install it as .ci/run does (docs/retuning.md)"
        );
    }
}

fn section<'a>(report: &'a Report, prefix: &str) -> &'a GenerationSection {
    report
        .generations
        .iter()
        .find(|g| g.key.starts_with(prefix))
        .unwrap_or_else(|| {
            panic!(
                "no {prefix} section in {:?}",
                report
                    .generations
                    .iter()
                    .map(|g| &g.key)
                    .collect::<Vec<_>>()
            )
        })
}

fn findings<'a>(section: &'a GenerationSection, check: &str) -> Vec<&'a Finding> {
    section
        .findings
        .iter()
        .filter(|f| f.check == check)
        .collect()
}

fn spec(dir: &Path, name: &str, live_cpu: &str, cuda_args: &str) -> PathBuf {
    let extra = format!(
        r#"
[targets]
backends = ["cpu", "cuda", "hip", "sycl"]
generations = ["cuda/*", "hip/*", "sycl/*", "{live_cpu}"]
fanout = "per-generation"

[backends.cpu]
workload = "float_ssim"

[backends.cuda]
build_args = ["BACKEND=cuda", "CUDA_GENCODE=-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80"{cuda_args}]
artifacts = ["build/libsubject_cuda.o", "build/ptxas.log"]
launch = [{{ kernel = "ssim_rows", grid_blocks = 42, block_threads = 128 }}]

[backends.hip]
build_args = ["BACKEND=hip", "HIP_GFX_TARGETS=gfx90a,gfx1030"]
artifacts = ["build/libsubject_hip.o"]
gfx_targets = ["gfx90a", "gfx1030"]

[backends.sycl]
build_args = []
aot_targets = ["dg2-g10", "bmg-g21"]
subgroup_sizes = [16, 32]
"#
    );
    let text = SpecOptions {
        workloads: &["psnr", "float_ssim"],
        extra: &extra,
        ..SpecOptions::path()
    }
    .render();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_run_shows_findings_per_generation_and_what_changed_since_the_previous_run() {
    require_toolchains();
    let tmp = tempfile::tempdir().unwrap();
    let coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let url = coordinator.url();
    let mut agents = Vec::new();
    let live = inventory::probe_host();
    let live_cpu = live
        .generations
        .iter()
        .find(|g| g.backend == "cpu")
        .unwrap()
        .key
        .clone();
    // The AMD and Intel captures hold only the GPU tool's output; a recorded CPU of a
    // similar host completes each set (the CPU generation is not targeted here). A recorded
    // CPU whose generation key is this host's own would compete with the live agent for the
    // targeted CPU job (an AMD EPYC host has `genoa`'s key), so such a set takes the first
    // of the other captures whose key differs.
    const OTHER_CPUS: [&str; 4] = [
        "graviton3-neoverse-v1",
        "grace-neoverse-v2",
        "xeon6972p-graniterapids",
        "core-ultra9-285-arrowlake",
    ];
    for (host, cpu) in [
        ("h100-sxm5-della-pli", "xeon8480c-sapphirerapids-h100x8"),
        ("mi300x-x4-epyc9474f", "epyc9r14-genoa-m7a"),
        ("intel-flex140-dg2-ocp", "core-i5-12400-alderlake"),
    ] {
        let set = tmp.path().join("probes").join(host);
        let inventory = std::iter::once(cpu)
            .chain(OTHER_CPUS)
            .find_map(|cpu| {
                let _ = std::fs::remove_dir_all(&set);
                std::fs::create_dir_all(&set).unwrap();
                for dir in [host, cpu] {
                    for entry in std::fs::read_dir(recorded(dir)).unwrap() {
                        let entry = entry.unwrap();
                        std::fs::copy(entry.path(), set.join(entry.file_name())).unwrap();
                    }
                }
                let inventory = inventory::from_recorded_probes(&set).unwrap();
                (!inventory.generations.iter().any(|g| g.key == live_cpu)).then_some(inventory)
            })
            .expect("a recorded CPU whose generation key is not this host's");
        agents.push(TestAgent::start_with_inventory(
            &url,
            &tmp.path().join(host),
            inventory,
        ));
    }
    agents.push(TestAgent::start_with_inventory(
        &url,
        &tmp.path().join("live"),
        live,
    ));
    let mut client = coordinator.control().await;
    wait_for_agents(&client, 4).await;

    let (_, first) =
        submit_and_wait(&mut client, &spec(tmp.path(), "first.toml", &live_cpu, "")).await;
    let keys: Vec<&str> = first.generations.iter().map(|g| g.key.as_str()).collect();
    assert_eq!(keys.len(), 4, "{keys:?}");

    // CUDA on a recorded H100 (sm_90), the subject built here for sm_80 and sm_90 + PTX.
    let cuda = section(&first, "cuda/sm_90");
    assert!(cuda.simulated);
    assert!(
        cuda.toolchain["fork"].contains("release 11.8"),
        "the CUDA build is fingerprinted by nvcc: {:?}",
        cuda.toolchain
    );
    let coverage = findings(cuda, "arch_coverage");
    let device = coverage
        .iter()
        .find(|f| f.subject == "device")
        .expect("a device coverage finding");
    assert_eq!(device.severity, Severity::Ok, "{}", device.verdict);
    let floor = findings(cuda, "fleet_floor");
    assert_eq!(floor.len(), 1, "{:?}", cuda.findings);
    assert_eq!(
        floor[0].severity,
        Severity::Warn,
        "sm_80 is older than the fleet's only CUDA device"
    );
    assert!(
        !findings(cuda, "registers").is_empty(),
        "{:?}",
        cuda.findings
    );
    let occupancy = findings(cuda, "occupancy");
    assert!(!occupancy.is_empty(), "{:?}", cuda.skipped_checks);
    assert!(
        occupancy
            .iter()
            .any(|f| f.evidence.get("bound").and_then(|b| b.as_str()) == Some("grid")),
        "the declared 42-block launch on 132 SMs is grid-bound: {occupancy:?}"
    );
    assert!(
        first.cells_of(cuda).next().is_none(),
        "no upstream A/B on a GPU generation"
    );
    assert_eq!(cuda.backend_cells.len(), 2);
    assert!(cuda
        .backend_cells
        .iter()
        .all(|c| c.reason.as_deref().is_some_and(|r| r.contains("recorded"))));

    // HIP on a recorded MI300X (gfx942): built for gfx90a and gfx1030 only.
    let hip = section(&first, "hip/gfx942");
    let hip_coverage = findings(hip, "arch_coverage");
    assert!(
        hip_coverage.iter().any(|f| f.severity == Severity::Fail),
        "{:?}",
        hip.findings
    );

    // SYCL on a recorded Flex 140 (DG2): checked from the spec, nothing compiled.
    let sycl = section(&first, "sycl/");
    assert!(!findings(sycl, "sub_group_size").is_empty(), "{:?}", sycl);

    // The real CPU: the A/B cells and the dispatch sweep, for real.
    let cpu = section(&first, &live_cpu);
    assert!(!cpu.simulated);
    assert_eq!(first.cells_of(cpu).count(), 2, "{:?}", cpu.errors);
    let dispatch = findings(cpu, "dispatch");
    assert!(dispatch.len() >= 2, "{:?}", cpu.findings);
    assert!(dispatch
        .iter()
        .all(|f| f.evidence.contains_key("speedup_vs_baseline")));
    assert!(findings(cpu, "dispatch_parity")
        .iter()
        .all(|f| f.severity == Severity::Ok));
    assert_eq!(first.exit_code, 4, "a fail finding: {:?}", first.errors);

    // The second run: a CUDA build with heavier register use. Findings carry `previous`.
    let (_, second) = submit_and_wait(
        &mut client,
        &spec(
            tmp.path(),
            "second.toml",
            &live_cpu,
            ", \"EXTRA_NVCCFLAGS=-DABFLEET_HEAVY_REGS\"",
        ),
    )
    .await;
    let cuda = section(&second, "cuda/sm_90");
    assert!(cuda.previous_run.is_some());
    let changed: Vec<&Finding> = findings(cuda, "registers")
        .into_iter()
        .filter(|f| {
            f.previous
                .as_ref()
                .is_some_and(|p| p.changes.iter().any(|c| c.starts_with("registers:")))
        })
        .collect();
    assert!(!changed.is_empty(), "{:#?}", cuda.findings);
    let hip = section(&second, "hip/gfx942");
    assert!(hip
        .findings
        .iter()
        .all(|f| f.previous.as_ref().is_some_and(|p| p.changes.is_empty())));
    let markdown = render_markdown(&second);
    assert!(markdown.contains("Retuning findings"), "{markdown}");
    assert!(markdown.contains("registers: "), "{markdown}");
    assert!(markdown.contains("Checks not run here") || markdown.contains("skipped:"));
    for agent in agents {
        agent.stop().await;
    }
}

/// The sweep on this machine against two broken builds of the fork: one without its vector
/// paths (the CPU has AVX2, the build does not), one whose AVX2 path is slower than scalar.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dispatch_sweep_finds_a_missing_path_and_a_slower_level_for_real() {
    let avx2_here = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap()
        .split_whitespace()
        .any(|flag| flag == "avx2");
    if !avx2_here || std::env::consts::ARCH != "x86_64" {
        panic!("this test needs an x86-64 CPU with AVX2 (the CI machines have one)");
    }
    let tmp = tempfile::tempdir().unwrap();
    let coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let _agent = TestAgent::start(&coordinator.url(), &tmp.path().join("live"));
    let mut client = coordinator.control().await;
    let run = |fork_build: &'static str, name: &'static str| {
        let text = SpecOptions {
            workloads: &["float_ssim"],
            fork_build,
            frames: 12,
            extra: "\n[backends.cpu]\nlevels = [{ name = \"scalar\", cpumask = \"63\" }, { name = \"avx2\", cpumask = \"48\" }]\n",
            ..SpecOptions::path()
        }
        .render();
        assert!(
            text.contains("width = 96\nheight = 64"),
            "the tiny fixture moved"
        );
        let text = text.replace("width = 96\nheight = 64", "width = 320\nheight = 180");
        let path = tmp.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let (_, scalar_only) = submit_and_wait(
        &mut client,
        &run(
            "commands = [[\"make\", \"-s\", \"VARIANT=fork\", \"SIMD=none\"]]",
            "none.toml",
        ),
    )
    .await;
    let section = &scalar_only.generations[0];
    let missing = findings(section, "isa_coverage")
        .into_iter()
        .find(|f| f.subject == "avx2")
        .unwrap_or_else(|| panic!("{:?} {:?}", section.findings, section.skipped_checks));
    assert_eq!(missing.severity, Severity::Warn, "{}", missing.verdict);
    assert!(
        missing.verdict.contains("no avx2 path"),
        "{}",
        missing.verdict
    );

    let (_, slow) = submit_and_wait(
        &mut client,
        &run(
            "commands = [[\"make\", \"-s\", \"VARIANT=fork\", \"EXTRA_CFLAGS=-DABFLEET_SLOW_AVX2\"]]",
            "slow.toml",
        ),
    )
    .await;
    let section = &slow.generations[0];
    let avx2 = findings(section, "dispatch")
        .into_iter()
        .find(|f| f.subject == "avx2")
        .unwrap_or_else(|| panic!("{:?}", section.findings));
    assert_eq!(avx2.severity, Severity::Warn, "{}", avx2.verdict);
    assert!(
        avx2.verdict.contains("slower than the level below"),
        "{}",
        avx2.verdict
    );
    assert!(findings(section, "dispatch_parity")
        .iter()
        .all(|f| f.severity == Severity::Ok));
}
