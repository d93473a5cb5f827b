//! The agent's own checks through the real coordinator and agent over gRPC: a job whose
//! source or build program the agent's policy does not allow, or whose revision would be a
//! git option, ends failed with the reason in the report, and nothing was fetched or built.

mod support;

use std::path::Path;
use std::sync::Arc;

use abfleet_agent::policy::AgentPolicy;
use abfleet_agent::AgentConfig;
use abfleet_coordinator::CoordinatorConfig;
use support::*;

fn policy(dir: &Path, sources: &[&str], programs: &[&str]) -> Arc<AgentPolicy> {
    let path = dir.join("agent-policy.toml");
    let list = |items: &[&str]| {
        items
            .iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    std::fs::write(
        &path,
        format!(
            "allowed_sources = [{}]\nallowed_build_programs = [{}]\n",
            list(sources),
            list(programs)
        ),
    )
    .unwrap();
    Arc::new(AgentPolicy::load(&path).unwrap())
}

/// Runs `spec` on a fresh agent with `policy` and returns the report's errors; asserts the
/// run failed and that the agent fetched and built nothing.
async fn refused_run(
    tmp: &Path,
    name: &str,
    spec: &Path,
    policy: Option<Arc<AgentPolicy>>,
) -> Vec<String> {
    let mut coordinator = TestCoordinator::start(
        &tmp.join(format!("data-{name}")),
        CoordinatorConfig::default(),
    )
    .await;
    let work_dir = tmp.join(format!("agent-{name}"));
    let mut config = AgentConfig::new(coordinator.url(), &work_dir);
    config.policy = policy;
    let agent = TestAgent::start_with_config(config, abfleet_agent::inventory::probe_host());
    let mut client = coordinator.control().await;
    let (_, report) = submit_and_wait(&mut client, spec).await;
    assert_eq!(report.status, "failed", "{:?}", report.errors);
    assert!(report.cells.is_empty(), "{:?}", report.cells);
    assert!(
        !work_dir.join("git").exists(),
        "nothing was fetched into the git cache"
    );
    assert!(!work_dir.join("builds").exists(), "no build was started");
    assert!(
        !work_dir.join("fixtures").exists(),
        "no fixture was prepared"
    );
    agent.stop().await;
    coordinator.stop().await;
    report.errors
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_outside_the_agent_policy_is_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let repos = make_repos(tmp.path());
    let spec = SpecOptions::git(&repos).write(tmp.path(), "spec.toml");

    let only_srv = policy(tmp.path(), &["/srv/trees/*"], &["make", "cc"]);
    let errors = refused_run(tmp.path(), "sources", &spec, Some(only_srv)).await;
    let upstream = repos.upstream.display().to_string();
    assert!(
        errors.iter().any(|e| e.contains("allowed_sources")
            && e.contains("[upstream] git")
            && e.contains(&upstream)),
        "{errors:?}"
    );

    let sources = format!("{}/*", tmp.path().display());
    let no_make = policy(tmp.path(), &[&sources], &["cc", "meson", "ninja"]);
    let errors = refused_run(tmp.path(), "programs", &spec, Some(no_make)).await;
    assert!(
        errors
            .iter()
            .any(|e| e.contains("allowed_build_programs") && e.contains("`make`")),
        "{errors:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_that_would_be_a_git_option_is_refused_without_a_policy() {
    let tmp = tempfile::tempdir().unwrap();
    let repos = make_repos(tmp.path());
    let mut options = SpecOptions::git(&repos);
    let pwned = tmp.path().join("pwned");
    options.fork_source = format!(
        "git = \"{}\"\nrev = \"--output={}\"",
        repos.fork.display(),
        pwned.display()
    );
    let spec = options.write(tmp.path(), "spec.toml");
    let errors = refused_run(tmp.path(), "rev", &spec, None).await;
    assert!(
        errors
            .iter()
            .any(|e| e.contains("[fork] rev") && e.contains("starts with `-`")),
        "{errors:?}"
    );
    assert!(!pwned.exists());
}

#[test]
fn a_bad_policy_file_stops_the_agent_at_start_up_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("policy.toml");
    std::fs::write(
        &path,
        "allowed_sources = [\"*\"]\nallowed_programs = [\"make\"]\n",
    )
    .unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(["agent", "--coordinator", "http://127.0.0.1:9", "--work-dir"])
        .arg(tmp.path().join("agent"))
        .arg("--policy")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("failed to parse the agent policy") && stderr.contains("allowed_programs"),
        "{stderr}"
    );
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(["agent", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--policy <FILE>") && help.contains("trusts the coordinator fully"),
        "{help}"
    );
}
