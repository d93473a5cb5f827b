//! An A/A calibration of a host: the same binary timed as both sides, many times, to learn
//! how often the statistics cry "faster" or "slower" when nothing differs, and how small a
//! difference the host can resolve at a given pair count.

use serde::{Deserialize, Serialize};

use crate::paired::Verdict;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub hostname: String,
    pub date: String,
    /// Timed pairs per trial, the median over the trials. Each trial is a cell at the spec's
    /// adaptive bounds (`runs` to `max_runs`), so trials stop at different counts.
    /// Calibrations written before adaptive trials hold the spec's fixed `runs` here.
    pub pairs: f64,
    /// The fewest and the most pairs a trial took (absent in calibrations written before
    /// adaptive trials, whose every trial took `pairs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs_min: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs_max: Option<u32>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calibration_written_before_adaptive_trials_still_reads() {
        let old = r#"{"hostname":"bench-1","date":"2026-01-01T00:00:00Z","pairs":5,"trials":2,
            "false_positive_rate":0.0,"resolution":0.01,"verdicts":["same","unsure"],
            "fixture":"f","workload":"w","seed":1}"#;
        let calibration: Calibration = serde_json::from_str(old).unwrap();
        assert_eq!(calibration.pairs, 5.0);
        assert_eq!((calibration.pairs_min, calibration.pairs_max), (None, None));
    }
}
