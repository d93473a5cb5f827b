//! A workload's history on a generation: one point per finished run, oldest left — the
//! speedup with its 95% interval as a whisker, and the fork's own median with its fastest
//! and slowest run. A point flagged against the run before it (a regression, docs/
//! milestone.md) is drawn in red; a run without a value (absent upstream, not measured)
//! leaves a gap in the line.

use abfleet_core::cell::CellParity;
use abfleet_core::report::history::HistoryPoint;
use plotters::prelude::*;

use super::{chart_error, house_style, palette, ChartError, FloatPlot};

/// One drawn history chart and where its values fall: a value `v` of point `i` is drawn at
/// `x_at_first + i * x_step` and `y_at_zero - v / y_end * (y_at_zero - y_at_end)`.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryChart {
    pub svg: String,
    /// Points drawn (runs with a value).
    pub points: usize,
    /// Of those, drawn flagged.
    pub flagged: usize,
    pub x_at_first: i32,
    pub x_step: f64,
    pub y_at_zero: i32,
    pub y_at_end: i32,
    pub y_end: f64,
}

/// What one chart plots of a point: its value, its whisker, and whether it is flagged.
struct Series {
    value: Option<f64>,
    whisker: Option<[f64; 2]>,
    flagged: bool,
}

const WIDTH_PX: u32 = 1000;
const HEIGHT_PX: u32 = 340;

/// The speedup over time, the break-even line at 1x drawn across.
pub fn speedup_history_chart(points: &[HistoryPoint]) -> Result<HistoryChart, ChartError> {
    let series: Vec<Series> = points
        .iter()
        .map(|p| Series {
            value: p.cell.speedup.filter(|s| s.is_finite()),
            whisker: p.cell.speedup_ci95,
            flagged: !p.flags.is_empty() || p.cell.parity == CellParity::Fail,
        })
        .collect();
    draw(
        points,
        &series,
        "speedup (upstream median / fork median)",
        |v, _| format!("{v:.2}x"),
        Some(1.0),
    )
}

/// The fork's own median over time, the fastest and slowest timed run as the whisker.
pub fn fork_median_history_chart(points: &[HistoryPoint]) -> Result<HistoryChart, ChartError> {
    let series: Vec<Series> = points
        .iter()
        .map(|p| Series {
            value: p.cell.fork_median.filter(|m| m.is_finite()),
            whisker: p
                .cell
                .fork_min
                .zip(p.cell.fork_max)
                .map(|(lo, hi)| [lo, hi]),
            flagged: p
                .flags
                .iter()
                .any(|f| f.kind != abfleet_core::report::history::FlagKind::ParityGrowth),
        })
        .collect();
    draw(
        points,
        &series,
        "the fork's median wall time, fastest–slowest run",
        // Short runs in milliseconds, so neighbouring labels differ.
        |v, end| {
            if end < 1.0 {
                format!("{:.2} ms", v * 1000.0)
            } else {
                format!("{v:.2} s")
            }
        },
        None,
    )
}

fn draw(
    points: &[HistoryPoint],
    series: &[Series],
    y_desc: &str,
    y_label: impl Fn(f64, f64) -> String,
    reference_line: Option<f64>,
) -> Result<HistoryChart, ChartError> {
    let highest = series
        .iter()
        .flat_map(|s| [s.value, s.whisker.map(|[_, hi]| hi)])
        .flatten()
        .filter(|v| v.is_finite())
        .chain(reference_line)
        .fold(0.0_f64, f64::max);
    let y_end = if highest > 0.0 { highest * 1.15 } else { 1.0 };
    let count = points.len().max(1);
    let x_range = -0.5..(count as f64 - 0.5);
    let dates: Vec<String> = points
        .iter()
        .map(|p| p.date.get(..10).unwrap_or(&p.date).to_string())
        .collect();
    let mut svg = String::new();
    let geometry;
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(x_range, 0.0..y_end)
            .map_err(chart_error)?;
        let label_of = |x: &f64| {
            let index = x.round();
            if (x - index).abs() > 1e-6 || index < 0.0 {
                return String::new();
            }
            dates.get(index as usize).cloned().unwrap_or_default()
        };
        house_style(&mut chart.configure_mesh())
            .disable_x_mesh()
            .x_labels(count.min(12))
            .x_label_formatter(&label_of)
            .y_label_formatter(&|v| y_label(*v, y_end))
            .x_desc("run, oldest first")
            .y_desc(y_desc)
            .draw()
            .map_err(chart_error)?;
        if let Some(level) = reference_line {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(-0.5, level), (count as f64 - 0.5, level)],
                    palette::PARITY_LINE.stroke_width(1),
                )))
                .map_err(chart_error)?;
        }
        draw_runs(&mut chart, series, y_end, count)?;
        let (x_at_first, y_at_zero) = chart.backend_coord(&(0.0, 0.0));
        let x_at_last = chart.backend_coord(&(count as f64 - 1.0, 0.0)).0;
        let y_at_end = chart.backend_coord(&(0.0, y_end)).1;
        geometry = (
            x_at_first,
            if count > 1 {
                f64::from(x_at_last - x_at_first) / (count as f64 - 1.0)
            } else {
                0.0
            },
            y_at_zero,
            y_at_end,
        );
        root.present().map_err(chart_error)?;
    }
    Ok(HistoryChart {
        svg,
        points: series.iter().filter(|s| s.value.is_some()).count(),
        flagged: series
            .iter()
            .filter(|s| s.value.is_some() && s.flagged)
            .count(),
        x_at_first: geometry.0,
        x_step: geometry.1,
        y_at_zero: geometry.2,
        y_at_end: geometry.3,
        y_end,
    })
}

/// The runs' values: a line joining consecutive runs that both have one, each value's
/// whisker, and a point per run, red when flagged.
fn draw_runs(
    chart: &mut FloatPlot<'_, '_>,
    series: &[Series],
    y_end: f64,
    count: usize,
) -> Result<(), ChartError> {
    // The line joins consecutive runs that both have a value.
    for i in 1..series.len() {
        if let (Some(from), Some(to)) = (series[i - 1].value, series[i].value) {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(i as f64 - 1.0, from), (i as f64, to)],
                    palette::UNSURE.stroke_width(2),
                )))
                .map_err(chart_error)?;
        }
    }
    let whisker = palette::WHISKER.stroke_width(1);
    // Caps about 8 px wide each side whatever the number of runs, at most 0.1 of a run.
    let cap = (count as f64 * 0.012).min(0.1);
    for (i, point) in series.iter().enumerate() {
        let Some(value) = point.value else { continue };
        let x = i as f64;
        if let Some([lo, hi]) = point.whisker {
            let (lo, hi) = (lo.clamp(0.0, y_end), hi.clamp(0.0, y_end));
            chart
                .draw_series([
                    PathElement::new(vec![(x, lo), (x, hi)], whisker),
                    PathElement::new(vec![(x - cap, lo), (x + cap, lo)], whisker),
                    PathElement::new(vec![(x - cap, hi), (x + cap, hi)], whisker),
                ])
                .map_err(chart_error)?;
        }
        let colour = if point.flagged {
            palette::PARITY_FAIL
        } else {
            palette::UNSURE
        };
        chart
            .draw_series(std::iter::once(Circle::new(
                (x, value.min(y_end)),
                5,
                colour.filled(),
            )))
            .map_err(chart_error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use abfleet_core::report::history::{CellSummary, FlagKind, RegressionFlag};

    fn point(run: &str, speedup: Option<f64>, flagged: bool) -> HistoryPoint {
        HistoryPoint {
            run_id: run.into(),
            name: "m".into(),
            date: format!("2026-12-0{run}T10:00:00Z"),
            trigger: "manual".into(),
            trigger_note: None,
            generation: "cpu/x86-64-v3/zen3".into(),
            silicon_id: None,
            hardware_id: None,
            fork_commit: None,
            upstream_requested: "v3.2.0".into(),
            toolchain: Default::default(),
            cell: CellSummary {
                fixture: "f".into(),
                workload: "psnr".into(),
                speedup,
                speedup_ci95: speedup.map(|s| [s - 0.1, s + 0.1]),
                verdict: None,
                parity: if speedup.is_some() {
                    CellParity::Ok
                } else {
                    CellParity::AbsentUpstream
                },
                fork_median: Some(0.5),
                fork_min: Some(0.4),
                fork_max: Some(0.6),
                upstream_median: None,
                score_delta: Default::default(),
                backend: None,
                printed_decimals: None,
            },
            flags: if flagged {
                vec![RegressionFlag {
                    fixture: "f".into(),
                    workload: "psnr".into(),
                    backend: None,
                    kind: FlagKind::SpeedupShrank,
                    metric: None,
                    then: 2.0,
                    now: 1.2,
                    then_run: None,
                    allowed: None,
                    detail: "speedup 2.00x → 1.20x".into(),
                }]
            } else {
                Vec::new()
            },
            changes: Vec::new(),
        }
    }

    /// `(cx, cy)` of every `<circle>` in `svg`.
    fn circles(svg: &str) -> Vec<(f64, f64)> {
        let attribute = |tag: &str, name: &str| -> f64 {
            let start = tag.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
            tag[start..].split('"').next().unwrap().parse().unwrap()
        };
        svg.split("<circle")
            .skip(1)
            .map(|tag| (attribute(tag, "cx"), attribute(tag, "cy")))
            .collect()
    }

    #[test]
    fn each_run_with_a_value_is_a_point_where_its_value_falls_and_a_gap_is_left_for_the_rest() {
        let points = [
            point("1", Some(2.0), false),
            point("2", None, false),
            point("3", Some(1.2), true),
        ];
        let chart = speedup_history_chart(&points).unwrap();
        assert_eq!((chart.points, chart.flagged), (2, 1));
        let drawn = circles(&chart.svg);
        assert_eq!(drawn.len(), 2, "{}", chart.svg);
        for ((x, y), (index, value)) in drawn.iter().zip([(0.0, 2.0), (2.0, 1.2)]) {
            let want_x = f64::from(chart.x_at_first) + index * chart.x_step;
            let want_y = f64::from(chart.y_at_zero)
                - value / chart.y_end * f64::from(chart.y_at_zero - chart.y_at_end);
            assert!((x - want_x).abs() <= 1.5, "x {x} vs {want_x}");
            assert!((y - want_y).abs() <= 1.5, "y {y} vs {want_y}");
        }
        let flagged = palette::hex(palette::PARITY_FAIL);
        assert_eq!(
            chart.svg.matches(&flagged.to_string()).count(),
            1,
            "one point drawn flagged"
        );
        // The fork's median chart has a point for every run, the absent one too.
        assert_eq!(fork_median_history_chart(&points).unwrap().points, 3);
    }
}
