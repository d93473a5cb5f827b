//! The report as JUnit XML, for release pipelines that gate on test results: one
//! `<testsuite>` per hardware generation (one for the whole run when it has none), one
//! `<testcase>` per cell. A parity failure is a `<failure>` (a speedup bought by changing
//! the score is a regression), a cell that could not be measured an `<error>`, a workload
//! one tree does not have `<skipped>`; run-level problems are an `<error>` on a `run`
//! case. Speed is reported, never gated here: a slower cell passes with its verdict in
//! `<system-out>`. A generation compared with its previous comparable run gets a
//! `since previous run` case: a `<failure type="regression">` listing the regression flags
//! (a speedup that shrank, a fork that got slower, a parity delta that grew), passed when
//! there are none. Every name and message is XML-escaped.

use std::fmt::Write;

use quick_xml::escape::escape;

use abfleet_core::cell::{CellParity, CellResult};
use abfleet_core::report::Report;

/// One case's outcome.
enum Outcome {
    Passed,
    /// The failure's type (`parity`, `regression`) and message.
    Failure(&'static str, String),
    Error(String),
    Skipped(String),
}

struct Case {
    name: String,
    seconds: f64,
    outcome: Outcome,
    out: String,
}

/// A sweep's cases: its verdict, then one per configuration. A configuration rejected by
/// parity is skipped (it is reported, and never wins; the run did not regress), one that
/// could not be timed is an error; a stale default passes with its verdict in the output.
fn sweep_cases(sweep: &abfleet_core::sweep::SweepSection) -> Vec<Case> {
    let mut cases = vec![Case {
        name: "sweep verdict".into(),
        seconds: sweep.timing_seconds,
        outcome: if sweep.default_verdict.is_some() {
            Outcome::Passed
        } else {
            Outcome::Error(sweep.verdict_line.clone())
        },
        out: sweep.verdict_line.clone(),
    }];
    for c in &sweep.configurations {
        let outcome = match (&c.error, c.parity) {
            (Some(error), _) => Outcome::Error(error.clone()),
            (None, CellParity::Fail) => Outcome::Skipped(format!(
                "rejected by parity: {}",
                c.parity_failures.join("; ")
            )),
            _ => Outcome::Passed,
        };
        let out = match (c.speedup, c.speedup_ci95, c.verdict) {
            (Some(s), Some([lo, hi]), Some(v)) => {
                format!("speedup over the default {s:.3}x [{lo:.3}, {hi:.3}], {v:?}")
            }
            _ if c.is_default => "the shipped default".into(),
            _ => String::new(),
        };
        cases.push(Case {
            name: format!("sweep {}", c.label),
            seconds: 0.0,
            outcome,
            out,
        });
    }
    cases
}

/// The report as a JUnit XML document.
pub fn render_junit(report: &Report) -> String {
    write_suites(report, &suites(report))
}

/// One suite per generation (one for the run without generations): its cells, the
/// comparison with the previous run, the sweep's configurations and its errors; the run's
/// errors join the first suite.
fn suites(report: &Report) -> Vec<(String, Vec<Case>)> {
    let mut suites: Vec<(String, Vec<Case>)> = Vec::new();
    if report.generations.is_empty() {
        let cases = report.cells.iter().map(case).collect();
        suites.push((report.name.clone(), cases));
    } else {
        for section in &report.generations {
            let mut cases: Vec<Case> = report.cells_of(section).map(case).collect();
            if let Some(since) = &section.since_previous {
                let flags: Vec<String> = since
                    .flags
                    .iter()
                    .map(|f| {
                        format!(
                            "{}/{}: {} ({})",
                            f.fixture,
                            f.workload,
                            f.detail,
                            f.kind.as_str()
                        )
                    })
                    .collect();
                cases.push(Case {
                    name: format!("since previous run {}", since.run_id),
                    seconds: 0.0,
                    outcome: if flags.is_empty() {
                        Outcome::Passed
                    } else {
                        Outcome::Failure("regression", flags.join("; "))
                    },
                    out: since.changes.join("\n"),
                });
            }
            if let Some(sweep) = &section.sweep {
                cases.extend(sweep_cases(sweep));
            }
            if !section.errors.is_empty() {
                cases.push(Case {
                    name: "generation".into(),
                    seconds: 0.0,
                    outcome: Outcome::Error(section.errors.join("; ")),
                    out: String::new(),
                });
            }
            suites.push((format!("{} {}", report.name, section.key), cases));
        }
    }
    if !report.errors.is_empty() {
        let run_case = Case {
            name: "run".into(),
            seconds: 0.0,
            outcome: Outcome::Error(report.errors.join("; ")),
            out: String::new(),
        };
        match suites.first_mut() {
            Some((_, cases)) => cases.push(run_case),
            None => suites.push((report.name.clone(), vec![run_case])),
        }
    }
    suites
}

/// The suites as a `<testsuites>` document with their counts.
fn write_suites(report: &Report, suites: &[(String, Vec<Case>)]) -> String {
    let count = |cases: &[Case], pick: fn(&Outcome) -> bool| {
        cases.iter().filter(|c| pick(&c.outcome)).count()
    };
    let all: Vec<&Case> = suites.iter().flat_map(|(_, cases)| cases).collect();
    let total = |pick: fn(&Outcome) -> bool| all.iter().filter(|c| pick(&c.outcome)).count();
    let failure = |o: &Outcome| matches!(o, Outcome::Failure(..));
    let error = |o: &Outcome| matches!(o, Outcome::Error(_));
    let skipped = |o: &Outcome| matches!(o, Outcome::Skipped(_));

    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
        escape(format!("abfleet {} ({})", report.name, report.run_id).as_str()),
        all.len(),
        total(failure),
        total(error),
        total(skipped),
    );
    for (name, cases) in suites {
        let _ = writeln!(
            xml,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" timestamp=\"{}\">",
            escape(name.as_str()),
            cases.len(),
            count(cases, failure),
            count(cases, error),
            count(cases, skipped),
            escape(report.date.as_str()),
        );
        for case in cases {
            write_case(&mut xml, name, case);
        }
        xml.push_str("  </testsuite>\n");
    }
    xml.push_str("</testsuites>\n");
    xml
}

/// One `<testcase>` of the suite `suite`.
fn write_case(xml: &mut String, suite: &str, case: &Case) {
    let _ = write!(
        xml,
        "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.6}\"",
        escape(suite),
        escape(case.name.as_str()),
        case.seconds
    );
    let body = match &case.outcome {
        Outcome::Passed => String::new(),
        Outcome::Failure(kind, message) => format!(
            "      <failure type=\"{kind}\" message=\"{}\"/>\n",
            escape(message.as_str())
        ),
        Outcome::Error(message) => format!(
            "      <error type=\"not_measured\" message=\"{}\"/>\n",
            escape(message.as_str())
        ),
        Outcome::Skipped(message) => {
            format!(
                "      <skipped message=\"{}\"/>\n",
                escape(message.as_str())
            )
        }
    };
    let out = if case.out.is_empty() {
        String::new()
    } else {
        format!(
            "      <system-out>{}</system-out>\n",
            escape(case.out.as_str())
        )
    };
    if body.is_empty() && out.is_empty() {
        xml.push_str("/>\n");
    } else {
        let _ = write!(xml, ">\n{body}{out}    </testcase>\n");
    }
}

fn case(cell: &CellResult) -> Case {
    let name = format!("{}/{}", cell.fixture, cell.workload);
    let seconds = cell.fork.median_time.unwrap_or(0.0);
    let outcome = match cell.parity {
        CellParity::Ok => Outcome::Passed,
        CellParity::Fail => Outcome::Failure(
            "parity",
            cell.parity_failures
                .iter()
                .map(|f| f.message.clone())
                .collect::<Vec<_>>()
                .join("; "),
        ),
        CellParity::AbsentUpstream => {
            Outcome::Skipped("absent upstream (fork-only workload)".into())
        }
        CellParity::AbsentFork => Outcome::Skipped("absent in the fork".into()),
        CellParity::Unavailable => Outcome::Error(
            cell.not_measured_reasons()
                .into_iter()
                .map(|(side, reason)| match side {
                    Some(side) => format!("{side}: {reason}"),
                    None => reason.to_string(),
                })
                .collect::<Vec<_>>()
                .join("; "),
        ),
    };
    let mut out = String::new();
    if let Some(speedup) = cell.speedup {
        let _ = write!(out, "speedup {speedup:.3}x");
        if let Some([lo, hi]) = cell.speedup_ci95 {
            let _ = write!(out, " [{lo:.3}, {hi:.3}]");
        }
        if let Some(verdict) = cell.verdict {
            let _ = write!(out, ", verdict {}", crate::words::verdict_word(verdict));
        }
        let _ = write!(out, ", {} pairs", cell.pairs);
    }
    Case {
        name,
        seconds,
        outcome,
        out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_become_cases_with_parity_failures_errors_and_skips_escaped() {
        let mut report = abfleet_core::report::samples::sample_report();
        report.name = "a<b>&\"c\"".into();
        // One parity failure, one cell that could not be measured, a run-level error.
        report.cells[1].parity = CellParity::Fail;
        report.cells[1].parity_failures = vec![abfleet_core::parity::ParityFailure {
            metric: "float_ssim".into(),
            rule: Default::default(),
            frame: None,
            upstream_value: Some(0.9),
            fork_value: Some(0.95),
            delta: 0.05,
            allowed: 1e-5,
            message: "float_ssim <moved> by 5e-2".into(),
        }];
        report.cells[2].parity = CellParity::Unavailable;
        report.errors = vec!["agent lost".into()];
        let xml = render_junit(&report);
        // Well formed: quick-xml reads it to the end.
        let mut reader = quick_xml::Reader::from_str(&xml);
        let mut cases = 0;
        loop {
            match reader.read_event().unwrap() {
                quick_xml::events::Event::Eof => break,
                quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e)
                    if e.name().0 == "testcase" =>
                {
                    cases += 1
                }
                _ => {}
            }
        }
        assert_eq!(
            cases,
            report.cells.len() + usize::from(!report.errors.is_empty())
        );
        assert!(xml.contains("a&lt;b&gt;&amp;&quot;c&quot;"), "{xml}");
        assert!(
            xml.contains("tests=\"5\" failures=\"1\" errors=\"2\" skipped=\"1\""),
            "{xml}"
        );
        assert!(xml.contains("float_ssim &lt;moved&gt; by 5e-2"), "{xml}");
        assert!(xml.contains("<skipped message=\"absent upstream"), "{xml}");
        assert!(xml.contains("<system-out>speedup 4.032x"), "{xml}");
    }
}
