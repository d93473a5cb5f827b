//! report.html as a parser reads it: an HTML5 document html5ever parses without a single
//! error, whose names are escaped, with one chart bar per measured cell and, for a run over
//! several generations, the cross-generation chart. Input: the report.json of a real
//! `abfleet local fixtures/jobs/demo-drift.toml` run (fixtures/reports/demo-drift.json).

use std::path::Path;

use abfleet_core::report::{GenerationSection, Report};
use abfleet_html::charts::palette;
use abfleet_html::render_report_html;
use html_check::parse;
use markup5ever_rcdom::{Handle, NodeData, RcDom};

#[path = "support/html_check.rs"]
mod html_check;

fn drift_report() -> Report {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/reports/demo-drift.json"
    );
    Report::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The drift report as if two generations had each measured all its cells (the second
/// one twice as fast): the shape `abfleet` writes for a run over several generations.
fn two_generation_report() -> Report {
    let mut report = drift_report();
    let base = report.generations[0].clone();
    let mut cells = Vec::new();
    let mut sections = Vec::new();
    for (g, key) in ["cpu/x86/zen4", "cpu/x86/zen5"].into_iter().enumerate() {
        for cell in &report.cells {
            let mut cell = cell.clone();
            cell.generation = Some(key.to_string());
            if g == 1 {
                cell.speedup = cell.speedup.map(|s| s * 2.0);
                cell.speedup_ci95 = cell.speedup_ci95.map(|[lo, hi]| [lo * 2.0, hi * 2.0]);
            }
            cells.push(cell);
        }
        sections.push(GenerationSection {
            key: key.to_string(),
            ..base.clone()
        });
    }
    report.cells = cells;
    report.generations = sections;
    report
}

fn attribute(node: &Handle, name: &str) -> Option<String> {
    match &node.data {
        NodeData::Element { attrs, .. } => attrs
            .borrow()
            .iter()
            .find(|a| &*a.name.local == name)
            .map(|a| a.value.to_string()),
        _ => None,
    }
}

fn element_name(node: &Handle) -> Option<String> {
    match &node.data {
        NodeData::Element { name, .. } => Some(name.local.to_string()),
        _ => None,
    }
}

fn descendants(node: &Handle, out: &mut Vec<Handle>) {
    for child in node.children.borrow().iter() {
        out.push(child.clone());
        descendants(child, out);
    }
}

/// The `figure` elements whose class is `class`.
fn figures(dom: &RcDom, class: &str) -> Vec<Handle> {
    let mut all = Vec::new();
    descendants(&dom.document, &mut all);
    all.into_iter()
        .filter(|n| element_name(n).as_deref() == Some("figure"))
        .filter(|n| attribute(n, "class").as_deref() == Some(class))
        .collect()
}

/// The `rect`s under `figure` filled with one of the bar colours.
fn bars(figure: &Handle) -> usize {
    let fills: Vec<String> = palette::BAR_FILLS
        .iter()
        .map(|c| palette::hex(*c))
        .collect();
    let mut all = Vec::new();
    descendants(figure, &mut all);
    all.iter()
        .filter(|n| element_name(n).as_deref() == Some("rect"))
        .filter(|n| attribute(n, "fill").is_some_and(|f| fills.contains(&f)))
        .count()
}

fn text_of(node: &Handle) -> String {
    let mut all = vec![node.clone()];
    descendants(node, &mut all);
    all.iter()
        .filter_map(|n| match &n.data {
            NodeData::Text { contents } => Some(contents.borrow().to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn report_html_parses_without_a_single_error() {
    for report in [drift_report(), two_generation_report()] {
        let html = render_report_html(&report);
        let (_, errors) = parse(&html);
        assert_eq!(errors, Vec::<String>::new(), "parse errors in report.html");
        assert!(html.starts_with("<!DOCTYPE html>"));
    }
}

#[test]
fn report_html_is_self_contained() {
    let html = render_report_html(&drift_report());
    // The SVG namespace is a name, not something loaded.
    let html = html.replace(r#"xmlns="http://www.w3.org/2000/svg""#, "");
    for outside in [
        "http://", "https://", "<link", "<script", "@import", "url(", "src=",
    ] {
        assert!(!html.contains(outside), "report.html contains {outside}");
    }
}

#[test]
fn one_bar_per_measured_cell_and_a_parity_failure_in_red() {
    let report = drift_report();
    let measured = report.cells.iter().filter(|c| c.speedup.is_some()).count();
    let failed = report
        .cells
        .iter()
        .filter(|c| c.parity == abfleet_core::cell::CellParity::Fail)
        .count();
    assert!(measured >= 3 && failed == 1, "the fixture changed");
    let (dom, _) = parse(&render_report_html(&report));
    let [chart] = figures(&dom, "speedup-chart").try_into().unwrap();
    assert_eq!(bars(&chart), measured);
    assert_eq!(attribute(&chart, "data-bars"), Some(measured.to_string()));
    let red = palette::hex(palette::PARITY_FAIL);
    let mut all = Vec::new();
    descendants(&chart, &mut all);
    let red_bars = all
        .iter()
        .filter(|n| element_name(n).as_deref() == Some("rect"))
        .filter(|n| attribute(n, "fill").as_deref() == Some(red.as_str()))
        .count();
    assert_eq!(red_bars, failed);
    assert!(text_of(&chart).contains("parity FAIL"));
    // The failed metric's per-frame plot, with the frames over the gate counted.
    let [delta] = figures(&dom, "frame-delta-chart").try_into().unwrap();
    assert_eq!(
        attribute(&delta, "data-metric").as_deref(),
        Some("float_ssim")
    );
    assert_eq!(
        attribute(&delta, "data-frames-over-gate").as_deref(),
        Some("24")
    );
    // The absent-upstream row is named, not drawn.
    assert!(text_of(&chart).contains("absent upstream"));
}

#[test]
fn several_generations_get_one_bar_per_generation_and_feature() {
    let report = two_generation_report();
    let measured = report.cells.iter().filter(|c| c.speedup.is_some()).count();
    let html = render_report_html(&report);
    // Kept for a person to open (target/tmp/two-generations.html).
    std::fs::write(
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("two-generations.html"),
        &html,
    )
    .unwrap();
    let (dom, errors) = parse(&html);
    assert!(errors.is_empty());
    let [chart] = figures(&dom, "cross-generation-chart").try_into().unwrap();
    // Generation bars are drawn in the generations' colours, or red for a parity failure.
    let colours: Vec<String> = palette::GENERATIONS[..2]
        .iter()
        .chain([&palette::PARITY_FAIL])
        .map(|c| palette::hex(*c))
        .collect();
    let mut all = Vec::new();
    descendants(&chart, &mut all);
    let drawn = all
        .iter()
        .filter(|n| element_name(n).as_deref() == Some("rect"))
        .filter(|n| attribute(n, "fill").is_some_and(|f| colours.contains(&f)))
        .count();
    assert_eq!(drawn, measured);
    assert_eq!(figures(&dom, "speedup-chart").len(), 2);
}

#[test]
fn names_from_the_spec_are_escaped() {
    let mut report = drift_report();
    report.cells[0].workload = "<script>alert(1)</script>".to_string();
    report.name = "a & b <i>".to_string();
    let html = render_report_html(&report);
    assert!(!html.contains("<script>alert(1)"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("a &amp; b &lt;i&gt;"));
    let (_, errors) = parse(&html);
    assert!(errors.is_empty(), "{errors:?}");
}

/// Issue 23: a suspicious cell is traceable to the agent and certificate that sent it, in
/// the page as in report.md.
#[test]
fn each_cell_names_the_agent_and_certificate_that_sent_it() {
    let mut report = drift_report();
    report.cells[0].measured_by = Some(abfleet_core::cell::MeasuredBy {
        agent_id: "3f2a9c1e".to_string(),
        certificate: Some("bench-<1> serial 0a1b".to_string()),
    });
    let html = render_report_html(&report);
    assert!(
        html.contains("measured by agent 3f2a9c1e (certificate bench-&lt;1&gt; serial 0a1b)"),
        "the sender, escaped"
    );
    let (_, errors) = parse(&html);
    assert!(errors.is_empty(), "{errors:?}");
}

/// Issue 39: report.md listed the alerts sent about a run, report.html did not.
#[test]
fn the_alerts_sent_about_the_run_are_listed_as_in_report_md() {
    let mut report = drift_report();
    report.notifications = vec![abfleet_core::notification::NotificationRecord {
        kind: "parity_failure".to_string(),
        endpoint: "ops-<slack>".to_string(),
        key: "any".to_string(),
        summary: "test: parity failed on float_ssim".to_string(),
        state: "sent".to_string(),
        attempts: 1,
        last_status: Some(200),
        last_error: None,
        created: "2026-12-07T00:00:00Z".to_string(),
        sent: Some("2026-12-07T00:00:01Z".to_string()),
    }];
    let html = render_report_html(&report);
    assert!(
        html.contains(
            "parity_failure to ops-&lt;slack&gt;: sent (HTTP 200) — test: parity failed on float_ssim"
        ),
        "the alert, escaped"
    );
    let (_, errors) = parse(&html);
    assert!(errors.is_empty(), "{errors:?}");
}
