//! `report.md`, in the style of the fork's `docs/benchmarks.md`: a dated heading naming the
//! fork commit, the upstream ref, the host and the threads; one table per fixture with one
//! row per feature; † on start-up-dominated rows; an explicit "absent upstream" marker.

use std::fmt::Write as _;

use crate::cell::{CellParity, CellResult, SideResult, SideStatus};
use crate::events::BuildStatus;

use super::model::{Report, ScoreParity, SideInfo};

pub fn render_markdown(report: &Report) -> String {
    let mut out = String::new();
    let date = report.date.get(..10).unwrap_or(&report.date);
    let host = report
        .host
        .as_ref()
        .map_or("unknown host".to_string(), |h| h.hostname.clone());
    let threads = if report.threads == 1 {
        "single-threaded".to_string()
    } else {
        format!("{} threads", report.threads)
    };
    let _ = writeln!(
        out,
        "### {date} — fork `{}` vs upstream `{}`, `{host}`, {threads}\n",
        report.fork_ref, report.upstream_ref
    );
    let _ = writeln!(
        out,
        "Run `{}` (`{}`), trigger `{}`, status **{}**. Per side and cell: {} discarded warm-up, then {} timed runs interleaved with the other side; median wall time with min/max spread. Parity gate: largest per-frame delta ≤ {:.0e}.\n",
        report.run_id, report.name, report.trigger, report.status, report.warmup, report.runs, report.max_score_delta
    );
    if let Some(host) = &report.host {
        let _ = writeln!(
            out,
            "| Host | CPU | Cores | Memory | OS |\n|---|---|---|---|---|"
        );
        let _ = writeln!(
            out,
            "| `{}` | {} | {} cores / {} threads | {:.1} GiB | {} {} ({}) |\n",
            host.hostname,
            host.cpu_model,
            host.physical_cores,
            host.logical_cores,
            host.memory_bytes as f64 / (1u64 << 30) as f64,
            host.os,
            host.kernel,
            host.arch
        );
    }
    let _ = writeln!(out, "{}", side_line("Upstream", &report.upstream));
    let _ = writeln!(out, "{}\n", side_line("Fork", &report.fork));

    let mut fixtures: Vec<&str> = Vec::new();
    for cell in &report.cells {
        if !fixtures.contains(&cell.fixture.as_str()) {
            fixtures.push(&cell.fixture);
        }
    }
    for fixture in fixtures {
        let _ = writeln!(out, "#### Fixture `{fixture}`\n");
        let _ = writeln!(
            out,
            "| Feature | Upstream | Fork | Speedup | Score delta |\n|---|---|---|---|---|"
        );
        for cell in report.cells.iter().filter(|c| c.fixture == fixture) {
            let dagger = if cell.startup_dominated { " †" } else { "" };
            let _ = writeln!(
                out,
                "| {}{dagger} | {} | {} | {} | {} |",
                cell.workload,
                side_cell(&cell.upstream),
                side_cell(&cell.fork),
                speedup_cell(cell),
                delta_cell(cell)
            );
        }
        out.push('\n');
    }
    if report.cells.iter().any(|c| c.startup_dominated) {
        let _ = writeln!(
            out,
            "† start-up-dominated: the fork's median is under {:.1} s, so process start-up weighs on the speedup.\n",
            report.min_useful_seconds
        );
    }
    if let Some(note) = &report.startup_note {
        let _ = writeln!(out, "> **Start-up bound.** {note}.\n");
    }
    match report.geomean_speedup {
        Some(g) => {
            let _ = writeln!(
                out,
                "Geomean speedup {g:.2}x over exactly these {} cells (parity ok, both sides measured): {}. The per-feature rows above are the result; this number is only their summary.\n",
                report.geomean_cells.len(),
                report.geomean_cells.join(", ")
            );
        }
        None => {
            let _ = writeln!(
                out,
                "No geomean: no cell had both sides measured with parity ok.\n"
            );
        }
    }
    let parity = match report.score_parity {
        ScoreParity::Ok => "OK",
        ScoreParity::Fail => "FAIL",
        ScoreParity::NotRun => "NOT RUN",
    };
    let _ = writeln!(out, "**Score parity: {parity}**\n");
    for line in &report.score_parity_report {
        let _ = writeln!(out, "- {line}");
    }
    if !report.score_parity_report.is_empty() {
        out.push('\n');
    }
    let one_sided: Vec<String> = report
        .cells
        .iter()
        .filter(|c| {
            c.parity != CellParity::AbsentUpstream
                && (!c.only_upstream_metrics.is_empty() || !c.only_fork_metrics.is_empty())
        })
        .map(|c| {
            format!(
                "- {}/{}: only upstream: {}; only fork: {}",
                c.fixture,
                c.workload,
                list_or_none(&c.only_upstream_metrics),
                list_or_none(&c.only_fork_metrics)
            )
        })
        .collect();
    if !one_sided.is_empty() {
        let _ = writeln!(out, "Metrics only one side emits (not compared):\n");
        for line in one_sided {
            let _ = writeln!(out, "{line}");
        }
        out.push('\n');
    }
    let renamed: Vec<String> = report
        .cells
        .iter()
        .flat_map(|c| c.renamed_metrics.iter())
        .map(|(up, fork)| format!("`{up}` → `{fork}`"))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !renamed.is_empty() {
        let _ = writeln!(
            out,
            "Compared under declared renames: {}.\n",
            renamed.join(", ")
        );
    }
    if !report.missing_cells.is_empty() {
        let _ = writeln!(
            out,
            "Cells without a result: {}.\n",
            report.missing_cells.join(", ")
        );
    }
    if !report.errors.is_empty() {
        let _ = writeln!(out, "**Not carried out:**\n");
        for error in &report.errors {
            let _ = writeln!(out, "- {error}");
        }
        out.push('\n');
    }
    for (name, side) in [("upstream", &report.upstream), ("fork", &report.fork)] {
        if let Some(build) = &side.build {
            if let Some(tail) = &build.log_tail {
                let _ = writeln!(
                    out,
                    "The {name} build log ends with (`{}`):\n\n```\n{}\n```\n",
                    build.log_path,
                    tail.trim_end()
                );
            }
        }
    }
    out
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn side_line(label: &str, side: &SideInfo) -> String {
    let resolved = side.resolved.as_deref().unwrap_or("not resolved");
    let build = match &side.build {
        Some(b) => match b.status {
            BuildStatus::Built => format!("built in {:.1} s", b.seconds),
            BuildStatus::Cached => "build cached".to_string(),
            BuildStatus::Failed => "**build failed**".to_string(),
        },
        None => "not built".to_string(),
    };
    let toolchain = side
        .build
        .as_ref()
        .map(|b| format!(", toolchain `{}`", b.toolchain))
        .unwrap_or_default();
    format!(
        "- {label}: `{}` → `{resolved}`, {build}{toolchain}",
        side.requested
    )
}

fn side_cell(side: &SideResult) -> String {
    match side.status {
        SideStatus::Absent => "absent upstream".to_string(),
        SideStatus::Unavailable => "unavailable".to_string(),
        SideStatus::Ok => match (side.median_time, side.spread_pct) {
            (Some(t), Some(s)) => format!("{t:.3} s (spread {s:.1}%)"),
            (Some(t), None) => format!("{t:.3} s"),
            _ => "—".to_string(),
        },
    }
}

fn speedup_cell(cell: &CellResult) -> String {
    match cell.speedup {
        Some(s) if cell.parity == CellParity::Fail => format!("~~{s:.2}x~~ (parity failed)"),
        Some(s) => format!("**{s:.2}x**"),
        None if cell.parity == CellParity::AbsentUpstream => "absent upstream".to_string(),
        None => "—".to_string(),
    }
}

fn delta_cell(cell: &CellResult) -> String {
    match cell.parity {
        CellParity::AbsentUpstream => "absent upstream".to_string(),
        CellParity::Unavailable => "—".to_string(),
        CellParity::Ok | CellParity::Fail => {
            let worst = cell
                .max_frame_delta
                .iter()
                .max_by(|a, b| a.1.total_cmp(b.1));
            let text = match worst {
                Some((_, delta)) if *delta == 0.0 => "0".to_string(),
                Some((metric, delta)) => format!("{delta:.1e} (`{metric}`)"),
                None => "no shared metric".to_string(),
            };
            if cell.parity == CellParity::Fail {
                format!("**FAIL** {text}")
            } else {
                text
            }
        }
    }
}
