//! Adaptive runs: after each pair, decide whether the cell needs another one.

use serde::{Deserialize, Serialize};

use super::{Analysis, Verdict};

/// The limits of an adaptive cell.
///
/// `min_pairs >= max_pairs` describes a fixed count: exactly `max_pairs` pairs (or fewer if
/// `max_seconds` runs out first), whatever the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdaptiveBounds {
    /// Pairs to run before any verdict may stop the cell.
    pub min_pairs: u32,
    /// Pairs after which the cell stops, decided or not.
    pub max_pairs: u32,
    /// Elapsed wall seconds of the cell after which it stops, decided or not.
    pub max_seconds: f64,
}

/// Why a cell stopped running pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// At least `min_pairs` ran and the verdict is no longer `unsure`.
    Decided,
    /// `max_pairs` pairs ran and the verdict is still `unsure`.
    MaxPairs,
    /// The cell used up `max_seconds`.
    MaxSeconds,
    /// The bounds fix the count (`min_pairs >= max_pairs`) and it was reached.
    NotAdaptive,
    /// One side was not timed (absent or unavailable): there was nothing to pair, so the
    /// other side, if it runs, took `min_pairs` runs alone.
    OneSided,
}

impl AdaptiveBounds {
    /// Whether the bounds leave room to stop early on a verdict.
    pub fn is_adaptive(&self) -> bool {
        self.min_pairs < self.max_pairs
    }
}

/// After each pair: `Some(reason)` to stop, `None` to run another pair.
///
/// `analysis` is the analysis of the `pairs` pairs run so far (`None` while there are too
/// few to analyse), `elapsed_s` the cell's wall seconds so far. In order of precedence:
/// 1. adaptive bounds, `pairs >= min_pairs` and a verdict other than `unsure`: `Decided`;
/// 2. `pairs >= max_pairs`: `MaxPairs`, or `NotAdaptive` for a fixed count;
/// 3. `elapsed_s >= max_seconds`: `MaxSeconds` (this one applies before `min_pairs` too).
pub fn next_step(
    analysis: Option<&Analysis>,
    pairs: u32,
    elapsed_s: f64,
    bounds: &AdaptiveBounds,
) -> Option<StopReason> {
    let decided = analysis.is_some_and(|a| a.verdict != Verdict::Unsure);
    if bounds.is_adaptive() && pairs >= bounds.min_pairs && decided {
        Some(StopReason::Decided)
    } else if pairs >= bounds.max_pairs {
        Some(if bounds.is_adaptive() {
            StopReason::MaxPairs
        } else {
            StopReason::NotAdaptive
        })
    } else if elapsed_s >= bounds.max_seconds {
        Some(StopReason::MaxSeconds)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analysis(verdict: Verdict) -> Analysis {
        Analysis {
            pairs: 5,
            speedup: 1.0,
            speedup_ci95: [0.99, 1.01],
            p_value: 0.5,
            verdict,
        }
    }

    fn bounds() -> AdaptiveBounds {
        AdaptiveBounds {
            min_pairs: 5,
            max_pairs: 30,
            max_seconds: 120.0,
        }
    }

    #[test]
    fn keeps_running_while_unsure_and_within_bounds() {
        let unsure = analysis(Verdict::Unsure);
        assert_eq!(next_step(Some(&unsure), 10, 10.0, &bounds()), None);
        assert_eq!(next_step(None, 1, 0.5, &bounds()), None);
    }

    #[test]
    fn a_decided_verdict_stops_only_after_min_pairs() {
        for verdict in [Verdict::Faster, Verdict::Slower, Verdict::Same] {
            let decided = analysis(verdict);
            assert_eq!(next_step(Some(&decided), 4, 1.0, &bounds()), None);
            assert_eq!(
                next_step(Some(&decided), 5, 1.0, &bounds()),
                Some(StopReason::Decided)
            );
        }
    }

    #[test]
    fn stops_at_max_pairs_when_still_unsure() {
        let unsure = analysis(Verdict::Unsure);
        assert_eq!(next_step(Some(&unsure), 29, 1.0, &bounds()), None);
        assert_eq!(
            next_step(Some(&unsure), 30, 1.0, &bounds()),
            Some(StopReason::MaxPairs)
        );
    }

    #[test]
    fn stops_at_max_seconds_even_before_min_pairs() {
        let unsure = analysis(Verdict::Unsure);
        assert_eq!(
            next_step(Some(&unsure), 10, 120.0, &bounds()),
            Some(StopReason::MaxSeconds)
        );
        assert_eq!(
            next_step(None, 1, 500.0, &bounds()),
            Some(StopReason::MaxSeconds)
        );
    }

    #[test]
    fn fixed_counts_ignore_the_verdict_and_stop_as_not_adaptive() {
        let fixed = AdaptiveBounds {
            min_pairs: 10,
            max_pairs: 10,
            max_seconds: f64::INFINITY,
        };
        let decided = analysis(Verdict::Faster);
        assert_eq!(next_step(Some(&decided), 9, 1.0, &fixed), None);
        assert_eq!(
            next_step(Some(&decided), 10, 1.0, &fixed),
            Some(StopReason::NotAdaptive)
        );
    }

    #[test]
    fn stop_reasons_serialise_in_snake_case() {
        let json = serde_json::to_string(&[
            StopReason::Decided,
            StopReason::MaxPairs,
            StopReason::MaxSeconds,
            StopReason::NotAdaptive,
        ])
        .unwrap();
        assert_eq!(
            json,
            r#"["decided","max_pairs","max_seconds","not_adaptive"]"#
        );
    }
}
