//! The ISA checks that need no clock: the fork's scores per feature with its vector paths
//! restricted level by level (`--cpumask`: scalar, NEON, SVE2 on aarch64), and under other
//! vector lengths (SVE at 128, 256 and 512 bits, through the emulator's `-cpu` option),
//! each compared with the baseline frame by frame. "Bit-identical", "within tolerance" or
//! "differs" per feature is the finding; an emulated host can run every one of them, since
//! scores are the same under an emulator. The agent runs; this module judges.

use crate::finding::{Finding, Severity};
use crate::parity::{self, Gates};
use crate::scores::{abs_delta, Scores};
use crate::spec::ParitySpec;

/// One run of the fork for one feature: a level (`scalar`, `neon`, `all`) or a vector length
/// (`sve-256`), and its scores or why it has none.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredRun {
    pub name: String,
    pub scores: Result<Scores, String>,
}

/// The largest per-frame difference between two runs over every metric both have, with
/// the metric and frame; `None` when they cannot be compared (frame counts or metric sets
/// differ), with why.
pub fn largest_frame_delta(base: &Scores, other: &Scores) -> Result<(f64, String), String> {
    if base.frames.len() != other.frames.len() {
        return Err(format!(
            "{} frames against {}",
            other.frames.len(),
            base.frames.len()
        ));
    }
    for (a, b) in base.frames.iter().zip(&other.frames) {
        if let Some(name) = a.metrics.keys().find(|name| b.metrics.get(name).is_none()) {
            return Err(format!("`{name}` is missing from frame {}", b.frame_num));
        }
    }
    Ok(largest_shared_frame_delta(base, other))
}

/// The largest per-frame difference over the metrics both runs wrote, frame by frame in
/// order, and where (`psnr_y (frame 3)`); metrics one side lacks are not looked at.
pub fn largest_shared_frame_delta(base: &Scores, other: &Scores) -> (f64, String) {
    let mut worst = (0.0f64, String::new());
    for (a, b) in base.frames.iter().zip(&other.frames) {
        for (name, va) in &a.metrics {
            if let Some(vb) = b.metrics.get(name) {
                let delta = abs_delta(*va, *vb);
                if delta > worst.0 {
                    worst = (delta, format!("{name} (frame {})", a.frame_num));
                }
            }
        }
    }
    worst
}

/// What a vector path may change: the spec's own parity gate, as `parity::compare` applies
/// it to fork against upstream — each metric's pooled mean within `[measure]
/// max_score_delta` or its `[parity.allow.METRIC] max_delta`, each frame within
/// `max_frame_delta` when the spec sets one. The same known deltas are allowed wherever they
/// come from.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub parity: ParitySpec,
    pub gates: Gates,
}

impl Gate {
    /// One gate for every metric's pooled mean, no allowance, no per-frame gate.
    pub fn plain(max_score_delta: f64) -> Gate {
        Gate {
            parity: ParitySpec::default(),
            gates: Gates::pooled(max_score_delta),
        }
    }

    pub fn of_spec(spec: &crate::spec::JobSpec) -> Gate {
        Gate {
            parity: spec.parity.clone(),
            gates: Gates {
                max_score_delta: spec.measure.max_score_delta,
                max_frame_delta: spec.measure.max_frame_delta,
            },
        }
    }

    /// The gate on one metric's pooled mean: its allowance, else `max_score_delta`.
    pub fn for_metric(&self, metric: &str) -> f64 {
        self.parity
            .allow
            .get(metric)
            .and_then(|a| a.max_delta)
            .unwrap_or(self.gates.max_score_delta)
    }

    /// `1e-5` or `1e-5 (vmaf 3e-5)`.
    pub fn describe(&self) -> String {
        let mut text = format!("{:.0e}", self.gates.max_score_delta);
        let allowed: Vec<String> = self
            .parity
            .allow
            .iter()
            .filter_map(|(m, a)| Some(format!("{m} {:.0e}", a.max_delta?)))
            .collect();
        if !allowed.is_empty() {
            text.push_str(&format!(" ({})", allowed.join(", ")));
        }
        text
    }
}

/// How one run compares with the baseline: its largest pooled-mean delta (the gated
/// quantity) and its largest per-frame delta (shown; gated only with `max_frame_delta`).
#[derive(Debug, Clone, PartialEq)]
pub enum Comparison {
    Identical,
    Within {
        pooled: (f64, String),
        frame: (f64, String),
    },
    Beyond {
        pooled: (f64, String),
        frame: (f64, String),
    },
    Incomparable(String),
}

/// One run's scores against the baseline's, under `gate`: frames and metrics must match one
/// for one (else `Incomparable`, saying which), then `parity::compare` decides.
pub fn compare(base: &Scores, other: &Scores, gate: &Gate) -> Comparison {
    let frame = match largest_frame_delta(base, other) {
        Err(why) => return Comparison::Incomparable(why),
        Ok(found) => found,
    };
    if frame.0 == 0.0 {
        return Comparison::Identical;
    }
    let outcome = parity::compare(base, other, &gate.parity, gate.gates);
    let pooled = outcome
        .score_delta
        .iter()
        .map(|(metric, delta)| (delta.abs(), metric.clone()))
        .fold((0.0f64, String::new()), |worst, next| {
            if next.0 > worst.0 {
                next
            } else {
                worst
            }
        });
    if outcome.passed() {
        Comparison::Within { pooled, frame }
    } else {
        Comparison::Beyond { pooled, frame }
    }
}

fn compare_run(base: &Scores, run: &ScoredRun, gate: &Gate) -> Comparison {
    match &run.scores {
        Ok(scores) => match compare(base, scores, gate) {
            Comparison::Incomparable(why) => {
                Comparison::Incomparable(format!("`{}`: {why}", run.name))
            }
            other => other,
        },
        Err(err) => Comparison::Incomparable(format!("`{}` did not run: {err}", run.name)),
    }
}

/// One finding for one feature over runs that should all score alike: `runs[0]` is the
/// baseline. `check` is `dispatch_parity` (levels) or `vector_length` (SVE lengths);
/// `what` says in words what was varied. Bit-identical everywhere is `ok`; within the
/// spec's gate is `ok` with the largest delta named (a maintainer decides whether the
/// reordering is acceptable); beyond the gate is `fail` (a vector path computes something
/// else); a run that failed is `fail` naming it.
pub fn judge(
    check: &str,
    feature: &str,
    runs: &[ScoredRun],
    gate: &Gate,
    what: &str,
    command: &str,
) -> Finding {
    let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
    let finding = |severity, verdict: String| {
        Finding::new("cpu", check, feature, severity, verdict, command)
            .with("runs", names.clone())
            .with("gate", gate.describe())
    };
    let Some((baseline, others)) = runs.split_first() else {
        return finding(Severity::Warn, format!("{feature}: nothing was run"));
    };
    let base = match &baseline.scores {
        Ok(scores) => scores,
        Err(err) => {
            return finding(
                Severity::Fail,
                format!(
                "{feature}: the baseline `{}` did not run ({err}); nothing to compare {what} with",
                baseline.name
            ),
            )
        }
    };
    // The largest pooled delta (gated) and the largest frame delta (shown), with their run.
    let mut largest = (0.0f64, String::new(), String::new());
    let mut largest_frame = (0.0f64, String::new());
    let mut identical = Vec::new();
    let mut within = Vec::new();
    let mut beyond = Vec::new();
    let mut broken = Vec::new();
    for run in others {
        let (pooled, frame) = match compare_run(base, run, gate) {
            Comparison::Identical => {
                identical.push(run.name.as_str());
                continue;
            }
            Comparison::Incomparable(why) => {
                broken.push(why);
                continue;
            }
            Comparison::Within { pooled, frame } => {
                within.push(run.name.as_str());
                (pooled, frame)
            }
            Comparison::Beyond { pooled, frame } => {
                beyond.push(format!(
                    "`{}` moves the pooled {} by {:.3e} (a frame's {} by {:.3e})",
                    run.name, pooled.1, pooled.0, frame.1, frame.0
                ));
                (pooled, frame)
            }
        };
        if pooled.0 >= largest.0 {
            largest = (pooled.0, pooled.1, run.name.clone());
        }
        if frame.0 > largest_frame.0 {
            largest_frame = frame;
        }
    }
    let gate_words = gate.describe();
    let (severity, verdict) = if !broken.is_empty() {
        (Severity::Fail, format!("{feature}: {}", broken.join("; ")))
    } else if !beyond.is_empty() {
        (
            Severity::Fail,
            format!(
                "{feature}: {what} change the scores beyond the gate {gate_words} ({}): a vector path must compute what `{}` does; find the kernel and fix its arithmetic",
                beyond.join("; "),
                baseline.name
            ),
        )
    } else if within.is_empty() {
        (
            Severity::Ok,
            format!(
                "{feature}: bit-identical across {what} ({})",
                names.join(", ")
            ),
        )
    } else {
        (
            Severity::Ok,
            format!(
                "{feature}: within tolerance across {what}: `{}` moves the pooled {} by {:.3e} against `{}` (a frame's {} by {:.3e}), under the gate {gate_words}; bit-identical: {}",
                largest.2,
                largest.1,
                largest.0,
                baseline.name,
                largest_frame.1,
                largest_frame.0,
                if identical.is_empty() {
                    "none".to_string()
                } else {
                    identical.join(", ")
                }
            ),
        )
    };
    finding(severity, verdict)
        .with("max_pooled_delta", largest.0)
        .with("max_frame_delta", largest_frame.0)
        .with("bit_identical", identical.len() == others.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scores::FrameScores;

    fn scores(values: &[f64]) -> Scores {
        Scores {
            tool_version: None,
            fps: None,
            frames: values
                .iter()
                .enumerate()
                .map(|(i, v)| FrameScores {
                    frame_num: i as u64,
                    metrics: [("psnr_y".to_string(), *v)].into_iter().collect(),
                })
                .collect(),
            pooled: Default::default(),
            printed_decimals: Some(6),
        }
    }

    fn run(name: &str, values: &[f64]) -> ScoredRun {
        ScoredRun {
            name: name.into(),
            scores: Ok(scores(values)),
        }
    }

    #[test]
    fn identical_within_and_beyond_the_gate_are_three_verdicts() {
        let same = judge(
            "dispatch_parity",
            "psnr",
            &[run("scalar", &[30.0, 31.0]), run("neon", &[30.0, 31.0])],
            &Gate::plain(1e-5),
            "ISA levels",
            "cmd",
        );
        assert_eq!(same.severity, Severity::Ok);
        assert!(same.verdict.contains("bit-identical"), "{}", same.verdict);
        assert_eq!(same.evidence["bit_identical"], true);

        let close = judge(
            "vector_length",
            "ssimulacra2",
            &[
                run("sve-128", &[30.0, 31.0]),
                run("sve-256", &[30.0, 31.000002]),
                run("sve-512", &[30.0, 31.0]),
            ],
            &Gate::plain(1e-5),
            "SVE vector lengths",
            "cmd",
        );
        assert_eq!(close.severity, Severity::Ok);
        assert!(
            close.verdict.contains("within tolerance"),
            "{}",
            close.verdict
        );
        assert!(close.verdict.contains("`sve-256`"), "{}", close.verdict);
        assert!(close.verdict.contains("sve-512"), "{}", close.verdict);
        assert_eq!(close.evidence["bit_identical"], false);

        let far = judge(
            "dispatch_parity",
            "psnr",
            &[run("scalar", &[30.0, 31.0]), run("neon", &[30.0, 31.5])],
            &Gate::plain(1e-5),
            "ISA levels",
            "cmd",
        );
        assert_eq!(far.severity, Severity::Fail);
        assert!(far.verdict.contains("psnr_y (frame 1)"), "{}", far.verdict);
    }

    #[test]
    fn a_failed_or_incomparable_run_fails_the_feature_naming_it() {
        let failed = judge(
            "dispatch_parity",
            "psnr",
            &[
                run("scalar", &[30.0]),
                ScoredRun {
                    name: "neon".into(),
                    scores: Err("killed by signal 4 (SIGILL)".into()),
                },
            ],
            &Gate::plain(1e-5),
            "ISA levels",
            "cmd",
        );
        assert_eq!(failed.severity, Severity::Fail);
        assert!(failed.verdict.contains("SIGILL"), "{}", failed.verdict);
        let short = judge(
            "dispatch_parity",
            "psnr",
            &[run("scalar", &[30.0, 31.0]), run("neon", &[30.0])],
            &Gate::plain(1e-5),
            "ISA levels",
            "cmd",
        );
        assert_eq!(short.severity, Severity::Fail);
        assert!(
            short.verdict.contains("1 frames against 2"),
            "{}",
            short.verdict
        );
    }

    #[test]
    fn nulls_on_both_sides_are_equal_and_on_one_side_infinitely_apart() {
        let both = judge(
            "dispatch_parity",
            "psnr_hvs",
            &[
                run("scalar", &[f64::INFINITY]),
                run("neon", &[f64::INFINITY]),
            ],
            &Gate::plain(1e-5),
            "ISA levels",
            "cmd",
        );
        assert_eq!(both.severity, Severity::Ok);
        let one = judge(
            "dispatch_parity",
            "psnr_hvs",
            &[run("scalar", &[f64::INFINITY]), run("neon", &[40.0])],
            &Gate::plain(1e-5),
            "ISA levels",
            "cmd",
        );
        assert_eq!(one.severity, Severity::Fail);
    }
}
