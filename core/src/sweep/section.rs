//! What a sweep leaves in a report, as data: the section of one generation (its
//! configurations, the best one, the default's verdict), its row in the cross-generation
//! table, and its comparison with the previous sweep. `judge` makes a section from an outcome,
//! `history` compares two; both read these types, neither reads the other.

use serde::{Deserialize, Serialize};

use super::plan::{Configuration, NotTried};
use crate::cell::CellParity;
use crate::paired::Verdict;

/// The `check` of a sweep's finding (`backend`, `sweep`, the tunables' names).
pub const SWEEP_CHECK: &str = "sweep";
/// The `check` of the finding raised when the winner changed.
pub const RETUNING_CHECK: &str = "sweep_winner_changed";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepHistory {
    pub previous_run: String,
    pub previous_best: String,
    pub best: String,
    /// What the previous winner was tied with within noise (its tie group, winner aside).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous_tied_with: Vec<String>,
    /// What this winner is tied with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tied_with: Vec<String>,
    /// The winner's label changed, but inside a tie group: not a change.
    #[serde(default)]
    pub flipped_within_tie: bool,
    pub best_changed: bool,
    /// `side: old → new` of every toolchain that changed since that run.
    pub toolchain_changes: Vec<String>,
    /// The winner changed after a toolchain change: the tuning wants revisiting.
    pub retuning: bool,
    pub note: String,
}

/// A sweep's result on one generation, as `generations[].sweep` of `report.json` holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSection {
    pub tunables: Vec<TunableSummary>,
    pub strategy: String,
    pub grid_size: u64,
    /// The shipped default.
    pub default: Configuration,
    /// The best configuration: the fastest that kept parity and is faster than the default,
    /// or the default itself when none is.
    pub best: Option<BestConfiguration>,
    /// The next best (the default when only one configuration beat it).
    pub runner_up: Option<BestConfiguration>,
    /// `None` when no configuration could be compared with the default.
    pub default_verdict: Option<DefaultVerdict>,
    /// `default still best`, `default within noise`, `stale: X is faster by N% [lo, hi]`.
    pub verdict_line: String,
    /// Every configuration timed, the default first.
    pub configurations: Vec<ConfigurationSummary>,
    /// Labels of the configurations whose scores moved.
    pub rejected_by_parity: Vec<String>,
    pub cells: Vec<String>,
    pub not_tried: Vec<NotTried>,
    pub not_tried_count: u64,
    pub seed: u64,
    pub timing_seconds: f64,
    /// Two faster configurations whose speedups differ by less than this (relative) are tied:
    /// the practical threshold, or the host's calibrated resolution when wider.
    pub tie_tolerance: f64,
    /// The previous sweep on this generation, filled in by the coordinator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<SweepHistory>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunableSummary {
    pub name: String,
    /// `build`, `env` or `args`.
    pub how: String,
    pub values: Vec<String>,
    pub default: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestConfiguration {
    pub configuration: Configuration,
    /// Over the default; 1 for the default itself.
    pub speedup: f64,
    pub speedup_ci95: [f64; 2],
    /// Configurations tied with it (within noise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tied_with: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DefaultVerdict {
    /// Every other configuration that kept parity is slower.
    DefaultBest,
    /// None is faster, some cannot be told apart from it.
    DefaultWithinNoise,
    /// A configuration that kept parity is faster.
    Stale,
}

impl DefaultVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            DefaultVerdict::DefaultBest => "default_best",
            DefaultVerdict::DefaultWithinNoise => "default_within_noise",
            DefaultVerdict::Stale => "stale",
        }
    }
}

/// One configuration as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigurationSummary {
    pub label: String,
    pub values: std::collections::BTreeMap<String, String>,
    pub is_default: bool,
    /// The cache key of the build it ran (one per distinct build configuration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_key: Option<String>,
    pub pairs: usize,
    pub speedup: Option<f64>,
    pub speedup_ci95: Option<[f64; 2]>,
    pub p_value: Option<f64>,
    /// Against the default: `faster`, `slower`, `same`, `unsure`; `None` when not timed.
    pub verdict: Option<Verdict>,
    /// Its scores against the default's: `ok`, `fail` (rejected) or `unavailable`.
    pub parity: CellParity,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parity_failures: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Median seconds of this configuration's and of the default's timed runs.
    pub median_s: Option<f64>,
    pub default_median_s: Option<f64>,
}

/// One row of the cross-generation table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    pub generation: String,
    pub best: Option<String>,
    pub default_verdict: Option<DefaultVerdict>,
    pub verdict_line: String,
    /// Tunable name → best value.
    pub best_values: std::collections::BTreeMap<String, String>,
}

impl SweepSection {
    pub fn row(&self, generation: &str) -> SweepRow {
        SweepRow {
            generation: generation.to_string(),
            best: self.best.as_ref().map(|b| b.configuration.label.clone()),
            default_verdict: self.default_verdict,
            verdict_line: self.verdict_line.clone(),
            best_values: self
                .best
                .as_ref()
                .map(|b| b.configuration.values.clone())
                .unwrap_or_default(),
        }
    }
}
