//! Issue 25, "Disks fill": the agent's cache stays under its budget through a bisect. A real
//! `abfleet agent` process with `--max-cache-bytes` room for one job's needs (the mirror, the
//! fixtures, the good build and one candidate's, with half a build to spare) but not for the
//! bisect's five builds runs `abfleet bisect` over eight commits; every size it reports after
//! a job is within the budget, the bisect still names the fifth commit, the good build (used
//! by every step) is never evicted, and the confirming step's build, evicted meanwhile, is
//! built again when a later run needs it. `abfleet agent gc` then evicts by hand, refusing
//! while the agent holds the work dir.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abfleet_agent::cache::{self, EntryKind};
use abfleet_coordinator::CoordinatorConfig;
use abfleet_core::bisect::Bisection;
use abfleet_core::events::{BuildStatus, Side};
use abfleet_core::spec::{BuildRecipe, JobSpec, SourceSpec};
use support::*;

/// What the agent reported of its cache (size, budget), each change as polled.
type Reported = Arc<Mutex<Vec<(Option<u64>, Option<u64>)>>>;

fn abfleet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(args)
        .output()
        .unwrap()
}

/// The bytes of each kind of cache entry one step of the bisect holds, measured by doing
/// what the agent does (the fork's mirror, the good commit built with the fork's recipe, the
/// spec's fixtures) in a scratch work dir.
async fn one_step_needs(scratch: &Path, spec: &JobSpec, good: &str) -> (u64, u64, u64) {
    let url = match &spec.fork.source {
        SourceSpec::Git { url, .. } => url.clone(),
        other => panic!("a git fork: {other:?}"),
    };
    let source = abfleet_agent::source::resolve(
        &SourceSpec::Git {
            url,
            rev: good.to_string(),
        },
        &scratch.join("git"),
        "h",
    )
    .unwrap();
    let (_cancel, mut cancelled) = tokio::sync::watch::channel(false);
    let (step, _) = tokio::sync::watch::channel(String::new());
    let built = abfleet_agent::build::build_side(
        Side::Fork,
        &source,
        &spec.fork.build,
        &scratch.join("builds"),
        Duration::from_secs(300),
        &mut cancelled,
        &step,
    )
    .await;
    assert_eq!(
        built.record.status,
        BuildStatus::Built,
        "{:?}",
        built.record
    );
    abfleet_agent::fixtures::prepare(
        &spec.fixtures[0],
        &scratch.join("fixtures"),
        &scratch.join("job-fixtures"),
        "h",
    )
    .unwrap();
    let entries = cache::scan(scratch).unwrap();
    let bytes = |kind| -> u64 {
        entries
            .iter()
            .filter(|e| e.kind == kind)
            .map(|e| e.bytes)
            .sum()
    };
    (
        bytes(EntryKind::Mirror),
        bytes(EntryKind::Build),
        bytes(EntryKind::Fixture),
    )
}

/// The cache's size once the agent's pass after its job is over: what the work dir holds
/// then is what it reports (the pass runs after the job's `done`, so it may still be
/// evicting when the run's report is ready; scans during its renames are retried).
async fn reported_pass(work_dir: &Path, reported: &Reported, budget: u64) -> u64 {
    wait_until(
        Duration::from_secs(60),
        "the agent to report the size its work dir holds",
        || {
            let now = cache::scan(work_dir).ok().map(|e| cache::total_bytes(&e));
            let last = reported.lock().unwrap().last().copied();
            async move { now.filter(|now| last == Some((Some(*now), Some(budget)))) }
        },
    )
    .await
}

/// The build directory a commit of the fork gets with `recipe`, as the agent names it.
fn build_dir(work_dir: &Path, commit: &str, recipe: &BuildRecipe) -> std::path::PathBuf {
    let toolchain = abfleet_agent::build::toolchain_fingerprint(recipe);
    let key = abfleet_agent::build::cache_key(commit, recipe, &toolchain);
    work_dir.join("builds").join(&key[..16])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_agents_cache_stays_under_its_budget_through_a_bisect() {
    let tmp = tempfile::tempdir().unwrap();
    let repos = make_repos(tmp.path());
    let good = repos.fork_commit.clone();
    let commits = commit_a_slowdown_fifth_of_eight(&repos);
    let bad = commits[7].clone();
    let mut options = SpecOptions::git(&repos);
    options.fork_source = format!("git = \"{}\"\nrev = \"{bad}\"", repos.fork.display());
    options.workloads = &["psnr"];
    options.runs = 5;
    options.max_runs = Some(10);
    let spec_path = options.write(tmp.path(), "spec.toml");
    let spec = JobSpec::load(&spec_path).unwrap();

    let (mirror, build, fixtures) = one_step_needs(&tmp.path().join("measure"), &spec, &good).await;
    assert!(mirror > 0 && build > 0 && fixtures > 0);
    // One step holds the mirror, the fixtures and two builds (good and candidate); a third
    // build does not fit, so each step's pass evicts the previous candidate.
    let budget = mirror + fixtures + 2 * build + build / 2;
    assert!(
        budget < mirror + fixtures + 5 * build,
        "the bisect's builds together exceed it"
    );

    let config = CoordinatorConfig {
        heartbeat_interval: Duration::from_millis(200),
        ..CoordinatorConfig::default()
    };
    let coordinator = TestCoordinator::start_with_web(&tmp.path().join("data"), config).await;
    let work_dir = tmp.path().join("agent");
    let agent_log = std::fs::File::create(tmp.path().join("agent.log")).unwrap();
    let mut agent = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(["agent", "--coordinator", &coordinator.url(), "--work-dir"])
        .arg(&work_dir)
        .args(["--max-cache-bytes", &budget.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(agent_log)
        .spawn()
        .unwrap();
    let client = coordinator.control().await;
    wait_for_agents(&client, 1).await;

    // What the agent reports (measured at start and after each job), polled throughout.
    let reported: Reported = Arc::default();
    let polling = {
        let (client, reported) = (client.clone(), reported.clone());
        tokio::spawn(async move {
            loop {
                if let Some(agent) = list_agents(&client).await.first() {
                    let seen = (agent.cache_bytes, agent.max_cache_bytes);
                    // Registered, its session (whose first heartbeat carries the cache)
                    // not open yet: nothing reported, so nothing to check.
                    let not_reported_yet = seen == (None, None);
                    let mut reported = reported.lock().unwrap();
                    if !not_reported_yet && reported.last() != Some(&seen) {
                        reported.push(seen);
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };

    let out = tmp.path().join("bisect-out");
    let url = coordinator.url();
    let (spec_arg, good_arg, bad_arg, out_arg) =
        (spec_path.clone(), good.clone(), bad.clone(), out.clone());
    let run = tokio::task::spawn_blocking(move || {
        abfleet(&[
            "bisect",
            "--spec",
            spec_arg.to_str().unwrap(),
            "--good",
            &good_arg,
            "--bad",
            &bad_arg,
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
    let agent_stderr = || std::fs::read_to_string(tmp.path().join("agent.log")).unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}\n--- agent\n{}",
        output_text(&run),
        agent_stderr()
    );
    let bisection: Bisection =
        serde_json::from_str(&std::fs::read_to_string(out.join("bisect.json")).unwrap()).unwrap();
    assert_eq!(
        bisection.first_bad().unwrap().id,
        commits[4],
        "the right answer"
    );
    assert!(bisection.steps.len() >= 3, "{:?}", bisection.steps);
    assert_eq!(bisection.steps[0].commit.id, bad);
    for (n, step) in bisection.steps.iter().enumerate() {
        // The good build serves every step: the most recently used, never evicted.
        let expected = if n == 0 {
            BuildStatus::Built
        } else {
            BuildStatus::Cached
        };
        assert_eq!(step.good_build, Some(expected), "{step:?}");
        assert_eq!(step.candidate_build, Some(BuildStatus::Built), "{step:?}");
    }

    // Every size reported after a job (the last one too) is within the budget.
    let last_pass = reported_pass(&work_dir, &reported, budget).await;
    let seen = reported.lock().unwrap().clone();
    assert!(
        seen.len() >= 2,
        "sizes after the start and the jobs: {seen:?}"
    );
    for (bytes, max_bytes) in &seen {
        assert_eq!(*max_bytes, Some(budget), "{seen:?}");
        assert!(
            bytes.is_some_and(|b| b <= budget),
            "over the budget of {budget}: {seen:?}\n--- agent\n{}",
            agent_stderr()
        );
    }
    let builds_left = std::fs::read_dir(work_dir.join("builds")).unwrap().count();
    assert_eq!(builds_left, 2, "the good build and the last candidate's");
    let recipe = &spec.fork.build;
    assert!(build_dir(&work_dir, &good, recipe).is_dir());
    let confirmed = build_dir(&work_dir, &bad, recipe);
    assert!(
        !confirmed.exists(),
        "the confirming step's build was evicted"
    );

    // /metrics and `abfleet agents --format json` show the same.
    let agent_id = list_agents(&client).await[0].agent_id.clone();
    let web = coordinator.web.unwrap();
    let (status, metrics) =
        tokio::task::spawn_blocking(move || http_request(web, "GET", "/metrics", &[], b""))
            .await
            .unwrap();
    assert_eq!(status, 200);
    assert!(
        metrics.contains(&format!(
            "abfleet_agent_cache_bytes{{agent=\"{agent_id}\"}} {last_pass}\n"
        )) && metrics.contains(&format!(
            "abfleet_agent_cache_max_bytes{{agent=\"{agent_id}\"}} {budget}\n"
        )),
        "{metrics}"
    );
    let url = coordinator.url();
    let listed = tokio::task::spawn_blocking(move || {
        abfleet(&["agents", "--coordinator", &url, "--format", "json"])
    })
    .await
    .unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed["agents"][0]["cache_bytes"], last_pass);
    assert_eq!(listed["agents"][0]["max_cache_bytes"], budget);

    // A later run that needs the evicted build builds it again, and the pass after it keeps
    // the cache within the budget.
    let mut again = SpecOptions::git(&repos);
    again.upstream_source = format!("git = \"{}\"\nrev = \"{good}\"", repos.fork.display());
    again.fork_source = format!("git = \"{}\"\nrev = \"{bad}\"", repos.fork.display());
    again.workloads = &["psnr"];
    let again = again.write(tmp.path(), "again.toml");
    let mut submitter = client.clone();
    let (_, report) = submit_and_wait(&mut submitter, &again).await;
    assert_eq!(report.exit_code, 0, "{:?}", report.errors);
    assert!(confirmed.is_dir(), "the evicted build was built again");
    let after = reported_pass(&work_dir, &reported, budget).await;
    assert!(after <= budget, "{after} > {budget}");
    polling.abort();

    // By hand: refused while the agent holds the work dir, naming its pid.
    let work = work_dir.to_str().unwrap().to_string();
    let refused = abfleet(&["agent", "gc", "--work-dir", &work, "--max-cache-bytes", "1"]);
    assert_eq!(refused.status.code(), Some(2), "{}", output_text(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains(&format!("pid {}", agent.id())),
        "{}",
        output_text(&refused)
    );
    agent.kill().unwrap();
    agent.wait().unwrap();
    // A dry run names what would go and removes nothing; then the eviction itself.
    let before = cache::scan(&work_dir).unwrap();
    let dry = abfleet(&[
        "agent",
        "gc",
        "--work-dir",
        &work,
        "--max-cache-bytes",
        "1K",
        "--dry-run",
    ]);
    assert_eq!(dry.status.code(), Some(0), "{}", output_text(&dry));
    let dry_out = String::from_utf8_lossy(&dry.stdout).to_string();
    assert!(
        dry_out.contains(&format!("would remove build `{}`", confirmed.display())),
        "{dry_out}"
    );
    assert_eq!(cache::scan(&work_dir).unwrap(), before);
    let gc = abfleet(&[
        "agent",
        "gc",
        "--work-dir",
        &work,
        "--max-cache-bytes",
        "1K",
    ]);
    assert_eq!(gc.status.code(), Some(0), "{}", output_text(&gc));
    assert!(
        String::from_utf8_lossy(&gc.stdout).contains(&format!("removed {} of ", before.len())),
        "{}",
        output_text(&gc)
    );
    assert_eq!(cache::total_bytes(&cache::scan(&work_dir).unwrap()), 0);
}

/// The entries of the job that just ran are pinned through the pass at its end: with a
/// budget smaller than one job's needs, its builds and fixtures stay (the next job of the
/// same spec reuses them), the agent reports a size over the budget and logs a warning that
/// says what to raise.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_jobs_own_entries_are_never_evicted_and_a_budget_too_small_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let config = CoordinatorConfig {
        heartbeat_interval: Duration::from_millis(200),
        ..CoordinatorConfig::default()
    };
    let coordinator = TestCoordinator::start(&tmp.path().join("data"), config).await;
    let work_dir = tmp.path().join("agent");
    let agent_log = std::fs::File::create(tmp.path().join("agent.log")).unwrap();
    let mut agent = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(["agent", "--coordinator", &coordinator.url(), "--work-dir"])
        .arg(&work_dir)
        .args(["--max-cache-bytes", "1K"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(agent_log)
        .spawn()
        .unwrap();
    let mut client = coordinator.control().await;
    wait_for_agents(&client, 1).await;
    let spec = SpecOptions {
        workloads: &["psnr"],
        ..SpecOptions::path()
    }
    .write(tmp.path(), "spec.toml");
    let (_, report) = submit_and_wait(&mut client, &spec).await;
    assert_eq!(report.exit_code, 0, "{:?}", report.errors);
    let log = || std::fs::read_to_string(tmp.path().join("agent.log")).unwrap();
    let reported = wait_until(
        Duration::from_secs(60),
        "the agent to report the size after its job",
        || {
            let client = client.clone();
            async move {
                let agent = list_agents(&client).await.into_iter().next()?;
                agent.cache_bytes.filter(|bytes| *bytes > 1024)
            }
        },
    )
    .await;
    let entries = cache::scan(&work_dir).unwrap();
    let kinds = |kind| entries.iter().filter(|e| e.kind == kind).count();
    assert_eq!(
        (kinds(EntryKind::Build), kinds(EntryKind::Fixture)),
        (2, 2),
        "both sides' builds and both generated fixtures stay: {entries:#?}"
    );
    assert_eq!(reported, cache::total_bytes(&entries));
    wait_until(
        Duration::from_secs(30),
        "the warning about the budget",
        || async { log().contains("raise max_cache_bytes").then_some(()) },
    )
    .await;
    agent.kill().unwrap();
    agent.wait().unwrap();
}
