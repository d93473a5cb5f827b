//! `abfleet bench store`: a coordinator whose store holds many finished runs (10,000 by
//! default), filled for real: each run submitted over gRPC and finished by simulated agents
//! (`fleet::SimFleet`: two cell events and `done`, so each run leaves a report and its
//! per-generation snapshot). Then what an operator does, each timed 20 times over gRPC as the
//! CLI does it: list the newest page of runs, fetch the report of the newest and of the
//! oldest run, submit a new run.

use std::time::{Duration, Instant};

use abfleet_proto::pb;
use serde::Serialize;

use super::fleet::{dir_bytes, submit, wait_for, SimFleet, GENERATION};
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
}

impl StoreArgs {
    pub fn new(smoke: bool, runs: Option<usize>) -> StoreArgs {
        StoreArgs {
            smoke,
            runs: runs.unwrap_or(if smoke { 40 } else { 10_000 }).max(2),
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
    report_newest: Summary,
    report_oldest: Summary,
    submit: Summary,
    store_bytes: u64,
    target_ms_max: f64,
    target_met: Option<bool>,
}

pub async fn run(args: StoreArgs) -> Result<i32, Failure> {
    let fleet = SimFleet::start(4, 2, 100).await?;
    let mut control = fleet.control.clone();
    let spec = synthetic::spec("bench-ingest", 2, Some(GENERATION));
    let started = Instant::now();
    let mut run_ids = Vec::with_capacity(args.runs);
    for i in 0..args.runs {
        run_ids.push(submit(&mut control, &spec).await?);
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
        (fleet.ingest_jobs_finished() >= args.runs).then_some(())
    })
    .await?;
    let fill_seconds = started.elapsed().as_secs_f64();

    let timed =
        |samples: &mut Vec<f64>, started: Instant| samples.push(started.elapsed().as_secs_f64());
    let (mut list, mut newest, mut oldest, mut submits) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..20 {
        let t = Instant::now();
        let page = control
            .list_runs(pb::ListRunsRequest::default())
            .await
            .map_err(|s| anyhow::anyhow!("list runs: {s}"))
            .infra()?
            .into_inner();
        timed(&mut list, t);
        if page.runs.is_empty() {
            return Err(Failure::infra(anyhow::anyhow!("the store lists no runs")));
        }
        for (run_id, samples) in [
            (run_ids.last(), &mut newest),
            (run_ids.first(), &mut oldest),
        ] {
            let t = Instant::now();
            control
                .get_report(pb::GetReportRequest {
                    run_id: run_id.cloned().unwrap_or_default(),
                })
                .await
                .map_err(|s| anyhow::anyhow!("get report: {s}"))
                .infra()?;
            timed(samples, t);
        }
        let t = Instant::now();
        submit(&mut control, &spec).await?;
        timed(&mut submits, t);
    }
    let summary = |s: &[f64]| Summary::of(s).expect("20 samples");
    let (list_runs, report_newest, report_oldest, submit_s) = (
        summary(&list),
        summary(&newest),
        summary(&oldest),
        summary(&submits),
    );
    let worst_ms = [list_runs, report_newest, report_oldest, submit_s]
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
        report_newest,
        report_oldest,
        submit: submit_s,
        store_bytes: dir_bytes(fleet.data.path()),
        target_ms_max: OPERATION_MS_TARGET,
        target_met: (args.runs >= 10_000).then_some(worst_ms < OPERATION_MS_TARGET),
    };
    println!(
        "{:<44} {:>6} {:>11} {:>11} {:>11}",
        "what", "n", "median", "min", "max"
    );
    for (what, s) in [
        ("list runs (newest page)", list_runs),
        ("report of the newest run", report_newest),
        ("report of the oldest run", report_oldest),
        ("submit a run", submit_s),
    ] {
        println!(
            "{what:<44} {:>6} {:>9.1}ms {:>9.1}ms {:>9.1}ms",
            s.n,
            s.median_s * 1e3,
            s.min_s * 1e3,
            s.max_s * 1e3
        );
    }
    println!(
        "{} runs stored in {:.1} s ({:.0} runs/s), store {:.1} MiB (target: each operation < {OPERATION_MS_TARGET} ms at 10,000 runs: {})",
        args.runs,
        fill_seconds,
        bench.runs_per_s,
        bench.store_bytes as f64 / (1024.0 * 1024.0),
        match bench.target_met {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not judged: fewer than 10,000 runs",
        }
    );
    println!("{}", serde_json::to_string(&bench).unwrap_or_default());
    Ok(0)
}
