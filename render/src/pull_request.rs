//! What a pull request hears about the run it asked for: a verdict for its head commit's
//! status (success, failure, neutral, error, with one line for GitHub's 140-character
//! description) and one comment with the per-feature table — speedup, interval, verdict and
//! pooled score delta per cell, the parity verdict, a link to the report. The comment starts
//! with a marker naming the spec, so a rerun of the same spec finds and updates its own
//! comment instead of adding another (`coordinator::outbound::github`).

use std::fmt::Write as _;

use abfleet_core::cell::{CellParity, CellResult};
use abfleet_core::exit;
use abfleet_core::paired::Verdict;
use abfleet_core::report::history::FlagKind;
use abfleet_core::report::markdown_text::{code, prose, text};
use abfleet_core::report::{Report, ScoreParity, ANY_GENERATION};

/// A commit status's state, plus `neutral` where a check run can say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrState {
    /// Queued or running.
    Pending,
    /// Every cell kept parity, none is slower, nothing regressed, nothing unsure.
    Success,
    /// Parity failed, a cell is significantly slower, a cell regressed against the previous
    /// run, or a retuning check failed.
    Failure,
    /// Nothing failed, but some cells could not tell the sides apart.
    Neutral,
    /// The run could not be carried out, or was cancelled.
    Error,
}

impl PrState {
    /// The commit status API's word (which has no `neutral`: it posts `success`, and the
    /// description says unsure).
    pub fn status_state(self) -> &'static str {
        match self {
            PrState::Pending => "pending",
            PrState::Success | PrState::Neutral => "success",
            PrState::Failure => "failure",
            PrState::Error => "error",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PrState::Pending => "pending",
            PrState::Success => "success",
            PrState::Failure => "failure",
            PrState::Neutral => "neutral",
            PrState::Error => "error",
        }
    }
}

/// The verdict of a finished run and its one-line description (at most 140 characters).
pub fn pr_verdict(report: &Report) -> (PrState, String) {
    let measured: Vec<&CellResult> = report
        .cells
        .iter()
        .filter(|cell| cell.rejected.is_empty())
        .collect();
    let count = |verdict: Verdict| {
        measured
            .iter()
            .filter(|c| c.verdict == Some(verdict))
            .count()
    };
    let slower: Vec<&&CellResult> = measured
        .iter()
        .filter(|c| c.verdict == Some(Verdict::Slower))
        .collect();
    let regressions: usize = report
        .generations
        .iter()
        .filter_map(|g| g.since_previous.as_ref())
        .flat_map(|since| since.flags.iter())
        .filter(|flag| matches!(flag.kind, FlagKind::SpeedupShrank | FlagKind::ForkSlower))
        .count();
    let tally = format!(
        "{} faster, {} same, {} slower, {} unsure",
        count(Verdict::Faster),
        count(Verdict::Same),
        slower.len(),
        count(Verdict::Unsure)
    );
    let (state, line) = if report.status == "cancelled" || report.exit_code == exit::CANCELLED {
        (PrState::Error, "the run was cancelled".to_string())
    } else if report.exit_code == exit::PARITY_FAILED || report.score_parity == ScoreParity::Fail {
        let failed: Vec<&str> = measured
            .iter()
            .filter(|c| c.parity == CellParity::Fail)
            .map(|c| c.workload.as_str())
            .collect();
        (
            PrState::Failure,
            format!(
                "parity FAILED on {}: a speedup bought with a score change",
                failed.join(", ")
            ),
        )
    } else if report.exit_code == exit::NOT_CARRIED_OUT || report.status == "failed" {
        (
            PrState::Error,
            format!(
                "not carried out: {}",
                report
                    .errors
                    .first()
                    .map_or("see the report", String::as_str)
            ),
        )
    } else if report.exit_code == exit::TUNING_FAILED {
        (
            PrState::Failure,
            format!("a retuning check failed; {tally}"),
        )
    } else if !slower.is_empty() {
        let names: Vec<String> = slower
            .iter()
            .map(|c| format!("{} {:.2}x", c.workload, c.speedup.unwrap_or(f64::NAN)))
            .collect();
        (
            PrState::Failure,
            format!("slower: {}; parity ok", names.join(", ")),
        )
    } else if regressions > 0 {
        (
            PrState::Failure,
            format!("{regressions} cell(s) regressed since the previous run; {tally}"),
        )
    } else if count(Verdict::Unsure) > 0 {
        (PrState::Neutral, format!("unsure: {tally}; parity ok"))
    } else {
        let geomean = report
            .geomean_speedup
            .map_or(String::new(), |g| format!("; geomean {g:.2}x"));
        (PrState::Success, format!("{tally}; parity ok{geomean}"))
    };
    (state, clip(&line, 140))
}

/// The marker a comment of this spec's runs starts with.
pub fn comment_marker(spec_name: &str) -> String {
    format!(
        "<!-- abfleet:pull-request-report spec={} -->",
        spec_name.replace("--", "- -")
    )
}

/// The comment for a finished run: marker, verdict, one table row per cell, parity, link.
pub fn render_pr_comment(report: &Report, report_url: Option<&str>) -> String {
    let (state, line) = pr_verdict(report);
    let mut out = comment_marker(&report.name);
    let fork = report.fork.resolved.as_deref().unwrap_or(&report.fork_ref);
    let _ = write!(
        out,
        "\n### abfleet: {} — fork {} vs upstream {}\n\n**{}**: {}\n\n",
        text(&report.name),
        code(&fork.chars().take(12).collect::<String>()),
        code(&report.upstream_ref),
        state.as_str(),
        prose(&line)
    );
    let several = report.generations.len() > 1;
    out.push_str(if several {
        "| Generation | Feature | Fixture | Speedup | 95% interval | Verdict | Pooled score delta | Parity |\n|---|---|---|---|---|---|---|---|\n"
    } else {
        "| Feature | Fixture | Speedup | 95% interval | Verdict | Pooled score delta | Parity |\n|---|---|---|---|---|---|---|\n"
    });
    for cell in &report.cells {
        let generation = if several {
            format!(
                "| {} ",
                code(cell.generation.as_deref().unwrap_or(ANY_GENERATION))
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{generation}| {} | {} | {} | {} | {} | {} | {} |",
            text(&cell.workload),
            text(&cell.fixture),
            speedup(cell),
            cell.speedup_ci95
                .map_or("—".to_string(), |[lo, hi]| format!("[{lo:.2}, {hi:.2}]")),
            verdict(cell),
            delta(cell),
            parity(cell)
        );
    }
    let _ = writeln!(
        out,
        "\nScore parity: **{}** (gate: every shared metric's pooled mean within {:e}).",
        match report.score_parity {
            ScoreParity::Ok => "OK",
            ScoreParity::Fail => "FAIL",
            ScoreParity::NotRun => "not run",
        },
        report.max_score_delta
    );
    let link = match report_link_text(report_url, &report.run_id) {
        Some(url) => format!("[The full report]({url})"),
        None => "The full report: `abfleet report RUN`".to_string(),
    };
    let _ = writeln!(
        out,
        "\n{link} · run {} · {}",
        code(&report.run_id),
        report.date
    );
    out
}

/// `{base}/runs/{run_id}` when the web view's address is known.
pub fn report_link_text(report_url: Option<&str>, run_id: &str) -> Option<String> {
    report_url.map(|base| format!("{}/runs/{run_id}", base.trim_end_matches('/')))
}

fn speedup(cell: &CellResult) -> String {
    if !cell.rejected.is_empty() {
        return "rejected".to_string();
    }
    match (cell.speedup, cell.parity) {
        (Some(s), CellParity::Fail) => format!("~~{s:.2}x~~"),
        (Some(s), _) => format!("{s:.2}x"),
        (None, CellParity::AbsentUpstream) => "absent upstream".to_string(),
        (None, CellParity::AbsentFork) => "absent in fork".to_string(),
        (None, _) => "not measured".to_string(),
    }
}

fn verdict(cell: &CellResult) -> &'static str {
    match cell.verdict {
        Some(Verdict::Faster) => "faster",
        Some(Verdict::Slower) => "**slower**",
        Some(Verdict::Same) => "same",
        Some(Verdict::Unsure) => "unsure",
        None => "—",
    }
}

fn delta(cell: &CellResult) -> String {
    match cell.largest_score_delta() {
        None => "—".to_string(),
        Some((metric, 0.0)) => format!("{} 0", text(metric)),
        Some((metric, d)) if !d.is_finite() => format!("{} null vs number", text(metric)),
        Some((metric, d)) => format!("{} {d:+.1e}", text(metric)),
    }
}

fn parity(cell: &CellResult) -> &'static str {
    match cell.parity {
        CellParity::Ok => "ok",
        CellParity::Fail => "**FAIL**",
        CellParity::AbsentUpstream | CellParity::AbsentFork => "—",
        _ => "not measured",
    }
}

fn clip(line: &str, limit: usize) -> String {
    if line.chars().count() <= limit {
        return line.to_string();
    }
    let mut clipped: String = line.chars().take(limit - 1).collect();
    clipped.push('…');
    clipped
}

#[cfg(test)]
mod tests;
