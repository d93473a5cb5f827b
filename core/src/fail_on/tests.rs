use serde_json::json;

use super::*;
use crate::report::history::SincePrevious;
use crate::sweep::SweepSection;

/// The report.json of a real `abfleet local fixtures/jobs/demo-drift.toml` run: psnr and
/// motion slower, float_ssim faster; parity failed (exit 1).
fn drift_report() -> Report {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/reports/demo-drift.json"
    );
    Report::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The drift report as if parity had passed, with no cell slower.
fn clean_report() -> Report {
    let mut report = drift_report();
    report.exit_code = exit::OK;
    for cell in &mut report.cells {
        if cell.verdict == Some(Verdict::Slower) {
            cell.verdict = Some(Verdict::Same);
        }
    }
    report
}

fn since_previous_with_a_flag() -> SincePrevious {
    serde_json::from_value(json!({
        "run_id": "11111111-2222-3333-4444-555555555555",
        "date": "2026-12-01T00:00:00Z",
        "changes": ["fork 1a2b3c4 → 5d6e7f8"],
        "matched_cells": 3,
        "flags": [{
            "fixture": "checker", "workload": "float_ssim", "kind": "speedup_shrank",
            "then": 1.84, "now": 1.41,
            "detail": "speedup 1.84x [1.80, 1.88] → 1.41x [1.38, 1.44]"
        }]
    }))
    .unwrap()
}

fn stale_sweep() -> SweepSection {
    let default = json!({"label": "band=32", "values": {"band": "32"}});
    serde_json::from_value(json!({
        "tunables": [], "strategy": "grid", "grid_size": 2, "default": default,
        "best": null, "runner_up": null, "default_verdict": "stale",
        "verdict_line": "stale: band=64 is faster by 12% [9%, 15%]",
        "configurations": [], "rejected_by_parity": [], "cells": [], "not_tried": [],
        "not_tried_count": 0, "seed": 1, "timing_seconds": 3.0, "tie_tolerance": 0.02
    }))
    .unwrap()
}

#[test]
fn no_gate_asked_keeps_the_reports_own_code() {
    assert_eq!(
        gated_exit_code(&drift_report(), &[]),
        (exit::PARITY_FAILED, vec![])
    );
    let mut slower = drift_report();
    slower.exit_code = exit::OK;
    assert_eq!(gated_exit_code(&slower, &[]), (exit::OK, vec![]));
}

#[test]
fn a_failing_run_keeps_its_code_whatever_the_gates() {
    let (code, why) = gated_exit_code(&drift_report(), &FailOn::ALL);
    assert_eq!(code, exit::PARITY_FAILED);
    assert!(why.is_empty());
}

#[test]
fn slower_cells_exit_5_and_are_named() {
    let mut report = drift_report();
    report.exit_code = exit::OK;
    let (code, why) = gated_exit_code(&report, &[FailOn::Slower]);
    assert_eq!(code, exit::SLOWER);
    assert_eq!(why.len(), 2, "{why:?}");
    assert!(
        why[0].contains("/psnr: the fork is slower, 0.77x"),
        "{why:?}"
    );
    assert!(why[1].contains("/motion: the fork is slower"), "{why:?}");
    // A rejected cell is not measured: it exits 3 on its own, never 5.
    for cell in &mut report.cells {
        cell.rejected = vec!["its summary disagrees with its times".into()];
    }
    assert_eq!(gated_exit_code(&report, &[FailOn::Slower]).0, exit::OK);
    assert_eq!(
        gated_exit_code(&clean_report(), &[FailOn::Slower]).0,
        exit::OK
    );
}

#[test]
fn a_regression_since_the_previous_run_exits_6() {
    let mut report = clean_report();
    assert_eq!(gated_exit_code(&report, &[FailOn::Regression]).0, exit::OK);
    report.generations[0].since_previous = Some(since_previous_with_a_flag());
    let (code, why) = gated_exit_code(&report, &[FailOn::Regression]);
    assert_eq!(code, exit::REGRESSION);
    assert_eq!(why.len(), 1);
    assert!(
        why[0].contains("checker/float_ssim: speedup shrank since run 11111111")
            && why[0].contains("1.84x [1.80, 1.88] → 1.41x"),
        "{why:?}"
    );
}

#[test]
fn a_stale_sweep_default_exits_7() {
    let mut report = clean_report();
    report.generations[0].sweep = Some(stale_sweep());
    let (code, why) = gated_exit_code(&report, &[FailOn::Stale]);
    assert_eq!(code, exit::STALE);
    assert!(why[0].contains("band=64 is faster by 12%"), "{why:?}");
    let mut fine = stale_sweep();
    fine.default_verdict = Some(DefaultVerdict::DefaultBest);
    report.generations[0].sweep = Some(fine);
    assert_eq!(gated_exit_code(&report, &[FailOn::Stale]).0, exit::OK);
}

#[test]
fn several_gates_check_slower_then_regression_then_stale_whatever_the_order_given() {
    let mut report = drift_report();
    report.exit_code = exit::OK;
    report.generations[0].since_previous = Some(since_previous_with_a_flag());
    report.generations[0].sweep = Some(stale_sweep());
    let gates = [
        FailOn::Stale,
        FailOn::Regression,
        FailOn::Slower,
        FailOn::Stale,
    ];
    assert_eq!(gated_exit_code(&report, &gates).0, exit::SLOWER);
    assert_eq!(
        gated_exit_code(&report, &[FailOn::Stale, FailOn::Regression]).0,
        exit::REGRESSION
    );
}

#[test]
fn gates_parse_from_their_names_and_refuse_others_saying_which_exist() {
    assert_eq!("slower".parse::<FailOn>(), Ok(FailOn::Slower));
    let err = "slow".parse::<FailOn>().unwrap_err();
    assert!(err.contains("slower, regression or stale"), "{err}");
}
