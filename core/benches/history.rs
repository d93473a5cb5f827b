//! Criterion benchmark of the comparison a finished run makes with its earlier comparable
//! runs (`abfleet_core::report::history::since_previous`): a generation of 2,000 cells (100
//! fixtures × 20 workloads, each with a pooled delta) against the 64 earlier snapshots the
//! store hands it at most (`COMPARABLE_DEPTH`): every cell found in the newest; most cells
//! found far back (the newer runs covered a part); and half the cells new (no earlier run
//! has them, so every snapshot is searched for each). `cargo
//! bench -p abfleet-core --bench history`; `-- --test` runs each once (CI's smoke). Figures:
//! docs/performance.md.

use std::collections::BTreeMap;

use abfleet_core::cell::CellParity;
use abfleet_core::paired::Verdict;
use abfleet_core::report::history::{since_previous, CellSummary, GenerationSnapshot};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

const FIXTURES: usize = 100;
const WORKLOADS: usize = 20;
const EARLIER: usize = 64;

fn cell(fixture: usize, workload: usize, run: usize) -> CellSummary {
    let speedup = 1.5 + (run % 7) as f64 * 0.01;
    CellSummary {
        fixture: format!("fixture_{fixture}"),
        workload: format!("feature_{workload}"),
        backend: None,
        speedup: Some(speedup),
        speedup_ci95: Some([speedup - 0.02, speedup + 0.02]),
        verdict: Some(Verdict::Faster),
        parity: CellParity::Ok,
        fork_median: Some(0.5),
        fork_min: Some(0.49),
        fork_max: Some(0.52),
        upstream_median: Some(0.75),
        score_delta: BTreeMap::from([("vmaf".to_string(), 1e-6 * (run % 3) as f64)]),
        printed_decimals: Some(6),
    }
}

/// Run `run`'s snapshot; `covered` of every `FIXTURES` fixtures are in it.
fn snapshot(run: usize, covered: usize) -> GenerationSnapshot {
    GenerationSnapshot {
        run_id: format!("run-{run}"),
        date: "2026-12-05".into(),
        trigger: "manual".into(),
        trigger_note: None,
        generation: "cpu/x86-64-v4/zen4".into(),
        spec_sha256: String::new(),
        comparable_spec_sha256: String::new(),
        silicon_id: Some("zen4".into()),
        hardware_id: None,
        fork_requested: "main".into(),
        fork_commit: Some(format!("{run:040x}")),
        upstream_requested: "v3.2.0".into(),
        upstream_commit: Some("b".repeat(40)),
        toolchain: BTreeMap::from([("fork".to_string(), "cc 13".to_string())]),
        host_toolchain: BTreeMap::new(),
        practical_threshold: 0.02,
        cells: (0..covered)
            .flat_map(|f| (0..WORKLOADS).map(move |w| cell(f, w, run)))
            .collect(),
    }
}

fn history(c: &mut Criterion) {
    let now = snapshot(EARLIER, FIXTURES);
    let mut group = c.benchmark_group("since_previous");
    group.sample_size(20);
    // Newest first, as the store hands them: every earlier run has every cell...
    let full: Vec<GenerationSnapshot> = (0..EARLIER).rev().map(|r| snapshot(r, FIXTURES)).collect();
    // ...or the 63 newer runs each covered one fixture, and only the oldest had them all.
    let partial: Vec<GenerationSnapshot> = (0..EARLIER)
        .rev()
        .map(|r| snapshot(r, if r == 0 { FIXTURES } else { 1 }))
        .collect();
    // ...or `now` has as many cells again that no earlier run has (new fixtures).
    let mut grown = now.clone();
    grown.cells.extend(
        (FIXTURES..2 * FIXTURES).flat_map(|f| (0..WORKLOADS).map(move |w| cell(f, w, EARLIER))),
    );
    for (name, now, earlier) in [
        ("newest has every cell", &now, &full),
        ("most cells far back", &now, &partial),
        ("half the cells new", &grown, &full),
    ] {
        assert!(since_previous(now, earlier).is_some());
        group.bench_with_input(
            BenchmarkId::new(name, format!("{} cells x {EARLIER} runs", now.cells.len())),
            earlier,
            |b, earlier| b.iter(|| since_previous(now, earlier)),
        );
    }
    group.finish();
}

criterion_group!(benches, history);
criterion_main!(benches);
