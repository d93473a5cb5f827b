//! The parity gate: do the two sides agree on every score they share?
//!
//! Metrics are matched by name (after the spec's declared renames), frame by frame by frame
//! number. The gate is the seed's (ADR-1228 §2): a cell fails when any shared metric's
//! **pooled-mean** delta exceeds `max_score_delta` (or the metric's own allowance). The
//! largest per-frame delta, its frame, the frames over the threshold and the 95th percentile
//! are kept in every cell; they gate only when `max_frame_delta` is set (spec-wide or per
//! metric). Deltas are compared at the output's precision: rounded to the decimals the tool
//! printed, so a printed delta equal to the gate passes. A metric upstream writes and the
//! fork does not fails the cell unless `[parity] allow_missing` declares it; frames that do
//! not line up by number fail it too. Timing plays no part.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::scores::{abs_delta, nullable, Scores};
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
    /// How many frames exceed the metric's per-frame threshold: `max_frame_delta` when one
    /// is set, else the pooled gate (for information: only a set `max_frame_delta` gates).
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

/// Which rule a parity failure broke.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParityRule {
    /// The pooled-mean delta exceeds `max_score_delta` or the metric's `max_delta`.
    #[default]
    PooledMean,
    /// A frame's delta exceeds `max_frame_delta` (only when one is set).
    FrameDelta,
    /// Upstream writes the metric and the fork does not (in some or all frames).
    MissingMetric,
    /// The sides scored different frames (count or frame numbers).
    Frames,
    /// The pooled |delta| grew past the one accepted on the previous comparable run (plus
    /// half a printed unit), though it may be under `max_score_delta`: the seed's ratchet
    /// (ADR-1228, "ratchet on growth"). Added when the report is compared with earlier runs
    /// (`report::history`), never by [`compare`].
    Ratchet,
}

impl ParityRule {
    /// How the report names the rule.
    pub fn describe(self) -> &'static str {
        match self {
            ParityRule::PooledMean => "pooled-mean delta over max_score_delta",
            ParityRule::FrameDelta => "per-frame delta over max_frame_delta",
            ParityRule::MissingMetric => "metric missing in the fork",
            ParityRule::Frames => "frames differ",
            ParityRule::Ratchet => "pooled-mean delta grew past the previous accepted one",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParityFailure {
    pub metric: String,
    /// The rule it broke (reports before the rule was recorded gated the pooled mean too).
    #[serde(default)]
    pub rule: ParityRule,
    /// The frame of the largest delta, or `None` for a failure that is not about one frame.
    pub frame: Option<u64>,
    pub upstream_value: Option<f64>,
    pub fork_value: Option<f64>,
    #[serde(with = "nullable::number")]
    pub delta: f64,
    pub allowed: f64,
    pub message: String,
}

impl ParityOutcome {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// The gates `compare` applies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gates {
    /// On every shared metric's pooled-mean delta.
    pub max_score_delta: f64,
    /// On every frame's delta, when set.
    pub max_frame_delta: Option<f64>,
}

impl Gates {
    pub fn pooled(max_score_delta: f64) -> Gates {
        Gates {
            max_score_delta,
            max_frame_delta: None,
        }
    }
}

/// Compares the scores of the two sides under the spec's renames and allowances.
pub fn compare(upstream: &Scores, fork: &Scores, spec: &ParitySpec, gates: Gates) -> ParityOutcome {
    let mut outcome = ParityOutcome::default();
    let pairs = pair_metrics(upstream, fork, spec, &mut outcome);
    let fork_frames: BTreeMap<u64, &crate::scores::MetricValues> = fork
        .frames
        .iter()
        .map(|f| (f.frame_num, &f.metrics))
        .collect();
    compare_frame_numbers(upstream, fork, &fork_frames, &mut outcome);
    let sides = Sides {
        upstream,
        fork,
        fork_frames: &fork_frames,
    };
    for (up_name, fork_name) in &pairs {
        compare_metric(&sides, up_name, fork_name, spec, gates, &mut outcome);
    }
    outcome
}

/// The two sides' scores, the fork's frames by number.
struct Sides<'s> {
    upstream: &'s Scores,
    fork: &'s Scores,
    fork_frames: &'s BTreeMap<u64, &'s crate::scores::MetricValues>,
}

/// The (upstream name, fork name) pairs to compare, under the spec's renames; a metric only
/// upstream writes fails unless allowed missing, one only the fork writes is listed.
fn pair_metrics(
    upstream: &Scores,
    fork: &Scores,
    spec: &ParitySpec,
    outcome: &mut ParityOutcome,
) -> Vec<(String, String)> {
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
            if spec.missing_reason(up_name).is_none() {
                outcome.failures.push(ParityFailure {
                    metric: up_name.clone(),
                    rule: ParityRule::MissingMetric,
                    frame: None,
                    upstream_value: upstream.pooled_mean(up_name),
                    fork_value: None,
                    delta: f64::INFINITY,
                    allowed: 0.0,
                    message: format!(
                        "upstream writes `{up_name}` and the fork does not: declare a rename under [parity.renames], or list it in [parity] allow_missing with a reason"
                    ),
                });
            }
        }
    }
    let matched_fork: BTreeSet<&String> = pairs.iter().map(|(_, f)| f).collect();
    outcome.only_fork = fork_names
        .iter()
        .filter(|name| !matched_fork.contains(name))
        .cloned()
        .collect();
    pairs
}

/// One metric's frame deltas and pooled mean against its gates.
fn compare_metric(
    sides: &Sides<'_>,
    up_name: &str,
    fork_name: &str,
    spec: &ParitySpec,
    gates: Gates,
    outcome: &mut ParityOutcome,
) {
    let Sides {
        upstream,
        fork,
        fork_frames,
    } = *sides;
    let names = [fork_name, up_name];
    let pooled_gate = spec.pooled_gate(names, gates.max_score_delta);
    let frame_gate = spec.frame_gate(names, gates.max_frame_delta);
    let threshold = frame_gate.unwrap_or(pooled_gate);
    let decimals = upstream
        .printed_decimals
        .unwrap_or(17)
        .min(fork.printed_decimals.unwrap_or(17));
    let over_gate = |delta: f64, gate: f64| at_precision(delta, decimals) > gate * (1.0 + 1e-9);

    let mut worst: Option<(u64, f64, f64, f64)> = None;
    let mut over = 0u64;
    let mut missing = Vec::new();
    let mut deltas = Vec::with_capacity(upstream.frames.len());
    for frame in &upstream.frames {
        let Some(up_value) = frame.metrics.get(up_name) else {
            continue;
        };
        let Some(fork_metrics) = fork_frames.get(&frame.frame_num) else {
            continue; // a frame the fork did not score: a Frames failure already
        };
        let Some(fork_value) = fork_metrics.get(fork_name) else {
            missing.push(frame.frame_num);
            continue;
        };
        let delta = abs_delta(*up_value, *fork_value);
        deltas.push(delta);
        if over_gate(delta, threshold) {
            over += 1;
        }
        if worst.is_none_or(|(_, d, _, _)| delta > d) {
            worst = Some((frame.frame_num, delta, *up_value, *fork_value));
        }
    }
    if let Some(first) = missing.first() {
        outcome.failures.push(ParityFailure {
            metric: fork_name.to_string(),
            rule: ParityRule::MissingMetric,
            frame: Some(*first),
            upstream_value: None,
            fork_value: None,
            delta: f64::INFINITY,
            allowed: 0.0,
            message: format!(
                "`{fork_name}` is missing in {} fork frame(s) that upstream scored (first: frame {first})",
                missing.len()
            ),
        });
    }
    let pooled = (upstream.pooled_mean(up_name), fork.pooled_mean(fork_name));
    let pooled_delta = match pooled {
        (Some(u), Some(f)) if u.is_finite() && f.is_finite() => Some(f - u),
        (Some(u), Some(f)) => Some(abs_delta(u, f)),
        _ => None,
    };
    outcome.frames_over_gate.insert(fork_name.to_string(), over);
    if let Some(p95) = percentile(&mut deltas, 0.95) {
        outcome.frame_delta_p95.insert(fork_name.to_string(), p95);
    }
    if let Some((frame, delta, up_value, fork_value)) = worst {
        outcome.max_frame_delta.insert(fork_name.to_string(), delta);
        outcome
            .max_frame_delta_at
            .insert(fork_name.to_string(), frame);
        if let Some(gate) = frame_gate.filter(|gate| over_gate(delta, *gate)) {
            outcome.failures.push(ParityFailure {
                metric: fork_name.to_string(),
                rule: ParityRule::FrameDelta,
                frame: Some(frame),
                upstream_value: Some(up_value),
                fork_value: Some(fork_value),
                delta,
                allowed: gate,
                message: format!(
                    "`{fork_name}` differs by {delta:.3e} at frame {frame} (upstream {up_value}, fork {fork_value}; per-frame gate {gate:.0e}; {over} frame(s) over it)"
                ),
            });
        }
    }
    if let Some(delta) = pooled_delta {
        outcome.score_delta.insert(fork_name.to_string(), delta);
        if over_gate(delta.abs(), pooled_gate) {
            let (u, f) = pooled;
            outcome.failures.push(ParityFailure {
                metric: fork_name.to_string(),
                rule: ParityRule::PooledMean,
                frame: None,
                upstream_value: u,
                fork_value: f,
                delta: delta.abs(),
                allowed: pooled_gate,
                message: format!(
                    "pooled mean of `{fork_name}` differs by {delta:+.3e} (upstream {}, fork {}; gate {pooled_gate:.0e} on the pooled mean)",
                    show(u),
                    show(f)
                ),
            });
        }
    }
}

/// The frames the two sides scored must be the same frames.
fn compare_frame_numbers(
    upstream: &Scores,
    fork: &Scores,
    fork_frames: &BTreeMap<u64, &crate::scores::MetricValues>,
    outcome: &mut ParityOutcome,
) {
    let count = |n: usize| Some(n as f64);
    if upstream.frames.len() != fork.frames.len() {
        outcome.failures.push(ParityFailure {
            metric: "(frames)".into(),
            rule: ParityRule::Frames,
            frame: None,
            upstream_value: count(upstream.frames.len()),
            fork_value: count(fork.frames.len()),
            delta: (upstream.frames.len() as f64 - fork.frames.len() as f64).abs(),
            allowed: 0.0,
            message: format!(
                "upstream scored {} frames, fork {}: the sides did not see the same input",
                upstream.frames.len(),
                fork.frames.len()
            ),
        });
        return;
    }
    let unmatched: Vec<u64> = upstream
        .frames
        .iter()
        .map(|f| f.frame_num)
        .filter(|n| !fork_frames.contains_key(n))
        .collect();
    if let Some(first) = unmatched.first() {
        outcome.failures.push(ParityFailure {
            metric: "(frames)".into(),
            rule: ParityRule::Frames,
            frame: Some(*first),
            upstream_value: None,
            fork_value: None,
            delta: unmatched.len() as f64,
            allowed: 0.0,
            message: format!(
                "{} frame number(s) upstream scored are not in the fork's output (first: frame {first}): the sides did not score the same frames",
                unmatched.len()
            ),
        });
    }
}

fn show(value: Option<f64>) -> String {
    match value {
        Some(v) if v.is_finite() => v.to_string(),
        Some(_) => "null".into(),
        None => "none".into(),
    }
}

/// `delta` rounded to `decimals`: what the difference of the printed texts is.
fn at_precision(delta: f64, decimals: u32) -> f64 {
    if !delta.is_finite() || decimals >= 17 {
        return delta;
    }
    let scale = 10f64.powi(decimals as i32);
    (delta * scale).round() / scale
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

    fn with_frame_numbers(mut scores: Scores, numbers: &[u64]) -> Scores {
        for (frame, n) in scores.frames.iter_mut().zip(numbers) {
            frame.frame_num = *n;
        }
        scores
    }

    fn allowance(max_delta: Option<f64>, max_frame_delta: Option<f64>) -> Allowance {
        Allowance {
            max_delta,
            max_frame_delta,
            reason: "tracked".into(),
        }
    }

    #[test]
    fn equal_scores_pass_and_deltas_are_recorded() {
        let up = scores(&[&[("psnr_y", 30.0)], &[("psnr_y", 31.0)]]);
        let fork = scores(&[&[("psnr_y", 30.000001)], &[("psnr_y", 31.0)]]);
        let out = compare(&up, &fork, &ParitySpec::default(), Gates::pooled(1e-5));
        assert!(out.passed(), "{out:?}");
        assert!((out.max_frame_delta["psnr_y"] - 1e-6).abs() < 1e-9);
        assert_eq!(out.max_frame_delta_at["psnr_y"], 0);
        assert!((out.frame_delta_p95["psnr_y"] - 1e-6).abs() < 1e-9);
        assert_eq!(percentile(&mut [3.0, 1.0, 2.0, 4.0], 0.5), Some(2.0));
        assert_eq!(percentile(&mut [], 0.95), None);
    }

    /// The real pair's shape: single frames move by 1.8e-5 in both directions, the pooled
    /// mean by 1e-6. The seed's gate is on the pooled mean: this passes, and the per-frame
    /// detail stays in the outcome.
    #[test]
    fn the_gate_is_on_the_pooled_mean_and_per_frame_deltas_are_kept() {
        let up = scores(&[&[("vmaf", 84.0)], &[("vmaf", 85.0)], &[("vmaf", 86.0)]]);
        let fork = scores(&[
            &[("vmaf", 84.000018)],
            &[("vmaf", 84.999985)],
            &[("vmaf", 86.0)],
        ]);
        let out = compare(&up, &fork, &ParitySpec::default(), Gates::pooled(1e-5));
        assert!(out.passed(), "{out:?}");
        assert!((out.max_frame_delta["vmaf"] - 1.8e-5).abs() < 1e-9);
        assert_eq!(out.max_frame_delta_at["vmaf"], 0);
        assert_eq!(
            out.frames_over_gate["vmaf"], 2,
            "frames over 1e-5 are counted"
        );
        assert!((out.score_delta["vmaf"] - 1e-6).abs() < 1e-9);

        // The stricter rule, for whoever wants it: max_frame_delta gates single frames.
        let strict = Gates {
            max_score_delta: 1e-5,
            max_frame_delta: Some(1e-5),
        };
        let out = compare(&up, &fork, &ParitySpec::default(), strict);
        assert_eq!(out.failures.len(), 1, "{out:?}");
        let failure = &out.failures[0];
        assert_eq!(failure.rule, ParityRule::FrameDelta);
        assert_eq!(failure.frame, Some(0));
        assert_eq!(out.frames_over_gate["vmaf"], 2);
        assert!(failure.message.contains("frame 0"), "{}", failure.message);
    }

    #[test]
    fn a_drifting_pooled_mean_fails_naming_metric_rule_and_delta() {
        let up = scores(&[&[("float_ssim", 0.9)], &[("float_ssim", 0.8)]]);
        let fork = scores(&[&[("float_ssim", 0.9)], &[("float_ssim", 0.8001)]]);
        let out = compare(&up, &fork, &ParitySpec::default(), Gates::pooled(1e-5));
        assert_eq!(out.failures.len(), 1, "{out:?}");
        let failure = &out.failures[0];
        assert_eq!(failure.metric, "float_ssim");
        assert_eq!(failure.rule, ParityRule::PooledMean);
        assert!((failure.delta - 5e-5).abs() < 1e-9);
        assert!(
            failure.message.contains("pooled mean"),
            "{}",
            failure.message
        );
        assert_eq!(out.max_frame_delta_at["float_ssim"], 1);
    }

    /// `%.6f` output: a printed delta of exactly the gate passes, one unit more fails,
    /// whatever binary floating point makes of the subtraction.
    #[test]
    fn deltas_are_compared_at_the_printed_precision() {
        let printed = |mut s: Scores, decimals| {
            s.printed_decimals = Some(decimals);
            s
        };
        let up = printed(scores(&[&[("psnr_y", 84.928232)]]), 6);
        let fork = printed(scores(&[&[("psnr_y", 84.928233)]]), 6);
        let binary = std::hint::black_box(84.928233f64) - 84.928232;
        assert!(binary > 1e-6, "the binary delta {binary:e} is above 1e-6");
        let out = compare(&up, &fork, &ParitySpec::default(), Gates::pooled(1e-6));
        assert!(
            out.passed(),
            "a printed delta equal to the gate passes: {out:?}"
        );
        let fork = printed(scores(&[&[("psnr_y", 84.928234)]]), 6);
        let out = compare(&up, &fork, &ParitySpec::default(), Gates::pooled(1e-6));
        assert_eq!(out.failures.len(), 1, "{out:?}");
        // At full precision (`--precision max`) nothing is rounded away.
        let up = printed(scores(&[&[("psnr_y", 33.03335112345678)]]), 14);
        let fork = printed(scores(&[&[("psnr_y", 33.03335212345699)]]), 14);
        let out = compare(&up, &fork, &ParitySpec::default(), Gates::pooled(1e-6));
        assert_eq!(out.failures.len(), 1, "{out:?}");
        assert_eq!(at_precision(1.0000000000287557e-6, 6), 1e-6);
    }

    #[test]
    fn renames_match_metrics_and_a_metric_the_fork_stopped_writing_fails() {
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
        let out = compare(&up, &fork, &spec, Gates::pooled(1e-5));
        assert_eq!(out.only_upstream, vec!["float_ansnr"]);
        assert_eq!(out.only_fork, vec!["motion_v2_sad"]);
        assert_eq!(out.score_delta["integer_motion"], 0.0);
        assert_eq!(out.failures.len(), 1, "{out:?}");
        assert_eq!(out.failures[0].rule, ParityRule::MissingMetric);
        assert!(out.failures[0].message.contains("allow_missing"));

        spec.allow_missing.push(crate::spec::AllowedMissing {
            metric: "float_ansnr".into(),
            reason: "removed by the fork".into(),
        });
        let out = compare(&up, &fork, &spec, Gates::pooled(1e-5));
        assert!(out.passed(), "{out:?}");
        assert_eq!(out.only_upstream, vec!["float_ansnr"], "still listed");
    }

    #[test]
    fn a_metric_missing_from_some_fork_frames_fails() {
        let up = scores(&[&[("psnr_y", 30.0)], &[("psnr_y", 30.0)]]);
        let fork = scores(&[&[("psnr_y", 30.0)], &[("psnr_cb", 30.0)]]);
        let out = compare(&up, &fork, &ParitySpec::default(), Gates::pooled(1e-5));
        let failure = out
            .failures
            .iter()
            .find(|f| f.metric == "psnr_y")
            .expect("psnr_y fails");
        assert_eq!(failure.rule, ParityRule::MissingMetric);
        assert_eq!(failure.frame, Some(1));
    }

    #[test]
    fn an_allowance_replaces_the_gate_for_its_metric_only() {
        let up = scores(&[&[("vmaf", 70.0), ("psnr_y", 30.0)]]);
        let fork = scores(&[&[("vmaf", 70.00005), ("psnr_y", 30.00005)]]);
        let mut spec = ParitySpec::default();
        spec.allow
            .insert("vmaf".into(), allowance(Some(1e-4), None));
        let out = compare(&up, &fork, &spec, Gates::pooled(1e-5));
        assert_eq!(out.failures.len(), 1);
        assert_eq!(out.failures[0].metric, "psnr_y");

        // A per-metric frame gate applies to that metric alone.
        spec.allow
            .insert("vmaf".into(), allowance(Some(1e-4), Some(1e-5)));
        let out = compare(&up, &fork, &spec, Gates::pooled(1e-5));
        let vmaf = out.failures.iter().find(|f| f.metric == "vmaf").unwrap();
        assert_eq!(vmaf.rule, ParityRule::FrameDelta);
        assert_eq!(vmaf.allowed, 1e-5);
    }

    #[test]
    fn different_frame_counts_or_numbers_fail() {
        let up = scores(&[&[("psnr_y", 30.0)], &[("psnr_y", 30.0)]]);
        let fork = scores(&[&[("psnr_y", 30.0)]]);
        let out = compare(&up, &fork, &ParitySpec::default(), Gates::pooled(1e-5));
        assert!(!out.passed());
        assert_eq!(out.failures[0].metric, "(frames)");
        assert_eq!(out.failures[0].rule, ParityRule::Frames);

        let fork = with_frame_numbers(scores(&[&[("psnr_y", 30.0)], &[("psnr_y", 30.0)]]), &[0, 2]);
        let out = compare(&up, &fork, &ParitySpec::default(), Gates::pooled(1e-5));
        assert_eq!(out.failures.len(), 1, "{out:?}");
        assert_eq!(out.failures[0].rule, ParityRule::Frames);
        assert_eq!(out.failures[0].frame, Some(1));
    }

    /// Real vmaf writes `null` for an infinite score: equal nulls pass, a null on one side
    /// only is a difference.
    #[test]
    fn null_scores_are_values() {
        let null = crate::scores::NULL_SCORE;
        let up = scores(&[&[("psnr_hvs_cb", null), ("psnr_hvs_y", 40.0)]]);
        let fork = scores(&[&[("psnr_hvs_cb", null), ("psnr_hvs_y", 40.0)]]);
        let out = compare(&up, &fork, &ParitySpec::default(), Gates::pooled(1e-5));
        assert!(out.passed(), "{out:?}");
        assert_eq!(out.score_delta["psnr_hvs_cb"], 0.0);

        let fork = scores(&[&[("psnr_hvs_cb", 55.0), ("psnr_hvs_y", 40.0)]]);
        let out = compare(&up, &fork, &ParitySpec::default(), Gates::pooled(1e-5));
        assert_eq!(out.failures.len(), 1, "{out:?}");
        assert_eq!(out.failures[0].metric, "psnr_hvs_cb");
        assert!(
            out.failures[0].message.contains("null"),
            "{}",
            out.failures[0].message
        );
    }
}
