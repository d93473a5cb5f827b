//! Two reports side by side (`abfleet report RUN --against EARLIER`): what changed between
//! them (fork and upstream commits, toolchains per generation) and, per cell matched on
//! generation, fixture and workload, the speedup then and now with a flag when it fell —
//! the intervals do not overlap and the new one lies lower — and the parity ratchet: a
//! metric's pooled delta that grew past the earlier one by more than half a unit of the
//! precision the outputs printed (5e-7 at vmaf's six decimals), even while still under the
//! gate. Shrinking deltas are listed too, so the allowance can be ratcheted down. The
//! per-cell rule is `history::compare_cell`, shared with every report's comparison with its
//! previous runs (which takes the ratchet's earlier delta from the last accepted cell).

use std::collections::BTreeMap;

use super::Report;
use crate::cell::CellResult;

use super::history::{compare_cell, CellSummary, FlagKind};

type CellKey = (String, String, String);

fn key(cell: &CellResult) -> CellKey {
    (
        cell.generation.clone().unwrap_or_default(),
        cell.fixture.clone(),
        cell.workload.clone(),
    )
}

/// What one matched cell says between the two runs.
#[derive(Debug, Clone, PartialEq)]
pub struct CellChange {
    pub generation: String,
    pub fixture: String,
    pub workload: String,
    pub earlier_speedup: Option<f64>,
    pub speedup: Option<f64>,
    /// The new interval lies wholly below the earlier one.
    pub regression: bool,
    /// The fork's own timed runs all got slower than the earlier ones.
    pub fork_slower: bool,
    /// Metrics whose pooled |delta| grew past the earlier one: (metric, earlier, now).
    pub parity_growth: Vec<(String, f64, f64)>,
    /// Metrics whose pooled |delta| shrank: (metric, earlier, now).
    pub parity_shrink: Vec<(String, f64, f64)>,
}

/// The matched cells of `now` against `earlier`, by the same rule as each report's own
/// comparison with its previous run (`history::compare_cell`).
pub fn compare_reports(now: &Report, earlier: &Report) -> Vec<CellChange> {
    let before: BTreeMap<CellKey, &CellResult> =
        earlier.cells.iter().map(|c| (key(c), c)).collect();
    let mut changes = Vec::new();
    for cell in &now.cells {
        let Some(old) = before.get(&key(cell)) else {
            continue;
        };
        let (flags, shrunk) = compare_cell(
            &CellSummary::of(cell),
            &CellSummary::of(old),
            now.practical_threshold,
        );
        let has = |kind| flags.iter().any(|f| f.kind == kind);
        changes.push(CellChange {
            generation: key(cell).0,
            fixture: cell.fixture.clone(),
            workload: cell.workload.clone(),
            earlier_speedup: old.speedup,
            speedup: cell.speedup,
            regression: has(FlagKind::SpeedupShrank),
            fork_slower: has(FlagKind::ForkSlower),
            parity_growth: flags
                .iter()
                .filter(|f| f.kind == FlagKind::ParityGrowth)
                .map(|f| (f.metric.clone().unwrap_or_default(), f.then, f.now))
                .collect(),
            parity_shrink: shrunk
                .into_iter()
                .map(|s| (s.metric, s.then, s.now))
                .collect(),
        });
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slower_cell_and_a_grown_parity_delta_are_flagged_and_a_shrunk_one_listed() {
        let (now, earlier) = crate::report::samples::compared_reports();
        let changes = compare_reports(&now, &earlier);
        let by = |w: &str| changes.iter().find(|c| c.workload == w).unwrap();
        assert!(by("float_ssim").regression, "{:?}", by("float_ssim"));
        assert!(!by("psnr").regression);
        assert_eq!(by("psnr").parity_growth.len(), 1);
        assert_eq!(by("psnr").parity_growth[0].0, "psnr_y");
        assert_eq!(by("motion").parity_shrink.len(), 1);
        // Growth inside half a printed unit is rounding.
        let mut tiny = earlier.clone();
        tiny.cells
            .iter_mut()
            .find(|c| c.workload == "psnr")
            .unwrap()
            .score_delta
            .insert("psnr_y".into(), 2.6e-6);
        assert!(compare_reports(&now, &tiny)
            .iter()
            .find(|c| c.workload == "psnr")
            .unwrap()
            .parity_growth
            .is_empty());
    }
}
