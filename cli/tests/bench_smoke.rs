//! `abfleet-bench … --smoke` as CI runs it: each benchmark exits 0 and its JSON line carries
//! the figures it promises, as positive numbers. Never its times against a target: this is a
//! shared, noisy machine, and the figures are recorded in docs/performance.md, not asserted.

use std::process::Command;

use serde_json::Value;

/// Runs `abfleet-bench NAME --smoke`, checks it succeeded, and returns its JSON line.
fn bench_smoke(name: &str) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_abfleet-bench"))
        .args([name, "--smoke"])
        .output()
        .expect("abfleet-bench runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "status {:?}\n--- stdout\n{stdout}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout
        .lines()
        .rfind(|line| line.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line in:\n{stdout}"));
    let json: Value = serde_json::from_str(line).unwrap();
    assert_eq!(json["bench"], name, "{json}");
    assert_eq!(json["smoke"], true, "{json}");
    json
}

/// The number at a JSON pointer, which must be finite and positive.
fn positive(json: &Value, pointer: &str) -> f64 {
    let value = json
        .pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {pointer} in {json}"));
    assert!(
        value.is_finite() && value > 0.0,
        "{pointer} = {value} in {json}"
    );
    value
}

#[test]
fn bench_runner_smoke_times_both_commands_both_ways() {
    let json = bench_smoke("runner");
    for command in ["short", "long"] {
        for how in ["direct", "recorded", "call"] {
            let min = positive(&json, &format!("/{command}/{how}/min_s"));
            let median = positive(&json, &format!("/{command}/{how}/median_s"));
            let max = positive(&json, &format!("/{command}/{how}/max_s"));
            assert!(min <= median && median <= max, "{command} {how}: {json}");
            assert!(positive(&json, &format!("/{command}/{how}/n")) >= 1.0);
        }
        positive(&json, &format!("/{command}/ratio_recorded"));
        positive(&json, &format!("/{command}/ratio_call"));
        // An added time may come out negative on a noisy machine; it must be a number.
        for key in ["added_recorded_ms", "added_call_ms"] {
            let added = json[command][key].as_f64();
            assert!(added.is_some_and(f64::is_finite), "{command}.{key}: {json}");
        }
    }
    assert_eq!(json["long"]["argv"][0], "sleep", "{json}");
    positive(&json, "/agent_cpu/wall_s");
    let cpu_s = json["agent_cpu"]["cpu_s"].as_f64().unwrap();
    assert!(cpu_s >= 0.0 && cpu_s.is_finite(), "{json}");
    for key in ["long_ratio_met", "short_added_ms_met", "agent_cpu_pct_met"] {
        assert!(json["targets"][key].is_boolean(), "targets.{key}: {json}");
    }
    // `perf stat -r N` of the same commands, when perf is installed and may count here.
    if !json["perf"].is_null() {
        for command in ["short", "long"] {
            for key in [
                "mean_s",
                "direct_mean_s",
                "recorded_mean_s",
                "ratio_recorded_to_perf",
            ] {
                positive(&json, &format!("/perf/{command}/{key}"));
            }
            assert!(json["perf"][command]["runs"].as_u64() >= Some(2), "{json}");
        }
    }
}

#[test]
fn bench_agent_cpu_smoke_samples_a_real_agent_process_around_each_run() {
    let json = bench_smoke("agent-cpu");
    // A warm-up and three pairs of each side: eight runs, each sampled at its start and end.
    assert_eq!(json["runs"], 8, "{json}");
    positive(&json, "/clock_ticks_per_s");
    for part in ["during_runs", "cell"] {
        positive(&json, &format!("/{part}/wall_s"));
        let cpu_s = json[part]["cpu_s"].as_f64().unwrap();
        assert!(cpu_s >= 0.0 && cpu_s.is_finite(), "{json}");
    }
    assert!(json["overhead_seconds"].is_f64(), "{json}");
    positive(&json, "/host_sample/take/median_s");
    positive(&json, "/host_sample/processes");
    assert!(
        json["targets"]["met"].is_null(),
        "a smoke run is not judged: {json}"
    );
}

/// Not a timing check: a rerun of pinned commits must build nothing and fetch nothing.
#[test]
fn bench_rerun_smoke_builds_nothing_and_fetches_nothing_the_second_time() {
    let json = bench_smoke("rerun");
    assert_eq!(json["cells"], 1, "a smoke rerun times one cell: {json}");
    assert_eq!(json["first"]["cells"], 1, "{json}");
    let first = &json["first"]["started"];
    assert!(
        first["fetches"].as_u64() >= Some(2),
        "the first run clones both: {json}"
    );
    assert!(
        first["builds"].as_u64() >= Some(2),
        "the first run builds both: {json}"
    );
    let rerun = &json["rerun"]["started"];
    assert_eq!(rerun["fetches"], 0, "{json}");
    assert_eq!(rerun["builds"], 0, "{json}");
    assert_eq!(rerun["checkouts"], 0, "{json}");
    assert_eq!(
        json["rerun"]["build_statuses"],
        serde_json::json!(["cached", "cached"])
    );
    assert_eq!(json["no_build_no_fetch"], true, "{json}");
    // One rev-parse per side, and `cc --version` twice: the agent's inventory probe at
    // start-up and one toolchain fingerprint (the second side reuses it).
    assert_eq!(rerun["calls"]["git rev-parse"], 2, "{json}");
    assert_eq!(rerun["calls"]["cc --version"], 2, "{json}");
    // A warm-up and three pairs of each side.
    assert_eq!(rerun["timed_runs"], 8, "{json}");
    positive(&json, "/rerun/wall_s");
    positive(&json, "/rerun/runs_s");
    positive(&json, "/rerun_wall_over_runs");
}

#[test]
fn bench_parse_smoke_parses_the_generated_output() {
    let json = bench_smoke("parse");
    assert_eq!(json["frames"], 240, "{json}");
    assert_eq!(json["metrics"], 30, "{json}");
    positive(&json, "/file_bytes");
    let min = positive(&json, "/parse/min_s");
    let median = positive(&json, "/parse/median_s");
    assert!(min <= median && median <= positive(&json, "/parse/max_s"));
    positive(&json, "/frames_per_s");
    positive(&json, "/mib_per_s");
    assert!(json["peak_rss_delta_kib"].is_u64(), "{json}");
    // A smoke run is too small to judge against the 10-minute target.
    assert!(json["target_met"].is_null(), "{json}");
}

#[test]
fn bench_report_smoke_assembles_every_cell_once() {
    let json = bench_smoke("report");
    assert_eq!(json["cells"], 200, "{json}");
    for part in ["assemble", "json", "markdown"] {
        positive(&json, &format!("/{part}/median_s"));
    }
    // Each cell is written once: a few KiB per cell, not a copy per generation.
    let per_cell = positive(&json, "/json_bytes_per_cell");
    assert!(per_cell < 20_000.0, "{json}");
    assert!(
        json["target_met"].is_null(),
        "a smoke run is not judged: {json}"
    );
}

#[test]
fn bench_fleet_smoke_measures_a_real_coordinator_with_simulated_agents() {
    let json = bench_smoke("fleet");
    assert_eq!(json["agents"], 20, "{json}");
    for pointer in [
        "/registrations_per_s",
        "/coordinator_rss_idle_kib",
        "/dispatch_p50_ms",
        "/dispatch_p99_ms",
        "/events_per_s",
        "/done_to_report/median_s",
        "/report_again/median_s",
        "/report_cli/median_s",
        "/report_bytes",
        "/store_bytes",
    ] {
        positive(&json, pointer);
    }
    // CPU times count clock ticks: a smoke run's may round to 0, never below.
    for key in ["coordinator_cpu_s", "agents_cpu_s"] {
        let cpu = json[key].as_f64();
        assert!(
            cpu.is_some_and(|s| s.is_finite() && s >= 0.0),
            "{key}: {json}"
        );
    }
    assert!(json["dispatch_p50_ms"].as_f64() <= json["dispatch_p99_ms"].as_f64());
    // Every cell it pushed was stored as measured: what is timed is intake, not refusal.
    assert_eq!(json["cells_accepted"], json["events_per_job"], "{json}");
    assert!(
        json["targets"]["met"].is_null(),
        "a smoke run is not judged: {json}"
    );
}

#[test]
fn bench_store_smoke_fills_a_store_and_times_what_an_operator_does() {
    let json = bench_smoke("store");
    assert_eq!(json["runs"], 40, "{json}");
    for part in ["list_runs", "report_newest", "report_oldest", "submit"] {
        positive(&json, &format!("/{part}/median_s"));
        assert_eq!(json[part]["n"], 20, "{json}");
    }
    // The same as the real `abfleet` commands, end to end.
    for part in [
        "runs",
        "runs_all",
        "report_newest",
        "report_oldest",
        "submit",
    ] {
        positive(&json, &format!("/cli/{part}/median_s"));
        assert_eq!(json["cli"][part]["n"], 5, "{json}");
    }
    positive(&json, "/store_bytes");
    assert!(
        json["target_met"].is_null(),
        "a smoke run is not judged: {json}"
    );
}

/// `abfleet-bench NAME --smoke FLAG BINARY` where BINARY is a script named `name` that
/// prints `name: message` to stderr and exits with `code`; checks the bench failed and
/// returns its stderr.
fn bench_with_broken_binary(
    bench_and_flag: &[&str; 2],
    name: &str,
    message: &str,
    code: i32,
) -> String {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let broken = tmp.path().join(name);
    std::fs::write(
        &broken,
        format!("#!/bin/sh\necho '{name}: {message}' >&2\nexit {code}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
    let [bench, flag] = bench_and_flag;
    let output = Command::new(env!("CARGO_BIN_EXE_abfleet-bench"))
        .args([bench, "--smoke", flag])
        .arg(&broken)
        .output()
        .expect("abfleet-bench runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{stderr}");
    stderr
}

/// The product binary has no `bench`: the developer's tool is a binary of its own (issue 26).
#[test]
fn the_product_binary_has_no_bench_and_abfleet_bench_measures_the_abfleet_beside_it() {
    let output = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(["bench", "parse", "--smoke"])
        .output()
        .expect("abfleet runs");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let help = Command::new(env!("CARGO_BIN_EXE_abfleet-bench"))
        .arg("--help")
        .output()
        .expect("abfleet-bench runs");
    let help = String::from_utf8_lossy(&help.stdout);
    for bench in [
        "runner",
        "agent-cpu",
        "rerun",
        "parse",
        "fleet",
        "store",
        "report",
    ] {
        assert!(help.contains(bench), "{help}");
    }
    // A copy with no `abfleet` beside it says so, instead of measuring itself.
    let tmp = tempfile::tempdir().unwrap();
    let alone = tmp.path().join("abfleet-bench");
    std::fs::copy(env!("CARGO_BIN_EXE_abfleet-bench"), &alone).unwrap();
    let output = Command::new(&alone)
        .args(["rerun", "--smoke"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no `abfleet` beside this binary"),
        "{stderr}"
    );
}

/// An agent that dies before its job runs fails the bench at once, with its log, instead of
/// the bench waiting for a job nothing will run.
#[test]
fn bench_agent_cpu_fails_at_once_with_the_agents_log_when_the_agent_exits() {
    let started = std::time::Instant::now();
    let stderr = bench_with_broken_binary(
        &["agent-cpu", "--agent-binary"],
        "not-an-agent",
        "no such subcommand",
        3,
    );
    assert!(
        stderr.contains("the bench's agent exited") && stderr.contains("no such subcommand"),
        "{stderr}"
    );
    // Not a timing check of abfleet: the bench's own deadline is 600 s, so anything near
    // it means the dead agent went unnoticed.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(300),
        "{stderr}"
    );
}

/// A coordinator binary that exits at once fails the fleet bench with its log, not after a
/// 30 s wait for a port nothing will listen on.
#[test]
fn bench_fleet_names_the_coordinator_and_its_log_when_it_exits() {
    let stderr = bench_with_broken_binary(
        &["fleet", "--coordinator-bin"],
        "not-a-coordinator",
        "cannot open the data dir",
        2,
    );
    assert!(
        stderr.contains("exited")
            && stderr.contains("cannot open the data dir")
            && stderr.contains("not-a-coordinator"),
        "{stderr}"
    );
}
