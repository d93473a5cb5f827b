//! The coordinator's web pages: the runs (newest first, a page at a time), one run (live
//! while it runs, through server-sent events; the report's charts when it is done), the
//! fleet's agents, and a workload's history on a generation (speedup and the fork's median
//! over time). The coordinator reads the rows and hands them over as views; these
//! functions only lay them out.

use abfleet_core::cell::CellParity;
use abfleet_core::report::history::HistoryPoint;
use abfleet_core::report::Report;
use maud::{html, Markup, PreEscaped};

use crate::layout::{page, Shell};
use crate::report_page::report_body;

/// One run, as the runs list and the run page show it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunView {
    pub run_id: String,
    pub name: String,
    pub state: String,
    pub trigger: String,
    pub trigger_note: Option<String>,
    /// When it was submitted, UTC.
    pub submitted: String,
    pub cells_done: u32,
    pub cells_total: u32,
    pub current_cell: Option<String>,
    /// Set once the run finished.
    pub exit_code: Option<i32>,
    /// Why the run could not start or be carried out, when the coordinator recorded why.
    pub error: Option<String>,
}

/// A page of the runs list.
#[derive(Debug, Clone, PartialEq)]
pub struct RunsPage {
    pub runs: Vec<RunView>,
    pub offset: u64,
    pub limit: u32,
    /// Another page follows this one.
    pub more: bool,
}

/// One agent of the fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentView {
    pub agent_id: String,
    pub hostname: String,
    pub generations: Vec<String>,
    /// `idle`, `busy`, `draining`, `lost`, …
    pub state: String,
    pub current_job: Option<String>,
    /// UTC.
    pub last_heartbeat: String,
    pub lost: bool,
}

fn exit_text(exit_code: Option<i32>) -> String {
    exit_code.map_or("—".to_string(), |code| code.to_string())
}

pub fn render_runs_page(runs: &RunsPage) -> String {
    let previous = runs.offset.saturating_sub(u64::from(runs.limit));
    let next = runs.offset + runs.runs.len() as u64;
    page(
        "abfleet runs",
        Shell::LIST_PAGE,
        html! {
            h1 { "Runs" }
            p class="muted" { "Newest first. Runs " (runs.offset + 1) "–" (next) "." }
            table class="runs" {
                thead { tr { th { "Run" } th { "Spec" } th { "State" } th { "Trigger" } th { "Progress" } th { "Exit code" } th { "Submitted" } } }
                tbody {
                    @for run in &runs.runs {
                        tr data-run-id=(run.run_id) data-state=(run.state) {
                            td { a href=(format!("/runs/{}", run.run_id)) { code { (run.run_id.get(..8).unwrap_or(&run.run_id)) } } }
                            td { (run.name) }
                            td { (run.state) @if let Some(error) = &run.error { br; span class="fail-text" { (error) } } }
                            td { (run.trigger) @if let Some(note) = &run.trigger_note { " — " (note) } }
                            td { progress max=(run.cells_total.max(1)) value=(run.cells_done) {} " " (run.cells_done) " / " (run.cells_total) }
                            td class="num" { (exit_text(run.exit_code)) }
                            td { (run.submitted) }
                        }
                    }
                }
            }
            @if runs.runs.is_empty() { p { "No runs on this page." } }
            p {
                @if runs.offset > 0 { a rel="prev" href=(format!("/?offset={previous}&limit={}", runs.limit)) { "← newer" } " " }
                @if runs.more { a rel="next" href=(format!("/?offset={next}&limit={}", runs.limit)) { "older →" } }
            }
        },
    )
    .into_string()
}

/// One run: its progress, live while it runs (the page listens to
/// `/api/runs/ID/events`, and fetches the report into itself when the run finishes); the
/// report's charts and tables once it is done.
pub fn render_run_page(run: &RunView, report: Option<&Report>) -> String {
    let finished = run.exit_code.is_some();
    page(
        &format!("abfleet run {}", run.run_id),
        Shell::LIVE_PAGE,
        html! {
            section id="run" data-run-id=(run.run_id) data-finished=(finished) {
                h1 { "Run " code { (run.run_id) } " (" (run.name) ")" }
                p {
                    "State " strong id="run-state" { (run.state) } ", trigger " (run.trigger)
                    @if let Some(note) = &run.trigger_note { " — " (note) }
                    ", submitted " (run.submitted) ", exit code " span id="exit-code" { (exit_text(run.exit_code)) } "."
                }
                p {
                    progress id="progress" class="progress" max=(run.cells_total.max(1)) value=(run.cells_done) {}
                    br;
                    span id="cells-done" { (run.cells_done) } " of " span id="cells-total" { (run.cells_total) } " cells done"
                    span id="current-cell" { @if let Some(cell) = &run.current_cell { "; timing " (cell) } }
                }
                p id="message" class="muted" {}
                @if let Some(error) = &run.error {
                    p class="problems" { (error) }
                }
                @if !finished {
                    p id="live-note" class="muted" { "This page follows the run live and shows its report when it finishes." }
                }
            }
            div id="report" {
                @if let Some(report) = report.filter(|_| finished) {
                    (report_fragment(&run.run_id, report))
                }
            }
            @if !finished {
                script { (PreEscaped(live_script(&run.run_id))) }
            }
        },
    )
    .into_string()
}

/// The run page's only script: it applies each progress event to the page, keeps the
/// `cells_done` of every event in `window.abfleetProgress` (what a reader, or a test, can
/// check the page saw), and when the run finishes puts its report into `#report` (a failed
/// fetch is retried, then said, never inserted as the report).
fn live_script(run_id: &str) -> String {
    // A run id is a UUID; encoding it keeps it one string whatever it holds.
    let id = js_string(run_id);
    format!(
        r#"(function () {{
  window.abfleetProgress = [];
  // The finished run's report: only a 200's body goes into the page; anything else is
  // retried a few times (the coordinator may still be writing it), then said.
  var loadReport = function (attempt) {{
    fetch("/runs/" + {id} + "/report-body").then(function (response) {{
      if (!response.ok) {{ throw new Error("HTTP " + response.status); }}
      return response.text();
    }}).then(function (html) {{
      document.getElementById("report").innerHTML = html;
    }}).catch(function (error) {{
      if (attempt < 4) {{
        setTimeout(function () {{ loadReport(attempt + 1); }}, 1000 * (attempt + 1));
      }} else {{
        document.getElementById("report").textContent =
          "The report could not be loaded (" + error.message + "); reload the page.";
      }}
    }});
  }};
  var source = new EventSource("/api/runs/" + {id} + "/events");
  source.addEventListener("progress", function (event) {{
    var p = JSON.parse(event.data);
    window.abfleetProgress.push(p.cells_done);
    document.getElementById("run-state").textContent = p.state;
    document.getElementById("cells-done").textContent = p.cells_done;
    document.getElementById("cells-total").textContent = p.cells_total;
    var bar = document.getElementById("progress");
    bar.max = Math.max(p.cells_total, 1);
    bar.value = p.cells_done;
    document.getElementById("current-cell").textContent = p.current_cell ? "; timing " + p.current_cell : "";
    document.getElementById("message").textContent = p.message || "";
    if (p.exit_code !== null) {{
      source.close();
      document.getElementById("exit-code").textContent = p.exit_code;
      document.getElementById("run").dataset.finished = "true";
      document.getElementById("live-note").hidden = true;
      loadReport(0);
    }}
  }});
}})();"#
    )
}

/// `text` as a JavaScript string literal, safe inside a `<script>` element.
fn js_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_ascii_alphanumeric() || c == '-' => out.push(c),
            c => out.push_str(&format!("\\u{:04x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// What `#report` of the run page holds once the run is done: a link to its JSON and the
/// report's charts and tables (also served alone, for the live page to fetch).
fn report_fragment(run_id: &str, report: &Report) -> maud::Markup {
    html! {
        p { a href=(format!("/api/runs/{run_id}/report")) { "report.json" } }
        (report_body(report))
        (history_links(report))
    }
}

/// A link to the history of each workload on each of the run's generations.
fn history_links(report: &Report) -> Markup {
    let mut links: Vec<(String, Vec<String>)> = Vec::new();
    for section in &report.generations {
        let mut workloads: Vec<String> = Vec::new();
        for cell in report.cells_of(section) {
            if !workloads.contains(&cell.workload) {
                workloads.push(cell.workload.clone());
            }
        }
        if !workloads.is_empty() {
            links.push((section.key.clone(), workloads));
        }
    }
    html! {
        @if !links.is_empty() {
            section class="history-links" {
                h2 { "History" }
                ul {
                    @for (key, workloads) in &links {
                        li {
                            code { (key) } ": "
                            @for (i, workload) in workloads.iter().enumerate() {
                                @if i > 0 { ", " }
                                a href=(history_link(key, workload)) { (workload) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// [`render_run_page`]'s `#report` alone.
pub fn render_report_fragment(run_id: &str, report: &Report) -> String {
    report_fragment(run_id, report).into_string()
}

pub fn render_agents_page(agents: &[AgentView]) -> String {
    let lost = agents.iter().filter(|a| a.lost).count();
    page(
        "abfleet fleet",
        Shell::LIST_PAGE,
        html! {
            h1 { "Fleet" }
            p { (agents.len()) " agent(s), " (lost) " lost." }
            table class="agents" {
                thead { tr { th { "Agent" } th { "Host" } th { "Generations" } th { "State" } th { "Current job" } th { "Last heartbeat" } } }
                tbody {
                    @for agent in agents {
                        tr data-agent-id=(agent.agent_id) data-state=(agent.state) class=(if agent.lost { "parity-fail" } else { "" }) {
                            td { code { (agent.agent_id) } }
                            td { (agent.hostname) }
                            td { @for (i, key) in agent.generations.iter().enumerate() { @if i > 0 { ", " } code { (key) } } }
                            td { @if agent.lost { span class="fail-text" { "lost" } } @else { (agent.state) } }
                            td { @if let Some(job) = &agent.current_job { code { (job) } } @else { "—" } }
                            td { (agent.last_heartbeat) }
                        }
                    }
                }
            }
        },
    )
    .into_string()
}

/// A workload's history on a generation, as `/history` shows it; an empty `generation` or
/// `workload` is the page's form alone.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPage {
    pub generation: String,
    pub workload: String,
    pub fixture: Option<String>,
    pub name: Option<String>,
    /// Oldest first (`abfleet history`'s points).
    pub points: Vec<HistoryPoint>,
}

pub fn render_history_page(history: &HistoryPage) -> String {
    let asked = !history.generation.is_empty() && !history.workload.is_empty();
    let title = if asked {
        format!(
            "abfleet history of {} on {}",
            history.workload, history.generation
        )
    } else {
        "abfleet history".to_string()
    };
    page(
        &title,
        Shell::LIVE_PAGE,
        html! {
            @if asked {
                h1 { "History of " code { (history.workload) } " on " code { (history.generation) } }
            } @else {
                h1 { "History" }
            }
            form method="get" action="/history" class="history-query" {
                label { "Generation " input name="generation" value=(history.generation) placeholder="cpu/x86-64-v4/zen4" required; }
                " "
                label { "Workload " input name="workload" value=(history.workload) placeholder="float_ssim" required; }
                " "
                label { "Fixture " input name="fixture" value=(history.fixture.as_deref().unwrap_or_default()) placeholder="every fixture"; }
                " "
                label { "Spec " input name="name" value=(history.name.as_deref().unwrap_or_default()) placeholder="every spec"; }
                " "
                button type="submit" { "Show" }
            }
            @if !asked {
                p class="muted" { "Name a generation key and a workload (a run page links to each of its own)." }
            } @else if history.points.is_empty() {
                p { "No finished run has this workload on this generation yet." }
            } @else {
                p class="muted" {
                    (history.points.len()) " run(s), oldest first. Red points are flagged against the runs before them of the same spec, hardware and fixture; "
                    a href=(history_api_link(history)) { "JSON" } "."
                }
                @for (fixture, points) in by_fixture(&history.points) {
                    h2 { "Fixture " code { (fixture) } }
                    (history_figure("history-speedup", crate::charts::speedup_history_chart(&points), "Speedup per run, its 95% interval as the whisker; the line at 1x is break-even."))
                    (history_figure("history-fork-median", crate::charts::fork_median_history_chart(&points), "The fork's own median per run, its fastest and slowest timed run as the whisker."))
                }
                h2 { "Runs" }
                table class="history" {
                    thead { tr { th { "Date" } th { "Run" } th { "Trigger" } th { "Fork" } th { "Upstream" } th { "Fixture" } th { "Speedup [95% CI]" } th { "Fork median" } th { "Flags and changes" } } }
                    tbody {
                        @for point in &history.points {
                            tr data-run-id=(point.run_id) class=(if point.flags.is_empty() { "" } else { "parity-fail" }) {
                                td { (point.date.get(..19).unwrap_or(&point.date)) }
                                td { a href=(format!("/runs/{}", point.run_id)) { code { (point.run_id.get(..8).unwrap_or(&point.run_id)) } } }
                                td { (point.trigger) @if let Some(note) = &point.trigger_note { " — " (note) } }
                                td { code { (point.fork_commit.as_deref().map_or("—", |c| c.get(..12).unwrap_or(c))) } }
                                td { code { (point.upstream_requested) } }
                                td { (point.cell.fixture) }
                                td class="num" { (speedup_text(point)) }
                                td class="num" { (point.cell.fork_median.map_or("—".to_string(), |m| format!("{m:.4} s"))) }
                                td {
                                    @for flag in &point.flags { span class="fail-text" { (flag.kind.as_str()) } ": " (flag.detail) br; }
                                    @if !point.changes.is_empty() { "changed: " (point.changes.join("; ")) }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
    .into_string()
}

/// `/history` of a generation's workload, for a link.
pub fn history_link(generation: &str, workload: &str) -> String {
    format!(
        "/history?generation={}&workload={}",
        query_escape(generation),
        query_escape(workload)
    )
}

fn history_api_link(history: &HistoryPage) -> String {
    let mut link = format!(
        "/api/history?generation={}&workload={}",
        query_escape(&history.generation),
        query_escape(&history.workload)
    );
    if let Some(fixture) = &history.fixture {
        link.push_str(&format!("&fixture={}", query_escape(fixture)));
    }
    if let Some(name) = &history.name {
        link.push_str(&format!("&name={}", query_escape(name)));
    }
    link
}

/// `text` percent-encoded for a query value: everything but unreserved characters.
fn query_escape(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// The points of each fixture, in the order fixtures first appear.
fn by_fixture(points: &[HistoryPoint]) -> Vec<(String, Vec<HistoryPoint>)> {
    let mut groups: Vec<(String, Vec<HistoryPoint>)> = Vec::new();
    for point in points {
        match groups.iter_mut().find(|(f, _)| *f == point.cell.fixture) {
            Some((_, group)) => group.push(point.clone()),
            None => groups.push((point.cell.fixture.clone(), vec![point.clone()])),
        }
    }
    groups
}

fn speedup_text(point: &HistoryPoint) -> String {
    match (
        point.cell.speedup,
        point.cell.speedup_ci95,
        point.cell.parity,
    ) {
        (Some(s), _, CellParity::Fail) => format!("{s:.3}x (parity failed)"),
        (Some(s), Some([lo, hi]), _) => format!("{s:.3}x [{lo:.3}, {hi:.3}]"),
        (Some(s), None, _) => format!("{s:.3}x"),
        (None, _, CellParity::AbsentUpstream) => "absent upstream".to_string(),
        (None, _, _) => "—".to_string(),
    }
}

fn history_figure(
    class: &str,
    chart: Result<crate::charts::HistoryChart, crate::charts::ChartError>,
    caption: &str,
) -> Markup {
    match chart {
        Ok(chart) => html! {
            figure class=(class) data-points=(chart.points) data-flagged=(chart.flagged)
                data-x-at-first=(chart.x_at_first) data-x-step=(chart.x_step)
                data-y-at-zero=(chart.y_at_zero) data-y-at-end=(chart.y_at_end) data-y-end=(chart.y_end) {
                (PreEscaped(chart.svg))
                figcaption { (caption) }
            }
        },
        Err(err) => html! { p class="problems" { (err.to_string()) } },
    }
}
