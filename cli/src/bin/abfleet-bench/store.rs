//! `abfleet-bench store`: a coordinator whose store holds many finished runs (10,000 by
//! default), filled for real: each run submitted over gRPC and finished by simulated agents
//! (`fleet::SimFleet`: two cell events and `done`, so each run leaves a report and its
//! per-generation snapshot). Then what an operator does, each timed 20 times as one gRPC call
//! (list the newest page of runs, fetch the report of the newest and of the oldest run, submit
//! a new run) and 5 times as the real `abfleet` process, end to end: `abfleet runs` (and
//! `--all`), `abfleet report RUN` of the newest and the oldest run, `abfleet submit SPEC`.

use std::time::{Duration, Instant};

use abfleet_core::RunId;
use abfleet_proto::control_link::PageRequest;
use serde::Serialize;

use std::path::Path;

use super::fleet::{
    cli_seconds, dir_bytes, load_avg, measured_binary, submit, wait_for, SimFleet, GENERATION,
};
use super::summary::Summary;
use super::synthetic;
use crate::failure::{Classify, Failure};

/// Each operation's target at 10,000 runs.
pub const OPERATION_MS_TARGET: f64 = 200.0;
/// Runs in flight while the store is filled.
const IN_FLIGHT: usize = 16;

pub struct StoreArgs {
    pub smoke: bool,
    pub runs: usize,
    /// The binary whose coordinator and commands are measured; `None`: the `abfleet` beside this binary.
    pub coordinator_bin: Option<std::path::PathBuf>,
}

impl StoreArgs {
    pub fn new(smoke: bool, runs: Option<usize>) -> StoreArgs {
        StoreArgs {
            smoke,
            runs: runs.unwrap_or(if smoke { 40 } else { 10_000 }).max(2),
            coordinator_bin: None,
        }
    }
}

#[derive(Serialize)]
struct StoreBench {
    bench: &'static str,
    smoke: bool,
    runs: usize,
    fill_seconds: f64,
    runs_per_s: f64,
    list_runs: Summary,
    /// Whether each page listed was the newest runs, newest first.
    list_runs_newest_first: bool,
    report_newest: Summary,
    report_oldest: Summary,
    submit: Summary,
    /// The same, as the `abfleet` process, end to end.
    cli: CliTimes,
    load_avg_start: Option<f64>,
    load_avg_end: Option<f64>,
    store_bytes: u64,
    target_ms_max: f64,
    target_met: Option<bool>,
}

/// The operations as `abfleet` commands, each run end to end.
#[derive(Serialize, Clone, Copy)]
struct CliTimes {
    runs: Summary,
    /// `null` when the measured binary has no `--all` (one from before it).
    runs_all: Option<Summary>,
    report_newest: Summary,
    report_oldest: Summary,
    submit: Summary,
}

/// Times each CLI operation is run.
const CLI_TIMES: usize = 5;

pub async fn run(args: StoreArgs) -> Result<i32, Failure> {
    let load_avg_start = load_avg();
    let exe = measured_binary(args.coordinator_bin.as_deref())?;
    let fleet = SimFleet::start(&exe, 4, 2, 100).await?;
    let control = fleet.control.clone();
    let spec = synthetic::spec("bench-ingest", 2, Some(GENERATION));
    let (mut run_ids, fill_seconds) = fill(&fleet, &spec, args.runs).await?;
    // The newest and the oldest of the finished runs.
    let (newest_run, oldest_run) = (run_ids[args.runs - 1], run_ids[0]);

    let timed =
        |samples: &mut Vec<f64>, started: Instant| samples.push(started.elapsed().as_secs_f64());
    let (mut list, mut newest, mut oldest, mut submits) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut newest_first = true;
    for _ in 0..20 {
        let t = Instant::now();
        let page = control
            .runs(PageRequest::default(), false)
            .await
            .map_err(|err| anyhow::anyhow!("list runs: {err}"))
            .infra()?;
        timed(&mut list, t);
        // Whether the first page is the newest runs, newest first, the run submitted last on
        // it (an abfleet before this benchmark's fix listed the oldest first).
        let newest_submitted = run_ids.last();
        let descending = page
            .items
            .windows(2)
            .all(|w| w[0].created_ms >= w[1].created_ms);
        newest_first &= descending
            && page
                .items
                .iter()
                .any(|r| Some(&r.run_id) == newest_submitted);
        for (run_id, samples) in [(&newest_run, &mut newest), (&oldest_run, &mut oldest)] {
            let t = Instant::now();
            control
                .report_json(run_id)
                .await
                .map_err(|err| anyhow::anyhow!("get report: {err}"))
                .infra()?;
            timed(samples, t);
        }
        let t = Instant::now();
        run_ids.push(submit(&control, &spec).await?);
        timed(&mut submits, t);
    }
    let cli = cli_times(
        &exe,
        &fleet.url,
        &newest_run.to_string(),
        &oldest_run.to_string(),
    )?;
    let summary = |s: &[f64]| Summary::of(s).expect("20 samples");
    let (list_runs, report_newest, report_oldest, submit_s) = (
        summary(&list),
        summary(&newest),
        summary(&oldest),
        summary(&submits),
    );
    // The target is what a user waits for: the commands, end to end.
    let worst_ms = [cli.runs, cli.report_newest, cli.report_oldest, cli.submit]
        .iter()
        .map(|s| s.median_s * 1e3)
        .fold(0.0, f64::max);
    let bench = StoreBench {
        bench: "store",
        smoke: args.smoke,
        runs: args.runs,
        fill_seconds,
        runs_per_s: args.runs as f64 / fill_seconds,
        list_runs,
        list_runs_newest_first: newest_first,
        report_newest,
        report_oldest,
        submit: submit_s,
        cli,
        load_avg_start,
        load_avg_end: load_avg(),
        store_bytes: dir_bytes(fleet.data.path()),
        target_ms_max: OPERATION_MS_TARGET,
        target_met: (args.runs >= 10_000).then_some(worst_ms < OPERATION_MS_TARGET),
    };
    print_table(&bench);
    super::summary::print_json_line(&bench)
}

/// Submits `runs` runs of `spec`, at most `IN_FLIGHT` ahead of the simulated agents, and
/// waits for all of them to finish: their ids, oldest first, and how long it took.
async fn fill(
    fleet: &SimFleet,
    spec: &abfleet_core::spec::JobSpec,
    runs: usize,
) -> Result<(Vec<RunId>, f64), Failure> {
    let started = Instant::now();
    let mut run_ids = Vec::with_capacity(runs);
    for i in 0..runs {
        run_ids.push(submit(&fleet.control, spec).await?);
        let submitted = i + 1;
        wait_for(
            Duration::from_secs(600),
            "the simulated agents to keep up",
            || (fleet.ingest_jobs_finished() + IN_FLIGHT >= submitted).then_some(()),
        )
        .await?;
        if let Some(error) = fleet.first_error() {
            return Err(Failure::infra(anyhow::anyhow!(
                "a simulated agent failed: {error}"
            )));
        }
        if submitted % 1000 == 0 {
            eprintln!("{submitted} runs stored");
        }
    }
    wait_for(Duration::from_secs(600), "every run to finish", || {
        (fleet.ingest_jobs_finished() >= runs).then_some(())
    })
    .await?;
    let fill_seconds = started.elapsed().as_secs_f64();
    Ok((run_ids, fill_seconds))
}

/// The figures as a table, then the verdict on the target.
fn print_table(bench: &StoreBench) {
    println!(
        "{:<50} {:>6} {:>11} {:>11} {:>11}",
        "what", "n", "median", "min", "max"
    );
    let list_label = if bench.list_runs_newest_first {
        "ListRuns, first page of 200: the newest (gRPC)"
    } else {
        "ListRuns, first page of 200: NOT the newest (gRPC)"
    };
    let rows = [
        (list_label, Some(bench.list_runs)),
        (
            "GetReport of the newest run (gRPC)",
            Some(bench.report_newest),
        ),
        (
            "GetReport of the oldest run (gRPC)",
            Some(bench.report_oldest),
        ),
        ("SubmitRun (gRPC)", Some(bench.submit)),
        ("`abfleet runs`", Some(bench.cli.runs)),
        ("`abfleet runs --all`", bench.cli.runs_all),
        ("`abfleet report NEWEST`", Some(bench.cli.report_newest)),
        ("`abfleet report OLDEST`", Some(bench.cli.report_oldest)),
        ("`abfleet submit SPEC`", Some(bench.cli.submit)),
    ];
    for (what, s) in rows.into_iter().filter_map(|(w, s)| s.map(|s| (w, s))) {
        println!(
            "{what:<50} {:>6} {:>9.1}ms {:>9.1}ms {:>9.1}ms",
            s.n,
            s.median_s * 1e3,
            s.min_s * 1e3,
            s.max_s * 1e3
        );
    }
    println!(
        "{} runs stored in {:.1} s ({:.0} runs/s), store {:.1} MiB (target: each operation < {OPERATION_MS_TARGET} ms at 10,000 runs: {})",
        bench.runs,
        bench.fill_seconds,
        bench.runs_per_s,
        bench.store_bytes as f64 / (1024.0 * 1024.0),
        match bench.target_met {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not judged: fewer than 10,000 runs",
        }
    );
}

/// The operations as `abfleet` commands against the coordinator at `url`, `CLI_TIMES` each.
fn cli_times(exe: &Path, url: &str, newest: &str, oldest: &str) -> Result<CliTimes, Failure> {
    let spec_dir = tempfile::tempdir().infra()?;
    let spec_path = spec_dir.path().join("bench-ingest.toml");
    std::fs::write(
        &spec_path,
        synthetic::spec_toml("bench-ingest", 2, Some(GENERATION)),
    )
    .infra()?;
    let spec_path = spec_path.to_string_lossy().to_string();
    let times = |args: &[&str]| -> Result<Summary, Failure> {
        let mut seconds = Vec::with_capacity(CLI_TIMES);
        for _ in 0..CLI_TIMES {
            let mut all = args.to_vec();
            all.extend(["--coordinator", url]);
            seconds.push(cli_seconds(exe, &all)?);
        }
        Ok(Summary::of(&seconds).expect("CLI_TIMES >= 1"))
    };
    Ok(CliTimes {
        runs: times(&["runs"])?,
        runs_all: times(&["runs", "--all"]).ok(),
        report_newest: times(&["report", newest])?,
        report_oldest: times(&["report", oldest])?,
        submit: times(&["submit", &spec_path])?,
    })
}
