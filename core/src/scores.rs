//! The scores one run of a `vmaf`-like tool wrote: per-frame metrics and pooled statistics,
//! keyed by metric name (the tools disagree on key order, never on names).
//!
//! A score the tool could not print as a number (real `vmaf` writes JSON `null` for an
//! infinite score, e.g. `psnr_hvs_cb` when the chroma planes are identical) is a value
//! here too: [`NULL_SCORE`] (+inf). It compares equal to itself, differs from every
//! number, is skipped by pooling, and is written back as `null` (see [`nullable`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod metric_values;

pub use metric_values::{MetricValues, NameInterner};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    pub tool_version: Option<String>,
    pub fps: Option<f64>,
    pub frames: Vec<FrameScores>,
    /// Pooled statistics as the tool printed them; absent in formats that carry none (CSV).
    pub pooled: BTreeMap<String, Pooled>,
    /// The most decimals any number in the output text had (6 for vmaf's default `%.6f`):
    /// deltas are compared at this precision. `None` when unknown (nothing is rounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub printed_decimals: Option<u32>,
}

/// How a `null` score is held: not a finite number, equal only to itself.
pub const NULL_SCORE: f64 = f64::INFINITY;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameScores {
    pub frame_num: u64,
    pub metrics: MetricValues,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pooled {
    #[serde(with = "nullable::number")]
    pub min: f64,
    #[serde(with = "nullable::number")]
    pub max: f64,
    #[serde(with = "nullable::number")]
    pub mean: f64,
    #[serde(with = "nullable::number")]
    pub harmonic_mean: f64,
}

/// Scores in JSON: a non-finite score is written `null` and read back as [`NULL_SCORE`],
/// so a document with a null survives the spool, the store and `report.json`.
pub mod nullable {
    use serde::{Deserialize, Deserializer, Serializer};

    fn out(value: f64) -> Option<f64> {
        value.is_finite().then_some(value)
    }

    fn back(value: Option<f64>) -> f64 {
        value.unwrap_or(super::NULL_SCORE)
    }

    pub mod number {
        use super::*;

        pub fn serialize<S: Serializer>(value: &f64, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_some(&out(*value))
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
            Option::<f64>::deserialize(d).map(back)
        }
    }

    pub mod map {
        use std::collections::BTreeMap;

        use super::*;

        pub fn serialize<S: Serializer>(
            values: &BTreeMap<String, f64>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            s.collect_map(values.iter().map(|(k, v)| (k, out(*v))))
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<BTreeMap<String, f64>, D::Error> {
            let raw = BTreeMap::<String, Option<f64>>::deserialize(d)?;
            Ok(raw.into_iter().map(|(k, v)| (k, back(v))).collect())
        }
    }
}

/// Whether two scores are the same value (`null` equals `null`).
pub fn same_value(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

/// `|fork - upstream|`: 0 for two equal nulls, +inf when only one side is null.
pub fn abs_delta(upstream: f64, fork: f64) -> f64 {
    if same_value(upstream, fork) {
        0.0
    } else if !upstream.is_finite() || !fork.is_finite() {
        f64::INFINITY
    } else {
        (fork - upstream).abs()
    }
}

impl Scores {
    /// Every metric name that appears in any frame or in the pooled block.
    pub fn metric_names(&self) -> std::collections::BTreeSet<String> {
        let mut names: std::collections::BTreeSet<String> = self.pooled.keys().cloned().collect();
        for frame in &self.frames {
            names.extend(frame.metrics.keys().map(str::to_string));
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
        // Pooling skips nulls; a metric that is null on every frame pools to null.
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if values.is_empty() {
            None
        } else if finite.is_empty() {
            Some(NULL_SCORE)
        } else {
            Some(finite.iter().sum::<f64>() / finite.len() as f64)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(values: &[f64]) -> Scores {
        Scores {
            frames: values
                .iter()
                .enumerate()
                .map(|(i, v)| FrameScores {
                    frame_num: i as u64,
                    metrics: [("psnr_hvs_cb".to_string(), *v)].into(),
                })
                .collect(),
            ..Scores::default()
        }
    }

    #[test]
    fn pooling_skips_nulls_and_an_all_null_metric_pools_to_null() {
        assert_eq!(
            frames(&[40.0, NULL_SCORE, 42.0]).pooled_mean("psnr_hvs_cb"),
            Some(41.0)
        );
        assert_eq!(
            frames(&[NULL_SCORE, NULL_SCORE]).pooled_mean("psnr_hvs_cb"),
            Some(NULL_SCORE)
        );
    }

    #[test]
    fn null_equals_null_and_differs_from_every_number() {
        assert_eq!(abs_delta(NULL_SCORE, NULL_SCORE), 0.0);
        assert_eq!(abs_delta(NULL_SCORE, 40.0), f64::INFINITY);
        assert_eq!(abs_delta(40.0, NULL_SCORE), f64::INFINITY);
        assert!((abs_delta(40.0, 40.5) - 0.5).abs() < 1e-12);
    }
}
