//! The coordinator's web pages: the runs (newest first, a page at a time), one run (live
//! while it runs, through server-sent events; the report's charts when it is done) and the
//! fleet's agents. The coordinator reads the rows and hands them over as views; these
//! functions only lay them out.

use abfleet_core::report::Report;
use maud::{html, PreEscaped};

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
/// check the page saw), and when the run finishes puts its report into `#report`.
fn live_script(run_id: &str) -> String {
    // A run id is a UUID; encoding it keeps it one string whatever it holds.
    let id = js_string(run_id);
    format!(
        r#"(function () {{
  window.abfleetProgress = [];
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
      fetch("/runs/" + {id} + "/report-body").then(function (response) {{
        return response.text();
      }}).then(function (html) {{
        document.getElementById("report").innerHTML = html;
      }});
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
