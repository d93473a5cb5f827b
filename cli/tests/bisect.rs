//! `abfleet bisect` through a real coordinator and agent: the demo subject's fork gains
//! eight commits after the good one, and the fifth plants a psnr slowdown (each plane's MSE
//! computed 3000 times, same scores). The bisect confirms the regression, names the fifth
//! commit in three more steps, and writes bisect.md / bisect.json; after the first step the
//! good commit's build comes from the agent's cache. A no-op commit whose timing is noise
//! (pairs too few for any verdict but `unsure`) is retried with twice the pairs, from cached
//! builds, then reported undecidable, never guessed. `abfleet bisect RUN` (cli/tests/history.rs)
//! takes the commits from a run flagged against its previous comparable run.

mod support;

use std::process::{Command, Output};

use abfleet_coordinator::CoordinatorConfig;
use abfleet_core::bisect::{Bisection, Decision};
use abfleet_core::events::BuildStatus;
use support::*;

fn abfleet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_planted_slowdown_in_the_fifth_of_eight_commits_is_found() {
    let tmp = tempfile::tempdir().unwrap();
    let repos = make_repos(tmp.path());
    let good = repos.fork_commit.clone();
    let commits = commit_a_slowdown_fifth_of_eight(&repos);
    let bad = commits[7].clone();

    let coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let _agent = TestAgent::start(&coordinator.url(), &tmp.path().join("agent"));
    let client = coordinator.control().await;
    wait_for_agents(&client, 1).await;

    let mut options = SpecOptions::git(&repos);
    options.fork_source = format!("git = \"{}\"\nrev = \"{bad}\"", repos.fork.display());
    options.workloads = &["psnr", "float_ssim"];
    options.runs = 5;
    options.max_runs = Some(10);
    let spec = options.write(tmp.path(), "spec.toml");
    let out = tmp.path().join("bisect-out");
    let url = coordinator.url();
    let run = tokio::task::spawn_blocking(move || {
        abfleet(&[
            "bisect",
            "--spec",
            spec.to_str().unwrap(),
            "--good",
            &good,
            "--bad",
            &bad,
            "--workload",
            "psnr",
            "--fixture",
            "tiny",
            "--coordinator",
            &url,
            "--out",
            out.to_str().unwrap(),
        ])
    })
    .await
    .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", output_text(&run));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains(&format!(
            "**First bad commit: `{}`** — fork: change 5",
            commits[4]
        )),
        "{}",
        output_text(&run)
    );
    let bisection: Bisection = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("bisect-out/bisect.json")).unwrap(),
    )
    .unwrap();
    assert!(bisection.confirmed);
    assert_eq!(
        bisection.commits.len(),
        9,
        "the good commit and the eight after it"
    );
    assert_eq!(bisection.first_bad().unwrap().id, commits[4]);
    // Confirming the bad commit, then at most three halvings of eight commits.
    assert!(bisection.steps.len() <= 4, "{:?}", bisection.steps);
    for step in &bisection.steps {
        let index = commits.iter().position(|c| *c == step.commit.id).unwrap();
        let expected = if index >= 4 {
            Decision::Bad
        } else {
            Decision::Good
        };
        assert_eq!(step.decision, expected, "{step:?}");
        // The good commit is the baseline side of every step: built once, then cached.
        let first = step.run_id == bisection.steps[0].run_id;
        assert_eq!(
            step.good_build,
            Some(if first {
                BuildStatus::Built
            } else {
                BuildStatus::Cached
            }),
            "{step:?}"
        );
        assert!(step.speedup_ci95.is_some() && step.pairs >= 5, "{step:?}");
        let step_report = tmp
            .path()
            .join("bisect-out/steps")
            .join(&step.run_id)
            .join("report.json");
        assert!(
            step_report.is_file(),
            "{} is missing",
            step_report.display()
        );
    }
    let bisect_md = std::fs::read_to_string(tmp.path().join("bisect-out/bisect.md")).unwrap();
    assert!(bisect_md.contains("| Step | Commit | Subject |"));
    assert!(bisect_md.contains("| cached, "), "{bisect_md}");

    // Usage: without a RUN, the flags it needs are named.
    let missing = abfleet(&[
        "bisect",
        "--coordinator",
        &coordinator.url(),
        "--workload",
        "psnr",
    ]);
    assert_eq!(missing.status.code(), Some(2), "{}", output_text(&missing));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("--good, --bad"),
        "{}",
        output_text(&missing)
    );
}

/// A commit whose timing is noise against the good one (the subject's ABFLEET_ALTERNATE_MS:
/// the good build sleeps on its even runs, the candidate on its odd ones, so the pairs'
/// speedups alternate far above and far below 1 and no number of pairs gives a verdict but
/// `unsure`): the step is taken again with twice the pairs, from the builds the first
/// attempt cached, then reported undecidable; the bisect names no commit and exits 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_noise_level_commit_is_retried_with_more_pairs_then_reported_undecidable() {
    let tmp = tempfile::tempdir().unwrap();
    let repos = make_repos(tmp.path());
    let good = commit_fork_flags(
        &repos.fork,
        "-DABFLEET_ALTERNATE_MS=40 -DABFLEET_ALTERNATE_PHASE=0",
        "fork: sleep on even runs",
    );
    let noise = commit_fork_flags(
        &repos.fork,
        "-DABFLEET_ALTERNATE_MS=40 -DABFLEET_ALTERNATE_PHASE=1",
        "fork: sleep on odd runs",
    );

    let coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let _agent = TestAgent::start(&coordinator.url(), &tmp.path().join("agent"));
    let client = coordinator.control().await;
    wait_for_agents(&client, 1).await;

    let mut options = SpecOptions::git(&repos);
    options.fork_source = format!("git = \"{}\"\nrev = \"{noise}\"", repos.fork.display());
    options.workloads = &["psnr"];
    options.runs = 3;
    options.max_runs = Some(3);
    let spec = options.write(tmp.path(), "spec.toml");
    let out = tmp.path().join("bisect-out");
    let url = coordinator.url();
    let out_arg = out.clone();
    let (good_arg, noise_arg) = (good.clone(), noise.clone());
    let run = tokio::task::spawn_blocking(move || {
        abfleet(&[
            "bisect",
            "--spec",
            spec.to_str().unwrap(),
            "--good",
            &good_arg,
            "--bad",
            &noise_arg,
            "--workload",
            "psnr",
            "--fixture",
            "tiny",
            "--coordinator",
            &url,
            "--out",
            out_arg.to_str().unwrap(),
        ])
    })
    .await
    .unwrap();
    assert_eq!(run.status.code(), Some(3), "{}", output_text(&run));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains("**No first bad commit named**: cannot tell whether")
            && stdout.contains("undecidable"),
        "{}",
        output_text(&run)
    );
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("was unsure; again with up to 6 pairs"),
        "{}",
        output_text(&run)
    );
    let bisection: Bisection =
        serde_json::from_str(&std::fs::read_to_string(out.join("bisect.json")).unwrap()).unwrap();
    assert!(!bisection.confirmed);
    assert!(bisection.first_bad().is_none());
    assert_eq!(bisection.steps.len(), 1, "{:?}", bisection.steps);
    let step = &bisection.steps[0];
    assert_eq!(step.commit.id, noise);
    assert_eq!(step.decision, Decision::Undecidable);
    assert!(step.retried);
    assert_eq!(step.verdict, Some(abfleet_core::paired::Verdict::Unsure));
    assert_eq!(step.pairs, 6, "twice the pairs: {step:?}");
    // The retry rebuilt nothing: both commits came from the first attempt's builds.
    assert_eq!(step.good_build, Some(BuildStatus::Cached), "{step:?}");
    assert_eq!(step.candidate_build, Some(BuildStatus::Cached), "{step:?}");
    assert!(stdout.contains(" (retried) | undecidable"), "{stdout}");
}
