//! `abfleet docs update`: a run written into the fork's own pages, idempotently.
//!
//! - `docs/benchmarks.md` gets the run's dated section (`docs_section::render_docs_section`,
//!   in the page's table shapes), between `<!-- abfleet:run RUN begin -->` and `… end -->` markers:
//!   a section already there is replaced in place, a new one goes above the newest earlier
//!   dated section (`### `), so the page stays newest first; text outside the markers is
//!   never touched.
//! - `docs/state.md` gets one row per unexplained delta of the run — each regression flag
//!   against the previous comparable run (a speedup that shrank, a fork that got slower, a
//!   parity delta that grew) and each parity failure — in an `abfleet` table it adds once;
//!   a row carries its key in a trailing comment, so a row already there is not added again.
//!
//! Running an update twice changes nothing the second time.

use std::fmt::Write;

use crate::docs_section::render_docs_section;
use abfleet_core::cell::CellParity;
use abfleet_core::report::markdown_text::{code, text};
use abfleet_core::report::{Report, ANY_GENERATION};

fn begin_marker(run_id: &str) -> String {
    format!("<!-- abfleet:run {run_id} begin -->")
}

fn end_marker(run_id: &str) -> String {
    format!("<!-- abfleet:run {run_id} end -->")
}

/// `page` with the run's section written in (replaced if present, inserted if not).
pub fn update_benchmarks(page: &str, report: &Report) -> String {
    let (begin, end) = (begin_marker(&report.run_id), end_marker(&report.run_id));
    let block = format!("{begin}\n{}{end}\n", render_docs_section(report));
    if let (Some(start), Some(stop)) = (page.find(&begin), page.find(&end)) {
        if stop > start {
            let mut after = stop + end.len();
            if page[after..].starts_with('\n') {
                after += 1;
            }
            return format!("{}{block}{}", &page[..start], &page[after..]);
        }
    }
    // Above the newest dated section (the page lists runs newest first), else at the end.
    let insert_at = section_start(page);
    match insert_at {
        Some(at) => format!("{}{block}\n{}", &page[..at], &page[at..]),
        None => {
            let mut out = page.to_string();
            if !out.is_empty() && !out.ends_with("\n\n") {
                out.push_str(if out.ends_with('\n') { "\n" } else { "\n\n" });
            }
            out.push_str(&block);
            out
        }
    }
}

/// Where the first dated section or abfleet block of the page begins.
fn section_start(page: &str) -> Option<usize> {
    let mut offset = 0;
    for line in page.split_inclusive('\n') {
        if line.starts_with("### ") || line.starts_with("<!-- abfleet:run ") {
            return Some(offset);
        }
        offset += line.len();
    }
    None
}

const STATE_HEADING: &str = "## Unexplained deltas (abfleet)";
const STATE_HEADER: &str =
    "| Date | Run | Generation | Cell | What | Detail | Status |\n|---|---|---|---|---|---|---|\n";

/// One unexplained delta of the run: its key and its table row.
fn state_rows(report: &Report) -> Vec<(String, String)> {
    let date = report.day();
    let short_run: String = report.run_id.chars().take(8).collect();
    let mut rows = Vec::new();
    let mut row = |generation: &str, cell: &str, what: &str, detail: &str, key: String| {
        // The key holds names: escaped, it cannot close the HTML comment that carries it.
        let key = text(&key);
        rows.push((
            key.clone(),
            format!(
                "| {date} | `{short_run}` | {} | {} | {what} | {} | open — explain or fix <!-- abfleet:{key} --> |\n",
                code(generation),
                code(cell),
                text(detail)
            ),
        ));
    };
    for section in &report.generations {
        if let Some(since) = &section.since_previous {
            for flag in &since.flags {
                let cell = format!("{}/{}", flag.fixture, flag.workload);
                let what = format!(
                    "{} since run `{}`",
                    flag.kind.as_str(),
                    &since.run_id[..since.run_id.len().min(8)]
                );
                let key = format!(
                    "{}:{}:{cell}:{}{}",
                    report.run_id,
                    section.key,
                    flag.kind.as_str(),
                    flag.metric
                        .as_deref()
                        .map_or(String::new(), |m| format!(":{m}"))
                );
                let mut detail = flag.detail.clone();
                if !since.changes.is_empty() {
                    let _ = write!(detail, " (changed: {})", since.changes.join("; "));
                }
                row(&section.key, &cell, &what, &detail, key);
            }
        }
    }
    for cell in report.cells.iter().filter(|c| c.parity == CellParity::Fail) {
        let generation = cell.generation.as_deref().unwrap_or(ANY_GENERATION);
        let name = format!("{}/{}", cell.fixture, cell.workload);
        let detail: Vec<&str> = cell
            .parity_failures
            .iter()
            .map(|f| f.message.as_str())
            .collect();
        let key = format!("{}:{generation}:{name}:parity_fail", report.run_id);
        row(generation, &name, "parity failed", &detail.join("; "), key);
    }
    rows
}

/// `page` with a row for each of the run's unexplained deltas not yet in it.
pub fn update_state(page: &str, report: &Report) -> String {
    let new_rows: Vec<String> = state_rows(report)
        .into_iter()
        .filter(|(key, _)| !page.contains(&format!("<!-- abfleet:{key} -->")))
        .map(|(_, row)| row)
        .collect();
    if new_rows.is_empty() {
        return page.to_string();
    }
    let mut out = page.to_string();
    let Some(heading) = out.find(STATE_HEADING) else {
        if !out.is_empty() && !out.ends_with("\n\n") {
            out.push_str(if out.ends_with('\n') { "\n" } else { "\n\n" });
        }
        let _ = write!(
            out,
            "{STATE_HEADING}\n\nWritten by `abfleet docs update`: each regression against the previous comparable run and each parity failure, until someone explains or fixes it (edit the Status column; the rows are not rewritten).\n\n{STATE_HEADER}{}",
            new_rows.concat()
        );
        return out;
    };
    // After the last row of the table under the heading.
    let table_start = out[heading..]
        .find(STATE_HEADER)
        .map(|i| heading + i + STATE_HEADER.len());
    let Some(mut at) = table_start else {
        let after_heading = heading + STATE_HEADING.len();
        out.insert_str(
            after_heading,
            &format!("\n\n{STATE_HEADER}{}", new_rows.concat()),
        );
        return out;
    };
    for line in out[at..].split_inclusive('\n') {
        if !line.starts_with('|') {
            break;
        }
        at += line.len();
    }
    out.insert_str(at, &new_rows.concat());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use abfleet_core::report::history::{FlagKind, RegressionFlag, SincePrevious};

    fn flagged() -> Report {
        let mut report = abfleet_core::report::samples::sample_report();
        let key = report.generations[0].key.clone();
        report.generations[0].since_previous = Some(SincePrevious {
            run_id: "11111111-2222-3333-4444-555555555555".into(),
            date: "2026-12-01".into(),
            changes: vec!["fork `a` (a) → `b` (b)".into()],
            baseline_moved: None,
            fork_commit_then: Some("a".into()),
            fork_commit_now: Some("b".into()),
            matched_cells: 2,
            earlier_runs: Vec::new(),
            flags: vec![
                RegressionFlag {
                    fixture: "tiny".into(),
                    workload: "psnr".into(),
                    backend: None,
                    kind: FlagKind::ParityGrowth,
                    metric: Some("psnr_y".into()),
                    then: 0.0,
                    now: 3e-6,
                    then_run: None,
                    allowed: None,
                    detail: "`psnr_y` pooled |delta| 0 → 3e-6 | wide".into(),
                },
                RegressionFlag {
                    fixture: "tiny".into(),
                    workload: "psnr".into(),
                    backend: None,
                    kind: FlagKind::SpeedupShrank,
                    metric: None,
                    then: 2.0,
                    now: 1.5,
                    then_run: None,
                    allowed: None,
                    detail: "speedup 2.000x → 1.500x".into(),
                },
            ],
            parity_shrink: Vec::new(),
        });
        assert!(!key.is_empty());
        report
    }

    #[test]
    fn each_flag_is_one_row_added_once_under_one_heading_and_pipes_are_escaped() {
        let report = flagged();
        let page = update_state("# State\n", &report);
        assert_eq!(page.matches(STATE_HEADING).count(), 1, "{page}");
        let rows: Vec<&str> = page
            .lines()
            .filter(|l| l.contains("<!-- abfleet:"))
            .collect();
        assert_eq!(rows.len(), 2, "{page}");
        assert!(
            rows[0].contains("parity_growth since run `11111111`")
                && rows[0].contains("3e-6 \\| wide"),
            "{}",
            rows[0]
        );
        assert!(
            rows[1].contains("speedup_shrank") && rows[1].contains("(changed: fork"),
            "{}",
            rows[1]
        );
        assert_eq!(update_state(&page, &report), page, "idempotent");
        // A later run's rows go under the same table, after the earlier rows.
        let mut later = flagged();
        later.run_id = "99999999-0000-0000-0000-000000000000".into();
        let both = update_state(&page, &later);
        assert_eq!(both.matches(STATE_HEADING).count(), 1);
        let rows: Vec<&str> = both
            .lines()
            .filter(|l| l.contains("<!-- abfleet:"))
            .collect();
        assert_eq!(rows.len(), 4, "{both}");
        assert!(rows[3].contains("`99999999`"));
    }

    #[test]
    fn a_section_is_replaced_in_place_not_duplicated() {
        let report = abfleet_core::report::samples::sample_report();
        let page = "# Benchmarks\n\nintro\n";
        let once = update_benchmarks(page, &report);
        assert!(
            once.starts_with("# Benchmarks\n\nintro\n\n<!-- abfleet:run "),
            "{once}"
        );
        assert_eq!(update_benchmarks(&once, &report), once);
        let mut changed = report.clone();
        changed.upstream_ref = "v9.9.9".into();
        let replaced = update_benchmarks(&once, &changed);
        assert_eq!(
            replaced.matches("<!-- abfleet:run ").count(),
            2,
            "begin and end, once"
        );
        assert!(
            replaced.contains("upstream `v9.9.9`")
                && !replaced.contains(&format!("upstream `{}`", report.upstream_ref))
        );
    }
}
