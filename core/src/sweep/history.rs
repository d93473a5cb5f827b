//! A sweep compared with the previous sweep of the same spec on the same generation: the
//! previous winner is read from that run's `sweep` finding (kept in the store's
//! `generation_results` like every finding), and a winner that changed after a toolchain
//! change is flagged as a retuning finding.

use serde::{Deserialize, Serialize};

use super::judge::SweepSection;
use crate::finding::{Finding, Severity};

/// The `check` of a sweep's finding (`backend`, `sweep`, the tunables' names).
pub const SWEEP_CHECK: &str = "sweep";
/// The `check` of the finding raised when the winner changed.
pub const RETUNING_CHECK: &str = "sweep_winner_changed";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepHistory {
    pub previous_run: String,
    pub previous_best: String,
    pub best: String,
    pub best_changed: bool,
    /// `side: old → new` of every toolchain that changed since that run.
    pub toolchain_changes: Vec<String>,
    /// The winner changed after a toolchain change: the tuning wants revisiting.
    pub retuning: bool,
    pub note: String,
}

/// Fills `sweep.history` from the previous run's findings of this generation, and adds a
/// retuning finding to `findings` when the winner changed after a toolchain change.
pub fn attach_history(
    sweep: &mut SweepSection,
    findings: &mut Vec<Finding>,
    previous_findings: &[Finding],
    toolchain_changes: Vec<String>,
    previous_run: &str,
) {
    let Some(now) = findings.iter().find(|f| f.check == SWEEP_CHECK) else {
        return;
    };
    let Some(before) = previous_findings
        .iter()
        .find(|p| p.identity() == now.identity())
    else {
        return;
    };
    let text = |f: &Finding| {
        f.evidence
            .get("best")
            .and_then(|v| v.as_str())
            .unwrap_or("(none)")
            .to_string()
    };
    let (previous_best, best) = (text(before), text(now));
    let best_changed = previous_best != best;
    let retuning = best_changed && !toolchain_changes.is_empty();
    let note = match (best_changed, toolchain_changes.is_empty()) {
        (false, _) => format!("same winner as run {previous_run}: {best}"),
        (true, false) => format!(
            "the winner changed after a toolchain change ({}): {previous_best} → {best}; re-check the shipped default",
            toolchain_changes.join("; ")
        ),
        (true, true) => format!(
            "the winner changed with the same toolchain: {previous_best} → {best} (the fork changed, or the two are within noise)"
        ),
    };
    if retuning {
        findings.push(
            Finding::new(
                &now.backend,
                RETUNING_CHECK,
                &now.subject,
                Severity::Warn,
                note.clone(),
                format!("sweep compared with run {previous_run}"),
            )
            .with("previous_best", previous_best.clone())
            .with("best", best.clone())
            .with("toolchain_changes", toolchain_changes.join("; ")),
        );
    }
    sweep.history = Some(SweepHistory {
        previous_run: previous_run.to_string(),
        previous_best,
        best,
        best_changed,
        toolchain_changes,
        retuning,
        note,
    });
}
