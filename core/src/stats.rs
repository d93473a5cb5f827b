//! Order statistics of timed runs: median, best, spread, as the fork's harness defines them.

/// The median of a sample; the mean of the middle two for an even count. `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// The fastest run.
pub fn best(values: &[f64]) -> Option<f64> {
    values.iter().copied().min_by(|a, b| a.total_cmp(b))
}

/// `(max - min) / median * 100`, the fork's spread.
pub fn spread_pct(values: &[f64]) -> Option<f64> {
    let median = median(values)?;
    let max = values.iter().copied().max_by(|a, b| a.total_cmp(b))?;
    let min = best(values)?;
    if median <= 0.0 {
        return None;
    }
    Some((max - min) / median * 100.0)
}

/// Geometric mean of positive values; `None` when empty or any value is not positive.
pub fn geomean(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| !(*v > 0.0 && v.is_finite())) {
        return None;
    }
    Some((values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn median_of_odd_and_even_samples() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn spread_is_range_over_median() {
        assert_eq!(
            spread_pct(&[1.0, 1.1, 0.9]),
            Some((1.1 - 0.9) / 1.0 * 100.0)
        );
    }

    #[test]
    fn geomean_of_known_values() {
        let g = geomean(&[2.0, 8.0]).unwrap();
        assert!((g - 4.0).abs() < 1e-12);
        assert_eq!(geomean(&[1.0, 0.0]), None);
    }

    proptest! {
        #[test]
        fn median_lies_between_min_and_max(values in proptest::collection::vec(0.001f64..1000.0, 1..40)) {
            let m = median(&values).unwrap();
            let lo = best(&values).unwrap();
            let hi = values.iter().copied().fold(f64::MIN, f64::max);
            prop_assert!(lo <= m && m <= hi);
            prop_assert!(spread_pct(&values).unwrap() >= 0.0);
        }
    }
}
