//! A run's section of the fork's `docs/benchmarks.md`, in the page's own table shapes
//! (`../shared/FORK-FACTS.md`, "docs tables"; fixtures/docs/benchmarks.md):
//!
//! - a dated heading `### DATE — fork `COMMIT` vs upstream `REF`, `HOST`, single-threaded`
//!   and a provenance line (run, trigger, warm-up and pairs, the gate, the command);
//! - the host as `| Profile | CPU | GPUs | Memory | OS |` (the host's GPU generations, `—`
//!   on a CPU-only host);
//! - per fixture one row of `| Fixture | Upstream | Fork | Speedup | Score delta |` (the
//!   times summed over the features both trees ran, their ratio, the largest pooled delta);
//! - per feature `| Feature | Upstream | Fork | Speedup |`, † on start-up-dominated rows,
//!   speedups in bold; each feature's interval, verdict and pooled delta in a list below.
//!
//! A run over several generations is one dated section with a sub-section (`#### `HOST`
//! (`KEY`)`) per generation. The page's other text is `docs.rs`'s to keep.

use std::fmt::Write;

use abfleet_core::cell::{CellParity, CellResult, RunCommand, SideStatus};
use abfleet_core::inventory::Inventory;
use abfleet_core::report::markdown_text::{code, text};
use abfleet_core::report::Report;

use crate::words::SpeedupWords;
use abfleet_core::report::{GenerationSection, ANY_GENERATION};

/// The run's section of the fork's benchmarks page.
pub fn render_docs_section<'a>(report: &'a Report) -> String {
    let mut out = String::new();
    let date = report.day();
    let threads = report.threads_text();
    let fork = fork_ref(report);
    let groups: Vec<(Option<&GenerationSection>, Vec<&CellResult>)> =
        if report.generations.len() > 1 {
            report
                .generations
                .iter()
                .map(|section| (Some(section), report.cells_of(section).collect()))
                .collect()
        } else {
            vec![(report.generations.first(), report.cells.iter().collect())]
        };
    let host_of = |section: Option<&'a GenerationSection>| -> Option<&'a Inventory> {
        section
            .and_then(|s| s.host.as_ref())
            .or(report.host.as_ref())
    };
    let key_of = |section: Option<&GenerationSection>| {
        section
            .filter(|s| s.key != ANY_GENERATION)
            .map_or(String::new(), |s| format!(" ({})", code(&s.key)))
    };
    let all_cells: Vec<&CellResult> = groups.iter().flat_map(|(_, c)| c.iter().copied()).collect();
    if let [(section, _)] = groups.as_slice() {
        let host = host_of(*section);
        let _ = writeln!(
            out,
            "### {date} — fork {} vs upstream {}, {}{}, {threads}\n",
            code(&fork),
            code(&report.upstream_ref),
            host.map_or("`unknown host`".to_string(), |h| code(&h.hostname)),
            key_of(*section)
        );
    } else {
        let _ = writeln!(
            out,
            "### {date} — fork {} vs upstream {}, {} generations, {threads}\n",
            code(&fork),
            code(&report.upstream_ref),
            groups.len()
        );
    }
    provenance(&mut out, report, &all_cells);
    let multi = groups.len() > 1;
    for (section, cells) in &groups {
        let host = host_of(*section);
        if multi {
            let _ = writeln!(
                out,
                "#### {}{}\n",
                host.map_or("`unknown host`".to_string(), |h| code(&h.hostname)),
                key_of(*section)
            );
        }
        if let Some(host) = host {
            profile_table(&mut out, host);
        }
        if cells.is_empty() {
            let _ = writeln!(out, "No A/B cells on this generation.\n");
            continue;
        }
        fixture_table(&mut out, cells);
        feature_tables(&mut out, cells);
    }
    if all_cells.iter().any(|c| c.startup_dominated) {
        let _ = writeln!(
            out,
            "† start-up-dominated: the fork's median is under {:.1} s.\n",
            report.min_useful_seconds
        );
    }
    out
}

/// The fork commit as the page quotes it (nine characters), or a path source's content hash.
fn fork_ref(report: &Report) -> String {
    report
        .fork
        .resolved
        .as_deref()
        .map_or(report.fork_ref.clone(), |c| {
            match c.strip_prefix("sha256:") {
                Some(hash) => format!("sha256:{}", &hash[..hash.len().min(12)]),
                None => c.chars().take(9).collect(),
            }
        })
}

fn provenance(out: &mut String, report: &Report, cells: &[&CellResult]) {
    let _ = writeln!(
        out,
        "abfleet run `{}` ({}, trigger {}); {} warm-up, {}–{} timed pairs per cell, median wall time; parity gate {:e}. Command: {}.\n",
        report.run_id,
        code(&report.name),
        code(&report.trigger),
        report.warmup,
        report.runs,
        report.max_runs,
        report.max_score_delta,
        cells
            .iter()
            .find_map(|c| c.fork.command.as_ref())
            .map_or("`-`".to_string(), |command| code(&short_command(command)))
    );
}

/// A timed run's argv with each path cut to its file name (the docs page is not the host).
fn short_command(command: &RunCommand) -> String {
    command
        .argv
        .iter()
        .map(|arg| match arg.rsplit_once('/') {
            Some((_, name)) if !name.is_empty() => name.to_string(),
            _ => arg.clone(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `| Profile | CPU | GPUs | Memory | OS |`: the GPUs are the host's GPU generations (a CPU
/// Vulkan driver is none).
fn profile_table(out: &mut String, host: &Inventory) {
    let mut gpus: Vec<String> = Vec::new();
    for generation in host.generations.iter().filter(|g| g.is_gpu()) {
        if !gpus.contains(&generation.description) {
            gpus.push(generation.description.clone());
        }
    }
    let _ = writeln!(
        out,
        "| Profile | CPU | GPUs | Memory | OS |\n|---|---|---|---|---|\n| {} | {} ({} cores / {} threads) | {} | {:.0} GiB | {} |\n",
        code(&host.hostname),
        text(&host.cpu_model),
        host.physical_cores,
        host.logical_cores,
        if gpus.is_empty() {
            "—".to_string()
        } else {
            text(&gpus.join(", "))
        },
        host.memory_bytes as f64 / (1u64 << 30) as f64,
        text(&host.os)
    );
}

fn seconds(value: f64) -> String {
    format!("{value:.3} s")
}

/// Both sides measured: the cells a fixture's totals are over.
fn both_measured(cell: &CellResult) -> Option<(f64, f64)> {
    match (cell.upstream.status, cell.fork.status) {
        (SideStatus::Ok, SideStatus::Ok) => {
            Some((cell.upstream.median_time?, cell.fork.median_time?))
        }
        _ => None,
    }
}

/// `| Fixture | Upstream | Fork | Speedup | Score delta |`: one row per fixture.
fn fixture_table(out: &mut String, cells: &[&CellResult]) {
    let _ = writeln!(
        out,
        "| Fixture | Upstream | Fork | Speedup | Score delta |\n|---|---|---|---|---|"
    );
    for fixture in crate::words::fixtures_in_order(cells) {
        let rows: Vec<&CellResult> = cells
            .iter()
            .copied()
            .filter(|c| c.fixture == fixture)
            .collect();
        let frames = rows
            .iter()
            .find_map(|c| c.fork.nframes.or(c.upstream.nframes))
            .map_or(String::new(), |n| format!(", {n} frames"));
        let timed: Vec<(&CellResult, (f64, f64))> = rows
            .iter()
            .filter_map(|c| Some((*c, both_measured(c)?)))
            .collect();
        let (upstream, fork) = timed
            .iter()
            .fold((0.0, 0.0), |(u, f), (_, (a, b))| (u + a, f + b));
        let (upstream_text, fork_text, speedup_text) = if timed.is_empty() || fork <= 0.0 {
            ("—".to_string(), "—".to_string(), "—".to_string())
        } else {
            let dagger = if timed.iter().all(|(c, _)| c.startup_dominated) {
                " †"
            } else {
                ""
            };
            (
                seconds(upstream),
                seconds(fork),
                format!("**{:.2}x**{dagger}", upstream / fork),
            )
        };
        let largest = rows
            .iter()
            .filter_map(|c| c.largest_score_delta())
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()));
        let mut delta = match largest {
            None => "—".to_string(),
            Some((_, 0.0)) => "0".to_string(),
            Some((_, d)) if !d.is_finite() => "null vs number".to_string(),
            Some((metric, d)) => format!("{d:+.1e} ({})", code(metric)),
        };
        if rows.iter().any(|c| c.parity == CellParity::Fail) {
            delta = format!("**FAIL** {delta}");
        }
        let _ = writeln!(
            out,
            "| {}{frames} | {upstream_text} | {fork_text} | {speedup_text} | {delta} |",
            code(fixture)
        );
    }
    let _ = writeln!(
        out,
        "\nA fixture's times are the sums over the features both trees ran; the rows below are the result.\n"
    );
}

/// Per fixture, `| Feature | Upstream | Fork | Speedup |`, and below it each feature's
/// interval, verdict and pooled delta.
fn feature_tables(out: &mut String, cells: &[&CellResult]) {
    let fixtures = crate::words::fixtures_in_order(cells);
    for fixture in &fixtures {
        if fixtures.len() > 1 {
            let _ = writeln!(out, "**{}**\n", code(fixture));
        }
        let _ = writeln!(
            out,
            "| Feature | Upstream | Fork | Speedup |\n|---|---|---|---|"
        );
        let rows: Vec<&CellResult> = cells
            .iter()
            .copied()
            .filter(|c| c.fixture == *fixture)
            .collect();
        for cell in &rows {
            let dagger = if cell.startup_dominated { " †" } else { "" };
            let _ = writeln!(
                out,
                "| {}{dagger} | {} | {} | {} |",
                text(&cell.workload),
                side_text(
                    cell.upstream.status,
                    cell.upstream.median_time,
                    "absent upstream"
                ),
                side_text(cell.fork.status, cell.fork.median_time, "absent in fork"),
                speedup_text(cell)
            );
        }
        out.push('\n');
        for cell in &rows {
            let mut parts = Vec::new();
            if let (Some([lo, hi]), Some(verdict)) = (cell.speedup_ci95, cell.verdict) {
                parts.push(format!(
                    "95% interval {lo:.2}–{hi:.2}x over {} pairs, {}",
                    cell.pairs,
                    crate::words::verdict_word(verdict)
                ));
            }
            match cell.largest_score_delta() {
                Some((metric, 0.0)) => parts.push(format!(
                    "every pooled delta 0 ({} and the rest)",
                    code(metric)
                )),
                Some((metric, d)) if d.is_finite() => {
                    parts.push(format!("largest pooled delta {d:+.1e} ({})", code(metric)))
                }
                Some((metric, _)) => parts.push(format!("{} null on one side", code(metric))),
                None => {}
            }
            for failure in &cell.parity_failures {
                parts.push(format!(
                    "**parity FAIL** ({}): {}",
                    failure.rule.describe(),
                    text(&failure.message)
                ));
            }
            if !parts.is_empty() {
                let _ = writeln!(out, "- {}: {}", text(&cell.workload), parts.join("; "));
            }
        }
        out.push('\n');
    }
}

fn side_text(status: SideStatus, median: Option<f64>, absent: &str) -> String {
    match (status, median) {
        (SideStatus::Absent, _) => absent.to_string(),
        (SideStatus::Unavailable, _) => "unavailable".to_string(),
        (SideStatus::Ok, Some(t)) => seconds(t),
        (SideStatus::Ok, None) => "—".to_string(),
    }
}

fn speedup_text(cell: &CellResult) -> String {
    match crate::words::speedup_words(cell) {
        SpeedupWords::Measured { value, .. } => format!("**{value}**"),
        SpeedupWords::ParityFailed { value } => format!("~~{value}~~ (parity failed)"),
        SpeedupWords::Absent(word) => word.to_string(),
        SpeedupWords::NotTimed(why) => why,
        SpeedupWords::Rejected | SpeedupWords::Missing => "—".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abfleet_core::generation::Generation;

    const FORK_PAGE: &str = include_str!("../../fixtures/docs/benchmarks.md");

    /// Every table header row of `text`: a `|` line followed by a `|---` line.
    fn header_rows(text: &str) -> Vec<&str> {
        let lines: Vec<&str> = text.lines().collect();
        lines
            .windows(2)
            .filter(|w| w[0].starts_with('|') && w[1].starts_with("|---"))
            .map(|w| w[0])
            .collect()
    }

    fn generation(key: &str, backend: &str, description: &str) -> Generation {
        Generation {
            emulator: None,
            key: key.into(),
            backend: backend.into(),
            vendor: "test".into(),
            silicon_id: "s".into(),
            hardware_id: "h".into(),
            description: description.into(),
            simulated: false,
            toolchain: Default::default(),
        }
    }

    /// The sample run as if it had run on two generations: a Zen 4 host with an H100, and an
    /// Alder Lake host with no GPU.
    fn two_generations() -> Report {
        let mut report = abfleet_core::report::samples::sample_report();
        let mut zen = report.generations[0].clone();
        zen.key = "cpu/x86-64-v4/zen4".into();
        let mut host = zen.host.clone().unwrap();
        host.generations = vec![
            generation(&zen.key, "cpu", "AMD EPYC 9R14 (Zen 4), 2 cores"),
            generation(
                "cuda/sm_90",
                "cuda",
                "NVIDIA H100 80GB HBM3 (sm_90, driver 545.23.08)",
            ),
        ];
        zen.host = Some(host.clone());
        let mut alder = zen.clone();
        alder.key = "cpu/x86-64-v3/alder-lake".into();
        host.hostname = "bench-2".into();
        host.generations = vec![generation(&alder.key, "cpu", "Core i5-12400")];
        alder.host = Some(host);
        let cells = report.cells.clone();
        report.cells = Vec::new();
        for key in [&zen.key, &alder.key] {
            report.cells.extend(cells.iter().cloned().map(|mut c| {
                c.generation = Some(key.clone());
                c
            }));
        }
        report.generations = vec![zen, alder];
        report
    }

    #[test]
    fn one_generation_in_the_pages_table_shapes() {
        let report = abfleet_core::report::samples::sample_report();
        let section = render_docs_section(&report);
        let headers = header_rows(&section);
        assert_eq!(headers.len(), 3, "profile, fixture, feature: {section}");
        for header in headers {
            assert!(
                FORK_PAGE.lines().any(|l| l == header),
                "`{header}` is not a table shape of the fork's page"
            );
        }
        assert!(
            section.starts_with("### 2026-09-02 — fork `257ac1ec4` vs upstream `v1.0.0`, `bench-1`, single-threaded\n"),
            "{section}"
        );
        // CPU-only host: no GPUs.
        assert!(section.contains("| `bench-1` | AMD EPYC 9R14 (2 cores / 2 threads) | — | 24 GiB | Debian GNU/Linux 12 |"), "{section}");
        assert!(section.contains("| float_ssim"), "{section}");
        assert!(section.contains("| `pattern_320x180`"), "{section}");
    }

    #[test]
    fn several_generations_are_one_dated_section_with_a_sub_section_each() {
        let report = two_generations();
        let section = render_docs_section(&report);
        assert_eq!(
            section.lines().filter(|l| l.starts_with("### ")).count(),
            1,
            "{section}"
        );
        assert!(
            section.contains(", 2 generations, single-threaded\n"),
            "{section}"
        );
        let zen = section
            .find("#### `bench-1` (`cpu/x86-64-v4/zen4`)")
            .expect(&section);
        let alder = section
            .find("#### `bench-2` (`cpu/x86-64-v3/alder-lake`)")
            .expect(&section);
        assert!(zen < alder);
        assert!(
            section[zen..alder].contains("| NVIDIA H100 80GB HBM3 (sm_90, driver 545.23.08) |"),
            "{section}"
        );
        assert!(section[alder..].contains("threads) | — |"), "{section}");
        for header in header_rows(&section) {
            assert!(FORK_PAGE.lines().any(|l| l == header), "`{header}`");
        }
        assert_eq!(
            header_rows(&section)
                .iter()
                .filter(|h| h.starts_with("| Feature |"))
                .count(),
            2
        );
        // In the page, once, and again unchanged.
        let page = crate::docs::update_benchmarks(FORK_PAGE, &report);
        assert_eq!(crate::docs::update_benchmarks(&page, &report), page);
        assert_eq!(page.matches("#### `bench-2`").count(), 1);
    }
}
