//! The Wilcoxon signed-rank test (Wilcoxon 1945), two-sided.

/// Up to this many non-zero differences without ties, the p-value is exact.
pub const EXACT_MAX_N: usize = 25;

/// Two-sided p-value of the Wilcoxon signed-rank test that `differences` are symmetric
/// around zero.
///
/// - Zeros are dropped before ranking (Wilcoxon's method), and so are NaNs.
/// - Equal absolute differences share the average of their ranks.
/// - With at most [`EXACT_MAX_N`] non-zero differences and no ties, the p-value is exact: the
///   null distribution of the positive rank sum W+ is counted over all `2^n` sign patterns.
/// - Otherwise it is the normal approximation with the tie correction of the variance and a
///   continuity correction of 0.5.
/// - With no non-zero difference left, there is no evidence at all: 1.0.
pub fn wilcoxon_signed_rank_p(differences: &[f64]) -> f64 {
    let nonzero: Vec<f64> = differences
        .iter()
        .copied()
        .filter(|d| *d != 0.0 && !d.is_nan())
        .collect();
    let n = nonzero.len();
    if n == 0 {
        return 1.0;
    }
    let magnitudes: Vec<f64> = nonzero.iter().map(|d| d.abs()).collect();
    let (ranks, tie_sizes) = average_ranks(&magnitudes);
    let positive_rank_sum: f64 = nonzero
        .iter()
        .zip(&ranks)
        .filter(|(d, _)| **d > 0.0)
        .map(|(_, rank)| rank)
        .sum();
    let has_ties = tie_sizes.iter().any(|t| *t > 1);
    if n <= EXACT_MAX_N && !has_ties {
        // Without ties, ranks are 1..=n and the sum is an exact integer.
        exact_two_sided_p(n, positive_rank_sum.round() as usize)
    } else {
        normal_two_sided_p(n, positive_rank_sum, &tie_sizes)
    }
}

/// The fewest pairs with which the exact two-sided test can give `p < alpha` at all.
///
/// With `n` untied non-zero differences the smallest p is that of all of one sign,
/// `2 / 2^n` (0.0625 for 5, 0.03125 for 6), so at alpha 0.05 a cell needs 6 pairs before
/// `faster` or `slower` is possible: with fewer, every verdict is `same` or `unsure`.
/// Beyond [`EXACT_MAX_N`] (an alpha below `2 / 2^25`) this answers `EXACT_MAX_N + 1`.
pub fn min_pairs_for_significance(alpha: f64) -> u32 {
    (1..=EXACT_MAX_N)
        .find(|&n| exact_two_sided_p(n, n * (n + 1) / 2) < alpha)
        .unwrap_or(EXACT_MAX_N + 1) as u32
}

/// Ranks (1-based) of `values` in ascending order, ties sharing their average rank, and the
/// size of every group of equal values.
fn average_ranks(values: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut by_value: Vec<usize> = (0..values.len()).collect();
    by_value.sort_by(|a, b| values[*a].total_cmp(&values[*b]));
    let mut ranks = vec![0.0; values.len()];
    let mut tie_sizes = Vec::new();
    let mut start = 0;
    while start < by_value.len() {
        let mut end = start + 1;
        while end < by_value.len() && values[by_value[end]] == values[by_value[start]] {
            end += 1;
        }
        // Positions start..end hold ranks start+1..=end; their average:
        let rank = (start + 1 + end) as f64 / 2.0;
        for index in &by_value[start..end] {
            ranks[*index] = rank;
        }
        tie_sizes.push(end - start);
        start = end;
    }
    (ranks, tie_sizes)
}

/// How many subsets of the ranks `1..=n` have each rank sum `0..=n(n+1)/2`.
fn rank_sum_counts(n: usize) -> Vec<u64> {
    let max_sum = n * (n + 1) / 2;
    let mut counts = vec![0u64; max_sum + 1];
    counts[0] = 1;
    for rank in 1..=n {
        for sum in (rank..=max_sum).rev() {
            counts[sum] += counts[sum - rank];
        }
    }
    counts
}

/// Exact two-sided p-value of an observed positive rank sum among `n` untied ranks:
/// twice the smaller tail, at most 1.
fn exact_two_sided_p(n: usize, positive_rank_sum: usize) -> f64 {
    let counts = rank_sum_counts(n);
    let observed = positive_rank_sum.min(counts.len() - 1);
    let lower: u64 = counts[..=observed].iter().sum();
    let upper: u64 = counts[observed..].iter().sum();
    let patterns = (1u64 << n) as f64;
    (2.0 * lower.min(upper) as f64 / patterns).min(1.0)
}

/// Normal approximation of the two-sided p-value, with tie and continuity corrections.
fn normal_two_sided_p(n: usize, positive_rank_sum: f64, tie_sizes: &[usize]) -> f64 {
    let n = n as f64;
    let mean = n * (n + 1.0) / 4.0;
    let tie_term: f64 = tie_sizes
        .iter()
        .map(|t| {
            let t = *t as f64;
            t * t * t - t
        })
        .sum();
    let variance = n * (n + 1.0) * (2.0 * n + 1.0) / 24.0 - tie_term / 48.0;
    let z = ((positive_rank_sum - mean).abs() - 0.5).max(0.0) / variance.sqrt();
    erfc(z / std::f64::consts::SQRT_2).min(1.0)
}

/// The complementary error function, fractional error below 1.2e-7 everywhere
/// (Chebyshev fit from Numerical Recipes, `erfcc`).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let tail = t * poly.exp();
    if x >= 0.0 {
        tail
    } else {
        2.0 - tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two-sided p-value by brute force: the share of all 2^n sign patterns of the
    /// observed ranks whose W+ lies at least as far from its mean as the observed one.
    fn brute_force_p(differences: &[f64]) -> f64 {
        let nonzero: Vec<f64> = differences.iter().copied().filter(|d| *d != 0.0).collect();
        let n = nonzero.len();
        let (ranks, _) = average_ranks(&nonzero.iter().map(|d| d.abs()).collect::<Vec<_>>());
        let mean = ranks.iter().sum::<f64>() / 2.0;
        let observed: f64 = nonzero
            .iter()
            .zip(&ranks)
            .filter(|(d, _)| **d > 0.0)
            .map(|(_, r)| r)
            .sum();
        let extreme = (0u32..1 << n)
            .filter(|mask| {
                let w: f64 = (0..n)
                    .filter(|i| mask & (1 << i) != 0)
                    .map(|i| ranks[i])
                    .sum();
                (w - mean).abs() >= (observed - mean).abs() - 1e-9
            })
            .count();
        extreme as f64 / (1u64 << n) as f64
    }

    #[test]
    fn all_ten_positive_differences_give_exact_p_of_2_over_1024() {
        let differences: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(wilcoxon_signed_rank_p(&differences), 2.0 / 1024.0);
        assert_eq!(wilcoxon_signed_rank_p(&differences), 0.001_953_125);
    }

    #[test]
    fn exact_p_matches_brute_force_enumeration() {
        let cases: [&[f64]; 4] = [
            &[0.3, -0.1, 0.25, 0.7, -0.05, 0.9, 0.4, -0.6],
            &[
                1.5, 2.5, -0.5, 3.5, 4.5, -5.5, 6.5, 7.5, 8.5, -9.5, 10.5, 11.5,
            ],
            &[-0.01, -0.02, 0.03],
            &[
                0.11, -0.12, 0.13, -0.14, 0.15, -0.16, 0.17, -0.18, 0.19, 0.2, 0.21, 0.22, 0.23,
            ],
        ];
        for differences in cases {
            let expected = brute_force_p(differences);
            let got = wilcoxon_signed_rank_p(differences);
            assert!(
                (got - expected).abs() < 1e-12,
                "{differences:?}: {got} vs {expected}"
            );
        }
    }

    #[test]
    fn known_small_values() {
        // n = 1: both sign patterns are as extreme as the observed one.
        assert_eq!(wilcoxon_signed_rank_p(&[0.4]), 1.0);
        // n = 5, all negative: 2 / 32.
        assert_eq!(
            wilcoxon_signed_rank_p(&[-1.0, -2.0, -3.0, -4.0, -5.0]),
            0.0625
        );
        // n = 4, W+ = 1 (only the smallest positive): P(W+ <= 1) = 2/16, two-sided 0.25.
        assert_eq!(wilcoxon_signed_rank_p(&[0.1, -0.2, -0.3, -0.4]), 0.25);
    }

    #[test]
    fn min_pairs_for_significance_is_where_the_real_p_first_drops_below_alpha() {
        let all_positive = |n: u32| -> Vec<f64> { (1..=n).map(f64::from).collect() };
        assert_eq!(wilcoxon_signed_rank_p(&all_positive(5)), 0.0625);
        assert_eq!(wilcoxon_signed_rank_p(&all_positive(6)), 0.031_25);
        assert_eq!(min_pairs_for_significance(0.05), 6);
        for alpha in [0.5, 0.2, 0.05, 0.01, 0.001] {
            let n = min_pairs_for_significance(alpha);
            assert!(wilcoxon_signed_rank_p(&all_positive(n)) < alpha, "{alpha}");
            // One pair fewer cannot reach alpha, whatever the signs.
            let fewer = n - 1;
            let smallest = (0..1u32 << fewer)
                .map(|signs| {
                    let differences: Vec<f64> = (1..=fewer)
                        .map(|i| {
                            let d = f64::from(i);
                            if signs >> (i - 1) & 1 == 1 {
                                -d
                            } else {
                                d
                            }
                        })
                        .collect();
                    wilcoxon_signed_rank_p(&differences)
                })
                .fold(1.0, f64::min);
            assert!(smallest >= alpha, "{alpha}: {fewer} pairs give {smallest}");
        }
    }

    #[test]
    fn negating_differences_gives_the_same_p() {
        let exact = [0.3, -0.1, 0.25, 0.7, -0.05, 0.9, 0.4, -0.6, 0.8];
        let ties = [0.3, -0.3, 0.3, 0.7, 0.7, -0.2, 0.1, 0.1];
        let large: Vec<f64> = (0..40).map(|i| f64::from(i) * 0.01 - 0.12).collect();
        for differences in [&exact[..], &ties[..], &large[..]] {
            let negated: Vec<f64> = differences.iter().map(|d| -d).collect();
            assert_eq!(
                wilcoxon_signed_rank_p(differences),
                wilcoxon_signed_rank_p(&negated)
            );
        }
    }

    #[test]
    fn zeros_are_dropped() {
        let without = [0.3, -0.1, 0.25, 0.7, -0.05, 0.9];
        let with = [0.0, 0.3, -0.1, 0.0, 0.25, 0.7, -0.05, 0.9, -0.0];
        assert_eq!(
            wilcoxon_signed_rank_p(&without),
            wilcoxon_signed_rank_p(&with)
        );
    }

    #[test]
    fn no_non_zero_difference_gives_one() {
        assert_eq!(wilcoxon_signed_rank_p(&[]), 1.0);
        assert_eq!(wilcoxon_signed_rank_p(&[0.0, 0.0]), 1.0);
    }

    #[test]
    fn ties_share_average_ranks() {
        let (ranks, tie_sizes) = average_ranks(&[0.5, 0.1, 0.5, 0.3, 0.5]);
        assert_eq!(ranks, vec![4.0, 1.0, 4.0, 2.0, 4.0]);
        assert_eq!(tie_sizes, vec![1, 1, 3]);
    }

    #[test]
    fn ties_use_the_corrected_normal_approximation() {
        // n = 6, magnitudes {1,1,2,2,3,3}: ranks 1.5,1.5,3.5,3.5,5.5,5.5; all positive so
        // W+ = 21, mean 10.5, variance 6*7*13/24 - 3*6/48 = 22.375.
        let p = wilcoxon_signed_rank_p(&[1.0, 1.0, 2.0, 2.0, 3.0, 3.0]);
        let z: f64 = (10.5 - 0.5) / 22.375f64.sqrt();
        let expected = erfc(z / std::f64::consts::SQRT_2);
        assert!((p - expected).abs() < 1e-15);
        assert!((p - 0.034_59).abs() < 1e-4, "{p}");
    }

    #[test]
    fn large_samples_use_the_normal_approximation_close_to_exact() {
        // n = 30 all positive: exact two-sided p = 2 / 2^30; the normal tail is tiny too.
        let differences: Vec<f64> = (1..=30).map(f64::from).collect();
        assert!(wilcoxon_signed_rank_p(&differences) < 1e-5);
        // Signs mixed evenly: W+ = 217 against a mean of 232.5, p about 0.75.
        let balanced: Vec<f64> = (1..=30)
            .map(|i| {
                if i % 4 == 0 || i % 4 == 3 {
                    f64::from(i)
                } else {
                    -f64::from(i)
                }
            })
            .collect();
        assert!(wilcoxon_signed_rank_p(&balanced) > 0.5);
    }

    #[test]
    fn erfc_matches_reference_values() {
        for (x, expected) in [
            (0.0, 1.0),
            (0.5, 0.479_500_122_186_953_5),
            (1.0, 0.157_299_207_050_285_1),
            (2.0, 0.004_677_734_981_047_266),
            (-1.0, 1.842_700_792_949_715),
        ] {
            assert!(((erfc(x) - expected) / expected).abs() < 2e-7, "erfc({x})");
        }
    }

    #[test]
    fn rank_sum_counts_add_up_to_all_sign_patterns() {
        for n in [1, 5, 12, 25] {
            assert_eq!(rank_sum_counts(n).iter().sum::<u64>(), 1u64 << n);
        }
    }
}
