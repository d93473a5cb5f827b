//! Reading what a `vmaf`-like tool wrote (JSON, XML, CSV) into [`crate::scores::Scores`].
//!
//! [`parse`] takes the whole text of one output file and the format the job spec says the
//! tool writes; [`parse_reader`] reads it from a reader, streaming JSON so that a huge output
//! costs its per-frame numbers, never its text or a value tree. The three formats carry the same per-frame metrics; only JSON and XML carry
//! the tool's pooled block (for CSV, [`crate::scores::Scores::pooled_mean`] computes it).
//! Metrics are matched by name, never by position: upstream and the fork print them in
//! different orders. A file with no frames parses (the fork writes one when a feature
//! cannot load its model and still exits 0); deciding that it is a failure is the caller's.
//!
//! Every error is an [`OutputError`] that says which format, where in the text (see
//! [`Position`]) and what was wrong; no input makes these parsers panic.

mod csv;
mod error;
mod json;
mod number;
mod parse;
pub mod synthetic;
mod xml;

pub use crate::spec::OutputFormat;
pub use error::{OutputError, Position, Site};
pub use parse::{parse, parse_reader};
