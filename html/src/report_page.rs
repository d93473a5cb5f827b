//! report.html: the run header, the cross-generation chart (several generations), then per
//! generation its speedup chart, its per-feature tables and its retuning output; then noise
//! flags and the parity detail (a per-frame delta plot for each failed metric). Every name
//! a spec or a tool supplied reaches the page through `maud`, which escapes it.

use abfleet_core::cell::{CellParity, CellResult};
use abfleet_core::events::BuildStatus;
use abfleet_core::finding::Severity;
use abfleet_core::parity::ParityRule;
use abfleet_core::report::{GenerationSection, Report, ScoreParity, SideInfo, ANY_GENERATION};
use maud::{html, Markup, PreEscaped};

use crate::charts::{
    cross_generation_chart, frame_delta_chart, palette, speedup_chart, FrameDeltaSeries, SpeedupRow,
};
use crate::layout::{page, Shell};
use crate::text;
use abfleet_render::words::Plain;

/// report.html: one self-contained document (inline CSS and SVG, no script).
pub fn render_report_html(report: &Report) -> String {
    let title = format!(
        "{}: fork {} vs upstream {}",
        report.name, report.fork_ref, report.upstream_ref
    );
    page(&title, Shell::REPORT_FILE, report_body(report)).into_string()
}

/// The report's content, for report.html and the coordinator's run page alike.
pub fn report_body(report: &Report) -> Markup {
    let sections = sections_of(report);
    html! {
        (header(report))
        // The speedup chart across generations leaves out emulated ones: they have no times.
        @let timed = timed_sections(&sections);
        @if timed.len() > 1 {
            (cross_generation(report, &timed))
        }
        @if !report.cross_parity.is_empty() {
            (cross_parity(report))
        }
        @for section in &sections {
            (generation(report, section, sections.len() > 1))
        }
        (run_notes(report))
        (parity_detail(report))
        (run_tail(report))
    }
}

/// The sections whose times mean something (not emulated).
fn timed_sections(sections: &[GenerationSection]) -> Vec<GenerationSection> {
    sections
        .iter()
        .filter(|s| s.emulator.is_none())
        .cloned()
        .collect()
}

/// A report's generation sections; a report without any (an old one) gets one of all cells.
fn sections_of(report: &Report) -> Vec<GenerationSection> {
    if report.generations.is_empty() {
        let mut section = GenerationSection::from_report(ANY_GENERATION, report);
        section.cell_indexes = report.cells.iter().map(|c| c.index).collect();
        vec![section]
    } else {
        report.generations.clone()
    }
}

fn cells_of<'a>(report: &'a Report, section: &'a GenerationSection) -> Vec<&'a CellResult> {
    if report.generations.is_empty() {
        report.cells.iter().collect()
    } else {
        report.cells_of(section).collect()
    }
}

fn parity_badge(parity: ScoreParity) -> Markup {
    let (class, word) = match parity {
        ScoreParity::Ok => ("badge ok", "OK"),
        ScoreParity::Fail => ("badge fail", "FAIL"),
        ScoreParity::NotRun => ("badge neutral", "NOT RUN"),
    };
    html! { span class=(class) data-score-parity=(word) { "Score parity " (word) } }
}

fn header(report: &Report) -> Markup {
    let date = report.day();
    let threads = report.threads_text();
    let hosts: Vec<String> = {
        let mut hosts = Vec::new();
        for section in &report.generations {
            if let Some(host) = &section.host {
                let line = format!("{} — generation {}", host.summary(), section.key);
                if !hosts.contains(&line) {
                    hosts.push(line);
                }
            }
        }
        if hosts.is_empty() {
            if let Some(host) = &report.host {
                hosts.push(format!(
                    "{}, {} {} ({})",
                    host.summary(),
                    host.os,
                    host.kernel,
                    host.arch
                ));
            }
        }
        hosts
    };
    html! {
        header {
            h1 { (date) " — fork " code { (report.fork_ref) } " vs upstream " code { (report.upstream_ref) } }
            p {
                (parity_badge(report.score_parity)) " "
                span class="badge neutral" { "status " (report.status) ", exit " (report.exit_code) } " "
                @if let Some(g) = report.geomean_speedup {
                    span class="badge neutral" { "geomean " (format!("{g:.2}x")) " over " (report.geomean_cells.len()) " cells" }
                }
            }
            dl class="header" {
                dt { "Run" } dd { code { (report.run_id) } " (" (report.name) "), " (threads) }
                dt { "Trigger" } dd {
                    (report.trigger)
                    @if let Some(note) = &report.trigger_note { " — " (note) }
                    ", submitted " (report.date)
                }
                dt { "Upstream" } dd { (side_line(&report.upstream)) }
                dt { "Fork" } dd { (side_line(&report.fork)) }
                @for host in &hosts {
                    dt { "Host" } dd { (host) }
                }
                @if let Some(agent) = &report.agent_id {
                    dt { "Agent" } dd { code { (agent) } }
                }
                dt { "Method" } dd {
                    (report.warmup) " discarded warm-up run(s) per side, then " (report.runs)
                    " timed pairs in a seeded balanced order (up to " (report.max_runs)
                    " while unsure); median wall time; speedup with its 95% bootstrap interval; ±"
                    (format!("{:.0}", report.practical_threshold * 100.0)) "% counts as the same; seed "
                    code { (report.seed) }
                }
                dt { "Parity gate" } dd {
                    "pooled-mean delta ≤ " (format!("{:e}", report.max_score_delta))
                    @if let Some(gate) = report.max_frame_delta { ", every frame's delta ≤ " (format!("{gate:e}")) }
                    @for (metric, allowance) in &report.allowances {
                        br; "allowance: " code { (metric) } " — " (allowance.reason)
                    }
                    @for missing in &report.allow_missing {
                        br; "allowed missing in the fork: " code { (missing.metric) } " — " (missing.reason)
                    }
                }
            }
        }
    }
}

fn side_line(side: &SideInfo) -> Markup {
    let build = abfleet_render::words::build_words(side.build.as_ref(), &Plain);
    let failed = side
        .build
        .as_ref()
        .is_some_and(|b| b.status == BuildStatus::Failed);
    html! {
        code { (side.requested) } " → " code { (side.resolved.as_deref().unwrap_or("not resolved")) } ", "
        @if failed { span class="fail-text" { (build) } } @else { (build) }
        @if let Some(b) = &side.build { ", toolchain " code { (b.toolchain) } }
    }
}

fn figure_of(
    svg: &str,
    class: &str,
    axis: crate::charts::SpeedupAxis,
    bars: usize,
    caption: Markup,
) -> Markup {
    html! {
        figure class=(class) data-x-at-zero=(axis.x_at_zero) data-x-at-end=(axis.x_at_end) data-end-speedup=(axis.end_speedup) data-bars=(bars) {
            (PreEscaped(svg))
            figcaption { (caption) }
        }
    }
}

fn chart_failed(err: impl std::fmt::Display) -> Markup {
    html! { p class="problems" { (err.to_string()) } }
}

fn legend() -> Markup {
    let entries = [
        (palette::FASTER, "faster"),
        (palette::SAME, "same"),
        (palette::SLOWER, "slower"),
        (palette::UNSURE, "unsure"),
        (palette::PARITY_FAIL, "parity failed (speedup not counted)"),
        (palette::SAME_BAND, "the same band"),
    ];
    html! {
        ul class="legend" {
            @for (color, word) in entries {
                li style=(format!("--swatch: {}", palette::hex(color))) { (word) }
            }
            li style=(format!("--swatch: {}", palette::hex(palette::WHISKER))) { "95% interval" }
        }
    }
}

fn cross_generation(report: &Report, sections: &[GenerationSection]) -> Markup {
    let mut features: Vec<(String, Vec<Option<SpeedupRow>>)> = Vec::new();
    for (g, section) in sections.iter().enumerate() {
        for cell in cells_of(report, section) {
            let label = format!("{} / {}", cell.fixture, cell.workload);
            let position = match features.iter().position(|(l, _)| *l == label) {
                Some(p) => p,
                None => {
                    features.push((label, vec![None; sections.len()]));
                    features.len() - 1
                }
            };
            features[position].1[g] = Some(SpeedupRow::of(cell));
        }
    }
    html! {
        section class="cross-generation" {
            h2 { "Speedup across generations" }
            @match cross_generation_chart(&features, sections.len(), report.practical_threshold) {
                Ok(chart) => {
                    (figure_of(&chart.svg, "cross-generation-chart", chart.axis, chart.bars, html! {
                        "One group per feature, one bar per generation, whiskers the 95% interval; red: parity failed."
                    }))
                    ul class="legend" {
                        @for (g, section) in sections.iter().enumerate() {
                            li style=(format!("--swatch: {}", palette::hex(palette::GENERATIONS[g % palette::GENERATIONS.len()]))) { code { (section.key) } }
                        }
                    }
                }
                Err(err) => (chart_failed(err)),
            }
        }
    }
}

/// The fork's pooled score per cell on every generation that ran it (`report::cross_parity`),
/// the same rows and words as report.md's table.
fn cross_parity(report: &Report) -> Markup {
    use abfleet_render::cross_parity::{sources, verdict_words, widest_per_cell};
    let rows = widest_per_cell(&report.cross_parity);
    let columns = sources(&report.cross_parity);
    html! {
        section class="cross-parity" {
            h2 { "Score parity across generations" }
            p { "The fork's pooled score of each cell on every generation that ran it; per cell the metric whose scores spread most, held to the gate " (format!("{:.0e}", report.max_score_delta)) "." }
            table {
                thead { tr { th { "Fixture" } th { "Feature" } th { "Metric" } @for c in &columns { th { code { (c) } } } th { "Spread" } } }
                tbody {
                    @for row in &rows {
                        tr class=(if row.agrees() { "agrees" } else { "disagrees" }) {
                            td { (row.fixture) } td { (row.workload) } td { code { (row.metric) } }
                            @for c in &columns {
                                td class="num" { (row.values.get(*c).map_or("—".to_string(), |v| format!("{v:.6}"))) }
                            }
                            td { @if row.agrees() { (verdict_words(row)) } @else { strong { (verdict_words(row)) } } }
                        }
                    }
                }
            }
        }
    }
}

fn generation(report: &Report, section: &GenerationSection, several: bool) -> Markup {
    let cells = cells_of(report, section);
    let rows: Vec<SpeedupRow> = cells.iter().map(|c| SpeedupRow::of(c)).collect();
    let fixtures = abfleet_render::words::fixtures_in_order(&cells);
    html! {
        section class="generation" data-generation=(section.key) {
            h2 { "Generation " code { (section.key) } " " (parity_badge(section.score_parity)) }
            @if several {
                p {
                    @if let Some(host) = &section.host { "Host " (host.summary()) ". " }
                    @if section.simulated { "Inventory from recorded probes: its CPU cells ran on the agent's real CPU. " }
                    @if section.emulator.is_some() { "Emulated: not timed. " }
                    "Status " (section.status) ", exit " (section.exit_code) "."
                }
                @for (side, toolchain) in &section.toolchain {
                    p { (side) " toolchain " code { (toolchain) } }
                }
            }
            @for change in section.toolchain_changes() {
                p class="note" { strong { "Toolchain changed" } " since the previous run: " (change.replace('`', "")) }
            }
            @if let Some(emulator) = &section.emulator {
                p class="note" { strong { "Emulated: not timed." } " This generation ran under " code { (emulator) } ": its scores are real and gate parity, and the ISA checks ran; its times are the emulator's, so no speedup, verdict, regression or history point comes from it." }
            }
            @if !rows.is_empty() && section.emulator.is_none() {
                @match speedup_chart(&rows, report.practical_threshold) {
                    Ok(chart) => (figure_of(&chart.svg, "speedup-chart", chart.axis, chart.bars, html! {
                        "Speedup per fixture and feature: bar the ratio of medians, whiskers the 95% bootstrap interval, shaded the same band (±"
                        (format!("{:.0}", report.practical_threshold * 100.0)) "%)."
                    })),
                    Err(err) => (chart_failed(err)),
                }
                (legend())
            }
            @for fixture in &fixtures {
                h3 { "Fixture " code { (fixture) } }
                (cell_table(cells.iter().copied().filter(|c| c.fixture == *fixture)))
            }
            @if let Some(g) = section.geomean_speedup {
                p { "Geomean speedup of this generation " strong { (format!("{g:.2}x")) } " over exactly these "
                    (section.geomean_cells.len()) " cells (parity ok, both sides measured): " (section.geomean_cells.join(", ")) "." }
            }
            (retune(section))
            @if !section.errors.is_empty() && several {
                div class="problems" { strong { "Problems on " (section.key) } ul { @for e in &section.errors { li { (e) } } } }
            }
        }
    }
}

fn cell_table<'a>(cells: impl Iterator<Item = &'a CellResult>) -> Markup {
    let cells: Vec<&CellResult> = cells.collect();
    html! {
        table class="cells" {
            thead { tr { th { "Feature" } th { "Upstream" } th { "Fork" } th { "Speedup" } th { "95% interval, verdict" } th { "Score delta" } th { "Detail" } } }
            tbody {
                @for cell in &cells {
                    @let (speedup, detail) = text::speedup_text(cell);
                    @let class = match cell.parity {
                        CellParity::Fail => "parity-fail",
                        CellParity::AbsentUpstream | CellParity::AbsentFork => "absent",
                        _ => "",
                    };
                    tr class=(class) data-cell=(format!("{}/{}", cell.fixture, cell.workload)) {
                        td { (cell.workload) @if cell.startup_dominated { " †" } }
                        td class="num" { (text::side_cell(&cell.upstream, "absent upstream")) }
                        td class="num" { (text::side_cell(&cell.fork, "absent in fork")) }
                        td class="num" { @if cell.parity == CellParity::Fail { s { (speedup) } } @else { strong { (speedup) } } }
                        td { (detail) }
                        td { @if cell.parity == CellParity::Fail { span class="fail-text" { (text::delta_text(cell)) } } @else { (text::delta_text(cell)) } }
                        td { (text::cell_detail(cell).join("; ")) }
                    }
                }
            }
        }
        @if cells.iter().any(|c| c.startup_dominated) {
            p class="muted" { "† start-up-dominated: the fork's median is under min_useful_seconds, so process start-up weighs on the speedup." }
        }
    }
}

fn retune(section: &GenerationSection) -> Markup {
    let mut findings: Vec<&abfleet_core::finding::Finding> = section.findings.iter().collect();
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    html! {
        @if !section.backend_cells.is_empty() {
            h3 { "Backend cells (the fork alone)" }
            table {
                thead { tr { th { "Backend" } th { "Fixture / feature" } th { "Status" } th { "Median" } th { "Spread" } th { "Previous run" } } }
                tbody {
                    @for cell in &section.backend_cells {
                        tr {
                            td { (cell.backend) }
                            td { (cell.fixture) " / " (cell.workload) }
                            td { (format!("{:?}", cell.status).to_lowercase()) @if let Some(r) = &cell.reason { ": " (r) } }
                            td class="num" { (cell.median_seconds.map(|s| format!("{s:.3} s")).unwrap_or_else(|| "—".into())) }
                            td class="num" { (cell.spread_pct.map(|s| format!("{s:.1}%")).unwrap_or_else(|| "—".into())) }
                            td { @if let Some(p) = &cell.previous { (format!("{:.3} s, now {:.2}x", p.median_seconds, p.speedup)) } @else { "—" } }
                        }
                    }
                }
            }
        }
        @if !findings.is_empty() {
            h3 { "Retuning findings" }
            table class="findings" {
                thead { tr { th { "Severity" } th { "Backend" } th { "Check" } th { "Subject" } th { "Verdict" } th { "Since the previous run" } } }
                tbody {
                    @for finding in &findings {
                        tr class=(if finding.severity == Severity::Fail { "parity-fail" } else { "" }) {
                            td { (finding.severity.name()) }
                            td { (finding.backend) }
                            td { (finding.check) }
                            td { (finding.subject) }
                            td { (finding.verdict) }
                            td {
                                @match &finding.previous {
                                    Some(p) if p.changes.is_empty() => "unchanged",
                                    Some(p) => (p.changes.join("; ")),
                                    None => "new",
                                }
                            }
                        }
                    }
                }
            }
        }
        @if !section.skipped_checks.is_empty() {
            p { "Checks not run here:" }
            ul { @for s in &section.skipped_checks { li { (s.backend) " " (s.check) ": " (s.reason) } } }
        }
    }
}

fn run_notes(report: &Report) -> Markup {
    let flagged: Vec<(&CellResult, &abfleet_core::cell::NoiseFlag)> = report
        .cells
        .iter()
        .flat_map(|c| c.noise_flags.iter().map(move |f| (c, f)))
        .collect();
    html! {
        @if let Some(note) = &report.startup_note {
            p class="note" { strong { "Start-up bound. " } (note) "." }
        }
        @if report.geomean_speedup.is_none() {
            p class="muted" {
                @if report.generations.len() > 1 { "No run-wide geomean: it would mix hardware generations; each generation has its own." }
                @else { "No geomean: no cell had both sides measured with parity ok." }
            }
        }
        @if !flagged.is_empty() {
            h2 { "Noise flags" }
            p class="muted" { "The numbers stand; these explain them." }
            ul class="noise" {
                @for (cell, flag) in &flagged {
                    li { (cell.fixture) "/" (cell.workload) ": " code { (flag.name) } " = " (flag.value) " (" (flag.detail) ")" }
                }
            }
        }
    }
}

/// The per-frame deltas of one failed metric, from both sides' first timed run.
fn frame_deltas(cell: &CellResult, metric: &str, gate: f64) -> Option<FrameDeltaSeries> {
    let upstream_name = cell
        .renamed_metrics
        .iter()
        .find(|(_, fork)| *fork == metric)
        .map_or(metric, |(up, _)| up.as_str());
    let fork_name = cell
        .renamed_metrics
        .get(metric)
        .map_or(metric, String::as_str);
    let upstream = cell.upstream.scores.as_ref()?;
    let fork = cell.fork.scores.as_ref()?;
    let deltas: Vec<(u64, f64)> = upstream
        .frames
        .iter()
        .zip(&fork.frames)
        .filter_map(|(u, f)| {
            let u_value = u
                .metrics
                .get(upstream_name)
                .or_else(|| u.metrics.get(metric))?;
            let f_value = f.metrics.get(fork_name).or_else(|| f.metrics.get(metric))?;
            (u_value.is_finite() && f_value.is_finite()).then_some((u.frame_num, f_value - u_value))
        })
        .collect();
    (!deltas.is_empty()).then(|| FrameDeltaSeries {
        metric: metric.to_string(),
        deltas,
        gate,
    })
}

fn parity_detail(report: &Report) -> Markup {
    let failed: Vec<&CellResult> = report
        .cells
        .iter()
        .filter(|c| c.parity == CellParity::Fail)
        .collect();
    html! {
        section class="parity" {
            h2 { "Score parity " (parity_badge(report.score_parity)) }
            @if !report.score_parity_report.is_empty() {
                ul { @for line in &report.score_parity_report { li { (line) } } }
            }
            @for cell in &failed {
                @for failure in &cell.parity_failures {
                    h3 class="fail-text" { (cell.fixture) "/" (cell.workload) @if let Some(g) = &cell.generation { " on " code { (g) } } ": " code { (failure.metric) } }
                    p { (failure.rule.describe()) ": " (failure.message) }
                    @if matches!(failure.rule, ParityRule::PooledMean | ParityRule::FrameDelta) {
                        @match frame_deltas(cell, &failure.metric, failure.allowed) {
                            Some(series) => @match frame_delta_chart(&series) {
                                Ok(chart) => figure class="frame-delta-chart" data-metric=(failure.metric) data-frames-over-gate=(series.frames_over_gate()) {
                                    (PreEscaped(&chart.svg))
                                    figcaption { "Per-frame delta of " code { (failure.metric) } " (fork − upstream, first timed run) against the gate ±" (format!("{:e}", failure.allowed)) " (red lines); " (series.frames_over_gate()) " of " (series.deltas.len()) " frames over it." }
                                },
                                Err(err) => (chart_failed(err)),
                            },
                            None => p class="muted" { "No per-frame scores of both sides were kept for this metric, so there is no per-frame plot." },
                        }
                    }
                }
            }
        }
    }
}

fn run_tail(report: &Report) -> Markup {
    let one_sided: Vec<&CellResult> = report
        .cells
        .iter()
        .filter(|c| {
            !matches!(
                c.parity,
                CellParity::AbsentUpstream | CellParity::AbsentFork
            ) && (!c.only_upstream_metrics.is_empty() || !c.only_fork_metrics.is_empty())
        })
        .collect();
    let renamed: std::collections::BTreeSet<(&String, &String)> = report
        .cells
        .iter()
        .flat_map(|c| c.renamed_metrics.iter())
        .collect();
    let commands: Vec<(String, String)> = report
        .cells
        .iter()
        .flat_map(|cell| {
            [("upstream", &cell.upstream), ("fork", &cell.fork)]
                .into_iter()
                .filter_map(move |(name, side)| {
                    side.command.as_ref().map(|c| {
                        (
                            format!("{}/{} {name}", cell.fixture, cell.workload),
                            c.shell_line(),
                        )
                    })
                })
        })
        .collect();
    html! {
        @if !one_sided.is_empty() {
            h2 { "Metrics only one side emits" }
            ul { @for c in &one_sided {
                li { (c.fixture) "/" (c.workload) ": only upstream: " (list_or_none(&c.only_upstream_metrics)) "; only fork: " (list_or_none(&c.only_fork_metrics)) }
            } }
        }
        @if !renamed.is_empty() {
            p { "Compared under declared renames: "
                @for (i, (up, fork)) in renamed.iter().enumerate() { @if i > 0 { ", " } code { (up) } " → " code { (fork) } }
                "." }
        }
        @if !report.missing_cells.is_empty() {
            p class="problems" { "Cells without a result: " (report.missing_cells.join(", ")) "." }
        }
        @if !report.errors.is_empty() {
            div class="problems" { strong { "Problems" } ul { @for e in &report.errors { li { (e) } } } }
        }
        @if report.attempt_history.len() > 1 {
            h2 { "Attempts" }
            ul { @for a in &report.attempt_history { li { @if let Some(g) = &a.generation { code { (g) } " " } (a.line()) } } }
        }
        @if !report.notifications.is_empty() {
            // The alerts sent about the run, as report.md lists them.
            h2 { "Notifications" }
            ul class="notifications" { @for sent in &report.notifications { li { (sent.line()) " — " (sent.summary) } } }
        }
        @if !commands.is_empty() {
            details {
                summary { "Reproduce a cell by hand (the exact argv and working directory of its timed runs)" }
                ul { @for (what, line) in &commands { li { (what) ": " code { (line) } } } }
            }
        }
        @for (name, side) in [("upstream", &report.upstream), ("fork", &report.fork)] {
            @if let Some(build) = &side.build {
                @if let Some(tail) = &build.log_tail {
                    h3 { "The " (name) " build log ends with (" code { (build.log_path) } ")" }
                    pre { (tail.trim_end()) }
                }
            }
        }
    }
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}
