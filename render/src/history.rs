//! One generation's comparison with its previous comparable run, as the lines of its report
//! section, and `abfleet history` as a table: the words of `core::report::history`.

use std::fmt::Write;

use abfleet_core::cell::CellParity;
use abfleet_core::report::history::{show_delta, HistoryPoint, SincePrevious};
use abfleet_core::report::markdown_text;

/// A section's comparison as Markdown lines.
pub(crate) fn render_since_previous(out: &mut String, since: &SincePrevious) {
    let _ = writeln!(
        out,
        "Since run `{}` ({}), the previous comparable run on this generation and hardware:",
        since.run_id, since.date
    );
    if let Some(moved) = &since.baseline_moved {
        let _ = writeln!(
            out,
            "- **baseline moved**: {} — the speedups are against another upstream than that run's",
            moved.line()
        );
    }
    if since.changes.is_empty() {
        let _ = writeln!(out, "- nothing changed in the commits or toolchain");
    }
    for change in &since.changes {
        let _ = writeln!(out, "- changed: {change}");
    }
    for earlier in &since.earlier_runs {
        let _ = writeln!(
            out,
            "- compared with run `{}` ({}), the latest that has them: {}{}",
            earlier.run_id,
            earlier.date,
            earlier.cells.join(", "),
            if earlier.changes.is_empty() {
                String::new()
            } else {
                format!(" (changed since: {})", earlier.changes.join("; "))
            }
        );
    }
    if since.flags.is_empty() {
        let _ = writeln!(
            out,
            "- no regression in {} matched cell(s)",
            since.matched_cells
        );
    }
    for flag in &since.flags {
        let against = match &flag.then_run {
            Some(run) if *run != since.run_id => format!(" (against run `{run}`)"),
            _ => String::new(),
        };
        let backend = flag
            .backend
            .as_deref()
            .map_or(String::new(), |b| format!(" ({b})"));
        let _ = writeln!(
            out,
            "- **regression** ({}) `{}` / `{}`{backend}: {}{against}",
            flag.kind.as_str(),
            flag.fixture,
            flag.workload,
            flag.detail
        );
    }
    for shrink in &since.parity_shrink {
        let _ = writeln!(
            out,
            "- parity delta shrank on `{}`: `{}` {} → {} (the allowance can be ratcheted down{})",
            shrink.cell(),
            shrink.metric,
            show_delta(shrink.then),
            show_delta(shrink.now),
            match &shrink.then_run {
                Some(run) if *run != since.run_id => format!("; accepted in run `{run}`"),
                _ => String::new(),
            }
        );
    }
    out.push('\n');
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
        "| Date | Run | Spec | Trigger | Fork | Upstream | Fixture | Speedup [95% CI] | Fork median | Max |delta| | Flags |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
    for point in points {
        let cell = &point.cell;
        let speedup = match (cell.speedup, cell.speedup_ci95) {
            (Some(s), Some([lo, hi])) => format!("{s:.3}x [{lo:.3}, {hi:.3}]"),
            (Some(s), None) => format!("{s:.3}x"),
            _ => match (&cell.backend, cell.parity) {
                (Some(backend), _) => format!("{backend} (fork only)"),
                (None, CellParity::AbsentUpstream) => "absent upstream".to_string(),
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
            "| {} | `{}` | {} | {}{} | {} | `{}` | {} | {} | {} | {} | {} |",
            point.date,
            point.run_id.chars().take(8).collect::<String>(),
            point.name,
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
                markdown_text::text(&flags.join(", "))
            }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use abfleet_core::report::history::{history_points, since_previous};
    use abfleet_core::report::samples::{cell_summary as cell, snapshot, steady_cell as steady};

    fn rendered(since: &SincePrevious) -> String {
        let mut out = String::new();
        render_since_previous(&mut out, since);
        out
    }

    #[test]
    fn a_regression_names_its_kind_fixture_and_workload() {
        let then = snapshot(
            "r1",
            "s",
            "aaa",
            vec![cell("psnr", 2.0, [1.9, 2.1], [1.0, 1.01, 1.02], 0.0)],
        );
        let worse = snapshot(
            "r3",
            "s",
            "bbb",
            vec![cell("psnr", 1.5, [1.4, 1.6], [1.3, 1.31, 1.33], 3e-6)],
        );
        let out = rendered(&since_previous(&worse, &[then]).unwrap());
        assert!(
            out.contains("**regression** (fork_slower) `tiny` / `psnr`"),
            "{out}"
        );
    }

    #[test]
    fn a_ratchet_growth_and_a_shrink_name_the_run_whose_delta_was_accepted() {
        let accepted = snapshot("r1", "s", "a", vec![steady("psnr", 0.0, CellParity::Ok)]);
        let failed = snapshot("r2", "s", "b", vec![steady("psnr", 3e-6, CellParity::Fail)]);
        let now = snapshot("r3", "s", "c", vec![steady("psnr", 3e-6, CellParity::Ok)]);
        let out = rendered(&since_previous(&now, &[failed.clone(), accepted]).unwrap());
        assert!(out.contains("(against run `r1`)"), "{out}");

        let accepted = snapshot("r1", "s", "a", vec![steady("psnr", 4e-6, CellParity::Ok)]);
        let now = snapshot("r3", "s", "c", vec![steady("psnr", 1e-6, CellParity::Ok)]);
        let out = rendered(&since_previous(&now, &[failed, accepted]).unwrap());
        assert!(
            out.contains("parity delta shrank on `tiny/psnr`: `psnr_y` 4.00e-6 → 1.00e-6")
                && out.contains("accepted in run `r1`"),
            "{out}"
        );
    }

    #[test]
    fn a_moved_baseline_is_its_own_line_before_the_changes() {
        let then = snapshot("r1", "s1", "a", vec![steady("psnr", 0.0, CellParity::Ok)]);
        let mut now = then.clone();
        now.run_id = "r2".into();
        now.upstream_requested = "v3.3.0".into();
        now.upstream_commit = Some("u2".into());
        let out = rendered(&since_previous(&now, &[then]).unwrap());
        assert!(
            out.contains("- **baseline moved**: upstream `v3.2.0` → `v3.3.0`"),
            "{out}"
        );
        assert!(out.contains("- changed: upstream `v3.2.0`"), "{out}");
    }

    #[test]
    fn the_history_table_has_a_row_per_point_with_its_flags() {
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
                (
                    "m".into(),
                    snapshot(
                        "r3",
                        "a",
                        "c2",
                        vec![cell("psnr", 1.5, [1.4, 1.6], [1.3, 1.3, 1.3], 0.0)],
                    ),
                ),
            ],
            "psnr",
            None,
        );
        let table = render_history(&points, "cpu/x86-64-v4/zen4", "psnr");
        assert_eq!(
            table.lines().filter(|l| l.starts_with("| 2026")).count(),
            2,
            "{table}"
        );
        assert!(table.contains("speedup_shrank, fork_slower"), "{table}");
        let empty = render_history(&[], "cpu/x86-64-v4/zen4", "psnr");
        assert!(
            empty.contains("No finished run has this workload"),
            "{empty}"
        );
    }
}
