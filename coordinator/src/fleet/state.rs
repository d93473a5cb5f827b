//! The fleet handle, its concerns, and what they share ([`Ground`]: the store, the clock,
//! the timing knobs, the progress channel, the counters). Each concern is a handle of its
//! own module with its own memory; [`Fleet`] builds them, lowest first, and hands them out.

use std::sync::Arc;
use std::time::Duration;

use abfleet_core::progress::RunProgress;
use tokio::sync::broadcast;

use abfleet_core::{JobId, RunId};

use super::{
    Alerts, Finishing, FleetError, Intake, PullRequests, Reports, Runs, Scheduling, Triggers, Trust,
};
use crate::clock::{Clock, SystemClock};
use crate::store::{JobRow, RunRow, Store};

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

/// What every concern shares: the store, the clock, the timing knobs, the progress channel
/// and the counters. Cheap to clone; holds no concern's memory.
#[derive(Clone)]
pub(super) struct Ground(Arc<GroundState>);

struct GroundState {
    store: Store,
    /// Every "now" of the state machine (leases, heartbeats, timestamps) comes from here.
    clock: Arc<dyn Clock>,
    config: CoordinatorConfig,
    progress: broadcast::Sender<RunProgress>,
    counters: super::metrics::Counters,
}

impl Ground {
    fn new(store: Store, config: CoordinatorConfig, clock: Arc<dyn Clock>) -> Ground {
        let (progress, _) = broadcast::channel(1024);
        Ground(Arc::new(GroundState {
            store,
            clock,
            config,
            progress,
            counters: Default::default(),
        }))
    }

    pub(super) fn store(&self) -> &Store {
        &self.0.store
    }

    pub(super) fn config(&self) -> &CoordinatorConfig {
        &self.0.config
    }

    pub(super) fn counters(&self) -> &super::metrics::Counters {
        &self.0.counters
    }

    /// Unix milliseconds now, by the fleet's clock.
    pub(super) fn now_ms(&self) -> i64 {
        self.0.clock.now_ms()
    }

    /// When a lease taken or renewed now expires.
    pub(super) fn lease_expiry(&self) -> i64 {
        self.now_ms() + self.0.config.lease.as_millis() as i64
    }

    /// Tells watchers (`abfleet follow`, the web view, the pull request poster).
    pub(super) fn publish(&self, update: RunProgress) {
        let _ = self.0.progress.send(update);
    }

    pub(super) fn subscribe(&self) -> broadcast::Receiver<RunProgress> {
        self.0.progress.subscribe()
    }

    /// Whether anyone listens to progress (publishing costs nothing then).
    pub(super) fn has_watchers(&self) -> bool {
        self.0.progress.receiver_count() > 0
    }

    pub(super) async fn run_row(&self, run_id: RunId) -> Result<RunRow, FleetError> {
        self.0
            .store
            .runs()
            .run(run_id)
            .await?
            .ok_or(FleetError::UnknownRun(run_id))
    }

    pub(super) async fn job_row(&self, job_id: JobId) -> Result<JobRow, FleetError> {
        self.0
            .store
            .jobs()
            .job(job_id)
            .await?
            .ok_or(FleetError::UnknownJob(job_id))
    }
}

/// The coordinator's state machine, one handle per concern. Each concern owns its memory
/// and its locks and holds the lower concerns it calls as fields, so who calls whom is
/// written in the types (lowest first): reports, alerts, finishing, scheduling, trust,
/// intake, runs, pull requests, triggers. Cheap to clone.
#[derive(Clone)]
pub struct Fleet {
    pub(super) ground: Ground,
    reports: Reports,
    alerts: Alerts,
    finishing: Finishing,
    scheduling: Scheduling,
    trust: Trust,
    intake: Intake,
    runs: Runs,
    pull_requests: PullRequests,
    triggers: Triggers,
}

impl Fleet {
    /// A fleet on wall time.
    pub fn new(store: Store, config: CoordinatorConfig) -> Fleet {
        Fleet::with_clock(store, config, Arc::new(SystemClock))
    }

    /// A fleet whose time comes from `clock` (tests pass a [`ManualClock`](crate::ManualClock)).
    pub fn with_clock(store: Store, config: CoordinatorConfig, clock: Arc<dyn Clock>) -> Fleet {
        let ground = Ground::new(store, config, clock);
        let reports = Reports::new(ground.clone());
        let alerts = Alerts::new(ground.clone());
        let finishing = Finishing::new(ground.clone(), reports.clone(), alerts.clone());
        let scheduling = Scheduling::new(ground.clone(), finishing.clone(), alerts.clone());
        let trust = Trust::new(ground.clone(), scheduling.clone());
        let intake = Intake::new(ground.clone(), scheduling.clone(), finishing.clone());
        let runs = Runs::new(ground.clone(), scheduling.clone(), reports.clone());
        let pull_requests = PullRequests::new(ground.clone(), reports.clone());
        let triggers = Triggers::new(ground.clone(), runs.clone(), pull_requests.clone());
        Fleet {
            ground,
            reports,
            alerts,
            finishing,
            scheduling,
            trust,
            intake,
            runs,
            pull_requests,
            triggers,
        }
    }

    pub fn store(&self) -> &Store {
        self.ground.store()
    }

    pub fn config(&self) -> &CoordinatorConfig {
        self.ground.config()
    }

    /// Unix milliseconds now, by the fleet's clock.
    pub(crate) fn now_ms(&self) -> i64 {
        self.ground.now_ms()
    }

    /// Progress of every run, as it happens.
    pub fn subscribe(&self) -> broadcast::Receiver<RunProgress> {
        self.ground.subscribe()
    }

    /// Reports: made from the store, served, snapshots of progress, bisects, history.
    pub fn reports(&self) -> &Reports {
        &self.reports
    }

    /// Alerts: queued when runs finish or agents are lost, and their delivery.
    pub fn alerts(&self) -> &Alerts {
        &self.alerts
    }

    /// Runs whose jobs have all ended, finished.
    pub fn finishing(&self) -> &Finishing {
        &self.finishing
    }

    /// Agents, their sessions, leases and dispatch.
    pub fn scheduling(&self) -> &Scheduling {
        &self.scheduling
    }

    /// Which certificate speaks for which agent, and the deny list.
    pub fn trust(&self) -> &Trust {
        &self.trust
    }

    /// Events from agents, stored once.
    pub fn intake(&self) -> &Intake {
        &self.intake
    }

    /// Submitting, cancelling and listing runs.
    pub fn runs(&self) -> &Runs {
        &self.runs
    }

    /// Pull requests hearing their runs' answers.
    pub fn pull_requests(&self) -> &PullRequests {
        &self.pull_requests
    }

    /// Triggers, the milestone spec, the toolchain watch.
    pub fn triggers(&self) -> &Triggers {
        &self.triggers
    }

    /// Registers an agent (scheduling) and looks at what its toolchains did since it last
    /// registered (triggers: a moved toolchain starts a retuning run).
    pub async fn register(
        &self,
        agent_id: abfleet_core::AgentId,
        inventory: &abfleet_core::inventory::Inventory,
    ) -> Result<(), FleetError> {
        let earlier = self.scheduling.register(agent_id, inventory).await?;
        self.triggers
            .watch_toolchains(agent_id, inventory, earlier.as_ref())
            .await;
        Ok(())
    }
}
