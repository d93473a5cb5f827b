//! A run's results on one generation as later runs see them (`GenerationSnapshot`: the
//! commits, toolchain, silicon and a summary of each cell), the comparison of a new run with
//! the previous comparable one (`SincePrevious`: what changed in between and the regression
//! flags), and the points of `abfleet history`. The snapshot is what the store keeps per
//! (run, generation), so neither a report's comparison nor the history re-assembles an
//! earlier run.
//!
//! The flags, per cell matched on fixture and workload:
//! - `speedup_shrank`: the new speedup interval lies wholly below the earlier one (without
//!   intervals: the speedup fell by more than the practical threshold);
//! - `fork_slower`: the fork's own timed runs now all take longer than the earlier ones did
//!   (the ranges are apart) and its median grew by more than the practical threshold;
//! - `parity_growth`: a metric's pooled |delta| grew by more than half a printed unit (the
//!   ratchet: flagged even while still under the gate).

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::{GenerationSection, Report};
use crate::cell::{CellParity, CellResult};
use crate::paired::Verdict;

/// Half a unit of six printed decimals: growth below it is rounding, not a change.
pub const RATCHET_SLACK: f64 = 0.5e-6;

/// What a later run needs of one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    pub fixture: String,
    pub workload: String,
    pub speedup: Option<f64>,
    pub speedup_ci95: Option<[f64; 2]>,
    pub verdict: Option<Verdict>,
    pub parity: CellParity,
    /// The fork's own timed runs: median, fastest and slowest (seconds).
    pub fork_median: Option<f64>,
    pub fork_min: Option<f64>,
    pub fork_max: Option<f64>,
    pub upstream_median: Option<f64>,
    /// Metric → pooled delta (fork − upstream).
    pub score_delta: BTreeMap<String, f64>,
}

impl CellSummary {
    pub fn of(cell: &CellResult) -> CellSummary {
        let min_max = |times: &[f64]| {
            let finite = times.iter().copied().filter(|t| t.is_finite());
            (finite.clone().reduce(f64::min), finite.reduce(f64::max))
        };
        let (fork_min, fork_max) = min_max(&cell.fork.times);
        CellSummary {
            fixture: cell.fixture.clone(),
            workload: cell.workload.clone(),
            speedup: cell.speedup,
            speedup_ci95: cell.speedup_ci95,
            verdict: cell.verdict,
            parity: cell.parity,
            fork_median: cell.fork.median_time,
            fork_min,
            fork_max,
            upstream_median: cell.upstream.median_time,
            score_delta: cell.score_delta.clone(),
        }
    }

    fn key(&self) -> (&str, &str) {
        (&self.fixture, &self.workload)
    }
}

/// One generation of a finished run, as later runs compare against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationSnapshot {
    pub run_id: String,
    pub date: String,
    pub trigger: String,
    pub trigger_note: Option<String>,
    pub generation: String,
    /// SHA-256 of the run's spec (empty in snapshots of reports from before it was kept).
    #[serde(default)]
    pub spec_sha256: String,
    /// The silicon identity the agent reported for this key (hosts pool only when equal).
    pub silicon_id: Option<String>,
    pub fork_requested: String,
    pub fork_commit: Option<String>,
    pub upstream_requested: String,
    pub upstream_commit: Option<String>,
    pub toolchain: BTreeMap<String, String>,
    pub practical_threshold: f64,
    pub cells: Vec<CellSummary>,
}

impl GenerationSnapshot {
    pub fn of(report: &Report, section: &GenerationSection) -> GenerationSnapshot {
        GenerationSnapshot {
            run_id: report.run_id.clone(),
            date: report.date.clone(),
            trigger: report.trigger.clone(),
            trigger_note: report.trigger_note.clone(),
            generation: section.key.clone(),
            spec_sha256: report.spec_sha256.clone(),
            silicon_id: section_silicon(section),
            fork_requested: report.fork.requested.clone(),
            fork_commit: report.fork.resolved.clone(),
            upstream_requested: report.upstream.requested.clone(),
            upstream_commit: report.upstream.resolved.clone(),
            toolchain: section.toolchain.clone(),
            practical_threshold: report.practical_threshold,
            cells: report.cells_of(section).map(CellSummary::of).collect(),
        }
    }
}

/// The silicon id of the section's key in its host's inventory.
pub fn section_silicon(section: &GenerationSection) -> Option<String> {
    section.host.as_ref().and_then(|host| {
        host.generations
            .iter()
            .find(|g| g.key == section.key)
            .map(|g| g.silicon_id.clone())
    })
}

/// What a regression flag says went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlagKind {
    SpeedupShrank,
    ForkSlower,
    ParityGrowth,
}

impl FlagKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FlagKind::SpeedupShrank => "speedup_shrank",
            FlagKind::ForkSlower => "fork_slower",
            FlagKind::ParityGrowth => "parity_growth",
        }
    }
}

/// One regression of a cell against the previous comparable run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegressionFlag {
    pub fixture: String,
    pub workload: String,
    pub kind: FlagKind,
    /// The metric, for `parity_growth`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// The value then and now: speedup, the fork's median seconds, or |delta|.
    pub then: f64,
    pub now: f64,
    /// For people: `speedup 1.84x [1.80, 1.88] → 1.41x [1.38, 1.44]`.
    pub detail: String,
}

/// A generation's comparison with the previous comparable run (same spec name, generation
/// key and silicon identity).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SincePrevious {
    pub run_id: String,
    pub date: String,
    /// What changed in between: fork commit, upstream pin, toolchain; empty when nothing did.
    pub changes: Vec<String>,
    /// The fork commits of the previous run and of this one (what `abfleet bisect RUN`
    /// bisects between).
    #[serde(default)]
    pub fork_commit_then: Option<String>,
    #[serde(default)]
    pub fork_commit_now: Option<String>,
    /// Cells matched on fixture and workload.
    pub matched_cells: u32,
    pub flags: Vec<RegressionFlag>,
    /// Metrics whose delta shrank: the allowance can be ratcheted down. (cell, metric, then, now).
    #[serde(default)]
    pub parity_shrink: Vec<(String, String, f64, f64)>,
}

/// One matched cell's change: the shared rule of the report's own comparison and of
/// `abfleet report --against`.
pub fn compare_cell(
    now: &CellSummary,
    then: &CellSummary,
    practical_threshold: f64,
) -> (Vec<RegressionFlag>, Vec<(String, f64, f64)>) {
    let mut flags = Vec::new();
    let flag = |kind, metric: Option<String>, a: f64, b: f64, detail: String| RegressionFlag {
        fixture: now.fixture.clone(),
        workload: now.workload.clone(),
        kind,
        metric,
        then: a,
        now: b,
        detail,
    };
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
    let mut shrink = Vec::new();
    for (metric, delta) in &now.score_delta {
        let Some(old) = then.score_delta.get(metric) else {
            continue;
        };
        let (a, b) = (old.abs(), delta.abs());
        if !a.is_finite() || !b.is_finite() {
            continue;
        }
        if b > a + RATCHET_SLACK {
            flags.push(flag(
                FlagKind::ParityGrowth,
                Some(metric.clone()),
                a,
                b,
                format!("`{metric}` pooled |delta| {a:e} → {b:e}"),
            ));
        } else if b + RATCHET_SLACK < a {
            shrink.push((metric.clone(), a, b));
        }
    }
    (flags, shrink)
}

/// The comparison of a generation's new results with its previous comparable run.
pub fn since_previous(now: &GenerationSnapshot, then: &GenerationSnapshot) -> SincePrevious {
    let mut changes = Vec::new();
    let short = |c: &Option<String>| {
        c.as_deref()
            .map_or_else(|| "-".to_string(), |c| c.chars().take(12).collect())
    };
    if now.fork_commit != then.fork_commit {
        changes.push(format!(
            "fork `{}` ({}) → `{}` ({})",
            then.fork_requested,
            short(&then.fork_commit),
            now.fork_requested,
            short(&now.fork_commit)
        ));
    }
    if now.upstream_commit != then.upstream_commit
        || now.upstream_requested != then.upstream_requested
    {
        changes.push(format!(
            "upstream `{}` ({}) → `{}` ({})",
            then.upstream_requested,
            short(&then.upstream_commit),
            now.upstream_requested,
            short(&now.upstream_commit)
        ));
    }
    if !now.spec_sha256.is_empty()
        && !then.spec_sha256.is_empty()
        && now.spec_sha256 != then.spec_sha256
    {
        changes.push(format!(
            "spec {} → {} (fixtures, workloads, gate or build changed)",
            &then.spec_sha256[..then.spec_sha256.len().min(12)],
            &now.spec_sha256[..now.spec_sha256.len().min(12)]
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
    let earlier: BTreeMap<(&str, &str), &CellSummary> =
        then.cells.iter().map(|c| (c.key(), c)).collect();
    let mut flags = Vec::new();
    let mut parity_shrink = Vec::new();
    let mut matched_cells = 0;
    for cell in &now.cells {
        let Some(old) = earlier.get(&cell.key()) else {
            continue;
        };
        matched_cells += 1;
        let (cell_flags, shrink) = compare_cell(cell, old, now.practical_threshold);
        flags.extend(cell_flags);
        parity_shrink.extend(
            shrink.into_iter().map(|(metric, a, b)| {
                (format!("{}/{}", cell.fixture, cell.workload), metric, a, b)
            }),
        );
    }
    SincePrevious {
        run_id: then.run_id.clone(),
        date: then.date.clone(),
        changes,
        fork_commit_then: then.fork_commit.clone(),
        fork_commit_now: now.fork_commit.clone(),
        matched_cells,
        flags,
        parity_shrink,
    }
}

/// A section's comparison as Markdown lines (empty when it has none).
pub fn render_since_previous(out: &mut String, since: &SincePrevious) {
    let _ = writeln!(
        out,
        "Since run `{}` ({}), the previous comparable run on this generation:",
        since.run_id, since.date
    );
    if since.changes.is_empty() {
        let _ = writeln!(out, "- nothing changed in the commits or toolchain");
    }
    for change in &since.changes {
        let _ = writeln!(out, "- changed: {change}");
    }
    if since.flags.is_empty() {
        let _ = writeln!(
            out,
            "- no regression in {} matched cell(s)",
            since.matched_cells
        );
    }
    for flag in &since.flags {
        let _ = writeln!(
            out,
            "- **regression** ({}) `{}` / `{}`: {}",
            flag.kind.as_str(),
            flag.fixture,
            flag.workload,
            flag.detail
        );
    }
    for (cell, metric, a, b) in &since.parity_shrink {
        let _ = writeln!(
            out,
            "- parity delta shrank on `{cell}`: `{metric}` {a:e} → {b:e} (the allowance can be ratcheted down)"
        );
    }
    out.push('\n');
}

/// One run in `abfleet history`: a generation's cell (fixture, workload) in that run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryPoint {
    pub run_id: String,
    pub name: String,
    pub date: String,
    pub trigger: String,
    pub trigger_note: Option<String>,
    pub generation: String,
    pub silicon_id: Option<String>,
    pub fork_commit: Option<String>,
    pub upstream_requested: String,
    pub toolchain: BTreeMap<String, String>,
    pub cell: CellSummary,
    /// Flags against the point before it in this history (same silicon).
    pub flags: Vec<RegressionFlag>,
    /// What changed since the point before it.
    pub changes: Vec<String>,
}

/// The history of one workload on a generation, from snapshots oldest first: one point per
/// snapshot that has the cell (every fixture unless one is named), each compared with the
/// point before it on the same silicon.
pub fn history_points(
    snapshots: &[(String, GenerationSnapshot)],
    workload: &str,
    fixture: Option<&str>,
) -> Vec<HistoryPoint> {
    let mut points: Vec<HistoryPoint> = Vec::new();
    let mut last: BTreeMap<(Option<String>, String), (GenerationSnapshot, CellSummary)> =
        BTreeMap::new();
    for (name, snapshot) in snapshots {
        for cell in &snapshot.cells {
            if cell.workload != workload || fixture.is_some_and(|f| f != cell.fixture) {
                continue;
            }
            let key = (snapshot.silicon_id.clone(), cell.fixture.clone());
            let (flags, changes) = match last.get(&key) {
                Some((then, old)) => {
                    let mut one = snapshot.clone();
                    one.cells = vec![cell.clone()];
                    let mut before = then.clone();
                    before.cells = vec![old.clone()];
                    let since = since_previous(&one, &before);
                    (since.flags, since.changes)
                }
                None => (Vec::new(), Vec::new()),
            };
            points.push(HistoryPoint {
                run_id: snapshot.run_id.clone(),
                name: name.clone(),
                date: snapshot.date.clone(),
                trigger: snapshot.trigger.clone(),
                trigger_note: snapshot.trigger_note.clone(),
                generation: snapshot.generation.clone(),
                silicon_id: snapshot.silicon_id.clone(),
                fork_commit: snapshot.fork_commit.clone(),
                upstream_requested: snapshot.upstream_requested.clone(),
                toolchain: snapshot.toolchain.clone(),
                cell: cell.clone(),
                flags,
                changes,
            });
            last.insert(key, (snapshot.clone(), cell.clone()));
        }
    }
    points
}

/// `abfleet history` as a table.
pub fn render_history(points: &[HistoryPoint], generation: &str, workload: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# History of `{workload}` on `{generation}`\n");
    if points.is_empty() {
        let _ = writeln!(
            out,
            "No finished run has this workload on this generation yet."
        );
        return out;
    }
    let _ = writeln!(
        out,
        "| Date | Run | Trigger | Fork | Upstream | Fixture | Speedup [95% CI] | Fork median | Max |delta| | Flags |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
    for point in points {
        let cell = &point.cell;
        let speedup = match (cell.speedup, cell.speedup_ci95) {
            (Some(s), Some([lo, hi])) => format!("{s:.3}x [{lo:.3}, {hi:.3}]"),
            (Some(s), None) => format!("{s:.3}x"),
            _ => match cell.parity {
                CellParity::AbsentUpstream => "absent upstream".to_string(),
                _ => "-".to_string(),
            },
        };
        let max_delta = cell
            .score_delta
            .values()
            .map(|d| d.abs())
            .filter(|d| d.is_finite())
            .reduce(f64::max)
            .map_or("-".to_string(), |d| format!("{d:e}"));
        let mut flags: Vec<String> = point
            .flags
            .iter()
            .map(|f| f.kind.as_str().to_string())
            .collect();
        if !point.changes.is_empty() {
            flags.push(format!("changed: {}", point.changes.join("; ")));
        }
        let _ = writeln!(
            out,
            "| {} | `{}` | {}{} | {} | `{}` | {} | {} | {} | {} | {} |",
            point.date,
            point.run_id.chars().take(8).collect::<String>(),
            point.trigger,
            point
                .trigger_note
                .as_deref()
                .map_or(String::new(), |n| format!(": {n}")),
            point
                .fork_commit
                .as_deref()
                .map_or("-".to_string(), |c| format!("`{}`", &c[..c.len().min(10)])),
            point.upstream_requested,
            cell.fixture,
            speedup,
            cell.fork_median
                .map_or("-".to_string(), |m| format!("{m:.4} s")),
            max_delta,
            if flags.is_empty() {
                "-".to_string()
            } else {
                flags.join(", ")
            }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(workload: &str, speedup: f64, ci: [f64; 2], fork: [f64; 3], delta: f64) -> CellSummary {
        CellSummary {
            fixture: "tiny".into(),
            workload: workload.into(),
            speedup: Some(speedup),
            speedup_ci95: Some(ci),
            verdict: Some(Verdict::Faster),
            parity: CellParity::Ok,
            fork_median: Some(fork[1]),
            fork_min: Some(fork[0]),
            fork_max: Some(fork[2]),
            upstream_median: Some(fork[1] * speedup),
            score_delta: [("psnr_y".to_string(), delta)].into(),
        }
    }

    fn snapshot(
        run: &str,
        silicon: &str,
        fork: &str,
        cells: Vec<CellSummary>,
    ) -> GenerationSnapshot {
        GenerationSnapshot {
            run_id: run.into(),
            date: "2026-12-04".into(),
            trigger: "manual".into(),
            trigger_note: None,
            generation: "cpu/x86-64-v4/zen4".into(),
            spec_sha256: String::new(),
            silicon_id: Some(silicon.into()),
            fork_requested: "main".into(),
            fork_commit: Some(fork.into()),
            upstream_requested: "v3.2.0".into(),
            upstream_commit: Some("u".into()),
            toolchain: [("fork".to_string(), "gcc 12".to_string())].into(),
            practical_threshold: 0.02,
            cells,
        }
    }

    #[test]
    fn a_slower_fork_a_shrunk_speedup_and_a_grown_delta_are_flagged_noise_is_not() {
        let then = snapshot(
            "r1",
            "s",
            "aaa",
            vec![cell("psnr", 2.0, [1.9, 2.1], [1.0, 1.01, 1.02], 0.0)],
        );
        // Overlapping fork ranges and intervals: nothing.
        let same = snapshot(
            "r2",
            "s",
            "aaa",
            vec![cell("psnr", 1.98, [1.88, 2.05], [1.0, 1.015, 1.03], 2e-7)],
        );
        let since = since_previous(&same, &then);
        assert!(since.flags.is_empty(), "{:?}", since.flags);
        assert!(since.changes.is_empty());
        assert_eq!(since.matched_cells, 1);
        // Every fork run slower, the interval below, the delta up by 3e-6.
        let worse = snapshot(
            "r3",
            "s",
            "bbb",
            vec![cell("psnr", 1.5, [1.4, 1.6], [1.3, 1.31, 1.33], 3e-6)],
        );
        let since = since_previous(&worse, &then);
        let kinds: Vec<FlagKind> = since.flags.iter().map(|f| f.kind).collect();
        assert_eq!(
            kinds,
            [
                FlagKind::SpeedupShrank,
                FlagKind::ForkSlower,
                FlagKind::ParityGrowth
            ]
        );
        assert!(
            since.changes[0].starts_with("fork `main` (aaa)"),
            "{:?}",
            since.changes
        );
        let mut out = String::new();
        render_since_previous(&mut out, &since);
        assert!(
            out.contains("**regression** (fork_slower) `tiny` / `psnr`"),
            "{out}"
        );
    }

    #[test]
    fn history_compares_each_point_with_the_one_before_on_the_same_silicon() {
        let points = history_points(
            &[
                (
                    "m".into(),
                    snapshot(
                        "r1",
                        "a",
                        "c1",
                        vec![cell("psnr", 2.0, [1.9, 2.1], [1.0, 1.0, 1.0], 0.0)],
                    ),
                ),
                // Other silicon, much slower: not compared with r1.
                (
                    "m".into(),
                    snapshot(
                        "r2",
                        "b",
                        "c1",
                        vec![cell("psnr", 1.0, [0.9, 1.1], [3.0, 3.0, 3.0], 0.0)],
                    ),
                ),
                (
                    "m".into(),
                    snapshot(
                        "r3",
                        "a",
                        "c2",
                        vec![
                            cell("psnr", 1.5, [1.4, 1.6], [1.3, 1.3, 1.3], 0.0),
                            cell("motion", 1.0, [1.0, 1.0], [1.0, 1.0, 1.0], 0.0),
                        ],
                    ),
                ),
            ],
            "psnr",
            None,
        );
        assert_eq!(points.len(), 3);
        assert!(
            points[1].flags.is_empty(),
            "r2 has no earlier point on silicon b"
        );
        assert_eq!(
            points[2].flags.len(),
            2,
            "r3 against r1: {:?}",
            points[2].flags
        );
        let table = render_history(&points, "cpu/x86-64-v4/zen4", "psnr");
        assert_eq!(
            table.lines().filter(|l| l.starts_with("| 2026")).count(),
            3,
            "{table}"
        );
        assert!(table.contains("speedup_shrank, fork_slower"), "{table}");
    }
}
