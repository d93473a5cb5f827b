//! The report: one document per run, assembled from the stored events of its jobs, and
//! rendered as JSON (for tools; the fork's A/B document shape) and Markdown (for the fork's
//! docs). The report code never touches the network or the store: it is handed events.

mod assemble;
mod bmf;
mod build;
mod compare;
mod comparison;
pub mod docs;
mod docs_section;
pub mod earlier;
pub mod history;
mod junit;
mod markdown;
pub(crate) mod markdown_text;
mod model;
pub mod pull_request;
mod retune_markdown;
mod sweep_markdown;
mod time;
pub mod words;

#[cfg(test)]
pub(crate) use assemble::assemble;
pub use assemble::{AttemptRecord, JobRecord, RunRecord};
pub use bmf::render_bmf;
pub use build::{build, ReportInputs};
pub use compare::{compare_reports, render_comparison, CellChange};
pub use docs_section::render_docs_section;
pub use junit::render_junit;
pub use markdown::render_markdown;
pub use model::{backend_of, AttemptSummary, GenerationSection, Report, ScoreParity, SideInfo};
pub use time::format_utc;
