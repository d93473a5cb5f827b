//! A run's results on one generation as later runs see them (`GenerationSnapshot`: the
//! commits, toolchains, hardware and a summary of each cell), the comparison of a new run
//! with the earlier comparable ones (`SincePrevious`: what changed in between, the
//! regression flags and the parity ratchet), and the points of `abfleet history`. The
//! snapshot is what the store keeps per (run, generation), so neither a report's comparison
//! nor the history re-assembles an earlier run.
//!
//! Comparable runs are finished (`done`) runs of the same spec name, generation key and
//! hardware id (the silicon id without the GPU driver and runtime: a driver bump is a
//! toolchain change, not another history), never bisect steps. Each cell (fixture, workload;
//! a GPU backend cell also by its backend) is compared with the latest earlier comparable run
//! that has it, so a cancelled or partial run does not hide the cells of the full run before
//! it. The flags, per cell:
//! - `speedup_shrank`: the new speedup interval lies wholly below the earlier one (without
//!   intervals: the speedup fell by more than the practical threshold);
//! - `fork_slower`: the fork's own timed runs now all take longer than the earlier ones did
//!   (the ranges are apart) and its median grew by more than the practical threshold;
//! - `parity_growth`: the ratchet (ADR-1228: "ratchet on growth"): a metric's pooled |delta|
//!   grew past the one *accepted* on the latest earlier comparable run whose cell passed
//!   parity, by more than half a unit of the printed precision, even while under the gate.
//!   [`apply_ratchet`] makes it a parity failure of the cell with both values. A delta that
//!   shrank is recorded so the allowance can be ratcheted down.

use std::cell::OnceCell;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::comparison::short;
pub use super::comparison::{
    BaselineMove, EarlierRun, FlagKind, ParityShrink, RegressionFlag, SincePrevious,
};
use super::{GenerationSection, Report};
use crate::backend_cell::{BackendCell, BackendCellStatus};
use crate::cell::{CellParity, CellResult};
use crate::paired::Verdict;

/// The trigger reason of a bisect step's run (`abfleet bisect`): such runs are never a
/// comparable run nor a point of a history.
pub const BISECT_TRIGGER: &str = "bisect";

/// The decimals assumed where a cell does not say what its outputs printed: vmaf's default
/// `%.6f`.
pub const DEFAULT_PRINTED_DECIMALS: u32 = 6;

/// Half a unit of the coarser of two printed precisions (either unknown: six decimals): a
/// change of a pooled delta below it is rounding, not a change.
pub fn ratchet_slack(a: Option<u32>, b: Option<u32>) -> f64 {
    let decimals = match (a, b) {
        (Some(a), Some(b)) => a.min(b),
        (Some(d), None) | (None, Some(d)) => d,
        (None, None) => DEFAULT_PRINTED_DECIMALS,
    };
    0.5 * 10f64.powi(-(decimals.min(17) as i32))
}

/// A pooled delta for people: `0`, else three significant digits (`3.00e-6`).
pub fn show_delta(value: f64) -> String {
    if value == 0.0 {
        "0".to_string()
    } else {
        format!("{value:.2e}")
    }
}

/// What a later run needs of one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    pub fixture: String,
    pub workload: String,
    /// A GPU generation's backend cell (the fork alone with `--backend NAME`): the backend.
    /// `None` for an A/B cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
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
    /// The decimals the outputs printed (the coarser side); `None` in snapshots from before
    /// it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub printed_decimals: Option<u32>,
}

fn min_max(times: &[f64]) -> (Option<f64>, Option<f64>) {
    let finite = times.iter().copied().filter(|t| t.is_finite());
    (finite.clone().reduce(f64::min), finite.reduce(f64::max))
}

impl CellSummary {
    pub fn of(cell: &CellResult) -> CellSummary {
        let (fork_min, fork_max) = min_max(&cell.fork.times);
        CellSummary {
            fixture: cell.fixture.clone(),
            workload: cell.workload.clone(),
            backend: None,
            speedup: cell.speedup,
            speedup_ci95: cell.speedup_ci95,
            verdict: cell.verdict,
            parity: cell.parity,
            fork_median: cell.fork.median_time,
            fork_min,
            fork_max,
            upstream_median: cell.upstream.median_time,
            score_delta: cell.score_delta.clone(),
            printed_decimals: cell.printed_decimals,
        }
    }

    /// A GPU backend cell: the fork alone, so no speedup and no parity; a failed one is
    /// `unavailable`, any other (measured, or skipped where the device is only recorded)
    /// `absent_upstream`.
    pub fn of_backend(cell: &BackendCell) -> CellSummary {
        let (fork_min, fork_max) = min_max(&cell.times);
        CellSummary {
            fixture: cell.fixture.clone(),
            workload: cell.workload.clone(),
            backend: Some(cell.backend.clone()),
            speedup: None,
            speedup_ci95: None,
            verdict: None,
            parity: match cell.status {
                BackendCellStatus::Failed => CellParity::Unavailable,
                _ => CellParity::AbsentUpstream,
            },
            fork_median: cell.median_seconds,
            fork_min,
            fork_max,
            upstream_median: None,
            score_delta: BTreeMap::new(),
            printed_decimals: None,
        }
    }

    fn key(&self) -> CellKey<'_> {
        (&self.fixture, &self.workload, self.backend.as_deref())
    }

    /// `fixture/workload`, with ` (backend)` for a backend cell.
    pub fn label(&self) -> String {
        match &self.backend {
            Some(backend) => format!("{}/{} ({backend})", self.fixture, self.workload),
            None => format!("{}/{}", self.fixture, self.workload),
        }
    }

    /// Whether the run has this cell: it was measured (not `unavailable`: a run stopped
    /// before it, or a side could not be built or run).
    pub fn is_present(&self) -> bool {
        self.parity != CellParity::Unavailable
    }

    /// Whether its deltas were accepted: both sides ran and parity passed.
    pub fn is_accepted(&self) -> bool {
        self.parity == CellParity::Ok
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
    /// SHA-256 of the spec with the sources' revs, `[targets]` and the description left out:
    /// what was measured and how (empty in older snapshots).
    #[serde(default)]
    pub comparable_spec_sha256: String,
    /// The silicon identity the agent reported for this key (hosts pool only when equal).
    pub silicon_id: Option<String>,
    /// The hardware identity (the silicon id without the GPU driver and runtime): runs are
    /// compared on it. `None` in older snapshots (the silicon id stands in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_id: Option<String>,
    pub fork_requested: String,
    pub fork_commit: Option<String>,
    pub upstream_requested: String,
    pub upstream_commit: Option<String>,
    /// Side → the build's toolchain fingerprint.
    pub toolchain: BTreeMap<String, String>,
    /// The generation's toolchain as the agent probed it: compilers and, for a GPU, the
    /// driver or runtime (`nvidia-driver`, `rocm-runtime`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub host_toolchain: BTreeMap<String, String>,
    pub practical_threshold: f64,
    pub cells: Vec<CellSummary>,
}

impl GenerationSnapshot {
    pub fn of(report: &Report, section: &GenerationSection) -> GenerationSnapshot {
        let generation = section_generation(section);
        let mut cells: Vec<CellSummary> = report.cells_of(section).map(CellSummary::of).collect();
        cells.extend(section.backend_cells.iter().map(CellSummary::of_backend));
        GenerationSnapshot {
            run_id: report.run_id.clone(),
            date: report.date.clone(),
            trigger: report.trigger.clone(),
            trigger_note: report.trigger_note.clone(),
            generation: section.key.clone(),
            spec_sha256: report.spec_sha256.clone(),
            comparable_spec_sha256: report.comparable_spec_sha256.clone(),
            silicon_id: generation.map(|g| g.silicon_id.clone()),
            hardware_id: generation.map(|g| g.hardware_or_silicon().to_string()),
            fork_requested: report.fork.requested.clone(),
            fork_commit: report.fork.resolved.clone(),
            upstream_requested: report.upstream.requested.clone(),
            upstream_commit: report.upstream.resolved.clone(),
            toolchain: section.toolchain.clone(),
            host_toolchain: generation.map(|g| g.toolchain.clone()).unwrap_or_default(),
            practical_threshold: report.practical_threshold,
            cells,
        }
    }

    /// The identity runs are compared on: the hardware id, else the silicon id.
    pub fn hardware(&self) -> Option<&str> {
        self.hardware_id.as_deref().or(self.silicon_id.as_deref())
    }

    /// The cells by key (the first of a key, as a scan would find it).
    fn cell_index(&self) -> CellIndex<'_> {
        let mut index = CellIndex::with_capacity(self.cells.len());
        for cell in &self.cells {
            index.entry(cell.key()).or_insert(cell);
        }
        index
    }
}

/// A cell's identity in a generation: fixture, workload, and the backend of a backend cell.
type CellKey<'a> = (&'a str, &'a str, Option<&'a str>);

type CellIndex<'a> = std::collections::HashMap<CellKey<'a>, &'a CellSummary>;

/// The section's generation in its host's inventory.
fn section_generation(section: &GenerationSection) -> Option<&crate::generation::Generation> {
    section
        .host
        .as_ref()
        .and_then(|host| host.generations.iter().find(|g| g.key == section.key))
}

/// The hardware id of the section's key in its host's inventory (the silicon id from agents
/// that do not report one).
pub fn section_hardware(section: &GenerationSection) -> Option<String> {
    section_generation(section).map(|g| g.hardware_or_silicon().to_string())
}

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
fn ratchet(now: &CellSummary, then: &CellSummary) -> (Vec<RegressionFlag>, Vec<ParityShrink>) {
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

fn since_previous_in<'a, I>(now: &GenerationSnapshot, earlier: I) -> Option<SincePrevious>
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
                    .unwrap_or(super::model::ANY_GENERATION)
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
            section.score_parity = super::ScoreParity::Fail;
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
        report.score_parity = super::ScoreParity::Fail;
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

/// What `abfleet history` asks for: one workload on one generation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryQuery {
    /// The generation key, exactly (`cpu/x86-64-v4/zen4`).
    pub generation: String,
    pub workload: String,
    /// Only this fixture; `None`: every fixture.
    pub fixture: Option<String>,
    /// Only runs of this spec name; `None`: every name.
    pub name: Option<String>,
    /// The newest this many runs (0: the coordinator's default).
    pub limit: u32,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_id: Option<String>,
    pub fork_commit: Option<String>,
    pub upstream_requested: String,
    pub toolchain: BTreeMap<String, String>,
    pub cell: CellSummary,
    /// Flags against the points before it in this history (same spec name and hardware).
    pub flags: Vec<RegressionFlag>,
    /// What changed since the point before it.
    pub changes: Vec<String>,
}

/// The history of one workload on a generation, from snapshots oldest first: one point per
/// snapshot that has the cell (every fixture unless one is named; bisect steps never), each
/// compared, like a report, with the points before it of the same spec name, hardware and
/// cell.
pub fn history_points(
    snapshots: &[(String, GenerationSnapshot)],
    workload: &str,
    fixture: Option<&str>,
) -> Vec<HistoryPoint> {
    type SeriesKey = (String, Option<String>, String, Option<String>);
    let mut points: Vec<HistoryPoint> = Vec::new();
    let mut series: BTreeMap<SeriesKey, Vec<GenerationSnapshot>> = BTreeMap::new();
    for (name, snapshot) in snapshots {
        if snapshot.trigger == BISECT_TRIGGER {
            continue;
        }
        for cell in &snapshot.cells {
            if cell.workload != workload
                || fixture.is_some_and(|f| f != cell.fixture)
                || !cell.is_present()
            {
                continue;
            }
            let key = (
                name.clone(),
                snapshot.hardware().map(str::to_string),
                cell.fixture.clone(),
                cell.backend.clone(),
            );
            let mut one = snapshot.clone();
            one.cells = vec![cell.clone()];
            let before = series.entry(key).or_default();
            let since = since_previous_in(&one, before.iter().rev());
            let (flags, changes) = since.map_or((Vec::new(), Vec::new()), |s| (s.flags, s.changes));
            points.push(HistoryPoint {
                run_id: snapshot.run_id.clone(),
                name: name.clone(),
                date: snapshot.date.clone(),
                trigger: snapshot.trigger.clone(),
                trigger_note: snapshot.trigger_note.clone(),
                generation: snapshot.generation.clone(),
                silicon_id: snapshot.silicon_id.clone(),
                hardware_id: snapshot.hardware().map(str::to_string),
                fork_commit: snapshot.fork_commit.clone(),
                upstream_requested: snapshot.upstream_requested.clone(),
                toolchain: snapshot.toolchain.clone(),
                cell: cell.clone(),
                flags,
                changes,
            });
            before.push(one);
        }
    }
    points
}

#[cfg(test)]
mod tests;
