//! The report's charts as SVG strings, drawn with `plotters`' SVG backend (text is written
//! as SVG `<text>`, no font is read or embedded). Each chart comes with the geometry a
//! reader (or a test) needs to turn drawn coordinates back into values.

mod cross_generation;
mod frame_delta;
mod history;
pub mod palette;
mod speedup;

pub use cross_generation::{cross_generation_chart, CrossGenerationChart};
pub use frame_delta::{frame_delta_chart, FrameDeltaChart, FrameDeltaSeries};
pub use history::{fork_median_history_chart, speedup_history_chart, HistoryChart};
pub use speedup::{speedup_chart, SpeedupChart, SpeedupRow};

/// Where speedup 0 and the axis' end fall on a chart's x axis, in SVG user units (whole
/// pixels, taken at the axis' two ends so rounding stays within a pixel): a speedup `s` is
/// drawn at `x_at_zero + s / end_speedup * (x_at_end - x_at_zero)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpeedupAxis {
    pub x_at_zero: i32,
    pub x_at_end: i32,
    pub end_speedup: f64,
}

/// A chart that could not be drawn says why instead.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartError(pub String);

impl std::fmt::Display for ChartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the chart could not be drawn: {}", self.0)
    }
}

pub(crate) fn chart_error<E: std::fmt::Debug>(err: E) -> ChartError {
    ChartError(format!("{err:?}"))
}

/// `[0, max]` with room for the whiskers, never narrower than the `same` band around 1.
pub(crate) fn speedup_range(highest: f64, practical_threshold: f64) -> f64 {
    let top = highest.max(1.0 + practical_threshold).max(1.2);
    (top * 1.12 * 10.0).ceil() / 10.0
}
