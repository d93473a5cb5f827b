//! What an agent measured in a sweep: one `sweep` event per job, with every configuration's
//! timed pairs against the shipped default (balanced order, the default as the `upstream_s`
//! side of each pair), the parity of its scores against the default's, and what the plan or
//! the time budget left out. The report judges it (`judge`), so verdicts can be recomputed
//! from stored events at any time.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::plan::{Configuration, NotTried};
use crate::cell::CellParity;
use crate::paired::{Order, Pair, StopReason};

/// A whole sweep on one host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepOutcome {
    /// `grid`, `one-at-a-time` or `random`.
    pub strategy: String,
    pub grid_size: u64,
    /// The `fixture/workload` cells one timed run of a configuration covers.
    pub cells: Vec<String>,
    /// The shipped default first.
    pub configurations: Vec<ConfigurationRun>,
    pub not_tried: Vec<NotTried>,
    pub not_tried_count: u64,
    /// The seed of the run orders and the bootstrap.
    pub seed: u64,
    /// Seconds spent timing (builds excluded: they all ran before).
    pub timing_seconds: f64,
}

/// One configuration, as timed against the default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigurationRun {
    pub configuration: Configuration,
    pub is_default: bool,
    /// The build directory's cache key (configurations with the same build values share it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_key: Option<String>,
    /// Timed pairs: `upstream_s` is the default's run, `fork_s` this configuration's; one
    /// timed run covers every cell of the sweep. Empty for the default itself.
    pub pairs: Vec<Pair>,
    pub order: Vec<Order>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// Its scores against the default's on the same fixtures (`ok` for the default itself).
    pub parity: CellParity,
    /// Every metric whose pooled mean moved, `cell: metric` → fork minus default.
    #[serde(default)]
    pub score_delta: BTreeMap<String, f64>,
    /// The parity gate's messages when it failed.
    #[serde(default)]
    pub parity_failures: Vec<String>,
    /// Why it was not timed (its build failed, a run failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
