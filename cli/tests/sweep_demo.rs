//! The README's sweep demo itself, `fixtures/jobs/demo-sweep.toml`, as a user runs it: once
//! with `abfleet local`, once through separate `abfleet coordinator`, `abfleet agent` and
//! `abfleet submit --wait` processes. Both build the demo fork at each band height and time
//! it for real; the assertions hold on any host (a verdict, every interval, the planted
//! row stride rejected by parity), never a timing.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use abfleet_core::cell::CellParity;
use abfleet_core::report::Report;
use abfleet_core::sweep::SweepSection;
use support::{abfleet, output_text, KillOnDrop};

fn demo_spec() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/jobs/demo-sweep.toml")
}

/// What the demo must show whatever the host: the whole 3 x 2 grid timed, a default verdict
/// with the best configuration's interval, every configuration's interval, and the three
/// `row_stride=2` configurations rejected by parity and never best.
fn check_demo_report(out: &Path, stdout: &str) -> SweepSection {
    let json = std::fs::read_to_string(out.join("report.json")).expect("report.json is written");
    let report = Report::from_json(&json).unwrap();
    assert!(report.is_sweep);
    assert_eq!(report.exit_code, 0, "{:?}", report.errors);
    assert_eq!(report.generations.len(), 1);
    let sweep = report.generations[0]
        .sweep
        .clone()
        .unwrap_or_else(|| panic!("no sweep section; errors: {:?}", report.errors));
    assert_eq!(sweep.strategy, "grid");
    assert_eq!(sweep.configurations.len(), 6, "{:?}", sweep.configurations);
    assert_eq!(sweep.not_tried_count, 0, "{:?}", sweep.not_tried);
    assert_eq!(sweep.default.label, "ssim_band=0 row_stride=1");
    assert!(sweep.default_verdict.is_some(), "{}", sweep.verdict_line);
    let best = sweep.best.as_ref().expect("a best configuration");
    assert!(
        best.speedup_ci95[0] <= best.speedup && best.speedup <= best.speedup_ci95[1],
        "{best:?}"
    );
    assert_eq!(best.configuration.values["row_stride"], "1", "{best:?}");
    for c in sweep.configurations.iter().filter(|c| !c.is_default) {
        let [lo, hi] = c
            .speedup_ci95
            .unwrap_or_else(|| panic!("no interval: {c:?}"));
        assert!(lo <= hi && c.verdict.is_some() && c.pairs >= 6, "{c:?}");
        let rejected = c.values["row_stride"] == "2";
        let expected = if rejected {
            CellParity::Fail
        } else {
            CellParity::Ok
        };
        assert_eq!(c.parity, expected, "{c:?}");
    }
    assert_eq!(
        sweep.rejected_by_parity,
        [
            "ssim_band=4 row_stride=2",
            "ssim_band=64 row_stride=2",
            "ssim_band=0 row_stride=2"
        ]
    );
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    for needle in [
        "Rejected by parity (never a winner, however fast):",
        "`ssim_band=64 row_stride=2`",
        &sweep.verdict_line,
    ] {
        assert!(markdown.contains(needle), "{needle:?} not in\n{markdown}");
    }
    assert!(stdout.contains(&sweep.verdict_line), "{stdout}");
    assert!(stdout.contains("REJECTED: scores moved"), "{stdout}");
    sweep
}

#[test]
fn the_demo_sweep_runs_with_abfleet_local() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let started = Instant::now();
    let output = abfleet(
        tmp.path(),
        &[
            "local",
            demo_spec().to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", output_text(&output));
    let sweep = check_demo_report(&out, &String::from_utf8_lossy(&output.stdout));
    eprintln!(
        "demo sweep (local): {} in {:.1} s",
        sweep.verdict_line,
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn the_demo_sweep_runs_through_coordinator_agent_and_submit_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let url = format!("http://{listen}");
    let data_dir = tmp.path().join("data");
    let _coordinator = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args([
                "coordinator",
                "--plaintext",
                "--listen",
                &listen,
                "--data-dir",
            ])
            .arg(&data_dir)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !abfleet(tmp.path(), &["runs", "--coordinator", &url])
        .status
        .success()
    {
        assert!(Instant::now() < deadline, "the coordinator never answered");
        std::thread::sleep(Duration::from_millis(100));
    }
    let _agent = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args(["agent", "--coordinator", &url, "--work-dir"])
            .arg(tmp.path().join("agent"))
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let out = tmp.path().join("out");
    let started = Instant::now();
    let submitted = abfleet(
        tmp.path(),
        &[
            "submit",
            demo_spec().to_str().unwrap(),
            "--coordinator",
            &url,
            "--wait",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(
        submitted.status.code(),
        Some(0),
        "{}",
        output_text(&submitted)
    );
    let sweep = check_demo_report(&out, &String::from_utf8_lossy(&submitted.stdout));
    eprintln!(
        "demo sweep (coordinator + agent): {} in {:.1} s",
        sweep.verdict_line,
        started.elapsed().as_secs_f64()
    );
}
