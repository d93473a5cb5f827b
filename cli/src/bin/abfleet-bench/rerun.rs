//! `abfleet-bench rerun`: a warm-cache rerun does no build and no fetch, and what it costs
//! beyond its timed runs. Two git repositories of the demo subject are made in a temporary
//! dir (upstream and a fork with one commit), a spec pins both sides to full commit hashes,
//! and `abfleet local` runs it twice on one work dir (this binary, as child processes).
//!
//! What the second run starts is counted by wrapping the tools it finds on PATH — `git`,
//! `make`, the compilers, and the tools the agent's inventory probe runs when it starts —
//! in scripts that log each call and exec the real tool. A fetch is a `git remote update`,
//! `git fetch` or `git clone --mirror`; a checkout a `git clone --shared` or `git checkout`
//! of a build tree; a build any `make` or compiler call; a probe a version query
//! (`--version`, `-v`, `-dumpmachine`) or a device tool (the inventory probe's, once per
//! agent process, and the toolchain fingerprint's). The timed runs (warm-ups included) are
//! counted from its report.json, which also says each side's build status (`cached`). Its
//! wall time is set against the sum of its timed runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use abfleet_core::report::Report;
use serde::Serialize;

use crate::failure::{Classify, Failure};

pub struct RerunArgs {
    pub smoke: bool,
    pub subject: PathBuf,
    /// The `abfleet` binary whose `local` runs the spec (another build, to compare).
    pub local_binary: Option<PathBuf>,
}

impl RerunArgs {
    pub fn new(smoke: bool, subject: Option<PathBuf>, local_binary: Option<PathBuf>) -> RerunArgs {
        RerunArgs {
            smoke,
            local_binary,
            subject: subject.unwrap_or_else(|| {
                PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/subject"))
            }),
        }
    }
}

/// Tools wrapped on PATH besides the inventory probe's toolchain list: every process a rerun
/// starts other than its timed runs.
const WRAPPED_TOOLS: [&str; 6] = ["git", "make", "nvidia-smi", "rocminfo", "clinfo", "sycl-ls"];

/// Device tools the inventory probe runs (whatever their arguments).
const DEVICE_TOOLS: [&str; 4] = ["nvidia-smi", "rocminfo", "clinfo", "sycl-ls"];

/// What one `abfleet local` run started, by tool and first argument.
#[derive(Serialize, Default)]
struct Started {
    /// `git remote update`, `git fetch`, `git clone --mirror`.
    fetches: usize,
    /// Build trees checked out of the mirror (`git clone --shared`, `git checkout`).
    checkouts: usize,
    /// `make` and compiler calls other than `--version`.
    builds: usize,
    /// Version queries and device tools: the agent's inventory probe at start-up and the
    /// toolchain fingerprint.
    probes: usize,
    /// Every wrapped call, as `tool first-argument` → count.
    calls: BTreeMap<String, usize>,
    /// Calls of the wrapped tools, all told.
    tool_processes: usize,
    /// Timed runs and warm-ups, from the report.
    timed_runs: usize,
}

#[derive(Serialize)]
struct RunFigures {
    wall_s: f64,
    /// Sum of the wall times of every timed run and warm-up.
    runs_s: f64,
    /// The cells its report.json holds.
    cells: usize,
    /// Sum of the cells' `overhead_seconds`.
    cells_overhead_s: f64,
    build_statuses: Vec<String>,
    started: Started,
}

#[derive(Serialize)]
struct RerunReport {
    bench: &'static str,
    smoke: bool,
    cells: usize,
    first: RunFigures,
    rerun: RunFigures,
    /// The rerun's wall time over the sum of its timed runs.
    rerun_wall_over_runs: f64,
    /// The rerun built nothing and fetched nothing.
    no_build_no_fetch: bool,
}

pub async fn run(args: RerunArgs) -> Result<i32, Failure> {
    let tmp = tempfile::tempdir().infra()?;
    let dir = std::path::absolute(tmp.path()).infra()?;
    let spec = write_spec(&dir, &args).infra()?;
    let bin = dir.join("wrapped-bin");
    wrap_tools(&bin).infra()?;
    let binary = match &args.local_binary {
        Some(binary) => binary.clone(),
        None => crate::abfleet_beside()?,
    };
    let first = local_run(&binary, &dir, &spec, &bin, "first").infra()?;
    let rerun = local_run(&binary, &dir, &spec, &bin, "rerun").infra()?;
    let no_build_no_fetch = rerun.started.builds == 0
        && rerun.started.fetches == 0
        && rerun.started.checkouts == 0
        && rerun.build_statuses.iter().all(|s| s == "cached");
    let report = RerunReport {
        bench: "rerun",
        smoke: args.smoke,
        cells: rerun.cells,
        rerun_wall_over_runs: rerun.wall_s / rerun.runs_s,
        no_build_no_fetch,
        first,
        rerun,
    };
    print_table(&report);
    super::summary::print_json_line(&report)
}

/// `git` with a fixed author, which must succeed; its stdout, trimmed.
fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let output = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "abfleet-bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "abfleet-bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .output()?;
    anyhow::ensure!(
        output.status.success(),
        "git {args:?} in `{}`: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// Upstream (the subject) and a fork with one commit making the fork variant the default;
/// the spec pins each to its full commit hash. Returns the spec's path.
fn write_spec(dir: &Path, args: &RerunArgs) -> anyhow::Result<PathBuf> {
    let upstream = dir.join("upstream");
    let fork = dir.join("fork");
    for (repo, variant) in [(&upstream, "upstream"), (&fork, "fork")] {
        std::fs::create_dir_all(repo.join("src"))?;
        for file in ["Makefile", "README.md", ".gitignore"] {
            std::fs::copy(args.subject.join(file), repo.join(file)).map_err(|err| {
                anyhow::anyhow!(
                    "cannot copy the demo subject's `{file}` from `{}` ({err}); pass --subject DIR",
                    args.subject.display()
                )
            })?;
        }
        for entry in std::fs::read_dir(args.subject.join("src"))? {
            let entry = entry?;
            std::fs::copy(entry.path(), repo.join("src").join(entry.file_name()))?;
        }
        if variant == "fork" {
            let makefile = std::fs::read_to_string(repo.join("Makefile"))?;
            std::fs::write(
                repo.join("Makefile"),
                makefile.replace("VARIANT ?= upstream", "VARIANT ?= fork"),
            )?;
        }
        git(repo, &["init", "-q", "-b", "main"])?;
        git(repo, &["add", "."])?;
        git(repo, &["commit", "-q", "-m", variant])?;
    }
    let upstream_commit = git(&upstream, &["rev-parse", "HEAD"])?;
    let fork_commit = git(&fork, &["rev-parse", "HEAD"])?;
    let (fixtures, workloads, measure) = if args.smoke {
        (
            super::synthetic::generated_fixture("tiny", 96, 64, 6, 3),
            workload_list(&["psnr"]),
            "warmup = 1\nruns = 3\nmax_runs = 3",
        )
    } else {
        (
            format!(
                "{}{}",
                super::synthetic::generated_fixture("pattern_320x180", 320, 180, 24, 1),
                super::synthetic::generated_fixture("pattern_640x360", 640, 360, 24, 2)
            ),
            workload_list(&["psnr", "float_ssim", "motion", "motion_v2"]),
            "warmup = 1\nruns = 5\nmax_runs = 12",
        )
    };
    let spec = dir.join("rerun.toml");
    std::fs::write(
        &spec,
        format!(
            r#"name = "bench-rerun"

[upstream]
git = "{upstream}"
rev = "{upstream_commit}"

[fork]
git = "{fork}"
rev = "{fork_commit}"

[build]
commands = [["make", "-s"]]
binary = "build/vmaf"
toolchain = ["cc", "--version"]

[command]
template = [
    "{{binary}}", "--reference", "{{reference}}", "--distorted", "{{distorted}}",
    "--width", "{{width}}", "--height", "{{height}}", "--pixel_format", "{{pixel_format}}",
    "--bitdepth", "{{bitdepth}}", "--threads", "{{threads}}", "--output", "{{output}}", "--json",
]
output_format = "json"
unknown_feature_exit_code = 255

{fixtures}
{workloads}
[measure]
{measure}
threads = 1
timeout_seconds = 60

[parity.renames]
VMAF_integer_feature_motion_sad_score = "integer_motion"
"#,
            upstream = upstream.display(),
            fork = fork.display(),
        ),
    )?;
    Ok(spec)
}

fn workload_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|w| format!("[[workloads]]\nname = \"{w}\"\nargs = [\"--feature\", \"{w}\"]\n\n"))
        .collect()
}

/// A script per wrapped tool in `bin`: it appends `TOOL ARGS…` to `$ABFLEET_BENCH_EXEC_LOG`
/// and execs the real tool (found on PATH now, before `bin` is put in front of it).
fn wrap_tools(bin: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(bin)?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let probed = abfleet_agent::probe::toolchain::TOOLS
        .iter()
        .map(|(tool, _)| *tool);
    for tool in WRAPPED_TOOLS.into_iter().chain(probed) {
        let Some(real) = std::env::split_paths(&path)
            .map(|dir| dir.join(tool))
            .find(|candidate| candidate.is_file())
        else {
            anyhow::ensure!(
                !matches!(tool, "git" | "make" | "cc"),
                "`{tool}` is not on PATH; the rerun bench builds the demo subject with it"
            );
            continue;
        };
        let script = bin.join(tool);
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"{tool} $*\" >> \"$ABFLEET_BENCH_EXEC_LOG\"\nexec {} \"$@\"\n",
                real.display()
            ),
        )?;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// `abfleet local SPEC` on the bench's work dir, with the wrapped tools first on PATH.
fn local_run(
    binary: &Path,
    dir: &Path,
    spec: &Path,
    bin: &Path,
    name: &str,
) -> anyhow::Result<RunFigures> {
    let log = dir.join(format!("{name}.exec.log"));
    let out = dir.join(format!("{name}-out"));
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))?;
    let started = Instant::now();
    let output = std::process::Command::new(binary)
        .arg("local")
        .arg(spec)
        .arg("--out")
        .arg(&out)
        .arg("--data-dir")
        .arg(dir.join("coordinator"))
        .arg("--work-dir")
        .arg(dir.join("agent"))
        .env("PATH", path)
        .env("ABFLEET_BENCH_EXEC_LOG", &log)
        .output()?;
    let wall_s = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        output.status.success(),
        "`abfleet local` ({name} run) exited {}:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let report = Report::from_json(&std::fs::read_to_string(out.join("report.json"))?)?;
    let mut started = count_calls(&std::fs::read_to_string(&log).unwrap_or_default());
    let mut runs_s = 0.0;
    let mut cells_overhead_s = 0.0;
    for cell in &report.cells {
        for side in [&cell.upstream, &cell.fork] {
            started.timed_runs += side.times.len() + side.warmup_times.len();
            runs_s += side.times.iter().chain(&side.warmup_times).sum::<f64>();
        }
        cells_overhead_s += cell.overhead_seconds.unwrap_or(0.0);
    }
    let build_statuses = [&report.upstream, &report.fork]
        .iter()
        .filter_map(|side| side.build.as_ref())
        .map(|build| format!("{:?}", build.status).to_lowercase())
        .collect();
    Ok(RunFigures {
        wall_s,
        runs_s,
        cells: report.cells.len(),
        cells_overhead_s,
        build_statuses,
        started,
    })
}

/// Sorts the wrapped tools' calls into fetches, checkouts, builds and probes.
fn count_calls(log: &str) -> Started {
    let mut started = Started::default();
    for line in log.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some((&tool, mut args)) = words.split_first() else {
            continue;
        };
        // `git -C DIR subcommand …`: the subcommand is what was done.
        while tool == "git" && args.first() == Some(&"-C") && args.len() >= 2 {
            args = &args[2..];
        }
        let first = args.first().copied();
        started.tool_processes += 1;
        *started
            .calls
            .entry(format!("{tool} {}", first.unwrap_or("")).trim().to_string())
            .or_default() += 1;
        let query = args
            .iter()
            .any(|a| matches!(*a, "--version" | "-v" | "-dumpmachine" | "-dumpversion"));
        match (tool, first) {
            ("git", Some("clone")) if !args.contains(&"--mirror") => started.checkouts += 1,
            ("git", Some("checkout")) => started.checkouts += 1,
            ("git", Some("fetch" | "clone" | "remote" | "pull")) => started.fetches += 1,
            ("git", _) => {}
            _ if query || DEVICE_TOOLS.contains(&tool) => started.probes += 1,
            _ => started.builds += 1,
        }
    }
    started
}

fn print_table(report: &RerunReport) {
    for (name, run) in [("first run", &report.first), ("rerun", &report.rerun)] {
        println!(
            "{name}: {:.2} s wall, timed runs {} taking {:.2} s, cells' overhead {:.3} s; builds {:?}; started {} tool processes ({} fetches, {} checkouts, {} builds, {} probes): {:?}",
            run.wall_s,
            run.started.timed_runs,
            run.runs_s,
            run.cells_overhead_s,
            run.build_statuses,
            run.started.tool_processes,
            run.started.fetches,
            run.started.checkouts,
            run.started.builds,
            run.started.probes,
            run.started.calls
        );
    }
    println!(
        "rerun: wall / sum of timed runs = {:.2}; no build and no fetch: {}",
        report.rerun_wall_over_runs, report.no_build_no_fetch
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_calls_sort_into_fetches_builds_and_fingerprints() {
        let log = "git -C /w/m.git remote update --prune\ngit -C /w/m.git rev-parse --verify --quiet --end-of-options abc^{commit}\ncc --version\nmake -s\ncc -O2 -c src/main.c\ngit clone --quiet --mirror -- x y\ngit clone --quiet --shared --no-checkout -- m t\ngit -C t checkout --quiet --detach abc\ngcc -dumpmachine\nnvidia-smi -q -x\nnasm -v\n";
        let started = count_calls(log);
        assert_eq!(started.fetches, 2);
        assert_eq!(started.checkouts, 2);
        assert_eq!(started.builds, 2);
        assert_eq!(started.probes, 4);
        assert_eq!(started.tool_processes, 11);
        assert_eq!(started.calls["git rev-parse"], 1);
        assert_eq!(started.calls["cc --version"], 1);
    }
}
