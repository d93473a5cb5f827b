//! What a run leaves on one generation for later runs: `GenerationSnapshot` (commits,
//! toolchains, hardware) and a `CellSummary` per cell, and the hardware a section ran on.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::backend_cell::{BackendCell, BackendCellStatus};
use crate::cell::{CellParity, CellResult};
use crate::paired::Verdict;
use crate::report::{GenerationSection, Report};

/// What a later run needs of one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    pub fixture: String,
    pub workload: String,
    /// A GPU generation's backend cell (the fork alone with `--backend NAME`): the backend.
    /// `None` for an A/B cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    pub speedup: Option<f64>,
    pub speedup_ci95: Option<[f64; 2]>,
    pub verdict: Option<Verdict>,
    pub parity: CellParity,
    /// The fork's own timed runs: median, fastest and slowest (seconds).
    pub fork_median: Option<f64>,
    pub fork_min: Option<f64>,
    pub fork_max: Option<f64>,
    pub upstream_median: Option<f64>,
    /// Metric → pooled delta (fork − upstream).
    pub score_delta: BTreeMap<String, f64>,
    /// The decimals the outputs printed (the coarser side); `None` in snapshots from before
    /// it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub printed_decimals: Option<u32>,
}

fn min_max(times: &[f64]) -> (Option<f64>, Option<f64>) {
    let finite = times.iter().copied().filter(|t| t.is_finite());
    (finite.clone().reduce(f64::min), finite.reduce(f64::max))
}

impl CellSummary {
    pub fn of(cell: &CellResult) -> CellSummary {
        let (fork_min, fork_max) = min_max(&cell.fork.times);
        CellSummary {
            fixture: cell.fixture.clone(),
            workload: cell.workload.clone(),
            backend: None,
            speedup: cell.speedup,
            speedup_ci95: cell.speedup_ci95,
            verdict: cell.verdict,
            parity: cell.parity,
            fork_median: cell.fork.median_time,
            fork_min,
            fork_max,
            upstream_median: cell.upstream.median_time,
            score_delta: cell.score_delta.clone(),
            printed_decimals: cell.printed_decimals,
        }
    }

    /// A GPU backend cell: the fork alone, so no speedup and no parity; a failed one is
    /// `unavailable`, any other (measured, or skipped where the device is only recorded)
    /// `absent_upstream`.
    pub fn of_backend(cell: &BackendCell) -> CellSummary {
        let (fork_min, fork_max) = min_max(&cell.times);
        CellSummary {
            fixture: cell.fixture.clone(),
            workload: cell.workload.clone(),
            backend: Some(cell.backend.clone()),
            speedup: None,
            speedup_ci95: None,
            verdict: None,
            parity: match cell.status {
                BackendCellStatus::Failed => CellParity::Unavailable,
                _ => CellParity::AbsentUpstream,
            },
            fork_median: cell.median_seconds,
            fork_min,
            fork_max,
            upstream_median: None,
            score_delta: BTreeMap::new(),
            printed_decimals: None,
        }
    }

    pub(super) fn key(&self) -> CellKey<'_> {
        (&self.fixture, &self.workload, self.backend.as_deref())
    }

    /// `fixture/workload`, with ` (backend)` for a backend cell.
    pub fn label(&self) -> String {
        match &self.backend {
            Some(backend) => format!("{}/{} ({backend})", self.fixture, self.workload),
            None => format!("{}/{}", self.fixture, self.workload),
        }
    }

    /// Whether the run has this cell: it was measured (not `unavailable`: a run stopped
    /// before it, or a side could not be built or run).
    pub fn is_present(&self) -> bool {
        self.parity != CellParity::Unavailable
    }

    /// Whether its deltas were accepted: both sides ran and parity passed.
    pub fn is_accepted(&self) -> bool {
        self.parity == CellParity::Ok
    }
}

/// One generation of a finished run, as later runs compare against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationSnapshot {
    pub run_id: String,
    pub date: String,
    pub trigger: String,
    pub trigger_note: Option<String>,
    pub generation: String,
    /// SHA-256 of the run's spec (empty in snapshots of reports from before it was kept).
    #[serde(default)]
    pub spec_sha256: String,
    /// SHA-256 of the spec with the sources' revs, `[targets]` and the description left out:
    /// what was measured and how (empty in older snapshots).
    #[serde(default)]
    pub comparable_spec_sha256: String,
    /// The silicon identity the agent reported for this key (hosts pool only when equal).
    pub silicon_id: Option<String>,
    /// The hardware identity (the silicon id without the GPU driver and runtime): runs are
    /// compared on it. `None` in older snapshots (the silicon id stands in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_id: Option<String>,
    pub fork_requested: String,
    pub fork_commit: Option<String>,
    pub upstream_requested: String,
    pub upstream_commit: Option<String>,
    /// Side → the build's toolchain fingerprint.
    pub toolchain: BTreeMap<String, String>,
    /// The generation's toolchain as the agent probed it: compilers and, for a GPU, the
    /// driver or runtime (`nvidia-driver`, `rocm-runtime`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub host_toolchain: BTreeMap<String, String>,
    pub practical_threshold: f64,
    pub cells: Vec<CellSummary>,
}

impl GenerationSnapshot {
    pub fn of(report: &Report, section: &GenerationSection) -> GenerationSnapshot {
        let generation = section_generation(section);
        let mut cells: Vec<CellSummary> = report.cells_of(section).map(CellSummary::of).collect();
        cells.extend(section.backend_cells.iter().map(CellSummary::of_backend));
        GenerationSnapshot {
            run_id: report.run_id.clone(),
            date: report.date.clone(),
            trigger: report.trigger.clone(),
            trigger_note: report.trigger_note.clone(),
            generation: section.key.clone(),
            spec_sha256: report.spec_sha256.clone(),
            comparable_spec_sha256: report.comparable_spec_sha256.clone(),
            silicon_id: generation.map(|g| g.silicon_id.clone()),
            hardware_id: generation.map(|g| g.hardware_or_silicon().to_string()),
            fork_requested: report.fork.requested.clone(),
            fork_commit: report.fork.resolved.clone(),
            upstream_requested: report.upstream.requested.clone(),
            upstream_commit: report.upstream.resolved.clone(),
            toolchain: section.toolchain.clone(),
            host_toolchain: generation.map(|g| g.toolchain.clone()).unwrap_or_default(),
            practical_threshold: report.practical_threshold,
            cells,
        }
    }

    /// The identity runs are compared on: the hardware id, else the silicon id.
    pub fn hardware(&self) -> Option<&str> {
        self.hardware_id.as_deref().or(self.silicon_id.as_deref())
    }

    /// The cells by key (the first of a key, as a scan would find it).
    pub(super) fn cell_index(&self) -> CellIndex<'_> {
        let mut index = CellIndex::with_capacity(self.cells.len());
        for cell in &self.cells {
            index.entry(cell.key()).or_insert(cell);
        }
        index
    }
}

/// A cell's identity in a generation: fixture, workload, and the backend of a backend cell.
pub(super) type CellKey<'a> = (&'a str, &'a str, Option<&'a str>);

pub(super) type CellIndex<'a> = std::collections::HashMap<CellKey<'a>, &'a CellSummary>;

/// The section's generation in its host's inventory.
pub(super) fn section_generation(
    section: &GenerationSection,
) -> Option<&crate::generation::Generation> {
    section
        .host
        .as_ref()
        .and_then(|host| host.generations.iter().find(|g| g.key == section.key))
}

/// The hardware id of the section's key in its host's inventory (the silicon id from agents
/// that do not report one).
pub fn section_hardware(section: &GenerationSection) -> Option<String> {
    section_generation(section).map(|g| g.hardware_or_silicon().to_string())
}
