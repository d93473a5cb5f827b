//! Where a run stands, as a watcher sees it: one update per change, the last one carrying
//! the run's exit code. The coordinator publishes these; the CLI shows them.

use crate::{JobId, RunId};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunProgress {
    pub run_id: RunId,
    /// The job the update is about, when it is about one.
    pub job_id: Option<JobId>,
    /// A run or job state (`queued`, `running`, `done`, …) or an agent's phase (`timing`).
    pub state: String,
    pub message: String,
    pub cells_done: u32,
    pub cells_total: u32,
    /// The cell being timed, while one is.
    pub current_cell: Option<String>,
    /// Set on the last update of a run: its exit code as `exit` documents them.
    pub exit_code: Option<i32>,
}

impl RunProgress {
    /// An update with no cell counts, not finished.
    pub fn new(run_id: RunId, job_id: Option<JobId>, state: &str, message: &str) -> RunProgress {
        RunProgress {
            run_id,
            job_id,
            state: state.to_string(),
            message: message.to_string(),
            cells_done: 0,
            cells_total: 0,
            current_cell: None,
            exit_code: None,
        }
    }

    /// The run has finished (this is its last update).
    pub fn is_finished(&self) -> bool {
        self.exit_code.is_some()
    }
}
