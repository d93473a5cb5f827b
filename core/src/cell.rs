//! One cell of the A/B table (one fixture × one workload): what each side measured, the
//! speedup, and the parity verdict. The JSON shape is the fork's own A/B document's cell
//! (docs/report-format.md), with additions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::paired::{self, AnalysisConfig, Order, Pair, StopReason, Verdict};
use crate::parity::{self, Gates, ParityFailure};
use crate::scores::{nullable, Scores};
use crate::spec::JobSpec;
use crate::stats;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SideStatus {
    /// Ran every time and wrote scores.
    Ok,
    /// Rejected the workload the way the tool rejects an unknown feature.
    Absent,
    /// Could not be measured: build failed, crashed, timed out, or wrote no frames.
    Unavailable,
}

/// What the agent measured for one side of one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideMeasurement {
    pub status: SideStatus,
    /// Wall seconds of each timed run, in run order.
    pub times: Vec<f64>,
    /// User + system CPU seconds of each timed run.
    pub cpu_times: Vec<f64>,
    /// Wall seconds of the discarded warm-up runs.
    pub warmup_times: Vec<f64>,
    pub scores: Option<Scores>,
    pub returncode: Option<i32>,
    pub error: Option<String>,
    pub stderr_tail: Option<String>,
    /// The command line of the first timed run (or of the run that failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<RunCommand>,
}

/// Exactly what was run, so a maintainer can rerun a cell by hand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCommand {
    pub argv: Vec<String>,
    pub cwd: String,
}

impl RunCommand {
    /// A line to paste into a POSIX shell: `cd CWD && ARGV…`, each word quoted as needed.
    pub fn shell_line(&self) -> String {
        let words: Vec<String> = self.argv.iter().map(|a| shell_quote(a)).collect();
        format!("cd {} && {}", shell_quote(&self.cwd), words.join(" "))
    }
}

fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

impl SideMeasurement {
    pub fn unavailable(error: impl Into<String>) -> Self {
        SideMeasurement {
            status: SideStatus::Unavailable,
            times: Vec::new(),
            cpu_times: Vec::new(),
            warmup_times: Vec::new(),
            scores: None,
            returncode: None,
            error: Some(error.into()),
            stderr_tail: None,
            command: None,
        }
    }
}

/// One side of a finished cell, in the report's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideResult {
    pub status: SideStatus,
    pub times: Vec<f64>,
    pub cpu_times: Vec<f64>,
    pub warmup_times: Vec<f64>,
    pub median_time: Option<f64>,
    pub best_time: Option<f64>,
    pub spread_pct: Option<f64>,
    pub median_fps: Option<f64>,
    pub nframes: Option<u64>,
    pub load_avg_1min: [f64; 2],
    /// Pooled mean per metric (`null` for a metric the tool scored as null throughout).
    #[serde(with = "nullable::map")]
    pub pooled: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returncode: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
    /// Per-frame scores of the first timed run (for parity and later inspection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scores: Option<Scores>,
    /// The argv and working directory of the side's timed runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<RunCommand>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellParity {
    Ok,
    Fail,
    /// The fork runs a workload upstream does not have.
    AbsentUpstream,
    /// Upstream runs a workload the fork removed.
    AbsentFork,
    Unavailable,
}

impl CellParity {
    pub const ALL: [CellParity; 5] = [
        CellParity::Ok,
        CellParity::Fail,
        CellParity::AbsentUpstream,
        CellParity::AbsentFork,
        CellParity::Unavailable,
    ];

    /// The verdict's name, as serde writes it and the store keeps it.
    pub fn as_str(self) -> &'static str {
        match self {
            CellParity::Ok => "ok",
            CellParity::Fail => "fail",
            CellParity::AbsentUpstream => "absent_upstream",
            CellParity::AbsentFork => "absent_fork",
            CellParity::Unavailable => "unavailable",
        }
    }
}

impl std::str::FromStr for CellParity {
    type Err = crate::names::UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        crate::names::UnknownName::parse(
            "parity verdict",
            text,
            CellParity::ALL,
            CellParity::as_str,
        )
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    /// Position in the spec's fixture × workload order; the store keeps one cell per index.
    pub index: u32,
    /// The hardware generation that measured it (set when the report is assembled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<String>,
    /// The attempt of the job that measured it (set when the report is assembled): an
    /// earlier one than the job's last when a resumed attempt kept it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    pub fixture: String,
    pub workload: String,
    pub upstream: SideResult,
    pub fork: SideResult,
    /// Upstream median / fork median; above 1 means the fork is faster.
    pub speedup: Option<f64>,
    /// Pooled-mean delta (fork − upstream) per shared metric: the gated quantity.
    #[serde(with = "nullable::map")]
    pub score_delta: BTreeMap<String, f64>,
    #[serde(with = "nullable::map")]
    pub max_frame_delta: BTreeMap<String, f64>,
    pub max_frame_delta_at: BTreeMap<String, u64>,
    pub frames_over_gate: BTreeMap<String, u64>,
    #[serde(with = "nullable::map")]
    pub frame_delta_p95: BTreeMap<String, f64>,
    pub parity: CellParity,
    pub parity_failures: Vec<ParityFailure>,
    pub renamed_metrics: BTreeMap<String, String>,
    pub only_upstream_metrics: Vec<String>,
    pub only_fork_metrics: Vec<String>,
    /// The fork's median is under `min_useful_seconds`: process start-up weighs on the number.
    pub startup_dominated: bool,
    /// What may have disturbed the timings (never a reason to drop them).
    pub noise_flags: Vec<NoiseFlag>,
    /// 95% bootstrap interval of the speedup, over pairs.
    pub speedup_ci95: Option<[f64; 2]>,
    /// Wilcoxon signed-rank p-value on the per-pair log-ratios.
    pub p_value: Option<f64>,
    /// `faster`, `slower`, `same` or `unsure`; `None` when the sides were not both timed.
    pub verdict: Option<Verdict>,
    /// Timed pairs the cell took.
    pub pairs: u32,
    /// Seeds the run order and the bootstrap: a spec with `[measure] seed` set to the run's
    /// seed replays the same orders.
    pub seed: u64,
    pub run_order: Vec<Order>,
    /// Why the cell stopped taking pairs.
    pub stop_reason: StopReason,
    /// The smallest difference this host resolves at this pair count (A/A calibration), when
    /// the host was calibrated: a fraction, e.g. 0.012 for ±1.2%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_resolution: Option<f64>,
    /// What the agent spent on the cell besides its timed runs: the cell's wall time (from
    /// the first host sample before the warm-ups to the last after the timed runs) minus the
    /// wall time of every run (warm-ups included), in seconds. Spawning and reaping, reading
    /// each output, the statistics between pairs. `None` in reports from before it was
    /// measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead_seconds: Option<f64>,
    /// The most decimals the two sides' outputs printed, the coarser side's (6 for vmaf's
    /// default `%.6f`, up to 17 with `--precision max`): deltas are compared at this
    /// precision, and the parity ratchet allows half a unit of it. `None` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub printed_decimals: Option<u32>,
    /// Who sent the cell, as the coordinator knew it when the cell arrived (never what the
    /// agent says about itself): a suspicious result is traceable to a host and its
    /// certificate (docs/security.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_by: Option<MeasuredBy>,
    /// Why the coordinator did not believe the cell (`cell_audit`): its summary disagreed with
    /// its own raw times or scores, a value was out of physical range, or it was not a cell
    /// of the spec. A rejected cell is reported as not measured; its raw data stays for
    /// inspection.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<String>,
    /// Why the cell's times say nothing (`emulated: not timed`): its scores gate parity, its
    /// speedup, interval, verdict and medians are withheld ([`CellResult::withhold_timing`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_timed: Option<String>,
}

/// The agent that sent a cell and the certificate it spoke with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeasuredBy {
    pub agent_id: String,
    /// The certificate's name and serial (`NAME serial HEX`); absent over plaintext loopback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
}

/// Something that may have disturbed a cell's timings, with what was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoiseFlag {
    pub name: String,
    pub value: String,
    pub detail: String,
}

impl NoiseFlag {
    pub fn number(name: &str, value: f64, detail: &str) -> NoiseFlag {
        NoiseFlag {
            name: name.to_string(),
            value: format!("{value:.3}"),
            detail: detail.to_string(),
        }
    }

    pub fn text(name: &str, value: &str, detail: &str) -> NoiseFlag {
        NoiseFlag {
            name: name.to_string(),
            value: value.to_string(),
            detail: detail.to_string(),
        }
    }
}

/// Spread (max-min over median) above which a side's timings are noise-dominated.
pub const NOISY_SPREAD_PCT: f64 = 10.0;

/// Everything needed to turn two measurements into a cell.
pub struct CellInput {
    pub index: u32,
    pub fixture: String,
    pub workload: String,
    pub upstream: SideMeasurement,
    pub fork: SideMeasurement,
    pub load_avg_1min: [f64; 2],
    /// Cores not used by the timed runs (logical cores minus threads).
    pub idle_cores: f64,
    /// What the agent saw on the host while the cell ran.
    pub host_flags: Vec<NoiseFlag>,
    /// The cell's seed and the order its pairs ran in.
    pub seed: u64,
    pub run_order: Vec<Order>,
    pub stop_reason: StopReason,
    /// The cell's wall time minus that of its runs (see [`CellResult::overhead_seconds`]).
    pub overhead_seconds: Option<f64>,
}

impl CellResult {
    /// Each side's error text and stderr tail clipped to the limits of `stored_text`;
    /// whether anything was clipped.
    pub fn clip_texts(&mut self) -> bool {
        use crate::stored_text::{clip_option, MAX_ERROR_CHARS, MAX_TAIL_CHARS};
        let mut clipped = false;
        for side in [&mut self.upstream, &mut self.fork] {
            clipped |= clip_option(&mut side.error, MAX_ERROR_CHARS);
            clipped |= clip_option(&mut side.stderr_tail, MAX_TAIL_CHARS);
        }
        clipped
    }

    pub fn evaluate(input: CellInput, spec: &JobSpec) -> CellResult {
        let upstream = side_result(&input.upstream, input.load_avg_1min);
        let fork = side_result(&input.fork, input.load_avg_1min);
        let both_ok = upstream.status == SideStatus::Ok && fork.status == SideStatus::Ok;
        let speedup = match (both_ok, upstream.median_time, fork.median_time) {
            (true, Some(u), Some(f)) if f > 0.0 => Some(u / f),
            _ => None,
        };
        let mut cell = CellResult {
            index: input.index,
            generation: None,
            attempt: None,
            fixture: input.fixture.clone(),
            workload: input.workload.clone(),
            speedup,
            score_delta: BTreeMap::new(),
            max_frame_delta: BTreeMap::new(),
            max_frame_delta_at: BTreeMap::new(),
            frames_over_gate: BTreeMap::new(),
            frame_delta_p95: BTreeMap::new(),
            parity: CellParity::Unavailable,
            parity_failures: Vec::new(),
            renamed_metrics: BTreeMap::new(),
            only_upstream_metrics: Vec::new(),
            only_fork_metrics: Vec::new(),
            startup_dominated: fork
                .median_time
                .is_some_and(|t| t < spec.measure.min_useful_seconds),
            noise_flags: noise_flags(&input, &upstream, &fork),
            speedup_ci95: None,
            p_value: None,
            verdict: None,
            pairs: upstream.times.len().min(fork.times.len()) as u32,
            seed: input.seed,
            run_order: input.run_order.clone(),
            stop_reason: input.stop_reason,
            host_resolution: None,
            overhead_seconds: input.overhead_seconds,
            printed_decimals: None,
            measured_by: None,
            rejected: Vec::new(),
            not_timed: None,
            upstream,
            fork,
        };
        if both_ok {
            let pairs: Vec<Pair> = cell
                .upstream
                .times
                .iter()
                .zip(&cell.fork.times)
                .map(|(&upstream_s, &fork_s)| Pair { upstream_s, fork_s })
                .collect();
            let config = AnalysisConfig {
                practical_threshold: spec.measure.practical_threshold,
                seed: input.seed,
                ..AnalysisConfig::default()
            };
            if let Some(analysis) = paired::analyse(&pairs, &config) {
                cell.speedup_ci95 = Some(analysis.speedup_ci95);
                cell.p_value = Some(analysis.p_value);
                cell.verdict = Some(analysis.verdict);
            }
        }
        cell.parity = match (cell.upstream.status, cell.fork.status) {
            (SideStatus::Ok, SideStatus::Ok) => {
                let (Some(up), Some(fk)) = (&input.upstream.scores, &input.fork.scores) else {
                    unreachable!("an ok side always carries scores")
                };
                let gates = Gates {
                    max_score_delta: spec.measure.max_score_delta,
                    max_frame_delta: spec.measure.max_frame_delta,
                };
                let outcome = parity::compare(up, fk, &spec.parity, gates);
                cell.printed_decimals = match (up.printed_decimals, fk.printed_decimals) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                let passed = outcome.passed();
                cell.score_delta = outcome.score_delta;
                cell.max_frame_delta = outcome.max_frame_delta;
                cell.max_frame_delta_at = outcome.max_frame_delta_at;
                cell.frames_over_gate = outcome.frames_over_gate;
                cell.frame_delta_p95 = outcome.frame_delta_p95;
                cell.parity_failures = outcome.failures;
                cell.renamed_metrics = outcome.renamed;
                cell.only_upstream_metrics = outcome.only_upstream;
                cell.only_fork_metrics = outcome.only_fork;
                if passed {
                    CellParity::Ok
                } else {
                    CellParity::Fail
                }
            }
            (SideStatus::Absent, SideStatus::Ok) => {
                cell.only_fork_metrics = cell.fork.pooled.keys().cloned().collect();
                CellParity::AbsentUpstream
            }
            (SideStatus::Ok, SideStatus::Absent) => {
                cell.only_upstream_metrics = cell.upstream.pooled.keys().cloned().collect();
                CellParity::AbsentFork
            }
            _ => CellParity::Unavailable,
        };
        cell
    }

    /// Withholds everything the cell's times would say (an emulated host's times are the
    /// emulator's, not the hardware's): no speedup, interval, p-value, verdict, start-up
    /// warning or medians; the raw times stay for inspection, the scores and the parity
    /// verdict stand. `reason` is what the report shows where the speedup would be.
    pub fn withhold_timing(&mut self, reason: &str) {
        self.speedup = None;
        self.speedup_ci95 = None;
        self.p_value = None;
        self.verdict = None;
        self.startup_dominated = false;
        self.host_resolution = None;
        for side in [&mut self.upstream, &mut self.fork] {
            side.median_time = None;
            side.best_time = None;
            side.spread_pct = None;
            side.median_fps = None;
        }
        self.noise_flags.clear();
        self.not_timed = Some(reason.to_string());
    }

    /// The gated quantity: the shared metric whose pooled-mean delta is largest in size,
    /// with its signed delta (+inf when one side's pooled value is null).
    pub fn largest_score_delta(&self) -> Option<(&str, f64)> {
        self.score_delta
            .iter()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .map(|(metric, delta)| (metric.as_str(), *delta))
    }

    /// Why the cell's failed sides were not measured, each reason once: `(None, reason)` when
    /// both sides stopped for the same reason (a failed build stops both), else
    /// `(Some(side), reason)` per failed side. The agent's leading "not measured: " is dropped;
    /// the report and console lines say it themselves.
    pub fn not_measured_reasons(&self) -> Vec<(Option<&'static str>, &str)> {
        let failed: Vec<(&'static str, &str)> =
            [("upstream", &self.upstream), ("fork", &self.fork)]
                .into_iter()
                .filter(|(_, side)| side.status == SideStatus::Unavailable)
                .map(|(name, side)| {
                    let reason = side.error.as_deref().unwrap_or("no reason recorded");
                    (
                        name,
                        reason.strip_prefix("not measured: ").unwrap_or(reason),
                    )
                })
                .collect();
        match failed.as_slice() {
            [(_, a), (_, b)] if a == b => vec![(None, *a)],
            _ => failed
                .into_iter()
                .map(|(name, reason)| (Some(name), reason))
                .collect(),
        }
    }

    /// A cell that stops the run from being carried out (exit 3): a side that should have
    /// been measured was not. A one-sided workload (the other tree does not have it:
    /// `absent`) whose running side failed is still `Unavailable` and reported with its
    /// reason, but does not count here: there was no A/B comparison to carry out, and the
    /// A/B surface is the workloads both trees have.
    pub fn is_unavailable(&self) -> bool {
        self.parity == CellParity::Unavailable
            && self.upstream.status != SideStatus::Absent
            && self.fork.status != SideStatus::Absent
    }
}

fn noise_flags(input: &CellInput, upstream: &SideResult, fork: &SideResult) -> Vec<NoiseFlag> {
    let mut flags = Vec::new();
    for (name, side) in [("upstream", upstream), ("fork", fork)] {
        if let Some(spread) = side.spread_pct.filter(|s| *s > NOISY_SPREAD_PCT) {
            flags.push(NoiseFlag {
                name: format!("{name}_spread_high"),
                value: format!("{spread:.1}%"),
                detail: format!(
                    "the {name} runs spread more than {NOISY_SPREAD_PCT}%: noise-dominated"
                ),
            });
        }
    }
    let [before, after] = input.load_avg_1min;
    if before > input.idle_cores {
        flags.push(NoiseFlag::number(
            "load_above_idle_cores",
            before,
            &format!(
                "the 1-minute load average exceeded the {} idle core(s) before the cell",
                input.idle_cores
            ),
        ));
    }
    if (after - before).abs() > 0.5_f64.max(before * 0.25) {
        flags.push(NoiseFlag::text(
            "load_changed",
            &format!("{before:.2} → {after:.2}"),
            "the load average moved during the cell",
        ));
    }
    flags.extend(input.host_flags.iter().cloned());
    flags
}

fn side_result(m: &SideMeasurement, load_avg_1min: [f64; 2]) -> SideResult {
    let median_time = stats::median(&m.times);
    let nframes = m.scores.as_ref().map(|s| s.frames.len() as u64);
    let median_fps = match (median_time, nframes) {
        (Some(t), Some(n)) if t > 0.0 => Some(n as f64 / t),
        _ => None,
    };
    SideResult {
        status: m.status,
        times: m.times.clone(),
        cpu_times: m.cpu_times.clone(),
        warmup_times: m.warmup_times.clone(),
        median_time,
        best_time: stats::best(&m.times),
        spread_pct: stats::spread_pct(&m.times),
        median_fps,
        nframes,
        load_avg_1min,
        pooled: m
            .scores
            .as_ref()
            .map(Scores::pooled_means)
            .unwrap_or_default(),
        returncode: m.returncode,
        error: m.error.clone(),
        stderr_tail: m.stderr_tail.clone(),
        scores: m.scores.clone(),
        command: m.command.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scores::FrameScores;

    fn spec() -> JobSpec {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        JobSpec::load(&dir.join("demo.toml")).unwrap()
    }

    fn ok(times: &[f64], metric: &str, value: f64) -> SideMeasurement {
        SideMeasurement {
            status: SideStatus::Ok,
            times: times.to_vec(),
            cpu_times: times.to_vec(),
            warmup_times: vec![times[0]],
            scores: Some(Scores {
                frames: vec![FrameScores {
                    frame_num: 0,
                    metrics: [(metric.to_string(), value)].into(),
                }],
                ..Scores::default()
            }),
            returncode: Some(0),
            error: None,
            stderr_tail: None,
            command: None,
        }
    }

    fn absent() -> SideMeasurement {
        SideMeasurement {
            status: SideStatus::Absent,
            returncode: Some(255),
            ..SideMeasurement::unavailable("rejected")
        }
    }

    fn evaluate(upstream: SideMeasurement, fork: SideMeasurement) -> CellResult {
        CellResult::evaluate(
            CellInput {
                index: 0,
                fixture: "f".into(),
                workload: "w".into(),
                upstream,
                fork,
                load_avg_1min: [0.5, 0.6],
                idle_cores: 1.0,
                host_flags: Vec::new(),
                seed: 7,
                run_order: Vec::new(),
                stop_reason: StopReason::NotAdaptive,
                overhead_seconds: None,
            },
            &spec(),
        )
    }

    #[test]
    fn a_cell_event_decodes_the_same_by_the_fast_path_and_the_general_one() {
        use crate::events::JobEventPayload;
        let cell = evaluate(
            ok(&[2.0, 2.2, 1.8], "m", 1.0),
            ok(&[1.0, 1.1, 0.9], "m", 0.25),
        );
        let payload = JobEventPayload::Cell(Box::new(cell));
        let compact = serde_json::to_string(&payload).unwrap();
        assert!(compact.starts_with(r#"{"kind":"cell","#), "{compact}");
        let pretty = serde_json::to_string_pretty(&payload).unwrap();
        assert_eq!(JobEventPayload::from_json(&compact).unwrap(), payload);
        assert_eq!(JobEventPayload::from_json(&pretty).unwrap(), payload);
        // Another kind, or a cell that does not decode, gets the general path's answer.
        let log = r#"{"kind":"log","level":"info","line":"hello"}"#;
        assert_eq!(
            JobEventPayload::from_json(log).unwrap(),
            serde_json::from_str::<JobEventPayload>(log).unwrap()
        );
        let broken = r#"{"kind":"cell","index":"zero"}"#;
        assert_eq!(
            JobEventPayload::from_json(broken).unwrap_err().to_string(),
            serde_json::from_str::<JobEventPayload>(broken)
                .unwrap_err()
                .to_string()
        );
    }

    #[test]
    fn speedup_is_the_ratio_of_medians_and_parity_is_checked() {
        let cell = evaluate(
            ok(&[2.0, 2.2, 1.8], "m", 1.0),
            ok(&[1.0, 1.1, 0.9], "m", 1.0),
        );
        assert_eq!(cell.speedup, Some(2.0));
        assert_eq!(cell.parity, CellParity::Ok);
        assert_eq!(cell.fork.median_fps, Some(1.0));
        assert!((cell.fork.spread_pct.unwrap() - 20.0).abs() < 1e-9);
        assert_eq!(cell.fork.load_avg_1min, [0.5, 0.6]);
        assert!(cell.startup_dominated, "1 s is under the demo's 2 s");
        let names: Vec<&str> = cell.noise_flags.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["upstream_spread_high", "fork_spread_high"],
            "20% spreads are noise"
        );
    }

    #[test]
    fn one_sided_workloads_are_marked_not_failed() {
        let fork_only = evaluate(absent(), ok(&[1.0, 1.0, 1.0], "m", 1.0));
        assert_eq!(fork_only.parity, CellParity::AbsentUpstream);
        assert_eq!(fork_only.speedup, None);
        let upstream_only = evaluate(ok(&[1.0, 1.0, 1.0], "m", 1.0), absent());
        assert_eq!(upstream_only.parity, CellParity::AbsentFork);
        assert!(!upstream_only.is_unavailable());
        let broken = evaluate(
            ok(&[1.0, 1.0, 1.0], "m", 1.0),
            SideMeasurement::unavailable("crashed"),
        );
        assert!(broken.is_unavailable());
        let fork_only_failed = evaluate(absent(), SideMeasurement::unavailable("no frames"));
        assert_eq!(fork_only_failed.parity, CellParity::Unavailable);
        assert_eq!(fork_only_failed.fork.status, SideStatus::Unavailable);
        assert!(
            !fork_only_failed.is_unavailable(),
            "a fork-only workload that failed is reported, not a run that was not carried out"
        );
    }

    #[test]
    fn a_speedup_bought_with_a_score_change_fails() {
        let cell = evaluate(
            ok(&[2.0, 2.0, 2.0], "m", 0.5),
            ok(&[1.0, 1.0, 1.0], "m", 0.5001),
        );
        assert_eq!(cell.parity, CellParity::Fail);
        assert_eq!(
            cell.speedup,
            Some(2.0),
            "the speedup is still reported, next to the failure"
        );
    }
}
