//! An A/A calibration of a host: the same binary timed as both sides, many times, to learn
//! how often the statistics cry "faster" or "slower" when nothing differs, and how small a
//! difference the host can resolve at a given pair count.

use serde::{Deserialize, Serialize};

use crate::paired::Verdict;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub hostname: String,
    pub date: String,
    /// Timed pairs per trial (the spec's `runs`).
    pub pairs: u32,
    pub trials: u32,
    /// Share of trials whose verdict was `faster` or `slower` (nominal: about alpha).
    pub false_positive_rate: f64,
    /// Median half-width of the speedup's 95% interval, as a fraction (0.012 = ±1.2%).
    pub resolution: f64,
    pub verdicts: Vec<Verdict>,
    pub fixture: String,
    pub workload: String,
    pub seed: u64,
}

/// The file name an agent's work dir keeps the latest calibration under.
pub const FILE_NAME: &str = "calibration.json";
