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

/// The mesh every chart draws: 13 px sans-serif tick labels and axis descriptions, no light
/// grid lines, pale bold ones.
pub(crate) fn house_style<'m, 'a, 'b, X, Y, DB>(
    mesh: &'m mut plotters::chart::MeshStyle<'a, 'b, X, Y, DB>,
) -> &'m mut plotters::chart::MeshStyle<'a, 'b, X, Y, DB>
where
    X: plotters::coord::ranged1d::Ranged,
    Y: plotters::coord::ranged1d::Ranged,
    DB: plotters::prelude::DrawingBackend,
{
    use plotters::style::{RGBColor, WHITE};
    mesh.label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 13))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(0xEE, 0xEE, 0xEE))
}

/// A chart's plotting area with `f64` on both axes (speedup and rows, or runs and values).
pub(crate) type FloatPlot<'a, 'b> = plotters::prelude::ChartContext<
    'a,
    plotters::prelude::SVGBackend<'b>,
    plotters::prelude::Cartesian2d<
        plotters::coord::types::RangedCoordf64,
        plotters::coord::types::RangedCoordf64,
    >,
>;

/// The speedup axis described as `x_desc`, the `same` band (1 ± the practical threshold)
/// shaded and the parity line at 1, over `top` units of rows.
pub(crate) fn draw_speedup_frame(
    chart: &mut FloatPlot<'_, '_>,
    x_desc: &str,
    practical_threshold: f64,
    top: f64,
) -> Result<(), ChartError> {
    use plotters::prelude::*;
    house_style(&mut chart.configure_mesh())
        .disable_y_mesh()
        .disable_y_axis()
        .x_desc(x_desc)
        .x_label_formatter(&|x| format!("{x:.1}x"))
        .draw()
        .map_err(chart_error)?;
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [
                (1.0 - practical_threshold, 0.0),
                (1.0 + practical_threshold, top),
            ],
            palette::SAME_BAND.filled(),
        )))
        .map_err(chart_error)?;
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(1.0, 0.0), (1.0, top)],
            palette::PARITY_LINE.stroke_width(1),
        )))
        .map_err(chart_error)?;
    Ok(())
}

/// A 95% interval's whisker at row `centre`, its caps `cap` units each way, clamped to the
/// axis `[0, x_max]`.
pub(crate) fn draw_whisker(
    chart: &mut FloatPlot<'_, '_>,
    [lo, hi]: [f64; 2],
    centre: f64,
    cap: f64,
    x_max: f64,
) -> Result<(), ChartError> {
    use plotters::prelude::*;
    let (lo, hi) = (lo.clamp(0.0, x_max), hi.clamp(0.0, x_max));
    let whisker = palette::WHISKER.stroke_width(2);
    chart
        .draw_series([
            PathElement::new(vec![(lo, centre), (hi, centre)], whisker),
            PathElement::new(vec![(lo, centre - cap), (lo, centre + cap)], whisker),
            PathElement::new(vec![(hi, centre - cap), (hi, centre + cap)], whisker),
        ])
        .map_err(chart_error)?;
    Ok(())
}

/// A label's font: sans-serif of `size`, vertically centred on its row.
pub(crate) fn text_style(
    size: u32,
    colour: &plotters::style::RGBColor,
    anchor: plotters::style::text_anchor::HPos,
) -> plotters::style::TextStyle<'static> {
    use plotters::prelude::*;
    use plotters::style::text_anchor::{Pos, VPos};
    ("sans-serif", size)
        .into_font()
        .color(colour)
        .pos(Pos::new(anchor, VPos::Center))
}
