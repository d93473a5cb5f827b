//! Paired A/B statistics of one cell: is the fork faster than upstream, slower, the same,
//! or can this host not tell?
//!
//! The unit of measurement is a [`Pair`]: one upstream run and one fork run, back to back,
//! in the order [`run_order`] gives (balanced, seeded). [`analyse`] turns a cell's pairs into
//! an [`Analysis`]:
//!
//! - the speedup, [`ratio_of_medians`] (upstream median / fork median; above 1 the fork is
//!   faster);
//! - its confidence interval, [`bootstrap_ci`]: a seeded percentile bootstrap that resamples
//!   whole pairs;
//! - a p-value, [`wilcoxon_signed_rank_p`] on the per-pair log-ratios `ln(upstream / fork)`;
//! - a [`Verdict`] from both (see [`verdict`]).
//!
//! [`next_step`] decides after each pair whether an adaptive cell needs another one;
//! [`resolution`] and [`false_positive_rate`] summarise A/A calibration runs.
//! `docs/statistics.md` explains the method, its assumptions and its sources.

mod adaptive;
mod bootstrap;
mod order;
mod wilcoxon;

use serde::{Deserialize, Serialize};

use crate::stats::median;

pub use adaptive::{next_step, AdaptiveBounds, StopReason};
pub use bootstrap::bootstrap_ci;
pub use order::{run_order, Order, SeededRng};
pub use wilcoxon::{min_pairs_for_significance, wilcoxon_signed_rank_p, EXACT_MAX_N};

/// [`analyse`] needs at least this many pairs.
pub const MIN_PAIRS: usize = 2;

/// The fewest pairs with which a cell can be `faster` or `slower` at all, at the alpha every
/// cell is analysed with ([`AnalysisConfig::default`]): 6 at alpha 0.05, since 5 pairs of
/// one sign give the exact signed-rank test's smallest p, 0.0625
/// ([`min_pairs_for_significance`]). A cell limited to fewer pairs (`[measure] max_runs`)
/// can only be `same` or `unsure`.
pub fn min_pairs_for_a_verdict() -> u32 {
    min_pairs_for_significance(AnalysisConfig::default().alpha)
}

/// One upstream run and one fork run of the same cell, timed back to back.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    /// Wall seconds of the upstream run.
    pub upstream_s: f64,
    /// Wall seconds of the fork run.
    pub fork_s: f64,
}

impl Pair {
    /// Whether both times are finite and positive, so that their ratio means something.
    pub fn is_valid(&self) -> bool {
        is_positive_time(self.upstream_s) && is_positive_time(self.fork_s)
    }

    /// This pair's speedup, `upstream_s / fork_s`.
    pub fn ratio(&self) -> f64 {
        self.upstream_s / self.fork_s
    }

    /// `ln(upstream_s / fork_s)`: positive when the fork was faster in this pair.
    pub fn log_ratio(&self) -> f64 {
        self.upstream_s.ln() - self.fork_s.ln()
    }
}

fn is_positive_time(seconds: f64) -> bool {
    seconds.is_finite() && seconds > 0.0
}

fn all_valid(pairs: &[Pair]) -> bool {
    pairs.iter().all(Pair::is_valid)
}

/// What a cell's pairs say about the fork compared with upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The fork is faster: the interval lies above 1 and the test is significant.
    Faster,
    /// The fork is slower: the interval lies below 1 and the test is significant.
    Slower,
    /// No difference that matters: the interval lies inside the practical threshold band.
    Same,
    /// The pairs cannot tell: more pairs, or a quieter host, are needed.
    Unsure,
}

/// The knobs of [`analyse`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnalysisConfig {
    /// Relative difference below which a speedup does not matter: `0.02` is ±2%, the band
    /// `[1/(1+t), 1+t]` of speedups.
    pub practical_threshold: f64,
    /// Significance level of the Wilcoxon test.
    pub alpha: f64,
    /// Coverage of the bootstrap interval, in `(0, 1)`.
    pub confidence: f64,
    /// Bootstrap resamples; at least 1.
    pub bootstrap_resamples: u32,
    /// Seed of the bootstrap's generator; record it to replay the interval exactly.
    pub seed: u64,
}

impl Default for AnalysisConfig {
    /// ±2% threshold, alpha 0.05, 95% interval, 2000 resamples, seed 0.
    fn default() -> Self {
        Self {
            practical_threshold: 0.02,
            alpha: 0.05,
            confidence: 0.95,
            bootstrap_resamples: 2000,
            seed: 0,
        }
    }
}

/// The analysis of one cell's pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// Number of pairs analysed.
    pub pairs: usize,
    /// Upstream median / fork median; above 1 the fork is faster.
    pub speedup: f64,
    /// `[lo, hi]` bootstrap interval of `speedup` at `AnalysisConfig::confidence` (95% by
    /// default, hence the name).
    pub speedup_ci95: [f64; 2],
    /// Two-sided Wilcoxon signed-rank p-value of the per-pair log-ratios.
    pub p_value: f64,
    /// The verdict of [`verdict`].
    pub verdict: Verdict,
}

/// Analyses a cell: speedup, its bootstrap interval, the Wilcoxon p-value and the verdict.
///
/// `None` for fewer than [`MIN_PAIRS`] pairs, for any time that is not finite and positive,
/// and for a config the bootstrap rejects (no resamples, confidence outside `(0, 1)`).
/// The same pairs and config always give the same analysis.
pub fn analyse(pairs: &[Pair], config: &AnalysisConfig) -> Option<Analysis> {
    if pairs.len() < MIN_PAIRS {
        return None;
    }
    let speedup = ratio_of_medians(pairs)?;
    let ci = bootstrap_ci(
        pairs,
        config.bootstrap_resamples,
        config.confidence,
        config.seed,
    )?;
    let log_ratios: Vec<f64> = pairs.iter().map(Pair::log_ratio).collect();
    let p_value = wilcoxon_signed_rank_p(&log_ratios);
    Some(Analysis {
        pairs: pairs.len(),
        speedup,
        speedup_ci95: ci,
        p_value,
        verdict: verdict(ci, p_value, config),
    })
}

/// A cell's own seed: the spec's seed mixed with the cell index (splitmix64's finaliser),
/// so cells get independent orders and one recorded seed replays them all. The agent seeds
/// a cell's run order and bootstrap with it; the coordinator checks a cell carries it.
pub fn cell_seed(spec_seed: u64, index: u32) -> u64 {
    derived_seed(spec_seed, u64::from(index))
}

/// The seed of the `index`th of several things one seed stands for (a cell, a sweep's
/// configuration): `seed` mixed with the index by splitmix64's finaliser, a bijection, so
/// distinct indexes get distinct, unrelated seeds.
pub fn derived_seed(seed: u64, index: u64) -> u64 {
    let mut z = seed ^ (index + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The verdict rule, first match wins:
/// 1. `Same` when the interval lies inside the band: `1/(1+t) <= lo` and `hi <= 1+t`;
/// 2. `Faster` when `lo > 1` and `p_value < alpha`;
/// 3. `Slower` when `hi < 1` and `p_value < alpha`;
/// 4. `Unsure` otherwise.
pub fn verdict(ci: [f64; 2], p_value: f64, config: &AnalysisConfig) -> Verdict {
    let [lo, hi] = ci;
    let band_top = 1.0 + config.practical_threshold;
    let significant = p_value < config.alpha;
    if 1.0 / band_top <= lo && hi <= band_top {
        Verdict::Same
    } else if lo > 1.0 && significant {
        Verdict::Faster
    } else if hi < 1.0 && significant {
        Verdict::Slower
    } else {
        Verdict::Unsure
    }
}

/// Median of the upstream times over median of the fork times; above 1 the fork is faster.
///
/// `None` when there are no pairs or any time is not finite and positive.
pub fn ratio_of_medians(pairs: &[Pair]) -> Option<f64> {
    if !all_valid(pairs) {
        return None;
    }
    let upstream: Vec<f64> = pairs.iter().map(|p| p.upstream_s).collect();
    let fork: Vec<f64> = pairs.iter().map(|p| p.fork_s).collect();
    Some(median(&upstream)? / median(&fork)?)
}

/// Smallest speedup difference the host resolves: half-width of the CI as a fraction (e.g.
/// 0.013 for ±1.3%), relative to the speedup: `(hi - lo) / 2 / speedup`.
///
/// In an A/A run the speedup is about 1, so this is the interval's plain half-width.
/// Infinite when the speedup is not finite and positive.
pub fn resolution(analysis: &Analysis) -> f64 {
    let [lo, hi] = analysis.speedup_ci95;
    if !is_positive_time(analysis.speedup) {
        return f64::INFINITY;
    }
    (hi - lo) / 2.0 / analysis.speedup
}

/// For A/A calibration: how often a verdict of faster/slower came out of trials whose sides
/// are identical. The share of `Faster` and `Slower` among `verdicts`; 0 for no trials.
pub fn false_positive_rate(verdicts: &[Verdict]) -> f64 {
    if verdicts.is_empty() {
        return 0.0;
    }
    let false_positives = verdicts
        .iter()
        .filter(|v| matches!(v, Verdict::Faster | Verdict::Slower))
        .count();
    false_positives as f64 / verdicts.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A standard normal draw (Box–Muller).
    fn gaussian(rng: &mut SeededRng) -> f64 {
        let u1 = 1.0 - rng.next_f64(); // in (0, 1], so the log is finite
        let u2 = rng.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// `count` pairs whose true speedup is `speedup`, every run carrying independent
    /// multiplicative log-normal noise of `noise` (0.01 is about 1%).
    fn synthetic_pairs(seed: u64, count: usize, speedup: f64, noise: f64) -> Vec<Pair> {
        let mut rng = SeededRng::new(seed);
        (0..count)
            .map(|_| Pair {
                upstream_s: (noise * gaussian(&mut rng)).exp(),
                fork_s: (noise * gaussian(&mut rng)).exp() / speedup,
            })
            .collect()
    }

    fn config(seed: u64) -> AnalysisConfig {
        AnalysisConfig {
            seed,
            ..AnalysisConfig::default()
        }
    }

    fn pair(upstream_s: f64, fork_s: f64) -> Pair {
        Pair { upstream_s, fork_s }
    }

    #[test]
    fn default_config_is_two_percent_alpha_five_percent_95_percent_2000_resamples() {
        let config = AnalysisConfig::default();
        assert_eq!(config.practical_threshold, 0.02);
        assert_eq!(config.alpha, 0.05);
        assert_eq!(
            min_pairs_for_a_verdict(),
            6,
            "2/2^5 = 0.0625 is not below 0.05"
        );
        assert_eq!(config.confidence, 0.95);
        assert_eq!(config.bootstrap_resamples, 2000);
    }

    #[test]
    fn five_percent_speedup_is_faster_and_the_ci_covers_1_05() {
        let pairs = synthetic_pairs(1, 20, 1.05, 0.01);
        let analysis = analyse(&pairs, &config(1)).unwrap();
        assert_eq!(analysis.verdict, Verdict::Faster, "{analysis:?}");
        let [lo, hi] = analysis.speedup_ci95;
        assert!(lo <= 1.05 && 1.05 <= hi, "{analysis:?}");
        assert_eq!(analysis.pairs, 20);
    }

    #[test]
    fn five_percent_slowdown_is_slower() {
        let pairs = synthetic_pairs(2, 20, 1.0 / 1.05, 0.01);
        let analysis = analyse(&pairs, &config(2)).unwrap();
        assert_eq!(analysis.verdict, Verdict::Slower, "{analysis:?}");
        let [lo, hi] = analysis.speedup_ci95;
        assert!(lo <= 1.0 / 1.05 && 1.0 / 1.05 <= hi, "{analysis:?}");
    }

    #[test]
    fn identical_sides_are_same_or_unsure() {
        for seed in 0..5 {
            let pairs = synthetic_pairs(seed, 15, 1.0, 0.01);
            let verdict = analyse(&pairs, &config(seed)).unwrap().verdict;
            assert!(
                matches!(verdict, Verdict::Same | Verdict::Unsure),
                "seed {seed}"
            );
        }
    }

    #[test]
    fn aa_false_positive_rate_over_400_trials_is_at_most_twice_alpha() {
        // 3% noise makes most intervals wider than the ±2% band, so the p-value, not the
        // band, has to keep false positives away. 300 resamples keep the test fast.
        let config = AnalysisConfig {
            bootstrap_resamples: 300,
            ..AnalysisConfig::default()
        };
        let verdicts: Vec<Verdict> = (0..400)
            .map(|trial| {
                let pairs = synthetic_pairs(10_000 + trial, 15, 1.0, 0.03);
                let config = AnalysisConfig {
                    seed: trial,
                    ..config.clone()
                };
                analyse(&pairs, &config).unwrap().verdict
            })
            .collect();
        let rate = false_positive_rate(&verdicts);
        assert!(rate <= 0.10, "false-positive rate {rate}");
    }

    #[test]
    fn half_percent_difference_with_ten_pairs_is_same_or_unsure_never_slower() {
        let pairs = synthetic_pairs(3, 10, 1.005, 0.01);
        let verdict = analyse(&pairs, &config(3)).unwrap().verdict;
        assert!(
            matches!(verdict, Verdict::Same | Verdict::Unsure),
            "{verdict:?}"
        );
        for seed in 0..50 {
            let pairs = synthetic_pairs(100 + seed, 10, 1.005, 0.01);
            let config = AnalysisConfig {
                seed,
                bootstrap_resamples: 500,
                ..config(0)
            };
            assert_ne!(analyse(&pairs, &config).unwrap().verdict, Verdict::Slower);
        }
    }

    #[test]
    fn analyse_refuses_too_few_pairs_and_bad_times() {
        let config = AnalysisConfig::default();
        assert_eq!(analyse(&[], &config), None);
        assert_eq!(analyse(&[pair(1.0, 1.0)], &config), None);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(analyse(&[pair(1.0, 1.0), pair(bad, 1.0)], &config), None);
            assert_eq!(analyse(&[pair(1.0, 1.0), pair(1.0, bad)], &config), None);
        }
        let no_resamples = AnalysisConfig {
            bootstrap_resamples: 0,
            ..config.clone()
        };
        assert_eq!(
            analyse(&[pair(1.0, 1.0), pair(2.0, 1.0)], &no_resamples),
            None
        );
    }

    #[test]
    fn analyse_is_deterministic_for_a_seed() {
        let pairs = synthetic_pairs(4, 12, 1.01, 0.02);
        assert_eq!(analyse(&pairs, &config(9)), analyse(&pairs, &config(9)));
    }

    #[test]
    fn verdict_rule_follows_the_documented_order() {
        let config = AnalysisConfig::default();
        let band_bottom = 1.0 / 1.02;
        assert_eq!(verdict([band_bottom, 1.02], 0.001, &config), Verdict::Same);
        assert_eq!(verdict([1.005, 1.015], 0.001, &config), Verdict::Same);
        assert_eq!(verdict([1.01, 1.03], 0.01, &config), Verdict::Faster);
        assert_eq!(verdict([1.01, 1.03], 0.05, &config), Verdict::Unsure);
        assert_eq!(verdict([0.95, 0.99], 0.01, &config), Verdict::Slower);
        assert_eq!(verdict([0.97, 1.03], 0.01, &config), Verdict::Unsure);
        assert_eq!(verdict([0.99, 1.03], 0.5, &config), Verdict::Unsure);
    }

    #[test]
    fn ratio_of_medians_of_known_pairs() {
        let pairs = [
            pair(2.0, 1.0),
            pair(3.0, 2.0),
            pair(10.0, 4.0),
            pair(4.0, 3.0),
        ];
        // Upstream median (3 + 4) / 2 = 3.5, fork median (2 + 3) / 2 = 2.5.
        assert_eq!(ratio_of_medians(&pairs), Some(1.4));
        assert_eq!(ratio_of_medians(&[]), None);
        assert_eq!(ratio_of_medians(&[pair(1.0, 0.0)]), None);
    }

    #[test]
    fn bootstrap_is_deterministic_for_a_seed_and_varies_with_it() {
        let pairs = synthetic_pairs(5, 15, 1.0, 0.02);
        let a = bootstrap_ci(&pairs, 1000, 0.95, 17).unwrap();
        assert_eq!(Some(a), bootstrap_ci(&pairs, 1000, 0.95, 17));
        assert_ne!(Some(a), bootstrap_ci(&pairs, 1000, 0.95, 18));
    }

    #[test]
    fn bootstrap_rejects_bad_arguments() {
        let pairs = [pair(1.0, 1.0), pair(1.1, 1.0)];
        assert_eq!(bootstrap_ci(&[], 100, 0.95, 0), None);
        assert_eq!(bootstrap_ci(&pairs, 0, 0.95, 0), None);
        for confidence in [0.0, 1.0, -0.5, f64::NAN] {
            assert_eq!(bootstrap_ci(&pairs, 100, confidence, 0), None);
        }
    }

    #[test]
    fn resolution_is_the_relative_half_width() {
        let analysis = Analysis {
            pairs: 10,
            speedup: 1.0,
            speedup_ci95: [0.987, 1.013],
            p_value: 0.4,
            verdict: Verdict::Same,
        };
        assert!((resolution(&analysis) - 0.013).abs() < 1e-12);
        let doubled = Analysis {
            speedup: 2.0,
            speedup_ci95: [1.974, 2.026],
            ..analysis
        };
        assert!((resolution(&doubled) - 0.013).abs() < 1e-12);
    }

    #[test]
    fn false_positive_rate_counts_faster_and_slower() {
        use Verdict::*;
        assert_eq!(false_positive_rate(&[]), 0.0);
        assert_eq!(false_positive_rate(&[Same, Unsure, Faster, Slower]), 0.5);
        assert_eq!(false_positive_rate(&[Same, Same, Unsure, Unsure]), 0.0);
    }

    #[test]
    fn analysis_serialises_with_snake_case_verdict() {
        let analysis = Analysis {
            pairs: 3,
            speedup: 1.5,
            speedup_ci95: [1.25, 1.75],
            p_value: 0.25,
            verdict: Verdict::Unsure,
        };
        let json = serde_json::to_value(&analysis).unwrap();
        assert_eq!(json["verdict"], "unsure");
        assert_eq!(json["speedup_ci95"], serde_json::json!([1.25, 1.75]));
        let back: Analysis = serde_json::from_value(json).unwrap();
        assert_eq!(back, analysis);
    }

    fn pairs_strategy() -> impl Strategy<Value = Vec<Pair>> {
        proptest::collection::vec((0.001f64..100.0, 0.001f64..100.0), 1..25).prop_map(|v| {
            v.into_iter()
                .map(|(upstream_s, fork_s)| Pair { upstream_s, fork_s })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn ci_is_ordered_positive_and_within_the_single_pair_ratios(
            pairs in pairs_strategy(),
            seed in any::<u64>(),
        ) {
            let [lo, hi] = bootstrap_ci(&pairs, 200, 0.95, seed).unwrap();
            let ratios: Vec<f64> = pairs.iter().map(Pair::ratio).collect();
            let min_ratio = ratios.iter().copied().fold(f64::INFINITY, f64::min);
            let max_ratio = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let slack = 1e-12 * max_ratio;
            prop_assert!(lo <= hi);
            prop_assert!(lo > 0.0 && hi > 0.0);
            prop_assert!(lo <= max_ratio && hi >= min_ratio);
            // Stronger: every resample's ratio of medians lies between the pair ratios.
            prop_assert!(lo >= min_ratio - slack && hi <= max_ratio + slack);
        }

        #[test]
        fn scaling_fork_times_by_c_scales_the_ci_by_one_over_c(
            pairs in pairs_strategy(),
            seed in any::<u64>(),
            c in 0.01f64..100.0,
        ) {
            let scaled: Vec<Pair> = pairs
                .iter()
                .map(|p| Pair { upstream_s: p.upstream_s, fork_s: p.fork_s * c })
                .collect();
            let [lo, hi] = bootstrap_ci(&pairs, 200, 0.95, seed).unwrap();
            let [scaled_lo, scaled_hi] = bootstrap_ci(&scaled, 200, 0.95, seed).unwrap();
            prop_assert!(((scaled_lo * c - lo) / lo).abs() < 1e-9);
            prop_assert!(((scaled_hi * c - hi) / hi).abs() < 1e-9);
        }
    }
}
