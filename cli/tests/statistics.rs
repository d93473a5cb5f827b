//! The paired statistics as a run applies them: every cell carries its interval, verdict,
//! pair count, seed and run order; the seed replays the order; adaptive runs stop at their
//! bounds; an A/A calibration is recorded and shown next to later speedups.

mod support;

use std::path::Path;
use std::process::Command;

use abfleet_core::paired::{self, Order, StopReason, Verdict};
use abfleet_core::report::Report;
use support::*;

fn local(dir: &Path, spec: &Path, extra: &[&str]) -> Report {
    let out = dir.join("out");
    let output = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .current_dir(dir)
        .args([
            "local",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        output.status.code().is_some_and(|c| c == 0),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Report::from_json(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

#[test]
fn every_cell_carries_interval_verdict_pairs_and_a_seed_that_replays_its_order() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = |seed: u64, name: &str| {
        let text = SpecOptions {
            workloads: &["psnr", "float_ssim"],
            runs: 8,
            ..SpecOptions::path()
        }
        .render()
        .replace("[measure]\n", &format!("[measure]\nseed = {seed}\n"));
        let path = tmp.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let first_dir = tmp.path().join("first");
    let again_dir = tmp.path().join("again");
    let other_dir = tmp.path().join("other");
    for dir in [&first_dir, &again_dir, &other_dir] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let first = local(&first_dir, &spec(42, "a.toml"), &[]);
    let again = local(&again_dir, &spec(42, "b.toml"), &[]);
    let other = local(&other_dir, &spec(43, "c.toml"), &[]);
    assert_eq!(first.seed, 42);
    for cell in &first.cells {
        assert_eq!(cell.pairs, 8);
        assert_eq!(cell.run_order.len(), 8);
        let upstream_first = cell
            .run_order
            .iter()
            .filter(|o| **o == Order::UpstreamFirst)
            .count();
        assert_eq!(upstream_first, 4, "balanced: {:?}", cell.run_order);
        let [lo, hi] = cell.speedup_ci95.expect("an interval");
        assert!(
            lo <= cell.speedup.unwrap() && cell.speedup.unwrap() <= hi,
            "{lo} {hi} {:?}",
            cell.speedup
        );
        assert!(cell.verdict.is_some() && cell.p_value.is_some());
        assert_eq!(cell.stop_reason, StopReason::NotAdaptive);
    }
    let orders = |r: &Report| {
        r.cells
            .iter()
            .map(|c| c.run_order.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        orders(&first),
        orders(&again),
        "the same seed gives the same orders"
    );
    assert_ne!(
        orders(&first),
        orders(&other),
        "another seed gives other orders"
    );
    assert_ne!(
        first.cells[0].run_order, first.cells[1].run_order,
        "cells get their own orders"
    );
    // The recorded per-cell seed is what generates its order.
    for cell in &first.cells {
        assert_eq!(paired::run_order(cell.seed, 8), cell.run_order);
    }
    // The fork's float_ssim is ~4x faster: with 8 pairs that is a clear verdict.
    let float_ssim = first
        .cells
        .iter()
        .find(|c| c.workload == "float_ssim")
        .unwrap();
    assert_eq!(float_ssim.verdict, Some(Verdict::Faster), "{float_ssim:?}");
}

#[test]
fn adaptive_runs_stop_at_their_bounds() {
    let tmp = tempfile::tempdir().unwrap();
    let text = SpecOptions {
        workloads: &["psnr", "motion"],
        runs: 3,
        ..SpecOptions::path()
    }
    .render()
    .replace("max_runs = 3\n", "max_runs = 9\nmax_cell_seconds = 120\n");
    let spec = tmp.path().join("adaptive.toml");
    std::fs::write(&spec, text).unwrap();
    let report = local(tmp.path(), &spec, &[]);
    for cell in &report.cells {
        assert!(cell.pairs >= 3 && cell.pairs <= 9, "{}", cell.pairs);
        assert_eq!(cell.run_order.len() as u32, cell.pairs);
        match cell.stop_reason {
            StopReason::Decided => assert_ne!(cell.verdict, Some(Verdict::Unsure)),
            StopReason::MaxPairs => assert_eq!(cell.pairs, 9),
            other => panic!("unexpected stop reason {other:?}"),
        }
    }
    // A time bound that is already spent stops a cell after its first `runs` pairs.
    let text = SpecOptions {
        workloads: &["psnr"],
        runs: 3,
        ..SpecOptions::path()
    }
    .render()
    .replace(
        "max_runs = 3\n",
        "max_runs = 40\nmax_cell_seconds = 0.001\n",
    );
    let dir = tmp.path().join("timed-out");
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("spent.toml");
    std::fs::write(&spec, text).unwrap();
    let report = local(&dir, &spec, &[]);
    let cell = &report.cells[0];
    assert_eq!(cell.pairs, 3);
    assert!(
        matches!(
            cell.stop_reason,
            StopReason::MaxSeconds | StopReason::Decided
        ),
        "{:?}",
        cell.stop_reason
    );
}

#[test]
fn calibrate_records_the_hosts_resolution_and_later_reports_show_it() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = SpecOptions {
        workloads: &["float_ssim"],
        runs: 4,
        max_runs: Some(7),
        ..SpecOptions::path()
    }
    .write(tmp.path(), "spec.toml");
    let output = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .current_dir(tmp.path())
        .args([
            "calibrate",
            spec.to_str().unwrap(),
            "--trials",
            "6",
            "--out",
            "calibration",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("false-positive rate"), "{stdout}");
    let saved = tmp.path().join("abfleet-out/.agent/calibration.json");
    let calibration: abfleet_core::calibration::Calibration =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(calibration.trials, 6);
    // Each trial ran at the spec's adaptive bounds, 4 to 7 pairs, as a normal run would.
    let (min, max) = (
        calibration.pairs_min.unwrap(),
        calibration.pairs_max.unwrap(),
    );
    assert!(4 <= min && min <= max && max <= 7, "{calibration:?}");
    assert!(f64::from(min) <= calibration.pairs && calibration.pairs <= f64::from(max));
    let aa = Report::from_json(
        &std::fs::read_to_string(tmp.path().join("calibration/report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (aa.runs, aa.max_runs),
        (4, 7),
        "the A/A run kept the bounds"
    );
    // How fine it resolves depends on the host's noise (over 100% on a loaded 2-core host
    // with this tiny cell), so only its being a measured, positive number is asserted.
    assert!(
        calibration.resolution.is_finite() && calibration.resolution > 0.0,
        "{calibration:?}"
    );
    // A/A: the calibration ran the same build on both sides.
    assert_eq!(
        aa.upstream.build.as_ref().unwrap().cache_key,
        aa.fork.build.as_ref().unwrap().cache_key
    );
    // The next run from the same work dir shows the resolution next to every speedup.
    let report = local(tmp.path(), &spec, &[]);
    assert_eq!(
        report.calibration.as_ref().unwrap().resolution,
        calibration.resolution
    );
    assert!(report
        .cells
        .iter()
        .all(|c| c.host_resolution == Some(calibration.resolution)));
    let markdown = std::fs::read_to_string(tmp.path().join("out/report.md")).unwrap();
    assert!(markdown.contains("host resolves ±"), "{markdown}");
}

/// Pins the A/A calibration that could not fail: with `max_runs` = `runs` = 5 no trial could
/// reach p < 0.05 (the smallest two-sided p of 5 pairs is 0.0625), so its false-positive
/// rate was 0% by construction.
#[test]
fn calibrate_refuses_a_max_runs_too_small_for_a_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = SpecOptions {
        workloads: &["float_ssim"],
        runs: 5,
        max_runs: Some(5),
        ..SpecOptions::path()
    }
    .write(tmp.path(), "spec.toml");
    let output = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .current_dir(tmp.path())
        .args(["calibrate", spec.to_str().unwrap(), "--trials", "6"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("[measure] max_runs = 5")
            && stderr.contains("raise `[measure] max_runs` to 6 or more"),
        "{stderr}"
    );
    assert!(
        !tmp.path().join("abfleet-out").exists(),
        "refused before running anything"
    );
}
