use super::*;
use crate::cell::CellParity;
use crate::report::samples::{cell_summary as cell, snapshot, steady_cell as steady};

#[test]
fn a_slower_fork_a_shrunk_speedup_and_a_grown_delta_are_flagged_noise_is_not() {
    let then = snapshot(
        "r1",
        "s",
        "aaa",
        vec![cell("psnr", 2.0, [1.9, 2.1], [1.0, 1.01, 1.02], 0.0)],
    );
    // Overlapping fork ranges and intervals, a delta inside half a printed unit: nothing.
    let same = snapshot(
        "r2",
        "s",
        "aaa",
        vec![cell("psnr", 1.98, [1.88, 2.05], [1.0, 1.015, 1.03], 2e-7)],
    );
    let since = since_previous(&same, std::slice::from_ref(&then)).unwrap();
    assert!(since.flags.is_empty(), "{:?}", since.flags);
    assert!(since.changes.is_empty());
    assert_eq!(since.matched_cells, 1);
    // Every fork run slower, the interval below, the delta up by 3e-6.
    let worse = snapshot(
        "r3",
        "s",
        "bbb",
        vec![cell("psnr", 1.5, [1.4, 1.6], [1.3, 1.31, 1.33], 3e-6)],
    );
    let since = since_previous(&worse, std::slice::from_ref(&then)).unwrap();
    let kinds: Vec<FlagKind> = since.flags.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            FlagKind::SpeedupShrank,
            FlagKind::ForkSlower,
            FlagKind::ParityGrowth
        ]
    );
    let growth = &since.flags[2];
    assert_eq!((growth.then, growth.now), (0.0, 3e-6));
    assert_eq!(growth.allowed, Some(0.5e-6));
    assert_eq!(growth.then_run.as_deref(), Some("r1"));
    assert!(
        since.changes[0].starts_with("fork `main` (aaa)"),
        "{:?}",
        since.changes
    );
    // No earlier run, or none with any of the cells: nothing to compare with.
    assert!(since_previous(&worse, &[]).is_none());
    let other = snapshot(
        "r0",
        "s",
        "aaa",
        vec![steady("motion", 0.0, CellParity::Ok)],
    );
    assert!(since_previous(&worse, &[other]).is_none());
}

#[test]
fn the_ratchet_allows_half_a_unit_of_the_printed_precision() {
    let at = |decimals: Option<u32>, delta: f64| {
        let mut c = steady("psnr", delta, CellParity::Ok);
        c.printed_decimals = decimals;
        c
    };
    let grows = |then: CellSummary, now: CellSummary| !ratchet(&now, &then).0.is_empty();
    // Six decimals: 4e-7 more is rounding; 6e-7 more is growth.
    assert!(!grows(at(Some(6), 1e-6), at(Some(6), 1.4e-6)));
    assert!(grows(at(Some(6), 1e-6), at(Some(6), 1.6e-6)));
    // `--precision max` (15 decimals here): a growth of 1e-9 is far past half a unit.
    assert!(grows(at(Some(15), 1e-6), at(Some(15), 1.001e-6)));
    // The coarser side sets the slack; unknown is six decimals.
    assert!(!grows(at(Some(15), 1e-6), at(Some(6), 1.001e-6)));
    assert!(!grows(at(None, 1e-6), at(None, 1.4e-6)));
    assert_eq!(ratchet_slack(Some(6), Some(17)), 0.5e-6);
    assert_eq!(ratchet_slack(None, None), 0.5e-6);
    assert_eq!(ratchet_slack(Some(15), None), 0.5e-15);
    // Shrinking by more than the slack is recorded.
    let (flags, shrunk) = ratchet(&at(Some(6), 1e-6), &at(Some(6), 4e-6));
    assert!(flags.is_empty());
    assert_eq!(shrunk.len(), 1);
    assert_eq!((shrunk[0].then, shrunk[0].now), (4e-6, 1e-6));
}

#[test]
fn the_ratchet_walks_back_past_a_run_whose_cell_failed_parity_to_the_accepted_delta() {
    let accepted = snapshot("r1", "s", "a", vec![steady("psnr", 0.0, CellParity::Ok)]);
    // r2's growth failed parity (the ratchet): its delta was not accepted.
    let failed = snapshot("r2", "s", "b", vec![steady("psnr", 3e-6, CellParity::Fail)]);
    let now = snapshot("r3", "s", "c", vec![steady("psnr", 3e-6, CellParity::Ok)]);
    let since = since_previous(&now, &[failed.clone(), accepted.clone()]).unwrap();
    assert_eq!(
        since.run_id, "r2",
        "the speed is compared with the latest run"
    );
    let growth: Vec<&RegressionFlag> = since
        .flags
        .iter()
        .filter(|f| f.kind == FlagKind::ParityGrowth)
        .collect();
    assert_eq!(growth.len(), 1, "{:?}", since.flags);
    assert_eq!(growth[0].then_run.as_deref(), Some("r1"));
    assert_eq!((growth[0].then, growth[0].now), (0.0, 3e-6));

    // A delta that shrank against the accepted one is recorded with that run.
    let accepted = snapshot("r1", "s", "a", vec![steady("psnr", 4e-6, CellParity::Ok)]);
    let now = snapshot("r3", "s", "c", vec![steady("psnr", 1e-6, CellParity::Ok)]);
    let since = since_previous(&now, &[failed, accepted]).unwrap();
    assert!(since.flags.is_empty(), "{:?}", since.flags);
    assert_eq!(since.parity_shrink.len(), 1);
    assert_eq!(since.parity_shrink[0].then_run.as_deref(), Some("r1"));
}

#[test]
fn each_cell_is_compared_with_the_latest_run_that_has_it_and_bisect_steps_are_skipped() {
    let full = snapshot(
        "r1",
        "s",
        "a",
        vec![
            steady("psnr", 0.0, CellParity::Ok),
            cell("motion", 2.0, [1.9, 2.1], [1.0, 1.0, 1.0], 0.0),
        ],
    );
    // r2 stopped before motion (its cell unavailable): it must not hide r1's motion.
    let mut partial_motion = steady("motion", 0.0, CellParity::Unavailable);
    partial_motion.speedup = None;
    let partial = snapshot(
        "r2",
        "s",
        "a",
        vec![steady("psnr", 0.0, CellParity::Ok), partial_motion],
    );
    // A bisect step of the same name is never a comparable run.
    let mut bisect = snapshot(
        "r2b",
        "s",
        "a",
        vec![cell("motion", 1.0, [0.99, 1.01], [1.0, 1.0, 1.0], 0.0)],
    );
    bisect.trigger = BISECT_TRIGGER.into();
    let now = snapshot(
        "r3",
        "s",
        "b",
        vec![
            steady("psnr", 0.0, CellParity::Ok),
            cell("motion", 1.2, [1.1, 1.3], [1.6, 1.6, 1.6], 0.0),
        ],
    );
    let since = since_previous(&now, &[bisect, partial, full]).unwrap();
    assert_eq!(since.run_id, "r2");
    assert_eq!(since.matched_cells, 2);
    assert_eq!(since.earlier_runs.len(), 1, "{since:#?}");
    assert_eq!(since.earlier_runs[0].run_id, "r1");
    assert_eq!(since.earlier_runs[0].cells, ["tiny/motion"]);
    let motion: Vec<&RegressionFlag> = since
        .flags
        .iter()
        .filter(|f| f.workload == "motion")
        .collect();
    assert_eq!(motion.len(), 2, "{motion:?}");
    assert!(motion.iter().all(|f| f.then_run.as_deref() == Some("r1")));
}

#[test]
fn changes_name_the_baseline_the_spec_the_toolchains_and_a_driver_on_the_same_hardware() {
    let mut then = snapshot("r1", "s1", "a", vec![steady("psnr", 0.0, CellParity::Ok)]);
    then.hardware_id = Some("h".into());
    then.host_toolchain = [
        ("nvcc".to_string(), "release 12.4".to_string()),
        ("nvidia-driver".to_string(), "545.23.08".to_string()),
    ]
    .into();
    then.comparable_spec_sha256 = "1".repeat(64);
    let mut now = then.clone();
    now.run_id = "r2".into();
    now.silicon_id = Some("s2".into());
    now.host_toolchain
        .insert("nvidia-driver".into(), "550.54.15".into());
    now.upstream_requested = "v3.3.0".into();
    now.upstream_commit = Some("u2".into());
    // Only the revs moved: the comparable spec hash is the same.
    let since = since_previous(&now, &[then.clone()]).unwrap();
    assert_eq!(
        since.changes,
        [
            "upstream `v3.2.0` (u) → `v3.3.0` (u2)",
            "host toolchain `nvidia-driver`: `545.23.08` → `550.54.15`",
            "silicon id `s1` → `s2` (same hardware: a GPU driver or runtime changed)",
        ]
    );
    let moved = since.baseline_moved.as_ref().unwrap();
    assert_eq!(moved.line(), "upstream `v3.2.0` → `v3.3.0`");
    // A spec that measures something else says so.
    now.comparable_spec_sha256 = "2".repeat(64);
    let since = since_previous(&now, &[then]).unwrap();
    assert!(
        since
            .changes
            .iter()
            .any(|c| c.starts_with("spec 111111111111 → 222222222222")),
        "{:?}",
        since.changes
    );
}

#[test]
fn history_compares_each_point_with_the_one_before_of_the_same_spec_and_hardware() {
    let points = history_points(
        &[
            (
                "m".into(),
                snapshot(
                    "r1",
                    "a",
                    "c1",
                    vec![cell("psnr", 2.0, [1.9, 2.1], [1.0, 1.0, 1.0], 0.0)],
                ),
            ),
            // Other hardware, much slower: not compared with r1.
            (
                "m".into(),
                snapshot(
                    "r2",
                    "b",
                    "c1",
                    vec![cell("psnr", 1.0, [0.9, 1.1], [3.0, 3.0, 3.0], 0.0)],
                ),
            ),
            // Another spec on the same hardware: its own series.
            (
                "m bisect".into(),
                snapshot(
                    "r2c",
                    "a",
                    "c1",
                    vec![cell("psnr", 1.0, [0.99, 1.01], [3.0, 3.0, 3.0], 0.0)],
                ),
            ),
            (
                "m".into(),
                snapshot(
                    "r3",
                    "a",
                    "c2",
                    vec![
                        cell("psnr", 1.5, [1.4, 1.6], [1.3, 1.3, 1.3], 0.0),
                        cell("motion", 1.0, [1.0, 1.0], [1.0, 1.0, 1.0], 0.0),
                    ],
                ),
            ),
        ],
        "psnr",
        None,
    );
    assert_eq!(points.len(), 4);
    assert!(
        points[1].flags.is_empty(),
        "r2 has no earlier point on hardware b"
    );
    assert!(points[2].flags.is_empty(), "another spec's first point");
    assert_eq!(
        points[3].flags.len(),
        2,
        "r3 against r1: {:?}",
        points[3].flags
    );
    // A bisect step is never a point.
    let mut step = snapshot("r4", "a", "c3", vec![steady("psnr", 0.0, CellParity::Ok)]);
    step.trigger = BISECT_TRIGGER.into();
    assert!(history_points(&[("m".into(), step)], "psnr", None).is_empty());
}

#[test]
fn a_ratchet_growth_fails_the_cell_its_generation_and_the_run_with_both_values() {
    let mut report = crate::report::samples::sample_report();
    assert_eq!(report.exit_code, crate::exit::OK);
    let psnr = report
        .cells
        .iter()
        .find(|c| c.workload == "psnr")
        .unwrap()
        .clone();
    assert_eq!(psnr.parity, CellParity::Ok);
    let geomean_before = report.geomean_cells.len();
    let key = report.generations[0].key.clone();
    report.generations[0].since_previous = Some(SincePrevious {
        run_id: "r1".into(),
        date: "2026-12-01".into(),
        changes: Vec::new(),
        baseline_moved: None,
        fork_commit_then: None,
        fork_commit_now: None,
        matched_cells: 1,
        earlier_runs: Vec::new(),
        flags: vec![RegressionFlag {
            fixture: psnr.fixture.clone(),
            workload: "psnr".into(),
            backend: None,
            kind: FlagKind::ParityGrowth,
            metric: Some("psnr_y".into()),
            then: 1e-6,
            now: 3e-6,
            then_run: Some("r0".into()),
            allowed: Some(1.5e-6),
            detail: String::new(),
        }],
        parity_shrink: Vec::new(),
    });
    // A metric with its own allowance is gated by it alone: no ratchet failure.
    let mut allowed = report.clone();
    allowed.allowances.insert(
        "psnr_y".into(),
        crate::spec::Allowance {
            max_delta: Some(1e-5),
            max_frame_delta: None,
            reason: "the new psnr rounding (fork PR #1)".into(),
        },
    );
    apply_ratchet(&mut allowed);
    assert_ne!(
        allowed.score_parity,
        crate::report::ScoreParity::Fail,
        "nothing failed"
    );
    assert!(allowed.cells.iter().all(|c| c.parity_failures.is_empty()));
    apply_ratchet(&mut report);
    let cell = report.cells.iter().find(|c| c.workload == "psnr").unwrap();
    assert_eq!(cell.parity, CellParity::Fail);
    let failure = cell.parity_failures.last().unwrap();
    assert_eq!(failure.rule, crate::parity::ParityRule::Ratchet);
    assert_eq!((failure.delta, failure.allowed), (3e-6, 1.5e-6));
    assert!(
        failure
            .message
            .contains("grew from 1.00e-6 (accepted in run r0) to 3.00e-6"),
        "{}",
        failure.message
    );
    assert!(
        failure
            .message
            .contains("`[parity.allow.psnr_y]` with the reason"),
        "the message says how a deliberate change is accepted: {}",
        failure.message
    );
    // The exit codes follow from these when the report is built (`build`'s tests).
    assert_eq!(report.score_parity, crate::report::ScoreParity::Fail);
    assert_eq!(
        report.generations[0].score_parity,
        crate::report::ScoreParity::Fail
    );
    assert_eq!(report.generations[0].key, key);
    assert!(report
        .score_parity_report
        .iter()
        .any(|l| l.contains("psnr_y")));
    assert!(report.geomean_cells.len() < geomean_before);
    // Applied twice (a report read again), the failure is not repeated.
    apply_ratchet(&mut report);
    let cell = report.cells.iter().find(|c| c.workload == "psnr").unwrap();
    assert_eq!(
        cell.parity_failures
            .iter()
            .filter(|f| f.rule == crate::parity::ParityRule::Ratchet)
            .count(),
        1
    );
}

#[test]
fn shrinks_written_before_they_named_their_run_still_read() {
    let old: Vec<ParityShrink> =
        serde_json::from_str(r#"[["tiny/psnr", "psnr_y", 4e-6, 1e-6]]"#).unwrap();
    assert_eq!(old[0].fixture, "tiny");
    assert_eq!(old[0].workload, "psnr");
    assert_eq!(old[0].then_run, None);
    let now = serde_json::to_string(&old).unwrap();
    let back: Vec<ParityShrink> = serde_json::from_str(&now).unwrap();
    assert_eq!(back, old);
}
