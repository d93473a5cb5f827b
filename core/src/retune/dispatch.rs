//! The CPU ISA dispatch sweep's verdicts: the same workload timed with the ISA restricted
//! level by level (`--cpumask`), read against the levels the CPU supports and the build
//! compiled in. The agent times; this module judges.

use crate::finding::{CheckResults, Finding, Severity};
use crate::scores::Scores;
use crate::stats;

pub use super::isa_parity::Gate;

/// One level of the sweep as measured.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelTiming {
    /// The spec's name for it (`scalar`, `avx2`, `all`).
    pub name: String,
    pub cpumask: String,
    /// The code path the binary says it ran (`"simd"` in the fork's JSON), when it says.
    pub ran: Option<String>,
    /// Timed runs, seconds (warm-up excluded); empty when the level failed.
    pub times: Vec<f64>,
    /// The scores of one timed run, to check the level did not change them.
    pub scores: Option<Scores>,
    /// Why the level could not be timed.
    pub error: Option<String>,
}

impl LevelTiming {
    fn median(&self) -> Option<f64> {
        stats::median(&self.times)
    }

    fn spread(&self) -> f64 {
        stats::spread_pct(&self.times).unwrap_or(0.0)
    }

    /// What people call the level: the path it ran, else the spec's name.
    fn label(&self) -> &str {
        self.ran.as_deref().unwrap_or(&self.name)
    }
}

/// The vector levels the fork's dispatch has, from a CPU's flags: x86 `avx2` (with FMA,
/// as the fork builds it) and `avx512` (F, DQ, BW, CD, VL); ARM `neon`, `sve2`.
pub fn supported_levels(flags: &CpuFlags) -> Vec<String> {
    let mut levels = Vec::new();
    if flags.avx2 && flags.fma {
        levels.push("avx2".to_string());
    }
    if flags.avx512 {
        levels.push("avx512".to_string());
    }
    if flags.neon {
        levels.push("neon".to_string());
    }
    if flags.sve2 {
        levels.push("sve2".to_string());
    }
    levels
}

/// The CPU flags the dispatch cares about.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuFlags {
    pub avx2: bool,
    pub fma: bool,
    /// AVX-512 F, DQ, BW, CD and VL together: the fork's AVX-512 objects need all five.
    pub avx512: bool,
    pub neon: bool,
    pub sve2: bool,
}

/// Judges a sweep. `levels[0]` is the baseline (scalar). `compiled`: the levels the build
/// has, when the binary says; `supported`: what the CPU running the sweep can execute.
/// `max_score_delta` is the spec's parity gate.
pub fn judge(
    levels: &[LevelTiming],
    compiled: Option<&[String]>,
    supported: &[String],
    gate: &super::isa_parity::Gate,
    command: &str,
) -> CheckResults {
    let mut results = CheckResults::default();
    let Some(baseline) = levels.first() else {
        results.skip("cpu", "dispatch", "the sweep has no levels");
        return results;
    };
    let Some(base_median) = baseline.median() else {
        results.skip(
            "cpu",
            "dispatch",
            format!(
                "the baseline level `{}` could not be timed: {}",
                baseline.name,
                baseline.error.as_deref().unwrap_or("no runs")
            ),
        );
        return results;
    };
    let mut below = baseline;
    for level in &levels[1..] {
        let Some(median) = level.median() else {
            results.findings.push(
                Finding::new(
                    "cpu",
                    "dispatch",
                    &level.name,
                    Severity::Fail,
                    format!(
                        "level `{}` (cpumask {}) could not be run: {}; the binary rejects or crashes on this ISA restriction",
                        level.name,
                        level.cpumask,
                        level.error.as_deref().unwrap_or("no runs")
                    ),
                    command,
                )
                .with("cpumask", level.cpumask.as_str()),
            );
            continue;
        };
        results.findings.push(level_finding(
            baseline,
            base_median,
            below,
            level,
            median,
            command,
        ));
        results
            .findings
            .push(parity_finding(baseline, level, gate, command));
        below = level;
    }
    isa_coverage(compiled, supported, command, &mut results);
    results
}

/// A timed level against the level below it and the baseline: the same path as below, slower
/// than below by more than the spread (a warning), or its speedups.
fn level_finding(
    baseline: &LevelTiming,
    base_median: f64,
    below: &LevelTiming,
    level: &LevelTiming,
    median: f64,
    command: &str,
) -> Finding {
    let below_median = below.median().unwrap_or(base_median);
    let over_scalar = base_median / median;
    let over_below = below_median / median;
    // A difference smaller than the larger spread is no difference (the fork's rule). The
    // difference is taken relative to the faster of the two medians, so that 3x slower
    // and 3x faster are the same size (200%): measured against the slower one, a slowdown
    // could never exceed 100% and any spread above that hid every slower level.
    let noise = level.spread().max(below.spread()) / 100.0;
    let difference = (median - below_median).abs() / median.min(below_median);
    let same_path = level.ran.is_some() && level.ran == below.ran;
    let (severity, verdict) = if same_path {
        (
            Severity::Ok,
            format!(
                "`{}` (cpumask {}) runs the same path as `{}` ({}): the CPU or the build stops there",
                level.name,
                level.cpumask,
                below.name,
                level.label()
            ),
        )
    } else if median > below_median && difference > noise {
        (
            Severity::Warn,
            format!(
                "{} (cpumask {}) is {:.2}x of {}: slower than the level below; profile its kernels or drop the path on this CPU",
                level.label(),
                level.cpumask,
                over_below,
                below.label()
            ),
        )
    } else {
        (
            Severity::Ok,
            format!(
                "{} (cpumask {}): {:.2}x over {}, {:.2}x over the level below",
                level.label(),
                level.cpumask,
                over_scalar,
                baseline.label(),
                over_below
            ),
        )
    };
    Finding::new("cpu", "dispatch", &level.name, severity, verdict, command)
        .with("cpumask", level.cpumask.as_str())
        .with("ran", level.label())
        .with("median_s", round(median, 4))
        .with("spread_pct", round(level.spread(), 1))
        .with("speedup_vs_baseline", round(over_scalar, 2))
        .with("speedup_vs_below", round(over_below, 2))
}

/// Whether the build has a path for each ISA level the CPU supports.
fn isa_coverage(
    compiled: Option<&[String]>,
    supported: &[String],
    command: &str,
    results: &mut CheckResults,
) {
    match compiled {
        None => results.skip(
            "cpu",
            "isa_coverage",
            "the binary does not say which ISA levels it has (no `simd_compiled` in its output and no [backends.cpu] simd_info command)",
        ),
        Some(compiled) => {
            for level in supported {
                let present = compiled.iter().any(|c| c == level);
                let finding = if present {
                    Finding::new(
                        "cpu",
                        "isa_coverage",
                        level,
                        Severity::Ok,
                        format!("the CPU supports {level} and the build has a {level} path"),
                        command,
                    )
                } else {
                    Finding::new(
                        "cpu",
                        "isa_coverage",
                        level,
                        Severity::Warn,
                        format!(
                            "the CPU supports {level} but the build has no {level} path: enable it in the build (for AVX-512 the fork needs nasm >= 2.14) or this host runs a lower level"
                        ),
                        command,
                    )
                };
                results.findings.push(
                    finding
                        .with("compiled", compiled.to_vec())
                        .with("supported", supported.to_vec()),
                );
            }
        }
    }
}

fn parity_finding(
    baseline: &LevelTiming,
    level: &LevelTiming,
    gate: &super::isa_parity::Gate,
    command: &str,
) -> Finding {
    use super::isa_parity::{compare, Comparison};
    let subject = &level.name;
    let (Some(base), Some(scores)) = (&baseline.scores, &level.scores) else {
        return Finding::new(
            "cpu",
            "dispatch_parity",
            subject,
            Severity::Warn,
            "no scores to compare with the baseline level",
            command,
        );
    };
    let (severity, verdict, pooled, frame) = match compare(base, scores, gate) {
        Comparison::Identical => (
            Severity::Ok,
            format!(
                "{} scores are bit-identical to {}",
                level.label(),
                baseline.label()
            ),
            0.0,
            0.0,
        ),
        Comparison::Within { pooled, frame } => (
            Severity::Ok,
            format!(
                "{} scores are within the gate of {}: pooled {} moves by {:.1e}, a frame's {} by {:.1e}",
                level.label(),
                baseline.label(),
                pooled.1,
                pooled.0,
                frame.1,
                frame.0
            ),
            pooled.0,
            frame.0,
        ),
        Comparison::Beyond { pooled, frame } => (
            Severity::Fail,
            format!(
                "{} changes the scores (pooled {} moves by {:.1e}, a frame's {} by {:.1e}; gate {}): a vector path must compute what the scalar one does",
                level.label(),
                pooled.1,
                pooled.0,
                frame.1,
                frame.0,
                gate.describe()
            ),
            pooled.0,
            frame.0,
        ),
        Comparison::Incomparable(why) => (
            Severity::Fail,
            format!(
                "{} cannot be compared with {}: {why}",
                level.label(),
                baseline.label()
            ),
            f64::NAN,
            f64::NAN,
        ),
    };
    Finding::new(
        "cpu",
        "dispatch_parity",
        subject,
        severity,
        verdict,
        command,
    )
    .with("max_delta", pooled)
    .with("max_frame_delta", frame)
}

fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::super::isa_parity::Gate;
    use super::*;
    use crate::scores::FrameScores;

    fn scores(value: f64) -> Scores {
        Scores {
            frames: vec![FrameScores {
                frame_num: 0,
                metrics: [("float_ssim".to_string(), value)].into_iter().collect(),
            }],
            ..Scores::default()
        }
    }

    fn level(name: &str, ran: &str, times: &[f64], value: f64) -> LevelTiming {
        LevelTiming {
            name: name.into(),
            cpumask: "0".into(),
            ran: Some(ran.into()),
            times: times.to_vec(),
            scores: Some(scores(value)),
            error: None,
        }
    }

    fn find<'a>(results: &'a CheckResults, check: &str, subject: &str) -> &'a Finding {
        results
            .findings
            .iter()
            .find(|f| f.check == check && f.subject == subject)
            .unwrap_or_else(|| panic!("no {check} finding for {subject}: {results:?}"))
    }

    #[test]
    fn faster_levels_are_ok_with_their_speedups() {
        let levels = [
            level("scalar", "scalar", &[1.0, 1.01, 0.99], 0.9),
            level("avx2", "avx2", &[0.5, 0.51, 0.49], 0.9),
            level("all", "avx512", &[0.25, 0.26, 0.24], 0.9),
        ];
        let compiled = ["scalar", "avx2", "avx512"].map(String::from);
        let supported = ["avx2", "avx512"].map(String::from);
        let results = judge(
            &levels,
            Some(&compiled),
            &supported,
            &Gate::plain(1e-5),
            "vmaf",
        );
        let all = find(&results, "dispatch", "all");
        assert_eq!(all.severity, Severity::Ok);
        assert_eq!(all.evidence["speedup_vs_baseline"], 4.0);
        assert_eq!(all.evidence["speedup_vs_below"], 2.0);
        assert_eq!(
            find(&results, "dispatch_parity", "avx2").severity,
            Severity::Ok
        );
        assert_eq!(
            find(&results, "isa_coverage", "avx512").severity,
            Severity::Ok
        );
    }

    #[test]
    fn a_slower_level_a_missing_path_and_a_moved_score_are_findings() {
        let levels = [
            level("scalar", "scalar", &[1.0, 1.0, 1.0], 0.9),
            level("avx2", "avx2", &[1.6, 1.6, 1.6], 0.9000001),
        ];
        let compiled = ["scalar", "avx2"].map(String::from);
        let supported = ["avx2", "avx512"].map(String::from);
        let results = judge(
            &levels,
            Some(&compiled),
            &supported,
            &Gate::plain(1e-9),
            "vmaf",
        );
        let avx2 = find(&results, "dispatch", "avx2");
        assert_eq!(avx2.severity, Severity::Warn);
        assert!(
            avx2.verdict.contains("slower than the level below"),
            "{}",
            avx2.verdict
        );
        assert_eq!(
            find(&results, "dispatch_parity", "avx2").severity,
            Severity::Fail
        );
        assert_eq!(
            find(&results, "isa_coverage", "avx512").severity,
            Severity::Warn
        );
    }

    #[test]
    fn a_difference_inside_the_spread_is_not_slower() {
        let levels = [
            level("scalar", "scalar", &[1.0, 0.9, 1.1], 0.9),
            level("avx2", "avx2", &[1.05, 0.95, 1.15], 0.9),
        ];
        let results = judge(&levels, None, &[], &Gate::plain(1e-5), "vmaf");
        assert_eq!(find(&results, "dispatch", "avx2").severity, Severity::Ok);
        assert_eq!(results.skipped[0].check, "isa_coverage");
    }

    #[test]
    fn a_level_several_times_slower_is_slower_even_on_a_noisy_host() {
        // As CI measured it on a loaded host: spreads over 80%, the level 3x slower.
        let levels = [
            level("scalar", "scalar", &[0.04, 0.06, 0.09], 0.9),
            level("avx2", "avx2", &[0.17, 0.19, 0.25], 0.9),
        ];
        let results = judge(&levels, None, &[], &Gate::plain(1e-5), "vmaf");
        let avx2 = find(&results, "dispatch", "avx2");
        assert_eq!(avx2.severity, Severity::Warn, "{}", avx2.verdict);
        // The same spreads, the level 3x faster: a speedup, not a finding.
        let levels = [
            level("scalar", "scalar", &[0.17, 0.19, 0.25], 0.9),
            level("avx2", "avx2", &[0.04, 0.06, 0.09], 0.9),
        ];
        let results = judge(&levels, None, &[], &Gate::plain(1e-5), "vmaf");
        assert_eq!(find(&results, "dispatch", "avx2").severity, Severity::Ok);
    }

    #[test]
    fn the_same_path_twice_is_said_plainly() {
        let levels = [
            level("scalar", "scalar", &[1.0, 1.0, 1.0], 0.9),
            level("avx2", "avx2", &[0.5, 0.5, 0.5], 0.9),
            level("all", "avx2", &[0.5, 0.5, 0.5], 0.9),
        ];
        let results = judge(&levels, None, &[], &Gate::plain(1e-5), "vmaf");
        let all = find(&results, "dispatch", "all");
        assert!(all.verdict.contains("same path"), "{}", all.verdict);
    }

    #[test]
    fn supported_levels_need_every_flag_the_fork_builds_with() {
        let flags = CpuFlags {
            avx2: true,
            fma: false,
            avx512: true,
            ..CpuFlags::default()
        };
        assert_eq!(supported_levels(&flags), ["avx512"]);
    }
}
