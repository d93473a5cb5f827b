//! report.md's "Score parity across generations": one row per cell (fixture × feature) with
//! the metric whose scores spread most between the generations that ran it, each
//! generation's pooled score, the spread against the gate and who disagrees. The data is
//! `core::report::cross_parity`'s; this module only picks the row per cell and words it.

use std::fmt::Write as _;

use abfleet_core::report::cross_parity::CrossParityRow;
use abfleet_core::report::markdown_text::{code, text};
use abfleet_core::report::Report;

/// Per cell, the row of its metric with the largest spread (the first metric on a tie),
/// in the report's order.
pub fn widest_per_cell(rows: &[CrossParityRow]) -> Vec<&CrossParityRow> {
    let mut picked: Vec<&CrossParityRow> = Vec::new();
    for row in rows {
        match picked
            .iter_mut()
            .find(|p| p.fixture == row.fixture && p.workload == row.workload)
        {
            Some(best) if row.spread > best.spread => *best = row,
            Some(_) => {}
            None => picked.push(row),
        }
    }
    picked
}

/// The sources (generations, backends) of the table's columns, in first-seen order.
pub fn sources(rows: &[CrossParityRow]) -> Vec<&str> {
    let mut seen: Vec<&str> = Vec::new();
    for row in rows {
        for source in row.values.keys() {
            if !seen.contains(&source.as_str()) {
                seen.push(source);
            }
        }
    }
    seen
}

/// `agrees` or `x86 vs arm: 1.2e-4 > 1e-5`, the same words everywhere.
pub fn verdict_words(row: &CrossParityRow) -> String {
    if row.spread == 0.0 {
        "identical".to_string()
    } else if row.agrees() {
        format!("agrees (spread {:.1e} ≤ {:.0e})", row.spread, row.gate)
    } else {
        format!(
            "DISAGREES: {} (spread {:.1e} > {:.0e})",
            row.disagrees.join(" and "),
            row.spread,
            row.gate
        )
    }
}

pub(crate) fn render_cross_parity(out: &mut String, report: &Report) {
    if report.cross_parity.is_empty() {
        return;
    }
    let rows = widest_per_cell(&report.cross_parity);
    let columns = sources(&report.cross_parity);
    let disagreeing = rows.iter().filter(|r| !r.agrees()).count();
    let _ = writeln!(out, "### Score parity across generations\n");
    let _ = writeln!(
        out,
        "The fork's pooled score of each cell on every generation that ran it; per cell the metric whose scores spread most. {} of {} cells agree everywhere within the gate ({:.0e}, or a metric's allowance){}.\n",
        rows.len() - disagreeing,
        rows.len(),
        report.max_score_delta,
        if disagreeing == 0 {
            ""
        } else {
            "; the generation farthest from the others is named"
        }
    );
    let _ = write!(out, "| Fixture | Feature | Metric |");
    for column in &columns {
        let _ = write!(out, " {} |", code(column));
    }
    let _ = writeln!(out, " Spread |");
    let _ = writeln!(out, "|---|---|---|{}---|", "---|".repeat(columns.len()));
    for row in rows {
        let _ = write!(
            out,
            "| {} | {} | {} |",
            text(&row.fixture),
            text(&row.workload),
            code(&row.metric)
        );
        for column in &columns {
            let value = row
                .values
                .get(*column)
                .map_or("—".to_string(), |v| format!("{v:.6}"));
            let _ = write!(out, " {value} |");
        }
        let _ = writeln!(out, " {} |", text(&verdict_words(row)));
    }
    out.push('\n');
}
