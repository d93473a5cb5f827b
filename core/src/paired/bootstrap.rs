//! The speedup's confidence interval: a seeded percentile bootstrap of the ratio of medians
//! that resamples whole pairs ([`bootstrap_ci`]).
//!
//! The agent computes it for every cell (and at every step of an adaptive one), and the
//! coordinator computes it again for every cell it is sent (`cell_audit`), so it is on the
//! coordinator's ingest path: 2,000 resamples a cell. A resample's medians are read off
//! counts of the pairs' ranks, which the resample's draws index, instead of selecting over
//! the resampled values: the same order statistics of the same values, so the same interval
//! bit for bit as the selection it replaced (kept in the tests as the definition), in a
//! fraction of the time (docs/performance.md).

use super::order::SeededRng;
use super::{all_valid, Pair};

/// Percentile bootstrap interval `[lo, hi]` of [`ratio_of_medians`](super::ratio_of_medians),
/// at `confidence`.
///
/// Each of the `resamples` resamples draws `pairs.len()` whole pairs with replacement, from a
/// [`SeededRng`] seeded with `seed`; the bounds are the `(1 - confidence) / 2` and
/// `(1 + confidence) / 2` quantiles (linear interpolation) of the resampled ratios. The same
/// arguments always give the same interval. `None` for no pairs, an invalid time, no
/// resamples, or a confidence outside `(0, 1)`.
pub fn bootstrap_ci(
    pairs: &[Pair],
    resamples: u32,
    confidence: f64,
    seed: u64,
) -> Option<[f64; 2]> {
    let usable_pairs = !pairs.is_empty() && all_valid(pairs);
    let usable_config = resamples > 0 && confidence > 0.0 && confidence < 1.0;
    if !(usable_pairs && usable_config) {
        return None;
    }
    let mut ratios = resampled_ratios(pairs, resamples, &mut SeededRng::new(seed));
    let tail = (1.0 - confidence) / 2.0;
    // Two selections instead of a sort of every ratio: the same order statistics, so the
    // same interval bit for bit, in a fraction of the time.
    Some([
        quantile_by_selection(&mut ratios, tail),
        quantile_by_selection(&mut ratios, 1.0 - tail),
    ])
}

/// The `q` quantile of `values` (`0 <= q <= 1`, interpolating linearly between order
/// statistics) as if sorted, by selection (reordering `values`).
fn quantile_by_selection(values: &mut [f64], q: f64) -> f64 {
    let position = q * (values.len() - 1) as f64;
    let below = position.floor() as usize;
    let above = position.ceil() as usize;
    let weight = position - below as f64;
    let (_, at_below, after) = values.select_nth_unstable_by(below, f64::total_cmp);
    let low = *at_below;
    let high = if above == below {
        low
    } else {
        after.iter().copied().min_by(f64::total_cmp).unwrap_or(low)
    };
    low + (high - low) * weight
}

/// The ratio of medians of `resamples` resamples of `pairs` (non-empty, valid), drawn in
/// order from `rng`: for each resample, `pairs.len()` draws of a pair's index.
fn resampled_ratios(pairs: &[Pair], resamples: u32, rng: &mut SeededRng) -> Vec<f64> {
    let n = pairs.len();
    let upstream = RankedTimes::new(pairs.iter().map(|pair| pair.upstream_s));
    let fork = RankedTimes::new(pairs.iter().map(|pair| pair.fork_s));
    let mut upstream_counts = vec![0u32; n];
    let mut fork_counts = vec![0u32; n];
    (0..resamples)
        .map(|_| {
            upstream_counts.fill(0);
            fork_counts.fill(0);
            for _ in 0..n {
                let drawn = rng.below(n as u64) as usize;
                upstream_counts[upstream.rank[drawn]] += 1;
                fork_counts[fork.rank[drawn]] += 1;
            }
            upstream.median(&upstream_counts) / fork.median(&fork_counts)
        })
        .collect()
}

/// One side's times in ascending order, and each pair's place in that order.
struct RankedTimes {
    ascending: Vec<f64>,
    /// `rank[i]`: where pair `i`'s time is in `ascending` (ties get distinct places, which
    /// hold the same value).
    rank: Vec<usize>,
}

impl RankedTimes {
    fn new(times: impl Iterator<Item = f64>) -> Self {
        let times: Vec<f64> = times.collect();
        let mut order: Vec<usize> = (0..times.len()).collect();
        order.sort_by(|&a, &b| times[a].total_cmp(&times[b]));
        let mut rank = vec![0; times.len()];
        for (place, &pair) in order.iter().enumerate() {
            rank[pair] = place;
        }
        RankedTimes {
            ascending: order.iter().map(|&pair| times[pair]).collect(),
            rank,
        }
    }

    /// The median of the resample holding `counts[r]` copies of the `r`th smallest time
    /// (the counts sum to the number of pairs): the middle value, or the mean of the two
    /// middle values, computed as [`crate::stats::median`] does.
    fn median(&self, counts: &[u32]) -> f64 {
        let len = counts.len();
        let upper = self.at_position(counts, len / 2);
        if len % 2 == 1 {
            upper
        } else {
            let lower = self.at_position(counts, len / 2 - 1);
            (lower + upper) / 2.0
        }
    }

    /// The value at 0-based `position` of the resample in ascending order.
    fn at_position(&self, counts: &[u32], position: usize) -> f64 {
        let mut before = 0usize;
        for (place, &count) in counts.iter().enumerate() {
            before += count as usize;
            if before > position {
                return self.ascending[place];
            }
        }
        unreachable!("the counts sum to the number of pairs, which is above {position}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::median;
    use proptest::prelude::*;

    /// The resampled ratios by selection over the resampled values: the definition
    /// [`resampled_ratios`] replaced, which it must equal bit for bit.
    fn resampled_ratios_by_selection(
        pairs: &[Pair],
        resamples: u32,
        rng: &mut SeededRng,
    ) -> Vec<f64> {
        let n = pairs.len();
        let mut upstream = vec![0.0; n];
        let mut fork = vec![0.0; n];
        (0..resamples)
            .map(|_| {
                for slot in 0..n {
                    let pair = pairs[rng.below(n as u64) as usize];
                    upstream[slot] = pair.upstream_s;
                    fork[slot] = pair.fork_s;
                }
                median_in_place(&mut upstream) / median_in_place(&mut fork)
            })
            .collect()
    }

    /// The median of a non-empty slice, reordering it.
    fn median_in_place(values: &mut [f64]) -> f64 {
        let is_odd = values.len() % 2 == 1;
        let mid = values.len() / 2;
        let (below, upper, _) = values.select_nth_unstable_by(mid, f64::total_cmp);
        let upper = *upper;
        if is_odd {
            upper
        } else {
            let lower = below.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (lower + upper) / 2.0
        }
    }

    /// The `q` quantile of ascending non-empty `sorted`, interpolating linearly between order
    /// statistics: the definition [`quantile_by_selection`] is tested against.
    fn quantile_of_sorted(sorted: &[f64], q: f64) -> f64 {
        let position = q * (sorted.len() - 1) as f64;
        let below = position.floor() as usize;
        let above = position.ceil() as usize;
        let weight = position - below as f64;
        sorted[below] + (sorted[above] - sorted[below]) * weight
    }

    #[test]
    fn median_in_place_agrees_with_stats_median() {
        for values in [vec![3.0, 1.0, 2.0], vec![4.0, 1.0, 3.0, 2.0], vec![5.0]] {
            let expected = median(&values).unwrap();
            assert_eq!(median_in_place(&mut values.clone()), expected);
        }
    }

    #[test]
    fn medians_of_rank_counts_of_known_resamples() {
        let ranked = RankedTimes::new([3.0, 1.0, 2.0, 1.0].into_iter());
        assert_eq!(ranked.ascending, [1.0, 1.0, 2.0, 3.0]);
        assert_eq!(ranked.rank, [3, 0, 2, 1]);
        // The resample {1, 1, 2, 3} and {3, 3, 3, 1}, by rank.
        assert_eq!(ranked.median(&[1, 1, 1, 1]), 1.5);
        assert_eq!(ranked.median(&[1, 0, 0, 3]), 3.0);
        // Odd: {2, 2, 3, 3, 1} has median 2.
        let odd = RankedTimes::new([1.0, 2.0, 3.0, 4.0, 5.0].into_iter());
        assert_eq!(odd.median(&[1, 2, 2, 0, 0]), 2.0);
    }

    #[test]
    fn quantiles_interpolate_between_order_statistics() {
        let sorted = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile_of_sorted(&sorted, 0.0), 1.0);
        assert_eq!(quantile_of_sorted(&sorted, 0.5), 3.0);
        assert_eq!(quantile_of_sorted(&sorted, 1.0), 5.0);
        assert_eq!(quantile_of_sorted(&sorted, 0.125), 1.5);
    }

    /// Pairs of 1 to 40, times drawn from few values when `coarse` (many ties, as a
    /// low-resolution clock gives) or from a continuum.
    fn pairs_with_ties() -> impl Strategy<Value = Vec<Pair>> {
        (any::<bool>(), 1usize..40).prop_flat_map(|(coarse, n)| {
            let time = if coarse {
                (1u32..6).prop_map(|t| f64::from(t) * 0.25).boxed()
            } else {
                (0.001f64..100.0).boxed()
            };
            proptest::collection::vec((time.clone(), time), n).prop_map(|v| {
                v.into_iter()
                    .map(|(upstream_s, fork_s)| Pair { upstream_s, fork_s })
                    .collect()
            })
        })
    }

    proptest! {
        /// The selection gives the sorted definition's quantile bit for bit: the interval of
        /// a seed is what it was before the sort was dropped.
        #[test]
        fn quantile_by_selection_is_the_sorted_quantile(
            values in proptest::collection::vec(0.001f64..1000.0, 1..300),
            q in 0.0f64..=1.0,
        ) {
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            let expected = quantile_of_sorted(&sorted, q);
            let got = quantile_by_selection(&mut values.clone(), q);
            prop_assert_eq!(got.to_bits(), expected.to_bits());
        }

        /// Every resampled ratio is the selection's, bit for bit, ties and even counts
        /// included: an interval an agent of an older build computed is re-derived exactly.
        #[test]
        fn rank_counts_give_the_selections_ratios_bit_for_bit(
            pairs in pairs_with_ties(),
            seed in any::<u64>(),
        ) {
            let by_counts = resampled_ratios(&pairs, 300, &mut SeededRng::new(seed));
            let by_selection = resampled_ratios_by_selection(&pairs, 300, &mut SeededRng::new(seed));
            let bits = |ratios: &[f64]| ratios.iter().map(|r| r.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&by_counts), bits(&by_selection));
        }
    }
}
