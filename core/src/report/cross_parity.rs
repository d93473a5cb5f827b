//! "Still exact on every hardware" as one table: for each cell (fixture × workload) and
//! metric, the fork's pooled score on every generation that scored it — x86 real, aarch64
//! emulated, each GPU or Vulkan backend that reported scores — the largest spread between
//! them, and which generation disagrees when the spread is over the spec's gate. Decided
//! from the report's cells and backend cells alone.

use std::collections::BTreeMap;

pub use super::model::CrossParityRow;
use super::model::{Report, ANY_GENERATION};
use crate::cell::SideStatus;

/// The table, when at least two sources scored some cell (nothing to compare otherwise):
/// one row per cell and metric that two or more sources scored, in the spec's cell order,
/// then metric order.
pub fn cross_parity(report: &Report) -> Vec<CrossParityRow> {
    let gate = |metric: &str| {
        report
            .allowances
            .get(metric)
            .and_then(|a| a.max_delta)
            .unwrap_or(report.max_score_delta)
    };
    type CellKey = (String, String);
    let mut order: Vec<CellKey> = Vec::new();
    let mut scored: BTreeMap<CellKey, BTreeMap<String, BTreeMap<String, f64>>> = BTreeMap::new();
    let mut add =
        |fixture: &str, workload: &str, source: String, pooled: &BTreeMap<String, f64>| {
            let key = (fixture.to_string(), workload.to_string());
            if !order.contains(&key) {
                order.push(key.clone());
            }
            let metrics = scored.entry(key).or_default();
            for (metric, value) in pooled {
                if value.is_finite() {
                    metrics
                        .entry(metric.clone())
                        .or_default()
                        .insert(source.clone(), *value);
                }
            }
        };
    for cell in &report.cells {
        if cell.fork.status != SideStatus::Ok || !cell.rejected.is_empty() {
            continue;
        }
        let source = cell
            .generation
            .clone()
            .unwrap_or_else(|| ANY_GENERATION.to_string());
        add(&cell.fixture, &cell.workload, source, &cell.fork.pooled);
    }
    for section in &report.generations {
        for cell in &section.backend_cells {
            if cell.pooled.is_empty() {
                continue;
            }
            let source = format!("{} --backend {}", section.key, cell.backend);
            add(&cell.fixture, &cell.workload, source, &cell.pooled);
            // The CPU path of the same binary the backend was gated against.
            if let Some(parity) = &cell.cpu_parity {
                let source = format!("{} --backend cpu", section.key);
                add(&cell.fixture, &cell.workload, source, &parity.cpu_pooled);
            }
        }
    }
    let mut rows = Vec::new();
    for key in order {
        let Some(metrics) = scored.remove(&key) else {
            continue;
        };
        for (metric, values) in metrics {
            if values.len() < 2 {
                continue;
            }
            let gate = gate(&metric);
            rows.push(row(&key.0, &key.1, metric, values, gate));
        }
    }
    rows
}

fn row(
    fixture: &str,
    workload: &str,
    metric: String,
    values: BTreeMap<String, f64>,
    gate: f64,
) -> CrossParityRow {
    let mut sorted: Vec<f64> = values.values().copied().collect();
    sorted.sort_by(f64::total_cmp);
    let spread = sorted[sorted.len() - 1] - sorted[0];
    let median = if sorted.len() % 2 == 1 {
        sorted[sorted.len() / 2]
    } else {
        (sorted[sorted.len() / 2 - 1] + sorted[sorted.len() / 2]) / 2.0
    };
    let disagrees = if spread > gate {
        let farthest = values
            .values()
            .map(|v| (v - median).abs())
            .fold(0.0f64, f64::max);
        values
            .iter()
            .filter(|(_, v)| ((*v - median).abs() - farthest).abs() <= f64::EPSILON * farthest)
            .map(|(source, _)| source.clone())
            .collect()
    } else {
        Vec::new()
    };
    CrossParityRow {
        fixture: fixture.to_string(),
        workload: workload.to_string(),
        metric,
        values,
        spread,
        gate,
        disagrees,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn the_outlier_of_three_is_named_and_both_of_two() {
        let three = row(
            "f",
            "psnr",
            "psnr_y".into(),
            values(&[("x86", 30.0), ("arm", 30.000001), ("vk", 30.5)]),
            1e-5,
        );
        assert_eq!(three.disagrees, ["vk"]);
        assert!((three.spread - 0.5).abs() < 1e-12);
        let two = row(
            "f",
            "psnr",
            "psnr_y".into(),
            values(&[("x86", 30.0), ("arm", 30.1)]),
            1e-5,
        );
        assert_eq!(two.disagrees, ["arm", "x86"]);
        let close = row(
            "f",
            "psnr",
            "psnr_y".into(),
            values(&[("x86", 30.0), ("arm", 30.000002)]),
            1e-5,
        );
        assert!(close.agrees());
    }
}
