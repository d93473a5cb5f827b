//! The defaults of the services' settings: the flags' (cli.rs) and the config files'
//! (config/coordinator_settings.rs, config/agent_settings.rs), which
//! `defaults_match_the_flags` keeps equal. Imports nothing of the CLI, so
//! the flag definitions and the files both read it.

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7700";
pub const DEFAULT_DATA_DIR: &str = "abfleet-data";
pub const DEFAULT_LEASE_SECONDS: f64 = 30.0;
pub const DEFAULT_HEARTBEAT_SECONDS: f64 = 2.0;
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
pub const DEFAULT_DEBOUNCE_SECONDS: f64 = 600.0;
/// The label that makes a pull request a performance PR (docs/milestone.md).
pub const DEFAULT_PERF_LABEL: &str = abfleet_coordinator::webhook::PERFORMANCE_LABEL;
/// The dependency bots whose toolchain PRs start a run (`--toolchain-bots`).
pub const DEFAULT_TOOLCHAIN_BOTS: &str = abfleet_coordinator::webhook::DEFAULT_TOOLCHAIN_BOTS;
pub const DEFAULT_COORDINATOR_URL: &str = "http://127.0.0.1:7700";
pub const DEFAULT_WORK_DIR: &str = "abfleet-agent";
