//! The scores one run of a `vmaf`-like tool wrote: per-frame metrics and pooled statistics,
//! keyed by metric name (the tools disagree on key order, never on names).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    pub tool_version: Option<String>,
    pub fps: Option<f64>,
    pub frames: Vec<FrameScores>,
    /// Pooled statistics as the tool printed them; absent in formats that carry none (CSV).
    pub pooled: BTreeMap<String, Pooled>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameScores {
    pub frame_num: u64,
    pub metrics: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pooled {
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub harmonic_mean: f64,
}

impl Scores {
    /// Every metric name that appears in any frame or in the pooled block.
    pub fn metric_names(&self) -> std::collections::BTreeSet<String> {
        let mut names: std::collections::BTreeSet<String> = self.pooled.keys().cloned().collect();
        for frame in &self.frames {
            names.extend(frame.metrics.keys().cloned());
        }
        names
    }

    /// The pooled mean of a metric: the tool's own when it printed one, else computed.
    pub fn pooled_mean(&self, metric: &str) -> Option<f64> {
        if let Some(pooled) = self.pooled.get(metric) {
            return Some(pooled.mean);
        }
        let values: Vec<f64> = self
            .frames
            .iter()
            .filter_map(|f| f.metrics.get(metric).copied())
            .collect();
        if values.is_empty() {
            None
        } else {
            Some(values.iter().sum::<f64>() / values.len() as f64)
        }
    }

    /// Pooled means of every metric.
    pub fn pooled_means(&self) -> BTreeMap<String, f64> {
        self.metric_names()
            .into_iter()
            .filter_map(|name| self.pooled_mean(&name).map(|mean| (name, mean)))
            .collect()
    }
}
