//! A bisect as its report section: the first bad commit (or why none was named), the range
//! searched and a row per step (`abfleet bisect`, and the run it bisected in report.md).

use std::fmt::Write;

use abfleet_core::bisect::{BisectRecord, Bisection};
use abfleet_core::events::BuildStatus;
use abfleet_core::report::markdown_text;

/// A recorded bisect as its run's report shows it: the section, with when it was recorded.
pub(crate) fn render_record(record: &BisectRecord) -> String {
    let mut section = render(&record.bisection, &record.what);
    if !record.recorded.is_empty() {
        if let Some(end) = section.find('\n') {
            section.insert_str(end + 1, &format!("\nRecorded {}.\n", record.recorded));
        }
    }
    section
}

/// The bisect's report section.
pub fn render(bisection: &Bisection, what: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## Bisect of {what}\n");
    match (bisection.first_bad(), &bisection.stopped) {
        (Some(commit), _) => {
            let _ = writeln!(
                out,
                "**First bad commit: `{}`** — {}\n",
                commit.id, commit.subject
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(out, "**No first bad commit named**: {why}.\n");
        }
        (None, None) => {
            let _ = writeln!(out, "The search has not finished.\n");
        }
    }
    let _ = writeln!(
        out,
        "{} commits from `{}` (good) to `{}` (bad), first-parent. Each step times the candidate against the good commit `{}` with the paired method.\n",
        bisection.commits.len(),
        bisection.commits[0].short_id(),
        bisection.commits[bisection.commits.len() - 1].short_id(),
        bisection.commits[0].short_id(),
    );
    let _ = writeln!(
        out,
        "| Step | Commit | Subject | Speedup vs good [95% CI] | Verdict | Pairs | Decision | Builds (good, candidate) | Run |\n|---|---|---|---|---|---|---|---|---|"
    );
    for (n, step) in bisection.steps.iter().enumerate() {
        let speedup = match (step.speedup, step.speedup_ci95) {
            (Some(s), Some([lo, hi])) => format!("{s:.3}x [{lo:.3}, {hi:.3}]"),
            (Some(s), None) => format!("{s:.3}x"),
            _ => "-".into(),
        };
        let build = |status: Option<BuildStatus>| match status {
            Some(BuildStatus::Built) => "built",
            Some(BuildStatus::Cached) => "cached",
            Some(BuildStatus::Failed) => "failed",
            None => "-",
        };
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {} | {}{} | {} | {}, {} | `{}` |",
            n + 1,
            step.commit.short_id(),
            markdown_text::text(&step.commit.subject),
            speedup,
            step.verdict.map_or("-", crate::words::verdict_word),
            step.pairs,
            if step.retried { " (retried)" } else { "" },
            step.decision.words(),
            build(step.good_build),
            build(step.candidate_build),
            step.run_id
        );
    }
    for step in &bisection.steps {
        if let Some(note) = &step.parity_note {
            let _ = writeln!(out, "\n- `{}`: {note}", step.commit.short_id());
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use abfleet_core::bisect::Decision;
    use abfleet_core::report::samples::{bisect_commits, bisect_step, bisection};

    #[test]
    fn a_found_commit_heads_the_section() {
        let b = bisection(9, 5);
        assert!(render(&b, "`psnr`")
            .contains("**First bad commit: `0000000000000000000000000000000000000005`**"));
    }

    #[test]
    fn an_undecidable_step_is_said_and_no_commit_is_named() {
        let mut b = Bisection::new(bisect_commits(5)).unwrap();
        let s = bisect_step(&b, 4, Decision::Bad);
        b.record(4, s);
        let mid = b.next().unwrap();
        let s = bisect_step(&b, mid, Decision::Undecidable);
        b.record(mid, s);
        let text = render(&b, "`psnr`");
        assert!(
            text.contains("No first bad commit named") && text.contains("undecidable"),
            "{text}"
        );
    }

    #[test]
    fn a_recorded_bisect_says_when_under_its_heading() {
        let record = BisectRecord {
            what: "`psnr`".into(),
            recorded: "2026-12-07 03:00 UTC".into(),
            bisection: bisection(4, 2),
        };
        let section = render_record(&record);
        assert!(
            section.starts_with("## Bisect of `psnr`\n\nRecorded 2026-12-07 03:00 UTC.\n"),
            "{section}"
        );
    }
}
