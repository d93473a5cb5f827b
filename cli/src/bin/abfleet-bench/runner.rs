//! `abfleet-bench runner`: what the agent's runner (`abfleet_agent::runner::run`, the call
//! every timed run of a cell goes through) adds to a timed run. The same command is timed
//! through it and by a bare `std::process::Command` spawn and wait in this process,
//! interleaved, the pairs alternating which goes first (direct then runner, runner then
//! direct, …: an order effect cancels out), on a short command (`sh -c :`, where the
//! runner's fixed cost shows as added milliseconds) and a long one of about a second (where
//! it shows as a ratio): `sleep`, whose length the host's load barely changes, or with
//! `--busy-loop` a shell loop calibrated to it, CPU-bound like a benchmark (on a loaded host
//! its own spread then hides a 1% difference). The runner runs as in a job: in a task scoped with
//! `CHILD_OWNER` (its children listed in `running.pgids`), output to a log file.
//!
//! Two runner figures per run: `recorded`, the wall time the runner returns (what a cell's
//! `times` hold, so its difference to `direct` is a bias in every reported time), and `call`,
//! the wall time of the whole call (what a cell pays, log file opening included). The
//! agent's own CPU time is read around each long run through the runner.
//!
//! When `perf` is on PATH and `perf stat -e task-clock true` works, the same commands are
//! then timed by `perf stat -r N` in the same sitting (its mean elapsed time, against the
//! means of the direct and runner timings): an outside harness's view of the same runs.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use abfleet_agent::runner::{self, CommandSpec, CHILD_OWNER};
use serde::Serialize;

use super::summary::{self_cpu_s, Summary};
use crate::failure::{Classify, Failure};

/// The long command's ratio target: runner/direct within 1% of 1.
pub const LONG_RATIO_WITHIN: f64 = 0.01;
/// The short command's target: under 2 ms added per run.
pub const SHORT_ADDED_MS_TARGET: f64 = 2.0;
/// The agent's own CPU while a run is timed: under 0.5% of one core.
pub const AGENT_CPU_PCT_TARGET: f64 = 0.5;

pub struct RunnerArgs {
    pub smoke: bool,
    pub short_pairs: u32,
    pub long_pairs: u32,
    pub long_seconds: f64,
    pub busy_loop: bool,
}

impl RunnerArgs {
    /// The flags' values, their defaults depending on `--smoke`.
    pub fn new(
        smoke: bool,
        short_pairs: Option<u32>,
        long_pairs: Option<u32>,
        long_seconds: Option<f64>,
        busy_loop: bool,
    ) -> RunnerArgs {
        RunnerArgs {
            smoke,
            short_pairs: short_pairs.unwrap_or(if smoke { 10 } else { 200 }).max(1),
            long_pairs: long_pairs.unwrap_or(if smoke { 2 } else { 10 }).max(1),
            long_seconds: long_seconds.unwrap_or(if smoke { 0.05 } else { 1.0 }),
            busy_loop,
        }
    }
}

/// One command's timings, in seconds per run.
#[derive(Default)]
struct Timings {
    direct: Vec<f64>,
    recorded: Vec<f64>,
    call: Vec<f64>,
    /// The agent's own CPU seconds during each runner call.
    agent_cpu: Vec<f64>,
}

#[derive(Serialize)]
struct CommandFigures {
    argv: Vec<String>,
    direct: Summary,
    recorded: Summary,
    call: Summary,
    /// Median of the per-pair ratios recorded / direct.
    ratio_recorded: f64,
    /// Median of the per-pair ratios call / direct.
    ratio_call: f64,
    /// Median recorded minus median direct, milliseconds.
    added_recorded_ms: f64,
    /// Median call minus median direct, milliseconds.
    added_call_ms: f64,
}

/// `perf stat -r N` of one command: the mean elapsed time and its standard deviation over
/// the runs, as perf prints them, next to the means of this bench's own timings.
#[derive(Serialize)]
struct PerfFigures {
    runs: u32,
    mean_s: f64,
    stddev_s: Option<f64>,
    direct_mean_s: f64,
    recorded_mean_s: f64,
    /// recorded mean / perf mean.
    ratio_recorded_to_perf: f64,
}

#[derive(Serialize)]
struct PerfComparison {
    short: PerfFigures,
    long: PerfFigures,
}

#[derive(Serialize)]
struct AgentCpu {
    cpu_s: f64,
    wall_s: f64,
    pct_of_one_core: f64,
}

#[derive(Serialize)]
struct Targets {
    long_ratio_within: f64,
    long_ratio_met: bool,
    short_added_ms_max: f64,
    short_added_ms_met: bool,
    agent_cpu_pct_max: f64,
    agent_cpu_pct_met: bool,
}

#[derive(Serialize)]
struct RunnerReport {
    bench: &'static str,
    smoke: bool,
    short: CommandFigures,
    long: CommandFigures,
    /// The busy loop's steps; `null` when the long command is `sleep`.
    long_loop_iterations: Option<u64>,
    agent_cpu: AgentCpu,
    /// `null` when `perf` is not on PATH or cannot count here.
    perf: Option<PerfComparison>,
    targets: Targets,
}

pub async fn run(args: RunnerArgs) -> Result<i32, Failure> {
    let work = tempfile::tempdir()
        .map_err(|err| anyhow::anyhow!("failed to create a temporary work dir: {err}"))
        .infra()?;
    let work_dir = std::path::absolute(work.path())
        .map_err(|err| anyhow::anyhow!("failed to resolve the temporary work dir: {err}"))
        .infra()?;
    let short_argv = argv(&["sh", "-c", ":"]);
    let (iterations, long_argv) = if args.busy_loop {
        let iterations = calibrate_loop(args.long_seconds).infra()?;
        (Some(iterations), busy_loop(iterations))
    } else {
        (None, argv(&["sleep", &format!("{}", args.long_seconds)]))
    };
    let (short, long) = CHILD_OWNER
        .scope(work_dir.clone(), async {
            let short = time_interleaved(&short_argv, args.short_pairs, &work_dir).await?;
            let long = time_interleaved(&long_argv, args.long_pairs, &work_dir).await?;
            Ok::<_, anyhow::Error>((short, long))
        })
        .await
        .infra()?;
    let perf = if perf_works() {
        let short_perf = perf_stat(&short_argv, args.short_pairs, &short).infra()?;
        let long_perf = perf_stat(&long_argv, args.long_pairs, &long).infra()?;
        Some(PerfComparison {
            short: short_perf,
            long: long_perf,
        })
    } else {
        None
    };
    let agent_cpu_s: f64 = long.agent_cpu.iter().sum();
    let agent_wall_s: f64 = long.call.iter().sum();
    let agent_cpu = AgentCpu {
        cpu_s: agent_cpu_s,
        wall_s: agent_wall_s,
        pct_of_one_core: 100.0 * agent_cpu_s / agent_wall_s,
    };
    let (short, long) = (
        figures(short_argv, &short).infra()?,
        figures(long_argv, &long).infra()?,
    );
    let targets = Targets {
        long_ratio_within: LONG_RATIO_WITHIN,
        long_ratio_met: (long.ratio_recorded - 1.0).abs() <= LONG_RATIO_WITHIN,
        short_added_ms_max: SHORT_ADDED_MS_TARGET,
        short_added_ms_met: short.added_recorded_ms < SHORT_ADDED_MS_TARGET,
        agent_cpu_pct_max: AGENT_CPU_PCT_TARGET,
        agent_cpu_pct_met: agent_cpu.pct_of_one_core < AGENT_CPU_PCT_TARGET,
    };
    let report = RunnerReport {
        bench: "runner",
        smoke: args.smoke,
        short,
        long,
        long_loop_iterations: iterations,
        agent_cpu,
        perf,
        targets,
    };
    print_table(&report);
    super::summary::print_json_line(&report)
}

fn argv(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A POSIX-shell busy loop of `iterations` steps: CPU-bound, like a benchmark.
fn busy_loop(iterations: u64) -> Vec<String> {
    argv(&[
        "sh",
        "-c",
        &format!("i=0; while [ $i -lt {iterations} ]; do i=$((i+1)); done"),
    ])
}

/// The loop's iteration count for about `seconds`, from a 20,000-step run scaled (twice, the
/// second from the first's estimate, so start-up weighs little).
fn calibrate_loop(seconds: f64) -> anyhow::Result<u64> {
    let mut iterations = 20_000u64;
    for _ in 0..2 {
        let took_s = time_direct(&busy_loop(iterations))?;
        let scaled = (iterations as f64 * seconds / took_s.max(1e-6)).round();
        iterations = (scaled as u64).clamp(1_000, 1_000_000_000);
    }
    Ok(iterations)
}

/// One bare spawn and wait, output discarded; its wall seconds.
fn time_direct(argv: &[String]) -> anyhow::Result<f64> {
    let started = Instant::now();
    let status = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|err| anyhow::anyhow!("failed to run `{}`: {err}", argv.join(" ")))?;
    let wall_s = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        status.success(),
        "`{}` failed: {status}; the benchmark needs a POSIX `sh`",
        argv.join(" ")
    );
    Ok(wall_s)
}

/// Whether `perf stat` can count here (it is installed and the kernel lets it).
fn perf_works() -> bool {
    std::process::Command::new("perf")
        .args(["stat", "-e", "task-clock", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// `perf stat -r runs -e task-clock -- argv`, its statistics written to a file and read back.
fn perf_stat(argv: &[String], runs: u32, timings: &Timings) -> anyhow::Result<PerfFigures> {
    let runs = runs.max(2);
    let out = tempfile::NamedTempFile::new()?;
    let status = std::process::Command::new("perf")
        .args(["stat", "-r", &runs.to_string(), "-e", "task-clock", "-o"])
        .arg(out.path())
        .arg("--")
        .args(argv)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    anyhow::ensure!(
        status.success(),
        "`perf stat` of `{}` failed: {status}",
        argv.join(" ")
    );
    let text = std::fs::read_to_string(out.path())?;
    let (mean_s, stddev_s) = parse_perf_elapsed(&text).ok_or_else(|| {
        anyhow::anyhow!("no \"seconds time elapsed\" line in perf's output:\n{text}")
    })?;
    let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len().max(1) as f64;
    let recorded_mean_s = mean(&timings.recorded);
    Ok(PerfFigures {
        runs,
        mean_s,
        stddev_s,
        direct_mean_s: mean(&timings.direct),
        recorded_mean_s,
        ratio_recorded_to_perf: recorded_mean_s / mean_s,
    })
}

/// perf's `  0.102465 +- 0.000684 seconds time elapsed  ( +-  0.67% )` as (mean, stddev).
fn parse_perf_elapsed(text: &str) -> Option<(f64, Option<f64>)> {
    let line = text.lines().find(|l| l.contains("seconds time elapsed"))?;
    let mut words = line.split_whitespace();
    let mean = words.next()?.parse().ok()?;
    let stddev = match words.next() {
        Some("+-") => words.next().and_then(|w| w.parse().ok()),
        _ => None,
    };
    Some((mean, stddev))
}

/// A warm-up of each, then `pairs` pairs of a direct run and one through the runner, the
/// direct one first in even pairs and second in odd ones.
async fn time_interleaved(argv: &[String], pairs: u32, work_dir: &Path) -> anyhow::Result<Timings> {
    let log = work_dir.join("run.log");
    let env = BTreeMap::new();
    let (_cancel_tx, mut cancel) = tokio::sync::watch::channel(false);
    let mut timings = Timings::default();
    for pair in 0..=pairs {
        // The direct spawn blocks this worker thread, as a bare harness would.
        let direct = || tokio::task::block_in_place(|| time_direct(argv));
        let direct_first = pair % 2 == 0;
        let mut direct_s = if direct_first { direct()? } else { 0.0 };
        let _ = std::fs::remove_file(&log);
        let cpu_before = self_cpu_s();
        let started = Instant::now();
        let outcome = runner::run(
            CommandSpec {
                argv,
                cwd: Some(work_dir),
                env: &env,
                log_path: &log,
                timeout: Duration::from_secs(600),
            },
            &mut cancel,
        )
        .await;
        let call_s = started.elapsed().as_secs_f64();
        let cpu_s = self_cpu_s() - cpu_before;
        if !direct_first {
            direct_s = direct()?;
        }
        anyhow::ensure!(
            outcome.exit.success(),
            "`{}` through the runner {}",
            argv.join(" "),
            outcome.exit.describe()
        );
        if pair == 0 {
            continue; // the warm-ups
        }
        timings.direct.push(direct_s);
        timings.recorded.push(outcome.wall_s);
        timings.call.push(call_s);
        timings.agent_cpu.push(cpu_s);
    }
    Ok(timings)
}

fn figures(argv: Vec<String>, timings: &Timings) -> anyhow::Result<CommandFigures> {
    let summary = |values: &[f64]| Summary::of(values).ok_or_else(|| anyhow::anyhow!("no runs"));
    let ratio = |values: &[f64]| {
        let ratios: Vec<f64> = values
            .iter()
            .zip(&timings.direct)
            .map(|(runner, direct)| runner / direct)
            .collect();
        abfleet_core::stats::median(&ratios).unwrap_or(f64::NAN)
    };
    let (direct, recorded, call) = (
        summary(&timings.direct)?,
        summary(&timings.recorded)?,
        summary(&timings.call)?,
    );
    Ok(CommandFigures {
        argv,
        ratio_recorded: ratio(&timings.recorded),
        ratio_call: ratio(&timings.call),
        added_recorded_ms: (recorded.median_s - direct.median_s) * 1e3,
        added_call_ms: (call.median_s - direct.median_s) * 1e3,
        direct,
        recorded,
        call,
    })
}

fn print_table(report: &RunnerReport) {
    println!(
        "{:<32} {:>6} {:>11} {:>11} {:>11}",
        "command / how timed", "runs", "median", "min", "max"
    );
    for (name, figures) in [("short", &report.short), ("long", &report.long)] {
        for (how, summary) in [
            ("direct", &figures.direct),
            ("runner (recorded)", &figures.recorded),
            ("runner (whole call)", &figures.call),
        ] {
            println!(
                "{:<32} {:>6} {:>9.3}ms {:>9.3}ms {:>9.3}ms",
                format!("{name}: {how}"),
                summary.n,
                summary.median_s * 1e3,
                summary.min_s * 1e3,
                summary.max_s * 1e3
            );
        }
    }
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    let t = &report.targets;
    println!(
        "long (`{}`): runner/direct {:.4} recorded, {:.4} whole call (target 1 ± {LONG_RATIO_WITHIN}: {})",
        report.long.argv.join(" "),
        report.long.ratio_recorded,
        report.long.ratio_call,
        met(t.long_ratio_met)
    );
    println!(
        "short: {:+.3} ms added per run recorded, {:+.3} ms whole call (target < {SHORT_ADDED_MS_TARGET} ms: {})",
        report.short.added_recorded_ms,
        report.short.added_call_ms,
        met(t.short_added_ms_met)
    );
    if let Some(perf) = &report.perf {
        for (name, p) in [("short", &perf.short), ("long", &perf.long)] {
            println!(
                "{name}: perf stat -r {}: mean {:.3} ms (± {:.3}); direct mean {:.3} ms, runner recorded mean {:.3} ms (runner/perf {:.4})",
                p.runs,
                p.mean_s * 1e3,
                p.stddev_s.unwrap_or(f64::NAN) * 1e3,
                p.direct_mean_s * 1e3,
                p.recorded_mean_s * 1e3,
                p.ratio_recorded_to_perf
            );
        }
    } else {
        println!("perf stat: not available here (not on PATH, or the kernel refuses to count)");
    }
    println!(
        "agent CPU during the long runs: {:.4} s over {:.3} s = {:.3}% of one core (target < {AGENT_CPU_PCT_TARGET}%: {})",
        report.agent_cpu.cpu_s,
        report.agent_cpu.wall_s,
        report.agent_cpu.pct_of_one_core,
        met(t.agent_cpu_pct_met)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_elapsed_lines_parse_with_and_without_a_deviation() {
        let repeated = " Performance counter stats for 'sleep 0.1' (5 runs):\n\n              1.04 msec task-clock\n\n          0.102465 +- 0.000684 seconds time elapsed  ( +-  0.67% )\n";
        assert_eq!(
            parse_perf_elapsed(repeated),
            Some((0.102465, Some(0.000684)))
        );
        let once = "       0.001234567 seconds time elapsed\n";
        assert_eq!(parse_perf_elapsed(once), Some((0.001234567, None)));
        assert_eq!(parse_perf_elapsed("nothing here"), None);
    }
}
