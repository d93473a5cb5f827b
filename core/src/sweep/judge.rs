//! The verdicts of a sweep on one generation, from its outcome alone: every configuration's
//! speedup over the shipped default with its bootstrap interval and signed-rank verdict
//! (`paired::analyse`), parity first (a configuration whose scores moved is rejected and
//! never wins, however fast), then the best configuration, its runner-up, ties, and whether
//! the default is still best, within noise, or stale.
//!
//! Ties: two faster configurations whose intervals overlap, or whose speedups differ by less
//! than the tie tolerance (the practical threshold, or the host's A/A resolution from
//! `abfleet calibrate` when that is wider), are tied, and the tie goes to the one planned first (nearest
//! the default), not to the larger median, so a winner does not flip between identical runs.
//! The same tolerance holds against the default: a configuration `faster` by no more than it
//! is within noise of the default, not a reason to call the default stale.

use super::outcome::SweepOutcome;
use super::plan::Configuration;
use super::section::{
    BestConfiguration, ConfigurationSummary, DefaultVerdict, SweepSection, TunableSummary,
};
use crate::cell::CellParity;
use crate::finding::{Finding, Severity};
use crate::paired::{self, AnalysisConfig, Verdict};
use crate::spec::{SweepSpec, TunableKind};

fn percent(speedup: f64) -> String {
    format!("{:.1}%", (speedup - 1.0) * 100.0)
}

/// Judges a sweep's outcome; `host_resolution` is the host's A/A calibration resolution,
/// when it has one.
pub fn judge(
    outcome: &SweepOutcome,
    spec: &SweepSpec,
    practical_threshold: f64,
    host_resolution: Option<f64>,
) -> SweepSection {
    let tie_tolerance = host_resolution
        .filter(|r| r.is_finite())
        .map_or(practical_threshold, |r| r.max(practical_threshold));
    let config = AnalysisConfig {
        practical_threshold,
        seed: outcome.seed,
        ..AnalysisConfig::default()
    };
    let default = Configuration::default_of(spec);
    let configurations = summaries(outcome, &config);
    let rejected_by_parity: Vec<String> = configurations
        .iter()
        .filter(|c| c.parity == CellParity::Fail)
        .map(|c| c.label.clone())
        .collect();
    let judging = Judging {
        tie_tolerance,
        practical_threshold,
        default_best: BestConfiguration {
            configuration: default.clone(),
            speedup: 1.0,
            speedup_ci95: [1.0, 1.0],
            tied_with: Vec::new(),
        },
    };
    // Candidates: timed, parity kept, not the default; in plan order.
    let eligible: Vec<&ConfigurationSummary> = configurations
        .iter()
        .filter(|c| !c.is_default && c.parity == CellParity::Ok && c.verdict.is_some())
        .collect();
    let faster: Vec<&ConfigurationSummary> = eligible
        .iter()
        .copied()
        .filter(|c| judging.beats_default(c))
        .collect();
    let decision = if eligible.is_empty() {
        judging.none_compared(&configurations, &rejected_by_parity)
    } else if faster.is_empty() {
        judging.default_holds(&eligible)
    } else {
        judging.stale(&eligible, &faster)
    };
    SweepSection {
        tunables: tunable_summaries(spec),
        strategy: outcome.strategy.clone(),
        grid_size: outcome.grid_size,
        default,
        best: decision.best,
        runner_up: decision.runner_up,
        default_verdict: decision.default_verdict,
        verdict_line: decision.verdict_line,
        configurations,
        rejected_by_parity,
        cells: outcome.cells.clone(),
        not_tried: outcome.not_tried.clone(),
        not_tried_count: outcome.not_tried_count,
        seed: outcome.seed,
        timing_seconds: outcome.timing_seconds,
        tie_tolerance,
        history: None,
    }
}

/// Every configuration run, in plan order: its speedup over the default (the default
/// itself and a configuration that failed are not analysed), parity and medians.
fn summaries(outcome: &SweepOutcome, config: &AnalysisConfig) -> Vec<ConfigurationSummary> {
    outcome
        .configurations
        .iter()
        .map(|run| {
            let analysis = (!run.is_default && run.error.is_none())
                .then(|| paired::analyse(&run.pairs, config))
                .flatten();
            let median = |times: Vec<f64>| crate::stats::median(&times);
            ConfigurationSummary {
                label: run.configuration.label.clone(),
                values: run.configuration.values.clone(),
                is_default: run.is_default,
                build_key: run.build_key.clone(),
                pairs: run.pairs.len(),
                speedup: analysis.as_ref().map(|a| a.speedup),
                speedup_ci95: analysis.as_ref().map(|a| a.speedup_ci95),
                p_value: analysis.as_ref().map(|a| a.p_value),
                verdict: analysis.as_ref().map(|a| a.verdict),
                parity: run.parity,
                parity_failures: run.parity_failures.clone(),
                error: run.error.clone(),
                median_s: median(run.pairs.iter().map(|p| p.fork_s).collect()),
                default_median_s: median(run.pairs.iter().map(|p| p.upstream_s).collect()),
            }
        })
        .collect()
}

fn tunable_summaries(spec: &SweepSpec) -> Vec<TunableSummary> {
    spec.tunables
        .iter()
        .map(|t| TunableSummary {
            name: t.name.clone(),
            how: match t.how {
                TunableKind::Build(_) => "build",
                TunableKind::Env(_) => "env",
                TunableKind::Args(_) => "args",
            }
            .to_string(),
            values: t.values.clone(),
            default: t.default.clone(),
        })
        .collect()
}

/// What a sweep decided: the best configuration, its runner-up, the default's verdict and
/// the line that says it.
struct Decision {
    best: Option<BestConfiguration>,
    runner_up: Option<BestConfiguration>,
    default_verdict: Option<DefaultVerdict>,
    verdict_line: String,
}

/// The rules a sweep is judged by: the tie tolerance, and the default as a "best".
struct Judging {
    tie_tolerance: f64,
    practical_threshold: f64,
    default_best: BestConfiguration,
}

impl Judging {
    // Against the default, the host's resolution counts as for ties: a configuration beats
    // the default only when it is `faster` by more than the tie tolerance, and loses to it
    // only when it is `slower` by more than that; anything between is within noise of it.
    fn beats_default(&self, c: &ConfigurationSummary) -> bool {
        c.verdict == Some(Verdict::Faster) && c.speedup.unwrap_or(1.0) > 1.0 + self.tie_tolerance
    }

    fn loses_to_default(&self, c: &ConfigurationSummary) -> bool {
        c.verdict == Some(Verdict::Slower)
            && c.speedup.unwrap_or(1.0) < 1.0 / (1.0 + self.tie_tolerance)
    }

    fn best_of(c: &ConfigurationSummary, tied_with: Vec<String>) -> BestConfiguration {
        BestConfiguration {
            configuration: Configuration {
                label: c.label.clone(),
                values: c.values.clone(),
            },
            speedup: c.speedup.unwrap_or(1.0),
            speedup_ci95: c.speedup_ci95.unwrap_or([1.0, 1.0]),
            tied_with,
        }
    }

    /// No configuration could be compared with the default: parity rejected them, or they
    /// could not be timed.
    fn none_compared(
        &self,
        configurations: &[ConfigurationSummary],
        rejected_by_parity: &[String],
    ) -> Decision {
        let not_timed: Vec<String> = configurations
            .iter()
            .filter(|c| !c.is_default && c.parity != CellParity::Fail)
            .map(|c| c.label.clone())
            .collect();
        let why = match (rejected_by_parity.is_empty(), not_timed.is_empty()) {
            (true, _) => {
                "no configuration could be compared with the default (see the errors)".to_string()
            }
            (false, true) => format!(
                "default still best: every other configuration moved a score ({})",
                rejected_by_parity.join(", ")
            ),
            (false, false) => format!(
                "default still best of those compared: {} moved a score; {} could not be timed (see the errors)",
                rejected_by_parity.join(", "),
                not_timed.join(", ")
            ),
        };
        let verdict = (!rejected_by_parity.is_empty()).then_some(DefaultVerdict::DefaultBest);
        Decision {
            best: verdict.map(|_| self.default_best.clone()),
            runner_up: None,
            default_verdict: verdict,
            verdict_line: why,
        }
    }

    /// None beats the default: it is still best, or within noise of those it cannot be told
    /// apart from.
    fn default_holds(&self, eligible: &[&ConfigurationSummary]) -> Decision {
        let noise: Vec<&ConfigurationSummary> = eligible
            .iter()
            .copied()
            .filter(|c| !self.loses_to_default(c))
            .collect();
        let fastest_other = eligible
            .iter()
            .copied()
            .max_by(|a, b| a.speedup.partial_cmp(&b.speedup).expect("finite speedups"));
        let runner_up = fastest_other.map(|c| Judging::best_of(c, Vec::new()));
        if noise.is_empty() {
            let line = match &runner_up {
                Some(r) => format!(
                    "default still best: the next best, {}, is slower ({:.3}x [{:.3}, {:.3}])",
                    r.configuration.label, r.speedup, r.speedup_ci95[0], r.speedup_ci95[1]
                ),
                None => "default still best".to_string(),
            };
            return Decision {
                best: Some(self.default_best.clone()),
                runner_up,
                default_verdict: Some(DefaultVerdict::DefaultBest),
                verdict_line: line,
            };
        }
        let tied: Vec<String> = noise.iter().map(|c| c.label.clone()).collect();
        let mut best = self.default_best.clone();
        best.tied_with = tied.clone();
        // Faster by the statistics, but not by more than the host resolves.
        let inside: Vec<String> = noise
            .iter()
            .filter(|c| c.verdict == Some(Verdict::Faster))
            .map(|c| format!("{} ({:.3}x)", c.label, c.speedup.unwrap_or(1.0)))
            .collect();
        let mut line = format!(
            "default within noise: no configuration is faster; {} cannot be told apart from it",
            tied.join(", ")
        );
        if !inside.is_empty() {
            let by = if self.tie_tolerance > self.practical_threshold {
                "the host's A/A resolution"
            } else {
                "the practical threshold"
            };
            line = format!(
                "default within noise: no configuration is faster by more than {:.1}% ({by}); {} cannot be told apart from it ({} faster, but inside that)",
                self.tie_tolerance * 100.0,
                tied.join(", "),
                inside.join(", ")
            );
        }
        Decision {
            best: Some(best),
            runner_up,
            default_verdict: Some(DefaultVerdict::DefaultWithinNoise),
            verdict_line: line,
        }
    }

    /// Some configuration beats the default: the default is stale, and the first planned of
    /// the fastest's tie group wins.
    fn stale(
        &self,
        eligible: &[&ConfigurationSummary],
        faster: &[&ConfigurationSummary],
    ) -> Decision {
        let top = faster
            .iter()
            .copied()
            .max_by(|a, b| a.speedup.partial_cmp(&b.speedup).expect("finite speedups"))
            .expect("faster is not empty");
        let ties_top = |c: &ConfigurationSummary| {
            let (Some([lo, hi]), Some([top_lo, top_hi])) = (c.speedup_ci95, top.speedup_ci95)
            else {
                return false;
            };
            let close = (c.speedup.unwrap_or(1.0) / top.speedup.unwrap_or(1.0) - 1.0).abs()
                <= self.tie_tolerance;
            close || (lo <= top_hi && top_lo <= hi)
        };
        // The tie group in plan order; its first member wins.
        let group: Vec<&ConfigurationSummary> =
            faster.iter().copied().filter(|c| ties_top(c)).collect();
        let winner = group[0];
        let tied_with: Vec<String> = group[1..].iter().map(|c| c.label.clone()).collect();
        let best = Judging::best_of(winner, tied_with.clone());
        let runner = eligible
            .iter()
            .copied()
            .filter(|c| c.label != winner.label)
            .max_by(|a, b| a.speedup.partial_cmp(&b.speedup).expect("finite speedups"))
            .filter(|c| self.beats_default(c))
            .map(|c| Judging::best_of(c, Vec::new()))
            .unwrap_or_else(|| self.default_best.clone());
        let [lo, hi] = best.speedup_ci95;
        let mut line = format!(
            "stale: {} is faster by {} [{}, {}]",
            winner.label,
            percent(best.speedup),
            percent(lo),
            percent(hi)
        );
        if !tied_with.is_empty() {
            line.push_str(&format!(
                " (tied within noise with {}; the tie goes to the configuration planned first)",
                tied_with.join(", ")
            ));
        }
        Decision {
            best: Some(best),
            runner_up: Some(runner),
            default_verdict: Some(DefaultVerdict::Stale),
            verdict_line: line,
        }
    }
}

/// The sweep's result as a retuning finding of its generation: what the next sweep on the
/// same generation is compared with (`previous`), and what the findings list shows.
pub fn sweep_finding(section: &SweepSection, backend: &str) -> Finding {
    let subject = section
        .tunables
        .iter()
        .map(|t| t.name.as_str())
        .collect::<Vec<_>>()
        .join(",");
    let severity = match section.default_verdict {
        Some(DefaultVerdict::Stale) => Severity::Warn,
        Some(_) => Severity::Ok,
        None => Severity::Warn,
    };
    let best = section
        .best
        .as_ref()
        .map(|b| b.configuration.label.clone())
        .unwrap_or_else(|| "(none)".into());
    let mut finding = Finding::new(
        backend,
        super::section::SWEEP_CHECK,
        &subject,
        severity,
        section.verdict_line.clone(),
        format!(
            "sweep of {} configuration(s) against {}",
            section.configurations.len(),
            section.default.label
        ),
    )
    .with("best", best)
    .with(
        "default_verdict",
        section
            .default_verdict
            .map_or("not_measured", DefaultVerdict::as_str),
    );
    if let Some(b) = &section.best {
        finding = finding
            .with("speedup", (b.speedup * 1000.0).round() / 1000.0)
            .with("tied_with", b.tied_with.clone());
    }
    finding
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paired::Pair;
    use crate::spec::{SearchStrategy, Tunable};
    use crate::sweep::outcome::ConfigurationRun;

    fn spec() -> SweepSpec {
        SweepSpec {
            tunables: vec![Tunable {
                name: "chunk".into(),
                how: TunableKind::Build(vec!["SSIM_CHUNK={value}".into()]),
                values: ["1", "8", "64", "0", "2"].map(String::from).to_vec(),
                default: "8".into(),
            }],
            search: SearchStrategy::Grid,
            max_configurations: 8,
            max_seconds: None,
        }
    }

    fn configuration(value: &str) -> Configuration {
        Configuration {
            label: format!("chunk={value}"),
            values: [("chunk".to_string(), value.to_string())].into(),
        }
    }

    /// Pairs whose speedup is `ratio`, with a little deterministic jitter.
    fn run(value: &str, ratio: f64, parity: CellParity) -> ConfigurationRun {
        let pairs = (0..12)
            .map(|i| {
                let jitter = 1.0 + 0.004 * ((i * 7 % 5) as f64 - 2.0);
                Pair {
                    upstream_s: 0.1 * jitter,
                    fork_s: 0.1 / ratio * (2.0 - jitter),
                }
            })
            .collect();
        ConfigurationRun {
            configuration: configuration(value),
            is_default: false,
            build_key: None,
            pairs,
            order: Vec::new(),
            stop_reason: None,
            parity,
            score_delta: Default::default(),
            parity_failures: Vec::new(),
            error: None,
        }
    }

    fn outcome(runs: Vec<ConfigurationRun>) -> SweepOutcome {
        let mut default = run("8", 1.0, CellParity::Ok);
        default.is_default = true;
        default.pairs.clear();
        let mut configurations = vec![default];
        configurations.extend(runs);
        SweepOutcome {
            strategy: "grid".into(),
            grid_size: 5,
            cells: vec!["f/float_ssim".into()],
            configurations,
            not_tried: Vec::new(),
            not_tried_count: 0,
            seed: 3,
            timing_seconds: 1.0,
        }
    }

    #[test]
    fn a_faster_configuration_makes_the_default_stale_with_its_interval() {
        let s = judge(
            &outcome(vec![
                run("1", 0.2, CellParity::Ok),
                run("64", 2.0, CellParity::Ok),
            ]),
            &spec(),
            0.02,
            None,
        );
        assert_eq!(s.default_verdict, Some(DefaultVerdict::Stale));
        let best = s.best.unwrap();
        assert_eq!(best.configuration.label, "chunk=64");
        assert!(best.speedup_ci95[0] > 1.5 && best.speedup_ci95[1] < 2.5);
        assert!(
            s.verdict_line.starts_with("stale: chunk=64 is faster by "),
            "{}",
            s.verdict_line
        );
        assert_eq!(
            s.runner_up.unwrap().configuration.label,
            "chunk=8",
            "the default is next"
        );
    }

    #[test]
    fn a_configuration_that_moves_a_score_never_wins_however_fast() {
        let s = judge(
            &outcome(vec![
                run("2", 5.0, CellParity::Fail),
                run("64", 1.5, CellParity::Ok),
            ]),
            &spec(),
            0.02,
            None,
        );
        assert_eq!(s.best.unwrap().configuration.label, "chunk=64");
        assert_eq!(s.rejected_by_parity, ["chunk=2"]);
        let only_rejected = judge(
            &outcome(vec![run("2", 5.0, CellParity::Fail)]),
            &spec(),
            0.02,
            None,
        );
        assert_eq!(
            only_rejected.default_verdict,
            Some(DefaultVerdict::DefaultBest)
        );
        assert_eq!(only_rejected.best.unwrap().configuration.label, "chunk=8");
    }

    #[test]
    fn slower_everywhere_is_default_best_and_noise_is_within_noise() {
        let s = judge(
            &outcome(vec![run("1", 0.3, CellParity::Ok)]),
            &spec(),
            0.02,
            None,
        );
        assert_eq!(s.default_verdict, Some(DefaultVerdict::DefaultBest));
        assert!(s.verdict_line.starts_with("default still best"));
        let s = judge(
            &outcome(vec![
                run("1", 0.3, CellParity::Ok),
                run("0", 1.0, CellParity::Ok),
            ]),
            &spec(),
            0.02,
            None,
        );
        assert_eq!(s.default_verdict, Some(DefaultVerdict::DefaultWithinNoise));
        assert_eq!(s.best.unwrap().tied_with, ["chunk=0"]);
    }

    #[test]
    fn a_tie_goes_to_the_configuration_planned_first_not_the_larger_median() {
        // 64 is planned before 0; 0's median is a hair larger, inside the threshold.
        let s = judge(
            &outcome(vec![
                run("64", 2.0, CellParity::Ok),
                run("0", 2.01, CellParity::Ok),
            ]),
            &spec(),
            0.02,
            None,
        );
        let best = s.best.unwrap();
        assert_eq!(best.configuration.label, "chunk=64");
        assert_eq!(best.tied_with, ["chunk=0"]);
        assert!(s.verdict_line.contains("tied within noise with chunk=0"));
    }

    #[test]
    fn a_coarse_host_resolution_widens_the_tie() {
        // Intervals apart, speedups 10% apart: a winner on a quiet host, a tie on one whose
        // A/A resolution is 15%.
        let runs = || {
            vec![
                run("64", 2.0, CellParity::Ok),
                run("0", 2.2, CellParity::Ok),
            ]
        };
        let quiet = judge(&outcome(runs()), &spec(), 0.02, Some(0.01));
        assert_eq!(quiet.tie_tolerance, 0.02);
        assert_eq!(quiet.best.as_ref().unwrap().configuration.label, "chunk=0");
        assert!(quiet.best.unwrap().tied_with.is_empty());
        let noisy = judge(&outcome(runs()), &spec(), 0.02, Some(0.15));
        assert_eq!(noisy.tie_tolerance, 0.15);
        let best = noisy.best.unwrap();
        assert_eq!(
            best.configuration.label, "chunk=64",
            "the tie goes to the one planned first"
        );
        assert_eq!(best.tied_with, ["chunk=0"]);
    }

    #[test]
    fn the_host_resolution_also_decides_whether_the_default_is_stale() {
        // 3% faster with a tight interval: `faster` by the statistics either way.
        let runs = || vec![run("64", 1.03, CellParity::Ok)];
        let quiet = judge(&outcome(runs()), &spec(), 0.02, None);
        assert_eq!(quiet.configurations[1].verdict, Some(Verdict::Faster));
        assert_eq!(quiet.default_verdict, Some(DefaultVerdict::Stale));
        // On a host that resolves only ±5%, 3% is inside its noise: the default is within
        // noise of it, as two configurations 3% apart would be tied.
        let noisy = judge(&outcome(runs()), &spec(), 0.02, Some(0.05));
        assert_eq!(noisy.configurations[1].verdict, Some(Verdict::Faster));
        assert_eq!(
            noisy.default_verdict,
            Some(DefaultVerdict::DefaultWithinNoise),
            "{}",
            noisy.verdict_line
        );
        let best = noisy.best.as_ref().unwrap();
        assert_eq!(best.configuration.label, "chunk=8", "the default");
        assert_eq!(best.tied_with, ["chunk=64"]);
        assert!(
            noisy.verdict_line.contains(
                "no configuration is faster by more than 5.0% (the host's A/A resolution)"
            ),
            "{}",
            noisy.verdict_line
        );
        assert_eq!(noisy.runner_up.unwrap().configuration.label, "chunk=64");
        // 10% faster is beyond it: stale on either host.
        let clear = judge(
            &outcome(vec![run("64", 1.10, CellParity::Ok)]),
            &spec(),
            0.02,
            Some(0.05),
        );
        assert_eq!(clear.default_verdict, Some(DefaultVerdict::Stale));
        // The slower side alike: 3% slower is `default still best` on a quiet host, within
        // noise on the coarse one.
        let slower = || vec![run("1", 0.97, CellParity::Ok)];
        let quiet = judge(&outcome(slower()), &spec(), 0.02, None);
        assert_eq!(quiet.configurations[1].verdict, Some(Verdict::Slower));
        assert_eq!(quiet.default_verdict, Some(DefaultVerdict::DefaultBest));
        let noisy = judge(&outcome(slower()), &spec(), 0.02, Some(0.05));
        assert_eq!(
            noisy.default_verdict,
            Some(DefaultVerdict::DefaultWithinNoise)
        );
    }

    #[test]
    fn configurations_that_failed_are_not_said_to_have_moved_a_score() {
        let only_rejected = judge(
            &outcome(vec![run("2", 5.0, CellParity::Fail)]),
            &spec(),
            0.02,
            None,
        );
        assert!(
            only_rejected
                .verdict_line
                .contains("every other configuration moved a score (chunk=2)"),
            "{}",
            only_rejected.verdict_line
        );
        let mut failed = run("64", 2.0, CellParity::Unavailable);
        failed.error = Some("its build failed".into());
        failed.pairs.clear();
        let mixed = judge(
            &outcome(vec![run("2", 5.0, CellParity::Fail), failed]),
            &spec(),
            0.02,
            None,
        );
        assert_eq!(mixed.default_verdict, Some(DefaultVerdict::DefaultBest));
        assert!(
            !mixed.verdict_line.contains("every other configuration"),
            "{}",
            mixed.verdict_line
        );
        assert!(
            mixed.verdict_line.contains("chunk=2 moved a score")
                && mixed.verdict_line.contains("chunk=64 could not be timed"),
            "{}",
            mixed.verdict_line
        );
    }

    #[test]
    fn nothing_comparable_has_no_verdict() {
        let mut failed = run("64", 2.0, CellParity::Unavailable);
        failed.error = Some("the build failed".into());
        let s = judge(&outcome(vec![failed]), &spec(), 0.02, None);
        assert_eq!(s.default_verdict, None);
        assert!(s.best.is_none());
        assert!(s
            .verdict_line
            .contains("no configuration could be compared"));
    }
}
