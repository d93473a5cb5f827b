//! A generation's speedup chart: one horizontal bar per measured cell (fixture/workload),
//! its 95% bootstrap interval as a whisker, the `same` band (1 ± the practical threshold)
//! shaded, the verdict and pair count as a label; a parity failure drawn in red and labelled
//! as one; absent-upstream and unmeasured rows named, without a bar.

use abfleet_core::cell::{CellParity, CellResult};
use abfleet_core::paired::Verdict;
use plotters::prelude::*;
use plotters::style::text_anchor::HPos;

use super::{
    chart_error, draw_speedup_frame, draw_whisker, palette, speedup_range, text_style, ChartError,
    FloatPlot, SpeedupAxis,
};

/// One row of the chart: what a cell says about the speedup.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeedupRow {
    pub label: String,
    pub speedup: Option<f64>,
    pub ci95: Option<[f64; 2]>,
    pub verdict: Option<Verdict>,
    pub parity: CellParity,
    pub pairs: u32,
}

impl SpeedupRow {
    pub fn of(cell: &CellResult) -> SpeedupRow {
        SpeedupRow {
            label: format!("{} / {}", cell.fixture, cell.workload),
            speedup: cell.speedup,
            ci95: cell.speedup_ci95,
            verdict: cell.verdict,
            parity: cell.parity,
            pairs: cell.pairs,
        }
    }

    /// The bar's fill: red for a parity failure, else the verdict's colour.
    pub fn fill(&self) -> RGBColor {
        if self.parity == CellParity::Fail {
            return palette::PARITY_FAIL;
        }
        match self.verdict {
            Some(Verdict::Faster) => palette::FASTER,
            Some(Verdict::Slower) => palette::SLOWER,
            Some(Verdict::Same) => palette::SAME,
            Some(Verdict::Unsure) | None => palette::UNSURE,
        }
    }

    /// The words right of the bar.
    pub fn label_text(&self) -> String {
        let pairs = if self.pairs == 1 {
            "1 pair".to_string()
        } else {
            format!("{} pairs", self.pairs)
        };
        match (self.speedup, self.parity) {
            (Some(s), CellParity::Fail) => format!("{s:.2}x — parity FAIL, not counted · {pairs}"),
            (Some(s), _) => {
                let interval = self
                    .ci95
                    .map(|[lo, hi]| format!(" [{lo:.2}–{hi:.2}]"))
                    .unwrap_or_default();
                let verdict = self
                    .verdict
                    .map(|v| format!(" {}", crate::text::verdict_word(v)))
                    .unwrap_or_default();
                format!("{s:.2}x{interval}{verdict} · {pairs}")
            }
            (None, CellParity::AbsentUpstream) => {
                "absent upstream: a fork-only feature, no speedup".to_string()
            }
            (None, CellParity::AbsentFork) => "absent in fork: no speedup".to_string(),
            (None, _) => "not measured".to_string(),
        }
    }
}

/// The drawn chart, and where speedups fall on its x axis.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeedupChart {
    pub svg: String,
    pub axis: SpeedupAxis,
    /// Rows drawn as a bar (those with a speedup).
    pub bars: usize,
}

const WIDTH_PX: u32 = 1000;
const ROW_PX: u32 = 30;
const NAME_COLUMN_PX: i32 = 230;
const LABEL_COLUMN_PX: i32 = 300;

pub fn speedup_chart(
    rows: &[SpeedupRow],
    practical_threshold: f64,
) -> Result<SpeedupChart, ChartError> {
    let highest = rows
        .iter()
        .flat_map(|r| [r.speedup, r.ci95.map(|[_, hi]| hi)])
        .flatten()
        .filter(|v| v.is_finite())
        .fold(1.0_f64, f64::max);
    let x_max = speedup_range(highest, practical_threshold);
    let row_count = rows.len().max(1);
    let top = row_count as f64;
    let height_px = 70 + ROW_PX * row_count as u32;
    let mut svg = String::new();
    let axis;
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH_PX, height_px)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let mut chart = ChartBuilder::on(&root)
            .margin_top(10)
            .margin_bottom(5)
            .margin_left(NAME_COLUMN_PX)
            .margin_right(LABEL_COLUMN_PX)
            .x_label_area_size(40)
            .build_cartesian_2d(0.0..x_max, 0.0..row_count as f64)
            .map_err(chart_error)?;
        draw_speedup_frame(
            &mut chart,
            "speedup (upstream median / fork median); above 1: the fork is faster",
            practical_threshold,
            top,
        )?;
        let right_px = chart.plotting_area().get_pixel_range().0.end;
        for (i, row) in rows.iter().enumerate() {
            // Row 0 at the top.
            let centre = top - i as f64 - 0.5;
            let (_, y_px) = chart.backend_coord(&(0.0, centre));
            root.draw(&Text::new(
                row.label.clone(),
                (NAME_COLUMN_PX - 8, y_px),
                text_style(14, &BLACK, HPos::Right),
            ))
            .map_err(chart_error)?;
            let colour = if row.parity == CellParity::Fail {
                palette::PARITY_FAIL
            } else if row.speedup.is_some() {
                BLACK
            } else {
                palette::MUTED_TEXT
            };
            root.draw(&Text::new(
                row.label_text(),
                (right_px + 10, y_px),
                text_style(13, &colour, HPos::Left),
            ))
            .map_err(chart_error)?;
            draw_bar(&mut chart, row, centre, x_max)?;
        }
        axis = SpeedupAxis {
            x_at_zero: chart.backend_coord(&(0.0, 0.0)).0,
            x_at_end: chart.backend_coord(&(x_max, 0.0)).0,
            end_speedup: x_max,
        };
        root.present().map_err(chart_error)?;
    }
    Ok(SpeedupChart {
        svg,
        axis,
        bars: rows.iter().filter(|r| r.speedup.is_some()).count(),
    })
}

/// A measured row's bar and, when it has one, its interval's whisker.
fn draw_bar(
    chart: &mut FloatPlot<'_, '_>,
    row: &SpeedupRow,
    centre: f64,
    x_max: f64,
) -> Result<(), ChartError> {
    let Some(speedup) = row.speedup.filter(|s| s.is_finite()) else {
        return Ok(());
    };
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(0.0, centre - 0.32), (speedup.min(x_max), centre + 0.32)],
            row.fill().filled(),
        )))
        .map_err(chart_error)?;
    if let Some(ci95) = row.ci95 {
        draw_whisker(chart, ci95, centre, 0.2, x_max)?;
    }
    Ok(())
}
