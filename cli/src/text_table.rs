//! Every table the CLI prints (`abfleet runs`, `abfleet agents`, the per-feature table):
//! aligned plain-text columns, each cell passed through [`terminal_text::visible_cell`] here,
//! where the cell is rendered, so no command can print a hostname or a title raw.

use std::fmt::Write as _;

use crate::terminal_text;

/// Columns under a header, aligned by the widest cell (in characters), two spaces apart.
pub struct TextTable {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl TextTable {
    pub fn new<S: AsRef<str>>(header: impl IntoIterator<Item = S>) -> TextTable {
        TextTable {
            header: header.into_iter().map(visible_cell).collect(),
            rows: Vec::new(),
        }
    }

    /// One row; its cells are made visible as they are added.
    pub fn row<S: AsRef<str>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows
            .push(cells.into_iter().map(visible_cell).collect());
    }

    /// The header and the rows, one line each, trailing spaces trimmed.
    pub fn render(&self) -> String {
        let columns = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0);
        let mut widths = vec![0; columns];
        for line in std::iter::once(&self.header).chain(&self.rows) {
            for (width, cell) in widths.iter_mut().zip(line) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for line in std::iter::once(&self.header).chain(&self.rows) {
            let text = line
                .iter()
                .zip(&widths)
                .map(|(cell, &width)| format!("{cell:<width$}"))
                .collect::<Vec<_>>()
                .join("  ");
            let _ = writeln!(out, "{}", text.trim_end());
        }
        out
    }
}

fn visible_cell(cell: impl AsRef<str>) -> String {
    terminal_text::visible_cell(cell.as_ref()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_cells_cannot_reach_the_terminal() {
        let mut table = TextTable::new(["agent", "host", "state"]);
        table.row(["a1", "bench-7", "idle"]);
        table.row(["a2", "x\u{1b}[2J\u{7}\ry\nz", "busy"]);
        assert_eq!(
            table.render(),
            "agent  host                         state\n\
             a1     bench-7                      idle\n\
             a2     x\\u{1b}[2J\\u{7}\\u{d}y\\u{a}z  busy\n"
        );
    }
}
