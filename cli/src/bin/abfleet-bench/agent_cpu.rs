//! `abfleet-bench agent-cpu`: the CPU a real `abfleet agent` process uses while its job's
//! timed runs are in flight, with everything it runs alongside them: its session and
//! heartbeats, its uploader, the runner waiting on the child.
//!
//! A coordinator in this process, an agent as a child process (this binary, `agent`), and
//! one job whose "benchmark" is a shell script that reads its parent's `/proc/PID/stat` (the
//! agent's: the runner spawns it directly), sleeps `--run-seconds`, reads it again and then
//! writes a vmaf JSON output. The agent's CPU during the runs is the sum over the runs of
//! utime+stime after minus before, in clock ticks (10 ms at the usual USER_HZ; unbiased over
//! many runs, which is why the default is 22 one-second runs); the wall time is the sum of
//! the runs' times as the job recorded them. Also timed: `HostSample::take()`, the scan of
//! every `/proc/PID/stat` the agent does before each cell's warm-ups and after its last run.

use std::path::Path;
use std::time::{Duration, Instant};

use abfleet_core::report::Report;
use abfleet_proto::control_link::{ControlLink, SpecToRun, Submission};
use serde::Serialize;

use super::summary::Summary;
use crate::failure::{Classify, Failure};

/// The agent's own CPU while a timed run is in flight: under 0.5% of one core.
pub const AGENT_CPU_PCT_TARGET: f64 = 0.5;

pub struct AgentCpuArgs {
    pub smoke: bool,
    pub pairs: u32,
    pub run_seconds: f64,
    /// The `abfleet` binary whose `agent` runs the job (another build, to compare).
    pub agent_binary: Option<std::path::PathBuf>,
}

impl AgentCpuArgs {
    /// The flags' values, their defaults depending on `--smoke`.
    pub fn new(
        smoke: bool,
        pairs: Option<u32>,
        run_seconds: Option<f64>,
        agent_binary: Option<std::path::PathBuf>,
    ) -> AgentCpuArgs {
        AgentCpuArgs {
            smoke,
            pairs: pairs.unwrap_or(if smoke { 3 } else { 10 }).max(3),
            run_seconds: run_seconds.unwrap_or(if smoke { 0.05 } else { 1.0 }),
            agent_binary,
        }
    }
}

#[derive(Serialize)]
struct CpuShare {
    cpu_s: f64,
    wall_s: f64,
    pct_of_one_core: f64,
}

impl CpuShare {
    fn new(cpu_s: f64, wall_s: f64) -> CpuShare {
        CpuShare {
            cpu_s,
            wall_s,
            pct_of_one_core: 100.0 * cpu_s / wall_s.max(1e-9),
        }
    }
}

#[derive(Serialize)]
struct HostSampleCost {
    /// `HostSample::take()` timed in this process, 20 times.
    take: Summary,
    /// Processes it read (`/proc` entries that are numbers).
    processes: usize,
}

#[derive(Serialize)]
struct Targets {
    agent_cpu_pct_max: f64,
    /// `None` for a smoke run (too few ticks to judge).
    met: Option<bool>,
}

#[derive(Serialize)]
struct AgentCpuReport {
    bench: &'static str,
    smoke: bool,
    run_seconds: f64,
    /// Runs sampled: warm-ups and timed runs of both sides.
    runs: usize,
    clock_ticks_per_s: f64,
    /// Ticks over the runs, summed: the agent's CPU while a run was in flight.
    during_runs: CpuShare,
    /// From the first run's start to the last run's end, the gaps between runs included
    /// (spawn, reap, reading outputs, the host samples), by `/proc/uptime`.
    cell: CpuShare,
    /// The cell's `overhead_seconds` as report.json has it.
    overhead_seconds: Option<f64>,
    host_sample: HostSampleCost,
    targets: Targets,
}

/// One run's samples of the agent: (uptime seconds, utime+stime ticks) at its start and end.
#[derive(Debug, Clone, Copy, PartialEq)]
struct RunSample {
    start: (f64, u64),
    end: (f64, u64),
}

pub async fn run(args: AgentCpuArgs) -> Result<i32, Failure> {
    let tmp = tempfile::tempdir().infra()?;
    let dir = std::path::absolute(tmp.path()).infra()?;
    let probe = dir.join("probe.log");
    let spec_path = write_job(&dir, &probe, &args).infra()?;
    let spec = abfleet_core::spec::JobSpec::load(&spec_path)
        .map_err(|err| anyhow::anyhow!("the bench's own spec does not load: {err}"))
        .infra()?;

    let coordinator = abfleet_coordinator::Coordinator::open(
        &dir.join("coordinator"),
        abfleet_coordinator::CoordinatorConfig::default(),
    )
    .infra()?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.infra()?;
    let url = format!("http://{}", listener.local_addr().infra()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(abfleet_coordinator::serve(
        coordinator,
        listener,
        abfleet_coordinator::ServerTransport::LoopbackPlaintext,
        async {
            let _ = stopped.await;
        },
    ));
    let agent_log = std::fs::File::create(dir.join("agent.log")).infra()?;
    let binary = match &args.agent_binary {
        Some(binary) => binary.clone(),
        None => crate::abfleet_beside()?,
    };
    let mut agent = KillOnDrop(
        std::process::Command::new(binary)
            .args(["agent", "--coordinator", &url, "--work-dir"])
            .arg(dir.join("agent"))
            .stdout(std::process::Stdio::null())
            .stderr(agent_log)
            .spawn()
            .infra()?,
    );
    let report = submit_and_wait(&url, &spec, &spec_path, &mut agent, &dir.join("agent.log")).await;
    agent.interrupt().await;
    let _ = stop.send(());
    let _ = server.await;
    let report = report.infra()?;
    if report.status != "done" || report.cells.len() != 1 {
        let log = std::fs::read_to_string(dir.join("agent.log")).unwrap_or_default();
        return Err(Failure::infra(anyhow::anyhow!(
            "the bench's job ended {} with {} cell(s): {:?}\nagent log:\n{log}",
            report.status,
            report.cells.len(),
            report.errors
        )));
    }
    let cell = &report.cells[0];
    let run_wall_s: f64 = [&cell.upstream, &cell.fork]
        .iter()
        .flat_map(|side| side.times.iter().chain(&side.warmup_times))
        .sum();
    let samples = read_samples(&std::fs::read_to_string(&probe).infra()?).infra()?;
    let ticks_per_s = abfleet_agent::noise::clock_ticks_per_second();
    let during_ticks: u64 = samples.iter().map(|s| s.end.1 - s.start.1).sum();
    let (first, last) = (samples[0], samples[samples.len() - 1]);
    let cell_share = CpuShare::new(
        (last.end.1 - first.start.1) as f64 / ticks_per_s,
        last.end.0 - first.start.0,
    );
    let during_runs = CpuShare::new(during_ticks as f64 / ticks_per_s, run_wall_s);
    let host_sample = host_sample_cost().infra()?;
    let met = (!args.smoke).then_some(during_runs.pct_of_one_core < AGENT_CPU_PCT_TARGET);
    let report = AgentCpuReport {
        bench: "agent-cpu",
        smoke: args.smoke,
        run_seconds: args.run_seconds,
        runs: samples.len(),
        clock_ticks_per_s: ticks_per_s,
        during_runs,
        cell: cell_share,
        overhead_seconds: cell.overhead_seconds,
        host_sample,
        targets: Targets {
            agent_cpu_pct_max: AGENT_CPU_PCT_TARGET,
            met,
        },
    };
    print_table(&report);
    super::summary::print_json_line(&report)
}

/// A child process killed when dropped.
pub(super) struct KillOnDrop(pub(super) std::process::Child);

impl KillOnDrop {
    /// SIGINT (the agent stops as on Ctrl-C), then up to 10 s for it to exit.
    async fn interrupt(mut self) {
        if let Ok(pid) = i32::try_from(self.0.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGINT,
            );
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && matches!(self.0.try_wait(), Ok(None)) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The "benchmark" (a script in a source tree both sides build from) and the spec of the
/// job that times it; returns the spec's path.
fn write_job(dir: &Path, probe: &Path, args: &AgentCpuArgs) -> anyhow::Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let src = dir.join("src");
    std::fs::create_dir_all(&src)?;
    let script = src.join("sleepy");
    // Only shell builtins around the sleep: nothing but `sleep` is started, and the
    // samples are written after the second one is read.
    std::fs::write(
        &script,
        format!(
            r#"#!/bin/sh
# abfleet-bench agent-cpu: the agent's (our parent's) CPU ticks around a sleep.
out=
while [ $# -gt 0 ]; do
    if [ "$1" = "--output" ]; then out=$2; shift; fi
    shift
done
read -r up_before idle < /proc/uptime
read -r stat_before < /proc/$PPID/stat
sleep {seconds}
read -r up_after idle < /proc/uptime
read -r stat_after < /proc/$PPID/stat
printf '%s %s\n%s %s\n' "$up_before" "$stat_before" "$up_after" "$stat_after" >> {probe}
printf '%s' '{{"version":"bench","frames":[{{"frameNum":0,"metrics":{{"psnr_y":40.0}}}}],"pooled_metrics":{{"psnr_y":{{"min":40.0,"max":40.0,"mean":40.0,"harmonic_mean":40.0}}}}}}' > "$out"
"#,
            seconds = args.run_seconds,
            probe = probe.display()
        ),
    )?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    let spec = dir.join("agent-cpu.toml");
    std::fs::write(
        &spec,
        format!(
            r#"name = "bench-agent-cpu"

[upstream]
path = "{src}"

[fork]
path = "{src}"

[build]
commands = [["true"]]
binary = "sleepy"
toolchain = ["true"]

[command]
template = ["{{binary}}", "--output", "{{output}}"]
output_format = "json"

{fixture}[[workloads]]
name = "sleep"
args = []

[measure]
warmup = 1
runs = {pairs}
max_runs = {pairs}
threads = 1
timeout_seconds = 600
"#,
            src = src.display(),
            fixture = super::synthetic::generated_fixture("tiny", 16, 16, 1, 1),
            pairs = args.pairs
        ),
    )?;
    Ok(spec)
}

/// Submits the bench's job and polls its report until it ends; fails at once, with the end
/// of the agent's log, when the agent process exits first (nothing would run the job).
async fn submit_and_wait(
    url: &str,
    spec: &abfleet_core::spec::JobSpec,
    spec_path: &Path,
    agent: &mut KillOnDrop,
    agent_log: &Path,
) -> anyhow::Result<Report> {
    let deadline = Instant::now() + Duration::from_secs(600);
    let client = loop {
        match ControlLink::connect(url, None).await {
            Ok(client) => break client,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(err) => anyhow::bail!("cannot reach the bench's coordinator: {err}"),
        }
    };
    let run_id = client
        .submit(Submission::new(
            SpecToRun::Json(spec.to_json()),
            "manual",
            &spec_path.display().to_string(),
        ))
        .await?;
    loop {
        let report = client.report(&run_id).await?;
        if matches!(report.status.as_str(), "done" | "failed" | "cancelled") {
            return Ok(report);
        }
        if let Ok(Some(status)) = agent.0.try_wait() {
            anyhow::bail!(
                "the bench's agent exited ({status}) before its job finished; the end of its log ({}):\n{}\n\
                 check that --agent-binary is an abfleet build that runs `abfleet agent`",
                agent_log.display(),
                abfleet_agent::runner::tail(agent_log, super::LOG_TAIL_BYTES).trim_end()
            );
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the bench's job did not finish within 600 s"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The probe file's lines, two per run: `UPTIME STAT-LINE` at its start and its end.
fn read_samples(text: &str) -> anyhow::Result<Vec<RunSample>> {
    let points: Vec<(f64, u64)> = text
        .lines()
        .map(|line| {
            let (uptime, stat) = line
                .split_once(' ')
                .ok_or_else(|| anyhow::anyhow!("bad probe line `{line}`"))?;
            Ok((uptime.parse()?, stat_ticks(stat)?))
        })
        .collect::<anyhow::Result<_>>()?;
    anyhow::ensure!(
        !points.is_empty() && points.len().is_multiple_of(2),
        "the probe holds {} samples, not pairs",
        points.len()
    );
    Ok(points
        .chunks(2)
        .map(|pair| RunSample {
            start: pair[0],
            end: pair[1],
        })
        .collect())
}

/// utime + stime of a `/proc/PID/stat` line, read as the agent reads it.
fn stat_ticks(stat: &str) -> anyhow::Result<u64> {
    abfleet_agent::noise::parse_stat(stat)
        .map(|(_, ticks)| ticks)
        .ok_or_else(|| anyhow::anyhow!("bad stat line `{stat}`"))
}

/// `HostSample::take()` 20 times, as the agent calls it, and the processes it reads.
fn host_sample_cost() -> anyhow::Result<HostSampleCost> {
    let mut times = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        std::hint::black_box(abfleet_agent::noise::HostSample::take());
        times.push(started.elapsed().as_secs_f64());
    }
    let processes = std::fs::read_dir("/proc")?
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .count();
    Ok(HostSampleCost {
        take: Summary::of(&times).ok_or_else(|| anyhow::anyhow!("no samples"))?,
        processes,
    })
}

fn print_table(report: &AgentCpuReport) {
    let met = match report.targets.met {
        Some(true) => "met",
        Some(false) => "NOT met",
        None => "not judged (smoke)",
    };
    println!(
        "{} runs of {} s through a real `abfleet agent` (clock ticks: {} per second)",
        report.runs, report.run_seconds, report.clock_ticks_per_s
    );
    println!(
        "agent CPU while a run is in flight: {:.3} s over {:.3} s of runs = {:.3}% of one core (target < {AGENT_CPU_PCT_TARGET}%: {met})",
        report.during_runs.cpu_s, report.during_runs.wall_s, report.during_runs.pct_of_one_core
    );
    println!(
        "agent CPU over the cell, gaps between runs included: {:.3} s over {:.3} s = {:.3}% of one core; overhead_seconds {:?}",
        report.cell.cpu_s, report.cell.wall_s, report.cell.pct_of_one_core, report.overhead_seconds
    );
    println!(
        "HostSample::take(): median {:.3} ms (min {:.3}, max {:.3}) over {} processes",
        report.host_sample.take.median_s * 1e3,
        report.host_sample.take.min_s * 1e3,
        report.host_sample.take.max_s * 1e3,
        report.host_sample.processes
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_lines_pair_into_runs_and_stat_ticks_count_after_the_name() {
        let stat = |utime: u64, stime: u64| {
            format!("4242 (abfleet (agent)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 {utime} {stime} 0 0 20 0 9 0 12345")
        };
        let text = format!(
            "100.10 {}\n101.12 {}\n102.00 {}\n103.01 {}\n",
            stat(10, 5),
            stat(10, 6),
            stat(11, 6),
            stat(12, 7)
        );
        let samples = read_samples(&text).unwrap();
        assert_eq!(
            samples,
            vec![
                RunSample {
                    start: (100.10, 15),
                    end: (101.12, 16)
                },
                RunSample {
                    start: (102.00, 17),
                    end: (103.01, 19)
                }
            ]
        );
        assert!(read_samples("100.0 x\n").is_err());
        assert!(read_samples(&format!("1.0 {}\n", stat(1, 1))).is_err());
    }
}
