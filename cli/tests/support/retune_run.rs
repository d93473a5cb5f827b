//! What the real-toolchain retuning tests share (`vmaf_cuda_real.rs`, `vmaf_amd_real.rs`,
//! `vmaf_intel_real.rs`): the production retuning spec pointed at the real fork tree, a
//! toolchain's `bin` under `.toolchains/` (installed by scripts/test; missing is a failure,
//! never a skip), an `abfleet agent` child process with that `bin` first on its PATH and
//! recorded GPU captures standing in for the devices, and the report's sections and findings.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use abfleet_core::finding::Finding;
use abfleet_core::report::{GenerationSection, Report};

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
