//! The ratchet applied: a `parity_growth` flag becomes a parity failure of its cell, its
//! generation and the run, and the failed cell leaves the geomean.

use super::{show_delta, FlagKind, RegressionFlag};
use crate::cell::CellParity;
use crate::report::Report;

/// Makes each `parity_growth` flag of the report's comparisons a parity failure of its cell
/// (unless the spec gives the metric its own allowance), with both values (the seed's ratchet: ADR-1228 rejects failing on any non-zero delta in
/// favour of "ratchet on growth"), and the cell, its generation and the run fail parity
/// (exit 1, like any parity failure, when `build` decides the exit codes after it). A cell failed this way leaves the geomean, and a later
/// run's ratchet walks back past it to the last accepted delta.
pub fn apply_ratchet(report: &mut Report) {
    let multi = report.generations.len() > 1;
    let mut failed_any = false;
    for index in 0..report.generations.len() {
        let section = &report.generations[index];
        let Some(since) = &section.since_previous else {
            continue;
        };
        // A metric with its own allowance (`[parity.allow.METRIC]`, with a reason) is gated
        // by it alone: that is how a deliberate change of the fork's numerics is accepted
        // (its flag stays, as a regression against the earlier run).
        let growth: Vec<RegressionFlag> = since
            .flags
            .iter()
            .filter(|f| f.kind == FlagKind::ParityGrowth && f.backend.is_none())
            .filter(|f| {
                f.metric
                    .as_deref()
                    .is_none_or(|m| !report.allowances.contains_key(m))
            })
            .cloned()
            .collect();
        let key = section.key.clone();
        let mut failed_here = false;
        for grown in growth {
            let metric = grown.metric.clone().unwrap_or_default();
            let Some(cell) = report.cells.iter_mut().find(|c| {
                c.generation
                    .as_deref()
                    .unwrap_or(crate::report::ANY_GENERATION)
                    == key
                    && c.fixture == grown.fixture
                    && c.workload == grown.workload
                    && matches!(c.parity, CellParity::Ok | CellParity::Fail)
            }) else {
                continue;
            };
            let allowed = grown.allowed.unwrap_or(grown.then);
            let message = format!(
                "pooled |delta| of `{metric}` grew from {} (accepted in run {}) to {}, past the ratchet's {} (the accepted delta plus half a printed unit), though the gate may allow it: fix it, or, when the change is deliberate, give it its own `[parity.allow.{metric}]` with the reason (docs/job-spec.md)",
                show_delta(grown.then),
                grown.then_run.as_deref().unwrap_or("-"),
                show_delta(grown.now),
                show_delta(allowed)
            );
            let failure = crate::parity::ParityFailure {
                metric: metric.clone(),
                rule: crate::parity::ParityRule::Ratchet,
                frame: None,
                upstream_value: None,
                fork_value: None,
                delta: grown.now,
                allowed,
                message: message.clone(),
            };
            if cell.parity_failures.contains(&failure) {
                continue;
            }
            cell.parity_failures.push(failure);
            cell.parity = CellParity::Fail;
            let line = format!("{}/{}: {message}", cell.fixture, cell.workload);
            report.score_parity_report.push(if multi {
                format!("{key}: {line}")
            } else {
                line
            });
            failed_here = true;
        }
        if failed_here {
            failed_any = true;
            let cells: Vec<(String, Option<f64>, CellParity)> = report
                .cells_of(&report.generations[index])
                .map(|c| (format!("{}/{}", c.fixture, c.workload), c.speedup, c.parity))
                .collect();
            let section = &mut report.generations[index];
            section.score_parity = crate::report::ScoreParity::Fail;
            drop_failed_from_geomean(
                &mut section.geomean_speedup,
                &mut section.geomean_cells,
                &cells,
            );
            if !multi {
                drop_failed_from_geomean(
                    &mut report.geomean_speedup,
                    &mut report.geomean_cells,
                    &cells,
                );
            }
        }
    }
    if failed_any {
        report.score_parity = crate::report::ScoreParity::Fail;
    }
}

/// The geomean without the cells that now fail parity.
fn drop_failed_from_geomean(
    geomean: &mut Option<f64>,
    names: &mut Vec<String>,
    cells: &[(String, Option<f64>, CellParity)],
) {
    names.retain(|name| {
        cells
            .iter()
            .find(|(n, _, _)| n == name)
            .is_none_or(|(_, _, parity)| *parity != CellParity::Fail)
    });
    let speedups: Vec<f64> = names
        .iter()
        .filter_map(|name| cells.iter().find(|(n, _, _)| n == name)?.1)
        .collect();
    *geomean = crate::stats::geomean(&speedups);
}
