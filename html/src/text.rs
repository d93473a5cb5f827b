//! The words and numbers of a cell as the HTML tables show them (report.md's columns, without
//! Markdown); the words both pages share are `abfleet_render::words`.

use abfleet_core::cell::CellResult;
use abfleet_render::words::{
    cell_notes, delta_words, measured_by_words, speedup_words, Plain, SpeedupWords,
};
pub(crate) use abfleet_render::words::{side_cell, verdict_word};

/// The speedup and what qualifies it (its interval and verdict, or why it does not count),
/// for two cells of the table.
pub(crate) fn speedup_text(cell: &CellResult) -> (String, String) {
    match speedup_words(cell) {
        SpeedupWords::Measured { value, interval } => (value, interval.unwrap_or_default()),
        SpeedupWords::ParityFailed { value } => (value, "parity failed: not counted".to_string()),
        SpeedupWords::Absent(word) => (word.to_string(), String::new()),
        SpeedupWords::NotTimed(why) => (why, String::new()),
        SpeedupWords::Rejected => ("rejected".to_string(), String::new()),
        SpeedupWords::Missing => ("—".to_string(), String::new()),
    }
}

/// The largest pooled-mean delta, signed, as report.md's "Score delta" column.
pub(crate) fn delta_text(cell: &CellResult) -> String {
    delta_words(cell, &Plain)
}

/// Below the table: the pairs, the largest per-frame delta, a failed side's reason, and
/// the agent and certificate that sent the cell.
pub(crate) fn cell_detail(cell: &CellResult) -> Vec<String> {
    let mut notes = cell_notes(cell, &Plain);
    if let Some(by) = &cell.measured_by {
        notes.push(format!("measured by {}", measured_by_words(by, &Plain)));
    }
    notes
}
