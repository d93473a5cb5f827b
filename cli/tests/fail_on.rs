//! `--fail-on` and `report --format bmf` as a CI job uses them: a real `abfleet local` run
//! whose "fork" is the subject's upstream and whose "upstream" is its fork, so the fork is
//! significantly slower on float_ssim with the same scores (parity passes, exit 0), then
//! `abfleet report` on its data dir with and without gates.

mod support;

use std::path::Path;

use abfleet_core::paired::Verdict;
use abfleet_core::report::Report;
use support::*;

/// The subject's two variants swapped: the fork's float_ssim (about 14x faster) becomes
/// upstream's. 8 pairs: enough for the signed-rank test to be significant.
fn swapped_spec(dir: &Path) -> std::path::PathBuf {
    let subject = subject_dir();
    SpecOptions {
        upstream_source: format!(
            "path = \"{}\"\n[upstream.build]\ncommands = [[\"make\", \"-s\", \"VARIANT=fork\"]]",
            subject.display()
        ),
        fork_build: "commands = [[\"make\", \"-s\", \"VARIANT=upstream\"]]",
        runs: 8,
        frames: 12,
        ..SpecOptions::path()
    }
    .write(dir, "swapped.toml")
}

#[test]
fn fail_on_slower_turns_a_passing_run_with_a_slower_cell_into_exit_5_and_bmf_carries_it() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = swapped_spec(tmp.path());
    let data_dir = tmp.path().join("data");
    let out = tmp.path().join("out");
    let data = data_dir.to_str().unwrap();
    let output = abfleet(
        tmp.path(),
        &[
            "local",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--data-dir",
            data,
            "--work-dir",
            tmp.path().join("agent").to_str().unwrap(),
            "--fail-on",
            "regression,slower",
        ],
    );
    let text = output_text(&output);
    let report =
        Report::from_json(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let float_ssim = report
        .cells
        .iter()
        .find(|c| c.workload == "float_ssim")
        .unwrap();
    assert_eq!(float_ssim.verdict, Some(Verdict::Slower), "{text}");
    assert_eq!(report.exit_code, 0, "parity passed: {:?}", report.errors);
    assert_eq!(output.status.code(), Some(5), "{text}");
    // Progress lines speak the report's words (issue 25), never Rust's debug names, and show
    // no count before there is one.
    assert!(
        text.contains("tiny/float_ssim finished: parity ok"),
        "{text}"
    );
    assert!(
        !text.contains("finished: Ok") && !text.contains("[0/0]"),
        "{text}"
    );
    // The console's last word is the code the process returns and why (issue 39: it said
    // "exit code 0" above an exit 5).
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last_word = stdout
        .rsplit_once("\nexit ")
        .map(|(_, last)| format!("exit {last}"))
        .unwrap_or_default();
    assert!(
        last_word.starts_with(
            "exit 5: --fail-on slower: the fork is significantly slower on a cell\n  tiny/float_ssim: the fork is slower"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("exit code 0"), "{stdout}");

    let run_id = report.run_id.as_str();
    let report_exit = |args: &[&str]| {
        let mut all = vec!["report", run_id, "--data-dir", data];
        all.extend_from_slice(args);
        let output = abfleet(tmp.path(), &all);
        (output.status.code(), output_text(&output), output)
    };
    // Without gates `report` prints and exits 0, as before.
    assert_eq!(report_exit(&[]).0, Some(0));
    let (code, text, _) = report_exit(&["--fail-on", "slower"]);
    assert_eq!(code, Some(5), "{text}");
    let (code, text, _) = report_exit(&["--fail-on", "regression", "--fail-on", "stale"]);
    assert_eq!(code, Some(0), "nothing regressed, no sweep: {text}");
    let (code, text, _) = report_exit(&["--fail-on", "slowest"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("slower, regression or stale"), "{text}");

    // BMF: the slower cell's speedup below 1 with its interval, and its latencies.
    let (code, _, output) = report_exit(&["--format", "bmf"]);
    assert_eq!(code, Some(0));
    let bmf: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let measures = &bmf["tiny/float_ssim"];
    let speedup = measures["speedup"]["value"].as_f64().unwrap();
    assert!(speedup < 1.0, "{bmf}");
    assert!(measures["speedup"]["upper_value"].as_f64().unwrap() < 1.0);
    let fork_ns = measures["latency"]["value"].as_f64().unwrap();
    let upstream_ns = measures["upstream-latency"]["value"].as_f64().unwrap();
    assert!(fork_ns > upstream_ns && upstream_ns > 0.0, "{bmf}");
    assert!(
        bmf["tiny/psnr"]["score-delta-psnr_y"]["value"].is_number(),
        "{bmf}"
    );
}
