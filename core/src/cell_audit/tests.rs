//! Each fabrication issue 23 saw pass, on a cell made the agent's way (`evaluate` over real
//! measurement input) against the demo spec, then edited as a lying agent would.

use super::*;
use crate::cell::{CellInput, MeasuredBy, SideMeasurement};
use crate::paired::{Order, StopReason, Verdict};
use crate::scores::FrameScores;

/// The demo spec with its seed fixed, as the coordinator stores a run's spec (a spec that
/// names no seed gets a random one when it is loaded).
fn spec() -> JobSpec {
    let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
    let mut spec = JobSpec::load(&dir.join("demo.toml")).unwrap();
    spec.measure.seed = 42;
    spec
}

fn side(times: &[f64], psnr: &[f64]) -> SideMeasurement {
    SideMeasurement {
        status: SideStatus::Ok,
        times: times.to_vec(),
        cpu_times: times.to_vec(),
        warmup_times: vec![times[0]],
        scores: Some(Scores {
            frames: psnr
                .iter()
                .enumerate()
                .map(|(i, v)| FrameScores {
                    frame_num: i as u64,
                    metrics: [("psnr_y".to_string(), *v)].into(),
                })
                .collect(),
            printed_decimals: Some(6),
            ..Scores::default()
        }),
        returncode: Some(0),
        error: None,
        stderr_tail: None,
        command: None,
    }
}

/// An honest cell: the fork about 7x faster over 6 pairs, identical scores.
fn honest() -> CellResult {
    let spec = spec();
    let upstream = [7.0, 7.2, 6.9, 7.1, 7.05, 6.95];
    let fork = [1.0, 1.02, 0.99, 1.01, 1.0, 0.98];
    let psnr = [30.1, 31.2, 29.8];
    let mut cell = CellResult::evaluate(
        CellInput {
            index: 0,
            fixture: spec.fixtures[0].name.clone(),
            workload: spec.workloads[0].name.clone(),
            upstream: side(&upstream, &psnr),
            fork: side(&fork, &psnr),
            load_avg_1min: [0.3, 0.4],
            idle_cores: 1.0,
            host_flags: Vec::new(),
            seed: paired::cell_seed(spec.measure.seed, 0),
            run_order: vec![
                Order::UpstreamFirst,
                Order::ForkFirst,
                Order::ForkFirst,
                Order::UpstreamFirst,
                Order::UpstreamFirst,
                Order::ForkFirst,
            ],
            stop_reason: StopReason::NotAdaptive,
            overhead_seconds: Some(0.01),
        },
        &spec,
    );
    cell.measured_by = Some(MeasuredBy {
        agent_id: "a1".into(),
        certificate: Some("bench-7 serial 1f".into()),
    });
    cell
}

fn rejected_for(cell: &CellResult, needle: &str) {
    let problems = rederive(cell, &spec()).expect_err("the fabrication was believed");
    assert!(
        problems.iter().any(|p| p.contains(needle)),
        "`{needle}` not among {problems:?}"
    );
}

#[test]
fn an_honest_cell_is_derived_again_to_the_same_numbers() {
    let cell = honest();
    assert_eq!(cell.verdict, Some(Verdict::Faster));
    assert_eq!(cell.parity, CellParity::Ok);
    let derived = rederive(&cell, &spec()).unwrap();
    assert_eq!(derived, cell);
}

#[test]
fn a_summary_its_own_times_do_not_give_is_rejected() {
    let mut inflated = honest();
    inflated.speedup = Some(1000.0);
    rejected_for(&inflated, "speedup 1000 sent");
    let mut fifty = honest();
    fifty.speedup = Some(50.0);
    fifty.speedup_ci95 = Some([45.0, 55.0]);
    rejected_for(&fifty, "interval low 45 sent");
    let mut verdict = honest();
    verdict.speedup = Some(0.001);
    verdict.verdict = Some(Verdict::Faster);
    rejected_for(&verdict, "speedup 0.001 sent");
    let mut slower = honest();
    slower.verdict = Some(Verdict::Slower);
    rejected_for(&slower, "verdict Some(Slower) sent");
    let mut pairs = honest();
    pairs.pairs = 1000;
    rejected_for(&pairs, "1000 pairs sent, 6 timed");
    let mut median = honest();
    median.fork.median_time = Some(0.007);
    rejected_for(&median, "fork median 0.007 sent");
}

#[test]
fn parity_ok_over_the_gate_is_rejected() {
    let mut cell = honest();
    // The fork's scores moved by 0.5: the agent's own evaluation says `fail`.
    let spec = spec();
    cell.fork.scores = side(&[1.0], &[30.6, 31.7, 30.3]).scores;
    cell.fork.pooled = cell.fork.scores.as_ref().unwrap().pooled_means();
    cell.score_delta.insert("psnr_y".into(), 0.5);
    cell.parity = CellParity::Ok;
    rejected_for(
        &cell,
        "parity `ok` sent, which its own scores against the spec's gates do not give",
    );
    // The same lie with the per-frame scores left out (as for a cell over the size limit).
    for side in [&mut cell.upstream, &mut cell.fork] {
        side.scores.as_mut().unwrap().frames.clear();
    }
    let problems = rederive(&cell, &spec).unwrap_err();
    assert!(
        problems.iter().any(|p| p.contains("over the spec's gate")),
        "{problems:?}"
    );
}

#[test]
fn an_honest_cell_without_its_frames_keeps_its_checked_parity() {
    let mut cell = honest();
    for side in [&mut cell.upstream, &mut cell.fork] {
        side.scores.as_mut().unwrap().frames.clear();
    }
    let derived = rederive(&cell, &spec()).unwrap();
    assert_eq!(derived.parity, CellParity::Ok);
    assert_eq!(derived.score_delta, cell.score_delta);
    assert_eq!(derived.speedup, cell.speedup);
    // A delta its pooled means do not give is caught even so.
    cell.score_delta.insert("psnr_y".into(), 3e-6);
    rejected_for(&cell, "that its pooled means do not give");
}

#[test]
fn values_out_of_physical_range_are_rejected() {
    let mut negative = honest();
    negative.fork.times[0] = -5.0;
    rejected_for(&negative, "fork has a run of -5 s");
    let mut huge = honest();
    huge.upstream.times[2] = 1e300;
    rejected_for(&huge, "upstream has a run of 1e300 s");
    let mut nan = honest();
    nan.fork.cpu_times[1] = f64::NAN;
    rejected_for(&nan, "CPU time of NaN");
    let mut many = honest();
    many.upstream.times = vec![7.0; 1000];
    many.fork.times = vec![1.0; 1000];
    rejected_for(&many, "1000 timed runs; the spec allows at most 12");
    let mut uneven = honest();
    uneven.fork.times.pop();
    rejected_for(&uneven, "timed runs come in pairs");
    let mut load = honest();
    load.fork.load_avg_1min = [f64::INFINITY, 0.0];
    rejected_for(&load, "load average of inf");
    let mut seed = honest();
    seed.seed ^= 1;
    rejected_for(&seed, "is not the cell's seed");
}

#[test]
fn a_cell_that_is_not_one_of_the_specs_is_rejected() {
    let mut renamed = honest();
    renamed.workload = "psnr_but_faster".into();
    rejected_for(&renamed, "is pattern_320x180/psnr in the spec");
    let mut outside = honest();
    outside.index = 8;
    rejected_for(&outside, "not a cell of the spec (8 cells)");
}

#[test]
fn a_rejected_cell_is_not_measured_and_names_who_sent_it() {
    let mut cell = honest();
    cell.speedup = Some(1000.0);
    let problems = rederive(&cell, &spec()).unwrap_err();
    let rejected = reject(cell, problems.clone());
    assert!(rejected.is_unavailable());
    assert_eq!(rejected.speedup, None);
    assert_eq!(rejected.verdict, None);
    assert_eq!(rejected.rejected, problems);
    let reason = rejected.fork.error.as_deref().unwrap();
    assert!(
        reason.contains("rejected by the coordinator from agent a1 (bench-7 serial 1f)"),
        "{reason}"
    );
    // The raw data stays for inspection.
    assert_eq!(rejected.fork.times.len(), 6);
}

#[test]
fn a_refusal_names_what_disagreed_but_not_the_value_its_own_data_gives() {
    let honest = honest();
    let real = rederive(&honest, &spec()).unwrap();
    let mut liar = honest.clone();
    liar.speedup = Some(1000.0);
    liar.fork.median_time = Some(0.001);
    liar.p_value = Some(0.5);
    let problems = rederive(&liar, &spec()).expect_err("the fabrication was believed");
    let text = problems.join("; ");
    for (what, value) in [
        ("speedup", real.speedup),
        ("fork median", real.fork.median_time),
        ("p-value", real.p_value),
    ] {
        assert!(
            text.contains(&format!("{what} ")),
            "{what} not named: {text}"
        );
        let words: Vec<&str> = text
            .split(|c: char| c.is_whitespace() || c == ';' || c == ',')
            .collect();
        assert!(
            !words.contains(&super::shown(value).as_str()),
            "the re-derived {what} is handed over: {text}"
        );
    }
}
