//! The coordinator's state machine: runs and jobs in the store, the sessions of connected
//! agents, leases and their expiry, event intake, and progress for watchers. The gRPC services
//! are thin adapters over [`Fleet`]; nothing here knows the wire.
//!
//! One handle, [`Fleet`] (in `state`), with its methods split by concern: `runs` (submit,
//! cancel, finish), `sessions` (agents, sessions, dispatch, over `session_table`, scheduling's own memory), `leases` (heartbeats, expiry,
//! requeue), `certificates` (agent id ↔ certificate, the cap on ids per certificate), `revocations` (the deny list: revoke, check, end sessions), `heartbeats` (when agents last spoke, written in batches), `intake` (events, with what it keeps per job in `intake_memory`), `event_gaps` (events a restored store lacks: asked for, or the attempt redone), `cell_audit` (each cell derived again before it is stored), `progress` (watchers), `reports`, `served_reports` (a finished run's report, assembled once and kept), `bisects` (a run's recorded bisects), `history` (one workload over time), `metrics` (counters and gauges for `/metrics`) and `triggers` (reasons,
//! the milestone spec, debounce).

mod bisects;
mod cell_audit;
mod certificates;
#[cfg(test)]
mod comparable_tests;
mod error;
mod event_gaps;
mod heartbeats;
mod history;
mod intake;
mod intake_memory;
mod leases;
mod metrics;
mod notifications;
mod progress;
mod pull_request_reports;
mod reports;
mod revocations;
mod runs;
mod served_reports;
mod session_table;
mod sessions;
mod state;
#[cfg(test)]
mod tests;
mod toolchain_watch;
mod triggers;

pub use error::FleetError;
pub use history::HistoryQuery;
pub use metrics::Counters;
pub use pull_request_reports::PullRequestRef;
pub use revocations::{refusal, DenyList, RevokeTarget};
pub use state::{CoordinatorConfig, Fleet};
pub use triggers::{TriggerOutcome, TriggerRequest, TRIGGER_REASONS};
