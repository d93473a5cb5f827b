//! The report document (docs/report-format.md). Top-level keys keep the fork's A/B JSON
//! shape (`upstream_ref`, `fork_ref`, `runs`, `threads`, `cells`, `geomean_speedup`,
//! `score_parity`, `startup_bound`) so the fork's tools read it unchanged.

use serde::{Deserialize, Serialize};

use crate::backend_cell::BackendCell;
use crate::cell::CellResult;
use crate::events::BuildRecord;
use crate::finding::{Finding, SkippedCheck};
use crate::inventory::Inventory;
use crate::spec::SourceSpec;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub run_id: String,
    pub name: String,
    pub trigger: String,
    /// When the run was submitted, UTC.
    pub date: String,
    /// queued, running, done, failed, cancelled.
    pub status: String,
    /// What `abfleet local` / `submit --wait` exit with for this run.
    pub exit_code: i32,
    pub upstream_ref: String,
    pub fork_ref: String,
    pub upstream: SideInfo,
    pub fork: SideInfo,
    pub host: Option<Inventory>,
    /// The host's latest A/A calibration (`abfleet calibrate`), when it has one.
    pub calibration: Option<crate::calibration::Calibration>,
    pub agent_id: Option<String>,
    pub warmup: u32,
    pub runs: u32,
    pub threads: u32,
    pub max_score_delta: f64,
    /// The optional per-frame gate (`[measure] max_frame_delta`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_frame_delta: Option<f64>,
    /// Upstream metrics the fork may stop writing, with their reasons.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_missing: Vec<crate::spec::AllowedMissing>,
    /// Adaptive runs: the most pairs an unsure cell may take.
    pub max_runs: u32,
    /// A speedup inside 1 ± this is `same`.
    pub practical_threshold: f64,
    /// The run's seed (`[measure] seed`): replays every cell's order and bootstrap.
    pub seed: u64,
    /// Per-metric allowances that replaced the gate, with their reasons.
    pub allowances: std::collections::BTreeMap<String, crate::spec::Allowance>,
    pub min_useful_seconds: f64,
    pub cells: Vec<CellResult>,
    /// One section per hardware generation the run covered (one, `any`, when the spec
    /// named no targets).
    pub generations: Vec<GenerationSection>,
    /// Cells of the spec that have no result (the run stopped before them).
    pub missing_cells: Vec<String>,
    /// Geometric mean of the speedups of exactly the cells in `geomean_cells`.
    pub geomean_speedup: Option<f64>,
    pub geomean_cells: Vec<String>,
    pub score_parity: ScoreParity,
    pub score_parity_report: Vec<String>,
    pub startup_bound: bool,
    pub startup_note: Option<String>,
    /// Why the run, or part of it, could not be carried out.
    pub errors: Vec<String>,
    pub attempts: u32,
    /// The retuning checks' output of a one-generation assembly; it is shown in
    /// `generations[].findings` (and friends), not at the top level.
    #[serde(skip)]
    pub findings: Vec<Finding>,
    #[serde(skip)]
    pub skipped_checks: Vec<SkippedCheck>,
    #[serde(skip)]
    pub backend_cells: Vec<BackendCell>,
}

/// The results of one hardware generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationSection {
    pub key: String,
    /// The host that ran it, with its inventory.
    pub host: Option<Inventory>,
    pub agent_id: Option<String>,
    /// The host's inventory came from recorded probes: its CPU cells ran on the real CPU.
    pub simulated: bool,
    /// The toolchain each side was built with (the recipe's fingerprint command).
    pub toolchain: std::collections::BTreeMap<String, String>,
    pub status: String,
    pub exit_code: i32,
    pub attempts: u32,
    pub cells: Vec<CellResult>,
    pub missing_cells: Vec<String>,
    pub score_parity: ScoreParity,
    pub startup_bound: bool,
    pub geomean_speedup: Option<f64>,
    pub geomean_cells: Vec<String>,
    pub errors: Vec<String>,
    /// The backend of the key (`cpu`, `cuda`, `hip`, `sycl`; `any` without targets).
    #[serde(default)]
    pub backend: String,
    /// The retuning checks' findings on this generation, each with its `previous`.
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// Checks that did not run here, with the reason.
    #[serde(default)]
    pub skipped_checks: Vec<SkippedCheck>,
    /// GPU backends: the fork's own timings with `--backend NAME` (no upstream column).
    #[serde(default)]
    pub backend_cells: Vec<BackendCell>,
    /// The previous run of the same spec on this generation, and its toolchain: a change
    /// here is a toolchain bump (and a reason to re-check the tuning).
    pub previous_run: Option<String>,
    pub previous_toolchain: std::collections::BTreeMap<String, String>,
}

impl GenerationSection {
    /// `side: old → new` for every side whose toolchain differs from the previous run's.
    pub fn toolchain_changes(&self) -> Vec<String> {
        self.toolchain
            .iter()
            .filter_map(|(side, now)| {
                let before = self.previous_toolchain.get(side)?;
                (before != now).then(|| format!("{side}: `{before}` → `{now}`"))
            })
            .collect()
    }
}

impl GenerationSection {
    pub fn from_report(key: &str, report: &Report) -> GenerationSection {
        let toolchain = [("upstream", &report.upstream), ("fork", &report.fork)]
            .into_iter()
            .filter_map(|(side, info)| {
                Some((side.to_string(), info.build.as_ref()?.toolchain.clone()))
            })
            .collect();
        GenerationSection {
            key: key.to_string(),
            simulated: report
                .host
                .as_ref()
                .is_some_and(|h| h.generations.iter().any(|g| g.key == key && g.simulated)),
            host: report.host.clone(),
            agent_id: report.agent_id.clone(),
            toolchain,
            status: report.status.clone(),
            exit_code: report.exit_code,
            attempts: report.attempts,
            cells: report.cells.clone(),
            missing_cells: report.missing_cells.clone(),
            score_parity: report.score_parity,
            startup_bound: report.startup_bound,
            geomean_speedup: report.geomean_speedup,
            geomean_cells: report.geomean_cells.clone(),
            errors: report.errors.clone(),
            backend: backend_of(key).to_string(),
            findings: report.findings.clone(),
            skipped_checks: report.skipped_checks.clone(),
            backend_cells: report.backend_cells.clone(),
            previous_run: None,
            previous_toolchain: std::collections::BTreeMap::new(),
        }
    }
}

/// `cuda` of `cuda/sm_90`; `any` for a run without targets.
pub fn backend_of(key: &str) -> &str {
    key.split('/').next().unwrap_or(key)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScoreParity {
    #[serde(rename = "OK")]
    Ok,
    #[serde(rename = "FAIL")]
    Fail,
    #[serde(rename = "NOT RUN")]
    NotRun,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideInfo {
    pub source: SourceSpec,
    /// What the spec asked for: a tag, branch, commit or path.
    pub requested: String,
    /// The exact commit (git) or content hash (path) that was built.
    pub resolved: Option<String>,
    pub build: Option<BuildRecord>,
}

impl Report {
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serialises")
    }

    pub fn from_json(text: &str) -> Result<Report, serde_json::Error> {
        serde_json::from_str(text)
    }
}
