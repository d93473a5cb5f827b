//! The abfleet agent: runs on a bench host, dials the coordinator, takes one job at a time,
//! builds both sides, times every cell with the fork's discipline, gates on score parity and
//! streams numbered events back through an on-disk spool.
//!
//! The agent knows nothing of scheduling or of other agents; it does what a job offer says,
//! within what its own checks (`input_checks`) and policy (`policy`) allow.

pub mod backoff;
pub mod build;
pub mod cache;
pub mod child_group;
pub mod command_line;
pub mod config;
pub mod context;
pub mod emulation;
pub mod error;
pub mod fixtures;
pub mod fork_run;
pub mod generations;
pub mod generator;
pub mod identity;
pub mod input_checks;
pub mod inventory;
pub mod job;
pub mod loadavg;
pub mod noise;
pub mod policy;
pub mod probe;
pub mod retune;
pub mod runner;
pub mod running_marker;
pub mod session;
pub mod sink;
pub mod source;
pub mod spool;
pub mod stages;
pub mod timeline;
pub mod upload_gate;
pub mod work_dir_lock;

pub use config::AgentConfig;
pub use error::AgentError;
pub use session::run_agent;
