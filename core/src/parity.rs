//! The parity gate: do the two sides agree on every score they share?
//!
//! Metrics are matched by name (after the spec's declared renames), frame by frame by frame
//! number. A cell fails when any shared metric's largest per-frame absolute delta, or its
//! pooled-mean delta, exceeds the gate (`max_score_delta`, or the metric's own allowance).
//! Metrics only one side emits are listed, never silently dropped. Timing plays no part.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::scores::Scores;
use crate::spec::ParitySpec;

/// The comparison of one cell's scores.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ParityOutcome {
    /// Fork pooled mean minus upstream pooled mean, keyed by the fork's metric name.
    pub score_delta: BTreeMap<String, f64>,
    /// Largest per-frame absolute delta, keyed by the fork's metric name.
    pub max_frame_delta: BTreeMap<String, f64>,
    /// The frame where that largest delta happens.
    pub max_frame_delta_at: BTreeMap<String, u64>,
    /// How many frames exceed the metric's gate (0 for a passing metric).
    pub frames_over_gate: BTreeMap<String, u64>,
    /// The 95th percentile of the per-frame absolute deltas: a delta that grows shows here
    /// before the maximum crosses the gate.
    pub frame_delta_p95: BTreeMap<String, f64>,
    /// Upstream name → fork name, for the declared renames that applied.
    pub renamed: BTreeMap<String, String>,
    pub only_upstream: Vec<String>,
    pub only_fork: Vec<String>,
    pub failures: Vec<ParityFailure>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParityFailure {
    pub metric: String,
    /// The frame of the largest delta, or `None` for a failure that is not about one frame.
    pub frame: Option<u64>,
    pub upstream_value: Option<f64>,
    pub fork_value: Option<f64>,
    pub delta: f64,
    pub allowed: f64,
    pub message: String,
}

impl ParityOutcome {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Compares the scores of the two sides under the spec's renames and allowances.
pub fn compare(
    upstream: &Scores,
    fork: &Scores,
    spec: &ParitySpec,
    max_score_delta: f64,
) -> ParityOutcome {
    let mut outcome = ParityOutcome::default();
    let upstream_names = upstream.metric_names();
    let fork_names = fork.metric_names();
    // Pairs of (upstream name, fork name) to compare.
    let mut pairs = Vec::new();
    for up_name in &upstream_names {
        let fork_name = match spec.renames.get(up_name) {
            Some(renamed) if fork_names.contains(renamed) => {
                outcome.renamed.insert(up_name.clone(), renamed.clone());
                renamed.clone()
            }
            _ => up_name.clone(),
        };
        if fork_names.contains(&fork_name) {
            pairs.push((up_name.clone(), fork_name));
        } else {
            outcome.only_upstream.push(up_name.clone());
        }
    }
    let matched_fork: std::collections::BTreeSet<&String> = pairs.iter().map(|(_, f)| f).collect();
    outcome.only_fork = fork_names
        .iter()
        .filter(|name| !matched_fork.contains(name))
        .cloned()
        .collect();

    let fork_frames: BTreeMap<u64, &BTreeMap<String, f64>> = fork
        .frames
        .iter()
        .map(|f| (f.frame_num, &f.metrics))
        .collect();
    if upstream.frames.len() != fork.frames.len() {
        outcome.failures.push(ParityFailure {
            metric: "(frames)".into(),
            frame: None,
            upstream_value: Some(upstream.frames.len() as f64),
            fork_value: Some(fork.frames.len() as f64),
            delta: (upstream.frames.len() as f64 - fork.frames.len() as f64).abs(),
            allowed: 0.0,
            message: format!(
                "upstream scored {} frames, fork {}: the sides did not see the same input",
                upstream.frames.len(),
                fork.frames.len()
            ),
        });
    }

    for (up_name, fork_name) in &pairs {
        let allowance = spec
            .allow
            .get(fork_name)
            .or_else(|| spec.allow.get(up_name));
        let allowed = allowance.map_or(max_score_delta, |a| a.max_delta);
        let mut worst: Option<(u64, f64, f64, f64)> = None;
        let mut over = 0u64;
        let mut deltas = Vec::with_capacity(upstream.frames.len());
        for frame in &upstream.frames {
            let Some(up_value) = frame.metrics.get(up_name) else {
                continue;
            };
            let Some(fork_value) = fork_frames
                .get(&frame.frame_num)
                .and_then(|metrics| metrics.get(fork_name))
            else {
                continue;
            };
            let delta = (fork_value - up_value).abs();
            deltas.push(delta);
            if delta > allowed || delta.is_nan() {
                over += 1;
            }
            if worst.is_none_or(|(_, d, _, _)| delta > d || delta.is_nan()) {
                worst = Some((frame.frame_num, delta, *up_value, *fork_value));
            }
        }
        let pooled_delta = match (upstream.pooled_mean(up_name), fork.pooled_mean(fork_name)) {
            (Some(u), Some(f)) => Some(f - u),
            _ => None,
        };
        if let Some(delta) = pooled_delta {
            outcome.score_delta.insert(fork_name.clone(), delta);
        }
        outcome.frames_over_gate.insert(fork_name.clone(), over);
        if let Some(p95) = percentile(&mut deltas, 0.95) {
            outcome.frame_delta_p95.insert(fork_name.clone(), p95);
        }
        if let Some((frame, delta, up_value, fork_value)) = worst {
            outcome.max_frame_delta.insert(fork_name.clone(), delta);
            outcome.max_frame_delta_at.insert(fork_name.clone(), frame);
            if delta > allowed || delta.is_nan() {
                outcome.failures.push(ParityFailure {
                    metric: fork_name.clone(),
                    frame: Some(frame),
                    upstream_value: Some(up_value),
                    fork_value: Some(fork_value),
                    delta,
                    allowed,
                    message: format!(
                        "`{fork_name}` differs by {delta:.3e} at frame {frame} (upstream {up_value}, fork {fork_value}; gate {allowed:.0e}; {over} frame(s) over the gate)"
                    ),
                });
                continue;
            }
        }
        if let Some(delta) = pooled_delta {
            if delta.abs() > allowed || delta.is_nan() {
                outcome.failures.push(ParityFailure {
                    metric: fork_name.clone(),
                    frame: None,
                    upstream_value: upstream.pooled_mean(up_name),
                    fork_value: fork.pooled_mean(fork_name),
                    delta: delta.abs(),
                    allowed,
                    message: format!(
                        "pooled mean of `{fork_name}` differs by {delta:+.3e} (gate {allowed:.0e})"
                    ),
                });
            }
        }
    }
    outcome
}

/// The nearest-rank percentile of a sample (sorted in place).
fn percentile(values: &mut [f64], fraction: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let rank = ((fraction * values.len() as f64).ceil() as usize).clamp(1, values.len());
    Some(values[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scores::FrameScores;
    use crate::spec::Allowance;

    fn scores(frames: &[&[(&str, f64)]]) -> Scores {
        Scores {
            frames: frames
                .iter()
                .enumerate()
                .map(|(i, metrics)| FrameScores {
                    frame_num: i as u64,
                    metrics: metrics.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                })
                .collect(),
            ..Scores::default()
        }
    }

    #[test]
    fn equal_scores_pass_and_deltas_are_recorded() {
        let up = scores(&[&[("psnr_y", 30.0)], &[("psnr_y", 31.0)]]);
        let fork = scores(&[&[("psnr_y", 30.000001)], &[("psnr_y", 31.0)]]);
        let out = compare(&up, &fork, &ParitySpec::default(), 1e-5);
        assert!(out.passed(), "{out:?}");
        assert!((out.max_frame_delta["psnr_y"] - 1e-6).abs() < 1e-9);
        assert_eq!(out.max_frame_delta_at["psnr_y"], 0);
        assert!((out.frame_delta_p95["psnr_y"] - 1e-6).abs() < 1e-9);
        assert_eq!(percentile(&mut [3.0, 1.0, 2.0, 4.0], 0.5), Some(2.0));
        assert_eq!(percentile(&mut [], 0.95), None);
    }

    #[test]
    fn a_drifting_metric_fails_naming_metric_frame_and_delta() {
        let up = scores(&[&[("float_ssim", 0.9)], &[("float_ssim", 0.8)]]);
        let fork = scores(&[&[("float_ssim", 0.9)], &[("float_ssim", 0.8001)]]);
        let out = compare(&up, &fork, &ParitySpec::default(), 1e-5);
        assert_eq!(out.failures.len(), 1);
        let failure = &out.failures[0];
        assert_eq!(failure.metric, "float_ssim");
        assert_eq!(failure.frame, Some(1));
        assert!((failure.delta - 1e-4).abs() < 1e-9);
        assert!(failure.message.contains("frame 1"), "{}", failure.message);
    }

    #[test]
    fn renames_match_metrics_and_one_sided_metrics_are_listed() {
        let up = scores(&[&[
            ("VMAF_integer_feature_motion_sad_score", 2.0),
            ("float_ansnr", 1.0),
        ]]);
        let fork = scores(&[&[("integer_motion", 2.0), ("motion_v2_sad", 3.0)]]);
        let mut spec = ParitySpec::default();
        spec.renames.insert(
            "VMAF_integer_feature_motion_sad_score".into(),
            "integer_motion".into(),
        );
        let out = compare(&up, &fork, &spec, 1e-5);
        assert!(out.passed());
        assert_eq!(out.only_upstream, vec!["float_ansnr"]);
        assert_eq!(out.only_fork, vec!["motion_v2_sad"]);
        assert_eq!(out.score_delta["integer_motion"], 0.0);
    }

    #[test]
    fn an_allowance_replaces_the_gate_for_its_metric_only() {
        let up = scores(&[&[("vmaf", 70.0), ("psnr_y", 30.0)]]);
        let fork = scores(&[&[("vmaf", 70.00005), ("psnr_y", 30.00005)]]);
        let mut spec = ParitySpec::default();
        spec.allow.insert(
            "vmaf".into(),
            Allowance {
                max_delta: 1e-4,
                reason: "tracked".into(),
            },
        );
        let out = compare(&up, &fork, &spec, 1e-5);
        assert_eq!(out.failures.len(), 1);
        assert_eq!(out.failures[0].metric, "psnr_y");
    }

    #[test]
    fn different_frame_counts_fail() {
        let up = scores(&[&[("psnr_y", 30.0)], &[("psnr_y", 30.0)]]);
        let fork = scores(&[&[("psnr_y", 30.0)]]);
        let out = compare(&up, &fork, &ParitySpec::default(), 1e-5);
        assert!(!out.passed());
        assert_eq!(out.failures[0].metric, "(frames)");
    }
}
