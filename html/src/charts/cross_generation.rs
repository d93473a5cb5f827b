//! The cross-generation chart of a run over several hardware generations: one group per
//! feature (fixture/workload), one bar per generation in the generation's colour, with its
//! 95% interval; a parity failure is drawn red. The legend is the page's.

use plotters::prelude::*;
use plotters::style::text_anchor::HPos;

use super::speedup::SpeedupRow;
use super::{
    chart_error, draw_speedup_frame, draw_whisker, palette, speedup_range, text_style, ChartError,
    SpeedupAxis,
};

#[derive(Debug, Clone, PartialEq)]
pub struct CrossGenerationChart {
    pub svg: String,
    pub axis: SpeedupAxis,
    pub bars: usize,
}

const WIDTH_PX: u32 = 1000;
const BAR_PX: u32 = 16;
const GROUP_GAP_PX: u32 = 14;
const NAME_COLUMN_PX: i32 = 230;

/// `features`: each feature's label, then per generation (in `generation_count` order) its
/// row, or `None` when that generation did not run the feature.
pub fn cross_generation_chart(
    features: &[(String, Vec<Option<SpeedupRow>>)],
    generation_count: usize,
    practical_threshold: f64,
) -> Result<CrossGenerationChart, ChartError> {
    let highest = features
        .iter()
        .flat_map(|(_, rows)| rows.iter().flatten())
        .flat_map(|r| [r.speedup, r.ci95.map(|[_, hi]| hi)])
        .flatten()
        .filter(|v| v.is_finite())
        .fold(1.0_f64, f64::max);
    let x_max = speedup_range(highest, practical_threshold);
    let generations = generation_count.max(1);
    // One unit of y per bar slot; a group is `generations` slots and a gap.
    let gap = f64::from(GROUP_GAP_PX) / f64::from(BAR_PX);
    let group = generations as f64 + gap;
    let top = (features.len().max(1) as f64) * group;
    let height_px = 60 + (top * f64::from(BAR_PX)) as u32;
    let mut svg = String::new();
    let axis;
    let mut bars = 0;
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH_PX, height_px)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let mut chart = ChartBuilder::on(&root)
            .margin_top(10)
            .margin_bottom(5)
            .margin_left(NAME_COLUMN_PX)
            .margin_right(60)
            .x_label_area_size(40)
            .build_cartesian_2d(0.0..x_max, 0.0..top)
            .map_err(chart_error)?;
        draw_speedup_frame(
            &mut chart,
            "speedup per generation (upstream median / fork median)",
            practical_threshold,
            top,
        )?;
        let name_style = text_style(14, &BLACK, HPos::Right);
        let muted_style = text_style(12, &palette::MUTED_TEXT, HPos::Left);
        for (f, (label, rows)) in features.iter().enumerate() {
            let group_top = top - f as f64 * group - gap / 2.0;
            let (_, y_px) = chart.backend_coord(&(0.0, group_top - generations as f64 / 2.0));
            root.draw(&Text::new(
                label.clone(),
                (NAME_COLUMN_PX - 8, y_px),
                name_style.clone(),
            ))
            .map_err(chart_error)?;
            for (g, row) in rows.iter().enumerate() {
                let Some(row) = row else { continue };
                let centre = group_top - g as f64 - 0.5;
                let Some(speedup) = row.speedup.filter(|s| s.is_finite()) else {
                    // No bar: say why, where the bar would start.
                    let (x_px, y_px) = chart.backend_coord(&(0.0, centre));
                    root.draw(&Text::new(
                        row.label_text(),
                        (x_px + 6, y_px),
                        muted_style.clone(),
                    ))
                    .map_err(chart_error)?;
                    continue;
                };
                let fill = if row.parity == abfleet_core::cell::CellParity::Fail {
                    palette::PARITY_FAIL
                } else {
                    palette::GENERATIONS[g % palette::GENERATIONS.len()]
                };
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(0.0, centre - 0.4), (speedup.min(x_max), centre + 0.4)],
                        fill.filled(),
                    )))
                    .map_err(chart_error)?;
                bars += 1;
                if let Some(ci95) = row.ci95 {
                    draw_whisker(&mut chart, ci95, centre, 0.25, x_max)?;
                }
            }
        }
        axis = SpeedupAxis {
            x_at_zero: chart.backend_coord(&(0.0, 0.0)).0,
            x_at_end: chart.backend_coord(&(x_max, 0.0)).0,
            end_speedup: x_max,
        };
        root.present().map_err(chart_error)?;
    }
    Ok(CrossGenerationChart { svg, axis, bars })
}
