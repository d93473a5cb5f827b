//! What earlier runs leave for a report, as values: per generation, what a finished run
//! leaves for the next run of its spec ([`GenerationResult`], kept by the coordinator's store
//! when a run finishes), the latest of those before a run ([`PreviousResult`]), and the
//! earlier comparable runs' snapshots ([`EarlierRuns`]). [`super::build`] reads them; it
//! never asks a store.

use std::collections::BTreeMap;

use crate::backend_cell::BackendCell;
use crate::finding::Finding;
use crate::ids::RunId;

use super::history::GenerationSnapshot;
use super::{GenerationSection, Report};

/// How many earlier comparable runs a report walks back through for a cell (the latest with
/// the cell, the latest whose cell passed parity), per hardware identity.
pub const COMPARABLE_DEPTH: usize = 64;

/// One generation of a finished run, as a later run compares against it.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationResult {
    pub generation: String,
    /// Side → toolchain; never empty (a generation that built nothing leaves no result).
    pub toolchain: BTreeMap<String, String>,
    pub findings: Vec<Finding>,
    pub backend_cells: Vec<BackendCell>,
    /// The cells and what they were measured with (absent in rows written before the store
    /// kept snapshots).
    pub snapshot: Option<GenerationSnapshot>,
}

/// The latest earlier result on a generation, and the run it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct PreviousResult {
    pub run_id: RunId,
    pub result: GenerationResult,
}

/// What earlier runs of the same spec name left on one generation, before this run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EarlierRuns {
    /// The latest run's result (whatever state it finished in): its toolchain, findings and
    /// backend timings are what this run's are compared with.
    pub previous: Option<PreviousResult>,
    /// The snapshots of the earlier comparable runs (`done`, never bisect steps), newest
    /// first, each with the hardware identity the store keeps for it; at most
    /// [`COMPARABLE_DEPTH`] per identity. A section is compared with those of its own
    /// hardware only.
    pub comparable: Vec<(Option<String>, GenerationSnapshot)>,
}

impl EarlierRuns {
    /// Takes out the comparable snapshots of one hardware identity, newest first (a snapshot
    /// holds a summary of every cell: moved, never copied).
    pub fn take_comparable_on(&mut self, hardware: Option<&str>) -> Vec<GenerationSnapshot> {
        std::mem::take(&mut self.comparable)
            .into_iter()
            .filter(|(identity, _)| identity.as_deref() == hardware)
            .take(COMPARABLE_DEPTH)
            .map(|(_, snapshot)| snapshot)
            .collect()
    }
}

/// What a finished run's report leaves for the next run of its spec: each generation that
/// built something (a section without a toolchain is never "the previous run").
pub fn results_for_later_runs(report: &Report) -> Vec<GenerationResult> {
    report
        .generations
        .iter()
        .filter(|section| !section.toolchain.is_empty())
        .map(|section| GenerationResult {
            generation: section.key.clone(),
            toolchain: section.toolchain.clone(),
            findings: section.findings.clone(),
            backend_cells: section.backend_cells.clone(),
            snapshot: Some(GenerationSnapshot::of(report, section)),
        })
        .collect()
}

/// A section compared with the previous run on its generation: its findings and backend
/// timings against that run's, its toolchain beside the previous one (a toolchain bump shows
/// as a change), and a sweep against the previous sweep's winner (a winner that changed after
/// a toolchain change becomes a retuning finding).
pub(super) fn attach_previous_run(section: &mut GenerationSection, previous: PreviousResult) {
    let previous_run = previous.run_id.to_string();
    crate::finding::attach_previous(
        &mut section.findings,
        &previous.result.findings,
        &previous_run,
    );
    crate::backend_cell::attach_previous(
        &mut section.backend_cells,
        &previous.result.backend_cells,
        &previous_run,
    );
    section.previous_run = Some(previous_run.clone());
    section.previous_toolchain = previous.result.toolchain;
    let toolchain_changes = section.toolchain_changes();
    if let Some(sweep) = section.sweep.as_mut() {
        crate::sweep::attach_history(
            sweep,
            &mut section.findings,
            &previous.result.findings,
            toolchain_changes,
            &previous_run,
        );
    }
}
