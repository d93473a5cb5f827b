//! The Markdown of a retuning sweep (docs/sweeps.md): the tunables, a compact table of the
//! best value per generation, then per generation the default's verdict, the best
//! configuration and runner-up with their intervals, every configuration timed, those
//! rejected by parity, what was not tried, and the comparison with the previous sweep.

use std::fmt::Write;

use abfleet_core::cell::CellParity;
use abfleet_core::report::markdown_text::{code, text};
use abfleet_core::report::{GenerationSection, Report};
use abfleet_core::sweep::{BestConfiguration, SweepSection};

pub(super) fn render_sweep(report: &Report) -> String {
    let mut out = String::new();
    let date = report.day();
    let _ = writeln!(
        out,
        "### {date} — retuning sweep of fork {}, {} generation(s)\n",
        code(&report.fork_ref),
        report.generations.len()
    );
    let _ = writeln!(
        out,
        "Run `{}` ({}), trigger {}, status **{}**. Every configuration is timed against the shipped default in balanced pairs (one run of each, in a seeded random order; {} discarded warm-up run(s) each, {} pairs, up to {} while the verdict is unsure; one timed run covers every fixture × workload); its speedup over the default has a 95% bootstrap interval and a signed-rank verdict (±{:.0}% counts as the same). Parity first: a configuration whose pooled-mean score moves by more than {:e} from the default's is rejected and never wins, however fast. Ties go to the configuration planned first.\n",
        report.run_id,
        code(&report.name),
        code(&report.trigger),
        report.status,
        report.warmup,
        report.runs,
        report.max_runs,
        report.practical_threshold * 100.0,
        report.max_score_delta
    );
    let _ = writeln!(out, "Fork: {}\n", code(&report.fork.requested));
    let sections: Vec<(&GenerationSection, &SweepSection)> = report
        .generations
        .iter()
        .filter_map(|g| g.sweep.as_ref().map(|s| (g, s)))
        .collect();
    if let Some((_, first)) = sections.first() {
        let _ = writeln!(
            out,
            "| Tunable | Set by | Values | Shipped default |\n|---|---|---|---|"
        );
        for t in &first.tunables {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | `{}` |",
                t.name,
                t.how,
                t.values.join(", "),
                t.default
            );
        }
        out.push('\n');
        let names: Vec<&str> = first.tunables.iter().map(|t| t.name.as_str()).collect();
        let _ = writeln!(out, "#### Best value per generation\n");
        let _ = write!(out, "| Generation | Verdict |");
        for name in &names {
            let _ = write!(out, " `{name}` |");
        }
        let _ = write!(out, "\n|---|---|");
        for _ in &names {
            out.push_str("---|");
        }
        out.push('\n');
        for row in &report.sweep_table {
            let _ = write!(out, "| `{}` | {} |", row.generation, row.verdict_line);
            for name in &names {
                let value = row.best_values.get(*name).map_or("—", String::as_str);
                let default = first
                    .tunables
                    .iter()
                    .find(|t| t.name == *name)
                    .map(|t| t.default.as_str());
                let marker = if Some(value) == default {
                    ""
                } else {
                    " **≠ default**"
                };
                let _ = write!(out, " `{value}`{marker} |");
            }
            out.push('\n');
        }
        out.push('\n');
    }
    for section in &report.generations {
        let _ = writeln!(out, "#### Generation {}\n", code(&section.key));
        if let Some(host) = &section.host {
            let _ = writeln!(
                out,
                "Host {}: {}.\n",
                code(&host.hostname),
                text(&host.summary())
            );
        }
        crate::toolchain_lines::render_toolchains(&mut out, section);
        match &section.sweep {
            Some(sweep) => render_section(&mut out, sweep),
            None => {
                let _ = writeln!(out, "No sweep result on this generation.\n");
            }
        }
        // A one-generation run's problems are the run's, listed once below.
        if report.generations.len() > 1 {
            for error in &section.errors {
                let _ = writeln!(out, "- problem: {error}");
            }
            if !section.errors.is_empty() {
                out.push('\n');
            }
        }
    }
    if !report.errors.is_empty() {
        let _ = writeln!(out, "**Problems:**\n");
        for error in &report.errors {
            let _ = writeln!(out, "- {error}");
        }
        out.push('\n');
    }
    out
}

fn best_line(label: &str, best: &BestConfiguration) -> String {
    let [lo, hi] = best.speedup_ci95;
    let mut line = format!(
        "{label}: `{}` — {:.3}x over the default [{lo:.3}, {hi:.3}]",
        best.configuration.label, best.speedup
    );
    if !best.tied_with.is_empty() {
        let _ = write!(
            line,
            "; tied within noise with {}",
            best.tied_with.join(", ")
        );
    }
    line
}

fn render_section(out: &mut String, sweep: &SweepSection) {
    let verdict = sweep.default_verdict.map_or("not measured", |v| v.as_str());
    let _ = writeln!(out, "**{}** (`{verdict}`)\n", sweep.verdict_line);
    if let Some(best) = &sweep.best {
        let _ = writeln!(out, "- {}", best_line("Best", best));
    }
    if let Some(runner_up) = &sweep.runner_up {
        let _ = writeln!(out, "- {}", best_line("Runner-up", runner_up));
    }
    let _ = writeln!(
        out,
        "- Search: {} ({} of {} configurations of the grid timed, {} not tried), {:.1} s of timing, seed {}; each timed run covers {}; speedups within {:.1}% of each other are tied\n",
        sweep.strategy,
        sweep.configurations.len(),
        sweep.grid_size,
        sweep.not_tried_count,
        sweep.timing_seconds,
        sweep.seed,
        sweep.cells.join(", "),
        sweep.tie_tolerance * 100.0
    );
    let _ = writeln!(
        out,
        "| Configuration | Pairs | Median s (default) | Speedup [95% CI] | Verdict | Parity |\n|---|---|---|---|---|---|"
    );
    for c in &sweep.configurations {
        let name = if c.is_default {
            format!("`{}` (shipped default)", c.label)
        } else {
            format!("`{}`", c.label)
        };
        let medians = match (c.median_s, c.default_median_s) {
            (Some(m), Some(d)) => format!("{m:.3} ({d:.3})"),
            _ => "—".into(),
        };
        let speedup = match (c.speedup, c.speedup_ci95) {
            (Some(s), Some([lo, hi])) => format!("{s:.3}x [{lo:.3}, {hi:.3}]"),
            _ if c.is_default => "1x".into(),
            _ => "—".into(),
        };
        let verdict = match (c.verdict, &c.error) {
            (_, Some(error)) => format!("not timed: {}", error.replace('|', "/")),
            (Some(v), None) => crate::words::verdict_word(v).to_string(),
            (None, None) if c.is_default => "reference".into(),
            (None, None) => "—".into(),
        };
        let parity = match c.parity {
            CellParity::Ok => "ok",
            CellParity::Fail => "**rejected**: scores moved",
            _ => "—",
        };
        let _ = writeln!(
            out,
            "| {name} | {} | {medians} | {speedup} | {verdict} | {parity} |",
            c.pairs
        );
    }
    out.push('\n');
    let rejected: Vec<_> = sweep
        .configurations
        .iter()
        .filter(|c| c.parity == CellParity::Fail)
        .collect();
    if !rejected.is_empty() {
        let _ = writeln!(out, "Rejected by parity (never a winner, however fast):\n");
        for c in rejected {
            let fastest = c
                .speedup
                .map(|s| format!(" (it was {s:.3}x)"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "- `{}`{fastest}: {}",
                c.label,
                c.parity_failures.join("; ")
            );
        }
        out.push('\n');
    }
    if sweep.not_tried_count > 0 {
        let _ = writeln!(
            out,
            "Not tried ({} configuration(s)):\n",
            sweep.not_tried_count
        );
        for n in &sweep.not_tried {
            let _ = writeln!(out, "- `{}`: {}", n.label, n.reason);
        }
        let unlisted = sweep
            .not_tried_count
            .saturating_sub(sweep.not_tried.len() as u64);
        if unlisted > 0 {
            let _ = writeln!(out, "- … and {unlisted} more");
        }
        out.push('\n');
    }
    if let Some(history) = &sweep.history {
        let flag = if history.retuning {
            "**Retuning finding:** "
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "History: {flag}{} (previous sweep: run `{}`, best `{}`)\n",
            history.note, history.previous_run, history.previous_best
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render_markdown;
    use abfleet_core::events::{BuildRecord, BuildStatus, JobEventPayload, JobOutcome, Side};
    use abfleet_core::paired::{Pair, StopReason};
    use abfleet_core::report::samples::{assembled as assemble, done_job, done_run};
    use abfleet_core::spec::{JobSpec, SourceSpec};
    use abfleet_core::sweep::{plan, ConfigurationRun, SweepOutcome};

    /// A fixed sweep: demo-sweep.toml's 6 configurations with made-up, deterministic pairs
    /// (64-row bands 1.27x, 4 0.8x over the whole picture; the row stride faster but off in
    /// its score). Long on purpose: a fixture, its events written out as an agent sends them.
    fn sample_sweep_report() -> Report {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        let mut spec = JobSpec::load(&dir.join("demo-sweep.toml")).unwrap();
        spec.fork.source = SourceSpec::Git {
            url: "https://example.invalid/fork.git".into(),
            rev: "perf".into(),
        };
        spec.upstream = spec.fork.clone();
        spec.measure.seed = 11;
        let sweep = spec.sweep.clone().unwrap();
        let planned = plan(&sweep, spec.measure.seed);
        let configurations = planned
            .configurations
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let band = c.values["ssim_band"].as_str();
                let stride = c.values["row_stride"] == "2";
                let ratio = match band {
                    "4" => 0.8,
                    "64" => 1.27,
                    _ => 1.0,
                } * if stride { 1.4 } else { 1.0 };
                let pairs = if i == 0 {
                    Vec::new()
                } else {
                    (0..6)
                        .map(|k| {
                            let jitter = 1.0 + 0.005 * ((k * 7 % 5) as f64 - 2.0);
                            Pair {
                                upstream_s: 0.09 * jitter,
                                fork_s: 0.09 / ratio * (2.0 - jitter),
                            }
                        })
                        .collect()
                };
                ConfigurationRun {
                    configuration: c.clone(),
                    is_default: i == 0,
                    build_key: Some(format!("key-{band}")),
                    order: abfleet_core::paired::run_order(i as u64, pairs.len()),
                    pairs,
                    stop_reason: (i > 0).then_some(StopReason::Decided),
                    parity: if stride {
                        CellParity::Fail
                    } else {
                        CellParity::Ok
                    },
                    score_delta: Default::default(),
                    parity_failures: if stride {
                        vec!["pattern_1280x720/float_ssim: pooled mean of `float_ssim` differs by +1.623e-3".into()]
                    } else {
                        Vec::new()
                    },
                    error: None,
                }
            })
            .collect();
        let outcome = SweepOutcome {
            strategy: planned.strategy.as_str().into(),
            grid_size: planned.grid_size,
            cells: vec!["pattern_1280x720/float_ssim".into()],
            configurations,
            not_tried: Vec::new(),
            not_tried_count: 0,
            seed: 11,
            timing_seconds: 12.5,
        };
        let events = vec![
            JobEventPayload::Started {
                calibration: None,
                host: abfleet_core::report::samples::bench_host(),
            },
            JobEventPayload::SourceResolved {
                side: Side::Fork,
                source: spec.fork.source.clone(),
                resolved: "257ac1ec4aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".into(),
            },
            JobEventPayload::Build(BuildRecord {
                side: Side::Fork,
                status: BuildStatus::Built,
                cache_key: "key-0".into(),
                toolchain: "cc (Debian 12.2.0-14) 12.2.0".into(),
                seconds: 1.0,
                log_path: String::new(),
                log_tail: None,
                error: None,
            }),
            JobEventPayload::Sweep(Box::new(outcome)),
            JobEventPayload::Done {
                outcome: JobOutcome::Completed,
                error: None,
            },
        ];
        assemble(
            &done_run(
                "00000000-0000-0000-0000-000000000002",
                "toolchain-bump",
                1_788_365_205_000,
                spec,
            ),
            &[done_job("j", None, events)],
        )
    }

    /// The rendered Markdown of a fixed sweep.
    #[test]
    fn sweep_markdown_snapshot() {
        let report = sample_sweep_report();
        assert_eq!(report.exit_code, 0, "{:?}", report.errors);
        assert!(report.is_sweep);
        let sweep = report.generations[0].sweep.as_ref().unwrap();
        assert_eq!(
            sweep.best.as_ref().unwrap().configuration.label,
            "ssim_band=64 row_stride=1"
        );
        assert_eq!(sweep.rejected_by_parity.len(), 3);
        assert_eq!(report.sweep_table.len(), 1);
        insta::assert_snapshot!(render_markdown(&report));
    }
}
