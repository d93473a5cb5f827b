//! The abfleet coordinator: takes runs, keeps them durably, leases jobs to the agents that
//! dial in, stores their numbered events exactly once, and assembles reports.
//!
//! It never dials an agent and never runs a benchmark; it knows nothing of how a build or a
//! timed run works, only of runs, jobs, leases and events.
#![forbid(unsafe_code)]

mod agent_service;
mod auth;
pub use auth::RateLimit;
pub mod clock;
mod control_service;
mod error;
mod fleet;
mod git_url;
pub mod http;
pub mod outbound;
mod server;
pub mod store;
pub mod watcher;
pub mod web;
pub mod webhook;

pub use clock::{Clock, ManualClock, SystemClock};
pub use control_service::MAX_SPEC_JSON_BYTES;
pub use error::CoordinatorError;
pub use fleet::{
    CoordinatorConfig, Counters, Fleet, FleetError, HistoryQuery, PullRequestRef, TriggerOutcome,
    TriggerRequest, TRIGGER_REASONS,
};
pub use server::{
    serve, Coordinator, ServerTransport, MAX_AGENT_MESSAGE_BYTES, MAX_CONTROL_MESSAGE_BYTES,
    MAX_REPLY_BYTES,
};
