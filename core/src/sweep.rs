//! Retuning sweeps (docs/sweeps.md): which configurations of the fork's tunables a job times
//! (`plan`), what the agent measured (`outcome`, the payload of the `sweep` event), the
//! verdicts a report draws from it (`judge`: the best configuration with its interval, the
//! runner-up, ties, parity rejections and whether the shipped default went stale) and the
//! comparison with the previous sweep on the same generation (`history`). Pure, like the
//! rest of core: the agent runs the processes, the report is a function of the events.

mod history;
mod judge;
mod outcome;
mod plan;
mod section;

pub use history::attach_history;
pub use judge::{judge, sweep_finding};
pub use outcome::{ConfigurationRun, SweepOutcome};
pub use plan::{plan, Configuration, NotTried, SweepPlan, NOT_TRIED_LISTED};
pub use section::{
    BestConfiguration, ConfigurationSummary, DefaultVerdict, SweepHistory, SweepRow, SweepSection,
    TunableSummary, RETUNING_CHECK, SWEEP_CHECK,
};
