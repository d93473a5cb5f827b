//! History and regression flags across three real runs of one spec on this host's CPU
//! generation: the fork gains a planted parity drift (under the gate) in its second commit
//! and a planted psnr slowdown in its third. Each report compares itself with the previous
//! comparable run and flags what changed; `abfleet history` shows the three runs, and so do
//! the web view's `/history` page and `/api/history`.

mod support;

use std::path::Path;
use std::process::Command;

use abfleet_coordinator::CoordinatorConfig;
use abfleet_core::report::history::{FlagKind, HistoryPoint};
use abfleet_core::report::{render_junit, render_markdown, Report};
use support::*;

/// Commits `EXTRA_CFLAGS ?= FLAGS` into the fork's Makefile; returns the new commit.
fn commit_fork_flags(fork: &Path, flags: &str, message: &str) -> String {
    let makefile = std::fs::read_to_string(fork.join("Makefile")).unwrap();
    let line = makefile
        .lines()
        .find(|l| l.starts_with("EXTRA_CFLAGS ?="))
        .unwrap()
        .to_string();
    std::fs::write(
        fork.join("Makefile"),
        makefile.replace(&line, &format!("EXTRA_CFLAGS ?= {flags}")),
    )
    .unwrap();
    git(fork, &["commit", "-q", "-am", message]);
    git(fork, &["rev-parse", "HEAD"])
}

fn spec_at(dir: &Path, repos: &Repos, commit: &str, file: &str) -> std::path::PathBuf {
    let mut options = SpecOptions::git(repos);
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
        &spec_at(tmp.path(), &repos, &repos.fork_commit, "1.toml"),
    )
    .await;
    assert_eq!(first.exit_code, 0, "{}", render_markdown(&first));
    assert!(
        first.generations[0].since_previous.is_none(),
        "the first run has nothing to compare with"
    );
    let generation = first.generations[0].key.clone();
    assert!(generation.starts_with("cpu/"), "{generation}");

    // Run 2: psnr drifts by 3e-6 dB, under the 1e-5 gate: parity still passes, the ratchet flags it.
    let drift = commit_fork_flags(&repos.fork, "-DABFLEET_PSNR_NUDGE=3e-6", "fork: psnr drift");
    let (second_id, second) =
        submit_and_wait(&mut client, &spec_at(tmp.path(), &repos, &drift, "2.toml")).await;
    assert_eq!(
        second.exit_code,
        0,
        "under the gate: {}",
        render_markdown(&second)
    );
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

    // Run 3: the same drift, and psnr computes each plane's MSE 3000 times (same scores).
    let slow = commit_fork_flags(
        &repos.fork,
        "-DABFLEET_PSNR_NUDGE=3e-6 -DABFLEET_PSNR_REPEAT=3000",
        "fork: psnr slowdown",
    );
    let (third_id, third) =
        submit_and_wait(&mut client, &spec_at(tmp.path(), &repos, &slow, "3.toml")).await;
    let since = third.generations[0].since_previous.as_ref().unwrap();
    assert_eq!(since.run_id, second_id, "compared with the run just before");
    let psnr = flags_of(&third, "psnr");
    assert!(
        psnr.contains(&FlagKind::SpeedupShrank) && psnr.contains(&FlagKind::ForkSlower),
        "{psnr:?}\n{}",
        render_markdown(&third)
    );
    assert!(
        !psnr.contains(&FlagKind::ParityGrowth),
        "the drift did not grow between runs 2 and 3: {psnr:?}"
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

    let missing = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(["history", "--generation", "cpu/none", "--workload", "psnr"])
        .args(["--coordinator", &coordinator.url()])
        .output()
        .unwrap();
    assert!(missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stdout).contains("No finished run"));
}
