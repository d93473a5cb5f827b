//! The `abfleet` binary as a user runs it: `abfleet local` over the real embedded
//! coordinator and agent, exit codes, the files it writes, and the errors bad input gets.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use abfleet_core::cell::CellParity;
use abfleet_core::paired::StopReason;
use abfleet_core::parity::ParityRule;
use abfleet_core::report::Report;
use support::*;

fn local(dir: &Path, spec: &Path) -> (Output, Option<Report>) {
    let out = dir.join("out");
    let output = abfleet(
        dir,
        &[
            "local",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let report = std::fs::read_to_string(out.join("report.json"))
        .ok()
        .map(|json| Report::from_json(&json).unwrap());
    (output, report)
}

#[test]
fn the_demo_spec_passes_parity_and_writes_both_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/jobs/demo.toml");
    let (output, report) = local(tmp.path(), &spec);
    assert_eq!(output.status.code(), Some(0), "{}", output_text(&output));
    let report = report.expect("report.json is written");
    assert_eq!(report.cells.len(), 8);
    // Issue 15: each cell says what the agent spent on it besides the runs.
    for cell in &report.cells {
        let overhead_s = cell
            .overhead_seconds
            .unwrap_or_else(|| panic!("cell {} has no overhead_seconds", cell.index));
        let runs_s: f64 = [&cell.upstream, &cell.fork]
            .iter()
            .flat_map(|side| side.times.iter().chain(&side.warmup_times))
            .sum();
        assert!(runs_s > 0.0, "cell {} recorded no run times", cell.index);
        let cell_wall_s = overhead_s + runs_s;
        assert!(
            (0.0..cell_wall_s).contains(&overhead_s),
            "cell {}: overhead {overhead_s} s of a {cell_wall_s} s cell",
            cell.index
        );
    }
    let float_ssim = report
        .cells
        .iter()
        .find(|c| c.workload == "float_ssim")
        .unwrap();
    assert_eq!(float_ssim.parity, CellParity::Ok);
    // Each side records exactly what it ran, so a maintainer can rerun the cell by hand.
    for side in [&float_ssim.upstream, &float_ssim.fork] {
        let command = side.command.as_ref().expect("argv and cwd are recorded");
        assert!(command.argv[0].ends_with("build/vmaf"), "{command:?}");
        assert!(
            Path::new(&command.cwd).join("build/vmaf").is_file(),
            "{command:?}"
        );
        assert_eq!(command.argv.last().map(String::as_str), Some("float_ssim"));
    }
    // A fork-only feature is timed alone: no pairs, no run order, said so.
    let motion_v2 = report
        .cells
        .iter()
        .find(|c| c.workload == "motion_v2")
        .unwrap();
    assert_eq!(motion_v2.parity, CellParity::AbsentUpstream);
    assert_eq!(motion_v2.stop_reason, StopReason::OneSided);
    assert!(motion_v2.run_order.is_empty());
    assert_eq!(motion_v2.pairs, 0);
    assert!(motion_v2.fork.times.len() >= 3, "{:?}", motion_v2.fork);
    let markdown = std::fs::read_to_string(tmp.path().join("out/report.md")).unwrap();
    assert!(
        markdown.contains("Reproduce a cell by hand") && markdown.contains("float_ssim fork: `cd "),
        "{markdown}"
    );
    assert!(
        markdown.contains("| Feature | Upstream | Fork | Speedup | Score delta |"),
        "{markdown}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("float_ssim") && stdout.contains("score parity: OK"),
        "{stdout}"
    );
    // demo.toml's max_runs = 12 leaves room for a verdict: no warning.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("max_runs"), "{stderr}");
}

#[test]
fn a_drifting_fork_fails_the_parity_gate_with_exit_1_naming_metric_rule_and_delta() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/jobs/demo-drift.toml");
    let (output, report) = local(tmp.path(), &spec);
    assert_eq!(output.status.code(), Some(1), "{}", output_text(&output));
    let report = report.unwrap();
    let cell = report
        .cells
        .iter()
        .find(|c| c.workload == "float_ssim")
        .unwrap();
    assert_eq!(cell.parity, CellParity::Fail);
    // The drift shows in the pooled mean, which is what the gate is on (ADR-1228 §2).
    let failure = &cell.parity_failures[0];
    assert_eq!(failure.metric, "float_ssim");
    assert_eq!(failure.rule, ParityRule::PooledMean, "{failure:?}");
    assert!(failure.delta > 1e-5 && failure.delta < 1e-2, "{failure:?}");
    assert!(
        failure.delta <= cell.max_frame_delta["float_ssim"],
        "{cell:?}"
    );
    assert!(cell.max_frame_delta_at.contains_key("float_ssim"));
    // Timing had nothing to do with it: the other features still pass.
    assert_eq!(
        report
            .cells
            .iter()
            .find(|c| c.workload == "psnr")
            .unwrap()
            .parity,
        CellParity::Ok
    );
    // A release pipeline reads the same verdict from junit.xml: one failure per failed cell.
    let junit = std::fs::read_to_string(tmp.path().join("out/junit.xml")).unwrap();
    let failed = report
        .cells
        .iter()
        .filter(|c| c.parity == CellParity::Fail)
        .count();
    assert_eq!(
        junit.matches("<failure type=\"parity\"").count(),
        failed,
        "{junit}"
    );
    assert!(junit.contains("/float_ssim\""), "{junit}");
    let markdown = std::fs::read_to_string(tmp.path().join("out/report.md")).unwrap();
    assert!(markdown.contains("**Score parity: FAIL**"), "{markdown}");
    assert!(
        markdown.contains("**FAIL** (pooled-mean delta over max_score_delta)"),
        "{markdown}"
    );
    assert!(
        markdown.contains("pooled mean of `float_ssim` differs by"),
        "{markdown}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout
            .contains("parity: pattern_320x180/float_ssim: pooled mean of `float_ssim` differs by"),
        "{stdout}"
    );
}

#[test]
fn a_fork_that_does_not_build_ends_with_exit_3_and_the_build_log_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = SpecOptions {
        fork_build:
            "commands = [[\"make\", \"-s\", \"VARIANT=fork\", \"EXTRA_CFLAGS=-DABFLEET_BROKEN\"]]",
        ..SpecOptions::path()
    }
    .write(tmp.path(), "broken.toml");
    let (output, report) = local(tmp.path(), &spec);
    assert_eq!(output.status.code(), Some(3), "{}", output_text(&output));
    let report = report.unwrap();
    assert!(report
        .cells
        .iter()
        .all(|c| c.parity == CellParity::Unavailable));
    let build = report.fork.build.as_ref().unwrap();
    assert_eq!(build.status, abfleet_core::events::BuildStatus::Failed);
    assert!(
        build
            .log_tail
            .as_deref()
            .unwrap()
            .contains("ABFLEET_BROKEN"),
        "{build:?}"
    );
    let markdown = std::fs::read_to_string(tmp.path().join("out/report.md")).unwrap();
    assert!(
        markdown.contains("The fork build log ends with"),
        "{markdown}"
    );
    assert!(markdown.contains("this tree does not build"), "{markdown}");

    // The console: one error naming the failed command and the log, the cells listed once,
    // the log's tail, and nothing that says cells were measured.
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let problems: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("problem:"))
        .collect();
    assert_eq!(problems.len(), 2, "{stdout}");
    assert!(
        problems[0].starts_with(
            "problem: the fork build failed: `make -s VARIANT=fork EXTRA_CFLAGS=-DABFLEET_BROKEN` exited with code 2 (log: "
        ) && problems[0].contains(&build.log_path),
        "{stdout}"
    );
    let cells = report.cells.len();
    assert!(
        problems[1].starts_with(&format!(
            "problem: not measured: all {cells} cells: the fork build failed (`make"
        )),
        "{stdout}"
    );
    assert!(stdout.contains("the fork build log ends with:"), "{stdout}");
    assert!(
        stdout.contains("    | src/main.c:20:2: error: #error \"ABFLEET_BROKEN"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("all cells measured") && !stderr.contains("all cells measured"),
        "{stdout}{stderr}"
    );
    assert!(
        stderr.contains(&format!("done: 0 of {cells} cells measured")),
        "{stderr}"
    );
}

/// Also issue 38: a binary that writes a valid million-frame output for a 6-frame input
/// (about 150 MB) is refused unread, by what its input can give, instead of being parsed
/// into hundreds of MB (docs/performance.md, "Enormous outputs").
#[test]
fn a_crashing_binary_and_one_that_scores_nothing_make_their_cells_unavailable() {
    let tmp = tempfile::tempdir().unwrap();
    for (flag, expected) in [
        ("ABFLEET_CRASH", "killed by signal 6 (SIGABRT)"),
        ("ABFLEET_NOFRAMES", "exited 0 but scored no frames"),
        (
            "ABFLEET_ENORMOUS=1000000",
            "output too large for its input: ",
        ),
    ] {
        let fork_build =
            format!("commands = [[\"make\", \"-s\", \"VARIANT=fork\", \"EXTRA_CFLAGS=-D{flag}\"]]");
        let dir = tmp.path().join(flag.replace('=', "-"));
        std::fs::create_dir_all(&dir).unwrap();
        let spec = SpecOptions {
            fork_build: &fork_build,
            workloads: &["psnr"],
            ..SpecOptions::path()
        }
        .write(&dir, "spec.toml");
        let (output, report) = local(&dir, &spec);
        assert_eq!(
            output.status.code(),
            Some(3),
            "{flag}: {}",
            output_text(&output)
        );
        // A fixed 3 pairs is fine for a smoke test, but said to allow no verdict.
        assert!(
            String::from_utf8_lossy(&output.stderr)
                .contains("warning: [measure] max_runs = 3 is below 6 pairs"),
            "{}",
            output_text(&output)
        );
        let cell = &report.unwrap().cells[0];
        assert_eq!(cell.parity, CellParity::Unavailable);
        let error = cell.fork.error.as_deref().unwrap();
        assert!(error.contains(expected), "{flag}: {error}");
        if flag.starts_with("ABFLEET_ENORMOUS") {
            assert!(
                error.contains("where `tiny`'s 6 frame(s) allow 1441792 (64 KiB a frame;"),
                "{error}"
            );
        }
    }
}

#[test]
fn bad_specs_get_clear_errors_and_the_right_exit_code() {
    let tmp = tempfile::tempdir().unwrap();
    let good = SpecOptions::path().render();
    let cases: Vec<(&str, String, i32, Vec<&str>)> = vec![
        (
            "unknown-key.toml",
            good.replace("[measure]\n", "[measure]\nrunz = 3\n"),
            2,
            vec!["unknown field `runz`", "did you mean `runs`?", "docs/job-spec.md"],
        ),
        (
            "missing-fixture.toml",
            good.replace(
                "reference = { generate = \"moving-pattern\", seed = 3 }",
                &format!("reference = {{ path = \"nowhere/ref.yuv\", sha256 = \"{}\" }}", "a".repeat(64)),
            ),
            2,
            vec!["fixture `tiny` reference", "nowhere/ref.yuv", "does not exist"],
        ),
        (
            "checksum.toml",
            good.replace(
                "distorted = { generate = \"moving-pattern-distorted\", seed = 3 }",
                &format!("distorted = {{ generate = \"moving-pattern-distorted\", seed = 3, sha256 = \"{}\" }}", "b".repeat(64)),
            ),
            3,
            vec!["fixture `tiny` distorted", "but the spec expects bbbb"],
        ),
        (
            "missing-binary.toml",
            good.replace("binary = \"build/vmaf\"", "binary = \"build/tools/vmaf\""),
            3,
            vec!["the binary `build/tools/vmaf` does not exist"],
        ),
    ];
    for (name, spec_text, code, expected) in cases {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let spec = dir.join(name);
        std::fs::write(&spec, spec_text).unwrap();
        let (output, _) = local(&dir, &spec);
        let all = output_text(&output);
        assert_eq!(output.status.code(), Some(code), "{name}: {all}");
        for needle in expected {
            assert!(all.contains(needle), "{name}: expected `{needle}` in {all}");
        }
    }
}

#[test]
fn help_documents_the_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        vec!["--help"],
        vec!["local", "--help"],
        vec!["submit", "--help"],
    ] {
        let output = abfleet(tmp.path(), &args);
        assert!(output.status.success());
        let stdout = String::from_utf8_lossy(&output.stdout);
        for code in ["0 ", "1 ", "2 ", "3 ", "130"] {
            assert!(stdout.contains(&format!("  {code}")), "{args:?}: {stdout}");
        }
    }
}

#[test]
fn ctrl_c_on_local_stops_the_children_and_leaves_the_store_consistent() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = SpecOptions {
        workloads: &["float_ssim"],
        runs: 20,
        frames: 400,
        ..SpecOptions::path()
    }
    .write(tmp.path(), "long.toml");
    let work_dir = tmp.path().join("abfleet-out/.agent");
    let child = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .current_dir(tmp.path())
        .args(["local", spec.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until timed runs are under way (their logs appear), then interrupt.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !has_timed_run_logs(&work_dir.join("jobs")) {
        assert!(std::time::Instant::now() < deadline, "timing never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", output_text(&output));
    // No timed child outlives the interrupt.
    let survivors = Command::new("pgrep")
        .args(["-f", work_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        survivors.stdout.is_empty(),
        "still running: {}",
        String::from_utf8_lossy(&survivors.stdout)
    );
    // The store says what happened and still renders a report.
    let data_dir = tmp.path().join("abfleet-out/.coordinator");
    let runs = abfleet(
        tmp.path(),
        &["runs", "--data-dir", data_dir.to_str().unwrap()],
    );
    let listing = String::from_utf8_lossy(&runs.stdout).to_string();
    assert!(listing.contains("cancelled"), "{listing}");
    let run_id = listing
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let report = abfleet(
        tmp.path(),
        &[
            "report",
            &run_id,
            "--format",
            "json",
            "--data-dir",
            data_dir.to_str().unwrap(),
        ],
    );
    assert!(report.status.success(), "{}", output_text(&report));
    let report = Report::from_json(&String::from_utf8_lossy(&report.stdout)).unwrap();
    assert_eq!(report.status, "cancelled");
    assert_eq!(report.exit_code, 130);
}

fn has_timed_run_logs(jobs: &Path) -> bool {
    let walk = |dir: &Path| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    walk(jobs)
        .iter()
        .flat_map(|job| walk(job))
        .flat_map(|attempt| walk(&attempt))
        .flat_map(|cell| walk(&cell))
        .any(|file| {
            file.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains("-run"))
        })
}

#[test]
fn xml_and_csv_outputs_are_read_as_the_spec_selects() {
    let tmp = tempfile::tempdir().unwrap();
    let json = SpecOptions {
        workloads: &["psnr", "float_ssim"],
        ..SpecOptions::path()
    }
    .render();
    for format in ["xml", "csv"] {
        let dir = tmp.path().join(format);
        std::fs::create_dir_all(&dir).unwrap();
        let spec_text = json.replace(
            "\"-o\", \"{output}\", \"--json\"]",
            &format!("\"-o\", \"{{output}}\", \"--{format}\"]\noutput_format = \"{format}\""),
        );
        assert_ne!(spec_text, json);
        let spec = dir.join("spec.toml");
        std::fs::write(&spec, spec_text).unwrap();
        let (output, report) = local(&dir, &spec);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{format}: {}",
            output_text(&output)
        );
        let report = report.unwrap();
        let psnr = &report.cells[0];
        assert_eq!(psnr.fork.nframes, Some(6), "{format}");
        assert!(
            psnr.fork.pooled.contains_key("psnr_y"),
            "{format}: {:?}",
            psnr.fork.pooled
        );
        assert_eq!(psnr.parity, CellParity::Ok, "{format}");
    }
}

/// The README's multi-process flow: a coordinator, an agent and `submit --wait` as separate
/// processes; then the report survives a coordinator restart.
#[test]
fn submit_wait_against_separate_coordinator_and_agent_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = SpecOptions {
        workloads: &["psnr", "motion_v2"],
        ..SpecOptions::path()
    }
    .write(tmp.path(), "spec.toml");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let url = format!("http://{listen}");
    let data_dir = tmp.path().join("data");
    let start_coordinator = || {
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args([
                "coordinator",
                "--plaintext",
                "--listen",
                &listen,
                "--data-dir",
                data_dir.to_str().unwrap(),
            ])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut coordinator = KillOnDrop(start_coordinator());
    wait_for_coordinator(tmp.path(), &url);
    let _agent = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args([
                "agent",
                "--coordinator",
                &url,
                "--work-dir",
                tmp.path().join("agent").to_str().unwrap(),
            ])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let out = tmp.path().join("out");
    let submitted = abfleet(
        tmp.path(),
        &[
            "submit",
            spec.to_str().unwrap(),
            "--coordinator",
            &url,
            "--wait",
            "--trigger",
            "performance-pr",
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
    let report =
        Report::from_json(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report.trigger, "performance-pr");
    let agents = abfleet(tmp.path(), &["agents", "--coordinator", &url]);
    let agents = String::from_utf8_lossy(&agents.stdout).to_string();
    assert!(agents.contains("idle"), "{agents}");

    // Restart the coordinator: the report comes back from the store.
    Command::new("kill")
        .args(["-INT", &coordinator.0.id().to_string()])
        .status()
        .unwrap();
    assert!(
        coordinator.0.wait().unwrap().success(),
        "SIGINT stops the coordinator cleanly"
    );
    let _coordinator = KillOnDrop(start_coordinator());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let markdown = loop {
        let output = abfleet(
            tmp.path(),
            &[
                "report",
                &report.run_id,
                "--format",
                "md",
                "--coordinator",
                &url,
            ],
        );
        if output.status.success() {
            break String::from_utf8_lossy(&output.stdout).to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            output_text(&output)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        markdown.contains("| motion_v2 † | absent upstream |"),
        "{markdown}"
    );
    let unknown = abfleet(
        tmp.path(),
        &[
            "report",
            "00000000-0000-0000-0000-000000000000",
            "--coordinator",
            &url,
        ],
    );
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("abfleet runs"),
        "{}",
        output_text(&unknown)
    );
}

fn wait_for_coordinator(dir: &Path, url: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !abfleet(dir, &["runs", "--coordinator", url])
        .status
        .success()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the coordinator at {url} never answered"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn top_level_help_snapshot() {
    let output = abfleet(Path::new("."), &["--help"]);
    insta::assert_snapshot!(String::from_utf8_lossy(&output.stdout));
}

#[test]
fn a_coordinator_that_accepts_but_never_answers_ends_the_cli_with_a_clear_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    // Accepts every connection and never reads or writes a byte.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .current_dir(tmp.path())
        .args(["runs", "--coordinator", &url])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Generous: the CLI gives up after its 10 s keep-alive interval plus 10 s timeout.
    let deadline = std::time::Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > deadline {
            let _ = child.kill();
            panic!("`abfleet runs` still waits on a silent coordinator after {deadline:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", output_text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("stopped answering") && stderr.contains("abfleet coordinator"),
        "{stderr}"
    );
}

/// `abfleet report RUN --against EARLIER`: the drifting fork's run against the demo's, read
/// straight from the shared data dir: the fork commit changed, and float_ssim's pooled delta
/// grew (the parity ratchet flags growth even where a gate would pass).
#[test]
fn report_against_an_earlier_run_flags_a_grown_parity_delta() {
    let tmp = tempfile::tempdir().unwrap();
    let jobs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/jobs");
    let (output, demo) = local(tmp.path(), &jobs.join("demo.toml"));
    assert_eq!(output.status.code(), Some(0), "{}", output_text(&output));
    let (output, drift) = local(tmp.path(), &jobs.join("demo-drift.toml"));
    assert_eq!(output.status.code(), Some(1), "{}", output_text(&output));
    let (demo, drift) = (demo.unwrap(), drift.unwrap());
    let output = abfleet(
        tmp.path(),
        &[
            "report",
            &drift.run_id,
            "--against",
            &demo.run_id,
            "--data-dir",
            "abfleet-out/.coordinator",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", output_text(&output));
    let markdown = String::from_utf8_lossy(&output.stdout);
    assert!(
        markdown.contains(&format!("run {} against run {}", drift.run_id, demo.run_id)),
        "{markdown}"
    );
    assert!(
        markdown.contains("**parity delta grew**: `float_ssim`"),
        "{markdown}"
    );
    let psnr_row = markdown
        .lines()
        .find(|l| l.contains("| pattern_320x180 | psnr |"))
        .unwrap_or_else(|| panic!("no psnr row in {markdown}"));
    assert!(!psnr_row.contains("grew"), "{psnr_row}");
}

/// Issue 25: `--version` names the commit the binary was built from.
#[test]
fn version_names_the_commit_it_was_built_from() {
    let output = abfleet(Path::new("."), &["--version"]);
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "{}", output_text(&output));
    let commit = text
        .split("(commit ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("no commit in `{text}`"));
    // HEAD when built from a clean clone (CI); an earlier commit of this history when a
    // developer committed after the build.
    let hash = commit.trim_end_matches("-dirty");
    assert!(hash.len() >= 12, "`{commit}`");
    let ancestor = Command::new("git")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["merge-base", "--is-ancestor", hash, "HEAD"])
        .status()
        .unwrap();
    assert!(
        ancestor.success(),
        "`{commit}` is not a commit of this history"
    );
}
