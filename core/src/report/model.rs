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
    /// SHA-256 of the run's validated spec (its JSON form).
    #[serde(default)]
    pub spec_sha256: String,
    /// SHA-256 of the spec with what does not change what is measured left out: the
    /// sources' revs (the commits are compared on their own), `[targets]` (a retuning run
    /// narrowed to one generation measures the same cells), the description and `[measure]
    /// seed` (fresh per submission unless the spec sets one). Two runs of
    /// one name whose hashes differ measured differently (fixtures, workloads, command,
    /// gate, build).
    #[serde(default)]
    pub comparable_spec_sha256: String,
    pub name: String,
    pub trigger: String,
    /// What the trigger said about itself (a tag, a PR, a release name), when it said anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_note: Option<String>,
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
    /// The fork's pooled scores of each cell and metric on every generation (and backend)
    /// that scored it, with the spread and who disagrees: empty unless two sources scored
    /// one cell (`report::cross_parity`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cross_parity: Vec<CrossParityRow>,
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
    /// Every attempt of every job, oldest first: who held it, what it kept from earlier
    /// attempts, what it measured and how it ended. Empty in reports of runs whose jobs were
    /// leased before the store recorded attempts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempt_history: Vec<AttemptSummary>,
    /// The retuning checks' output of a one-generation assembly; it is shown in
    /// `generations[].findings` (and friends), not at the top level.
    #[serde(skip)]
    pub findings: Vec<Finding>,
    #[serde(skip)]
    pub skipped_checks: Vec<SkippedCheck>,
    #[serde(skip)]
    pub backend_cells: Vec<BackendCell>,
    /// The sweep of a one-generation assembly; shown in `generations[].sweep`.
    #[serde(skip)]
    pub sweep: Option<crate::sweep::SweepSection>,
    /// A retuning sweep (`[sweep]`) rather than an A/B run: `generations[].sweep` holds it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_sweep: bool,
    /// A sweep run: one row per generation, its best configuration and the default's verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sweep_table: Vec<crate::sweep::SweepRow>,
    /// Finished bisects of this run (`abfleet bisect RUN`), oldest first: report.md shows
    /// each as a "Bisect" section. Attached by the coordinator, never part of the assembly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bisects: Vec<crate::bisect::BisectRecord>,
    /// The alerts sent about this run (`[notify]`), oldest first: report.md lists them under
    /// "Notifications". Attached by the coordinator when the report is served.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<crate::notification::NotificationRecord>,
}

/// One metric of one cell across generations (`report::cross_parity` decides them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossParityRow {
    pub fixture: String,
    pub workload: String,
    pub metric: String,
    /// Pooled mean per source: a generation key for the fork's CPU path there, or
    /// `KEY --backend NAME` for a backend's cells.
    pub values: std::collections::BTreeMap<String, f64>,
    /// Largest minus smallest value.
    pub spread: f64,
    /// The gate the spread is held to: the metric's `[parity.allow] max_delta`, else
    /// `[measure] max_score_delta` (the A/B gate's own numbers).
    pub gate: f64,
    /// The sources farthest from the median when the spread is over the gate (both of two).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disagrees: Vec<String>,
}

impl CrossParityRow {
    pub fn agrees(&self) -> bool {
        self.disagrees.is_empty()
    }
}

/// One attempt of one job, as the report's attempt history lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptSummary {
    pub job_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<String>,
    pub attempt: u32,
    pub agent_id: String,
    /// When the coordinator leased it, UTC.
    pub leased: String,
    /// Cells earlier attempts stored that this one kept instead of measuring them again.
    pub kept_cells: Vec<u32>,
    /// The earlier attempts those cells were measured in.
    pub kept_from: Vec<u32>,
    /// Cells this attempt measured and the coordinator stored.
    pub measured_cells: Vec<u32>,
    /// How it ended (`done`, `failed: …`, `agent … lost: lease of attempt 1 expired`, …);
    /// `None` while it runs.
    pub ended: Option<String>,
}

impl AttemptSummary {
    /// `attempt 2: resumed: 2 cells kept from attempt 1, 2 measured; done`.
    pub fn line(&self) -> String {
        let from = match self.kept_from.as_slice() {
            [one] => format!("attempt {one}"),
            many => format!(
                "attempts {}",
                many.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let work = if self.kept_cells.is_empty() {
            format!("{} measured", cells(self.measured_cells.len()))
        } else {
            format!(
                "resumed: {} kept from {from}, {} measured",
                cells(self.kept_cells.len()),
                self.measured_cells.len()
            )
        };
        let ended = self.ended.as_deref().unwrap_or("running");
        format!(
            "attempt {} (agent {}): {work}; {ended}",
            self.attempt, self.agent_id
        )
    }
}

fn cells(count: usize) -> String {
    if count == 1 {
        "1 cell".to_string()
    } else {
        format!("{count} cells")
    }
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
    /// The emulator the generation ran under (its key ends in `/emulated`): scores real,
    /// times withheld.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<String>,
    /// The toolchain each side was built with (the recipe's fingerprint command).
    pub toolchain: std::collections::BTreeMap<String, String>,
    pub status: String,
    pub exit_code: i32,
    pub attempts: u32,
    /// The `index` of each of this generation's cells in the report's top-level `cells`,
    /// where a cell belongs to the section its `generation` names (`any` when it has none):
    /// a cell is written once, not once per level. Resolve them with [`Report::cells_of`].
    /// Reports written before this field held a copy of each cell here (`cells`); that
    /// shape still reads, as the copies' indexes.
    #[serde(
        default,
        alias = "cells",
        deserialize_with = "cell_indexes::deserialize"
    )]
    pub cell_indexes: Vec<u32>,
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
    /// The comparison with the previous comparable run (same spec name, generation key and
    /// silicon): what changed in between and the regression flags (docs/milestone.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_previous: Option<super::comparison::SincePrevious>,
    /// A retuning sweep's result on this generation (docs/sweeps.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<crate::sweep::SweepSection>,
}

impl GenerationSection {
    /// `side: old → new` for every side whose toolchain differs from the previous run's.
    pub fn toolchain_changes(&self) -> Vec<String> {
        self.toolchain
            .iter()
            .filter_map(|(side, now)| {
                let before = self.previous_toolchain.get(side)?;
                (before != now).then(|| {
                    use super::markdown_text::code;
                    format!("{side}: {} → {}", code(before), code(now))
                })
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
            emulator: crate::generation::is_emulated(key).then(|| {
                report
                    .host
                    .as_ref()
                    .and_then(|h| h.generations.iter().find(|g| g.key == key))
                    .and_then(|g| g.emulator.clone())
                    .unwrap_or_else(|| "an emulator (the agent did not say which)".to_string())
            }),
            host: report.host.clone(),
            agent_id: report.agent_id.clone(),
            toolchain,
            status: report.status.clone(),
            exit_code: report.exit_code,
            attempts: report.attempts,
            cell_indexes: report.cells.iter().map(|c| c.index).collect(),
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
            since_previous: None,
            sweep: report.sweep.clone(),
        }
    }
}

/// The key of the one section of a run whose spec names no targets; its cells carry no
/// `generation`.
pub const ANY_GENERATION: &str = "any";

/// Reads `cell_indexes`, and the `cells` of a section written before it (full cell
/// objects, of which only the index is kept: the top-level `cells` hold the same cells).
mod cell_indexes {
    use serde::{Deserialize, Deserializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum IndexOrCell {
        Index(u32),
        Cell { index: u32 },
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<u32>, D::Error> {
        let entries = Vec::<IndexOrCell>::deserialize(deserializer)?;
        Ok(entries
            .into_iter()
            .map(|entry| match entry {
                IndexOrCell::Index(index) | IndexOrCell::Cell { index } => index,
            })
            .collect())
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
    /// The day the run started, `YYYY-MM-DD` (the date as stored when it is shorter).
    pub fn day(&self) -> &str {
        self.date.get(..10).unwrap_or(&self.date)
    }

    /// How many threads each timed run used, as the headings say it: `single-threaded` or
    /// `N threads`.
    pub fn threads_text(&self) -> String {
        if self.threads == 1 {
            "single-threaded".to_string()
        } else {
            format!("{} threads", self.threads)
        }
    }

    /// The cells of one of this report's generation sections, in the order of the top-level
    /// `cells`: those whose generation is the section's key and whose index it lists.
    pub fn cells_of<'a>(
        &'a self,
        section: &'a GenerationSection,
    ) -> impl Iterator<Item = &'a CellResult> + 'a {
        self.cells.iter().filter(move |cell| {
            cell.generation.as_deref().unwrap_or(ANY_GENERATION) == section.key
                && section.cell_indexes.contains(&cell.index)
        })
    }

    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serialises")
    }

    pub fn from_json(text: &str) -> Result<Report, serde_json::Error> {
        serde_json::from_str(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::samples::two_generation_report;

    /// Pins the 1.1 MB report.json of a 24-cell run: each generation section held a copy
    /// of every cell of the top level.
    #[test]
    fn report_json_holds_each_cell_once_and_sections_resolve_to_theirs() {
        let report = two_generation_report();
        let json = report.to_json_pretty();
        // `max_frame_delta_at` is a key of a cell and of nothing else in a report.
        assert_eq!(json.matches("\"max_frame_delta_at\"").count(), 4, "{json}");
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        for section in value["generations"].as_array().unwrap() {
            assert!(section.get("cells").is_none(), "{section}");
            assert_eq!(section["cell_indexes"], serde_json::json!([0, 1]));
        }

        let back = Report::from_json(&json).unwrap();
        assert_eq!(back, report);
        assert_eq!(back.generations.len(), 2);
        for (generation, section) in (1..).zip(&back.generations) {
            let cells: Vec<&CellResult> = back.cells_of(section).collect();
            let fork_seconds: Vec<Option<f64>> = cells.iter().map(|c| c.fork.median_time).collect();
            let expected = [0.0, 0.1].map(|tenth| Some(f64::from(generation) + tenth));
            assert_eq!(fork_seconds, expected, "{}", section.key);
            assert_eq!(cells[0].index, 0);
            assert_eq!(cells[1].index, 1);
            assert!(cells
                .iter()
                .all(|c| c.generation.as_deref() == Some(section.key.as_str())));
        }
    }

    /// A report.json written before `cell_indexes` (each section with its own `cells`)
    /// still reads, and its sections resolve to the same cells.
    #[test]
    fn a_report_with_cells_copied_into_its_sections_still_reads() {
        let report = two_generation_report();
        let mut value: serde_json::Value = serde_json::from_str(&report.to_json_pretty()).unwrap();
        let cells = value["cells"].as_array().unwrap().clone();
        for section in value["generations"].as_array_mut().unwrap() {
            let key = section["key"].clone();
            let section = section.as_object_mut().unwrap();
            section.remove("cell_indexes");
            let copies: Vec<serde_json::Value> = cells
                .iter()
                .filter(|c| c["generation"] == key)
                .cloned()
                .collect();
            assert_eq!(copies.len(), 2);
            section.insert("cells".into(), serde_json::Value::Array(copies));
        }
        let old = Report::from_json(&value.to_string()).unwrap();
        assert_eq!(old, report);
        let section = &old.generations[1];
        let workloads: Vec<&str> = old.cells_of(section).map(|c| c.workload.as_str()).collect();
        assert_eq!(
            workloads,
            [&report.cells[2].workload, &report.cells[3].workload]
        );
    }

    #[test]
    fn a_run_without_targets_resolves_its_any_section() {
        let mut report = two_generation_report();
        report.cells.truncate(2);
        for cell in &mut report.cells {
            cell.generation = None;
        }
        report.generations.truncate(1);
        report.generations[0].key = ANY_GENERATION.to_string();
        assert_eq!(report.cells_of(&report.generations[0]).count(), 2);
    }
}
