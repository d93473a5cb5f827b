//! The ISA checks that need no clock: the fork's scores per feature with its vector paths
//! restricted level by level (`--cpumask`: scalar, NEON, SVE2 on aarch64), and under other
//! vector lengths (SVE at 128, 256 and 512 bits, through the emulator's `-cpu` option),
//! each compared with the baseline frame by frame. "Bit-identical", "within tolerance" or
//! "differs" per feature is the finding; an emulated host can run every one of them, since
//! scores are the same under an emulator. The agent runs; this module judges.

use crate::finding::{Finding, Severity};
use crate::scores::{abs_delta, Scores};

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
    let mut worst = (0.0f64, String::new());
    for (a, b) in base.frames.iter().zip(&other.frames) {
        for (name, va) in &a.metrics {
            let Some(vb) = b.metrics.get(name) else {
                return Err(format!("`{name}` is missing from frame {}", b.frame_num));
            };
            let delta = abs_delta(*va, *vb);
            if delta > worst.0 {
                worst = (delta, format!("{name} (frame {})", a.frame_num));
            }
        }
    }
    Ok(worst)
}

/// How one run compares with the baseline.
enum Comparison {
    Identical,
    Within(f64, String),
    Beyond(f64, String),
    Incomparable(String),
}

fn compare(base: &Scores, run: &ScoredRun, gate: f64) -> Comparison {
    let scores = match &run.scores {
        Ok(scores) => scores,
        Err(err) => return Comparison::Incomparable(format!("`{}` did not run: {err}", run.name)),
    };
    match largest_frame_delta(base, scores) {
        Err(why) => Comparison::Incomparable(format!("`{}`: {why}", run.name)),
        Ok((delta, _)) if delta == 0.0 => Comparison::Identical,
        Ok((delta, at)) if delta <= gate => Comparison::Within(delta, at),
        Ok((delta, at)) => Comparison::Beyond(delta, at),
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
    gate: f64,
    what: &str,
    command: &str,
) -> Finding {
    let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
    let finding = |severity, verdict: String| {
        Finding::new("cpu", check, feature, severity, verdict, command)
            .with("runs", names.clone())
            .with("gate", gate)
    };
    let Some((baseline, others)) = runs.split_first() else {
        return finding(Severity::Warn, format!("{feature}: nothing was run"));
    };
    let base = match &baseline.scores {
        Ok(scores) => scores,
        Err(err) => return finding(
            Severity::Fail,
            format!(
                "{feature}: the baseline `{}` did not run ({err}); nothing to compare {what} with",
                baseline.name
            ),
        ),
    };
    let mut largest = (0.0f64, String::new(), String::new());
    let mut identical = Vec::new();
    let mut within = Vec::new();
    let mut beyond = Vec::new();
    let mut broken = Vec::new();
    for run in others {
        match compare(base, run, gate) {
            Comparison::Identical => identical.push(run.name.as_str()),
            Comparison::Within(delta, at) => {
                within.push(run.name.as_str());
                if delta > largest.0 {
                    largest = (delta, at, run.name.clone());
                }
            }
            Comparison::Beyond(delta, at) => {
                beyond.push(format!("`{}` moves {at} by {delta:.3e}", run.name));
                if delta > largest.0 {
                    largest = (delta, at, run.name.clone());
                }
            }
            Comparison::Incomparable(why) => broken.push(why),
        }
    }
    let (severity, verdict) = if !broken.is_empty() {
        (Severity::Fail, format!("{feature}: {}", broken.join("; ")))
    } else if !beyond.is_empty() {
        (
            Severity::Fail,
            format!(
                "{feature}: {what} changes the scores beyond the gate {gate:.0e} ({}): a vector path must compute what `{}` does; find the kernel and fix its arithmetic",
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
                "{feature}: within tolerance across {what}: `{}` differs from `{}` by up to {:.3e} ({}), under the gate {gate:.0e}; {} bit-identical",
                largest.2,
                baseline.name,
                largest.0,
                largest.1,
                if identical.is_empty() {
                    "none".to_string()
                } else {
                    identical.join(", ")
                }
            ),
        )
    };
    finding(severity, verdict)
        .with("max_frame_delta", largest.0)
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
            1e-5,
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
            1e-5,
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
            1e-5,
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
            1e-5,
            "ISA levels",
            "cmd",
        );
        assert_eq!(failed.severity, Severity::Fail);
        assert!(failed.verdict.contains("SIGILL"), "{}", failed.verdict);
        let short = judge(
            "dispatch_parity",
            "psnr",
            &[run("scalar", &[30.0, 31.0]), run("neon", &[30.0])],
            1e-5,
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
            1e-5,
            "ISA levels",
            "cmd",
        );
        assert_eq!(both.severity, Severity::Ok);
        let one = judge(
            "dispatch_parity",
            "psnr_hvs",
            &[run("scalar", &[f64::INFINITY]), run("neon", &[40.0])],
            1e-5,
            "ISA levels",
            "cmd",
        );
        assert_eq!(one.severity, Severity::Fail);
    }
}
