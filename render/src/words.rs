//! A cell's words and numbers as every rendering shows them — report.md, report.html, JUnit,
//! the docs sections, the PR comment: one place, so the pages never disagree on a word. Where
//! the renderings differ only in markup (report.md sets names as code and escapes supplied
//! text; report.html's templates escape on their own and style by class), the words take a
//! [`Voice`].

use std::collections::BTreeSet;

use abfleet_core::cell::{CellParity, CellResult, MeasuredBy, SideResult, SideStatus};
use abfleet_core::events::{BuildRecord, BuildStatus};
use abfleet_core::paired::{StopReason, Verdict};
use abfleet_core::report::markdown_text;

/// How a rendering marks up a cell's words.
pub trait Voice {
    /// A name as code: a metric, an agent id, a certificate.
    fn code(&self, name: &str) -> String;
    /// Text someone supplied: a reason, a message.
    fn text(&self, supplied: &str) -> String;
    /// A word that must stand out (`FAIL`, `build failed`).
    fn strong(&self, word: &str) -> String;
}

/// report.md's voice: code spans, escaped text, bold.
pub struct Markdown;

impl Voice for Markdown {
    fn code(&self, name: &str) -> String {
        markdown_text::code(name)
    }

    fn text(&self, supplied: &str) -> String {
        markdown_text::text(supplied)
    }

    fn strong(&self, word: &str) -> String {
        format!("**{word}**")
    }
}

/// The voice of a page that escapes and styles on its own (report.html): words as they are.
pub struct Plain;

impl Voice for Plain {
    fn code(&self, name: &str) -> String {
        name.to_string()
    }

    fn text(&self, supplied: &str) -> String {
        supplied.to_string()
    }

    fn strong(&self, word: &str) -> String {
        word.to_string()
    }
}

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
fn stop_reason_words(reason: StopReason) -> &'static str {
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
pub(crate) fn small_delta(delta: f64) -> String {
    if delta == 0.0 {
        "0".into()
    } else if !delta.is_finite() {
        "null vs number".into()
    } else {
        format!("{delta:.1e}")
    }
}

/// The fixtures of `cells` in the order their first cell came: every rendering draws one
/// table per fixture, in this order.
pub fn fixtures_in_order<'a>(cells: &[&'a CellResult]) -> Vec<&'a str> {
    let mut fixtures: Vec<&str> = Vec::new();
    for cell in cells {
        if !fixtures.contains(&cell.fixture.as_str()) {
            fixtures.push(&cell.fixture);
        }
    }
    fixtures
}

/// A cell's speedup in words, before a rendering sets it (bold, struck through, a column of
/// its own for the interval).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpeedupWords {
    /// A speedup that counts: `1.23x`, and its interval and verdict when it has them
    /// (`[1.10–1.35] faster; host resolves ±0.5%`).
    Measured {
        value: String,
        interval: Option<String>,
    },
    /// A speedup bought by changing the score: shown, never counted.
    ParityFailed { value: String },
    /// No speedup: `absent upstream`, `absent in fork`.
    Absent(&'static str),
    /// Timed by a host whose times say nothing: `emulated: not timed`.
    NotTimed(String),
    /// A side's output was rejected (the reasons are below the table).
    Rejected,
    /// Nothing was measured.
    Missing,
}

/// What a cell's speedup says.
pub fn speedup_words(cell: &CellResult) -> SpeedupWords {
    match cell.speedup {
        Some(s) if cell.parity == CellParity::Fail => SpeedupWords::ParityFailed {
            value: format!("{s:.2}x"),
        },
        Some(s) => SpeedupWords::Measured {
            value: format!("{s:.2}x"),
            interval: match (cell.speedup_ci95, cell.verdict) {
                (Some([lo, hi]), Some(verdict)) => {
                    let resolution = cell
                        .host_resolution
                        .map(|r| format!("; host resolves ±{:.1}%", r * 100.0))
                        .unwrap_or_default();
                    Some(format!(
                        "[{lo:.2}–{hi:.2}] {}{resolution}",
                        verdict_word(verdict)
                    ))
                }
                _ => None,
            },
        },
        None if cell.parity == CellParity::AbsentUpstream => {
            SpeedupWords::Absent("absent upstream")
        }
        None if cell.parity == CellParity::AbsentFork => SpeedupWords::Absent("absent in fork"),
        None if cell.not_timed.is_some() && cell.parity != CellParity::Unavailable => {
            SpeedupWords::NotTimed(cell.not_timed.clone().unwrap_or_default())
        }
        None if !cell.rejected.is_empty() => SpeedupWords::Rejected,
        None => SpeedupWords::Missing,
    }
}

/// The gated quantity: the largest pooled-mean delta of any shared metric, signed, with its
/// metric; a failed cell leads with `FAIL` and the rules it broke.
pub fn delta_words(cell: &CellResult, voice: &impl Voice) -> String {
    match cell.parity {
        CellParity::AbsentUpstream => "absent upstream".to_string(),
        CellParity::AbsentFork => "absent in fork".to_string(),
        CellParity::Unavailable => "—".to_string(),
        CellParity::Ok | CellParity::Fail => {
            let delta = match cell.largest_score_delta() {
                Some((_, 0.0)) => "0".to_string(),
                Some((_, delta)) if !delta.is_finite() => "null vs number".to_string(),
                Some((metric, delta)) => format!("{delta:+.1e} ({})", voice.code(metric)),
                None => "no shared metric".to_string(),
            };
            if cell.parity != CellParity::Fail {
                return delta;
            }
            let rules: BTreeSet<&str> = cell
                .parity_failures
                .iter()
                .map(|f| f.rule.describe())
                .collect();
            let rules: Vec<&str> = rules.into_iter().collect();
            format!("{} ({}) {delta}", voice.strong("FAIL"), rules.join(", "))
        }
    }
}

/// What a cell says below its table: the pairs it took and why it stopped, its largest
/// per-frame delta (where, how many frames over the threshold, the 95th percentile), and
/// why a side was not measured.
pub fn cell_notes(cell: &CellResult, voice: &impl Voice) -> Vec<String> {
    let mut notes = Vec::new();
    if cell.pairs > 0 {
        notes.push(format!(
            "{} pairs ({})",
            cell.pairs,
            stop_reason_words(cell.stop_reason)
        ));
    }
    let worst = cell
        .max_frame_delta
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1));
    if let Some((metric, delta)) = worst.filter(|(_, d)| **d > 0.0) {
        let frame = cell
            .max_frame_delta_at
            .get(metric)
            .map_or(String::new(), |f| format!(", frame {f}"));
        let over = cell.frames_over_gate.get(metric).copied().unwrap_or(0);
        let p95 = cell
            .frame_delta_p95
            .get(metric)
            .map_or(String::new(), |p| format!(", p95 {}", small_delta(*p)));
        notes.push(format!(
            "largest per-frame delta {} ({}{frame}), {over} frame(s) over the threshold{p95}",
            small_delta(*delta),
            voice.code(metric)
        ));
    }
    for (side, reason) in cell.not_measured_reasons() {
        let reason = voice.text(reason);
        notes.push(match side {
            Some(side) => format!("{side} not measured: {reason}"),
            None => format!("not measured: {reason}"),
        });
    }
    notes
}

/// `agent ID (certificate NAME serial …)`: who sent a cell, as the coordinator authenticated
/// it (docs/security.md).
pub fn measured_by_words(by: &MeasuredBy, voice: &impl Voice) -> String {
    match &by.certificate {
        Some(certificate) => format!(
            "agent {} (certificate {})",
            voice.code(&by.agent_id),
            voice.code(certificate)
        ),
        None => format!("agent {}", voice.code(&by.agent_id)),
    }
}

/// `built in 1.5 s`, `build cached`, `build failed`, `not built`.
pub fn build_words(build: Option<&BuildRecord>, voice: &impl Voice) -> String {
    match build {
        Some(b) => match b.status {
            BuildStatus::Built => format!("built in {:.1} s", b.seconds),
            BuildStatus::Cached => "build cached".to_string(),
            BuildStatus::Failed => voice.strong("build failed"),
        },
        None => "not built".to_string(),
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

    /// report.md and report.html say the same words of a cell; only the markup differs.
    #[test]
    fn both_voices_say_the_same_words_of_a_cell() {
        let mut report = abfleet_core::report::samples::sample_report();
        let cell = &mut report.cells[1];
        cell.parity = CellParity::Fail;
        cell.parity_failures = vec![abfleet_core::parity::ParityFailure {
            metric: "float_ssim".into(),
            rule: abfleet_core::parity::ParityRule::PooledMean,
            frame: None,
            upstream_value: Some(0.9),
            fork_value: Some(0.9003),
            delta: 3e-4,
            allowed: 0.0,
            message: "pooled-mean delta over the gate".into(),
        }];
        cell.max_frame_delta = [("float_ssim".to_string(), 3e-4)].into();
        cell.max_frame_delta_at = [("float_ssim".to_string(), 7)].into();
        cell.frame_delta_p95 = [("float_ssim".to_string(), 1e-4)].into();
        let unmarked = |words: String| words.replace("**", "").replace('`', "");
        assert_eq!(
            unmarked(delta_words(cell, &Markdown)),
            delta_words(cell, &Plain)
        );
        let notes = cell_notes(cell, &Plain);
        assert_eq!(
            cell_notes(cell, &Markdown)
                .into_iter()
                .map(unmarked)
                .collect::<Vec<_>>(),
            notes
        );
        assert!(
            notes
                .iter()
                .any(|n| n.contains("frame 7") && n.contains("p95 1.0e-4")),
            "{notes:?}"
        );
        assert!(delta_words(cell, &Markdown).starts_with("**FAIL** ("));
        assert_eq!(
            speedup_words(cell),
            SpeedupWords::ParityFailed {
                value: format!("{:.2}x", cell.speedup.unwrap())
            }
        );

        // A side that was not measured, who sent the cell, a failed build.
        let cell = &mut report.cells[0];
        cell.upstream.status = SideStatus::Unavailable;
        cell.upstream.error = Some("the binary timed out after 60 s".into());
        let notes = cell_notes(cell, &Plain);
        assert!(
            notes.contains(&"upstream not measured: the binary timed out after 60 s".to_string()),
            "{notes:?}"
        );
        assert_eq!(
            cell_notes(cell, &Markdown)
                .into_iter()
                .map(unmarked)
                .collect::<Vec<_>>(),
            notes
        );
        let by = MeasuredBy {
            agent_id: "agent-7".into(),
            certificate: Some("bench-7 serial 0a1b".into()),
        };
        assert_eq!(
            measured_by_words(&by, &Plain),
            "agent agent-7 (certificate bench-7 serial 0a1b)"
        );
        assert_eq!(
            unmarked(measured_by_words(&by, &Markdown)),
            measured_by_words(&by, &Plain)
        );
        let mut build = report.fork.build.clone().unwrap();
        build.status = BuildStatus::Failed;
        assert_eq!(build_words(Some(&build), &Markdown), "**build failed**");
        assert_eq!(build_words(Some(&build), &Plain), "build failed");
        assert_eq!(build_words(None, &Plain), "not built");
    }
}
