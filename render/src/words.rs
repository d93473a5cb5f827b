//! A cell's words and numbers as every rendering shows them — report.md, report.html, JUnit,
//! the docs sections, the PR comment: one place, so the pages never disagree on a word.

use abfleet_core::cell::{SideResult, SideStatus};
use abfleet_core::paired::{StopReason, Verdict};

/// `faster`, `slower`, `same`, `unsure`.
pub fn verdict_word(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Faster => "faster",
        Verdict::Slower => "slower",
        Verdict::Same => "same",
        Verdict::Unsure => "unsure",
    }
}

/// Why a cell took the pairs it took.
pub fn stop_reason_words(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Decided => "stopped on a verdict",
        StopReason::MaxPairs => "max_runs reached",
        StopReason::MaxSeconds => "max_cell_seconds reached",
        StopReason::NotAdaptive => "fixed count",
        StopReason::OneSided => "one side only",
    }
}

/// `0.434 s (spread 5.3%)`, `absent` (the caller's word for a side that has no such
/// workload), `unavailable`.
pub fn side_cell(side: &SideResult, absent: &str) -> String {
    match side.status {
        SideStatus::Absent => absent.to_string(),
        SideStatus::Unavailable => "unavailable".to_string(),
        SideStatus::Ok => match (side.median_time, side.spread_pct) {
            (Some(t), Some(s)) => format!("{t:.3} s (spread {s:.1}%)"),
            (Some(t), None) => format!("{t:.3} s"),
            _ => "—".to_string(),
        },
    }
}

/// A score delta: `0`, `null vs number` for an infinite one, else three digits.
pub fn small_delta(delta: f64) -> String {
    if delta == 0.0 {
        "0".into()
    } else if !delta.is_finite() {
        "null vs number".into()
    } else {
        format!("{delta:.1e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_and_sides_read_as_the_reports_print_them() {
        assert_eq!(small_delta(0.0), "0");
        assert_eq!(small_delta(f64::INFINITY), "null vs number");
        assert_eq!(small_delta(-1.234e-5), "-1.2e-5");
        let side = SideResult {
            status: SideStatus::Ok,
            times: vec![0.4339],
            cpu_times: Vec::new(),
            warmup_times: Vec::new(),
            median_time: Some(0.4339),
            best_time: None,
            spread_pct: Some(5.26),
            median_fps: None,
            nframes: None,
            load_avg_1min: [0.0, 0.0],
            pooled: Default::default(),
            returncode: None,
            error: None,
            stderr_tail: None,
            scores: None,
            command: None,
        };
        assert_eq!(side_cell(&side, "absent upstream"), "0.434 s (spread 5.3%)");
        assert_eq!(verdict_word(Verdict::Unsure), "unsure");
    }
}
