//! abfleet's domain: what a run is asked to do (the job spec), what it measured (cells,
//! scores, parity) and what it tells people (the report). Pure data and pure functions:
//! this crate knows nothing of gRPC, SQLite, processes or the network.
#![forbid(unsafe_code)]

pub mod backend_cell;
pub mod bisect;
pub mod calibration;
pub mod cell;
pub mod cell_audit;
pub mod certs;
pub mod events;
pub mod exit;
pub mod fail_on;
pub mod finding;
pub mod generation;
pub mod ids;
pub mod inventory;
pub mod lifecycle;
pub mod names;
pub mod notification;
pub mod output;
pub mod paired;
pub mod parity;
pub mod progress;
pub mod report;
pub mod retune;
pub mod scores;
pub mod session;
pub mod spec;
#[cfg(feature = "sql")]
pub mod sql;
pub mod stats;
pub mod stored_text;
pub mod sweep;

pub use ids::{AgentId, JobId, RunId};
