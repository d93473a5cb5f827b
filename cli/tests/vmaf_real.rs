//! End to end on the real trees: Netflix/vmaf v3.2.0 and the fork at c2a3c7e0, both from
//! tarballs in `fixtures/vmaf-real/` (no network), built with meson by the agent, timed by
//! `abfleet local` on a real 576x324 testsrc2/x264 pair, with the production spec's builds,
//! command, parity rules and workloads.
//!
//! Needs meson, ninja, nasm, xxd and xz (`scripts/test` installs them). The builds take
//! about 20 s per tree on 2 cores; the whole test a few minutes.

mod support;
#[path = "support/vmaf_trees.rs"]
mod vmaf_trees;

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use abfleet_core::cell::{CellParity, CellResult, SideStatus};
use abfleet_core::paired::Verdict;
use abfleet_core::report::Report;
use vmaf_trees::*;

/// Rows of the production spec the test keeps (the others would only make it longer).
const KEPT_WORKLOADS: &[&str] = &[
    "vmaf_v0.6.1",
    "float_ssim",
    "float_ms_ssim",
    "psnr_hvs",
    "ssim",
    "motion_v2",
];

/// The `[parity.allow.vmaf]` this test runs with: this pair's own known delta plus margin,
/// as the seed sets a ceiling (ADR-1228 §2). `check_production_gate` shows why it differs
/// from the production spec's 1e-5.
const CI_VMAF_ALLOWANCE: (&str, &str) = (
    "2e-5",
    "the CI pair (12 frames, testsrc2, x264 CRF 35) has a known pooled vmaf delta of -1.1e-5 \
     (fixtures/vmaf-real/README.md), above the 1e-5 the fork's tracked fixtures meet; ratchet on growth",
);

/// How long the whole `abfleet local` run may take before the test gives up on it.
const RUN_DEADLINE: Duration = Duration::from_secs(30 * 60);

#[test]
fn real_upstream_and_fork_on_a_real_pair() {
    require_tools(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();

    let RealRepos {
        upstream,
        fork,
        fork_commit,
    } = real_repos(root);

    let reference = unpack_fixture(REFERENCE, root);
    let distorted = unpack_fixture(DISTORTED, root);

    let production =
        std::fs::read_to_string(repo_root().join("fixtures/jobs/vmaf-upstream-ab.toml")).unwrap();
    let spec_text = derive_spec(
        &production,
        Some(CI_VMAF_ALLOWANCE),
        &upstream,
        &fork,
        &fork_commit,
        (&reference, REFERENCE.1),
        (&distorted, DISTORTED.1),
    );
    let spec_path = root.join("vmaf-real.toml");
    std::fs::write(&spec_path, &spec_text).unwrap();
    let spec = abfleet_core::spec::JobSpec::load(&spec_path)
        .unwrap_or_else(|e| panic!("the derived spec does not load: {e:#}\n{spec_text}"));
    let names: Vec<&str> = spec.workloads.iter().map(|w| w.name.as_str()).collect();
    let mut expected: Vec<&str> = KEPT_WORKLOADS.to_vec();
    expected.push("lpips");
    assert_eq!(names, expected, "{spec_text}");

    let out = root.join("out");
    let run = run_local(root, &spec_path, &out);
    let markdown = std::fs::read_to_string(out.join("report.md"))
        .unwrap_or_else(|e| format!("(no report.md: {e})"));
    let context = format!(
        "{run}\n--- report.md\n{markdown}\n--- derived spec\n{spec_text}",
        run = run.text
    );
    let json = std::fs::read_to_string(out.join("report.json"))
        .unwrap_or_else(|e| panic!("no report.json ({e})\n{context}"));
    let report = Report::from_json(&json)
        .unwrap_or_else(|e| panic!("report.json does not parse: {e}\n{context}"));

    // The same spec with the production allowance, to judge the model row's scores by it.
    let production_gate_path = root.join("vmaf-real-production-gate.toml");
    std::fs::write(
        &production_gate_path,
        derive_spec(
            &production,
            None,
            &upstream,
            &fork,
            &fork_commit,
            (&reference, REFERENCE.1),
            (&distorted, DISTORTED.1),
        ),
    )
    .unwrap();
    let production_gate = abfleet_core::spec::JobSpec::load(&production_gate_path).unwrap();

    let mut failures = check_report(run.code, &report, &markdown);
    failures.extend(check_production_gate(&report, &production_gate));
    failures.extend(check_broken_flag(root, &spec_text, spec.workloads.len()));
    if !failures.is_empty() {
        let mut message = format!("{} assertion(s) failed:\n", failures.len());
        for failure in &failures {
            let _ = writeln!(message, "  - {failure}");
        }
        panic!("{message}\n{context}");
    }
}

/// Every assertion on the real run, collected so one run says everything that is wrong.
fn check_report(code: Option<i32>, report: &Report, markdown: &str) -> Vec<String> {
    let mut failures = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };
    check(
        code == Some(0),
        format!(
            "`abfleet local` exits 0 (it exited {code:?}; report exit_code {}, errors {:?})",
            report.exit_code, report.errors
        ),
    );
    let cell = |name: &str| report.cells.iter().find(|c| c.workload == name);
    let describe =
        |c: &CellResult| {
            format!(
            "parity {:?}, upstream {:?} (rc {:?}, error {:?}), fork {:?} (rc {:?}, error {:?}), \
             failures {:?}",
            c.parity,
            c.upstream.status,
            c.upstream.returncode,
            c.upstream.error,
            c.fork.status,
            c.fork.returncode,
            c.fork.error,
            c.parity_failures.iter().map(|f| &f.message).collect::<Vec<_>>()
        )
        };
    let mut all = KEPT_WORKLOADS.to_vec();
    all.push("lpips");
    for name in &all {
        check(
            cell(name).is_some(),
            format!("the report has a `{name}` cell"),
        );
    }

    // The model row: parity OK with the declared motion rename applied.
    if let Some(c) = cell("vmaf_v0.6.1") {
        check(
            c.parity == CellParity::Ok,
            format!("vmaf_v0.6.1: parity OK ({})", describe(c)),
        );
        check(
            c.renamed_metrics
                .get("VMAF_integer_feature_motion_sad_score")
                .map(String::as_str)
                == Some("integer_motion"),
            format!(
                "vmaf_v0.6.1: the rename VMAF_integer_feature_motion_sad_score → integer_motion \
                 applied (renamed {:?}, only upstream {:?}, only fork {:?})",
                c.renamed_metrics, c.only_upstream_metrics, c.only_fork_metrics
            ),
        );
        for (side, result) in [("upstream", &c.upstream), ("fork", &c.fork)] {
            check(
                result.pooled.contains_key("vmaf"),
                format!(
                    "vmaf_v0.6.1: the {side} side has a pooled `vmaf` (pooled keys {:?})",
                    result.pooled.keys().collect::<Vec<_>>()
                ),
            );
            check(
                result.nframes == Some(FRAMES),
                format!(
                    "vmaf_v0.6.1: the {side} side scored {FRAMES} frames ({:?})",
                    result.nframes
                ),
            );
        }
        check(
            c.score_delta.contains_key("vmaf"),
            format!(
                "vmaf_v0.6.1: `vmaf` is compared (score_delta keys {:?})",
                c.score_delta.keys().collect::<Vec<_>>()
            ),
        );
    }

    // Per-feature rows (`--no_prediction`): their own metric, and no `vmaf` anywhere.
    for (name, metric) in [
        ("float_ssim", "float_ssim"),
        ("float_ms_ssim", "float_ms_ssim"),
        ("psnr_hvs", "psnr_hvs"),
    ] {
        let Some(c) = cell(name) else { continue };
        check(
            c.parity == CellParity::Ok,
            format!("{name}: parity OK ({})", describe(c)),
        );
        check(
            c.score_delta.contains_key(metric),
            format!(
                "{name}: `{metric}` is compared (score_delta keys {:?})",
                c.score_delta.keys().collect::<Vec<_>>()
            ),
        );
        check(
            !c.score_delta.contains_key("vmaf"),
            format!(
                "{name}: no `vmaf` in score_delta (keys {:?}): the row timed the model too",
                c.score_delta.keys().collect::<Vec<_>>()
            ),
        );
        for (side, result) in [("upstream", &c.upstream), ("fork", &c.fork)] {
            let in_frames = result
                .scores
                .as_ref()
                .is_some_and(|s| s.frames.iter().any(|f| f.metrics.contains_key("vmaf")));
            check(
                !result.pooled.contains_key("vmaf") && !in_frames,
                format!(
                    "{name}: the {side} side carries no `vmaf` (pooled keys {:?}, in frames: \
                     {in_frames})",
                    result.pooled.keys().collect::<Vec<_>>()
                ),
            );
        }
    }

    // Fork-only features: upstream rejects them (exit 255), the report says so.
    for name in ["ssim", "motion_v2"] {
        let Some(c) = cell(name) else { continue };
        check(
            c.parity == CellParity::AbsentUpstream
                && c.upstream.status == SideStatus::Absent
                && c.fork.status == SideStatus::Ok,
            format!("{name}: absent upstream, fork ok ({})", describe(c)),
        );
        check(
            c.upstream.returncode == Some(255),
            format!("{name}: upstream exited 255 ({:?})", c.upstream.returncode),
        );
    }
    check(
        markdown.contains("absent upstream"),
        "report.md says `absent upstream`".to_string(),
    );

    // lpips without its model: the fork exits 0 with no frames; a failed side with a reason.
    if let Some(c) = cell("lpips") {
        check(
            c.fork.status == SideStatus::Unavailable,
            format!("lpips: the fork side failed ({})", describe(c)),
        );
        check(
            c.fork
                .error
                .as_deref()
                .is_some_and(|e| !e.trim().is_empty()),
            format!("lpips: the failed fork side has a reason ({})", describe(c)),
        );
        check(
            c.parity != CellParity::Ok,
            format!("lpips: parity is not OK ({})", describe(c)),
        );
        check(
            c.upstream.status == SideStatus::Absent,
            format!("lpips: absent upstream ({})", describe(c)),
        );
        check(
            report
                .errors
                .iter()
                .any(|e| e.contains("/lpips: fork: ") && e.contains("outside the A/B comparison")),
            format!(
                "lpips: the failure is listed as a problem outside the A/B comparison ({:?})",
                report.errors
            ),
        );
    }

    // The fork's SIMD float_ms_ssim is several times faster on this pair.
    if let Some(c) = cell("float_ms_ssim") {
        check(
            c.verdict == Some(Verdict::Faster),
            format!(
                "float_ms_ssim: verdict faster (verdict {:?}, speedup {:?}, ci95 {:?}, p {:?}, \
                 pairs {}, stop {:?}, upstream times {:?}, fork times {:?})",
                c.verdict,
                c.speedup,
                c.speedup_ci95,
                c.p_value,
                c.pairs,
                c.stop_reason,
                c.upstream.times,
                c.fork.times
            ),
        );
    }
    failures
}

/// The model row's real scores judged by the production spec's own `vmaf` allowance
/// (1e-5, the seed's ceiling). The fork's pooled `vmaf` delta on this short, heavily
/// compressed pair depends on the SIMD path the host runs: -1.1e-5 on one host (over the
/// production ceiling), -4e-6 on an AMD EPYC with AVX-512 (under it). So the test holds the
/// gate to the numbers rather than to one host's: the delta stays under the CI allowance
/// (2e-5: growth is caught), and the production gate fails the row exactly when, and only
/// because, the pooled `vmaf` delta is over 1e-5 — on the pooled-mean rule and on `vmaf`
/// alone. The delta measured is printed for docs/vmaf.md.
fn check_production_gate(report: &Report, production: &abfleet_core::spec::JobSpec) -> Vec<String> {
    use abfleet_core::parity::{compare, Gates, ParityRule};
    let Some(cell) = report.cells.iter().find(|c| c.workload == "vmaf_v0.6.1") else {
        return vec!["no vmaf_v0.6.1 cell to judge by the production gate".into()];
    };
    let (Some(up), Some(fork)) = (&cell.upstream.scores, &cell.fork.scores) else {
        return vec!["the vmaf_v0.6.1 cell has no scores to judge by the production gate".into()];
    };
    let gates = Gates {
        max_score_delta: production.measure.max_score_delta,
        max_frame_delta: production.measure.max_frame_delta,
    };
    let outcome = compare(up, fork, &production.parity, gates);
    let Some(delta) = outcome.score_delta.get("vmaf").copied() else {
        return vec!["the model row has no pooled vmaf delta".into()];
    };
    let production_ceiling = production
        .parity
        .allow
        .get("vmaf")
        .and_then(|a| a.max_delta)
        .unwrap_or(production.measure.max_score_delta);
    println!(
        "vmaf_real: pooled vmaf delta on this host {delta:+.3e} (production ceiling {production_ceiling:e})"
    );
    let mut failures = Vec::new();
    if delta.abs() >= 2.0e-5 {
        failures.push(format!(
            "the model row's pooled vmaf delta grew to {delta:e}, past the CI allowance 2e-5 (known: -1.1e-5 and -4e-6 by host)"
        ));
    }
    let rules: Vec<(&str, ParityRule)> = outcome
        .failures
        .iter()
        .map(|f| (f.metric.as_str(), f.rule))
        .collect();
    // Deltas are compared at the printed precision (6 decimals): over the ceiling means
    // over it by at least one printed unit.
    let over = delta.abs() > production_ceiling + 0.5e-6;
    let under = delta.abs() < production_ceiling - 0.5e-6;
    if over && rules != [("vmaf", ParityRule::PooledMean)] {
        failures.push(format!(
            "the pooled vmaf delta {delta:e} is over the production ceiling {production_ceiling:e}, so the \
             production gate must fail the row on vmaf's pooled mean only; it failed on {rules:?}"
        ));
    }
    if under && !rules.is_empty() {
        failures.push(format!(
            "the pooled vmaf delta {delta:e} is under the production ceiling {production_ceiling:e}, so the \
             production gate must pass the row; it failed on {rules:?}"
        ));
    }
    failures
}

/// The defect the issue started from: `-Denable_vulkan=false`, refused by the fork's meson
/// (a *feature* option). The same spec with that one flag changed, run from the same
/// directory (upstream's build is cached): exit 3, and on the console one error naming the
/// failed command and its log, the cells listed once, and meson's own message in the tail.
fn check_broken_flag(root: &Path, spec_text: &str, cells: usize) -> Vec<String> {
    let mut failures = Vec::new();
    let good_flag = "\"-Denable_vulkan=disabled\"";
    if spec_text.matches(good_flag).count() != 1 {
        return vec![format!(
            "the production spec's fork build no longer has {good_flag} once: update check_broken_flag"
        )];
    }
    let broken_path = root.join("vmaf-real-broken-flag.toml");
    std::fs::write(
        &broken_path,
        spec_text.replace(good_flag, "\"-Denable_vulkan=false\""),
    )
    .unwrap();
    let run = run_local(root, &broken_path, &root.join("out-broken-flag"));
    let stdout = run.stdout.as_str();
    let mut check = |ok: bool, what: &str| {
        if !ok {
            failures.push(format!("broken meson flag: {what}\n{}", run.text));
        }
    };
    check(run.code == Some(3), "`abfleet local` exits 3");
    let problems: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("problem:"))
        .collect();
    check(
        problems.len() == 2,
        "two problem lines: the build, the cells it stopped",
    );
    check(
        problems.first().is_some_and(|p| {
            p.starts_with("problem: the fork build failed: `meson setup build libvmaf")
                && p.contains("exited with code 1")
                && p.contains("(log: ")
        }),
        "the first names the failed meson command, its exit code and the log path",
    );
    check(
        problems.get(1).is_some_and(|p| {
            p.starts_with(&format!(
                "problem: not measured: all {cells} cells: the fork build failed (`meson setup"
            ))
        }),
        "the second lists the cells once, as not measured because of the build",
    );
    check(
        stdout.contains("the fork build log ends with:")
            && stdout.lines().any(|l| {
                l.starts_with("    | ")
                    && l.contains("ERROR: Value \"false\"")
                    && l.contains("Vulkan")
                    && l.contains("is not one of the choices")
            }),
        "meson's message (Value \"false\" … is not one of the choices) is in the log tail",
    );
    check(
        !run.text.contains("all cells measured"),
        "nothing says all cells were measured",
    );
    failures
}

/// The production spec with local sources, the small pair, a short [measure], the kept
/// workloads plus `lpips`; every other section verbatim. Each substitution must match.
fn derive_spec(
    production: &str,
    vmaf_allowance: Option<(&str, &str)>,
    upstream: &Path,
    fork: &Path,
    fork_commit: &str,
    reference: (&Path, &str),
    distorted: (&Path, &str),
) -> String {
    let sections = split_sections(production);
    let mut out = String::new();
    let mut kept = Vec::new();
    let mut fixture_written = false;
    let mut lpips_written = false;
    let workload_count = sections.iter().filter(|s| s.0 == "[[workloads]]").count();
    let mut workloads_seen = 0;
    for (header, body) in &sections {
        let section = match header.as_str() {
            "" | "[targets]" | "[backends.cpu]" | "[build]" | "[fork.build]" | "[command]"
            | "[parity.renames]" => {
                format!("{header}\n{body}")
            }
            "[parity.allow.vmaf]" => match vmaf_allowance {
                Some((max_delta, reason)) => {
                    let body =
                        replace_line(body, "max_delta = ", &format!("max_delta = {max_delta}"));
                    format!(
                        "{header}\n{}",
                        replace_line(
                            &body,
                            "reason = ",
                            &format!("reason = {}", toml_string(reason))
                        )
                    )
                }
                None => format!("{header}\n{body}"),
            },
            h if h.starts_with("[parity.allow.") => format!("{header}\n{body}"),
            "[upstream]" => format!(
                "{header}\n{}",
                replace_line(
                    body,
                    "git = ",
                    &format!("git = {}", toml_string(&upstream.display().to_string()))
                )
            ),
            "[fork]" => {
                let body = replace_line(
                    body,
                    "git = ",
                    &format!("git = {}", toml_string(&fork.display().to_string())),
                );
                format!(
                    "{header}\n{}",
                    replace_line(&body, "rev = ", &format!("rev = \"{fork_commit}\""))
                )
            }
            "[[fixtures]]" => {
                assert!(
                    !fixture_written,
                    "the production spec has more than one fixture: decide which the real test replaces"
                );
                fixture_written = true;
                fixture_section(
                    "testsrc2_576x324",
                    FRAMES,
                    (reference.0, reference.1),
                    (distorted.0, distorted.1),
                )
            }
            "[[workloads]]" => {
                workloads_seen += 1;
                let name = body
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("name = "))
                    .unwrap_or_else(|| panic!("a workload without a name:\n{body}"))
                    .trim_matches('"')
                    .to_string();
                let mut text = String::new();
                if KEPT_WORKLOADS.contains(&name.as_str()) {
                    text = format!("{header}\n{body}");
                    kept.push(name);
                }
                if workloads_seen == workload_count {
                    lpips_written = true;
                    text.push_str(
                        "\n[[workloads]]\nname = \"lpips\"\n\
                         args = [\"--no_prediction\", \"--feature\", \"lpips\"]\n\n",
                    );
                }
                text
            }
            "[measure]" => {
                let mut body = body.clone();
                for (key, value) in [
                    ("warmup", "1"),
                    ("runs", "3"),
                    ("max_runs", "8"),
                    ("max_cell_seconds", "300"),
                    ("timeout_seconds", "120"),
                ] {
                    body = replace_line(&body, &format!("{key} = "), &format!("{key} = {value}"));
                }
                format!("{header}\n{body}")
            }
            other => panic!(
                "fixtures/jobs/vmaf-upstream-ab.toml has a section `{other}` the real test does \
                 not know: decide in cli/tests/vmaf_real.rs whether it keeps it"
            ),
        };
        out.push_str(&section);
    }
    assert!(fixture_written, "the production spec has no [[fixtures]]");
    assert!(lpips_written, "the production spec has no [[workloads]]");
    let mut missing: Vec<&&str> = KEPT_WORKLOADS
        .iter()
        .filter(|w| !kept.iter().any(|k| k == **w))
        .collect();
    missing.sort();
    assert!(
        missing.is_empty(),
        "the production spec lost the workloads {missing:?}"
    );
    out
}

struct LocalRun {
    code: Option<i32>,
    stdout: String,
    text: String,
}

/// `abfleet local SPEC --out OUT`, its output to files (no pipe to fill), killed at the
/// deadline.
fn run_local(dir: &Path, spec: &Path, out: &Path) -> LocalRun {
    let stdout_path = dir.join("local.stdout");
    let stderr_path = dir.join("local.stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .current_dir(dir)
        .arg("local")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("abfleet runs");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > RUN_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let stdout = std::fs::read_to_string(&stdout_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let stderr_tail: String = {
        let lines: Vec<&str> = stderr.lines().collect();
        lines[lines.len().saturating_sub(60)..].join("\n")
    };
    let summary = match status {
        Some(status) => format!(
            "`abfleet local` ended: {status} after {:?}",
            started.elapsed()
        ),
        None => format!("`abfleet local` killed after the {RUN_DEADLINE:?} deadline"),
    };
    LocalRun {
        code: status.and_then(|s| s.code()),
        stdout: stdout.clone(),
        text: format!("{summary}\n--- stdout\n{stdout}\n--- stderr (last 60 lines)\n{stderr_tail}"),
    }
}
