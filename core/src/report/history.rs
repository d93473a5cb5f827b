//! A run's results on one generation as later runs see them (`GenerationSnapshot`: the
//! commits, toolchains, hardware and a summary of each cell), the comparison of a new run
//! with the earlier comparable ones (`SincePrevious`: what changed in between, the
//! regression flags and the parity ratchet), and the points of `abfleet history`. The
//! snapshot is what the store keeps per (run, generation), so neither a report's comparison
//! nor the history re-assembles an earlier run.
//!
//! Comparable runs are finished (`done`) runs of the same spec name, generation key and
//! hardware id (the silicon id without the GPU driver and runtime: a driver bump is a
//! toolchain change, not another history), never bisect steps. Each cell (fixture, workload;
//! a GPU backend cell also by its backend) is compared with the latest earlier comparable run
//! that has it, so a cancelled or partial run does not hide the cells of the full run before
//! it. The flags, per cell:
//! - `speedup_shrank`: the new speedup interval lies wholly below the earlier one (without
//!   intervals: the speedup fell by more than the practical threshold);
//! - `fork_slower`: the fork's own timed runs now all take longer than the earlier ones did
//!   (the ranges are apart) and its median grew by more than the practical threshold;
//! - `parity_growth`: the ratchet (ADR-1228: "ratchet on growth"): a metric's pooled |delta|
//!   grew past the one *accepted* on the latest earlier comparable run whose cell passed
//!   parity, by more than half a unit of the printed precision, even while under the gate.
//!   [`apply_ratchet`] makes it a parity failure of the cell with both values. A delta that
//!   shrank is recorded so the allowance can be ratcheted down.
//!
//! By concern: `snapshot` (what a run leaves), `since` (a run against the earlier ones),
//! `ratchet_failures` (the ratchet applied to a report), `points` (`abfleet history`); here
//! the constants and the printed-precision rules they share.

pub use super::comparison::{
    BaselineMove, EarlierRun, FlagKind, ParityShrink, RegressionFlag, SincePrevious,
};

/// The trigger reason of a bisect step's run (`abfleet bisect`): such runs are never a
/// comparable run nor a point of a history.
pub const BISECT_TRIGGER: &str = "bisect";

/// The decimals assumed where a cell does not say what its outputs printed: vmaf's default
/// `%.6f`.
pub const DEFAULT_PRINTED_DECIMALS: u32 = 6;

/// Half a unit of the coarser of two printed precisions (either unknown: six decimals): a
/// change of a pooled delta below it is rounding, not a change.
pub fn ratchet_slack(a: Option<u32>, b: Option<u32>) -> f64 {
    let decimals = match (a, b) {
        (Some(a), Some(b)) => a.min(b),
        (Some(d), None) | (None, Some(d)) => d,
        (None, None) => DEFAULT_PRINTED_DECIMALS,
    };
    0.5 * 10f64.powi(-(decimals.min(17) as i32))
}

/// A pooled delta for people: `0`, else three significant digits (`3.00e-6`).
pub fn show_delta(value: f64) -> String {
    if value == 0.0 {
        "0".to_string()
    } else {
        format!("{value:.2e}")
    }
}

mod points;
mod ratchet_failures;
mod since;
mod snapshot;

pub use points::{history_points, HistoryPoint, HistoryQuery};
pub(crate) use ratchet_failures::apply_ratchet;
pub(crate) use since::compare_cell;
#[cfg(test)]
use since::ratchet;
pub use since::since_previous;
pub use snapshot::{section_hardware, CellSummary, GenerationSnapshot};

#[cfg(test)]
mod tests;
