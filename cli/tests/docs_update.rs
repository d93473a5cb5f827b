//! `abfleet docs update` on copies of the fork's pages (fixtures/docs): a real run of the demo
//! subject, whose fork is built with a planted score bug (ABFLEET_DRIFT: float_ssim fails
//! parity), is written into benchmarks.md once, in the page's table shapes (each header row
//! of the new section occurs in the original page), above the earlier section, and its
//! parity failure becomes one row of state.md; a second update changes nothing.

use std::path::Path;
use std::process::{Command, Output};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures");

fn abfleet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .args(args)
        .output()
        .unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "{:?}\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn a_run_lands_once_in_the_benchmarks_page_and_its_parity_failure_once_in_state() {
    let tmp = tempfile::tempdir().unwrap();
    let subject = Path::new(FIXTURES).join("subject");
    let spec = tmp.path().join("drift.toml");
    std::fs::write(
        &spec,
        format!(
            r#"name = "docs-demo"
[upstream]
path = "{subject}"
[upstream.build]
commands = [["make", "-s", "VARIANT=upstream"]]
[fork]
path = "{subject}"
[fork.build]
commands = [["make", "-s", "VARIANT=fork", "EXTRA_CFLAGS=-DABFLEET_DRIFT"]]
[build]
commands = [["make", "-s"]]
binary = "build/vmaf"
[command]
template = ["{{binary}}", "-r", "{{reference}}", "-d", "{{distorted}}", "-w", "{{width}}", "-h", "{{height}}",
            "-p", "{{pixel_format}}", "-b", "{{bitdepth}}", "--threads", "{{threads}}", "-o", "{{output}}", "--json"]
[[fixtures]]
name = "tiny"
width = 96
height = 64
bitdepth = 8
pixel_format = "420"
frames = 4
reference = {{ generate = "moving-pattern", seed = 3 }}
distorted = {{ generate = "moving-pattern-distorted", seed = 3 }}
[[workloads]]
name = "psnr"
args = ["--feature", "psnr"]
[[workloads]]
name = "float_ssim"
args = ["--feature", "float_ssim"]
[measure]
runs = 3
"#,
            subject = subject.display()
        ),
    )
    .unwrap();
    let out = tmp.path().join("out");
    let local = abfleet(&[
        "local",
        spec.to_str().unwrap(),
        "--work-dir",
        tmp.path().join("work").to_str().unwrap(),
        "--data-dir",
        tmp.path().join("data").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        local.status.code(),
        Some(1),
        "the planted drift fails parity: {}",
        text(&local)
    );
    let report = out.join("report.json");

    let benchmarks = tmp.path().join("benchmarks.md");
    let state = tmp.path().join("state.md");
    let original = std::fs::read_to_string(Path::new(FIXTURES).join("docs/benchmarks.md")).unwrap();
    let original_state =
        std::fs::read_to_string(Path::new(FIXTURES).join("docs/state.md")).unwrap();
    std::fs::write(&benchmarks, &original).unwrap();
    std::fs::write(&state, &original_state).unwrap();
    let update = || {
        let output = abfleet(&[
            "docs",
            "update",
            "--report",
            report.to_str().unwrap(),
            "--benchmarks",
            benchmarks.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
        ]);
        assert!(output.status.success(), "{}", text(&output));
        String::from_utf8(output.stdout).unwrap()
    };
    let first = update();
    assert!(
        first.contains("benchmarks.md: updated") && first.contains("state.md: updated"),
        "{first}"
    );
    let page = std::fs::read_to_string(&benchmarks).unwrap();
    let parsed: abfleet_core::report::Report =
        abfleet_core::report::Report::from_json(&std::fs::read_to_string(&report).unwrap())
            .unwrap();

    // Once, newest first: above the earlier dated section; everything else kept.
    assert_eq!(
        page.matches(&format!("<!-- abfleet:run {} begin -->", parsed.run_id))
            .count(),
        1
    );
    let ours = page.find("<!-- abfleet:run").unwrap();
    let earlier = page.find("### 2026-09-07 — fork `257ac1ec4`").unwrap();
    assert!(ours < earlier, "{page}");
    assert!(page.starts_with("# Benchmarks\n"), "{page}");
    assert!(
        page.ends_with(original.split("### 2026-09-07").nth(1).unwrap()),
        "the earlier section is untouched"
    );
    // In the page's style: the dated heading, the profile table, a row per feature, † and bold.
    let section = &page[ours..earlier];
    let fork = &parsed.fork.resolved.clone().unwrap()[..9];
    assert!(
        section.contains(&format!("— fork `{fork}"))
            && section.contains("` vs upstream `")
            && section.contains(", single-threaded"),
        "{section}"
    );
    // Every table of the section has a shape the page already uses (its header row occurs
    // in the original page): the host, a row per fixture, a row per feature.
    let lines: Vec<&str> = section.lines().collect();
    let headers: Vec<&str> = lines
        .windows(2)
        .filter(|w| w[0].starts_with('|') && w[1].starts_with("|---"))
        .map(|w| w[0])
        .collect();
    assert_eq!(
        headers.len(),
        3,
        "profile, fixture and feature tables: {section}"
    );
    for header in &headers {
        assert!(
            original.lines().any(|l| l == *header),
            "`{header}` is not a table shape of the page:\n{section}"
        );
    }
    // A CPU-only host: no GPUs.
    let profile = lines
        .iter()
        .find(|l| l.starts_with(&format!("| `{}` |", parsed.host.as_ref().unwrap().hostname)))
        .unwrap_or_else(|| panic!("no profile row: {section}"));
    assert!(profile.contains(" | — | "), "{profile}");
    assert!(section.contains("| `tiny`, 4 frames |"), "{section}");
    assert!(
        section.contains("| psnr †") && section.contains("| float_ssim †"),
        "{section}"
    );
    assert!(section.contains("**"), "{section}");
    assert!(
        section.contains("Command: `vmaf -r moving-pattern-"),
        "paths cut to names: {section}"
    );

    let state_page = std::fs::read_to_string(&state).unwrap();
    assert!(state_page.starts_with(&original_state), "{state_page}");
    let rows: Vec<&str> = state_page
        .lines()
        .filter(|l| l.contains("<!-- abfleet:"))
        .collect();
    assert_eq!(rows.len(), 1, "{state_page}");
    assert!(
        rows[0].contains("`tiny/float_ssim`") && rows[0].contains("parity failed"),
        "{}",
        rows[0]
    );

    // Idempotent.
    let second = update();
    assert!(
        second.contains("benchmarks.md: already up to date")
            && second.contains("state.md: already up to date"),
        "{second}"
    );
    assert_eq!(std::fs::read_to_string(&benchmarks).unwrap(), page);
    assert_eq!(std::fs::read_to_string(&state).unwrap(), state_page);

    // No page named: a usage error that says what to pass.
    let none = abfleet(&["docs", "update", "--report", report.to_str().unwrap()]);
    assert_eq!(none.status.code(), Some(2), "{}", text(&none));
    assert!(String::from_utf8_lossy(&none.stderr).contains("--benchmarks PATH"));
}
