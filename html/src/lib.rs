//! report.html and the coordinator's web pages. The report's charts are drawn here, on the
//! server, as SVG with `plotters` (`charts/`); the pages are `maud` templates, which escape
//! every string they are given (`report_page.rs`, `web_pages.rs`). Both `abfleet local`'s
//! report.html and the coordinator's run page call [`report_body`], so the two show the
//! same charts.
//!
//! Invariants: pure functions of their arguments (a `Report`, rows the coordinator read);
//! no I/O, no network, and nothing the page loads from elsewhere: CSS and SVG are inline,
//! no font and no script but the run page's own few lines of server-sent-event handling.

#![forbid(unsafe_code)]

pub mod charts;
mod layout;
mod report_page;
mod text;
mod web_pages;

pub use report_page::{render_report_html, report_body};
pub use web_pages::{
    history_link, render_agents_page, render_history_page, render_report_fragment, render_run_page,
    render_runs_page, AgentView, HistoryPage, RunView, RunsPage,
};
