//! `report.md`, in the style of the fork's `docs/benchmarks.md`: a dated heading naming the
//! fork commit, the upstream ref, the host and the threads; one table per fixture with one
//! row per feature; † on start-up-dominated rows; an explicit "absent upstream" marker.
//! Every supplied string goes through `markdown_text`.

use std::fmt::Write as _;

use abfleet_core::cell::{CellParity, CellResult};

use crate::words::{
    build_words, cell_notes, delta_words, fixtures_in_order, measured_by_words, side_cell,
    speedup_words, Markdown, SpeedupWords,
};
use abfleet_core::report::markdown_text::{code, code_block, text};
use abfleet_core::report::{Report, ScoreParity, SideInfo};

pub fn render_markdown(report: &Report) -> String {
    if report.is_sweep {
        return crate::sweep_markdown::render_sweep(report);
    }
    let mut out = String::new();
    render_heading(&mut out, report);
    render_allowances(&mut out, report);
    render_host_and_sides(&mut out, report);
    render_results(&mut out, report);
    render_notes(&mut out, report);
    render_geomean(&mut out, report);
    render_parity(&mut out, report);
    crate::cross_parity::render_cross_parity(&mut out, report);
    render_problems_and_history(&mut out, report);
    render_reproduce(&mut out, &report.cells);
    render_build_logs(&mut out, report);
    out
}

/// The dated heading and the paragraph saying how the run measured and gated.
fn render_heading(out: &mut String, report: &Report) {
    let date = report.day();
    let host = report
        .host
        .as_ref()
        .map_or("unknown host".to_string(), |h| code(&h.hostname));
    let threads = report.threads_text();
    let _ = writeln!(
        out,
        "### {date} — fork {} vs upstream {}, {host}, {threads}\n",
        code(&report.fork_ref),
        code(&report.upstream_ref)
    );
    let _ = writeln!(
        out,
        "Run `{}` ({}), trigger {}{}, status **{}**. Per side and cell: {} discarded warm-up run(s), then {} timed pairs (one run of each side; up to {} while a verdict is unsure) in a seeded balanced random order; median wall time with min/max spread; speedup with its 95% bootstrap interval and verdict (±{:.0}% counts as the same). Parity gate: every shared metric's pooled-mean delta ≤ {:e}{}, compared at the output's printed precision; a metric upstream writes must be in the fork's output too.\n",
        report.run_id,
        code(&report.name),
        code(&report.trigger),
        report
            .trigger_note
            .as_deref()
            .map(|note| format!(" ({})", text(note)))
            .unwrap_or_default(),
        report.status,
        report.warmup,
        report.runs,
        report.max_runs,
        report.practical_threshold * 100.0,
        report.max_score_delta,
        match report.max_frame_delta {
            Some(gate) => format!(" and every frame's delta ≤ {gate:e}"),
            None => " (per-frame deltas are reported below the tables, not gated)".to_string(),
        }
    );
}

/// The spec's parity allowances and allowed-missing metrics in force.
fn render_allowances(out: &mut String, report: &Report) {
    for (metric, allowance) in &report.allowances {
        let gates: Vec<String> = [
            allowance
                .max_delta
                .map(|g| format!("its pooled mean by up to {g:e}")),
            allowance
                .max_frame_delta
                .map(|g| format!("a frame by up to {g:e}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        let _ = writeln!(
            out,
            "- Allowance in force: {} may differ, {} — {}\n",
            code(metric),
            gates.join(", "),
            text(&allowance.reason)
        );
    }
    for missing in &report.allow_missing {
        let _ = writeln!(
            out,
            "- Allowed missing in the fork: {} — {}\n",
            code(&missing.metric),
            text(&missing.reason)
        );
    }
}

/// The host table and each side's source, commit and build.
fn render_host_and_sides(out: &mut String, report: &Report) {
    if let Some(host) = &report.host {
        let _ = writeln!(
            out,
            "| Host | CPU | Cores | Memory | OS |\n|---|---|---|---|---|"
        );
        let _ = writeln!(
            out,
            "| {} | {} | {} cores / {} threads | {:.1} GiB | {} {} ({}) |\n",
            code(&host.hostname),
            text(&host.cpu_model),
            host.physical_cores,
            host.logical_cores,
            host.memory_bytes as f64 / (1u64 << 30) as f64,
            text(&host.os),
            text(&host.kernel),
            text(&host.arch)
        );
    }
    let _ = writeln!(out, "{}", side_line("Upstream", &report.upstream));
    let _ = writeln!(out, "{}\n", side_line("Fork", &report.fork));
}

/// What changed since the previous run, then the cell tables (one section per generation
/// when there are several) and the retuning checks.
fn render_results(out: &mut String, report: &Report) {
    if let [only] = report.generations.as_slice() {
        for change in only.toolchain_changes() {
            let _ = writeln!(
                out,
                "**Toolchain changed** since the previous run: {change}\n"
            );
        }
        if let Some(since) = &only.since_previous {
            crate::history::render_since_previous(out, since);
        }
    }
    if report.generations.len() > 1 {
        render_generations(out, report);
    } else {
        let cells: Vec<&CellResult> = report.cells.iter().collect();
        render_cell_tables(out, &cells, "####");
        if let [only] = report.generations.as_slice() {
            crate::retune_markdown::render_retune(out, only, "####");
        }
    }
}

/// The † footnote, the noise flags and the start-up note.
fn render_notes(out: &mut String, report: &Report) {
    if report.cells.iter().any(|c| c.startup_dominated) {
        let _ = writeln!(
            out,
            "† start-up-dominated: the fork's median is under {:.1} s, so process start-up weighs on the speedup.\n",
            report.min_useful_seconds
        );
    }
    let flagged: Vec<String> = report
        .cells
        .iter()
        .flat_map(|c| {
            c.noise_flags.iter().map(move |f| {
                format!(
                    "- {}/{}: {} = {} ({})",
                    text(&c.fixture),
                    text(&c.workload),
                    code(&f.name),
                    f.value,
                    text(&f.detail)
                )
            })
        })
        .collect();
    if !flagged.is_empty() {
        let _ = writeln!(
            out,
            "Noise flags (the numbers stand; these explain them):\n"
        );
        for line in flagged {
            let _ = writeln!(out, "{line}");
        }
        out.push('\n');
    }
    if let Some(note) = &report.startup_note {
        let _ = writeln!(out, "> **Start-up bound.** {note}.\n");
    }
}

/// The geomean over exactly the cells it covers, or why there is none.
fn render_geomean(out: &mut String, report: &Report) {
    match report.geomean_speedup {
        Some(g) => {
            let _ = writeln!(
                out,
                "Geomean speedup {g:.2}x over exactly these {} cells (parity ok, both sides measured): {}. The per-feature rows above are the result; this number is only their summary.\n",
                report.geomean_cells.len(),
                text(&report.geomean_cells.join(", "))
            );
        }
        None => {
            let _ = writeln!(
                out,
                "{}",
                if report.generations.len() > 1 {
                    "No run-wide geomean: it would mix hardware generations; each generation has its own.\n"
                } else {
                    "No geomean: no cell had both sides measured with parity ok.\n"
                }
            );
        }
    }
}

/// A parity verdict as the report writes it (never the enum's name: `NotRun`).
fn parity_word(parity: ScoreParity) -> &'static str {
    match parity {
        ScoreParity::Ok => "OK",
        ScoreParity::Fail => "FAIL",
        ScoreParity::NotRun => "NOT RUN",
    }
}

/// The score parity verdict, its failures, one-sided metrics and declared renames.
fn render_parity(out: &mut String, report: &Report) {
    let parity = parity_word(report.score_parity);
    let _ = writeln!(out, "**Score parity: {parity}**\n");
    for line in &report.score_parity_report {
        let _ = writeln!(out, "- {}", text(line));
    }
    if !report.score_parity_report.is_empty() {
        out.push('\n');
    }
    let one_sided: Vec<String> = report
        .cells
        .iter()
        .filter(|c| {
            !matches!(
                c.parity,
                CellParity::AbsentUpstream | CellParity::AbsentFork
            ) && (!c.only_upstream_metrics.is_empty() || !c.only_fork_metrics.is_empty())
        })
        .map(|c| {
            format!(
                "- {}/{}: only upstream: {}; only fork: {}",
                text(&c.fixture),
                text(&c.workload),
                list_or_none(&c.only_upstream_metrics),
                list_or_none(&c.only_fork_metrics)
            )
        })
        .collect();
    if !one_sided.is_empty() {
        let _ = writeln!(
            out,
            "Metrics only one side emits (a metric only upstream writes fails the cell unless allowed missing):\n"
        );
        for line in one_sided {
            let _ = writeln!(out, "{line}");
        }
        out.push('\n');
    }
    let renamed: Vec<String> = report
        .cells
        .iter()
        .flat_map(|c| c.renamed_metrics.iter())
        .map(|(up, fork)| format!("{} → {}", code(up), code(fork)))
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
}

/// Cells without a result, problems, each attempt of a retried job, bisects and the
/// notifications sent.
fn render_problems_and_history(out: &mut String, report: &Report) {
    if !report.missing_cells.is_empty() {
        let _ = writeln!(
            out,
            "Cells without a result: {}.\n",
            text(&report.missing_cells.join(", "))
        );
    }
    if !report.errors.is_empty() {
        let _ = writeln!(out, "**Problems:**\n");
        for error in &report.errors {
            let _ = writeln!(out, "- {}", text(error));
        }
        out.push('\n');
    }
    // One attempt that ran everything says nothing new; a retried or resumed job says what
    // each attempt did.
    if report.attempt_history.len() > 1 {
        let _ = writeln!(out, "**Attempts:**\n");
        for attempt in &report.attempt_history {
            let generation = attempt
                .generation
                .as_deref()
                .map(|g| format!("{} ", code(g)))
                .unwrap_or_default();
            let _ = writeln!(out, "- {generation}{}", text(&attempt.line()));
        }
        out.push('\n');
    }
    for record in &report.bisects {
        out.push_str(&crate::bisect::render_record(record));
    }
    if !report.notifications.is_empty() {
        let _ = writeln!(out, "**Notifications:**\n");
        for sent in &report.notifications {
            let _ = writeln!(out, "- {} — {}", text(&sent.line()), text(&sent.summary));
        }
        out.push('\n');
    }
}

/// The end of a build log a side left.
fn render_build_logs(out: &mut String, report: &Report) {
    for (name, side) in [("upstream", &report.upstream), ("fork", &report.fork)] {
        if let Some(build) = &side.build {
            if let Some(tail) = &build.log_tail {
                let _ = writeln!(
                    out,
                    "The {name} build log ends with ({}):\n\n{}\n",
                    code(&build.log_path),
                    code_block(tail.trim_end())
                );
            }
        }
    }
}

/// A summary of the generations covered, then a section with its own tables per generation:
/// cells of different generations never share a table.
fn render_generations(out: &mut String, report: &Report) {
    let _ = writeln!(out, "| Generation | Host | Cells | Score parity | Start-up bound | Findings | Status |\n|---|---|---|---|---|---|---|");
    for section in &report.generations {
        let host = section
            .host
            .as_ref()
            .map_or("—".to_string(), |h| code(&h.hostname));
        let simulated = if section.simulated {
            " (recorded probes)"
        } else if section.emulator.is_some() {
            " (emulated: not timed)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "| {} | {host}{simulated} | {} | {} | {} | {} | {} (exit {}) |",
            code(&section.key),
            report.cells_of(section).count() + section.backend_cells.len(),
            parity_word(section.score_parity),
            if section.startup_bound { "yes" } else { "no" },
            crate::retune_markdown::findings_summary(section),
            section.status,
            section.exit_code
        );
    }
    out.push('\n');
    for section in &report.generations {
        let _ = writeln!(out, "#### Generation {}\n", code(&section.key));
        if let Some(host) = &section.host {
            let _ = writeln!(
                out,
                "Host {}: {}.",
                code(&host.hostname),
                text(&host.summary())
            );
        }
        if section.simulated {
            let _ = writeln!(
                out,
                "The inventory of this host came from recorded probe output: its CPU cells ran on the agent's real CPU."
            );
        }
        if let Some(emulator) = &section.emulator {
            let _ = writeln!(
                out,
                "**Emulated: not timed.** This generation ran under {}: its scores are real and gate parity, and the ISA checks ran; its times are the emulator's, so no speedup, verdict, regression or history point comes from it. A real host of this CPU runs the same spec and times it.\n",
                code(emulator)
            );
        }
        crate::toolchain_lines::render_toolchains(out, section);
        if let Some(since) = &section.since_previous {
            crate::history::render_since_previous(out, since);
        }
        let cells: Vec<&CellResult> = report.cells_of(section).collect();
        render_cell_tables(out, &cells, "#####");
        crate::retune_markdown::render_retune(out, section, "#####");
        if let Some(g) = section.geomean_speedup {
            let _ = writeln!(
                out,
                "Geomean speedup of this generation: {g:.2}x over {}.\n",
                text(&section.geomean_cells.join(", "))
            );
        }
    }
}

/// One table per fixture, one row per feature.
fn render_cell_tables(out: &mut String, cells: &[&CellResult], heading: &str) {
    for fixture in fixtures_in_order(cells) {
        let _ = writeln!(out, "{heading} Fixture {}\n", code(fixture));
        let _ = writeln!(
            out,
            "| Feature | Upstream | Fork | Speedup | Score delta |\n|---|---|---|---|---|"
        );
        let rows: Vec<&CellResult> = cells
            .iter()
            .copied()
            .filter(|c| c.fixture == fixture)
            .collect();
        for cell in &rows {
            let dagger = if cell.startup_dominated { " †" } else { "" };
            let _ = writeln!(
                out,
                "| {}{dagger} | {} | {} | {} | {} |",
                text(&cell.workload),
                side_cell(&cell.upstream, "absent upstream"),
                side_cell(&cell.fork, "absent in fork"),
                speedup_cell(cell),
                delta_words(cell, &Markdown)
            );
        }
        out.push('\n');
        render_cell_detail(out, &rows);
    }
}

/// Below a fixture's table: per cell, the pairs it took, the per-frame deltas, a failed
/// side's reason and the parity failures with the rule each broke. Never inside the table,
/// which is what a maintainer pastes into the fork's docs.
fn render_cell_detail(out: &mut String, cells: &[&CellResult]) {
    let mut lines = Vec::new();
    // Who sent the cells (the coordinator's record, docs/security.md): once when one agent
    // sent them all, else per cell.
    let one_sender = cells
        .iter()
        .all(|cell| cell.measured_by.is_some() && cell.measured_by == cells[0].measured_by);
    for cell in cells {
        let mut parts = cell_notes(cell, &Markdown);
        for failure in &cell.parity_failures {
            parts.push(format!(
                "**parity FAIL** ({}): {}",
                failure.rule.describe(),
                text(&failure.message)
            ));
        }
        if let (false, Some(by)) = (one_sender, &cell.measured_by) {
            parts.push(format!("measured by {}", measured_by_words(by, &Markdown)));
        }
        if !parts.is_empty() {
            lines.push(format!("- {}: {}", text(&cell.workload), parts.join("; ")));
        }
    }
    if let (true, Some(by)) = (
        one_sender,
        cells.first().and_then(|cell| cell.measured_by.as_ref()),
    ) {
        lines.push(format!(
            "- every cell above measured by {}",
            measured_by_words(by, &Markdown)
        ));
    }
    if !lines.is_empty() {
        for line in lines {
            let _ = writeln!(out, "{line}");
        }
        out.push('\n');
    }
}

/// Every measured side's exact command, to rerun a cell by hand.
fn render_reproduce(out: &mut String, cells: &[CellResult]) {
    let lines: Vec<String> = cells
        .iter()
        .flat_map(|cell| {
            [("upstream", &cell.upstream), ("fork", &cell.fork)]
                .into_iter()
                .filter_map(move |(name, side)| {
                    side.command.as_ref().map(|command| {
                        format!(
                            "- {}/{} {name}: {}",
                            text(&cell.fixture),
                            text(&cell.workload),
                            code(&command.shell_line())
                        )
                    })
                })
        })
        .collect();
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<details><summary>Reproduce a cell by hand (the exact argv and working directory of its timed runs)</summary>\n"
    );
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "\n</details>\n");
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.iter().map(|n| code(n)).collect::<Vec<_>>().join(", ")
    }
}

fn side_line(label: &str, side: &SideInfo) -> String {
    let resolved = side
        .resolved
        .as_deref()
        .map_or("not resolved".to_string(), code);
    let build = build_words(side.build.as_ref(), &Markdown);
    let toolchain = side
        .build
        .as_ref()
        .map(|b| format!(", toolchain {}", code(&b.toolchain)))
        .unwrap_or_default();
    format!(
        "- {label}: {} → {resolved}, {build}{toolchain}",
        code(&side.requested)
    )
}

fn speedup_cell(cell: &CellResult) -> String {
    match speedup_words(cell) {
        SpeedupWords::Measured { value, interval } => match interval {
            Some(interval) => format!("**{value}** {interval}"),
            None => format!("**{value}**"),
        },
        SpeedupWords::ParityFailed { value } => format!("~~{value}~~ (parity failed)"),
        SpeedupWords::Absent(word) => word.to_string(),
        SpeedupWords::NotTimed(why) => why,
        SpeedupWords::Rejected => "**rejected** (see below)".to_string(),
        SpeedupWords::Missing => "—".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abfleet_core::report::samples::sample_report;

    /// The rendered Markdown of a fixed run: the format the fork's docs paste.
    #[test]
    fn report_markdown_snapshot() {
        let report = sample_report();
        assert_eq!(report.exit_code, 0);
        insta::assert_snapshot!(render_markdown(&report));
    }

    /// The Markdown renders each generation section's own cells under its heading.
    #[test]
    fn each_generation_section_lists_its_own_cells() {
        let written = abfleet_core::report::samples::two_generation_report().to_json_pretty();
        let markdown = render_markdown(&Report::from_json(&written).unwrap());
        let (_, sections) = markdown
            .split_once("#### Generation `cpu/x86-64-v3`")
            .unwrap();
        let (v3, v4) = sections
            .split_once("#### Generation `cpu/x86-64-v4`")
            .unwrap();
        assert!(v3.contains("1.100 s") && !v3.contains("2.100 s"), "{v3}");
        assert!(v4.contains("2.100 s") && !v4.contains("1.100 s"), "{v4}");
        // The generations table says parity in the report's words (issue 39: `NotRun`).
        let row = markdown
            .lines()
            .find(|line| line.starts_with("| `cpu/x86-64-v3` |"))
            .unwrap();
        assert!(
            [" | OK | ", " | FAIL | ", " | NOT RUN | "]
                .iter()
                .any(|word| row.contains(word)),
            "{row}"
        );
    }

    /// Issue 23: report.md wrote spec names, PR titles and hostnames as they came, so
    /// `<img src=x onerror=…>` was HTML wherever the report was rendered, and a `|` or a line
    /// break split its tables.
    #[test]
    fn supplied_strings_are_text_in_report_md_and_the_docs_section() {
        const HOSTILE: &str = "<img src=x onerror=alert(1)>|x\nnext `line`";
        let mut report = sample_report();
        report.name = HOSTILE.into();
        report.trigger_note = Some(format!("PR #9: {HOSTILE}"));
        report.errors.push(format!("build of {HOSTILE} failed"));
        for host in report.host.iter_mut().chain(
            report
                .generations
                .iter_mut()
                .filter_map(|g| g.host.as_mut()),
        ) {
            host.hostname = HOSTILE.into();
            host.cpu_model = HOSTILE.into();
        }
        for cell in &mut report.cells {
            cell.workload = format!("{}{HOSTILE}", cell.workload);
            cell.fixture = HOSTILE.into();
        }
        for text in [
            render_markdown(&report),
            crate::render_docs_section(&report),
        ] {
            assert!(!text.contains("<img"), "raw HTML:\n{text}");
            assert!(
                text.contains("&lt;img src=x onerror=alert(1)&gt;\\|x next `line`"),
                "{text}"
            );
            // Every table row keeps its column count: no `|` or line break got in.
            for table in text.split("\n\n").filter(|b| b.starts_with('|')) {
                let columns = |line: &str| line.replace("\\|", "").matches('|').count();
                let header = columns(table.lines().next().unwrap());
                for line in table.lines() {
                    assert_eq!(columns(line), header, "{line}\nin\n{table}");
                }
            }
        }
    }
}
