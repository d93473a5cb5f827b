//! What can go wrong reading a tool's output, and where in the text it went wrong.

use std::fmt;

use super::OutputFormat;

/// Where in the text a problem is: 1-based line, and 1-based column where it is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub column: Option<usize>,
}

impl Position {
    pub fn line(line: usize) -> Self {
        Position { line, column: None }
    }

    pub fn line_column(line: usize, column: usize) -> Self {
        Position {
            line,
            column: Some(column),
        }
    }

    /// The position of a byte offset into `text` (clamped to its end; columns count chars).
    pub fn of_offset(text: &str, offset: usize) -> Self {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Position::line_column(line, before[line_start..].chars().count() + 1)
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.column {
            Some(column) => write!(f, "line {}, column {column}", self.line),
            None => write!(f, "line {}", self.line),
        }
    }
}

/// Whose value a metric is: one frame's, or one statistic of the pooled block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Site {
    /// The frame with this `frameNum`.
    Frame(u64),
    /// The frame at this 0-based place in the list, when its `frameNum` is not yet known.
    FrameAt(usize),
    /// The pooled statistic with this name (`min`, `max`, `mean`, `harmonic_mean`).
    Pooled(String),
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Site::Frame(frame_num) => write!(f, "frame {frame_num}"),
            Site::FrameAt(index) => write!(f, "the frame at index {index}"),
            Site::Pooled(stat) => write!(f, "the pooled `{stat}`"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The text stops before the document does (an interrupted or crashed run).
    #[error(
        "failed to read vmaf {} output: it ends early at {at}; the tool may have been interrupted — check its stderr",
        .format.extension()
    )]
    Truncated { format: OutputFormat, at: Position },
    /// The text is not well-formed, or not shaped like the tool's output.
    #[error(
        "failed to read vmaf {} output: {problem} at {at}; the tool may have been interrupted — check its stderr",
        .format.extension()
    )]
    Malformed {
        format: OutputFormat,
        at: Position,
        problem: String,
    },
    /// A metric value that is not a finite number (`nan` from C's printf, `null`, a string).
    #[error(
        "failed to read vmaf {} output: metric `{metric}` of {site} is {found}, not a number, at {at}; the tool could not score it — check its stderr",
        .format.extension()
    )]
    NotANumber {
        format: OutputFormat,
        at: Position,
        metric: String,
        site: Site,
        /// What stood there instead, as the message shows it (e.g. "`nan`", "null").
        found: String,
    },
}

impl OutputError {
    pub fn format(&self) -> OutputFormat {
        match self {
            OutputError::Truncated { format, .. }
            | OutputError::Malformed { format, .. }
            | OutputError::NotANumber { format, .. } => *format,
        }
    }

    pub fn position(&self) -> Position {
        match self {
            OutputError::Truncated { at, .. }
            | OutputError::Malformed { at, .. }
            | OutputError::NotANumber { at, .. } => *at,
        }
    }
}
