//! The parity detail of a failed metric: the per-frame delta (fork − upstream) against the
//! gate line (± the allowed delta), frames over the gate marked.

use plotters::prelude::*;

use super::{chart_error, house_style, palette, ChartError};

/// Per frame, fork − upstream, for one metric of one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameDeltaSeries {
    pub metric: String,
    /// `(frame number, delta)`, in frame order; only frames both sides scored with a number.
    pub deltas: Vec<(u64, f64)>,
    /// The gate the metric broke.
    pub gate: f64,
}

impl FrameDeltaSeries {
    /// Frames whose delta is over the gate in size.
    pub fn frames_over_gate(&self) -> usize {
        self.deltas
            .iter()
            .filter(|(_, d)| d.abs() > self.gate)
            .count()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FrameDeltaChart {
    pub svg: String,
}

const WIDTH_PX: u32 = 1000;
const HEIGHT_PX: u32 = 280;

pub fn frame_delta_chart(series: &FrameDeltaSeries) -> Result<FrameDeltaChart, ChartError> {
    let first = series.deltas.first().map_or(0, |d| d.0);
    let last = series.deltas.last().map_or(1, |d| d.0).max(first + 1);
    let largest = series
        .deltas
        .iter()
        .map(|(_, d)| d.abs())
        .fold(series.gate, f64::max);
    let y_max = if largest > 0.0 { largest * 1.15 } else { 1.0 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(90)
            .build_cartesian_2d(first as f64..last as f64, -y_max..y_max)
            .map_err(chart_error)?;
        house_style(&mut chart.configure_mesh())
            .x_desc("frame")
            .y_desc(format!("{}: fork − upstream", series.metric))
            .y_label_formatter(&|y| format!("{y:.1e}"))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .map_err(chart_error)?;
        let (x0, x1) = (first as f64, last as f64);
        chart
            .draw_series([
                PathElement::new(vec![(x0, 0.0), (x1, 0.0)], palette::PARITY_LINE),
                PathElement::new(
                    vec![(x0, series.gate), (x1, series.gate)],
                    palette::GATE_LINE.stroke_width(2),
                ),
                PathElement::new(
                    vec![(x0, -series.gate), (x1, -series.gate)],
                    palette::GATE_LINE.stroke_width(2),
                ),
            ])
            .map_err(chart_error)?;
        let points: Vec<(f64, f64)> = series
            .deltas
            .iter()
            .map(|(frame, delta)| (*frame as f64, delta.clamp(-y_max, y_max)))
            .collect();
        chart
            .draw_series(std::iter::once(PathElement::new(
                points.clone(),
                palette::DELTA_LINE.stroke_width(2),
            )))
            .map_err(chart_error)?;
        chart
            .draw_series(
                points
                    .iter()
                    .filter(|(_, d)| d.abs() > series.gate)
                    .map(|p| Circle::new(*p, 3, palette::GATE_LINE.filled())),
            )
            .map_err(chart_error)?;
        root.present().map_err(chart_error)?;
    }
    Ok(FrameDeltaChart { svg })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `y` of each horizontal polyline drawn in `colour`, and the `(cx, cy)` of each circle.
    fn drawn(svg: &str, colour: &str) -> (Vec<f64>, Vec<(f64, f64)>) {
        let attribute = |element: &str, name: &str| -> Option<String> {
            let start = element.find(&format!(" {name}=\""))? + name.len() + 3;
            Some(element[start..].split('"').next()?.to_string())
        };
        let mut lines = Vec::new();
        let mut circles = Vec::new();
        for element in svg.split('<').filter(|e| e.contains(colour)) {
            if element.starts_with("polyline") {
                let points: Vec<f64> = attribute(element, "points")
                    .unwrap()
                    .split_whitespace()
                    .map(|xy| xy.split(',').nth(1).unwrap().parse().unwrap())
                    .collect();
                if points.len() == 2 && points[0] == points[1] {
                    lines.push(points[0]);
                }
            } else if element.starts_with("circle") {
                let number = |name| attribute(element, name).unwrap().parse::<f64>().unwrap();
                circles.push((number("cx"), number("cy")));
            }
        }
        (lines, circles)
    }

    #[test]
    fn the_gate_lines_sit_at_plus_and_minus_the_gate_and_frames_over_it_are_marked() {
        let gate = 1e-5;
        let series = FrameDeltaSeries {
            metric: "float_ssim".into(),
            deltas: vec![
                (0, 0.0),
                (1, 2.0 * gate),
                (2, -0.5 * gate),
                (3, -3.0 * gate),
            ],
            gate,
        };
        let chart = frame_delta_chart(&series).unwrap();
        let (zero, _) = drawn(&chart.svg, &palette::hex(palette::PARITY_LINE));
        let (gates, marks) = drawn(&chart.svg, &palette::hex(palette::GATE_LINE));
        assert_eq!(zero.len(), 1, "{}", chart.svg);
        assert_eq!(gates.len(), 2, "{}", chart.svg);
        assert_eq!(marks.len(), series.frames_over_gate());
        assert_eq!(marks.len(), 2);
        // Pixels per unit of delta, from the frame 3 mark (delta -3 gates): the gate lines
        // are one gate above and below the zero line, within a pixel of rounding.
        let per_gate = (marks[1].1 - zero[0]) / 3.0;
        let mut expected = [zero[0] - per_gate, zero[0] + per_gate];
        expected.sort_by(f64::total_cmp);
        let mut gates = gates;
        gates.sort_by(f64::total_cmp);
        for (drawn, expected) in gates.iter().zip(expected) {
            assert!(
                (drawn - expected).abs() <= 1.0,
                "gate at {drawn}, expected {expected}"
            );
        }
        assert!(
            (marks[0].1 - (zero[0] - 2.0 * per_gate)).abs() <= 1.0,
            "frame 1 (+2 gates) at {:?}",
            marks[0]
        );
    }
}
