//! abfleet's reports as text, from `abfleet_core::report::Report` (which decides everything:
//! this crate only words it): report.md (`render_markdown`, with the sweep and retuning
//! sections), the fork's docs sections and pages (`render_docs_section`, `docs`), JUnit XML
//! (`render_junit`), Bencher's metric format (`render_bmf`), a pull request's comment and
//! status (`pull_request`), two reports compared (`render_comparison`), a generation's
//! comparison with its previous run and `abfleet history` (`history`), a bisect (`bisect`). `words` holds what a
//! cell says in every rendering, HTML included (`abfleet-html` reads it). No I/O: every
//! function takes values and returns text.

pub mod bisect;
mod bmf;
mod comparison;
pub mod cross_parity;
pub mod docs;
mod docs_section;
pub mod history;
mod junit;
mod markdown;
pub mod pull_request;
mod retune_markdown;
mod sweep_markdown;
mod toolchain_lines;
pub mod words;

pub use bmf::render_bmf;
pub use comparison::render_comparison;
pub use docs_section::render_docs_section;
pub use history::render_history;
pub use junit::render_junit;
pub use markdown::render_markdown;
