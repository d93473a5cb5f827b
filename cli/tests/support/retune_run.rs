//! What the real-toolchain retuning tests share (`vmaf_cuda_real.rs`, `vmaf_amd_real.rs`,
//! `vmaf_intel_real.rs`): the production retuning spec pointed at the real fork tree, a
//! toolchain's `bin` under `.toolchains/` (installed by scripts/test; missing is a failure,
//! never a skip), an `abfleet agent` child process with that `bin` first on its PATH and
//! recorded GPU captures standing in for the devices, and the report's sections and findings.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use abfleet_coordinator::CoordinatorConfig;
use abfleet_core::finding::Finding;
use abfleet_core::report::{GenerationSection, Report};

use crate::support::{
    list_runs, repo_from_tarball, submit, wait_for_agents, wait_for_report, wait_until,
    TestCoordinator,
};

pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// `.toolchains/<name>/bin`, holding `tool`; a panic that says how to install it otherwise.
pub fn toolchain_bin(name: &str, tool: &str) -> PathBuf {
    let bin = Path::new(ROOT).join(".toolchains").join(name).join("bin");
    assert!(
        bin.join(tool).is_file(),
        "{} has no {tool}: run `scripts/test --install-only` (docs/retuning.md)",
        bin.display()
    );
    bin
}

pub fn path_with(bin: &Path) -> String {
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
}

/// The production retuning spec with its fork at the real fork tree (a git repository made
/// from the tarball) instead of GitHub.
pub fn derive_retune_spec(dir: &Path, fork_repo: &Path, commit: &str) -> PathBuf {
    let production =
        std::fs::read_to_string(Path::new(ROOT).join("fixtures/jobs/vmaf-retune.toml")).unwrap();
    let text = production
        .replacen(
            "git = \"https://github.com/lusoris/vmaf.git\"",
            &format!("git = {:?}", fork_repo.display().to_string()),
            1,
        )
        .replacen(
            "rev = \"c2a3c7e0febd98a6831b9bfebe5e298e229b1244\"",
            &format!("rev = \"{commit}\""),
            1,
        );
    assert_eq!(
        text.matches(&fork_repo.display().to_string()).count(),
        1,
        "the production spec names the fork's repository once"
    );
    assert!(
        text.contains(commit),
        "the production spec pins the fork's commit"
    );
    let path = dir.join("vmaf-retune.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A git repository of the real fork tree (from the tarball) in `dir`, and the production
/// retuning spec pointed at it.
pub fn real_fork_and_spec(dir: &Path) -> PathBuf {
    let fork_repo = dir.join("fork");
    let commit = repo_from_tarball(
        &Path::new(ROOT).join("fixtures/vmaf-real/fork-c2a3c7e0.tar.xz"),
        &fork_repo,
        None,
    );
    derive_retune_spec(dir, &fork_repo, &commit)
}

/// A coordinator started with the production retuning spec (`--retune-spec`, so the
/// toolchain watcher starts a run per generation whose compiler changed), and one agent work
/// dir that agents with different toolchains on their PATH take turns on.
pub struct BumpFleet {
    pub tmp: tempfile::TempDir,
    pub coordinator: TestCoordinator,
    pub spec: PathBuf,
    pub work_dir: PathBuf,
    /// The recorded GPUs the agent stands for.
    pub gpus: &'static [&'static str],
}

impl BumpFleet {
    pub async fn start(gpus: &'static [&'static str]) -> BumpFleet {
        let tmp = tempfile::tempdir().unwrap();
        let spec = real_fork_and_spec(tmp.path());
        let coordinator = TestCoordinator::start(
            &tmp.path().join("data"),
            CoordinatorConfig {
                retune_spec: Some(spec.clone()),
                ..CoordinatorConfig::default()
            },
        )
        .await;
        let work_dir = tmp.path().join("agent");
        BumpFleet {
            tmp,
            coordinator,
            spec,
            work_dir,
            gpus,
        }
    }

    /// The fleet's agent with `bin` first on its PATH, and where its log goes.
    fn agent(&self, bin: &Path, name: &str) -> (Child, PathBuf) {
        let log = self.tmp.path().join(format!("agent-{name}.log"));
        let url = self.coordinator.url();
        (start_agent(&url, &self.work_dir, bin, self.gpus, &log), log)
    }

    /// The baseline: an agent with `bin` first on its PATH, the spec submitted by hand.
    pub async fn baseline(&self, bin: &Path, name: &str) -> Report {
        let (agent, log) = self.agent(bin, name);
        let mut client = self.coordinator.control().await;
        wait_for_agents(&client, 1).await;
        let run_id = submit(&mut client, &self.spec).await;
        let report = wait_for_report(&mut client, &run_id, Duration::from_secs(900)).await;
        stop_agent(agent);
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(report.status, "done", "{}\n{text}", report.to_json_pretty());
        report
    }

    /// The same agent back with `bin` first on its PATH: the watcher starts `runs`
    /// toolchain-bump runs by itself, each noting both toolchains (`before`, `after`: words
    /// of their version lines). Their reports, each done.
    pub async fn bump(
        &self,
        bin: &Path,
        name: &str,
        runs: usize,
        before: &str,
        after: &str,
    ) -> Vec<Report> {
        let (agent, _) = self.agent(bin, name);
        let mut client = self.coordinator.control().await;
        let bumps = wait_until(Duration::from_secs(60), "the toolchain-bump runs", || {
            let client = client.clone();
            async move {
                let bumps: Vec<_> = list_runs(&client)
                    .await
                    .into_iter()
                    .filter(|r| r.trigger == "toolchain-bump")
                    .collect();
                (bumps.len() == runs).then_some(bumps)
            }
        })
        .await;
        let mut reports = Vec::new();
        for bump in &bumps {
            assert!(
                bump.trigger_note.contains(before) && bump.trigger_note.contains(after),
                "{}",
                bump.trigger_note
            );
            let report = wait_for_report(&mut client, &bump.run_id, Duration::from_secs(900)).await;
            assert_eq!(report.status, "done", "{}", report.to_json_pretty());
            reports.push(report);
        }
        stop_agent(agent);
        reports
    }
}

/// The exit code rule (docs/retuning.md): a fail finding, and only one, makes a run exit 4.
pub fn assert_exit_code_rule(report: &Report) {
    let any_fail = report
        .generations
        .iter()
        .flat_map(|g| &g.findings)
        .any(|f| f.severity == abfleet_core::finding::Severity::Fail);
    assert_eq!(report.exit_code == 4, any_fail, "exit {}", report.exit_code);
}

/// `abfleet local SPEC` in `dir` (work dir `dir/work`, reports in `dir/out`) with the
/// recorded GPUs `probes` and `env` added: its output (for messages), exit code and report.
pub fn local_run(
    dir: &Path,
    spec: &Path,
    probes: &[&str],
    env: &[(&str, String)],
) -> (String, Option<i32>, Report) {
    let out = dir.join("out");
    let mut command = Command::new(env!("CARGO_BIN_EXE_abfleet"));
    command
        .current_dir(dir)
        .arg("local")
        .arg(spec)
        .arg("--work-dir")
        .arg(dir.join("work"))
        .arg("--out")
        .arg(&out);
    for probe in probes {
        command
            .arg("--gpu-probes")
            .arg(Path::new(ROOT).join("fixtures/probes").join(probe));
    }
    let output = command.envs(env.iter().cloned()).output().unwrap();
    let text = crate::support::output_text(&output);
    let report: Report =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap())
            .unwrap_or_else(|err| panic!("{err}\n{text}"));
    assert_eq!(report.status, "done", "{text}");
    (text, output.status.code(), report)
}

/// The report among `reports` with a section for `key`.
pub fn report_for<'r>(reports: &'r [Report], key: &str) -> &'r Report {
    reports
        .iter()
        .find(|r| r.generations.iter().any(|g| g.key == key))
        .unwrap_or_else(|| panic!("no run for {key}"))
}

/// `abfleet agent` as a bench host runs it, with `bin` first on its PATH and each of `probes`
/// (directories under fixtures/probes) standing in for its GPUs.
pub fn start_agent(url: &str, work_dir: &Path, bin: &Path, probes: &[&str], log: &Path) -> Child {
    let recorded = Path::new(ROOT).join("fixtures/probes");
    let mut command = Command::new(env!("CARGO_BIN_EXE_abfleet"));
    command
        .args(["agent", "--coordinator", url, "--work-dir"])
        .arg(work_dir);
    for probe in probes {
        command.arg("--gpu-probes").arg(recorded.join(probe));
    }
    command
        .env("PATH", path_with(bin))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

pub fn stop_agent(mut child: Child) {
    // SIGTERM: the agent stops at once when idle.
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    for _ in 0..100 {
        if child.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}

pub fn section<'r>(report: &'r Report, key: &str) -> &'r GenerationSection {
    report
        .generations
        .iter()
        .find(|g| g.key == key)
        .unwrap_or_else(|| {
            panic!(
                "no {key} section: {:?}",
                report
                    .generations
                    .iter()
                    .map(|g| &g.key)
                    .collect::<Vec<_>>()
            )
        })
}

pub fn findings<'s>(section: &'s GenerationSection, check: &str) -> Vec<&'s Finding> {
    section
        .findings
        .iter()
        .filter(|f| f.check == check)
        .collect()
}

/// The build directory of this agent whose build log names `toolchain` in its header.
pub fn build_tree_with(work_dir: &Path, toolchain: &str) -> PathBuf {
    std::fs::read_dir(work_dir.join("builds"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|dir| {
            std::fs::read_to_string(dir.join("build.log"))
                .is_ok_and(|log| log.lines().take(3).any(|l| l.contains(toolchain)))
        })
        .map(|dir| dir.join("src"))
        .unwrap_or_else(|| panic!("no build with `{toolchain}` in {}", work_dir.display()))
}

/// A tool's stdout; a panic with its stderr when it fails.
pub fn tool_output(program: &Path, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{} {args:?}: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
