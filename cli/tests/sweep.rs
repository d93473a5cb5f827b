//! Retuning sweeps end to end (docs/sweeps.md): a real fork repository of the demo subject,
//! built for real at each value of its build-time tunable, timed for real against its
//! shipped default through a coordinator and an agent over loopback gRPC, and `abfleet
//! submit --wait` writing the report. Assertions are on structure and verdict logic that
//! holds on any host: a configuration planted to be many times slower never wins, one
//! planted to move a score is rejected by parity however fast it is; never a timing.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use abfleet_coordinator::store::Store;
use abfleet_coordinator::CoordinatorConfig;
use abfleet_core::cell::CellParity;
use abfleet_core::events::JobEventPayload;
use abfleet_core::report::Report;
use abfleet_core::sweep::{DefaultVerdict, SweepSection, RETUNING_CHECK};
use abfleet_render::render_markdown;
use support::*;

/// What varies between the sweep specs of these tests.
struct SweepOptions<'a> {
    fork: &'a Path,
    rev: &'a str,
    /// Extra arguments of the fork's build command (`EXTRA_CFLAGS=…`).
    build_extra: &'a str,
    toolchain: &'a str,
    band_values: &'a str,
    band_default: &'a str,
    /// The row stride's values (the default is 1; any other moves float_ssim).
    stride_values: &'a str,
    sweep_extra: &'a str,
    /// Top-level tables before `[fork]` (`[targets]`).
    top_extra: &'a str,
    /// The fixture: width, height, frames.
    fixture: (u32, u32, u32),
    /// More `[[sweep.tunables]]` after the band height and the row stride.
    tunables_extra: &'a str,
}

impl SweepOptions<'_> {
    fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let text = format!(
            r#"name = "sweep-test"
{top_extra}

[fork]
git = "{fork}"
rev = "{rev}"
[fork.build]
commands = [["make", "-s", "VARIANT=fork"{build_extra}]]
binary = "build/vmaf"
toolchain = {toolchain}

[command]
template = ["{{binary}}", "-r", "{{reference}}", "-d", "{{distorted}}", "-w", "{{width}}", "-h", "{{height}}",
            "-p", "{{pixel_format}}", "-b", "{{bitdepth}}", "--threads", "{{threads}}", "-o", "{{output}}", "--json"]

[[fixtures]]
name = "pattern"
width = {width}
height = {height}
bitdepth = 8
pixel_format = "420"
frames = {frames}
reference = {{ generate = "moving-pattern", seed = 5 }}
distorted = {{ generate = "moving-pattern-distorted", seed = 5 }}

[[workloads]]
name = "float_ssim"
args = ["--feature", "float_ssim"]

[measure]
warmup = 1
runs = 6
max_runs = 10
timeout_seconds = 60

[sweep]
{sweep_extra}

[[sweep.tunables]]
name = "ssim_band"
build = ["SSIM_BAND={{value}}"]
values = [{band_values}]
default = {band_default}

[[sweep.tunables]]
name = "row_stride"
env = "SUBJECT_SSIM_ROW_STRIDE"
values = [{stride_values}]
default = 1
{tunables_extra}
"#,
            fork = self.fork.display(),
            rev = self.rev,
            build_extra = self.build_extra,
            toolchain = self.toolchain,
            band_values = self.band_values,
            band_default = self.band_default,
            stride_values = self.stride_values,
            sweep_extra = self.sweep_extra,
            top_extra = self.top_extra,
            width = self.fixture.0,
            height = self.fixture.1,
            frames = self.fixture.2,
            tunables_extra = self.tunables_extra,
        );
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

fn options<'a>(repos: &'a Repos) -> SweepOptions<'a> {
    SweepOptions {
        fork: &repos.fork,
        rev: &repos.fork_commit,
        build_extra: "",
        toolchain: r#"["cc", "--version"]"#,
        band_values: "1, 8, 64",
        band_default: "8",
        stride_values: "1, 2",
        sweep_extra: "",
        top_extra: "",
        fixture: (320, 180, 6),
        tunables_extra: "",
    }
}

fn only_sweep(report: &Report) -> &SweepSection {
    assert!(report.is_sweep, "a sweep spec makes a sweep report");
    assert_eq!(report.generations.len(), 1, "{:?}", report.generations);
    report.generations[0]
        .sweep
        .as_ref()
        .unwrap_or_else(|| panic!("no sweep section; errors: {:?}", report.errors))
}

/// `abfleet ARGS…` as a child process, off the async runtime.
async fn abfleet(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_abfleet"))
            .args(&args)
            .output()
            .expect("abfleet runs")
    })
    .await
    .unwrap()
}

/// The issue's first test: a sweep over the demo subject's tunables, submitted with
/// `abfleet submit --wait` to a coordinator whose agent builds and times it, reports the best
/// configuration, the default's verdict and every configuration's interval and parity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_runs_end_to_end_and_reports_best_default_verdict_and_intervals() {
    let tmp = tempfile::tempdir().unwrap();
    let repos = make_repos(tmp.path());
    let spec = options(&repos).write(tmp.path(), "sweep.toml");
    let mut coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let agent = TestAgent::start(&coordinator.url(), &tmp.path().join("agent"));
    let out = tmp.path().join("out");
    let submitted = abfleet(vec![
        "submit".into(),
        spec.display().to_string(),
        "--coordinator".into(),
        coordinator.url(),
        "--wait".into(),
        "--out".into(),
        out.display().to_string(),
    ])
    .await;
    let stdout = String::from_utf8_lossy(&submitted.stdout).to_string();
    assert_eq!(
        submitted.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&submitted.stderr)
    );
    let json = std::fs::read_to_string(out.join("report.json")).unwrap();
    let report = Report::from_json(&json).unwrap();
    let sweep = only_sweep(&report);

    // Every configuration of the 3 x 2 grid, the default first, each with its values.
    assert_eq!(sweep.strategy, "grid");
    assert_eq!(sweep.configurations.len(), 6);
    assert_eq!(sweep.not_tried_count, 0);
    assert!(sweep.configurations[0].is_default);
    assert_eq!(sweep.default.label, "ssim_band=8 row_stride=1");
    for c in &sweep.configurations[1..] {
        assert_eq!(c.values.len(), 2, "{c:?}");
        let [lo, hi] = c
            .speedup_ci95
            .unwrap_or_else(|| panic!("no interval: {c:?}"));
        let speedup = c.speedup.unwrap();
        assert!(lo <= speedup && speedup <= hi, "{c:?}");
        assert!(c.verdict.is_some() && c.pairs >= 6, "{c:?}");
        // Parity first: the row stride moves float_ssim, the band height never does.
        let expected = if c.values["row_stride"] == "2" {
            CellParity::Fail
        } else {
            CellParity::Ok
        };
        assert_eq!(c.parity, expected, "{c:?}");
    }
    assert_eq!(
        sweep.rejected_by_parity.len(),
        3,
        "{:?}",
        sweep.rejected_by_parity
    );

    // A verdict with an interval; neither a parity-rejected configuration nor bands of one
    // row (the horizontal pass done 11 times over, several times slower) can be the best.
    let best = sweep.best.as_ref().expect("a best configuration");
    assert_eq!(best.configuration.values["row_stride"], "1", "{best:?}");
    assert_ne!(best.configuration.values["ssim_band"], "1", "{best:?}");
    assert!(best.speedup_ci95[0] <= best.speedup && best.speedup <= best.speedup_ci95[1]);
    let band_one = sweep
        .configurations
        .iter()
        .find(|c| c.label == "ssim_band=1 row_stride=1")
        .unwrap();
    assert_ne!(
        band_one.verdict,
        Some(abfleet_core::paired::Verdict::Faster),
        "{band_one:?}"
    );
    let verdict = sweep.default_verdict.expect("a default verdict");
    match verdict {
        DefaultVerdict::Stale => {
            assert!(
                sweep.verdict_line.starts_with("stale: "),
                "{}",
                sweep.verdict_line
            );
            assert_ne!(best.configuration, sweep.default);
        }
        DefaultVerdict::DefaultBest | DefaultVerdict::DefaultWithinNoise => {
            assert_eq!(best.configuration, sweep.default);
        }
    }
    assert!(sweep.runner_up.is_some());

    // Every build finished before the first timed run: in the job's stored events, the
    // three builds all come before the sweep's first progress line (timing the default),
    // and no build comes after it.
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let jobs = store
        .jobs()
        .of_run(report.run_id.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(jobs.len(), 1);
    let events = store
        .events()
        .of_attempt(jobs[0].job_id, jobs[0].attempt)
        .await
        .unwrap();
    let builds: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.payload, JobEventPayload::Build(_)))
        .map(|(i, _)| i)
        .collect();
    let timing: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(&e.payload, JobEventPayload::Progress { phase, .. } if phase == "sweep"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(builds.len(), 3, "one build per band height");
    assert_eq!(timing.len(), 6, "the default, then each configuration");
    assert!(
        builds.iter().all(|b| *b < timing[0]),
        "a build after timing started: builds at {builds:?}, timing from {}",
        timing[0]
    );

    // One build directory per distinct build configuration, shared by the env values.
    let mut builds = std::collections::BTreeMap::new();
    for c in &sweep.configurations {
        let key = c
            .build_key
            .clone()
            .expect("every configuration names its build");
        assert_eq!(
            builds
                .entry(c.values["ssim_band"].clone())
                .or_insert_with(|| key.clone()),
            &key,
            "configurations with one band height share one build"
        );
    }
    let distinct: std::collections::BTreeSet<&String> = builds.values().collect();
    assert_eq!(distinct.len(), 3, "{builds:?}");

    // report.json as the issue names it.
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let section = &value["generations"][0]["sweep"];
    assert!(section["best"]["speedup_ci95"].is_array(), "{section}");
    assert!(section["best"]["configuration"]["values"].is_object());
    assert!(["default_best", "default_within_noise", "stale"]
        .contains(&section["default_verdict"].as_str().unwrap()));
    for c in section["configurations"].as_array().unwrap() {
        for key in ["values", "speedup_ci95", "verdict", "parity"] {
            assert!(c.get(key).is_some(), "{key} missing in {c}");
        }
    }
    assert_eq!(value["sweep_table"].as_array().unwrap().len(), 1);

    // The Markdown and the terminal say it too.
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert_eq!(markdown, render_markdown(&report));
    for needle in [
        "retuning sweep of fork",
        "#### Best value per generation",
        "Rejected by parity (never a winner, however fast):",
        "`ssim_band=8 row_stride=1` (shipped default)",
        &sweep.verdict_line,
    ] {
        assert!(markdown.contains(needle), "{needle:?} not in\n{markdown}");
    }
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(junit.contains("name=\"sweep verdict\""), "{junit}");
    assert!(junit.contains("rejected by parity"), "{junit}");
    assert!(stdout.contains("REJECTED: scores moved"), "{stdout}");
    assert!(stdout.contains(&sweep.verdict_line), "{stdout}");
    agent.stop().await;
    coordinator.stop().await;
}

/// The issue's second test, sharpened: a configuration that changes a score is rejected
/// by parity although it is measurably faster (its speedup's interval lies above 1), and it
/// never wins. On a 1280x720 fixture, so the work the row stride skips outweighs process
/// start-up. Also an `args` tunable end to end: `--cpumask 63` reaches the timed runs (the
/// fork's JSON says it ran its scalar level) and keeps parity (every level is bit-identical).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_faster_configuration_that_moves_a_score_is_rejected_and_never_wins() {
    let tmp = tempfile::tempdir().unwrap();
    let repos = make_repos(tmp.path());
    // The whole picture (0) as the shipped band height; one knob at a time; a row stride of
    // 4 skips three rows in four of both passes.
    let spec = SweepOptions {
        band_values: "0, 64",
        band_default: "0",
        stride_values: "1, 4",
        sweep_extra: "search = \"one-at-a-time\"",
        fixture: (1280, 720, 4),
        tunables_extra: r#"
[[sweep.tunables]]
name = "simd"
args = ["--cpumask", "{value}"]
values = [0, 63]
default = 0
"#,
        ..options(&repos)
    }
    .write(tmp.path(), "sweep.toml");
    let mut coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let agent = TestAgent::start(&coordinator.url(), &tmp.path().join("agent"));
    let mut client = coordinator.control().await;
    let (_, report) = submit_and_wait(&mut client, &spec).await;
    assert_eq!(report.exit_code, 0, "{:?}", report.errors);
    let sweep = only_sweep(&report);
    assert_eq!(sweep.strategy, "one-at-a-time");
    let stride = sweep
        .configurations
        .iter()
        .find(|c| c.label == "ssim_band=0 row_stride=4 simd=0")
        .expect("the row stride was tried");
    assert_eq!(stride.parity, CellParity::Fail, "{stride:?}");
    assert!(
        stride.parity_failures[0].contains("float_ssim")
            && stride.parity_failures[0].contains("(default "),
        "{:?}",
        stride.parity_failures
    );
    // It was faster (it does a quarter of the float_ssim work: 2.0-2.9x measured here), and
    // it still is not the best. Timing stops at the parity verdict, after `runs` pairs, so
    // the point speedup says it: with six pairs on a loaded host one pair can go the other
    // way and widen the interval below 1 (seen at load 7: 1.99x [0.82, 3.22]), while a
    // median of pair ratios under 1.25 would take most pairs reversed.
    assert!(stride.pairs >= 6, "{stride:?}");
    assert!(stride.speedup_ci95.is_some(), "no interval: {stride:?}");
    let (Some(speedup), Some(fork), Some(default)) =
        (stride.speedup, stride.median_s, stride.default_median_s)
    else {
        panic!("no timing: {stride:?}")
    };
    assert!(
        speedup > 1.25 && fork < default,
        "the planted configuration was not faster: {stride:?}"
    );
    eprintln!(
        "planted {}: {:.3}x {:?} ({:?}, {} pairs), rejected by parity",
        stride.label,
        stride.speedup.unwrap(),
        stride.speedup_ci95.unwrap(),
        stride.verdict,
        stride.pairs
    );
    assert_eq!(
        sweep.rejected_by_parity,
        ["ssim_band=0 row_stride=4 simd=0"]
    );
    let best = sweep.best.as_ref().unwrap();
    assert_ne!(best.configuration.label, stride.label);
    assert_ne!(
        sweep.runner_up.as_ref().unwrap().configuration.label,
        stride.label
    );
    // The args tunable: the scalar level kept parity, and its runs were given `--cpumask 63`.
    let scalar = sweep
        .configurations
        .iter()
        .find(|c| c.label == "ssim_band=0 row_stride=1 simd=63")
        .expect("the simd level was tried");
    assert_eq!(scalar.parity, CellParity::Ok, "{scalar:?}");
    assert!(scalar.pairs >= 6, "{scalar:?}");
    let outputs = files_named(
        &tmp.path().join("agent/jobs"),
        "ssim_band_0_row_stride_1_simd_63-",
    );
    let json: Vec<&PathBuf> = outputs
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert!(
        !json.is_empty(),
        "no output of the simd=63 runs in {outputs:?}"
    );
    for path in json {
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(doc["simd"], "scalar", "{}", path.display());
    }
    // The combinations of changed knobs are left out by the strategy, and said so.
    assert_eq!(sweep.configurations.len(), 4);
    assert_eq!(sweep.not_tried_count, 4);
    assert!(sweep
        .not_tried
        .iter()
        .all(|n| n.reason.contains("one tunable at a time")));
    assert!(sweep
        .not_tried
        .iter()
        .any(|n| n.label == "ssim_band=64 row_stride=4 simd=0"));
    agent.stop().await;
    coordinator.stop().await;
}

/// Every file under `dir` whose name starts with `prefix`.
fn files_named(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if entry.file_name().to_string_lossy().starts_with(prefix) {
                found.push(path);
            }
        }
    }
    found
}

/// The issue's third test: the budget stops the search, and the report says what was not
/// tried: the configuration budget leaves the rest of the grid out, and a time budget
/// spent before a configuration starts leaves it out too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_stops_the_search_and_the_report_says_what_was_not_tried() {
    let tmp = tempfile::tempdir().unwrap();
    let repos = make_repos(tmp.path());
    let by_count = SweepOptions {
        sweep_extra: "search = \"grid\"\nmax_configurations = 3",
        ..options(&repos)
    }
    .write(tmp.path(), "count.toml");
    let by_time = SweepOptions {
        sweep_extra: "max_seconds = 0.001",
        ..options(&repos)
    }
    .write(tmp.path(), "time.toml");
    let mut coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let agent = TestAgent::start(&coordinator.url(), &tmp.path().join("agent"));
    let mut client = coordinator.control().await;

    let (_, report) = submit_and_wait(&mut client, &by_count).await;
    let sweep = only_sweep(&report);
    assert_eq!(sweep.configurations.len(), 3);
    assert_eq!(sweep.not_tried_count, 3);
    assert_eq!(sweep.not_tried.len(), 3);
    for left_out in &sweep.not_tried {
        assert!(
            left_out.reason.contains("max_configurations = 3"),
            "{left_out:?}"
        );
        assert!(!sweep
            .configurations
            .iter()
            .any(|c| c.label == left_out.label));
    }
    let markdown = render_markdown(&report);
    assert!(
        markdown.contains("Not tried (3 configuration(s)):"),
        "{markdown}"
    );

    // The default is timed, then the time budget is already spent: nothing else starts, the
    // report lists all five and has no verdict, and the run says it was not carried out.
    let (_, report) = submit_and_wait(&mut client, &by_time).await;
    let sweep = only_sweep(&report);
    assert_eq!(sweep.configurations.len(), 1, "{:?}", sweep.configurations);
    assert_eq!(sweep.not_tried_count, 5);
    assert!(sweep.not_tried.iter().all(|n| n
        .reason
        .starts_with("time budget: [sweep] max_seconds = 0.001")));
    assert_eq!(sweep.default_verdict, None);
    assert_eq!(report.exit_code, abfleet_core::exit::NOT_CARRIED_OUT);
    assert!(
        report
            .errors
            .iter()
            .any(|e| e.contains("no configuration could be compared")),
        "{:?}",
        report.errors
    );
    agent.stop().await;
    coordinator.stop().await;
}

/// History: the same sweep again on the same generation after a toolchain change, with the
/// winner changed (a slowdown planted at the first run's winner), is flagged as a retuning
/// finding; the previous winner and the toolchain change are in the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_winner_that_changed_after_a_toolchain_change_is_a_retuning_finding() {
    let tmp = tempfile::tempdir().unwrap();
    let repos = make_repos(tmp.path());
    // Run 1: the shipped band height (8) runs its horizontal pass 8 times over: 64 wins.
    let first = SweepOptions {
        build_extra: r#", "EXTRA_CFLAGS=-DABFLEET_SLOW_BAND=8""#,
        toolchain: r#"["echo", "cc 1.0"]"#,
        band_values: "8, 64",
        ..options(&repos)
    }
    .write(tmp.path(), "first.toml");
    // Run 2, a "new compiler": now 64 is the slow one, and the default wins.
    let second = SweepOptions {
        build_extra: r#", "EXTRA_CFLAGS=-DABFLEET_SLOW_BAND=64""#,
        toolchain: r#"["echo", "cc 2.0"]"#,
        band_values: "8, 64",
        ..options(&repos)
    }
    .write(tmp.path(), "second.toml");
    let mut coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let agent = TestAgent::start(&coordinator.url(), &tmp.path().join("agent"));
    let mut client = coordinator.control().await;

    let (first_run, report) = submit_and_wait(&mut client, &first).await;
    let sweep = only_sweep(&report);
    assert_eq!(
        sweep.default_verdict,
        Some(DefaultVerdict::Stale),
        "{}",
        sweep.verdict_line
    );
    assert_eq!(
        sweep.best.as_ref().unwrap().configuration.label,
        "ssim_band=64 row_stride=1"
    );
    assert!(sweep.history.is_none(), "no earlier sweep");

    let (_, report) = submit_and_wait(&mut client, &second).await;
    let section = &report.generations[0];
    let sweep = only_sweep(&report);
    assert_eq!(
        sweep.best.as_ref().unwrap().configuration.label,
        "ssim_band=8 row_stride=1",
        "{}",
        sweep.verdict_line
    );
    let history = sweep
        .history
        .as_ref()
        .expect("compared with the first sweep");
    assert_eq!(history.previous_run, first_run);
    assert_eq!(history.previous_best, "ssim_band=64 row_stride=1");
    assert!(history.best_changed && history.retuning, "{history:?}");
    assert_eq!(history.toolchain_changes, ["fork: `cc 1.0` → `cc 2.0`"]);
    let retuning: Vec<_> = section
        .findings
        .iter()
        .filter(|f| f.check == RETUNING_CHECK)
        .collect();
    assert_eq!(retuning.len(), 1, "{:?}", section.findings);
    assert!(retuning[0]
        .verdict
        .contains("ssim_band=64 row_stride=1 → ssim_band=8 row_stride=1"));
    let markdown = render_markdown(&report);
    assert!(markdown.contains("**Retuning finding:**"), "{markdown}");
    // The same sweep once more, same toolchain: same winner, no new retuning finding.
    let (_, report) = submit_and_wait(&mut client, &second).await;
    let sweep = only_sweep(&report);
    if let Some(history) = &sweep.history {
        assert!(!history.retuning, "{history:?}");
    }
    agent.stop().await;
    coordinator.stop().await;
}

/// Fan-out like an A/B run: one job per generation (two recorded CPU hosts, both timing on
/// this machine's real CPU), merged into one report with a sweep section per generation and
/// the compact table across generations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_fans_out_one_job_per_generation_with_a_section_and_a_table_row_each() {
    let tmp = tempfile::tempdir().unwrap();
    let repos = make_repos(tmp.path());
    let spec = SweepOptions {
        band_values: "8, 64",
        top_extra: "[targets]\nbackends = [\"cpu\"]\ngenerations = [\"cpu/*\"]",
        ..options(&repos)
    }
    .write(tmp.path(), "sweep.toml");
    let mut coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let mut agents = Vec::new();
    let mut keys = std::collections::BTreeSet::new();
    for host in ["core-i5-12400-alderlake", "epyc9r14-genoa-m7a"] {
        let recorded = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/probes")
            .join(host);
        let inventory = abfleet_agent::inventory::from_recorded_probes(&recorded).unwrap();
        keys.insert(
            inventory
                .generations
                .iter()
                .find(|g| g.backend == "cpu")
                .unwrap()
                .key
                .clone(),
        );
        agents.push(TestAgent::start_with_inventory(
            &coordinator.url(),
            &tmp.path().join(host),
            inventory,
        ));
    }
    let mut client = coordinator.control().await;
    wait_for_agents(&client, 2).await;
    let (_, report) = submit_and_wait(&mut client, &spec).await;
    assert!(report.is_sweep);
    let sections: std::collections::BTreeSet<String> =
        report.generations.iter().map(|g| g.key.clone()).collect();
    assert_eq!(sections, keys);
    for section in &report.generations {
        let sweep = section.sweep.as_ref().expect("a sweep per generation");
        assert_eq!(sweep.configurations.len(), 4, "{}", section.key);
        assert!(sweep.default_verdict.is_some(), "{}", section.key);
        assert_eq!(
            sweep.rejected_by_parity,
            ["ssim_band=8 row_stride=2", "ssim_band=64 row_stride=2"]
        );
        assert!(
            section.findings.iter().any(|f| f.check == "sweep"),
            "{:?}",
            section.findings
        );
    }
    let rows: std::collections::BTreeSet<String> = report
        .sweep_table
        .iter()
        .map(|r| r.generation.clone())
        .collect();
    assert_eq!(rows, keys);
    let markdown = render_markdown(&report);
    for key in &keys {
        assert!(
            markdown.contains(&format!("#### Generation `{key}`")),
            "{markdown}"
        );
        assert!(markdown.contains(&format!("| `{key}` | ")), "{markdown}");
    }
    for agent in agents {
        agent.stop().await;
    }
    coordinator.stop().await;
}

/// The milestone's toolchain watcher may start sweeps: a `toolchain-bump` trigger of the
/// milestone spec starts the coordinator's sweep spec too, under the same reason and note;
/// another reason does not. (No agent: the runs stay queued; what is checked is what starts.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toolchain_bump_of_the_milestone_spec_starts_the_sweep_spec_too() {
    let tmp = tempfile::tempdir().unwrap();
    let milestone = SpecOptions::path().write(tmp.path(), "milestone.toml");
    let sweep_spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/jobs/demo-sweep.toml");
    let config = CoordinatorConfig {
        milestone_spec: Some(milestone),
        sweep_spec: Some(sweep_spec),
        ..CoordinatorConfig::default()
    };
    let mut coordinator = TestCoordinator::start(&tmp.path().join("data"), config).await;
    let trigger = |reason: &str, note: &str| {
        vec![
            "trigger".to_string(),
            "--reason".into(),
            reason.into(),
            "--note".into(),
            note.into(),
            "--coordinator".into(),
            coordinator.url(),
        ]
    };
    let bumped = abfleet(trigger("toolchain-bump", "gcc 12 -> 13")).await;
    assert!(bumped.status.success(), "{bumped:?}");
    let released = abfleet(trigger("release", "v9.9.9")).await;
    assert!(released.status.success(), "{released:?}");
    let runs = abfleet(vec![
        "runs".into(),
        "--coordinator".into(),
        coordinator.url(),
    ])
    .await;
    let listing = String::from_utf8_lossy(&runs.stdout).to_string();
    let rows: Vec<(&str, &str)> = listing
        .lines()
        .skip(1)
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // run, submitted, state, trigger, exit, name, note…
            (fields[3], fields[5])
        })
        .collect();
    let mut rows = rows;
    rows.sort();
    assert_eq!(
        rows,
        [
            ("release", "test"),
            ("toolchain-bump", "demo-sweep"),
            ("toolchain-bump", "test")
        ],
        "{listing}"
    );
    assert_eq!(
        listing.matches("gcc 12 -> 13").count(),
        2,
        "both runs carry the trigger's note: {listing}"
    );
    coordinator.stop().await;
}
