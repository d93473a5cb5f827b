//! A new run against the earlier comparable ones (`since_previous`): what changed in between,
//! the speed flags per cell against the latest earlier run that has it, and the parity
//! ratchet against the last accepted delta.

use std::cell::OnceCell;

use super::snapshot::{CellIndex, CellKey, CellSummary, GenerationSnapshot};
use super::{
    ratchet_slack, show_delta, BaselineMove, EarlierRun, FlagKind, ParityShrink, RegressionFlag,
    SincePrevious, BISECT_TRIGGER,
};
use crate::report::comparison::short;

/// A cell's speed against an earlier one: `speedup_shrank` and `fork_slower`.
fn speed_flags(
    now: &CellSummary,
    then: &CellSummary,
    practical_threshold: f64,
) -> Vec<RegressionFlag> {
    let mut flags = Vec::new();
    let threshold = practical_threshold.max(0.0);
    if let (Some(a), Some(b)) = (then.speedup, now.speedup) {
        let shrank = match (now.speedup_ci95, then.speedup_ci95) {
            (Some([_, hi]), Some([lo, _])) => hi < lo,
            _ => b < a * (1.0 - threshold.max(0.05)),
        };
        if shrank {
            let ci = |c: Option<[f64; 2]>| {
                c.map_or(String::new(), |[l, h]| format!(" [{l:.3}, {h:.3}]"))
            };
            flags.push(flag(
                now,
                FlagKind::SpeedupShrank,
                None,
                a,
                b,
                format!(
                    "speedup {a:.3}x{} → {b:.3}x{}",
                    ci(then.speedup_ci95),
                    ci(now.speedup_ci95)
                ),
            ));
        }
    }
    if let (Some(a), Some(b), Some(then_max), Some(now_min)) = (
        then.fork_median,
        now.fork_median,
        then.fork_max,
        now.fork_min,
    ) {
        if now_min > then_max && b > a * (1.0 + threshold) {
            flags.push(flag(
                now,
                FlagKind::ForkSlower,
                None,
                a,
                b,
                format!(
                    "fork median {a:.4} s → {b:.4} s (+{:.1}%; every run slower than the slowest earlier one)",
                    (b / a - 1.0) * 100.0
                ),
            ));
        }
    }
    flags
}

fn flag(
    now: &CellSummary,
    kind: FlagKind,
    metric: Option<String>,
    then: f64,
    value: f64,
    detail: String,
) -> RegressionFlag {
    RegressionFlag {
        fixture: now.fixture.clone(),
        workload: now.workload.clone(),
        backend: now.backend.clone(),
        kind,
        metric,
        then,
        now: value,
        then_run: None,
        allowed: None,
        detail,
    }
}

/// The ratchet of one cell against an earlier one's deltas: a `parity_growth` flag per metric
/// whose |delta| grew past the earlier one plus half a printed unit, and the metrics whose
/// |delta| shrank by more than that.
pub(super) fn ratchet(
    now: &CellSummary,
    then: &CellSummary,
) -> (Vec<RegressionFlag>, Vec<ParityShrink>) {
    let slack = ratchet_slack(now.printed_decimals, then.printed_decimals);
    let mut flags = Vec::new();
    let mut shrink = Vec::new();
    for (metric, delta) in &now.score_delta {
        let Some(old) = then.score_delta.get(metric) else {
            continue;
        };
        let (a, b) = (old.abs(), delta.abs());
        if !a.is_finite() || !b.is_finite() {
            continue;
        }
        if b > a + slack {
            let mut grown = flag(
                now,
                FlagKind::ParityGrowth,
                Some(metric.clone()),
                a,
                b,
                format!(
                    "`{metric}` pooled |delta| {} → {} (allowed {}: the accepted delta plus half a printed unit)",
                    show_delta(a),
                    show_delta(b),
                    show_delta(a + slack)
                ),
            );
            grown.allowed = Some(a + slack);
            flags.push(grown);
        } else if b + slack < a {
            shrink.push(ParityShrink {
                fixture: now.fixture.clone(),
                workload: now.workload.clone(),
                metric: metric.clone(),
                then: a,
                then_run: None,
                now: b,
            });
        }
    }
    (flags, shrink)
}

/// One matched cell's change against one earlier cell: the speed flags and the ratchet
/// (what `abfleet report --against` shows for two given runs). A report's own comparison
/// takes the ratchet's earlier delta from the latest run whose cell was accepted
/// ([`since_previous`]).
pub fn compare_cell(
    now: &CellSummary,
    then: &CellSummary,
    practical_threshold: f64,
) -> (Vec<RegressionFlag>, Vec<ParityShrink>) {
    let mut flags = speed_flags(now, then, practical_threshold);
    let (grown, shrink) = ratchet(now, then);
    flags.extend(grown);
    (flags, shrink)
}

/// What changed between an earlier snapshot and this one.
fn changes(now: &GenerationSnapshot, then: &GenerationSnapshot) -> Vec<String> {
    let mut changes = Vec::new();
    if now.fork_commit != then.fork_commit {
        changes.push(format!(
            "fork `{}` ({}) → `{}` ({})",
            then.fork_requested,
            short(&then.fork_commit),
            now.fork_requested,
            short(&now.fork_commit)
        ));
    }
    if let Some(moved) = baseline_move(now, then) {
        changes.push(format!(
            "upstream `{}` ({}) → `{}` ({})",
            moved.from,
            short(&moved.from_commit),
            moved.to,
            short(&moved.to_commit)
        ));
    }
    let (a, b) = (&then.comparable_spec_sha256, &now.comparable_spec_sha256);
    if !a.is_empty() && !b.is_empty() && a != b {
        changes.push(format!(
            "spec {} → {} (fixtures, workloads, command, gate or build changed)",
            &a[..a.len().min(12)],
            &b[..b.len().min(12)]
        ));
    }
    for (side, tool) in &now.toolchain {
        match then.toolchain.get(side) {
            Some(old) if old != tool => {
                changes.push(format!("{side} toolchain `{old}` → `{tool}`"))
            }
            None => changes.push(format!("{side} toolchain new: `{tool}`")),
            _ => {}
        }
    }
    if !now.host_toolchain.is_empty() && !then.host_toolchain.is_empty() {
        let tools: std::collections::BTreeSet<&String> = now
            .host_toolchain
            .keys()
            .chain(then.host_toolchain.keys())
            .collect();
        for tool in tools {
            let (old, new) = (then.host_toolchain.get(tool), now.host_toolchain.get(tool));
            if old != new {
                let show =
                    |v: Option<&String>| v.map_or("(none)".to_string(), |v| format!("`{v}`"));
                changes.push(format!(
                    "host toolchain `{tool}`: {} → {}",
                    show(old),
                    show(new)
                ));
            }
        }
    }
    if let (Some(a), Some(b)) = (&then.silicon_id, &now.silicon_id) {
        if a != b {
            changes.push(format!(
                "silicon id `{a}` → `{b}` (same hardware: a GPU driver or runtime changed)"
            ));
        }
    }
    changes
}

fn baseline_move(now: &GenerationSnapshot, then: &GenerationSnapshot) -> Option<BaselineMove> {
    (now.upstream_commit != then.upstream_commit
        || now.upstream_requested != then.upstream_requested)
        .then(|| BaselineMove {
            from: then.upstream_requested.clone(),
            from_commit: then.upstream_commit.clone(),
            to: now.upstream_requested.clone(),
            to_commit: now.upstream_commit.clone(),
        })
}

/// The comparison of a generation's new results with the earlier comparable runs, newest
/// first (`EarlierRuns::take_comparable_on` its hardware): each cell against the latest earlier run that
/// has it, its deltas against the latest whose cell was accepted. `None` when no earlier run
/// has any of its cells. Bisect steps among `earlier` are skipped.
pub fn since_previous(
    now: &GenerationSnapshot,
    earlier: &[GenerationSnapshot],
) -> Option<SincePrevious> {
    since_previous_in(now, earlier.iter())
}

pub(super) fn since_previous_in<'a, I>(
    now: &GenerationSnapshot,
    earlier: I,
) -> Option<SincePrevious>
where
    I: Iterator<Item = &'a GenerationSnapshot>,
{
    // Each earlier snapshot's cells by key, built the first time a lookup reaches that
    // snapshot: scanning a snapshot's cells for every cell of `now` made a cell that no
    // earlier run has (a new workload) cost a scan of every cell of all 64 snapshots.
    let indexed: Vec<(&GenerationSnapshot, OnceCell<CellIndex<'a>>)> = earlier
        .filter(|s| s.trigger != BISECT_TRIGGER)
        .map(|s| (s, OnceCell::new()))
        .collect();
    let latest_where = |key: CellKey<'_>, keep: fn(&CellSummary) -> bool| {
        indexed.iter().find_map(|(s, cells)| {
            cells
                .get_or_init(|| s.cell_index())
                .get(&key)
                .copied()
                .filter(|c| keep(c))
                .map(|c| (*s, c))
        })
    };
    let mut flags = Vec::new();
    let mut parity_shrink = Vec::new();
    // Run id → (snapshot, the cells compared with it), in the order first met.
    let mut compared: Vec<(&GenerationSnapshot, Vec<String>)> = Vec::new();
    let mut matched_cells = 0;
    for cell in now.cells.iter().filter(|c| c.is_present()) {
        let key = cell.key();
        let latest = latest_where(key, CellSummary::is_present);
        let Some((then_run, then)) = latest else {
            continue;
        };
        matched_cells += 1;
        match compared
            .iter_mut()
            .find(|(s, _)| s.run_id == then_run.run_id)
        {
            Some((_, cells)) => cells.push(cell.label()),
            None => compared.push((then_run, vec![cell.label()])),
        }
        flags.extend(
            speed_flags(cell, then, now.practical_threshold)
                .into_iter()
                .map(|mut f| {
                    f.then_run = Some(then_run.run_id.clone());
                    f
                }),
        );
        if cell.score_delta.is_empty() {
            continue;
        }
        let accepted = latest_where(key, CellSummary::is_accepted);
        if let Some((accepted_run, accepted)) = accepted {
            let (grown, shrunk) = ratchet(cell, accepted);
            flags.extend(grown.into_iter().map(|mut f| {
                f.then_run = Some(accepted_run.run_id.clone());
                f
            }));
            parity_shrink.extend(shrunk.into_iter().map(|mut s| {
                s.then_run = Some(accepted_run.run_id.clone());
                s
            }));
        }
    }
    // The previous run is the newest one compared with (the first in `earlier` order).
    let newest = indexed
        .iter()
        .map(|(s, _)| *s)
        .find(|s| compared.iter().any(|(c, _)| c.run_id == s.run_id))?;
    let earlier_runs = compared
        .iter()
        .filter(|(s, _)| s.run_id != newest.run_id)
        .map(|(s, cells)| EarlierRun {
            run_id: s.run_id.clone(),
            date: s.date.clone(),
            fork_commit: s.fork_commit.clone(),
            cells: cells.clone(),
            changes: changes(now, s),
        })
        .collect();
    Some(SincePrevious {
        run_id: newest.run_id.clone(),
        date: newest.date.clone(),
        changes: changes(now, newest),
        baseline_moved: baseline_move(now, newest),
        fork_commit_then: newest.fork_commit.clone(),
        fork_commit_now: now.fork_commit.clone(),
        matched_cells,
        earlier_runs,
        flags,
        parity_shrink,
    })
}
