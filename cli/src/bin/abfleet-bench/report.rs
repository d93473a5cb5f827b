//! `abfleet-bench report`: assembling the report of a run with many cells (10,000 by default:
//! 5 generations × 100 fixtures × 20 workloads) in this process, as the coordinator does once
//! when a run finishes (`core::report::build` over decoded events), then report.json
//! and report.md. Also report.json's bytes per cell, which stay flat when the report holds
//! each cell once. What a user waits for — the events stored through a real coordinator, then
//! `GetReport` — is `abfleet-bench fleet --jobs 1 --events-per-job 10000`.

use std::time::Instant;

use abfleet_core::events::{JobEventPayload, JobOutcome};
use abfleet_core::lifecycle::{JobState, RunState};
use abfleet_core::report::{build, JobRecord, ReportInputs, RunRecord};
use abfleet_render::render_markdown;
use serde::Serialize;

use super::summary::{peak_rss_kib, Summary};
use super::synthetic;
use crate::failure::Failure;

/// The target: the report of a 10,000-cell run assembled in under a second.
pub const ASSEMBLE_S_TARGET: f64 = 1.0;

pub struct ReportArgs {
    pub smoke: bool,
    pub cells: u32,
    pub generations: u32,
    pub runs: u32,
}

impl ReportArgs {
    pub fn new(
        smoke: bool,
        cells: Option<u32>,
        generations: Option<u32>,
        runs: Option<u32>,
    ) -> ReportArgs {
        ReportArgs {
            smoke,
            cells: cells.unwrap_or(if smoke { 200 } else { 10_000 }).max(1),
            generations: generations.unwrap_or(5).max(1),
            runs: runs.unwrap_or(if smoke { 2 } else { 5 }).max(1),
        }
    }
}

#[derive(Serialize)]
struct ReportBench {
    bench: &'static str,
    smoke: bool,
    cells: u32,
    generations: u32,
    assemble: Summary,
    json: Summary,
    markdown: Summary,
    json_bytes: usize,
    json_bytes_per_cell: f64,
    peak_rss_kib: Option<u64>,
    target_s_max: f64,
    target_met: Option<bool>,
}

/// One run's records: each generation's job with its share of the cells, then done.
fn records(args: &ReportArgs) -> (RunRecord, Vec<JobRecord>) {
    let per_generation = args.cells.div_ceil(args.generations);
    let spec = synthetic::spec("bench-report", per_generation, None);
    let jobs = (0..args.generations)
        .map(|g| {
            let mut events: Vec<JobEventPayload> = (0..per_generation)
                .map(|i| synthetic::cell_event(&spec, i))
                .collect();
            events.push(JobEventPayload::Done {
                outcome: JobOutcome::Completed,
                error: None,
            });
            JobRecord {
                job_id: format!("00000000-0000-0000-0000-{g:012}"),
                generation: Some(format!("cpu/x86-64-v4/bench{g}")),
                state: JobState::Done,
                attempt: 1,
                agent_id: Some(format!("agent-{g}")),
                error: None,
                events,
                attempts: Vec::new(),
                kept_cells: Vec::new(),
            }
        })
        .collect();
    let run = RunRecord {
        run_id: "00000000-0000-0000-0000-00000000beef".into(),
        trigger: "manual".into(),
        trigger_note: None,
        created_ms: 0,
        state: RunState::Done,
        spec,
        error: None,
    };
    (run, jobs)
}

pub fn run(args: ReportArgs) -> Result<i32, Failure> {
    let (run, jobs) = records(&args);
    let cells = run.spec.cell_count() as u32 * args.generations;
    let (mut assemble_s, mut json_s, mut markdown_s) = (Vec::new(), Vec::new(), Vec::new());
    let mut json_bytes = 0;
    for _ in 0..args.runs {
        // The coordinator hands assembly the records it decoded; a copy of them, made
        // outside the timing, stands in for that.
        let inputs = ReportInputs::own(run.clone(), jobs.clone());
        let started = Instant::now();
        let report = build(inputs);
        assemble_s.push(started.elapsed().as_secs_f64());
        assert_eq!(
            report.cells.len() as u32,
            cells,
            "every cell is in the report once"
        );
        let started = Instant::now();
        let json = report.to_json_pretty();
        json_s.push(started.elapsed().as_secs_f64());
        json_bytes = json.len();
        let started = Instant::now();
        let markdown = render_markdown(&report);
        markdown_s.push(started.elapsed().as_secs_f64());
        drop((json, markdown));
    }
    let assemble = Summary::of(&assemble_s).expect("runs >= 1");
    let bench = ReportBench {
        bench: "report",
        smoke: args.smoke,
        cells,
        generations: args.generations,
        assemble,
        json: Summary::of(&json_s).expect("runs >= 1"),
        markdown: Summary::of(&markdown_s).expect("runs >= 1"),
        json_bytes,
        json_bytes_per_cell: json_bytes as f64 / f64::from(cells.max(1)),
        peak_rss_kib: peak_rss_kib(),
        target_s_max: ASSEMBLE_S_TARGET,
        target_met: (cells >= 10_000).then_some(assemble.median_s < ASSEMBLE_S_TARGET),
    };
    println!(
        "{:<44} {:>6} {:>11} {:>11} {:>11}",
        "what", "runs", "median", "min", "max"
    );
    for (what, s) in [
        (
            format!("assemble {cells} cells ({} generations)", args.generations),
            bench.assemble,
        ),
        ("report.json".to_string(), bench.json),
        ("report.md".to_string(), bench.markdown),
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
        "report.json {:.1} MiB, {:.0} bytes per cell (target: assembly < {ASSEMBLE_S_TARGET} s at 10,000 cells: {})",
        json_bytes as f64 / (1024.0 * 1024.0),
        bench.json_bytes_per_cell,
        match bench.target_met {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not judged: fewer than 10,000 cells",
        }
    );
    super::summary::print_json_line(&bench)
}
