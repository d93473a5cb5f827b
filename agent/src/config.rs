//! How an agent is set up.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// `http://host:port` (loopback only) or `https://host:port` of the coordinator.
    pub coordinator_url: String,
    /// The agent's certificate, key and the fleet CA, for an `https://` coordinator.
    pub tls: Option<abfleet_proto::transport::TlsFiles>,
    /// Where the agent keeps its id, git caches, builds, fixtures, spool and job outputs.
    pub work_dir: PathBuf,
    /// Longest wait between reconnection attempts.
    pub max_backoff: Duration,
    /// Where the inventory is read again while idle; a change (a new driver, a toolchain
    /// bump, a recorded set edited) is registered again. `None`: never re-read.
    pub inventory_source: Option<InventorySource>,
    pub reprobe_interval: Duration,
    /// What this host fetches and runs, whatever the coordinator asks (docs/security.md).
    /// `None`: no policy, the coordinator is trusted fully (the input checks still hold).
    pub policy: Option<std::sync::Arc<crate::policy::AgentPolicy>>,
    /// The budget of the work dir's cache (builds, git mirrors, fixtures): the least recently
    /// used entries are evicted down to it at start and after each job. `None`: no budget.
    pub max_cache_bytes: Option<u64>,
    /// The architecture this host serves under an emulator (`--emulate FILE`): its builds
    /// cross-compile, its runs go through the emulator, its cells are never timed.
    pub emulation: Option<std::sync::Arc<crate::emulation::Emulation>>,
}

/// Where an agent's inventory comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InventorySource {
    /// The live tools of this host.
    Live,
    /// A recorded probe set (`--probes DIR`).
    Recorded(PathBuf),
    /// This host's live CPU and toolchains plus the GPUs recorded in these probe sets
    /// (`--gpu-probes DIR`): the fork's GPU builds run with the real compilers here and are
    /// checked against GPUs this host does not have.
    LiveWithRecordedGpus(Vec<PathBuf>),
    /// An emulated host (`--emulate FILE`): this machine's facts, the recorded CPU of the
    /// emulation file as the emulated one (`emulation::emulated_inventory`).
    Emulated(std::sync::Arc<crate::emulation::Emulation>),
}

impl InventorySource {
    pub fn read(&self) -> Result<abfleet_core::inventory::Inventory, crate::AgentError> {
        match self {
            InventorySource::Live => Ok(crate::inventory::probe_host()),
            InventorySource::Recorded(dir) => crate::inventory::from_recorded_probes(dir),
            InventorySource::LiveWithRecordedGpus(dirs) => {
                crate::inventory::live_with_recorded_gpus(dirs)
            }
            InventorySource::Emulated(emulation) => crate::emulation::emulated_inventory(emulation),
        }
    }
}

impl AgentConfig {
    pub fn new(coordinator_url: impl Into<String>, work_dir: impl Into<PathBuf>) -> Self {
        AgentConfig {
            coordinator_url: coordinator_url.into(),
            tls: None,
            work_dir: work_dir.into(),
            max_backoff: Duration::from_secs(5),
            inventory_source: None,
            reprobe_interval: Duration::from_secs(300),
            policy: None,
            max_cache_bytes: None,
            emulation: None,
        }
    }

    /// Where events wait until the coordinator acknowledges them: a spool per job.
    pub fn spool_dir(&self) -> PathBuf {
        self.work_dir.join("spool")
    }
}
