//! The words and numbers of a cell as the HTML tables show them (report.md's columns, without
//! Markdown); the words both pages share are `abfleet_render::words`.

use abfleet_core::cell::{CellParity, CellResult};
pub(crate) use abfleet_render::words::{side_cell, small_delta, stop_reason_words, verdict_word};

/// The speedup and, when there is one, its interval and verdict.
pub(crate) fn speedup_text(cell: &CellResult) -> (String, String) {
    let detail = match (cell.speedup_ci95, cell.verdict) {
        (Some([lo, hi]), Some(verdict)) => format!("[{lo:.2}–{hi:.2}] {}", verdict_word(verdict)),
        _ => String::new(),
    };
    match cell.speedup {
        Some(s) if cell.parity == CellParity::Fail => {
            (format!("{s:.2}x"), "parity failed: not counted".to_string())
        }
        Some(s) => (format!("{s:.2}x"), detail),
        None if cell.parity == CellParity::AbsentUpstream => {
            ("absent upstream".to_string(), String::new())
        }
        None if cell.parity == CellParity::AbsentFork => {
            ("absent in fork".to_string(), String::new())
        }
        None => ("—".to_string(), String::new()),
    }
}

/// The largest pooled-mean delta, signed, as report.md's "Score delta" column.
pub(crate) fn delta_text(cell: &CellResult) -> String {
    match cell.parity {
        CellParity::AbsentUpstream => "absent upstream".to_string(),
        CellParity::AbsentFork => "absent in fork".to_string(),
        CellParity::Unavailable => "—".to_string(),
        CellParity::Ok | CellParity::Fail => {
            let text = match cell.largest_score_delta() {
                Some((_, 0.0)) => "0".to_string(),
                Some((_, delta)) if !delta.is_finite() => "null vs number".to_string(),
                Some((metric, delta)) => format!("{delta:+.1e} ({metric})"),
                None => "no shared metric".to_string(),
            };
            if cell.parity == CellParity::Fail {
                let rules: std::collections::BTreeSet<&str> = cell
                    .parity_failures
                    .iter()
                    .map(|f| f.rule.describe())
                    .collect();
                format!(
                    "FAIL ({}) {text}",
                    rules.into_iter().collect::<Vec<_>>().join(", ")
                )
            } else {
                text
            }
        }
    }
}

/// Below the table: the pairs, the largest per-frame delta, a failed side's reason, and
/// the agent and certificate that sent the cell.
pub(crate) fn cell_detail(cell: &CellResult) -> Vec<String> {
    let mut parts = Vec::new();
    if cell.pairs > 0 {
        parts.push(format!(
            "{} pairs ({})",
            cell.pairs,
            stop_reason_words(cell.stop_reason)
        ));
    }
    let worst = cell
        .max_frame_delta
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1));
    if let Some((metric, delta)) = worst.filter(|(_, d)| **d > 0.0) {
        let frame = cell
            .max_frame_delta_at
            .get(metric)
            .map_or(String::new(), |f| format!(", frame {f}"));
        let over = cell.frames_over_gate.get(metric).copied().unwrap_or(0);
        parts.push(format!(
            "largest per-frame delta {} ({metric}{frame}), {over} frame(s) over the threshold",
            small_delta(*delta)
        ));
    }
    for (side, reason) in cell.not_measured_reasons() {
        parts.push(match side {
            Some(side) => format!("{side} not measured: {reason}"),
            None => format!("not measured: {reason}"),
        });
    }
    // Who sent the cell, as the coordinator authenticated it (docs/security.md).
    if let Some(by) = &cell.measured_by {
        parts.push(match &by.certificate {
            Some(certificate) => format!(
                "measured by agent {} (certificate {certificate})",
                by.agent_id
            ),
            None => format!("measured by agent {}", by.agent_id),
        });
    }
    parts
}
