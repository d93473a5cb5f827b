//! The fleet handle and what it shares: the store, the clock, the timing knobs, the progress
//! channel, and each concern's own memory — a type of that concern's module whose fields and
//! locks only it can touch (`session_table` for scheduling, `intake_memory`, the certificate
//! cache, the runs being finished, the alert delivery's state). Every other module of
//! `fleet` adds methods to [`Fleet`] over this state.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use abfleet_core::progress::RunProgress;
use tokio::sync::broadcast;

use crate::clock::{Clock, SystemClock};
use crate::store::Store;

/// Timing knobs of the coordinator.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// How long a job stays leased without a heartbeat from its agent.
    pub lease: Duration,
    /// How often agents are asked to heartbeat.
    pub heartbeat_interval: Duration,
    /// Attempts a job gets before it fails with "agent lost".
    pub max_attempts: u32,
    /// An agent silent for this long is listed as lost.
    pub agent_lost_after: Duration,
    /// Events the store keeps for one job, all attempts together; a job that sends more
    /// fails (a runaway agent cannot fill the store).
    pub max_events_per_job: u64,
    /// The spec a trigger without one runs (`--milestone-spec`): read when the trigger comes,
    /// so an edited file is picked up without a restart.
    pub milestone_spec: Option<std::path::PathBuf>,
    /// The spec the toolchain watcher runs, narrowed to the generation whose toolchain
    /// changed (`--retune-spec`); `None`: the milestone spec. Without either the watcher is off.
    pub retune_spec: Option<std::path::PathBuf>,
    /// The retuning sweep (`[sweep]`, docs/sweeps.md) a `toolchain-bump` trigger of the
    /// milestone spec starts too (`--sweep-spec`), read when the trigger comes.
    pub sweep_spec: Option<std::path::PathBuf>,
    /// Triggers of one reason and key within this window start one run (`--debounce-seconds`).
    pub trigger_debounce: Duration,
    /// New agent ids one certificate may register within an hour (0: no cap).
    pub max_agent_ids_per_certificate: u32,
    /// Where alerts go (`[notify]`); none configured: nothing is queued.
    pub notify: crate::outbound::notify::NotifyConfig,
    /// How pull requests hear their runs' answers (`[github]`); `None`: they do not.
    pub github: Option<crate::outbound::github::GitHubReporting>,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            lease: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(2),
            max_attempts: 3,
            agent_lost_after: Duration::from_secs(10),
            max_events_per_job: 200_000,
            milestone_spec: None,
            retune_spec: None,
            sweep_spec: None,
            trigger_debounce: Duration::from_secs(600),
            max_agent_ids_per_certificate: 8,
            notify: Default::default(),
            github: None,
        }
    }
}

pub(super) struct Inner {
    pub(super) store: Store,
    /// Every "now" of the state machine (leases, heartbeats, timestamps) comes from here.
    pub(super) clock: Arc<dyn Clock>,
    pub(super) config: CoordinatorConfig,
    /// Open sessions and who waits for a job (scheduling's memory, `session_table`).
    pub(super) sessions: super::session_table::SessionTable,
    pub(super) progress: broadcast::Sender<RunProgress>,
    /// Agent id → the certificate name it is bound to (`certificates`).
    pub(super) certificates: super::certificates::CertificateCache,
    /// Revoked certificates (`revocations`), shared with the servers' checks.
    pub(super) deny_list: super::revocations::DenyList,
    pub(super) counters: super::metrics::Counters,
    /// Held from a trigger's debounce check to its record, so two deliveries for one tag
    /// never both start a run.
    pub(super) triggers: tokio::sync::Mutex<()>,
    /// What intake keeps per job still taking events (`intake_memory`).
    pub(super) intake: super::intake_memory::IntakeMemory,
    /// Heartbeats not yet written to the store (see `heartbeats`).
    pub(super) heard: Mutex<super::heartbeats::Heard>,
    /// Reports assembled at once, one per core and at most four: each holds its run's
    /// decoded events, and runs finishing together queue here instead of all being in
    /// memory at once.
    pub(super) assembling: tokio::sync::Semaphore,
    /// Runs a task is finishing now (`runs::finish_run_if_complete`).
    pub(super) finishing: super::runs::FinishingRuns,
    /// The alert delivery task's wake-up and HTTP clients (`notifications`).
    pub(super) alert_delivery: super::notifications::AlertDelivery,
}

/// A cheap handle on the coordinator's state.
#[derive(Clone)]
pub struct Fleet {
    pub(super) inner: Arc<Inner>,
}

impl Fleet {
    /// A fleet on wall time.
    pub fn new(store: Store, config: CoordinatorConfig) -> Fleet {
        Fleet::with_clock(store, config, Arc::new(SystemClock))
    }

    /// A fleet whose time comes from `clock` (tests pass a [`ManualClock`](crate::ManualClock)).
    pub fn with_clock(store: Store, config: CoordinatorConfig, clock: Arc<dyn Clock>) -> Fleet {
        let (progress, _) = broadcast::channel(1024);
        Fleet {
            inner: Arc::new(Inner {
                store,
                clock,
                config,
                sessions: Default::default(),
                progress,
                certificates: Default::default(),
                deny_list: Default::default(),
                counters: Default::default(),
                triggers: tokio::sync::Mutex::new(()),
                intake: Default::default(),
                heard: Mutex::new(Default::default()),
                assembling: tokio::sync::Semaphore::new(
                    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 4)),
                ),
                finishing: Default::default(),
                alert_delivery: Default::default(),
            }),
        }
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn config(&self) -> &CoordinatorConfig {
        &self.inner.config
    }

    /// Unix milliseconds now, by the fleet's clock.
    pub(crate) fn now_ms(&self) -> i64 {
        self.inner.clock.now_ms()
    }

    pub(super) fn lease_expiry(&self) -> i64 {
        self.now_ms() + self.inner.config.lease.as_millis() as i64
    }
}
