//! `abfleet-bench enormous-output`: what a fork binary that writes an enormous output costs
//! abfleet (issue 38). The demo subject's fork is built with `-DABFLEET_ENORMOUS=N`: a valid
//! JSON output of N frames (one million by default, about 150 MB) for a 6-frame input. The
//! spec runs once through `abfleet local` (coordinator and agent in one process) and once
//! through an `abfleet agent` process of its own beside an `abfleet coordinator` (`submit
//! --wait`); each process's peak resident set (`VmHWM`, sampled every 10 ms) and the wall
//! time are reported, with what the run said of the fork's side. `--local-binary` measures
//! another build, to compare two builds in one sitting.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use abfleet_core::report::Report;
use serde::Serialize;

use super::agent_cpu::KillOnDrop;
use crate::failure::{Classify, Failure};

pub struct EnormousArgs {
    pub frames: u64,
    pub subject: PathBuf,
    pub binary: Option<PathBuf>,
}

impl EnormousArgs {
    pub fn new(
        smoke: bool,
        frames: Option<u64>,
        subject: Option<PathBuf>,
        binary: Option<PathBuf>,
    ) -> EnormousArgs {
        EnormousArgs {
            frames: frames.unwrap_or(if smoke { 20_000 } else { 1_000_000 }),
            subject: subject.unwrap_or_else(|| {
                PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/subject"))
            }),
            binary,
        }
    }
}

/// One process's figures.
#[derive(Debug, Serialize)]
struct ProcessFigures {
    wall_s: f64,
    peak_rss_mib: f64,
}

#[derive(Debug, Serialize)]
struct EnormousReport {
    bench: &'static str,
    frames: u64,
    output_bytes: u64,
    local: ProcessFigures,
    agent: ProcessFigures,
    /// What the report says of the fork's side.
    fork_error: String,
}

pub async fn run(args: EnormousArgs) -> Result<i32, Failure> {
    let binary = match &args.binary {
        Some(binary) => binary.clone(),
        None => crate::abfleet_beside()?,
    };
    let tmp = tempfile::tempdir().infra()?;
    let spec = write_spec(tmp.path(), &args).infra()?;
    let (local, report) = local_run(&binary, tmp.path(), &spec).infra()?;
    let agent = agent_run(&binary, tmp.path(), &spec).infra()?;
    let output_bytes = largest_output(&tmp.path().join("local-agent"));
    let fork_error = report
        .cells
        .first()
        .and_then(|cell| cell.fork.error.clone())
        .unwrap_or_else(|| "(no error: the fork's side was read)".to_string());
    let result = EnormousReport {
        bench: "enormous-output",
        frames: args.frames,
        output_bytes,
        local,
        agent,
        fork_error,
    };
    println!(
        "{:<28} {:>10} {:>14}",
        "process", "wall (s)", "peak RSS (MiB)"
    );
    for (name, figures) in [
        ("abfleet local", &result.local),
        ("abfleet agent", &result.agent),
    ] {
        println!(
            "{name:<28} {:>10.1} {:>14.1}",
            figures.wall_s, figures.peak_rss_mib
        );
    }
    println!(
        "the fork's output: {} frames, {:.1} MB; its side: {}",
        result.frames,
        result.output_bytes as f64 / 1e6,
        result.fork_error
    );
    println!("{}", serde_json::to_string(&result).infra()?);
    Ok(0)
}

fn write_spec(dir: &Path, args: &EnormousArgs) -> anyhow::Result<PathBuf> {
    let subject = args.subject.canonicalize().map_err(|err| {
        anyhow::anyhow!(
            "the demo subject `{}`: {err}; pass --subject DIR",
            args.subject.display()
        )
    })?;
    let spec = dir.join("enormous.toml");
    std::fs::write(
        &spec,
        format!(
            r#"name = "bench-enormous-output"

[upstream]
path = "{subject}"

[fork]
path = "{subject}"

[fork.build]
commands = [["make", "-s", "VARIANT=fork", "EXTRA_CFLAGS=-DABFLEET_ENORMOUS={frames}"]]

[build]
commands = [["make", "-s"]]
binary = "build/vmaf"

[command]
template = ["{{binary}}", "-r", "{{reference}}", "-d", "{{distorted}}", "-w", "{{width}}", "-h", "{{height}}",
            "-p", "{{pixel_format}}", "-b", "{{bitdepth}}", "--threads", "{{threads}}", "-o", "{{output}}", "--json"]

{fixture}
[[workloads]]
name = "psnr"
args = ["--feature", "psnr"]

[measure]
runs = 3
max_runs = 3
timeout_seconds = 120
"#,
            subject = subject.display(),
            frames = args.frames,
            fixture = super::synthetic::generated_fixture("tiny", 96, 64, 6, 3),
        ),
    )?;
    Ok(spec)
}

/// Waits for `child`, sampling its peak resident set every 10 ms (`VmHWM` only grows, so
/// the last sample before it exits is its peak, short of a rise in its last 10 ms).
fn watch(mut child: Child) -> anyhow::Result<(std::process::ExitStatus, ProcessFigures)> {
    let started = Instant::now();
    let pid = child.id();
    let mut peak_kib = 0u64;
    loop {
        if let Some(kib) = super::fleet::rss_kib(pid, "VmHWM:") {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait()? {
            return Ok((
                status,
                ProcessFigures {
                    wall_s: started.elapsed().as_secs_f64(),
                    peak_rss_mib: peak_kib as f64 / 1024.0,
                },
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn local_run(binary: &Path, dir: &Path, spec: &Path) -> anyhow::Result<(ProcessFigures, Report)> {
    let out = dir.join("local-out");
    let child = Command::new(binary)
        .arg("local")
        .arg(spec)
        .arg("--out")
        .arg(&out)
        .arg("--data-dir")
        .arg(dir.join("local-coordinator"))
        .arg("--work-dir")
        .arg(dir.join("local-agent"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let (status, figures) = watch(child)?;
    let report = std::fs::read_to_string(out.join("report.json")).map_err(|err| {
        anyhow::anyhow!("`abfleet local` exited {status} and wrote no report.json ({err})")
    })?;
    Ok((figures, Report::from_json(&report)?))
}

/// The spec through a coordinator process and an agent process; the agent's figures.
fn agent_run(binary: &Path, dir: &Path, spec: &Path) -> anyhow::Result<ProcessFigures> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    drop(listener);
    let url = format!("http://127.0.0.1:{port}");
    let coordinator = KillOnDrop(
        Command::new(binary)
            .args(["coordinator", "--plaintext", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--data-dir")
            .arg(dir.join("fleet-coordinator"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the coordinator did not listen on {url} within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let agent = Command::new(binary)
        .args(["agent", "--coordinator", &url, "--work-dir"])
        .arg(dir.join("fleet-agent"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let agent_pid = agent.id();
    let watcher = std::thread::spawn(move || watch(agent));
    let submitted = Command::new(binary)
        .arg("submit")
        .arg(spec)
        .args(["--coordinator", &url, "--wait", "--out"])
        .arg(dir.join("fleet-out"))
        .output()?;
    // The agent stops on SIGTERM once the run is over; its peak is read until it exits.
    let _ = Command::new("kill")
        .args(["-TERM", &agent_pid.to_string()])
        .status();
    let (_, figures) = watcher
        .join()
        .map_err(|_| anyhow::anyhow!("the agent's watcher panicked"))??;
    drop(coordinator);
    anyhow::ensure!(
        dir.join("fleet-out").join("report.json").is_file(),
        "`abfleet submit --wait` exited {} without a report: {}",
        submitted.status,
        String::from_utf8_lossy(&submitted.stderr)
    );
    Ok(figures)
}

/// The largest fork output file under the agent's work dir.
fn largest_output(work_dir: &Path) -> u64 {
    let mut largest = 0;
    let mut stack = vec![work_dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.metadata() {
                Ok(meta) if meta.is_dir() => stack.push(path),
                Ok(meta)
                    if path
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("fork-")) =>
                {
                    largest = largest.max(meta.len());
                }
                _ => {}
            }
        }
    }
    largest
}
