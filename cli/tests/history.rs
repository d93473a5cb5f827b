//! History and regression flags across three real runs of one spec on this host's CPU
//! generation: the fork gains a planted parity drift (under the gate) in its second commit
//! and a planted psnr slowdown in its third, whose run also pins a new upstream tag. Each
//! report compares itself with the previous comparable run and flags what changed; the
//! drift fails parity by the ratchet (against the last accepted delta, also in the third
//! run); `abfleet history` shows the three runs, and so do the web view's `/history` page and
//! `/api/history`; a bisect of the third run pins its steps to the run's hardware, stays out
//! of the history and is recorded with the run. A second test bumps the NVIDIA driver of a
//! recorded H100 between two runs: the second still compares with the first.

mod support;

use std::path::Path;
use std::process::Command;

use abfleet_coordinator::CoordinatorConfig;
use abfleet_core::parity::ParityRule;
use abfleet_core::report::history::{section_hardware, FlagKind, HistoryPoint};
use abfleet_core::report::Report;
use abfleet_render::{render_junit, render_markdown};
use support::*;

fn spec_at(
    dir: &Path,
    repos: &Repos,
    commit: &str,
    upstream_tag: &str,
    file: &str,
) -> std::path::PathBuf {
    let mut options = SpecOptions::git(repos);
    options.upstream_source = format!(
        "git = \"{}\"\nrev = \"{upstream_tag}\"",
        repos.upstream.display()
    );
    options.fork_source = format!("git = \"{}\"\nrev = \"{commit}\"", repos.fork.display());
    options.workloads = &["psnr", "float_ssim"];
    options.runs = 5;
    options.extra = "\n[targets]\nbackends = [\"cpu\"]\ngenerations = [\"cpu/*\"]\n";
    options.write(dir, file)
}

fn flags_of(report: &Report, workload: &str) -> Vec<FlagKind> {
    let section = &report.generations[0];
    let since = section.since_previous.as_ref().unwrap_or_else(|| {
        panic!(
            "no comparison with the previous run:\n{}",
            render_markdown(report)
        )
    });
    since
        .flags
        .iter()
        .filter(|f| f.workload == workload)
        .map(|f| f.kind)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_runs_flag_a_planted_parity_growth_then_a_planted_slowdown_and_history_shows_them() {
    let tmp = tempfile::tempdir().unwrap();
    let repos = make_repos(tmp.path());
    let data_dir = tmp.path().join("data");
    let coordinator =
        TestCoordinator::start_with_web(&data_dir, CoordinatorConfig::default()).await;
    let _agent = TestAgent::start(&coordinator.url(), &tmp.path().join("agent"));
    let mut client = coordinator.control().await;
    wait_for_agents(&client, 1).await;

    // Run 1: the fork as it is.
    let (_, first) = submit_and_wait(
        &mut client,
        &spec_at(tmp.path(), &repos, &repos.fork_commit, "v1.0.0", "1.toml"),
    )
    .await;
    assert_eq!(first.exit_code, 0, "{}", render_markdown(&first));
    assert!(
        first.generations[0].since_previous.is_none(),
        "the first run has nothing to compare with"
    );
    let generation = first.generations[0].key.clone();
    assert!(generation.starts_with("cpu/"), "{generation}");

    // Run 2: psnr drifts by 3e-6 dB, under the 1e-5 gate: the ratchet (the accepted delta of
    // run 1 plus half a printed unit) fails it, with both values.
    let drift = commit_fork_flags(&repos.fork, "-DABFLEET_PSNR_NUDGE=3e-6", "fork: psnr drift");
    let (second_id, second) = submit_and_wait(
        &mut client,
        &spec_at(tmp.path(), &repos, &drift, "v1.0.0", "2.toml"),
    )
    .await;
    let since = second.generations[0].since_previous.as_ref().unwrap();
    assert_eq!(since.run_id, first.run_id);
    assert!(
        since
            .changes
            .iter()
            .any(|c| c.starts_with("fork ") && c.contains(&drift[..12])),
        "{:?}",
        since.changes
    );
    assert!(
        !since.changes.iter().any(|c| c.starts_with("spec ")),
        "only the fork's rev moved, the spec measures the same: {:?}",
        since.changes
    );
    assert!(
        flags_of(&second, "psnr").contains(&FlagKind::ParityGrowth),
        "{since:#?}\n{}",
        render_markdown(&second)
    );
    assert!(!flags_of(&second, "float_ssim").contains(&FlagKind::ParityGrowth));
    let markdown = render_markdown(&second);
    assert!(
        markdown.contains("**regression** (parity_growth) `tiny` / `psnr`"),
        "{markdown}"
    );
    assert_eq!(
        second.exit_code, 1,
        "under the gate, but past the ratchet: a parity failure (ADR-1228): {markdown}"
    );
    let psnr_cell = |report: &Report| {
        report
            .cells
            .iter()
            .find(|c| c.workload == "psnr")
            .unwrap()
            .clone()
    };
    let cell = psnr_cell(&second);
    assert_eq!(cell.printed_decimals, Some(6), "the subject prints %.6f");
    let ratchet: Vec<_> = cell
        .parity_failures
        .iter()
        .filter(|f| f.rule == ParityRule::Ratchet)
        .collect();
    // psnr_y, psnr_cb and psnr_cr all moved by the nudge.
    assert!(
        ratchet.iter().any(|f| f.metric == "psnr_y") && ratchet.len() == 3,
        "{:?}",
        cell.parity_failures
    );
    for failure in &ratchet {
        assert!(
            failure.delta > 2e-6 && (failure.allowed - 0.5e-6).abs() < 1e-12,
            "grew from 0 to about 3e-6, allowed 0 + 5e-7: {failure:?}"
        );
        assert!(
            failure.message.contains(&format!(
                "grew from 0 (accepted in run {}) to 3.00e-6",
                first.run_id
            )),
            "{}",
            failure.message
        );
    }
    assert!(
        markdown.contains("pooled-mean delta grew past the previous accepted one"),
        "{markdown}"
    );

    // Run 3: the same drift, and psnr computes each plane's MSE 3000 times (same scores);
    // upstream gained a release tag (no code change) and the run pins it: the baseline moved.
    let slow = commit_fork_flags(
        &repos.fork,
        "-DABFLEET_PSNR_NUDGE=3e-6 -DABFLEET_PSNR_REPEAT=3000",
        "fork: psnr slowdown",
    );
    std::fs::write(repos.upstream.join("NEWS"), "v1.1.0: documentation only\n").unwrap();
    git(&repos.upstream, &["commit", "-q", "-am", "upstream v1.1.0"]);
    git(&repos.upstream, &["tag", "v1.1.0"]);
    let new_tag = git(&repos.upstream, &["rev-parse", "v1.1.0^{commit}"]);
    let (third_id, third) = submit_and_wait(
        &mut client,
        &spec_at(tmp.path(), &repos, &slow, "v1.1.0", "3.toml"),
    )
    .await;
    let since = third.generations[0].since_previous.as_ref().unwrap();
    assert_eq!(since.run_id, second_id, "compared with the run just before");
    let psnr = flags_of(&third, "psnr");
    assert!(
        psnr.contains(&FlagKind::SpeedupShrank) && psnr.contains(&FlagKind::ForkSlower),
        "{psnr:?}\n{}",
        render_markdown(&third)
    );
    // Run 2's delta was never accepted: the ratchet still holds run 1's, so the drift is
    // still growth, against run 1.
    let growth = since
        .flags
        .iter()
        .find(|f| f.kind == FlagKind::ParityGrowth && f.workload == "psnr")
        .unwrap_or_else(|| panic!("{since:#?}"));
    assert_eq!(growth.then_run.as_deref(), Some(first.run_id.as_str()));
    assert_eq!(third.exit_code, 1);
    let hardware = section_hardware(&third.generations[0]);
    let moved = since
        .baseline_moved
        .as_ref()
        .expect("the upstream pin moved");
    assert_eq!(
        (moved.from.as_str(), moved.to.as_str()),
        ("v1.0.0", "v1.1.0")
    );
    assert_eq!(moved.to_commit.as_deref(), Some(new_tag.as_str()));
    let markdown = render_markdown(&third);
    assert!(
        markdown.contains("- **baseline moved**: upstream `v1.0.0` → `v1.1.0`"),
        "{markdown}"
    );
    assert!(
        markdown.contains(&format!(
            "- changed: upstream `v1.0.0` ({}) → `v1.1.0` ({})",
            &repos.upstream_tag_commit[..12],
            &new_tag[..12]
        )),
        "{markdown}"
    );
    assert!(
        !since.changes.iter().any(|c| c.starts_with("spec ")),
        "{:?}",
        since.changes
    );
    let junit = render_junit(&third);
    assert!(
        junit.contains(&format!("name=\"since previous run {second_id}\""))
            && junit.contains("<failure type=\"regression\""),
        "{junit}"
    );

    // `abfleet history`, from the coordinator and from the data dir.
    let history = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .arg("history")
            .args(["--generation", &generation, "--workload", "psnr"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let json = history(&["--coordinator", &coordinator.url(), "--format", "json"]);
    let points: Vec<HistoryPoint> = serde_json::from_str(&json).unwrap();
    let runs: Vec<&str> = points.iter().map(|p| p.run_id.as_str()).collect();
    assert_eq!(
        runs,
        [first.run_id.as_str(), &second_id, &third_id],
        "{json}"
    );
    assert!(points[0].flags.is_empty());
    assert!(points[1]
        .flags
        .iter()
        .any(|f| f.kind == FlagKind::ParityGrowth
            && f.metric.as_deref().is_some_and(|m| m.starts_with("psnr"))));
    assert!(points[2]
        .flags
        .iter()
        .any(|f| f.kind == FlagKind::SpeedupShrank));
    assert!(points[2].cell.fork_median > points[1].cell.fork_median);

    let table = history(&["--coordinator", &coordinator.url()]);
    assert!(
        table.contains(&format!("# History of `psnr` on `{generation}`")),
        "{table}"
    );
    for run in &runs {
        assert!(table.contains(&format!("`{}`", &run[..8])), "{table}");
    }
    assert!(table.contains("parity_growth"), "{table}");

    // The web view: the same points as JSON, and a page charting them.
    let web = coordinator.web.unwrap();
    let get = |path: String| async move {
        tokio::task::spawn_blocking(move || http_request(web, "GET", &path, &[], b""))
            .await
            .unwrap()
    };
    let encoded = generation.replace('/', "%2F");
    let (status, body) = get(format!("/api/history?generation={encoded}&workload=psnr")).await;
    assert_eq!(status, 200, "{body}");
    let api: serde_json::Value = serde_json::from_str(&body).unwrap();
    let api_runs: Vec<&str> = api["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(api_runs, runs, "{body}");
    let (status, body) = get("/api/history?workload=psnr".into()).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("generation=KEY"), "{body}");
    let (status, page) = get(format!("/history?generation={encoded}&workload=psnr")).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(r#"<figure class="history-speedup" data-points="3" data-flagged="2""#),
        "runs 2 and 3 are flagged: {page}"
    );
    assert!(page.contains(r#"<figure class="history-fork-median" data-points="3""#));
    for run in &runs {
        assert!(page.contains(&format!("data-run-id=\"{run}\"")), "{page}");
    }
    // A finished run's page links to the history of each of its workloads.
    let (_, run_page) = get(format!("/runs/{third_id}")).await;
    assert!(
        run_page.contains(&format!(
            "href=\"/history?generation={encoded}&amp;workload=psnr\""
        )),
        "{run_page}"
    );

    // `abfleet bisect RUN`: the commits come from run 3's flag against run 2.
    let out = tmp.path().join("bisect");
    let url = coordinator.url();
    let third = third_id.clone();
    let out_dir = out.clone();
    let bisect = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args(["bisect", &third, "--coordinator", &url, "--out"])
            .arg(&out_dir)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let said = String::from_utf8_lossy(&bisect.stdout).into_owned();
    assert!(
        bisect.status.success()
            && said.contains(&format!(
                "**First bad commit: `{slow}`** — fork: psnr slowdown"
            )),
        "{said}\n{}",
        String::from_utf8_lossy(&bisect.stderr)
    );
    assert!(
        said.contains(&format!(
            "## Bisect of `psnr` on fixture `tiny`, generation `{generation}`"
        )),
        "{said}"
    );
    // Each step ran on the flagged run's hardware, as a `bisect` run.
    let bisection: abfleet_core::bisect::Bisection =
        serde_json::from_str(&std::fs::read_to_string(out.join("bisect.json")).unwrap()).unwrap();
    assert!(hardware.is_some());
    for step in &bisection.steps {
        let report: Report = Report::from_json(
            &std::fs::read_to_string(out.join("steps").join(&step.run_id).join("report.json"))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(report.trigger, "bisect");
        assert_eq!(section_hardware(&report.generations[0]), hardware);
    }
    // The bisect is kept with run 3: its report shows it.
    let report_md = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(["report", &third_id, "--coordinator", &coordinator.url()])
        .output()
        .unwrap();
    let report_md = String::from_utf8_lossy(&report_md.stdout);
    assert!(
        report_md.contains(&format!(
            "## Bisect of `psnr` on fixture `tiny`, generation `{generation}`"
        )) && report_md.contains(&format!("**First bad commit: `{slow}`**")),
        "{report_md}"
    );
    // The steps are neither history points nor anyone's previous run.
    let json = history(&["--coordinator", &coordinator.url(), "--format", "json"]);
    let after: Vec<HistoryPoint> = serde_json::from_str(&json).unwrap();
    let after_runs: Vec<&str> = after.iter().map(|p| p.run_id.as_str()).collect();
    assert_eq!(after_runs, runs, "no bisect step among them: {json}");

    // `bisect` is no reason a person gives.
    let refused = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(["trigger", "--reason", "bisect", "--note", "x"])
        .args(["--coordinator", &coordinator.url()])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("invalid value 'bisect'"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    let missing = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(["history", "--generation", "cpu/none", "--workload", "psnr"])
        .args(["--coordinator", &coordinator.url()])
        .output()
        .unwrap();
    assert!(missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stdout).contains("No finished run"));
}

const PROBES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/probes");

/// A recorded H100 (its `nvidia-smi -q`) and a recorded Genoa CPU, with the NVIDIA driver
/// line as `driver` says.
fn h100_probes(dir: &Path, driver: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let smi =
        std::fs::read_to_string(Path::new(PROBES).join("h100-sxm5-della-pli/nvidia-smi-q.txt"))
            .unwrap();
    let recorded = "Driver Version                            : 545.23.08";
    assert!(smi.contains(recorded), "the capture names its driver");
    std::fs::write(
        dir.join("nvidia-smi-q.txt"),
        smi.replace(
            recorded,
            &format!("Driver Version                            : {driver}"),
        ),
    )
    .unwrap();
    std::fs::copy(
        Path::new(PROBES).join("epyc9r14-genoa-m7a/cpuinfo.txt"),
        dir.join("cpuinfo.txt"),
    )
    .unwrap();
    dir.to_path_buf()
}

/// A driver bump is a toolchain change, not another history: the agent of a recorded H100
/// comes back with a newer NVIDIA driver (its silicon id moves, its hardware id does not),
/// and the next run of the spec on `cuda/sm_90` is compared with the one before the bump,
/// naming the driver among what changed, its cells matched.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_driver_bump_keeps_the_history_and_is_named_among_the_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let mut client = coordinator.control().await;
    let work_dir = tmp.path().join("agent");
    let spec = SpecOptions {
        workloads: &["psnr", "float_ssim"],
        extra: "\n[targets]\nbackends = [\"cuda\"]\ngenerations = [\"cuda/*\"]\n\n[backends.cuda]\nbuild_args = []\ntoolchain = [\"cc\", \"--version\"]\n",
        ..SpecOptions::path()
    }
    .write(tmp.path(), "cuda.toml");

    let mut reports = Vec::new();
    for (n, driver) in ["545.23.08", "550.54.15"].into_iter().enumerate() {
        let probes = h100_probes(&tmp.path().join(format!("probes-{n}")), driver);
        let agent = TestAgent::start_with_inventory(
            &coordinator.url(),
            &work_dir,
            abfleet_agent::inventory::from_recorded_probes(&probes).unwrap(),
        );
        // Registered with this driver (a restarted agent re-registers under its id).
        let registered = client.clone();
        wait_until(
            std::time::Duration::from_secs(30),
            "the agent to register with the driver",
            || {
                let client = registered.clone();
                async move {
                    list_agents(&client)
                        .await
                        .iter()
                        .flat_map(|a| a.inventory.iter().flat_map(|i| i.generations.iter()))
                        .any(|g| g.description.contains(driver))
                        .then_some(())
                }
            },
        )
        .await;
        let (_, report) = submit_and_wait(&mut client, &spec).await;
        agent.stop().await;
        reports.push(report);
    }
    let (before, after) = (&reports[0], &reports[1]);
    let section = |report: &Report| {
        report
            .generations
            .iter()
            .find(|g| g.key == "cuda/sm_90")
            .unwrap_or_else(|| panic!("no cuda/sm_90 section:\n{}", render_markdown(report)))
            .clone()
    };
    let (then, now) = (section(before), section(after));
    let generation = |s: &abfleet_core::report::GenerationSection| {
        s.host
            .as_ref()
            .unwrap()
            .generations
            .iter()
            .find(|g| g.key == "cuda/sm_90")
            .unwrap()
            .clone()
    };
    assert_ne!(generation(&then).silicon_id, generation(&now).silicon_id);
    assert_eq!(generation(&then).hardware_id, generation(&now).hardware_id);
    assert!(
        then.since_previous.is_none(),
        "the first run has nothing to compare with"
    );
    let since = now.since_previous.as_ref().unwrap_or_else(|| {
        panic!(
            "the run after the driver bump lost its history:\n{}",
            render_markdown(after)
        )
    });
    assert_eq!(since.run_id, before.run_id);
    assert!(
        since
            .changes
            .contains(&"host toolchain `nvidia-driver`: `545.23.08` → `550.54.15`".to_string()),
        "{:?}",
        since.changes
    );
    // The GPU generation's cells are the fork's own (`--backend cuda`, skipped on a recorded
    // device): matched with the earlier run's, one per workload.
    assert_eq!(now.backend_cells.len(), 2, "{:?}", now.backend_cells);
    assert_eq!(since.matched_cells, 2, "{since:#?}");
    let markdown = render_markdown(after);
    assert!(
        markdown.contains("- changed: host toolchain `nvidia-driver`: `545.23.08` → `550.54.15`"),
        "{markdown}"
    );
}
