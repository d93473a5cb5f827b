//! The per-feature table `local` and `submit --wait` print: plain text, aligned columns (a
//! `TextTable`); the lines around it are made visible (`terminal_text`) before they are
//! returned, since names, notes, errors and build logs came from the spec, agents and builds.

use std::fmt::Write as _;

use abfleet_core::cell::{CellParity, CellResult, SideResult, SideStatus};
use abfleet_core::events::BuildStatus;
use abfleet_core::report::{Report, ScoreParity};

use crate::terminal_text;
use crate::text_table::TextTable;

/// How many lines of a failed build's log the console shows (report.md has the full tail).
const BUILD_TAIL_LINES: usize = 15;

pub fn render(report: &Report) -> String {
    if report.is_sweep {
        return render_sweep(report);
    }
    let mut out = String::new();
    let host = report
        .host
        .as_ref()
        .map_or("unknown host", |h| h.hostname.as_str());
    let _ = writeln!(
        out,
        "run {} ({}): fork {} vs upstream {} on {host}, {} thread(s), {} warm-up + {}–{} timed pairs per cell (seed {})",
        report.run_id,
        report.name,
        report.fork_ref,
        report.upstream_ref,
        report.threads,
        report.warmup,
        report.runs,
        report.max_runs,
        report.seed
    );
    let header = [
        "fixture",
        "feature",
        "upstream",
        "fork",
        "speedup",
        "95% interval",
        "verdict",
        "parity",
        "pooled score delta",
    ];
    let mut table = TextTable::new(header);
    for cell in &report.cells {
        table.row(row(cell));
    }
    out.push_str(&table.render());
    if report.cells.iter().any(|c| c.startup_dominated) {
        let _ = writeln!(
            out,
            "† start-up-dominated: fork median under {:.1} s",
            report.min_useful_seconds
        );
    }
    if let Some(note) = &report.startup_note {
        let _ = writeln!(out, "warning: {note}");
    }
    for line in &report.score_parity_report {
        let _ = writeln!(out, "parity: {line}");
    }
    for error in &report.errors {
        let _ = writeln!(out, "problem: {error}");
    }
    for (name, side) in [("upstream", &report.upstream), ("fork", &report.fork)] {
        let Some(build) = side
            .build
            .as_ref()
            .filter(|b| b.status == BuildStatus::Failed)
        else {
            continue;
        };
        let Some(tail) = build.log_tail.as_deref().filter(|t| !t.trim().is_empty()) else {
            continue;
        };
        let lines: Vec<&str> = tail.lines().collect();
        let shown = &lines[lines.len().saturating_sub(BUILD_TAIL_LINES)..];
        let _ = writeln!(out, "the {name} build log ends with:");
        for line in shown {
            let _ = writeln!(out, "    | {line}");
        }
    }
    let parity = match report.score_parity {
        ScoreParity::Ok => "OK",
        ScoreParity::Fail => "FAIL",
        ScoreParity::NotRun => "NOT RUN",
    };
    let _ = writeln!(out, "score parity: {parity}; status {}", report.status);
    terminal_text::visible(&out).into_owned()
}

fn row(cell: &CellResult) -> [String; 9] {
    let dagger = if cell.startup_dominated { " †" } else { "" };
    // The gated quantity, as report.md's "Score delta" column shows it.
    let delta = match (cell.parity, cell.largest_score_delta()) {
        (CellParity::Ok | CellParity::Fail, Some((_, 0.0))) => "0".to_string(),
        (CellParity::Ok | CellParity::Fail, Some((metric, delta))) if !delta.is_finite() => {
            format!("null vs number {metric}")
        }
        (CellParity::Ok | CellParity::Fail, Some((metric, delta))) => {
            format!("{delta:+.1e} {metric}")
        }
        _ => "—".to_string(),
    };
    [
        cell.fixture.clone(),
        format!("{}{dagger}", cell.workload),
        side(&cell.upstream),
        side(&cell.fork),
        match (cell.speedup, &cell.not_timed) {
            (Some(s), _) => format!("{s:.2}x"),
            // `emulated: not timed`, as every rendering of the report says it.
            (None, Some(why)) if cell.parity != CellParity::Unavailable => why.clone(),
            (None, _) => "—".into(),
        },
        cell.speedup_ci95
            .map_or("—".into(), |[lo, hi]| format!("{lo:.2}–{hi:.2}")),
        cell.verdict.map_or("—".into(), |v| {
            format!("{v:?} ({} pairs)", cell.pairs).to_lowercase()
        }),
        match cell.parity {
            CellParity::Ok => "ok",
            CellParity::Fail => "FAIL",
            CellParity::AbsentUpstream => "absent upstream",
            CellParity::AbsentFork => "absent in fork",
            CellParity::Unavailable => "unavailable",
        }
        .to_string(),
        delta,
    ]
}

fn side(side: &SideResult) -> String {
    match side.status {
        SideStatus::Ok => match (side.median_time, side.spread_pct) {
            (Some(t), Some(s)) => format!("{t:.3}s spread {s:.0}%"),
            _ => "—".into(),
        },
        SideStatus::Absent => "absent".into(),
        SideStatus::Unavailable => "unavailable".into(),
    }
}

/// A retuning sweep on a terminal: per generation the default's verdict, then one line per
/// configuration (report.md has the whole story).
fn render_sweep(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "run {} ({}): retuning sweep of fork {}, {} warm-up + {}–{} timed pairs per configuration (seed {})",
        report.run_id, report.name, report.fork_ref, report.warmup, report.runs, report.max_runs, report.seed
    );
    for section in &report.generations {
        let Some(sweep) = &section.sweep else {
            let _ = writeln!(out, "{}: no sweep result", section.key);
            continue;
        };
        let _ = writeln!(out, "{}: {}", section.key, sweep.verdict_line);
        for c in &sweep.configurations {
            let speedup = match (c.speedup, c.speedup_ci95) {
                (Some(s), Some([lo, hi])) => format!("{s:.2}x {lo:.2}–{hi:.2}"),
                _ => "—".into(),
            };
            let verdict = match (&c.error, c.verdict, c.parity) {
                (Some(error), _, _) => format!("not timed: {error}"),
                (None, _, CellParity::Fail) => "REJECTED: scores moved".into(),
                (None, Some(v), _) => format!("{v:?} ({} pairs)", c.pairs).to_lowercase(),
                (None, None, _) if c.is_default => "shipped default".into(),
                (None, None, _) => "—".into(),
            };
            let _ = writeln!(out, "  {:<40}  {speedup:<18}  {verdict}", c.label);
        }
        if sweep.not_tried_count > 0 {
            let _ = writeln!(
                out,
                "  not tried: {} configuration(s)",
                sweep.not_tried_count
            );
        }
    }
    for error in &report.errors {
        let _ = writeln!(out, "problem: {error}");
    }
    let _ = writeln!(out, "status {}", report.status);
    terminal_text::visible(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An emulated cell says so where its speedup would be, as the report does; its parity
    /// and delta columns stand.
    #[test]
    fn an_emulated_cell_reads_not_timed_in_the_speedup_column() {
        let report = crate::test_reports::demo_drift();
        let timed = report
            .cells
            .iter()
            .find(|c| c.parity == CellParity::Ok && c.speedup.is_some())
            .expect("a timed cell with parity ok")
            .clone();
        let mut emulated = timed.clone();
        emulated.withhold_timing(abfleet_core::generation::EMULATED_NOT_TIMED);
        let (before, after) = (row(&timed), row(&emulated));
        assert!(before[4].ends_with('x'), "{before:?}");
        assert_eq!(after[4], "emulated: not timed");
        assert_eq!((after[5].as_str(), after[6].as_str()), ("—", "—"));
        assert_eq!(after[7], before[7], "parity stands");
    }
}
