//! report.html and the coordinator's web view in a real browser: headless Debian chromium
//! through chromedriver (support/browser.rs). report.html of real `abfleet local` runs,
//! opened from disk: one bar per measured cell, whiskers where report.json's intervals are,
//! the parity failure drawn red. The web view of a test coordinator: a run page open before
//! the agent exists sees its progress change as cells finish (server-sent events), then
//! shows the report's charts; the runs and fleet pages list them. Screenshots of every page
//! are saved under `<target>/screenshots/`.

#[path = "support/browser.rs"]
mod browser;
#[path = "../../html/tests/support/html_check.rs"]
mod html_check;
mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use abfleet_coordinator::CoordinatorConfig;
use abfleet_core::cell::CellParity;
use abfleet_core::report::Report;
use abfleet_html::charts::palette;
use abfleet_proto::pb::control_service_client::ControlServiceClient;
use browser::{file_url, Browser};
use serde_json::Value;
use support::*;

fn local_run(spec: &str, out: &Path) -> Report {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/jobs")
        .join(spec);
    let output = Command::new(env!("CARGO_BIN_EXE_abfleet"))
        .current_dir(out.parent().unwrap())
        .arg("local")
        .arg(&spec)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        out.join("report.html").is_file(),
        "abfleet local wrote no report.html: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (_, errors) = html_check::parse(&std::fs::read_to_string(out.join("report.html")).unwrap());
    assert_eq!(
        errors,
        Vec::<String>::new(),
        "{spec:?}: report.html parse errors"
    );
    Report::from_json(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

/// What a speedup chart (`figure.CLASS`, the first one in `scope`) draws, read from the
/// SVG in the page: the bars (by fill), the red ones, and each horizontal whisker turned
/// back into speedups with the figure's axis.
fn chart_script(scope: &str, class: &str) -> String {
    let fills: Vec<String> = palette::BAR_FILLS
        .iter()
        .map(|c| palette::hex(*c))
        .collect();
    format!(
        r#"var fig = document.querySelector({scope:?} + " figure.{class}");
if (!fig) return null;
var fills = {fills:?};
var x0 = Number(fig.dataset.xAtZero), x1 = Number(fig.dataset.xAtEnd);
var end = Number(fig.dataset.endSpeedup);
var rects = Array.from(fig.querySelectorAll("rect"));
var fill = function (r) {{ return (r.getAttribute("fill") || "").toUpperCase(); }};
var whiskers = Array.from(fig.querySelectorAll("polyline"))
  .filter(function (p) {{ return (p.getAttribute("stroke") || "").toUpperCase() === {whisker:?}; }})
  .map(function (p) {{ return p.getAttribute("points").trim().split(/\s+/).map(function (xy) {{ return xy.split(",").map(Number); }}); }})
  .filter(function (pts) {{ return pts.length === 2 && pts[0][1] === pts[1][1]; }})
  .map(function (pts) {{ return [(pts[0][0] - x0) / (x1 - x0) * end, (pts[1][0] - x0) / (x1 - x0) * end]; }});
return {{
  bars: rects.filter(function (r) {{ return fills.indexOf(fill(r)) >= 0; }}).length,
  red: rects.filter(function (r) {{ return fill(r) === {red:?}; }}).length,
  bands: rects.filter(function (r) {{ return fill(r) === {band:?}; }})
    .map(function (r) {{ var x = Number(r.getAttribute("x")), w = Number(r.getAttribute("width")); return [(x - x0) / (x1 - x0) * end, (x + w - x0) / (x1 - x0) * end]; }}),
  whiskers: whiskers,
  speedup_per_px: end / (x1 - x0),
  text: fig.textContent
}};"#,
        whisker = palette::hex(palette::WHISKER),
        red = palette::hex(palette::PARITY_FAIL),
        band = palette::hex(palette::SAME_BAND),
    )
}

/// The chart agrees with the report: a bar per measured cell, a red bar per parity failure,
/// each cell's interval where its whisker is (within the SVG's whole-pixel rounding), one
/// shaded `same` band at 1 ± the practical threshold, and beside each bar its speedup,
/// interval, verdict and pair count as report.json has them.
fn assert_chart_matches(chart: &Value, report: &Report, what: &str) {
    let bands: Vec<[f64; 2]> = serde_json::from_value(chart["bands"].clone()).unwrap();
    let threshold = report.practical_threshold;
    let per_px = chart["speedup_per_px"].as_f64().unwrap();
    assert_eq!(bands.len(), 1, "{what}: one same band");
    for (drawn, expected) in bands[0].iter().zip([1.0 - threshold, 1.0 + threshold]) {
        assert!(
            (drawn - expected).abs() <= 1.5 * per_px,
            "{what}: same band at {:?}, expected 1 ± {threshold}",
            bands[0]
        );
    }
    let text = chart["text"].as_str().unwrap();
    for cell in report.cells.iter().filter(|c| c.parity != CellParity::Fail) {
        let (Some(s), Some([lo, hi]), Some(verdict)) =
            (cell.speedup, cell.speedup_ci95, cell.verdict)
        else {
            continue;
        };
        let verdict = serde_json::to_value(verdict).unwrap();
        let label = format!(
            "{s:.2}x [{lo:.2}–{hi:.2}] {} · {} pairs",
            verdict.as_str().unwrap(),
            cell.pairs
        );
        assert!(
            text.contains(&label),
            "{what}: no label `{label}` in {text}"
        );
    }
    let measured: Vec<_> = report
        .cells
        .iter()
        .filter(|c| c.speedup.is_some())
        .collect();
    let failed = report
        .cells
        .iter()
        .filter(|c| c.parity == CellParity::Fail)
        .count();
    assert_eq!(chart["bars"], measured.len(), "{what}: bars");
    assert_eq!(chart["red"], failed, "{what}: red bars");
    let intervals: Vec<[f64; 2]> = measured.iter().filter_map(|c| c.speedup_ci95).collect();
    let whiskers: Vec<[f64; 2]> = serde_json::from_value(chart["whiskers"].clone()).unwrap();
    assert_eq!(whiskers.len(), intervals.len(), "{what}: whiskers");
    // Plotters draws at whole pixels, and the axis' ends are whole pixels too: a value is
    // within a pixel and a half of where it belongs.
    let tolerance = 1.5 * chart["speedup_per_px"].as_f64().unwrap();
    for (drawn, interval) in whiskers.iter().zip(&intervals) {
        for (d, i) in drawn.iter().zip(interval) {
            assert!(
                (d - i).abs() <= tolerance,
                "{what}: whisker at {drawn:?}, report.json's interval {interval:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_html_from_disk_draws_report_json() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = local_run("demo.toml", &tmp.path().join("demo"));
    let drift = local_run("demo-drift.toml", &tmp.path().join("drift"));
    assert_eq!(drift.exit_code, 1, "demo-drift fails parity");
    let browser = Browser::start().await;
    for (name, report) in [("demo", &demo), ("drift", &drift)] {
        browser
            .goto(&file_url(&tmp.path().join(name).join("report.html")))
            .await;
        let chart = browser
            .wait_for(
                Duration::from_secs(60),
                "the speedup chart",
                &chart_script("body", "speedup-chart"),
            )
            .await;
        assert_chart_matches(&chart, report, name);
        let parity = browser
            .js("return document.querySelector('[data-score-parity]').dataset.scoreParity;")
            .await;
        let absent = browser
            .js("return Array.from(document.querySelectorAll('tr.absent')).length;")
            .await;
        let absent_cells = report
            .cells
            .iter()
            .filter(|c| c.parity == CellParity::AbsentUpstream)
            .count();
        assert_eq!(absent, absent_cells, "{name}: absent-upstream rows");
        assert!(
            chart["text"].as_str().unwrap().contains("absent upstream"),
            "{name}: the chart names absent-upstream rows"
        );
        let path = browser.screenshot(&format!("report-{name}")).await;
        assert!(std::fs::metadata(&path).unwrap().len() > 10_000);
        if name == "drift" {
            assert_eq!(parity, "FAIL");
            assert!(chart["text"].as_str().unwrap().contains("parity FAIL"));
            let plots = browser
                .js("return Array.from(document.querySelectorAll('figure.frame-delta-chart')).map(f => [f.dataset.metric, Number(f.dataset.framesOverGate)]);")
                .await;
            let failure = &drift
                .cells
                .iter()
                .find(|c| c.parity == CellParity::Fail)
                .unwrap();
            let over: u64 = failure.frames_over_gate.values().sum();
            assert_eq!(
                plots,
                serde_json::json!([[failure.parity_failures[0].metric, over]]),
                "one per-frame delta plot, for the failed metric"
            );
        } else {
            assert_eq!(parity, "OK");
        }
    }
    browser.close().await;
}

/// A plaintext coordinator with its web view on a loopback HTTP listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_page_follows_a_live_run_and_then_shows_its_charts() {
    let tmp = tempfile::tempdir().unwrap();
    let coordinator =
        TestCoordinator::start_with_web(&tmp.path().join("data"), CoordinatorConfig::default())
            .await;
    let (url, web) = (coordinator.url(), coordinator.web.unwrap());
    let spec = SpecOptions {
        workloads: &["psnr", "float_ssim", "motion", "motion_v2"],
        ..SpecOptions::path()
    }
    .write(tmp.path(), "spec.toml");
    let mut control = ControlServiceClient::connect(url.clone()).await.unwrap();
    // No agent yet: the run waits in the queue while the page opens.
    let run_id = submit(&mut control, &spec).await;
    let browser = Browser::start().await;
    browser.goto(&format!("http://{web}/runs/{run_id}")).await;
    browser
        .wait_for(
            Duration::from_secs(60),
            "the page to hear the run's first event",
            "return window.abfleetProgress && window.abfleetProgress.length > 0;",
        )
        .await;
    let first = browser
        .js("return [document.getElementById('cells-done').textContent, document.getElementById('cells-total').textContent, window.abfleetProgress[0]];")
        .await;
    assert_eq!(first, serde_json::json!(["0", "4", 0]));
    // Marks this page load: a reload would lose it.
    browser
        .js("window.abfleetSameLoad = true; return null;")
        .await;
    browser.screenshot("web-run-queued").await;

    let agent = TestAgent::start(&url, &tmp.path().join("agent"));
    let done = browser
        .wait_for(
            Duration::from_secs(300),
            "the page to show a finished cell",
            "var n = Number(document.getElementById('cells-done').textContent); return n >= 1 ? n : null;",
        )
        .await;
    assert!(done.as_u64().unwrap() >= 1);
    browser.screenshot("web-run-live").await;
    let chart = browser
        .wait_for(
            Duration::from_secs(300),
            "the report's chart on the run page",
            &chart_script("#report", "speedup-chart"),
        )
        .await;
    let seen: Vec<u64> =
        serde_json::from_value(browser.js("return window.abfleetProgress;").await).unwrap();
    let same_load = browser.js("return window.abfleetSameLoad === true;").await;
    assert_eq!(
        same_load, true,
        "the page updated itself, it was not reloaded"
    );
    assert_eq!(seen.first(), Some(&0));
    assert!(
        seen.iter().any(|n| (1..4).contains(n)),
        "the page saw cells finish while the run ran: {seen:?}"
    );
    assert_eq!(seen.last(), Some(&4), "{seen:?}");
    let report_path = format!("/api/runs/{run_id}/report");
    let (status, body) =
        tokio::task::spawn_blocking(move || http_request(web, "GET", &report_path, &[], b""))
            .await
            .unwrap();
    assert_eq!(status, 200);
    let report = Report::from_json(&body).unwrap();
    assert_chart_matches(&chart, &report, "run page");
    let exit = browser
        .js("return document.getElementById('exit-code').textContent;")
        .await;
    assert_eq!(exit, report.exit_code.to_string());
    browser.screenshot("web-run-done").await;

    browser.goto(&format!("http://{web}/")).await;
    let row = browser
        .js(&format!(
            "var r = document.querySelector('tr[data-run-id=\"{run_id}\"]'); return r && r.dataset.state;"
        ))
        .await;
    assert_eq!(row, "done");
    browser.screenshot("web-runs").await;

    browser.goto(&format!("http://{web}/fleet")).await;
    let agents = browser
        .js("return Array.from(document.querySelectorAll('tr[data-agent-id]')).map(r => r.dataset.state);")
        .await;
    assert_eq!(agents, serde_json::json!(["idle"]));
    browser.screenshot("web-fleet").await;

    // The run page links each workload's history; the history page charts this one run.
    browser.goto(&format!("http://{web}/runs/{run_id}")).await;
    let link = browser
        .js("var a = Array.from(document.querySelectorAll('section.history-links a')).find(a => a.textContent === 'psnr'); return a ? a.getAttribute('href') : null;")
        .await;
    let link = link
        .as_str()
        .unwrap_or_else(|| panic!("no history link for psnr: {link}"))
        .to_string();
    browser.goto(&format!("http://{web}{link}")).await;
    let drawn = browser
        .js("var f = document.querySelector('figure.history-speedup'); if (!f) return null; var c = f.querySelector('circle'); return [Number(f.dataset.points), Number(f.dataset.yAtZero), Number(f.dataset.yAtEnd), Number(f.dataset.yEnd), c ? Number(c.getAttribute('cy')) : null, document.querySelectorAll('table.history tr[data-run-id]').length];")
        .await;
    let drawn: Vec<Option<f64>> =
        serde_json::from_value(drawn.clone()).unwrap_or_else(|err| panic!("{err}: {drawn}"));
    assert_eq!(drawn[0], Some(1.0), "one run, one point");
    assert_eq!(drawn[5], Some(1.0), "one row");
    let psnr = report
        .cells
        .iter()
        .find(|c| c.workload == "psnr")
        .and_then(|c| c.speedup)
        .unwrap();
    let (y_at_zero, y_at_end, y_end) = (drawn[1].unwrap(), drawn[2].unwrap(), drawn[3].unwrap());
    let want = y_at_zero - psnr / y_end * (y_at_zero - y_at_end);
    let cy = drawn[4].expect("the point is drawn");
    assert!(
        (cy - want).abs() <= 1.5,
        "the point at {cy}, the speedup {psnr} at {want}"
    );
    browser.screenshot("web-history").await;
    browser.close().await;
    agent.stop().await;
}
