//! The report: one document per run, built from the stored events of its jobs (and the
//! earlier runs it is compared with), serialised as JSON (for tools; the fork's A/B document
//! shape). Its words — Markdown, the docs sections, JUnit, pull request comments — are
//! `abfleet-render`'s; `markdown_text` (the escaping of supplied text) stays here for the
//! notes the domain composes. The report code never touches the network or the store.

mod assemble;
mod build;
mod compare;
mod comparison;
pub mod cross_parity;
pub mod earlier;
pub mod history;
pub mod markdown_text;
mod model;
#[cfg(any(test, feature = "samples"))]
pub mod samples;
mod time;

pub use assemble::{AttemptRecord, JobRecord, RunRecord};
pub use build::{build, ReportInputs};
pub use compare::{compare_reports, CellChange};
pub use model::{
    backend_of, AttemptSummary, GenerationSection, Report, ScoreParity, SideInfo, ANY_GENERATION,
};
pub use time::format_utc;
