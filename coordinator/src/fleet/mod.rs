//! The coordinator's state machine: runs and jobs in the store, the sessions of connected
//! agents, leases and their expiry, event intake, and progress for watchers. The gRPC services
//! are thin adapters over [`Fleet`]; nothing here knows the wire.
//!
//! One handle per concern, each owning its memory and locks and holding the lower concerns
//! it calls (`state` builds them, lowest first): `Reports` (`reports`, `served_reports`,
//! `progress`, `bisects`, `history`), `Alerts` (`notifications`), `Finishing`
//! (`finishing`), `Scheduling` (`sessions` over `session_table`, `leases`, `heartbeats`),
//! `Trust` (`certificates`, `revocations`), `Intake` (`intake` with `intake_memory`,
//! `cell_audit`, `event_gaps`), `Runs` (`runs`), `PullRequests` (`pull_request_reports`) and
//! `Triggers` (`triggers`, `toolchain_watch`). [`Fleet`] hands them out; `metrics` reads
//! them all for `/metrics`.

mod bisects;
mod cell_audit;
mod certificates;
#[cfg(test)]
mod comparable_tests;
mod error;
mod event_gaps;
mod finishing;
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
mod stopping;
#[cfg(test)]
mod tests;
mod toolchain_watch;
mod triggers;

pub use certificates::Trust;
pub use error::FleetError;
pub use finishing::Finishing;
pub use history::HistoryQuery;
pub use intake::Intake;
pub use metrics::Counters;
pub use notifications::Alerts;
pub use pull_request_reports::PullRequestRef;
pub use pull_request_reports::PullRequests;
pub use reports::Reports;
pub use revocations::{refusal, DenyList, RevokeTarget};
pub use runs::Runs;
pub use sessions::Scheduling;
pub use state::{CoordinatorConfig, Fleet};
pub use stopping::{StopOutbound, Stopping};
pub use triggers::Triggers;
pub use triggers::{TriggerOutcome, TriggerRequest, TRIGGER_REASONS};
